//! The hostile battery: a module that tries to escape its grants from the
//! inside (`tests/fixtures/hostile.rs`). Each attack must fail as data (the
//! module answers, reporting its own failure), with the host alive, nothing
//! outside the grants changed, and no process left.
//!
//! The filesystem and TCP denials come from landlock and the process group
//! from seccomp; on a kernel without them the tests that need them fail with
//! the reason (`doctor --json` names the part), never pass vacuously.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Home, Layout};

fn install(home: &Home) {
    home.install_binary(
        Path::new(env!("CARGO_BIN_EXE_fixture_hostile")),
        "hostile",
        Layout::Folder,
    );
}

/// Fails the test, with doctor's reason, unless this machine enforces every
/// part of confinement in `parts` (doctor's `part` keys).
#[track_caller]
fn require_enforced(home: &Home, what: &str, parts: &[&str]) {
    let doctor = home.run(&["doctor", "--json"]).json();
    let confinement = &doctor["confinement"];
    for part in parts {
        let found = confinement["parts"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["part"] == *part))
            .unwrap_or_else(|| panic!("doctor --json lists no part {part:?}: {confinement:#}"));
        assert_eq!(
            found["enforced"], true,
            "{what} needs {part} confinement, which this machine does not enforce: {found:#}"
        );
    }
}

/// Run one attack; the host must answer with the module's own report.
#[track_caller]
fn attack(home: &Home, verb: &str, input: &Value, extra: &[&str]) -> Value {
    let run = home.invoke("hostile", &format!("hostile.{verb}"), input, extra);
    let result = run.invoke_result();
    home.assert_no_module_processes();
    result["output"].clone()
}

#[track_caller]
fn assert_failed(report: &Value, what: &str) {
    assert_eq!(report["succeeded"], false, "{what} succeeded: {report:#}");
}

fn secret_file(home: &Home) -> PathBuf {
    let secret = home.outside().join("secret.txt");
    std::fs::write(&secret, "top-secret").unwrap();
    secret
}

#[test]
fn reading_outside_the_grants_is_denied() {
    let home = Home::new();
    install(&home);
    require_enforced(
        &home,
        "reading_outside_the_grants_is_denied",
        &["filesystem"],
    );
    let secret = secret_file(&home);
    let report = attack(&home, "read_outside", &json!({"path": secret}), &[]);
    assert_failed(&report, "reading outside the grants");
    assert!(!report.to_string().contains("top-secret"));
}

#[test]
fn writing_outside_the_grants_is_denied() {
    let home = Home::new();
    install(&home);
    require_enforced(
        &home,
        "writing_outside_the_grants_is_denied",
        &["filesystem"],
    );
    let target = home.outside().join("pwned.txt");
    let report = attack(&home, "write_outside", &json!({"path": target}), &[]);
    assert_failed(&report, "writing outside the grants");
    assert!(!target.exists(), "{} was created", target.display());
    // The workspace is granted read-only: no writing there either.
    let target = home.workspace().join("pwned.txt");
    let report = attack(&home, "write_outside", &json!({"path": target}), &[]);
    assert_failed(&report, "writing into the read-only workspace");
    assert!(!target.exists());
}

#[test]
fn a_symlink_planted_in_a_source_root_does_not_lead_outside() {
    let home = Home::new();
    install(&home);
    require_enforced(&home, "a_symlink_planted_in_a_source_root", &["filesystem"]);
    let secret = secret_file(&home);
    let corpus = home.outside().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(corpus.join("fine.txt"), "fine").unwrap();
    std::os::unix::fs::symlink(&secret, corpus.join("link")).unwrap();
    let flag = format!("corpus={}", corpus.display());
    let extra = ["--source-root", flag.as_str()];

    let report = attack(&home, "follow_link", &json!({"name": "fine.txt"}), &extra);
    assert_eq!(
        report["got"], "fine",
        "the granted file must be readable: {report:#}"
    );
    let report = attack(&home, "follow_link", &json!({"name": "link"}), &extra);
    assert_failed(&report, "following the planted symlink");
    assert!(!report.to_string().contains("top-secret"));
}

#[test]
fn tcp_without_declared_network_is_denied() {
    let home = Home::new();
    install(&home);
    require_enforced(
        &home,
        "tcp_without_declared_network_is_denied",
        &["filesystem", "tcp"],
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let report = attack(&home, "connect", &json!({"port": port}), &[]);
    assert_failed(&report, "a TCP connect without network");
}

#[test]
fn the_hosts_secrets_do_not_reach_the_module() {
    let home = Home::new();
    install(&home);
    let args = [
        "invoke",
        "hostile",
        "hostile.secret_env",
        "--json",
        "--input",
        r#"{"name": "AWS_SECRET_ACCESS_KEY"}"#,
    ];
    let run = home.run_with_env(&args, &[("AWS_SECRET_ACCESS_KEY", "hunter2")]);
    let report = run.invoke_result()["output"].clone();
    assert_failed(&report, "reading the host's secret variable");
    assert!(!run.stdout.contains("hunter2"));
}

#[test]
fn a_capability_declaring_only_reads_cannot_write_its_state() {
    let home = Home::new();
    install(&home);
    require_enforced(&home, "a_capability_declaring_only_reads", &["filesystem"]);
    let report = attack(&home, "sneaky_write", &json!({"name": "sneaky.txt"}), &[]);
    assert_failed(
        &report,
        "writing the state root from a read-only capability",
    );
    assert!(!home.path().join("state/hostile/sneaky.txt").exists());
}

#[test]
fn a_daemon_grandchild_does_not_outlive_the_call() {
    let home = Home::new();
    install(&home);
    require_enforced(
        &home,
        "a_daemon_grandchild_cannot_leave_the_group",
        &["process_group"],
    );
    let report = attack(&home, "daemon", &json!({}), &[]);
    assert_failed(&report, "leaving the process group");
    // `attack` already asserted that no process of this test survives.
}

#[test]
fn a_stderr_flood_is_drained_and_bounded() {
    let home = Home::new();
    install(&home);
    let run = home.invoke("hostile", "hostile.flood_stderr", &json!({}), &[]);
    let result = run.invoke_result();
    assert_eq!(result["output"]["got"], "64 MiB", "{result:#}");
    assert!(
        run.stdout.len() + run.stderr.len() < 1 << 20,
        "the flood reached the host's own output"
    );
    home.assert_no_module_processes();
}

#[test]
fn a_hundred_megabytes_on_stdout_hit_the_output_limit() {
    let home = Home::new();
    install(&home);
    let run = home.invoke("hostile", "hostile.flood_stdout", &json!({}), &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "output_limit", "{error:#}");
    home.assert_no_module_processes();
    // The host is still fine: the next call works.
    home.run(&["list", "--json"]).expect_code(0);
}
