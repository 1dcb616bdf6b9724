//! One request line: read (bounded, UTF-8), and answered by the method it
//! names (`describe`, `invoke`, `mcp_list_tools`), with the module's folder
//! found from the bridge's own path. Shared by the one-request run
//! (`main.rs`) and a `session` module's loop ([`crate::resident`]).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use modproto::jsonrpc::decode_error_response;
use modproto::{
    ErrorCode, ErrorData, Id, InvokeParams, Message, ModuleErrorKind, Response, RpcError,
};
use serde_json::Value;

use crate::error::BridgeError;
use crate::{describe, invoke, listing};

/// The longest request line read (16 MiB, as the SDK's modules).
pub(crate) const MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024;

/// The response to the request `line`; notifications of an `invoke` go
/// to `out` as they come.
pub(crate) fn answer(line: &str, out: &mut dyn Write) -> Response {
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
pub(crate) fn folder() -> Result<PathBuf, BridgeError> {
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

/// `value` as JSON, or the bridge's internal error.
pub(crate) fn to_value(value: &impl serde::Serialize) -> Result<Value, BridgeError> {
    serde_json::to_value(value).map_err(|e| {
        BridgeError::protocol(
            ModuleErrorKind::Internal,
            format!("serializing the answer: {e}"),
        )
        .with_remedy("this is a bug in modhost's MCP bridge; report it")
    })
}

/// The error of params that do not parse.
pub(crate) fn invalid_params(method: &str, error: &serde_json::Error) -> BridgeError {
    BridgeError::protocol(
        ModuleErrorKind::InvalidRequest,
        format!("{method} params: {error}"),
    )
    .with_remedy("send the params the protocol defines")
}

/// One line of at most [`MAX_REQUEST_BYTES`]; `None` on empty input.
pub(crate) fn read_request(input: impl BufRead) -> Result<Option<String>, Response> {
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
