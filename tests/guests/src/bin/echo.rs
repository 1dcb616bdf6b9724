//! Well behaved: answers with its input (benchmarks and the happy-path tests).
//! Sends one `progress` notification first when the input asks for it
//! (`{"progress": true}`), reports the environment and the preopened
//! roots it can see when asked (`{"inspect": true}`), and answers with the
//! text of the file `name` in its root when asked (`{"read": name}`); it
//! declares one read-only workspace root, `data`.

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::serve(
        &json!([{"name": "data", "kind": "workspace"}]),
        &["data"],
        &[],
    );
    let input = modhost_guests::input(&request);
    if input.get("progress").and_then(Value::as_bool) == Some(true) {
        println!(
            "{}",
            json!({"jsonrpc": "2.0", "method": "progress", "params": {"request_id": "r", "progress": 1, "total": 2}})
        );
    }
    if input.get("inspect").and_then(Value::as_bool) == Some(true) {
        let env: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        let lists = |path: &str| std::fs::read_dir(path).is_ok();
        modhost_guests::answer_output(
            &request,
            &json!({
                "env": env,
                "data_path": modhost_guests::root_path(&request, "data"),
                "data": lists(&modhost_guests::root_path(&request, "data")),
                "roots": lists("/roots"),
                "slash": lists("/"),
                "tmp": lists("/tmp"),
                "cwd": lists("."),
            }),
        );
        return;
    }
    if let Some(name) = input.get("read").and_then(Value::as_str) {
        let path = format!("{}/{name}", modhost_guests::root_path(&request, "data"));
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| e.to_string());
        modhost_guests::answer_output(&request, &json!({"read": text}));
        return;
    }
    modhost_guests::answer_output(&request, &json!({"echo": input}));
}
