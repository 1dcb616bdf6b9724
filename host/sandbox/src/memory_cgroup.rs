//! A bound on the memory of one native call: a memory cgroup per call,
//! from a pool the host keeps, or `RLIMIT_DATA` where it can make none.
//!
//! Components are bounded by their linear memory; a native module could
//! take what the machine has (issue 39 measured a call taking 3 GiB). Each
//! confined call therefore runs in a memory cgroup of its own whose limit
//! is the call's ([`crate::DEFAULT_NATIVE_MEMORY_BYTES`] unless the operator
//! says otherwise): all its processes together, helpers included, since
//! everything the child starts after joining is born inside.
//!
//! Design decisions:
//!
//! - **A cgroup per call, from a pool.** A limit per call needs a cgroup per
//!   call, but making one costs a `mkdir`, and removing it an `rmdir` that
//!   fails until init has reaped every killed helper (see `pids.rs`, which
//!   keeps one cgroup per host for that reason). So the host makes
//!   `modhost-<host pid>/call-<n>` beneath its own memory cgroup as calls
//!   need them and keeps them: a call takes an idle one, the host writes
//!   its limit only when it differs from the last call's, and gives it back
//!   when the call's process is reaped. A cgroup is taken only when it holds
//!   no process (`cgroup.procs` reads empty): a killed helper still dying,
//!   or one stuck in the kernel, keeps its cgroup out of the pool until it
//!   is gone, so two calls never share one, and a process started ahead
//!   (`runner::native::warm`) holds its own from its start to its end.
//!   The cost per call: one read of `cgroup.procs`, one of the OOM counter,
//!   the child's one `write` of `0` (below), and one more read of the OOM
//!   counter once the call's group is dead. Measured with the host bench
//!   (each call made with its cgroup and again with `RLIMIT_DATA`, back to
//!   back, Linux 6.18, two cores shared with other work, four runs): 0.05
//!   to 0.15 ms a call (1.04 to 1.12 times the call without), 0.02 to
//!   0.35 ms (1.01 to 1.18 times) with a 50 ms pause before each.
//! - **Joined by the child, by thread, under v1.** The child writes `0` to
//!   the cgroup's `tasks` between its clone and its exec, on a descriptor
//!   opened when the cgroup was made: the same cheap move, without the
//!   kernel's global lock against forks, that `pids.rs` explains. What it
//!   charged before (nothing: it runs on the host's memory until the exec)
//!   stays with the host; its new image is charged to the call.
//! - **Swap does not escape.** Under v1 `memory.memsw.limit_in_bytes` (when
//!   the kernel accounts swap) is set to the same value as
//!   `memory.limit_in_bytes`, so memory and swap together stay under the
//!   limit; under v2 `memory.swap.max` is 0.
//! - **The kernel's OOM killer, not `oom_kill_disable`.** At the limit the
//!   kernel first reclaims the call's own page cache, then kills the
//!   largest process of the call's cgroup (v2: the whole cgroup,
//!   `memory.oom.group`), at the very allocation, with no help from the
//!   host. The host learns of it afterwards from the cgroup's `oom_kill`
//!   counter (`memory.oom_control` under v1, `memory.events` under v2) and
//!   reports the call as `memory_limit`, whatever else it saw (a crash, a
//!   module's error about a helper that died); a call that still answered
//!   successfully keeps its answer, with a warning. With `oom_kill_disable`
//!   the call would freeze at the limit instead, and the host would have
//!   to notice (an eventfd per cgroup, a watcher) and kill it; a host
//!   that is slow or stuck would leave frozen processes holding their
//!   memory. The host itself is never in a call's cgroup, so the killer
//!   never chooses it, and a concurrent call is in a cgroup of its own.
//! - **`RLIMIT_DATA` where no cgroup can be made** (a host that is not
//!   root and has no delegated cgroup v2 memory controller). It bounds each
//!   process's private writable memory (heap, anonymous and private
//!   writable mappings), which is what a module allocates, and fails an
//!   allocation beyond it with `ENOMEM`: the module sees the failure, and
//!   the call ends as the module handles it. Weaker: per process, not per
//!   call (a module that forks may use the limit in each process, up to
//!   its process limit), and the host cannot tell the limit was hit.
//!   `RLIMIT_AS` would be simpler still and wrong: it counts address space,
//!   and runtimes reserve far more than they use (a Go program, V8 and the
//!   JVM each reserve gigabytes of address space at start), so any useful
//!   value would refuse them at start-up. `doctor` reports which mechanism
//!   holds, and a root host that cannot make its cgroups reports the
//!   resource-limits part as not enforced (`support.rs`), which
//!   `confinement = "required"` refuses, as for the pids cgroup.
//! - **cgroup v1 or a delegated v2,** found as `pids.rs` finds its own
//!   (`cgroup_path`). Under v2 the pool's parent enables the memory (and
//!   pids) controller for its children, and is given the host's process
//!   bound itself (`pids.max`): a process that moves from the host's pids
//!   cgroup into its call's memory cgroup stays under it.
//! - **A cgroup is leased empty of charges too.** Pages a call wrote to a
//!   tmpfs file (a workspace on tmpfs, `/dev/shm`) stay charged to its
//!   cgroup after its processes are gone: nothing can reclaim them without
//!   swap, and the next call of the cgroup (another module's) would start
//!   with them against its own limit and die at a fraction of it. At
//!   lease, a cgroup charged with more than `LEFT_OVER_MAX` is emptied
//!   (v1 `memory.force_empty`, v2 `memory.reclaim`); one still charged is
//!   retired (removed: the kernel moves its charges to the parent) and a
//!   fresh one made under the same name. One read of the usage a lease.
//! - **Removed at the end, swept if not,** as `pids.rs` does:
//!   [`remove_host_cgroups`] as the command line exits; a host that died
//!   leaves its `modhost-<pid>`, and the next host removes those whose pid
//!   is gone.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rustix::fs::{Mode, OFlags};

use crate::cgroup_path::{self, Hierarchy};

/// The host's pool of call cgroups once the first call asked for it, or why
/// there is none.
static POOL: OnceLock<Result<Pool, String>> = OnceLock::new();

/// Set by [`set_per_call_cgroups`] (the host bench): calls get `RLIMIT_DATA`
/// as if no cgroup could be made.
static CGROUPS_OFF: AtomicBool = AtomicBool::new(false);

/// The most call cgroups a host makes: more than the processes it may run
/// at once (`crate::PROCESS_MARGIN`), so a call never waits for one; a
/// start beyond it fails rather than make cgroups without end.
const MAX_CGROUPS: usize = 512;

/// What a cgroup may still be charged with when a call leases it: kernel
/// memory and page cache an earlier call left that the kernel frees as
/// needed (a Python call leaves a few MiB). More (tmpfs pages) is emptied or
/// the cgroup replaced.
const LEFT_OVER_MAX: u64 = 16 << 20;

/// The memory bound of one call: its cgroup (held until the handle and
/// every clone of it are dropped, which gives the cgroup back to the pool)
/// or the `RLIMIT_DATA` its process gets.
#[derive(Debug, Clone)]
pub struct MemoryBound(Arc<Bound>);

#[derive(Debug)]
enum Bound {
    Cgroup(Lease),
    DataLimit(u64),
}

impl MemoryBound {
    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        match &*self.0 {
            Bound::Cgroup(lease) => lease.limit,
            Bound::DataLimit(limit) => *limit,
        }
    }

    /// Whether the limit holds for the call's processes together (a
    /// cgroup), rather than for each process alone (`RLIMIT_DATA`).
    pub fn is_per_call(&self) -> bool {
        matches!(&*self.0, Bound::Cgroup(_))
    }

    /// What holds the limit, for messages.
    pub fn mechanism(&self) -> &'static str {
        match &*self.0 {
            Bound::Cgroup(lease) => match lease.pool.hierarchy {
                Hierarchy::V1 => "a memory cgroup of the call's own (cgroup v1)",
                Hierarchy::V2 => "a memory cgroup of the call's own (cgroup v2)",
            },
            Bound::DataLimit(_) => "RLIMIT_DATA, per process",
        }
    }

    /// Whether the kernel killed a process of the call at the limit since
    /// the call took its cgroup. Always false under `RLIMIT_DATA`, where the
    /// host cannot tell.
    pub fn limit_was_hit(&self) -> bool {
        match &*self.0 {
            Bound::Cgroup(lease) => lease
                .slot
                .as_ref()
                .and_then(|slot| lease.pool.oom_kills(slot))
                .is_some_and(|now| now > lease.oom_kills_at_start),
            Bound::DataLimit(_) => false,
        }
    }

    /// Where the call's cgroup is (`None` under `RLIMIT_DATA`): for the
    /// tests that look at what a process sits in.
    pub fn cgroup_path(&self) -> Option<PathBuf> {
        match &*self.0 {
            Bound::Cgroup(lease) => lease.slot.as_ref().map(|s| lease.pool.path_of(s.index)),
            Bound::DataLimit(_) => None,
        }
    }

    /// Enter the bound. Runs in the child between `clone` and `exec`: one
    /// `write` on a descriptor opened in the parent, or one `setrlimit`;
    /// no allocation, no panic.
    pub(crate) fn enter(&self) -> Result<(), libc::c_int> {
        match &*self.0 {
            Bound::Cgroup(lease) => match &lease.slot {
                Some(slot) => join(&slot.membership),
                None => Err(libc::EBADF),
            },
            Bound::DataLimit(limit) => lower_data_limit(*limit),
        }
    }
}

/// Lower `RLIMIT_DATA`, soft and hard, to `limit` (never raise it: an
/// operator's stricter limit stays). In the child: system calls on stack
/// values only.
#[allow(unsafe_code)]
fn lower_data_limit(limit: u64) -> Result<(), libc::c_int> {
    let mut current = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit64/setrlimit64 read and write a stack value.
    unsafe {
        if libc::getrlimit64(libc::RLIMIT_DATA, &raw mut current) != 0 {
            return Err(super::errno::last_errno());
        }
        current.rlim_cur = current.rlim_cur.min(limit);
        current.rlim_max = current.rlim_max.min(limit);
        if libc::setrlimit64(libc::RLIMIT_DATA, &raw const current) != 0 {
            return Err(super::errno::last_errno());
        }
    }
    Ok(())
}

/// Move the calling process, a single thread, into the cgroup whose
/// membership file `membership` is open for writing.
#[allow(unsafe_code)]
fn join(membership: &OwnedFd) -> Result<(), libc::c_int> {
    const SELF: &[u8] = b"0";
    // SAFETY: write of a static byte string to an open descriptor.
    let written = unsafe {
        libc::write(
            membership.as_raw_fd(),
            SELF.as_ptr().cast::<libc::c_void>(),
            SELF.len(),
        )
    };
    if written < 0 {
        return Err(super::errno::last_errno());
    }
    Ok(())
}

/// A memory bound of `limit` bytes for one call: a call cgroup of the
/// host's pool, else `RLIMIT_DATA`. With the fallback, the reason when the
/// host has a pool that could not give a cgroup now (every one busy, a
/// write the kernel refused), which the caller refuses or warns about; a
/// host without a pool says so through `support` instead.
pub(crate) fn bound(limit: u64) -> (MemoryBound, Option<String>) {
    let (bound, failure) = match host_pool() {
        Ok(pool) => match pool.lease(limit) {
            Ok(lease) => (Bound::Cgroup(lease), None),
            Err(reason) => (Bound::DataLimit(limit), Some(reason)),
        },
        Err(_) => (Bound::DataLimit(limit), None),
    };
    (MemoryBound(Arc::new(bound)), failure)
}

/// What bounds a call's memory on this machine, for `doctor` and `support`:
/// the cgroup hierarchy the host makes call cgroups in, or why it makes
/// none (then each process gets `RLIMIT_DATA`).
pub fn per_call_mechanism() -> Result<&'static str, &'static str> {
    host_pool().map(|pool| pool.hierarchy.label())
}

/// Make calls use `RLIMIT_DATA` (`false`) or their cgroups again (`true`):
/// for the host bench, which measures a call with and without its cgroup
/// in one run. Never needed by a host.
#[doc(hidden)]
pub fn set_per_call_cgroups(enabled: bool) {
    CGROUPS_OFF.store(!enabled, Ordering::Relaxed);
}

/// The host's pool, made once; `Err` says why there is none.
fn host_pool() -> Result<&'static Pool, &'static str> {
    if CGROUPS_OFF.load(Ordering::Relaxed) {
        return Err("per-call memory cgroups are switched off (host bench)");
    }
    POOL.get_or_init(Pool::create)
        .as_ref()
        .map_err(String::as_str)
}

/// Remove the host's call cgroups and their folder, if it made them: only
/// as the host ends, once its modules' processes are gone. One that still
/// holds a process (a killed helper init has not reaped yet) is left for
/// the next host's sweep.
pub fn remove_host_cgroups() {
    if let Some(Ok(pool)) = POOL.get() {
        for index in 0..pool.made.load(Ordering::Relaxed).min(MAX_CGROUPS) {
            let _ = std::fs::remove_dir(pool.path_of(index));
        }
        let _ = std::fs::remove_dir(&pool.dir);
    }
}

/// The call cgroups of one host, beneath its own memory cgroup.
#[derive(Debug)]
struct Pool {
    /// `<the host's memory cgroup>/modhost-<pid>`.
    dir: PathBuf,
    hierarchy: Hierarchy,
    /// The v1 file that bounds memory and swap together, when the kernel
    /// accounts swap.
    memsw: bool,
    /// Cgroups no call holds, the most recently given back last.
    idle: Mutex<VecDeque<Slot>>,
    /// How many have been made (their names are `call-0`, `call-1`, ...).
    made: AtomicUsize,
    /// Names of cgroups retired (removed), made again before a new name.
    retired: Mutex<Vec<usize>>,
}

/// One call cgroup.
#[derive(Debug)]
struct Slot {
    index: usize,
    /// The cgroup's folder (`O_PATH`): its files are opened beneath it.
    dir: OwnedFd,
    /// Its membership file, open for writing: the child's one `write`.
    membership: OwnedFd,
    /// The limit written last (`u64::MAX` before the first).
    limit: u64,
}

/// A call's hold on a slot; gives it back when dropped.
#[derive(Debug)]
struct Lease {
    pool: &'static Pool,
    slot: Option<Slot>,
    limit: u64,
    oom_kills_at_start: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.give_back(slot);
        }
    }
}

/// The files of the memory controller, by hierarchy.
struct Files {
    limit: &'static str,
    oom_events: &'static str,
}

impl Hierarchy {
    fn memory_files(self) -> Files {
        match self {
            Hierarchy::V1 => Files {
                limit: "memory.limit_in_bytes",
                oom_events: "memory.oom_control",
            },
            Hierarchy::V2 => Files {
                limit: "memory.max",
                oom_events: "memory.events",
            },
        }
    }
}

impl Pool {
    fn create() -> Result<Pool, String> {
        let (parent, hierarchy) = cgroup_path::own_cgroup("memory").ok_or_else(|| {
            "no memory cgroup controller is mounted where the host can use it".to_string()
        })?;
        cgroup_path::sweep_stale(&parent);
        let dir = parent.join(format!("modhost-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
        let fail = |message: String| {
            let _ = std::fs::remove_dir(&dir);
            Err(message)
        };
        let files = hierarchy.memory_files();
        if hierarchy == Hierarchy::V2 {
            // The children's memory (and pids) files appear only once the
            // folder hands the controllers down; `memory.max` on the
            // folder itself says the parent delegated memory to it.
            if !dir.join(files.limit).exists() {
                return fail(format!(
                    "the memory controller is not delegated to {} (cgroup v2 without memory in the parent's cgroup.subtree_control)",
                    parent.display()
                ));
            }
            let pids = dir.join("pids.max").exists();
            let control = if pids { "+memory +pids" } else { "+memory" };
            if let Err(e) = std::fs::write(dir.join("cgroup.subtree_control"), control) {
                return fail(format!(
                    "enabling the memory controller for the calls of {}: {e}",
                    dir.display()
                ));
            }
            if pids {
                let margin = crate::limits::PROCESS_MARGIN;
                let _ = std::fs::write(dir.join("pids.max"), margin.to_string());
            }
        } else if !dir.join(files.limit).exists() {
            return fail(format!("{} has no {}", dir.display(), files.limit));
        }
        let memsw = hierarchy == Hierarchy::V1 && dir.join("memory.memsw.limit_in_bytes").exists();
        let pool = Pool {
            dir: dir.clone(),
            hierarchy,
            memsw,
            idle: Mutex::new(VecDeque::new()),
            made: AtomicUsize::new(0),
            retired: Mutex::new(Vec::new()),
        };
        // One made now, so a host that cannot make any learns it here (and
        // `doctor` says so), not at its first call.
        match pool.make() {
            Ok(slot) => pool.give_back(slot),
            Err(e) => return fail(e),
        }
        Ok(pool)
    }

    fn path_of(&self, index: usize) -> PathBuf {
        self.dir.join(format!("call-{index}"))
    }

    /// An empty cgroup with its limit set to `limit`.
    fn lease(&'static self, limit: u64) -> Result<Lease, String> {
        let slot = self.take_empty().map_or_else(|| self.make(), Ok)?;
        let mut slot = self.emptied(slot)?;
        if let Err(first) = self.set_limit(&mut slot, limit) {
            // The kernel could not bring what the cgroup still holds (page
            // cache of an earlier call) under a lower limit: this one is
            // retired, and a fresh one takes the call.
            tracing::debug!("retiring call cgroup {}: {first}", slot.index);
            self.retire(slot);
            slot = self.make()?;
            self.set_limit(&mut slot, limit)?;
        }
        let oom_kills_at_start = self.oom_kills(&slot).unwrap_or(0);
        Ok(Lease {
            pool: self,
            slot: Some(slot),
            limit,
            oom_kills_at_start,
        })
    }

    /// What the cgroup is charged with now (`None`: unreadable).
    fn charged(&self, slot: &Slot) -> Option<u64> {
        let file = match self.hierarchy {
            Hierarchy::V1 => "memory.usage_in_bytes",
            Hierarchy::V2 => "memory.current",
        };
        read_file(&slot.dir, file).ok()?.trim().parse().ok()
    }

    /// `slot`, or a fresh cgroup in its place, charged with no more than
    /// [`LEFT_OVER_MAX`]: what an earlier call left (tmpfs pages above all)
    /// is reclaimed, and a cgroup whose charge stays is retired.
    fn emptied(&self, slot: Slot) -> Result<Slot, String> {
        let Some(charged) = self.charged(&slot) else {
            return Ok(slot);
        };
        if charged <= LEFT_OVER_MAX {
            return Ok(slot);
        }
        let _ = match self.hierarchy {
            Hierarchy::V1 => write_file(&slot.dir, "memory.force_empty", "0"),
            Hierarchy::V2 => write_file(&slot.dir, "memory.reclaim", &charged.to_string()),
        };
        if self
            .charged(&slot)
            .is_some_and(|left| left <= LEFT_OVER_MAX)
        {
            return Ok(slot);
        }
        tracing::debug!(
            "retiring call cgroup {}: {charged} bytes stay charged to it",
            slot.index
        );
        self.retire(slot);
        self.make()
    }

    /// Remove the cgroup of `slot` (which holds no process): the kernel
    /// moves what it is still charged with to the parent. Its name is made
    /// again when the host next needs a cgroup; one the kernel would not
    /// remove is left (and its name unused) until the host ends.
    fn retire(&self, slot: Slot) {
        let index = slot.index;
        drop(slot);
        if std::fs::remove_dir(self.path_of(index)).is_ok() {
            self.retired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(index);
        }
    }

    /// The most recently given back idle cgroup that holds no process;
    /// those that still do go to the front, looked at last.
    fn take_empty(&self) -> Option<Slot> {
        let mut busy = Vec::new();
        let found = loop {
            let Some(slot) = self.lock_idle().pop_back() else {
                break None;
            };
            if holds_no_process(&slot) {
                break Some(slot);
            }
            busy.push(slot);
        };
        if !busy.is_empty() {
            let mut idle = self.lock_idle();
            for slot in busy {
                idle.push_front(slot);
            }
        }
        found
    }

    fn give_back(&self, slot: Slot) {
        self.lock_idle().push_back(slot);
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new call cgroup: its folder made, its files opened, the kernel's
    /// OOM killer on for it (v1 inherits `oom_kill_disable` from the
    /// parent; v2 kills the whole cgroup), swap bounded with memory.
    fn make(&self) -> Result<Slot, String> {
        let reused = self.retired.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let index = match reused {
            Some(index) => index,
            None => self.made.fetch_add(1, Ordering::Relaxed),
        };
        if index >= MAX_CGROUPS {
            self.made.fetch_sub(1, Ordering::Relaxed);
            return Err(format!(
                "the host already holds {MAX_CGROUPS} call cgroups, each with a process in it"
            ));
        }
        let path = self.path_of(index);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("creating {}: {e}", path.display())),
        }
        let dir = rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
        let membership = rustix::fs::openat(
            &dir,
            self.hierarchy.membership_file(),
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("opening {}'s membership file: {e}", path.display()))?;
        let slot = Slot {
            index,
            dir,
            membership,
            limit: u64::MAX,
        };
        let settings: &[(&str, &str)] = match self.hierarchy {
            Hierarchy::V1 => &[("memory.oom_control", "0")],
            Hierarchy::V2 => &[("memory.oom.group", "1"), ("memory.swap.max", "0")],
        };
        for (file, value) in settings {
            // `memory.swap.max` is missing without swap accounting: then
            // there is no swap to escape into.
            match write_file(&slot.dir, file, value) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("writing {}/{file}: {e}", path.display())),
            }
        }
        Ok(slot)
    }

    /// Write `limit` to the slot's limit files, unless they hold it already.
    /// Under v1 the memory-and-swap limit may never be below the memory
    /// limit, so the order depends on the direction.
    fn set_limit(&self, slot: &mut Slot, limit: u64) -> Result<(), String> {
        if slot.limit == limit {
            return Ok(());
        }
        let value = limit.to_string();
        let limit_file = self.hierarchy.memory_files().limit;
        let mut files = vec![limit_file];
        if self.memsw {
            if limit > slot.limit {
                files.insert(0, "memory.memsw.limit_in_bytes");
            } else {
                files.push("memory.memsw.limit_in_bytes");
            }
        }
        // Unknown until the first write: forget it on a failure midway.
        slot.limit = u64::MAX;
        for file in files {
            write_file(&slot.dir, file, &value)
                .map_err(|e| format!("writing {value} to call-{}/{file}: {e}", slot.index))?;
        }
        slot.limit = limit;
        Ok(())
    }

    /// The cgroup's count of processes the kernel's OOM killer killed.
    fn oom_kills(&self, slot: &Slot) -> Option<u64> {
        let text = read_file(&slot.dir, self.hierarchy.memory_files().oom_events).ok()?;
        oom_kill_count(&text)
    }
}

/// `oom_kill N` from `memory.oom_control` (v1) or `memory.events` (v2).
fn oom_kill_count(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

/// Whether no process is in the cgroup: `cgroup.procs` reads empty.
fn holds_no_process(slot: &Slot) -> bool {
    let Ok(file) = rustix::fs::openat(
        &slot.dir,
        "cgroup.procs",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let mut byte = [0u8; 1];
    matches!(rustix::io::read(&file, &mut byte), Ok(0))
}

fn write_file(dir: impl AsFd, name: &str, value: &str) -> std::io::Result<()> {
    let file = rustix::fs::openat(dir, name, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&file, value.as_bytes())?;
    Ok(())
}

fn read_file(dir: impl AsFd, name: &str) -> std::io::Result<String> {
    let file = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut buffer = [0u8; 1024];
    let mut text = Vec::new();
    loop {
        match rustix::io::read(&file, &mut buffer)? {
            0 => break,
            n => text.extend_from_slice(&buffer[..n]),
        }
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The suite runs as root on cgroup v1 with the memory controller
    /// (CI too): a machine without it fails here rather than skip.
    fn pool() -> &'static Pool {
        match host_pool() {
            Ok(pool) => pool,
            Err(why) => panic!("this test needs per-call memory cgroups: {why}"),
        }
    }

    fn read(path: &std::path::Path, file: &str) -> String {
        std::fs::read_to_string(path.join(file)).unwrap()
    }

    #[test]
    fn oom_kills_are_read_from_either_hierarchys_file() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        let v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 1\n";
        assert_eq!(oom_kill_count(v1), Some(3));
        assert_eq!(oom_kill_count(v2), Some(2));
        assert_eq!(oom_kill_count("under_oom 0\n"), None);
    }

    /// A lease's cgroup carries its limit, memory and swap alike, and two
    /// leases held at once are two cgroups.
    #[test]
    fn each_lease_is_a_cgroup_of_its_own_with_its_limit() {
        let pool = pool();
        let first = MemoryBound(Arc::new(Bound::Cgroup(pool.lease(64 << 20).unwrap())));
        let second = MemoryBound(Arc::new(Bound::Cgroup(pool.lease(96 << 20).unwrap())));
        let (a, b) = (first.cgroup_path().unwrap(), second.cgroup_path().unwrap());
        assert_ne!(a, b, "two live leases share a cgroup");
        let limit = pool.hierarchy.memory_files().limit;
        assert_eq!(read(&a, limit).trim(), (64u64 << 20).to_string());
        assert_eq!(read(&b, limit).trim(), (96u64 << 20).to_string());
        if pool.memsw {
            assert_eq!(
                read(&a, "memory.memsw.limit_in_bytes").trim(),
                (64u64 << 20).to_string()
            );
        }
        assert!(first.is_per_call() && !first.limit_was_hit());
    }

    /// The attack on the pool: a process of an earlier call still alive in
    /// its cgroup (a helper that outlived its group's kill, or one stuck in
    /// the kernel) when the cgroup is given back. No later lease gets that
    /// cgroup while the process is in it.
    #[test]
    fn a_cgroup_that_still_holds_a_process_is_not_leased_again() {
        let pool = pool();
        let lease = pool.lease(128 << 20).unwrap();
        let path = pool.path_of(lease.slot.as_ref().unwrap().index);
        let mut sleeper = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(path.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
        drop(lease);
        let taken: Vec<Lease> = (0..4).map(|_| pool.lease(128 << 20).unwrap()).collect();
        for other in &taken {
            assert_ne!(
                pool.path_of(other.slot.as_ref().unwrap().index),
                path,
                "a cgroup with a live process in it was leased"
            );
        }
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
    }

    /// The limit is the kernel's: a process that joins a lease's cgroup and
    /// touches more than its limit is killed by the OOM killer, and the
    /// lease says so; the host (this test) is not touched.
    #[test]
    fn a_process_over_the_limit_is_killed_and_the_lease_knows() {
        let pool = pool();
        let bound = MemoryBound(Arc::new(Bound::Cgroup(pool.lease(32 << 20).unwrap())));
        let path = bound.cgroup_path().unwrap();
        // The shell joins, then grows a string to 256 MiB.
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "echo 0 > {}/tasks 2>/dev/null || echo $$ > {}/cgroup.procs; exec python3 -c 'b = bytearray(256 << 20); print(len(b))'",
                path.display(),
                path.display()
            ))
            .status()
            .unwrap();
        assert!(!status.success(), "the process outgrew its limit: {status}");
        assert!(bound.limit_was_hit(), "the OOM kill went unnoticed");
    }

    /// A tmpfs mounted for a test, unmounted (and its pages freed) when
    /// dropped.
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn mount() -> Tmpfs {
            let dir = tempfile::tempdir().unwrap();
            let status = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=128m", "modhost-test"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(
                status.success(),
                "this test mounts a tmpfs (as root): {status}"
            );
            Tmpfs(dir)
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.0.path())
                .status();
        }
    }

    /// The attack on the pool: a call writes 96 MiB to a file on tmpfs (a
    /// workspace there, or `/dev/shm`) and ends; the pages stay charged to
    /// its cgroup, where nothing can reclaim them. The next lease of that
    /// cgroup (another module's call, with a limit of its own) starts with
    /// none of it: the cgroup is emptied, or replaced by a fresh one.
    #[test]
    fn a_cgroup_left_charged_with_tmpfs_pages_is_not_leased_so() {
        let pool = pool();
        let tmpfs = Tmpfs::mount();
        // A cgroup of its own, out of the idle queue other tests lease from.
        let mut slot = pool.make().unwrap();
        pool.set_limit(&mut slot, 512 << 20).unwrap();
        let path = pool.path_of(slot.index);
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "echo 0 > {}/tasks 2>/dev/null || echo $$ > {}/cgroup.procs; exec head -c 96M /dev/zero > {}/blob",
                path.display(),
                path.display(),
                tmpfs.0.path().display()
            ))
            .status()
            .unwrap();
        assert!(status.success(), "{status}");
        let left = pool.charged(&slot).unwrap();
        assert!(
            left >= 90 << 20,
            "the pages were not charged to the call: {left}"
        );
        let ready = pool.emptied(slot).unwrap();
        let charged = pool.charged(&ready).unwrap();
        assert!(
            charged <= LEFT_OVER_MAX,
            "a lease would start with {charged} bytes charged"
        );
        pool.give_back(ready);
        drop(tmpfs);
    }

    #[test]
    fn the_rlimit_bound_is_per_process_and_never_reports_a_hit() {
        let bound = MemoryBound(Arc::new(Bound::DataLimit(1 << 30)));
        assert!(!bound.is_per_call());
        assert!(!bound.limit_was_hit());
        assert_eq!(bound.limit(), 1 << 30);
        assert!(bound.mechanism().contains("RLIMIT_DATA"));
    }
}
