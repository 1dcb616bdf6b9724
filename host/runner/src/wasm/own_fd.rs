//! A path that opens one of this process's descriptors, for APIs that take
//! a path where the host holds a descriptor: wasmtime maps a compiled
//! component from a path (`sealed.rs`), and wasmtime-wasi preopens a grant's
//! folder from a path (`grant_dir.rs`).
//!
//! The path is `/proc/self/fd/N`, handed out only once `/proc/self/fd` is
//! checked to be procfs's and the path to open the very inode the
//! descriptor is: not a directory that merely looks like it (a filesystem
//! mounted over it, holding something else under the same number).

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::PROC_SUPER_MAGIC;

/// Where this process reaches its own descriptors by path.
const OWN_FDS: &str = "/proc/self/fd";

/// `/proc/self/fd/N` for `fd`, valid while `fd` is open, once checked.
pub(super) fn verified_path(fd: impl AsFd) -> std::io::Result<PathBuf> {
    verified_path_in(fd, Path::new(OWN_FDS))
}

pub(super) fn verified_path_in(fd: impl AsFd, own_fds: &Path) -> std::io::Result<PathBuf> {
    let refused = |why: &str| std::io::Error::other(format!("{}: {why}", own_fds.display()));
    if rustix::fs::statfs(own_fds)?.f_type != PROC_SUPER_MAGIC {
        return Err(refused("not procfs"));
    }
    let fd = fd.as_fd();
    let path = own_fds.join(fd.as_raw_fd().to_string());
    if !opens_the_same_inode(&path, fd)? {
        return Err(refused("does not lead to the descriptor's inode"));
    }
    Ok(path)
}

/// Whether `path` opens the inode `fd` is.
pub(super) fn opens_the_same_inode(path: &Path, fd: impl AsFd) -> std::io::Result<bool> {
    let there = std::fs::metadata(path)?;
    let here = rustix::fs::fstat(fd)?;
    Ok((there.dev(), there.ino()) == (here.st_dev, here.st_ino))
}
