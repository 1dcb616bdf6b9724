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
//!   approval `PolicyDecision`; `modhost tools` and `modhost mcp` leave out what is
//!   denied, `modhost invoke` refuses it naming the rule.
//! - **Per caller only where the rules say so.** The registered verdict is
//!   the local user's ([`crate::Caller::local`]); while no rule names
//!   principals or scopes it is every caller's, and reading it is all a
//!   list or a call costs. When some rule does, a remote caller's verdicts
//!   are evaluated from the load's rules for it, on each list and call
//!   (`is_offered_to`, `policy_for`, `call_as`): a few glob matches per
//!   rule and tool, no discovery, so nothing is cached per caller.
//! - Nothing here knows about a CLI, a terminal or MCP; the surfaces
//!   (`cli::tools`, `cli::mcp`, `crate::mcp`) adapt [`ToolDef`]s and
//!   [`ToolOutcome`]s to their shapes.

use std::sync::Arc;

use serde_json::Value;

use crate::CallWorkspace;
use crate::caller::Caller;
use crate::home::HomeLayout;

mod call_error;
pub(crate) mod description;
pub(crate) mod execute;
// The provider formats: part of the library API (`export`), the MCP
// server's `tools/list` and `modhost tools --format`.
pub mod export;
pub(crate) mod host_invoker;
pub(crate) mod knowledge_tool;
pub(crate) mod live;
mod loaded;
mod registry;
pub(crate) mod spill;
pub mod target;
mod tool_def;
mod withdrawn;

pub use crate::approval::{ApprovedBy, CallPolicy, PolicyDecision, PolicyVerdict, Refusal};
pub use crate::lockdown::{CallLockdown, Lockdown};
pub use call_error::CallError;
pub use execute::{
    InvokeCall, InvokeFailure, Invoked, Invoker, MAX_TEXT_BYTES, Progress, ProgressSink,
    ToolArtifact, ToolOutcome,
};
pub use export::{Export, Format, Omission, export, mcp_tool};
pub use host_invoker::{HostInvoker, open_live_toolbox, open_toolbox};
pub use knowledge_tool::KNOWLEDGE_TOOL;
pub(crate) use loaded::Loaded;
pub use registry::gate;
pub use tool_def::ModuleEntry;
pub use tool_def::{Hints, ToolDef};

/// Registered tools plus what executing them needs: a fixed set
/// (`Toolbox::new`, in tests), or the host's, following the operator's changes while
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
    /// A toolbox of exactly these modules, never reloaded, whose calls go
    /// to `invoker` (a host's toolbox is [`open_toolbox`]'s).
    pub fn new(
        modules: Vec<ModuleEntry>,
        approval: &crate::approval::ApprovalConfig,
        overrides: &std::collections::BTreeMap<String, crate::overrides::CapabilityOverride>,
        lockdown: &crate::lockdown::LockdownConfig,
        invoker: I,
        home: HomeLayout,
        workspace: Option<std::path::PathBuf>,
    ) -> Self {
        let loaded = Loaded::new(
            modules, approval, overrides, lockdown, invoker, home, workspace,
        );
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

    /// The home whose modules these tools run (no reload changes it).
    pub fn home(&self) -> HomeLayout {
        self.live.last_loaded().home.clone()
    }

    /// Tool `name` as last loaded. It never waits for a reload, so an async
    /// caller (the MCP server deciding whether to ask the user) never runs
    /// discovery on its own thread; the call that follows reloads on the
    /// blocking pool and its gate decides with the policy then current.
    pub fn get(&self, name: &str) -> Option<ToolDef> {
        self.live.last_loaded().get(name).cloned()
    }

    /// The approval verdict of tool `name` as last loaded: what
    /// [`Toolbox::get`] says of it, without copying the tool (its schemas
    /// and descriptions) on every call.
    pub fn approval_of(&self, name: &str) -> Option<crate::approval::PolicyDecision> {
        self.live
            .last_loaded()
            .get(name)
            .map(|tool| tool.approval.clone())
    }

    /// The policy of a call of tool `name` by the local user as last
    /// loaded, on a connection in `lockdown` or not: its verdict, the
    /// question an approval asks (naming the hosts the call connects to),
    /// and whether only a person may answer it (`crate::lockdown`). Like
    /// [`Toolbox::get`], it never waits for a reload.
    pub fn policy_of(
        &self,
        name: &str,
        lockdown: Option<&crate::lockdown::Lockdown>,
    ) -> Option<crate::approval::CallPolicy> {
        self.policy_for(Caller::the_local_user(), name, lockdown)
    }

    /// The lockdown a connection enters once words of a call of tool
    /// `name` reached it: its result, a failure it ran into, or a progress
    /// message it sent on the way (`crate::lockdown`); `None` for a tool
    /// whose output is trusted, an unknown tool, or with lockdown off.
    pub fn taint_of(&self, name: &str) -> Option<crate::lockdown::Lockdown> {
        let loaded = self.live.last_loaded();
        loaded.taint_of(loaded.get(name)?)
    }

    /// Record a call of a tool of this toolbox that its caller refused
    /// before calling it (an MCP server's own bounds, a user's no), as the
    /// toolbox records the refusals of its own gate: in the host's audit
    /// log, with the module and capability of the tool.
    pub fn record_refusal(&self, call: &crate::audit::RefusedCall<'_>) {
        self.live.last_loaded().record_refusal(call);
    }

    /// [`Toolbox::record_refusal`] of a call `caller` made: the record
    /// names its principal (the local user's is named by the host).
    pub fn record_refusal_for(&self, caller: &Caller, call: &crate::audit::RefusedCall<'_>) {
        let call = crate::audit::RefusedCall {
            principal: caller.principal_unless_local(),
            ..call.clone()
        };
        self.record_refusal(&call);
    }

    /// Whether one more approval question about a call of the local user
    /// may be asked now (`[quotas] elicitations_per_minute`), counting it
    /// when it may.
    pub fn admit_question(&self) -> Result<(), crate::quota::RateLimited> {
        self.admit_question_from(Caller::the_local_user())
    }

    /// Whether `tool` is offered to `caller` (`tools/list`): not denied to
    /// it by the rules that apply to it (a rule naming principals or
    /// scopes applies only to the callers it names). For the local user,
    /// and for every caller while no rule names callers, that is
    /// [`ToolDef::is_offered`]; else the rules are evaluated for `caller`
    /// (nothing is discovered or run). The knowledge tool is offered only
    /// with some module whose tools `caller` is offered.
    pub fn is_offered_to(&self, tool: &ToolDef, caller: &Caller) -> bool {
        self.live.last_loaded().offers(tool, caller)
    }

    /// `tool` (one [`Toolbox::is_offered_to`] `caller`) as `caller` is
    /// shown it in `tools/list`: the knowledge tool's `module` enum lists
    /// only the modules whose guides `caller` may read, so the list never
    /// names a module the operator hid from it; every other tool, and the
    /// knowledge tool for the local user, is the registered definition.
    pub fn as_offered_to<'a>(
        &self,
        tool: &'a ToolDef,
        caller: &Caller,
    ) -> std::borrow::Cow<'a, ToolDef> {
        match self.live.last_loaded().narrowed_for(tool, caller) {
            Some(narrowed) => std::borrow::Cow::Owned(narrowed),
            None => std::borrow::Cow::Borrowed(tool),
        }
    }

    /// [`Toolbox::policy_of`] for one call by `caller`: the rules that
    /// apply to `caller` decide (a rule naming principals or scopes applies
    /// only to the callers it names).
    pub fn policy_for(
        &self,
        caller: &Caller,
        name: &str,
        lockdown: Option<&crate::lockdown::Lockdown>,
    ) -> Option<crate::approval::CallPolicy> {
        let loaded = self.live.last_loaded();
        let tool = loaded.get(name)?;
        let locked = loaded.call_lockdown(tool, lockdown);
        Some(loaded.policy(tool, caller, locked.as_ref()))
    }

    /// Whether one more approval question about a call of `caller` may be
    /// asked now, counting it when it may: `[quotas]
    /// elicitations_per_minute` is per principal, so a caller that asks in
    /// a loop spends its own budget and never another's.
    pub fn admit_question_from(&self, caller: &Caller) -> Result<(), crate::quota::RateLimited> {
        self.live
            .last_loaded()
            .invoker
            .admit_question(caller.principal_unless_local())
    }

    /// [`Toolbox::call_in`] made for `caller`: the rules that apply to it
    /// decide the approval, and its principal is in the call (so in its
    /// audit record and counted by `[quotas]`) and in every refusal
    /// recorded. A tool hidden from a remote caller (not
    /// [`Toolbox::is_offered_to`] it) is refused as a tool that does not
    /// exist ([`CallError::UnknownTool`]), its audit record naming the
    /// deny rule; the local user, the operator, is told the rule.
    #[allow(clippy::too_many_arguments)] // one call's every part, passed on whole
    pub async fn call_as(
        &self,
        caller: &Caller,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&crate::lockdown::Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        let (loaded, glance) = match live::Live::current_for_call(&self.live).await {
            Ok(current) => current,
            Err(unreadable) => return Ok(ToolOutcome::failure(unreadable)),
        };
        loaded
            .call_in(
                caller, name, input, approver, progress, workspace, glance, lockdown,
            )
            .await
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
        self.call_in(name, input, approver, progress, &CallWorkspace::Host, None)
            .await
    }

    /// [`Toolbox::call`] in `workspace` (an MCP client's root, or none when
    /// its roots may not be granted) rather than always the host's, on a
    /// connection in `lockdown` or not (`crate::lockdown`): a caller that
    /// keeps connections passes the [`ToolOutcome::enters_lockdown`] of
    /// the first result that had one to every later call of it. The call
    /// is the local user's ([`Toolbox::call_as`] names another caller).
    pub async fn call_in(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&crate::lockdown::Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        let local = Caller::the_local_user();
        self.call_as(local, name, input, approver, progress, workspace, lockdown)
            .await
    }
}

#[cfg(test)]
mod principal_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
pub(crate) mod tests;
