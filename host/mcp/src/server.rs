//! The server loop: one reader, one writer task, one task per `tools/call`.
//!
//! Bounds, so that no client can knock the server over: a line is at most
//! [`MAX_LINE_BYTES`] and never held whole beyond it (`line.rs`); at most
//! [`MAX_CONCURRENT_CALLS`] calls run at once, and a call beyond that is
//! refused at once with an `isError` result saying so (refused rather than
//! queued: a queue would be one more unbounded thing, and the model can
//! call again when one of its calls has finished); the outbox holds at most
//! [`OUTBOX_LINES`] lines (a client that stops reading stops the reader
//! too, which is backpressure, not growth); a call's progress channel holds
//! [`PROGRESS_REPORTS`] reports, and a report that finds it full is dropped
//! (progress is advisory; the response never is).
//!
//! Callers: every connection serves one [`Caller`] (on stdio the local
//! user); the backend's `*_for`/`*_as` methods get it, so its rules, quotas
//! and audit records are its own. Over HTTP (`http.rs`) a connection is
//! made per request ([`Connection::for_exchange`]) with what its session or
//! server shares, its messages going to that request's answer, and each
//! call's result names the caller (`_meta["dev.modhost/principal"]`).
//!
//! Eras (`revision.rs`): each request is served in the revision it names in
//! its `_meta` (stateless) or, without one, in the revision its connection's
//! `initialize` chose (the newest handshake revision when there was none, as
//! before). [`Session`] is all a connection remembers for serving it, and
//! only the handshake era uses it; what it remembers to restrict it, its
//! lockdown (`lockdown.rs`), applies in every era.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use modproto::{ErrorCode, Id, Message, Notification, Request, Response, RpcError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::elicitation::{self, Answer, ApprovalStates, Questions};
use super::line::{self, Decoded, Framed, LineFramer, MAX_LINE_BYTES};
use super::list_changes::{self, Listeners, MAX_SUBSCRIPTIONS, SharedListeners};
use super::lockdown::ConnectionLockdown;
use super::protocol::{self, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
use super::revision::{self, AskUser, Era, Revision, keep_fields};
use super::roots::NoWorkspace;
use super::{ApprovalAsk, Backend};
use modhost::audit::RefusedCall;
use modhost::quota::RateLimited;
use modhost::telemetry::with_remote_parent;
use modhost::tools::{CallError, Lockdown, Progress, ToolOutcome};
use modhost::{CallWorkspace, Caller};
use modproto::HostErrorKind;

/// The most `tools/call`s that run at once for one client.
pub(crate) const MAX_CONCURRENT_CALLS: usize = 16;

/// The most lines waiting for the writer.
pub(crate) const OUTBOX_LINES: usize = 64;

/// The most progress reports of one call waiting to be forwarded.
pub(crate) const PROGRESS_REPORTS: usize = 16;

pub(crate) type Outbox = mpsc::Sender<String>;

/// The result `_meta` key naming whom a call was made for (its principal:
/// `local:<user>` on stdio, the authenticated caller over HTTP).
pub(crate) const META_PRINCIPAL: &str = "dev.modhost/principal";

/// What a handshake connection remembers from its `initialize` (over HTTP:
/// what its session id carries, `http/session.rs`).
#[derive(Debug, Default)]
pub(crate) struct Session {
    pub(crate) revision: Option<&'static Revision>,
    pub(crate) capabilities: Value,
}

/// The revision a request is served in, and the client's capabilities for it.
#[derive(Debug)]
struct Served {
    revision: &'static Revision,
    capabilities: Value,
}

/// Everything the reader keeps for one connection (over HTTP: for one
/// request, [`Connection::for_exchange`]).
pub(crate) struct Connection<B> {
    backend: Arc<B>,
    outbox: Outbox,
    session: Session,
    roots: ClientRoots,
    /// Server-to-client questions (`elicitation/create`) awaiting answers.
    questions: Arc<Questions>,
    /// The stateless era's approval states, shared by the server's
    /// connections (and, through the key, by its replicas).
    approvals: ApprovalStates,
    /// Whom this connection's requests are made for: its rules and quotas
    /// apply, its principal is in each call's audit record and result, is
    /// bound into each approval state it is issued, and is checked when
    /// one is presented.
    caller: Arc<Caller>,
    /// Name the caller in each call's result (over HTTP; stdio's results
    /// are as they were before callers had names).
    name_caller: bool,
    listeners: SharedListeners,
    /// Whether the connection is in lockdown (`lockdown.rs`): shared with
    /// the call tasks, which enter it before they send a tainting result.
    lockdown: Arc<ConnectionLockdown>,
    /// The backend announces tool-list changes.
    live: bool,
    running: HashMap<Id, AbortHandle>,
    calls: JoinSet<()>,
    /// The processes of this connection's `session` MCP server modules
    /// (`modhost::SessionScope`): a stdio connection has one, ended with
    /// it; over HTTP every call runs per call.
    server_sessions: Option<modhost::SessionScope>,
}

/// Serve MCP over `reader`/`writer` until `reader` reaches EOF. Every call
/// still running then is aborted, and awaited, before this returns.
pub async fn serve<R, W, B>(reader: R, writer: W, backend: Arc<B>) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    B: Backend,
{
    serve_until(reader, writer, backend, std::future::pending()).await
}

/// [`serve`], ending also when `stop` completes (a termination signal), in
/// the same way as at EOF: every running call is aborted and awaited, so
/// its module's process group is gone before this returns.
pub async fn serve_until<R, W, B>(
    reader: R,
    writer: W,
    backend: Arc<B>,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    B: Backend,
{
    // One connection is the whole server: its states need a key of its own.
    let approvals = ApprovalStates::ephemeral()?;
    let principal = modhost::audit::local_principal().to_owned();
    serve_with(reader, writer, backend, stop, approvals, principal).await
}

/// [`serve_until`] for `principal`, with the `approvals` of a server whose
/// connections (and replicas, through the key) accept each other's
/// approval states.
pub(crate) async fn serve_with<R, W, B>(
    reader: R,
    writer: W,
    backend: Arc<B>,
    stop: impl Future<Output = ()>,
    approvals: ApprovalStates,
    principal: String,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    B: Backend,
{
    let mut stop = std::pin::pin!(stop);
    let (outbox, mut queue) = mpsc::channel::<String>(OUTBOX_LINES);
    // One writer keeps lines whole: responses and notifications from
    // concurrent calls never interleave mid-line.
    let mut writer_task = tokio::spawn(async move {
        let mut writer = writer;
        while let Some(mut line) = queue.recv().await {
            // One write per message: a client that wakes on every read must
            // not wake once for the line and again for its newline.
            line.push('\n');
            writer.write_all(line.as_bytes()).await?;
            writer.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });

    let listeners: SharedListeners = Arc::new(Mutex::new(Listeners::default()));
    let changes = backend.tool_list_changes();
    let live = changes.is_some();
    let announcer = changes
        .map(|changes| list_changes::announce(changes, Arc::clone(&listeners), outbox.clone()));
    let protected = backend.protected_dirs();
    let caller = if principal == modhost::audit::local_principal() {
        Caller::local()
    } else {
        Caller::remote(principal, Vec::new())
    };
    let sessions = modhost::SessionScope::new();
    let mut connection = Connection {
        backend,
        outbox,
        session: Session::default(),
        roots: ClientRoots {
            protected,
            ..ClientRoots::default()
        },
        questions: Arc::new(Questions::default()),
        approvals,
        caller: Arc::new(caller),
        name_caller: false,
        listeners,
        lockdown: Arc::new(ConnectionLockdown::with_sessions(sessions.clone())),
        live,
        running: HashMap::new(),
        calls: JoinSet::new(),
        server_sessions: Some(sessions),
    };
    let mut reader = reader;
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    // The stop is raced against all of a message's handling, not only the
    // read: a client that stops reading fills the outbox, and a send then
    // waits for ever.
    let mut stopped = false;
    let read_result = loop {
        let handled = tokio::select! {
            handled = connection.handle_next(&mut reader, &mut framer) => handled,
            () = &mut stop => {
                stopped = true;
                Some(Ok(()))
            }
        };
        if let Some(result) = handled {
            break result;
        }
    };
    // EOF, a broken stdin or the stop: end every call, and wait until each
    // one's future is dropped, so its module process is gone before we
    // return. After a stop nothing more is written: the client may have
    // stopped reading, and the writer's pending write would never end.
    if let Some(announcer) = announcer {
        announcer.abort();
    }
    if stopped {
        writer_task.abort();
    }
    connection.calls.shutdown().await;
    // The connection's session processes (and whatever they started) go
    // with it.
    if let Some(sessions) = &connection.server_sessions {
        sessions.end();
    }
    // After EOF the subscriptions' closing results and the last responses
    // are written, unless a stop comes first (a client that stopped
    // reading would hold either for ever).
    let write_result = if stopped {
        drop(connection);
        Ok(())
    } else {
        let flushed = async {
            connection.close_subscriptions().await;
            drop(connection);
            (&mut writer_task).await.unwrap_or(Ok(()))
        };
        tokio::select! {
            written = flushed => written,
            () = &mut stop => {
                writer_task.abort();
                Ok(())
            }
        }
    };
    read_result.and(write_result)
}

impl<B: Backend> Connection<B> {
    /// Read and handle the next client message; `Some` when the connection
    /// ends (EOF, or stdin broke).
    async fn handle_next<R: AsyncBufRead + Unpin>(
        &mut self,
        reader: &mut R,
        framer: &mut LineFramer,
    ) -> Option<std::io::Result<()>> {
        let framed = match line::next_line(reader, framer).await {
            Ok(Some(framed)) => framed,
            Ok(None) => return Some(Ok(())),
            Err(e) => return Some(Err(e)),
        };
        while self.calls.try_join_next().is_some() {}
        self.running.retain(|_, handle| !handle.is_finished());
        let message = match framed {
            Framed::Oversized { bytes } => {
                tracing::warn!(
                    "skipped a client line of {bytes} bytes (the cap is {MAX_LINE_BYTES})"
                );
                self.send(&Message::Response(line::oversized_response(bytes)))
                    .await;
                return None;
            }
            Framed::Line(raw) => match line::decode(&raw) {
                Decoded::Blank => return None,
                Decoded::Invalid(response) => {
                    self.send(&Message::Response(response)).await;
                    return None;
                }
                Decoded::Message(message) => message,
            },
        };
        match message {
            Message::Request(request) => self.request(request).await,
            Message::Notification(n) => self.notification(&n).await,
            // Answers to our questions, then to our `roots/list`; any other
            // response is nobody's and ignored.
            Message::Response(response) => {
                if let Some(response) = self.questions.answered(response) {
                    self.roots.answered(response);
                }
            }
        }
        None
    }

    /// Queue `message` for the writer, waiting while the outbox is full.
    async fn send(&self, message: &Message) {
        send(&self.outbox, message).await;
    }

    async fn reply(&self, id: Id, outcome: Result<Value, RpcError>) {
        let response = Response { id, outcome };
        self.send(&Message::Response(response)).await;
    }

    async fn request(&mut self, request: Request) {
        let id = request.id.clone();
        if request.method == "initialize" {
            let result = self.initialize(&request);
            return self.reply(id, Ok(result)).await;
        }
        let served = match self.served(&request) {
            Ok(served) => served,
            Err(e) => return self.reply(id, Err(*e)).await,
        };
        let revision = served.revision;
        let stateless = revision.era == Era::Stateless;
        let ttl = if self.live {
            protocol::TTL_MS_LIVE
        } else {
            protocol::TTL_MS_FIXED
        };
        let result = match request.method.as_str() {
            "ping" if revision.ping => json!({}),
            "server/discover" if stateless => protocol::discover_result(revision, self.live, ttl),
            "tools/list" => {
                let tools = self.backend.list_tools_for(&self.caller);
                protocol::tools_list_result(revision, tools, ttl)
            }
            "subscriptions/listen" if stateless => return self.listen(&request).await,
            "tools/call" => return self.call(request, served).await,
            other => {
                let error = RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("method not found in MCP {}: {other}", revision.version),
                );
                return self.reply(id, Err(error)).await;
            }
        };
        self.reply(id, Ok(result)).await;
    }

    /// Answer `initialize`: the negotiated handshake revision, remembered
    /// with the client's capabilities for the rest of the connection.
    fn initialize(&mut self, request: &Request) -> Value {
        let params = request.params.as_ref();
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str);
        let revision = revision::negotiate(requested);
        let capabilities = params
            .and_then(|p| p.get("capabilities"))
            .cloned()
            .unwrap_or(Value::Null);
        self.roots.offered =
            revision.roots_request && capabilities.get("roots").is_some_and(Value::is_object);
        self.session = Session {
            revision: Some(revision),
            capabilities,
        };
        protocol::initialize_result(revision, self.live)
    }

    /// The revision `request` is served in: the one its `_meta` names (the
    /// stateless era, which also requires the client's capabilities there),
    /// else its connection's.
    fn served(&self, request: &Request) -> Result<Served, Box<RpcError>> {
        let meta = request.params.as_ref().and_then(|p| p.get("_meta"));
        let Some(version) = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) else {
            if matches!(
                request.method.as_str(),
                "server/discover" | "subscriptions/listen"
            ) {
                return Err(Box::new(missing_meta(
                    &request.method,
                    META_PROTOCOL_VERSION,
                )));
            }
            return Ok(Served {
                revision: self
                    .session
                    .revision
                    .unwrap_or_else(revision::latest_handshake),
                capabilities: self.session.capabilities.clone(),
            });
        };
        let Some(version) = version.as_str() else {
            return Err(Box::new(RpcError::new(
                ErrorCode::InvalidParams,
                format!("_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"),
            )));
        };
        let revision = revision::find(version)
            .filter(|r| r.era == Era::Stateless)
            .ok_or_else(|| Box::new(protocol::unsupported_version(version)))?;
        match meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)) {
            Some(capabilities @ Value::Object(_)) => Ok(Served {
                revision,
                capabilities: capabilities.clone(),
            }),
            _ => Err(Box::new(missing_meta(
                &request.method,
                META_CLIENT_CAPABILITIES,
            ))),
        }
    }

    async fn notification(&mut self, n: &Notification) {
        match n.method.as_str() {
            "notifications/initialized" => {
                // The handshake is done: from now on this client hears of
                // tool-list changes (it was told `listChanged: true` only
                // when they exist), and its roots are asked for.
                if self.live && self.session.revision.is_some() {
                    self.listeners
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .handshake = true;
                }
                self.ask_roots().await;
            }
            "notifications/roots/list_changed" => self.ask_roots().await,
            "notifications/cancelled" => self.cancelled(n),
            // Anything else needs no action.
            _ => {}
        }
    }

    async fn ask_roots(&mut self) {
        if self.roots.offered {
            let request = self.roots.ask();
            self.send(&Message::Request(request)).await;
        }
    }

    /// Stop the call (or end the subscription) the client cancelled. No
    /// response follows, as the spec asks.
    fn cancelled(&mut self, n: &Notification) {
        let Some(request_id) = n.params.as_ref().and_then(|p| p.get("requestId")) else {
            return;
        };
        let id = match request_id {
            Value::String(s) => Id::Str(s.clone()),
            Value::Number(num) => match num.as_i64() {
                Some(i) => Id::Num(i),
                None => return,
            },
            _ => return,
        };
        // Unknown or finished ids are ignored, as the spec allows: the call
        // may have completed while the cancellation was in flight.
        if let Some(handle) = self.running.remove(&id) {
            handle.abort();
        }
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .close(&id);
    }

    /// `subscriptions/listen` (2026-07-28): acknowledge what is honored
    /// (the tool list, when it can change) and keep the stream open.
    async fn listen(&mut self, request: &Request) {
        let wants_tools = request
            .params
            .as_ref()
            .and_then(|p| p.pointer("/notifications/toolsListChanged"))
            == Some(&json!(true));
        let honored = wants_tools && self.live;
        let opened = {
            let mut listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
            let full = listeners.subscriptions.len() >= MAX_SUBSCRIPTIONS
                || listeners
                    .subscriptions
                    .iter()
                    .any(|(id, _)| *id == request.id);
            if !full {
                listeners.subscriptions.push((request.id.clone(), honored));
            }
            !full
        };
        if !opened {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "at most {MAX_SUBSCRIPTIONS} subscriptions/listen streams, each with its own id, \
                     may be open at once; cancel one (notifications/cancelled) first"
                ),
            );
            return self.reply(request.id.clone(), Err(error)).await;
        }
        let _ = self
            .outbox
            .send(list_changes::acknowledgment(&request.id, honored))
            .await;
    }

    /// The server is stopping: close every open stream with its result.
    async fn close_subscriptions(&self) {
        let open = std::mem::take(
            &mut self
                .listeners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .subscriptions,
        );
        let Some(revision) = revision::REVISIONS.iter().find(|r| r.era == Era::Stateless) else {
            return;
        };
        for (id, _) in open {
            let result = list_changes::closing_result(revision, &id);
            self.reply(id, Ok(result)).await;
        }
    }

    /// A `tools/call`: run it, ask the user first, or say why not.
    async fn call(&mut self, request: Request, served: Served) {
        let revision = served.revision;
        let id = request.id.clone();
        // An id must not be reused while its call runs: the older call
        // would lose its handle, so a cancellation naming that id would
        // stop only the newer one, and the older (say, waiting for a yes)
        // would still run.
        if self.running.contains_key(&id) {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "request id {id} is already in use by a call that is still running; \
                     give each request its own id"
                ),
            );
            return self.reply(id, Err(error)).await;
        }
        let mut params = request.params.unwrap_or(Value::Null);
        let Some(name) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            let error = RpcError::new(
                ErrorCode::InvalidParams,
                "tools/call needs params.name (a string)",
            );
            return self.reply(id, Err(error)).await;
        };
        // Moved out, not copied: nothing below reads them from `params`.
        let arguments = match params.get_mut("arguments").map(Value::take) {
            None | Some(Value::Null) => json!({}),
            Some(v) => v,
        };
        // The connection's lockdown as this call is read: every result the
        // client could have read before sending it was recorded by now.
        let lockdown = self.lockdown.current();
        // Refused before anything is asked or spent (a stateless approval
        // is consumed when presented).
        if self.calls.len() >= MAX_CONCURRENT_CALLS {
            let mut record = refusal_record(&name, &arguments, HostErrorKind::RateLimited);
            record.rule = Some(SERVER_BOUND);
            record.retry_after_s = Some(1);
            self.refused(record);
            let refused = self.call_result(revision, &too_many_calls(), lockdown.as_ref());
            return self.reply(id, Ok(refused)).await;
        }
        let approval = match self
            .backend
            .approval_rule_for(&self.caller, &name, lockdown.as_ref())
        {
            None => Approval::NotNeeded,
            Some(ask) => {
                let rule = ask.rule.clone();
                let can_answer = elicitation::client_can_answer(Some(&served.capabilities));
                let shown = arguments.to_string().len();
                match revision.ask_user {
                    // A yes is only asked for what the user can read whole.
                    AskUser::Request { .. } | AskUser::InputRequired
                        if can_answer && shown > elicitation::MAX_SHOWN_ARGUMENTS =>
                    {
                        let why = format!(
                            "its arguments are {shown} bytes, more than the {} the question \
                             shows in full, and a yes to arguments you cannot read is not asked for",
                            elicitation::MAX_SHOWN_ARGUMENTS
                        );
                        self.record_unasked(&name, &arguments, &rule);
                        let refused = cannot_ask_because(&name, &ask, &why, lockdown.as_ref());
                        let result = self.call_result(revision, &refused, lockdown.as_ref());
                        return self.reply(id, Ok(result)).await;
                    }
                    AskUser::Request { .. } if can_answer => {
                        if let Err(limited) = self.backend.admit_question_from(&self.caller) {
                            let outcome = self.not_asked(&name, &arguments, &rule, &limited);
                            let result = self.call_result(revision, &outcome, lockdown.as_ref());
                            return self.reply(id, Ok(result)).await;
                        }
                        Approval::AskFirst(elicitation::question(
                            revision, &name, &rule, &arguments,
                        ))
                    }
                    AskUser::InputRequired if can_answer => {
                        let asked = (name.as_str(), rule.as_str(), &arguments);
                        match self.round_trip(revision, &params, asked, lockdown.as_ref()) {
                            RoundTrip::Approved => Approval::Given,
                            RoundTrip::Answer(outcome) => return self.reply(id, outcome).await,
                        }
                    }
                    // 2026-07-28: a request that needs a capability its
                    // `_meta` did not declare is answered with -32021
                    // (basic/index, "_meta"), never inferred from elsewhere.
                    AskUser::InputRequired => {
                        self.record_unasked(&name, &arguments, &rule);
                        let how = cannot_ask(&name, &ask, revision, lockdown.as_ref()).text;
                        let remedy = format!(
                            "declare {{\"elicitation\": {{\"form\": {{}}}}}} in \
                             _meta[\"{META_CLIENT_CAPABILITIES}\"] so the user can be asked. {how}"
                        );
                        let error = protocol::missing_elicitation(&name, &remedy);
                        return self.reply(id, Err(error)).await;
                    }
                    _ => {
                        self.record_unasked(&name, &arguments, &rule);
                        let refused = cannot_ask(&name, &ask, revision, lockdown.as_ref());
                        let result = self.call_result(revision, &refused, lockdown.as_ref());
                        return self.reply(id, Ok(result)).await;
                    }
                }
            }
        };
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| is_progress_token(t))
            .cloned();
        let call = Invocation {
            revision,
            name,
            arguments,
            // A stateless request relies on no prior connection state
            // (2026-07-28): a handshake's roots are not its workspace. A
            // connection whose roots were all refused keeps none, though:
            // switching eras must not get the host's back.
            workspace: match (revision.era, &self.roots.workspace) {
                (Era::Handshake, workspace) => workspace.clone(),
                (Era::Stateless, withheld @ CallWorkspace::Withheld(_)) => withheld.clone(),
                (Era::Stateless, _) => CallWorkspace::Host,
            },
            approval,
            token,
            lockdown,
        };
        // The client's trace (`_meta.traceparent`, W3C), continued by the
        // call's span (`modhost::telemetry`).
        let meta = params.get("_meta");
        let trace = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
        let (traceparent, tracestate) = (trace("traceparent"), trace("tracestate"));
        let backend = Arc::clone(&self.backend);
        let outbox = self.outbox.clone();
        let questions = Arc::clone(&self.questions);
        let state = Arc::clone(&self.lockdown);
        let caller = Arc::clone(&self.caller);
        let name_caller = self.name_caller;
        let task_id = id.clone();
        let sessions = self.server_sessions.clone();
        let handle = self
            .calls
            .spawn(with_remote_parent(traceparent, tracestate, async move {
                let asked = (&outbox, questions.as_ref());
                let running = run_call(backend.as_ref(), &caller, call, asked, &state);
                let response = match &sessions {
                    Some(sessions) => sessions.run(running).await,
                    None => running.await,
                };
                let message = match response {
                    Ok(outcome) => {
                        // Entered before the result goes out (`lockdown.rs`).
                        if let Some(entered) = &outcome.enters_lockdown {
                            state.enter(entered.clone());
                        }
                        let result =
                            protocol::call_result(revision, &outcome, state.current().as_ref());
                        let result = if name_caller {
                            with_principal(result, &caller)
                        } else {
                            result
                        };
                        Response::ok(task_id, result)
                    }
                    Err(e) => Response::err(task_id, call_error(&e)),
                };
                send(&outbox, &Message::Response(message)).await;
            }));
        self.running.insert(id, handle);
    }

    /// The stateless era's approval: ask with an `input_required` result, or
    /// read the answer the client's retry brings with our `requestState`.
    /// `asked` is the call: its tool, the rule that asks, its arguments.
    fn round_trip(
        &mut self,
        revision: &Revision,
        params: &Value,
        asked: (&str, &str, &Value),
        lockdown: Option<&Lockdown>,
    ) -> RoundTrip {
        let (name, rule, arguments) = asked;
        if let Some(state) = params.get("requestState") {
            let redeemed = match state.as_str() {
                Some(state) => {
                    self.approvals
                        .redeem(state, name, arguments, &self.caller.principal)
                }
                None => Err(elicitation::StateRefused::NotOurs),
            };
            if let Err(refused) = redeemed {
                let why = refused.to_string();
                let mut record = refusal_record(name, arguments, HostErrorKind::ApprovalRequired);
                record.rule = Some(&why);
                self.refused(record);
                let error = RpcError::new(ErrorCode::InvalidParams, format!("not run: {refused}"))
                    .with_data(modproto::ErrorData::new(
                        modproto::ModuleErrorKind::Denied,
                        "call the tool again without requestState and inputResponses; the user is asked anew",
                    ));
                return RoundTrip::Answer(Err(error));
            }
            let answer = params
                .get("inputResponses")
                .and_then(|r| r.get(elicitation::APPROVAL_KEY));
            match answer.map(elicitation::read_answer) {
                Some(Answer::Approved) => return RoundTrip::Approved,
                Some(Answer::Refused(why)) => {
                    let mut record =
                        refusal_record(name, arguments, HostErrorKind::ApprovalRequired);
                    record.rule = Some(rule);
                    record.by = Some("user");
                    self.refused(record);
                    let outcome = not_approved(name, &why);
                    let result = self.call_result(revision, &outcome, lockdown);
                    return RoundTrip::Answer(Ok(result));
                }
                // The retry lacks the answer: ask again.
                None => {}
            }
        }
        if let Err(limited) = self.backend.admit_question_from(&self.caller) {
            let outcome = self.not_asked(name, arguments, rule, &limited);
            return RoundTrip::Answer(Ok(self.call_result(revision, &outcome, lockdown)));
        }
        let state = match self
            .approvals
            .issue(name, arguments, &self.caller.principal)
        {
            Ok(state) => state,
            Err(e) => {
                let error = RpcError::new(
                    ErrorCode::InternalError,
                    format!("not run: could not open an approval question ({e})"),
                );
                return RoundTrip::Answer(Err(error));
            }
        };
        let requests = json!({
            elicitation::APPROVAL_KEY: {
                "method": "elicitation/create",
                "params": elicitation::question(revision, name, rule, arguments),
            }
        });
        RoundTrip::Answer(Ok(protocol::input_required_result(
            revision, &requests, &state,
        )))
    }
}

/// What a call needs before it runs.
#[derive(Debug)]
enum Approval {
    /// Nothing: its verdict is allow (or deny, which the backend refuses),
    /// or approval is delegated.
    NotNeeded,
    /// The user's yes, asked with these `elicitation/create` params.
    AskFirst(Value),
    /// The user already said yes (stateless round trip).
    Given,
}

/// Where a stateless approval stands.
enum RoundTrip {
    Approved,
    /// Answer the request with this, and run nothing.
    Answer(Result<Value, RpcError>),
}

fn missing_meta(method: &str, key: &str) -> RpcError {
    RpcError::new(
        ErrorCode::InvalidParams,
        format!(
            "{method} needs params._meta[\"{key}\"] (MCP 2026-07-28 requests carry \
             {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES} in _meta)"
        ),
    )
}

/// What the user is told (through the model) when a call waits for an
/// approval this client cannot ask for.
fn cannot_ask(
    name: &str,
    ask: &ApprovalAsk,
    revision: &Revision,
    lockdown: Option<&Lockdown>,
) -> ToolOutcome {
    let why = match revision.ask_user {
        AskUser::Never => format!("MCP {} has no elicitation", revision.version),
        _ => "this client did not declare the elicitation capability (form)".to_owned(),
    };
    cannot_ask_because(name, ask, &why, lockdown)
}

/// [`cannot_ask`], for a reason the caller states. A call the lockdown
/// keeps for the user's yes is told so, since no line of `config.toml`
/// and no delegation allows it then.
fn cannot_ask_because(
    name: &str,
    ask: &ApprovalAsk,
    why: &str,
    lockdown: Option<&Lockdown>,
) -> ToolOutcome {
    let rule = &ask.rule;
    if let (true, Some(lockdown)) = (ask.lockdown, lockdown) {
        return ToolOutcome::failure(format!(
            "not run: {name} needs your approval ({rule}) and the server cannot ask you: {why}. \
             This connection is locked down since {} returned untrusted content: a tool that \
             writes or runs programs runs only after you approve that one call, which neither \
             config.toml nor --delegate-approval can do for you. Use a client that can ask you \
             (elicitation), or continue in a new connection, which starts without lockdown.",
            lockdown.since
        ));
    }
    ToolOutcome::failure(format!(
        "not run: {name} needs approval ({rule}) and the server cannot ask you: {why}. \
         To allow it, add to config.toml:\n\n[[approval.rules]]\ntool = \"{name}\"\ndecision = \"allow\"\n\n\
         or start the server with `modhost mcp --delegate-approval` (the client then approves every call)."
    ))
}

/// The result of a call the user did not approve.
fn not_approved(name: &str, why: &str) -> ToolOutcome {
    ToolOutcome::failure(format!(
        "not run: {name} needs approval and {why}; nothing was executed"
    ))
}

/// The longest progress token (as JSON) a call's progress is sent with.
pub(crate) const MAX_PROGRESS_TOKEN_BYTES: usize = 256;

/// Whether `token` is a `ProgressToken` (a string or a number, every
/// revision) short enough to repeat on every report: a token of megabytes
/// would be copied into each notification, many times what the client sent.
/// Any other token gets no progress (the receiver is not obliged to send it).
fn is_progress_token(token: &Value) -> bool {
    match token {
        Value::String(s) => s.len() <= MAX_PROGRESS_TOKEN_BYTES,
        Value::Number(_) => true,
        _ => false,
    }
}

/// What the client said about its roots.
#[derive(Debug, Default)]
struct ClientRoots {
    /// The client declared the `roots` capability in `initialize`.
    offered: bool,
    /// How many `roots/list` requests were sent (their ids are numbered).
    asked: u64,
    /// The workspace of the latest answer, given to every call from then on.
    workspace: CallWorkspace,
    /// What no root may overlap ([`Backend::protected_dirs`]).
    protected: Vec<PathBuf>,
}

impl ClientRoots {
    /// The next `roots/list` request.
    fn ask(&mut self) -> Request {
        self.asked += 1;
        Request::new(
            Id::Str(format!("modhost-roots-{}", self.asked)),
            "roots/list",
            None,
        )
    }

    /// Take the workspace from the answer to the latest `roots/list`; an
    /// answer to an earlier one (the roots changed since) is ignored.
    fn answered(&mut self, response: Response) {
        if self.asked == 0 || response.id != Id::Str(format!("modhost-roots-{}", self.asked)) {
            return;
        }
        let result = match response.outcome {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!(
                    "the client did not list its roots ({}); the workspace stays as it was",
                    e.message
                );
                return;
            }
        };
        match super::roots::workspace_from_roots(&result, &self.protected) {
            Ok(chosen) => {
                if chosen.offered > 1 {
                    tracing::warn!(
                        "the client sent {} roots; the workspace is the first usable one, {}, and the others are not granted",
                        chosen.offered,
                        chosen.path.display()
                    );
                } else {
                    tracing::info!(
                        "the workspace is the client's root {}",
                        chosen.path.display()
                    );
                }
                self.workspace = CallWorkspace::Given(chosen.path);
            }
            // Listing nothing names no folder: the host's workspace stays.
            Err(NoWorkspace::NoRoots) => {
                tracing::info!("the client lists no roots; calls get the host's workspace");
                self.workspace = CallWorkspace::Host;
            }
            // It named folders, none grantable: its calls act on none, not
            // on the host's (a folder it never pointed at).
            Err(NoWorkspace::Refused(reason)) => {
                tracing::warn!(
                    "no usable root from the client ({reason}); its calls get no workspace"
                );
                self.workspace = CallWorkspace::Withheld(format!(
                    "none of the client's roots may be the workspace: {reason}"
                ));
            }
        }
    }
}

/// The result of a call refused because [`MAX_CONCURRENT_CALLS`] are running.
fn too_many_calls() -> ToolOutcome {
    ToolOutcome::failure(format!(
        "not run: this server is already running {MAX_CONCURRENT_CALLS} calls for this client, \
         its limit; wait for one of them to finish (or cancel one), then call again"
    ))
}

/// The rule a call refused for [`MAX_CONCURRENT_CALLS`] is recorded under.
const SERVER_BOUND: &str = "modhost mcp runs at most 16 calls at once for one client";

/// The audit record of a call of `name` with `arguments` the server
/// refused, of `kind`; its caller adds the rule and who said no.
fn refusal_record<'a>(name: &'a str, arguments: &'a Value, kind: HostErrorKind) -> RefusedCall<'a> {
    RefusedCall::new(name, arguments, kind.into())
}

impl<B: Backend> Connection<B> {
    /// Record a call that needed the user's yes and could not be asked.
    fn record_unasked(&self, name: &str, arguments: &Value, rule: &str) {
        let mut record = refusal_record(name, arguments, HostErrorKind::ApprovalRequired);
        record.rule = Some(rule);
        self.refused(record);
    }

    /// The result of a call that needed the user's yes when the server may
    /// ask no more questions this minute (`[quotas]
    /// elicitations_per_minute`); recorded as `rate_limited`.
    fn not_asked(
        &self,
        name: &str,
        arguments: &Value,
        rule: &str,
        limited: &RateLimited,
    ) -> ToolOutcome {
        let mut record = refusal_record(name, arguments, HostErrorKind::RateLimited);
        record.rule = Some(rule);
        record.retry_after_s = Some(limited.retry_after_s);
        self.refused(record);
        ToolOutcome::failure(format!(
            "not run (rate_limited): {name} needs approval ({rule}) and the user was not asked: {limited}. What to do: {}",
            limited.remedy()
        ))
    }
}

/// Queue `message` for the writer, waiting while the outbox is full.
async fn send(outbox: &Outbox, message: &Message) {
    // A closed outbox means the writer died (the client went away); the
    // reader will see EOF next.
    let _ = outbox.send(message.to_line()).await;
}

/// One tool call as its task gets it.
struct Invocation {
    revision: &'static Revision,
    name: String,
    arguments: Value,
    /// The client's workspace (its first usable root, none, or the host's).
    workspace: CallWorkspace,
    approval: Approval,
    /// The client's progress token, when it asked for progress.
    token: Option<Value>,
    /// The connection's lockdown as the call was read.
    lockdown: Option<Lockdown>,
}

/// Ask the user `question` through the client; the answer, a no when it
/// does not come within [`elicitation::ANSWER_TIMEOUT`].
async fn ask_user(question: Value, outbox: &Outbox, questions: &Questions) -> Answer {
    let (id, answer) = questions.open();
    send(
        outbox,
        &Message::Request(Request::new(id, "elicitation/create", Some(question))),
    )
    .await;
    match tokio::time::timeout(elicitation::ANSWER_TIMEOUT, answer).await {
        Ok(Ok(response)) => elicitation::read_response(response),
        Ok(Err(_)) => Answer::Refused("the question was dropped unanswered".into()),
        Err(_) => Answer::Refused(format!(
            "the user did not answer within {} s",
            elicitation::ANSWER_TIMEOUT.as_secs()
        )),
    }
}

/// Run the call (after the user's yes, when it needs one), forwarding
/// progress as `notifications/progress` when the client asked for it. Every
/// progress line is sent before the response.
async fn run_call<B: Backend>(
    backend: &B,
    caller: &Caller,
    call: Invocation,
    (outbox, questions): (&Outbox, &Questions),
    connection: &ConnectionLockdown,
) -> Result<ToolOutcome, CallError> {
    let Invocation {
        revision,
        name,
        arguments,
        workspace,
        approval,
        token,
        lockdown,
    } = call;
    let approved = match approval {
        Approval::NotNeeded => false,
        Approval::Given => true,
        Approval::AskFirst(question) => match ask_user(question, outbox, questions).await {
            Answer::Approved => true,
            Answer::Refused(why) => {
                let mut record = refusal_record(&name, &arguments, HostErrorKind::ApprovalRequired);
                record.by = Some("user");
                record.principal = (!caller.local).then_some(caller.principal.as_str());
                backend.refused(&record);
                return Ok(not_approved(&name, &why));
            }
        },
    };
    let (name, workspace, lockdown) = (name.as_str(), &workspace, lockdown.as_ref());
    let start = move |progress| async move {
        backend
            .call_tool_as(
                caller, name, arguments, progress, workspace, lockdown, approved,
            )
            .await
    };
    let Some(token) = token else {
        return start(None).await;
    };
    let (sink, mut reports) = mpsc::channel::<Progress>(PROGRESS_REPORTS);
    let call = start(Some(sink));
    tokio::pin!(call);
    let mut last: Option<f64> = None;
    let mut forward = |p: Progress| {
        // The spec requires progress to increase; a module that repeats or
        // goes backwards is not forwarded rather than forwarded wrong.
        if last.is_some_and(|l| p.progress <= l) {
            return;
        }
        last = Some(p.progress);
        let mut params = json!({"progressToken": token, "progress": p.progress});
        if let Some(total) = p.total {
            params["total"] = json!(total);
        }
        if let Some(message) = p.message {
            // The module's words reach the client now, before any result:
            // the connection is locked from here, even if the call is then
            // cancelled and never answers (`lockdown.rs`).
            if let Some(taint) = backend.taint_of(name) {
                connection.enter(taint);
            }
            params["message"] = json!(message);
        }
        let params = keep_fields(params, revision.progress);
        // Dropped when the outbox is full: progress is advisory, and a
        // client that does not read must not make reports pile up.
        let line = Message::Notification(Notification::new("notifications/progress", Some(params)));
        let _ = outbox.try_send(line.to_line());
    };
    loop {
        tokio::select! {
            biased;
            Some(report) = reports.recv() => forward(report),
            result = &mut call => {
                while let Ok(report) = reports.try_recv() {
                    forward(report);
                }
                return result;
            }
        }
    }
}

/// `result` (a `tools/call` result) with the principal the call was made
/// for in its `_meta` ([`META_PRINCIPAL`]).
pub(crate) fn with_principal(mut result: Value, caller: &Caller) -> Value {
    if let Value::Object(map) = &mut result {
        let meta = map.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(META_PRINCIPAL.into(), json!(caller.principal));
        }
    }
    result
}

/// What one request's connection is made of over HTTP (`http/exchange.rs`):
/// the parts a handshake session or a whole server shares, and the sink of
/// this request's messages.
pub(crate) struct ExchangeParts<B> {
    pub(crate) backend: Arc<B>,
    /// Where this request's messages go: its JSON body or its SSE stream.
    pub(crate) outbox: Outbox,
    pub(crate) session: Session,
    pub(crate) caller: Arc<Caller>,
    /// The session's server-to-client questions (handshake era).
    pub(crate) questions: Arc<Questions>,
    pub(crate) approvals: ApprovalStates,
    pub(crate) lockdown: Arc<ConnectionLockdown>,
    pub(crate) live: bool,
}

impl<B: Backend> Connection<B> {
    /// A connection for one HTTP request. Its calls get the host's
    /// workspace: no client root is asked for (`http.rs` says why).
    pub(crate) fn for_exchange(parts: ExchangeParts<B>) -> Connection<B> {
        let protected = parts.backend.protected_dirs();
        Connection {
            backend: parts.backend,
            outbox: parts.outbox,
            session: parts.session,
            roots: ClientRoots {
                protected,
                ..ClientRoots::default()
            },
            questions: parts.questions,
            approvals: parts.approvals,
            caller: parts.caller,
            name_caller: true,
            listeners: Arc::new(Mutex::new(Listeners::default())),
            lockdown: parts.lockdown,
            live: parts.live,
            running: HashMap::new(),
            calls: JoinSet::new(),
            server_sessions: None,
        }
    }

    /// Serve one request; a call runs on as a task of this connection.
    pub(crate) async fn serve_request(&mut self, request: Request) {
        self.request(request).await;
    }

    /// The running call of request `id`, to stop it.
    pub(crate) fn running_call(&self, id: &Id) -> Option<AbortHandle> {
        self.running
            .get(id)
            .filter(|handle| !handle.is_finished())
            .cloned()
    }

    /// Stop the connection's calls and wait until each one's future (and
    /// so its module's process group) is gone.
    pub(crate) async fn finish(mut self) {
        self.calls.shutdown().await;
    }

    /// The connection's `subscriptions/listen` streams (`list_changes.rs`).
    pub(crate) fn listeners(&self) -> SharedListeners {
        Arc::clone(&self.listeners)
    }

    /// End each open `subscriptions/listen` stream with its closing result.
    pub(crate) async fn close_streams(&self) {
        self.close_subscriptions().await;
    }

    /// Record a refusal the server decided, for this connection's caller.
    fn refused<'a>(&'a self, mut record: RefusedCall<'a>) {
        if !self.caller.local {
            record.principal = Some(&self.caller.principal);
        }
        self.backend.refused(&record);
    }

    /// A `tools/call` result for `outcome`, naming this connection's caller.
    fn call_result(
        &self,
        revision: &Revision,
        outcome: &ToolOutcome,
        lockdown: Option<&Lockdown>,
    ) -> Value {
        let result = protocol::call_result(revision, outcome, lockdown);
        if self.name_caller {
            with_principal(result, &self.caller)
        } else {
            result
        }
    }
}

fn call_error(e: &CallError) -> RpcError {
    let remedy = match e {
        CallError::UnknownTool(_) => "call tools/list for the tools this server offers".to_owned(),
        CallError::Refused(r) => r.remedy().to_owned(),
    };
    let kind = match e {
        CallError::UnknownTool(_) => modproto::ModuleErrorKind::NotFound,
        CallError::Refused(_) => modproto::ModuleErrorKind::Denied,
    };
    RpcError::new(ErrorCode::InvalidParams, e.to_string())
        .with_data(modproto::ErrorData::new(kind, remedy))
}

#[cfg(test)]
mod tests;
