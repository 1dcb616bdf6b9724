//! The memory bound of a native call, attacked: a module that takes 4 GiB in
//! one call is stopped at its limit with `memory_limit` naming the limit
//! and how to raise it, alone (a concurrent call of another module answers,
//! the host answers the next call), and a module that spreads its memory
//! over forked children is bounded as a group. `doctor` says what holds
//! the bound.
//!
//! The suite runs as root on cgroup v1 with the memory controller (CI
//! too), where each call gets a memory cgroup of its own: these tests fail,
//! never skip, on a machine where that is missing.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Home, Layout};

/// A small limit keeps the attacks quick: the module gives up 4 GiB at 256 MiB.
const SMALL_LIMIT: u64 = 256 << 20;

/// A home with the memory fixture installed (and pinned) under each of
/// `ids`, and `config` as its config.toml.
fn home_with(ids: &[&str], config: &str) -> Home {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "the memory fixture needs the system /usr/bin/python3"
    );
    let home = Home::new();
    home.write_config(config);
    for id in ids {
        let target = home.module_path(id, Layout::Folder);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(
            crate::support::tests_dir().join("fixtures/memory_hog.py"),
            &target,
        )
        .unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        home.run(&["pin", id]).expect_code(0);
    }
    home
}

fn small_limit_for(id: &str) -> String {
    format!("[limits.modules.\"{id}\"]\nnative_memory_bytes = {SMALL_LIMIT}\n")
}

/// The failed call's error, checked to be the memory limit of `limit`
/// bytes, with the module's own config line as the remedy.
#[track_caller]
fn assert_memory_limit(error: &Value, id: &str, limit: u64, words: &str) {
    assert_eq!(error["kind"], "memory_limit", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(words) && message.contains(&limit.to_string()),
        "the message does not name the limit: {message}"
    );
    let remedy = error["remedy"].as_str().unwrap_or_default();
    assert!(
        remedy.contains(&format!("[limits.modules.\"{id}\"] native_memory_bytes")),
        "the remedy does not say how to raise it: {remedy}"
    );
}

/// The attack: 4 GiB taken and written in one call, against a module's own
/// limit of 256 MiB. The call ends with `memory_limit`, quickly (the
/// kernel stops it at the limit, not the deadline), nothing of it is left,
/// and the module's next call answers.
#[test]
fn four_gib_in_one_call_are_stopped_at_the_modules_limit() {
    let home = home_with(&["hog"], &small_limit_for("hog"));
    let started = Instant::now();
    let run = home.invoke("hog", "hog.allocate", &json!({"mib": 4096}), &[]);
    let error = run.invoke_error();
    assert_memory_limit(&error, "hog", SMALL_LIMIT, "256 MiB");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped only after {:?}",
        started.elapsed()
    );
    home.assert_no_module_processes();
    let next = home.invoke("hog", "hog.allocate", &json!({"mib": 16}), &[]);
    assert_eq!(next.invoke_result()["output"]["mib"], 16);
}

/// The same attack at the default limit (2 GiB): still stopped.
#[test]
fn four_gib_in_one_call_are_stopped_at_the_default_limit() {
    let home = home_with(&["hog"], "");
    let run = home.invoke("hog", "hog.allocate", &json!({"mib": 4096}), &[]);
    assert_memory_limit(&run.invoke_error(), "hog", 2 << 30, "2 GiB");
    home.assert_no_module_processes();
}

/// The attack spread out: four children take 100 MiB each. Under a limit
/// per process (`RLIMIT_DATA`) each would get it; the call's cgroup holds
/// them together to 256 MiB, so the call ends at the limit. Fewer children
/// within the limit get theirs: the fixture works.
#[test]
fn children_taking_memory_are_bounded_as_a_group() {
    let home = home_with(&["hog"], &small_limit_for("hog"));
    let within = home.invoke("hog", "hog.fork", &json!({"children": 2, "mib": 40}), &[]);
    assert_eq!(within.invoke_result()["output"]["children"], 2);
    let run = home.invoke("hog", "hog.fork", &json!({"children": 4, "mib": 100}), &[]);
    assert_memory_limit(&run.invoke_error(), "hog", SMALL_LIMIT, "256 MiB");
    home.assert_no_module_processes();
}

/// One long-running host (`modhost mcp`): while one module is stopped at
/// its limit, another module's call, started first and still running,
/// answers; the host answers the stopped module's next call too.
#[test]
fn a_concurrent_call_and_the_host_are_unharmed() {
    let home = home_with(&["hog", "calm"], &small_limit_for("hog"));
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let calm = server.send_request(
        "tools/call",
        &json!({"name": "calm__calm_sleep", "arguments": {"ms": 2000}}),
    );
    let hog = server.send_request(
        "tools/call",
        &json!({"name": "hog__hog_allocate", "arguments": {"mib": 4096}}),
    );
    let mut answers = std::collections::HashMap::new();
    for _ in 0..2 {
        let response = server.response();
        answers.insert(response["id"].as_u64().unwrap(), response);
    }
    let hog_result = &answers[&hog]["result"];
    assert_eq!(hog_result["isError"], true, "{hog_result:#}");
    let text = hog_result["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("(memory_limit)") && text.contains("256 MiB"),
        "{text}"
    );
    let calm_result = &answers[&calm]["result"];
    assert_ne!(calm_result["isError"], true, "{calm_result:#}");
    assert!(
        calm_result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("slept")),
        "{calm_result:#}"
    );
    let next = server.result(
        "tools/call",
        &json!({"name": "hog__hog_allocate", "arguments": {"mib": 16}}),
    );
    assert_ne!(next["isError"], true, "{next:#}");
    server.finish();
    home.assert_no_module_processes();
}

/// `doctor --json` says what bounds a native call's memory here (a cgroup
/// per call, cgroup v1 on this machine), the default limit, and a
/// module's own line.
#[test]
fn doctor_reports_the_memory_bound() {
    let home = home_with(&[], &small_limit_for("hog"));
    let report = home.run(&["doctor", "--json"]).expect_code(0).json();
    let memory = &report["confinement"]["memory"];
    assert_eq!(memory["per_call"], true, "{memory:#}");
    assert_eq!(memory["mechanism"], "cgroup v1", "{memory:#}");
    let limits = &report["limits"];
    assert_eq!(limits["native_memory_bytes"], 2u64 << 30, "{limits:#}");
    assert_eq!(
        limits["modules"]["hog"]["native_memory_bytes"], SMALL_LIMIT,
        "{limits:#}"
    );
    let parts = report["confinement"]["parts"].as_array().unwrap();
    let resource = parts
        .iter()
        .find(|p| p["part"] == "resource_limits")
        .unwrap();
    assert_eq!(resource["enforced"], true, "{resource:#}");
    assert!(
        resource["why"]
            .as_str()
            .is_some_and(|w| w.contains("a cgroup per call")),
        "{resource:#}"
    );
    let human = home.run(&["doctor"]);
    human.expect_code(0);
    assert!(
        human.stdout.contains("memory:") && human.stdout.contains("2 GiB per native call"),
        "{}",
        human.stdout
    );
}

/// A tmpfs mounted for a test (as root), unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: std::path::PathBuf) -> Tmpfs {
        std::fs::create_dir_all(&at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=512m", "modhost-test"])
            .arg(&at)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "this test mounts a tmpfs (as root): {status}"
        );
        Tmpfs(at)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The attack on the pool of call cgroups: one module's call writes 220
/// MiB to a file of its workspace, on tmpfs, and ends; the pages stay
/// charged to the cgroup it ran in, where nothing can reclaim them. The
/// next calls of another module (256 MiB, taking 64) lease cgroups from
/// the same pool: none of them starts with that charge, and each answers
/// (before the fix: `memory_limit`, every time the cgroup came round).
#[test]
fn tmpfs_pages_one_call_leaves_do_not_count_against_the_next() {
    let home = home_with(&["hog", "calm"], &small_limit_for("calm"));
    let workspace = Tmpfs::mount(home.outside().join("tmpfs-workspace"));
    let mut server = McpStdio::start(&home, Some(&workspace.0), |command| {
        command.arg("--delegate-approval").current_dir(&workspace.0);
    });
    let filled = server.result(
        "tools/call",
        &json!({"name": "hog__hog_fill", "arguments": {"mib": 220}}),
    );
    assert_ne!(filled["isError"], true, "{filled:#}");
    for call in 0..6 {
        let answer = server.result(
            "tools/call",
            &json!({"name": "calm__calm_allocate", "arguments": {"mib": 64}}),
        );
        assert_ne!(answer["isError"], true, "call {call}: {answer:#}");
    }
    server.finish();
    home.assert_no_module_processes();
    drop(workspace);
}
