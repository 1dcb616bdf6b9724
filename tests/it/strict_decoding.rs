//! The module's answer is decoded strictly, through the CLI: a second
//! response, a duplicate key, or a line after the response is
//! `bad_response`, never silently dropped or "last wins"; an unknown
//! notification and a failing exit after the response are host warnings on
//! a call that succeeds (PROTOCOL.md sections 1 to 3); a module that answers
//! before reading its request gets its answer, not a timeout.
//!
//! The modules are Python written here by hand from the document.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Home;

/// A module `id` with one capability `<id>.run` that takes any object:
/// describe is answered properly; on invoke it runs `on_invoke` (Python,
/// with `req` the request and `out(text)` writing one raw stdout line).
/// `read_first` false: it answers invoke without reading stdin at all.
fn module(id: &str, on_invoke: &str, read_first: bool) -> String {
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.run"), "description": "Test.",
                          "input_schema": {"type": "object"}}]
    });
    let read = if read_first {
        "line = sys.stdin.readline()\nreq = json.loads(line) if line else None"
    } else {
        // Invoke is told from describe by argv-free means: describe comes
        // first and small, so peek at the first bytes only.
        "line = sys.stdin.buffer.read(60).decode()\nreq = {\"method\": \"invoke\" if '\"invoke\"' in line else \"describe\", \"id\": 1}"
    };
    format!(
        r#"#!/usr/bin/python3
import json, sys, time
def out(text):
    sys.stdout.write(text + "\n"); sys.stdout.flush()
DESCRIPTOR = json.loads({descriptor:?})
{read}
if req is None:
    sys.exit(0)
if req.get("method") == "describe":
    out(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": DESCRIPTOR}}))
else:
{body}
"#,
        descriptor = descriptor.to_string(),
        body = on_invoke
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn install(home: &Home, id: &str, script: &str) {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "these modules are Python: the test needs /usr/bin/python3"
    );
    let path = home.outside().join(id);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["install", &path.to_string_lossy()])
        .expect_code(0);
}

const OK: &str = r#"out('{"jsonrpc": "2.0", "id": 1, "result": {"output": {"n": 1}}}')"#;

#[track_caller]
fn bad_response(home: &Home, id: &str, needle: &str) -> Value {
    let error = home
        .invoke(id, &format!("{id}.run"), &json!({}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "bad_response", "{error:#}");
    assert!(
        error["message"].as_str().unwrap().contains(needle),
        "{needle:?} not in {error:#}"
    );
    error
}

#[test]
fn a_second_response_or_a_line_after_the_response_is_bad_response() {
    let home = Home::new();
    install(
        &home,
        "twice",
        &module("twice", &format!("{OK}\n{OK}"), true),
    );
    bad_response(&home, "twice", "second response");
    let late_log = format!(
        "{OK}\ntime.sleep(0.05)\nout('{{\"jsonrpc\": \"2.0\", \"method\": \"log\", \"params\": {{\"level\": \"info\", \"message\": \"late\"}}}}')"
    );
    install(&home, "late", &module("late", &late_log, true));
    bad_response(&home, "late", "after its response");
    home.assert_no_module_processes();
}

#[test]
fn a_duplicate_key_in_a_module_message_is_bad_response_not_last_wins() {
    let home = Home::new();
    let twice_result = r#"out('{"jsonrpc": "2.0", "id": 1, "result": {"output": {"allowed": false}}, "result": {"output": {"allowed": true}}}')"#;
    install(&home, "dupresult", &module("dupresult", twice_result, true));
    bad_response(&home, "dupresult", "duplicate key \"result\"");
    let nested = r#"out('{"jsonrpc": "2.0", "id": 1, "result": {"output": {"n": 1, "n": 2}}}')"#;
    install(&home, "dupnested", &module("dupnested", nested, true));
    bad_response(&home, "dupnested", "duplicate key \"n\"");
    let notification = format!(
        "out('{{\"jsonrpc\": \"2.0\", \"method\": \"log\", \"method\": \"progress\", \"params\": {{\"level\": \"info\", \"message\": \"x\"}}}}')\n{OK}"
    );
    install(&home, "dupnote", &module("dupnote", &notification, true));
    bad_response(&home, "dupnote", "duplicate key \"method\"");
}

#[test]
fn an_unknown_notification_is_ignored_with_a_host_warning() {
    let home = Home::new();
    let body =
        format!("out('{{\"jsonrpc\": \"2.0\", \"method\": \"bogus\", \"params\": {{}}}}')\n{OK}");
    install(&home, "bogus", &module("bogus", &body, true));
    let result = home
        .invoke("bogus", "bogus.run", &json!({}), &[])
        .invoke_result();
    assert_eq!(result["output"], json!({"n": 1}), "{result:#}");
    assert!(
        result.to_string().contains("\\\"bogus\\\""),
        "no warning naming the notification: {result:#}"
    );
}

#[test]
fn a_failing_exit_after_the_response_is_a_host_warning_and_the_response_stands() {
    let home = Home::new();
    install(
        &home,
        "exit3",
        &module("exit3", &format!("{OK}\nsys.exit(3)"), true),
    );
    let result = home
        .invoke("exit3", "exit3.run", &json!({}), &[])
        .invoke_result();
    assert_eq!(result["output"], json!({"n": 1}), "{result:#}");
    assert!(
        result.to_string().contains("exit status 3"),
        "no warning about the exit status: {result:#}"
    );
}

#[test]
fn a_module_that_answers_before_reading_its_request_gets_its_answer_not_a_timeout() {
    let home = Home::new();
    // Answers after reading 60 bytes, then stays alive with the rest of a
    // request far larger than a pipe buffer unread.
    let body = format!("{OK}\ntime.sleep(20)");
    install(&home, "early", &module("early", &body, false));
    let big = json!({"pad": "x".repeat(100 * 1024)});
    let started = Instant::now();
    let result = home.invoke("early", "early.run", &big, &[]).invoke_result();
    assert_eq!(result["output"], json!({"n": 1}), "{result:#}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the answer waited for the request write: {:?}",
        started.elapsed()
    );
    home.assert_no_module_processes();
}
