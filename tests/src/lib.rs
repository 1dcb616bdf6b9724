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
