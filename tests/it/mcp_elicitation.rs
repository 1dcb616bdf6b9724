//! A capability that asks for approval is offered by `modhost mcp` and runs
//! only after the user said yes through the client.
//!
//! The attack: a client (or a model steering it) calls a network capability
//! and then declines, dismisses, never answers, forges a stateless approval
//! (a made-up or replayed `requestState`), or has no way to ask at all. Each
//! time the module must not execute. The module is a shell script that
//! appends a line to a file in its state root the moment it starts
//! (`warm_approval::install_counting_module`), so any execution counts,
//! whatever it would have answered.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::Home;
use crate::warm_approval::{SETTLE, executions, install_counting_module};

const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// A home with one network capability (verdict `ask` by default), and a
/// server on it after the handshake with `capabilities`; the tool's name.
fn serve_netter(home: &Home, capabilities: &Value) -> (McpStdio, String) {
    let ws = home.workspace();
    let mut server = McpStdio::spawn(home, Some(&ws), |_| {}).answering_within(ANSWER_WITHIN);
    server.initialize(capabilities);
    let names = server.tool_names();
    let tool = names
        .iter()
        .find(|n| n.starts_with("netter__"))
        .unwrap_or_else(|| panic!("the ask capability is not offered: {names:?}"))
        .clone();
    (server, tool)
}

fn install_netter() -> Home {
    let home = Home::new();
    install_counting_module(
        &home,
        "netter",
        &json!({"writes": ["state"], "network": true}),
    );
    home
}

/// Call `tool` and return the question the server asks the client.
fn call_and_get_question(server: &mut McpStdio, tool: &str) -> (u64, Value) {
    let id = server.send_request("tools/call", &json!({"name": tool, "arguments": {}}));
    let question = server.next_message(ANSWER_WITHIN);
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );
    (id, question)
}

/// Answer the server's `question` with `answer` (a `result` or an `error`
/// member); the call's response.
fn answer(server: &mut McpStdio, call: u64, question: &Value, answer: &Value) -> Value {
    let mut response = json!({"jsonrpc": "2.0", "id": question["id"]});
    response
        .as_object_mut()
        .expect("object")
        .extend(answer.as_object().expect("object").clone());
    server.send(&response);
    let result = server.response();
    assert_eq!(result["id"], json!(call), "{result}");
    result
}

fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_declined_dismissed_or_unanswered_question_never_runs_the_module() {
    let home = install_netter();
    let (mut server, tool) = serve_netter(&home, &json!({"elicitation": {}}));
    for no in [
        json!({"result": {"action": "decline"}}),
        json!({"result": {"action": "cancel"}}),
        json!({"result": {"action": "accept", "content": {"approve": false}}}),
        json!({"error": {"code": -32603, "message": "the client has no UI"}}),
    ] {
        let (call, question) = call_and_get_question(&mut server, &tool);
        let response = answer(&mut server, call, &question, &no);
        assert_eq!(
            response["result"]["isError"],
            json!(true),
            "{no}: {response}"
        );
        assert!(text(&response).starts_with("not run"), "{response}");
    }
    // Asked, never answered, and cancelled; then a late "yes" to that question.
    let (call, question) = call_and_get_question(&mut server, &tool);
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    server.send(&json!({"jsonrpc": "2.0", "id": question["id"],
                        "result": {"action": "accept", "content": {"approve": true}}}));
    server.result("ping", &json!({}));
    // Asked, and the client goes away without answering.
    call_and_get_question(&mut server, &tool);
    server.finish();
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&home, "netter"),
        0,
        "the module ran without a yes"
    );
    home.assert_no_module_processes();
}

#[test]
fn the_users_yes_runs_the_module_once() {
    let home = install_netter();
    let (mut server, tool) = serve_netter(&home, &json!({"elicitation": {"form": {}}}));
    let (call, question) = call_and_get_question(&mut server, &tool);
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&tool),
        "{question}"
    );
    let yes = json!({"result": {"action": "accept", "content": {"approve": true}}});
    let response = answer(&mut server, call, &question, &yes);
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    assert_eq!(
        response["result"]["structuredContent"],
        json!({"ran": true})
    );
    server.finish();
    std::thread::sleep(SETTLE);
    assert_eq!(executions(&home, "netter"), 1);
}

#[test]
fn a_client_that_cannot_ask_is_told_how_to_allow_it_and_nothing_runs() {
    let home = install_netter();
    let (mut server, tool) = serve_netter(&home, &json!({}));
    let result = server.result("tools/call", &json!({"name": tool, "arguments": {}}));
    assert_eq!(result["isError"], json!(true), "{result}");
    let says = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(says.contains("config.toml"), "{says}");
    assert!(says.contains("--delegate-approval"), "{says}");
    server.finish();
    // `modhost tools --format mcp` offers the same tools as the server.
    let exported = home
        .run(&["tools", "--format", "mcp"])
        .expect_code(0)
        .json();
    let exported: Vec<&str> = exported
        .as_array()
        .or_else(|| exported["tools"].as_array())
        .expect("a tool list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(exported.contains(&tool.as_str()), "{exported:?}");
    std::thread::sleep(SETTLE);
    assert_eq!(executions(&home, "netter"), 0);
}

#[test]
fn a_forged_or_replayed_stateless_approval_runs_nothing() {
    let home = install_netter();
    let (mut server, tool) = serve_netter(&home, &json!({}));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let yes = json!({"approval": {"action": "accept", "content": {"approve": true}}});
    // Forged: a state this server never issued, with a "yes".
    let forged = server.request(
        "tools/call",
        &json!({"name": tool, "arguments": {}, "_meta": meta,
                "requestState": "ab".repeat(16), "inputResponses": yes}),
    );
    assert_eq!(forged["error"]["code"], json!(-32602), "{forged}");
    // Asked properly, approved once; the same approval replayed is refused.
    let asked = server.result(
        "tools/call",
        &json!({"name": tool, "arguments": {}, "_meta": meta}),
    );
    assert_eq!(asked["resultType"], json!("input_required"), "{asked}");
    let retry = json!({"name": tool, "arguments": {}, "_meta": meta,
                       "requestState": asked["requestState"], "inputResponses": yes});
    let ran = server.result("tools/call", &retry);
    assert_eq!(ran["isError"], json!(false), "{ran}");
    let replayed = server.request("tools/call", &retry);
    assert_eq!(replayed["error"]["code"], json!(-32602), "{replayed}");
    server.finish();
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&home, "netter"),
        1,
        "only the one approved call ran"
    );
}
