//! The MCP client side of one call: the bridge talks to the server it
//! started over the server's stdin and stdout, one JSON-RPC message a line.
//!
//! Design decisions:
//!
//! - **Written here, small and synchronous,** rather than an SDK's client:
//!   one call is four requests in a row, every read is bounded, and a
//!   process started per call should not pay for an async runtime.
//! - **Every line is bounded** by the call's output bound
//!   (`max_output_bytes`): a longer one stops the reading at the bound,
//!   with `mcp_message_too_large`, so a server cannot make the bridge hold
//!   more than the host would ever take from it. The reading runs on a
//!   thread of its own, so the bridge keeps reading while it writes (no
//!   deadlock on full pipes while the server reads its input), at most
//!   [`READ_AHEAD_LINES`] lines ahead (a server that writes without end
//!   and never reads waits on its pipe until the deadline, rather than
//!   filling memory), and is never joined: a server's child still holding
//!   the pipe cannot keep the bridge from answering.
//! - **Bounded conversation.** While the bridge waits for an answer (each
//!   wait counted afresh, so a session's calls do not use up each other's
//!   bound) the server may ask at most [`MAX_SERVER_REQUESTS`] things of it, and
//!   `tools/list` is followed for at most [`MAX_PAGES`] pages, no cursor
//!   twice and no tool name twice: nothing a server sends makes the bridge
//!   work without end short of the deadline.
//! - **Strict shape, no guessing.** A line that is not a JSON-RPC 2.0
//!   message, or a response to a request the bridge did not send, is
//!   `mcp_bad_message`, quoting the start of the line.
//! - **The server gets only what the call was granted.** Its `roots/list`
//!   is answered with the call's roots, its `ping` with `{}`, and any other
//!   request (sampling, elicitation) with "method not found": the bridge
//!   has no model to lend and no person to ask.

use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

use modproto::{LogParams, ProgressParams};
use serde_json::{Map, Value, json};

use crate::error::{BridgeError, BridgeKind};

/// The revision the bridge asks for first.
pub(crate) const LATEST_REVISION: &str = "2025-11-25";

/// The revisions whose messages the bridge reads (tool results with
/// `structuredContent` and resource links came in 2025-06-18; earlier
/// servers simply send neither).
pub(crate) const KNOWN_REVISIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// How many `tools/list` pages are followed before the server is called
/// unreasonable.
const MAX_PAGES: usize = 100;

/// How many requests (`roots/list`, `ping`, ...) the server may send while
/// the bridge waits for one answer: a few are normal, an endless stream is
/// a server keeping the bridge busy answering until the deadline.
pub(crate) const MAX_SERVER_REQUESTS: usize = 1000;

/// How many lines the reading thread reads ahead of the bridge: a server
/// that writes faster than the bridge handles waits on its pipe, rather
/// than filling the bridge's memory.
const READ_AHEAD_LINES: usize = 64;

/// One thing the reading thread saw.
#[derive(Debug)]
pub(crate) enum Incoming {
    Line(Vec<u8>),
    /// A line longer than the bound; nothing more is read.
    TooLarge {
        limit: u64,
    },
    /// The server's output ended.
    Closed,
    /// Reading failed.
    Failed(String),
}

/// Read `reader` line by line on a thread of its own, each line at most
/// `limit` bytes, into the returned channel.
pub(crate) fn read_lines<R: Read + Send + 'static>(reader: R, limit: u64) -> Receiver<Incoming> {
    let (sender, receiver) = sync_channel(READ_AHEAD_LINES);
    std::thread::spawn(move || read_into(BufReader::new(reader), limit, &sender));
    receiver
}

fn read_into(mut reader: impl BufRead, limit: u64, sender: &SyncSender<Incoming>) {
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(limit.saturating_add(1))
            .read_until(b'\n', &mut line);
        let incoming = match read {
            Ok(0) => Incoming::Closed,
            Ok(_) if line.last() != Some(&b'\n') && line.len() as u64 > limit => {
                Incoming::TooLarge { limit }
            }
            Ok(_) => {
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                Incoming::Line(line)
            }
            Err(e) => Incoming::Failed(e.to_string()),
        };
        let last = !matches!(incoming, Incoming::Line(_));
        if sender.send(incoming).is_err() || last {
            return;
        }
    }
}

/// Where the server's progress and log messages go (the bridge's own
/// stdout during a call, nowhere while tools are listed at install).
pub(crate) trait Relay {
    fn progress(&mut self, progress: ProgressParams);
    fn log(&mut self, log: LogParams);
}

/// A relay that drops everything.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Silent;

impl Relay for Silent {
    fn progress(&mut self, _: ProgressParams) {}
    fn log(&mut self, _: LogParams) {}
}

/// A root offered to the server in `roots/list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OfferedRoot {
    pub(crate) name: String,
    pub(crate) path: String,
}

/// A JSON-RPC error the server answered a request with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerRpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
}

/// What `initialize` said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Initialized {
    pub(crate) protocol_version: String,
    pub(crate) server_info: Value,
}

/// The client side of one server's stdio.
pub(crate) struct Session<W: Write> {
    to_server: W,
    incoming: Receiver<Incoming>,
    next_id: i64,
    /// Set for a server kept between calls: the ids the server sees are
    /// then drawn from a keyed hash of `next_id`, so it cannot write the
    /// answer to a request before it is asked.
    unpredictable: Option<RandomState>,
    roots: Vec<OfferedRoot>,
    /// The token the call's `tools/call` carries: progress under it is the
    /// call's.
    progress_token: Option<String>,
}

impl<W: Write> std::fmt::Debug for Session<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("next_id", &self.next_id)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Session<W> {
    pub(crate) fn new(to_server: W, incoming: Receiver<Incoming>, roots: Vec<OfferedRoot>) -> Self {
        Session {
            to_server,
            incoming,
            next_id: 1,
            unpredictable: None,
            roots,
            progress_token: None,
        }
    }

    /// Give every later request an id the server cannot guess from the
    /// ids it saw: for a server kept between calls, which could otherwise
    /// write the answers to the next call's requests before they are sent.
    pub(crate) fn use_unpredictable_ids(&mut self) {
        self.unpredictable = Some(RandomState::new());
    }

    /// Whether the server wrote anything (or closed its output) since the
    /// bridge last read from it, looked at without waiting. Between calls of
    /// a session, any output makes the server unusable: it is never taken
    /// as the next call's answer.
    pub(crate) fn wrote_unasked(&self) -> bool {
        match self.incoming.try_recv() {
            Ok(_) | Err(TryRecvError::Disconnected) => true,
            Err(TryRecvError::Empty) => false,
        }
    }

    /// The id of the next request: a counter, or with
    /// [`Session::use_unpredictable_ids`] the counter hashed with a random
    /// key (SipHash, keyed from the operating system's randomness), cut to
    /// a positive integer below 2^53 so that a server in any language reads
    /// it exactly.
    fn take_id(&mut self) -> i64 {
        let counter = self.next_id;
        self.next_id += 1;
        match &self.unpredictable {
            None => counter,
            Some(key) => {
                let hashed = key.hash_one(counter) & ((1 << 53) - 1);
                // Two requests may in principle draw the same id: harmless,
                // a response is matched only to the one request awaited.
                i64::try_from(hashed).unwrap_or(1).max(1)
            }
        }
    }

    /// What was written to the server.
    #[cfg(test)]
    pub(crate) fn sent(&self) -> &W {
        &self.to_server
    }

    /// `initialize` and `notifications/initialized`.
    pub(crate) fn initialize(&mut self, relay: &mut dyn Relay) -> Result<Initialized, BridgeError> {
        let params = json!({
            "protocolVersion": LATEST_REVISION,
            "capabilities": {"roots": {"listChanged": false}},
            "clientInfo": {"name": "modhost-mcp-bridge", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self
            .request("initialize", &params, relay)?
            .map_err(|e| server_refused("initialize", &e))?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_shape("initialize", "no protocolVersion string", &result))?;
        if !KNOWN_REVISIONS.contains(&version) {
            return Err(BridgeError::new(
                BridgeKind::UnsupportedVersion,
                format!(
                    "the MCP server speaks protocol revision {version:?}, which this bridge does not know (it knows {})",
                    KNOWN_REVISIONS.join(", ")
                ),
            )
            .with_remedy("run a version of the server that speaks one of those revisions, or a newer modhost"));
        }
        let initialized = Initialized {
            protocol_version: version.to_owned(),
            server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        };
        self.notify("notifications/initialized", None)?;
        Ok(initialized)
    }

    /// Every tool the server lists, following `nextCursor`: at most
    /// [`MAX_PAGES`] pages, no cursor twice (a loop), no tool name twice
    /// (a later page must not redefine what an earlier one listed).
    pub(crate) fn list_tools(&mut self, relay: &mut dyn Relay) -> Result<Vec<Value>, BridgeError> {
        let mut tools: Vec<Value> = Vec::new();
        let mut cursor: Option<Value> = None;
        let mut cursors: Vec<Value> = Vec::new();
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let result = self
                .request("tools/list", &params, relay)?
                .map_err(|e| server_refused("tools/list", &e))?;
            let page = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| bad_shape("tools/list", "no tools array", &result))?;
            for tool in page {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad_shape("tools/list", "a tool without a name string", tool))?;
                if tools.iter().any(|t| t.get("name") == tool.get("name")) {
                    return Err(BridgeError::new(
                        BridgeKind::BadMessage,
                        format!("the MCP server's tools/list lists the tool {name:?} twice"),
                    )
                    .with_remedy(
                        "report it to the server's author: tool names are unique across all pages",
                    ));
                }
                tools.push(tool.clone());
            }
            match result.get("nextCursor") {
                Some(next) if next.is_string() => {
                    if cursors.contains(next) {
                        return Err(BridgeError::new(
                            BridgeKind::BadMessage,
                            format!(
                                "the MCP server's tools/list gave the cursor {} a second time: its pages loop",
                                excerpt(&next.to_string())
                            ),
                        )
                        .with_remedy("report it to the server's author: each page's nextCursor leads to a new page"));
                    }
                    cursors.push(next.clone());
                    cursor = Some(next.clone());
                }
                _ => return Ok(tools),
            }
        }
        Err(BridgeError::new(
            BridgeKind::BadMessage,
            format!("the MCP server's tools/list did not end within {MAX_PAGES} pages"),
        )
        .with_remedy("the server pages its tool list without end; report it to its author"))
    }

    /// `tools/call` of `name` with `arguments`; progress under
    /// `progress_token` goes to `relay`. The server's answer, or the
    /// JSON-RPC error it sent.
    pub(crate) fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        progress_token: &str,
        relay: &mut dyn Relay,
    ) -> Result<Result<Value, ServerRpcError>, BridgeError> {
        self.progress_token = Some(progress_token.to_owned());
        let params = json!({
            "name": name,
            "arguments": arguments,
            "_meta": {"progressToken": progress_token},
        });
        self.request("tools/call", &params, relay)
    }

    /// Send a request and wait for its response, answering what the server
    /// asks meanwhile.
    fn request(
        &mut self,
        method: &str,
        params: &Value,
        relay: &mut dyn Relay,
    ) -> Result<Result<Value, ServerRpcError>, BridgeError> {
        let id = self.take_id();
        // Counted per wait: what the server asked during an earlier request
        // (of this call or an earlier call of a session) does not count.
        let mut answered = 0usize;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let (object, message) = self.next_message()?;
            let object = &object;
            let has_id = object.contains_key("id");
            match object.get("method") {
                Some(Value::String(asked)) if has_id => {
                    answered += 1;
                    if answered > MAX_SERVER_REQUESTS {
                        return Err(BridgeError::new(
                            BridgeKind::BadMessage,
                            format!(
                                "the MCP server sent more than {MAX_SERVER_REQUESTS} requests ({asked} the last) while the bridge waited for its answer to {method}"
                            ),
                        )
                        .with_remedy("report it to the server's author: a server asks for its roots once, not in a loop"));
                    }
                    let asked = asked.clone();
                    self.answer(&message, &asked)?;
                }
                Some(Value::String(notified)) => {
                    let notified = notified.clone();
                    self.notified(&notified, object.get("params"), relay);
                }
                Some(_) => return Err(bad_message("a method that is not a string", &message)),
                None if object.get("id") == Some(&json!(id)) => {
                    return response_of(object, method, &message);
                }
                None if has_id => {
                    return Err(bad_message(
                        "a response to a request the bridge did not send",
                        &message,
                    ));
                }
                None => {
                    return Err(bad_message(
                        "neither a request, a notification nor a response",
                        &message,
                    ));
                }
            }
        }
    }

    fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), BridgeError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message)
    }

    fn send(&mut self, message: &Value) -> Result<(), BridgeError> {
        let mut line = message.to_string();
        line.push('\n');
        self.to_server
            .write_all(line.as_bytes())
            .and_then(|()| self.to_server.flush())
            .map_err(|e| {
                BridgeError::new(
                    BridgeKind::ServerExited,
                    format!("the MCP server stopped reading its input ({e})"),
                )
                .with_remedy(EXITED_REMEDY)
            })
    }

    /// The next message, an object with `"jsonrpc": "2.0"` (and the same
    /// as a value, for quoting).
    fn next_message(&mut self) -> Result<(Map<String, Value>, Value), BridgeError> {
        let incoming = self.incoming.recv().unwrap_or(Incoming::Closed);
        let line = match incoming {
            Incoming::Line(line) => line,
            Incoming::TooLarge { limit } => {
                return Err(BridgeError::new(
                    BridgeKind::MessageTooLarge,
                    format!("the MCP server sent a message longer than {limit} bytes, the call's output bound"),
                )
                .with_remedy("ask the tool for less (a narrower query, a smaller file), or raise [limits] max_output_bytes in config.toml"));
            }
            Incoming::Closed => {
                return Err(BridgeError::new(
                    BridgeKind::ServerExited,
                    "the MCP server closed its output before it answered",
                )
                .with_remedy(EXITED_REMEDY));
            }
            Incoming::Failed(e) => {
                return Err(BridgeError::new(
                    BridgeKind::ServerExited,
                    format!("reading the MCP server's output failed: {e}"),
                )
                .with_remedy(EXITED_REMEDY));
            }
        };
        let value: Value = serde_json::from_slice(&line).map_err(|e| {
            BridgeError::new(
                BridgeKind::BadMessage,
                format!(
                    "the MCP server wrote a line that is not JSON ({e}): {}",
                    excerpt(&String::from_utf8_lossy(&line))
                ),
            )
            .with_remedy(BAD_MESSAGE_REMEDY)
        })?;
        match &value {
            Value::Object(object) if object.get("jsonrpc") == Some(&json!("2.0")) => {
                Ok((object.clone(), value))
            }
            _ => Err(bad_message(
                "something that is not a JSON-RPC 2.0 message",
                &value,
            )),
        }
    }

    /// Answer a request of the server.
    fn answer(&mut self, request: &Value, method: &str) -> Result<(), BridgeError> {
        let id = request["id"].clone();
        let reply = match method {
            "roots/list" => {
                let roots: Vec<Value> = self
                    .roots
                    .iter()
                    .map(|r| json!({"uri": file_uri(&r.path), "name": r.name}))
                    .collect();
                json!({"jsonrpc": "2.0", "id": id, "result": {"roots": roots}})
            }
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            other => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("{other} is not offered: modhost runs this server per call, with no model to sample and no person to ask"),
            }}),
        };
        self.send(&reply)
    }

    /// A notification of the server: progress of this call and log lines
    /// are relayed, anything else is ignored.
    fn notified(&mut self, method: &str, params: Option<&Value>, relay: &mut dyn Relay) {
        let empty = Map::new();
        let params = params.and_then(Value::as_object).unwrap_or(&empty);
        match method {
            "notifications/progress" => {
                let token = params.get("progressToken");
                let ours = match (token, &self.progress_token) {
                    (Some(Value::String(token)), Some(ours)) => token == ours,
                    _ => false,
                };
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                    return;
                };
                if ours {
                    relay.progress(ProgressParams {
                        request_id: self.progress_token.clone().unwrap_or_default(),
                        progress,
                        total: params.get("total").and_then(Value::as_f64),
                        message: params
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    });
                }
            }
            "notifications/message" => {
                let level = match params.get("level").and_then(Value::as_str) {
                    Some("debug") => "debug",
                    Some("info" | "notice") => "info",
                    Some("warning") => "warn",
                    Some(_) => "error",
                    None => return,
                };
                let message = match params.get("data") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => return,
                };
                let message = match params.get("logger").and_then(Value::as_str) {
                    Some(logger) => format!("{logger}: {message}"),
                    None => message,
                };
                relay.log(LogParams {
                    level: level.to_owned(),
                    message: excerpt_of(&message, MAX_LOG_CHARS),
                });
            }
            _ => {}
        }
    }
}

/// The longest log line relayed, in characters.
const MAX_LOG_CHARS: usize = 2000;

const EXITED_REMEDY: &str = "the server's stderr (quoted with this error) says why; run it by hand with the same command to see it start";

const BAD_MESSAGE_REMEDY: &str = "an MCP server writes only JSON-RPC messages to stdout, one per line (logs go to stderr); report it to the server's author";

/// A response's outcome: its `result`, or the error it carries.
fn response_of(
    object: &Map<String, Value>,
    method: &str,
    message: &Value,
) -> Result<Result<Value, ServerRpcError>, BridgeError> {
    match (object.get("result"), object.get("error")) {
        (Some(result), None) if result.is_object() => Ok(Ok(result.clone())),
        (None, Some(Value::Object(error))) => Ok(Err(ServerRpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .map(|m| excerpt_of(m, 2000))
                .unwrap_or_default(),
        })),
        _ => Err(bad_message(
            &format!("the response to {method} has neither an object result nor an error"),
            message,
        )),
    }
}

fn bad_message(what: &str, message: &Value) -> BridgeError {
    BridgeError::new(
        BridgeKind::BadMessage,
        format!(
            "the MCP server sent {what}: {}",
            excerpt(&message.to_string())
        ),
    )
    .with_remedy(BAD_MESSAGE_REMEDY)
}

fn bad_shape(method: &str, what: &str, result: &Value) -> BridgeError {
    bad_message(&format!("a {method} result with {what}"), result)
}

/// The server answered a request of the handshake or the listing with an
/// error.
pub(crate) fn server_refused(method: &str, error: &ServerRpcError) -> BridgeError {
    BridgeError::new(
        BridgeKind::ServerError,
        format!(
            "the MCP server answered {method} with error {}: {}",
            error.code, error.message
        ),
    )
    .with_remedy("the server's stderr (quoted with this error) may say why; check its command, arguments and environment in mcp-server.toml")
}

/// At most 200 characters of `text`, for quoting what a server sent.
pub(crate) fn excerpt(text: &str) -> String {
    excerpt_of(text, 200)
}

fn excerpt_of(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `file://` and `path`, each byte outside the unreserved characters and
/// `/` percent-encoded (RFC 8089, RFC 3986).
pub(crate) fn file_uri(path: &str) -> String {
    let mut uri = String::from("file://");
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The path of a `file://` URI without a host (or with `localhost`),
/// percent-decoded; `None` for anything else.
pub(crate) fn path_of_file_uri(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}
