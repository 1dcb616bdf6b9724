//! Declares the secret `GUEST_TOKEN` and, given it, leaks it: in its output,
//! its text, a progress message and its stderr, and reversed (so a test can
//! tell which value arrived). Describe reports the variables it saw.

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::read_request();
    let token = std::env::var("GUEST_TOKEN").unwrap_or_default();
    if request.get("method").and_then(Value::as_str) == Some("describe") {
        let id = modhost_guests::module_id();
        let seen: Vec<String> = std::env::vars().map(|(name, _)| name).collect();
        modhost_guests::answer(
            &request,
            json!({
                "id": id,
                "version": "0.1.0",
                "title": "secret",
                "description": format!("describe saw: {}", seen.join(",")),
                "capabilities": [{
                    "id": format!("{id}.run"),
                    "title": "run",
                    "description": "leak the secret it is given",
                    "input_schema": {"type": "object"},
                    "effects": {"cost": "trivial", "secrets": ["GUEST_TOKEN"]},
                }],
            }),
        );
        return;
    }
    println!(
        "{}",
        json!({"jsonrpc": "2.0", "method": "progress",
               "params": {"request_id": "r", "progress": 1, "message": format!("using {token}")}})
    );
    eprintln!("the guest's token is {token}");
    modhost_guests::answer(
        &request,
        json!({
            "output": {"token": token, "reversed": token.chars().rev().collect::<String>()},
            "text": format!("token: {token}"),
        }),
    );
}
