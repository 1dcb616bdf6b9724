//! The seccomp filters of a confined native call: the kernel surface a module
//! never needs, closed.
//!
//! Landlock confines paths, TCP ports, signals and abstract sockets; it does
//! not stop a module from creating device nodes, namespaces or non-TCP
//! sockets, nor from reaching the many system calls that only make sense for
//! a system administrator. Those are refused here, for every confined
//! module, with an errno (never a kill), so a module that tries one gets a
//! clear error it can report.
//!
//! Design decisions:
//!
//! - **The sandbox is data.** [`REFUSED`] lists each refused system call, and
//!   for some the argument values that make it dangerous (`mknod` of a device
//!   but not of a FIFO, `clone` with a namespace flag but not a plain fork);
//!   [`socket_rules`] says which sockets a call may create. `seccompiler`
//!   (rust-vmm) turns that into BPF; nothing is hand-assembled.
//! - **One filter per errno.** A seccompiler filter has one action on match.
//!   The host needs three: `EPERM` for the kernel surface, `EACCES` for
//!   sockets, `ENOSYS` for `clone3` (its flags live in memory a filter cannot
//!   read, and glibc falls back to `clone`, whose flags it can, only on
//!   `ENOSYS`). The kernel runs every installed filter and the most severe
//!   answer wins; the three cover disjoint system calls.
//! - **Built once, installed by the child.** The programs are compiled the
//!   first time a call needs them (they depend only on the architecture and
//!   whether the call may use the network) and kept for the life of the host.
//!   The child between `clone` and `exec` only passes a pointer to them to
//!   `prctl(PR_SET_SECCOMP)`: no allocation, no lock.
//! - **Foreign system call ABIs are refused.** A filter matches numbers of
//!   one ABI: the x32 ABI shares x86_64's audit architecture with other
//!   numbers (bit 30 set), so each program starts by refusing those; 32-bit
//!   compat calls fail seccompiler's architecture check, which kills the
//!   process.
//! - **x86_64 and aarch64 only.** seccompiler knows no other architecture the
//!   host cares about; elsewhere [`SUPPORTED`] is false, the call's warning
//!   says what is not enforced, and `required` refuses it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What is not enforced where no filter is built (only x86_64 and aarch64
/// Linux have one).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const UNSUPPORTED_REASON: &str = "no seccomp filter for this architecture (only x86_64 and aarch64): device nodes, namespaces, mount, ptrace, keyctl, bpf, non-TCP sockets and leaving the process group are not refused";

/// A test on one argument of a system call.
#[derive(Debug, Clone, Copy)]
pub enum ArgTest {
    /// `(arg & mask) == value`.
    MaskedEq { arg: u8, mask: u64, value: u64 },
    /// `arg != value`.
    Ne { arg: u8, value: u64 },
}

/// When a listed system call is refused.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Always,
    /// When any of the rules holds; a rule holds when all its tests do.
    AnyOf(&'static [&'static [ArgTest]]),
}

/// One refused system call.
#[derive(Debug, Clone, Copy)]
pub struct Refused {
    pub name: &'static str,
    pub number: libc::c_long,
    pub when: When,
}

/// `mknod` of a character or block device, the mode in argument `arg`
/// (FIFOs and plain files stay allowed).
const fn device_node(arg: u8, kind: libc::mode_t) -> ArgTest {
    ArgTest::MaskedEq {
        arg,
        mask: libc::S_IFMT as u64,
        value: kind as u64,
    }
}
#[cfg(target_arch = "x86_64")]
const MKNOD_DEVICE: [&[ArgTest]; 2] = [
    &[device_node(1, libc::S_IFCHR)],
    &[device_node(1, libc::S_IFBLK)],
];
const MKNODAT_DEVICE: [&[ArgTest]; 2] = [
    &[device_node(2, libc::S_IFCHR)],
    &[device_node(2, libc::S_IFBLK)],
];

/// `fchmodat2` (Linux 6.6): 452 on x86_64 and aarch64 alike; the libc
/// crate names it only for some targets.
const SYS_FCHMODAT2: libc::c_long = 452;
/// Newer calls the libc crate does not name yet; since Linux 5.1 a new
/// system call has one number on every architecture.
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;
const SYS_FILE_SETATTR: libc::c_long = 469;

/// `utimensat(dirfd, path, ...)` with a path: what `futimens(fd)` (a null
/// path, times of a file the module opened) does not need.
const UTIMENSAT_PATH: [&[ArgTest]; 1] = [&[ArgTest::Ne { arg: 1, value: 0 }]];

/// `clone(flags, ...)` with namespace flag `flag`.
const fn new_namespace(flag: libc::c_int) -> ArgTest {
    ArgTest::MaskedEq {
        arg: 0,
        mask: flag as u32 as u64,
        value: flag as u32 as u64,
    }
}
const CLONE_NAMESPACES: [&[ArgTest]; 7] = [
    &[new_namespace(libc::CLONE_NEWNS)],
    &[new_namespace(libc::CLONE_NEWCGROUP)],
    &[new_namespace(libc::CLONE_NEWUTS)],
    &[new_namespace(libc::CLONE_NEWIPC)],
    &[new_namespace(libc::CLONE_NEWUSER)],
    &[new_namespace(libc::CLONE_NEWPID)],
    &[new_namespace(libc::CLONE_NEWNET)],
];

/// Refused with `EPERM` for every confined module.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub const REFUSED: &[Refused] = &[
    // Leaving the process group the host kills at the end of the call.
    always("setsid", libc::SYS_setsid),
    always("setpgid", libc::SYS_setpgid),
    // Device nodes: a character node of /dev/kmsg, a block node of a disk.
    #[cfg(target_arch = "x86_64")]
    Refused {
        name: "mknod",
        number: libc::SYS_mknod,
        when: When::AnyOf(&MKNOD_DEVICE),
    },
    Refused {
        name: "mknodat",
        number: libc::SYS_mknodat,
        when: When::AnyOf(&MKNODAT_DEVICE),
    },
    // File attributes. Landlock has no right for them, and the owner of a
    // file may change them without any capability: a module of a root host
    // keeps uid 0 and so owns every root-owned file it can name (making
    // `/etc/shadow` 0666, or a root binary setuid), and any module owns its
    // user's files (making a private key world-readable). A module sets a
    // file's mode when it creates it; it changes no mode, owner or extended
    // attribute, and sets times only through a descriptor it opened.
    #[cfg(target_arch = "x86_64")]
    always("chmod", libc::SYS_chmod),
    always("fchmod", libc::SYS_fchmod),
    always("fchmodat", libc::SYS_fchmodat),
    always("fchmodat2", SYS_FCHMODAT2),
    #[cfg(target_arch = "x86_64")]
    always("chown", libc::SYS_chown),
    #[cfg(target_arch = "x86_64")]
    always("lchown", libc::SYS_lchown),
    always("fchown", libc::SYS_fchown),
    always("fchownat", libc::SYS_fchownat),
    always("setxattr", libc::SYS_setxattr),
    always("lsetxattr", libc::SYS_lsetxattr),
    always("fsetxattr", libc::SYS_fsetxattr),
    always("removexattr", libc::SYS_removexattr),
    always("lremovexattr", libc::SYS_lremovexattr),
    always("fremovexattr", libc::SYS_fremovexattr),
    always("setxattrat", SYS_SETXATTRAT),
    always("removexattrat", SYS_REMOVEXATTRAT),
    always("file_setattr", SYS_FILE_SETATTR),
    #[cfg(target_arch = "x86_64")]
    always("utime", libc::SYS_utime),
    #[cfg(target_arch = "x86_64")]
    always("utimes", libc::SYS_utimes),
    #[cfg(target_arch = "x86_64")]
    always("futimesat", libc::SYS_futimesat),
    Refused {
        name: "utimensat",
        number: libc::SYS_utimensat,
        when: When::AnyOf(&UTIMENSAT_PATH),
    },
    // Namespaces: a user namespace gives back every capability inside it.
    always("unshare", libc::SYS_unshare),
    always("setns", libc::SYS_setns),
    Refused {
        name: "clone",
        number: libc::SYS_clone,
        when: When::AnyOf(&CLONE_NAMESPACES),
    },
    // Filesystem views.
    always("chroot", libc::SYS_chroot),
    always("pivot_root", libc::SYS_pivot_root),
    always("mount", libc::SYS_mount),
    always("umount2", libc::SYS_umount2),
    always("fsopen", libc::SYS_fsopen),
    always("fsconfig", libc::SYS_fsconfig),
    always("fsmount", libc::SYS_fsmount),
    always("fspick", libc::SYS_fspick),
    always("move_mount", libc::SYS_move_mount),
    always("open_tree", libc::SYS_open_tree),
    always("open_tree_attr", SYS_OPEN_TREE_ATTR),
    always("mount_setattr", libc::SYS_mount_setattr),
    always("open_by_handle_at", libc::SYS_open_by_handle_at),
    always("name_to_handle_at", libc::SYS_name_to_handle_at),
    // Other processes' memory and descriptors.
    always("ptrace", libc::SYS_ptrace),
    always("process_vm_readv", libc::SYS_process_vm_readv),
    always("process_vm_writev", libc::SYS_process_vm_writev),
    always("pidfd_getfd", libc::SYS_pidfd_getfd),
    // Kernel facilities a module has no business with.
    always("keyctl", libc::SYS_keyctl),
    always("add_key", libc::SYS_add_key),
    always("request_key", libc::SYS_request_key),
    always("bpf", libc::SYS_bpf),
    always("perf_event_open", libc::SYS_perf_event_open),
    always("userfaultfd", libc::SYS_userfaultfd),
    // io_uring performs socket(), openat() and more without passing
    // through this filter.
    always("io_uring_setup", libc::SYS_io_uring_setup),
    always("io_uring_enter", libc::SYS_io_uring_enter),
    always("io_uring_register", libc::SYS_io_uring_register),
    // The machine itself.
    always("init_module", libc::SYS_init_module),
    always("finit_module", libc::SYS_finit_module),
    always("delete_module", libc::SYS_delete_module),
    always("kexec_load", libc::SYS_kexec_load),
    always("kexec_file_load", libc::SYS_kexec_file_load),
    always("reboot", libc::SYS_reboot),
    always("swapon", libc::SYS_swapon),
    always("swapoff", libc::SYS_swapoff),
    always("acct", libc::SYS_acct),
    always("settimeofday", libc::SYS_settimeofday),
    always("clock_settime", libc::SYS_clock_settime),
    always("clock_adjtime", libc::SYS_clock_adjtime),
    always("adjtimex", libc::SYS_adjtimex),
    #[cfg(target_arch = "x86_64")]
    always("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    always("ioperm", libc::SYS_ioperm),
];

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const REFUSED: &[Refused] = &[];

const fn always(name: &'static str, number: libc::c_long) -> Refused {
    Refused {
        name,
        number,
        when: When::Always,
    }
}

/// Socket types (`type & 0xf`) a call with network may create: stream and
/// datagram. Raw, packet and the rest need capabilities a module does not
/// have, and are refused outright.
const SOCK_TYPE_MASK: u64 = 0xf;
const REFUSED_SOCKET_TYPES: [ArgTest; 14] = {
    let mut tests = [ArgTest::Ne { arg: 0, value: 0 }; 14];
    let refused: [u64; 14] = [0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    let mut i = 0;
    while i < refused.len() {
        tests[i] = ArgTest::MaskedEq {
            arg: 1,
            mask: SOCK_TYPE_MASK,
            value: refused[i],
        };
        i += 1;
    }
    tests
};
/// Any family but IPv4 and IPv6.
const NOT_AN_IP_FAMILY: [ArgTest; 2] = [
    ArgTest::Ne {
        arg: 0,
        value: libc::AF_INET as u64,
    },
    ArgTest::Ne {
        arg: 0,
        value: libc::AF_INET6 as u64,
    },
];

/// When `socket()` is refused: always without network (every family,
/// `AF_UNIX` included: a pathname UNIX socket outside the grants is a way
/// out landlock ABI < 9 does not close; `socketpair` stays allowed, it
/// reaches nothing outside, but see [`SOCKETPAIR_DATAGRAM`]); with network, every family but IPv4 and IPv6
/// and every type but stream and datagram.
///
/// `socketpair` stays allowed for stream and seqpacket pairs (see
/// [`SOCKETPAIR_DATAGRAM`]).
pub fn socket_rules(network: bool) -> When {
    if !network {
        return When::Always;
    }
    const RULES: [&[ArgTest]; 15] = {
        let mut rules: [&[ArgTest]; 15] = [&NOT_AN_IP_FAMILY; 15];
        let mut i = 0;
        while i < 14 {
            rules[i + 1] = std::slice::from_ref(&REFUSED_SOCKET_TYPES[i]);
            i += 1;
        }
        rules
    };
    When::AnyOf(&RULES)
}

/// `socketpair` of datagram sockets, refused for every call: a datagram
/// socket from a pair can still `sendto` any pathname datagram socket it
/// names (`/dev/log`, `/run/systemd/notify`), which landlock confines only
/// from ABI 9. Stream and seqpacket pairs refuse an address, and stay
/// allowed: runtimes use them for their own pipes.
pub const SOCKETPAIR_DATAGRAM: [&[ArgTest]; 1] = [&[ArgTest::MaskedEq {
    arg: 1,
    mask: SOCK_TYPE_MASK,
    value: libc::SOCK_DGRAM as u64,
}]];

/// The compiled filters of a call, to install in order.
#[derive(Debug)]
pub struct Programs {
    programs: Vec<Program>,
}

/// One compiled filter, with its length checked to fit `sock_fprog`.
#[derive(Debug)]
struct Program {
    instructions: BpfProgram,
    len: u16,
}

impl Programs {
    /// Install every filter on the calling thread. Runs in the child between
    /// `clone` and `exec`: a `prctl` per filter on memory prepared before
    /// the clone, nothing else. `no_new_privs` must already be set.
    #[allow(unsafe_code)]
    pub fn install(&self) -> Result<(), libc::c_int> {
        for program in &self.programs {
            let fprog = libc::sock_fprog {
                len: program.len,
                // seccompiler's sock_filter has libc's layout (repr(C),
                // the same four fields).
                filter: program
                    .instructions
                    .as_ptr()
                    .cast::<libc::sock_filter>()
                    .cast_mut(),
            };
            // SAFETY: `fprog` points at a well-formed program that outlives
            // the call; the kernel copies it.
            let status = unsafe {
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                    &raw const fprog,
                )
            };
            if status != 0 {
                return Err(super::errno::last_errno());
            }
        }
        Ok(())
    }
}

/// The filters of a call with (or without) network, compiled once per host.
/// `Err` says why they could not be built (an unsupported architecture).
pub fn programs(network: bool) -> Result<&'static Programs, String> {
    static WITHOUT_NETWORK: OnceLock<Result<Programs, String>> = OnceLock::new();
    static WITH_NETWORK: OnceLock<Result<Programs, String>> = OnceLock::new();
    let cell = if network {
        &WITH_NETWORK
    } else {
        &WITHOUT_NETWORK
    };
    cell.get_or_init(|| compile(network))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn compile(network: bool) -> Result<Programs, String> {
    let socket = [
        Refused {
            name: "socket",
            number: libc::SYS_socket,
            when: socket_rules(network),
        },
        Refused {
            name: "socketpair",
            number: libc::SYS_socketpair,
            when: When::AnyOf(&SOCKETPAIR_DATAGRAM),
        },
    ];
    let clone3 = [always("clone3", libc::SYS_clone3)];
    let programs = [
        (REFUSED, libc::EPERM),
        (&socket[..], libc::EACCES),
        (&clone3[..], libc::ENOSYS),
    ]
    .into_iter()
    .map(|(refused, errno)| compile_one(refused, errno))
    .collect::<Result<_, _>>()?;
    Ok(Programs { programs })
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn compile(_network: bool) -> Result<Programs, String> {
    Err(UNSUPPORTED_REASON.into())
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn compile_one(refused: &[Refused], errno: libc::c_int) -> Result<Program, String> {
    #[cfg(target_arch = "x86_64")]
    let arch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = TargetArch::aarch64;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in refused {
        let chain = match call.when {
            When::Always => Vec::new(),
            When::AnyOf(any) => any
                .iter()
                .map(|all| {
                    let conditions = all
                        .iter()
                        .map(|test| condition(*test))
                        .collect::<Result<Vec<_>, _>>()?;
                    SeccompRule::new(conditions)
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{}: {e}", call.name))?,
        };
        rules.insert(call.number, chain);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let compiled: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let instructions = refuse_foreign_abi(compiled, errno);
    let len =
        u16::try_from(instructions.len()).map_err(|_| "the filter is too long".to_string())?;
    Ok(Program { instructions, len })
}

fn condition(test: ArgTest) -> Result<SeccompCondition, seccompiler::BackendError> {
    // Socket families and types, mknod modes and clone flags are all 32-bit
    // values: only the low word counts (the kernel ignores the rest).
    match test {
        ArgTest::MaskedEq { arg, mask, value } => SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(mask),
            value,
        ),
        ArgTest::Ne { arg, value } => {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value)
        }
    }
}

/// Prefix `program` with: a system call number with the x32 bit set is
/// refused with `errno` (x86_64 only; aarch64 has no such ABI). The prefix
/// only jumps within itself, so the program's own offsets stay valid.
fn refuse_foreign_abi(program: BpfProgram, errno: libc::c_int) -> BpfProgram {
    #[cfg(target_arch = "x86_64")]
    {
        use seccompiler::sock_filter;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
        const RET_K: u16 = 0x06; // BPF_RET | BPF_K
        const OFFSET_NR: u32 = 0; // seccomp_data.nr
        let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        let mut prefixed = vec![
            op(LD_W_ABS, 0, 0, OFFSET_NR),
            op(JGE_K, 0, 1, X32_SYSCALL_BIT),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | errno as u32),
        ];
        prefixed.extend(program);
        prefixed
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = errno;
        program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_compiles_and_fits() {
        for network in [false, true] {
            let programs = programs(network).unwrap();
            assert_eq!(programs.programs.len(), 3);
            for program in &programs.programs {
                assert_eq!(usize::from(program.len), program.instructions.len());
            }
        }
    }

    #[test]
    fn each_refused_call_is_listed_once() {
        let mut numbers: Vec<_> = REFUSED.iter().map(|r| r.number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), REFUSED.len());
    }
}
