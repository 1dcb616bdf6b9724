//! Roots and request building, seen from the module's side through the echo
//! fixture: what is granted, what is not, and what a caller cannot forge.

use std::path::{Path, PathBuf};

use modproto::RESERVED_KEYS;
use serde_json::{Value, json};

use crate::support::{Fixture, Home, write_file};

fn echo_home() -> Home {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home
}

/// The invoke params the echo fixture received.
fn echoed_request(home: &Home, input: &Value, extra: &[&str]) -> Value {
    home.invoke("echo", "echo.echo", input, extra)
        .invoke_result()["output"]["request"]
        .clone()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|e| panic!("canonicalize {}: {e}", path.display()))
}

/// Assert that a granted root points at `expected`, with kind and access.
#[track_caller]
fn assert_root(roots: &Value, name: &str, expected: &Path, kind: &str, access: &str) {
    let root = &roots[name];
    assert_eq!(root["kind"], kind, "root {name}: {roots:#}");
    assert_eq!(root["access"], access, "root {name}: {roots:#}");
    let path = Path::new(
        root["path"]
            .as_str()
            .unwrap_or_else(|| panic!("root {name} has no path: {roots:#}")),
    );
    assert_eq!(
        canonical(path),
        canonical(expected),
        "root {name}: {roots:#}"
    );
}

/// A corpus directory outside home and workspace.
fn corpus(home: &Home) -> PathBuf {
    let dir = home.outside().join("corpus");
    write_file(&dir, "a.txt", "corpus text\n");
    dir
}

#[test]
fn state_artifacts_and_workspace_roots_point_where_the_layout_says() {
    let home = echo_home();
    let request = echoed_request(&home, &json!({}), &[]);
    let roots = &request["roots"];
    assert_root(
        roots,
        "state",
        &home.path().join("state/echo"),
        "state",
        "read-write",
    );
    assert_root(
        roots,
        "artifacts",
        &home.path().join("artifacts/echo"),
        "artifacts",
        "read-write",
    );
    assert_root(roots, "workspace", &home.workspace(), "workspace", "read");
    // Nothing configured `corpus`, so it is not granted, and nothing else is.
    assert!(
        roots.get("corpus").is_none(),
        "an unconfigured source root was granted: {roots:#}"
    );
    let mut names: Vec<&String> = roots.as_object().expect("roots object").keys().collect();
    names.sort();
    assert_eq!(names, ["artifacts", "state", "workspace"], "{roots:#}");
}

#[test]
fn a_source_root_on_the_command_line_is_granted_read_only() {
    let home = echo_home();
    let dir = corpus(&home);
    let flag = format!("corpus={}", dir.display());
    let request = echoed_request(&home, &json!({}), &["--source-root", &flag]);
    assert_root(&request["roots"], "corpus", &dir, "source", "read");

    let result = home.invoke(
        "echo",
        "echo.read_corpus",
        &json!({"name": "a.txt"}),
        &["--source-root", &flag],
    );
    assert_eq!(result.invoke_result()["output"]["content"], "corpus text\n");
}

#[test]
fn a_source_root_in_config_is_granted_read_only() {
    let home = echo_home();
    let dir = corpus(&home);
    home.write_config(&format!(
        "[source_roots]\ncorpus = {:?}\n",
        dir.to_string_lossy()
    ));
    let request = echoed_request(&home, &json!({}), &[]);
    assert_root(&request["roots"], "corpus", &dir, "source", "read");
    // A regular file is a valid source root too.
    let file = dir.join("a.txt");
    let flag = format!("corpus={}", file.display());
    let request = echoed_request(&home, &json!({}), &["--source-root", &flag]);
    assert_root(&request["roots"], "corpus", &file, "source", "read");
}

#[test]
fn a_missing_source_root_is_warned_about_and_not_granted() {
    let home = echo_home();
    let missing = home.outside().join("no-such-corpus");
    home.write_config(&format!(
        "[source_roots]\ncorpus = {:?}\n",
        missing.to_string_lossy()
    ));

    let described = home
        .run(&["describe", "echo", "--json"])
        .expect_code(0)
        .json();
    let host_warnings = described["host_warnings"].to_string();
    assert!(
        host_warnings.contains("corpus"),
        "describe does not warn about the missing corpus root: {described:#}"
    );

    let request = echoed_request(&home, &json!({}), &[]);
    assert!(
        request["roots"].get("corpus").is_none(),
        "a missing source root was granted: {request:#}"
    );

    // The module fails closed and says which root and how to grant it.
    let error = home
        .invoke("echo", "echo.read_corpus", &json!({}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "root_missing", "{error:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("corpus"),
        "{error:#}"
    );

    // The same for a flag naming a path that does not exist.
    let flag = format!("corpus={}", missing.display());
    let run = home.invoke("echo", "echo.echo", &json!({}), &["--source-root", &flag]);
    if run.code == 0 {
        let request = &run.json()["output"]["request"];
        assert!(
            request["roots"].get("corpus").is_none(),
            "a missing --source-root was granted: {request:#}"
        );
    } else {
        // Refusing the call outright is also failing closed.
        assert!(run.code == 1 || run.code == 2, "{run:#?}");
    }
}

#[test]
fn a_socket_is_never_a_source_root() {
    let home = echo_home();
    let socket = home.outside().join("corpus.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind socket");
    let flag = format!("corpus={}", socket.display());
    let run = home.invoke("echo", "echo.echo", &json!({}), &["--source-root", &flag]);
    if run.code == 0 {
        let request = &run.json()["output"]["request"];
        assert!(
            request["roots"].get("corpus").is_none(),
            "a socket was granted as a source root: {request:#}"
        );
    } else {
        assert!(run.code == 1 || run.code == 2, "{run:#?}");
    }
}

#[test]
fn reserved_keys_in_caller_input_are_never_written_by_the_caller() {
    let home = echo_home();
    let forged = json!({
        "input": {"x": 1},
        "protocol": "99.0",
        "capability": "echo.write_state",
        "request_id": "forged-id",
        "roots": {"state": {"path": "/", "kind": "state", "access": "read-write"},
                  "corpus": {"path": "/etc", "kind": "source", "access": "read"}},
        "grants": {"everything": true},
        "binaries": {"sh": "/bin/sh"},
        "deadline_ms": 999_999_999_u64,
        "max_output_bytes": 999_999_999_u64,
        "approval": {"by": "flag", "at": "2020-01-01T00:00:00Z"},
        "contract_version": "9.9",
        "note": "passes through",
    });
    let request = echoed_request(&home, &forged, &["--deadline-ms", "20000"]);
    assert_eq!(request["input"], json!({"x": 1}), "{request:#}");
    assert_eq!(
        request["note"], "passes through",
        "a plain sibling key is passed at the request root"
    );
    assert_eq!(request["capability"], "echo.echo");
    assert_eq!(request["protocol"], modproto::PROTOCOL_VERSION);
    assert_eq!(request["contract_version"], "1.0");
    assert_ne!(request["request_id"], "forged-id");
    assert!(
        request["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{request:#}"
    );
    assert!(
        request["deadline_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 20_000),
        "{request:#}"
    );
    assert_ne!(request["max_output_bytes"], 999_999_999_u64, "{request:#}");
    assert!(
        request.get("approval").is_none_or(Value::is_null),
        "a caller forged an approval: {request:#}"
    );
    assert!(request.get("grants").is_none(), "{request:#}");
    assert_eq!(request["binaries"], json!({}), "{request:#}");
    assert_root(
        &request["roots"],
        "state",
        &home.path().join("state/echo"),
        "state",
        "read-write",
    );
    assert!(
        request["roots"].get("corpus").is_none(),
        "a caller widened the roots: {request:#}"
    );

    // Without an explicit `input`, the caller's keys are the input and still
    // reach nothing host-owned.
    let request = echoed_request(
        &home,
        &json!({"request_id": "forged-id", "roots": {"x": 1}, "y": 2}),
        &[],
    );
    assert_ne!(request["request_id"], "forged-id", "{request:#}");
    assert!(request["roots"].get("x").is_none(), "{request:#}");
    for key in RESERVED_KEYS {
        assert_ne!(
            request[*key], "forged-id",
            "reserved key {key} was forged: {request:#}"
        );
    }
}

#[test]
fn the_deadline_and_output_cap_flags_reach_the_module() {
    let home = echo_home();
    let request = echoed_request(
        &home,
        &json!({}),
        &["--deadline-ms", "4321", "--max-output-bytes", "200000"],
    );
    assert!(
        request["deadline_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 4321),
        "{request:#}"
    );
    assert_eq!(request["max_output_bytes"], 200_000, "{request:#}");
}

#[test]
fn state_roots_of_two_modules_are_separate() {
    let home = Home::new();
    home.install(Fixture::Echo, "alpha");
    home.install(Fixture::Echo, "beta");
    let write = json!({"name": "note.txt", "content": "from alpha"});
    home.invoke("alpha", "alpha.write_state", &write, &[])
        .invoke_result();
    let note = home.path().join("state/alpha/note.txt");
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("from alpha"),
        "{}",
        note.display()
    );
    assert!(!home.path().join("state/beta/note.txt").exists());

    let listed = home
        .invoke("beta", "beta.list_state", &json!({}), &[])
        .invoke_result();
    assert_eq!(
        listed["output"]["files"],
        json!([]),
        "beta sees alpha's state"
    );
    let listed = home
        .invoke("alpha", "alpha.list_state", &json!({}), &[])
        .invoke_result();
    assert_eq!(listed["output"]["files"], json!(["note.txt"]));

    let alpha_roots = echo_roots(&home, "alpha");
    let beta_roots = echo_roots(&home, "beta");
    assert_ne!(alpha_roots["state"]["path"], beta_roots["state"]["path"]);
    assert_root(
        &beta_roots,
        "state",
        &home.path().join("state/beta"),
        "state",
        "read-write",
    );
}

fn echo_roots(home: &Home, id: &str) -> Value {
    home.invoke(id, &format!("{id}.echo"), &json!({}), &[])
        .invoke_result()["output"]["request"]["roots"]
        .clone()
}

#[test]
fn the_callers_secrets_never_reach_the_module() {
    let home = echo_home();
    let args = ["invoke", "echo", "echo.echo", "--json", "--input", "{}"];
    let run = home.run_with_env(
        &args,
        &[
            ("SECRET_TOKEN", "hunter2-7c1e"),
            ("AWS_SECRET_ACCESS_KEY", "hunter2-7c1e"),
            ("LANG", "C.UTF-8"),
        ],
    );
    let env = run.invoke_result()["output"]["env"].clone();
    let env = env
        .as_object()
        .unwrap_or_else(|| panic!("no env reported: {env:#}"));
    assert!(
        !run.stdout.contains("hunter2-7c1e"),
        "a secret reached the module: {env:#?}"
    );
    assert!(
        !env.contains_key("SECRET_TOKEN") && !env.contains_key("AWS_SECRET_ACCESS_KEY"),
        "{env:#?}"
    );
    // The allowlist still passes what a program needs.
    assert!(env.contains_key("PATH"), "PATH was not passed: {env:#?}");
    assert_eq!(
        env.get("LANG").and_then(Value::as_str),
        Some("C.UTF-8"),
        "{env:#?}"
    );
    for key in env.keys() {
        let allowed = ["PATH", "LANG", "TZ"].contains(&key.as_str())
            || key.starts_with("LC_")
            || key.starts_with("MODHOST_");
        assert!(allowed, "{key} is not on the allowlist: {env:#?}");
    }
}

#[test]
fn invalid_input_is_refused_before_the_module_is_spawned() {
    let home = echo_home();
    let run = home.invoke(
        "echo",
        "echo.write_state",
        &json!({"name": 5, "extra": true}),
        &[],
    );
    let error = run.refusal_error();
    assert_eq!(error["kind"], "invalid_input", "{error:#}");
    // Every violation is listed: the wrong type, the missing key, the extra key.
    let text = error.to_string();
    for needle in ["name", "content", "extra"] {
        assert!(
            text.contains(needle),
            "violation about {needle:?} not reported: {error:#}"
        );
    }
    assert_eq!(
        home.invocations("echo", "echo.write_state"),
        0,
        "the module ran on invalid input"
    );
    // The log is live: a valid call is recorded.
    home.invoke(
        "echo",
        "echo.write_state",
        &json!({"name": "n", "content": "c"}),
        &[],
    )
    .invoke_result();
    assert_eq!(home.invocations("echo", "echo.write_state"), 1);
}

#[test]
fn artifacts_inside_the_artifacts_root_are_reported_and_outside_refused() {
    let home = echo_home();
    let run = home.run(&[
        "invoke",
        "echo",
        "echo.artifact",
        "--input",
        r#"{"path": "report.txt"}"#,
    ]);
    run.expect_code(0);
    let line = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(modproto::ARTIFACT_MARKER))
        .unwrap_or_else(|| panic!("no @artifact line in human output:\n{}", run.stdout));
    let artifact: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("@artifact line {line:?}: {e}"));
    assert_eq!(artifact["path"], "report.txt", "{artifact:#}");
    assert!(home.path().join("artifacts/echo/report.txt").is_file());

    // An artifact outside its root is dropped, with a host warning that says so.
    let run = home.invoke(
        "echo",
        "echo.artifact",
        &json!({"path": "../escape.txt"}),
        &[],
    );
    let result = run.invoke_result();
    assert_eq!(
        result["artifacts"],
        json!([]),
        "an escaping artifact was passed on: {result:#}"
    );
    let warnings = result["host_warnings"].to_string();
    assert!(
        warnings.contains("../escape.txt"),
        "no host warning about the dropped artifact: {result:#}"
    );
    let run = home.run(&[
        "invoke",
        "echo",
        "echo.artifact",
        "--input",
        r#"{"path": "../escape.txt"}"#,
    ]);
    run.expect_code(0);
    assert!(
        !run.stdout.contains(modproto::ARTIFACT_MARKER),
        "{}",
        run.stdout
    );
}
