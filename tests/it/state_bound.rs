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

/// The bytes bound the attacks below meet.
const BYTES: u64 = 4 << 20;

fn bytes_bound() -> String {
    format!("[limits.modules.hoarder]\nstorage_bytes = {BYTES}\n")
}

/// The blocks `dir` and what is beneath it hold on disk (not their sizes).
fn blocks_held(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            bytes += meta.blocks() * 512;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    bytes
}

/// The attack: blocks reserved beyond a file's end (`fallocate` with
/// `FALLOC_FL_KEEP_SIZE`), 64 MiB against a bound of 4 MiB at a size of 0:
/// neither `RLIMIT_FSIZE` nor a count of sizes sees them. The kernel
/// refuses the call (`EOPNOTSUPP`, 95) before a block is taken.
#[test]
fn blocks_reserved_beyond_a_files_end_are_refused() {
    let home = hoarder_home(&bytes_bound());
    let state = home.path().join("state/hoarder");
    let run = home.invoke("hoarder", "hoarder.reserve", &json!({"mib": 64}), &[]);
    let result = run.invoke_result();
    assert_eq!(result["output"]["errno"], 95, "{result:#}");
    let blocks = blocks_held(&state);
    assert!(blocks <= BYTES, "{blocks} bytes of blocks held");
}

/// The attack: folders nested until their path nears `PATH_MAX`, and files
/// beneath them whose paths are longer (where a look by path fails with
/// `ENAMETOOLONG`): 50 files of 2 MiB against a bound of 4 MiB. The call is
/// stopped at the byte bound, and the next one's walk counts them too.
#[test]
fn files_deeper_than_path_max_are_counted() {
    let home = hoarder_home(&bytes_bound());
    let state = home.path().join("state/hoarder");
    let run = home.invoke(
        "hoarder",
        "hoarder.deep",
        &json!({"files": 50, "mib": 2}),
        &[],
    );
    assert_storage_limit(&run.invoke_error(), &state, "storage_bytes");
    home.assert_no_module_processes();
    assert_refused(&home, &state, "storage_bytes");
}

/// The attack: a workspace file hard-linked into the state folder, then
/// written through its workspace name (inotify reports a write to the
/// folder of the name it was opened through, which the bound does not
/// watch): 64 MiB against 4 MiB. The link is refused (`EXDEV`, 18, as
/// across filesystems), and the state folder holds nothing of it.
#[test]
fn a_workspace_file_cannot_be_linked_into_the_state_folder() {
    let home = hoarder_home(&bytes_bound());
    let state = home.path().join("state/hoarder");
    let run = home.invoke(
        "hoarder",
        "hoarder.link",
        &json!({"mib": 64}),
        &["--approve"],
    );
    let result = run.invoke_result();
    assert_eq!(result["output"]["refused"], 18, "{result:#}");
    let (_, bytes) = held(&state);
    assert_eq!(bytes, 0, "the state folder holds {bytes} bytes");
    let next = home.invoke("hoarder", "hoarder.files", &json!({"count": 1}), &[]);
    assert_eq!(next.invoke_result()["output"]["made"], 1);
}

/// The attack on the watch itself: a state folder of 95,000 empty files
/// (within the file bound), and six processes creating and removing files
/// without pause (more events than the kernel queues: some are lost), while
/// the module writes files of 16 MiB for 20 seconds against a bound of 4
/// MiB. The call is stopped within seconds, either at the bound or as one
/// the host cannot count, and leaves little (before the fix: every tree
/// walked again at each overflow, under the lock every count waits on;
/// 3.8 GiB written in 46 s).
#[test]
fn a_flood_of_events_does_not_hold_up_the_stop() {
    let home = hoarder_home(&bytes_bound());
    let state = home.path().join("state/hoarder");
    for folder in 0..95 {
        let folder = state.join(format!("kept/{folder}"));
        std::fs::create_dir_all(&folder).unwrap();
        for file in 0..1000 {
            std::fs::File::create(folder.join(file.to_string())).unwrap();
        }
    }
    let started = Instant::now();
    let run = home.invoke("hoarder", "hoarder.churn", &json!({"seconds": 20}), &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "storage_limit", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(&state.display().to_string()), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "stopped only after {:?}: {message}",
        started.elapsed()
    );
    home.assert_no_module_processes();
    let (_, bytes) = held(&state);
    assert!(
        bytes <= BYTES + (64 << 20),
        "{bytes} bytes left for a bound of {BYTES}"
    );
}

/// The attack on the user's inotify watches: empty folders (one watch
/// each), more than the host watches for one module, well within a file
/// bound of ten million. The call is stopped as one the host cannot watch
/// (not "over its bound"), the next is refused so, and once the operator
/// removes them calls run again.
#[test]
fn more_folders_than_the_host_watches_are_stopped() {
    let watches: u64 = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cap = (watches / 4).max(1);
    let home = hoarder_home("[limits.modules.hoarder]\nstorage_files = 10000000\n");
    let state = home.path().join("state/hoarder");
    let run = home.invoke(
        "hoarder",
        "hoarder.folders",
        &json!({"count": cap + 1000}),
        &[],
    );
    let error = run.invoke_error();
    assert_eq!(error["kind"], "storage_limit", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot watch") && !message.contains("over its bound"),
        "{message}"
    );
    home.assert_no_module_processes();
    let refused = home.invoke("hoarder", "hoarder.files", &json!({"count": 1}), &[]);
    assert_eq!(refused.refused_kind(), "storage_limit", "{refused:#?}");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("refused before the call ran") && message.contains("cannot watch"),
        "{message}"
    );
    std::fs::remove_dir_all(state.join("folders")).unwrap();
    let run = home.invoke("hoarder", "hoarder.files", &json!({"count": 1}), &[]);
    assert_eq!(run.invoke_result()["output"]["made"], 1);
}
