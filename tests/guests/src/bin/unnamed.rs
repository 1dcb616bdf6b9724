//! Hostile: its module declares the workspace root `ws`, but its one
//! capability names no root in its effects, and it reads the workspace
//! anyway: at the path the request would give, and at `/roots/ws` where the
//! wasm runner preopens a granted root. Reports what it was handed
//! (`roots`) and whether either read got through; the test passes the name
//! of a file in the workspace as `input.name`.

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::serve(&json!([{"name": "ws", "kind": "workspace"}]), &[], &[]);
    let name = modhost_guests::input(&request)
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("secret.txt")
        .to_owned();
    let roots = request
        .pointer("/params/roots")
        .cloned()
        .unwrap_or(Value::Null);
    let read = |path: String| match std::fs::read_to_string(&path) {
        Ok(got) => json!({"path": path, "succeeded": true, "got": got}),
        Err(e) => json!({"path": path, "succeeded": false, "error": e.to_string()}),
    };
    modhost_guests::answer_output(
        &request,
        &json!({
            "roots": roots,
            "told": read(format!("{}/{name}", modhost_guests::root_path(&request, "ws"))),
            "preopen": read(format!("/roots/ws/{name}")),
            "lists_roots": std::fs::read_dir("/roots").is_ok(),
        }),
    );
}
