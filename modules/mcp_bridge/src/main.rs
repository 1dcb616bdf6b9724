//! `mcp_bridge`: an existing stdio MCP server as a modhost module.
//!
//! A folder module whose program is this bridge, beside the server's code,
//! the operator's manifest (`mcp-server.toml`, [`manifest`]) and the
//! server's tool definitions as they were pinned (`tools.json`,
//! [`pinned`]). The host treats it like any native module; the bridge
//! turns each modhost request into the MCP conversation it stands for:
//!
//! - `describe`: the descriptor from the two files, nothing started
//!   ([`describe`]): one capability per tool, its effects the operator's
//!   grant;
//! - `invoke`: a fresh server, confined to this call's grants, `initialize`,
//!   `tools/list` checked against the pin, one `tools/call`, the server
//!   ended, the result mapped ([`invoke`], [`tool_result`]);
//! - `invoke` of a module whose manifest says `[server] lifetime =
//!   "session"`: the same, but the server is kept and every later `invoke`
//!   line of stdin is served by it (`tools/list` checked each time), until
//!   stdin ends ([`resident`]); the host writes several only on one
//!   `modhost mcp` stdio connection, the grants then the union of every
//!   tool's;
//! - `mcp_list_tools` (the host's, at install): the server started once,
//!   granted nothing, its tools listed and the two files written
//!   ([`listing`]).
//!
//! Design decisions:
//!
//! - **A module, not a host feature.** Running the server as the bridge's
//!   child puts it under everything the host already enforces per native
//!   call (landlock and seccomp of the call's grants, process group, memory
//!   cgroup, deadline, kill on cancel, egress proxy, secrets masking) with
//!   no new path in the host; the cost is one more process per call and
//!   that every tool declares the server's interpreter in `spawns`
//!   (see `modproto/MODULES.md`, "MCP servers as modules").
//! - **One request per process,** as the protocol says: read one line
//!   (at most [`request::MAX_REQUEST_BYTES`]), answer it with one line, exit 0.
//!   Empty stdin exits at once, writing nothing. The one exception is a
//!   `session` module's `invoke`, which answers a line per request and
//!   exits at stdin's end: a host that runs it per call closes stdin after
//!   the first, so it still serves exactly one.
//! - **The bridge's own folder is the module's,** found from its own path:
//!   the host runs the approved snapshot, so the manifest, the tool
//!   snapshot and the server's code it reads are the pinned ones.

#![allow(
    clippy::result_large_err,
    reason = "one response per process: the size of an error value never matters here"
)]

mod describe;
mod error;
mod invoke;
mod launch_rules;
mod listing;
mod manifest;
mod pinned;
mod request;
mod resident;
mod server;
mod session;
mod session_group;
#[cfg(test)]
mod tests;
mod tool_result;

use std::io::{self, BufRead, Write};

use modproto::Message;

use crate::request::{answer, read_request};

fn main() {
    std::process::exit(serve(io::stdin().lock(), &mut io::stdout().lock()));
}

/// Answer one request from `input` on `out`; the exit status.
fn serve(mut input: impl BufRead, out: &mut dyn Write) -> i32 {
    let response = match read_request(&mut input) {
        Ok(None) => return 0,
        Ok(Some(line)) => {
            // A `session` module serves every request of its stdin.
            if let Some(status) = resident::serve_if_session(&line, &mut input, out) {
                return status;
            }
            answer(&line, out)
        }
        Err(response) => response,
    };
    let line = Message::Response(response).to_line();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mcp_bridge: writing the response failed: {e}");
            1
        }
    }
}
