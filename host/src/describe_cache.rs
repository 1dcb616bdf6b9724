//! The describe cache: an unchanged module is neither hashed nor run again.
//!
//! Two levels, both under `cache/describe/`:
//!
//! - `<blake3-hex>.json`: the describe result (the raw `result` value) of the
//!   executable whose bytes have that digest. Content-addressed, so a module
//!   moved to another path (enable/disable of a bare executable, install)
//!   still hits.
//! - `index.json`: path -> file identity ([`FileIdentity`]: device, inode,
//!   size, modification and status-change times) and digest. When the
//!   identity still matches the file on disk, the digest is taken from here
//!   without reading the executable, which is what makes `list` of a hundred
//!   cached modules a matter of a hundred `stat` calls. A file changed too
//!   recently for its identity to vouch for it is not indexed, so it is
//!   hashed again next time. An index in an older format is a miss.
//!
//! A failed describe is remembered too, but only for [`FAILURE_TTL`] and
//! only while the file keeps its identity: a failure may be transient (a slow
//! machine, a missing library), yet a module that hangs on describe must not
//! cost a whole describe timeout on every `list` and every `invoke` of any
//! module. Touching the file (or changing it) retries at once.
//!
//! The cache is disposable: a missing or corrupt index or entry is a miss,
//! never an error, and writes go through a temp file and a rename so a
//! concurrent `modhost` sees the old file or the new one, never half of one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::atomic_file::write_bytes_atomically;
use crate::file_identity::FileIdentity;

const INDEX_FILE: &str = "index.json";

/// How long a failed describe is remembered.
pub const FAILURE_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexEntry {
    identity: FileIdentity,
    digest: String,
    /// The last describe of these bytes failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<Failure>,
}

/// A failed describe, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: String,
    pub message: String,
    /// When it failed, in seconds since the Unix epoch.
    pub at: u64,
}

/// The describe cache of one home.
#[derive(Debug)]
pub struct DescribeCache {
    dir: PathBuf,
    index: BTreeMap<PathBuf, IndexEntry>,
    dirty: bool,
}

impl DescribeCache {
    /// Open the cache in `dir` (which need not exist yet).
    pub fn load(dir: &Path) -> Self {
        let index = std::fs::read(dir.join(INDEX_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        DescribeCache {
            dir: dir.to_path_buf(),
            index,
            dirty: false,
        }
    }

    /// The digest of the file at `path` if the index still vouches for it.
    pub fn indexed_digest(&self, path: &Path, identity: FileIdentity) -> Option<&str> {
        self.index
            .get(path)
            .filter(|entry| entry.identity == identity)
            .map(|entry| entry.digest.as_str())
    }

    /// Remember that the file at `path`, whose identity was `identity` when
    /// it was hashed just now, has `digest` (unless it changed too recently
    /// for the identity to vouch for it).
    pub fn record_digest(&mut self, path: &Path, identity: FileIdentity, digest: &str) {
        if !identity.settled_at(SystemTime::now()) {
            if self.index.remove(path).is_some() {
                self.dirty = true;
            }
            return;
        }
        let entry = IndexEntry {
            identity,
            digest: digest.to_owned(),
            failure: None,
        };
        self.index.insert(path.to_path_buf(), entry);
        self.dirty = true;
    }

    /// The describe failure remembered for the file at `path`, while it keeps
    /// `identity` and for [`FAILURE_TTL`] after `now`'s failure time.
    pub fn remembered_failure(
        &self,
        path: &Path,
        identity: FileIdentity,
        now: SystemTime,
    ) -> Option<&Failure> {
        let entry = self.index.get(path).filter(|e| e.identity == identity)?;
        let failure = entry.failure.as_ref()?;
        let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        (now.saturating_sub(failure.at) < FAILURE_TTL.as_secs()).then_some(failure)
    }

    /// Remember that describing the file at `path` failed just now. Only a
    /// file the index vouches for (see [`Self::record_digest`]) is
    /// remembered; any other is simply described again next time.
    pub fn remember_failure(&mut self, path: &Path, kind: &str, message: &str) {
        let Some(entry) = self.index.get_mut(path) else {
            return;
        };
        let at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        entry.failure = Some(Failure {
            kind: kind.to_owned(),
            message: message.to_owned(),
            at,
        });
        self.dirty = true;
    }

    /// The cached describe result of the bytes with `digest`.
    pub fn result(&self, digest: &str) -> Option<Value> {
        if !is_hex_digest(digest) {
            return None;
        }
        let bytes = std::fs::read(self.entry_path(digest)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Store the describe result of the bytes with `digest`.
    pub fn store_result(&self, digest: &str, result: &Value) -> std::io::Result<()> {
        if !is_hex_digest(digest) {
            return Err(std::io::Error::other(format!("not a digest: {digest:?}")));
        }
        let bytes = serde_json::to_vec(result).map_err(std::io::Error::other)?;
        write_bytes_atomically(&self.entry_path(digest), &bytes)
    }

    /// Drop index entries for paths not in `live` (when given) and write the
    /// index if it changed. Failing to write only costs speed next time.
    pub fn save(&mut self, live: Option<&[PathBuf]>) {
        let before = self.index.len();
        if let Some(live) = live {
            self.index.retain(|path, _| live.contains(path));
        }
        if !self.dirty && self.index.len() == before {
            return;
        }
        match serde_json::to_vec(&self.index) {
            Ok(bytes) => {
                if let Err(e) = write_bytes_atomically(&self.dir.join(INDEX_FILE), &bytes) {
                    tracing::warn!(
                        "could not write {}: {e}",
                        self.dir.join(INDEX_FILE).display()
                    );
                }
            }
            Err(e) => tracing::warn!("could not serialize the describe index: {e}"),
        }
        self.dirty = false;
    }

    fn entry_path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.json"))
    }
}

/// The blake3 digest (hex) of the file at `path`.
pub fn digest_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    Ok(hasher.finalize().to_hex().to_string())
}

fn is_hex_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hit_after_store_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes v1").unwrap();
        // Only a file that changed before the racy window is indexed.
        std::thread::sleep(crate::file_identity::RACY + std::time::Duration::from_millis(50));
        let meta = std::fs::metadata(&module).unwrap();
        let digest = digest_file(&module).unwrap();

        let mut cache = DescribeCache::load(&dir.path().join("cache"));
        assert!(
            cache
                .indexed_digest(&module, FileIdentity::of(&meta))
                .is_none()
        );
        assert!(cache.result(&digest).is_none());
        cache.record_digest(&module, FileIdentity::of(&meta), &digest);
        cache.store_result(&digest, &json!({"id": "m"})).unwrap();
        cache.save(Some(std::slice::from_ref(&module)));

        let cache = DescribeCache::load(&dir.path().join("cache"));
        assert_eq!(
            cache.indexed_digest(&module, FileIdentity::of(&meta)),
            Some(digest.as_str())
        );
        assert_eq!(cache.result(&digest).unwrap()["id"], "m");
    }

    #[test]
    fn a_file_changed_just_now_is_not_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes").unwrap();
        let identity = FileIdentity::of_path(&module).unwrap();
        let mut cache = DescribeCache::load(dir.path());
        cache.record_digest(&module, identity, &digest_file(&module).unwrap());
        assert!(cache.indexed_digest(&module, identity).is_none());
    }

    #[test]
    fn a_changed_file_misses_the_index_even_with_its_size_and_mtime_restored() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes v1").unwrap();
        std::thread::sleep(crate::file_identity::RACY + std::time::Duration::from_millis(50));
        let before = FileIdentity::of_path(&module).unwrap();
        let mtime = std::fs::metadata(&module).unwrap().modified().unwrap();
        let mut cache = DescribeCache::load(dir.path());
        cache.record_digest(&module, before, &digest_file(&module).unwrap());
        assert!(cache.indexed_digest(&module, before).is_some(), "indexed");

        // The same size, rewritten in place, its mtime put back.
        std::fs::write(&module, b"bytes v2").unwrap();
        let file = std::fs::File::options().write(true).open(&module).unwrap();
        file.set_modified(mtime).unwrap();
        let after = FileIdentity::of_path(&module).unwrap();
        assert_eq!(
            (after.size, after.mtime_ns, after.ino),
            (before.size, before.mtime_ns, before.ino)
        );
        assert!(cache.indexed_digest(&module, after).is_none());
    }

    #[test]
    fn a_failure_is_remembered_for_a_while_and_only_for_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"hangs").unwrap();
        std::thread::sleep(crate::file_identity::RACY + std::time::Duration::from_millis(50));
        let identity = FileIdentity::of_path(&module).unwrap();
        let mut cache = DescribeCache::load(dir.path());
        cache.record_digest(&module, identity, &digest_file(&module).unwrap());
        cache.remember_failure(&module, "timeout", "did not answer");
        cache.save(None);

        let cache = DescribeCache::load(dir.path());
        let now = SystemTime::now();
        let failure = cache.remembered_failure(&module, identity, now).unwrap();
        assert_eq!(
            (failure.kind.as_str(), failure.message.as_str()),
            ("timeout", "did not answer")
        );
        let later = now + FAILURE_TTL + Duration::from_secs(1);
        assert!(
            cache.remembered_failure(&module, identity, later).is_none(),
            "forgotten in time"
        );

        // Touched: another identity, so described again at once.
        std::fs::File::options()
            .write(true)
            .open(&module)
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        let touched = FileIdentity::of_path(&module).unwrap();
        assert!(cache.remembered_failure(&module, touched, now).is_none());
    }

    #[test]
    fn corrupt_index_and_entry_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(INDEX_FILE), b"{not json").unwrap();
        let digest = "a".repeat(64);
        std::fs::write(dir.path().join(format!("{digest}.json")), b"[garbage").unwrap();
        let cache = DescribeCache::load(dir.path());
        assert!(cache.index.is_empty());
        assert!(cache.result(&digest).is_none());
        assert!(cache.result("../../etc/passwd").is_none());
    }

    #[test]
    fn save_drops_entries_of_vanished_modules() {
        let dir = tempfile::tempdir().unwrap();
        let fp = FileIdentity {
            dev: 1,
            ino: 1,
            size: 1,
            mtime_ns: 1,
            ctime_ns: 1,
        };
        let mut cache = DescribeCache::load(dir.path());
        cache.record_digest(Path::new("/gone"), fp, &"b".repeat(64));
        cache.record_digest(Path::new("/kept"), fp, &"c".repeat(64));
        cache.save(Some(&[PathBuf::from("/kept")]));
        let cache = DescribeCache::load(dir.path());
        assert!(cache.indexed_digest(Path::new("/gone"), fp).is_none());
        assert!(cache.indexed_digest(Path::new("/kept"), fp).is_some());
    }
}
