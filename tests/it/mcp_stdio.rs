//! `modhost mcp` driven over its stdio transport, one JSON-RPC line at a
//! time, as an MCP client does: the one driver every test of the MCP
//! surface uses.
//!
//! Design decisions:
//!
//! - **Started like every other `modhost` run** (see [`crate::support`]):
//!   no inherited `MODHOST_*` or `RUST_LOG`, an explicit `--home`, and the
//!   workspace only when the test gives one, so a test of where the workspace
//!   comes from controls it fully. Anything else (flags after `mcp`, the
//!   working directory, `HOME`, `MODHOST_WORKSPACE`, stderr) the test sets
//!   on the [`Command`] before it is spawned.
//! - **Stdout is read on a thread into a channel**, so every wait has a
//!   deadline: a hung server fails the test instead of hanging the suite.
//! - **A request's response is the next response, and must carry its id.**
//!   Notifications and server-to-client requests on the way are kept (and
//!   shown when a wrong response arrives); a response to something else
//!   fails the test, since every caller sends one request at a time or
//!   reads the responses itself ([`McpStdio::response`]).
//! - **Dropping the driver kills and reaps the server**, so a failing test
//!   leaves no process behind; [`McpStdio::finish`] is the clean end, which
//!   asserts the server exits by itself when its stdin closes.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Home, binaries};

/// How long one answer (or the exit after stdin closes) may take before the
/// test calls the server hung, unless the test sets its own
/// ([`McpStdio::answering_within`]).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A running `modhost mcp`, its stdin, and its stdout lines.
pub struct McpStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    answer_within: Duration,
    /// Messages that were not responses (notifications and server requests),
    /// skipped while waiting for a response.
    skipped: Vec<Value>,
    /// While set, the server's stdout is not read: a client that stopped
    /// reading, whose pipe fills.
    unread: Arc<AtomicBool>,
}

impl McpStdio {
    /// [`McpStdio::spawn`], then the `initialize` handshake with no client
    /// capabilities.
    pub fn start(
        home: &Home,
        workspace: Option<&Path>,
        configure: impl FnOnce(&mut Command),
    ) -> McpStdio {
        let mut server = McpStdio::spawn(home, workspace, configure);
        server.initialize(&json!({}));
        server
    }

    /// `modhost --home <home> [--workspace <workspace>] mcp`, stdin and
    /// stdout piped, stderr discarded, no inherited `MODHOST_*` or
    /// `RUST_LOG`; `configure` adds the rest (it runs last, so what it sets
    /// wins). No handshake yet.
    pub fn spawn(
        home: &Home,
        workspace: Option<&Path>,
        configure: impl FnOnce(&mut Command),
    ) -> McpStdio {
        let mut command = Command::new(&binaries().modhost);
        command.arg("--home").arg(home.path());
        if let Some(workspace) = workspace {
            command.arg("--workspace").arg(workspace);
        }
        command
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key.as_ref());
            }
        }
        configure(&mut command);
        let mut child = command.spawn().expect("start modhost mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout pipe");
        let (sender, lines) = mpsc::channel();
        let unread = Arc::new(AtomicBool::new(false));
        let paused = Arc::clone(&unread);
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                while paused.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let line = line.trim_end_matches(['\r', '\n']).to_owned();
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        McpStdio {
            child,
            stdin,
            lines,
            next_id: 1,
            answer_within: ANSWER_WITHIN,
            skipped: Vec::new(),
            unread,
        }
    }

    /// The same server, waiting up to `limit` for each answer and for the
    /// exit in [`McpStdio::finish`].
    pub fn answering_within(mut self, limit: Duration) -> McpStdio {
        self.answer_within = limit;
        self
    }

    /// The server's process id, for `/proc` checks.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `initialize` declaring `capabilities` (the server must name a
    /// protocol version), then `notifications/initialized`.
    pub fn initialize(&mut self, capabilities: &Value) {
        let init = self.request(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "modhost-it", "version": "0"}}),
        );
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Write raw bytes to the server's stdin, as a broken client would.
    pub fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to modhost mcp");
        stdin.flush().expect("flush to modhost mcp");
    }

    /// Send one message as a line.
    pub fn send(&mut self, message: &Value) {
        self.write(format!("{message}\n").as_bytes());
    }

    /// Write `bytes` to the server's stdin from a thread of its own, which
    /// ends when they are written or the server is gone: for floods the
    /// server may stop reading.
    pub fn send_raw_in_background(&self, bytes: Vec<u8>) {
        use std::os::fd::AsFd;
        let stdin = self.stdin.as_ref().expect("stdin is open");
        let mut pipe = std::fs::File::from(stdin.as_fd().try_clone_to_owned().expect("dup stdin"));
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }

    /// Send a request without waiting; its id.
    pub fn send_request(&mut self, method: &str, params: &Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Send a request and wait for its response (the whole message).
    #[track_caller]
    pub fn request(&mut self, method: &str, params: &Value) -> Value {
        let id = self.send_request(method, params);
        let response = self.response();
        assert_eq!(
            response["id"],
            json!(id),
            "the response to {method} (id {id}) is another: {response}; skipped on the way: {:?}",
            self.skipped
        );
        response
    }

    /// Send a request that must succeed; its response's `result`.
    #[track_caller]
    pub fn result(&mut self, method: &str, params: &Value) -> Value {
        let response = self.request(method, params);
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {response:#}"))
    }

    /// The names of the tools the server lists.
    pub fn tool_names(&mut self) -> Vec<String> {
        let listed = self.result("tools/list", &json!({}));
        listed["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tool array in {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The name of the first listed tool that starts with `prefix` and
    /// contains `contains`.
    #[track_caller]
    pub fn tool_named(&mut self, prefix: &str, contains: &str) -> String {
        let names = self.tool_names();
        names
            .iter()
            .find(|n| n.starts_with(prefix) && n.contains(contains))
            .unwrap_or_else(|| panic!("no tool {prefix}…{contains}… in {names:?}"))
            .clone()
    }

    /// Wait for the server's `roots/list` request and answer it with
    /// `roots` (an array of MCP `Root` objects).
    #[track_caller]
    pub fn answer_roots(&mut self, roots: &Value) {
        let ask = self.next_message(self.answer_within);
        assert_eq!(ask["method"], json!("roots/list"), "{ask}");
        self.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": roots}}));
    }

    /// The next response, whatever its id (notifications and server
    /// requests on the way are skipped and kept).
    #[track_caller]
    pub fn response(&mut self) -> Value {
        loop {
            let message = self.next_message(self.answer_within);
            if message.get("method").is_none() {
                return message;
            }
            self.skipped.push(message);
        }
    }

    /// The next message from the server, as JSON, within `limit`.
    #[track_caller]
    pub fn next_message(&self, limit: Duration) -> Value {
        let line = self.next_line(limit);
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON from modhost mcp ({e}): {line}"))
    }

    /// The next line from the server's stdout, within `limit`.
    #[track_caller]
    pub fn next_line(&self, limit: Duration) -> String {
        self.lines
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("modhost mcp did not answer within {limit:?}: {e}"))
    }

    /// Stop reading the server's stdout, as a client that hung would: its
    /// pipe fills and the server's writes wait.
    pub fn stop_reading(&self) {
        self.unread.store(true, Ordering::Relaxed);
    }

    /// Send the server `SIG<signal>` (`TERM`, `INT`, `HUP`) with stdin still
    /// open; it must exit, successfully, within the answer time.
    #[track_caller]
    pub fn terminate(mut self, signal: &str) {
        let sent = Command::new("kill")
            .arg("-s")
            .arg(signal)
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -s {signal}");
        self.exits_successfully(&format!("SIG{signal}"));
    }

    /// Close stdin; the server must exit, successfully, within the answer
    /// time.
    #[track_caller]
    pub fn finish(mut self) {
        drop(self.stdin.take());
        self.exits_successfully("its stdin closing");
    }

    /// The server exits, successfully, within the answer time of `cause`.
    #[track_caller]
    fn exits_successfully(&mut self, cause: &str) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for modhost mcp") {
                assert!(
                    status.success(),
                    "modhost mcp exited with {status} on {cause}"
                );
                return;
            }
            assert!(
                started.elapsed() < self.answer_within,
                "modhost mcp did not exit within {:?} of {cause}",
                self.answer_within
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
