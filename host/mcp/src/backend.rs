//! What the server needs from the host: the tool list and a way to call
//! one. The server loop is written against this trait alone; the host's
//! toolbox implements it in `mod.rs`, the tests with fakes.

use serde_json::Value;

use modhost::CallWorkspace;
use modhost::tools::{CallError, ProgressSink, ToolOutcome};

/// What the server needs from the host: the tool list and a way to call one.
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
    /// named none. By default the host's, always.
    fn call_tool_in(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send {
        let _ = workspace;
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

    /// The rule that makes a call of `name` wait for the user's approval
    /// (its verdict is `ask` and nobody else answers for it); `None` when
    /// it runs, or is refused, without asking anyone.
    fn approval_rule(&self, name: &str) -> Option<String> {
        let _ = name;
        None
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
    ) -> impl Future<Output = Result<ToolOutcome, CallError>> + Send {
        self.call_tool_in(name, arguments, progress, workspace)
    }
}
