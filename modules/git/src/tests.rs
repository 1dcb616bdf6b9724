//! The module's git runner against real repositories set up to attack it,
//! run unconfined: these prove the arguments and environment alone stop
//! each attack (the host's confinement is a second wall, tested end to end
//! in `tests/it/git_module.rs`). Each attack is first shown to work against
//! a plain `git`, so a test cannot pass because the attack was inert.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run::Git;

/// The system's git; a machine without one fails these tests, never skips them.
fn git_binary() -> PathBuf {
    ["/usr/bin/git", "/bin/git", "/usr/local/bin/git"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("these tests need git at /usr/bin/git, /bin/git or /usr/local/bin/git")
}

/// Plain git, as a user would run it in `dir` (no hardening).
fn plain(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(git_binary())
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("run git")
}

fn ok(dir: &Path, args: &[&str]) {
    let out = plain(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository with one committed file and a local change, and a marker
/// path outside it that no test may see created.
fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    ok(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    ok(&ws, &["add", "a.txt"]);
    ok(&ws, &["commit", "-qm", "first"]);
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    let marker = dir.path().join("marker");
    (dir, ws, marker)
}

fn hardened(ws: &Path) -> Git {
    Git::open(&git_binary(), ws).unwrap()
}

/// The attack works on plain git (so the test means something), then the
/// module's runner runs `args` with the marker never appearing.
#[track_caller]
fn attack_is_real_then_inert(ws: &Path, marker: &Path, plain_args: &[&str], module_args: &[&str]) {
    let _ = plain(ws, plain_args);
    assert!(
        marker.exists(),
        "the attack does not work on plain `git {plain_args:?}`: the test proves nothing"
    );
    std::fs::remove_file(marker).unwrap();
    let _ = hardened(ws).run(module_args, 1 << 20);
    assert!(
        !marker.exists(),
        "`git {module_args:?}` ran the repository's command"
    );
}

#[test]
fn a_repository_fsmonitor_does_not_run() {
    let (_dir, ws, marker) = repo();
    ok(
        &ws,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}; false", marker.display()),
        ],
    );
    attack_is_real_then_inert(
        &ws,
        &marker,
        &["status"],
        &["status", "--porcelain=v2", "--"],
    );
}

#[test]
fn a_repository_external_diff_does_not_run() {
    let (_dir, ws, marker) = repo();
    ok(
        &ws,
        &[
            "config",
            "diff.external",
            &format!("touch {}; true", marker.display()),
        ],
    );
    attack_is_real_then_inert(
        &ws,
        &marker,
        &["diff"],
        &[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            "--",
        ],
    );
}

#[test]
fn a_repository_textconv_does_not_run() {
    let (_dir, ws, marker) = repo();
    std::fs::write(ws.join(".gitattributes"), "*.txt diff=evil\n").unwrap();
    ok(
        &ws,
        &[
            "config",
            "diff.evil.textconv",
            &format!("touch {}; cat", marker.display()),
        ],
    );
    attack_is_real_then_inert(
        &ws,
        &marker,
        &["diff"],
        &[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            "--",
        ],
    );
}

#[test]
fn a_repository_clean_filter_does_not_run() {
    let (_dir, ws, marker) = repo();
    std::fs::write(ws.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    ok(
        &ws,
        &[
            "config",
            "filter.evil.clean",
            &format!("touch {}; cat", marker.display()),
        ],
    );
    ok(
        &ws,
        &[
            "config",
            "filter.evil.process",
            &format!("touch {}", marker.display()),
        ],
    );
    attack_is_real_then_inert(
        &ws,
        &marker,
        &["diff"],
        &[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            "--",
        ],
    );
}

#[test]
fn status_does_not_rewrite_the_index() {
    let (_dir, ws, _marker) = repo();
    let index = ws.join(".git/index");
    // Plain `git status` refreshes a stale index (a file touched since it was staged).
    let stale = || {
        std::fs::write(ws.join("b.txt"), "b\n").unwrap();
        ok(&ws, &["add", "b.txt"]);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(ws.join("b.txt"), "b\n").unwrap();
        std::fs::read(&index).unwrap()
    };
    let before = stale();
    ok(&ws, &["status"]);
    assert_ne!(
        std::fs::read(&index).unwrap(),
        before,
        "plain status did not refresh: the test proves nothing"
    );
    let before = stale();
    hardened(&ws)
        .run(&["status", "--porcelain=v2", "--"], 1 << 20)
        .unwrap();
    assert_eq!(
        std::fs::read(&index).unwrap(),
        before,
        "the module's status rewrote the index"
    );
}

#[test]
fn an_option_as_a_revision_is_refused_and_inert_even_past_the_check() {
    let (dir, ws, _marker) = repo();
    let out = dir.path().join("written");
    let option = format!("--output={}", out.display());
    // The input check refuses it...
    let refused = crate::log::run(
        &hardened(&ws),
        &crate::log::LogInput {
            revision: Some(option.clone()),
            path: None,
            max_count: None,
            skip: None,
        },
    )
    .unwrap_err();
    assert_eq!(refused.kind(), "invalid_input", "{refused}");
    // ...and had it passed, `--end-of-options` makes git read it as a revision.
    let err = hardened(&ws)
        .run(&["log", "--end-of-options", &option, "--"], 1 << 20)
        .unwrap_err();
    assert_eq!(err.kind(), "not_found", "{err}");
    let blame = crate::blame::run(
        &hardened(&ws),
        &crate::blame::BlameInput {
            path: option.clone(),
            start_line: 1,
            end_line: 1,
            revision: None,
        },
    )
    .unwrap_err();
    assert_eq!(blame.kind(), "not_found", "a path is a path: {blame}");
    assert!(!out.exists(), "an option reached git");
}

#[test]
fn the_capabilities_read_a_real_repository() {
    let (_dir, ws, _marker) = repo();
    let git = hardened(&ws);
    let status = crate::status::run(
        &git,
        &crate::status::StatusInput {
            path: None,
            untracked: true,
        },
    )
    .unwrap();
    assert_eq!(status.branch.head.as_deref(), Some("main"));
    assert_eq!(status.entries.len(), 1);
    assert_eq!(
        (
            status.entries[0].path.as_str(),
            status.entries[0].worktree.as_str()
        ),
        ("a.txt", "M")
    );

    let log = crate::log::run(
        &git,
        &crate::log::LogInput {
            revision: None,
            path: None,
            max_count: Some(1),
            skip: None,
        },
    )
    .unwrap();
    assert_eq!(log.commits.len(), 1);
    assert_eq!(
        (log.commits[0].subject.as_str(), log.truncated),
        ("first", false)
    );

    let blame = crate::blame::run(
        &git,
        &crate::blame::BlameInput {
            path: "a.txt".into(),
            start_line: 1,
            end_line: 1,
            revision: Some("HEAD".into()),
        },
    )
    .unwrap();
    assert_eq!(blame.lines.len(), 1);
    assert_eq!(
        (
            blame.lines[0].author.as_str(),
            blame.lines[0].content.as_str()
        ),
        ("T", "one")
    );
}

#[test]
fn a_workspace_that_is_not_a_repository_is_named_with_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let err = Git::open(&git_binary(), dir.path())
        .and_then(|git| {
            crate::status::run(
                &git,
                &crate::status::StatusInput {
                    path: None,
                    untracked: true,
                },
            )
        })
        .unwrap_err();
    assert_eq!(err.kind(), "not_found", "{err}");
    assert!(err.message().contains("not a git repository"), "{err}");
    assert!(
        err.remedy().unwrap_or_default().contains("--workspace"),
        "{err}"
    );
}

#[test]
fn a_linked_worktree_is_refused_with_why() {
    let (dir, ws, _marker) = repo();
    let linked = dir.path().join("linked");
    ok(&ws, &["worktree", "add", "-q", linked.to_str().unwrap()]);
    let err = Git::open(&git_binary(), &linked).unwrap_err();
    assert!(err.message().contains("linked worktree"), "{err}");
    assert!(
        err.remedy().unwrap_or_default().contains("main checkout"),
        "{err}"
    );
}

/// Not granted git, the module says in one line which line grants it,
/// naming the git this system has, and a placeholder when it has none.
#[test]
fn the_remedy_for_a_missing_git_is_the_line_that_grants_it() {
    let remedy = crate::grant_remedy(&["/nonexistent/git", "/usr/bin/git"]);
    assert!(!remedy.contains('\n'), "{remedy}");
    assert!(
        remedy.contains("`git = \"/usr/bin/git\"` under [binaries]"),
        "{remedy}"
    );
    let remedy = crate::grant_remedy(&["/nonexistent/git"]);
    assert!(remedy.contains("/absolute/path/of/git"), "{remedy}");
}
