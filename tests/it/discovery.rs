//! Discovery: layouts, broken modules beside good ones, disable/enable, and
//! the describe cache.

use std::io::Write;

use serde_json::json;

use crate::support::{Fixture, Home, Layout, strings};

/// A broken entry carries the reason: a machine kind and a message.
#[track_caller]
fn assert_broken(entry: &serde_json::Value, kind: &str) {
    assert_eq!(entry["status"], "broken", "{entry:#}");
    assert_eq!(entry["error_kind"], kind, "{entry:#}");
    let message = entry["error"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty(),
        "a broken module needs a reason: {entry:#}"
    );
}

#[test]
fn foldered_and_bare_modules_are_both_discovered() {
    let home = Home::new();
    let folder = home.install_binary(Fixture::Echo.path().as_ref(), "alpha", Layout::Folder);
    let bare = home.install_binary(Fixture::Echo.path().as_ref(), "beta", Layout::Bare);

    let entries = home.list();
    assert_eq!(entries.len(), 2, "{entries:#?}");
    for (id, path) in [("alpha", &folder), ("beta", &bare)] {
        let entry = home.entry(id);
        assert_eq!(entry["status"], "enabled", "{entry:#}");
        assert_eq!(entry["version"], "1.2.3", "{entry:#}");
        assert!(
            strings(&entry["capabilities"]).contains(&format!("{id}.echo")),
            "{entry:#}"
        );
        let listed = std::path::PathBuf::from(entry["path"].as_str().unwrap_or_default());
        assert_eq!(
            listed.canonicalize().ok(),
            path.canonicalize().ok(),
            "listed path of {id} is not its executable: {entry:#}"
        );
        let result = home
            .invoke(id, &format!("{id}.echo"), &json!({"who": id}), &[])
            .invoke_result();
        assert_eq!(result["output"]["request"]["input"]["who"], id);
    }
    // Human output lists both too.
    let human = home.run(&["list"]).expect_code(0).stdout.clone();
    assert!(human.contains("alpha") && human.contains("beta"), "{human}");
}

#[test]
fn broken_modules_are_listed_with_a_reason_beside_good_ones() {
    let home = Home::new();
    home.install(Fixture::Crash, "broken_crash");
    home.install(Fixture::Garbage, "broken_garbage");
    home.install(Fixture::Echo, "echo");
    home.install_files();

    let entries = home.list();
    assert_eq!(entries.len(), 4, "{entries:#?}");
    for (id, kind) in [
        ("broken_crash", "crashed"),
        ("broken_garbage", "bad_response"),
    ] {
        let entry = home.entry(id);
        assert_broken(&entry, kind);
        assert!(strings(&entry["capabilities"]).is_empty(), "{entry:#}");
        let path = entry["path"].as_str().unwrap_or_default();
        assert!(path.contains(id), "{entry:#}");
    }
    for id in ["echo", "files"] {
        assert_eq!(home.entry(id)["status"], "enabled");
    }
    // A broken module is not invocable; the good ones still are.
    let run = home.invoke("broken_crash", "broken_crash.run", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "module_broken");
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    home.assert_no_module_processes();
}

#[test]
fn a_describe_past_the_configured_timeout_is_broken_and_stalls_nothing() {
    let home = Home::new();
    home.write_config("[limits]\ndescribe_timeout_ms = 300\n");
    home.install(Fixture::Hang, "broken_hang");
    home.install(Fixture::SlowDescribe, "slow_describe");
    home.install(Fixture::Echo, "echo");

    assert_broken(&home.entry("broken_hang"), "timeout");
    // slow_describe takes ~2 s, past the 300 ms limit, too.
    assert_broken(&home.entry("slow_describe"), "timeout");
    assert_eq!(home.entry("echo")["status"], "enabled");
    home.assert_no_module_processes();
}

#[test]
fn slow_describes_within_the_default_timeout_do_not_hide_anything() {
    let home = Home::new();
    for id in ["slow_a", "slow_b", "slow_c"] {
        home.install(Fixture::SlowDescribe, id);
    }
    home.install(Fixture::Echo, "echo");
    let entries = home.list();
    assert_eq!(entries.len(), 4, "{entries:#?}");
    for entry in &entries {
        assert_eq!(entry["status"], "enabled", "{entry:#}");
    }
    let result = home
        .invoke("slow_b", "slow_b.run", &json!({}), &[])
        .invoke_result();
    assert_eq!(result["output"], json!({"ok": true}));
}

#[test]
fn disabling_a_bare_module_moves_it_into_a_folder_and_enabling_restores_it() {
    let home = Home::new();
    let bare = home.install_binary(Fixture::Echo.path().as_ref(), "beta", Layout::Bare);
    home.run(&["disable", "beta"]).expect_code(0);
    let folder = home.module_path("beta", Layout::Folder);
    assert!(bare.is_dir(), "modules/beta is not a folder after disable");
    assert!(
        folder.is_file(),
        "{} missing after disable",
        folder.display()
    );
    assert!(
        home.modules().join("beta/.disabled").is_file(),
        ".disabled marker missing"
    );

    let entry = home.entry("beta");
    assert_eq!(entry["status"], "disabled", "{entry:#}");
    let run = home.invoke("beta", "beta.echo", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "module_disabled");
    assert_eq!(
        home.invocations("beta", "beta.echo"),
        0,
        "a disabled module was run"
    );

    home.run(&["enable", "beta"]).expect_code(0);
    assert!(
        !home.modules().join("beta/.disabled").exists(),
        ".disabled marker left after enable"
    );
    assert_eq!(home.entry("beta")["status"], "enabled");
    home.invoke("beta", "beta.echo", &json!({}), &[])
        .invoke_result();
    assert_eq!(home.invocations("beta", "beta.echo"), 1);
}

#[test]
fn disabling_a_foldered_module_marks_its_folder_and_never_uninstalls() {
    let home = Home::new();
    let exe = home.install(Fixture::Echo, "alpha");
    home.install(Fixture::Echo, "gamma");
    home.run(&["disable", "alpha"]).expect_code(0);
    assert!(exe.is_file(), "disable removed the executable");
    assert!(home.modules().join("alpha/.disabled").is_file());
    assert_eq!(home.entry("alpha")["status"], "disabled");
    assert_eq!(home.entry("gamma")["status"], "enabled");
    home.run(&["enable", "alpha"]).expect_code(0);
    assert_eq!(home.entry("alpha")["status"], "enabled");
}

#[test]
fn enabling_or_disabling_an_unknown_module_is_a_usage_error() {
    let home = Home::new();
    home.run(&["disable", "nope"]).expect_code(2);
    home.run(&["enable", "nope"]).expect_code(2);
    home.run(&["describe", "nope"]).expect_code(2);
}

#[test]
fn an_unchanged_module_is_described_once_and_a_changed_one_again() {
    let home = Home::new();
    let alpha = home.install(Fixture::Echo, "alpha");
    home.install(Fixture::Echo, "beta");

    let first = home.describe_nonce("alpha");
    let beta = home.describe_nonce("beta");
    home.list();
    home.list();
    assert_eq!(
        home.describe_nonce("alpha"),
        first,
        "alpha was described again although unchanged"
    );

    // Appending bytes keeps the ELF runnable but changes its digest.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&alpha)
        .expect("open module");
    file.write_all(b"changed").expect("append");
    drop(file);
    // New bytes are no longer what the operator pinned.
    let entry = home.entry("alpha");
    assert_eq!(entry["status"], "changed", "{entry:#}");
    let second = home.describe_nonce("alpha");
    assert_ne!(second, first, "alpha changed but was not described again");
    home.list();
    assert_eq!(
        home.describe_nonce("alpha"),
        second,
        "the changed alpha is not cached in turn"
    );
    assert_eq!(
        home.describe_nonce("beta"),
        beta,
        "beta is unchanged but was described again"
    );
}
