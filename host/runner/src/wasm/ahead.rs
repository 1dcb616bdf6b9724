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
//! - **No guest code runs ahead.** A component whose instantiation would run
//!   its own code (a `start` function in any core module or component,
//!   [`runs_code_at_instantiation`], read from its bytes at load) is never
//!   made ahead: that code could wait, spin or fill memory outside any call
//!   and before any approval. Its calls instantiate within their own
//!   deadline, as before. A compiler's `wasm32-wasip2` command has no start
//!   function. What instantiation does run otherwise is wasmtime's own
//!   initialization of tables, globals and memory from the component's
//!   segments. As a second line, making ahead is bounded in time
//!   ([`MAKING_AT_MOST`]: cut at its next wait or epoch tick, and checked
//!   again when it ends), and one that overruns it, fails, or reaches WASI
//!   refuses the component for good.
//! - **Still one fresh instance per call.** An instance made ahead serves
//!   exactly one call and is then dropped (and its slot reset) like any
//!   other. It is made from the component's initial image in a slot that was
//!   reset, in a store of its own.
//! - **Nothing of the call is in it until the call.** It is made with no
//!   WASI context at all. The call that takes it sets its own context
//!   (request, output, grants), memory flag and deadline before the guest's
//!   `run` starts, so what the guest can reach is decided at the call
//!   exactly as for an instance made at the call.
//! - **Only for allowed calls, on a host that keeps things ready.** An
//!   instance is made ahead only on engines that keep warm (`modhost mcp`
//!   with `warm_processes` on): after a call the host marked
//!   [`crate::Call::start_ahead`] (its capability is allowed
//!   outright), and once at load for a component a tool of which is allowed
//!   so (the first call's, [`crate::Engines::load_components_ahead`]).
//!   It is taken only by such a call, as native processes started ahead
//!   are.
//! - **Bounded, and out of a call's way.** At most one instance per
//!   component is made or waiting, and [`MOST_MADE_AHEAD`] in all (the oldest
//!   waiting one goes first); each holds one of the pool's slots. One is made
//!   only when a slot is free and kept only if one still is (no call can be
//!   queued then), and a call that finds no free slot drops waiting ones
//!   before it queues. When the host loads its modules again after an
//!   operator's change, the waiting instances of components it no longer
//!   lets start ahead (disabled, removed, changed, asked for approval) are
//!   dropped.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use wasmtime::Store;
use wasmtime_wasi::p2::bindings::Command;

use super::pool::CallSlot;

/// How many instances may be made or wait made ahead at once, across
/// components.
const MOST_MADE_AHEAD: usize = 4;

/// How long making an instance ahead may take: tens of microseconds for a
/// real component; beyond this something runs that should not.
pub(super) const MAKING_AT_MOST: Duration = Duration::from_millis(100);

/// Whether instantiating the component in `bytes` runs code of its own: a
/// `start` section in any core module or component, nested ones included.
/// Bytes that cannot be read count as yes.
pub(super) fn runs_code_at_instantiation(bytes: &[u8]) -> bool {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(
                wasmparser::Payload::StartSection { .. }
                | wasmparser::Payload::ComponentStartSection { .. },
            )
            | Err(_) => return true,
            Ok(_) => {}
        }
    }
    false
}

/// A store (of a call's state `T`) and the pool slot it holds, dropped in
/// this order: the slot is free only once the instance is gone.
pub(super) struct Held<T: 'static> {
    pub(super) store: Store<T>,
    pub(super) _slot: CallSlot,
}

/// An instance made ahead.
pub(super) struct MadeAhead<T: 'static> {
    pub(super) held: Held<T>,
    pub(super) command: Command,
}

/// The instances made ahead, by the digest of their component's bytes.
pub(super) struct InstancesAhead<T: 'static> {
    state: Mutex<State<T>>,
}

struct State<T: 'static> {
    ready: VecDeque<(blake3::Hash, MadeAhead<T>)>,
    /// Being made now.
    making: HashSet<blake3::Hash>,
    /// Components whose making failed: never made ahead again.
    refused: HashSet<blake3::Hash>,
}

/// One making under way; dropping it (done, failed or cancelled with its
/// task) ends it.
pub(super) struct Making<'a, T: 'static> {
    ahead: &'a InstancesAhead<T>,
    digest: blake3::Hash,
}

impl<T> Drop for Making<'_, T> {
    fn drop(&mut self) {
        self.ahead.lock().making.remove(&self.digest);
    }
}

impl<T> Default for InstancesAhead<T> {
    fn default() -> Self {
        InstancesAhead {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                making: HashSet::new(),
                refused: HashSet::new(),
            }),
        }
    }
}

impl<T> InstancesAhead<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The instance made ahead for `digest`, if there is one.
    pub(super) fn take(&self, digest: &blake3::Hash) -> Option<MadeAhead<T>> {
        let mut state = self.lock();
        let at = state
            .ready
            .iter()
            .position(|(made_for, _)| made_for == digest)?;
        state.ready.remove(at).map(|(_, made)| made)
    }

    /// Start making an instance of `digest` ahead, unless one is made or
    /// waiting already, the bound is reached, or `digest` was refused.
    pub(super) fn start_making(&self, digest: blake3::Hash) -> Option<Making<'_, T>> {
        let mut state = self.lock();
        let busy = state.ready.len() + state.making.len() >= MOST_MADE_AHEAD
            || state.refused.contains(&digest)
            || state.making.contains(&digest)
            || state.ready.iter().any(|(made_for, _)| *made_for == digest);
        if busy {
            return None;
        }
        state.making.insert(digest);
        Some(Making {
            ahead: self,
            digest,
        })
    }

    /// Keep `made` for the next call of its component.
    pub(super) fn put(&self, making: Making<'_, T>, made: MadeAhead<T>) {
        self.lock().ready.push_back((making.digest, made));
        // Made: no longer being made (after the lock is released).
        drop(making);
    }

    /// Making `digest` ahead failed: never try again.
    pub(super) fn refuse(&self, making: Making<'_, T>) {
        self.lock().refused.insert(making.digest);
        drop(making);
    }

    /// Drop the oldest instance made ahead, freeing its slot for a call;
    /// `false` when there is none.
    pub(super) fn give_up_one(&self) -> bool {
        // Dropped outside the lock: dropping resets its slot.
        let oldest = self.lock().ready.pop_front();
        oldest.is_some()
    }

    /// Drop every instance made ahead whose component is not `wanted`
    /// any more (disabled, removed, changed, or its tools no longer allowed
    /// to start ahead), freeing their slots.
    pub(super) fn keep_only(&self, wanted: &HashSet<blake3::Hash>) {
        let unwanted: VecDeque<_> = {
            let mut state = self.lock();
            let (keep, unwanted) = std::mem::take(&mut state.ready)
                .into_iter()
                .partition(|(digest, _)| wanted.contains(digest));
            state.ready = keep;
            unwanted
        };
        // Dropped outside the lock: dropping resets their slots.
        drop(unwanted);
    }

    pub(super) fn holds(&self, digest: &blake3::Hash) -> bool {
        self.lock()
            .ready
            .iter()
            .any(|(made_for, _)| made_for == digest)
    }
}
