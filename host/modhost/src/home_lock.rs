//! One writer at a time: the exclusive lock on a host home.
//!
//! Every read-modify-write of host state (`pins.json`, the describe cache
//! index, install, remove, enable/disable) holds `HomeLock` for its whole
//! duration: read the current state, change it, write it back. Without it two
//! `modhost pin` commands both read the old `pins.json` and the second rename
//! silently drops the first one's change (a revoked approval stays in force).
//! Readers take no lock: every write is atomic ([`modhost_runner::atomic_file`]), so a
//! reader sees the state before or after a change, never half of one.
//!
//! Design decisions:
//!
//! - **`flock(2)` on `<home>/.lock`** (through rustix): released by the kernel
//!   when the holder exits or crashes, so a killed `modhost` never leaves the
//!   home locked, and there is no stale lock file to clean up.
//! - **Short and never nested.** The lock is taken after any describe or
//!   discovery and only around the change itself; `flock` locks belong to an
//!   open file, so taking it twice in one process would wait forever. Code
//!   that needs the lock across several steps receives the guard
//!   (`&HomeLock`) instead of taking it again.
//! - **Blocking.** Holders are brief (a few file writes), so waiting is
//!   right; a writer never fails merely because another is writing.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use crate::home::HomeLayout;

/// Why the home could not be locked.
#[derive(Debug, thiserror::Error)]
#[error(
    "could not lock the host home ({path}): {source}; check that the home is writable by this user"
)]
pub struct HomeLockError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The exclusive lock on one home, held until dropped.
#[derive(Debug)]
pub(crate) struct HomeLock {
    // Closing the file releases the lock.
    _file: File,
}

impl HomeLock {
    /// Wait for and take the exclusive lock on the home at `home`.
    pub(crate) fn acquire(home: &Path) -> Result<HomeLock, HomeLockError> {
        let path = HomeLayout::new(home).lock_path();
        let error = |source| HomeLockError {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(home).map_err(error)?;
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(error)?;
        loop {
            match rustix::fs::flock(&file, FlockOperation::LockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(error(e.into())),
            }
        }
        Ok(HomeLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_second_holder_waits_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = HomeLock::acquire(dir.path()).unwrap();
        let taken = Arc::new(AtomicBool::new(false));
        let waiter = {
            let home = dir.path().to_path_buf();
            let taken = Arc::clone(&taken);
            std::thread::spawn(move || {
                let _second = HomeLock::acquire(&home).unwrap();
                taken.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!taken.load(Ordering::SeqCst), "taken while held");
        drop(first);
        waiter.join().unwrap();
        assert!(taken.load(Ordering::SeqCst));
    }
}
