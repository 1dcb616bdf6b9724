//! Mounts for the crate's tests. The tests run as root, as CI does: a
//! mount that fails fails the test rather than skip it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A mount, undone (lazily) when dropped.
#[derive(Debug)]
pub struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Bind-mount `source` on `target` (both existing directories).
pub fn bind(source: &Path, target: &Path) -> Mounted {
    mount(&["--bind".as_ref(), source.as_os_str()], target)
}

/// Mount an empty `tmpfs` on the existing directory `target`.
pub fn tmpfs(target: &Path) -> Mounted {
    mount(&["-t", "tmpfs", "tmpfs"].map(OsStr::new), target)
}

/// Move the mount at `from` onto `to` (`mount --move`); the guard undoes
/// the mount at `to`.
pub fn move_mount(from: &Path, to: &Path) -> Mounted {
    mount(&["--move".as_ref(), from.as_os_str()], to)
}

/// Mount a `proc` filesystem on the existing directory `target`.
pub fn proc(target: &Path) -> Mounted {
    mount(&["-t", "proc", "proc"].map(OsStr::new), target)
}

fn mount(args: &[&OsStr], target: &Path) -> Mounted {
    let mounted = std::process::Command::new("mount")
        .args(args)
        .arg(target)
        .status()
        .expect("run mount");
    assert!(
        mounted.success(),
        "mount {args:?} {} (the tests run as root)",
        target.display()
    );
    Mounted(target.to_path_buf())
}
