//! Guests with roots run on a thread of their own.
//!
//! wasmtime-wasi hands every filesystem operation of a guest (an open, a
//! `stat`, a read of a file) to tokio's blocking pool and waits for it: two
//! thread wake-ups per operation, on a runtime worker. A component that
//! walks a tree pays them tens of thousands of times (`files.search` over
//! the cargo registry took 12.3 s as a component, 0.25 s natively). Run on
//! a blocking-pool thread with `allow_blocking_current_thread`, the same
//! operations are plain system calls on that thread, and the same search
//! took 1.5 s.
//!
//! Design decisions:
//!
//! - **The deadline stays with the caller.** A guest blocked in such a
//!   system call (opening a fifo in its root, a read on a hung network
//!   filesystem) holds its thread, where no timer can reach it. So the
//!   call is still judged on the caller's task (`converse`): its deadline,
//!   its output and its answer are the caller's, and the caller returns at
//!   the deadline whatever the thread is doing. The thread only runs the
//!   guest; dropping the [`OnThread`] tells it to drop the guest at its next
//!   wait or epoch tick (an instance stuck in the kernel is dropped when its
//!   system call returns, and traps at its deadline if it ever runs again).
//! - **Bounded.** A stuck guest keeps its instance slot and memory until its
//!   system call returns, which may be never. At most [`MAX_THREADS`] calls
//!   run so at once ([`GuestThreads`]); a call beyond runs as every call
//!   without roots does, on the runtime with each filesystem operation
//!   handed off, whose instance is dropped at its deadline. So stuck
//!   guests can never hold more than [`MAX_THREADS`] of the pool's slots,
//!   and a call with roots is never refused for want of a thread.
//! - **Only calls with roots.** A call without roots has no filesystem
//!   operation to gain on, and runs its first slice on the caller's thread
//!   with no hand-off at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The most calls whose guests run on threads of their own at once: a
/// quarter of the pool's instance slots.
pub(super) const MAX_THREADS: usize = super::pool::SLOTS as usize / 4;

/// The right to run a guest on a thread of its own, [`MAX_THREADS`] of them.
pub(super) struct GuestThreads {
    permits: Arc<Semaphore>,
    /// How many were ever taken (what the tests check).
    #[cfg(test)]
    taken: std::sync::atomic::AtomicUsize,
}

impl Default for GuestThreads {
    fn default() -> Self {
        GuestThreads {
            permits: Arc::new(Semaphore::new(MAX_THREADS)),
            #[cfg(test)]
            taken: Default::default(),
        }
    }
}

impl GuestThreads {
    /// A thread's permit, held until that thread is done with its guest;
    /// `None` when [`MAX_THREADS`] are taken.
    pub(super) fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok();
        #[cfg(test)]
        if permit.is_some() {
            self.taken
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        permit
    }

    /// How many are free now.
    #[cfg(test)]
    pub(super) fn free(&self) -> usize {
        self.permits.available_permits()
    }

    /// How many were taken so far.
    #[cfg(test)]
    pub(super) fn taken(&self) -> usize {
        self.taken.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A guest running on a blocking-pool thread: resolves to what `work`
/// returned, or `None` if the thread ended without it (it never ran: the
/// runtime was shutting down). Dropping it stops the guest at its next
/// wait or epoch tick.
pub(super) struct OnThread<R> {
    outcome: oneshot::Receiver<R>,
    /// Its drop is the stop: the thread's receiver sees it closed.
    _stop: oneshot::Sender<()>,
}

/// Run `work` on a blocking-pool thread, holding `permit` until the thread
/// is done with it (finished or dropped). Call from within a tokio runtime.
pub(super) fn start<R: Send + 'static>(
    work: impl Future<Output = R> + Send + 'static,
    permit: OwnedSemaphorePermit,
) -> OnThread<R> {
    let (outcome_tx, outcome) = oneshot::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let runtime = tokio::runtime::Handle::current();
    // Detached: the caller waits on `outcome`, never on the thread.
    drop(tokio::task::spawn_blocking(move || {
        let _permit = permit;
        runtime.block_on(async move {
            tokio::select! {
                // The stop first: a runtime shutting down drops the caller
                // (the stop) before it ends its timers, and a guest's timer
                // polled after that would panic.
                biased;
                _ = stopped => {}
                result = work => {
                    // The caller may be gone; then nobody needs it.
                    let _ = outcome_tx.send(result);
                }
            }
        });
    }));
    OnThread {
        outcome,
        _stop: stop,
    }
}

impl<R> Future for OnThread<R> {
    type Output = Option<R>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<R>> {
        Pin::new(&mut self.outcome).poll(cx).map(Result::ok)
    }
}
