//! `modhost mcp`: the tools as an MCP server, dual-era: the stateless
//! revision 2026-07-28 and the handshake revisions 2025-11-25, 2025-06-18,
//! 2025-03-26 and 2024-11-05, each in its own shapes (`revision.rs`).
//!
//! Design decisions:
//!
//! - **Transport-agnostic.** [`serve`] reads newline-delimited JSON-RPC from
//!   any `AsyncBufRead` and writes to any `AsyncWrite`; `modhost mcp` hands it
//!   stdin and stdout (the MCP stdio transport), the tests hand it in-memory
//!   pipes; over HTTP (`http.rs`) the same connection code serves each
//!   request, its messages going to that request's answer. What the tools
//!   are and how they run is behind [`Backend`], for a caller
//!   (`modhost::Caller`: the local user on stdio, the authenticated
//!   principal over HTTP).
//! - **Calls run concurrently.** Each `tools/call` is its own task, so the
//!   reader keeps reading while a call runs: a `notifications/cancelled` is
//!   seen at once and aborts that task. Aborting drops the invocation future,
//!   and the native runner kills the module's process group on drop; the
//!   cancelled request gets no response, as the spec asks.
//! - **Bounded everywhere.** A client line is at most 4 MiB
//!   (`line::MAX_LINE_BYTES`) and a longer one is skipped without being
//!   held; invalid UTF-8 is one bad line (-32700); at most
//!   `MAX_CONCURRENT_CALLS` calls run at once (beyond, a call is refused
//!   with an `isError` result); the outbox and each call's progress channel
//!   have fixed capacities. Blocking work (a native module's cold start, a
//!   component's execution) runs off the runtime threads in the runner, so
//!   `ping` and `notifications/cancelled` are answered while calls run.
//! - **The client's workspace.** When the client declares the `roots`
//!   capability, the server asks `roots/list` once the handshake is done and
//!   again on `notifications/roots/list_changed`; the first `file://` root
//!   that is a directory is the workspace of every call from then on (several
//!   roots: the first, and a log line says so). Until it answers, and for a
//!   client without roots or that lists none, the host's workspace applies
//!   (`--workspace`, else `MODHOST_WORKSPACE`, else the current directory
//!   unless that is `/` or the home). A client whose roots are all refused
//!   (`roots.rs`) gets no workspace at all for the calls of its
//!   connection, never the host's: they would otherwise act on a folder it
//!   did not name. (A stateless request carries no roots and gets the
//!   host's, as a client without roots does, unless its connection's roots
//!   were all refused: it gets none either.) A root is checked again at
//!   each call as it resolves then (`host::never_a_workspace`).
//! - **EOF ends everything.** When stdin closes, every running call is
//!   aborted and awaited before [`serve`] returns, so no module process
//!   outlives the server. [`serve_stdio`] ends the same way on SIGTERM (the
//!   MCP stdio shutdown's second step), SIGINT and SIGHUP.
//! - **Policy stays the host's.** Denied tools are never listed and cannot be
//!   called. Tools whose verdict is `ask` are listed (the same predicate,
//!   `ToolDef::is_offered`, decides `modhost tools`), and each call asks the
//!   user through the client first (`elicitation.rs`): it runs only after a
//!   yes, with the approval record `by: "user"`; a client that cannot be
//!   asked gets an `isError` result saying how to allow the tool. With
//!   `--delegate-approval` nobody is asked and every call carries the
//!   record `by: "client"`.
//! - **Lockdown after taint** (`lockdown.rs`, `modhost::lockdown`). Once a
//!   result of untrusted content (by default: of a capability that uses
//!   the network) was returned on a connection, its later calls reach only
//!   `[lockdown] allowed_hosts`, and tools that write or run programs run
//!   only after the user's yes for each call, even with
//!   `--delegate-approval`. One log line says when a connection enters
//!   it; every result from then on says so in
//!   `_meta["dev.modhost/lockdown"]`. A new connection starts clean.
//! - **Live tool lists.** When the backend has a change watch
//!   ([`Backend::tool_list_changes`]), handshake clients are told
//!   `listChanged: true` and sent `notifications/tools/list_changed`;
//!   stateless clients hear of changes on a `subscriptions/listen` stream
//!   (`list_changes.rs`).
//!
//! # API
//!
//! - [`HostServer::open`] builds the server from a `modhost::Host` with
//!   [`ServeOptions`], exactly as `modhost mcp` does; `.serve_stdio()` runs it,
//!   `.bind_http()` makes a [`HostHttpServer`] (`modhost mcp --http`).
//! - [`http`](mod@http): the streamable HTTP transport over any [`Backend`]
//!   ([`http::HttpServer`]), its bounds, request log and authentication.
//! - [`serve`] and [`serve_until`] run any [`Backend`] (with
//!   [`ApprovalAsk`], why a call waits for the user) over any byte pipes;
//!   [`ToolboxBackend`] is the backend over a `modhost::tools::Toolbox`;
//!   [`serve_stdio`] adds stdin, stdout and the signals.
//! - [`line`](mod@line): the framing of client lines (bounded, UTF-8 checked), public
//!   so the fuzz target drives the very functions the server uses.
//! - [`SigningKey`] (`signed.rs`): self-contained tokens sealed with a key
//!   replicas share (`load`, or `ephemeral` for one process), opened only
//!   for their purpose, unchanged and unexpired ([`SealError`]); a key file
//!   is refused with [`KeyError`] naming the path and the fix.

// A public field, signature or trait impl that reaches a type no user can
// name is a compile error: the type is made private or exported on purpose.
#![deny(unnameable_types)]
#![deny(unreachable_pub)]

use std::sync::Arc;

use serde_json::Value;

use modhost::tools::{
    ApprovedBy, CallError, Invoker, Lockdown, PolicyVerdict, ProgressSink, ToolOutcome, Toolbox,
    mcp_tool,
};
use modhost::{CallWorkspace, Caller};

mod backend;
pub(crate) mod elicitation;
mod host_server;
pub mod http;
pub mod line;
mod list_changes;
pub(crate) mod lockdown;
pub(crate) mod protocol;
pub(crate) mod revision;
pub(crate) mod roots;
mod server;
pub(crate) mod signed;
#[cfg(test)]
mod test_client;
#[cfg(test)]
mod tests_attacks;
#[cfg(test)]
mod tests_eras;
#[cfg(test)]
mod tests_policy;

pub use backend::{ApprovalAsk, Backend};
pub use host_server::{HostHttpServer, HostServer, ServeOptions};
pub use server::{serve, serve_until};
pub use signed::{KeyError, KeyProblem, SealError, SigningKey};

/// The host's tools as an MCP backend.
#[derive(Debug)]
pub struct ToolboxBackend<I> {
    pub toolbox: Toolbox<I>,
    /// `--delegate-approval`: `ask` tools are offered and the client answers for them.
    pub delegate_approval: bool,
}

impl<I: Invoker> Backend for ToolboxBackend<I> {
    fn taint_of(&self, name: &str) -> Option<Lockdown> {
        self.toolbox.taint_of(name)
    }

    fn list_tools(&self) -> Vec<Value> {
        self.toolbox
            .tools()
            .iter()
            .filter(|t| t.is_offered())
            .map(mcp_tool)
            .collect()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
    ) -> Result<ToolOutcome, CallError> {
        self.call_tool_in(name, arguments, progress, &CallWorkspace::Host, None)
            .await
    }

    async fn call_tool_in(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        // Without delegation an `ask` is refused by the gate itself (no
        // approver): the server asks the user first (`call_tool_approved`).
        // With it, the gate still refuses the client's yes where the
        // lockdown wants a person's.
        let approver = self.delegate_approval.then_some(ApprovedBy::Client);
        self.toolbox
            .call_in(name, arguments, approver, progress, workspace, lockdown)
            .await
    }

    fn protected_dirs(&self) -> Vec<std::path::PathBuf> {
        vec![self.toolbox.home().root().to_path_buf()]
    }

    fn approval_rule(&self, name: &str, lockdown: Option<&Lockdown>) -> Option<ApprovalAsk> {
        let policy = self.toolbox.policy_of(name, lockdown)?;
        // A delegated client answers for every `ask`, except the ones the
        // lockdown keeps for a person.
        if policy.decision.verdict != PolicyVerdict::Ask
            || (self.delegate_approval && !policy.needs_a_person)
        {
            return None;
        }
        // The question names the hosts the yes opens (`CallPolicy`).
        Some(ApprovalAsk {
            rule: policy.question,
            lockdown: policy.needs_a_person,
        })
    }

    async fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        self.toolbox
            .call_in(
                name,
                arguments,
                Some(ApprovedBy::User),
                progress,
                workspace,
                lockdown,
            )
            .await
    }

    fn tool_list_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.toolbox.changes()
    }

    fn refused(&self, call: &modhost::audit::RefusedCall<'_>) {
        self.toolbox.record_refusal(call);
    }

    fn admit_question(&self) -> Result<(), modhost::quota::RateLimited> {
        self.toolbox.admit_question()
    }

    fn list_tools_for(&self, caller: &Caller) -> Vec<Value> {
        self.toolbox
            .tools()
            .iter()
            .filter(|t| self.toolbox.is_offered_to(t, caller))
            .map(|t| mcp_tool(&self.toolbox.as_offered_to(t, caller)))
            .collect()
    }

    fn approval_rule_for(
        &self,
        caller: &Caller,
        name: &str,
        lockdown: Option<&Lockdown>,
    ) -> Option<ApprovalAsk> {
        let policy = self.toolbox.policy_for(caller, name, lockdown)?;
        if policy.decision.verdict != PolicyVerdict::Ask
            || (self.delegate_approval && !policy.needs_a_person)
        {
            return None;
        }
        Some(ApprovalAsk {
            rule: policy.question,
            lockdown: policy.needs_a_person,
        })
    }

    fn admit_question_from(&self, caller: &Caller) -> Result<(), modhost::quota::RateLimited> {
        self.toolbox.admit_question_from(caller)
    }

    async fn call_tool_as(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        lockdown: Option<&Lockdown>,
        approved: bool,
    ) -> Result<ToolOutcome, CallError> {
        // As `call_tool_in` and `call_tool_approved`, for `caller`: its
        // principal is in the call's audit record.
        let approver = if approved {
            Some(ApprovedBy::User)
        } else {
            self.delegate_approval.then_some(ApprovedBy::Client)
        };
        self.toolbox
            .call_as(
                caller, name, arguments, approver, progress, workspace, lockdown,
            )
            .await
    }
}

/// Serve `backend` on this process's stdin and stdout until stdin closes.
///
/// When both are pipes (how every MCP client starts a stdio server), they
/// are polled directly by the runtime; tokio's `stdin()`/`stdout()` would
/// hand every read and write to a blocking-pool thread and back, two thread
/// switches per line that showed up in `tools/call` latency on small
/// machines. Anything else (a terminal, a file) falls back to those.
pub async fn serve_stdio<B: Backend>(backend: Arc<B>) -> std::io::Result<()> {
    let stop = termination();
    #[cfg(unix)]
    if let Some((reader, writer)) = stdio_pipes() {
        return serve_until(tokio::io::BufReader::new(reader), writer, backend, stop).await;
    }
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    serve_until(stdin, tokio::io::stdout(), backend, stop).await
}

/// Completes on SIGTERM, SIGINT or SIGHUP: how a client (the MCP stdio
/// transport's shutdown: close stdin, then SIGTERM), a terminal or a
/// service manager ends a server. The server then ends as at EOF, its
/// calls' process groups killed, rather than dying with them still
/// running (over HTTP it drains first). The signals are watched from this
/// call on, not from the future's first poll: one that comes in between
/// (a server that said it listens, then was stopped at once) is not lost
/// to its default action. A signal that cannot be watched is never awaited.
fn termination() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = |kind| {
        let watched = signal(kind).ok();
        async move {
            match watched {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
    };
    let (terminate, interrupt, hangup) = (
        watch(SignalKind::terminate()),
        watch(SignalKind::interrupt()),
        watch(SignalKind::hangup()),
    );
    async move {
        tokio::select! {
            () = terminate => {}
            () = interrupt => {}
            () = hangup => {}
        }
        tracing::info!("a termination signal");
    }
}

/// Stdin and stdout as non-blocking pipe ends, when both are pipes.
///
/// Duplicates of fds 0 and 1 are used, so the standard descriptors stay
/// open; the duplicates share the open file description, which becomes
/// non-blocking — harmless here, since nothing else in `modhost mcp` reads
/// stdin or writes stdout.
#[cfg(unix)]
fn stdio_pipes() -> Option<(
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
)> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    // Both checks before either end is made non-blocking.
    let is_fifo = |fd: &std::os::fd::OwnedFd| {
        rustix::fs::fstat(fd).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo
        })
    };
    if !is_fifo(&stdin) || !is_fifo(&stdout) {
        return None;
    }
    let reader = pipe::Receiver::from_owned_fd(stdin).ok()?;
    let writer = pipe::Sender::from_owned_fd(stdout).ok()?;
    Some((reader, writer))
}
