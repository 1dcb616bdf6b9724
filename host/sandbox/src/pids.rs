//! A bound on the processes of a root host's modules: a pids cgroup.
//!
//! `RLIMIT_NPROC` counts processes per user, and the kernel exempts uid 0
//! of the initial user namespace from it whatever its capabilities
//! (`copy_process`: `real_cred->user != INIT_USER` is checked first).
//! Measured on this project's CI (Linux 6.18, host as root, capabilities
//! dropped): a confined module forked 400 processes against a limit of
//! about 350. Seccomp cannot count. So when the host runs as root, every
//! module process joins a pids cgroup of the host's own, whose `pids.max`
//! is [`super::PROCESS_MARGIN`]: a fork bomb fails with `EAGAIN` there.
//!
//! Design decisions:
//!
//! - **One cgroup per host, not per call.** `modhost-<host pid>` beside the
//!   host's own pids cgroup, created at the first confined call and joined by
//!   each module's child before it drops its capabilities (one `write` of
//!   `0` to a membership file opened once). A per-call cgroup would
//!   bound each call alone but costs a `mkdir` and an `rmdir` per call, and
//!   the `rmdir` fails until init has reaped every killed helper. The
//!   consequence: the limit is shared by the calls a host runs at once
//!   (and its warm processes); a fork bomb in one call can make another's
//!   spawn fail until its group is killed at the end of the call.
//! - **Joined by thread under v1.** A write to `cgroup.procs` moves a whole
//!   thread group, so the kernel takes its global lock against forks and
//!   exits for writing (`cgroup_threadgroup_rwsem`), which waits for an RCU
//!   grace period unless another move did so moments before. Measured on
//!   Linux 6.18 (cgroup v1), a fork whose child moves itself: 0.04 ms back
//!   to back, but 7 to 18 ms for every move 100 ms apart and 9 to 21 ms
//!   for half of those 20 ms apart (every one-shot `modhost invoke`, every
//!   call after a pause: the host bench's `paused` part went from 6x a
//!   bare spawn to 1.4x). A write of `0` to v1's `tasks` moves only the
//!   calling thread, which the kernel does without that lock: 0.04 to 0.09
//!   ms at any spacing (a kernel older than that shortcut takes the lock
//!   for both files, so `tasks` is never the slower). The child is a single
//!   thread between its clone and its exec, so moving it is moving its
//!   process, and whatever it starts afterwards is born inside. A v2
//!   domain cgroup takes processes only (`cgroup.threads` is for threaded
//!   subtrees), so there the child still writes `cgroup.procs` and may
//!   wait. What would spare v2 the move is a child born inside (`clone3`
//!   with `CLONE_INTO_CGROUP`), which `runner::native::spawn`'s `clone` on
//!   a stack of its own does not do yet.
//! - **cgroup v1 or a delegated v2.** A v1 `pids` hierarchy takes a child
//!   cgroup anywhere. Under v2 a child cgroup only has `pids.max` when the
//!   host's cgroup delegates the controller, which a process inside that
//!   cgroup cannot arrange (no internal processes); then there is no bound
//!   and the call's warning says so.
//! - **Removed at the end, swept if not.** The command line removes its
//!   cgroup as it exits ([`remove_host_cgroup`]); a host that died, or
//!   whose cgroup still held a killed helper not yet reaped, leaves its
//!   empty `modhost-<pid>`, and the next host removes those whose pid is
//!   gone.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The host's modules' cgroup once the first confined call asked for it:
/// the cgroup, or why there is none.
static CGROUP: OnceLock<Result<PidsCgroup, String>> = OnceLock::new();

/// The cgroup a root host's modules join.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    path: PathBuf,
    /// The file a write of `0` to moves the writer in (`tasks` under v1,
    /// `cgroup.procs` under v2), opened for writing, close-on-exec.
    membership: OwnedFd,
}

impl PidsCgroup {
    /// Move the calling process, a single thread, into the cgroup. Runs in
    /// the child between `clone` and `exec`: one `write` on a descriptor
    /// opened in the parent.
    #[allow(unsafe_code)]
    pub(crate) fn join(&self) -> Result<(), libc::c_int> {
        const SELF: &[u8] = b"0";
        // SAFETY: write of a static byte string to an open descriptor.
        let written = unsafe {
            libc::write(
                self.membership.as_raw_fd(),
                SELF.as_ptr().cast::<libc::c_void>(),
                SELF.len(),
            )
        };
        if written < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        Ok(())
    }
}

/// What bounds a module's processes beyond `RLIMIT_NPROC`: nothing needed
/// for a host that is not root; for root (exempt from the limit) the host's
/// modules' cgroup, when one could be made (else `support` reports the part).
pub(super) fn process_bound() -> Option<&'static PidsCgroup> {
    if !rustix::process::getuid().is_root() {
        return None;
    }
    host_cgroup(super::limits::PROCESS_MARGIN).ok()
}

/// The host's modules' cgroup, created once; `Err` says why there is none.
pub(crate) fn host_cgroup(max: u64) -> Result<&'static PidsCgroup, &'static str> {
    CGROUP
        .get_or_init(|| create(max))
        .as_ref()
        .map_err(String::as_str)
}

/// Remove the host's cgroup, if it made one: only as the host ends, once
/// its modules' processes are gone (a module started afterwards could not
/// join it). One that still holds a process (a killed helper init has not
/// reaped yet) is left for the next host's sweep.
pub fn remove_host_cgroup() {
    if let Some(Ok(cgroup)) = CGROUP.get() {
        let _ = std::fs::remove_dir(&cgroup.path);
    }
}

fn create(max: u64) -> Result<PidsCgroup, String> {
    let (parent, hierarchy) = crate::cgroup_path::own_cgroup("pids").ok_or_else(|| {
        "no pids cgroup controller is mounted where the host can use it".to_string()
    })?;
    crate::cgroup_path::sweep_stale(&parent);
    let path = parent.join(format!("modhost-{}", std::process::id()));
    match std::fs::create_dir(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", path.display())),
    }
    let limit = path.join("pids.max");
    if !limit.exists() {
        let _ = std::fs::remove_dir(&path);
        return Err(format!(
            "the pids controller is not delegated to {} (cgroup v2 without pids in the parent's cgroup.subtree_control)",
            parent.display()
        ));
    }
    std::fs::write(&limit, max.to_string())
        .map_err(|e| format!("writing {}: {e}", limit.display()))?;
    let membership = path.join(hierarchy.membership_file());
    let membership = std::fs::OpenOptions::new()
        .write(true)
        .open(&membership)
        .map_err(|e| format!("opening {}: {e}", membership.display()))?;
    Ok(PidsCgroup {
        path,
        membership: membership.into(),
    })
}
