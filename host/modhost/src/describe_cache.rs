//! The describe cache: an unchanged module is neither hashed nor run again.
//!
//! Two levels, both under `cache/describe/`:
//!
//! - `<key>.json`: the describe result (the raw `result` value) of one
//!   module: its identity (the folder name, or the bare file's stem, and the
//!   entry file's path inside its tree) together with its tree digest
//!   ([`crate::module_tree`]). Bytes alone are not enough: a multi-call
//!   program (busybox-style, reading its own name) describes itself
//!   differently under each name, so the same bytes installed twice are
//!   described twice. The tree digest covers file names, so a bare module
//!   moved into its own folder (enable/disable) keeps its key.
//! - `index.json`: module root (folder or bare file) -> tree state
//!   ([`TreeState`]: the `lstat` identity of every entry) and digest. When
//!   the state still matches the disk, the digest is taken from here without
//!   reading a file, which is what makes `list` of a hundred cached modules a
//!   matter of a few hundred `lstat` calls. A tree changed too recently for
//!   its state to vouch for it is not indexed, so it is hashed again next
//!   time. An index in an older format is a miss.
//!
//! A failed describe is remembered too, but only for [`FAILURE_TTL`] and
//! only while the tree keeps its state: a failure may be transient (a slow
//! machine, a missing library), yet a module that hangs on describe must not
//! cost a whole describe timeout on every `list` and every `invoke` of any
//! module. Touching the file (or changing it) retries at once.
//!
//! The cache is disposable: a missing or corrupt index or entry is a miss,
//! never an error. Writes go through a temp file and a rename so a concurrent
//! `modhost` sees the old file or the new one, never half of one, and the
//! index is merged into what is on disk under the home's lock
//! ([`crate::home_lock`]), so two hosts saving at once both keep their
//! entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::home::HomeLayout;
use crate::home_lock::HomeLock;
use crate::module_tree::TreeState;
use modhost_runner::atomic_file::write_bytes_atomically;

const INDEX_FILE: &str = "index.json";

/// How long a failed describe is remembered.
pub(crate) const FAILURE_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexEntry {
    state: TreeState,
    digest: String,
    /// The last describe of this tree failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<Failure>,
}

/// A failed describe, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub kind: modproto::ErrorKind,
    pub message: String,
    /// When it failed, in seconds since the Unix epoch.
    pub at: u64,
}

/// Whose describe result: a module's identity together with its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescribeKey<'a> {
    /// The folder name, or the bare file's stem.
    pub name: &'a str,
    /// The entry file's path inside the tree.
    pub entry: &'a Path,
    /// The tree digest.
    pub digest: &'a str,
}

impl DescribeKey<'_> {
    fn file_name(&self) -> Option<String> {
        if !is_hex_digest(self.digest) {
            return None;
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"modhost-describe-v2\0");
        hasher.update(self.name.as_bytes());
        hasher.update(b"\0");
        hasher.update(self.entry.as_os_str().as_encoded_bytes());
        hasher.update(b"\0");
        hasher.update(self.digest.as_bytes());
        Some(format!("{}.json", hasher.finalize().to_hex()))
    }
}

/// The describe cache of one home.
#[derive(Debug)]
pub(crate) struct DescribeCache {
    home: PathBuf,
    dir: PathBuf,
    index: BTreeMap<PathBuf, IndexEntry>,
    /// What this process changed, merged into the file on save.
    changes: BTreeMap<PathBuf, Option<IndexEntry>>,
}

impl DescribeCache {
    /// Open the cache of the home `layout` (its folder need not exist yet).
    pub(crate) fn load(layout: &HomeLayout) -> Self {
        let dir = layout.describe_cache_dir();
        DescribeCache {
            home: layout.root().to_path_buf(),
            index: read_index(&dir),
            dir,
            changes: BTreeMap::new(),
        }
    }

    /// The digest of the tree at `root` if the index still vouches for it.
    pub(crate) fn indexed_digest(&self, root: &Path, state: &TreeState) -> Option<&str> {
        self.index
            .get(root)
            .filter(|entry| entry.state == *state)
            .map(|entry| entry.digest.as_str())
    }

    /// Remember that the tree at `root`, whose state was `state` when it was
    /// hashed just now, has `digest` (unless it changed too recently for the
    /// state to vouch for it).
    pub(crate) fn record_digest(&mut self, root: &Path, state: &TreeState, digest: &str) {
        if !state.settled_at(SystemTime::now()) {
            if self.index.remove(root).is_some() {
                self.changes.insert(root.to_path_buf(), None);
            }
            return;
        }
        let entry = IndexEntry {
            state: state.clone(),
            digest: digest.to_owned(),
            failure: None,
        };
        self.index.insert(root.to_path_buf(), entry.clone());
        self.changes.insert(root.to_path_buf(), Some(entry));
    }

    /// The describe failure remembered for the tree at `root`, while it keeps
    /// `state` and for [`FAILURE_TTL`] after the failure.
    pub(crate) fn remembered_failure(
        &self,
        root: &Path,
        state: &TreeState,
        now: SystemTime,
    ) -> Option<&Failure> {
        let entry = self.index.get(root).filter(|e| e.state == *state)?;
        let failure = entry.failure.as_ref()?;
        let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        (now.saturating_sub(failure.at) < FAILURE_TTL.as_secs()).then_some(failure)
    }

    /// Remember that describing the module at `root` failed just now. Only a
    /// tree the index vouches for (see [`Self::record_digest`]) is
    /// remembered; any other is simply described again next time.
    pub(crate) fn remember_failure(
        &mut self,
        root: &Path,
        kind: &modproto::ErrorKind,
        message: &str,
    ) {
        let Some(entry) = self.index.get_mut(root) else {
            return;
        };
        let at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        entry.failure = Some(Failure {
            kind: kind.clone(),
            message: message.to_owned(),
            at,
        });
        self.changes.insert(root.to_path_buf(), Some(entry.clone()));
    }

    /// The cached describe result of the module `key`.
    pub(crate) fn result(&self, key: &DescribeKey<'_>) -> Option<Value> {
        let bytes = std::fs::read(self.dir.join(key.file_name()?)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Store the describe result of the module `key`.
    pub(crate) fn store_result(
        &self,
        key: &DescribeKey<'_>,
        result: &Value,
    ) -> std::io::Result<()> {
        let Some(name) = key.file_name() else {
            return Err(std::io::Error::other(format!(
                "not a digest: {:?}",
                key.digest
            )));
        };
        let bytes = serde_json::to_vec(result).map_err(std::io::Error::other)?;
        write_bytes_atomically(&self.dir.join(name), &bytes)
    }

    /// Write this process's changes into the index on disk, dropping entries
    /// for roots not in `live` (when given). Under the home's lock: the file
    /// is read again and merged, so a concurrent save is not lost. Failing
    /// to write only costs speed next time.
    pub(crate) fn save(&mut self, live: Option<&[PathBuf]>) {
        let stale = |path: &PathBuf| live.is_some_and(|live| !live.contains(path));
        let dropped = self.index.keys().any(stale);
        if self.changes.is_empty() && !dropped {
            return;
        }
        let _lock = match HomeLock::acquire(&self.home) {
            Ok(lock) => lock,
            Err(e) => {
                tracing::warn!("describe index not saved: {e}");
                return;
            }
        };
        let mut index = read_index(&self.dir);
        for (path, change) in std::mem::take(&mut self.changes) {
            match change {
                Some(entry) => index.insert(path, entry),
                None => index.remove(&path),
            };
        }
        index.retain(|path, _| !stale(path));
        self.index = index;
        let path = self.dir.join(INDEX_FILE);
        match serde_json::to_vec(&self.index) {
            Ok(bytes) => {
                if let Err(e) = write_bytes_atomically(&path, &bytes) {
                    tracing::warn!("could not write {}: {e}", path.display());
                }
            }
            Err(e) => tracing::warn!("could not serialize the describe index: {e}"),
        }
    }
}

fn read_index(dir: &Path) -> BTreeMap<PathBuf, IndexEntry> {
    std::fs::read(dir.join(INDEX_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn is_hex_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module_tree;
    use serde_json::json;

    fn settle() {
        std::thread::sleep(modhost_runner::file_identity::RACY + Duration::from_millis(50));
    }

    fn key<'a>(name: &'a str, entry: &'a str, digest: &'a str) -> DescribeKey<'a> {
        DescribeKey {
            name,
            entry: Path::new(entry),
            digest,
        }
    }

    #[test]
    fn hit_after_store_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes v1").unwrap();
        settle();
        let (tree, digest) = module_tree::walk_and_digest(&module).unwrap();

        let mut cache = DescribeCache::load(&layout);
        assert!(cache.indexed_digest(&module, &tree.state).is_none());
        assert!(cache.result(&key("m", "m", &digest)).is_none());
        cache.record_digest(&module, &tree.state, &digest);
        cache
            .store_result(&key("m", "m", &digest), &json!({"id": "m"}))
            .unwrap();
        cache.save(Some(std::slice::from_ref(&module)));

        let cache = DescribeCache::load(&layout);
        assert_eq!(
            cache.indexed_digest(&module, &tree.state),
            Some(digest.as_str())
        );
        assert_eq!(cache.result(&key("m", "m", &digest)).unwrap()["id"], "m");
    }

    #[test]
    fn the_same_bytes_under_another_name_are_another_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DescribeCache::load(&HomeLayout::new(dir.path()));
        let digest = "a".repeat(64);
        cache
            .store_result(&key("one", "one", &digest), &json!({"id": "one"}))
            .unwrap();
        assert!(cache.result(&key("two", "one", &digest)).is_none());
        assert!(cache.result(&key("one", "two", &digest)).is_none());
    }

    #[test]
    fn a_tree_changed_just_now_is_not_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes").unwrap();
        let (tree, digest) = module_tree::walk_and_digest(&module).unwrap();
        let mut cache = DescribeCache::load(&HomeLayout::new(dir.path()));
        cache.record_digest(&module, &tree.state, &digest);
        assert!(cache.indexed_digest(&module, &tree.state).is_none());
    }

    #[test]
    fn a_changed_file_misses_the_index_even_with_its_size_and_mtime_restored() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m");
        std::fs::write(&module, b"bytes v1").unwrap();
        settle();
        let (before, digest) = module_tree::walk_and_digest(&module).unwrap();
        let mtime = std::fs::metadata(&module).unwrap().modified().unwrap();
        let mut cache = DescribeCache::load(&HomeLayout::new(dir.path()));
        cache.record_digest(&module, &before.state, &digest);
        assert!(cache.indexed_digest(&module, &before.state).is_some());

        // The same size, rewritten in place, its mtime put back.
        std::fs::write(&module, b"bytes v2").unwrap();
        let file = std::fs::File::options().write(true).open(&module).unwrap();
        file.set_modified(mtime).unwrap();
        let after = module_tree::walk(&module).unwrap();
        assert!(cache.indexed_digest(&module, &after.state).is_none());
    }

    #[test]
    fn a_failure_is_remembered_for_a_while_and_only_for_the_same_tree() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let module = dir.path().join("m");
        std::fs::write(&module, b"hangs").unwrap();
        settle();
        let (tree, digest) = module_tree::walk_and_digest(&module).unwrap();
        let mut cache = DescribeCache::load(&layout);
        cache.record_digest(&module, &tree.state, &digest);
        cache.remember_failure(
            &module,
            &modproto::HostErrorKind::Timeout.into(),
            "did not answer",
        );
        cache.save(None);

        let cache = DescribeCache::load(&layout);
        let now = SystemTime::now();
        let failure = cache.remembered_failure(&module, &tree.state, now).unwrap();
        assert_eq!(
            (failure.kind.as_str(), failure.message.as_str()),
            ("timeout", "did not answer")
        );
        let later = now + FAILURE_TTL + Duration::from_secs(1);
        assert!(
            cache
                .remembered_failure(&module, &tree.state, later)
                .is_none(),
            "forgotten in time"
        );

        // Touched: another state, so described again at once.
        std::fs::File::options()
            .write(true)
            .open(&module)
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        let touched = module_tree::walk(&module).unwrap();
        assert!(
            cache
                .remembered_failure(&module, &touched.state, now)
                .is_none()
        );
    }

    #[test]
    fn corrupt_index_and_entry_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let cache_dir = layout.describe_cache_dir();
        std::fs::create_dir_all(&cache_dir).unwrap();
        std::fs::write(cache_dir.join(INDEX_FILE), b"{not json").unwrap();
        let digest = "a".repeat(64);
        let k = key("m", "m", &digest);
        std::fs::write(cache_dir.join(k.file_name().unwrap()), b"[garbage").unwrap();
        let cache = DescribeCache::load(&layout);
        assert!(cache.index.is_empty());
        assert!(cache.result(&k).is_none());
        assert!(cache.result(&key("m", "m", "../../etc/passwd")).is_none());
    }

    #[test]
    fn two_saves_merge_and_vanished_modules_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let mut files = Vec::new();
        for name in ["gone", "kept", "other"] {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            files.push(path);
        }
        settle();
        let mut first = DescribeCache::load(&layout);
        let mut second = DescribeCache::load(&layout);
        for path in &files[..2] {
            let (tree, digest) = module_tree::walk_and_digest(path).unwrap();
            first.record_digest(path, &tree.state, &digest);
        }
        let (tree, digest) = module_tree::walk_and_digest(&files[2]).unwrap();
        second.record_digest(&files[2], &tree.state, &digest);
        first.save(None);
        second.save(None);
        let cache = DescribeCache::load(&layout);
        assert_eq!(
            cache.index.len(),
            3,
            "neither save lost the other's entries"
        );

        let mut cache = DescribeCache::load(&layout);
        cache.save(Some(&files[1..]));
        let cache = DescribeCache::load(&layout);
        assert!(!cache.index.contains_key(&files[0]));
        assert!(cache.index.contains_key(&files[1]));
    }
}
