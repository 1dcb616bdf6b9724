//! Knowing a component file is unchanged without reading it again.
//!
//! Every call finds its compiled component by the blake3 digest of the
//! file's bytes; reading and hashing a multi-megabyte component on every
//! call would cost more than running it. So the engine remembers, per path,
//! the digest together with the file's identity when it was hashed: device,
//! inode, size, modification and status-change times (nanoseconds). Any
//! write, rename over, truncation, `touch` or `chmod` changes one of these;
//! the status-change time cannot be set back by user space.
//!
//! One race is left, and closed the way git's index closes it: a file
//! changed again within the same clock tick as the stat that recorded it
//! would look unchanged. An identity whose times are not older than the
//! moment of hashing by [`RACY`] is not trusted; the next call hashes again.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How much older than its hashing a file's last change must be for its
/// identity to be trusted.
const RACY: Duration = Duration::from_secs(1);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileIdentity {
    pub(super) fn of(metadata: &Metadata) -> FileIdentity {
        FileIdentity {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// Whether the file last changed at least [`RACY`] before `at`.
    fn settled_before(&self, at: SystemTime) -> bool {
        let Ok(at) = at.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let newest = self.mtime.max(self.ctime);
        let Ok(secs) = u64::try_from(newest.0) else {
            return true;
        };
        let changed = Duration::new(secs, u32::try_from(newest.1).unwrap_or(0));
        changed + RACY <= at
    }
}

/// The digest of each component file, by path, as of its identity.
#[derive(Debug, Default)]
pub(super) struct KnownDigests {
    by_path: Mutex<HashMap<PathBuf, (FileIdentity, blake3::Hash)>>,
}

impl KnownDigests {
    /// The digest of `path`'s bytes, when they are known not to have changed
    /// since they were hashed (one `stat`, no read).
    pub(super) fn lookup(&self, path: &Path) -> Option<blake3::Hash> {
        let identity = FileIdentity::of(&std::fs::metadata(path).ok()?);
        let known = self.lock().get(path).copied()?;
        (known.0 == identity).then_some(known.1)
    }

    /// Remember that `path`, with `identity` (taken from the open file before
    /// its bytes were read), hashed to `digest`, unless the file changed too
    /// recently to trust the identity.
    pub(super) fn remember(&self, path: &Path, identity: FileIdentity, digest: blake3::Hash) {
        let mut known = self.lock();
        if identity.settled_before(SystemTime::now()) {
            known.insert(path.to_path_buf(), (identity, digest));
        } else {
            known.remove(path);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (FileIdentity, blake3::Hash)>> {
        self.by_path.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_file(known: &KnownDigests, path: &Path) -> blake3::Hash {
        let identity = FileIdentity::of(&std::fs::metadata(path).unwrap());
        let digest = blake3::hash(&std::fs::read(path).unwrap());
        known.remember(path, identity, digest);
        digest
    }

    fn age(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(old).unwrap();
    }

    #[test]
    fn an_unchanged_settled_file_is_known_and_any_change_forgets_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.wasm");
        std::fs::write(&path, b"one").unwrap();
        let known = KnownDigests::default();

        // Just written: its ctime is now, so it is not trusted yet.
        hash_file(&known, &path);
        assert_eq!(known.lookup(&path), None);

        // ctime cannot be set back; wait out the racy window instead.
        age(&path);
        std::thread::sleep(RACY + Duration::from_millis(50));
        let digest = hash_file(&known, &path);
        assert_eq!(known.lookup(&path), Some(digest));

        // Same size, content rewritten, mtime put back: ctime still moves.
        std::fs::write(&path, b"two").unwrap();
        age(&path);
        assert_eq!(known.lookup(&path), None, "a rewrite is noticed");

        // Replaced by another file (rename over): another inode.
        std::thread::sleep(RACY + Duration::from_millis(50));
        let digest = hash_file(&known, &path);
        assert_eq!(known.lookup(&path), Some(digest));
        let other = dir.path().join("other");
        std::fs::write(&other, b"two").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(known.lookup(&path), None, "a replacement is noticed");
    }
}
