//! What the child enters between `clone` and `exec`.
//!
//! The child shares the host's memory (`runner::native::spawn`), so this is
//! system calls only, on values prepared in the parent: no allocation, no
//! lock, nothing that can panic (no `unwrap`, no indexing, no formatting,
//! no arithmetic that can overflow), in debug builds too. Errors are errnos.
//!
//! Order: the egress network namespace of a call with network (joining
//! needs `CAP_SYS_ADMIN`), resource limits (lowering needs no privilege), the pids cgroup
//! and the call's memory cgroup (joining needs root's privileges), then the capabilities are dropped (the steps need `CAP_SETPCAP`, which goes
//! last), `no_new_privs`, the landlock domain, and the seccomp filters last,
//! so nothing above is itself filtered. Steps the spawning thread carries
//! (`spawner`: the bounding set, the base seccomp layer) are
//! left out by the preparation; the child inherits them at the clone. A
//! child with a landlock domain under the base layer installs no filter of
//! its own (`seccomp::Layer::Base`). Its exec, last, carries the host's key
//! (`spawn.rs`): an exec-gated call's filter lets no other exec through.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::capabilities::CapabilityDrop;
use super::errno::last_errno;
use super::launch::Launch;
use super::limits::ResourceLimits;
use super::memory_cgroup::MemoryBound;
use super::pids::PidsCgroup;
use super::seccomp::{Layer, Programs};
use super::spawner::Carried;

/// Values the child needs, all prepared before the clone.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) ruleset: Option<OwnedFd>,
    pub(super) limits: Option<ResourceLimits>,
    pub(super) capabilities: Option<CapabilityDrop>,
    /// The filter and the layer of it the child installs (the whole, or
    /// only the process-group calls over a base its thread carries).
    pub(super) seccomp: Option<(&'static Programs, Layer)>,
    /// Joined by a root host's modules, which `RLIMIT_NPROC` does not bind.
    pub(super) cgroup: Option<&'static PidsCgroup>,
    /// The call's memory bound: its memory cgroup, joined like the pids
    /// cgroup, or `RLIMIT_DATA` (`memory_cgroup`).
    pub(super) memory: Option<MemoryBound>,
    /// What the spawner thread carries for the child (the parts left out
    /// above); the child must be cloned from that thread
    /// (`ChildConfinement::may_start_here`).
    pub(super) spawner: Option<Carried>,
    /// The egress network namespace, joined by the child of a call with
    /// network whose thread does not sit in it already (the namespace's
    /// descriptor lives as long as the host: `egress_namespace`).
    pub(super) network_namespace: Option<RawFd>,
    /// The host's key, for the child's own `setpgid` and `execve`
    /// (`seccomp::Layer::Base`); 0 without one.
    pub(super) host_key: u64,
    /// What the child execs in place of the program it was asked to
    /// (`launch`: an exec-gated entry's `#!/usr/bin/env` line done by the
    /// host); read in the parent, before the clone.
    pub(super) launch: Option<Arc<Launch>>,
}

impl Prepared {
    /// Whether there is anything to enter.
    pub(super) fn is_empty(&self) -> bool {
        self.ruleset.is_none()
            && self.network_namespace.is_none()
            && self.limits.is_none()
            && self.capabilities.is_none()
            && self.seccomp.is_none()
            && self.cgroup.is_none()
            && self.memory.is_none()
            && self.launch.is_none()
    }

    /// Enter the confinement; the errno of the first step that failed.
    pub(super) fn enter(&self) -> Result<(), libc::c_int> {
        if let Some(spawner) = self.spawner {
            die_with_the_host(spawner.host)?;
        }
        if let Some(namespace) = self.network_namespace {
            // SAFETY: setns on a descriptor the host keeps open for its
            // life; it changes only this process.
            #[allow(unsafe_code)]
            if unsafe { libc::setns(namespace, libc::CLONE_NEWNET) } != 0 {
                return Err(last_errno());
            }
        }
        if let Some(limits) = self.limits {
            set_limit(libc::RLIMIT_CORE, 0)?;
            set_limit(libc::RLIMIT_FSIZE, limits.file_size)?;
            set_limit(libc::RLIMIT_NPROC, limits.processes)?;
        }
        if let Some(cgroup) = self.cgroup {
            cgroup.join()?;
        }
        if let Some(memory) = &self.memory {
            memory.enter()?;
        }
        if let Some(capabilities) = &self.capabilities {
            capabilities.drop_all()?;
        }
        // Required to enter a domain or install a filter without
        // privileges, and it keeps setuid programs from lifting either.
        // SAFETY: prctl with integer arguments.
        #[allow(unsafe_code)]
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(last_errno());
        }
        if let Some(ruleset) = &self.ruleset {
            // SAFETY: landlock_restrict_self takes a descriptor and flags.
            #[allow(unsafe_code)]
            let status = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if status != 0 {
                return Err(last_errno());
            }
        }
        if let Some((programs, layer)) = self.seccomp {
            programs.install(layer)?;
        }
        Ok(())
    }
}

/// Be killed when the host dies (a crash, `kill -9`), rather than outlive
/// it. The signal is sent when the thread that cloned the child exits: a
/// spawner thread lives as long as the host's process, so only children
/// cloned from one ask for it (a blocking-pool thread retires when idle,
/// and would take its children with it). A host already gone before the
/// request (the child's parent is then someone else) fails the start.
#[allow(unsafe_code)]
fn die_with_the_host(host: libc::pid_t) -> Result<(), libc::c_int> {
    // SAFETY: prctl with integer arguments; getppid takes none.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(last_errno());
        }
        if libc::getppid() != host {
            return Err(libc::ESRCH);
        }
    }
    Ok(())
}

/// Lower the soft and hard limit of `resource` to `value` (never raise: an
/// operator's stricter limit stays).
#[allow(unsafe_code)]
fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> Result<(), libc::c_int> {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit64/setrlimit64 read and write a stack value.
    unsafe {
        if libc::getrlimit64(resource, &raw mut limit) != 0 {
            return Err(last_errno());
        }
        limit.rlim_cur = limit.rlim_cur.min(value);
        limit.rlim_max = limit.rlim_max.min(value);
        if libc::setrlimit64(resource, &raw const limit) != 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}
