//! Instances made ahead: a component's next call finds its instance ready.
//!
//! Instantiating (taking a pool slot, mapping the memory image, building the
//! instance's tables, globals and trampolines) was the largest share of a
//! small component's call that did not depend on the call at all. So after
//! a call of a component, while the host waits for the next request, it
//! makes the next instance of the same component; the call that comes takes
//! it and only has to hand it its WASI context and run it.
//!
//! Design decisions:
//!
//! - **Still one fresh instance per call.** An instance made ahead has run
//!   no guest code; it serves exactly one call and is then dropped (and its
//!   slot reset) like any other. Nothing of an earlier call is in it: it is
//!   made from the component's initial image in a slot that was reset.
//! - **Nothing of the call is in it until the call.** It is made with an
//!   empty WASI context: no standard input, no output, no environment, no
//!   preopened root. The call replaces the whole context with its own
//!   (request, output, grants), its memory flag and its deadline before the
//!   guest's `run` starts, so what the guest can reach is decided at the
//!   call exactly as for an instance made at the call.
//! - **Only where instantiating runs no guest code.** A core module's start
//!   function would run at instantiation, that is outside any call, with no
//!   deadline but ours. While an instance is made ahead, the first epoch
//!   tick that guest code sees ends it, and so does any WASI use (a start
//!   function reading the clock, say); the component is then never made
//!   ahead again by this engine, and its calls instantiate within their own
//!   deadline as before. A compiler's `wasm32-wasip2` command has no start
//!   function.
//! - **Bounded, and never in a call's way.** At most one instance per
//!   component is made ahead, and [`MOST_MADE_AHEAD`] in all (the oldest goes
//!   first); each holds one of the pool's slots. One is made only when a
//!   slot is free, and a call that finds no free slot drops one made ahead
//!   before it waits, so instances made ahead never make a call wait.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use wasmtime::Store;
use wasmtime_wasi::p2::bindings::Command;

use super::CallState;
use super::pool::CallSlot;

/// How many instances may wait made ahead at once, across components.
const MOST_MADE_AHEAD: usize = 4;

/// An instance made ahead, with the pool slot it holds.
pub(super) struct MadeAhead {
    // Dropped in this order: the instance before its slot is freed.
    pub(super) store: Store<CallState>,
    pub(super) command: Command,
    pub(super) slot: CallSlot,
}

/// The instances made ahead, by the digest of their component's bytes.
#[derive(Default)]
pub(super) struct InstancesAhead {
    ready: Mutex<VecDeque<(blake3::Hash, MadeAhead)>>,
    /// Components whose instantiation ran guest code: never made ahead.
    refused: Mutex<HashSet<blake3::Hash>>,
}

impl InstancesAhead {
    /// The instance made ahead for `digest`, if there is one.
    pub(super) fn take(&self, digest: &blake3::Hash) -> Option<MadeAhead> {
        let mut ready = lock(&self.ready);
        let at = ready.iter().position(|(made_for, _)| made_for == digest)?;
        ready.remove(at).map(|(_, made)| made)
    }

    /// Whether an instance of `digest` should be made ahead now: none is
    /// waiting already, and its instantiation is not known to run guest code.
    pub(super) fn wanted(&self, digest: &blake3::Hash) -> bool {
        !lock(&self.refused).contains(digest)
            && !lock(&self.ready)
                .iter()
                .any(|(made_for, _)| made_for == digest)
    }

    /// Keep `made` for the next call of `digest`; beyond the bound, the
    /// oldest is dropped (outside the lock: dropping resets its slot).
    pub(super) fn put(&self, digest: blake3::Hash, made: MadeAhead) {
        let evicted = {
            let mut ready = lock(&self.ready);
            if ready.iter().any(|(made_for, _)| *made_for == digest) {
                // Made twice by racing calls: one is enough.
                Some(made)
            } else {
                ready.push_back((digest, made));
                (ready.len() > MOST_MADE_AHEAD)
                    .then(|| ready.pop_front().map(|(_, oldest)| oldest))
                    .flatten()
            }
        };
        drop(evicted);
    }

    /// Drop the oldest instance made ahead, freeing its slot for a call;
    /// `false` when there is none.
    pub(super) fn give_up_one(&self) -> bool {
        let oldest = lock(&self.ready).pop_front();
        oldest.is_some()
    }

    /// `digest`'s instantiation ran guest code: never make it ahead again.
    pub(super) fn refuse(&self, digest: blake3::Hash) {
        lock(&self.refused).insert(digest);
    }

    #[cfg(test)]
    pub(super) fn holds(&self, digest: &blake3::Hash) -> bool {
        lock(&self.ready)
            .iter()
            .any(|(made_for, _)| made_for == digest)
    }

    #[cfg(test)]
    pub(super) fn is_refused(&self, digest: &blake3::Hash) -> bool {
        lock(&self.refused).contains(digest)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
