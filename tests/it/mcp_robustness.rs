//! `modhost mcp` cannot be knocked over by its client, and takes its
//! workspace from where the client means it.
//!
//! Each test starts the real server over stdio and writes raw bytes to it, as
//! a broken or hostile client would: invalid UTF-8, lines far over the cap,
//! more concurrent calls than allowed, pings while calls hang. The server is
//! started with a controlled working directory and environment, so the
//! workspace rules (`--workspace`, `MODHOST_WORKSPACE`, never `/` or the
//! home) are checked as a client that starts servers with `cwd=/` meets them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home, binaries, wait_until_empty, write_file};

/// How long any one answer may take before the test calls the server hung.
const ANSWER: Duration = Duration::from_secs(30);

/// The server's cap on one client line (`modhost_mcp::line::MAX_LINE_BYTES`).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// `modhost --home H mcp` (no workspace flag) started in `cwd`, with no
/// inherited `MODHOST_*`, `HOME` set to `user_home`, plus `env`; before the
/// handshake.
fn spawn_server(home: &Home, cwd: &Path, user_home: &Path, env: &[(&str, &Path)]) -> McpStdio {
    McpStdio::spawn(home, None, |command| {
        command
            .current_dir(cwd)
            .env("HOME", user_home)
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
    })
    .answering_within(ANSWER)
}

/// [`spawn_server`], after the handshake.
fn start_server(home: &Home, cwd: &Path, user_home: &Path, env: &[(&str, &Path)]) -> McpStdio {
    let mut server = spawn_server(home, cwd, user_home, env);
    server.initialize(&json!({}));
    server
}

/// The server's peak resident set (`VmHWM`), in KiB.
fn peak_rss_kib(server: &McpStdio) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {response}"))
}

#[test]
fn a_line_of_invalid_utf8_gets_a_parse_error_and_the_server_answers_on() {
    let home = Home::new();
    let ws = home.workspace();
    let mut server = start_server(&home, &ws, &home.outside(), &[]);
    // Valid JSON in every other respect: only the encoding is wrong.
    server.write(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\xc3\"}}\n");
    let refused = server.response();
    assert_eq!(error_code(&refused), -32700, "{refused}");
    assert_eq!(refused["id"], Value::Null, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("UTF-8"),
        "{refused}"
    );
    assert_eq!(server.request("ping", &json!({}))["result"], json!({}));
    assert!(server.request("tools/list", &json!({}))["result"]["tools"].is_array());
    server.finish();
}

#[test]
fn lines_over_the_cap_are_refused_skipped_and_never_held_whole() {
    let home = Home::new();
    let ws = home.workspace();
    let mut server = start_server(&home, &ws, &home.outside(), &[]);
    assert_eq!(server.request("ping", &json!({}))["result"], json!({}));
    let baseline = peak_rss_kib(&server);

    // A request that would be valid but for its size: a 5 MiB argument.
    let line = |bytes: usize| {
        let head = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"s":""#;
        let tail = "\"}}}\n";
        let mut line = String::with_capacity(bytes + 1);
        line.push_str(head);
        line.extend(std::iter::repeat_n(
            'a',
            bytes - head.len() - tail.len() + 1,
        ));
        line.push_str(tail);
        line
    };
    let five = line(5 << 20);
    server.write(five.as_bytes());
    let refused = server.response();
    assert_eq!(error_code(&refused), -32600, "{refused}");
    assert_eq!(refused["id"], Value::Null, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&MAX_LINE_BYTES.to_string()) && message.contains("skipped"),
        "the error names the cap: {message}"
    );
    assert_eq!(server.request("ping", &json!({}))["result"], json!({}));

    // Ten times the cap: the server must not hold it.
    let huge = line(40 << 20);
    server.write(huge.as_bytes());
    drop(huge);
    assert_eq!(error_code(&server.response()), -32600);
    assert!(server.request("tools/list", &json!({}))["result"]["tools"].is_array());
    let grown_kib = peak_rss_kib(&server).saturating_sub(baseline);
    eprintln!("peak RSS: {baseline} KiB before the long lines, grown by {grown_kib} KiB after");
    // What may be held: one line up to the cap, the reader's buffer, and
    // allocator slack. Reading the 40 MiB line whole would grow it by more
    // than 40 MiB.
    assert!(
        grown_kib < 12 * 1024,
        "a 40 MiB line grew the server's peak RSS by {grown_kib} KiB (baseline {baseline} KiB)"
    );
    server.finish();
}

/// A ping, answered within a second (`why`: what a late or other answer
/// means); how long it took.
#[track_caller]
fn answer_ping(server: &mut McpStdio, why: &str) -> Duration {
    let sent = Instant::now();
    let id = server.send_request("ping", &json!({}));
    let pong = server.next_message(Duration::from_secs(1));
    assert_eq!(pong["id"], json!(id), "{why}: {pong}");
    sent.elapsed()
}

/// The attack: a component whose root holds a fifo no writer opens. Its
/// open blocks the thread running the call (a component call with roots
/// blocks its own thread in filesystem operations, `runner::wasm::Blocking`),
/// which must never be the server's: pings are answered while it hangs, the
/// call ends at its deadline, and the next call is served.
#[test]
fn a_component_stuck_opening_a_fifo_in_its_root_holds_neither_the_server_nor_its_deadline() {
    let home = Home::new();
    home.write_config("[limits]\ndeadline_ms = 1500\n");
    home.install_component("echo");
    let ws = home.workspace();
    let made = Command::new("mkfifo")
        .arg(ws.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut server = start_server(&home, &ws, &home.outside(), &[]);
    let tool = server.tool_named("echo", "run");
    let began = Instant::now();
    let stuck = server.send_request(
        "tools/call",
        &json!({"name": tool, "arguments": {"read": "pipe"}}),
    );
    for _ in 0..5 {
        answer_ping(&mut server, "the server waited on the fifo");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ended = server.next_message(Duration::from_secs(10));
    assert_eq!(ended["id"], json!(stuck), "{ended}");
    assert_eq!(ended["result"]["isError"], json!(true), "{ended}");
    let text = ended["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("1500 ms"), "not its deadline: {text}");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    write_file(&ws, "note.txt", "served");
    let next = server.request(
        "tools/call",
        &json!({"name": tool, "arguments": {"read": "note.txt"}}),
    );
    assert_eq!(next["result"]["isError"], json!(false), "{next}");
    assert!(next.to_string().contains("served"), "{next}");
    server.finish();
}

#[test]
fn pings_are_answered_at_once_while_calls_hang_and_calls_beyond_the_cap_are_refused() {
    let home = Home::new();
    home.install(Fixture::Hang, "hang");
    home.write_config("[limits]\ndeadline_ms = 20000\n");
    let ws = home.workspace();
    let mut server = start_server(&home, &ws, &home.outside(), &[]);
    let tool = server.tool_named("hang", "run");
    let cap = 16; // modhost_mcp::MAX_CONCURRENT_CALLS
    let calls: Vec<u64> = (0..cap)
        .map(|_| server.send_request("tools/call", &json!({"name": tool, "arguments": {}})))
        .collect();
    // Every call is in flight (its process started) before the next checks.
    let started = Instant::now();
    while home.live_module_processes().len() < cap {
        assert!(
            started.elapsed() < ANSWER,
            "only {} of {cap} hang processes started",
            home.live_module_processes().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let extra = server.send_request("tools/call", &json!({"name": tool, "arguments": {}}));
    let refused = server.response();
    assert_eq!(refused["id"], json!(extra), "{refused}");
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("16 calls"), "{text}");

    // While 16 calls hang, pings come back well inside a second each.
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        slowest = slowest.max(answer_ping(&mut server, "a ping waited for the calls"));
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("slowest ping while {cap} calls hang: {slowest:?}");

    // Cancelling is answered as fast, and the cancelled calls' processes go.
    for id in &calls {
        server.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "test"}}),
        );
    }
    answer_ping(&mut server, "the cancelled calls got no response");
    let left = wait_until_empty(|| home.live_module_processes());
    assert!(left.is_empty(), "cancelled calls left processes: {left:?}");
    server.finish();
}

/// `files.read` of `note.txt`, through an MCP server started in `cwd`.
fn read_note_over_mcp(home: &Home, cwd: &Path, user_home: &Path, env: &[(&str, &Path)]) -> Value {
    let mut server = start_server(home, cwd, user_home, env);
    let tool = server.tool_named("files", "read");
    let response = server.request(
        "tools/call",
        &json!({"name": tool, "arguments": {"path": "note.txt"}}),
    );
    server.finish();
    response["result"].clone()
}

#[test]
fn a_server_started_in_the_root_or_the_home_grants_no_workspace_and_says_how_to_set_one() {
    let home = Home::new();
    home.install_files();
    let user_home = home.outside();
    // Were `/` or the home taken as the workspace, these would be readable.
    write_file(&user_home, "note.txt", "the user's private note");

    for cwd in [Path::new("/"), user_home.as_path()] {
        let result = read_note_over_mcp(&home, cwd, &user_home, &[]);
        assert_eq!(
            result["isError"],
            json!(true),
            "started in {}: {result}",
            cwd.display()
        );
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            !text.contains("private note"),
            "started in {}, the module read {text}",
            cwd.display()
        );
        assert!(
            text.contains("no workspace")
                && text.contains("MODHOST_WORKSPACE")
                && text.contains("--workspace"),
            "the refusal names the remedy: {text}"
        );
    }

    // MODHOST_WORKSPACE is the workspace, wherever the server starts.
    let ws = home.workspace();
    write_file(&ws, "note.txt", "the project's note");
    let result = read_note_over_mcp(
        &home,
        Path::new("/"),
        &user_home,
        &[("MODHOST_WORKSPACE", &ws)],
    );
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(
        result["structuredContent"]["content"],
        json!("the project's note"),
        "{result}"
    );
}

#[test]
fn invoke_and_doctor_take_the_workspace_from_modhost_workspace() {
    let home = Home::new();
    home.install_files();
    let ws = home.workspace();
    write_file(&ws, "note.txt", "the project's note");
    let user_home = home.outside();
    let run = |args: &[&str], env: Option<&Path>| {
        let mut command = Command::new(&binaries().modhost);
        command
            .arg("--home")
            .arg(home.path())
            .args(args)
            .current_dir("/")
            .env("HOME", &user_home)
            .stdin(Stdio::null());
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key);
            }
        }
        if let Some(ws) = env {
            command.env("MODHOST_WORKSPACE", OsString::from(ws));
        }
        command.output().expect("run modhost")
    };
    let read = [
        "invoke",
        "files",
        "files.read",
        "--input",
        r#"{"path": "note.txt"}"#,
        "--json",
    ];

    let out = run(&read, Some(&ws));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        result["output"]["content"],
        json!("the project's note"),
        "{result}"
    );

    // Without it, in `/`: refused before the module runs, with the remedy.
    let out = run(&read, None);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let refused: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(refused["error"]["kind"], json!("no_workspace"), "{refused}");
    assert!(
        refused["error"]["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("MODHOST_WORKSPACE"),
        "{refused}"
    );

    let out = run(&["doctor", "--json"], Some(&ws));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let canonical: PathBuf = std::fs::canonicalize(&ws).expect("canonical workspace");
    assert_eq!(report["workspace"], json!(canonical), "{report}");
    let out = run(&["doctor", "--json"], None);
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["workspace"], Value::Null, "{report}");
}

#[test]
fn the_clients_root_is_the_workspace_of_a_server_started_in_the_root() {
    let home = Home::new();
    home.install_files();
    let ws = home.workspace();
    write_file(&ws, "note.txt", "the project's note");
    let other = home.outside();
    let mut server = spawn_server(&home, Path::new("/"), &other, &[]);
    server.initialize(&json!({"roots": {"listChanged": true}}));
    let ask = server.next_message(ANSWER);
    assert_eq!(ask["method"], json!("roots/list"), "{ask}");
    // Two roots: the first is the workspace, the second is not granted.
    server.send(
        &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [
            {"uri": format!("file://{}", ws.display()), "name": "project"},
            {"uri": format!("file://{}", other.display())},
        ]}}),
    );
    let tool = server.tool_named("files", "read");
    let read = server.request(
        "tools/call",
        &json!({"name": tool, "arguments": {"path": "note.txt"}}),
    );
    assert_eq!(read["result"]["isError"], json!(false), "{read}");
    assert_eq!(
        read["result"]["structuredContent"]["content"],
        json!("the project's note"),
        "{read}"
    );
    server.finish();
}

/// A server in `home` running one call of a module that left a lingering
/// grandchild and sleeps: both processes are up when this returns.
fn server_with_a_call_left_running(home: &Home) -> McpStdio {
    home.install(Fixture::Grandchild, "grandchild");
    let ws = home.workspace();
    let mut server = start_server(home, &ws, &home.outside(), &[]);
    let tool = server.tool_named("grandchild", "run");
    server.send_request(
        "tools/call",
        &json!({"name": tool, "arguments": {"hang": true}}),
    );
    let started = Instant::now();
    while home.live_module_processes().len() < 2 {
        assert!(
            started.elapsed() < ANSWER,
            "the call and its grandchild did not start: {:?}",
            home.live_module_processes()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// How clients end a stdio server (stdin closed, then SIGTERM; here the
/// signal alone), a terminal's Ctrl-C and a closed terminal: each ends the
/// server as EOF does. The call still running (a module that left a
/// grandchild and sleeps) is killed whole, its grandchild included, which
/// the module's own parent-death signal would not reach.
#[test]
fn a_termination_signal_ends_every_call_and_its_grandchildren_as_eof_does() {
    for signal in ["TERM", "INT", "HUP"] {
        let home = Home::new();
        let server = server_with_a_call_left_running(&home);
        server.terminate(signal);
        let left = wait_until_empty(|| home.live_module_processes());
        assert!(left.is_empty(), "SIG{signal} left processes: {left:?}");
    }
}

/// The same signal when the client stopped reading: the server's stdout
/// pipe and its outbox are full, and its reader waits to send. The signal
/// still ends it, the call killed whole, rather than the server waiting on
/// its writes for ever (and the next step, SIGKILL, leaving a grandchild).
#[test]
fn a_termination_signal_ends_a_server_whose_client_stopped_reading() {
    let home = Home::new();
    let server = server_with_a_call_left_running(&home);
    server.stop_reading();
    // Far more answers than the pipe (64 KiB) and the outbox hold; the
    // server stops reading stdin too once it waits, so the flood is sent
    // from a thread of its own.
    let flood: String = (0..4000)
        .map(|i| {
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": format!("p{i}"), "method": "ping"})
            )
        })
        .collect();
    server.send_raw_in_background(flood.into_bytes());
    std::thread::sleep(Duration::from_secs(1));
    server.terminate("TERM");
    let left = wait_until_empty(|| home.live_module_processes());
    assert!(left.is_empty(), "SIGTERM left processes: {left:?}");
}
