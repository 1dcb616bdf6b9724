//! Secrets, as attacks: a module given a secret tries to get its value past
//! the host every way it can, a module not given it tries to read it, and
//! an operator's mistakes (a secrets file others can read, a value too short
//! to mask, a grant the capability never asked for) are refused.
//!
//! The module is `tests/fixtures/leaker.py` (system Python, confined as any
//! script module is); the component is the `secret` guest. The host runs
//! as root, as CI does, and gets the value through an environment pointer
//! (`LEAK_TOKEN = { env = "GH_LEAK" }`), so the value sits in the host's own
//! environment, where `/proc/<host pid>/environ` would show it to anyone
//! allowed to read that.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Home, Layout, Run};

/// The value: with a `"` and a `\`, so JSON escapes it.
const SECRET: &str = "ghs_S3cr3tL3ak\"q\\b-7f3a9c";
/// A run of it no escaping changes: whatever shows it leaked the value.
const FRAGMENT: &str = "S3cr3tL3ak";
const MARKER: &str = "[REDACTED:LEAK_TOKEN]";
/// The host's variable the secret points at.
const HOST_VARIABLE: &str = "GH_LEAK";

/// Where the value is given, and to what.
const GRANTS: &str = r#"
[capabilities."leaker.leaker.print"]
secrets = ["LEAK_TOKEN"]
[capabilities."leaker.leaker.stderr"]
secrets = ["LEAK_TOKEN"]
[capabilities."leaker.leaker.error"]
secrets = ["LEAK_TOKEN"]
[capabilities."leaker.leaker.garbage"]
secrets = ["LEAK_TOKEN"]
[capabilities."leaker.leaker.hold"]
secrets = ["LEAK_TOKEN"]
[capabilities."leaker.leaker.stash"]
secrets = ["LEAK_TOKEN"]

[[approval.rules]]
module = "leaker"
decision = "allow"
"#;

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every spelling of the value the leaker writes: none may appear.
fn leaked_forms() -> Vec<String> {
    vec![
        FRAGMENT.to_owned(),
        SECRET.bytes().map(|b| format!("{b:02x}")).collect(),
        base64(SECRET.as_bytes()),
        base64(format!("x-access-token:{SECRET}").as_bytes()),
    ]
}

#[track_caller]
fn assert_no_leak(what: &str, text: &str) {
    for form in leaked_forms() {
        assert!(
            !text.contains(&form),
            "{what} shows the secret ({form}):\n{text}"
        );
    }
}

#[track_caller]
fn assert_run_clean(run: &Run) {
    assert_no_leak(&format!("stdout of {:?}", run.args), &run.stdout);
    assert_no_leak(&format!("stderr of {:?}", run.args), &run.stderr);
}

fn write_secrets(home: &Home, text: &str, mode: u32) -> std::path::PathBuf {
    let path = home.path().join("secrets.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A home with the leaker pinned (described with the secret in the host's
/// environment), its secrets granted as [`GRANTS`] says and its value
/// behind an environment pointer, on a machine that confines.
fn leaker_home() -> Home {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "the leaker fixture needs the system /usr/bin/python3"
    );
    let home = Home::new();
    let target = home.module_path("leaker", Layout::Folder);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(
        crate::support::tests_dir().join("fixtures/leaker.py"),
        &target,
    )
    .unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.write_config(GRANTS);
    write_secrets(
        &home,
        &format!("LEAK_TOKEN = {{ env = \"{HOST_VARIABLE}\" }}\n"),
        0o600,
    );
    run(&home, &["pin", "leaker"]).expect_code(0);
    home.require_landlock();
    home
}

/// `modhost ARGS`, the secret in the host's environment.
fn run<S: AsRef<str>>(home: &Home, args: &[S]) -> Run {
    home.run_with_env(args, &[(HOST_VARIABLE, SECRET)])
}

fn invoke(home: &Home, verb: &str, input: &Value, json: bool) -> Run {
    let input = input.to_string();
    let capability = format!("leaker.{verb}");
    let mut args = vec!["invoke", "leaker", &capability, "--input", &input];
    if json {
        args.push("--json");
    }
    let run = run(home, &args);
    assert_run_clean(&run);
    run
}

#[test]
fn a_granted_secret_reaches_its_call_and_never_the_cli_output() {
    let home = leaker_home();
    let result = invoke(&home, "print", &json!({}), true).invoke_result();
    let output = &result["output"];
    // The module got exactly the value: it says so, reversed.
    let reversed: String = SECRET.chars().rev().collect();
    assert_eq!(output["reversed"], reversed, "{result:#}");
    // Each way it wrote the value is masked.
    assert_eq!(output["plain"], MARKER);
    assert_eq!(output["escaped"], MARKER, "written with \\u escapes");
    assert_eq!(output["sentence"], format!("before {MARKER} after"));
    assert_eq!(output["keyed"], json!({ MARKER: 1 }));
    assert_eq!(output["list"], json!(["a", MARKER]));
    for key in ["base64", "hex", "basic", "url", "json_in_text"] {
        assert!(
            output[key].as_str().unwrap_or_default().contains(MARKER),
            "{key}: {output:#}"
        );
    }
    assert_eq!(result["text"], format!("the token is {MARKER}"));
    assert_eq!(result["warnings"], json!([format!("careful: {MARKER}")]));
    // Plain output too.
    let plain = invoke(&home, "print", &json!({}), false);
    plain.expect_code(0);
    assert!(plain.stdout.contains(MARKER), "{plain:#?}");
    // The audit log names the secret each call received, never its value.
    let log = std::fs::read_to_string(home.path().join("audit/audit.jsonl")).unwrap();
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records
            .iter()
            .filter(|r| r["capability"] == "leaker.print")
            .all(|r| r["grants"]["secrets"] == json!(["LEAK_TOKEN"])),
        "{log}"
    );
    assert_no_leak("the audit log", &log);
}

#[test]
fn a_secret_in_stderr_an_error_or_a_bad_line_is_masked_in_the_failure() {
    let home = leaker_home();
    for json in [true, false] {
        let stderr = invoke(&home, "stderr", &json!({}), json);
        stderr.expect_code(1);
        let error = invoke(&home, "error", &json!({}), json);
        error.expect_code(1);
        let garbage = invoke(&home, "garbage", &json!({}), json);
        garbage.expect_code(1);
        if json {
            let failure = stderr.invoke_error();
            assert_eq!(failure["kind"], "crashed", "{failure:#}");
            let tail = failure["stderr_tail"].as_str().unwrap_or_default();
            assert!(tail.contains(&format!("the token is {MARKER}")), "{tail}");
            assert!(
                tail.contains(&format!("{{\"debug\": \"{MARKER}\"}}")),
                "{tail}"
            );
            let failure = error.invoke_error();
            assert_eq!(failure["kind"], format!("leak_{MARKER}"), "{failure:#}");
            assert!(failure["message"].as_str().unwrap().contains(MARKER));
            assert!(failure["remedy"].as_str().unwrap().contains(MARKER));
            assert_eq!(
                failure["problems"],
                json!([format!("problem with {MARKER}")])
            );
            let failure = garbage.invoke_error();
            assert_eq!(failure["kind"], "bad_response", "{failure:#}");
        } else {
            assert!(stderr.stderr.contains(MARKER), "{stderr:#?}");
            assert!(error.stderr.contains(MARKER), "{error:#?}");
        }
    }
}

/// `tools/call` of `tool` asking for progress: every line the server wrote
/// until its response, and the response.
fn call_collecting(server: &mut McpStdio, tool: &str) -> (Vec<String>, Value) {
    let id = server.send_request(
        "tools/call",
        &json!({"name": tool, "arguments": {}, "_meta": {"progressToken": tool}}),
    );
    let mut lines = Vec::new();
    loop {
        let line = server.next_line(std::time::Duration::from_secs(60));
        let message: Value = serde_json::from_str(&line).unwrap();
        lines.push(line);
        if message.get("method").is_none() && message["id"] == json!(id) {
            return (lines, message);
        }
    }
}

#[test]
fn through_modhost_mcp_results_failures_progress_and_logs_are_masked() {
    let home = leaker_home();
    let log = home.outside().join("mcp.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |command| {
        command
            .env(HOST_VARIABLE, SECRET)
            .env("RUST_LOG", "trace")
            .stderr(log_file);
    });
    let (lines, response) = call_collecting(&mut server, "leaker__leaker_print");
    let all = lines.join("\n");
    assert_no_leak("modhost mcp's stdout", &all);
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    assert!(
        all.contains(&format!("working with {MARKER}")),
        "the progress message arrived, masked: {all}"
    );
    let structured = &response["result"]["structuredContent"];
    assert_eq!(structured["plain"], MARKER, "{response}");
    for tool in [
        "leaker__leaker_stderr",
        "leaker__leaker_error",
        "leaker__leaker_garbage",
    ] {
        let (lines, response) = call_collecting(&mut server, tool);
        assert_no_leak(
            &format!("modhost mcp's answer to {tool}"),
            &lines.join("\n"),
        );
        assert_eq!(
            response["result"]["isError"],
            json!(true),
            "{tool}: {response}"
        );
    }
    server.finish();
    assert_no_leak("modhost mcp's log", &std::fs::read_to_string(&log).unwrap());
}

/// What the snooping capability (no secret declared, so nothing of its
/// output is masked) could see.
fn snoop(home: &Home) -> Value {
    let secrets_file = home.path().join("secrets.toml");
    let input = json!({"secrets_file": secrets_file.to_str().unwrap()}).to_string();
    let run = run(
        home,
        &[
            "invoke",
            "leaker",
            "leaker.snoop",
            "--json",
            "--input",
            &input,
        ],
    );
    run.invoke_result()["output"].clone()
}

#[test]
fn a_capability_that_did_not_declare_the_secret_cannot_see_it_even_through_proc() {
    let home = leaker_home();
    let seen = snoop(&home);
    assert_no_leak("what the module saw", &seen.to_string());
    let names: Vec<&str> = seen["env_names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !names.contains(&"LEAK_TOKEN") && !names.contains(&HOST_VARIABLE),
        "{names:?}"
    );
    assert_eq!(seen["env_value"], Value::Null);
    // The host's own environment, which holds the value, stays closed.
    let host = format!("/proc/{}/environ", seen["ppid"]);
    assert!(
        seen["refused"].get(&host).is_some(),
        "the module read {host}: {seen:#}"
    );
    let secrets_file = home.path().join("secrets.toml");
    assert!(
        seen["refused"]
            .get(secrets_file.to_str().unwrap())
            .is_some(),
        "the module read the secrets file: {seen:#}"
    );
    for (path, text) in seen["read"].as_object().unwrap() {
        assert_no_leak(
            &format!("{path}, as the module read it"),
            text.as_str().unwrap(),
        );
    }
    // The same module unconfined reads it there: the attack is real, and
    // what stops it is the confinement. (What it read comes back masked:
    // every call of a module is masked with every value the module's
    // capabilities were granted.)
    home.write_config(&format!("confinement = \"off\"\n{GRANTS}"));
    let seen = snoop(&home);
    let host = format!("/proc/{}/environ", seen["ppid"]);
    let read = seen["read"][&host].as_str().unwrap_or_default();
    assert!(
        read.contains(&format!("{HOST_VARIABLE}={MARKER}")),
        "unconfined, the host's environment should be readable: {seen:#}"
    );
}

#[test]
fn a_module_cannot_read_the_secret_from_a_concurrent_call_that_holds_it() {
    let home = leaker_home();
    // A call of the same module that was given the secret, holding it in
    // its environment while the snoop asks /proc for it by pid.
    std::thread::scope(|scope| {
        let holding = scope.spawn(|| invoke(&home, "hold", &json!({"seconds": 4}), true));
        let holder = wait_for_holder(&home);
        let secrets_file = home.path().join("secrets.toml");
        let input = json!({"pids": [holder], "secrets_file": secrets_file.to_str().unwrap()});
        let input = input.to_string();
        let seen = run(
            &home,
            &[
                "invoke",
                "leaker",
                "leaker.snoop",
                "--json",
                "--input",
                &input,
            ],
        )
        .invoke_result()["output"]
            .clone();
        assert_no_leak("what the module saw", &seen.to_string());
        let theirs = format!("/proc/{holder}/environ");
        assert!(
            seen["refused"].get(&theirs).is_some(),
            "{theirs} of the call holding the secret was not refused: {seen:#}"
        );
        let held = holding.join().unwrap().invoke_result();
        assert_eq!(
            held["output"]["pid"], holder,
            "the holder was another process"
        );
    });
}

/// The pid of the leaker process serving `hold`, once it runs.
fn wait_for_holder(home: &Home) -> u32 {
    for _ in 0..200 {
        if let Some(process) = home
            .live_module_processes()
            .into_iter()
            .find(|p| p.cmdline.contains("leaker"))
        {
            return process.pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the holding call's process never showed up");
}

/// A capability given the value keeps it in the module's state; another,
/// given nothing, reads it back and prints it. Every call of a module is
/// masked with every value its capabilities were granted.
#[test]
fn a_value_one_capability_stashed_is_masked_when_another_prints_it() {
    let home = leaker_home();
    invoke(&home, "stash", &json!({}), true).expect_code(0);
    let recalled = invoke(&home, "recall", &json!({}), true);
    recalled.expect_code(0);
    let result = recalled.invoke_result();
    assert_eq!(result["output"]["loot"], MARKER, "{result:#}");
    assert_eq!(result["text"], format!("recalled {MARKER}"));
}

#[test]
fn describe_and_other_capabilities_never_get_the_secret() {
    let home = leaker_home();
    // The module described itself with the secret in the host's
    // environment (pinned by `leaker_home`): describe got no secret.
    let described = run(&home, &["describe", "leaker", "--json"]).json();
    let description = described["descriptor"]["description"].as_str().unwrap();
    let (_, seen) = description.split_once("describe saw: ").unwrap();
    for name in seen.split(',') {
        assert!(
            name != "LEAK_TOKEN" && name != HOST_VARIABLE,
            "describe saw {name}: {description}"
        );
    }
}

#[test]
fn describe_shows_which_secrets_each_call_gets_never_their_values() {
    let home = leaker_home();
    let shown = run(&home, &["describe", "leaker", "--json"]);
    assert_run_clean(&shown);
    let grants = &shown.expect_code(0).json()["grants"];
    assert_eq!(
        grants["leaker.print"]["secrets"],
        json!([{"name": "LEAK_TOKEN", "granted": true,
                "source": format!("${HOST_VARIABLE} (the host's environment)")}]),
        "{grants:#}"
    );
    let other = &grants["leaker.other"]["secrets"][0];
    assert_eq!(other["name"], "OTHER_TOKEN");
    assert_eq!(other["granted"], false);
    assert!(other["problem"].as_str().unwrap().contains("not granted"));
    assert_eq!(grants["leaker.snoop"]["secrets"], json!([]));
    let text = run(&home, &["describe", "leaker"]);
    assert_run_clean(&text);
    let text = &text.expect_code(0).stdout;
    assert!(
        text.contains("secret: LEAK_TOKEN (granted, from $GH_LEAK (the host's environment))"),
        "{text}"
    );
    assert!(
        text.contains("secret: OTHER_TOKEN (a call is refused: not granted"),
        "{text}"
    );
}

#[test]
fn a_declared_but_ungranted_secret_refuses_the_call_and_says_how_to_grant_it() {
    let home = leaker_home();
    let refused = invoke(&home, "other", &json!({}), true);
    assert_eq!(refused.refused_kind(), "secret_unavailable");
    let error = &refused.json()["error"];
    let remedy = error["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("secrets = [\"OTHER_TOKEN\"]")
            && remedy.contains("[capabilities.\"leaker.leaker.other\"]")
            && remedy.contains("config.toml"),
        "{error:#}"
    );
    assert!(error["message"].as_str().unwrap().contains("OTHER_TOKEN"));
}

#[test]
fn a_secrets_file_others_can_read_or_another_user_owns_is_refused() {
    let home = leaker_home();
    let path = home.path().join("secrets.toml");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = invoke(&home, "print", &json!({}), true);
    assert_eq!(refused.refused_kind(), "secret_unavailable");
    let error = &refused.json()["error"];
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(path.to_str().unwrap()) && message.contains("0644"),
        "{error:#}"
    );
    assert_eq!(
        error["remedy"],
        format!("run `chmod 600 {}`", path.display())
    );
    // 0600, but another user's.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
    let refused = invoke(&home, "print", &json!({}), true);
    assert_eq!(refused.refused_kind(), "secret_unavailable");
    let error = &refused.json()["error"];
    assert!(
        error["message"].as_str().unwrap().contains("uid 4242"),
        "{error:#}"
    );
    assert!(
        error["remedy"].as_str().unwrap().contains("chown 0"),
        "{error:#}"
    );
    // Its own again: the call runs.
    std::os::unix::fs::chown(&path, Some(0), None).unwrap();
    invoke(&home, "print", &json!({}), true).invoke_result();
}

#[test]
fn a_value_too_short_to_mask_or_a_missing_one_is_refused_without_showing_it() {
    let home = leaker_home();
    write_secrets(&home, "LEAK_TOKEN = \"s3cr3t\"\n", 0o600);
    let refused = invoke(&home, "print", &json!({}), true);
    assert_eq!(refused.refused_kind(), "secret_unavailable");
    assert!(refused.stdout.contains("shorter than 8"), "{refused:#?}");
    assert!(!refused.stdout.contains("s3cr3t"), "{refused:#?}");
    // A pointer at a variable the host does not have.
    write_secrets(&home, "LEAK_TOKEN = { env = \"GH_LEAK\" }\n", 0o600);
    let unset = home.run(&["invoke", "leaker", "leaker.print", "--json"]);
    assert_eq!(unset.refused_kind(), "secret_unavailable");
    assert!(unset.stdout.contains("$GH_LEAK"), "{unset:#?}");
}

#[test]
fn a_grant_of_a_secret_the_capability_does_not_declare_stops_the_host() {
    let home = leaker_home();
    home.write_config(&format!(
        "{GRANTS}\n[capabilities.\"leaker.leaker.snoop\"]\nsecrets = [\"LEAK_TOKEN\"]\n"
    ));
    let stopped = invoke(&home, "print", &json!({}), true);
    stopped.expect_code(2);
    assert!(
        stopped.stderr.contains("does not declare it"),
        "{stopped:#?}"
    );
}

#[test]
fn the_approval_question_names_the_secrets_a_call_receives() {
    let home = leaker_home();
    home.write_config(&format!(
        "{GRANTS}\n[[approval.rules]]\nname = \"ask printing\"\ncapability = \"leaker.print\"\ndecision = \"ask\"\n"
    ));
    let refused = invoke(&home, "print", &json!({}), true);
    assert_eq!(refused.refused_kind(), "approval_required");
    assert!(
        refused
            .stdout
            .contains("rule \\\"ask printing\\\"; it receives secret LEAK_TOKEN"),
        "{refused:#?}"
    );
    // The question an MCP client shows its user says it too.
    let mut server = McpStdio::spawn(&home, Some(&home.workspace()), |command| {
        command.env(HOST_VARIABLE, SECRET);
    });
    server.initialize(&json!({"elicitation": {}}));
    server.send_request(
        "tools/call",
        &json!({"name": "leaker__leaker_print", "arguments": {}}),
    );
    let question = server.next_message(std::time::Duration::from_secs(60));
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("it receives secret LEAK_TOKEN"),
        "{message}"
    );
}

#[test]
fn a_component_gets_its_secret_through_wasi_and_its_output_is_masked() {
    let home = Home::new();
    home.install_component("secret");
    home.write_config("[capabilities.\"secret.secret.run\"]\nsecrets = [\"GUEST_TOKEN\"]\n");
    write_secrets(
        &home,
        &format!("GUEST_TOKEN = {}\n", toml_string(SECRET)),
        0o600,
    );
    let result = home.invoke("secret", "secret.run", &json!({}), &[]);
    assert_run_clean(&result);
    let result = result.invoke_result();
    let reversed: String = SECRET.chars().rev().collect();
    assert_eq!(result["output"]["reversed"], reversed, "{result:#}");
    assert_eq!(result["output"]["token"], "[REDACTED:GUEST_TOKEN]");
    assert_eq!(result["text"], "token: [REDACTED:GUEST_TOKEN]");
    // Through the MCP server: the progress message and the result.
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let (lines, response) = call_collecting(&mut server, "secret__secret_run");
    assert_no_leak("modhost mcp serving the component", &lines.join("\n"));
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    assert!(lines.join("\n").contains("using [REDACTED:GUEST_TOKEN]"));
    server.finish();
}

/// `value` as a TOML basic string.
fn toml_string(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}
