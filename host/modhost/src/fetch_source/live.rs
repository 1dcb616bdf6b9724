//! Telling a fetch folder in use from one a killed `modhost` left behind,
//! and removing the latter.
//!
//! A fetch folder (`staging/fetch-<id>/`) is removed when its fetch fails
//! or its [`FetchedSource`](super::FetchedSource) is dropped; a process
//! killed mid-download (`kill -9`, the OOM killer, a power cut) removes
//! nothing, and its partial download (up to `max_download_bytes`) would
//! stay in the home for good, one per killed run.
//!
//! Design decisions:
//! - **A lock, not an age, says "in use".** Each fetch holds `flock(2)` on
//!   its folder's [`MARK`] file for as long as the folder is used; the
//!   kernel drops it when the process ends however it ends. A folder whose
//!   mark can be locked by someone else has no live owner.
//! - **Young folders are left alone**: a folder exists for an instant
//!   before its mark is locked, so only folders older than [`GRACE`] are
//!   examined. Folders without a mark (not a fetch's, or killed in that
//!   instant) are left alone too: only what is known to be a fetch's goes.
//! - **Best effort.** Sweeping is done when a fetch starts; a folder that
//!   cannot be read or removed is left for the next one, never an error.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use rustix::fs::FlockOperation;

/// The file in a fetch folder whose lock says the folder is in use.
pub(super) const MARK: &str = ".fetch-in-use";
/// The prefix of fetch folders' names under `staging/`.
pub(super) const PREFIX: &str = "fetch-";
/// How old a folder must be before it is examined.
const GRACE: Duration = Duration::from_secs(60);

/// The lock held on a fetch folder's mark while the folder is in use.
#[derive(Debug)]
pub(super) struct LiveMark {
    // Closing the file releases the lock.
    _file: File,
}

impl LiveMark {
    /// Create and lock `folder`'s mark.
    pub(super) fn take(folder: &Path) -> std::io::Result<LiveMark> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(folder.join(MARK))?;
        rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
        Ok(LiveMark { _file: file })
    }
}

/// Remove the fetch folders under `root` whose owner is gone.
pub(super) fn sweep_abandoned(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let folder = entry.path();
        let is_fetch = entry.file_name().to_string_lossy().starts_with(PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok())
            .is_some_and(|age| age > GRACE);
        if !is_fetch || !old {
            continue;
        }
        let Ok(mark) = File::options().write(true).open(folder.join(MARK)) else {
            continue;
        };
        if rustix::fs::flock(&mark, FlockOperation::NonBlockingLockExclusive).is_ok() {
            tracing::info!(
                "removing {}: a fetch a killed modhost left behind",
                folder.display()
            );
            let _ = std::fs::remove_dir_all(&folder);
        }
    }
}
