//! Approval rules naming principals and scopes (`modhost::approval`,
//! `modhost::Caller`), through the real binary: what the local user sees
//! and runs with `modhost tools`, `modhost invoke` and `modhost mcp` on
//! stdio.
//!
//! The remote callers' side (a rule denying `ci-*` hides and refuses a
//! tool for such a caller only, `without_scope`, callers that try to widen
//! themselves, the principal in the audit record of a `call_as`, questions
//! counted per principal) is tested through the library in
//! `host/modhost/src/tools/principal_tests.rs` and `approval.rs`; an HTTP
//! caller is the HTTP tests'. Here, the attacks on the local side: a rule
//! meant for remote callers must not change what the local user gets, the
//! local user is restricted by a rule naming it, and no flag lets a local
//! user act as (and be recorded as) another principal.

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home};

const TOOL: &str = "echo__echo_echo";

/// Rules that name remote callers only: principals, a scope a caller
/// holds, a scope it lacks. None of them matches the local user.
const REMOTE_ONLY: &str = r#"
[[approval.rules]]
name = "no ci echo"
principal = "ci-*"
capability = "echo.echo"
decision = "deny"

[[approval.rules]]
name = "writers only"
without_scope = "files:write"
capability = "echo.echo"
decision = "deny"

[[approval.rules]]
name = "not for admins"
scope = "admin"
decision = "deny"

[[approval.rules]]
name = "no oauth echo"
principal = "oauth:https://auth.example.com#*"
decision = "deny"
"#;

fn tool_names(home: &Home) -> Vec<String> {
    let run = home.run(&["tools", "--format", "json"]);
    run.expect_code(0);
    match run.json() {
        Value::Array(tools) => tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect(),
        other => panic!("tools --format json is not an array: {other:#}"),
    }
}

/// Every record of the home's audit log.
fn audit_records(home: &Home) -> Vec<Value> {
    let run = home.run(&["audit", "show", "--json"]);
    run.expect_code(0);
    run.json().as_array().cloned().unwrap_or_default()
}

/// Every record's principal, each checked to be the local user's.
#[track_caller]
fn assert_all_local(records: &[Value]) {
    assert!(!records.is_empty(), "no audit record");
    for record in records {
        let principal = record["principal"].as_str().unwrap_or_default();
        assert!(
            principal.starts_with("local:"),
            "a record names another principal than the local user: {record:#}"
        );
    }
}

/// Rules written for remote callers (a principal glob, `scope`,
/// `without_scope`) leave the local user as it was: the tool is listed by
/// `modhost tools` and `modhost mcp`, and runs through both and `invoke`,
/// with no approval rule named for it.
#[test]
fn rules_naming_remote_callers_leave_the_local_user_as_it_was() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(REMOTE_ONLY);
    assert!(tool_names(&home).contains(&TOOL.to_owned()));
    let ran = home.invoke("echo", "echo.echo", &json!({}), &[]);
    ran.invoke_result();

    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    assert!(server.tool_names().contains(&TOOL.to_owned()));
    let called = server.request("tools/call", &json!({"name": TOOL, "arguments": {}}));
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    server.finish();
    assert_eq!(home.invocations("echo", "echo.echo"), 2);

    let records = audit_records(&home);
    assert_all_local(&records);
    for record in &records {
        assert_eq!(record["outcome"], "ok", "{record:#}");
        let rule = record["approval"]["rule"].as_str().unwrap_or_default();
        assert!(rule.starts_with("default:"), "{record:#}");
    }
}

/// A rule naming the local user's principal (`local:*`) restricts it
/// everywhere, as any rule: hidden from `modhost tools` and `tools/list`,
/// refused by `invoke` (even approved) and `tools/call`, naming the rule,
/// recorded as refused for the local user, and nothing runs.
#[test]
fn a_rule_naming_the_local_user_restricts_it_everywhere() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[[approval.rules]]\nname = \"not at the keyboard\"\nprincipal = \"local:*\"\ncapability = \"echo.echo\"\ndecision = \"deny\"\n",
    );
    let names = tool_names(&home);
    assert!(!names.contains(&TOOL.to_owned()), "{names:?}");
    assert!(
        names.contains(&"echo__echo_list_state".to_owned()),
        "{names:?}"
    );
    let run = home.invoke("echo", "echo.echo", &json!({}), &["--approve"]);
    assert_eq!(run.refused_kind(), "denied");
    assert_eq!(run.json()["error"]["rule"], "rule \"not at the keyboard\"");

    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    assert!(!server.tool_names().contains(&TOOL.to_owned()));
    // Refused as a denied tool is: a protocol error naming the rule.
    let called = server.request("tools/call", &json!({"name": TOOL, "arguments": {}}));
    assert_eq!(called["error"]["data"]["kind"], "denied", "{called}");
    let message = called["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("rule \"not at the keyboard\""), "{called}");
    server.finish();
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");

    let records = audit_records(&home);
    assert_all_local(&records);
    assert!(records.len() >= 2, "{records:#?}");
    for record in &records {
        assert_eq!(record["outcome"], "refused", "{record:#}");
        assert_eq!(record["approval"]["rule"], "rule \"not at the keyboard\"");
    }
}

/// Caller matchers that could only match nothing, or would be read as a
/// pattern where the match is exact, stop every command before any call,
/// naming the rule.
#[test]
fn wrong_caller_matchers_stop_the_host_naming_the_rule() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    for (rule, says) in [
        (
            "name = \"nobody\"\nprincipal = \"\"",
            "rule \"nobody\": principal = \"\" names no caller",
        ),
        (
            "scope = \"files:write\"\nwithout_scope = \"files:write\"",
            "scope and without_scope both name \"files:write\"",
        ),
        ("without_scope = \"files:*\"", "matched whole and exactly"),
    ] {
        home.write_config(&format!(
            "[[approval.rules]]\n{rule}\ndecision = \"deny\"\n"
        ));
        for args in [
            vec!["tools"],
            vec!["invoke", "echo", "echo.echo", "--input", "{}"],
        ] {
            let run = home.run(&args);
            assert_ne!(run.code, 0, "{args:?} with {rule}: {run:#?}");
            assert!(
                run.stderr.contains(says) && run.stderr.contains("config.toml"),
                "{args:?} with {rule}: {}",
                run.stderr
            );
        }
    }
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
}

/// The attack: a local user tries to act as a remote principal (one a
/// rule allows, or one to blame in the audit log). No flag of `invoke`,
/// `tools` or `mcp` names a principal or scopes: each is refused as an
/// unknown argument, nothing runs, and the log names the local user only.
#[test]
fn a_local_user_cannot_claim_another_principal() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[[approval.rules]]\nname = \"ci may\"\nprincipal = \"ci-bot\"\ncapability = \"echo.echo\"\ndecision = \"allow\"\n\
         [[approval.rules]]\nname = \"others ask\"\ncapability = \"echo.echo\"\ndecision = \"ask\"\n",
    );
    for flags in [
        &["--as-principal", "ci-bot"][..],
        &["--principal", "ci-bot"],
        &["--scope", "admin"],
        &["--caller", "ci-bot"],
    ] {
        for command in [
            vec!["invoke", "echo", "echo.echo", "--input", "{}"],
            vec!["tools"],
            vec!["mcp"],
        ] {
            let args: Vec<&str> = command.iter().chain(flags).copied().collect();
            let run = home.run(&args);
            assert_eq!(run.code, 2, "{args:?} was accepted: {run:#?}");
            assert!(
                run.stderr.contains("unexpected argument"),
                "{args:?}: {}",
                run.stderr
            );
        }
    }
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
    // Without approval, the local user's call asks (the allow is ci-bot's).
    let run = home.invoke("echo", "echo.echo", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "approval_required");
    assert_eq!(run.json()["error"]["rule"], "rule \"others ask\"");
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
    assert_all_local(&audit_records(&home));
}
