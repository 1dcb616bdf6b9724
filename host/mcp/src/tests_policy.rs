//! The host's approval policy as the MCP server applies it: a denied tool
//! is never listed or run, an `ask` tool is listed and runs only once the
//! user (or, delegated, the client) approved the call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use modhost::HomeLayout;
use modhost::approval::ApprovalConfig;
use modhost::tools::{InvokeCall, InvokeFailure, Invoker, ModuleEntry, Toolbox};
use serde_json::{Value, json};

use crate::{Backend, ToolboxBackend};
use modhost::CallWorkspace;

/// Records each call it is given and answers with the input.
#[derive(Debug, Default)]
struct RecordingInvoker {
    calls: Arc<Mutex<Vec<InvokeCall>>>,
}

impl Invoker for RecordingInvoker {
    async fn invoke(&self, call: InvokeCall) -> Result<modproto::InvokeResult, InvokeFailure> {
        let output = call.input.clone();
        self.calls.lock().unwrap().push(call);
        Ok(modproto::InvokeResult::new(output))
    }
}

fn cap(id: &str, effects: &Value) -> Value {
    json!({"id": id, "description": format!("does {id}"),
           "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
           "effects": effects})
}

/// A toolbox of one `web` module (a network tool, a plain one, one that
/// writes the workspace) under the `[approval]` of `approval_toml`, with
/// the calls its invoker records.
fn toolbox(
    approval_toml: &str,
) -> (
    tempfile::TempDir,
    Toolbox<RecordingInvoker>,
    Arc<Mutex<Vec<InvokeCall>>>,
) {
    #[derive(serde::Deserialize)]
    struct Wrapper {
        #[serde(default)]
        approval: ApprovalConfig,
    }
    let approval = toml::from_str::<Wrapper>(approval_toml).unwrap().approval;
    let descriptor: modproto::Descriptor = serde_json::from_value(json!({
        "id": "web", "version": "1.0.0",
        "roots": [{"name": "workspace", "kind": "workspace"}, {"name": "artifacts", "kind": "artifacts"}],
        "capabilities": [
            cap("web.get", &json!({"network": true})),
            cap("web.cached", &json!({})),
            cap("web.purge", &json!({"writes": ["workspace"]}))
        ]
    }))
    .unwrap();
    let module = ModuleEntry {
        descriptor: Arc::new(descriptor),
        dir: None,
    };
    let home = tempfile::tempdir().unwrap();
    let invoker = RecordingInvoker::default();
    let calls = Arc::clone(&invoker.calls);
    let toolbox = Toolbox::new(
        vec![module],
        &approval,
        &BTreeMap::new(),
        invoker,
        HomeLayout::new(home.path()),
        None,
    );
    (home, toolbox, calls)
}

#[tokio::test]
async fn mcp_lists_ask_but_never_deny_and_runs_ask_only_approved() {
    let names = |b: &dyn Fn() -> Vec<Value>| -> Vec<String> {
        b().iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let deny = "[[approval.rules]]\ncapability = \"web.purge\"\ndecision = \"deny\"\n";
    let (_h1, tb, calls) = toolbox(deny);
    let plain = ToolboxBackend {
        toolbox: tb,
        delegate_approval: false,
    };
    assert_eq!(
        names(&|| plain.list_tools()),
        ["web__web_get", "web__web_cached"]
    );
    assert!(plain.approval_rule("web__web_get").is_some());
    assert!(plain.approval_rule("web__web_cached").is_none());
    assert!(
        plain
            .call_tool("web__web_get", json!({}), None)
            .await
            .is_err(),
        "not approved, not run"
    );
    let approved = plain
        .call_tool_approved("web__web_get", json!({}), None, &CallWorkspace::Host)
        .await
        .expect("approved by the user");
    assert!(!approved.is_error);
    assert_eq!(
        calls.lock().unwrap()[0]
            .approval
            .as_ref()
            .map(|a| a.by.as_str()),
        Some("user")
    );
    assert!(
        plain
            .call_tool_approved("web__web_purge", json!({}), None, &CallWorkspace::Host)
            .await
            .is_err(),
        "a user cannot approve what the operator denied"
    );
    let (_h2, tb, _) = toolbox(deny);
    let delegated = ToolboxBackend {
        toolbox: tb,
        delegate_approval: true,
    };
    assert_eq!(
        names(&|| delegated.list_tools()),
        names(&|| plain.list_tools())
    );
    assert!(delegated.approval_rule("web__web_get").is_none());
    assert!(
        delegated
            .call_tool("web__web_purge", json!({}), None)
            .await
            .is_err()
    );
    assert!(
        delegated
            .call_tool("web__web_get", json!({}), None)
            .await
            .is_ok()
    );
}
