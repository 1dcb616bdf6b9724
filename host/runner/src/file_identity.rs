//! Knowing a file's bytes are unchanged without reading them.
//!
//! The host trusts a module by the digest of its bytes (pins, the describe
//! cache, compiled components), but hashing a multi-megabyte executable on
//! every call or every `list` would cost more than running it. So a digest
//! is remembered together with the file's identity when it was hashed:
//! device, inode, size, and the modification and status-change times in
//! nanoseconds. Writing the file, renaming another over it, truncating it,
//! `touch` and `chmod` each change one of these. The modification time can
//! be set back by anyone who can write the file, the status-change time
//! cannot: a same-size rewrite with its mtime restored still moves the
//! ctime.
//!
//! One race is left, and closed the way git's index closes it: a file
//! changed again within the same clock tick as the stat that recorded it
//! would look unchanged. An identity whose times are not older than the
//! moment of hashing by [`RACY`] is not trusted ([`FileIdentity::settled_at`]):
//! whoever holds it hashes again next time.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// How much older than the moment of hashing a file's last change must be
/// for its identity to vouch for the digest later (file times are as coarse
/// as the kernel's clock tick, or seconds on some filesystems).
pub const RACY: Duration = Duration::from_secs(1);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileIdentity {
    pub fn of(metadata: &Metadata) -> FileIdentity {
        let ns = |secs: i64, nsecs: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsecs);
        FileIdentity {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// The identity of the file at `path` now (one `stat`, following links).
    pub fn of_path(path: &Path) -> std::io::Result<FileIdentity> {
        std::fs::metadata(path).map(|m| FileIdentity::of(&m))
    }

    /// Whether the file had last changed at least [`RACY`] before `at` (the
    /// moment its bytes were hashed), so that this identity can vouch for
    /// that digest from now on.
    pub fn settled_at(&self, at: SystemTime) -> bool {
        let Ok(at) = at.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let changed = self.mtime_ns.max(self.ctime_ns);
        changed + (RACY.as_nanos() as i128) <= at.as_nanos() as i128
    }
}

/// The identities of a few paths, each taken with one `stat` (following
/// links) when a call started: the checks of that call that look at one of
/// these paths read it here instead of taking a `stat` of their own, so a
/// path is looked at once per call, not once per check. A long-running
/// host takes it where it looks for operator changes anyway
/// (`tools::live`); a path not in it, or one that did not exist then, is
/// stat'ed as before. It is never kept past its call: a later call takes
/// its own.
#[derive(Debug, Clone, Default)]
pub struct Glance {
    paths: Arc<[PathBuf]>,
    identities: Arc<[Option<FileIdentity>]>,
}

impl Glance {
    /// `identities[i]` is the identity of `paths[i]` (`None`: no such file).
    pub fn new(paths: Arc<[PathBuf]>, identities: Arc<[Option<FileIdentity>]>) -> Glance {
        debug_assert_eq!(paths.len(), identities.len());
        Glance { paths, identities }
    }

    /// A glance at `paths` now, one `stat` each (what `tools::live` takes).
    pub fn taken(paths: Arc<[PathBuf]>) -> Glance {
        let identities = paths
            .iter()
            .map(|p| FileIdentity::of_path(p).ok())
            .collect();
        Glance::new(paths, identities)
    }

    /// The identity of the file at `path` (following links): as glanced
    /// when the path was, else one `stat` now.
    pub fn identity(&self, path: &Path) -> std::io::Result<FileIdentity> {
        self.glanced(path)
            .map_or_else(|| FileIdentity::of_path(path), Ok)
    }

    /// The identity of `path` as glanced, when it was and it existed.
    pub fn glanced(&self, path: &Path) -> Option<FileIdentity> {
        let at = self
            .paths
            .iter()
            .position(|p| p.as_os_str() == path.as_os_str())?;
        self.identities.get(at).copied().flatten()
    }
}

/// The identities of a few paths, one `stat` each: what a long-running
/// host (`tools::live`) and a host's last discovery (`discovery_memo`)
/// compare to learn that the operator changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(Arc<[Option<FileIdentity>]>);

impl Fingerprint {
    pub fn of(paths: &[PathBuf]) -> Self {
        Fingerprint(
            paths
                .iter()
                .map(|p| FileIdentity::of_path(p).ok())
                .collect(),
        )
    }

    /// Whether `paths` still have these identities (one `stat` each, up
    /// to the first that differs; nothing is allocated).
    pub fn still_of(&self, paths: &[PathBuf]) -> bool {
        self.0.len() == paths.len()
            && paths
                .iter()
                .zip(self.0.iter())
                .all(|(path, seen)| FileIdentity::of_path(path).ok() == *seen)
    }

    /// The identities, in the order of the paths they were taken of.
    pub fn identities(&self) -> Arc<[Option<FileIdentity>]> {
        Arc::clone(&self.0)
    }

    /// Whether every identity is old enough to vouch that nothing changed
    /// unseen since `at`.
    pub fn settled_at(&self, at: SystemTime) -> bool {
        self.0.iter().flatten().all(|id| id.settled_at(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
    }

    #[test]
    fn every_kind_of_change_changes_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        std::fs::write(&path, b"one").unwrap();
        let before = FileIdentity::of_path(&path).unwrap();
        assert_eq!(FileIdentity::of_path(&path).unwrap(), before, "stable");

        // Same size, content rewritten, mtime put back: the ctime moves.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"two").unwrap();
        age(&path);
        let rewritten = FileIdentity::of_path(&path).unwrap();
        assert_eq!(rewritten.size, before.size);
        assert_ne!(rewritten, before, "a same-size rewrite is noticed");

        // Another file renamed over it: another inode.
        let other = dir.path().join("other");
        std::fs::write(&other, b"two").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(FileIdentity::of_path(&path).unwrap(), rewritten);
    }

    #[test]
    fn only_a_change_older_than_the_racy_window_is_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        std::fs::write(&path, b"x").unwrap();
        let identity = FileIdentity::of_path(&path).unwrap();
        let now = SystemTime::now();
        assert!(!identity.settled_at(now), "just written");
        assert!(identity.settled_at(now + RACY + Duration::from_millis(50)));
    }
}
