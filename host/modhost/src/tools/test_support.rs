//! Fixtures the toolbox's tests share: a module from capability JSON, and
//! an invoker that records its calls.

use std::sync::Arc;

use modproto::Descriptor;
use serde_json::{Value, json};

use super::{InvokeCall, InvokeFailure, Invoker, ModuleEntry};
use crate::discovery::{InstalledModule, ModuleStatus};
use modhost_runner::Transport;

pub(crate) fn module(id: &str, caps: &Value) -> ModuleEntry {
    let d: Descriptor = serde_json::from_value(json!({
        "id": id, "version": "1.0.0",
        "roots": [{"name": "workspace", "kind": "workspace"}, {"name": "artifacts", "kind": "artifacts"}],
        "capabilities": caps
    }))
    .unwrap();
    ModuleEntry {
        descriptor: Arc::new(d),
        dir: None,
    }
}

/// A module as discovery finds it: enabled, native, described with
/// `capabilities` (ids), installed at `/m/<id>`.
pub(crate) fn installed(id: &str, capabilities: &[&str]) -> InstalledModule {
    let caps: Vec<_> = capabilities
        .iter()
        .map(|c| json!({"id": c, "description": "d", "input_schema": {"type": "object"}}))
        .collect();
    let descriptor: modproto::Descriptor =
        serde_json::from_value(json!({"id": id, "version": "1.0.0", "capabilities": caps}))
            .unwrap();
    InstalledModule {
        id: id.to_owned(),
        version: Some("1.0.0".into()),
        path: format!("/m/{id}").into(),
        program: format!("/m/{id}").into(),
        folder: None,
        transport: Transport::Native,
        status: ModuleStatus::Enabled,
        disabled: false,
        descriptor: Some(Arc::new(descriptor)),
        digest: None,
        tree: None,
        program_identity: None,
        warnings: Vec::new(),
        host_warnings: Vec::new(),
        error: None,
        contract: crate::contract::ContractStanding::Unevaluated,
        pin: None,
    }
}

/// Records each call it is given and answers with the input (or with
/// `fail_with`, when set), and each refusal it is told of.
#[derive(Debug, Default)]
pub(crate) struct RecordingInvoker {
    pub(crate) calls: std::sync::Mutex<Vec<InvokeCall>>,
    pub(crate) fail_with: std::sync::Mutex<Option<InvokeFailure>>,
    pub(crate) refusals: std::sync::Mutex<Vec<Refused>>,
}

/// A refusal as the toolbox reported it to its invoker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) tool: String,
    pub(crate) kind: String,
    pub(crate) rule: Option<String>,
    pub(crate) principal: Option<String>,
}

impl Invoker for RecordingInvoker {
    fn refused(&self, call: &crate::audit::RefusedCall<'_>) {
        self.refusals.lock().unwrap().push(Refused {
            tool: call.tool.to_owned(),
            kind: call.kind.to_string(),
            rule: call.rule.map(str::to_owned),
            principal: call.principal.map(str::to_owned),
        });
    }

    async fn invoke(&self, call: InvokeCall) -> Result<super::Invoked, InvokeFailure> {
        let output = call.input.clone();
        self.calls.lock().unwrap().push(call);
        if let Some(failure) = self.fail_with.lock().unwrap().clone() {
            return Err(failure);
        }
        Ok(modproto::InvokeResult::new(output).into())
    }
}
