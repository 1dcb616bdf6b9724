//! One `invoke`: a fresh server, `initialize`, `tools/list` checked
//! against the pinned snapshot, one `tools/call`, the server ended, the
//! result mapped.
//!
//! Design decisions:
//!
//! - **Per call, least authority.** The server lives for this one call,
//!   started after the request is read, and gets only what this call was
//!   granted: the roots its tool names (as MCP roots, as `{roots}`
//!   arguments and as its working folder), the hosts, programs and
//!   secrets the host gave the call. No call sees another's data, because
//!   no server process sees two calls.
//! - **The pinned tools are checked before the call, every call.** The
//!   definitions the operator approved are what the agent was shown; a
//!   server that lists anything else (a tool added, removed or redefined)
//!   is refused before its tool runs ([`crate::pinned`]).
//! - **Progress and logs pass through as they come;** everything else the
//!   server sends is answered or dropped by the session
//!   ([`crate::session`]).

use std::io::Write;
use std::path::Path;

use modproto::{
    InvokeParams, InvokeResult, LogParams, Message, ModuleErrorKind, Notification, ProgressParams,
};

use crate::describe::{self, capability_id};
use crate::error::{BridgeError, BridgeKind};
use crate::manifest::Manifest;
use crate::pinned::{self, PinnedTools};
use crate::server::{CallRoot, Server, ServerSpec, with_exit};
use crate::session::{Relay, ServerRpcError, Session, server_refused};

/// Run the call `params` of the module in `folder`; notifications go to
/// `out` as they come.
pub(crate) fn invoke(
    folder: &Path,
    params: &InvokeParams,
    out: &mut dyn Write,
) -> Result<InvokeResult, BridgeError> {
    let (manifest, pinned) = describe::load(folder)?;
    let tool = tool_of(&manifest, &pinned, &params.capability)?;
    let grant = manifest.grant(&tool);
    let roots: Vec<CallRoot> = grant
        .root_order()
        .into_iter()
        .filter_map(|name| {
            params.roots.get(name).map(|root| CallRoot {
                name: name.to_owned(),
                root: root.clone(),
            })
        })
        .collect();
    let spec = ServerSpec::new(&manifest, folder, &params.binaries, roots)?;
    let (mut server, mut session) = Server::start(&spec, params.max_output_bytes)?;
    let mut relay = Relayed { out };
    let outcome = (|| {
        session.initialize(&mut relay)?;
        check_pinned(&mut session, &manifest, &pinned, &tool, &mut relay)?;
        session.call_tool(&tool, &params.input, &params.request_id, &mut relay)
    })();
    let outcome = outcome.map_err(|e| with_exit(e, &mut server));
    server.end(session);
    answered(outcome?, &spec.roots)
}

/// The MCP tool behind `capability`, a tool of the pinned snapshot.
pub(crate) fn tool_of(
    manifest: &Manifest,
    pinned: &PinnedTools,
    capability: &str,
) -> Result<String, BridgeError> {
    pinned
        .names()
        .into_iter()
        .find(|name| capability_id(&manifest.id, name) == capability)
        .map(str::to_owned)
        .ok_or_else(|| {
            BridgeError::protocol(
                ModuleErrorKind::UnknownCapability,
                format!("this MCP server has no tool for capability {capability:?}"),
            )
            .with_remedy(format!(
                "call one of: {}",
                pinned
                    .names()
                    .iter()
                    .map(|n| capability_id(&manifest.id, n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// `tools/list` compared with the pinned snapshot: any difference refuses
/// the call of `tool`.
pub(crate) fn check_pinned<W: Write>(
    session: &mut Session<W>,
    manifest: &Manifest,
    pinned: &PinnedTools,
    tool: &str,
    relay: &mut dyn Relay,
) -> Result<(), BridgeError> {
    let listed = session.list_tools(relay)?;
    let changes = pinned::compare(&pinned.tools, &listed);
    if changes.is_empty() {
        return Ok(());
    }
    Err(BridgeError::new(
        BridgeKind::ToolsChanged,
        format!(
            "the MCP server's tools are not the ones pinned at install, so {tool:?} was not called"
        ),
    )
    .with_problems(changes.problems())
    .with_remedy(format!(
        "review what changed, then list and pin the tools again: `modhost install --mcp FOLDER --id {} --upgrade -- COMMAND ARGS...`",
        manifest.id
    )))
}

/// The invoke result of the server's answer to `tools/call`.
pub(crate) fn answered(
    outcome: Result<serde_json::Value, ServerRpcError>,
    roots: &[CallRoot],
) -> Result<InvokeResult, BridgeError> {
    match outcome {
        Ok(result) => crate::tool_result::map(&result, roots),
        Err(error) if error.code == -32602 => Err(BridgeError::protocol(
            ModuleErrorKind::InvalidInput,
            format!("the MCP server refused the arguments: {}", error.message),
        )
        .with_remedy("fix the arguments as the message says and call again")),
        Err(error) => Err(server_refused("tools/call", &error)),
    }
}

/// Progress and log lines of the server, written to the bridge's stdout as
/// modhost notifications.
pub(crate) struct Relayed<'a> {
    pub(crate) out: &'a mut dyn Write,
}

impl Relayed<'_> {
    fn write(&mut self, method: &str, params: serde_json::Value) {
        let line = Message::Notification(Notification::new(method, Some(params))).to_line();
        // A host that stopped reading ends the call anyway.
        let _ = writeln!(self.out, "{line}").and_then(|()| self.out.flush());
    }
}

impl Relay for Relayed<'_> {
    fn progress(&mut self, progress: ProgressParams) {
        if let Ok(params) = serde_json::to_value(progress) {
            self.write(modproto::METHOD_PROGRESS, params);
        }
    }

    fn log(&mut self, log: LogParams) {
        if let Ok(params) = serde_json::to_value(log) {
            self.write(modproto::METHOD_LOG, params);
        }
    }
}
