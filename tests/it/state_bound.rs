//! The bound on a module's `state` and `artifacts` folders, attacked: a
//! module creating a million small files (or one growing its files past the
//! byte bound, or making them where nothing watches and moving them in) is
//! stopped at its bound with `storage_limit`, leaves at most the bound plus
//! `storage_bound::SLACK_FILES`, and its next call that may write is
//! refused, naming the bound and the folders, until the operator makes
//! room. A call that only reads its state is never held up.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Home, Layout};

/// The file bound the attacks meet: small, so a million attempted files
/// are stopped within a second or two.
const FILES: u64 = 2_000;

/// What may be left beyond the file bound: `modhost::storage_bound::SLACK_FILES`.
const SLACK_FILES: u64 = 1_000;

/// A home with the hoarder fixture installed and pinned, and `config`.
fn hoarder_home(config: &str) -> Home {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "the hoarder fixture needs the system /usr/bin/python3"
    );
    let home = Home::new();
    home.write_config(config);
    let target = home.module_path("hoarder", Layout::Folder);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(
        crate::support::tests_dir().join("fixtures/hoarder.py"),
        &target,
    )
    .unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", "hoarder"]).expect_code(0);
    home.require_landlock();
    home
}

fn files_bound() -> String {
    format!("[limits.modules.hoarder]\nstorage_files = {FILES}\n")
}

/// Entries (files and folders) beneath `dir`, and the bytes of the files.
fn held(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            files += 1;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                bytes += meta.len();
            }
        }
    }
    (files, bytes)
}

/// The error of a call stopped (exit 1) or refused (exit 2) at the bound:
/// its kind, the folder and the config line to raise.
#[track_caller]
fn assert_storage_limit(error: &Value, folder: &Path, key: &str) {
    assert_eq!(error["kind"], "storage_limit", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&folder.display().to_string()),
        "the message does not name {}: {message}",
        folder.display()
    );
    assert!(message.contains(key), "{message}");
    let remedy = error["remedy"].as_str().unwrap_or_default();
    assert!(
        remedy.contains(&format!("[limits.modules.\"hoarder\"] {key}")),
        "{remedy}"
    );
}

/// The next call that may write is refused before it runs, naming the
/// bound and the folder.
#[track_caller]
fn assert_refused(home: &Home, folder: &Path, key: &str) {
    let run = home.invoke("hoarder", "hoarder.files", &json!({"count": 1}), &[]);
    assert_eq!(run.refused_kind(), "storage_limit", "{run:#?}");
    let error = &run.json()["error"];
    assert_storage_limit(error, folder, key);
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("refused before the call ran")),
        "{error:#}"
    );
}

/// The attack of the issue: a million small files in the state folder.
/// Stopped at the bound, quickly; what is left is the bound plus the
/// stated slack at most; the next writing call is refused until the
/// operator removes files; a call that only reads runs all along.
#[test]
fn a_million_small_files_are_stopped_at_the_file_bound() {
    let home = hoarder_home(&files_bound());
    let state = home.path().join("state/hoarder");
    let started = Instant::now();
    let run = home.invoke(
        "hoarder",
        "hoarder.files",
        &json!({"count": 1_000_000, "root": "state"}),
        &[],
    );
    let error = run.invoke_error();
    assert_storage_limit(&error, &state, "storage_files");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped only after {:?}",
        started.elapsed()
    );
    home.assert_no_module_processes();
    let (files, _) = held(&state);
    assert!(
        files > FILES && files <= FILES + SLACK_FILES,
        "{files} files left for a bound of {FILES} (slack {SLACK_FILES})"
    );
    assert_refused(&home, &state, "storage_files");
    let look = home.invoke("hoarder", "hoarder.look", &json!({}), &[]);
    assert_eq!(look.invoke_result()["output"]["seen"], files);
    // The operator makes room: calls that write run again.
    std::fs::remove_dir_all(state.join("many")).unwrap();
    let run = home.invoke("hoarder", "hoarder.files", &json!({"count": 10}), &[]);
    assert_eq!(run.invoke_result()["output"]["made"], 10);
}

/// The byte bound: files of 1 MiB until 64 MiB, against 4 MiB.
#[test]
fn growing_past_the_byte_bound_is_stopped() {
    const BYTES: u64 = 4 << 20;
    let home = hoarder_home(&format!(
        "[limits.modules.hoarder]\nstorage_bytes = {BYTES}\n"
    ));
    let state = home.path().join("state/hoarder");
    let run = home.invoke("hoarder", "hoarder.grow", &json!({"mib": 64}), &[]);
    assert_storage_limit(&run.invoke_error(), &state, "storage_bytes");
    home.assert_no_module_processes();
    let (_, bytes) = held(&state);
    assert!(
        bytes > BYTES && bytes <= BYTES + (16 << 20),
        "{bytes} bytes left for a bound of {BYTES}"
    );
    assert_refused(&home, &state, "storage_bytes");
}

/// The artifacts folder counts as the state folder does.
#[test]
fn the_artifacts_folder_is_bounded_too() {
    let home = hoarder_home(&files_bound());
    let artifacts = home.path().join("artifacts/hoarder");
    let run = home.invoke(
        "hoarder",
        "hoarder.files",
        &json!({"count": 1_000_000, "root": "artifacts"}),
        &[],
    );
    assert_storage_limit(&run.invoke_error(), &artifacts, "storage_files");
    let (files, _) = held(&artifacts);
    assert!(
        files > FILES && files <= FILES + SLACK_FILES,
        "{files} files left in the artifacts folder for a bound of {FILES}"
    );
    assert_refused(&home, &artifacts, "storage_files");
}

/// The attack around the watch: the files are made in the workspace, which
/// the bound does not cover, and their folder is moved into the state
/// folder in one rename. The moved folder is listed when it arrives: the
/// call fails at the bound and the next one is refused.
#[test]
fn files_made_elsewhere_and_moved_in_count() {
    let home = hoarder_home(&files_bound());
    let state = home.path().join("state/hoarder");
    let run = home.invoke(
        "hoarder",
        "hoarder.smuggle",
        &json!({"count": 3 * FILES}),
        // It writes the workspace: a call the policy asks about.
        &["--approve"],
    );
    assert_storage_limit(&run.invoke_error(), &state, "storage_files");
    assert_refused(&home, &state, "storage_files");
}

/// A call under its bound succeeds and pays nothing visible: no warning.
#[test]
fn a_call_within_its_bound_runs_as_before() {
    let home = hoarder_home(&files_bound());
    let run = home.invoke("hoarder", "hoarder.files", &json!({"count": 500}), &[]);
    let result = run.invoke_result();
    assert_eq!(result["output"]["made"], 500);
    assert_eq!(result["host_warnings"], json!([]), "{result:#}");
}
