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
//!   (at most [`MAX_REQUEST_BYTES`]), answer it with one line, exit 0.
//!   Empty stdin exits at once, writing nothing.
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
mod server;
mod session;
#[cfg(test)]
mod tests;
mod tool_result;

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use modproto::jsonrpc::decode_error_response;
use modproto::{
    ErrorCode, ErrorData, Id, InvokeParams, Message, ModuleErrorKind, Response, RpcError,
};
use serde_json::Value;

use crate::error::BridgeError;

/// The longest request line read (16 MiB, as the SDK's modules).
const MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024;

fn main() {
    std::process::exit(serve(io::stdin().lock(), &mut io::stdout().lock()));
}

/// Answer one request from `input` on `out`; the exit status.
fn serve(input: impl BufRead, out: &mut dyn Write) -> i32 {
    let response = match read_request(input) {
        Ok(None) => return 0,
        Ok(Some(line)) => answer(&line, out),
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

fn answer(line: &str, out: &mut dyn Write) -> Response {
    let request = match Message::parse(line) {
        Ok(Message::Request(request)) => request,
        Ok(_) => {
            return Response::err(
                Id::Null,
                RpcError::new(ErrorCode::InvalidRequest, "expected a request with an id")
                    .with_data(ErrorData::new(
                        ModuleErrorKind::InvalidRequest,
                        "send one JSON-RPC 2.0 request with \"id\" and \"method\"",
                    )),
            );
        }
        Err(e) => return decode_error_response(&e),
    };
    let id = request.id.clone();
    let params = request.params.unwrap_or(Value::Null);
    let outcome = match request.method.as_str() {
        modproto::METHOD_DESCRIBE => folder()
            .and_then(|folder| describe::load(&folder))
            .and_then(|(manifest, pinned)| to_value(&describe::descriptor(&manifest, &pinned))),
        modproto::METHOD_INVOKE => serde_json::from_value::<InvokeParams>(params)
            .map_err(|e| invalid_params("invoke", &e))
            .and_then(|params| {
                let folder = folder()?;
                to_value(&invoke::invoke(&folder, &params, out)?)
            }),
        listing::METHOD => serde_json::from_value::<listing::ListParams>(params)
            .map_err(|e| invalid_params(listing::METHOD, &e))
            .and_then(|params| to_value(&listing::list(&folder()?, &params)?)),
        other => Err(BridgeError::protocol(
            ModuleErrorKind::UnknownMethod,
            format!("unknown method {other:?}"),
        )
        .with_remedy("call \"describe\" or \"invoke\"")),
    };
    match outcome {
        Ok(result) => Response::ok(id, result),
        Err(error) => Response::err(id, error.to_rpc()),
    }
}

/// The module's folder: the one this program lies in.
fn folder() -> Result<PathBuf, BridgeError> {
    std::env::current_exe()
        .ok()
        .or_else(|| std::env::args_os().next().map(PathBuf::from))
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .ok_or_else(|| {
            BridgeError::protocol(
                ModuleErrorKind::Internal,
                "the bridge cannot tell which folder it runs from",
            )
            .with_remedy("run the bridge as a module's program, from its folder")
        })
}

fn to_value(value: &impl serde::Serialize) -> Result<Value, BridgeError> {
    serde_json::to_value(value).map_err(|e| {
        BridgeError::protocol(
            ModuleErrorKind::Internal,
            format!("serializing the answer: {e}"),
        )
        .with_remedy("this is a bug in modhost's MCP bridge; report it")
    })
}

fn invalid_params(method: &str, error: &serde_json::Error) -> BridgeError {
    BridgeError::protocol(
        ModuleErrorKind::InvalidRequest,
        format!("{method} params: {error}"),
    )
    .with_remedy("send the params the protocol defines")
}

/// One line of at most [`MAX_REQUEST_BYTES`]; `None` on empty input.
fn read_request(input: impl BufRead) -> Result<Option<String>, Response> {
    let mut bytes = Vec::new();
    let refuse = |code, kind, message: &str| {
        Response::err(
            Id::Null,
            RpcError::new(code, message).with_data(ErrorData::new(
                kind,
                "send one JSON-RPC 2.0 request per line",
            )),
        )
    };
    if let Err(e) = input
        .take(MAX_REQUEST_BYTES + 1)
        .read_until(b'\n', &mut bytes)
    {
        return Err(refuse(
            ErrorCode::ParseError,
            ModuleErrorKind::Parse,
            &format!("reading the request: {e}"),
        ));
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() as u64 > MAX_REQUEST_BYTES {
        return Err(refuse(
            ErrorCode::InvalidRequest,
            ModuleErrorKind::InvalidRequest,
            "the request line is too long",
        ));
    }
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    String::from_utf8(bytes).map(Some).map_err(|_| {
        refuse(
            ErrorCode::ParseError,
            ModuleErrorKind::Parse,
            "the request line is not UTF-8",
        )
    })
}
