//! Guests for the wasm runner's tests: each binary reads the one request line
//! from stdin (as every module must), then does what its name says. They are
//! plain std programs so they also build natively, but they are meant for
//! `wasm32-wasip2`:
//!
//! ```text
//! cargo build -p modhost-guests --target wasm32-wasip2
//! ```
//!
//! Only `echo` and `spawner` are well behaved; the others are hostile on
//! purpose, and the tests check that each one ends in its own error kind with
//! nothing changed outside its grants.
//!
//! Every guest is a complete module as far as the host can tell: it answers
//! `describe` with a descriptor (id = the name it was run as, one capability
//! `<id>.run`, the roots its attack needs), so the end-to-end tests can install
//! it in a host home and misbehave only on `invoke`. Invoke inputs are read
//! from `params.input` and root paths from `params.roots`, exactly as the host
//! sends them.

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

/// Read the request; answer `describe` (and exit) with a descriptor
/// declaring `roots`, whose one capability reads `reads` and writes `writes`.
/// Returns the request of any other method.
pub fn serve(roots: &Value, reads: &[&str], writes: &[&str]) -> Value {
    serve_spawning(roots, reads, writes, &[])
}

/// [`serve`], with a capability that also declares it runs `spawns`.
pub fn serve_spawning(roots: &Value, reads: &[&str], writes: &[&str], spawns: &[&str]) -> Value {
    let request = read_request();
    if request.get("method").and_then(Value::as_str) == Some("describe") {
        let id = module_id();
        answer(
            &request,
            json!({
                "id": id,
                "version": "0.1.0",
                "title": format!("guest {id}"),
                "description": "a wasm runner test guest",
                "roots": roots,
                "binaries": spawns.iter().map(|name| json!({"name": name, "description": "a program"})).collect::<Vec<_>>(),
                "capabilities": [{
                    "id": format!("{id}.run"),
                    "title": "run",
                    "description": "do what the guest's name says",
                    "input_schema": {"type": "object"},
                    "effects": {"reads": reads, "writes": writes, "network": false, "spawns": spawns, "cost": "trivial"},
                }],
            }),
        );
        std::process::exit(0);
    }
    request
}

/// The module id: the name this guest was run as (the host passes the
/// component's file stem as `argv[0]`).
pub fn module_id() -> String {
    std::env::args()
        .next()
        .map(|arg0| {
            let name = arg0.rsplit('/').next().unwrap_or(&arg0).to_owned();
            name.strip_suffix(".wasm").unwrap_or(&name).to_owned()
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "guest".to_owned())
}

/// The invoke request's `input` (null when absent).
pub fn input(request: &Value) -> Value {
    request
        .pointer("/params/input")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Where the host says the root `name` is (`params.roots.<name>.path`),
/// else `/roots/<name>`, where the wasm runner preopens it.
pub fn root_path(request: &Value, name: &str) -> String {
    request
        .pointer(&format!("/params/roots/{name}/path"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("/roots/{name}"), str::to_owned)
}

/// Answer with a capability result whose `output` is `output`.
pub fn answer_output(request: &Value, output: &Value) {
    answer(request, json!({ "output": output }));
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
