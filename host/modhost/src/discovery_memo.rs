//! A host's last discovery, reused while nothing that decides it changed.
//!
//! [`Host::invoke`](crate::Host::invoke) finds its module by discovering the
//! home: a look at every module folder, the describe cache and the pins,
//! about 0.17 ms with one module. A program that calls the library in a loop
//! paid that on every call, although between two calls the operator had
//! usually changed nothing. Every operator change replaces or creates a file
//! in a few known places ([`crate::discovery::watched_paths`], the same a
//! long-running server follows), so the last discovery is reused while each
//! of those paths `stat`s to the identity it had.
//!
//! Design decisions:
//!
//! - **Never fresher than a new discovery would be wrong.** The identities
//!   are taken after the discovery, and it is reused only when every one of
//!   them had settled ([`modhost_runner::file_identity::RACY`]) before the discovery
//!   started: a change made while it ran, or within the same clock tick as
//!   a look, makes the next call discover again.
//! - **The per-call gate is unchanged.** A call of a reused module still
//!   checks the `.disabled` marker, `pins.json`, and the module's tree and
//!   snapshot (`Host::invoke_module`), so a module disabled, unpinned or
//!   changed in place is refused exactly as before.
//! - **Only under `pins = "enforce"`** (the default), where a call refuses
//!   a tree changed in place since its discovery. Under `warn` or `off` a
//!   module edited in place is described anew by the next discovery, which
//!   a reused one would not do.
//! - **Not for a discovery with a broken module.** A describe that failed
//!   is remembered for a while and then tried again
//!   (`describe_cache::FAILURE_TTL`); only a new discovery tries it, so such
//!   a discovery is never reused.
//! - **Shared by a host's clones**, one lock, held only to check the paths
//!   and share the list (a call clones only its own module).
//!
//! The attack test is `invoke::discovery_reuse_tests`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::discovery::{InstalledModule, ModuleStatus, watched_paths};
use crate::home::HomeLayout;
use modhost_runner::file_identity::Fingerprint;

/// The last discovery worth reusing, if any.
#[derive(Debug, Default)]
pub(crate) struct DiscoveryMemo {
    last: Mutex<Option<Last>>,
}

#[derive(Debug)]
struct Last {
    watched: Vec<PathBuf>,
    seen: Fingerprint,
    modules: Arc<[InstalledModule]>,
}

impl DiscoveryMemo {
    /// The last discovery, when every watched path is as it was then.
    pub(crate) fn reuse(&self) -> Option<Arc<[InstalledModule]>> {
        let last = self.lock();
        let last = last.as_ref()?;
        last.seen
            .still_of(&last.watched)
            .then(|| Arc::clone(&last.modules))
    }

    /// Remember `modules`, found by a discovery that started at `started`,
    /// if it may be reused: else forget the last one.
    pub(crate) fn remember(
        &self,
        layout: &HomeLayout,
        started: SystemTime,
        modules: Arc<[InstalledModule]>,
    ) {
        let watched = watched_paths(layout, &modules);
        let seen = Fingerprint::of(&watched);
        let reusable =
            seen.settled_at(started) && modules.iter().all(|m| m.status != ModuleStatus::Broken);
        *self.lock() = reusable.then_some(Last {
            watched,
            seen,
            modules,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Last>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}
