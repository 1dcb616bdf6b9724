//! Confinement of one native call: Linux landlock plus resource limits.
//!
//! "Installing a module grants nothing" has to hold for native executables
//! too, not only for components. Each native call therefore runs under a
//! landlock domain built from that call's grants and nothing else:
//!
//! - read and execute on what running needs: the system binary and library
//!   directories that exist (`/usr`, `/lib`, `/lib64`, `/bin`, `/sbin`, ...),
//!   and the module's own folder;
//! - read on a short list of files in `/etc` the dynamic loader, libc and
//!   locale code open (not all of `/etc`: it holds credentials), plus the
//!   resolver and certificate files when the call may use the network;
//! - read-only on granted read roots, read-write (never execute) on granted
//!   write roots, read-write on `/dev/null`;
//! - TCP bind and connect denied unless the capability declared `network`
//!   (landlock ABI 4+); signals to and abstract sockets of processes outside
//!   the domain denied (ABI 6+).
//!
//! Resource limits ride along: a cap on processes (`RLIMIT_NPROC`, and for a
//! root host, which the kernel exempts from it, a pids cgroup: [`pids`]), on
//! the size of any one file written (`RLIMIT_FSIZE`), and no core dumps. A
//! host with capabilities (root) drops every one of them in the child
//! ([`capabilities`]). Seccomp filters ([`seccomp`]) refuse the kernel
//! surface a module never needs (device nodes, namespaces, mounts, ptrace,
//! keyrings, bpf, ...), every socket but TCP/UDP over IP (and those too
//! without `network`), and `setsid`/`setpgid`, so whatever the module starts
//! stays in the process group the host kills when the call ends.
//!
//! Design decisions:
//!
//! - **Built in the parent, applied in the child.** All the work that
//!   allocates (opening paths, building the ruleset, formatting messages)
//!   happens in the host before the child exists. Between its start and
//!   `exec` (after a `clone` sharing the host's memory, see
//!   `runner::native::spawn`, the only way a module is started) the child
//!   only makes system calls (`setrlimit`, a `write` to join the pids
//!   cgroup, `prctl`/`capset` to drop capabilities,
//!   `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`,
//!   `prctl(PR_SET_SECCOMP)`) on values, descriptors and filters prepared
//!   beforehand ([`child`]): async-signal-safe, no allocation, no panic. The landlock
//!   crate's own `restrict_self` is not used there because it consumes and
//!   drops a builder and builds error values (which may allocate).
//! - **The enforcement level is computed, not guessed.** [`probe`] asks the
//!   kernel for its landlock ABI once; [`ConfinementSupport`] says what that
//!   ABI enforces. A call that runs less than fully confined carries a host
//!   warning, `confinement = "required"` refuses it instead, and `"off"` (for
//!   debugging) skips confinement entirely.
//! - **A bare module gets its file, not its folder.** A module in its own
//!   folder (`modules/<id>/<exe>`) may read and execute that folder (its
//!   knowledge files live there). A bare executable directly in `modules/`
//!   gets only itself: its folder holds every other module.
//! - **Known gaps, by ABI.** Pathname UNIX sockets are only confined from ABI 9
//!   (`ResolveUnix`) and UDP only from ABI 10; on older kernels a module can
//!   still reach a UNIX socket it can name, and send UDP. `doctor` says so.

use std::path::{Path, PathBuf};

use modproto::Access;
use serde::{Deserialize, Serialize};

use crate::runner::Grant;

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

/// How much of a class of restrictions the kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Full,
    Partial,
    None,
}

/// What this machine can enforce on a native call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConfinementSupport {
    /// The kernel's landlock ABI version, `None` when landlock is unavailable.
    pub abi: Option<u32>,
    /// Filesystem rules: full from ABI 5 (read, write, execute, rename across
    /// folders, truncate, device ioctl), partial on ABI 1 to 4.
    pub fs: Enforcement,
    /// TCP bind and connect can be denied (ABI 4).
    pub net: bool,
    /// Signals and abstract UNIX sockets are scoped to the domain (ABI 6).
    pub scopes: bool,
    /// Connecting to pathname UNIX sockets is confined (ABI 9).
    pub unix_sockets: bool,
}

/// The landlock ABI at which filesystem confinement counts as full.
const FULL_FS_ABI: u32 = 5;

impl ConfinementSupport {
    /// What a kernel with landlock ABI `abi` enforces.
    pub fn from_abi(abi: Option<u32>) -> Self {
        let at_least = |v: u32| abi.is_some_and(|a| a >= v);
        ConfinementSupport {
            abi,
            fs: match abi {
                None => Enforcement::None,
                Some(a) if a >= FULL_FS_ABI => Enforcement::Full,
                Some(_) => Enforcement::Partial,
            },
            net: at_least(4),
            scopes: at_least(6),
            unix_sockets: at_least(9),
        }
    }

    /// Why a call with (or without) `network` would run less than fully
    /// confined; `None` when it is fully confined.
    pub fn shortfall(&self, network: bool) -> Option<String> {
        let Some(abi) = self.abi else {
            return Some(
                "landlock is not available in this kernel: the module ran with the host's filesystem and network access".into(),
            );
        };
        let mut missing = Vec::new();
        if self.fs != Enforcement::Full {
            missing.push(if abi < 3 {
                "truncation and device ioctl of granted files are not confined"
            } else {
                "device ioctl is not confined"
            });
        }
        if !network && !self.net {
            missing.push("TCP is not denied");
        }
        if missing.is_empty() {
            return None;
        }
        Some(format!(
            "landlock ABI {abi} confines this call only partially: {}",
            missing.join("; ")
        ))
    }

    /// One line for `doctor`.
    pub fn summary(&self) -> String {
        let Some(abi) = self.abi else {
            return "landlock unavailable: native modules run unconfined".into();
        };
        let yes_no = |b: bool| if b { "enforced" } else { "not enforced" };
        format!(
            "landlock ABI {abi}: filesystem {}, TCP {}, signal/abstract-socket scoping {}, pathname UNIX sockets {}",
            match self.fs {
                Enforcement::Full => "enforced",
                Enforcement::Partial => "partially enforced",
                Enforcement::None => "not enforced",
            },
            yes_no(self.net),
            yes_no(self.scopes),
            yes_no(self.unix_sockets),
        )
    }
}

/// Ask the kernel (once per process) which landlock ABI it offers.
pub fn probe() -> ConfinementSupport {
    static SUPPORT: std::sync::OnceLock<ConfinementSupport> = std::sync::OnceLock::new();
    *SUPPORT.get_or_init(|| ConfinementSupport::from_abi(kernel_abi()))
}

#[cfg(target_os = "linux")]
fn kernel_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the
    // VERSION flag only returns the ABI number (or -1 with errno); it reads
    // no memory and creates no descriptor.
    #[allow(unsafe_code)]
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|v| *v > 0)
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> Option<u32> {
    None
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
    /// `confinement = "required"` and the kernel cannot fully confine the call.
    #[error("refused to run the module unconfined: {reason}")]
    Unconfined { reason: String },
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
    pub fn remedy(&self) -> &'static str {
        match self {
            ConfineError::Unconfined { .. } => {
                "run on a kernel with landlock ABI 5 or newer (Linux 6.10+, with landlock in the lsm= boot list), or set confinement = \"best-effort\" in config.toml to run with a warning"
            }
            ConfineError::Ruleset { .. } => {
                "check that the granted roots exist and are readable by the host; set confinement = \"off\" in config.toml to debug"
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

/// System directories a native program needs to be loaded and to run tools.
const SYSTEM_EXEC_DIRS: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/nix/store",
];

/// Files in `/etc` the loader, libc, locale and user lookups open.
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
];

/// What a resolver and a TLS client need, granted only with `network`.
const ETC_NETWORK: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
];

/// Read-only devices and kernel facts programs commonly open.
const DEVICES_READ: &[&str] = &[
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
];

/// The filesystem rules of one call of `program` with `grants`, in order.
///
/// Paths that do not exist are kept; [`prepare`] skips what it cannot open.
pub fn path_rules(
    program: &Path,
    grants: &[Grant],
    executables: &[PathBuf],
    network: bool,
) -> Vec<PathRule> {
    let rule = |path: &Path, access| PathRule {
        path: path.to_path_buf(),
        access,
    };
    let mut rules: Vec<PathRule> = SYSTEM_EXEC_DIRS
        .iter()
        .map(|p| rule(Path::new(p), PathAccess::ReadExecute))
        .collect();
    let etc = ETC_RUNTIME
        .iter()
        .chain(if network { ETC_NETWORK } else { &[] })
        .chain(DEVICES_READ);
    rules.extend(etc.map(|p| rule(Path::new(p), PathAccess::Read)));
    rules.push(rule(Path::new("/dev/null"), PathAccess::ReadWrite));
    rules.push(rule(&module_root(program), PathAccess::ReadExecute));
    for grant in grants {
        let access = match grant.access {
            Access::Read => PathAccess::Read,
            Access::ReadWrite => PathAccess::ReadWrite,
        };
        rules.push(rule(&grant.host, access));
    }
    // Granted binaries outside the system folders (`[binaries]` in
    // config.toml): read and execute of the file itself, nothing beside it.
    rules.extend(
        executables
            .iter()
            .map(|path| rule(path, PathAccess::ReadExecute)),
    );
    rules
}

/// What of its own installation a module may read and execute: its folder,
/// or only itself when it lies bare in the shared `modules/` folder.
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

/// Everything the child applies between `clone` and `exec`, prepared in the
/// parent.
#[derive(Debug)]
pub struct Confinement {
    #[cfg(target_os = "linux")]
    child: child::Prepared,
    warning: Option<String>,
}

impl Confinement {
    /// No confinement at all (`confinement = "off"`).
    pub fn none() -> Self {
        Confinement {
            #[cfg(target_os = "linux")]
            child: child::Prepared {
                ruleset: None,
                limits: None,
                capabilities: None,
                seccomp: None,
                cgroup: None,
            },
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
        return self.child.ruleset.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// What the child enters just before `exec` (`runner::native::spawn`,
    /// the only way a module is started); `None` when there is nothing to
    /// enter.
    #[cfg(target_os = "linux")]
    pub fn into_child(self) -> Option<ChildConfinement> {
        (!self.child.is_empty()).then_some(ChildConfinement(self.child))
    }
}

/// The confinement as a child enters it between `clone` and `exec`
/// ([`Confinement::into_child`]).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct ChildConfinement(child::Prepared);

#[cfg(target_os = "linux")]
impl ChildConfinement {
    /// Enter the confinement: resource limits, capabilities dropped,
    /// landlock, the seccomp filters. Only system calls on values prepared
    /// before the clone: no allocation, no locks, no panics, so it may run
    /// in a child that shares the host's memory. The errno of a failure.
    pub fn enter(&self) -> Result<(), libc::c_int> {
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
    let warning = support.shortfall(network);
    if let (ConfinementMode::Required, Some(reason)) = (mode, &warning) {
        return Err(ConfineError::Unconfined {
            reason: reason.clone(),
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
    #[cfg(target_os = "linux")]
    let (seccomp, warning) = match seccomp::programs(network) {
        Ok(programs) => (Some(programs), warning),
        Err(reason) => {
            if mode == ConfinementMode::Required {
                return Err(ConfineError::Unconfined { reason });
            }
            let warning = match warning {
                Some(w) => format!("{w}; {reason}"),
                None => reason,
            };
            (None, Some(warning))
        }
    };
    #[cfg(target_os = "linux")]
    let (cgroup, warning) = match process_bound() {
        Ok(cgroup) => (cgroup, warning),
        Err(reason) => {
            let reason = format!("the module's process count is not bounded: {reason}");
            let warning = match warning {
                Some(w) => format!("{w}; {reason}"),
                None => reason,
            };
            (None, Some(warning))
        }
    };
    Ok(Confinement {
        #[cfg(target_os = "linux")]
        child: child::Prepared {
            ruleset,
            limits: Some(limits),
            capabilities: capabilities::prepare(),
            seccomp,
            cgroup,
        },
        warning,
    })
}

/// What bounds a module's processes beyond `RLIMIT_NPROC`: nothing needed
/// for a host that is not root; for root (exempt from the limit) the pids
/// cgroup of [`pids`], or why there is none.
#[cfg(target_os = "linux")]
fn process_bound() -> Result<Option<&'static pids::PidsCgroup>, String> {
    if !rustix::process::getuid().is_root() {
        return Ok(None);
    }
    pids::host_cgroup(PROCESS_MARGIN).map(Some)
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
            PathAccess::ReadWrite => handled_fs() & !AccessFs::Execute,
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
        if !network && support.net {
            // Handled with no port rule: every TCP bind and connect is denied.
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|e| error(e.to_string()))?;
        }
        if support.scopes {
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
pub mod capabilities;
#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
pub mod pids;
#[cfg(target_os = "linux")]
pub mod privileges;
#[cfg(target_os = "linux")]
pub mod seccomp;

#[cfg(test)]
mod tests;
