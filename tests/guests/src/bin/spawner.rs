//! Well behaved: declares that it runs the program `tool`, and answers with
//! the `binaries` the host sent it (a component can never run them).

fn main() {
    let request = modhost_guests::serve_spawning(&serde_json::json!([]), &[], &[], &["tool"]);
    let binaries = request
        .pointer("/params/binaries")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    modhost_guests::answer_output(&request, &serde_json::json!({ "binaries": binaries }));
}
