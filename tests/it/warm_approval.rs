//! Nothing runs ahead of approval: `modhost mcp` starts processes ahead only
//! for tools its policy allows outright.
//!
//! The attack: a capability that asks for approval of every call
//! (`approval: true`) is offered under `--delegate-approval`; the client
//! approves one call, and the host then starts that module twice more, ahead
//! of calls nobody made, with the call's grants. Each module here is a shell
//! script that appends a line to a file in its state root the moment it
//! starts, before it reads a request, so every execution counts, a process
//! started ahead and never used included. (A describe is not counted: it
//! runs with no grants, so its append is refused by the confinement.)
//!
//! The server is driven over its stdio transport, one JSON-RPC line at a
//! time, as an MCP client does.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Home, binaries};

/// How long one answer from the server may take before the test calls it hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Calls of each tool.
const CALLS: usize = 3;

/// Longer than starting a process ahead takes, even on a loaded machine:
/// by then any process the host was going to start has recorded itself.
pub(crate) const SETTLE: Duration = Duration::from_millis(1500);

/// Install a script module `id` with one capability `<id>.run` whose
/// `effects` are `effects` (it writes its state root, where it counts its
/// executions), and pin it.
pub(crate) fn install_counting_module(home: &Home, id: &str, effects: &Value) {
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "roots": [{"name": "state", "kind": "state", "description": "its execution count"}],
        "capabilities": [{"id": format!("{id}.run"), "description": "counts its runs",
                          "input_schema": {"type": "object"}, "effects": effects}]
    });
    let executions = executions_file(home, id);
    let script = format!(
        r#"#!/bin/sh
echo started >> '{}' 2>/dev/null
IFS= read -r line
case "$line" in
  *'"method":"invoke"'*) printf '%s\n' '{{"jsonrpc":"2.0","id":1,"result":{{"output":{{"ran":true}}}}}}' ;;
  *) printf '%s\n' '{{"jsonrpc":"2.0","id":1,"result":{descriptor}}}' ;;
esac
"#,
        executions.display()
    );
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run(&["pin", id]).expect_code(0);
}

fn executions_file(home: &Home, id: &str) -> PathBuf {
    home.path().join("state").join(id).join("executions")
}

/// How many times module `id` has started.
pub(crate) fn executions(home: &Home, id: &str) -> usize {
    std::fs::read_to_string(executions_file(home, id))
        .unwrap_or_default()
        .lines()
        .count()
}

/// `modhost mcp` on pipes, and a reader thread handing over its stdout lines.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Server {
    pub(crate) fn start(home: &Home, args: &[&str]) -> Server {
        let mut command = Command::new(&binaries().modhost);
        command
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .arg("mcp")
            .args(args)
            .current_dir(home.workspace())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key.as_ref());
            }
        }
        let mut child = command.spawn().expect("spawn modhost mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout pipe");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        server.request(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "warm-approval-test", "version": "0"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to modhost mcp");
        stdin.flush().expect("flush to modhost mcp");
    }

    /// Send a request and return its response's `result`.
    #[track_caller]
    pub(crate) fn request(&mut self, method: &str, params: &Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {method} within {ANSWER_WITHIN:?}: {e}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON from modhost mcp: {e}: {line}"));
            if message["id"] == json!(id) {
                return message
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("{method} failed: {message:#}"));
            }
        }
    }

    /// The names of the listed tools.
    pub(crate) fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", &json!({}));
        listed["tools"]
            .as_array()
            .expect("a tool array")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Call tool `name` with no arguments; it must succeed.
    #[track_caller]
    pub(crate) fn call(&mut self, name: &str) {
        let result = self.request("tools/call", &json!({"name": name, "arguments": {}}));
        assert_ne!(result["isError"], json!(true), "{name} failed: {result:#}");
    }

    /// Close stdin and wait for the server to exit.
    pub(crate) fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for modhost mcp") {
                assert!(status.success(), "modhost mcp exited with {status}");
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("modhost mcp did not exit within {ANSWER_WITHIN:?} of stdin closing");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wait until `probe` holds or `within` passes; whether it held.
pub(crate) fn eventually(within: Duration, probe: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        if probe() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    probe()
}

#[test]
fn an_approved_call_runs_its_module_once_and_nothing_starts_ahead_of_approval() {
    let home = Home::new();
    // Asks for approval of every call: the default verdict is `ask`.
    install_counting_module(
        &home,
        "asker",
        &json!({"writes": ["state"], "approval": true}),
    );
    // Reaches the network: `ask` by default too.
    install_counting_module(
        &home,
        "netter",
        &json!({"writes": ["state"], "network": true}),
    );
    // Writes only its own state: `allow`, so it may be started ahead.
    install_counting_module(&home, "eager", &json!({"writes": ["state"]}));

    let mut server = Server::start(&home, &["--delegate-approval"]);
    let names = server.tool_names();
    let tool = |id: &str| {
        names
            .iter()
            .find(|n| n.starts_with(&format!("{id}__")))
            .unwrap_or_else(|| panic!("no tool of {id} offered: {names:?}"))
            .clone()
    };
    let (asker, netter, eager) = (tool("asker"), tool("netter"), tool("eager"));

    // Start-up: the server discovered and listed, and ran nothing for a call.
    std::thread::sleep(SETTLE);
    for id in ["asker", "netter", "eager"] {
        assert_eq!(executions(&home, id), 0, "{id} ran before any call");
    }

    for _ in 0..CALLS {
        server.call(&asker);
        server.call(&netter);
    }
    for _ in 0..CALLS {
        server.call(&eager);
    }
    // An allowed tool still gets its next processes started ahead: that is
    // what shows the pool was on for this server.
    assert!(
        eventually(Duration::from_secs(20), || executions(&home, "eager")
            > CALLS),
        "eager was never started ahead: {} executions for {CALLS} calls",
        executions(&home, "eager")
    );
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&home, "asker"),
        CALLS,
        "an `approval: true` capability ran more often than it was approved"
    );
    assert_eq!(
        executions(&home, "netter"),
        CALLS,
        "a network capability ran more often than it was approved"
    );
    server.finish();
    home.assert_no_module_processes();
}
