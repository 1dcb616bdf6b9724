//! A module's files as one digest: what a pin approves and a snapshot holds.
//!
//! A module is rarely one file: a script runs helpers beside it, an archive
//! brings shared libraries, interpreter code, data. Approving only the entry
//! executable would let every other file change behind the approval, so the
//! unit of trust is the module's whole tree:
//!
//! - **A folder module** (`modules/<id>/`) is every file, folder and link
//!   beneath the folder, except the top-level `.disabled` marker (disabling
//!   is the operator's switch, not a change of what runs).
//! - **A bare executable** (`modules/<name>`) is a tree of one file, named as
//!   it is named. The folder itself is not part of the digest, so the same
//!   file moved into `modules/<name>/<name>` (enable/disable do that) keeps its
//!   digest, and a snapshot folder holding only that file digests the same.
//!
//! The digest is blake3 over the entries in byte order of their relative
//! names: for a file its name, whether it is executable (the only mode bit
//! that changes what runs; install reduces modes to 0755/0644 anyway) and the
//! blake3 of its contents; for a folder its name; for a symlink its name and
//! target. Symlinks are recorded as links, never followed, and only a
//! relative link that stays inside the tree is accepted: a link out of the
//! folder would make the approval cover bytes the module does not own. Other
//! file types (fifos, devices, sockets) are refused.
//!
//! [`TreeState`] is the cheap side: the `lstat` identity ([`FileIdentity`]) of
//! the root and of every entry, taken while walking. Adding, removing or
//! renaming an entry changes its folder's identity; writing a file changes
//! the file's. So "nothing changed since the digest" is one `lstat` per entry,
//! which is what lets a long-running host check a module on every call.

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::home::DISABLED_MARKER;
use modhost_runner::file_identity::{FileIdentity, Glance};

/// Why a module's tree could not be digested.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{link} is a symlink to {target:?}, which points outside the module's folder; a module may only link to its own files (copy the file into the module instead)"
    )]
    LinkOutside { link: PathBuf, target: PathBuf },
    #[error(
        "{path} is not a regular file, folder or symlink; remove it from the module (only those are installed)"
    )]
    Special { path: PathBuf },
}

/// What one entry of a tree is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Folder,
    File { executable: bool },
    Link { target: PathBuf },
}

/// One entry of a module's tree.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// Relative to the tree's root (for a bare file: its file name).
    pub relative: PathBuf,
    /// Where it is on disk now.
    pub path: PathBuf,
    pub kind: NodeKind,
}

/// A walked tree: its entries in digest order, and their identities.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub nodes: Vec<Node>,
    pub state: TreeState,
}

/// The identities of a tree's root and entries when it was walked: the
/// root's by `stat` (a root may be a link to a development folder,
/// and what counts is what it leads to, as for the digest), every entry
/// beneath it by `lstat` (links beneath are recorded as links).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TreeState {
    entries: Vec<(PathBuf, FileIdentity)>,
}

impl TreeState {
    /// The identity the walk took of the tree's root (where a link given as
    /// the root led).
    pub(crate) fn root_identity(&self) -> Option<&FileIdentity> {
        self.entries.first().map(|(_, identity)| identity)
    }

    /// Whether every entry still has the identity it had (one `stat` of the
    /// root, one `lstat` of each entry beneath). `false` means "look again",
    /// not necessarily "changed": the caller digests the tree to know. The
    /// root's identity is read from `glance` when the call already took it
    /// (also by `stat`) with the very identity recorded (dev, inode, size
    /// and both times equal is as strong as a `stat` of the same path
    /// agreeing); anything else is looked at now.
    pub(crate) fn still_matches(&self, glance: &Glance) -> bool {
        self.entries
            .iter()
            .enumerate()
            .all(|(at, (path, identity))| {
                let now = if at == 0 {
                    if glance.glanced(path) == Some(*identity) {
                        return true;
                    }
                    std::fs::metadata(path)
                } else {
                    std::fs::symlink_metadata(path)
                };
                now.is_ok_and(|m| FileIdentity::of(&m) == *identity)
            })
    }

    /// Whether every entry had last changed at least [`modhost_runner::file_identity::RACY`]
    /// before `at`, so this state can vouch for a digest taken at `at`.
    pub(crate) fn settled_at(&self, at: SystemTime) -> bool {
        self.entries
            .iter()
            .all(|(_, identity)| identity.settled_at(at))
    }
}

/// Walk the tree at `root`: a folder (everything beneath it) or one file.
/// Reads no file contents.
pub(crate) fn walk(root: &Path) -> Result<Tree, TreeError> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeError::Read { path, source }
    };
    let meta = std::fs::metadata(root).map_err(read(root))?;
    let mut nodes = Vec::new();
    let mut entries = Vec::new();
    if meta.is_dir() {
        // The root is followed (modules/<id> may be a symlinked development
        // folder); everything beneath it is not. A linked root is resolved
        // once and walked where it leads, its identity taken there: a link
        // pointed elsewhere during the walk cannot pair one folder's
        // identity with another's entries, and a later check (a `stat` of
        // the link) sees that it moved.
        let linked = std::fs::symlink_metadata(root)
            .map_err(read(root))?
            .file_type()
            .is_symlink();
        let (folder, meta) = if linked {
            let folder = std::fs::canonicalize(root).map_err(read(root))?;
            let meta = std::fs::metadata(&folder).map_err(read(&folder))?;
            (folder, meta)
        } else {
            (root.to_path_buf(), meta)
        };
        if !meta.is_dir() {
            let changed = std::io::Error::other("it changed while it was read");
            return Err(read(root)(changed));
        }
        entries.push((root.to_path_buf(), FileIdentity::of(&meta)));
        walk_folder(&folder, &folder, &mut nodes, &mut entries)?;
    } else {
        let name = root.file_name().map(PathBuf::from).unwrap_or_default();
        entries.push((root.to_path_buf(), FileIdentity::of(&meta)));
        nodes.push(Node {
            relative: name,
            path: root.to_path_buf(),
            kind: NodeKind::File {
                executable: meta.permissions().mode() & 0o111 != 0,
            },
        });
    }
    nodes.sort_by(|a, b| {
        a.relative
            .as_os_str()
            .as_encoded_bytes()
            .cmp(b.relative.as_os_str().as_encoded_bytes())
    });
    Ok(Tree {
        nodes,
        state: TreeState { entries },
    })
}

fn walk_folder(
    root: &Path,
    folder: &Path,
    nodes: &mut Vec<Node>,
    entries: &mut Vec<(PathBuf, FileIdentity)>,
) -> Result<(), TreeError> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeError::Read { path, source }
    };
    for entry in std::fs::read_dir(folder).map_err(read(folder))? {
        let entry = entry.map_err(read(folder))?;
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        if folder == root && entry.file_name() == DISABLED_MARKER {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).map_err(read(&path))?;
        entries.push((path.clone(), FileIdentity::of(&meta)));
        let kind = if meta.is_dir() {
            walk_folder(root, &path, nodes, entries)?;
            NodeKind::Folder
        } else if meta.is_file() {
            NodeKind::File {
                executable: meta.permissions().mode() & 0o111 != 0,
            }
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(read(&path))?;
            if !stays_inside(root, &relative, &target) {
                return Err(TreeError::LinkOutside { link: path, target });
            }
            NodeKind::Link { target }
        } else {
            return Err(TreeError::Special { path });
        };
        nodes.push(Node {
            relative,
            path,
            kind,
        });
    }
    Ok(())
}

/// Whether a link at `link` (relative to `root`) to `target` resolves
/// beneath the root. Checked lexically, which is only sound when no `..`
/// climbs out of a component that is itself a link: with `d -> .`, the
/// target `d/d/../../secret` is `secret` lexically but two folders above the
/// root physically. So a `..` that would leave a symlink is refused; every
/// other link in the tree is checked the same way, so links through links
/// stay inside too.
fn stays_inside(root: &Path, link: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: Vec<&std::ffi::OsStr> = link
        .parent()
        .map(|p| {
            p.components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for component in target.components() {
        match component {
            Component::Normal(name) => depth.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                let below: PathBuf = depth.iter().collect();
                let leaves_a_link = std::fs::symlink_metadata(root.join(&below))
                    .is_ok_and(|m| m.file_type().is_symlink());
                if leaves_a_link || depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// The tree digest (blake3, hex) of `tree`'s entries, reading every file.
pub(crate) fn digest(tree: &Tree) -> Result<String, TreeError> {
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"modhost-tree-v1\0");
    for node in &tree.nodes {
        let name = node.relative.as_os_str().as_encoded_bytes();
        match &node.kind {
            NodeKind::Folder => {
                hasher.update(b"d");
                hasher.update(name);
                hasher.update(b"\0");
            }
            NodeKind::File { executable } => {
                hasher.update(b"f");
                hasher.update(name);
                hasher.update(b"\0");
                hasher.update(if *executable { b"x" } else { b"-" });
                let contents = digest_file(&node.path).map_err(|source| TreeError::Read {
                    path: node.path.clone(),
                    source,
                })?;
                hasher.update(contents.as_bytes());
            }
            NodeKind::Link { target } => {
                hasher.update(b"l");
                hasher.update(name);
                hasher.update(b"\0");
                hasher.update(target.as_os_str().as_encoded_bytes());
                hasher.update(b"\0");
            }
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Walk and digest the tree at `root` in one go.
pub(crate) fn walk_and_digest(root: &Path) -> Result<(Tree, String), TreeError> {
    #[cfg(test)]
    DIGESTS_ON_THIS_THREAD.with(|count| count.set(count.get() + 1));
    let tree = walk(root)?;
    let digest = digest(&tree)?;
    Ok((tree, digest))
}

#[cfg(test)]
thread_local! {
    /// How many trees this thread digested: what lets a test tell a check
    /// that only looked at identities from one that read every file.
    pub(crate) static DIGESTS_ON_THIS_THREAD: std::cell::Cell<usize> =
        const { std::cell::Cell::new(0) };
}

/// The blake3 of one file's contents, never following a symlink.
fn digest_file(path: &Path) -> std::io::Result<blake3::Hash> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(file)?;
    Ok(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn digest_of(root: &Path) -> String {
        walk_and_digest(root).unwrap().1
    }

    #[test]
    fn every_file_name_mode_and_content_counts_but_the_disabled_marker_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m");
        write(&m.join("m"), "#!/bin/sh\n", 0o755);
        write(&m.join("lib/helper.sh"), "echo v1\n", 0o644);
        let first = digest_of(&m);

        write(&m.join("lib/helper.sh"), "echo v2\n", 0o644);
        let content = digest_of(&m);
        assert_ne!(content, first, "a helper's content");

        write(&m.join("lib/helper.sh"), "echo v1\n", 0o755);
        assert_ne!(digest_of(&m), first, "a helper's executable bit");

        write(&m.join("lib/helper.sh"), "echo v1\n", 0o644);
        assert_eq!(digest_of(&m), first, "restored");

        std::fs::write(m.join(".disabled"), "").unwrap();
        assert_eq!(digest_of(&m), first, "disabling changes nothing that runs");

        std::fs::rename(m.join("lib/helper.sh"), m.join("lib/other.sh")).unwrap();
        assert_ne!(digest_of(&m), first, "a name");
    }

    #[test]
    fn a_bare_file_digests_like_a_folder_holding_only_it() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("bare/loose"), "#!/bin/sh\n", 0o755);
        write(&dir.path().join("folder/loose"), "#!/bin/sh\n", 0o755);
        write(&dir.path().join("other/other"), "#!/bin/sh\n", 0o755);
        let bare = digest_of(&dir.path().join("bare/loose"));
        assert_eq!(bare, digest_of(&dir.path().join("folder")));
        assert_ne!(
            bare,
            digest_of(&dir.path().join("other")),
            "the same bytes under another name are another tree"
        );
    }

    #[test]
    fn a_link_inside_is_recorded_and_a_link_outside_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m");
        write(&m.join("m"), "#!/bin/sh\n", 0o755);
        write(&m.join("lib/real.sh"), "x", 0o644);
        std::os::unix::fs::symlink("lib/real.sh", m.join("alias.sh")).unwrap();
        std::os::unix::fs::symlink("../real.sh", m.join("lib/up.sh")).unwrap();
        let tree = walk(&m).unwrap();
        assert!(tree.nodes.iter().any(
            |n| matches!(&n.kind, NodeKind::Link { target } if target == Path::new("lib/real.sh"))
        ));

        std::os::unix::fs::symlink("../../secret", m.join("lib/escape")).unwrap();
        let err = walk(&m).unwrap_err();
        assert!(matches!(err, TreeError::LinkOutside { .. }), "{err}");
        assert!(
            err.to_string().contains("outside the module's folder"),
            "{err}"
        );
        std::fs::remove_file(m.join("lib/escape")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", m.join("abs")).unwrap();
        assert!(matches!(walk(&m), Err(TreeError::LinkOutside { .. })));
    }

    /// Red team: `d -> .` stays inside, and `x -> d/d/../../secret` is
    /// `secret` lexically, yet resolves two folders above the module
    /// (physically `./. /../../secret`): in the snapshot store that is
    /// `cache/secret`, one more `d/..` reaches the home.
    #[test]
    fn a_link_climbing_out_through_a_link_to_the_folder_itself_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "host secret").unwrap();
        let m = dir.path().join("modules/m");
        write(&m.join("m"), "#!/bin/sh\n", 0o755);
        std::os::unix::fs::symlink(".", m.join("d")).unwrap();
        std::os::unix::fs::symlink("d/d/../../secret", m.join("x")).unwrap();
        assert_eq!(
            std::fs::read_to_string(m.join("x")).unwrap(),
            "host secret",
            "the link does reach outside"
        );
        let err = walk(&m).unwrap_err();
        assert!(matches!(err, TreeError::LinkOutside { .. }), "{err}");

        // The same through a link to a parent folder deeper in the tree.
        std::fs::remove_file(m.join("x")).unwrap();
        std::fs::create_dir_all(m.join("a")).unwrap();
        std::os::unix::fs::symlink("..", m.join("a/up")).unwrap();
        std::os::unix::fs::symlink("a/up/../../secret", m.join("y")).unwrap();
        assert_eq!(std::fs::read_to_string(m.join("y")).unwrap(), "host secret");
        assert!(matches!(walk(&m), Err(TreeError::LinkOutside { .. })));
    }

    /// A module folder linked into `modules/` (a development folder): its
    /// state holds while nothing changed, so a long-running host checks it
    /// with `stat`s rather than a digest per call, and notices the link
    /// being pointed elsewhere.
    #[test]
    fn the_state_of_a_linked_root_follows_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        write(&src.join("m"), "#!/bin/sh\n", 0o755);
        let folder = dir.path().join("linked-folder");
        std::os::unix::fs::symlink(&src, &folder).unwrap();
        let state = walk(&folder).unwrap().state;
        assert!(state.still_matches(&Glance::default()), "nothing changed");
        let copy = dir.path().join("copy");
        write(&copy.join("m"), "#!/bin/sh\n", 0o755);
        std::fs::remove_file(&folder).unwrap();
        std::os::unix::fs::symlink(&copy, &folder).unwrap();
        assert!(
            !state.still_matches(&Glance::default()),
            "pointed elsewhere"
        );
    }

    /// A link pointed back and forth between two folders while the tree is
    /// walked: every walk records the identity of the folder whose entries
    /// it recorded (here: folder `a` holds one file more than `b`).
    #[test]
    fn a_linked_root_pointed_elsewhere_during_the_walk_never_mixes_two_folders() {
        use std::os::unix::fs::MetadataExt;
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        write(&a.join("m"), "#!/bin/sh\n", 0o755);
        write(&a.join("extra"), "more\n", 0o644);
        std::fs::create_dir_all(&b).unwrap();
        std::fs::hard_link(a.join("m"), b.join("m")).unwrap();
        let a_ino = std::fs::metadata(&a).unwrap().ino();
        let link = dir.path().join("linked");
        std::os::unix::fs::symlink(&b, &link).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, link, dir) = (stop.clone(), link.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let temporary = dir.join("next-link");
                let mut to_a = true;
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::remove_file(&temporary);
                    let target = dir.join(if to_a { "a" } else { "b" });
                    std::os::unix::fs::symlink(target, &temporary).unwrap();
                    std::fs::rename(&temporary, &link).unwrap();
                    to_a = !to_a;
                }
            })
        };
        let started = std::time::Instant::now();
        let mut walks = 0;
        while walks < 2_000 && started.elapsed() < std::time::Duration::from_secs(5) {
            let Ok(tree) = walk(&link) else { continue };
            walks += 1;
            let root_is_a = tree.state.entries[0].1.ino == a_ino;
            let files = tree.nodes.len();
            if root_is_a != (files == 2) {
                stop.store(true, Ordering::Relaxed);
                panic!("walk {walks}: root of a: {root_is_a}, {files} files recorded");
            }
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(walks > 100, "only {walks} walks");
    }

    #[test]
    fn the_state_notices_a_write_an_added_file_and_a_removed_one() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m");
        write(&m.join("m"), "#!/bin/sh\n", 0o755);
        write(&m.join("lib/helper.sh"), "one", 0o644);
        let state = walk(&m).unwrap().state;
        assert!(state.still_matches(&Glance::default()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&m.join("lib/helper.sh"), "two", 0o644);
        assert!(!state.still_matches(&Glance::default()), "a write");

        let state = walk(&m).unwrap().state;
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&m.join("lib/new.sh"), "x", 0o644);
        assert!(!state.still_matches(&Glance::default()), "an added file");

        let state = walk(&m).unwrap().state;
        std::fs::remove_file(m.join("lib/new.sh")).unwrap();
        assert!(!state.still_matches(&Glance::default()), "a removed file");
    }
}
