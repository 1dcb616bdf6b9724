//! The host home: where modules, their state and the host's caches live.
//!
//! Resolution order: an explicit directory (`--home`), else `$MODHOST_HOME`,
//! else the XDG data directory (`$XDG_DATA_HOME/modhost`, falling back to
//! `~/.local/share/modhost`). The layout is fixed (`modules/`, `state/`,
//! `artifacts/`, `spill/`, `cache/`, `staging/`, `audit/`, `config.toml`,
//! `config.sync.toml`, `secrets.toml`, `pins.json`, `.lock`); this module is
//! the only place that spells its paths, so no other code joins path
//! fragments onto the home by hand.

use std::path::{Path, PathBuf};

/// The file of the secrets' values (`crate::secrets`), in the home.
pub const SECRETS_FILE: &str = "secrets.toml";

/// The file `modhost sync` writes beside `config.toml` (see
/// [`HomeLayout::managed_config_path`]).
pub const MANAGED_CONFIG_FILE: &str = "config.sync.toml";

/// The marker file that disables a module with its own folder.
pub const DISABLED_MARKER: &str = ".disabled";

/// No home was named and none can be derived from the environment. The
/// host reports it as `HostError::NoHome`; it is its own type so that the
/// layout, at the bottom, depends on no host error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no host home: pass --home, set $MODHOST_HOME, or set $HOME")]
pub struct NoHome;

/// Environment variable naming the home when `--home` is not given.
pub(crate) const HOME_ENV: &str = "MODHOST_HOME";

/// The resolved host home and the paths of its layout.
#[derive(Debug, Clone)]
pub struct HomeLayout {
    root: PathBuf,
}

impl HomeLayout {
    /// A layout rooted at `root` (not created, not canonicalized).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HomeLayout { root: root.into() }
    }

    /// Decide where the home is, from the explicit choice or the environment.
    pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, NoHome> {
        if let Some(dir) = explicit {
            return Ok(dir.to_path_buf());
        }
        if let Some(dir) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(dir));
        }
        if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            let data = PathBuf::from(data);
            // The XDG spec says a relative value is invalid and must be ignored.
            if data.is_absolute() {
                return Ok(data.join("modhost"));
            }
        }
        match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => Ok(PathBuf::from(home).join(".local/share/modhost")),
            None => Err(NoHome),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `modules/`: one folder (or bare executable) per installed module.
    pub fn modules_dir(&self) -> PathBuf {
        self.root.join("modules")
    }

    /// `modules/<id>/`.
    pub fn module_dir(&self, id: &str) -> PathBuf {
        self.modules_dir().join(id)
    }

    /// `state/<id>/`: the module's private, persistent state root.
    pub(crate) fn state_dir(&self, id: &str) -> PathBuf {
        self.root.join("state").join(id)
    }

    /// `artifacts/<id>/`: where the module's artifacts land.
    pub(crate) fn artifacts_dir(&self, id: &str) -> PathBuf {
        self.root.join("artifacts").join(id)
    }

    /// `spill/<id>/`: full tool outputs the host cut to fit a model's
    /// context, kept so the caller can read them. Host-owned: no grant ever
    /// points here (unlike `artifacts/<id>/`, which a module can write), and
    /// the host opens it without following symlinks (`tools::spill`).
    pub(crate) fn spill_dir(&self) -> PathBuf {
        self.root.join("spill")
    }

    /// `cache/`: disposable, keyed by content digest.
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// `cache/describe/`: describe results by module identity and tree
    /// digest, plus the tree-state index in front of them.
    pub(crate) fn describe_cache_dir(&self) -> PathBuf {
        self.cache_dir().join("describe")
    }

    /// `cache/components/`: compiled WebAssembly components, by digest of
    /// the component's bytes and the engine (see `runner::wasm`).
    pub fn component_cache_dir(&self) -> PathBuf {
        self.cache_dir().join("components")
    }

    /// `cache/snapshots/`: host-owned, read-only copies of approved module
    /// trees, by tree digest (see `snapshot`). What a pinned module runs.
    pub fn snapshots_dir(&self) -> PathBuf {
        self.cache_dir().join("snapshots")
    }

    /// `.lock`: the file every read-modify-write of host state locks (see
    /// `home_lock`).
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.root.join(".lock")
    }

    /// `staging/`: where `install` prepares a module before the atomic
    /// rename into `modules/`. Inside the home so the rename never crosses a
    /// filesystem.
    pub(crate) fn staging_dir(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// `audit/`: the audit log, one record per call (`crate::audit`).
    /// Host-owned like `spill/`: no grant ever points into the home.
    pub fn audit_dir(&self) -> PathBuf {
        self.root.join("audit")
    }

    /// `audit/audit.jsonl`: the log's current file, appended to.
    pub fn audit_log_path(&self) -> PathBuf {
        self.audit_dir().join("audit.jsonl")
    }

    /// `audit/audit-<n>.jsonl`: the `n`th file rotated out of
    /// `audit.jsonl` (1 the oldest).
    pub fn rotated_audit_log_path(&self, n: u64) -> PathBuf {
        self.audit_dir().join(format!("audit-{n}.jsonl"))
    }

    /// `audit/head`: the log's last record, number and hash, as its last
    /// writer left it; what writers lock.
    pub fn audit_head_path(&self) -> PathBuf {
        self.audit_dir().join("head")
    }

    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `config.sync.toml`: the source roots and approval rules a lockfile
    /// brings with its modules, written only by `modhost sync` and read
    /// together with `config.toml` (see `crate::managed_config`).
    pub fn managed_config_path(&self) -> PathBuf {
        self.root.join(MANAGED_CONFIG_FILE)
    }

    /// `secrets.toml`: the values of the secrets the operator grants
    /// (`crate::secrets`), mode 0600, read only by a call that needs one.
    pub fn secrets_path(&self) -> PathBuf {
        self.root.join(SECRETS_FILE)
    }

    /// `pins.json`.
    pub(crate) fn pins_path(&self) -> PathBuf {
        self.root.join("pins.json")
    }
}

/// The `n` of a file named as [`HomeLayout::rotated_audit_log_path`] names
/// it; `None` for any other name.
pub(crate) fn rotated_audit_log_number(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_prefix("audit-")?.strip_suffix(".jsonl")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_home_wins() {
        let dir = Path::new("/tmp/explicit-home");
        assert_eq!(HomeLayout::resolve(Some(dir)).unwrap(), dir);
    }

    #[test]
    fn layout_paths_follow_design() {
        let home = HomeLayout::new("/h");
        assert_eq!(home.module_dir("files"), Path::new("/h/modules/files"));
        assert_eq!(home.state_dir("files"), Path::new("/h/state/files"));
        assert_eq!(home.artifacts_dir("files"), Path::new("/h/artifacts/files"));
        assert_eq!(home.describe_cache_dir(), Path::new("/h/cache/describe"));
        assert_eq!(home.spill_dir(), Path::new("/h/spill"));
        assert_eq!(home.config_path(), Path::new("/h/config.toml"));
        assert_eq!(home.secrets_path(), Path::new("/h/secrets.toml"));
        assert_eq!(home.audit_log_path(), Path::new("/h/audit/audit.jsonl"));
        assert_eq!(
            home.rotated_audit_log_path(3),
            Path::new("/h/audit/audit-3.jsonl")
        );
        assert_eq!(rotated_audit_log_number("audit-3.jsonl"), Some(3));
        for other in [
            "audit.jsonl",
            "audit-.jsonl",
            "audit-x.jsonl",
            "audit-3.json",
            "head",
        ] {
            assert_eq!(rotated_audit_log_number(other), None, "{other}");
        }
    }
}
