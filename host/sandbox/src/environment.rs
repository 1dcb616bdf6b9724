//! The environment a native module starts with.
//!
//! Cleared, then only what a program needs to run and that says nothing
//! about the host or its user: `PATH`, `LANG`, `TZ`, `LC_*` and `MODHOST_*`
//! ([`is_allowed_env`]).
//!
//! Design decisions:
//!
//! - **Version-manager shims are resolved by the host.** pyenv, rbenv,
//!   nodenv and their kin put a `shims` folder first on `PATH`; each entry
//!   there is a shell script that runs the manager
//!   (`<root>/libexec/<manager> exec <command>`), which reads its settings
//!   from the user's home and runs a dozen helper programs before the real
//!   interpreter. Confined, none of that may run (the home holds secrets, and
//!   `spawns` grants no helper), so a `#!/usr/bin/env python3` module would
//!   die before its first line whenever the host was started from such a
//!   shell. The host asks each manager once, unconfined, which installation
//!   it selects (`<manager> prefix`) and gives modules a `PATH` with the
//!   `shims` folder replaced by that installation's `bin/`: the interpreter
//!   the operator's shell runs, started directly. The interpreter chain
//!   ([`crate::interpreter`]) is resolved in this same `PATH`, so
//!   what is granted is what runs.
//! - **Only for a module that looks commands up in `PATH`.** A script (its
//!   `#!/usr/bin/env python3` line, and whatever it runs) and a module
//!   granted executables (it may run them by name) get the resolved `PATH`
//!   ([`crate::interpreter::path_needs_resolving`]). A compiled
//!   program granted nothing can execute nothing but its own files when
//!   confined (no interpreter, no command a shim would lead to), so it gets
//!   the host's `PATH` as it is and no manager is asked for it: asking takes
//!   tens of milliseconds (`pyenv prefix` is a shell script running a dozen
//!   programs), most of a one-off call of such a module.
//! - **Asked once per host process, bounded in time, never from a spawner
//!   thread.** A long-running host asks when it finds an enabled native
//!   module that needs it ([`resolve_module_path_ahead`]), a one-off call
//!   when it first needs the answer: on a thread of the blocking pool before
//!   its start is handed to a spawner thread (`process::spawn_off_runtime`),
//!   since a spawner thread starts nothing but modules
//!   (`crate::spawner`); one that asks anyway gets the host's
//!   `PATH` for that call, and nothing is remembered. A manager that does
//!   not answer within `MANAGER_TIMEOUT`, or answers nothing usable, leaves
//!   its `shims` folder in place: the module then fails as before, and the
//!   sandbox remedy names the denied path.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a version manager may take to say which installation it selects.
const MANAGER_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether an environment variable of the host passes to a module.
pub fn is_allowed_env(name: &str) -> bool {
    matches!(name, "PATH" | "LANG" | "TZ")
        || name.starts_with("LC_")
        || name.starts_with("MODHOST_")
}

/// The variables a module starts with: the allowed ones of the host, `PATH`
/// with version-manager shims resolved ([`module_path()`]) when
/// `resolved_path` ([`crate::interpreter::path_needs_resolving`]).
pub fn module_environment(resolved_path: bool) -> impl Iterator<Item = (OsString, OsString)> {
    let path = if resolved_path { module_path() } else { None };
    std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(is_allowed_env))
        .map(move |(name, value)| match (name.to_str(), &path) {
            (Some("PATH"), Some(path)) => (name, path.clone()),
            _ => (name, value),
        })
}

/// Whether [`module_path()`] has its answer (asking for it now costs nothing).
pub fn module_path_is_resolved() -> bool {
    RESOLVED_PATH.get().is_some()
}

/// Mark the calling thread as one that must not run a version manager (a
/// spawner thread: `crate::spawner`).
pub(crate) fn never_ask_managers_on_this_thread() {
    NO_MANAGERS.with(|flag| flag.set(true));
}

thread_local! {
    static NO_MANAGERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Start computing [`module_path()`] on a thread of its own, for a host that
/// will serve calls: a version manager takes tens of milliseconds to answer
/// (`pyenv prefix` is a shell script running a dozen programs), which the
/// first native call would otherwise wait for. Runs only the managers, the
/// host's own helpers, never a module.
pub fn resolve_module_path_ahead() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("modhost-path".into())
            .spawn(|| {
                module_path();
            });
    });
}

/// The host's `PATH` with shims resolved (computed once per process), as
/// the modules that need it get it. On a thread that must not run a
/// manager (`never_ask_managers_on_this_thread`) and before the answer is
/// known: the host's `PATH` as it is, remembered nowhere.
pub fn module_path() -> Option<OsString> {
    if let Some(path) = RESOLVED_PATH.get() {
        return path.clone();
    }
    if NO_MANAGERS.with(std::cell::Cell::get) {
        return std::env::var_os("PATH");
    }
    RESOLVED_PATH
        .get_or_init(|| std::env::var_os("PATH").map(|path| resolve_shims(&path)))
        .clone()
}

static RESOLVED_PATH: OnceLock<Option<OsString>> = OnceLock::new();

/// `path` with each version manager's `shims` folder replaced by the `bin/`
/// folders of the installations the manager selects.
pub(crate) fn resolve_shims(path: &OsStr) -> OsString {
    let dirs: Vec<PathBuf> = std::env::split_paths(path)
        .flat_map(|dir| match shim_manager(&dir) {
            Some(manager) => match selected_bins(&manager) {
                Some(bins) => bins,
                None => vec![dir],
            },
            None => vec![dir],
        })
        .collect();
    std::env::join_paths(dirs).unwrap_or_else(|_| path.to_owned())
}

/// The manager of a `shims` folder: `<root>/shims` beside an executable
/// `<root>/libexec/<root's name without its dot>` (`~/.pyenv/libexec/pyenv`).
fn shim_manager(dir: &Path) -> Option<PathBuf> {
    if dir.file_name()? != "shims" {
        return None;
    }
    let root = dir.parent()?;
    let name = root.file_name()?.to_str()?.trim_start_matches('.');
    let manager = root.join("libexec").join(name);
    let meta = std::fs::metadata(&manager).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(manager)
}

/// The `bin/` folders of the installations `manager` selects, from its
/// `prefix` command (one or more prefixes separated by `:`).
fn selected_bins(manager: &Path) -> Option<Vec<PathBuf>> {
    let output = run_bounded(Command::new(manager).arg("prefix"))?;
    let text = String::from_utf8(output).ok()?;
    let bins: Vec<PathBuf> = text
        .trim()
        .split(':')
        .filter(|p| !p.is_empty())
        .map(|prefix| Path::new(prefix).join("bin"))
        .filter(|bin| bin.is_absolute() && bin.is_dir())
        .collect();
    (!bins.is_empty()).then_some(bins)
}

/// The stdout of `command` when it succeeds within [`MANAGER_TIMEOUT`].
fn run_bounded(command: &mut Command) -> Option<Vec<u8>> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut bytes).map(|_| bytes)
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < MANAGER_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let bytes = reader.join().ok()?.ok()?;
    status.success().then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_managers_shims_give_way_to_the_installation_it_selects() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".fakeenv");
        let version = dir.path().join("versions/1.0");
        std::fs::create_dir_all(version.join("bin")).unwrap();
        executable(
            &root.join("libexec/fakeenv"),
            &format!(
                "#!/bin/sh\n[ \"$1\" = prefix ] && echo {}\n",
                version.display()
            ),
        );
        executable(&root.join("shims/python3"), "#!/bin/sh\nexit 1\n");
        let path = std::env::join_paths([Path::new("/usr/bin"), &root.join("shims")]).unwrap();
        let resolved: Vec<PathBuf> = std::env::split_paths(&resolve_shims(&path)).collect();
        assert_eq!(
            resolved,
            vec![PathBuf::from("/usr/bin"), version.join("bin")]
        );
    }

    #[test]
    fn a_manager_that_fails_or_is_absent_leaves_path_alone() {
        let dir = tempfile::tempdir().unwrap();
        let failing = dir.path().join(".badenv");
        executable(&failing.join("libexec/badenv"), "#!/bin/sh\nexit 3\n");
        std::fs::create_dir_all(failing.join("shims")).unwrap();
        // A `shims` folder with no manager beside it is an ordinary folder.
        let plain = dir.path().join("tools/shims");
        std::fs::create_dir_all(&plain).unwrap();
        let path = std::env::join_paths([failing.join("shims"), plain.clone()]).unwrap();
        assert_eq!(resolve_shims(&path), path);
    }

    #[test]
    fn env_allowlist() {
        for ok in ["PATH", "LANG", "LC_ALL", "TZ", "MODHOST_HOME"] {
            assert!(is_allowed_env(ok), "{ok}");
        }
        for no in [
            "HOME",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "LD_PRELOAD",
            "USER",
        ] {
            assert!(!is_allowed_env(no), "{no}");
        }
    }
}
