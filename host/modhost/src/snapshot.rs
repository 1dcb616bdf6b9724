//! The snapshot store: what runs is a host-owned, read-only copy of exactly
//! the approved bytes.
//!
//! Checking a module's files and then running them from `modules/<id>/`
//! leaves a window (and a long-running host leaves it open for hours):
//! whoever can write the folder can change a helper, or swap the entry and
//! restore it between two checks. So what executes is never the folder. When
//! the operator pins a module (install pins too), its tree
//! ([`crate::module_tree`]) is copied to `cache/snapshots/<tree-digest>/`,
//! and every call of a pinned, unchanged module runs the entry file there.
//!
//! Design decisions:
//!
//! - **Content-addressed, so verifiable and shared.** The folder is named by
//!   the digest of what it holds; two modules with the same tree share one.
//!   A snapshot present under its digest is reused as it is.
//! - **The copy is what is hashed.** The bytes are copied first, then the
//!   copy (which only the host can write) is digested; a source changing
//!   mid-copy yields a copy whose digest is not the approved one, and it is
//!   thrown away. Nothing is ever hashed in one place and run from another.
//! - **Atomic.** Built in `cache/snapshots/.tmp-<id>/`, every file fsynced,
//!   then renamed into place: a reader sees no snapshot or a whole one. Two
//!   hosts building the same snapshot race harmlessly: the second rename
//!   fails, and the first snapshot is used.
//! - **Read-only.** Files are 0555 (executable) or 0444, folders 0555: the
//!   module itself is only ever granted read and execute on its snapshot
//!   folder ([`crate::confine`] grants the program's folder), and it is
//!   outside every root a module can be granted (`cache/` is the host's).
//! - **Only the approved files.** A bare executable's snapshot folder holds
//!   that one file, so granting the program's folder grants nothing else.
//! - **No special bits.** Modes are set to exactly 0555 or 0444 (never
//!   copied), so a setuid or setgid bit in a module's folder never reaches
//!   what runs.
//! - **Unused snapshots are removed** ([`remove_unused`]), under the home
//!   lock, after `remove`, `pin` and `unpin`: every snapshot no pin record
//!   names. A module runs from a snapshot only while it is pinned and
//!   unchanged (an unpinned one runs from its folder), so the pin records
//!   are exactly the snapshots in use; a snapshot being built (`.tmp-*`) or
//!   anything not named by a digest is left alone. Removal never follows a
//!   symlink (folders are opened `O_NOFOLLOW` to make them writable, then
//!   removed with `remove_dir_all`, which does not follow links either).
//!   When pins.json cannot be read nothing is removed. An install makes its
//!   snapshot before it takes the lock, so a concurrent removal can delete
//!   it before its pin is written: discovery of a pinned, unchanged module
//!   rebuilds its snapshot from the folder (verified against the pin), so
//!   nothing is lost. A long-running host that already started a process
//!   from a removed snapshot is not disturbed on Linux: open files and
//!   exec'd images stay valid after their names are gone; its next call
//!   notices the module changed (its snapshot is unreadable) and is refused
//!   until it is discovered again, as for any change under it.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::home::HomeLayout;
use crate::home_lock::HomeLock;
use crate::module_tree::{self, NodeKind, TreeError};

/// Why a snapshot could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{source_root} changed while it was being copied (its files now digest to {actual}, not {expected}); nothing was approved, try again once it is no longer being written"
    )]
    Changed {
        source_root: PathBuf,
        expected: String,
        actual: String,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io {
        action,
        path,
        source,
    }
}

/// `cache/snapshots/<digest>/`, whether it exists or not.
pub(crate) fn snapshot_dir(layout: &HomeLayout, digest: &str) -> PathBuf {
    layout.snapshots_dir().join(digest)
}

/// The snapshot of `digest` if it is already in the store.
pub(crate) fn existing(layout: &HomeLayout, digest: &str) -> Option<PathBuf> {
    if !is_hex_digest(digest) {
        return None;
    }
    let dir = snapshot_dir(layout, digest);
    std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir())
        .then_some(dir)
}

/// The snapshot of the tree at `source_root` (a module folder or a bare
/// file), which must digest to `digest`: reused when present, else copied,
/// verified and moved into the store.
pub(crate) fn ensure(
    layout: &HomeLayout,
    source_root: &Path,
    digest: &str,
) -> Result<PathBuf, SnapshotError> {
    if let Some(dir) = existing(layout, digest) {
        return Ok(dir);
    }
    let store = layout.snapshots_dir();
    std::fs::create_dir_all(&store).map_err(io("create", &store))?;
    let temp = store.join(format!(".tmp-{}", crate::request::new_request_id()));
    let built = build(source_root, &temp, digest);
    if let Err(e) = built {
        remove_snapshot_dir(&temp);
        return Err(e);
    }
    let target = snapshot_dir(layout, digest);
    match std::fs::rename(&temp, &target) {
        Ok(()) => {
            std::fs::File::open(&store)
                .and_then(|d| d.sync_all())
                .map_err(io("sync", &store))?;
            Ok(target)
        }
        // Another host made the same snapshot first: it holds the same bytes.
        Err(_) if existing(layout, digest).is_some() => {
            remove_snapshot_dir(&temp);
            Ok(target)
        }
        Err(e) => {
            remove_snapshot_dir(&temp);
            Err(io("move the snapshot to", &target)(e))
        }
    }
}

/// Copy `source_root`'s tree into `temp`, check the copy's digest, make it
/// read-only and durable.
fn build(source_root: &Path, temp: &Path, digest: &str) -> Result<(), SnapshotError> {
    let source = module_tree::walk(source_root)?;
    std::fs::create_dir(temp).map_err(io("create", temp))?;
    let mut folders = vec![temp.to_path_buf()];
    for node in &source.nodes {
        let to = temp.join(&node.relative);
        match &node.kind {
            NodeKind::Folder => {
                std::fs::create_dir(&to).map_err(io("create", &to))?;
                folders.push(to);
            }
            NodeKind::File { executable } => {
                copy_file(&node.path, &to)?;
                let mode = if *executable { 0o555 } else { 0o444 };
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))
                    .map_err(io("make read-only", &to))?;
            }
            NodeKind::Link { target } => {
                std::os::unix::fs::symlink(target, &to).map_err(io("link", &to))?;
            }
        }
    }
    let (_, actual) = module_tree::walk_and_digest(temp)?;
    if actual != digest {
        return Err(SnapshotError::Changed {
            source_root: source_root.to_path_buf(),
            expected: digest.to_owned(),
            actual,
        });
    }
    // Deepest first, so each folder is synced and closed after its contents.
    for folder in folders.iter().rev() {
        std::fs::File::open(folder)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", folder))?;
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o555))
            .map_err(io("make read-only", folder))?;
    }
    Ok(())
}

/// Copy one file's bytes (never through a symlink), fsynced.
fn copy_file(from: &Path, to: &Path) -> Result<(), SnapshotError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut source = std::fs::File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(from)
        .map_err(io("read", from))?;
    let mut target = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(io("create", to))?;
    std::io::copy(&mut source, &mut target).map_err(io("copy", from))?;
    target.sync_all().map_err(io("sync", to))
}

/// Remove every snapshot that no pin record of the home names; returns the
/// folders removed. The caller holds the home's lock (`_lock`), so no pin is
/// written meanwhile. Best effort: a snapshot that cannot be removed stays,
/// and nothing is removed when pins.json cannot be read.
pub(crate) fn remove_unused(layout: &HomeLayout, _lock: &HomeLock) -> Vec<PathBuf> {
    let pins = match crate::pins::Pins::load(layout.root()) {
        Ok(pins) => pins,
        Err(e) => {
            tracing::warn!("unused snapshots are kept: {e}");
            return Vec::new();
        }
    };
    let in_use: BTreeSet<&str> = pins.records().map(|r| r.digest.as_str()).collect();
    let Ok(entries) = std::fs::read_dir(layout.snapshots_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(digest) = name.to_str().filter(|n| is_hex_digest(n)) else {
            continue;
        };
        // The entry itself, not what a link would point at.
        if in_use.contains(digest) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        remove_snapshot_dir(&dir);
        if std::fs::symlink_metadata(&dir).is_err() {
            removed.push(dir);
        } else {
            tracing::warn!("could not remove the unused snapshot {}", dir.display());
        }
    }
    removed
}

/// Remove a (possibly read-only) snapshot folder; best effort. Each folder
/// is made writable through a descriptor opened without following links, so
/// a link planted in the tree is removed, never followed.
fn remove_snapshot_dir(dir: &Path) {
    fn writable(dir: BorrowedFd<'_>) {
        let _ = rustix::fs::fchmod(dir, Mode::from_raw_mode(0o700));
        let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
            return;
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let is_dir = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
            if is_dir && let Ok(child) = open_folder(dir, name) {
                writable(child.as_fd());
            }
        }
    }
    if let Ok(top) = rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        writable(top.as_fd());
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn open_folder(parent: BorrowedFd<'_>, name: &std::ffi::CStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn is_hex_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_snapshot_holds_exactly_the_tree_read_only_and_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let module = dir.path().join("modules/m");
        write(&module.join("m"), "#!/bin/sh\n", 0o755);
        write(&module.join("lib/helper.sh"), "echo v1\n", 0o644);
        std::os::unix::fs::symlink("lib/helper.sh", module.join("h")).unwrap();
        std::fs::write(module.join(".disabled"), "").unwrap();
        let (_, digest) = module_tree::walk_and_digest(&module).unwrap();

        let snapshot = ensure(&layout, &module, &digest).unwrap();
        assert_eq!(snapshot, dir.path().join("cache/snapshots").join(&digest));
        assert_eq!(module_tree::walk_and_digest(&snapshot).unwrap().1, digest);
        assert!(!snapshot.join(".disabled").exists(), "only the tree");
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&snapshot.join("m")), 0o555);
        assert_eq!(mode(&snapshot.join("lib/helper.sh")), 0o444);
        assert_eq!(mode(&snapshot.join("lib")), 0o555);
        assert_eq!(mode(&snapshot), 0o555);

        // The folder changes: the snapshot of the approved digest does not.
        write(&module.join("lib/helper.sh"), "echo v2\n", 0o644);
        assert_eq!(ensure(&layout, &module, &digest).unwrap(), snapshot);
        assert_eq!(
            std::fs::read_to_string(snapshot.join("lib/helper.sh")).unwrap(),
            "echo v1\n"
        );
        let leftovers: Vec<_> = std::fs::read_dir(layout.snapshots_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp folder left: {leftovers:?}");
    }

    #[test]
    fn a_tree_that_is_not_the_approved_one_is_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let module = dir.path().join("modules/m");
        write(&module.join("m"), "#!/bin/sh\n", 0o755);
        let (_, approved) = module_tree::walk_and_digest(&module).unwrap();
        write(&module.join("m"), "#!/bin/sh\necho swapped\n", 0o755);
        let err = ensure(&layout, &module, &approved).unwrap_err();
        assert!(matches!(err, SnapshotError::Changed { .. }), "{err}");
        assert!(existing(&layout, &approved).is_none());
        assert_eq!(
            std::fs::read_dir(layout.snapshots_dir()).unwrap().count(),
            0,
            "the temp copy is gone"
        );
    }

    #[test]
    fn setuid_and_setgid_bits_never_reach_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let module = dir.path().join("modules/m");
        write(&module.join("m"), "#!/bin/sh\n", 0o6755);
        write(&module.join("data"), "x", 0o2644);
        let (_, digest) = module_tree::walk_and_digest(&module).unwrap();
        let snapshot = ensure(&layout, &module, &digest).unwrap();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&snapshot.join("m")), 0o555);
        assert_eq!(mode(&snapshot.join("data")), 0o444);
    }

    #[test]
    fn unused_snapshots_are_removed_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path().join("home"));
        let outside = dir.path().join("outside");
        write(&outside.join("keep.txt"), "not the host's", 0o444);
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o555)).unwrap();
        let mut digests = Vec::new();
        for name in ["a", "b"] {
            let module = layout.modules_dir().join(name);
            write(&module.join(name), &format!("#!/bin/sh\n# {name}\n"), 0o755);
            write(&module.join("lib/x"), name, 0o644);
            let (_, digest) = module_tree::walk_and_digest(&module).unwrap();
            ensure(&layout, &module, &digest).unwrap();
            digests.push(digest);
        }
        // A link planted in the unused snapshot (as if its tree held one).
        let unused = snapshot_dir(&layout, &digests[1]);
        std::fs::set_permissions(unused.join("lib"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink(&outside, unused.join("lib/out")).unwrap();
        std::fs::set_permissions(unused.join("lib"), std::fs::Permissions::from_mode(0o555))
            .unwrap();
        // A snapshot being built and a stray link in the store stay.
        std::fs::create_dir(layout.snapshots_dir().join(".tmp-building")).unwrap();
        let lock = HomeLock::acquire(layout.root()).unwrap();
        let a = descriptor_for("a");
        crate::pins::Pins::load_locked(layout.root(), &lock)
            .unwrap()
            .pin(crate::pins::PinRecord::new(&a, &digests[0], None))
            .unwrap();

        let removed = remove_unused(&layout, &lock);
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert_eq!(removed[0], unused);
        assert!(!unused.exists());
        assert!(
            existing(&layout, &digests[0]).is_some(),
            "the pinned one stays"
        );
        assert!(layout.snapshots_dir().join(".tmp-building").exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
            "not the host's"
        );
        assert_eq!(
            std::fs::symlink_metadata(&outside).unwrap().mode() & 0o777,
            0o555,
            "a folder behind a link is not made writable"
        );

        // Unreadable pins: nothing is removed.
        std::fs::write(layout.root().join("pins.json"), "{ not json").unwrap();
        assert!(remove_unused(&layout, &lock).is_empty());
        assert!(existing(&layout, &digests[0]).is_some());
    }

    fn descriptor_for(id: &str) -> modproto::Descriptor {
        serde_json::from_value(serde_json::json!({
            "id": id, "version": "1.0.0", "capabilities": []
        }))
        .unwrap()
    }

    #[test]
    fn a_bare_executable_snapshot_holds_only_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        write(&dir.path().join("modules/loose"), "#!/bin/sh\n", 0o755);
        write(&dir.path().join("modules/neighbour"), "secret", 0o644);
        let bare = dir.path().join("modules/loose");
        let (_, digest) = module_tree::walk_and_digest(&bare).unwrap();
        let snapshot = ensure(&layout, &bare, &digest).unwrap();
        let names: Vec<_> = std::fs::read_dir(&snapshot)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["loose"]);
    }
}
