//! The first call of a component with an empty compile cache takes
//! seconds; an MCP client that asked for progress hears why, naming the
//! module, and one that did not ask hears nothing.
//! (The terminal status line is `cli_conventions`.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::Home;

/// Call `files__files_list` with `meta`; every message up to and including
/// its response.
fn call_collecting(server: &mut McpStdio, meta: Option<Value>) -> Vec<Value> {
    let mut params = json!({"name": "files__files_list", "arguments": {}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let id = server.send_request("tools/call", &params);
    let mut seen = Vec::new();
    loop {
        let message = server.next_message(Duration::from_secs(120));
        let done = message.get("method").is_none() && message["id"] == json!(id);
        seen.push(message);
        if done {
            return seen;
        }
    }
}

fn clear_compile_cache(home: &Home) {
    let cache = home.path().join("cache/components");
    if cache.exists() {
        std::fs::remove_dir_all(&cache).expect("clear the compile cache");
    }
}

#[test]
fn a_first_compile_is_reported_as_progress_to_the_client_that_asked_for_it() {
    let home = Home::new();
    home.install_component("files");
    clear_compile_cache(&home);
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let seen = call_collecting(&mut server, Some(json!({"progressToken": "first-call"})));
    let response = seen.last().expect("a response");
    assert_eq!(response["result"]["isError"], json!(false), "{response:#}");
    let progress: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        progress
            .iter()
            .any(|p| p["params"]["progressToken"] == "first-call"
                && p["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("compiling module files") && !m.contains('/'))),
        "no progress naming the module: {seen:#?}"
    );
    server.finish();

    // Asked for no progress: none is sent, compile or not.
    clear_compile_cache(&home);
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let seen = call_collecting(&mut server, None);
    assert!(
        seen.iter().all(|m| m["method"] != "notifications/progress"),
        "progress without a token: {seen:#?}"
    );
    server.finish();
}
