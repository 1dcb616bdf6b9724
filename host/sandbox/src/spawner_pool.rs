//! The threads confined module processes are started from.
//!
//! A confined start (its preparation, the clone and the wait for the exec)
//! runs on a spawner thread that carries the confinement every child shares
//! (`spawner`: the bounding set emptied, `no_new_privs`, the base
//! seccomp layer), so each child inherits it instead of entering it. Such a thread must run nothing else: what it started, a
//! thread or a program, would inherit the same. So the starts go to threads
//! of their own, never to the runtime's blocking pool.
//!
//! Design decisions:
//!
//! - **Four pools, by flavour.** The base seccomp layer differs for calls
//!   with and without network, and for calls whose capability declares no
//!   spawns (their exec gate, `seccomp::Layer::Base`), so each [`Flavour`]
//!   has its threads. The alternative, a small layer each exec-gated child
//!   installs over a shared base, costs an install per call (a kernel
//!   allocation and compile, about 0.1 ms measured for the group layer);
//!   a pool costs nothing until its first call, and then a thread that
//!   waits on a condition variable.
//! - **Grown on demand, bounded.** A pool starts a thread when a start
//!   finds none idle, up to `MAX_THREADS`; beyond that, starts queue (a
//!   start holds its thread for the clone and exec, well under a
//!   millisecond). Threads live as long as the host: a spawner thread cannot be
//!   turned back into an ordinary thread, and the next call wants it.
//! - **The same hand-off as the blocking pool.** A start is queued and run
//!   on a spawner thread, its result sent back on a oneshot by the start itself
//!   (`process::spawn_off_runtime`, which hands unconfined starts to the
//!   blocking pool the same way): one wake-up each way, as `spawn_blocking`
//!   costs. Nothing of the runtime runs on a spawner thread
//!   (`attach` happens on the caller's side), so the runtime never creates
//!   a thread from one.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::flavour::Flavour;

/// The most spawner threads per flavour.
const MAX_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    flavour: Flavour,
    state: Mutex<PoolState>,
    ready: Condvar,
}

struct PoolState {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: usize,
}

impl Pool {
    const fn new(flavour: Flavour) -> Pool {
        Pool {
            flavour,
            state: Mutex::new(PoolState {
                jobs: VecDeque::new(),
                idle: 0,
                threads: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A job runs outside the lock, so nothing can poison it mid-update.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

static POOLS: [Pool; 4] = [
    Pool::new(Flavour::ALL[0]),
    Pool::new(Flavour::ALL[1]),
    Pool::new(Flavour::ALL[2]),
    Pool::new(Flavour::ALL[3]),
];

/// Run `job` on a spawner thread for calls of `flavour`
/// ([`Flavour::of`]). `Err` when no spawner thread exists and none could be
/// started (the job is then dropped, unrun). How a result gets back is the
/// job's own business (`process::spawn_off_runtime` sends it on a oneshot).
pub fn run(flavour: Flavour, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let pool = &POOLS[flavour.index()];
    let mut state = pool.lock();
    state.jobs.push_back(Box::new(job));
    if state.idle > 0 || state.threads >= MAX_THREADS {
        drop(state);
        pool.ready.notify_one();
        return Ok(());
    }
    state.threads += 1;
    drop(state);
    let started = std::thread::Builder::new()
        .name(format!(
            "modhost-spawner{}{}",
            if flavour.network { "-net" } else { "" },
            if flavour.exec_gated { "-noexec" } else { "" }
        ))
        .spawn(move || work(pool));
    if let Err(e) = started {
        let mut state = pool.lock();
        state.threads -= 1;
        if state.threads == 0 {
            // Nobody would ever run the queued starts: dropped, unrun
            // (a start's caller sees its sender dropped).
            state.jobs.clear();
            return Err(e);
        }
    }
    Ok(())
}

/// A spawner's life: take the shared confinement, then run starts.
fn work(pool: &'static Pool) {
    // A carry that panicked records nothing: the thread's children then
    // enter the whole confinement themselves (what it took is only
    // repeated), and the thread still serves its queue.
    let flavour = pool.flavour;
    let _ = std::panic::catch_unwind(move || crate::spawner::carry(flavour));
    loop {
        let job = {
            let mut state = pool.lock();
            loop {
                if let Some(job) = state.jobs.pop_front() {
                    break job;
                }
                state.idle += 1;
                state = pool.ready.wait(state).unwrap_or_else(|e| e.into_inner());
                state.idle -= 1;
            }
        };
        // A panicking start drops its sender (the caller sees an error);
        // the thread goes on serving.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}
