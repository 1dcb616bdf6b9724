//! Guests with roots run on a thread of their own.
//!
//! wasmtime-wasi hands every filesystem operation of a guest (an open, a
//! `stat`, a read of a file) to tokio's blocking pool and waits for it: two
//! thread wake-ups per operation. A component that walks a tree pays them
//! tens of thousands of times: `files.search` for `fn main` over a cargo
//! registry's sources (14,600 files) took 15.5 s as a component through
//! `modhost invoke`, against 0.3 s natively. Run on a blocking-pool thread
//! with `allow_blocking_current_thread`, the same operations are plain
//! system calls on that thread, and the same search took 1.5 s, with the
//! same matches (`modules/files/bench_search.py`).
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
//! - **Bounded, and every call with roots goes this way.** A stuck guest
//!   keeps its thread, its instance slot and the memory it touched until
//!   its system call returns, which may be never. At most [`MAX_THREADS`]
//!   calls run so at once ([`GuestThreads`]); a call with roots beyond
//!   waits for one within its deadline, as for an instance slot. Guests
//!   stuck in the kernel therefore hold at most [`MAX_THREADS`] threads,
//!   slots and memory caps: once that many are stuck, calls with roots time
//!   out until one returns, while calls without roots, native modules and
//!   the host go on. (Letting the calls beyond run on the caller's runtime
//!   instead would hand each of their filesystem operations to the
//!   caller's blocking pool, where stuck ones pile up without bound until
//!   nothing else of the host's that needs that pool runs.)
//! - **A runtime of their own, never shut down.** Guest threads run on
//!   [`guest_runtime`]: its blocking pool is theirs (what wasmtime-wasi
//!   still hands off is bounded with them, away from the caller's pool), and
//!   its timers, which a guest's `poll` and sleeps use, outlive every
//!   caller's runtime, so a guest stopped while its caller's runtime shuts
//!   down never meets a timer that has gone.
//! - **Only calls with roots.** A call without roots has no filesystem
//!   operation to gain on, and runs its first slice on the caller's thread
//!   with no hand-off at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The most calls whose guests run on threads of their own at once: what
/// guests stuck in the kernel can hold at most (a thread, an instance slot
/// and up to the call memory cap each).
pub(super) const MAX_THREADS: usize = 4;

/// Blocking threads of [`guest_runtime`]: the guest threads and, beside
/// them, what wasmtime-wasi still hands off (a stream read the guest does
/// not wait for at once).
const RUNTIME_BLOCKING_THREADS: usize = 4 * MAX_THREADS;

/// The runtime guest threads run on, made at first use and never shut down
/// (it lives as long as the process); `None` if it could not be made.
fn guest_runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<Option<tokio::runtime::Runtime>> =
        std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .max_blocking_threads(RUNTIME_BLOCKING_THREADS)
                .thread_name("modhost-guest")
                .enable_all()
                .build()
                .inspect_err(|e| {
                    tracing::warn!(
                        "components with roots run slower: no runtime for their threads ({e})"
                    );
                })
                .ok()
        })
        .as_ref()
}

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

/// Why a call with roots has no thread.
pub(super) enum NoThread {
    /// All [`MAX_THREADS`] stayed taken until the deadline.
    Busy,
    /// There is no runtime for guest threads: run the guest as a call
    /// without roots runs.
    Unavailable,
}

impl GuestThreads {
    /// One of the threads, waiting for one until `deadline`.
    pub(super) async fn take(&self, deadline: std::time::Instant) -> Result<GuestThread, NoThread> {
        let runtime = guest_runtime().ok_or(NoThread::Unavailable)?;
        let permit =
            tokio::time::timeout_at(deadline.into(), Arc::clone(&self.permits).acquire_owned())
                .await
                .map_err(|_| NoThread::Busy)?
                .map_err(|_| NoThread::Busy)?;
        #[cfg(test)]
        self.taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(GuestThread {
            runtime,
            _permit: permit,
        })
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

/// A guest running on a thread of its own: resolves to what its work
/// returned, or `None` if the thread ended without it (it panicked).
/// Dropping it stops the guest at its next wait or epoch tick.
pub(super) struct OnThread<R> {
    outcome: oneshot::Receiver<R>,
    /// Its drop is the stop: the thread's receiver sees it closed.
    _stop: oneshot::Sender<()>,
}

/// The right to one thread of [`guest_runtime`], kept until that thread
/// is done with its guest (finished or dropped).
pub(super) struct GuestThread {
    runtime: &'static tokio::runtime::Runtime,
    _permit: OwnedSemaphorePermit,
}

impl GuestThread {
    /// Run `work` on the thread.
    pub(super) fn run<R: Send + 'static>(
        self,
        work: impl Future<Output = R> + Send + 'static,
    ) -> OnThread<R> {
        let (outcome_tx, outcome) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = self.runtime;
        // Detached: the caller waits on `outcome`, never on the thread.
        drop(runtime.spawn_blocking(move || {
            let _thread = self;
            runtime.block_on(async move {
                tokio::select! {
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
}

impl<R> Future for OnThread<R> {
    type Output = Option<R>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<R>> {
        Pin::new(&mut self.outcome).poll(cx).map(Result::ok)
    }
}
