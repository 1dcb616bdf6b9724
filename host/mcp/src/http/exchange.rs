//! One request to the MCP endpoint: who it is from, which era it speaks,
//! and the connection that serves it (`server.rs`, the same one stdio
//! uses), its messages going to this request's own answer (`reply.rs`).
//!
//! The order of the checks is the order of their cost and of what they
//! reveal: draining, `Origin`, authentication (nothing is read from an
//! unauthenticated client but its headers), `Accept`, the body (bounded in
//! size and time), the JSON-RPC message, then the era's own rules:
//!
//! - **2026-07-28** (the body's `_meta` names the revision, or the
//!   `MCP-Protocol-Version` header names it): a request missing its
//!   protocol version in `_meta` is malformed (400, -32602); the mirrored
//!   headers must match the body (400, -32020, `mirrored_headers.rs`);
//!   `initialize` does not exist there (404, -32601); the rest is the
//!   server loop's, every request with a fresh connection: nothing but the
//!   signing key is shared between requests, and, narrowing only, the
//!   principal's lockdown on this server (`principal_lockdown.rs`).
//! - **Handshake revisions** (everything else): `initialize` starts a
//!   session whose id is a sealed token (`session.rs`); any other message
//!   needs a session id (400 without, 404 for one this server's key did
//!   not seal, that expired, or that another principal holds); an
//!   `MCP-Protocol-Version` header, when sent, must name the session's
//!   revision (400), and `Mcp-Method`/`Mcp-Name`, when sent, must match
//!   the body (400, -32020); a call whose id is still running in the
//!   session is refused (-32600). Notifications and answers to the
//!   server's questions are 202.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use modproto::{Id, Message, Notification, Request};
use serde_json::Value;
use tokio::sync::mpsc;

use super::access_log::{AccessRecord, bounded};
use super::metrics::CallResult;
use super::mirrored_headers::{self, HEADER_MISMATCH, PROTOCOL_VERSION};
use super::replica::{self, SessionLocal};
use super::reply::{self, Accepts, Exchange};
use super::session::{SESSION_HEADER, SessionState};
use super::state::{ServedWith, ServerState, rpc_error_body};
use crate::Backend;
use crate::lockdown::ConnectionLockdown;
use crate::protocol::META_PROTOCOL_VERSION;
use crate::revision::{self, Era};
use crate::server::{Connection, ExchangeParts, OUTBOX_LINES, Session};
use modhost::Caller;
use modhost::audit::RefusedCall;
use modproto::HostErrorKind;

/// A request refused before it was served: its answer, counted and logged.
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    /// The metrics' and log's reason (`origin`, `auth`, ...).
    pub(crate) reason: &'static str,
    pub(crate) body: String,
    pub(crate) headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl Refusal {
    /// A refusal with a JSON-RPC error body.
    pub(crate) fn rpc(
        status: StatusCode,
        reason: &'static str,
        id: Option<&Id>,
        code: i64,
        message: &str,
    ) -> Refusal {
        Refusal {
            status,
            reason,
            body: rpc_error_body(id, code, message),
            headers: Vec::new(),
        }
    }

    fn with_header(mut self, name: header::HeaderName, value: HeaderValue) -> Refusal {
        self.headers.push((name, value));
        self
    }

    /// 503, to be tried again in a second (elsewhere, behind a balancer).
    pub(crate) fn unavailable(reason: &'static str, id: Option<&Id>, message: &str) -> Refusal {
        Refusal::rpc(StatusCode::SERVICE_UNAVAILABLE, reason, id, -32000, message)
            .with_header(header::RETRY_AFTER, HeaderValue::from_static("1"))
    }
}

/// The start of a request's record.
pub(crate) fn record(parts: &Parts, peer: Option<SocketAddr>) -> AccessRecord {
    AccessRecord {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        status: 0,
        principal: None,
        rpc: None,
        tool: None,
        result: None,
        revision: None,
        duration: Duration::ZERO,
        peer,
    }
}

impl<B: Backend> ServerState<B> {
    /// Answer with `refusal`, logged and counted.
    pub(crate) fn refuse(
        &self,
        mut record: AccessRecord,
        started: Instant,
        refusal: Refusal,
    ) -> Response {
        self.metrics.refused(refusal.reason);
        record.status = refusal.status.as_u16();
        record.result = Some(refusal.reason);
        record.duration = started.elapsed();
        self.log(&record);
        let mut response = reply::json(refusal.status, refusal.body);
        for (name, value) in refusal.headers {
            response.headers_mut().insert(name, value);
        }
        // A client told to come back later does not keep a connection
        // slot meanwhile.
        if refusal.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }

    /// 202, logged.
    fn accepted(&self, mut record: AccessRecord, started: Instant) -> Response {
        record.status = 202;
        record.duration = started.elapsed();
        self.log(&record);
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        response
    }

    /// The checks every request to `/mcp` passes first: draining, `Origin`,
    /// authentication, `Accept`. The caller and what it accepts.
    pub(crate) async fn admit(
        &self,
        parts: &Parts,
        record: &mut AccessRecord,
    ) -> Result<(Caller, Accepts), Refusal> {
        if self.drain.draining() {
            return Err(Refusal::unavailable(
                "draining",
                None,
                "this server is shutting down; send the request again (another replica serves it)",
            ));
        }
        self.origins
            .check(&parts.headers)
            .map_err(|why| Refusal::rpc(StatusCode::FORBIDDEN, "origin", None, -32600, &why))?;
        let caller = self
            .auth
            .authenticate_request(&parts.uri, &parts.headers, parts.extensions.get())
            .await
            .map_err(|refusal| {
                let mut refused = Refusal::rpc(
                    refusal.status(),
                    "auth",
                    None,
                    -32600,
                    &format!("Unauthorized: {}", refusal.description()),
                );
                if let Ok(challenge) = HeaderValue::from_str(&refusal.www_authenticate()) {
                    refused = refused.with_header(header::WWW_AUTHENTICATE, challenge);
                }
                refused
            })?;
        record.principal = Some(caller.principal.clone());
        let accepts = accepts(&parts.headers).ok_or_else(|| {
            Refusal::rpc(
                StatusCode::NOT_ACCEPTABLE,
                "not_acceptable",
                None,
                -32600,
                "Not Acceptable: the MCP endpoint answers with application/json or text/event-stream; \
                 send Accept: application/json, text/event-stream",
            )
        })?;
        Ok((caller, accepts))
    }
}

/// What `Accept` allows: `None` when it allows neither JSON nor SSE.
fn accepts(headers: &HeaderMap) -> Option<Accepts> {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return Some(Accepts {
            json: true,
            sse: true,
        });
    }
    let mut accepts = Accepts {
        json: false,
        sse: false,
    };
    for value in values {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let media = range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "*/*" => {
                    accepts.json = true;
                    accepts.sse = true;
                }
                "application/json" | "application/*" => accepts.json = true,
                "text/event-stream" | "text/*" => accepts.sse = true,
                _ => {}
            }
        }
    }
    (accepts.json || accepts.sse).then_some(accepts)
}

/// The body's length as `Content-Length` declares it.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 413, for a body over `max` bytes.
fn too_large(max: u64) -> Refusal {
    Refusal::rpc(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        None,
        -32600,
        &format!(
            "Payload Too Large: a request body may be at most {max} bytes ([http] max_body_bytes); \
             pass large content as a file in the workspace instead"
        ),
    )
}

/// Read the body, bounded in size and time.
async fn read_body(body: Body, max: u64, within: Duration) -> Result<Bytes, Refusal> {
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let collected = tokio::time::timeout(within, Limited::new(body, limit).collect()).await;
    match collected {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large(max)),
        Ok(Err(e)) => Err(Refusal::rpc(
            StatusCode::BAD_REQUEST,
            "bad_body",
            None,
            -32700,
            &format!("the request body could not be read: {e}"),
        )),
        Err(_) => Err(Refusal::rpc(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            None,
            -32600,
            &format!(
                "Request Timeout: the body did not arrive within {} s",
                within.as_secs()
            ),
        )),
    }
}

/// The one JSON-RPC message of a body.
fn message_of(body: &[u8]) -> Result<Message, Refusal> {
    let parse_error =
        |why: String| Refusal::rpc(StatusCode::BAD_REQUEST, "bad_message", None, -32700, &why);
    let text = std::str::from_utf8(body)
        .map_err(|_| parse_error("Parse error: the body is not UTF-8".into()))?;
    if text.trim_start().starts_with('[') {
        return Err(Refusal::rpc(
            StatusCode::BAD_REQUEST,
            "batch",
            None,
            -32600,
            "Invalid Request: JSON-RPC batches are not served (MCP 2025-06-18 removed them); \
             send one message per POST",
        ));
    }
    Message::parse(text).map_err(|e| Refusal {
        status: StatusCode::BAD_REQUEST,
        reason: "bad_message",
        body: Message::Response(modproto::jsonrpc::decode_error_response(&e)).to_line(),
        headers: Vec::new(),
    })
}

/// Which era a message is served in, from its `_meta` and headers.
enum EraOf {
    /// 2026-07-28, the protocol version its `_meta` names.
    Stateless(String),
    /// 2026-07-28 by its header, but without the protocol version in
    /// `_meta`: malformed.
    MissingMeta,
    Handshake,
}

fn era_of(headers: &HeaderMap, params: Option<&Value>) -> EraOf {
    let meta = params.and_then(|p| p.get("_meta"));
    match meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) {
        Some(Value::String(version)) => return EraOf::Stateless(version.clone()),
        Some(_) => return EraOf::MissingMeta,
        None => {}
    }
    let header = mirrored_headers::header(headers, PROTOCOL_VERSION)
        .ok()
        .flatten()
        .and_then(revision::find);
    match header {
        Some(revision) if revision.era == Era::Stateless => EraOf::MissingMeta,
        _ => EraOf::Handshake,
    }
}

/// `POST /mcp`.
pub(crate) async fn post<B: Backend>(
    state: Arc<ServerState<B>>,
    peer: Option<SocketAddr>,
    request: http::Request<Body>,
) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let mut record = record(&parts, peer);
    let busy = state.drain.busy();
    let (caller, accepts) = match state.admit(&parts, &mut record).await {
        Ok(admitted) => admitted,
        Err(refusal) => return state.refuse(record, started, refusal),
    };
    let limits = &state.limits;
    if let Some(declared) = declared_length(&parts.headers)
        && declared > limits.max_body_bytes
    {
        return state.refuse(record, started, too_large(limits.max_body_bytes));
    }
    let body = match read_body(body, limits.max_body_bytes, limits.body_timeout).await {
        Ok(body) => body,
        Err(refusal) => return state.refuse(record, started, refusal),
    };
    let message = match message_of(&body) {
        Ok(message) => message,
        Err(refusal) => return state.refuse(record, started, refusal),
    };
    let params = match &message {
        Message::Request(r) => r.params.as_ref(),
        Message::Notification(n) => n.params.as_ref(),
        Message::Response(_) => None,
    };
    let post = Post {
        state: Arc::clone(&state),
        caller,
        accepts,
        record,
        started,
        busy,
    };
    match (era_of(&parts.headers, params), message) {
        (EraOf::MissingMeta, Message::Request(request)) => {
            let why = format!(
                "{} needs params._meta[\"{META_PROTOCOL_VERSION}\"] (MCP 2026-07-28 requests carry \
                 their protocol version and client capabilities in _meta)",
                request.method
            );
            let refusal = Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "missing_meta",
                Some(&request.id),
                -32602,
                &why,
            );
            post.refuse(refusal)
        }
        (EraOf::Stateless(version), Message::Request(request)) => {
            post.stateless(&parts.headers, request, &version).await
        }
        // No client-to-server notification is defined over HTTP in
        // 2026-07-28; one is accepted and has no effect.
        (EraOf::Stateless(_) | EraOf::MissingMeta, Message::Notification(_)) => post.accepted(),
        (_, message) => post.handshake(&parts.headers, message).await,
    }
}

/// A `POST` past its admission.
struct Post<B: Backend> {
    state: Arc<ServerState<B>>,
    caller: Caller,
    accepts: Accepts,
    record: AccessRecord,
    started: Instant,
    busy: super::drain::Busy,
}

impl<B: Backend> Post<B> {
    fn refuse(self, refusal: Refusal) -> Response {
        self.state.refuse(self.record, self.started, refusal)
    }

    fn accepted(self) -> Response {
        self.state.accepted(self.record, self.started)
    }

    /// A 2026-07-28 request.
    async fn stateless(mut self, headers: &HeaderMap, request: Request, version: &str) -> Response {
        self.record.rpc = Some(bounded(&request.method));
        self.record.revision = revision::find(version).map(|r| r.version);
        if let Err(why) =
            mirrored_headers::check(headers, &request.method, request.params.as_ref(), version)
        {
            let refusal = Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "header_mismatch",
                Some(&request.id),
                HEADER_MISMATCH,
                &why,
            );
            return self.refuse(refusal);
        }
        if request.method == "initialize" {
            let refusal = Refusal::rpc(
                StatusCode::NOT_FOUND,
                "method_not_found",
                Some(&request.id),
                -32601,
                &format!(
                    "Method not found: initialize does not exist in MCP {version}; a request that \
                     carries _meta is served as it is (send initialize without _meta for a \
                     handshake session)"
                ),
            );
            return self.refuse(refusal);
        }
        // The principal's lockdown on this server (`principal_lockdown.rs`).
        let lockdown = match self.state.principal_lockdowns.of(&self.caller.principal) {
            Ok(lockdown) => lockdown,
            Err(full) => {
                let refusal = Refusal::unavailable(
                    "principals_full",
                    Some(&request.id),
                    &format!("Service Unavailable: {full}"),
                );
                return self.refuse(refusal);
            }
        };
        let parts = Served {
            session: Session::default(),
            local: None,
            lockdown,
            served: ServedWith::Stateless,
        };
        self.serve(request, parts).await
    }

    /// A message of the handshake era.
    async fn handshake(mut self, headers: &HeaderMap, message: Message) -> Response {
        let sent_version = match mirrored_headers::header(headers, PROTOCOL_VERSION) {
            Ok(sent) => sent,
            Err(why) => {
                let refusal =
                    Refusal::rpc(StatusCode::BAD_REQUEST, "bad_version", None, -32600, &why);
                return self.refuse(refusal);
            }
        };
        if let Some(sent) = sent_version
            && revision::find(sent).is_none()
        {
            let supported = revision::all_versions().join(", ");
            let refusal = Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "bad_version",
                message_id(&message),
                -32600,
                &format!(
                    "Bad Request: MCP-Protocol-Version {sent:?} is not a version this server \
                     speaks ({supported})"
                ),
            );
            return self.refuse(refusal);
        }
        // Mirrored headers, when sent, say what the body says in this era
        // too (`mirrored_headers.rs`).
        if let Message::Request(request) = &message
            && let Err(why) =
                mirrored_headers::check_sent(headers, &request.method, request.params.as_ref())
        {
            let refusal = Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "header_mismatch",
                Some(&request.id),
                HEADER_MISMATCH,
                &why,
            );
            return self.refuse(refusal);
        }
        if let Message::Request(request) = &message
            && request.method == "initialize"
        {
            let Message::Request(request) = message else {
                unreachable!()
            };
            return self.initialize(request).await;
        }
        let session = match self.session(headers, message_id(&message)) {
            Ok(session) => session,
            Err(refusal) => return self.refuse(refusal),
        };
        self.record.revision = Some(session.revision.version);
        if let Some(sent) = sent_version
            && sent != session.revision.version
        {
            let refusal = Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "bad_version",
                message_id(&message),
                -32600,
                &format!(
                    "Bad Request: MCP-Protocol-Version {sent:?} is not this session's version, {}",
                    session.revision.version
                ),
            );
            return self.refuse(refusal);
        }
        let local = match self.state.sessions.get(&session.principal, &session.nonce) {
            Ok(local) => local,
            Err(why @ replica::Full(_)) => {
                let refusal = Refusal::unavailable(
                    "sessions_full",
                    message_id(&message),
                    &format!("Service Unavailable: {why}"),
                );
                return self.refuse(refusal);
            }
            Err(why @ replica::Forgotten) => {
                let refusal = Refusal::rpc(
                    StatusCode::NOT_FOUND,
                    "unknown_session",
                    message_id(&message),
                    -32600,
                    &format!("Session not found: {why}; start a new session with initialize"),
                );
                return self.refuse(refusal);
            }
        };
        match message {
            Message::Request(request) => {
                self.record.rpc = Some(bounded(&request.method));
                // One call per request id at a time, across this
                // session's requests (`replica.rs`), as stdio refuses it.
                let _reserved = if request.method == "tools/call" {
                    let Some(reserved) = local.reserve(&request.id) else {
                        let refusal = Refusal::rpc(
                            StatusCode::OK,
                            "id_in_use",
                            Some(&request.id),
                            -32600,
                            &format!(
                                "request id {} is already in use by a call that is still \
                                 running; give each request its own id",
                                request.id
                            ),
                        );
                        return self.refuse(refusal);
                    };
                    Some(reserved)
                } else {
                    None
                };
                let parts = Served {
                    session: session.session(self.accepts.sse),
                    lockdown: Arc::clone(&local.lockdown),
                    local: Some(local),
                    served: ServedWith::Handshake,
                };
                self.serve(request, parts).await
            }
            Message::Notification(notification) => {
                self.record.rpc = Some(bounded(&notification.method));
                if notification.method == "notifications/cancelled"
                    && let Some(id) = cancelled_id(&notification)
                    && !local.cancel(&id)
                {
                    tracing::debug!(
                        "a cancellation of request {id} that this replica does not run \
                         (finished, unknown, or run by another replica)"
                    );
                }
                self.accepted()
            }
            Message::Response(response) => {
                // An answer to a question of ours; one to nothing we asked
                // is ignored.
                let _ = local.questions.answered(response);
                self.accepted()
            }
        }
    }

    /// The session a handshake message names; 400 without one, 404 for
    /// one this server does not honor or another principal holds.
    fn session(&self, headers: &HeaderMap, id: Option<&Id>) -> Result<SessionState, Refusal> {
        let sent = mirrored_headers::header(headers, SESSION_HEADER).map_err(|why| {
            Refusal::rpc(StatusCode::BAD_REQUEST, "bad_session", id, -32600, &why)
        })?;
        let Some(sent) = sent else {
            return Err(Refusal::rpc(
                StatusCode::BAD_REQUEST,
                "no_session",
                id,
                -32600,
                "Bad Request: no Mcp-Session-Id; start a session with initialize, or send an MCP \
                 2026-07-28 request (with its protocol version in _meta and the \
                 MCP-Protocol-Version header)",
            ));
        };
        let not_found = |why: &str| {
            Refusal::rpc(
                StatusCode::NOT_FOUND,
                "unknown_session",
                id,
                -32600,
                &format!("Session not found: {why}; start a new session with initialize"),
            )
        };
        let session = SessionState::resume(&self.state.key, sent)
            .map_err(|refused| not_found(&refused.to_string()))?;
        if session.principal != self.caller.principal {
            return Err(not_found(
                "this server issued no such session (or not with its signing key)",
            ));
        }
        Ok(session)
    }

    /// `initialize`: a new session, its id sealed.
    async fn initialize(mut self, request: Request) -> Response {
        self.record.rpc = Some("initialize".into());
        let params = request.params.as_ref();
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str);
        let revision = revision::negotiate(requested);
        let capabilities = params
            .and_then(|p| p.get("capabilities"))
            .cloned()
            .unwrap_or(Value::Null);
        self.record.revision = Some(revision.version);
        let started = SessionState::start(
            &self.state.key,
            revision,
            &capabilities,
            &self.caller.principal,
        );
        let (id, _) = match started {
            Ok(started) => started,
            Err(e) => {
                let refusal = Refusal::rpc(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "session_failed",
                    Some(&request.id),
                    -32603,
                    &format!("the session could not be started: {e}"),
                );
                return self.refuse(refusal);
            }
        };
        let parts = Served {
            session: Session::default(),
            local: None,
            lockdown: Arc::new(ConnectionLockdown::default()),
            served: ServedWith::Handshake,
        };
        let mut response = self.serve(request, parts).await;
        if let Ok(id) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(SESSION_HEADER, id);
        }
        response
    }

    /// Serve `request` on a connection of its own, its messages going to
    /// this request's answer.
    async fn serve(mut self, request: Request, served: Served) -> Response {
        let state = Arc::clone(&self.state);
        let is_call = request.method == "tools/call";
        let is_listen =
            served.served == ServedWith::Stateless && request.method == "subscriptions/listen";
        let params = request.params.as_ref();
        let tool = is_call
            .then(|| params.and_then(|p| p.get("name")).and_then(Value::as_str))
            .flatten();
        self.record.tool = tool.map(bounded);
        let call_permit = if is_call {
            match Arc::clone(&state.calls).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let name = tool.unwrap_or_default();
                    let arguments = params
                        .and_then(|p| p.get("arguments"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let rule = format!(
                        "modhost mcp --http runs at most {} calls at once ([http] max_concurrent_calls)",
                        state.limits.max_concurrent_calls
                    );
                    let mut refused =
                        RefusedCall::new(name, &arguments, HostErrorKind::RateLimited.into());
                    refused.rule = Some(&rule);
                    refused.retry_after_s = Some(1);
                    refused.principal =
                        (!self.caller.local).then_some(self.caller.principal.as_str());
                    state.backend.refused(&refused);
                    state.metrics.call_ended(CallResult::Busy, Duration::ZERO);
                    let refusal = Refusal::unavailable(
                        "busy",
                        Some(&request.id),
                        &format!("Service Unavailable: not run: {rule}; call again in a moment"),
                    );
                    return self.refuse(refusal);
                }
            }
        } else {
            None
        };
        let stream_permit = if is_listen {
            match Arc::clone(&state.streams).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let refusal = Refusal::unavailable(
                        "streams_full",
                        Some(&request.id),
                        &format!(
                            "Service Unavailable: this server holds {} open streams, its bound \
                             ([http] max_open_streams); open the stream again in a moment",
                            state.limits.max_open_streams
                        ),
                    );
                    return self.refuse(refusal);
                }
            }
        } else {
            None
        };
        if call_permit.is_some() {
            state.metrics.in_flight(1);
        }
        let (outbox, lines) = mpsc::channel(OUTBOX_LINES);
        let questions = served
            .local
            .as_ref()
            .map(|local| Arc::clone(&local.questions))
            .unwrap_or_default();
        let mut connection = Connection::for_exchange(ExchangeParts {
            backend: Arc::clone(&state.backend),
            outbox: outbox.clone(),
            session: served.session,
            caller: Arc::new(self.caller),
            questions,
            approvals: state.approvals.clone(),
            lockdown: served.lockdown,
            live: state.live,
        });
        let id = request.id.clone();
        connection.serve_request(request).await;
        let mut exchange = Exchange {
            state: Arc::clone(&state),
            record: self.record,
            started: self.started,
            connection: None,
            tasks: Vec::new(),
            call_permit,
            stream_permit: None,
            registered: None,
            call: connection.running_call(&id),
            ended: None,
            busy: Some(self.busy),
        };
        if let (Some(local), Some(call)) = (&served.local, &exchange.call) {
            local.started(id.clone(), call.clone());
            exchange.registered = Some((Arc::clone(local), id));
        }
        if let Some(permit) = stream_permit {
            state.metrics.streams(1);
            exchange.stream_permit = Some(permit);
            if let Some(changes) = state.backend.tool_list_changes() {
                let announcer =
                    crate::list_changes::announce(changes, connection.listeners(), outbox.clone());
                exchange.tasks.push(announcer.abort_handle());
            }
            // On a drain the stream ends with its closing result.
            let drained = state.drain.begun();
            let watcher = tokio::spawn(async move {
                drained.await;
                connection.close_streams().await;
                std::future::pending::<()>().await;
            });
            exchange.tasks.push(watcher.abort_handle());
        } else {
            exchange.connection = Some(Box::new(connection));
        }
        drop(outbox);
        reply::answer(exchange, lines, self.accepts, served.served, is_listen).await
    }
}

/// How a request is served: its session, this replica's state for it, the
/// lockdown it is under, its era.
struct Served {
    session: Session,
    local: Option<Arc<SessionLocal>>,
    lockdown: Arc<ConnectionLockdown>,
    served: ServedWith,
}

fn message_id(message: &Message) -> Option<&Id> {
    match message {
        Message::Request(r) => Some(&r.id),
        Message::Response(r) => Some(&r.id),
        Message::Notification(_) => None,
    }
}

/// The request a `notifications/cancelled` names.
fn cancelled_id(notification: &Notification) -> Option<Id> {
    match notification.params.as_ref()?.get("requestId")? {
        Value::String(s) => Some(Id::Str(s.clone())),
        Value::Number(n) => n.as_i64().map(Id::Num),
        _ => None,
    }
}

/// `GET /mcp`: a handshake session's stream of tool-list changes; 405
/// where there is none to give (the 2026-07-28 revision has no GET, a
/// request without a session, a server whose tools never change).
pub(crate) async fn get<B: Backend>(
    state: Arc<ServerState<B>>,
    peer: Option<SocketAddr>,
    request: http::Request<Body>,
) -> Response {
    let started = Instant::now();
    let (parts, _) = request.into_parts();
    let mut record = record(&parts, peer);
    let busy = state.drain.busy();
    let (caller, accepts) = match state.admit(&parts, &mut record).await {
        Ok(admitted) => admitted,
        Err(refusal) => return state.refuse(record, started, refusal),
    };
    let not_allowed = || {
        Refusal::rpc(
            StatusCode::METHOD_NOT_ALLOWED,
            "no_get_stream",
            None,
            -32600,
            "Method Not Allowed: this server offers a GET stream only to a handshake session whose \
             tools can change; send requests with POST",
        )
        .with_header(header::ALLOW, HeaderValue::from_static("GET, POST"))
    };
    let sent_session = mirrored_headers::header(&parts.headers, SESSION_HEADER)
        .ok()
        .flatten();
    let changes = state.backend.tool_list_changes();
    let (Some(_), Some(changes)) = (sent_session, changes) else {
        return state.refuse(record, started, not_allowed());
    };
    let post = Post {
        state: Arc::clone(&state),
        caller,
        accepts,
        record,
        started,
        busy,
    };
    let session = match post.session(&parts.headers, None) {
        Ok(session) => session,
        Err(refusal) => return post.refuse(refusal),
    };
    if !accepts.sse {
        let refusal = Refusal::rpc(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            None,
            -32600,
            "Not Acceptable: the GET stream is text/event-stream",
        );
        return post.refuse(refusal);
    }
    let Ok(permit) = Arc::clone(&state.streams).try_acquire_owned() else {
        let refusal = Refusal::unavailable(
            "streams_full",
            None,
            &format!(
                "Service Unavailable: this server holds {} open streams, its bound ([http] \
                 max_open_streams); open the stream again in a moment",
                state.limits.max_open_streams
            ),
        );
        return post.refuse(refusal);
    };
    let Post {
        mut record, busy, ..
    } = post;
    record.revision = Some(session.revision.version);
    let (outbox, lines) = mpsc::channel(OUTBOX_LINES);
    let listeners = Arc::new(std::sync::Mutex::new(crate::list_changes::Listeners {
        handshake: true,
        ..Default::default()
    }));
    let announcer = crate::list_changes::announce(changes, listeners, outbox);
    // On a drain the stream ends: its announcer (the one sender) goes.
    let drained = state.drain.begun();
    let stopper = announcer.abort_handle();
    let watcher = tokio::spawn(async move {
        drained.await;
        stopper.abort();
    });
    state.metrics.streams(1);
    let exchange = Exchange {
        state: Arc::clone(&state),
        record,
        started,
        connection: None,
        tasks: vec![announcer.abort_handle(), watcher.abort_handle()],
        call_permit: None,
        stream_permit: Some(permit),
        registered: None,
        call: None,
        ended: None,
        busy: Some(busy),
    };
    reply::answer(exchange, lines, accepts, ServedWith::Handshake, true).await
}
