//! The tool adapter: every enabled capability becomes one agent tool.
//!
//! Design decisions:
//!
//! - **One tool per capability**, not per module: the agent picks by what it
//!   wants done, and each capability carries its own schema and effects, which
//!   is what makes per-capability approval possible.
//! - **The name is [`modconform::tool_name`]**, the one function the
//!   conformance kit also checks, so `modhost invoke`, `modhost tools` and
//!   `modhost mcp` agree byte for byte. Names that still collide after
//!   mangling are refused at registration, both of them, with a problem
//!   naming both: a name that depended on which module was registered first
//!   would not be stable.
//! - **Parameters are the module's input schema, unchanged**: the module owns
//!   its domain; a host translation would be a second source of truth.
//! - **Policy is decided here, applied at the surface.** Every tool carries its
//!   approval `Decision`; `modhost tools` and `modhost mcp` leave out what is
//!   denied, `modhost invoke` refuses it naming the rule.
//! - Nothing here knows about a CLI, a terminal or MCP; the surfaces
//!   (`cli::tools`, `cli::mcp`, [`crate::mcp`]) adapt [`ToolDef`]s and
//!   [`ToolOutcome`]s to their shapes.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use modproto::{Descriptor, Effects};
use serde::Serialize;
use serde_json::Value;

use crate::approval::{self, ApprovalConfig, ApprovedBy, Decision, Refusal, Verdict};
use crate::grants;
use crate::home::HomeLayout;
use crate::overrides::{self, CapabilityOverride};

pub(crate) mod description;
pub(crate) mod execute;
// The provider formats: the MCP server uses the MCP one, the rest are for
// `modhost tools --format`.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) mod export;
pub(crate) mod host_invoker;
pub(crate) mod knowledge_tool;
pub(crate) mod live;
pub(crate) mod spill;
#[cfg(feature = "cli")]
pub(crate) mod target;

pub use execute::{
    InvokeCall, InvokeFailure, Invoker, MAX_TEXT_BYTES, Progress, ProgressSink, ToolArtifact,
    ToolOutcome,
};
pub use host_invoker::{HostInvoker, open_live_toolbox, open_toolbox, tool_modules};
pub use knowledge_tool::KNOWLEDGE_TOOL;

/// One agent tool: what every export format is rendered from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub module: String,
    pub capability: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The capability's (or the operator's) description, then the effect summary.
    pub description: String,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub effects: Effects,
    pub hints: Hints,
    pub approval: Decision,
}

/// What a client may assume about a tool (MCP's tool annotations), derived
/// from the capability's `grants::Authority` (what each call is granted)
/// and its declared network use, never from hints a module states itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Hints {
    /// Granted no writable root and no program, no network.
    pub read_only: bool,
    /// Granted a writable root besides its own artifacts: state and
    /// workspace writes change what was there.
    pub destructive: bool,
    /// Only vouched for when read-only: the one case the host can tell.
    pub idempotent: bool,
    /// Reaches the network.
    pub open_world: bool,
}

impl Hints {
    pub fn derive(descriptor: &Descriptor, effects: &Effects) -> Self {
        let authority = grants::authority(descriptor, effects);
        let read_only = authority.touches_nothing_but_reads() && !effects.network;
        let destructive = authority
            .writable()
            .any(|root| root.kind != modproto::RootKind::Artifacts);
        Hints {
            read_only,
            destructive: !read_only && destructive,
            idempotent: read_only,
            open_world: effects.network,
        }
    }
}

impl ToolDef {
    /// Whether a tool list (`modhost tools`, the MCP server's `tools/list`)
    /// offers this tool: deny never; ask too, so the user learns it exists
    /// (the MCP server asks the user through the client before each call,
    /// or says how to allow it; `modhost tools` leaves it to whoever pastes
    /// the definitions).
    pub fn is_offered(&self) -> bool {
        self.approval.verdict != Verdict::Deny
    }
}

/// A module the host may act on: described, enabled, its contract accepted.
#[derive(Debug, Clone)]
pub struct ModuleEntry {
    pub descriptor: Arc<Descriptor>,
    /// The module's own folder (knowledge lives there); `None` for a bare executable.
    pub dir: Option<PathBuf>,
}

/// The tools of a set of modules, and what was refused while building them.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub tools: Vec<ToolDef>,
    /// Tools left out, one line each (name collisions).
    pub problems: Vec<String>,
}

/// Build one tool per enabled capability of `modules`, plus the knowledge
/// tool when some module ships knowledge.
pub fn build_registry(
    modules: &[ModuleEntry],
    approval: &ApprovalConfig,
    overrides: &BTreeMap<String, CapabilityOverride>,
) -> Registry {
    let mut candidates = vec![knowledge_tool::definition(modules)];
    for module in modules {
        let d = &module.descriptor;
        for c in &d.capabilities {
            let found = overrides::find_override(overrides, &d.id, &c.id);
            if found.is_some_and(|o| !o.is_enabled()) {
                continue;
            }
            let name = modconform::tool_name(&d.id, &c.id);
            let base = found
                .and_then(|o| o.description.as_deref())
                .unwrap_or(&c.description);
            candidates.push(ToolDef {
                description: description::tool_description(base, d, &c.effects),
                approval: approval::decide(approval, d, c, &name),
                name,
                module: d.id.clone(),
                capability: c.id.clone(),
                title: c.title.clone(),
                input_schema: c.input_schema.clone(),
                output_schema: c.output_schema.clone(),
                effects: c.effects.clone(),
                hints: Hints::derive(d, &c.effects),
            });
        }
    }
    let mut registry = refuse_collisions(candidates);
    if !knowledge_tool::is_offered(modules) {
        registry
            .tools
            .retain(|t| !(t.name == KNOWLEDGE_TOOL && t.module == "modhost"));
    }
    registry
}

/// Keep the tools whose names are unique; report every clash naming both sides.
fn refuse_collisions(candidates: Vec<ToolDef>) -> Registry {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in candidates.iter().enumerate() {
        by_name.entry(&t.name).or_default().push(i);
    }
    let mut problems = Vec::new();
    let mut refused = vec![false; candidates.len()];
    for (i, t) in candidates.iter().enumerate() {
        let clash = &by_name[t.name.as_str()];
        if clash.len() > 1 && clash[0] == i {
            let who: Vec<String> = clash
                .iter()
                .map(|&j| {
                    format!(
                        "{} of module {}",
                        candidates[j].capability, candidates[j].module
                    )
                })
                .collect();
            problems.push(format!(
                "tool name {} is claimed by {}; none of them is offered until the ids differ in more than punctuation",
                t.name,
                who.join(" and ")
            ));
            for &j in clash {
                refused[j] = true;
            }
        }
    }
    let tools = candidates
        .into_iter()
        .zip(refused)
        .filter(|(_, r)| !r)
        .map(|(t, _)| t)
        .collect();
    Registry { tools, problems }
}

/// The policy gate for one direct call of `capability` (what `modhost
/// invoke` applies; the [`Toolbox`] applies the same decisions to its
/// registered tools): an override that disables the capability refuses it,
/// then the approval rules decide. On success, the host's approval record
/// the request must carry, if any.
pub fn gate(
    approval: &ApprovalConfig,
    overrides: &BTreeMap<String, CapabilityOverride>,
    descriptor: &Descriptor,
    capability: &modproto::Capability,
    approver: Option<ApprovedBy>,
) -> Result<Option<modproto::Approval>, Refusal> {
    let tool = modconform::tool_name(&descriptor.id, &capability.id);
    if let Some((key, o)) =
        overrides::find_override_entry(overrides, &descriptor.id, &capability.id)
        && !o.is_enabled()
    {
        return Err(Refusal::Disabled {
            tool,
            key: key.to_owned(),
        });
    }
    let decision = approval::decide(approval, descriptor, capability, &tool);
    approval::authorize(&decision, &tool, approver)
}

/// Why a tool call did not run at all (as opposed to ran and failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no tool named {0:?}; `modhost tools` lists them")]
    UnknownTool(String),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// Registered tools plus what executing them needs: a fixed set
/// ([`Toolbox::new`]), or the host's, following the operator's changes while
/// it runs ([`open_live_toolbox`], see `live`).
#[derive(Debug)]
pub struct Toolbox<I> {
    live: Arc<live::Live<I>>,
}

/// The tools of a toolbox at one moment (a reload does not change a list
/// already taken).
#[derive(Debug)]
pub struct Tools<I>(Arc<Loaded<I>>);

impl<I> std::ops::Deref for Tools<I> {
    type Target = [ToolDef];
    fn deref(&self) -> &[ToolDef] {
        &self.0.registry.tools
    }
}

impl<I: Invoker> Toolbox<I> {
    /// A toolbox of exactly these modules, never reloaded.
    pub fn new(
        modules: Vec<ModuleEntry>,
        approval: &ApprovalConfig,
        overrides: &BTreeMap<String, CapabilityOverride>,
        invoker: I,
        home: HomeLayout,
        workspace: Option<PathBuf>,
    ) -> Self {
        let loaded = Loaded::new(modules, approval, overrides, invoker, home, workspace);
        Toolbox {
            live: Arc::new(live::Live::fixed(loaded)),
        }
    }

    /// Every registered tool, whatever its approval verdict.
    pub fn tools(&self) -> Tools<I> {
        Tools(self.live.current())
    }

    /// Tools left out at registration, one line each.
    pub fn problems(&self) -> Vec<String> {
        self.live.current().registry.problems.clone()
    }

    /// The home whose modules these tools run.
    pub fn home(&self) -> HomeLayout {
        self.live.current().home.clone()
    }

    pub fn get(&self, name: &str) -> Option<ToolDef> {
        self.live.current().get(name).cloned()
    }

    /// Bumped whenever the tool list changed; `None` for a fixed toolbox.
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.live.changes()
    }

    /// Run tool `name`. `approver` is who can answer an `ask` for this call,
    /// if anyone; a deny is refused whoever asks.
    pub async fn call(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
    ) -> Result<ToolOutcome, CallError> {
        self.call_in(name, input, approver, progress, None).await
    }

    /// [`Toolbox::call`] with `workspace` instead of the host's (an MCP
    /// client's root; `None` is the host's).
    pub async fn call_in(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: Option<&Path>,
    ) -> Result<ToolOutcome, CallError> {
        let loaded = match live::Live::current_for_call(&self.live).await {
            Ok(loaded) => loaded,
            Err(unreadable) => return Ok(ToolOutcome::failure(unreadable)),
        };
        loaded
            .call_in(name, input, approver, progress, workspace)
            .await
    }
}

/// One load of a toolbox: the registry and what executing its tools needs.
#[derive(Debug)]
pub(crate) struct Loaded<I> {
    registry: Registry,
    index: HashMap<String, usize>,
    modules: BTreeMap<String, ModuleEntry>,
    invoker: I,
    home: HomeLayout,
    workspace: Option<PathBuf>,
    /// Tools an earlier load offered that are gone now, with why: a client
    /// that calls one is told the reason, not "no such tool".
    withdrawn: HashMap<String, live::Withdrawn>,
}

impl<I: Invoker> Loaded<I> {
    pub(crate) fn new(
        modules: Vec<ModuleEntry>,
        approval: &ApprovalConfig,
        overrides: &BTreeMap<String, CapabilityOverride>,
        invoker: I,
        home: HomeLayout,
        workspace: Option<PathBuf>,
    ) -> Self {
        let registry = build_registry(&modules, approval, overrides);
        let index = registry
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let modules = modules
            .into_iter()
            .map(|m| (m.descriptor.id.clone(), m))
            .collect();
        Loaded {
            registry,
            index,
            modules,
            invoker,
            home,
            workspace,
            withdrawn: HashMap::new(),
        }
    }

    fn get(&self, name: &str) -> Option<&ToolDef> {
        self.index.get(name).map(|&i| &self.registry.tools[i])
    }

    async fn call_in(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: Option<&Path>,
    ) -> Result<ToolOutcome, CallError> {
        let Some(tool) = self.get(name) else {
            return match self.withdrawn.get(name) {
                Some(withdrawn) => withdrawn.answer(),
                None => Err(CallError::UnknownTool(name.to_owned())),
            };
        };
        let record = approval::authorize(&tool.approval, &tool.name, approver)?;
        if tool.name == KNOWLEDGE_TOOL && tool.module == "modhost" {
            return Ok(knowledge_tool::run(&self.modules, &input));
        }
        let module = &self.modules[&tool.module];
        let call = InvokeCall {
            module: tool.module.clone(),
            capability: tool.capability.clone(),
            input,
            approval: record,
            start_ahead: tool.approval.allows_starting_ahead(),
            progress,
            workspace: workspace.map(Path::to_path_buf),
        };
        let result = self.invoker.invoke(call).await;
        let roots = execute::RootPaths {
            descriptor: &module.descriptor,
            home: &self.home,
            workspace: workspace.or(self.workspace.as_deref()),
        };
        Ok(execute::outcome(tool, result, &roots))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

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

    fn cap(id: &str, effects: &Value) -> Value {
        json!({"id": id, "description": format!("does {id}"),
               "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
               "effects": effects})
    }

    #[test]
    fn one_tool_per_capability_with_schema_unchanged_and_effects_described() {
        let m = module(
            "files",
            &json!([cap("files.search", &json!({"reads": ["workspace"]}))]),
        );
        let r = build_registry(&[m], &ApprovalConfig::default(), &BTreeMap::new());
        assert!(r.problems.is_empty());
        let names: Vec<&str> = r.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["files__files_search"], "no module ships knowledge");
        let t = &r.tools[0];
        assert_eq!(
            t.input_schema,
            json!({"type": "object", "properties": {"q": {"type": "string"}}})
        );
        assert!(
            t.description
                .starts_with("does files.search\n\nEffects:\n- reads the workspace")
        );
        assert_eq!(t.approval.verdict, Verdict::Allow);
    }

    #[test]
    fn overrides_disable_and_redescribe() {
        let m = module(
            "files",
            &json!([
                cap("files.search", &json!({})),
                cap("files.delete", &json!({"writes": ["workspace"]}))
            ]),
        );
        let mut o = BTreeMap::new();
        o.insert(
            "files.files.search".to_owned(),
            CapabilityOverride {
                enabled: None,
                description: Some("Operator words.".into()),
            },
        );
        o.insert(
            "files__files_delete".to_owned(),
            CapabilityOverride {
                enabled: Some(false),
                description: None,
            },
        );
        let r = build_registry(&[m], &ApprovalConfig::default(), &o);
        assert_eq!(r.tools.len(), 1);
        assert!(
            r.tools[0]
                .description
                .starts_with("Operator words.\n\nEffects:")
        );
    }

    #[test]
    fn colliding_names_are_both_refused_and_named() {
        let a = module(
            "m",
            &json!([
                cap("a.b", &json!({})),
                cap("a-b", &json!({})),
                cap("ok", &json!({}))
            ]),
        );
        let r = build_registry(&[a], &ApprovalConfig::default(), &BTreeMap::new());
        assert_eq!(
            r.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["m__ok"]
        );
        assert_eq!(r.problems.len(), 1);
        assert!(
            r.problems[0].contains("a.b of module m and a-b of module m"),
            "{}",
            r.problems[0]
        );
        // A module cannot take over the built-in knowledge tool's name either.
        let evil = module("modhost", &json!([cap("knowledge", &json!({}))]));
        let r = build_registry(&[evil], &ApprovalConfig::default(), &BTreeMap::new());
        assert!(r.tools.is_empty());
        assert!(r.problems[0].contains("knowledge of module modhost"));
    }

    #[test]
    fn the_knowledge_tool_is_listed_only_when_some_module_ships_knowledge() {
        let plain = module("files", &json!([cap("files.search", &json!({}))]));
        let r = build_registry(
            std::slice::from_ref(&plain),
            &ApprovalConfig::default(),
            &BTreeMap::new(),
        );
        assert!(r.tools.iter().all(|t| t.name != KNOWLEDGE_TOOL));
        let mut d = (*plain.descriptor).clone();
        d.knowledge = serde_json::from_value(json!({"overlays": [
            {"id": "guide", "path": "guide.md", "sha256": "0".repeat(64)}
        ]}))
        .unwrap();
        let guided = ModuleEntry {
            descriptor: Arc::new(d),
            dir: None,
        };
        let r = build_registry(&[guided], &ApprovalConfig::default(), &BTreeMap::new());
        assert_eq!(r.tools[0].name, KNOWLEDGE_TOOL);
        assert_eq!(
            r.tools[0].input_schema["properties"]["module"]["enum"],
            json!(["files"])
        );
    }

    #[test]
    fn ask_is_offered_and_deny_is_not() {
        let m = module("net", &json!([cap("net.get", &json!({"network": true}))]));
        let r = build_registry(
            std::slice::from_ref(&m),
            &ApprovalConfig::default(),
            &BTreeMap::new(),
        );
        let t = &r.tools[0];
        assert_eq!(t.approval.verdict, Verdict::Ask);
        assert!(t.is_offered());
        let deny: ApprovalConfig =
            toml::from_str("[[rules]]\neffect = \"network\"\ndecision = \"deny\"\n").unwrap();
        let r = build_registry(&[m], &deny, &BTreeMap::new());
        assert!(!r.tools[0].is_offered());
    }

    /// Records each call it is given and answers with the input.
    #[derive(Debug, Default)]
    pub(crate) struct RecordingInvoker {
        pub(crate) calls: std::sync::Mutex<Vec<InvokeCall>>,
    }

    impl Invoker for RecordingInvoker {
        async fn invoke(&self, call: InvokeCall) -> Result<modproto::InvokeResult, InvokeFailure> {
            let output = call.input.clone();
            self.calls.lock().unwrap().push(call);
            Ok(modproto::InvokeResult::new(output))
        }
    }

    pub(crate) fn toolbox(approval_toml: &str) -> (tempfile::TempDir, Toolbox<RecordingInvoker>) {
        #[derive(serde::Deserialize)]
        struct Wrapper {
            #[serde(default)]
            approval: ApprovalConfig,
        }
        let approval = toml::from_str::<Wrapper>(approval_toml).unwrap().approval;
        let m = module(
            "web",
            &json!([
                cap("web.get", &json!({"network": true})),
                cap("web.cached", &json!({})),
                cap("web.purge", &json!({"writes": ["workspace"]}))
            ]),
        );
        let home = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(home.path());
        let tb = Toolbox::new(
            vec![m],
            &approval,
            &BTreeMap::new(),
            RecordingInvoker::default(),
            layout,
            None,
        );
        (home, tb)
    }

    #[tokio::test]
    async fn the_gate_refuses_deny_and_unapproved_ask_and_records_approval() {
        let (_home, tb) = toolbox(
            "[[approval.rules]]\nname = \"no purge\"\ncapability = \"web.purge\"\ndecision = \"deny\"\n",
        );
        let err = tb
            .call("web__web_purge", json!({}), Some(ApprovedBy::Flag), None)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "web__web_purge is denied by rule \"no purge\""
        );
        let err = tb
            .call("web__web_get", json!({}), None, None)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            CallError::Refused(Refusal::NeedsApproval { .. })
        ));
        assert!(
            tb.live.current().invoker.calls.lock().unwrap().is_empty(),
            "nothing refused reached the module"
        );
        let out = tb
            .call(
                "web__web_get",
                json!({"u": 1}),
                Some(ApprovedBy::Client),
                None,
            )
            .await
            .unwrap();
        assert_eq!(out.structured, Some(json!({"u": 1})));
        tb.call("web__web_cached", json!({}), None, None)
            .await
            .unwrap();
        {
            let loaded = tb.live.current();
            let calls = loaded.invoker.calls.lock().unwrap();
            assert_eq!(calls[0].capability, "web.get");
            let approval = calls[0].approval.as_ref().expect("a record");
            assert_eq!(approval.by, "client");
            assert_eq!(
                approval.rule.as_deref(),
                Some("default: reaches the network")
            );
            assert!(calls[1].approval.is_none(), "the default needs no record");
        }
        assert!(matches!(
            tb.call("nope", json!({}), None, None).await,
            Err(CallError::UnknownTool(_))
        ));
    }

    #[tokio::test]
    async fn mcp_lists_ask_but_never_deny_and_runs_ask_only_approved() {
        use crate::mcp::{Backend, ToolboxBackend};
        let names = |b: &dyn Fn() -> Vec<Value>| -> Vec<String> {
            b().iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let deny = "[[approval.rules]]\ncapability = \"web.purge\"\ndecision = \"deny\"\n";
        let (_h1, tb) = toolbox(deny);
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
            .call_tool_approved("web__web_get", json!({}), None, None)
            .await
            .expect("approved by the user");
        assert!(!approved.is_error);
        assert_eq!(
            plain.toolbox.live.current().invoker.calls.lock().unwrap()[0]
                .approval
                .as_ref()
                .map(|a| a.by.as_str()),
            Some("user")
        );
        assert!(
            plain
                .call_tool_approved("web__web_purge", json!({}), None, None)
                .await
                .is_err(),
            "a user cannot approve what the operator denied"
        );
        let (_h2, tb) = toolbox(deny);
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
}
