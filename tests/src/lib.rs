//! Protocol plumbing shared by the fixture modules in `fixtures/`.
//!
//! Design decisions:
//!
//! - **Hand-written JSON-RPC, no modsdk, no modproto types.** A fixture exists
//!   to misbehave in one precise way; if it linked the sdk, a change in the
//!   sdk could silently change what the host is being tested against.
//! - **The module id is the executable's file name.** The same fixture binary
//!   installed as `modules/alpha/alpha` and `modules/beta` describes itself as
//!   `alpha` and `beta`, so tests get distinct modules (separate state roots,
//!   one broken beside one good) without building more binaries.
//! - **An id starting with `broken` misbehaves on `describe` too.** By default
//!   a misbehaving fixture describes itself correctly and misbehaves only on
//!   `invoke` (the host needs a descriptor before it will invoke); installed
//!   under a `broken…` id it misbehaves already when discovered.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

/// One request as a fixture reads it.
#[derive(Debug)]
pub struct Call {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// Read the one request line from stdin. A line that is not a request is
/// answered with a parse error and the process exits, as the protocol says.
pub fn read_call() -> Call {
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim().is_empty() {
        eprintln!("fixture: no request on stdin");
        std::process::exit(2);
    }
    let Ok(value) = serde_json::from_str::<Value>(&line) else {
        reply_error(
            &Value::Null,
            -32700,
            "not JSON",
            "parse",
            "send one JSON object per line",
        );
        std::process::exit(0);
    };
    Call {
        id: value.get("id").cloned().unwrap_or(Value::Null),
        method: value
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        params: value.get("params").cloned().unwrap_or(Value::Null),
    }
}

/// The module id: the file name this executable was installed under.
pub fn module_id() -> String {
    let path = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .unwrap_or_default();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".exe").unwrap_or(&name).to_owned()
}

/// Whether this fixture was installed to misbehave at discovery time.
pub fn misbehaves_on_describe() -> bool {
    module_id().starts_with("broken")
}

/// Write one complete line to stdout and flush it.
pub fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means the host gave up on us; nothing left to do.
    let _ = out.write_all(line.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Answer with a result.
pub fn reply(id: &Value, result: &Value) {
    write_line(&json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string());
}

/// Answer with an error carrying modhost's `data` (kind and remedy).
pub fn reply_error(id: &Value, code: i64, message: &str, kind: &str, remedy: &str) {
    let error = json!({"code": code, "message": message, "data": {"kind": kind, "remedy": remedy}});
    write_line(&json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string());
}

/// A capability entry with a permissive object input schema.
pub fn capability(module: &str, verb: &str, description: &str) -> Value {
    json!({
        "id": format!("{module}.{verb}"),
        "title": verb,
        "description": description,
        "input_schema": {"type": "object"},
        "effects": {"reads": [], "writes": [], "network": false, "spawns": [], "cost": "trivial"},
    })
}

/// The descriptor of a fixture with the single capability `<id>.run`.
pub fn single_capability_descriptor(description: &str) -> Value {
    let id = module_id();
    json!({
        "id": id,
        "version": "0.1.0",
        "title": format!("fixture {id}"),
        "description": description,
        "capabilities": [capability(&id, "run", description)],
    })
}

/// What a process copy made by [`fork_lingering_copy`] keeps of its
/// parent's standard streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyStdio {
    /// Holds the parent's stdin, stdout and stderr open.
    Inherit,
    /// Closes all three first.
    Close,
}

/// Fork a copy of this process that runs `body` and exits with its code,
/// never returning into the parent's code. No `exec`: a capability that
/// declares no spawns executes nothing after its start, but may fork. The
/// copy's command line is its parent's (the module's install path), so a
/// test finds it in `/proc`. Returns the copy's pid. `body` must take no
/// lock another thread of the parent could hold (it runs in a fork).
#[allow(unsafe_code)]
pub fn fork_running(body: impl FnOnce() -> i32) -> std::io::Result<u32> {
    // SAFETY: the copy runs only `body`, which the caller keeps to calls
    // that take no lock, and `_exit`.
    match unsafe { fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            let code = body();
            // SAFETY: ends the copy without running the parent's exit handlers.
            unsafe { _exit(code) }
        }
        pid => Ok(pid as u32),
    }
}

/// Fork a copy of this process ([`fork_running`]) that sleeps for five
/// minutes and exits.
#[allow(unsafe_code)]
pub fn fork_lingering_copy(stdio: CopyStdio) -> std::io::Result<u32> {
    fork_running(|| {
        if stdio == CopyStdio::Close {
            for fd in 0..3 {
                // SAFETY: closing a descriptor number this copy owns.
                unsafe { close(fd) };
            }
        }
        std::thread::sleep(std::time::Duration::from_secs(300));
        0
    })
}

/// Fork a copy of this process, as [`fork_lingering_copy`] with its streams
/// closed, and move it into a process group of its own (what a daemon does
/// to leave the group its host kills). `Ok(pid)` only when the move
/// succeeded; the copy lingers either way.
#[allow(unsafe_code)]
pub fn fork_escaping_copy() -> std::io::Result<u32> {
    let pid = fork_lingering_copy(CopyStdio::Close)?;
    let pid_t = pid as i32;
    // SAFETY: `setpgid` on a child of this process; no memory is passed.
    if unsafe { setpgid(pid_t, pid_t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid)
}

/// Wait for the child `pid` and return its exit code (`None` when it was
/// signalled or could not be waited for).
#[allow(unsafe_code)]
pub fn wait_for_child(pid: u32) -> Option<i32> {
    let mut status = 0i32;
    // SAFETY: `waitpid` writes one int to `status`, which lives on this stack.
    let waited = unsafe { waitpid(pid as i32, &mut status, 0) };
    // WIFEXITED and WEXITSTATUS, spelled out: the low 7 bits are the signal.
    (waited == pid as i32 && status & 0x7f == 0).then_some((status >> 8) & 0xff)
}

#[allow(unsafe_code)]
unsafe extern "C" {
    fn fork() -> i32;
    fn close(fd: i32) -> i32;
    fn setpgid(pid: i32, pgid: i32) -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
}
