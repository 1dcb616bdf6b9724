//! A grant's folder for a component's preopen, reached through no symbolic
//! link.
//!
//! wasmtime-wasi preopens a folder by path, following links. A grant's path
//! is canonical and was checked by the host before the call (it overlaps no
//! modhost home), so a link in it now was swapped in since by someone
//! writing beside it (another call's module, writing an enclosing root),
//! and following it would hand the guest wherever it points. So the folder
//! is opened here with `RESOLVE_NO_SYMLINKS`, and the preopen is given the
//! path of that very descriptor ([`own_fd::verified_path`]).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};

use super::own_fd;

/// A grant's folder, open.
pub(super) struct GrantDir(OwnedFd);

impl GrantDir {
    /// The folder at `host`, opened through no symbolic link.
    pub(super) fn open(host: &Path) -> Result<GrantDir, String> {
        rustix::fs::openat2(
            CWD,
            host,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map(GrantDir)
        .map_err(|errno| match errno {
            rustix::io::Errno::LOOP => "a symbolic link stands in the granted path now, swapped in since the host checked it; the call was not run".to_owned(),
            other => std::io::Error::from(other).to_string(),
        })
    }

    /// A path that opens this folder, valid while `self` lives.
    pub(super) fn path(&self) -> Result<PathBuf, String> {
        own_fd::verified_path(&self.0).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attack: between the host's check and the call, the granted path
    /// (or a folder on it) is swapped for a link to a folder the call must
    /// not get. The preopen is refused; a real folder is opened as itself.
    #[test]
    fn a_link_swapped_into_a_granted_path_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let (granted, elsewhere) = (dir.join("granted"), dir.join("elsewhere"));
        std::fs::create_dir_all(elsewhere.join("inner")).unwrap();
        std::fs::create_dir(&granted).unwrap();
        let folder = GrantDir::open(&granted).unwrap();
        let path = folder.path().unwrap();
        assert!(own_fd::opens_the_same_inode(&path, &folder.0).unwrap());
        assert!(own_fd::opens_the_same_inode(&granted, &folder.0).unwrap());

        std::fs::remove_dir(&granted).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &granted).unwrap();
        for swapped in [granted.clone(), granted.join("inner")] {
            let error = GrantDir::open(&swapped)
                .err()
                .expect("opened through a link");
            assert!(error.contains("symbolic link"), "{error}");
        }
    }
}
