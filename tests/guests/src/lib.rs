//! Guests for the wasm runner's tests: each binary reads the one request line
//! from stdin (as every module must), then does what its name says. They are
//! plain std programs so they also build natively, but they are meant for
//! `wasm32-wasip2`:
//!
//! ```text
//! cargo build -p modhost-guests --target wasm32-wasip2
//! ```
//!
//! Only `echo` is well behaved; the others are hostile on purpose, and the
//! tests check that each one ends in its own error kind with nothing changed
//! outside its grants.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// Read the request line and return it parsed (or `Value::Null` when it is not
/// JSON: a hostile guest does not care).
pub fn read_request() -> Value {
    let mut line = String::new();
    // A guest that cannot read stdin has nothing to misbehave about.
    let _ = std::io::stdin().lock().read_line(&mut line);
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

/// The request's id, or null.
pub fn request_id(request: &Value) -> Value {
    request.get("id").cloned().unwrap_or(Value::Null)
}

/// Write one JSON-RPC success response line.
pub fn answer(request: &Value, result: Value) {
    let mut response = json!({"jsonrpc": "2.0", "id": request_id(request)});
    response["result"] = result;
    write_line(&response);
}

/// Write one JSON-RPC error response line with a machine-readable kind.
pub fn answer_error(request: &Value, kind: &str, message: &str) {
    write_line(&json!({
        "jsonrpc": "2.0",
        "id": request_id(request),
        "error": {"code": -32000, "message": message, "data": {"kind": kind}},
    }));
}

fn write_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}
