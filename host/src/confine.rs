//! Confinement of one native call: Linux landlock plus resource limits.
//!
//! "Installing a module grants nothing" has to hold for native executables
//! too, not only for components. Each native call therefore runs under a
//! landlock domain built from that call's grants and nothing else:
//!
//! - read on the system binary and library directories that exist (`/usr`,
//!   `/lib`, `/lib64`, `/bin`, `/sbin`, ...), the module's own folder and the
//!   installation prefix of its interpreter (`interpreter`);
//! - execute on files only: the module's entry file, its interpreter chain
//!   (shebang, `env`, the interpreter PATH names, each ELF loader) and the
//!   binaries its capability declares in `effects.spawns` (and the operator
//!   granted): `spawns: []` means the module runs no other program;
//! - read on a short list of files in `/etc` the dynamic loader, libc,
//!   locale code and TLS libraries open (not all of `/etc`, not `/etc/ssl`
//!   whole: they hold credentials and private keys), plus the resolver files
//!   when the call may use the network;
//! - read-only on granted read roots, read-write (never execute, never a
//!   character or block device node) on granted write roots, read-write on
//!   `/dev/null`;
//! - TCP bind and connect denied unless the capability declared `network`
//!   (landlock ABI 4+); signals to and abstract sockets of processes outside
//!   the domain denied (ABI 6+).
//!
//! Resource limits ride along: a cap on processes (`RLIMIT_NPROC`), on the
//! size of any one file written (`RLIMIT_FSIZE`), and no core dumps. A
//! seccomp filter refuses `setsid` and `setpgid`, so whatever the module
//! starts stays in the process group the host kills when the call ends.
//!
//! Design decisions:
//!
//! - **Built in the parent, applied in the child.** All the work that
//!   allocates (opening paths, building the ruleset, formatting messages)
//!   happens in the host before the child exists. Between its start and
//!   `exec` (after a `clone` sharing the host's memory, see
//!   `runner::native::spawn`, or a `fork`) the child only calls `setrlimit`,
//!   `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self` and
//!   `prctl(PR_SET_SECCOMP)` on values, a file descriptor and a static
//!   filter prepared beforehand: raw syscalls, async-signal-safe, no
//!   allocation. The landlock
//!   crate's own `restrict_self` is not used there because it consumes and
//!   drops a builder and builds error values (which may allocate).
//! - **The enforcement level is computed, part by part.** [`probe`] asks the
//!   kernel once for its landlock ABI and whether it filters with seccomp;
//!   [`ConfinementSupport`] (`support.rs`) says which [`Part`] of a call's
//!   confinement (filesystem, TCP, UDP and raw sockets, UNIX sockets, ...)
//!   is enforced and by what. A call whose effects imply a part this machine
//!   cannot enforce carries a host warning naming it; `confinement =
//!   "required"` refuses it instead, with the remedy; `"off"` (for
//!   debugging) skips confinement entirely.
//! - **A bare module gets its file, not its folder.** A module in its own
//!   folder (`modules/<id>/<exe>`) may read that folder (its knowledge files
//!   live there) and execute its entry file. A bare executable directly in
//!   `modules/` gets only itself: its folder holds every other module.
//! - **No `/proc/<pid>`.** A landlock rule on `/proc/self` would resolve to
//!   the host's own pid when the ruleset is built; granting `/proc` whole
//!   would show other processes' command lines. Node and Python start
//!   without it; `/proc/meminfo` and `/proc/cpuinfo` (facts about the
//!   machine, not its processes) are granted.

use std::path::{Path, PathBuf};

use modproto::Access;
use serde::{Deserialize, Serialize};

use crate::runner::Grant;

pub mod denial;
pub mod interpreter;
pub mod support;

pub use support::{ConfinementSupport, Enforcement, Part, PartSupport, probe};

/// `confinement = ...` in `config.toml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfinementMode {
    /// Refuse to run a native call that cannot be fully confined.
    Required,
    /// Confine as far as the kernel allows; warn when that is less than full.
    #[default]
    BestEffort,
    /// Do not confine (debugging only).
    Off,
}

impl ConfinementMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfinementMode::Required => "required",
            ConfinementMode::BestEffort => "best-effort",
            ConfinementMode::Off => "off",
        }
    }
}

/// Resource limits of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Processes the module's user may have. Counted per user by the kernel,
    /// so this is the user's current count plus a margin (see [`process_cap`]).
    pub processes: u64,
    /// The largest file the module may write, in bytes.
    pub file_size: u64,
}

/// Whether a confined module is kept in its process group (a seccomp filter
/// refuses `setsid` and `setpgid`; built for x86_64 and aarch64).
pub const STAYS_IN_GROUP: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// The largest file a module may write: 1 GiB.
pub const MAX_FILE_SIZE: u64 = 1 << 30;

/// How many more processes than the user already runs a call may create.
pub const PROCESS_MARGIN: u64 = 256;

/// Why a call cannot run confined as asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfineError {
    /// `confinement = "required"` and this machine cannot enforce every
    /// part of confinement the call implies.
    #[error("refused to run the module less than fully confined: {reason}")]
    Unconfined { reason: String, remedy: String },
    /// Building the ruleset failed (the kernel refused a rule).
    #[error("could not build the landlock ruleset: {message}")]
    Ruleset { message: String },
}

impl ConfineError {
    /// The machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ConfineError::Unconfined { .. } => "unconfined",
            ConfineError::Ruleset { .. } => "spawn_failed",
        }
    }

    /// What the operator can do about it.
    pub fn remedy(&self) -> String {
        match self {
            ConfineError::Unconfined { remedy, .. } => remedy.clone(),
            ConfineError::Ruleset { .. } => {
                "check that the granted roots exist and are readable by the host; set confinement = \"off\" in config.toml to debug".into()
            }
        }
    }
}

/// What a path may be used for inside the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAccess {
    /// Read files, list folders.
    Read,
    /// Read and execute (system directories, the module's own folder).
    ReadExecute,
    /// Everything but execute (granted write roots, `/dev/null`).
    ReadWrite,
}

/// One filesystem rule of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: PathAccess,
}

/// System directories a native program is loaded from and reads (libraries,
/// locale data, time zones, OpenSSL's `/usr/lib/ssl`): read, never execute.
/// Execution is granted per file (see [`path_rules`]).
const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/nix/store",
];

/// Files in `/etc` the loader, libc, locale, user lookups and TLS libraries
/// open at start-up. Not all of `/etc`, and not `/etc/ssl` or `/etc/pki`
/// whole: they hold private keys (readable by a root host's uid 0).
const ETC_RUNTIME: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/etc/alternatives",
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/crypto-policies",
];

/// What a resolver needs, granted only with `network`.
const ETC_NETWORK: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
];

/// Read-only devices and kernel facts programs commonly open (not
/// `/proc/<pid>`: other processes' command lines are not a module's
/// business).
const DEVICES_READ: &[&str] = &[
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
    "/proc/meminfo",
    "/proc/cpuinfo",
];

/// The filesystem rules of one call of `program` with `grants`, in order.
///
/// Execution is granted on files only: the program, its interpreter chain
/// ([`interpreter::resolve`]: `env`, the interpreter PATH names, each ELF
/// loader) and the granted `executables` (a capability's `effects.spawns`)
/// with theirs. Everything else, system folders and the module's own folder
/// included, is read at most. Paths that do not exist are kept; [`prepare`]
/// skips what it cannot open.
pub fn path_rules(
    program: &Path,
    grants: &[Grant],
    executables: &[PathBuf],
    network: bool,
) -> Vec<PathRule> {
    let chain = interpreter::resolve_cached(program, executables);
    path_rules_with(program, grants, &chain, network)
}

/// [`path_rules`] with the interpreter chain already resolved.
pub fn path_rules_with(
    program: &Path,
    grants: &[Grant],
    chain: &interpreter::Chain,
    network: bool,
) -> Vec<PathRule> {
    let rule = |path: &Path, access| PathRule {
        path: path.to_path_buf(),
        access,
    };
    let mut rules: Vec<PathRule> = SYSTEM_READ_DIRS
        .iter()
        .map(|p| rule(Path::new(p), PathAccess::Read))
        .collect();
    let etc = ETC_RUNTIME
        .iter()
        .chain(if network { ETC_NETWORK } else { &[] })
        .chain(DEVICES_READ);
    rules.extend(etc.map(|p| rule(Path::new(p), PathAccess::Read)));
    rules.push(rule(Path::new("/dev/null"), PathAccess::ReadWrite));
    rules.push(rule(&module_root(program), PathAccess::Read));
    rules.push(rule(program, PathAccess::ReadExecute));
    rules.extend(chain.read.iter().map(|p| rule(p, PathAccess::Read)));
    for grant in grants {
        let access = match grant.access {
            Access::Read => PathAccess::Read,
            Access::ReadWrite => PathAccess::ReadWrite,
        };
        rules.push(rule(&grant.host, access));
    }
    // The program's interpreter chain and the granted binaries (with
    // theirs): read and execute of each file, nothing beside it.
    rules.extend(
        chain
            .executables
            .iter()
            .map(|path| rule(path, PathAccess::ReadExecute)),
    );
    rules
}

/// What of its own installation a module may read: its folder, or only
/// itself when it lies bare in the shared `modules/` folder.
pub fn module_root(program: &Path) -> PathBuf {
    match program.parent() {
        Some(parent)
            if !parent.as_os_str().is_empty()
                && parent.file_name().is_some_and(|n| n != "modules") =>
        {
            parent.to_path_buf()
        }
        _ => program.to_path_buf(),
    }
}

/// Everything the child applies between `fork` and `exec`, prepared in the
/// parent.
#[derive(Debug)]
pub struct Confinement {
    /// The landlock ruleset, when one is enforced.
    #[cfg(target_os = "linux")]
    ruleset: Option<std::os::fd::OwnedFd>,
    /// `None` under `confinement = "off"`.
    limits: Option<ResourceLimits>,
    warning: Option<String>,
}

impl Confinement {
    /// No confinement at all (`confinement = "off"`).
    pub fn none() -> Self {
        Confinement {
            #[cfg(target_os = "linux")]
            ruleset: None,
            limits: None,
            warning: Some(
                "confinement is off (config.toml): the module ran with the host's filesystem and network access".into(),
            ),
        }
    }

    /// The host warning this call carries, when it runs less than fully confined.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Whether a landlock domain will be applied.
    pub fn is_landlocked(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.ruleset.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Arrange for the child spawned by `command` to enter this confinement
    /// just before `exec`. The ruleset descriptor moves into the command and
    /// is closed with it (and, being close-on-exec, never reaches the module).
    pub fn apply_to(self, command: &mut std::process::Command) {
        #[cfg(target_os = "linux")]
        {
            let Confinement {
                ruleset, limits, ..
            } = self;
            if ruleset.is_none() && limits.is_none() {
                return;
            }
            let child = child::Prepared::new(ruleset, limits);
            child.install(command);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = command;
    }

    /// What the child enters just before `exec`, for a spawner of its own
    /// (`runner::native::spawn`); `None` when there is nothing to enter.
    #[cfg(target_os = "linux")]
    pub fn into_child(self) -> Option<ChildConfinement> {
        let Confinement {
            ruleset, limits, ..
        } = self;
        if ruleset.is_none() && limits.is_none() {
            return None;
        }
        Some(ChildConfinement(child::Prepared::new(ruleset, limits)))
    }
}

/// The confinement as a child enters it between `fork` (or `clone`) and
/// `exec` ([`Confinement::into_child`]).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct ChildConfinement(child::Prepared);

#[cfg(target_os = "linux")]
impl ChildConfinement {
    /// Enter the confinement: resource limits, then landlock and the seccomp
    /// filter. Only system calls on values prepared before the fork: no
    /// allocation, no locks, so it may run in a child that shares the host's
    /// memory.
    pub fn enter(&self) -> std::io::Result<()> {
        self.0.enter()
    }
}

/// Prepare the confinement of one call of `program`.
///
/// Under [`ConfinementMode::Required`], a call the kernel cannot fully
/// confine is refused; under [`ConfinementMode::BestEffort`] it runs with
/// [`Confinement::warning`] set.
pub fn prepare(
    program: &Path,
    grants: &[Grant],
    executables: &[PathBuf],
    network: bool,
    mode: ConfinementMode,
) -> Result<Confinement, ConfineError> {
    if mode == ConfinementMode::Off {
        return Ok(Confinement::none());
    }
    let support = probe();
    let unenforced = support.unenforced(network);
    let warning = (!unenforced.is_empty()).then(|| support::describe_unenforced(&unenforced));
    if let (ConfinementMode::Required, Some(reason)) = (mode, &warning) {
        return Err(ConfineError::Unconfined {
            reason: reason.clone(),
            remedy: support::remedy_for(&unenforced),
        });
    }
    let limits = ResourceLimits {
        processes: process_cap(),
        file_size: MAX_FILE_SIZE,
    };
    #[cfg(target_os = "linux")]
    let ruleset = match support.abi {
        Some(_) => Some(ruleset::build(
            &path_rules(program, grants, executables, network),
            network,
            &support,
        )?),
        None => None,
    };
    #[cfg(not(target_os = "linux"))]
    let _ = (program, grants, executables);
    Ok(Confinement {
        #[cfg(target_os = "linux")]
        ruleset,
        limits: Some(limits),
        warning,
    })
}

/// The `RLIMIT_NPROC` of a call: the kernel counts processes per user, so a
/// fixed small cap would fail on a busy desktop; the user's current count
/// plus [`PROCESS_MARGIN`] stops a fork bomb without breaking honest helpers.
/// The count is cached for a few seconds: scanning `/proc` on every call
/// would cost more than the spawn itself.
pub fn process_cap() -> u64 {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};
    static CACHE: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
    const FRESH: Duration = Duration::from_secs(5);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let count = match *cache {
        Some((at, count)) if at.elapsed() < FRESH => count,
        _ => {
            let count = count_user_processes();
            *cache = Some((Instant::now(), count));
            count
        }
    };
    count + PROCESS_MARGIN
}

/// Processes owned by the host's user, from `/proc` (0 when unreadable).
fn count_user_processes() -> u64 {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count() as u64
}

#[cfg(target_os = "linux")]
mod ruleset {
    //! Building the landlock ruleset in the parent.

    use std::os::fd::OwnedFd;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope,
    };

    use super::{ConfineError, ConfinementSupport, PathAccess, PathRule};

    /// The filesystem rights the host asks the kernel to handle: everything
    /// the crate knows; the crate drops what the running kernel lacks.
    fn handled_fs() -> BitFlags<AccessFs> {
        AccessFs::from_all(ABI::V9)
    }

    fn rights(access: PathAccess) -> BitFlags<AccessFs> {
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        match access {
            PathAccess::Read => read,
            PathAccess::ReadExecute => read | AccessFs::Execute,
            // No execute, and never a device node: a module that could
            // `mknod` a character or block device in its state root would
            // reach the kernel log or the raw disk through it.
            PathAccess::ReadWrite => {
                handled_fs() & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
            }
        }
    }

    pub(super) fn build(
        rules: &[PathRule],
        network: bool,
        support: &ConfinementSupport,
    ) -> Result<OwnedFd, ConfineError> {
        let error = |message: String| ConfineError::Ruleset { message };
        let mut ruleset = Ruleset::default()
            .handle_access(handled_fs())
            .map_err(|e| error(e.to_string()))?;
        if !network && support.landlock_tcp() {
            // Handled with no port rule: every TCP bind and connect is denied.
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|e| error(e.to_string()))?;
        }
        if support.landlock_scopes() {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .map_err(|e| error(e.to_string()))?;
        }
        let mut created = ruleset.create().map_err(|e| error(e.to_string()))?;
        for rule in rules {
            // A path that does not exist (a system folder this distribution
            // lacks, a state root not yet created) simply grants nothing.
            let Ok(fd) = PathFd::new(&rule.path) else {
                continue;
            };
            let is_dir = std::fs::metadata(&rule.path).is_ok_and(|m| m.is_dir());
            let mut access = rights(rule.access);
            if !is_dir {
                access &= AccessFs::from_file(ABI::V9);
            }
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| error(format!("{}: {e}", rule.path.display())))?;
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or_else(|| error("the kernel did not create a ruleset".into()))
    }
}

#[cfg(target_os = "linux")]
mod child {
    //! What runs in the child between `fork` and `exec`.

    use std::os::fd::{AsRawFd, OwnedFd};

    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    use super::ResourceLimits;

    /// Values the child needs, all prepared before `fork`.
    #[derive(Debug)]
    pub(super) struct Prepared {
        ruleset: Option<OwnedFd>,
        limits: Option<ResourceLimits>,
    }

    impl Prepared {
        pub(super) fn new(ruleset: Option<OwnedFd>, limits: Option<ResourceLimits>) -> Self {
            Prepared { ruleset, limits }
        }

        #[allow(unsafe_code)]
        pub(super) fn install(self, command: &mut std::process::Command) {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec, where
            // only async-signal-safe work is allowed. It performs raw
            // syscalls (setrlimit, prctl, landlock_restrict_self) on plain
            // integers and a descriptor opened before the fork, reads only
            // memory owned by the closure, never allocates or locks, and
            // reports failure through `io::Error::last_os_error`, which does
            // not allocate.
            unsafe {
                command.pre_exec(move || self.enter());
            }
        }

        /// Enter the confinement. Runs in the child: syscalls only.
        pub(super) fn enter(&self) -> std::io::Result<()> {
            if let Some(limits) = self.limits {
                set_limit(Resource::Core, 0)?;
                set_limit(Resource::Fsize, limits.file_size)?;
                set_limit(Resource::Nproc, limits.processes)?;
            }
            if let Some(ruleset) = &self.ruleset {
                restrict_self(ruleset.as_raw_fd())?;
                stay_in_group()?;
            }
            Ok(())
        }
    }

    /// Seccomp filter: `setsid` and `setpgid` fail with `EPERM`, so nothing
    /// the module starts can leave the process group the host kills at the
    /// end of the call (a daemon that double-forks and calls `setsid` would
    /// otherwise outlive it). Syscalls of a foreign ABI (32-bit compat, x32)
    /// are refused outright: they have other numbers for the same calls.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn stay_in_group() -> std::io::Result<()> {
        #[cfg(target_arch = "x86_64")]
        const AUDIT_ARCH: u32 = 0xC000_003E;
        #[cfg(target_arch = "aarch64")]
        const AUDIT_ARCH: u32 = 0xC000_00B7;
        /// x32 syscalls share the x86_64 audit arch, flagged by this bit.
        const X32_BIT: u32 = 0x4000_0000;
        const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
        const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
        const RET_K: u16 = 0x06; // BPF_RET | BPF_K
        const OFFSET_NR: u32 = 0; // seccomp_data.nr
        const OFFSET_ARCH: u32 = 4; // seccomp_data.arch
        const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
        const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
            libc::sock_filter { code, jt, jf, k }
        }
        // A static program: building it needs no allocation in the child.
        static FILTER: [libc::sock_filter; 9] = [
            op(LD_W_ABS, 0, 0, OFFSET_ARCH),
            op(JEQ_K, 1, 0, AUDIT_ARCH),
            op(RET_K, 0, 0, DENY),
            op(LD_W_ABS, 0, 0, OFFSET_NR),
            op(JGE_K, 3, 0, X32_BIT),
            op(JEQ_K, 2, 0, libc::SYS_setsid as u32),
            op(JEQ_K, 1, 0, libc::SYS_setpgid as u32),
            op(RET_K, 0, 0, ALLOW),
            op(RET_K, 0, 0, DENY),
        ];
        let program = libc::sock_fprog {
            len: FILTER.len() as u16,
            filter: FILTER.as_ptr().cast_mut(),
        };
        // SAFETY: `program` points at a static, well-formed BPF program that
        // the kernel copies; no_new_privs is already set by restrict_self.
        #[allow(unsafe_code)]
        let status = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &raw const program,
            )
        };
        if status != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// No filter for this architecture: the process group can be left, and
    /// `doctor` says so (see [`super::STAYS_IN_GROUP`]).
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn stay_in_group() -> std::io::Result<()> {
        Ok(())
    }

    /// Lower the soft and hard limit of `resource` to `value` (never raise:
    /// an operator's stricter limit stays). rustix issues the raw syscalls.
    fn set_limit(resource: Resource, value: u64) -> std::io::Result<()> {
        let lower = |limit: Option<u64>| Some(limit.map_or(value, |l| l.min(value)));
        let current = getrlimit(resource);
        let limit = Rlimit {
            current: lower(current.current),
            maximum: lower(current.maximum),
        };
        setrlimit(resource, limit).map_err(std::io::Error::from)
    }

    /// `no_new_privs` (required to enter a domain without privileges, and it
    /// keeps setuid programs from lifting the domain), then the domain.
    fn restrict_self(ruleset: libc::c_int) -> std::io::Result<()> {
        // SAFETY: prctl and landlock_restrict_self take only integers.
        #[allow(unsafe_code)]
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
