//! Dropping every Linux capability in the child of a host that has them.
//!
//! A host running as root (containers and CI run it that way) would hand a
//! module every capability of root: raw sockets, namespaces, `chroot`,
//! device nodes, and an exemption from file permissions. The child therefore
//! drops them all before exec, in this order (each step needs the
//! capabilities the next one removes):
//!
//! 1. securebits locked: `NOROOT` (uid 0 gains nothing at exec),
//!    `NO_SETUID_FIXUP`, `KEEP_CAPS` off and `NO_CAP_AMBIENT_RAISE`, each with
//!    its lock bit, so nothing the module runs can turn them back;
//! 2. the bounding set emptied (`PR_CAPBSET_DROP` for every capability up to
//!    the kernel's last, read in the parent from
//!    `/proc/sys/kernel/cap_last_cap`);
//! 3. the ambient set cleared;
//! 4. effective, permitted and inheritable zeroed with `capset`.
//!
//! Steps 1 to 3 are per thread and inherited at `clone`: a spawner thread
//! (`spawner`) takes them once for all the children it starts,
//! which then only take step 4 (41 `prctl`s, each a new set of credentials,
//! cost some 28 us per child).
//!
//! Then `no_new_privs` (set before landlock) keeps setuid and file
//! capabilities from giving anything back at exec. The module keeps uid 0,
//! so it still owns root-owned files; landlock decides which it may open.
//!
//! What this does not do: the kernel exempts uid 0 of the initial user
//! namespace from `RLIMIT_NPROC` whatever its capabilities (`copy_process`
//! checks `real_cred->user != INIT_USER` first), so a fork bomb is not
//! stopped by the limit alone; see `confine::pids`.

use super::errno::last_errno;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets in two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Securebits: NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE on, KEEP_CAPS
/// off, all four locked.
const LOCKED_SECUREBITS: libc::c_ulong = (1 << 0) // SECBIT_NOROOT
    | (1 << 1) // SECBIT_NOROOT_LOCKED
    | (1 << 2) // SECBIT_NO_SETUID_FIXUP
    | (1 << 3) // SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5) // SECBIT_KEEP_CAPS_LOCKED
    | (1 << 6) // SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7); // SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED

/// What the child needs to drop every capability, prepared in the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CapabilityDrop {
    /// The highest capability number this kernel knows.
    last_cap: libc::c_ulong,
    /// Steps 1 to 3 were taken by the thread that starts the child, which
    /// the child inherits them from (`spawner`): only step 4 is
    /// left.
    inherited: bool,
}

/// `Some` when the host holds any capability (it runs as root, or was given
/// some): then its modules must drop them. A host without capabilities has
/// nothing to drop, and could not touch the bounding set anyway.
/// Read once per host: its capabilities do not change while it runs.
pub(crate) fn prepare() -> Option<CapabilityDrop> {
    static DROP: std::sync::OnceLock<Option<CapabilityDrop>> = std::sync::OnceLock::new();
    *DROP.get_or_init(|| {
        host_holds_capabilities().then(|| CapabilityDrop {
            last_cap: last_cap(),
            inherited: false,
        })
    })
}

/// Whether the host's permitted set is not empty. (An unprivileged host's
/// full bounding set gives a module nothing under `no_new_privs`.)
pub(crate) fn host_holds_capabilities() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let hex = line.strip_prefix("CapPrm:")?.trim();
                u64::from_str_radix(hex, 16).ok()
            })
        })
        .is_some_and(|permitted| permitted != 0)
}

/// The kernel's last capability (40 on Linux 6.x), or a generous bound when
/// `/proc` does not say (dropping an unknown capability fails with `EINVAL`,
/// which the child ignores).
fn last_cap() -> libc::c_ulong {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map_or(63, |last: libc::c_ulong| last.min(63))
}

impl CapabilityDrop {
    /// The same drop for a child of a thread that has taken steps 1 to 3
    /// ([`CapabilityDrop::lock_and_empty_bounding`]).
    pub(crate) fn after_inherited_bounding(self) -> CapabilityDrop {
        CapabilityDrop {
            inherited: true,
            ..self
        }
    }

    /// Drop every capability. Runs in the child between `clone` and `exec`:
    /// system calls on values and stack memory only; the errno of the first
    /// step that failed.
    pub(crate) fn drop_all(&self) -> Result<(), libc::c_int> {
        if !self.inherited {
            self.lock_and_empty_bounding()?;
        }
        zero_sets()
    }

    /// Steps 1 to 3: securebits locked, the bounding set emptied, the
    /// ambient set cleared. Per thread and inherited by every child the
    /// thread starts; the thread keeps its effective and permitted sets.
    #[allow(unsafe_code)]
    pub(crate) fn lock_and_empty_bounding(&self) -> Result<(), libc::c_int> {
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, LOCKED_SECUREBITS, 0, 0, 0) })?;
        let mut cap: libc::c_ulong = 0;
        while cap <= self.last_cap {
            // SAFETY: prctl with integer arguments.
            let status = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
            // EINVAL: a capability this kernel does not know; nothing to drop.
            if status < 0 && last_errno() != libc::EINVAL {
                return Err(last_errno());
            }
            cap += 1;
        }
        // SAFETY: prctl with integer arguments.
        check(unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            )
        })
    }
}

/// Step 4: effective, permitted and inheritable zeroed.
#[allow(unsafe_code)]
fn zero_sets() -> Result<(), libc::c_int> {
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData::default(); 2];
    // SAFETY: capset reads a header and two data words from the stack.
    check(unsafe {
        libc::syscall(libc::SYS_capset, &raw const header, none.as_ptr()) as libc::c_int
    })
}

fn check(status: libc::c_int) -> Result<(), libc::c_int> {
    if status < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
