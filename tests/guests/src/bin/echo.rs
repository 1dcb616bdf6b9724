//! Well behaved: answers with the request's params (benchmarks and the
//! happy-path tests). Sends one `progress` notification first when the params
//! ask for it (`{"progress": true}`), and reports the environment and the
//! preopened roots it can see when asked (`{"inspect": true}`).

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::read_request();
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    if params.get("progress").and_then(Value::as_bool) == Some(true) {
        println!(
            "{}",
            json!({"jsonrpc": "2.0", "method": "progress", "params": {"request_id": "r", "progress": 1, "total": 2}})
        );
    }
    if params.get("inspect").and_then(Value::as_bool) == Some(true) {
        let env: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        let lists = |path: &str| std::fs::read_dir(path).is_ok();
        modhost_guests::answer(
            &request,
            json!({
                "env": env,
                "data": lists("/roots/data"),
                "roots": lists("/roots"),
                "slash": lists("/"),
                "tmp": lists("/tmp"),
                "cwd": lists("."),
            }),
        );
        return;
    }
    modhost_guests::answer(&request, json!({"echo": params}));
}
