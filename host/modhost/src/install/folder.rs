//! Installing a module's folder as it is on disk (`modhost install DIR`):
//! the way a module with helper files or knowledge documents is installed
//! without packing it first.
//!
//! The folder is copied, never moved or linked: what is approved is the
//! copy, which the operator's later edits to the source do not reach. The
//! copy follows the rules of a module's tree ([`crate::module_tree`]): a
//! link stays a link and must point inside the folder, a socket or device
//! is refused, and the `.disabled` marker is not carried over.

use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

use crate::module_tree::{self, NodeKind, TreeError};

/// Why a folder could not be copied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FolderError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("{path} changed while it was being copied: {why}; nothing was copied from it")]
    Changed { path: PathBuf, why: String },
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Copy the module folder `source` to `target` (which must not exist),
/// keeping each file's executable bit. On failure `target` may hold part of
/// the copy; the caller's staging folder is removed as a whole.
pub(crate) fn copy_folder(source: &Path, target: &Path) -> Result<(), FolderError> {
    let tree = module_tree::walk(source)?;
    copy_tree(source, &tree, target)
}

/// Copy what `walk` found under `source`. Each file is opened beneath the
/// folder through no link (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`) and
/// must still be a regular file: the folder may be one a module writes (a
/// workspace), and a file swapped for a link after the walk would
/// otherwise have the host, which can read what no module may, copy the
/// link's target into the module it installs.
fn copy_tree(source: &Path, tree: &module_tree::Tree, target: &Path) -> Result<(), FolderError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| FolderError::Io {
            action,
            path,
            source,
        }
    };
    let root = rustix::fs::open(
        source,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io("open", source)(e.into()))?;
    // The folder opened is the folder walked, not another put in its place.
    let opened = rustix::fs::fstat(&root).map_err(|e| io("read", source)(e.into()))?;
    if tree
        .state
        .root_identity()
        .is_none_or(|walked| (walked.dev, walked.ino) != (opened.st_dev, opened.st_ino))
    {
        return Err(FolderError::Changed {
            path: source.to_path_buf(),
            why: "another folder was put in its place after it was read".into(),
        });
    }
    std::fs::create_dir_all(target).map_err(io("create", target))?;
    // Walked in name order, so a folder comes before what it holds.
    for node in &tree.nodes {
        let to = target.join(&node.relative);
        match &node.kind {
            NodeKind::Folder => std::fs::create_dir_all(&to).map_err(io("create", &to))?,
            NodeKind::File { executable } => {
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
                }
                let mut from = open_beneath(&root, &node.relative).map_err(|e| {
                    FolderError::Changed {
                        path: node.path.clone(),
                        why: format!("it can no longer be opened as a file of the folder without following a link ({e})"),
                    }
                })?;
                if !from.metadata().map_err(io("read", &node.path))?.is_file() {
                    return Err(FolderError::Changed {
                        path: node.path.clone(),
                        why: "it is no longer a regular file".into(),
                    });
                }
                let mode = if *executable { 0o755 } else { 0o644 };
                let mut copy = std::fs::File::options()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&to)
                    .map_err(io("create", &to))?;
                std::io::copy(&mut from, &mut copy).map_err(io("copy", &node.path))?;
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))
                    .map_err(io("set the mode of", &to))?;
            }
            NodeKind::Link { target: link } => {
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(io("create", parent))?;
                }
                std::os::unix::fs::symlink(link, &to).map_err(io("link", &to))?;
            }
        }
    }
    Ok(())
}

/// `relative` opened for reading beneath `root`, through no link of any kind;
/// without blocking (a FIFO swapped in would otherwise hold the open until
/// someone writes it; the caller refuses anything but a regular file, whose
/// reads `O_NONBLOCK` does not change).
fn open_beneath(root: &OwnedFd, relative: &Path) -> std::io::Result<std::fs::File> {
    let fd = rustix::fs::openat2(
        root,
        relative,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_out_of_the_folder_is_refused_and_modes_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("m");
        std::fs::create_dir_all(source.join("knowledge")).unwrap();
        std::fs::write(source.join("m"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(source.join("m"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(source.join("knowledge/a.md"), "a").unwrap();
        copy_folder(&source, &dir.path().join("copy")).unwrap();
        let mode = std::fs::metadata(dir.path().join("copy/m"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        assert_eq!(
            std::fs::read(dir.path().join("copy/knowledge/a.md")).unwrap(),
            b"a"
        );

        std::os::unix::fs::symlink("/etc/passwd", source.join("secret")).unwrap();
        let err = copy_folder(&source, &dir.path().join("copy2")).unwrap_err();
        assert!(matches!(err, FolderError::Tree(_)), "{err}");
    }

    /// The attack: a file of the folder replaced, after the walk, by a link
    /// to a file the host can read and no module may (or its folder by a
    /// link to another folder). The copy refuses it and holds nothing of
    /// the link's target.
    #[test]
    fn a_file_swapped_for_a_link_after_the_walk_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("a.md"), "the host's secret").unwrap();
        let source = dir.path().join("m");
        std::fs::create_dir_all(source.join("knowledge")).unwrap();
        std::fs::write(source.join("m"), "#!/bin/sh\n").unwrap();
        std::fs::write(source.join("knowledge/a.md"), "a").unwrap();
        let swaps: [(&str, &dyn Fn()); 3] = [
            ("a file", &|| {
                std::fs::remove_file(source.join("knowledge/a.md")).unwrap();
                std::os::unix::fs::symlink(secret.join("a.md"), source.join("knowledge/a.md"))
                    .unwrap();
            }),
            ("its folder", &|| {
                std::fs::remove_dir_all(source.join("knowledge")).unwrap();
                std::os::unix::fs::symlink(&secret, source.join("knowledge")).unwrap();
            }),
            // Nobody writes it: an open that waited would hang the install.
            ("a FIFO", &|| {
                std::fs::remove_file(source.join("knowledge/a.md")).unwrap();
                modhost_test_support::modules::make_fifo(&source.join("knowledge/a.md"), 0o600);
            }),
        ];
        for (i, (what, swap)) in swaps.into_iter().enumerate() {
            let tree = module_tree::walk(&source).unwrap();
            swap();
            let copy = dir.path().join(format!("copy{i}"));
            // On its own thread: a copy that waited on the FIFO fails here.
            let (done, copied) = std::sync::mpsc::channel();
            let (from, to) = (source.clone(), copy.clone());
            std::thread::spawn(move || done.send(copy_tree(&from, &tree, &to)));
            let err = copied
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("{what}: the copy waited"))
                .unwrap_err();
            assert!(matches!(err, FolderError::Changed { .. }), "{what}: {err}");
            let copied = std::fs::read_to_string(copy.join("knowledge/a.md")).unwrap_or_default();
            assert!(!copied.contains("secret"), "{what}: the link was followed");
            // Put the folder back as it was for the next swap.
            let _ = std::fs::remove_file(source.join("knowledge"));
            let _ = std::fs::remove_file(source.join("knowledge/a.md"));
            std::fs::create_dir_all(source.join("knowledge")).unwrap();
            std::fs::write(source.join("knowledge/a.md"), "a").unwrap();
        }
    }

    /// The folder itself swapped after the walk for another holding the
    /// same names (here a copy with other bytes): nothing is copied.
    #[test]
    fn a_folder_swapped_after_the_walk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("m");
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("m"), "#!/bin/sh\n").unwrap();
        let tree = module_tree::walk(&source).unwrap();
        std::fs::rename(&source, dir.path().join("walked")).unwrap();
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("m"), "#!/bin/sh\necho other\n").unwrap();
        let copy = dir.path().join("copy");
        let err = copy_tree(&source, &tree, &copy).unwrap_err();
        assert!(matches!(err, FolderError::Changed { .. }), "{err}");
        assert!(!copy.join("m").exists());
    }
}
