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
//!   a failed call.
//!
//! What may start ahead, and for how long, is bounded:
//!
//! - **Only what is allowed outright.** A process started ahead executes
//!   the module (its start-up, with the call's grants) before any call
//!   exists. The pool is only used for a call whose
//!   [`Call::start_ahead`](crate::runner::Call::start_ahead) the host set
//!   from an `allow` verdict ([`crate::approval::Decision::allows_starting_ahead`]);
//!   an `ask` call neither takes a waiting process nor leaves any started,
//!   so each approval runs the module exactly once, after it was given. The
//!   pool itself never starts anything but after such a call: nothing runs
//!   when a host starts.
//! - **A bounded idle life.** A spec whose last call was more than
//!   [`IDLE_LIFE`] ago has its processes ended (killed and reaped) and not
//!   replaced, by one expiry task per pool that runs only while something
//!   waits.
//! - **Bounded processes and threads.** At most [`MAX_SPECS`] specs keep
//!   processes waiting, [`DEPTH`] each, the least recently called giving its
//!   place to a new one, so a client that calls many tools (or one tool with
//!   ever-new grants) does not accumulate processes. Each waiting process
//!   holds one blocking waiter thread (the native runner's reaper), so the
//!   same bound, [`MAX_WAITING`], and the idle life bound the threads.
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

use super::{SpawnSpec, Started, attach, spawn};

/// How many processes each spec keeps started: a client calling one tool in
/// a tight loop comes back before one process could finish starting, and a
/// second, started a call earlier, has had twice as long.
pub const DEPTH: usize = 2;

/// How many call specs may keep processes started.
pub const MAX_SPECS: usize = 16;

/// The most processes a pool keeps waiting (or starting) at once.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the documented bound; the tests hold the pool to it"
    )
)]
pub const MAX_WAITING: usize = DEPTH * MAX_SPECS;

/// How long a spec's processes wait for its next call before they are
/// ended and not replaced. An agent working with a tool calls it again
/// within seconds; one that stopped should not leave confined processes
/// (and their waiter threads) behind for the rest of a long session.
pub const IDLE_LIFE: Duration = Duration::from_secs(60);

/// A process being started in the background (`None` when that failed).
type Starting = JoinHandle<Option<Started>>;

/// Up to [`DEPTH`] waiting (or starting) processes per [`SpawnSpec`], and
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
    /// A pool whose processes wait at most [`IDLE_LIFE`] for a call.
    pub fn new() -> WarmPool {
        WarmPool::with_idle_life(IDLE_LIFE)
    }

    /// A pool whose processes are ended once their spec had no call for
    /// `idle_life`.
    pub fn with_idle_life(idle_life: Duration) -> WarmPool {
        WarmPool {
            shared: Arc::default(),
            idle_life,
        }
    }

    /// The oldest process waiting for `spec`, if one is (or is still
    /// starting: waiting for it is never slower than starting another) and
    /// alive.
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
        started.is_alive().then_some(started)
    }

    /// Start processes for `spec` in the background until [`DEPTH`] are
    /// waiting or starting. A new spec beyond [`MAX_SPECS`] takes the place
    /// of the least recently called one, whose processes are ended in the
    /// background. Must be called on a tokio runtime, and only after a call
    /// the host allowed to start ahead ([`crate::runner::Call::start_ahead`]).
    pub fn refill(&self, spec: &SpawnSpec) {
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
        let spawned = tokio::task::spawn_blocking(move || spawn(&spec))
            .await
            .ok()?;
        match spawned.and_then(attach) {
            Ok(started) => Some(started),
            Err(e) => {
                tracing::debug!("starting a warm process failed: {e}");
                None
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::*;
    use crate::runner::native::tests::{REQ, call, is_dead, script, write_grant};
    use crate::runner::native::{SpawnSpec, run};
    use crate::runner::{Call, Grant};

    /// A module that, before reading its request, records its pid in
    /// `<out>/started.<pid>`, then answers with its pid.
    fn pid_module(dir: &Path, out: &Path) -> PathBuf {
        script(
            dir,
            "pid",
            &format!(
                r#"touch {}/started.$$
read line
echo "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":$$}}""#,
                out.display()
            ),
        )
    }

    async fn pid_of_call(module: &Path, call: &Call<'_>, pool: &WarmPool) -> i64 {
        let exchange = run(module, call, None, Some(pool)).await.unwrap();
        exchange.response.outcome.unwrap().as_i64().unwrap()
    }

    /// The pids that have started (and recorded themselves) so far.
    fn started_pids(out: &Path) -> Vec<i64> {
        let mut pids: Vec<i64> = std::fs::read_dir(out)
            .unwrap()
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_prefix("started.")?.parse().ok()
            })
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Wait until `count` processes have recorded their start.
    async fn wait_for_starts(out: &Path, count: usize) -> Vec<i64> {
        for _ in 0..250 {
            let pids = started_pids(out);
            if pids.len() >= count {
                return pids;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("only {:?} started", started_pids(out));
    }

    /// A pid module granted `out`, called once through a fresh pool.
    struct OneCallMade {
        _dir: tempfile::TempDir,
        out: tempfile::TempDir,
        module: PathBuf,
        grants: [Grant; 1],
        pool: WarmPool,
        /// The pid that answered the call.
        first: i64,
        /// The pids started ahead for the next calls, once they have started.
        warm: Vec<i64>,
    }

    async fn one_call_made() -> OneCallMade {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let module = pid_module(dir.path(), out.path());
        let grants = [write_grant(out.path())];
        let pool = WarmPool::new();
        let first = pid_of_call(&module, &with_grants(&grants), &pool).await;
        assert_eq!(pool.len(), DEPTH);
        let started = wait_for_starts(out.path(), 1 + DEPTH).await;
        let warm = started.into_iter().filter(|&p| p != first).collect();
        OneCallMade {
            _dir: dir,
            out,
            module,
            grants,
            pool,
            first,
            warm,
        }
    }

    /// A call with `grants` that the host allowed to start ahead.
    fn with_grants<'a>(grants: &'a [Grant]) -> Call<'a> {
        Call {
            grants,
            start_ahead: true,
            ..call(REQ, 10_000, 1 << 20)
        }
    }

    /// Whether `pid` is gone from the process table, zombie included (killed
    /// and reaped), within `tries` looks 20 ms apart.
    async fn is_reaped(pid: i64, tries: u32) -> bool {
        for _ in 0..tries {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_not_allowed_ahead_runs_cold_and_leaves_nothing_started() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let module = pid_module(dir.path(), out.path());
        let grants = [write_grant(out.path())];
        let pool = WarmPool::new();
        // An `ask` capability's call (approved, so it runs): the pool is
        // there, but the call is not allowed ahead.
        let asked = Call {
            start_ahead: false,
            ..with_grants(&grants)
        };
        for _ in 0..3 {
            pid_of_call(&module, &asked, &pool).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            started_pids(out.path()).len(),
            3,
            "three approved calls ran the module three times, nothing more"
        );
        assert!(pool.is_empty(), "and nothing waits for the next one");

        // Processes an allowed call of the same spec left waiting are not
        // used by such a call either: its process starts after its approval.
        let allowed = pid_of_call(&module, &with_grants(&grants), &pool).await;
        let waiting: Vec<i64> = wait_for_starts(out.path(), 4 + DEPTH)
            .await
            .into_iter()
            .filter(|&p| p != allowed)
            .collect();
        let cold = pid_of_call(&module, &asked, &pool).await;
        assert!(!waiting.contains(&cold), "{cold} was started ahead");
        assert_eq!(pool.len(), DEPTH, "nothing was taken or added");
        pool.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn processes_no_call_came_for_within_the_idle_life_are_ended_and_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let module = pid_module(dir.path(), out.path());
        let grants = [write_grant(out.path())];
        let idle_life = Duration::from_millis(400);
        let pool = WarmPool::with_idle_life(idle_life);
        // Twice: once the pool has nothing left waiting its expiry stops, and
        // the next call must start it again.
        for round in 1..=2 {
            let before = started_pids(out.path());
            let answered = pid_of_call(&module, &with_grants(&grants), &pool).await;
            let warm: Vec<i64> = wait_for_starts(out.path(), round * (1 + DEPTH))
                .await
                .into_iter()
                .filter(|p| *p != answered && !before.contains(p))
                .collect();
            assert_eq!(warm.len(), DEPTH, "round {round}: {warm:?}");
            for &pid in &warm {
                assert!(!is_dead(pid as i32, 1).await, "{pid} waits for a call");
            }
            tokio::time::sleep(idle_life).await;
            for &pid in &warm {
                assert!(
                    is_reaped(pid, 150).await,
                    "round {round}: {pid} outlived the idle life"
                );
            }
            assert!(pool.is_empty(), "round {round}: the spec was dropped");
            tokio::time::sleep(idle_life).await;
            assert_eq!(
                started_pids(out.path()).len(),
                round * (1 + DEPTH),
                "round {round}: nothing was started in their place"
            );
        }
        pool.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_next_call_is_answered_by_the_process_started_after_the_last() {
        let OneCallMade {
            _dir,
            out,
            module,
            grants,
            pool,
            warm,
            ..
        } = one_call_made().await;
        assert_eq!(
            warm.len(),
            DEPTH,
            "processes are started for the next calls"
        );
        // They wait on stdin, confined like the first, until calls come.
        for &pid in &warm {
            assert!(!is_dead(pid as i32, 5).await, "{pid} is waiting");
        }
        let second = pid_of_call(&module, &with_grants(&grants), &pool).await;
        assert!(warm.contains(&second), "a waiting process answered");
        assert!(
            is_dead(second as i32, 100).await,
            "and is gone after its call"
        );
        assert_eq!(pool.len(), DEPTH, "and was replaced");

        // A call with other grants is never served by that spec's processes.
        let other = tempfile::tempdir().unwrap();
        let wider = [write_grant(out.path()), write_grant(other.path())];
        let waiting = wait_for_starts(out.path(), 2 + DEPTH).await;
        let third = pid_of_call(&module, &with_grants(&wider), &pool).await;
        assert!(!waiting.contains(&third), "a cold process for new grants");
        assert_eq!(pool.len(), 2 * DEPTH, "each spec keeps its own processes");
        pool.shutdown().await;
        assert!(pool.is_empty());
        for pid in started_pids(out.path()) {
            assert!(is_dead(pid as i32, 100).await, "{pid} outlived shutdown");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_waiting_process_that_died_is_replaced_by_a_cold_one() {
        let OneCallMade {
            _dir,
            module,
            grants,
            pool,
            first,
            warm,
            ..
        } = one_call_made().await;
        for &pid in &warm {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid as i32).unwrap(),
                rustix::process::Signal::KILL,
            )
            .unwrap();
            assert!(is_dead(pid as i32, 100).await);
        }
        let second = pid_of_call(&module, &with_grants(&grants), &pool).await;
        assert!(
            second != first && !warm.contains(&second),
            "answered by a new process"
        );
        pool.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_answered_call_returns_at_once_and_shutdown_ends_its_process() {
        let dir = tempfile::tempdir().unwrap();
        // Answers, then lingers instead of exiting.
        let module = script(
            dir.path(),
            "linger",
            r#"read line
echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":$$}"
sleep 30"#,
        );
        let pool = WarmPool::new();
        let pid = pid_of_call(&module, &call(REQ, 10_000, 1 << 20), &pool).await;
        // The call did not wait out the exit grace: the process still runs,
        // its ending left to the background.
        assert!(!is_dead(pid as i32, 1).await, "{pid} was waited for");
        pool.shutdown().await;
        assert!(is_dead(pid as i32, 100).await, "{pid} outlived shutdown");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_new_spec_beyond_the_limit_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let module = pid_module(dir.path(), out.path());
        // One spec per extra root; every process may record itself in `out`.
        let roots: Vec<tempfile::TempDir> = (0..=MAX_SPECS)
            .map(|_| tempfile::tempdir().unwrap())
            .collect();
        let grants: Vec<[Grant; 2]> = roots
            .iter()
            .map(|r| {
                let spec_root = Grant {
                    name: "spec".into(),
                    ..write_grant(r.path())
                };
                [write_grant(out.path()), spec_root]
            })
            .collect();
        let pool = WarmPool::new();
        for grant in &grants {
            pid_of_call(&module, &with_grants(grant), &pool).await;
        }
        assert_eq!(pool.len(), MAX_WAITING, "bounded");
        // Every process ever started, and how many of them still live: the
        // evicted spec's were ended, not merely forgotten.
        let started = wait_for_starts(out.path(), (MAX_SPECS + 1) * (1 + DEPTH)).await;
        let mut alive = Vec::new();
        for _ in 0..250 {
            alive.clear();
            for &pid in &started {
                if !is_dead(pid as i32, 1).await {
                    alive.push(pid);
                }
            }
            if alive.len() <= MAX_WAITING {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(alive.len(), MAX_WAITING, "live processes: {alive:?}");
        let first = SpawnSpec::of(&module, &with_grants(&grants[0]));
        assert!(
            pool.take(&first).await.is_none(),
            "the oldest spec was evicted"
        );
        let last = SpawnSpec::of(&module, &with_grants(&grants[MAX_SPECS]));
        assert!(
            pool.take(&last).await.is_some(),
            "the newest keeps its processes"
        );
        pool.shutdown().await;
    }
}
