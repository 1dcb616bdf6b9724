//! `modhost install` from archives, and what install records: the pin with
//! its source and sha256, reserved ids, `remove`, and a recorded module whose
//! files are gone. Archives are built with the system `tar`; a `.zip` goes
//! through the same staging, and both readers have their hostile-archive unit
//! tests in `host/modhost/src/install/archive`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Fixture, Home};

/// `tar czf ARCHIVE -C DIR .` (or the named entries).
fn tar(dir: &Path, archive: &Path, entries: &[&str]) {
    let status = Command::new("tar")
        .arg("czf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .args(entries)
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed");
}

/// An archive `echo-1.0/arch` (+ a knowledge file) holding the echo fixture:
/// the fixture names itself after its file, so it describes itself as `arch`.
fn echo_archive(home: &Home) -> PathBuf {
    let src = home.outside().join("src");
    std::fs::create_dir_all(src.join("echo-1.0/knowledge")).unwrap();
    std::fs::copy(Fixture::Echo.path(), src.join("echo-1.0/arch")).unwrap();
    std::fs::write(src.join("echo-1.0/knowledge/intro.md"), "# hi").unwrap();
    let archive = home.outside().join("arch-1.0.tar.gz");
    tar(&src, &archive, &["echo-1.0"]);
    archive
}

fn pins(home: &Home) -> Value {
    std::fs::read_to_string(home.path().join("pins.json"))
        .map(|text| serde_json::from_str(&text).expect("pins.json is JSON"))
        .unwrap_or(Value::Null)
}

fn staging_is_empty(home: &Home) -> bool {
    std::fs::read_dir(home.path().join("staging")).map_or(true, |mut d| d.next().is_none())
}

fn sha256_of(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_archive_installs_its_one_top_level_folder_and_is_pinned_with_its_source() {
    let home = Home::new();
    let archive = echo_archive(&home);
    let sha256 = sha256_of(&archive);
    let archive_arg = archive.to_string_lossy().into_owned();

    let wrong = "0".repeat(64);
    home.run(&["install", &archive_arg, "--sha256", &wrong])
        .expect_code(2);
    assert!(!home.modules().join("arch").exists());
    assert!(pins(&home).is_null() || pins(&home)["modules"]["arch"].is_null());

    home.run(&["install", &archive_arg, "--sha256", &sha256])
        .expect_code(0);
    assert!(home.modules().join("arch/arch").is_file());
    assert!(home.modules().join("arch/knowledge/intro.md").is_file());
    assert!(staging_is_empty(&home), "staging left behind");
    assert_eq!(home.entry("arch")["status"], "enabled");
    let pin = &pins(&home)["modules"]["arch"];
    let source = pin["source"].as_str().unwrap_or_default();
    assert!(
        source.contains("arch-1.0.tar.gz") && source.contains(&sha256),
        "{pin:#}"
    );
    assert!(pin["pinned_at"].is_string(), "{pin:#}");

    // Installed and pinned, it runs (confined) like any module.
    home.invoke("arch", "arch.list_state", &json!({}), &[])
        .invoke_result();
    // The same id again is refused.
    home.run(&["install", &archive_arg]).expect_code(2);
}

#[test]
fn a_hostile_archive_installs_nothing() {
    let home = Home::new();
    let src = home.outside().join("evil");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::copy(Fixture::Echo.path(), src.join("evil")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.join("passwd")).unwrap();
    let archive = home.outside().join("evil.tar.gz");
    tar(&src, &archive, &["evil", "passwd"]);
    let run = home.run(&["install", &archive.to_string_lossy()]);
    run.expect_code(2);
    assert!(run.stderr.contains("outside"), "{run:#?}");
    assert!(!home.modules().join("evil").exists());
    assert!(staging_is_empty(&home));
}

#[test]
fn reserved_ids_are_refused() {
    let home = Home::new();
    for id in ["state", "modhost", "cache"] {
        let run = home.run(&["install", Fixture::Echo.path(), "--id", id]);
        run.expect_code(2);
        assert!(run.stderr.contains("reserved"), "{run:#?}");
        assert!(!home.modules().join(id).exists());
    }
}

#[test]
fn a_recorded_module_whose_files_are_gone_is_listed_broken_until_removed() {
    let home = Home::new();
    home.run(&["install", Fixture::Echo.path(), "--id", "gone"])
        .expect_code(0);
    std::fs::create_dir_all(home.path().join("state/gone")).unwrap();
    std::fs::remove_dir_all(home.modules().join("gone")).unwrap();

    let entry = home.entry("gone");
    assert_eq!(entry["status"], "broken", "{entry:#}");
    assert_eq!(entry["error_kind"], "missing", "{entry:#}");

    home.run(&["remove", "gone", "--purge"]).expect_code(0);
    assert!(home.list().iter().all(|e| e["id"] != "gone"));
    assert!(pins(&home)["modules"]["gone"].is_null());
    assert!(
        !home.path().join("state/gone").exists(),
        "--purge kept the state"
    );
}
