//! Nothing runs ahead of approval: `modhost mcp` starts processes ahead only
//! for tools its policy allows outright.
//!
//! The attack: a capability that asks for approval of every call
//! (`approval: true`) is offered under `--delegate-approval`; the client
//! approves one call, and the host then starts that module twice more, ahead
//! of calls nobody made, with the call's grants. Each module here is a shell
//! script that appends a line to a file in its state root the moment it
//! starts, before it reads a request, so every execution counts, a process
//! started ahead and never used included. (A describe is not counted: it
//! runs with no grants, so its append is refused by the confinement.)
//!
//! The server is driven over its stdio transport, one JSON-RPC line at a
//! time, as an MCP client does.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::Home;

/// How long one answer from the server may take before the test calls it hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Calls of each tool.
const CALLS: usize = 3;

/// Longer than starting a process ahead takes, even on a loaded machine:
/// by then any process the host was going to start has recorded itself.
pub(crate) const SETTLE: Duration = Duration::from_millis(1500);

/// Install a script module `id` with one capability `<id>.run` whose
/// `effects` are `effects` (it writes its state root, where it counts its
/// executions), and pin it.
pub(crate) fn install_counting_module(home: &Home, id: &str, effects: &Value) {
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "roots": [{"name": "state", "kind": "state", "description": "its execution count"}],
        "capabilities": [{"id": format!("{id}.run"), "description": "counts its runs",
                          "input_schema": {"type": "object"}, "effects": effects}]
    });
    let executions = executions_file(home, id);
    let script = format!(
        r#"#!/bin/sh
echo started >> '{}' 2>/dev/null
IFS= read -r line
case "$line" in
  *'"method":"invoke"'*) printf '%s\n' '{{"jsonrpc":"2.0","id":1,"result":{{"output":{{"ran":true}}}}}}' ;;
  *) printf '%s\n' '{{"jsonrpc":"2.0","id":1,"result":{descriptor}}}' ;;
esac
"#,
        executions.display()
    );
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run(&["pin", id]).expect_code(0);
}

fn executions_file(home: &Home, id: &str) -> PathBuf {
    home.path().join("state").join(id).join("executions")
}

/// How many times module `id` has started.
pub(crate) fn executions(home: &Home, id: &str) -> usize {
    std::fs::read_to_string(executions_file(home, id))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Call tool `name` with no arguments; it must succeed.
#[track_caller]
fn call(server: &mut McpStdio, name: &str) {
    let result = server.result("tools/call", &json!({"name": name, "arguments": {}}));
    assert_ne!(result["isError"], json!(true), "{name} failed: {result:#}");
}

/// Wait until `probe` holds or `within` passes; whether it held.
fn eventually(within: Duration, probe: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        if probe() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    probe()
}

#[test]
fn an_approved_call_runs_its_module_once_and_nothing_starts_ahead_of_approval() {
    let home = Home::new();
    // Asks for approval of every call: the default verdict is `ask`.
    install_counting_module(
        &home,
        "asker",
        &json!({"writes": ["state"], "approval": true}),
    );
    // Reaches the network: `ask` by default too.
    install_counting_module(
        &home,
        "netter",
        &json!({"writes": ["state"], "network": true}),
    );
    // Writes only its own state: `allow`, so it may be started ahead.
    install_counting_module(&home, "eager", &json!({"writes": ["state"]}));
    // What is tested is the approval of each call, not the lockdown the
    // network tool's result would start (`lockdown.rs`).
    home.write_config("[lockdown]\nenabled = false\n");

    let ws = home.workspace();
    let mut server = McpStdio::start(&home, Some(&ws), |command| {
        command.arg("--delegate-approval").current_dir(&ws);
    })
    .answering_within(ANSWER_WITHIN);
    let names = server.tool_names();
    let tool = |id: &str| {
        names
            .iter()
            .find(|n| n.starts_with(&format!("{id}__")))
            .unwrap_or_else(|| panic!("no tool of {id} offered: {names:?}"))
            .clone()
    };
    let (asker, netter, eager) = (tool("asker"), tool("netter"), tool("eager"));

    // Start-up: the server discovered and listed, and ran nothing for a call.
    std::thread::sleep(SETTLE);
    for id in ["asker", "netter", "eager"] {
        assert_eq!(executions(&home, id), 0, "{id} ran before any call");
    }

    for _ in 0..CALLS {
        call(&mut server, &asker);
        call(&mut server, &netter);
    }
    for _ in 0..CALLS {
        call(&mut server, &eager);
    }
    // An allowed tool still gets its next processes started ahead: that is
    // what shows the pool was on for this server.
    assert!(
        eventually(Duration::from_secs(20), || executions(&home, "eager")
            > CALLS),
        "eager was never started ahead: {} executions for {CALLS} calls",
        executions(&home, "eager")
    );
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&home, "asker"),
        CALLS,
        "an `approval: true` capability ran more often than it was approved"
    );
    assert_eq!(
        executions(&home, "netter"),
        CALLS,
        "a network capability ran more often than it was approved"
    );
    server.finish();
    home.assert_no_module_processes();
}
