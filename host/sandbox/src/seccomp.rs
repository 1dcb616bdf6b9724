//! The seccomp filter of a confined native call: the kernel surface a module
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
//!   (rust-vmm) turns each argument rule into BPF; the dispatcher in front
//!   of them is generated from the same table ([`dispatch`]) and the tests
//!   run the result against the table; nothing is hand-assembled.
//! - **One program, dispatched by number.** A call needs three errnos:
//!   `EPERM` for the kernel surface, `EACCES` for sockets, `ENOSYS` for
//!   `clone3` (its flags live in memory a filter cannot read, and glibc
//!   falls back to `clone`, whose flags it can, only on `ENOSYS`) and for
//!   an executable memfd (whose users fall back on `ENOSYS`). They go
//!   into one program ([`dispatch`]): a binary search on the number answers
//!   an always-refused call or an unlisted one within a dozen instructions,
//!   and jumps into seccompiler's rules for the few calls refused by their
//!   arguments. The child installs it with one `prctl`, and the kernel's
//!   per-number work at install (building its allow cache) and at run time
//!   is a dozen instructions, not a walk through every listed call.
//! - **Built once, installed by the child.** A program is compiled the
//!   first time a call needs it (it depends only on the architecture and
//!   the call's [`Flavour`]: whether it may use the network, whether its
//!   capability declares no spawns) and kept for the life of the host.
//!   The child between `clone` and `exec` only passes a pointer to it to
//!   `prctl(PR_SET_SECCOMP)`: no allocation, no lock.
//! - **Foreign system call ABIs are refused.** A filter matches numbers of
//!   one ABI: the x32 ABI shares x86_64's audit architecture with other
//!   numbers (bit 30 set), so every such number is refused with `ENOSYS`
//!   (no such ABI here; what the three filters this program replaced
//!   answered too, the newest filter's errno winning a tie); 32-bit compat
//!   calls fail the architecture check, which kills the process.
//! - **No exec beyond what was declared.** A call whose capability declares
//!   no spawns ([`Flavour::exec_gated`]) has `execve` and `execveat`
//!   refused unless they carry the host's key ([`host_key`]) in an argument
//!   the kernel ignores ([`EXECVE_KEY_ARG`], [`EXECVEAT_KEY_ARG`]): the
//!   child's own exec carries it, and nothing the module runs afterwards
//!   can (see [`Layer::Base`] for why the key stays secret). Landlock's
//!   execute right names files, and cannot tell the module's own start from
//!   a later `ld.so /usr/bin/id` (the loader is executable because it is the
//!   entry's `PT_INTERP`) or an exec of a memfd; this can, whatever is
//!   executed and however. Refused with `EACCES`, what landlock answers for
//!   a file a module may not execute, so a module sees one errno for "not
//!   yours to run" (`sh: 1: id: Permission denied`).
//! - **x86_64 and aarch64 only.** seccompiler knows no other architecture the
//!   host cares about; elsewhere [`SUPPORTED`] is false, the call's warning
//!   says what is not enforced, and `required` refuses it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::flavour::Flavour;

mod dispatch;

/// What is not enforced where no filter is built (only x86_64 and aarch64
/// Linux have one).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const UNSUPPORTED_REASON: &str = "no seccomp filter for this architecture (only x86_64 and aarch64): device nodes, namespaces, mount, ptrace, keyctl, bpf, executable memfds, non-TCP sockets, leaving the process group and exec beyond declared spawns are not refused";

/// A test on one argument of a system call.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArgTest {
    /// `(arg & mask) == value`.
    MaskedEq { arg: u8, mask: u64, value: u64 },
    /// `arg != value`.
    Ne { arg: u8, value: u64 },
    /// `arg`, a pointer, is not null: compared on all 64 bits (a pointer
    /// whose low word is zero is not null).
    NotNull { arg: u8 },
    /// `arg` is not the host's key ([`host_key`]): compared on all 64 bits.
    NotHostKey { arg: u8 },
}

/// When a listed system call is refused.
#[derive(Debug, Clone, Copy)]
pub(crate) enum When {
    Always,
    /// When any of the rules holds; a rule holds when all its tests do.
    AnyOf(&'static [&'static [ArgTest]]),
}

/// One refused system call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused {
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
const UTIMENSAT_PATH: [&[ArgTest]; 1] = [&[ArgTest::NotNull { arg: 1 }]];

/// `memfd_create(name, flags)` without `MFD_NOEXEC_SEAL` (Linux 6.3): a
/// memfd is made executable by default, and landlock, whose execute right
/// is path based, never restricts the kernel's internal mount it lives on.
/// So a module could copy any readable program (or bytes from its input)
/// into one and `execve` it through `/proc/self/fd/N` or `execveat(fd, "",
/// AT_EMPTY_PATH)`: a program run outside its capability's `spawns`. With
/// the flag the memfd is created without any execute bit and sealed so it
/// never gets one (`fchmod` is refused besides); memfds for data keep
/// working. This is the kernel's own strictest `vm.memfd_noexec` policy,
/// which a host cannot set for its modules alone (it is per pid namespace).
///
/// Refused with `ENOSYS`, as a kernel without memfds would answer: code
/// that uses a memfd when it can takes its fallback on `ENOSYS` (wasmtime's
/// copy-on-write memory images do, and fail on `EPERM`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EXECUTABLE_MEMFD: Refused = Refused {
    name: "memfd_create",
    number: libc::SYS_memfd_create,
    when: When::AnyOf(&[&[ArgTest::MaskedEq {
        arg: 1,
        mask: libc::MFD_NOEXEC_SEAL as u64,
        value: 0,
    }]]),
};

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
pub(crate) const REFUSED: &[Refused] = &[
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
pub(crate) const REFUSED: &[Refused] = &[];

const fn always(name: &'static str, number: libc::c_long) -> Refused {
    Refused {
        name,
        number,
        when: When::Always,
    }
}

/// Socket types (`type & 0xf`) a call with network may create: stream
/// only. Datagram sockets would be a way past the egress proxy (DNS or any
/// UDP protocol to any address: landlock confines TCP only); raw, packet
/// and the rest need capabilities a module does not have. All refused
/// outright.
const SOCK_TYPE_MASK: u64 = 0xf;
const REFUSED_SOCKET_TYPES: [ArgTest; 15] = {
    let mut tests = [ArgTest::Ne { arg: 0, value: 0 }; 15];
    let refused: [u64; 15] = [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
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
/// A stream protocol other than TCP (the default, 0, is TCP): SCTP and
/// MPTCP streams are not what landlock's TCP port rules confine.
const NOT_TCP: [ArgTest; 2] = [
    ArgTest::Ne { arg: 2, value: 0 },
    ArgTest::Ne {
        arg: 2,
        value: libc::IPPROTO_TCP as u64,
    },
];

/// When `socket()` is refused: always without network (every family,
/// `AF_UNIX` included: a pathname UNIX socket outside the grants is a way
/// out landlock ABI < 9 does not close; `socketpair` stays allowed, it
/// reaches nothing outside, but see [`SOCKETPAIR_DATAGRAM`]); with network,
/// everything but a TCP stream over IPv4 or IPv6, whose connect landlock
/// limits to the egress proxy's port.
///
/// `socketpair` stays allowed for stream and seqpacket pairs (see
/// [`SOCKETPAIR_DATAGRAM`]).
pub(crate) fn socket_rules(network: bool) -> When {
    if !network {
        return When::Always;
    }
    const RULES: [&[ArgTest]; 17] = {
        let mut rules: [&[ArgTest]; 17] = [&NOT_AN_IP_FAMILY; 17];
        let mut i = 0;
        while i < 15 {
            rules[i + 1] = std::slice::from_ref(&REFUSED_SOCKET_TYPES[i]);
            i += 1;
        }
        rules[16] = &NOT_TCP;
        rules
    };
    When::AnyOf(&RULES)
}

/// `socketpair` of datagram sockets, refused for every call: a datagram
/// socket from a pair can still `sendto` any pathname datagram socket it
/// names (`/dev/log`, `/run/systemd/notify`), which landlock confines only
/// from ABI 9. `SOCK_RAW` too: `AF_UNIX` makes it a datagram socket
/// (`unix_create`). Stream and seqpacket pairs refuse an address, and stay
/// allowed: runtimes use them for their own pipes.
pub(crate) const SOCKETPAIR_DATAGRAM: [&[ArgTest]; 2] = [
    &[ArgTest::MaskedEq {
        arg: 1,
        mask: SOCK_TYPE_MASK,
        value: libc::SOCK_DGRAM as u64,
    }],
    &[ArgTest::MaskedEq {
        arg: 1,
        mask: SOCK_TYPE_MASK,
        value: libc::SOCK_RAW as u64,
    }],
];

/// The compiled filter of a call, whole and split in two layers.
///
/// A spawner thread of the host carries [`Layer::Base`] (`spawner`)
/// and every child it starts inherits it; the child makes its own
/// `setpgid` with the host's key, and installs [`Layer::Group`] over the
/// base unless the call has a landlock domain. Stacked, the two answer
/// every system call as [`Layer::Full`] does (a test runs both over the
/// tables).
#[derive(Debug)]
pub(crate) struct Programs {
    program: Program,
    /// `None` when there is no [`host_key`].
    base: Option<Program>,
    group: Program,
}

/// Which part of a call's filter to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// Everything: what a child started from an ordinary thread installs.
    Full,
    /// Everything, but `setpgid` with the host's key ([`host_key`]) in
    /// [`KEY_ARG`], an argument the kernel ignores: what a spawner thread
    /// carries, so that the child it starts can make its own process group.
    /// (The exec gate of an exec-gated flavour is keyed in every layer
    /// that has it, [`Layer::Full`] too: the child's own `execve` comes
    /// after its install.)
    ///
    /// This alone holds a module in its group, and an exec-gated module to
    /// its one exec, when the module cannot learn the key. The key is in
    /// the host's memory and in the kernel's copy of this filter, nowhere
    /// else: the child passes it in registers, to `setpgid` and to its own
    /// `execve` (`spawn.rs`), and an exec that succeeds starts the program
    /// with fresh registers and a fresh address space, while the stack the
    /// child ran on (`CLONE_VM | CLONE_VFORK`) is the host's, not the
    /// module's; an exec that fails ends the child. A module in a landlock
    /// domain reads neither copy: `ptrace`, `process_vm_readv`,
    /// `pidfd_getfd`, `perf_event_open` and `bpf` are refused here, landlock
    /// refuses a domain's process access to any process outside it
    /// (`/proc/<pid>/mem`, `/proc/<pid>/syscall`, whatever the grants), and
    /// reading a filter back takes `CAP_SYS_ADMIN`, which a module never
    /// has. Guessing is one refused call per guess of 64 bits. A call
    /// without a landlock domain installs [`Layer::Group`] over it, which
    /// closes the process group; its exec gate stays keyed (the child
    /// still has its own exec to make), so `support` reports the exec part
    /// unenforced without landlock.
    Base,
    /// Only the process-group calls ([`GROUP_CALLS`]), refused outright:
    /// what a child of a spawner thread without a landlock domain
    /// installs over the inherited base, a program of a dozen
    /// instructions where the whole is some two hundred. A landlocked
    /// child installs nothing: every install costs a kernel allocation and
    /// a compile (about 0.1 ms per child, measured by the host bench).
    Group,
}

/// The calls refused so that whatever a module starts stays in the process
/// group the host kills; the child itself makes one of them (`setpgid`)
/// before exec, so a thread that starts children cannot carry their
/// refusal outright: [`Layer::Base`] lets `setpgid` through with the key.
const GROUP_CALLS: [libc::c_long; 2] = [libc::SYS_setsid, libc::SYS_setpgid];

/// The argument of `setpgid(pid, pgid)` that carries the host's key: the
/// third, which the kernel ignores for a call of two.
pub(crate) const KEY_ARG: u8 = 2;

/// `setpgid` without the host's key in [`KEY_ARG`]: what [`Layer::Base`]
/// refuses of the process-group calls.
const SETPGID_WITHOUT_KEY: [&[ArgTest]; 1] = [&[ArgTest::NotHostKey { arg: KEY_ARG }]];

/// The argument of `execve(path, argv, envp)` that carries the host's key:
/// the fourth, which the kernel ignores for a call of three.
pub(crate) const EXECVE_KEY_ARG: u8 = 3;

/// The argument of `execveat(dirfd, path, argv, envp, flags)` that carries
/// the host's key: the sixth, which the kernel ignores for a call of five.
/// The child never uses `execveat`; a module's `fexecve` does.
pub(crate) const EXECVEAT_KEY_ARG: u8 = 5;

const EXECVE_WITHOUT_KEY: [&[ArgTest]; 1] = [&[ArgTest::NotHostKey {
    arg: EXECVE_KEY_ARG,
}]];
const EXECVEAT_WITHOUT_KEY: [&[ArgTest]; 1] = [&[ArgTest::NotHostKey {
    arg: EXECVEAT_KEY_ARG,
}]];

/// The exec gate of a call whose capability declares no spawns
/// ([`Flavour::exec_gated`]): every `execve` and `execveat` without the
/// host's key is refused (`EACCES`), so the module executes nothing after
/// its own start: no program by path, no ELF loader run on a readable file,
/// no memfd, no shell. Both calls are listed whatever the path, so neither
/// `fexecve` (glibc's `execveat(fd, "", AT_EMPTY_PATH)`, or `execve` of
/// `/proc/self/fd/N`) nor a directory descriptor gets around it. The x32
/// numbers are refused whole (`ENOSYS`), and a 32-bit compat call kills the
/// process before any of this.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EXEC_GATE: [Refused; 2] = [
    Refused {
        name: "execve",
        number: libc::SYS_execve,
        when: When::AnyOf(&EXECVE_WITHOUT_KEY),
    },
    Refused {
        name: "execveat",
        number: libc::SYS_execveat,
        when: When::AnyOf(&EXECVEAT_WITHOUT_KEY),
    },
];

/// The host's key: 64 random bits, drawn once per host process, nonzero.
/// It lives in the host's memory and in the kernel's copy of the filters
/// that ask for it (`setpgid` in [`Layer::Base`], `execve` and `execveat`
/// of an exec-gated call in every layer); a module in a landlock domain
/// reads neither (see [`Layer::Base`]). `Err` when the kernel gave no
/// random bytes.
pub(crate) fn host_key() -> Result<u64, String> {
    static KEY: OnceLock<Result<u64, String>> = OnceLock::new();
    KEY.get_or_init(draw_key).clone()
}

#[allow(unsafe_code)]
fn draw_key() -> Result<u64, String> {
    loop {
        let mut bytes = [0u8; 8];
        // SAFETY: getrandom writes at most `bytes.len()` bytes into `bytes`.
        let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if got != 8 {
            return Err(format!(
                "no random bytes for the process-group key: {}",
                std::io::Error::last_os_error()
            ));
        }
        let key = u64::from_ne_bytes(bytes);
        if key != 0 {
            return Ok(key);
        }
    }
}

/// One compiled filter, with its length checked to fit `sock_fprog`.
#[derive(Debug)]
struct Program {
    instructions: BpfProgram,
    len: u16,
}

impl Program {
    fn new(instructions: BpfProgram) -> Result<Program, String> {
        let len =
            u16::try_from(instructions.len()).map_err(|_| "the filter is too long".to_string())?;
        Ok(Program { instructions, len })
    }
}

impl Programs {
    /// Install `layer` on the calling thread. Runs in the child between
    /// `clone` and `exec`: one `prctl` on memory prepared before the clone,
    /// nothing else. `no_new_privs` must already be set.
    #[allow(unsafe_code)]
    pub(crate) fn install(&self, layer: Layer) -> Result<(), libc::c_int> {
        let program = match layer {
            Layer::Full => &self.program,
            Layer::Base => match &self.base {
                Some(base) => base,
                None => return Err(libc::ENOSYS),
            },
            Layer::Group => &self.group,
        };
        let fprog = libc::sock_fprog {
            len: program.len,
            // seccompiler's sock_filter has libc's layout (repr(C), the
            // same four fields).
            filter: program
                .instructions
                .as_ptr()
                .cast::<libc::sock_filter>()
                .cast_mut(),
        };
        // SAFETY: `fprog` points at a well-formed program that outlives the
        // call; the kernel copies it.
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
        Ok(())
    }
}

/// The filter of a call of `flavour`, compiled once per host, the first
/// time a call of that flavour needs it. `Err` says why it could not be
/// built (an unsupported architecture).
pub(crate) fn programs(flavour: Flavour) -> Result<&'static Programs, String> {
    static PROGRAMS: [OnceLock<Result<Programs, String>>; 4] =
        [const { OnceLock::new() }; Flavour::ALL.len()];
    PROGRAMS[flavour.index()]
        .get_or_init(|| compile(flavour))
        .as_ref()
        .map_err(Clone::clone)
}

/// `AUDIT_ARCH_*` of the architecture the host runs on.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// x86_64's x32 ABI: its numbers have this bit set.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Hard links, refused with `EXDEV` (as a link across filesystems, which
/// tools answer by copying: `cp`, cargo, uv, git's object store). A name in
/// a module's state folder for a file it writes through a name elsewhere
/// (its workspace) would grow its state unseen: inotify reports a write to
/// the folder of the name the file was opened through, and the host's
/// storage bound (`modhost`'s `storage_bound.rs`) watches only the state
/// and artifacts folders. Renames stay: a renamed file's open descriptors
/// follow its one name into the watched folder.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const LINKS: &[Refused] = &[
    #[cfg(target_arch = "x86_64")]
    always("link", libc::SYS_link),
    always("linkat", libc::SYS_linkat),
];

/// `fallocate` keeping the size (`FALLOC_FL_KEEP_SIZE`, which every hole
/// punched or range zeroed in place needs too): blocks reserved beyond a
/// file's end escape `RLIMIT_FSIZE` (the kernel checks the new size only),
/// so one call could take the whole disk before the storage bound's watch
/// hears of it. Refused with `EOPNOTSUPP`, what a filesystem without the
/// mode answers (callers fall back); a plain `fallocate` (and
/// `posix_fallocate`) grows the size and stays under `RLIMIT_FSIZE`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const FALLOCATE_KEEPING_SIZE: Refused = Refused {
    name: "fallocate",
    number: libc::SYS_fallocate,
    when: When::AnyOf(&[&[ArgTest::MaskedEq {
        arg: 1,
        mask: libc::FALLOC_FL_KEEP_SIZE as u64,
        value: libc::FALLOC_FL_KEEP_SIZE as u64,
    }]]),
};

/// Every refused call of a call of `flavour` and its errno: [`REFUSED`]
/// with `EPERM`, [`LINKS`] with `EXDEV`, [`FALLOCATE_KEEPING_SIZE`] with
/// `EOPNOTSUPP`, the sockets with `EACCES`, `clone3` and an executable
/// memfd ([`EXECUTABLE_MEMFD`]) with `ENOSYS`, and for an exec-gated call
/// [`EXEC_GATE`] with `EACCES` (not without a [`host_key`]: the child's own
/// exec could not pass it, and `support` reports the part unenforced). The
/// numbers are disjoint.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn refusals(flavour: Flavour) -> Vec<(Refused, libc::c_int)> {
    let socket = [
        Refused {
            name: "socket",
            number: libc::SYS_socket,
            when: socket_rules(flavour.network),
        },
        Refused {
            name: "socketpair",
            number: libc::SYS_socketpair,
            when: When::AnyOf(&SOCKETPAIR_DATAGRAM),
        },
        // No module serves connections. With network, `listen` on an
        // unbound TCP socket would take a port of the egress namespace
        // (landlock checks `bind`, not the port `listen` picks itself),
        // and a module taking them all would starve the host's next proxy
        // listener; without network there is no socket to listen on.
        always("listen", libc::SYS_listen),
    ];
    let refused = REFUSED.iter().map(|r| (*r, libc::EPERM));
    let links = LINKS.iter().map(|r| (*r, libc::EXDEV));
    let fallocate = std::iter::once((FALLOCATE_KEEPING_SIZE, libc::EOPNOTSUPP));
    let socket = socket.into_iter().map(|r| (r, libc::EACCES));
    let missing = [always("clone3", libc::SYS_clone3), EXECUTABLE_MEMFD]
        .into_iter()
        .map(|r| (r, libc::ENOSYS));
    let gate = (flavour.exec_gated && host_key().is_ok())
        .then_some(EXEC_GATE)
        .into_iter()
        .flatten()
        .map(|r| (r, libc::EACCES));
    refused
        .chain(links)
        .chain(fallocate)
        .chain(socket)
        .chain(missing)
        .chain(gate)
        .collect()
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn compile(flavour: Flavour) -> Result<Programs, String> {
    let refusals = refusals(flavour);
    let group = refusals
        .iter()
        .copied()
        .filter(|(c, _)| GROUP_CALLS.contains(&c.number))
        .collect();
    // Without a key, a spawner thread carries no base and each child
    // installs the whole program after its `setpgid`.
    let base = match host_key() {
        Ok(_) => Some(compile_program(keyed(&refusals))?),
        Err(reason) => {
            tracing::warn!("{reason}: each confined module installs its whole seccomp filter");
            None
        }
    };
    Ok(Programs {
        program: compile_program(refusals)?,
        base,
        group: compile_program(group)?,
    })
}

/// `refusals` with `setpgid` refused only without the host's key.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn keyed(refusals: &[(Refused, libc::c_int)]) -> Vec<(Refused, libc::c_int)> {
    refusals
        .iter()
        .map(|&(call, errno)| match call.number {
            libc::SYS_setpgid => (
                Refused {
                    when: When::AnyOf(&SETPGID_WITHOUT_KEY),
                    ..call
                },
                errno,
            ),
            _ => (call, errno),
        })
        .collect()
}

/// One program refusing `refusals` (numbers unique), allowing the rest.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn compile_program(refusals: Vec<(Refused, libc::c_int)>) -> Result<Program, String> {
    let mut table = Vec::new();
    let mut blocks = Vec::new();
    for (call, errno) in refusals {
        let number =
            u32::try_from(call.number).map_err(|_| format!("{}: bad number", call.name))?;
        let verdict = match call.when {
            When::Always => dispatch::SyscallAction::Errno(errno as u32),
            When::AnyOf(_) => {
                let program = seccompiler_program(&[call], errno)?;
                blocks.push(dispatch::rule_block(&program, AUDIT_ARCH, number)?);
                dispatch::SyscallAction::Rules(blocks.len() - 1)
            }
        };
        table.push((number, verdict));
    }
    #[cfg(target_arch = "x86_64")]
    let foreign = Some((
        X32_SYSCALL_BIT,
        dispatch::SyscallAction::Errno(libc::ENOSYS as u32),
    ));
    #[cfg(not(target_arch = "x86_64"))]
    let foreign = None;
    Program::new(dispatch::assemble(AUDIT_ARCH, &table, foreign, &blocks)?)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn compile(_flavour: Flavour) -> Result<Programs, String> {
    Err(UNSUPPORTED_REASON.into())
}

/// seccompiler's program for `refused`: `errno` when a listed call is
/// refused, allow for everything else.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn seccompiler_program(refused: &[Refused], errno: libc::c_int) -> Result<BpfProgram, String> {
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
                    SeccompRule::new(conditions).map_err(|e| e.to_string())
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
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

fn condition(test: ArgTest) -> Result<SeccompCondition, String> {
    // Socket families and types, mknod modes and clone flags are all 32-bit
    // values: only the low word counts (the kernel ignores the rest). A
    // pointer is 64-bit: `utimensat` of a path at an address whose low word
    // is zero (a mapping at 4 GiB) is a path.
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
        ArgTest::NotNull { arg } => {
            SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
        }
        ArgTest::NotHostKey { arg } => {
            SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, host_key()?)
        }
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::dispatch::cbpf::{Data, run};
    use super::*;

    /// The verdict the tables give `nr` with `args`: what any layout of the
    /// filter must answer.
    fn expected(nr: u32, args: &[u64; 6], flavour: Flavour) -> u32 {
        verdict(&refusals(flavour), nr, args)
    }

    /// The verdict `refusals` give `nr` with `args`.
    fn verdict(refusals: &[(Refused, libc::c_int)], nr: u32, args: &[u64; 6]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if nr >= X32_SYSCALL_BIT {
            return libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        }
        let holds = |test: &ArgTest| match *test {
            ArgTest::MaskedEq { arg, mask, value } => {
                args[usize::from(arg)] as u32 & mask as u32 == (value & mask) as u32
            }
            ArgTest::Ne { arg, value } => args[usize::from(arg)] as u32 != value as u32,
            ArgTest::NotNull { arg } => args[usize::from(arg)] != 0,
            ArgTest::NotHostKey { arg } => args[usize::from(arg)] != host_key().unwrap(),
        };
        for &(call, errno) in refusals {
            if call.number != i64::from(nr) {
                continue;
            }
            let refused = match call.when {
                When::Always => true,
                When::AnyOf(any) => any.iter().any(|all| all.iter().all(holds)),
            };
            return if refused {
                libc::SECCOMP_RET_ERRNO | errno as u32
            } else {
                libc::SECCOMP_RET_ALLOW
            };
        }
        libc::SECCOMP_RET_ALLOW
    }

    /// The layout this module had before [`dispatch`]: one seccompiler
    /// program per errno, each prefixed with the x32 refusal.
    fn three_filter_layout(flavour: Flavour) -> Vec<BpfProgram> {
        let refusals = refusals(flavour);
        [
            libc::EPERM,
            libc::EXDEV,
            libc::EOPNOTSUPP,
            libc::EACCES,
            libc::ENOSYS,
        ]
        .into_iter()
        .map(|errno| {
            let calls: Vec<Refused> = refusals
                .iter()
                .filter(|(_, e)| *e == errno)
                .map(|(call, _)| *call)
                .collect();
            let program = seccompiler_program(&calls, errno).unwrap();
            refuse_foreign_abi(program, errno)
        })
        .collect()
    }

    /// The old per-program prefix: an x32 number is refused with `errno`.
    fn refuse_foreign_abi(program: BpfProgram, errno: libc::c_int) -> BpfProgram {
        #[cfg(target_arch = "x86_64")]
        {
            use seccompiler::sock_filter;
            let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
            let mut prefixed = vec![
                op(0x20, 0, 0, 0),
                op(0x35, 0, 1, X32_SYSCALL_BIT),
                op(0x06, 0, 0, libc::SECCOMP_RET_ERRNO | errno as u32),
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

    /// What the kernel answers with `filters` installed in order: it runs
    /// every filter, newest first, and keeps the first of the most severe
    /// actions (`seccomp_run_filters`, actions compared as signed).
    fn kernel_answer(filters: &[BpfProgram], data: &Data) -> u32 {
        let mut answer = libc::SECCOMP_RET_ALLOW;
        for filter in filters.iter().rev() {
            let current = run(filter, data).ret;
            let action = |ret: u32| (ret & libc::SECCOMP_RET_ACTION_FULL) as i32;
            if action(current) < action(answer) {
                answer = current;
            }
        }
        answer
    }

    /// Argument values that make each test of the tables hold and fail:
    /// the value, a bit of the mask flipped, bits outside the mask set,
    /// garbage in the high word (ignored: only the low word counts).
    fn candidates(arg: u8) -> Vec<u64> {
        let mut values = vec![0, 1, u64::MAX, 0xffff_ffff];
        let tests = Flavour::ALL
            .into_iter()
            .flat_map(refusals)
            .flat_map(|(call, _)| match call.when {
                When::Always => Vec::new(),
                When::AnyOf(any) => any.iter().flat_map(|all| all.iter().copied()).collect(),
            });
        for test in tests {
            match test {
                ArgTest::MaskedEq {
                    arg: a,
                    mask,
                    value,
                } if a == arg => {
                    let low_bit = mask & mask.wrapping_neg();
                    values.extend([
                        value,
                        value ^ low_bit,
                        value | (!mask & 0xffff_ffff),
                        value | 0xdead_beef_0000_0000,
                    ]);
                }
                ArgTest::Ne { arg: a, value } if a == arg => {
                    values.extend([value, value + 1, value | 0xdead_beef_0000_0000]);
                }
                ArgTest::NotNull { arg: a } if a == arg => {
                    // A pointer at 4 GiB: its low word is zero.
                    values.extend([0, 0x1_0000_0000, 0x7fff_0000_0000]);
                }
                ArgTest::NotHostKey { arg: a } if a == arg => values.extend(near_keys()),
                _ => {}
            }
        }
        values.sort_unstable();
        values.dedup();
        values
    }

    /// The host's key and its near misses: one bit off in either word, one
    /// word right, the words swapped, the complement, the extremes.
    fn near_keys() -> [u64; 9] {
        let key = host_key().unwrap();
        [
            key,
            key ^ 1,
            key ^ (1 << 63),
            key & 0xffff_ffff,
            key & !0xffff_ffff,
            key.rotate_left(32),
            !key,
            0,
            u64::MAX,
        ]
    }

    /// Every combination of the first three arguments' representative
    /// values; then each representative value of the last three (the keyed
    /// `execve` and `execveat` read the fourth and the sixth), alone, beside
    /// arguments a real call would pass (pointers, a descriptor).
    fn every_combination() -> Vec<[u64; 6]> {
        let (a0, a1, a2) = (candidates(0), candidates(1), candidates(2));
        let mut cases: Vec<[u64; 6]> = a0
            .iter()
            .flat_map(|&x| a1.iter().map(move |&y| (x, y)))
            .flat_map(|(x, y)| a2.iter().map(move |&z| [x, y, z, 0, 0, 0]))
            .collect();
        for arg in 3..6 {
            for value in candidates(arg as u8) {
                for base in [
                    [0; 6],
                    [
                        0x7fff_0000_1000,
                        0x7fff_0000_2000,
                        0x7fff_0000_3000,
                        0,
                        0,
                        0,
                    ],
                ] {
                    let mut args = base;
                    args[arg] = value;
                    cases.push(args);
                }
            }
        }
        cases
    }

    /// The arguments to try with number `nr`: every combination for a call
    /// refused by its arguments, a few extremes for any other.
    fn argument_cases(nr: u32, refusals: &[(Refused, libc::c_int)]) -> Vec<[u64; 6]> {
        let by_arguments = refusals
            .iter()
            .any(|(c, _)| c.number == i64::from(nr) && matches!(c.when, When::AnyOf(_)));
        if by_arguments {
            every_combination()
        } else {
            vec![[0; 6], [u64::MAX; 6], [2, 3, 0x2000, 1, 1, 1]]
        }
    }

    /// What every program is checked against: each number 0..512 (and x32
    /// ones, and one beyond any table) with its [`argument_cases`].
    fn every_case(flavour: Flavour) -> impl Iterator<Item = Data> {
        let refusals = refusals(flavour);
        let numbers = (0..512u32).chain(
            #[cfg(target_arch = "x86_64")]
            [
                X32_SYSCALL_BIT,
                X32_SYSCALL_BIT | 41,
                X32_SYSCALL_BIT | 512,
                u32::MAX,
            ],
            #[cfg(not(target_arch = "x86_64"))]
            [u32::MAX],
        );
        numbers.flat_map(move |nr| {
            argument_cases(nr, &refusals)
                .into_iter()
                .map(move |args| Data {
                    nr,
                    arch: AUDIT_ARCH,
                    args,
                })
        })
    }

    /// Every number 0..512 (and x32 ones), with representative arguments
    /// (every combination of the first three for a call refused by its
    /// arguments), answered by the one-program layout and by the old
    /// three-filter layout exactly as the tables say.
    #[test]
    fn both_layouts_answer_every_number_as_the_tables_say() {
        for flavour in Flavour::ALL {
            let new = &programs(flavour).unwrap().program.instructions;
            let old = three_filter_layout(flavour);
            for data in every_case(flavour) {
                let (nr, args) = (data.nr, data.args);
                let want = expected(nr, &args, flavour);
                assert_eq!(
                    run(new, &data).ret,
                    want,
                    "one program, {flavour:?}, number {nr}, args {args:x?}"
                );
                assert_eq!(
                    kernel_answer(&old, &data),
                    want,
                    "three filters, {flavour:?}, number {nr}, args {args:x?}"
                );
            }
        }
    }

    /// `setpgid` with the host's key and with near misses in its third
    /// argument ([`near_keys`]), and with the key in another argument.
    fn key_cases() -> Vec<Data> {
        let key = host_key().unwrap();
        let in_third = near_keys().map(|k| [0, 0, k, 0, 0, 0]);
        let elsewhere = [[key, key, 0, key, key, key], [0, 0, 0, key, 0, 0]];
        in_third
            .into_iter()
            .chain(elsewhere)
            .map(|args| Data {
                nr: libc::SYS_setpgid as u32,
                arch: AUDIT_ARCH,
                args,
            })
            .collect()
    }

    /// The attack on the split: a module started by a spawner thread runs
    /// under the thread's base layer, and its own group layer when it has
    /// no landlock domain. Stacked, they must answer every number and
    /// argument exactly as the whole program does, the key included (a
    /// call the base forgot, or a group layer that allowed what the whole
    /// refuses, would let a module out). The base alone answers as the
    /// tables with `setpgid` keyed: it lets the child make its `setpgid`
    /// with the key, and nothing else through.
    #[test]
    fn the_base_and_group_layers_stacked_answer_as_the_whole_program() {
        for flavour in Flavour::ALL {
            let programs = programs(flavour).unwrap();
            let whole = &programs.program.instructions;
            let base = &programs.base.as_ref().unwrap().instructions;
            let layers = [base.clone(), programs.group.instructions.clone()];
            let keyed = keyed(&refusals(flavour));
            for data in every_case(flavour).chain(key_cases()).chain(exec_cases()) {
                assert_eq!(
                    kernel_answer(&layers, &data),
                    run(whole, &data).ret,
                    "{flavour:?}, number {}, args {:x?}",
                    data.nr,
                    data.args
                );
                assert_eq!(
                    run(base, &data).ret,
                    verdict(&keyed, data.nr, &data.args),
                    "base alone, {flavour:?}, number {}, args {:x?}",
                    data.nr,
                    data.args
                );
            }
            let key = host_key().unwrap();
            let refused = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
            for data in key_cases() {
                let through = data.args[usize::from(KEY_ARG)] == key;
                let want = if through {
                    libc::SECCOMP_RET_ALLOW
                } else {
                    refused
                };
                assert_eq!(run(base, &data).ret, want, "setpgid {:x?}", data.args);
                assert_eq!(kernel_answer(&layers, &data), refused);
            }
            let setsid = Data {
                nr: libc::SYS_setsid as u32,
                arch: AUDIT_ARCH,
                args: [0, 0, key, 0, 0, 0],
            };
            assert_eq!(run(base, &setsid).ret, refused, "setsid with the key");
            // What the child converts and compiles at its install.
            assert!(layers[1].len() <= 16, "{} instructions", layers[1].len());
        }
    }

    /// `execve` (the key in its fourth argument) and `execveat` (in its
    /// sixth), each with the host's key and its near misses where the key
    /// belongs ([`near_keys`]), and with the key in every other argument but
    /// not there; the other arguments what a real call passes.
    fn exec_cases() -> Vec<Data> {
        let key = host_key().unwrap();
        let calls = [
            (libc::SYS_execve, EXECVE_KEY_ARG),
            (libc::SYS_execveat, EXECVEAT_KEY_ARG),
        ];
        let mut cases = Vec::new();
        for (number, key_arg) in calls {
            let real = [
                libc::AT_FDCWD as u64,
                0x7fff_0000_1000,
                0x7fff_0000_2000,
                0x7fff_0000_3000,
                libc::AT_EMPTY_PATH as u64,
                0,
            ];
            let at = usize::from(key_arg);
            for near in near_keys() {
                let mut args = real;
                args[at] = near;
                cases.push((number, args));
            }
            for elsewhere in (0..6).filter(|&a| a != at) {
                let mut args = real;
                args[at] = 0;
                args[elsewhere] = key;
                cases.push((number, args));
            }
            cases.push((number, [key; 6]));
        }
        cases
            .into_iter()
            .map(|(number, args)| Data {
                nr: number as u32,
                arch: AUDIT_ARCH,
                args,
            })
            .collect()
    }

    /// The exec gate: a call whose capability declares no spawns has
    /// `execve` and `execveat` refused (`EACCES`) unless the host's key is
    /// where its call puts it: in the whole program (what a child started
    /// from an ordinary thread installs), in the base a spawner thread
    /// carries, and in the base with the group layer stacked over it. A
    /// near miss, or the key in another argument, is refused. A call that
    /// declares spawns has both calls allowed by every layer (landlock
    /// confines what they run).
    #[test]
    fn an_exec_gated_call_execs_only_with_the_hosts_key() {
        let key = host_key().unwrap();
        let refused = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
        for flavour in Flavour::ALL {
            let programs = programs(flavour).unwrap();
            let whole = &programs.program.instructions;
            let base = &programs.base.as_ref().unwrap().instructions;
            let stacked = [base.clone(), programs.group.instructions.clone()];
            for data in exec_cases() {
                let key_arg = if data.nr == libc::SYS_execve as u32 {
                    EXECVE_KEY_ARG
                } else {
                    EXECVEAT_KEY_ARG
                };
                let through = !flavour.exec_gated || data.args[usize::from(key_arg)] == key;
                let want = if through {
                    libc::SECCOMP_RET_ALLOW
                } else {
                    refused
                };
                let what = format!("{flavour:?}, number {}, args {:x?}", data.nr, data.args);
                assert_eq!(run(whole, &data).ret, want, "whole: {what}");
                assert_eq!(run(base, &data).ret, want, "base: {what}");
                assert_eq!(kernel_answer(&stacked, &data), want, "stacked: {what}");
            }
        }
    }

    /// The gate is exactly two listed calls in an exec-gated flavour and
    /// none in the others: nothing else about a call changes with it.
    #[test]
    fn the_exec_gate_adds_execve_and_execveat_and_nothing_else() {
        for network in [false, true] {
            let open = refusals(Flavour {
                network,
                exec_gated: false,
            });
            let gated = refusals(Flavour {
                network,
                exec_gated: true,
            });
            let added: Vec<&str> = gated
                .iter()
                .filter(|(call, _)| !open.iter().any(|(c, _)| c.number == call.number))
                .map(|(call, _)| call.name)
                .collect();
            assert_eq!(added, ["execve", "execveat"], "network {network}");
            assert_eq!(gated.len(), open.len() + 2);
        }
    }

    /// The table is not empty of arguments: both outcomes occur for every
    /// call refused by its arguments (else the comparison above proves
    /// little).
    #[test]
    fn the_representative_arguments_reach_both_outcomes_of_every_rule() {
        for flavour in Flavour::ALL {
            for (call, _) in refusals(flavour) {
                let When::AnyOf(_) = call.when else { continue };
                let nr = call.number as u32;
                let outcomes: std::collections::BTreeSet<u32> = every_combination()
                    .into_iter()
                    .map(|args| expected(nr, &args, flavour))
                    .collect();
                assert_eq!(outcomes.len(), 2, "{} ({flavour:?})", call.name);
            }
        }
    }

    /// A call from another architecture (32-bit compat) kills the process.
    #[test]
    fn another_architecture_is_killed() {
        let data = Data {
            nr: libc::SYS_socket as u32,
            arch: 0x4000_0003, // AUDIT_ARCH_I386
            args: [0; 6],
        };
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            assert_eq!(run(program, &data).ret, libc::SECCOMP_RET_KILL_PROCESS);
        }
    }

    /// What makes the program cheap for the kernel: every number it allows
    /// outright is decided without reading an argument (the kernel's allow
    /// cache then skips the filter for it), and any number decided by the
    /// tree runs a dozen or so instructions, where the old layout walked
    /// its whole chain.
    #[test]
    fn every_number_is_decided_in_a_few_instructions_and_allowed_ones_are_cacheable() {
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            let refusals = refusals(flavour);
            let old = three_filter_layout(flavour);
            let old_steps: usize = (0..512u32)
                .map(|nr| {
                    let data = Data {
                        nr,
                        arch: AUDIT_ARCH,
                        args: [0; 6],
                    };
                    old.iter().map(|f| run(f, &data).steps).sum::<usize>()
                })
                .sum();
            let mut new_steps = 0;
            for nr in 0..512u32 {
                let data = Data {
                    nr,
                    arch: AUDIT_ARCH,
                    args: [0; 6],
                };
                let outcome = run(program, &data);
                new_steps += outcome.steps;
                let listed = refusals.iter().find(|(c, _)| c.number == i64::from(nr));
                match listed.map(|(c, _)| c.when) {
                    None => {
                        assert_eq!(outcome.ret, libc::SECCOMP_RET_ALLOW, "number {nr}");
                        assert!(!outcome.read_args, "number {nr} reads its arguments");
                        assert!(outcome.steps <= 16, "number {nr}: {} steps", outcome.steps);
                    }
                    Some(When::Always) => assert!(outcome.steps <= 16, "number {nr}"),
                    Some(When::AnyOf(_)) => {}
                }
            }
            assert!(
                new_steps * 10 < old_steps,
                "{new_steps} instructions over 0..512 against {old_steps} for three filters"
            );
            // What the kernel converts and compiles at every install.
            let old_len: usize = old.iter().map(Vec::len).sum();
            assert!(
                program.len() * 3 < old_len * 2,
                "{} instructions against {old_len} for three filters",
                program.len()
            );
        }
    }

    /// Attack: `utimensat(AT_FDCWD, path, times, 0)` with the path mapped
    /// at 4 GiB, so the pointer's low word is zero. A filter reading only
    /// the low word takes it for `futimens`' null path and lets the kernel
    /// set the times of any file the module names.
    #[test]
    fn a_utimensat_path_whose_low_word_is_zero_is_refused() {
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            for path in [0x1_0000_0000u64, 0x7fff_0000_0000, 0xffff_ffff_0000_0000] {
                let data = Data {
                    nr: libc::SYS_utimensat as u32,
                    arch: AUDIT_ARCH,
                    args: [libc::AT_FDCWD as u64, path, 0, 0, 0, 0],
                };
                assert_eq!(
                    run(program, &data).ret,
                    libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                    "utimensat with its path at {path:#x} ({flavour:?})"
                );
            }
            // futimens (a null path) stays allowed.
            let data = Data {
                nr: libc::SYS_utimensat as u32,
                arch: AUDIT_ARCH,
                args: [3, 0, 0, 0, 0, 0],
            };
            assert_eq!(run(program, &data).ret, libc::SECCOMP_RET_ALLOW);
        }
    }

    /// Attack: `socketpair(AF_UNIX, SOCK_RAW)`, which `AF_UNIX` turns into
    /// a datagram pair able to `sendto` any pathname datagram socket.
    #[test]
    fn a_raw_unix_socketpair_is_refused_as_a_datagram_one() {
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            for kind in [libc::SOCK_RAW, libc::SOCK_RAW | libc::SOCK_CLOEXEC] {
                let data = Data {
                    nr: libc::SYS_socketpair as u32,
                    arch: AUDIT_ARCH,
                    args: [libc::AF_UNIX as u64, kind as u64, 0, 0, 0, 0],
                };
                assert_eq!(
                    run(program, &data).ret,
                    libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
                    "socketpair type {kind:#x} ({flavour:?})"
                );
            }
        }
    }

    /// Attack: a file of the workspace hard-linked into the module's state
    /// folder, then written through its workspace name, where the storage
    /// bound's watch does not hear of it. `link` and `linkat` (whatever
    /// their flags: `AT_EMPTY_PATH` publishes an `O_TMPFILE`) are refused
    /// with `EXDEV`, in every flavour; renames are not.
    #[test]
    fn hard_links_are_refused_as_across_filesystems() {
        let exdev = libc::SECCOMP_RET_ERRNO | libc::EXDEV as u32;
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            let mut calls = vec![(libc::SYS_linkat, libc::AT_EMPTY_PATH as u64)];
            calls.push((libc::SYS_linkat, 0));
            calls.push((libc::SYS_linkat, libc::AT_SYMLINK_FOLLOW as u64));
            #[cfg(target_arch = "x86_64")]
            calls.push((libc::SYS_link, 0));
            for (nr, flags) in calls {
                let data = Data {
                    nr: nr as u32,
                    arch: AUDIT_ARCH,
                    args: [libc::AT_FDCWD as u64, 0x1000, 3, 0x2000, flags, 0],
                };
                assert_eq!(run(program, &data).ret, exdev, "{nr} ({flavour:?})");
            }
            for nr in [libc::SYS_renameat, libc::SYS_renameat2] {
                let data = Data {
                    nr: nr as u32,
                    arch: AUDIT_ARCH,
                    args: [libc::AT_FDCWD as u64, 0x1000, 3, 0x2000, 0, 0],
                };
                assert_eq!(run(program, &data).ret, libc::SECCOMP_RET_ALLOW);
            }
        }
    }

    /// Attack: `fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 5 GiB)`, blocks
    /// beyond the file's end that `RLIMIT_FSIZE` does not bound, taken in
    /// one call. Refused (and every mode with `KEEP_SIZE`: punching holes,
    /// zeroing in place); a plain `fallocate` is not.
    #[test]
    fn fallocate_keeping_the_size_is_refused() {
        let refused = libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32;
        let keep = libc::FALLOC_FL_KEEP_SIZE as u64;
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program.instructions;
            let answer = |mode: u64| {
                let data = Data {
                    nr: libc::SYS_fallocate as u32,
                    arch: AUDIT_ARCH,
                    args: [3, mode, 0, 5 << 30, 0, 0],
                };
                run(program, &data).ret
            };
            assert_eq!(answer(keep), refused, "{flavour:?}");
            assert_eq!(answer(keep | libc::FALLOC_FL_PUNCH_HOLE as u64), refused);
            assert_eq!(answer(keep | libc::FALLOC_FL_ZERO_RANGE as u64), refused);
            assert_eq!(answer(keep | 0xdead_beef_0000_0000), refused);
            assert_eq!(answer(0), libc::SECCOMP_RET_ALLOW);
        }
    }

    #[test]
    fn each_refused_call_is_listed_once() {
        let mut numbers: Vec<_> = REFUSED
            .iter()
            .chain(LINKS)
            .chain([&FALLOCATE_KEEPING_SIZE])
            .map(|r| r.number)
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), REFUSED.len() + LINKS.len() + 1);
    }

    #[test]
    fn the_program_fits_and_checks_the_architecture_seccompiler_names() {
        for flavour in Flavour::ALL {
            let program = &programs(flavour).unwrap().program;
            assert_eq!(usize::from(program.len), program.instructions.len());
            // seccompiler's own architecture check holds the audit value
            // the dispatcher compares with.
            let block = seccompiler_program(&[always("reboot", libc::SYS_reboot)], 1).unwrap();
            assert_eq!(block[1].k, AUDIT_ARCH);
            assert_eq!(program.instructions[1].k, AUDIT_ARCH);
        }
    }
}
