//! `[quotas]`: calls per minute and at once, per tool and per caller, and
//! the approval questions a server asks (`modhost::quota`).
//!
//! Each test is the abuse the quota is for: a model calling a tool in a
//! loop, calls piling up on a slow tool, a model asking the user to approve
//! call after call. A burst must be refused exactly above the limit (the
//! first N run, the next is refused with `rate_limited` and a time to
//! retry), as a tool error the MCP client reads, and nothing refused may
//! run. Counts are per host process: these run through one `modhost mcp`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home};

const TOOL: &str = "echo__echo_echo";

fn call(server: &mut McpStdio, name: &str) -> Value {
    server.request("tools/call", &json!({"name": name, "arguments": {}}))
}

fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The seconds a `rate_limited` tool error says to wait; fails unless the
/// response is one.
#[track_caller]
fn retry_after(response: &Value) -> u64 {
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    let text = text(response);
    assert!(text.contains("rate_limited"), "{text}");
    let (_, after) = text
        .split_once("retry after ")
        .unwrap_or_else(|| panic!("no retry time in {text}"));
    after
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number of seconds in {text}"))
}

/// The refused records in the home's audit log.
fn refused_records(home: &Home) -> Vec<Value> {
    let run = home.run(&["audit", "show", "--outcome", "refused", "--json"]);
    run.expect_code(0);
    run.json().as_array().cloned().unwrap_or_default()
}

#[test]
fn a_burst_over_calls_per_minute_is_refused_exactly_above_the_limit() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[quotas.tools.\"echo__echo_echo\"]\ncalls_per_minute = 5\n\n\
         [quotas.each_principal]\ncalls_per_minute = 8\n",
    );
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    for n in 1..=5 {
        let response = call(&mut server, TOOL);
        assert_eq!(
            response["result"]["isError"],
            json!(false),
            "call {n}: {response}"
        );
    }
    let sixth = call(&mut server, TOOL);
    let wait = retry_after(&sixth);
    assert!((1..=60).contains(&wait), "{sixth}");
    assert!(text(&sixth).contains("tool echo__echo_echo"), "{sixth}");
    // Nothing refused ran: the module wrote one line per call it served.
    assert_eq!(home.invocations("echo", "echo.echo"), 5);

    // Another tool has its own count; the caller's (8 a minute, all tools
    // together) is what stops it: 5 + 1 refused (not counted) + 3 = 8.
    for n in 1..=3 {
        let response = call(&mut server, "echo__echo_list_state");
        assert_eq!(
            response["result"]["isError"],
            json!(false),
            "list {n}: {response}"
        );
    }
    let ninth = call(&mut server, "echo__echo_list_state");
    retry_after(&ninth);
    assert!(text(&ninth).contains("caller local:"), "{ninth}");
    server.finish();

    let refused = refused_records(&home);
    assert_eq!(refused.len(), 2, "{refused:#?}");
    for record in &refused {
        assert_eq!(record["kind"], "rate_limited", "{record:#}");
        assert!(record["retry_after_s"].as_u64().is_some(), "{record:#}");
    }
}

#[test]
fn calls_over_concurrent_calls_are_refused_while_the_others_run() {
    let home = Home::new();
    home.install(Fixture::Hang, "slow");
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[limits]\ndeadline_ms = 3000\n\n[quotas.tools.\"slow__slow_run\"]\nconcurrent_calls = 2\n",
    );
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let started = Instant::now();
    let first = server.send_request(
        "tools/call",
        &json!({"name": "slow__slow_run", "arguments": {}}),
    );
    let second = server.send_request(
        "tools/call",
        &json!({"name": "slow__slow_run", "arguments": {}}),
    );
    // Both are running (the hang fixture never answers) before the third.
    std::thread::sleep(Duration::from_millis(500));
    let third = call(&mut server, "slow__slow_run");
    retry_after(&third);
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "the third call waited instead of being refused"
    );
    // Another tool is not held up by the slow one's limit.
    let other = call(&mut server, TOOL);
    assert_eq!(other["result"]["isError"], json!(false), "{other}");
    // The two end (their deadline), and free their places.
    let mut ended = Vec::new();
    for _ in 0..2 {
        let response = server.response();
        assert!(text(&response).contains("timeout"), "{response}");
        ended.push(response["id"].clone());
    }
    ended.sort_by_key(|id| id.as_u64());
    assert_eq!(ended, [json!(first), json!(second)]);
    let again = server.send_request(
        "tools/call",
        &json!({"name": "slow__slow_run", "arguments": {}}),
    );
    let response = server.response();
    assert_eq!(response["id"], json!(again));
    assert!(
        text(&response).contains("timeout"),
        "admitted again: {response}"
    );
    server.finish();

    let refused = refused_records(&home);
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["tool"], "slow__slow_run");
}

#[test]
fn approval_questions_beyond_their_limit_are_not_asked() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[quotas]\nelicitations_per_minute = 1\n\n\
         [[approval.rules]]\ntool = \"echo__echo_echo\"\ndecision = \"ask\"\n",
    );
    let mut server = McpStdio::spawn(&home, Some(&home.workspace()), |_| {});
    server.initialize(&json!({"elicitation": {}}));
    // The first call is asked about; the user says no.
    let call_id = server.send_request("tools/call", &json!({"name": TOOL, "arguments": {}}));
    let question = server.next_message(Duration::from_secs(60));
    assert_eq!(question["method"], "elicitation/create", "{question}");
    server.send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}));
    let declined = server.response();
    assert_eq!(declined["id"], json!(call_id));
    assert_eq!(declined["result"]["isError"], json!(true), "{declined}");
    // The second is refused without a question: the next message is its
    // response, not an elicitation request.
    let second = server.send_request("tools/call", &json!({"name": TOOL, "arguments": {}}));
    let next = server.next_message(Duration::from_secs(60));
    assert_eq!(next["id"], json!(second), "a question was asked: {next}");
    let wait = retry_after(&next);
    assert!((1..=60).contains(&wait), "{next}");
    server.finish();
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "nothing ran");

    let refused = refused_records(&home);
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert_eq!(refused[0]["kind"], "approval_required");
    assert_eq!(refused[0]["approval"]["by"], "user", "{:#}", refused[0]);
    assert_eq!(refused[1]["kind"], "rate_limited");
}

/// A `[quotas.tools]` key that names no tool would limit nothing, and two
/// keys for one tool would leave unsaid which counts: both stop the host
/// before any call, naming the line.
#[test]
fn a_quota_for_no_tool_or_twice_for_one_tool_is_refused_naming_it() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[quotas.tools.\"echo__echo_echoo\"]\ncalls_per_minute = 5\n");
    let typo = home.run(&["invoke", "echo", "echo.echo", "--input", "{}"]);
    assert_ne!(typo.code, 0, "{typo:?}");
    assert!(
        typo.stderr.contains("[quotas.tools] \"echo__echo_echoo\""),
        "{}",
        typo.stderr
    );
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "a call ran");

    home.write_config(
        "[quotas.tools.\"echo__echo_echo\"]\ncalls_per_minute = 5\n\
         [quotas.tools.\"echo.echo.echo\"]\ncalls_per_minute = 1\n",
    );
    let twice = home.run(&["invoke", "echo", "echo.echo", "--input", "{}"]);
    assert_ne!(twice.code, 0, "{twice:?}");
    assert!(twice.stderr.contains("keep one"), "{}", twice.stderr);
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "a call ran");
}
