//! A running `modhost mcp` follows the operator: `disable`, `enable`,
//! `install` + `pin`, `unpin`, `remove` and `config.toml` edits, each done
//! by another process, change what the very next request lists and runs,
//! without a restart (`host/modhost/src/tools/live.rs`).
//!
//! Each test is the misuse the guarantee prevents: an operator disables a
//! misbehaving module (or denies a capability) while an agent's server
//! runs, and the agent goes on calling it. The call must be refused with
//! the reason and nothing may run.
//!
//! The tests of `notifications/tools/list_changed` need the server to send
//! it (`mcp/server.rs` subscribing to `Backend::tool_list_changes`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home, Layout};

/// How long an idle client may wait for `notifications/tools/list_changed`
/// after a change (the host polls every half second; loaded machines).
const TOLD_WITHIN: Duration = Duration::from_secs(20);

fn home_with_files_and_echo() -> Home {
    let home = Home::new();
    home.install_files();
    home.install(Fixture::Echo, "echo");
    std::fs::write(home.workspace().join("notes.txt"), "needle\n").expect("workspace file");
    home
}

fn start(home: &Home) -> McpStdio {
    McpStdio::start(home, Some(&home.workspace()), |_| {})
}

#[track_caller]
fn run_ok(home: &Home, args: &[&str]) {
    let run = home.run(args);
    run.expect_code(0);
}

fn call(server: &mut McpStdio, name: &str, arguments: &Value) -> Value {
    server.request("tools/call", &json!({"name": name, "arguments": arguments}))
}

/// The text of a refused call, whether refused as an `isError` result or a
/// JSON-RPC error; panics when the call ran.
#[track_caller]
fn refusal_text(response: &Value) -> String {
    if let Some(error) = response.get("error") {
        return error.to_string();
    }
    assert_eq!(
        response["result"]["isError"],
        json!(true),
        "the call ran: {response}"
    );
    response["result"].to_string()
}

fn files_tools(names: &[String]) -> Vec<&String> {
    names.iter().filter(|n| n.starts_with("files__")).collect()
}

#[test]
fn a_module_disabled_by_another_process_leaves_the_list_and_its_calls_are_refused_with_the_reason()
{
    let home = home_with_files_and_echo();
    let mut server = start(&home);
    let names = server.tool_names();
    assert!(
        names.contains(&"files__files_search".to_owned()),
        "{names:?}"
    );
    let search = json!({"pattern": "needle"});
    let ran = call(&mut server, "files__files_search", &search);
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");

    run_ok(&home, &["disable", "files"]);
    let names = server.tool_names();
    assert!(
        files_tools(&names).is_empty(),
        "a disabled module's tools are still listed: {names:?}"
    );
    assert!(names.contains(&"echo__echo_echo".to_owned()), "{names:?}");
    let refused = refusal_text(&call(&mut server, "files__files_search", &search));
    assert!(
        refused.contains("disabled") && refused.contains("modhost enable files"),
        "the refusal does not say why and what to do: {refused}"
    );
    assert!(
        !refused.contains("notes.txt"),
        "the disabled module ran: {refused}"
    );

    run_ok(&home, &["enable", "files"]);
    let names = server.tool_names();
    assert!(
        names.contains(&"files__files_search".to_owned()),
        "{names:?}"
    );
    let ran = call(&mut server, "files__files_search", &search);
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");
    server.finish();
}

#[test]
fn a_module_installed_meanwhile_appears_once_pinned_and_unpin_and_remove_withdraw_it() {
    let home = Home::new();
    home.install_files();
    let mut server = start(&home);
    assert!(
        !server.tool_names().iter().any(|n| n.starts_with("later__")),
        "nothing named later is installed yet"
    );

    // Copied in by hand: unpinned, so not offered and never run.
    home.install_binary_unpinned(Path::new(Fixture::Echo.path()), "later", Layout::Folder);
    let names = server.tool_names();
    assert!(
        !names.iter().any(|n| n.starts_with("later__")),
        "an unpinned module is offered: {names:?}"
    );
    run_ok(&home, &["pin", "later"]);
    let names = server.tool_names();
    assert!(names.contains(&"later__later_echo".to_owned()), "{names:?}");
    let ran = call(&mut server, "later__later_echo", &json!({}));
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");

    run_ok(&home, &["unpin", "later"]);
    let names = server.tool_names();
    assert!(
        !names.iter().any(|n| n.starts_with("later__")),
        "an unpinned module is still offered: {names:?}"
    );
    let refused = refusal_text(&call(&mut server, "later__later_echo", &json!({})));
    assert!(
        refused.contains("not pinned") && refused.contains("modhost pin later"),
        "{refused}"
    );

    run_ok(&home, &["pin", "later"]);
    assert!(
        server
            .tool_names()
            .contains(&"later__later_echo".to_owned())
    );
    run_ok(&home, &["remove", "later"]);
    let names = server.tool_names();
    assert!(
        !names.iter().any(|n| n.starts_with("later__")),
        "a removed module is still offered: {names:?}"
    );
    let refused = refusal_text(&call(&mut server, "later__later_echo", &json!({})));
    assert!(refused.contains("removed"), "{refused}");
    server.finish();
}

#[test]
fn a_config_edit_denying_a_tool_takes_effect_and_a_broken_config_refuses_every_call() {
    let home = home_with_files_and_echo();
    let mut server = start(&home);
    let search = json!({"pattern": "needle"});
    assert!(
        server
            .tool_names()
            .contains(&"files__files_search".to_owned())
    );

    home.write_config(
        "[[approval.rules]]\nname = \"no searching\"\ncapability = \"files.search\"\ndecision = \"deny\"\n",
    );
    let names = server.tool_names();
    assert!(
        !names.contains(&"files__files_search".to_owned()),
        "a denied tool is still offered: {names:?}"
    );
    let refused = refusal_text(&call(&mut server, "files__files_search", &search));
    assert!(refused.contains("no searching"), "{refused}");
    assert!(
        !refused.contains("notes.txt"),
        "the denied tool ran: {refused}"
    );

    // Half-way through an edit: the old (looser) policy must not go on.
    home.write_config("[[approval.rules]\nthis is not toml\n");
    let refused = refusal_text(&call(&mut server, "echo__echo_echo", &json!({})));
    assert!(
        refused.contains("config.toml") && refused.contains("refused until"),
        "{refused}"
    );

    home.write_config("");
    let ran = call(&mut server, "files__files_search", &search);
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");
    server.finish();
}

/// Needs the server side of era's branch: `listChanged: true` and the
/// notification sent when `Backend::tool_list_changes` moves.
#[test]
fn an_idle_client_is_told_the_tool_list_changed_after_disable_and_enable_in_another_process() {
    let home = home_with_files_and_echo();
    let mut server = start_with_the_capability_announced(&home);
    assert!(
        server
            .tool_names()
            .contains(&"files__files_search".to_owned())
    );
    run_ok(&home, &["disable", "files"]);
    expect_list_changed(&server);
    assert!(files_tools(&server.tool_names()).is_empty());

    run_ok(&home, &["enable", "files"]);
    expect_list_changed(&server);
    assert!(
        server
            .tool_names()
            .contains(&"files__files_search".to_owned())
    );
    server.finish();
}

fn start_with_the_capability_announced(home: &Home) -> McpStdio {
    let mut server = McpStdio::spawn(home, Some(&home.workspace()), |_| {});
    let init = server.request(
        "initialize",
        &json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "modhost-it-live", "version": "0"}}),
    );
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        json!(true),
        "the server does not announce list changes: {init}"
    );
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    server
}

#[track_caller]
fn expect_list_changed(server: &McpStdio) {
    let started = Instant::now();
    let message = server.next_message(TOLD_WITHIN);
    assert_eq!(
        message["method"],
        json!("notifications/tools/list_changed"),
        "expected the list-changed notification, got {message}"
    );
    assert!(started.elapsed() < TOLD_WITHIN);
}

#[test]
fn a_module_changed_under_a_running_server_is_refused_until_pinned_again_then_runs() {
    let home = home_with_files_and_echo();
    let mut server = start(&home);
    let ran = call(&mut server, "echo__echo_list_state", &json!({}));
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");

    // Someone rewrites the module's file in place: not the approved bytes.
    let entry = home.module_path("echo", Layout::Folder);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&entry)
        .expect("open module");
    std::io::Write::write_all(&mut file, b"\nchanged\n").expect("append");
    drop(file);
    let refused = refusal_text(&call(&mut server, "echo__echo_list_state", &json!({})));
    assert!(
        refused.contains("changed") && refused.contains("modhost pin echo"),
        "{refused}"
    );

    // The operator reviews and pins the new bytes: the running server runs them.
    run_ok(&home, &["pin", "echo"]);
    let ran = call(&mut server, "echo__echo_list_state", &json!({}));
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");
    server.finish();
}
