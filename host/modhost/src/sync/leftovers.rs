//! What a commit killed between its renames leaves under `modules/`, and
//! the sweep that settles it.
//!
//! A commit (`install`'s, `sync`'s) moves the module it replaces aside to
//! `modules/.<id>.replaced-<request id>` and a pruned one to
//! `modules/.<id>.removed-<request id>`, writes `pins.json`, then deletes
//! the asides, all under the home's lock. A process killed (`kill -9`,
//! power) in between leaves the aside behind: discovery skips dotfiles, so
//! nothing runs it, but nothing deleted it either, and when the kill came
//! between the two renames (or after a prune's move-aside, before
//! `pins.json`), the module's id stands empty while its pin still approves
//! the bytes aside.
//!
//! Design decisions:
//!
//! - **Only under the home's lock.** Every commit holds the lock from its
//!   first rename to its last deletion, so an aside seen by a holder of the
//!   lock belongs to a process that died: a live commit's aside is never
//!   touched.
//! - **`pins.json` is the commit point, so it decides.** An aside whose id
//!   stands empty and whose pin approves exactly its tree (the same tree
//!   digest) is put back: the commit that moved it never happened. Any
//!   other aside (the id taken by the new bytes, or no pin naming these
//!   bytes) is deleted, as the commit would have deleted it. A module
//!   placed with its new bytes before the kill keeps them and its old pin,
//!   which the host refuses to run as changed; the next sync installs it
//!   again.
//! - **Exactly that pattern, never through a link:** a name is swept only
//!   when it is `.` + a module id + `.replaced-` or `.removed-` + a request
//!   id (hexadecimal digits and `-`); a link of that name is removed
//!   itself, never followed, and a folder is removed without following the
//!   links inside it.
//!
//! `sync` sweeps before it plans (a dry run lists what it would sweep and
//! changes nothing); `install` and `remove` sweep before they change the
//! home.

use std::path::{Path, PathBuf};

use crate::home_lock::HomeLock;
use crate::host::{Host, HostError};
use crate::module_id::is_module_id;
use crate::pins::{PinCovers, Pins};

/// The two kinds of aside a commit makes.
const KINDS: [&str; 2] = ["replaced-", "removed-"];

/// One leftover aside: its path and the id it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leftover {
    pub(crate) path: PathBuf,
    pub(crate) id: String,
}

/// The id of a name of exactly the aside pattern (`.<id>.replaced-<request
/// id>`, `.<id>.removed-<request id>`).
fn aside_id(name: &str) -> Option<&str> {
    let rest = name.strip_prefix('.')?;
    let (id, tail) = rest.split_once('.')?;
    let suffix = KINDS.iter().find_map(|kind| tail.strip_prefix(kind))?;
    let request_id =
        !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    (request_id && is_module_id(id)).then_some(id)
}

/// The asides under `modules`, sorted by name.
pub(crate) fn find(modules: &Path) -> Vec<Leftover> {
    let mut found: Vec<Leftover> = std::fs::read_dir(modules)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let id = aside_id(name.to_str()?)?.to_owned();
            Some(Leftover {
                path: entry.path(),
                id,
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

impl Host {
    /// Settle what killed commits left under `modules/` (see the module
    /// docs), under the home's lock; one line per aside settled.
    pub(crate) fn sweep_commit_leftovers(&self) -> Result<Vec<String>, HostError> {
        let modules = self.layout().modules_dir();
        // Nothing to take the lock for (the common case).
        if find(&modules).is_empty() {
            return Ok(Vec::new());
        }
        let lock = HomeLock::acquire(self.home())?;
        let swept = self.sweep_locked(&lock)?;
        if !swept.is_empty() {
            crate::snapshot::remove_unused(self.layout(), &lock);
        }
        Ok(swept)
    }

    fn sweep_locked(&self, lock: &HomeLock) -> Result<Vec<String>, HostError> {
        let layout = self.layout();
        let pins = Pins::load_locked(self.home(), lock)?;
        let mut swept = Vec::new();
        for leftover in find(&layout.modules_dir()) {
            let name = leftover
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Ok(meta) = std::fs::symlink_metadata(&leftover.path) else {
                continue;
            };
            let restorable = meta.is_dir()
                && crate::manage::taken_path(layout, &leftover.id).is_none()
                && pins
                    .get(&leftover.id)
                    .filter(|pin| pin.covers == PinCovers::Tree)
                    .is_some_and(|pin| {
                        crate::module_tree::walk_and_digest(&leftover.path)
                            .is_ok_and(|(_, digest)| digest == pin.digest)
                    });
            if restorable {
                let target = layout.module_dir(&leftover.id);
                std::fs::rename(&leftover.path, &target).map_err(|e| {
                    HostError::io("put back the module left aside at", &leftover.path, e)
                })?;
                swept.push(format!(
                    "modules/{name}: put back as {} (a commit was killed before it took effect; its pin approves these bytes)",
                    leftover.id
                ));
                continue;
            }
            // A link is removed itself; `remove_dir_all` follows no link
            // inside the folder.
            let removed = match meta.is_dir() {
                true => std::fs::remove_dir_all(&leftover.path),
                false => std::fs::remove_file(&leftover.path),
            };
            removed.map_err(|e| {
                HostError::io("remove what a killed commit left at", &leftover.path, e)
            })?;
            swept.push(format!(
                "modules/{name}: removed (left by a commit that was killed)"
            ));
        }
        for line in &swept {
            tracing::info!("{line}");
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_exactly_the_aside_pattern_are_leftovers() {
        for name in [
            ".alpha.replaced-18a2b3c4d5e6f708-1f2e-0",
            ".beta_2.removed-abc-12-3",
        ] {
            assert!(aside_id(name).is_some(), "{name}");
        }
        for name in [
            "alpha",
            ".alpha",
            ".alpha.replaced-",
            ".alpha.replaced-xyz",
            ".alpha.replaced-1/../x",
            ".Alpha.replaced-1",
            ".alpha.renamed-1",
            "alpha.replaced-1",
            "..replaced-1",
            ".alpha.disabled",
        ] {
            assert!(aside_id(name).is_none(), "{name}");
        }
    }
}
