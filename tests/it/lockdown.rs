//! Lockdown after taint, tried as the attack it prevents, end to end:
//! `modhost mcp` over stdio, the `net` module (`tests/fixtures/netclient.py`)
//! and two test hosts (`net_lab`) standing for the internet.
//!
//! The attack: an agent reads a page (one network call); the page tells it
//! to send what it knows to another host its tool may reach. After the
//! first result of untrusted content, the connection's calls reach only
//! `[lockdown] allowed_hosts`: the second host is refused by the egress
//! proxy with a reason naming the lockdown, the allowed one still answers,
//! the log says when the connection entered lockdown, and a new connection
//! starts clean.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::net_lab::{LAB_CONFIG, TestHost};
use crate::python_attacker::Attacker;
use crate::support::Home;

const NET: Attacker = Attacker {
    id: "net",
    script: "netclient.py",
};

const TOOL: &str = "net__net_any";

/// One `get` of `url` through `net.any`; the whole `tools/call` result.
#[track_caller]
fn get(server: &mut McpStdio, url: &str) -> Value {
    server.result(
        "tools/call",
        &json!({"name": TOOL, "arguments": {"attempt": "get", "url": url}}),
    )
}

/// What the module reported of its attempt.
fn report(result: &Value) -> &Value {
    &result["structuredContent"]
}

#[test]
fn after_a_network_result_a_host_outside_the_lockdown_is_refused_naming_it() {
    let (allowed, other) = (TestHost::start(), TestHost::start());
    let home: Home = NET.install();
    // The operator grants `net.any` both hosts and allows its calls
    // without asking; in lockdown, only `allowed` is left.
    home.write_config(&format!(
        "{LAB_CONFIG}[[approval.rules]]\nmodule = \"net\"\ndecision = \"allow\"\n\
         [capabilities.\"net.net.any\"]\nnetwork = [{:?}, {:?}]\n\
         [lockdown]\nallowed_hosts = [{:?}]\n",
        allowed.entry(),
        other.entry(),
        allowed.entry(),
    ));
    let log = home.outside().join("mcp-stderr.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let stderr = std::fs::File::create(&log).unwrap();
    let mut server = McpStdio::start(&home, None, |command| {
        command.stderr(stderr);
    })
    .answering_within(Duration::from_secs(60));
    assert_eq!(server.tool_named("net__", "any"), TOOL);

    // Before any untrusted content: the other host answers.
    let first = get(&mut server, &other.url("/hello"));
    assert_eq!(report(&first)["ok"], true, "{first:#}");
    assert_eq!(
        first["_meta"]["dev.modhost/lockdown"],
        json!({"active": true, "since": TOOL}),
        "the page's result starts the lockdown and says so: {first:#}"
    );

    // The exfiltration: refused by the proxy, the reason naming the lockdown.
    let second = get(&mut server, &other.url("/hello?secret=1"));
    let attempt = report(&second);
    assert_eq!(
        attempt["ok"], false,
        "the other host was reached: {second:#}"
    );
    assert_eq!(attempt["status"], 403, "{second:#}");
    let refused = second["_meta"]["dev.modhost/network"]["refused"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let reason = refused
        .iter()
        .find(|r| r["host"] == json!(other.entry()))
        .and_then(|r| r["reason"].as_str())
        .unwrap_or_else(|| panic!("no refusal of {} in {second:#}", other.entry()))
        .to_owned();
    assert!(reason.contains("refused by the lockdown"), "{reason}");
    assert!(reason.contains(TOOL), "{reason}");
    assert!(reason.contains("new connection"), "what to do: {reason}");
    assert_eq!(
        second["_meta"]["dev.modhost/lockdown"]["since"],
        json!(TOOL)
    );
    let says = second["content"][0]["text"].as_str().unwrap_or_default();
    assert!(says.contains("lockdown"), "the model is told too: {says}");

    // What the operator still allows answers.
    let third = get(&mut server, &allowed.url("/hello"));
    assert_eq!(report(&third)["ok"], true, "{third:#}");
    assert_eq!(
        report(&third)["body"],
        format!("hello from {}", allowed.address)
    );
    server.finish();
    let log = std::fs::read_to_string(&log).unwrap();
    let entered: Vec<&str> = log.lines().filter(|l| l.contains("lockdown:")).collect();
    assert_eq!(
        entered.len(),
        1,
        "one line when the connection entered lockdown: {log}"
    );
    assert!(entered[0].contains(TOOL), "{log}");

    // A new connection has read nothing: the other host answers again.
    let mut fresh = McpStdio::start(&home, None, |_| {});
    let clean = get(&mut fresh, &other.url("/hello"));
    assert_eq!(report(&clean)["ok"], true, "{clean:#}");
    fresh.finish();
    home.assert_no_module_processes();
}

/// The approval question names the hosts the call would get, after the
/// operator's narrowing, never the declaration ("any public host"): on the
/// command line (the refusal and its rule) and in `modhost mcp`'s question,
/// whichever rule asks; and `describe` shows what a call gets in lockdown.
#[test]
fn the_approval_question_names_the_hosts_the_call_would_get() {
    let home: Home = NET.install();
    let narrowed = "[capabilities.\"net.net.any\"]\nnetwork = [\"198.51.100.6:8080\"]\n";
    home.write_config(narrowed);
    let run = home.run(&["invoke", TOOL, "--json", "--input", "{}"]);
    run.expect_code(2);
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "approval_required", "{error:#}");
    assert_eq!(
        error["rule"], "default: connects to 198.51.100.6:8080",
        "{error:#}"
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("(default: connects to 198.51.100.6:8080)"),
        "{error:#}"
    );

    // An operator's rule names no host; the question adds them.
    home.write_config(&format!(
        "{narrowed}[[approval.rules]]\nname = \"ask for net\"\nmodule = \"net\"\ndecision = \"ask\"\n"
    ));
    let run = home.run(&["invoke", TOOL, "--json", "--input", "{}"]);
    run.expect_code(2);
    assert_eq!(
        run.json()["error"]["rule"],
        "rule \"ask for net\"; it connects to 198.51.100.6:8080"
    );
    let mut server = McpStdio::spawn(&home, None, |_| {});
    server.initialize(&json!({"elicitation": {}}));
    server.send_request("tools/call", &json!({"name": TOOL, "arguments": {}}));
    let question = server.next_message(Duration::from_secs(60));
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("(rule \"ask for net\"; it connects to 198.51.100.6:8080)"),
        "{message}"
    );
    drop(server);

    let described = home.run(&["describe", "net", "--json"]);
    described.expect_code(0);
    let grants = &described.json()["grants"];
    assert_eq!(
        grants["net.any"]["network"]["under_lockdown"], "no host",
        "{grants:#}"
    );
    assert_eq!(grants["net.any"]["untrusted_output"], true, "{grants:#}");
    assert_eq!(grants["net.none"]["untrusted_output"], false, "{grants:#}");
}
