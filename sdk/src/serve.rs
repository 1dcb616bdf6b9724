//! Serving one request: read a line, answer it, return.
//!
//! Design decisions:
//!
//! - **Exactly one response line, always.** Every path out of
//!   [`Module::serve_io`] after a line was read writes one response and
//!   flushes it: a malformed line, an unknown method, invalid input, a
//!   handler error and a panic each get their own JSON-RPC error. Empty
//!   stdin (the host went away) is the one exception: there is nobody to
//!   answer, so it returns 0 at once without output.
//! - **The request line is bounded** ([`MAX_REQUEST_BYTES`]) so a runaway
//!   writer cannot make the module allocate without end.
//! - **Panics become data.** Natively the handler runs under `catch_unwind`;
//!   a panic hook (chained before the default one, which writes only to
//!   stderr) records where it happened. On targets built with
//!   `panic = "abort"` (wasm32-wasip2 by default) unwinding is impossible, so
//!   the hook itself writes the -32603 response to stdout before the abort.
//! - The exit status is 0 whenever a response was written, whatever it
//!   said: the outcome is in the response, and a non-zero exit would make the
//!   host report a crash instead of the module's own error.
//! - **Start-up work comes before the read.** The input schemas that need
//!   compiling (see `input_check`) are compiled before the request line is
//!   read. A long-running host starts module processes ahead of their calls,
//!   so whatever a module does before reading is off the call's latency path.

#![allow(
    clippy::result_large_err,
    reason = "one response per process: the size of an error value never matters here"
)]

use std::cell::RefCell;
use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Instant;

use modproto::jsonrpc::decode_error_response;
use modproto::{
    ErrorCode, ErrorData, Id, InvokeParams, InvokeResult, Message, ModuleErrorKind, Request,
    Response, RpcError,
};
use serde_json::Value;

use crate::input_check::InputChecks;
use crate::module::HandlerFailure;
use crate::{Ctx, ModError, Module};

/// The longest request line a module reads (16 MiB).
pub const MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024;

pub(crate) fn serve(module: &Module) -> i32 {
    install_panic_hook();
    #[cfg(panic = "abort")]
    abort_answer::enable();
    module.serve_io(io::stdin().lock(), io::stdout())
}

impl Module {
    /// Answer one request on stdin/stdout and exit with its status.
    pub fn serve(self) -> ! {
        std::process::exit(serve(&self))
    }

    /// Answer one request read from `reader` on `writer`; returns the exit
    /// status. [`Module::serve`] is this over stdin and stdout.
    pub fn serve_io<R: BufRead, W: Write + 'static>(&self, reader: R, writer: W) -> i32 {
        install_panic_hook();
        let checks = InputChecks::prepare(self.descriptor());
        let out: Rc<RefCell<W>> = Rc::new(RefCell::new(writer));
        let request = read_request_line(reader);
        // The call's clock starts with its request, not with the process.
        let started = Instant::now();
        let response = match request {
            Ok(None) => return 0,
            Ok(Some(line)) => self.answer(&line, &checks, started, out.clone()),
            Err(response) => response,
        };
        let line = Message::Response(response).to_line();
        let mut out = out.borrow_mut();
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("modsdk: writing the response failed: {e}");
                1
            }
        }
    }

    fn answer(
        &self,
        line: &str,
        checks: &InputChecks,
        started: Instant,
        out: Rc<RefCell<dyn Write>>,
    ) -> Response {
        let request = match Message::parse(line) {
            Ok(Message::Request(request)) => request,
            Ok(Message::Notification(_) | Message::Response(_)) => {
                return Response::err(
                    Id::Null,
                    RpcError::new(
                        ErrorCode::InvalidRequest,
                        "expected a request (with an id), got a notification or a response",
                    )
                    .with_data(ErrorData::new(
                        ModuleErrorKind::InvalidRequest,
                        "send one JSON-RPC 2.0 request with \"id\" and \"method\"",
                    )),
                );
            }
            Err(e) => return decode_error_response(&e),
        };
        let id = request.id.clone();
        #[cfg(panic = "abort")]
        abort_answer::set_id(&id);
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            self.dispatch(request, checks, started, out)
        }));
        let outcome = outcome.unwrap_or_else(|payload| Err(panic_error(payload.as_ref())));
        #[cfg(panic = "abort")]
        abort_answer::clear();
        match outcome {
            Ok(result) => Response::ok(id, result),
            Err(error) => Response::err(id, error),
        }
    }

    fn dispatch(
        &self,
        request: Request,
        checks: &InputChecks,
        started: Instant,
        out: Rc<RefCell<dyn Write>>,
    ) -> Result<Value, RpcError> {
        match request.method.as_str() {
            modproto::METHOD_DESCRIBE => serde_json::to_value(self.descriptor())
                .map_err(|e| internal(format!("serializing the descriptor: {e}"))),
            modproto::METHOD_INVOKE => {
                let params = request.params.unwrap_or(Value::Null);
                let params: InvokeParams = serde_json::from_value(params).map_err(|e| {
                    RpcError::new(ErrorCode::InvalidParams, format!("invoke params: {e}")).with_data(
                        ErrorData::new(ModuleErrorKind::InvalidRequest, "send the invoke params the protocol defines (protocol, contract_version, request_id, capability, input, roots, deadline_ms, max_output_bytes)"),
                    )
                })?;
                self.invoke(params, checks, started, out)
                    .map_err(|e| e.to_rpc_error())
            }
            other => Err(RpcError::new(
                ErrorCode::MethodNotFound,
                format!("unknown method {other:?}"),
            )
            .with_data(ErrorData::new(
                ModuleErrorKind::UnknownMethod,
                "call \"describe\" or \"invoke\"",
            ))),
        }
    }

    fn invoke(
        &self,
        params: InvokeParams,
        checks: &InputChecks,
        started: Instant,
        out: Rc<RefCell<dyn Write>>,
    ) -> Result<Value, ModError> {
        let descriptor = self.descriptor();
        let (Some(declaration), Some(handler)) = (
            descriptor.capability(&params.capability),
            self.handler(&params.capability),
        ) else {
            let known: Vec<&str> = descriptor
                .capabilities
                .iter()
                .map(|c| c.id.as_str())
                .collect();
            return Err(ModError::new(
                ModuleErrorKind::UnknownCapability,
                format!(
                    "module `{}` has no capability {:?}",
                    descriptor.id, params.capability
                ),
            )
            .with_remedy(format!("call one of: {}", known.join(", "))));
        };
        let check = checks.get(&declaration.id).ok_or_else(|| {
            ModError::new(
                ModuleErrorKind::Internal,
                "the capability has no input check",
            )
        })?;
        if check.asserts_beyond_type() {
            let problems = check.problems(&params.input)?;
            if !problems.is_empty() {
                return Err(ModError::invalid_input_problems(problems));
            }
        }
        let mut params = params;
        let input = std::mem::take(&mut params.input);
        let mut ctx = Ctx::new(
            params,
            &descriptor.roots,
            &declaration.effects,
            started,
            out,
        );
        let output = match handler(&mut ctx, &input) {
            Ok(output) => output,
            Err(HandlerFailure::Failed(error)) => return Err(error),
            Err(HandlerFailure::Decode(message)) => {
                // Deserialization stops at the first problem; the schema
                // lists them all, as the host would.
                let problems = check.problems(&input)?;
                let problems = if problems.is_empty() {
                    vec![message]
                } else {
                    problems
                };
                return Err(ModError::invalid_input_problems(problems));
            }
        };
        let result = InvokeResult {
            output,
            text: ctx.text.take(),
            artifacts: std::mem::take(&mut ctx.artifacts),
            warnings: std::mem::take(&mut ctx.warnings),
        };
        serde_json::to_value(result).map_err(ModError::from)
    }
}

/// Read one line of at most [`MAX_REQUEST_BYTES`]; `None` on empty input.
fn read_request_line(reader: impl BufRead) -> Result<Option<String>, Response> {
    let mut bytes = Vec::new();
    let mut limited = reader.take(MAX_REQUEST_BYTES + 1);
    if let Err(e) = limited.read_until(b'\n', &mut bytes) {
        return Err(protocol_error(
            ErrorCode::ParseError,
            ModuleErrorKind::Parse,
            format!("reading the request: {e}"),
        ));
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() as u64 > MAX_REQUEST_BYTES {
        return Err(protocol_error(
            ErrorCode::InvalidRequest,
            ModuleErrorKind::InvalidRequest,
            format!("the request line is longer than {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    String::from_utf8(bytes).map(Some).map_err(|_| {
        protocol_error(
            ErrorCode::ParseError,
            ModuleErrorKind::Parse,
            "the request line is not UTF-8".to_owned(),
        )
    })
}

fn protocol_error(code: ErrorCode, kind: ModuleErrorKind, message: String) -> Response {
    Response::err(
        Id::Null,
        RpcError::new(code, message).with_data(ErrorData::new(
            kind,
            "send one JSON-RPC 2.0 request per line",
        )),
    )
}

fn internal(message: String) -> RpcError {
    RpcError::new(ErrorCode::InternalError, message).with_data(ErrorData::new(
        ModuleErrorKind::Internal,
        "this is a bug in the module; report it to its author",
    ))
}

thread_local! {
    /// Where the last panic on this thread happened, recorded by the hook.
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()));
            PANIC_LOCATION.with(|cell| *cell.borrow_mut() = location);
            #[cfg(panic = "abort")]
            abort_answer::answer(info);
            // The default hook writes to stderr only; stdout stays protocol.
            previous(info);
        }));
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned())
}

fn panic_rpc_error(message: &str, location: Option<String>) -> RpcError {
    let at = location.map(|l| format!(" at {l}")).unwrap_or_default();
    RpcError::new(
        ErrorCode::InternalError,
        format!("the capability panicked{at}: {message}"),
    )
    .with_data(ErrorData::new(
        ModuleErrorKind::Panic,
        "this is a bug in the module; report it to its author with the input that caused it",
    ))
}

fn panic_error(payload: &(dyn std::any::Any + Send)) -> RpcError {
    let location = PANIC_LOCATION.with(|cell| cell.borrow_mut().take());
    panic_rpc_error(&panic_message(payload), location)
}

#[cfg(panic = "abort")]
mod abort_answer {
    //! Without unwinding, the panic hook is the last code that runs: it
    //! answers the pending request itself, once, on the real stdout.
    use super::*;
    use std::sync::Mutex;

    static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static PENDING: Mutex<Option<Id>> = Mutex::new(None);

    pub(super) fn enable() {
        ENABLED.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) fn set_id(id: &Id) {
        if let Ok(mut pending) = PENDING.lock() {
            *pending = Some(id.clone());
        }
    }

    pub(super) fn clear() {
        if let Ok(mut pending) = PENDING.lock() {
            *pending = None;
        }
    }

    pub(super) fn answer(info: &std::panic::PanicHookInfo<'_>) {
        if !ENABLED.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let Some(id) = PENDING.lock().ok().and_then(|mut p| p.take()) else {
            return;
        };
        let message = info
            .payload_as_str()
            .unwrap_or("a panic with a non-string payload");
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()));
        let response = Response::err(id, panic_rpc_error(message, location));
        let mut stdout = io::stdout().lock();
        let _ = writeln!(stdout, "{}", Message::Response(response).to_line());
        let _ = stdout.flush();
    }
}
