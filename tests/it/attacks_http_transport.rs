//! Attacks on `modhost mcp --http`'s transport, each against the real
//! binary over real sockets: what one client (or one principal) can do to
//! another's session, to the server's connection table, and to a gateway
//! that routes on the mirrored headers; and how the server answers a client
//! that half-closes, and a page that reached it by DNS rebinding.
//!
//! The first tests are the findings of the review of issue 35 and fail
//! until each is fixed; the last ones (`held_*`) are attacks that failed
//! and stay as regression tests: request smuggling, another principal
//! answering a question, and lines injected into the request log.
//!
//! Servers are started with [`HttpMcp`] (`mcp_http.rs`); what needs the
//! bytes on the wire goes through plain sockets here.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{HttpMcp, Raw, modern_headers, with_meta};
use crate::support::{Fixture, Home, write_file};

/// More sessions than one server remembers (`http/replica.rs`
/// `MAX_SESSIONS`, 10,000).
const SESSION_FLOOD: usize = 10_050;

/// A module in POSIX sh whose one capability declares `network: true`: its
/// verdict is `ask` and its result is untrusted content (lockdown).
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

/// A static bearer token for `principal` (`modhost token new`): the token
/// and its `[[http.tokens]]` lines.
fn token(home: &Home, principal: &str) -> (String, String) {
    let made = home.run(&["token", "new", "--principal", principal, "--json"]);
    made.expect_code(0);
    let made = made.json();
    (
        made["token"].as_str().expect("a token").to_owned(),
        made["config_lines"]
            .as_str()
            .expect("config lines")
            .to_owned(),
    )
}

fn bearer(token: &str) -> (String, String) {
    ("Authorization".to_owned(), format!("Bearer {token}"))
}

/// The headers of a request in handshake session `session`.
fn in_session(session: &str, token: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), "2025-11-25".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
    ];
    headers.extend(token.map(bearer));
    headers
}

/// `initialize` (2025-11-25, declaring `capabilities`) and
/// `notifications/initialized` as the holder of `token`: the session id.
#[track_caller]
fn handshake_as(server: &HttpMcp, token: Option<&str>, capabilities: &Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "attacks_http_transport", "version": "0"}}});
    let headers: Vec<(String, String)> = token.map(bearer).into_iter().collect();
    let reply = server.post(&headers, &init.to_string());
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {reply:?}"))
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = server.post(&in_session(&session, token), &initialized.to_string());
    assert_eq!(accepted.status, 202, "{accepted:?}");
    session
}

/// One `POST /mcp` as bytes on the wire.
fn post_bytes(headers: &[(String, String)], body: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    request.into_bytes()
}

/// Send `requests` pipelined on one connection, then a last one that
/// closes it; everything the server answered, read to that close.
fn pipelined(addr: SocketAddr, mut requests: Vec<Vec<u8>>) -> String {
    requests
        .push(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".to_vec());
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut writer = stream.try_clone().expect("clone the socket");
    let sending = std::thread::spawn(move || {
        for request in requests {
            writer
                .write_all(&request)
                .expect("send a pipelined request");
        }
    });
    let mut answered = Vec::new();
    let mut reader = stream;
    reader
        .read_to_end(&mut answered)
        .expect("read the answers until the server closes");
    sending.join().expect("the sender");
    String::from_utf8_lossy(&answered).into_owned()
}

/// `count` handshake sessions for the holder of `token`, started and used
/// once each (so each is remembered), pipelined.
fn flood_sessions(server: &HttpMcp, token: &str, count: usize) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"}}})
    .to_string();
    let headers = vec![
        bearer(token),
        ("Accept".to_owned(), "application/json".to_owned()),
    ];
    let started = pipelined(server.addr, vec![post_bytes(&headers, &init); count]);
    let sessions: Vec<&str> = started
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim())
        })
        .collect();
    assert_eq!(sessions.len(), count, "every initialize starts a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let used = pipelined(
        server.addr,
        sessions
            .iter()
            .map(|session| post_bytes(&in_session(session, Some(token)), &initialized))
            .collect(),
    );
    assert_eq!(used.matches("HTTP/1.1 202").count(), count);
}

/// The first JSON message of an SSE stream read line by line, within
/// `within`; `None` when none came by then (keep-alives skipped).
fn next_event(raw: &mut Raw, within: Duration) -> Option<Value> {
    let started = Instant::now();
    while started.elapsed() < within {
        let line = raw.next_line();
        if let Some(data) = line.strip_prefix("data: ") {
            return Some(serde_json::from_str(data).expect("an event's data is JSON"));
        }
    }
    None
}

/// Everything a socket receives until the server closes it or `within`.
fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0; 8192];
    while started.elapsed() < within {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Finding (medium): a handshake session's lockdown lives in the replica's
/// table of sessions (`http/replica.rs`), which keeps the 10,000 used last
/// across every principal. Another principal (on a loopback server
/// without authentication: any local process) that uses 10,050 sessions
/// of its own evicts the victim's entry, and the victim's next call runs
/// outside lockdown: a restriction that must only narrow was lifted by
/// someone else.
#[test]
fn another_principals_session_flood_does_not_lift_a_sessions_lockdown() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    install_script(&home, "net", NET_SCRIPT);
    let (alice, alice_lines) = token(&home, "alice");
    let (bob, bob_lines) = token(&home, "bob");
    home.write_config(&format!(
        "[[approval.rules]]\nmodule = \"net\"\ndecision = \"allow\"\n\n\
         [lockdown]\nenabled = true\n\n[http]\n\n{alice_lines}\n{bob_lines}"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let session = handshake_as(&server, Some(&alice), &json!({}));
    let call = |id: i64, tool: &str| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}});
        let reply = server.post(&in_session(&session, Some(&alice)), &body.to_string());
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["result"].clone()
    };
    let locked = json!({"active": true, "since": "net__net_fetch"});
    // Untrusted content reaches the session: it is locked down from here.
    let fetched = call(1, "net__net_fetch");
    assert_eq!(
        fetched["_meta"]["dev.modhost/lockdown"], locked,
        "{fetched}"
    );
    let echoed = call(2, "echo__echo_echo");
    assert_eq!(echoed["_meta"]["dev.modhost/lockdown"], locked, "{echoed}");

    flood_sessions(&server, &bob, SESSION_FLOOD);

    let echoed = call(3, "echo__echo_echo");
    assert_eq!(
        echoed["_meta"]["dev.modhost/lockdown"], locked,
        "bob's {SESSION_FLOOD} sessions lifted alice's lockdown: {echoed}"
    );
}

/// Finding (medium): the same eviction loses a question the victim's
/// session is waiting on. Alice's client is asked to approve a call; bob
/// uses 10,050 sessions; alice's yes (202) reaches a fresh, empty entry
/// for her session, so her call waits out the answer timeout (600 s) and
/// is refused. (By the same eviction, read in the code and not tried
/// here, alice's running calls are forgotten too, and her
/// `notifications/cancelled` then stops none of them.)
#[test]
fn another_principals_session_flood_does_not_lose_an_open_approval_question() {
    let home = Home::new();
    install_script(&home, "net", NET_SCRIPT);
    let (alice, alice_lines) = token(&home, "alice");
    let (bob, bob_lines) = token(&home, "bob");
    home.write_config(&format!(
        "[lockdown]\nenabled = false\n\n[http]\nkeepalive_secs = 1\n\n{alice_lines}\n{bob_lines}"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let session = handshake_as(&server, Some(&alice), &json!({"elicitation": {}}));
    let body = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "net__net_fetch", "arguments": {}}});
    let mut call = Raw::post(
        server.addr,
        &in_session(&session, Some(&alice)),
        &body.to_string(),
    );
    assert_eq!(call.head().0, 200);
    let question = next_event(&mut call, Duration::from_secs(20)).expect("a question");
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );

    flood_sessions(&server, &bob, SESSION_FLOOD);

    let yes = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"approve": true}}});
    let accepted = server.post(&in_session(&session, Some(&alice)), &yes.to_string());
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let result = next_event(&mut call, Duration::from_secs(15));
    assert!(
        result
            .as_ref()
            .is_some_and(|r| r["result"]["structuredContent"]["ran"] == json!(true)),
        "alice said yes, but after bob's {SESSION_FLOOD} sessions her call did not run \
         within 15 s: {result:?}"
    );
}

/// Finding (medium, unauthenticated): every accepted connection holds one
/// of `max_connections` slots (streams + calls + 256) from its accept, and
/// one that sends nothing keeps it for the whole header timeout. A client
/// that opens that many silent connections (and opens them again as they
/// time out) has every other connection closed unanswered at accept:
/// callers, and the `/healthz` and `/readyz` probes, so an orchestrator
/// restarts a healthy pod and kills its calls in flight. A connection that
/// has sent nothing should be the first to go when the table is full.
#[test]
fn silent_connections_do_not_lock_out_health_checks_and_callers() {
    // max_connections = 10 + 2 + 256 = 268.
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[lockdown]\nenabled = false\n\n[http]\nmax_open_streams = 10\n\
         max_concurrent_calls = 2\nheader_timeout_secs = 30\n",
    );
    let server = HttpMcp::start(&home, |_| {});
    let silent: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(server.addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut probe = TcpStream::connect(server.addr).expect("connect");
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("send");
    let answered = read_until_closed(&mut probe, Duration::from_secs(10));
    assert!(
        answered.starts_with("HTTP/1.1 200"),
        "with {} silent connections open, /healthz got {answered:?}",
        silent.len()
    );
    let params = with_meta(json!({}), &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params});
    let mut caller = TcpStream::connect(server.addr).expect("connect");
    let mut headers = modern_headers("tools/list", &params);
    headers.push(("Connection".into(), "close".into()));
    caller
        .write_all(&post_bytes(&headers, &body.to_string()))
        .expect("send");
    let answered = read_until_closed(&mut caller, Duration::from_secs(10));
    assert!(
        answered.starts_with("HTTP/1.1 200"),
        "with {} silent connections open, tools/list got {answered:?}",
        silent.len()
    );
}

/// Finding (low): over HTTP, each handshake request gets a connection of
/// its own, so the stdio server's refusal of a request id still in use
/// never sees the other request, and the session's table of running calls
/// (`replica.rs`) keeps only the newest call of an id. Two calls with one
/// id both run; `notifications/cancelled` for that id stops one, and the
/// other (say, one waiting for a yes) runs on, out of the client's reach
/// but by closing its stream.
#[test]
fn a_cancelled_request_id_stops_every_call_of_it_in_the_session() {
    let home = Home::new();
    home.install(Fixture::Hang, "hang");
    home.write_config("[lockdown]\nenabled = false\n\n[http]\nkeepalive_secs = 1\n");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("hang__");
    let session = handshake_as(&server, None, &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
        "params": {"name": tool, "arguments": {}}})
    .to_string();
    let first = Raw::post(server.addr, &in_session(&session, None), &body);
    let started = Instant::now();
    while home.live_module_processes().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut second = Raw::post(server.addr, &in_session(&session, None), &body);
    assert_eq!(second.head().0, 200);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "dup"}});
    let accepted = server.post(&in_session(&session, None), &cancel.to_string());
    assert_eq!(accepted.status, 202, "{accepted:?}");
    // Both streams stay open: only the cancellation may stop the calls.
    home.assert_no_module_processes();
    drop((first, second));
}

/// Finding (low): a client that sends its request and then half-closes
/// (`shutdown(SHUT_WR)`, as `nc -N` and some proxies do) gets no answer:
/// hyper's default takes the end of the request stream for a client that
/// left, and the call is cancelled (a fast call races and mostly loses,
/// a slow one always). The request was whole; its answer should come.
#[test]
fn a_client_that_half_closes_after_its_request_gets_the_answer() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[lockdown]\nenabled = false\n");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__echo_echo");
    let params = with_meta(json!({"name": tool, "arguments": {"x": 1}}), &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let mut headers = modern_headers("tools/call", &params);
    headers.push(("Connection".into(), "close".into()));
    headers.push((
        "Accept".into(),
        "application/json, text/event-stream".into(),
    ));
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .write_all(&post_bytes(&headers, &body.to_string()))
        .expect("send");
    stream.shutdown(Shutdown::Write).expect("half-close");
    let answered = read_until_closed(&mut stream, Duration::from_secs(20));
    assert!(
        answered.starts_with("HTTP/1.1 200") && answered.contains("\"isError\":false"),
        "a half-closed client got {answered:?}"
    );
}

/// Finding (low): the handshake era does not check `Mcp-Method` (nor
/// `Mcp-Name`) against the body. A gateway that routes, rate-limits or
/// authorizes on those headers (what they are for) is told `tools/list`
/// while the server runs `tools/call`: the confused deputy the 2026-07-28
/// check prevents, reopened by leaving `_meta` out of the body.
#[test]
fn mirrored_headers_that_lie_are_refused_in_a_handshake_session_too() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[lockdown]\nenabled = false\n");
    let server = HttpMcp::start(&home, |_| {});
    let tool = server.tool("echo__echo_echo");
    let session = handshake_as(&server, None, &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    for (header, lie) in [("Mcp-Method", "tools/list"), ("Mcp-Name", "echo__other")] {
        let mut headers = in_session(&session, None);
        headers.push((header.into(), lie.into()));
        let reply = server.post(&headers, &body.to_string());
        assert_eq!(
            reply.status, 400,
            "{header}: {lie} in front of a tools/call of {tool} was served: {reply:?}"
        );
        assert_eq!(reply.json()["error"]["code"], json!(-32020), "{reply:?}");
    }
    assert_eq!(server.metric("modhost_mcp_calls_total{result=\"ok\"}"), 0.0);
}

/// Finding (low): on a loopback bind the `Host` header is not checked. A
/// page on `rebind.attacker.example` whose name is rebound to 127.0.0.1 is
/// same-origin with the server; a same-origin `GET` carries no `Origin`,
/// so the `Origin` check never sees it, and the page reads `/metrics` (and
/// `/healthz`, `/readyz`). The streamable HTTP transport asks local
/// servers to resist DNS rebinding; the TypeScript and Python SDKs offer
/// a `Host` allowlist of the loopback names for it.
#[test]
fn a_rebinding_host_name_is_refused_on_a_loopback_bind() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[lockdown]\nenabled = false\n");
    let server = HttpMcp::start(&home, |_| {});
    let port = server.addr.port();
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: rebind.attacker.example:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let answered = read_until_closed(&mut stream, Duration::from_secs(10));
    let status = answered.split(' ').nth(1).unwrap_or_default().to_owned();
    assert!(
        status == "403" || status == "421",
        "a rebound page read /metrics: {}",
        answered.lines().next().unwrap_or_default()
    );
    // The loopback's own names still reach it.
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    assert!(read_until_closed(&mut stream, Duration::from_secs(10)).starts_with("HTTP/1.1 200"));
}

/// Held: request smuggling. A body framed both by `Content-Length` and
/// chunked, and a body refused before it is read (413, 403), each carry a
/// second request; none of those is ever answered (the server reads the
/// chunked framing, and closes or drains what it did not read).
#[test]
fn held_a_request_hidden_in_a_body_is_never_served() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[lockdown]\nenabled = false\n\n[http]\nmax_body_bytes = 4096\n");
    let server = HttpMcp::start(&home, |_| {});
    let params = with_meta(json!({}), &json!({}));
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).to_string();
    let headers = modern_headers("tools/list", &params);
    let hidden = String::from_utf8(post_bytes(&headers, &body)).unwrap();
    let mut head = String::new();
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let attempts = [
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: 4\r\n\
             Transfer-Encoding: chunked\r\n\r\n{chunked}{hidden}"
        ),
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: 5000\r\n\r\n{hidden}"
        ),
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Origin: http://evil.example\r\n\
             Content-Length: {}\r\n\r\n{hidden}",
            hidden.len()
        ),
    ];
    for attempt in attempts {
        let mut stream = TcpStream::connect(server.addr).expect("connect");
        stream.write_all(attempt.as_bytes()).expect("send");
        let answered = read_until_closed(&mut stream, Duration::from_secs(3));
        assert_eq!(
            answered.matches("HTTP/1.1 ").count(),
            1,
            "the hidden request was answered: {answered}"
        );
    }
}

/// Held: another principal answers a question of a session it does not
/// hold: with that session's id (404), with a session of its own, or
/// without a session (both ignored); the call waits for its own client's
/// yes and runs only then.
#[test]
fn held_another_principal_cannot_answer_a_sessions_question() {
    let home = Home::new();
    install_script(&home, "net", NET_SCRIPT);
    let (alice, alice_lines) = token(&home, "alice");
    let (bob, bob_lines) = token(&home, "bob");
    home.write_config(&format!(
        "[lockdown]\nenabled = false\n\n[http]\nkeepalive_secs = 1\n\n{alice_lines}\n{bob_lines}"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let session = handshake_as(&server, Some(&alice), &json!({"elicitation": {}}));
    let theirs = handshake_as(&server, Some(&bob), &json!({"elicitation": {}}));
    let body = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "net__net_fetch", "arguments": {}}});
    let mut call = Raw::post(
        server.addr,
        &in_session(&session, Some(&alice)),
        &body.to_string(),
    );
    assert_eq!(call.head().0, 200);
    let question = next_event(&mut call, Duration::from_secs(20)).expect("a question");
    let yes = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"approve": true}}})
    .to_string();
    let hijacked = server.post(&in_session(&session, Some(&bob)), &yes);
    assert_eq!(hijacked.status, 404, "{hijacked:?}");
    let own = server.post(&in_session(&theirs, Some(&bob)), &yes);
    assert_eq!(own.status, 202, "{own:?}");
    let bare = server.post(&[bearer(&bob)], &yes);
    assert_eq!(bare.status, 400, "{bare:?}");
    assert!(
        next_event(&mut call, Duration::from_secs(3)).is_none(),
        "bob's yes ran alice's call"
    );
    let accepted = server.post(&in_session(&session, Some(&alice)), &yes);
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let result = next_event(&mut call, Duration::from_secs(20)).expect("the result");
    assert_eq!(result["result"]["structuredContent"]["ran"], json!(true));
}

/// Held: the request log is one JSON object per line whatever a client
/// names (tool and method names with line breaks and fake records), and it
/// holds neither a token nor an argument.
#[test]
fn held_the_request_log_takes_no_injected_line_token_or_argument() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (token, lines) = token(&home, "alice");
    home.write_config(&format!("[lockdown]\nenabled = false\n\n[http]\n\n{lines}"));
    let server = HttpMcp::start(&home, |_| {});
    let forged = "x\n{\"method\":\"FAKE\",\"status\":200}\r\nmodhost_mcp_calls_total 999";
    let params = with_meta(
        json!({"name": forged, "arguments": {"secret": "ARGUMENT-SECRET-1"}}),
        &json!({}),
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let mut headers = modern_headers("tools/call", &json!({}));
    headers.push((
        "Mcp-Name".into(),
        format!(
            "=?base64?{}?=",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, forged)
        ),
    ));
    headers.push(bearer(&token));
    let reply = server.post(&headers, &body.to_string());
    assert_eq!(reply.status, 400, "{reply:?}");
    let session = handshake_as(&server, Some(&token), &json!({}));
    let injected = json!({"jsonrpc": "2.0", "id": 2, "method": forged, "params": {}});
    server.post(&in_session(&session, Some(&token)), &injected.to_string());
    let log = server.stderr();
    for line in log.lines().filter(|l| l.starts_with('{')) {
        let record: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line is not one JSON record ({e}): {line}"));
        assert_ne!(record["method"], json!("FAKE"), "{line}");
    }
    assert!(log.contains("\"tool\":\"x\\n"), "the call is logged: {log}");
    assert!(
        !log.contains("ARGUMENT-SECRET-1"),
        "an argument was logged: {log}"
    );
    assert!(!log.contains(&token), "the token was logged: {log}");
    let metrics = server.get("/metrics").body;
    assert!(
        !metrics.contains("FAKE") && !metrics.lines().any(|l| l.ends_with(" 999")),
        "a client wrote into /metrics: {metrics}"
    );
}
