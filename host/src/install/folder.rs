//! Installing a module's folder as it is on disk (`modhost install DIR`):
//! the way a module with helper files or knowledge documents is installed
//! without packing it first.
//!
//! The folder is copied, never moved or linked: what is approved is the
//! copy, which the operator's later edits to the source do not reach. The
//! copy follows the rules of a module's tree ([`crate::module_tree`]): a
//! link stays a link and must point inside the folder, a socket or device
//! is refused, and the `.disabled` marker is not carried over.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::module_tree::{self, NodeKind, TreeError};

/// Why a folder could not be copied.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error(transparent)]
    Tree(#[from] TreeError),
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
pub fn copy_folder(source: &Path, target: &Path) -> Result<(), FolderError> {
    let tree = module_tree::walk(source)?;
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| FolderError::Io {
            action,
            path,
            source,
        }
    };
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
                std::fs::copy(&node.path, &to).map_err(io("copy", &node.path))?;
                let mode = if *executable { 0o755 } else { 0o644 };
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
}
