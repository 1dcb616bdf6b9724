//! Warm processes: the next process of a call, started before the call.
//!
//! Starting a confined native module costs more than most modules take to
//! answer: the landlock ruleset, the clone and exec, the dynamic loader, the
//! module's own start-up. A long-running host (the MCP server) calls the same few
//! tools with the same grants again and again, so after each call it starts
//! the next process for that [`SpawnSpec`] in the background, and the next
//! call writes its request to a process already waiting on stdin.
//!
//! What does not change, warm or cold:
//!
//! - one process per call: a warm process serves exactly one request, and
//!   is confined before exec exactly as a cold one (the spec *is* what the
//!   confinement is built from, so a process is only ever used for a call
//!   whose grants it was started with);
//! - the deadline counts from the request, and the group is killed when the
//!   call ends;
//! - a warm process that died while waiting is discarded and the call
//!   starts a cold one, so a module that exits early costs one spawn, never
//!   a failed call;
//! - a warm process serves a call only while the confinement a start would
//!   prepare now is the one it entered: a granted or system folder replaced
//!   (moved away, a new one in its place) since it started, or a refusal
//!   now, and it is ended and the call starts cold.
//!
//! What may start ahead, and for how long, is bounded:
//!
//! - **Only what is allowed outright.** A process started ahead executes
//!   the module (its start-up, with the call's grants) before any call
//!   exists. The pool is only used for a call whose
//!   [`Call::start_ahead`](crate::Call::start_ahead) the host set
//!   from an `allow` verdict (`modhost::approval::PolicyDecision::allows_starting_ahead`);
//!   an `ask` call neither takes a waiting process nor leaves any started,
//!   so each approval runs the module exactly once, after it was given. The
//!   pool itself never starts anything but after such a call: nothing runs
//!   when a host starts.
//! - **A bounded idle life.** A spec whose last call was more than
//!   `IDLE_LIFE` ago has its processes ended (killed and reaped) and not
//!   replaced, by one expiry task per pool that runs only while something
//!   waits.
//! - **Bounded processes.** At most `MAX_SPECS` specs keep processes
//!   waiting, `DEPTH` each, the least recently called giving its place to
//!   a new one, so a client that calls many tools (or one tool with
//!   ever-new grants) does not accumulate processes: `DEPTH * MAX_SPECS`
//!   at most. A waiting process holds four descriptors the runtime polls (its
//!   pipes and pidfd) and no thread.
//!
//! [`WarmPool::shutdown`] kills and reaps every waiting process; dropping the
//! pool without it still kills them (each [`Started`] kills its group when
//! dropped), once their start-up tasks finish on the runtime.

use std::collections::{HashMap, VecDeque};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use super::process::{self, SpawnSpec, Started, attach, spawn_off_runtime};

/// How many processes each spec keeps started: a client calling one tool in
/// a tight loop comes back before one process could finish starting, and a
/// second, started a call earlier, has had twice as long.
pub(crate) const DEPTH: usize = 2;

/// How many call specs may keep processes started.
pub(crate) const MAX_SPECS: usize = 16;

/// The most processes a pool keeps waiting (or starting) at once: what
/// the two bounds above imply, stated for the tests that check it.
#[cfg(test)]
pub(crate) const MAX_WAITING: usize = DEPTH * MAX_SPECS;

/// How long a spec's processes wait for its next call before they are
/// ended and not replaced. An agent working with a tool calls it again
/// within seconds; one that stopped should not leave confined processes
/// behind for the rest of a long session.
pub(crate) const IDLE_LIFE: Duration = Duration::from_secs(60);

/// A process being started in the background (`None` when that failed).
type Starting = JoinHandle<Option<Started>>;

/// Up to `DEPTH` waiting (or starting) processes per [`SpawnSpec`], and
/// the endings of answered calls still running in the background.
#[derive(Debug)]
pub struct WarmPool {
    /// Shared with the expiry task, which holds it weakly: a dropped pool
    /// ends the task at its next wake-up.
    shared: Arc<Shared>,
    idle_life: Duration,
}

#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    ending: Mutex<JoinSet<()>>,
}

#[derive(Debug, Default)]
struct Waiting {
    by_spec: HashMap<SpawnSpec, Slot>,
    /// The pool's expiry task while it runs. It clears this (under the
    /// lock) when nothing waits any more and stops; the next refill starts
    /// another. A task its runtime dropped counts as stopped.
    expiry: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Slot {
    queue: VecDeque<Starting>,
    /// When a call of this spec last came (its take or its refill).
    last_call: Instant,
}

impl Default for WarmPool {
    fn default() -> Self {
        WarmPool::new()
    }
}

impl WarmPool {
    /// A pool whose processes wait at most `IDLE_LIFE` for a call.
    pub fn new() -> WarmPool {
        WarmPool::with_idle_life(IDLE_LIFE)
    }

    /// A pool whose processes are ended once their spec had no call for
    /// `idle_life`.
    pub(crate) fn with_idle_life(idle_life: Duration) -> WarmPool {
        WarmPool {
            shared: Arc::default(),
            idle_life,
        }
    }

    /// The oldest process waiting for `spec`, if one is (or is still
    /// starting: waiting for it is never slower than starting another),
    /// alive, and confined as a start now would be
    /// (`process::confined_as_now`); one that is not is ended.
    pub async fn take(&self, spec: &SpawnSpec) -> Option<Started> {
        let starting = {
            let mut waiting = self.shared.lock_waiting();
            let slot = waiting.by_spec.get_mut(spec)?;
            slot.last_call = Instant::now();
            slot.queue.pop_front()?
        };
        // Cancellation-safe: dropping this future drops the handle, and the
        // process is killed when the start-up task drops its output.
        let mut started = starting.await.ok()??;
        (started.is_alive() && process::confined_as_now(spec, &started)).then_some(started)
    }

    /// Start processes for `spec` in the background until [`DEPTH`] are
    /// waiting or starting. A new spec beyond [`MAX_SPECS`] takes the place
    /// of the least recently called one, whose processes are ended in the
    /// background. Must be called on a tokio runtime, and only after a call
    /// the host allowed to start ahead ([`crate::Call::start_ahead`]).
    pub(crate) fn refill(&self, spec: &SpawnSpec) {
        let now = Instant::now();
        let mut evicted = None;
        {
            let mut waiting = self.shared.lock_waiting();
            if !waiting.by_spec.contains_key(spec) && waiting.by_spec.len() >= MAX_SPECS {
                let oldest = waiting
                    .by_spec
                    .iter()
                    .min_by_key(|(_, slot)| slot.last_call)
                    .map(|(spec, _)| spec.clone());
                evicted = oldest.and_then(|oldest| waiting.by_spec.remove(&oldest));
            }
            let slot = waiting.by_spec.entry(spec.clone()).or_insert_with(|| Slot {
                queue: VecDeque::new(),
                last_call: now,
            });
            slot.last_call = now;
            while slot.queue.len() < DEPTH {
                slot.queue.push_back(start_in_background(spec.clone()));
            }
            if waiting.expiry.as_ref().is_none_or(JoinHandle::is_finished) {
                let task = expire_idle(Arc::downgrade(&self.shared), self.idle_life);
                waiting.expiry = Some(tokio::spawn(task));
            }
        }
        if let Some(slot) = evicted {
            self.shared.end_in_background(stop_all(slot.queue));
        }
    }

    /// End an answered call's process in the background; [`Self::shutdown`]
    /// waits for it. Must be called on a tokio runtime.
    pub(super) fn finish(
        &self,
        ending: impl Future<Output = (Option<ExitStatus>, String)> + Send + 'static,
    ) {
        self.shared.end_in_background(async move {
            ending.await;
        });
    }

    /// How many processes are waiting or starting, over all specs.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shared
            .lock_waiting()
            .by_spec
            .values()
            .map(|slot| slot.queue.len())
            .sum()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Kill every waiting process and wait until each is reaped, and every
    /// answered call's (or expired, or evicted) process has ended.
    pub async fn shutdown(&self) {
        let tasks: Vec<Starting> = {
            let mut waiting = self.shared.lock_waiting();
            if let Some(expiry) = waiting.expiry.take() {
                expiry.abort();
            }
            waiting
                .by_spec
                .drain()
                .flat_map(|(_, slot)| slot.queue)
                .collect()
        };
        stop_all(tasks).await;
        let mut ending = std::mem::take(&mut *self.shared.lock_ending());
        while ending.join_next().await.is_some() {}
    }
}

impl Shared {
    fn lock_waiting(&self) -> MutexGuard<'_, Waiting> {
        // The map stays consistent whatever panicked while holding it.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_ending(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.ending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `ending` on the runtime; [`WarmPool::shutdown`] waits for it.
    fn end_in_background(&self, ending: impl Future<Output = ()> + Send + 'static) {
        let mut ending_set = self.lock_ending();
        // Collect the ones already done, so the set stays small.
        while ending_set.try_join_next().is_some() {}
        ending_set.spawn(ending);
    }
}

/// The pool's one expiry task: sleep until the earliest spec falls idle,
/// end that spec's processes, repeat; stop when nothing waits (or the pool
/// is gone).
async fn expire_idle(shared: Weak<Shared>, idle_life: Duration) {
    loop {
        let Some(pool) = shared.upgrade() else { return };
        let now = Instant::now();
        let (expired, next) = {
            let mut waiting = pool.lock_waiting();
            let expired: Vec<Slot> = waiting
                .by_spec
                .extract_if(|_, slot| slot.last_call + idle_life <= now)
                .map(|(_, slot)| slot)
                .collect();
            let next = waiting
                .by_spec
                .values()
                .map(|slot| slot.last_call + idle_life)
                .min();
            if next.is_none() {
                // Under the lock: a refill from now on starts a new task.
                waiting.expiry = None;
            }
            (expired, next)
        };
        for slot in expired {
            pool.end_in_background(stop_all(slot.queue));
        }
        drop(pool);
        match next {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => return,
        }
    }
}

/// Kill each process (once started) and wait until it is reaped.
async fn stop_all(tasks: impl IntoIterator<Item = Starting>) {
    for task in tasks {
        if let Ok(Some(started)) = task.await {
            started.stop().await;
        }
    }
}

/// Start a process for `spec` on the blocking pool.
fn start_in_background(spec: SpawnSpec) -> Starting {
    tokio::spawn(async move {
        // Let the call that just ended deliver its answer first: a start
        // keeps a core busy for a while (the exec, the module's start-up),
        // and on a small machine that core is the one the answer needs.
        tokio::task::yield_now().await;
        // The spawn blocks until the exec is done: off the runtime.
        match spawn_off_runtime(spec).await.and_then(attach) {
            Ok(started) => Some(started),
            Err(e) => {
                tracing::debug!("starting a warm process failed: {e}");
                None
            }
        }
    })
}
