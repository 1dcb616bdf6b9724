//! One request's answer: a JSON body, or a Server-Sent Events stream
//! scoped to the request, fed by the connection's outbox.
//!
//! Design decisions:
//!
//! - **JSON when the answer comes at once, SSE when there is more to
//!   say.** The server waits for the request's first message up to one
//!   keep-alive period: its final response is sent as `application/json`
//!   (with the status the revision gives its error, if it is one); a
//!   notification or a question first (progress, an approval question in
//!   the handshake era), or nothing yet, opens the stream
//!   (`text/event-stream`, `X-Accel-Buffering: no`), where each message
//!   is one `data:` event and a comment (`: keep-alive`) is written after
//!   each quiet period, so proxies and clients do not time out, and a
//!   client that left is noticed at the next write. A client that accepts
//!   only JSON gets the final response, the notifications dropped (they
//!   are advisory), and is never asked a question (its capabilities are
//!   cut, `session.rs`).
//! - **The final response ends the stream,** as the transport says it
//!   should; nothing is sent after it. A call cancelled by the handshake
//!   era's `notifications/cancelled` gets no response (the protocol's
//!   rule): its answer is a 204 if no stream opened yet, else the stream
//!   ends, at the next keep-alive.
//! - **Dropping the answer ends the call.** The [`Exchange`] owns the
//!   connection its call runs on; when the body is dropped (the client
//!   closed the stream or the connection, a write stalled, or the server
//!   stops), the connection goes and its call with it: the module's process
//!   group is killed. That is the 2026-07-28 transport's cancellation, and
//!   it is how no vanished client holds a module process in any revision.
//! - **Every exchange is counted and logged once,** when it ends
//!   ([`Exchange`]'s drop): in-flight calls and open streams, the call's
//!   result kind and duration, and the request log record.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use hyper::body::Frame;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::AbortHandle;

use super::access_log::AccessRecord;
use super::drain::Busy;
use super::metrics::CallResult;
use super::replica::SessionLocal;
use super::state::{ServedWith, ServerState};
use modproto::Id;

/// The first bytes of a stream that has nothing to say yet, and of each
/// keep-alive.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// What a line in the outbox is, read without building it whole.
#[derive(Debug, Deserialize)]
struct Peek {
    method: Option<IgnoredAny>,
    error: Option<PeekError>,
    result: Option<PeekResult>,
}

#[derive(Debug, Deserialize)]
struct PeekError {
    code: i64,
}

#[derive(Debug, Deserialize)]
struct PeekResult {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(rename = "resultType")]
    result_type: Option<String>,
}

/// A message of the outbox, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A notification or a server-to-client request: more follows.
    Interim,
    /// The request's response: its result kind, and its JSON-RPC error
    /// code if it is an error.
    Final(CallResult, Option<i64>),
}

/// What `line` is.
pub(crate) fn classify(line: &str) -> Kind {
    let Ok(peek) = serde_json::from_str::<Peek>(line) else {
        return Kind::Interim;
    };
    if peek.method.is_some() {
        return Kind::Interim;
    }
    if let Some(error) = peek.error {
        return Kind::Final(CallResult::RpcError, Some(error.code));
    }
    match peek.result {
        Some(PeekResult {
            result_type: Some(kind),
            ..
        }) if kind == "input_required" => Kind::Final(CallResult::InputRequired, None),
        Some(PeekResult {
            is_error: Some(true),
            ..
        }) => Kind::Final(CallResult::ToolError, None),
        _ => Kind::Final(CallResult::Ok, None),
    }
}

/// Everything one exchange holds until its answer is complete; counted and
/// logged when dropped.
pub(crate) struct Exchange<B: crate::Backend> {
    pub(crate) state: Arc<ServerState<B>>,
    pub(crate) record: AccessRecord,
    pub(crate) started: Instant,
    /// The connection (and with it the call) of this request.
    pub(crate) connection: Option<Box<dyn Finish>>,
    /// Tasks of this exchange (a stream's announcer), stopped with it.
    pub(crate) tasks: Vec<AbortHandle>,
    /// The call's slot among the server's concurrent calls.
    pub(crate) call_permit: Option<OwnedSemaphorePermit>,
    /// The stream's slot among the server's open streams.
    pub(crate) stream_permit: Option<OwnedSemaphorePermit>,
    /// A handshake call registered for cancellation: its session and id.
    pub(crate) registered: Option<(Arc<SessionLocal>, Id)>,
    /// The call's task: once it is gone with nothing more to send (it was
    /// cancelled by `notifications/cancelled`), the answer ends.
    pub(crate) call: Option<AbortHandle>,
    /// How the call ended, once its response went out.
    pub(crate) ended: Option<CallResult>,
    pub(crate) busy: Option<Busy>,
}

impl<B: crate::Backend> Exchange<B> {
    /// Whether this exchange is a `tools/call` (counted as one).
    fn is_call(&self) -> bool {
        self.call_permit.is_some()
    }

    /// Whether the call's task is gone (it sent its last message, or was
    /// cancelled and sends none).
    fn call_gone(&self) -> bool {
        self.call.as_ref().is_some_and(AbortHandle::is_finished)
    }

    /// This exchange holds a stream slot from now.
    fn stream_opened(&mut self, permit: OwnedSemaphorePermit) {
        self.state.metrics.streams(1);
        self.stream_permit = Some(permit);
    }
}

impl<B: crate::Backend> Drop for Exchange<B> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        // The call ends here if it still runs: its connection goes, and
        // the drain counts this exchange until the call's future (and so
        // its module's process group) is gone.
        if let Some(connection) = self.connection.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let busy = self.busy.take();
            runtime.spawn(async move {
                connection.finish().await;
                drop(busy);
            });
        }
        if let Some((session, id)) = self.registered.take() {
            session.ended(&id);
        }
        let took = self.started.elapsed();
        if self.is_call() {
            let result = self.ended.unwrap_or(CallResult::Cancelled);
            self.state.metrics.call_ended(result, took);
            self.state.metrics.in_flight(-1);
            self.record.result = Some(result.as_str());
        }
        if self.stream_permit.take().is_some() {
            self.state.metrics.streams(-1);
        }
        self.record.duration = took;
        self.state.log(&self.record);
    }
}

/// A connection that can be ended, its calls stopped and awaited.
pub(crate) trait Finish: Send {
    fn finish(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<B: crate::Backend> Finish for crate::server::Connection<B> {
    fn finish(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin((*self).finish())
    }
}

/// The status a final JSON-RPC error answer is sent with, in the revision
/// it was served in: the 2026-07-28 transport gives its own errors and
/// malformed requests 400, an unknown method 404; the handshake revisions
/// answer every JSON-RPC message with 200.
pub(crate) fn status_of(code: Option<i64>, served: ServedWith) -> StatusCode {
    match (served, code) {
        (ServedWith::Stateless, Some(-32601)) => StatusCode::NOT_FOUND,
        (ServedWith::Stateless, Some(-32700 | -32600 | -32602 | -32020 | -32021 | -32022)) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// How the client may be answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepts {
    pub(crate) json: bool,
    pub(crate) sse: bool,
}

/// Answer `exchange` from `lines`, its connection's outbox: JSON or SSE as
/// the module docs say. `stream_first`: open the stream at once (a
/// `subscriptions/listen`, a `GET` stream).
pub(crate) async fn answer<B: crate::Backend>(
    mut exchange: Exchange<B>,
    mut lines: mpsc::Receiver<String>,
    accepts: Accepts,
    served: ServedWith,
    stream_first: bool,
) -> Response {
    let keep_alive = exchange.state.limits.keep_alive;
    let streams = Arc::clone(&exchange.state.streams);
    // A stream slot, taken only when a stream is about to open.
    let slot = || Arc::clone(&streams).try_acquire_owned().ok();
    // A stream opened at once starts with what is already there (a
    // subscription's acknowledgment).
    let mut first: Option<String> = if stream_first {
        lines.try_recv().ok()
    } else {
        None
    };
    if !stream_first {
        loop {
            let waited = match tokio::time::timeout(keep_alive, lines.recv()).await {
                // Its task is gone and said nothing more: it was
                // cancelled, and a cancelled request gets no response.
                Err(_) if exchange.call_gone() => match lines.try_recv() {
                    Ok(line) => Ok(Some(line)),
                    Err(_) => {
                        exchange.record.status = 204;
                        let mut response = Response::new(Body::empty());
                        *response.status_mut() = StatusCode::NO_CONTENT;
                        return response;
                    }
                },
                waited => waited,
            };
            match waited {
                Ok(Some(line)) => match classify(&line) {
                    Kind::Final(result, code) => {
                        exchange.ended = Some(result);
                        let status = status_of(code, served);
                        exchange.record.status = status.as_u16();
                        return json(status, line);
                    }
                    // Only a client that takes SSE hears more than the end.
                    Kind::Interim if !accepts.sse => {}
                    // No stream to spare: the end alone, as JSON.
                    Kind::Interim => {
                        if let Some(permit) = slot() {
                            exchange.stream_opened(permit);
                            first = Some(line);
                            break;
                        }
                    }
                },
                // The call's task ended without a response: it panicked.
                Ok(None) => {
                    exchange.record.status = 500;
                    exchange.ended = Some(CallResult::RpcError);
                    return json(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        super::state::rpc_error_body(
                            None,
                            -32603,
                            "the request ended without an answer; this is a bug in modhost",
                        ),
                    );
                }
                // Nothing yet: keep the client company on a stream.
                Err(_) if accepts.sse => {
                    if let Some(permit) = slot() {
                        exchange.stream_opened(permit);
                        break;
                    }
                }
                Err(_) => {}
            }
        }
    }
    exchange.record.status = 200;
    let body = SseBody {
        first: Some(match first {
            Some(line) => event(&line),
            None => Bytes::from_static(KEEP_ALIVE),
        }),
        lines,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive),
        done: false,
        exchange: Box::new(exchange),
    };
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// `line` as one SSE event.
fn event(line: &str) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(line.as_bytes());
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// The body of a stream: the outbox's lines as events, comments between.
struct SseBody<B: crate::Backend> {
    first: Option<Bytes>,
    lines: mpsc::Receiver<String>,
    keep_alive: tokio::time::Interval,
    done: bool,
    exchange: Box<Exchange<B>>,
}

impl<B: crate::Backend> hyper::body::Body for SseBody<B> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if this.done {
            return Poll::Ready(None);
        }
        match this.lines.poll_recv(cx) {
            Poll::Ready(Some(line)) => {
                if let Kind::Final(result, _) = classify(&line) {
                    this.done = true;
                    this.exchange.ended = Some(result);
                }
                this.keep_alive.reset();
                Poll::Ready(Some(Ok(Frame::data(event(&line)))))
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match this.keep_alive.poll_tick(cx) {
                // A cancelled call's stream ends with nothing more.
                Poll::Ready(_) if this.exchange.call_gone() => {
                    this.done = true;
                    Poll::Ready(None)
                }
                Poll::Ready(_) => {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE)))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.first.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart_without_being_built() {
        let progress =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
        assert_eq!(classify(progress), Kind::Interim);
        let question = r#"{"jsonrpc":"2.0","id":"modhost-elicit-1","method":"elicitation/create","params":{}}"#;
        assert_eq!(classify(question), Kind::Interim);
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"isError":false}}"#;
        assert_eq!(classify(ok), Kind::Final(CallResult::Ok, None));
        let failed = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#;
        assert_eq!(classify(failed), Kind::Final(CallResult::ToolError, None));
        let asked = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#;
        assert_eq!(
            classify(asked),
            Kind::Final(CallResult::InputRequired, None)
        );
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#;
        assert_eq!(
            classify(error),
            Kind::Final(CallResult::RpcError, Some(-32601))
        );
    }

    #[test]
    fn the_stateless_revision_gives_its_errors_their_status() {
        use ServedWith::*;
        assert_eq!(status_of(Some(-32601), Stateless), StatusCode::NOT_FOUND);
        for code in [-32020, -32021, -32022, -32602, -32600, -32700] {
            assert_eq!(status_of(Some(code), Stateless), StatusCode::BAD_REQUEST);
        }
        assert_eq!(status_of(Some(-32603), Stateless), StatusCode::OK);
        assert_eq!(status_of(None, Stateless), StatusCode::OK);
        assert_eq!(status_of(Some(-32601), Handshake), StatusCode::OK);
    }
}
