//! Bind mounts for the crate's tests. The tests run as root, as CI does: a
//! mount that fails fails the test rather than skip it.

use std::path::{Path, PathBuf};

/// A bind mount, undone (lazily) when dropped.
pub struct BindMount(PathBuf);

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Bind-mount `source` on `target` (both existing directories).
pub fn bind(source: &Path, target: &Path) -> BindMount {
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .arg(source)
        .arg(target)
        .status()
        .expect("run mount");
    assert!(mounted.success(), "bind mount (the tests run as root)");
    BindMount(target.to_path_buf())
}
