//! What the server needs from the host: the tool list and a way to call
//! one. The server loop is written against this trait alone; the host's
//! toolbox implements it in `mod.rs`, the tests with fakes.

use serde_json::Value;

use modhost::tools::{CallError, Lockdown, ProgressSink, ToolOutcome};
use modhost::{CallWorkspace, Caller};

/// Why a call waits for the user's yes, asked through the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAsk {
    /// What asks, as the question says it: the rule (or default, or the
    /// lockdown) and where the call connects.
    pub rule: String,
    /// The connection's lockdown asks it (`modhost::lockdown`): only the
    /// user's yes runs it, never a line of `config.toml` or a client with
    /// delegated approval.
    pub lockdown: bool,
}

/// What the server needs from the host: the tool list and a way to call one.
///
/// Every request is served for a [`Caller`]: the local user on stdio, the
/// authenticated principal over HTTP. The server calls only the `*_for`,
/// `*_from` and `*_as` methods, which take it; by default they ignore it
/// and use the caller-blind methods, so a backend with one view of its
/// tools (the tests' fakes) implements only those.
pub trait Backend: Send + Sync + 'static {
    /// MCP `Tool` objects, already filtered by policy.
    fn list_tools(&self) -> Vec<Value>;

    /// Run one tool. Dropping the future must stop the call.
    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send;

    /// [`Backend::call_tool`] in `workspace`: the client's first usable root,
    /// none when it named roots and none may be granted, the host's when it
    /// named none; on a connection in `lockdown` or not (`lockdown.rs`). By
    /// default the host's, always, and no lockdown.
    fn call_tool_in(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send {
        let _ = (workspace, lockdown);
        self.call_tool(name, arguments, progress)
    }

    /// Changes whenever the tool list may have changed (install, remove,
    /// enable, disable, pin, unpin, config edits). `None`: it never changes.
    fn tool_list_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Directories no client root may overlap as the workspace (the modhost
    /// home: its approval rules and installed modules). `/` and the user's
    /// home are refused whatever this says (`roots.rs`).
    fn protected_dirs(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    /// The lockdown a connection enters once words of a call of `name`
    /// reached its client (a progress message on the way counts as much as
    /// the result); `None` by default.
    fn taint_of(&self, name: &str) -> Option<Lockdown> {
        let _ = name;
        None
    }

    /// Why a call of `name`, on a connection in `lockdown` or not, waits
    /// for the user's approval (its verdict is `ask` and nobody else
    /// answers for it); `None` when it runs, or is refused, without asking
    /// anyone.
    fn approval_rule(&self, name: &str, lockdown: Option<&Lockdown>) -> Option<ApprovalAsk> {
        let _ = (name, lockdown);
        None
    }

    /// Record a call the server refused before calling the backend (too
    /// many at once, an approval it cannot or may not ask for, the user's
    /// no): the host's backend writes it to its audit log. By default
    /// nothing is recorded.
    fn refused(&self, call: &modhost::audit::RefusedCall<'_>) {
        let _ = call;
    }

    /// Whether the user may be asked one more approval question now
    /// (`[quotas] elicitations_per_minute`), counting it when so; by
    /// default always.
    fn admit_question(&self) -> Result<(), modhost::quota::RateLimited> {
        Ok(())
    }

    /// [`Backend::call_tool_in`] for one call the user approved through the
    /// client (elicitation). By default nobody is recorded as approving, so
    /// a tool that asks is refused as it would be unapproved.
    fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send {
        self.call_tool_in(name, arguments, progress, workspace, lockdown)
    }

    /// [`Backend::list_tools`] as `caller` sees them: only the tools it may
    /// call. By default the same list for everyone.
    fn list_tools_for(&self, caller: &Caller) -> Vec<Value> {
        let _ = caller;
        self.list_tools()
    }

    /// [`Backend::approval_rule`] for a call by `caller` (rules may name
    /// principals and scopes).
    fn approval_rule_for(
        &self,
        caller: &Caller,
        name: &str,
        lockdown: Option<&Lockdown>,
    ) -> Option<ApprovalAsk> {
        let _ = caller;
        self.approval_rule(name, lockdown)
    }

    /// [`Backend::admit_question`] counted for `caller` (the rate is per
    /// principal).
    fn admit_question_from(&self, caller: &Caller) -> Result<(), modhost::quota::RateLimited> {
        let _ = caller;
        self.admit_question()
    }

    /// Run one call for `caller` ([`Backend::call_tool_in`], or
    /// [`Backend::call_tool_approved`] when the user said yes): its
    /// principal reaches the call's audit record. Dropping the future
    /// stops the call.
    #[allow(clippy::too_many_arguments)] // one call's every part, passed on whole
    fn call_tool_as(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
        approved: bool,
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send {
        let _ = caller;
        async move {
            if approved {
                self.call_tool_approved(name, arguments, progress, workspace, lockdown)
                    .await
            } else {
                self.call_tool_in(name, arguments, progress, workspace, lockdown)
                    .await
            }
        }
    }
}
