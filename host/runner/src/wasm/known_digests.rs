//! The digest of each component file, known without reading it again.
//!
//! Every call finds its compiled component by the blake3 digest of the
//! file's bytes; reading and hashing a multi-megabyte component on every
//! call would cost more than running it. The engine remembers each path's
//! digest with the file's identity ([`FileIdentity`]) when it was hashed,
//! and trusts it while one `stat` says the identity is the same.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::file_identity::FileIdentity;

/// The digest of each component file, by path, as of its identity.
#[derive(Debug, Default)]
pub(super) struct KnownDigests {
    by_path: Mutex<HashMap<PathBuf, (FileIdentity, blake3::Hash)>>,
}

impl KnownDigests {
    /// The digest of `path`'s bytes, when they are known not to have changed
    /// since they were hashed.
    pub(super) fn lookup(&self, path: &Path) -> Option<blake3::Hash> {
        let identity = FileIdentity::of_path(path).ok()?;
        let known = self.lock().get(path).copied()?;
        (known.0 == identity).then_some(known.1)
    }

    /// Remember that `path`, with `identity` (taken from the open file before
    /// its bytes were read), hashed to `digest`, unless the file changed too
    /// recently for the identity to vouch for it.
    pub(super) fn remember(&self, path: &Path, identity: FileIdentity, digest: blake3::Hash) {
        let mut known = self.lock();
        if identity.settled_at(SystemTime::now()) {
            known.insert(path.to_path_buf(), (identity, digest));
        } else {
            known.remove(path);
        }
    }

    /// Forget every path but `paths`.
    pub(super) fn keep_only(&self, paths: &HashSet<&Path>) {
        self.lock().retain(|path, _| paths.contains(path.as_path()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (FileIdentity, blake3::Hash)>> {
        self.by_path.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_identity::RACY;
    use std::time::Duration;

    fn hash_file(known: &KnownDigests, path: &Path) -> blake3::Hash {
        let identity = FileIdentity::of_path(path).unwrap();
        let digest = blake3::hash(&std::fs::read(path).unwrap());
        known.remember(path, identity, digest);
        digest
    }

    #[test]
    fn a_settled_file_is_known_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.wasm");
        std::fs::write(&path, b"one").unwrap();
        let known = KnownDigests::default();

        hash_file(&known, &path);
        assert_eq!(known.lookup(&path), None, "just written: not trusted yet");

        std::thread::sleep(RACY + Duration::from_millis(50));
        let digest = hash_file(&known, &path);
        assert_eq!(known.lookup(&path), Some(digest));

        std::fs::write(&path, b"two").unwrap();
        assert_eq!(known.lookup(&path), None, "a rewrite is noticed");
    }
}
