//! `modhost mcp --http` driven over real sockets, as clients (and
//! attackers) reach it: both eras' list and call, progress on a call's own
//! stream, an approval asked on the stream and answered in another POST,
//! a stream closed (the module's process goes with it), the 2026-07-28
//! mirrored headers, `Origin`, bodies, slowloris, ten thousand streams, a
//! session continued by a second server holding the same key, the refusal
//! to listen beyond the loopback without authentication, the drain on
//! SIGTERM and `/metrics`.
//!
//! Requests go through `ureq` ([`HttpMcp::post`]); what needs the bytes on
//! the wire itself (a stream read as it arrives, a connection closed mid
//! call, headers sent a byte at a time) through [`Raw`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Fixture, Home, binaries, write_file};

/// How long the server may take to say it listens.
const START_WITHIN: Duration = Duration::from_secs(60);

const MODERN: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A running `modhost mcp --http 127.0.0.1:0`; killed and reaped on drop.
pub struct HttpMcp {
    child: Child,
    pub addr: SocketAddr,
    stderr: PathBuf,
    _out: tempfile::TempDir,
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer: status, headers, body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (a JSON answer), or the last message of an SSE one.
    #[track_caller]
    pub fn json(&self) -> Value {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            return sse_messages(&self.body)
                .pop()
                .unwrap_or_else(|| panic!("no message in the stream: {self:?}"));
        }
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// The JSON messages of an SSE body, in order (comments skipped).
pub fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).expect("an event's data is JSON"))
        .collect()
}

/// The request headers of a 2026-07-28 request, as the transport mirrors
/// them (`Mcp-Name` for a call).
pub fn modern_headers(method: &str, params: &Value) -> Vec<(String, String)> {
    let mut headers = vec![
        ("MCP-Protocol-Version".to_owned(), MODERN.to_owned()),
        ("Mcp-Method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("Mcp-Name".to_owned(), name.to_owned()));
    }
    headers
}

/// `params` with the 2026-07-28 `_meta` (version and `capabilities`).
pub fn with_meta(mut params: Value, capabilities: &Value) -> Value {
    let meta = params
        .as_object_mut()
        .expect("params are an object")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta[META_VERSION] = json!(MODERN);
    meta[META_CAPABILITIES] = capabilities.clone();
    params
}

impl HttpMcp {
    /// Start `modhost --home H --workspace W mcp --http 127.0.0.1:0` (no
    /// inherited `MODHOST_*` or `RUST_LOG`; `configure` adds the rest) and
    /// wait until it says where it listens.
    pub fn start(home: &Home, configure: impl FnOnce(&mut Command)) -> HttpMcp {
        HttpMcp::try_start(home, configure).unwrap_or_else(|said| {
            panic!("modhost mcp --http did not start:\n{said}");
        })
    }

    /// [`HttpMcp::start`]; what it said on stderr when it exits instead.
    pub fn try_start(home: &Home, configure: impl FnOnce(&mut Command)) -> Result<HttpMcp, String> {
        let out = tempfile::tempdir().expect("temp dir for stderr");
        let stderr = out.path().join("stderr");
        let mut command = Command::new(&binaries().modhost);
        command
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args(["mcp", "--http", "127.0.0.1:0"])
            .current_dir(home.workspace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key.as_ref());
            }
        }
        configure(&mut command);
        let mut child = command.spawn().expect("start modhost mcp --http");
        let started = Instant::now();
        loop {
            let said = std::fs::read_to_string(&stderr).unwrap_or_default();
            if let Some(rest) = said.split("serving MCP over HTTP at http://").nth(1) {
                let addr = rest
                    .split_whitespace()
                    .next()
                    .and_then(|a| a.strip_suffix("/mcp"))
                    .and_then(|a| a.parse().ok())
                    .unwrap_or_else(|| panic!("no address in {said:?}"));
                return Ok(HttpMcp {
                    child,
                    addr,
                    stderr,
                    _out: out,
                });
            }
            if let Some(status) = child.try_wait().expect("wait") {
                return Err(format!("{said}(exited: {status})"));
            }
            if started.elapsed() > START_WITHIN {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{said}(did not listen within {START_WITHIN:?})"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What it wrote to stderr so far (the request log among it).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .max_idle_connections(0)
            .build()
            .into()
    }

    /// POST `body` to `/mcp` with `headers` (and `Accept` for both answers
    /// unless given).
    pub fn post(&self, headers: &[(String, String)], body: &str) -> Reply {
        let mut request = HttpMcp::agent()
            .post(self.url("/mcp"))
            .header("Content-Type", "application/json");
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
        {
            request = request.header("Accept", "application/json, text/event-stream");
        }
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send(body.to_owned()).expect("the server answers");
        reply_of(response)
    }

    /// GET `path`.
    pub fn get(&self, path: &str) -> Reply {
        let response = HttpMcp::agent()
            .get(self.url(path))
            .call()
            .expect("the server answers");
        reply_of(response)
    }

    /// A 2026-07-28 request (headers mirrored, `_meta` with `capabilities`).
    pub fn modern(&self, id: i64, method: &str, params: Value, capabilities: &Value) -> Reply {
        let params = with_meta(params, capabilities);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(&modern_headers(method, &params), &body.to_string())
    }

    /// `initialize` (2025-11-25) declaring `capabilities`, then
    /// `notifications/initialized`: the session id.
    #[track_caller]
    pub fn handshake(&self, capabilities: &Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "mcp_http", "version": "0"}}});
        let reply = self.post(&[], &init.to_string());
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.json()["result"]["protocolVersion"],
            json!("2025-11-25")
        );
        let session = reply
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {reply:?}"))
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let accepted = self.post(&session_headers(&session), &initialized.to_string());
        assert_eq!(accepted.status, 202, "{accepted:?}");
        session
    }

    /// A request in session `session`.
    pub fn in_session(&self, session: &str, id: i64, method: &str, params: &Value) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(&session_headers(session), &body.to_string())
    }

    /// The first tool whose name starts with `prefix`, listed in 2026-07-28.
    #[track_caller]
    pub fn tool(&self, prefix: &str) -> String {
        let listed = self.modern(900, "tools/list", json!({}), &json!({})).json();
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str())
            .find(|n| n.starts_with(prefix))
            .unwrap_or_else(|| panic!("no tool {prefix}… in {listed}"))
            .to_owned()
    }

    /// One metric's value from `/metrics` (0 when absent).
    pub fn metric(&self, series: &str) -> f64 {
        let text = self.get("/metrics").body;
        text.lines()
            .find_map(|line| {
                line.strip_prefix(series)
                    .and_then(|rest| rest.strip_prefix(' '))
                    .and_then(|value| value.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }

    /// Send SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Wait for the exit, at most `within`.
    pub fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < within {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Descriptors the server process holds.
    pub fn descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|dir| dir.count())
            .unwrap_or(0)
    }
}

fn session_headers(session: &str) -> Vec<(String, String)> {
    vec![
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), "2025-11-25".to_owned()),
    ]
}

fn reply_of(mut response: ureq::http::Response<ureq::Body>) -> Reply {
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    Reply {
        status: response.status().as_u16(),
        headers,
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

/// One HTTP/1.1 exchange on a socket of the test's own: what needs the
/// bytes on the wire (reading a stream as it comes, closing mid call).
pub struct Raw {
    pub reader: BufReader<TcpStream>,
}

impl Raw {
    /// Connect and send `body` to `/mcp` with `headers`.
    pub fn post(addr: SocketAddr, headers: &[(String, String)], body: &str) -> Raw {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).expect("send");
        Raw {
            reader: BufReader::new(stream),
        }
    }

    /// The status and headers.
    pub fn head(&mut self) -> (u16, Vec<(String, String)>) {
        let mut status = String::new();
        self.reader.read_line(&mut status).expect("a status line");
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {status:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("a header line");
            let line = line.trim_end();
            if line.is_empty() {
                return (code, headers);
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
    }

    /// The next line of a chunked body's payload that is not empty (chunk
    /// sizes skipped; an SSE event's lines and comments come whole).
    pub fn next_line(&mut self) -> String {
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("read the stream");
            assert!(read > 0, "the stream ended");
            let line = line.trim_end().to_owned();
            let is_chunk_size = !line.is_empty() && line.bytes().all(|b| b.is_ascii_hexdigit());
            if !line.is_empty() && !is_chunk_size {
                return line;
            }
        }
    }
}

/// A module in POSIX sh whose one capability reports two progress steps,
/// then answers; `spin` loops of a builtin between them (it may run no
/// other program).
fn progress_module(id: &str, spin: u32) -> String {
    format!(
        r#"#!/bin/sh
IFS= read -r line
id=${{line#*\"id\":}}
id=${{id%%,*}}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"id":"{id}","version":"1.0.0","title":"{id}","description":"Counts to two, reporting progress.","capabilities":[{{"id":"{id}.count","title":"Count","description":"Count to two.","input_schema":{{"type":"object"}},"effects":{{"reads":[],"writes":[],"network":false,"spawns":[],"cost":"trivial"}}}}]}}}}'
  ;;
*)
  rid=${{line#*\"request_id\":\"}}
  rid=${{rid%%\"*}}
  printf '%s\n' '{{"jsonrpc":"2.0","method":"progress","params":{{"request_id":"'"$rid"'","progress":1,"total":2,"message":"one"}}}}'
  printf '%s\n' '{{"jsonrpc":"2.0","method":"progress","params":{{"request_id":"'"$rid"'","progress":2,"total":2,"message":"two"}}}}'
  i=0
  while [ "$i" -lt {spin} ]; do i=$((i + 1)); done
  printf '%s\n' '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"output":{{"counted":2}}}}}}'
  ;;
esac
"#
    )
}

/// A module in POSIX sh whose one capability declares `network: true` (its
/// verdict is then `ask`) and says it ran.
const NET_SCRIPT: &str = r#"#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"net","version":"1.0.0","title":"net","description":"Stands for a module that reaches the network.","capabilities":[{"id":"net.fetch","title":"Fetch","description":"Say it ran.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":true,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"output":{"ran":true}}}'
  ;;
esac
"#;

/// Install `script` as module `id` (executable, pinned).
fn install_script(home: &Home, id: &str, script: &str) {
    let folder = home.modules().join(id);
    write_file(&folder, id, script);
    let path = folder.join(id);
    let mut permissions = std::fs::metadata(&path).expect("script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).expect("chmod script");
    home.run(&["pin", id]).expect_code(0);
}

/// A home with the echo fixture, and `[http]` settings `http` (lines).
fn home_with(http: &str) -> Home {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(&format!("[lockdown]\nenabled = false\n\n[http]\n{http}\n"));
    home
}

#[test]
fn both_eras_list_and_call_a_tool_and_name_the_caller() {
    let home = home_with("");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__echo");

    // 2026-07-28: one POST per request, no session.
    let listed = server.modern(1, "tools/list", json!({}), &json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.header("mcp-session-id").is_none(), "{listed:?}");
    let called = server.modern(
        2,
        "tools/call",
        json!({"name": tool, "arguments": {"x": 1}}),
        &json!({}),
    );
    assert_eq!(called.status, 200, "{called:?}");
    assert_eq!(
        called.header("content-type"),
        Some("application/json"),
        "{called:?}"
    );
    let result = &called.json()["result"];
    assert_eq!(result["isError"], json!(false), "{result}");
    let principal = result["_meta"]["dev.modhost/principal"]
        .as_str()
        .unwrap_or_else(|| panic!("no principal in {result}"));
    assert!(principal.starts_with("local:"), "{principal}");

    // 2025-11-25: a session, its id on every request.
    let session = server.handshake(&json!({}));
    let listed = server
        .in_session(&session, 3, "tools/list", &json!({}))
        .json();
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == json!(tool))),
        "{listed}"
    );
    let called = server
        .in_session(
            &session,
            4,
            "tools/call",
            &json!({"name": tool, "arguments": {"y": 2}}),
        )
        .json();
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    assert_eq!(
        called["result"]["_meta"]["dev.modhost/principal"],
        json!(principal)
    );
    // Without a session, or with a made-up one.
    let lost = server.post(
        &[],
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string(),
    );
    assert_eq!(lost.status, 400, "{lost:?}");
    let forged = server.in_session("eyJmYWtlIjp0cnVlfQ.AAAA", 6, "tools/list", &json!({}));
    assert_eq!(forged.status, 404, "{forged:?}");
    // Sessions are not ended by DELETE (they expire), and 2026-07-28 has
    // no GET stream.
    let deleted = HttpMcp::agent()
        .delete(server.url("/mcp"))
        .header("Mcp-Session-Id", &session)
        .call()
        .map(reply_of)
        .expect("the server answers");
    assert_eq!(deleted.status, 405, "{deleted:?}");
    assert_eq!(server.get("/mcp").status, 405);
    // The request log names each.
    let log = server.stderr();
    assert!(
        log.contains(&format!("\"tool\":\"{tool}\"")) && log.contains("\"result\":\"ok\""),
        "{log}"
    );
}

#[test]
fn progress_comes_on_the_calls_own_stream_before_its_result() {
    let home = home_with("");
    install_script(&home, "counter", &progress_module("counter", 20_000));
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("counter__");
    let params = json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "p1"}});
    let reply = server.modern(1, "tools/call", params, &json!({}));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("x-accel-buffering"), Some("no"));
    let messages = sse_messages(&reply.body);
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == json!("notifications/progress"))
        .collect();
    assert_eq!(progress.len(), 2, "{messages:#?}");
    assert_eq!(progress[0]["params"]["progressToken"], json!("p1"));
    assert_eq!(progress[1]["params"]["message"], json!("two"));
    let last = messages.last().expect("a result");
    assert_eq!(
        last["id"],
        json!(1),
        "the result ends the stream: {messages:#?}"
    );
    assert_eq!(last["result"]["structuredContent"]["counted"], json!(2));
    // A client that takes only JSON gets the result alone.
    let params = with_meta(
        json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "p2"}}),
        &json!({}),
    );
    let mut headers = modern_headers("tools/call", &params);
    headers.push(("Accept".into(), "application/json".into()));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
    let reply = server.post(&headers, &body.to_string());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["result"]["isError"], json!(false), "{reply:?}");
}

/// The attack: a client starts a call that never ends and goes away. The
/// call must not outlive it: closing the stream (or the connection, before
/// any answer) kills the module's process.
#[test]
fn closing_the_stream_kills_the_module_process() {
    let home = home_with("keepalive_secs = 1");
    home.install(Fixture::Hang, "hang");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("hang__");
    for accept in ["application/json, text/event-stream", "application/json"] {
        let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
        let mut headers = modern_headers("tools/call", &params);
        headers.push(("Accept".into(), accept.into()));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let mut raw = Raw::post(server.addr, &headers, &body.to_string());
        let started = Instant::now();
        while home.live_module_processes().is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the hang module never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if accept.contains("event-stream") {
            // A call that says nothing for a keep-alive period streams.
            let (status, headers) = raw.head();
            assert_eq!(status, 200);
            assert!(
                headers.contains(&("content-type".into(), "text/event-stream".into())),
                "{headers:?}"
            );
            assert_eq!(raw.next_line(), ": keep-alive");
        }
        drop(raw);
        home.assert_no_module_processes();
    }
    let started = Instant::now();
    while server.metric("modhost_mcp_calls_total{result=\"cancelled\"}") < 2.0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}",
            server.get("/metrics").body
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.metric("modhost_mcp_calls_in_flight"), 0.0);
    assert_eq!(server.metric("modhost_mcp_open_streams"), 0.0);
}

/// The attack: headers that say one thing to a proxy and a body that says
/// another to the server. Each is refused, 400 with `HeaderMismatch`, and
/// nothing runs.
#[test]
fn headers_that_disagree_with_the_body_are_refused() {
    let home = home_with("");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__");
    let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let right = modern_headers("tools/call", &params);
    let cases: Vec<(&str, Vec<(String, String)>)> = vec![
        ("another tool in Mcp-Name", {
            let mut h = right.clone();
            h.retain(|(n, _)| n != "Mcp-Name");
            h.push(("Mcp-Name".into(), "modhost__knowledge".into()));
            h
        }),
        ("no Mcp-Name", {
            let mut h = right.clone();
            h.retain(|(n, _)| n != "Mcp-Name");
            h
        }),
        ("another method in Mcp-Method", {
            let mut h = right.clone();
            h.retain(|(n, _)| n != "Mcp-Method");
            h.push(("Mcp-Method".into(), "tools/list".into()));
            h
        }),
        ("no MCP-Protocol-Version", {
            let mut h = right.clone();
            h.retain(|(n, _)| n != "MCP-Protocol-Version");
            h
        }),
        ("another MCP-Protocol-Version", {
            let mut h = right.clone();
            h.retain(|(n, _)| n != "MCP-Protocol-Version");
            h.push(("MCP-Protocol-Version".into(), "2025-11-25".into()));
            h
        }),
    ];
    for (case, headers) in cases {
        let reply = server.post(&headers, &body.to_string());
        assert_eq!(reply.status, 400, "{case}: {reply:?}");
        let answer = reply.json();
        assert_eq!(answer["error"]["code"], json!(-32020), "{case}: {answer}");
        assert_eq!(answer["id"], json!(7), "{case}: {answer}");
    }
    assert_eq!(server.metric("modhost_mcp_calls_total{result=\"ok\"}"), 0.0);
    // The right headers run it.
    let reply = server.post(&right, &body.to_string());
    assert_eq!(reply.status, 200, "{reply:?}");
    // Malformed: the header names the revision, the body does not.
    let bare = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}});
    let reply = server.post(&modern_headers("tools/list", &json!({})), &bare.to_string());
    assert_eq!(reply.status, 400, "{reply:?}");
    assert_eq!(reply.json()["error"]["code"], json!(-32602));
    // An unknown method is 404, a version the server does not speak 400.
    let reply = server.modern(9, "prompts/list", json!({}), &json!({}));
    assert_eq!(reply.status, 404, "{reply:?}");
    assert_eq!(reply.json()["error"]["code"], json!(-32601));
}

/// The attack: a page on another origin (DNS rebinding) posting to the
/// local server. Refused, 403; the loopback's own pages and the operator's
/// listed origins pass.
#[test]
fn a_foreign_origin_is_refused() {
    let home = home_with("allowed_origins = [\"https://app.example.com\"]");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__");
    let call = |origin: &str| {
        let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
        let mut headers = modern_headers("tools/call", &params);
        headers.push(("Origin".into(), origin.into()));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        server.post(&headers, &body.to_string())
    };
    for foreign in [
        "http://evil.example",
        "null",
        "https://app.example.com.evil.net",
    ] {
        let reply = call(foreign);
        assert_eq!(reply.status, 403, "{foreign}: {reply:?}");
        assert!(reply.body.contains("allowed_origins"), "{reply:?}");
    }
    assert_eq!(server.metric("modhost_mcp_calls_total{result=\"ok\"}"), 0.0);
    for allowed in [
        "https://app.example.com",
        "http://localhost:5173",
        "http://127.0.0.1:9",
    ] {
        assert_eq!(call(allowed).status, 200, "{allowed}");
    }
}

#[test]
fn an_oversized_body_is_refused_and_the_server_goes_on() {
    let home = home_with("max_body_bytes = 4096");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__");
    let params = with_meta(
        json!({"name": tool, "arguments": {"pad": "x".repeat(10_000)}}),
        &json!({}),
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let reply = server.post(&modern_headers("tools/call", &params), &body.to_string());
    assert_eq!(reply.status, 413, "{reply:?}");
    // Declared too large up front: refused before a byte of it is sent.
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 999999999\r\n\r\n",
        server.addr
    )
    .unwrap();
    let mut raw = Raw {
        reader: BufReader::new(stream),
    };
    let (status, _) = raw.head();
    assert_eq!(status, 413);
    // Headers too large, or too many: 431.
    let huge = vec![("X-Huge".to_owned(), "h".repeat(40 * 1024))];
    let many: Vec<(String, String)> = (0..100).map(|n| (format!("X-N{n}"), "1".into())).collect();
    for headers in [huge, many] {
        let mut raw = Raw::post(server.addr, &headers, "{}");
        assert_eq!(raw.head().0, 431);
    }
    assert_eq!(
        server.modern(2, "tools/list", json!({}), &json!({})).status,
        200
    );
}

/// The attack: slowloris, a client sending its headers a byte at a time to
/// hold a connection for ever. It is dropped within the header timeout,
/// while another client is served meanwhile.
#[test]
fn a_slowloris_client_is_dropped_while_others_are_served() {
    let home = home_with("header_timeout_secs = 2");
    let server = HttpMcp::start(&home, |_| {});
    let mut slow = TcpStream::connect(server.addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let headers = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nX-Padding: {}\r\n",
        server.addr,
        "a".repeat(200)
    );
    let started = Instant::now();
    let mut dropped = None;
    let mut served_meanwhile = false;
    for byte in headers.bytes() {
        if slow.write_all(&[byte]).is_err() {
            dropped = Some(started.elapsed());
            break;
        }
        // The server closes the connection (perhaps after a 408): a read
        // sees the end, or an answer; a timeout means it is still open.
        let mut buf = [0; 512];
        match slow.read(&mut buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            _ => {
                dropped = Some(started.elapsed());
                break;
            }
        }
        if !served_meanwhile && started.elapsed() > Duration::from_millis(500) {
            let reply = server.modern(1, "tools/list", json!({}), &json!({}));
            assert_eq!(reply.status, 200, "{reply:?}");
            served_meanwhile = true;
        }
        std::thread::sleep(Duration::from_millis(600));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the slow client still holds its connection"
        );
    }
    let dropped = dropped.expect("the slow client was dropped");
    assert!(served_meanwhile);
    assert!(
        dropped < Duration::from_secs(6),
        "dropped after {dropped:?}, the header timeout is 2 s"
    );
}

/// The attack: ten thousand `subscriptions/listen` streams. The bound
/// holds them, the rest are told 503 with `Retry-After`, the server goes
/// on serving, and its descriptors stay bounded.
#[test]
fn ten_thousand_streams_meet_the_cap_and_the_server_stays_responsive() {
    const CAP: usize = 50;
    const TRIED: usize = 10_000;
    let home = home_with(&format!("max_open_streams = {CAP}"));
    let server = HttpMcp::start(&home, |_| {});
    let params = with_meta(
        json!({"notifications": {"toolsListChanged": true}}),
        &json!({}),
    );
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params})
            .to_string();
    let headers = modern_headers("subscriptions/listen", &params);
    let before = server.descriptors();
    let mut open = Vec::new();
    let mut refused = 0;
    let mut most_descriptors = 0;
    // In batches that stay within the connection bound (streams, calls
    // and 256 more): each is answered, none dropped unanswered.
    const BATCH: usize = 200;
    for batch in 0..TRIED / BATCH {
        let streams: Vec<Raw> = (0..BATCH)
            .map(|_| Raw::post(server.addr, &headers, &body))
            .collect();
        for mut raw in streams {
            let (status, head) = raw.head();
            match status {
                200 => {
                    let first = raw.next_line();
                    let acknowledged: Value = serde_json::from_str(
                        first
                            .strip_prefix("data: ")
                            .unwrap_or_else(|| panic!("not an event: {first:?}")),
                    )
                    .unwrap();
                    assert_eq!(
                        acknowledged["method"],
                        json!("notifications/subscriptions/acknowledged")
                    );
                    open.push(raw);
                }
                503 => {
                    assert!(head.iter().any(|(n, _)| n == "retry-after"), "{head:?}");
                    refused += 1;
                }
                other => panic!("status {other} for stream {}", batch * BATCH),
            }
        }
        most_descriptors = most_descriptors.max(server.descriptors());
        if batch % 10 == 0 {
            let started = Instant::now();
            let reply = server.modern(2, "tools/list", json!({}), &json!({}));
            assert_eq!(reply.status, 200, "{reply:?}");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "tools/list took {:?} with {} streams open",
                started.elapsed(),
                open.len()
            );
        }
    }
    assert_eq!(open.len(), CAP);
    assert_eq!(refused, TRIED - CAP);
    assert_eq!(server.metric("modhost_mcp_open_streams"), CAP as f64);
    eprintln!(
        "descriptors: {before} at rest, at most {most_descriptors} while {TRIED} streams were tried"
    );
    assert!(
        most_descriptors < before + CAP + 600,
        "{most_descriptors} descriptors (from {before})"
    );
    drop(open);
    let started = Instant::now();
    while server.metric("modhost_mcp_open_streams") > 0.0 {
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A signing key file as `[http] signing_key_file` wants it (0600).
fn key_file(dir: &Path, name: &str, key: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{key}\n")).unwrap();
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o600);
    std::fs::set_permissions(&path, permissions).unwrap();
    path
}

/// Two servers (two replicas) with one key: a session started on one is
/// served by the other; a server with another key does not know it.
#[test]
fn a_session_continues_on_another_server_holding_the_same_key() {
    let home = home_with("");
    let shared = key_file(
        &home.outside(),
        "shared-key",
        "s3cret-shared-by-both-replicas-0123456789abcdef",
    );
    let other = key_file(
        &home.outside(),
        "other-key",
        "another-key-entirely-fedcba9876543210-xyzxyzxyz",
    );
    let with_key = |path: &Path| {
        let path = path.to_path_buf();
        move |command: &mut Command| {
            command.env("MODHOST_SIGNING_KEY_FILE", &path);
        }
    };
    let first = HttpMcp::start(&home, with_key(&shared));
    let second = HttpMcp::start(&home, with_key(&shared));
    let stranger = HttpMcp::start(&home, with_key(&other));
    assert!(!first.stderr().contains("no [http] signing_key_file"));
    let tool = first.tool("echo__");
    let session = first.handshake(&json!({}));
    let listed = second.in_session(&session, 1, "tools/list", &json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");
    let called = second
        .in_session(
            &session,
            2,
            "tools/call",
            &json!({"name": tool, "arguments": {}}),
        )
        .json();
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    let refused = stranger.in_session(&session, 3, "tools/list", &json!({}));
    assert_eq!(refused.status, 404, "{refused:?}");
}

#[test]
fn a_non_loopback_bind_without_authentication_is_refused() {
    let home = home_with("");
    let run = home.run(&["mcp", "--http", "0.0.0.0:0"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("refusing to serve on 0.0.0.0:0")
            && run.stderr.contains("[[http.tokens]]"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("serving MCP over HTTP"),
        "{}",
        run.stderr
    );
}

/// SIGTERM: the call in flight finishes and is answered, `/readyz` says
/// 503, new requests are refused with 503, then the server exits cleanly.
#[test]
fn sigterm_drains_the_call_in_flight_and_refuses_new_requests() {
    let home = home_with("");
    install_script(&home, "slowpoke", &progress_module("slowpoke", 3_000_000));
    let mut server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("slowpoke__");
    assert_eq!(server.get("/readyz").status, 200);
    let addr = server.addr;
    let in_flight = std::thread::spawn(move || {
        let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let mut raw = Raw::post(
            addr,
            &modern_headers("tools/call", &params),
            &body.to_string(),
        );
        let (status, _) = raw.head();
        let mut rest = String::new();
        let _ = raw.reader.read_to_string(&mut rest);
        (status, rest)
    });
    let started = Instant::now();
    while home.live_module_processes().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.terminate();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !home.live_module_processes().is_empty(),
        "the call must still run: it drains"
    );
    let ready = server.get("/readyz");
    assert_eq!(ready.status, 503, "{ready:?}");
    let refused = server.modern(2, "tools/list", json!({}), &json!({}));
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    let (status, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"counted\":2"), "the call finished: {body}");
    let exit = server
        .exit_within(Duration::from_secs(15))
        .expect("the server exits once drained");
    assert!(exit.success(), "{exit}; {}", server.stderr());
}

/// An `ask` tool in the handshake era: the question goes on the call's own
/// stream, the answer comes in another POST of the session, and the call
/// runs only after that yes.
#[test]
fn an_approval_is_asked_on_the_calls_stream_and_answered_in_another_post() {
    let home = home_with("");
    install_script(&home, "net", NET_SCRIPT);
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("net__");
    let session = server.handshake(&json!({"elicitation": {}}));
    let body = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    let mut headers = session_headers(&session);
    headers.push((
        "Accept".into(),
        "application/json, text/event-stream".into(),
    ));
    let mut call = Raw::post(server.addr, &headers, &body.to_string());
    let (status, head) = call.head();
    assert_eq!(status, 200);
    assert!(
        head.contains(&("content-type".into(), "text/event-stream".into())),
        "{head:?}"
    );
    let question: Value = loop {
        let line = call.next_line();
        if let Some(data) = line.strip_prefix("data: ") {
            break serde_json::from_str(data).unwrap();
        }
    };
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"approve": true}}});
    let accepted = server.post(&session_headers(&session), &answer.to_string());
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let result: Value = loop {
        let line = call.next_line();
        if let Some(data) = line.strip_prefix("data: ") {
            break serde_json::from_str(data).unwrap();
        }
    };
    assert_eq!(result["id"], json!(11), "{result}");
    assert_eq!(result["result"]["isError"], json!(false), "{result}");
    assert_eq!(result["result"]["structuredContent"]["ran"], json!(true));
}

#[test]
fn metrics_count_a_call() {
    let home = home_with("");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__");
    let series = "modhost_mcp_calls_total{result=\"ok\"}";
    assert_eq!(server.metric(series), 0.0);
    let reply = server.modern(
        1,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
        &json!({}),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(server.metric(series), 1.0);
    let text = server.get("/metrics").body;
    assert!(
        text.contains("modhost_mcp_call_duration_seconds_count{result=\"ok\"} 1"),
        "{text}"
    );
    assert_eq!(server.get("/healthz").status, 200);
}

/// The tool list changes (`modhost disable` in another process): a
/// handshake session's `GET` stream hears it, and so does a 2026-07-28
/// `subscriptions/listen` stream, tagged with its subscription id; a drain
/// then ends the subscription with its closing result.
#[test]
fn list_changes_reach_the_get_and_listen_streams_and_a_drain_closes_them() {
    let home = home_with("keepalive_secs = 1");
    let mut server = HttpMcp::start(&home, |_| {});
    let session = server.handshake(&json!({}));
    let mut headers = session_headers(&session);
    headers.push(("Accept".into(), "text/event-stream".into()));
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut get = format!("GET /mcp HTTP/1.1\r\nHost: {}\r\n", server.addr);
    for (name, value) in &headers {
        get.push_str(&format!("{name}: {value}\r\n"));
    }
    get.push_str("\r\n");
    stream.write_all(get.as_bytes()).unwrap();
    let mut handshake = Raw {
        reader: BufReader::new(stream),
    };
    let (status, head) = handshake.head();
    assert_eq!(status, 200, "{head:?}");
    let params = with_meta(
        json!({"notifications": {"toolsListChanged": true}}),
        &json!({}),
    );
    let body = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen", "params": params});
    let mut listen = Raw::post(
        server.addr,
        &modern_headers("subscriptions/listen", &params),
        &body.to_string(),
    );
    assert_eq!(listen.head().0, 200);
    let event = |raw: &mut Raw| -> Value {
        loop {
            let line = raw.next_line();
            if let Some(data) = line.strip_prefix("data: ") {
                return serde_json::from_str(data).unwrap();
            }
        }
    };
    let acknowledged = event(&mut listen);
    assert_eq!(
        acknowledged["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "{acknowledged}"
    );
    home.run(&["disable", "echo"]).expect_code(0);
    let heard = event(&mut handshake);
    assert_eq!(
        heard["method"],
        json!("notifications/tools/list_changed"),
        "{heard}"
    );
    let heard = event(&mut listen);
    assert_eq!(
        heard["method"],
        json!("notifications/tools/list_changed"),
        "{heard}"
    );
    assert_eq!(
        heard["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!("sub-1")
    );
    server.terminate();
    let closed = event(&mut listen);
    assert_eq!(closed["id"], json!("sub-1"), "{closed}");
    assert_eq!(
        closed["result"]["resultType"],
        json!("complete"),
        "{closed}"
    );
    let exit = server
        .exit_within(Duration::from_secs(15))
        .expect("the server exits once its streams are closed");
    assert!(exit.success(), "{exit}");
}

/// A handshake session's `notifications/cancelled` (another POST) stops
/// the call it names: its module's process is killed, and the call's
/// stream ends without a response, as a cancelled request gets none.
#[test]
fn a_cancellation_in_the_session_stops_its_call_and_ends_its_stream() {
    let home = home_with("keepalive_secs = 1");
    home.install(Fixture::Hang, "hang");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("hang__");
    let session = server.handshake(&json!({}));
    let body = json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    let mut call = Raw::post(server.addr, &session_headers(&session), &body.to_string());
    let started = Instant::now();
    while home.live_module_processes().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, _) = call.head();
    assert_eq!(status, 200);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "call-1", "reason": "the user changed their mind"}});
    let accepted = server.post(&session_headers(&session), &cancel.to_string());
    assert_eq!(accepted.status, 202, "{accepted:?}");
    home.assert_no_module_processes();
    let mut rest = String::new();
    call.reader
        .read_to_string(&mut rest)
        .expect("the stream ends");
    assert!(!rest.contains("\"id\":\"call-1\""), "no response: {rest}");
}

/// The attack: more calls at once than the server runs. Those beyond the
/// bound are refused at once with 503 and `Retry-After`, run nothing, and
/// the server keeps answering.
#[test]
fn calls_beyond_the_bound_are_refused_with_503() {
    // A client that takes a stream and closes before anything was written
    // is noticed at its stream's first keep-alive (`http/connections.rs`:
    // its end of stream alone could be a half-close).
    let home = home_with("max_concurrent_calls = 2\nkeepalive_secs = 1");
    home.install(Fixture::Hang, "hang");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("hang__");
    let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let headers = modern_headers("tools/call", &params);
    let running: Vec<Raw> = (0..2)
        .map(|_| Raw::post(server.addr, &headers, &body.to_string()))
        .collect();
    let started = Instant::now();
    while home.live_module_processes().len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = server.post(&headers, &body.to_string());
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.json()["id"], json!(1), "{refused:?}");
    assert_eq!(home.live_module_processes().len(), 2, "the third never ran");
    assert_eq!(
        server.metric("modhost_mcp_calls_total{result=\"busy\"}"),
        1.0
    );
    assert_eq!(
        server.modern(2, "tools/list", json!({}), &json!({})).status,
        200
    );
    drop(running);
    home.assert_no_module_processes();
}

/// Lockdown in MCP 2026-07-28 over HTTP, tried as the attack it prevents:
/// an agent reads untrusted content in one request and acts on it in the
/// next. Each request is a connection of its own there, so the principal
/// stands for the connection (`http/principal_lockdown.rs`): its next
/// request on this server is in lockdown; another principal's is not.
#[test]
fn a_principals_next_stateless_request_after_untrusted_content_is_in_lockdown() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    install_script(&home, "net", NET_SCRIPT);
    let token = |principal: &str| {
        let made = home.run(&["token", "new", "--principal", principal, "--json"]);
        made.expect_code(0);
        let made = made.json();
        let text = |key: &str| made[key].as_str().expect(key).to_owned();
        (text("token"), text("config_lines"))
    };
    let (alice, alice_lines) = token("alice");
    let (bob, bob_lines) = token("bob");
    home.write_config(&format!(
        "[[approval.rules]]\nmodule = \"net\"\ndecision = \"allow\"\n\n\
         [lockdown]\nenabled = true\n\n[http]\n\n{alice_lines}\n{bob_lines}"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let call = |token: &str, id: i64, tool: &str| -> Reply {
        let params = with_meta(json!({"name": tool, "arguments": {}}), &json!({}));
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let mut headers = modern_headers("tools/call", &params);
        headers.push(("Authorization".into(), format!("Bearer {token}")));
        server.post(&headers, &body.to_string())
    };
    let result = |reply: Reply| -> Value {
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["result"].clone()
    };
    let locked = json!({"active": true, "since": "net__net_fetch"});
    let before = result(call(&alice, 1, "echo__echo_echo"));
    assert_eq!(
        before["_meta"]["dev.modhost/lockdown"],
        Value::Null,
        "{before}"
    );
    let fetched = result(call(&alice, 2, "net__net_fetch"));
    assert_eq!(
        fetched["structuredContent"]["ran"],
        json!(true),
        "{fetched}"
    );
    assert_eq!(
        fetched["_meta"]["dev.modhost/lockdown"], locked,
        "{fetched}"
    );
    // The next request is in lockdown: the network call says so, and the
    // tool that writes (echo writes artifacts) waits for a person's yes,
    // which this client cannot give.
    let again = result(call(&alice, 3, "net__net_fetch"));
    assert_eq!(
        again["_meta"]["dev.modhost/lockdown"], locked,
        "the request after untrusted content is not in lockdown: {again}"
    );
    let refused = call(&alice, 4, "echo__echo_echo");
    assert_eq!(
        refused.status, 400,
        "echo ran in lockdown without a yes: {refused:?}"
    );
    let error = &refused.json()["error"];
    assert_eq!(error["code"], json!(-32021), "{refused:?}");
    assert!(
        error["data"]["remedy"]
            .as_str()
            .is_some_and(|why| why.contains("lockdown since net__net_fetch")),
        "{refused:?}"
    );
    // Another principal's requests are not.
    let theirs = result(call(&bob, 5, "echo__echo_echo"));
    assert_eq!(
        theirs["_meta"]["dev.modhost/lockdown"],
        Value::Null,
        "another principal's request is locked down: {theirs}"
    );
}
