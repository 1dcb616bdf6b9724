//! What runs is what was approved, the whole module: attacks by someone who
//! can write `modules/<id>/` after the operator pinned it.
//!
//! The module is a shell script that sources `helper.sh` from its own folder
//! and answers with the version the helper (and the entry) say, so every
//! answer names the bytes that produced it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::Home;

const DESCRIPTOR: &str = r#"{"id":"ver","version":"VERSION","capabilities":[{"id":"ver.run","description":"Says which bytes answered.","input_schema":{"type":"object"}}]}"#;

/// The entry script: describes itself as `version`, answers with the
/// helper's `$v` and its own `entry` tag.
fn entry_script(version: &str, entry: &str) -> String {
    let descriptor = DESCRIPTOR.replace("VERSION", version);
    format!(
        "#!/bin/sh\nIFS= read -r line\n. \"${{0%/*}}/helper.sh\"\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{descriptor}}}' ;;\n  *) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{\"helper\":\"'\"$v\"'\",\"entry\":\"{entry}\"}}}}}}' ;;\nesac\n"
    )
}

fn write_file(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).expect("module folder");
    // A new file renamed over the old one, as an attacker (or an editor) does.
    let temp = path.with_extension("new");
    std::fs::write(&temp, text).expect("write");
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::fs::rename(&temp, path).expect("rename");
}

/// Write the `ver` module's two files into `folder`: the entry (describing
/// itself as 1.0.0, tagged `tag`) and the helper it sources (`v=<tag>`).
fn write_ver(folder: &Path, tag: &str) {
    write_file(&folder.join("ver"), &entry_script("1.0.0", tag), 0o755);
    write_file(&folder.join("helper.sh"), &format!("v={tag}\n"), 0o644);
}

fn install_ver(home: &Home) -> std::path::PathBuf {
    let folder = home.modules().join("ver");
    write_ver(&folder, "approved");
    home.run(&["pin", "ver"]).expect_code(0);
    folder
}

fn answer(home: &Home) -> Value {
    home.invoke("ver", "ver.run", &json!({}), &[])
        .invoke_result()["output"]
        .clone()
}

#[test]
fn a_changed_helper_is_changed_and_refused_and_the_restored_folder_runs_the_approved_snapshot() {
    let home = Home::new();
    let folder = install_ver(&home);
    assert_eq!(
        answer(&home),
        json!({"helper": "approved", "entry": "approved"})
    );

    // The attack: rewrite a helper the approved entry sources.
    write_file(&folder.join("helper.sh"), "v=evil\n", 0o644);
    let entry = home.entry("ver");
    assert_eq!(entry["status"], "changed", "{entry:#}");
    assert_eq!(entry["pin"], "changed", "{entry:#}");
    let run = home.invoke("ver", "ver.run", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "changed", "{run:#?}");
    assert!(!run.stdout.contains("evil"), "{run:#?}");

    // A new file beside the entry counts too.
    write_file(&folder.join("helper.sh"), "v=approved\n", 0o644);
    write_file(&folder.join("extra.sh"), "echo extra\n", 0o644);
    assert_eq!(home.entry("ver")["status"], "changed");
    std::fs::remove_file(folder.join("extra.sh")).expect("remove extra");

    // Restored byte for byte: pinned again, and the snapshot answers.
    let entry = home.entry("ver");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert_eq!(
        answer(&home),
        json!({"helper": "approved", "entry": "approved"})
    );
}

#[test]
fn a_changed_entry_is_not_run_by_discovery_and_is_shown_when_the_operator_reviews_it() {
    let home = Home::new();
    let folder = install_ver(&home);
    write_file(
        &folder.join("ver"),
        &entry_script("6.6.6", "swapped"),
        0o755,
    );

    // `list` (and every long-running host starting up) does not run the new
    // bytes: it shows the approved descriptor, marked changed.
    let entry = home.entry("ver");
    assert_eq!(entry["status"], "changed", "{entry:#}");
    assert_eq!(entry["version"], "1.0.0", "the new bytes ran: {entry:#}");

    // The operator asks: the new bytes are described, for review.
    let described = home
        .run(&["describe", "ver", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(described["descriptor"]["version"], "6.6.6", "{described:#}");
    // Accepting them makes them what runs.
    home.run(&["pin", "ver"]).expect_code(0);
    assert_eq!(answer(&home)["entry"], "swapped");
}

/// Call `ver.run` through a running `modhost mcp`; the whole response, as
/// text.
fn call_ver(host: &mut McpStdio) -> String {
    host.request(
        "tools/call",
        &json!({"name": "ver__ver_run", "arguments": {}}),
    )
    .to_string()
}

/// `modhost mcp` on this home and its workspace, after the handshake.
fn start_mcp(home: &Home) -> McpStdio {
    McpStdio::start(home, Some(&home.workspace()), |_| {})
}

#[test]
fn a_long_running_host_answers_only_with_the_approved_bytes_through_swap_and_restore() {
    let home = Home::new();
    let folder = install_ver(&home);
    let mut host = start_mcp(&home);
    let first = call_ver(&mut host);
    assert!(
        first.contains(r#"\"helper\":\"approved\""#) || first.contains(r#""helper":"approved""#),
        "{first}"
    );

    for round in 0..4 {
        // Swap the entry and the helper right after a call...
        write_ver(&folder, "swapped");
        let during = call_ver(&mut host);
        assert!(!during.contains("swapped"), "round {round}: {during}");
        assert!(during.contains("changed"), "round {round}: {during}");

        // ...and restore the approved bytes: the approved snapshot answers,
        // cold or from a process started ahead.
        write_ver(&folder, "approved");
        for _ in 0..2 {
            let after = call_ver(&mut host);
            assert!(!after.contains("swapped"), "round {round}: {after}");
            assert!(after.contains("approved"), "round {round}: {after}");
        }
    }

    // Started while the folder holds other bytes: nothing new runs, not
    // even describe, and the module is not offered.
    drop(host);
    write_file(
        &folder.join("ver"),
        &entry_script("6.6.6", "swapped"),
        0o755,
    );
    let mut host = start_mcp(&home);
    let tools = host.request("tools/list", &json!({})).to_string();
    assert!(!tools.contains("ver__ver_run"), "{tools}");
    assert!(!tools.contains("6.6.6"), "{tools}");
    let call = call_ver(&mut host);
    assert!(!call.contains("swapped"), "{call}");
}

#[test]
fn a_symlink_out_of_the_module_is_refused_at_install() {
    let home = Home::new();
    let outside = home.outside();
    std::fs::create_dir_all(&outside).expect("outside dir");
    std::fs::write(outside.join("secret"), "secret").expect("secret");

    // A folder archive whose module links to a file outside it.
    let src = tempfile::tempdir().expect("source dir");
    let tree = src.path().join("ver-1.0");
    write_ver(&tree, "approved");
    std::os::unix::fs::symlink(outside.join("secret"), tree.join("data")).expect("symlink");
    let archive = src.path().join("ver.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(src.path())
        .arg("ver-1.0")
        .status()
        .expect("tar");
    assert!(status.success());
    let run = home.run(&["install", archive.to_str().unwrap()]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("data") && run.stderr.contains("nothing was installed"),
        "{run:#?}"
    );
    assert!(!home.modules().join("ver").exists());

    // The same link in a folder copied in by hand: broken, never pinned.
    let folder = home.modules().join("ver");
    write_ver(&folder, "approved");
    std::os::unix::fs::symlink(outside.join("secret"), folder.join("data")).expect("symlink");
    let entry = home.entry("ver");
    assert_eq!(entry["status"], "broken", "{entry:#}");
    assert_eq!(entry["error_kind"], "unsafe_file", "{entry:#}");
    assert!(
        entry["error"]
            .as_str()
            .unwrap()
            .contains("outside the module's folder"),
        "{entry:#}"
    );
    let run = home.run(&["pin", "ver"]);
    assert_ne!(run.code, 0, "{run:#?}");
}

/// The folder a module's calls run from, checked to be a snapshot holding
/// exactly `files`.
#[track_caller]
fn assert_runs_from_a_snapshot_of(home: &Home, id: &str, files: &[&str]) {
    let entry = home.entry(id);
    let program = Path::new(entry["program"].as_str().expect("program"));
    let snapshots = home.path().canonicalize().unwrap().join("cache/snapshots");
    let folder = program.parent().expect("snapshot folder");
    assert_eq!(folder.parent(), Some(snapshots.as_path()), "{entry:#}");
    assert_eq!(
        folder.file_name().and_then(|n| n.to_str()),
        entry["digest"].as_str(),
        "named by the tree digest: {entry:#}"
    );
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .expect("snapshot folder")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, files, "{entry:#}");
    let mode = std::fs::metadata(program).unwrap().permissions().mode();
    assert_eq!(mode & 0o222, 0, "read-only: {mode:o}");
}

#[test]
fn bare_executables_and_components_run_from_a_snapshot_of_only_their_own_bytes() {
    let home = Home::new();
    // A bare executable beside another module's files: its snapshot (the
    // folder its calls may read and execute) holds that one file.
    home.install_binary(
        crate::support::Fixture::Echo.path().as_ref(),
        "echo",
        crate::support::Layout::Bare,
    );
    install_ver(&home);
    assert_runs_from_a_snapshot_of(&home, "echo", &["echo"]);
    assert_runs_from_a_snapshot_of(&home, "ver", &["helper.sh", "ver"]);
    let output = home
        .invoke(
            "echo",
            "echo.write_state",
            &json!({"name": "a", "content": "x"}),
            &[],
        )
        .invoke_result();
    assert!(output.get("output").is_some(), "{output:#}");

    home.install_component("files");
    assert_runs_from_a_snapshot_of(&home, "files", &["files.wasm"]);
    std::fs::write(home.workspace().join("a.txt"), "hello").unwrap();
    home.invoke("files", "files.read", &json!({"path": "a.txt"}), &[])
        .invoke_result();
    // Changing the component's file makes it `changed`, like any module.
    let component = home.modules().join("files/files.wasm");
    let mut bytes = std::fs::read(&component).unwrap();
    bytes.extend_from_slice(b"\0");
    std::fs::write(&component, bytes).unwrap();
    assert_eq!(home.entry("files")["status"], "changed");
}
