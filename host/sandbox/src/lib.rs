//! Confinement of one native call: Linux landlock plus resource limits.
//!
//! "Installing a module grants nothing" has to hold for native executables
//! too, not only for components. Each native call therefore runs under a
//! landlock domain built from that call's grants and nothing else:
//!
//! - read on the system binary and library directories that exist (`/usr`,
//!   `/lib`, `/lib64`, `/bin`, `/sbin`, ...), the module's own folder and the
//!   installation prefixes of its interpreter and of the binaries its
//!   capability is granted (`interpreter`);
//! - execute on files only: the module's entry file, its interpreter chain
//!   (shebang, `env`, the interpreter PATH names, each ELF loader) and the
//!   binaries its capability declares in `effects.spawns` (and the operator
//!   granted); a capability granted none executes nothing at all after its
//!   start, which seccomp holds (below);
//! - read on a short list of files in `/etc` the dynamic loader, libc,
//!   locale code and TLS libraries open (not all of `/etc`, not `/etc/ssl`
//!   whole: they hold credentials and private keys), plus the resolver files
//!   when the call may use the network;
//! - read-only on granted read roots, read-write (never execute, never a
//!   character or block device node) on granted write roots, read-write on
//!   `/dev/null`;
//! - TCP bind denied, and TCP connect too unless the call has network, and
//!   then to its egress proxy's port only (landlock ABI 4+); signals to and
//!   abstract sockets of processes outside the domain denied (ABI 6+).
//!
//! A call with network ([`NetworkAccess::Proxy`]) also runs in the host's
//! egress network namespace (`egress_namespace`), where nothing but the
//! proxy's listeners is reachable: the module's only way out is the proxy,
//! which checks every name and address against the call's grant.
//!
//! Resource limits ride along: a cap on processes (`RLIMIT_NPROC`, and for a
//! root host, which the kernel exempts from it, a pids cgroup: [`pids`]), on
//! the memory of the call's processes together (a memory cgroup per call,
//! else `RLIMIT_DATA` per process: [`memory_cgroup`]), on the size of any
//! one file written (`RLIMIT_FSIZE`), and no core dumps. A
//! host with capabilities (root) drops every one of them in the child
//! (`capabilities`). Seccomp filters (`seccomp`) refuse the kernel
//! surface a module never needs (device nodes, namespaces, mounts, ptrace,
//! keyrings, bpf, ...), every socket but a TCP stream over IP (and that
//! too without `network`), and `setsid`/`setpgid` (but the child's own
//! `setpgid`, which carries a key the module never sees), so whatever the
//! module starts stays in the process group the host kills when the call
//! ends. For a capability granted no executables they refuse `execve` and
//! `execveat` too, but the child's own exec, which carries the same key
//! (`seccomp::EXEC_GATE`): landlock's execute rule names files, and the ELF
//! loader, executable as the entry's interpreter, would run any readable
//! program (`launch` starts an `env` line's command itself, so a script's
//! start stays one exec).
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
//!   beforehand (`child`): async-signal-safe, no allocation, no panic. The landlock
//!   crate's own `restrict_self` is not used there because it consumes and
//!   drops a builder and builds error values (which may allocate).
//! - **What every call shares is carried by the spawner threads.** The
//!   bounding set, securebits, `no_new_privs` and all but the process-group
//!   calls of the seccomp filter are per thread in Linux and inherited at
//!   `clone`: the threads modules are
//!   started from take them once (`spawner`), and [`prepare`] leaves them
//!   out of the child's steps (about 80 us per child). A confinement so
//!   prepared is only started from its thread
//!   (`ChildConfinement::may_start_here`).
//! - **The enforcement level is computed, part by part.** [`probe`] asks the
//!   kernel once for its landlock ABI and whether it filters with seccomp;
//!   `ConfinementSupport` (`support.rs`) says which `Part` of a call's
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
//!
//! # API
//!
//! One user, `modhost-runner`, and this is all it reaches (nothing else is
//! `pub`: `unreachable_pub` is denied below):
//!
//! - [`prepare`] builds a call's [`Confinement`] from its [`Grant`]s,
//!   [`ResourceLimits`] and [`ConfinementMode`]; [`Confinement::into_child`]
//!   gives the [`ChildConfinement`] a child enters; errors are
//!   [`ConfineError`] (with a kind and a remedy).
//! - [`spawn::spawn`] starts the confined child; [`spawner_pool::run`] runs
//!   it on a spawner thread of the call's [`Flavour`] (network, exec gated),
//!   which already carries what every such call shares.
//! - [`probe`] and [`support`] say what this kernel enforces, part by part.
//! - [`denial`] reads a module's stderr for the sandbox's refusals and names
//!   the grant that would allow it; [`environment`] is the module's
//!   environment and PATH; [`interpreter`] resolves a script's interpreter
//!   chain; [`mount_table`] answers "is this path on a kernel filesystem, do
//!   these two paths overlap"; [`pids`] owns the host's pids cgroup;
//!   [`memory_cgroup`] its pool of call cgroups and
//!   [`Confinement::bound_memory`], a call's memory bound.
//! - [`PathRule`], [`PathAccess`] and [`Opening`] describe one landlock rule
//!   (for `modhost doctor` and the tests that show a ruleset).

// A public field, signature or trait impl that reaches a type no user can
// name is a compile error: the type is made private or exported on purpose.
#![deny(unnameable_types)]
#![deny(unreachable_pub)]

use std::path::{Path, PathBuf};

use modproto::Access;
use serde::{Deserialize, Serialize};

use crate::mount_table::MountTable;

pub mod denial;
mod egress_namespace;
pub mod environment;
mod error;
mod flavour;
mod grant;
pub mod interpreter;
mod limits;
pub mod mount_table;
mod network_access;
mod path_rule;
pub mod support;

pub use egress_namespace::{EgressListener, egress_listener};
pub use error::ConfineError;
pub use flavour::Flavour;
pub use grant::Grant;
pub use limits::{
    DEFAULT_NATIVE_MEMORY_BYTES, MAX_FILE_SIZE, PROCESS_MARGIN, ResourceLimits, bytes_in_words,
};
pub use network_access::NetworkAccess;
pub use path_rule::{Opening, PathAccess, PathRule};
pub use support::probe;

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
    /// As `config.toml` spells it (`modhost doctor` reports it).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfinementMode::Required => "required",
            ConfinementMode::BestEffort => "best-effort",
            ConfinementMode::Off => "off",
        }
    }
}

/// System directories a native program is loaded from and reads (libraries,
/// locale data, time zones, OpenSSL's `/usr/lib/ssl`): read, never execute.
/// Execution is granted per file (see [`path_rules_with`]).
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

/// Every path [`path_rules_with`] gives a call whatever its module and
/// grants, watched: the rules the ruleset cache checks through the watch
/// instead of a `statx` each (`confine/path_watch.rs`).
#[cfg(target_os = "linux")]
fn system_watch() -> &'static path_watch::PathWatch {
    static SYSTEM: std::sync::OnceLock<path_watch::PathWatch> = std::sync::OnceLock::new();
    SYSTEM.get_or_init(|| {
        let paths = SYSTEM_READ_DIRS
            .iter()
            .chain(ETC_RUNTIME)
            .chain(ETC_NETWORK)
            .chain(DEVICES_READ)
            .chain(std::iter::once(&DEV_NULL))
            .map(PathBuf::from)
            .collect();
        path_watch::PathWatch::over(paths)
    })
}

/// Read and written by every confined module.
const DEV_NULL: &str = "/dev/null";

/// The filesystem rules of one call of `program` with `grants`, in order,
/// given the interpreter `chain` of the program and the granted
/// `executables` ([`interpreter::resolve_cached`]).
///
/// Execution is granted on files only: the program, its interpreter chain
/// ([`interpreter::resolve`]: `env`, the interpreter PATH names, each ELF
/// loader) and the granted `executables` (a capability's `effects.spawns`)
/// with theirs. Everything else, system folders and the module's own folder
/// included, is read at most. Paths that do not exist are kept; [`prepare`]
/// skips what it cannot open.
///
/// One exception: a program run from its approved snapshot
/// ([`approved_snapshot_root`]) may execute every file of that snapshot, so
/// a folder module can run its own helpers. Those files are exactly the
/// approved bytes, host-owned and read-only, outside every grant: running
/// them grants nothing the module's own code could not already do. Never
/// for a program run from `modules/<id>/` (`pins = "off"`, unpinned, or
/// changed under `warn`), whose folder anyone with access to `modules/` can
/// change, and never for a bare module's parent (`modules/` itself).
/// [`prepare`] refuses a call that would execute a file inside one of its
/// read-write roots before it asks for these rules.
pub(crate) fn path_rules_with(
    program: &Path,
    grants: &[Grant],
    chain: &interpreter::Chain,
    network: bool,
) -> Vec<PathRule> {
    let opened = |opening| {
        move |path: &Path, access| PathRule {
            path: path.to_path_buf(),
            access,
            opening,
        }
    };
    let rule = opened(Opening::FollowingLinks);
    let mut rules: Vec<PathRule> = SYSTEM_READ_DIRS
        .iter()
        .map(|p| rule(Path::new(p), PathAccess::Read))
        .collect();
    let etc = ETC_RUNTIME
        .iter()
        .chain(if network { ETC_NETWORK } else { &[] })
        .chain(DEVICES_READ);
    rules.extend(etc.map(|p| rule(Path::new(p), PathAccess::Read)));
    rules.push(rule(Path::new(DEV_NULL), PathAccess::ReadWrite));
    // Paths the host resolved (canonical) are opened through no link: a
    // link in one now was swapped in since by someone writing beside it
    // (`Opening::NoLinks`). A program run from its approved snapshot is
    // canonical; one run from `modules/<id>/` may lie behind a link the
    // operator made (a development folder linked in), and is followed.
    let resolved = opened(Opening::NoLinks);
    let snapshot = approved_snapshot_root(program, grants);
    let own = opened(if snapshot.is_some() {
        Opening::NoLinks
    } else {
        Opening::FollowingLinks
    });
    rules.push(own(&module_root(program), PathAccess::Read));
    if let Some(snapshot) = &snapshot {
        rules.push(resolved(snapshot, PathAccess::ReadExecute));
    }
    rules.push(own(program, PathAccess::ReadExecute));
    rules.extend(chain.read.iter().map(|p| resolved(p, PathAccess::Read)));
    for grant in grants {
        let access = match grant.access {
            Access::Read => PathAccess::Read,
            Access::ReadWrite => PathAccess::ReadWrite,
        };
        rules.push(resolved(&grant.host, access));
    }
    // The program's interpreter chain and the granted binaries (with
    // theirs): read and execute of each file, nothing beside it.
    rules.extend(
        chain
            .executables
            .iter()
            .map(|path| resolved(path, PathAccess::ReadExecute)),
    );
    rules
}

/// A file the call would execute (`program`, its interpreter chain, a
/// granted binary and its chain) inside one of the call's read-write roots:
/// the module could rewrite it and then run any program in its place (one
/// outside its capability's `spawns`), and so could the module of any other
/// call writing that root, whose bytes this call would then run with its
/// own grants. Refused, whatever the confinement mode but `off`.
fn executable_in_a_writable_root(
    program: &Path,
    chain: &interpreter::Chain,
    grants: &[Grant],
    mounts: &MountTable,
) -> Option<ConfineError> {
    let writable = grants.iter().filter(|g| g.access == Access::ReadWrite);
    let executed = std::iter::once(program).chain(chain.executables.iter().map(PathBuf::as_path));
    let (file, root) = executed
        .flat_map(|file| writable.clone().map(move |root| (file, root)))
        .find(|(file, root)| mounts.holds(&root.host, file))?;
    Some(ConfineError::Unconfined {
        reason: format!(
            "{} would be executable, and it lies in the read-write root `{}` ({}): the module could rewrite it and run any program in its place",
            file.display(),
            root.name,
            root.host.display()
        ),
        remedy: "keep modules' interpreters and granted binaries outside every root a capability writes, or grant that root read-only".into(),
    })
}

/// What the call would run besides the module's own entry that another
/// call's module could have written: a file it executes (an interpreter of
/// its chain, found on `PATH` or named by a shebang; a granted binary and
/// its chain) or an installation its interpreter loads code from (a
/// virtual environment's `site-packages`), inside `module_writes` (the
/// workspace, the modhost home), whatever this call's own access there.
/// The approved snapshot is the approved bytes, read-only and host-owned,
/// and is not looked at. (A file elsewhere with a second name, a hard link,
/// in such a place is not found: finding it would take a search of the
/// filesystem.)
///
/// The module's own entry is what the pins policy decides on: a module run
/// from its folder (`pins = "off"`, or changed under `warn`) is run as the
/// operator chose.
fn executable_where_modules_write(
    program: &Path,
    chain: &interpreter::Chain,
    grants: &[Grant],
    module_writes: &[PathBuf],
    mounts: &MountTable,
) -> Option<ConfineError> {
    // Most chains lie outside every place modules write: nothing below
    // costs a system call for them (the mount table, which shows a place
    // under another name, is the call's own, taken once).
    let mut suspects = chain
        .executables
        .iter()
        .chain(&chain.read)
        .filter(|path| module_writes.iter().any(|place| mounts.holds(place, path)))
        .peekable();
    suspects.peek()?;
    let snapshot = approved_snapshot_root(program, grants);
    // Resolved only for a suspect outside the snapshot (a module run from
    // `modules/<id>/`): one `readlink` per component of the program's path.
    let entry = std::cell::OnceCell::new();
    for path in suspects {
        if snapshot.as_ref().is_some_and(|s| path.starts_with(s))
            || entry
                .get_or_init(|| std::fs::canonicalize(program).ok())
                .as_ref()
                == Some(path)
        {
            continue;
        }
        let place = module_writes
            .iter()
            .find(|place| mounts.holds(place, path))?;
        return Some(ConfineError::Unconfined {
            reason: format!(
                "{} would run (an interpreter, a granted binary or an installation it loads code from), and it lies in {}, where modules write: a module could change it, and this call would run its bytes with this call's grants",
                path.display(),
                place.display()
            ),
            remedy: "keep modules' interpreters, their installations and granted binaries outside the workspace and the modhost home (first on PATH too: start modhost without a virtual environment of the workspace activated)".into(),
        });
    }
    None
}

/// The approved snapshot `program` runs from: the folder
/// `…/cache/snapshots/<digest>/` holding it ([`crate::snapshot`]), when that
/// folder is really one: a directory (not a link) owned by this process's
/// user, writable by nobody, and overlapping no read-write grant of the
/// call. `None` for every other program, a module run from `modules/<id>/`
/// included.
pub(crate) fn approved_snapshot_root(program: &Path, grants: &[Grant]) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let snapshot = program.ancestors().skip(1).find(|dir| {
        let is_digest = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()));
        let store = dir.parent();
        is_digest
            && store
                .and_then(Path::file_name)
                .is_some_and(|n| n == "snapshots")
            && store
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .is_some_and(|n| n == "cache")
    })?;
    let meta = std::fs::symlink_metadata(snapshot).ok()?;
    let host_owned = meta.is_dir()
        && meta.uid() == rustix::process::geteuid().as_raw()
        && meta.mode() & 0o222 == 0;
    let writable_by_the_call = grants.iter().any(|g| {
        g.access == Access::ReadWrite
            && (g.host.starts_with(snapshot) || snapshot.starts_with(&g.host))
    });
    (host_owned && !writable_by_the_call).then(|| snapshot.to_path_buf())
}

/// What of its own installation a module may read: its folder, or only
/// itself when it lies bare in the shared `modules/` folder.
pub(crate) fn module_root(program: &Path) -> PathBuf {
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
    /// The landlock ruleset's stamp, when there is one ([`Self::stamp`]).
    stamp: Option<u64>,
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
                memory: None,
                spawner: None,
                network_namespace: None,
                host_key: 0,
                launch: None,
            },
            stamp: None,
            warning: Some(
                "confinement is off (config.toml): the module ran with the host's filesystem and network access".into(),
            ),
        }
    }

    /// Which landlock ruleset the child enters: two confinements with the
    /// same stamp grant the same inodes. A process started ahead of its call
    /// serves it only while a preparation now gives the stamp it was started
    /// with (`runner::native::process::confined_as_now`).
    pub fn stamp(&self) -> Option<u64> {
        self.stamp
    }

    /// The host warning this call carries, when it runs less than fully confined.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Whether a landlock domain will be applied.
    #[cfg(test)]
    pub(crate) fn is_landlocked(&self) -> bool {
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

    /// Whether the calling thread may start the child: a confinement that
    /// leaves parts to a spawner thread ([`spawner`]) only from that thread,
    /// since the child inherits them from it. Checked before the clone.
    pub(crate) fn may_start_here(&self) -> bool {
        self.0
            .spawner
            .is_none_or(|spawner| spawner.thread == spawner::current_thread())
    }

    /// What the child passes in `setpgid`'s third argument and `execve`'s
    /// fourth: the host's key, which the base filter a spawner thread
    /// carries asks of `setpgid`, and an exec-gated call's filter of
    /// `execve` (`seccomp::Layer::Base`); 0 without one.
    pub(crate) fn host_key(&self) -> u64 {
        self.0.host_key
    }

    /// What the child executes instead of the program it is started for:
    /// the file and its argument list (`launch`: an exec-gated entry whose
    /// `#!` line runs `env`).
    pub(crate) fn launch(&self) -> Option<(&Path, &[std::ffi::OsString])> {
        self.0
            .launch
            .as_deref()
            .map(|launch| (launch.program.as_path(), launch.argv.as_slice()))
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
    module_writes: &[PathBuf],
    network: NetworkAccess,
    mode: ConfinementMode,
) -> Result<Confinement, ConfineError> {
    if mode == ConfinementMode::Off {
        return Ok(Confinement::none());
    }
    let support = probe();
    let flavour = Flavour::of(network.is_used(), executables);
    // What every call of this flavour shares, carried by the calling
    // thread (a spawner thread, `spawner`); a thread of another flavour
    // carries nothing this call can use.
    #[cfg(target_os = "linux")]
    let carried = spawner::carried().filter(|c| c.flavour == flavour);
    #[cfg(target_os = "linux")]
    let egress = egress_for(network, carried);
    let mut unenforced = support.unenforced_for(flavour);
    #[cfg(target_os = "linux")]
    if let Err(reason) = &egress {
        unenforced.retain(|p| p.part != support::Part::Egress);
        unenforced.push(support::PartSupport {
            part: support::Part::Egress,
            label: support::Part::Egress.label(),
            enforced: false,
            why: reason.clone(),
            remedy: None,
        });
    }
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
    // An exec-gated entry whose `#!` line runs `env`: the host does `env`'s
    // part, so that the module's start is its one exec (`launch`).
    #[cfg(target_os = "linux")]
    let launch = launch::for_call(program, flavour)?;
    #[cfg(target_os = "linux")]
    let built = match support.abi {
        Some(_) => {
            let chain = interpreter::resolve_cached(program, executables);
            launch::within(launch.as_deref(), &chain)?;
            let mounts = crate::mount_table::current();
            if let Some(refusal) = executable_in_a_writable_root(program, &chain, grants, &mounts)
                .or_else(|| {
                    executable_where_modules_write(program, &chain, grants, module_writes, &mounts)
                })
            {
                return Err(refusal);
            }
            Some(ruleset::build(
                &path_rules_with(program, grants, &chain, network.is_used()),
                network,
                &support,
                system_watch(),
                &mounts,
            )?)
        }
        None => None,
    };
    #[cfg(target_os = "linux")]
    let (ruleset, stamp) = built.map(|built| (built.ruleset, built.stamp)).unzip();
    #[cfg(not(target_os = "linux"))]
    let stamp = {
        let _ = (program, grants, executables);
        None
    };
    // The thread's base lets only a `setpgid` with the host's key through,
    // and a module in a landlock domain cannot learn the key
    // (`seccomp::Layer::Base`): such a child installs no filter of its
    // own. Any other refuses the process-group calls outright after its
    // `setpgid`.
    #[cfg(target_os = "linux")]
    let layer = match carried {
        Some(c) if c.seccomp_base && ruleset.is_some() => None,
        Some(c) if c.seccomp_base => Some(seccomp::Layer::Group),
        _ => Some(seccomp::Layer::Full),
    };
    #[cfg(target_os = "linux")]
    let (seccomp, warning) = match seccomp::programs(flavour) {
        Ok(programs) => (layer.map(|layer| (programs, layer)), warning),
        Err(reason) => (None, Some(shortfall_at_preparation(mode, warning, reason)?)),
    };
    #[cfg(target_os = "linux")]
    let host_key = seccomp::host_key().unwrap_or(0);
    #[cfg(target_os = "linux")]
    // A root host without its pids cgroup is reported (and refused under
    // `required`) by `support` as the resource-limits part, like any part.
    let cgroup = pids::process_bound();
    #[cfg(target_os = "linux")]
    let capabilities = capabilities::prepare().map(|drop| match carried {
        Some(c) if c.bounding => drop.after_inherited_bounding(),
        _ => drop,
    });
    Ok(Confinement {
        #[cfg(target_os = "linux")]
        child: child::Prepared {
            ruleset,
            limits: Some(limits),
            capabilities,
            seccomp,
            cgroup,
            // Set by `Confinement::bound_memory` (`memory_cgroup`).
            memory: None,
            spawner: carried,
            network_namespace: egress.ok().flatten(),
            host_key,
            launch,
        },
        warning,
        stamp,
    })
}

/// The egress namespace a call's child joins itself (`Some`), or `None`
/// when it needs none (no network) or its spawner thread already sits in
/// it; `Err` when a call with network cannot be put there.
#[cfg(target_os = "linux")]
fn egress_for(
    network: NetworkAccess,
    carried: Option<spawner::Carried>,
) -> Result<Option<std::os::fd::RawFd>, String> {
    use std::os::fd::AsRawFd;
    if !network.is_used() || carried.is_some_and(|c| c.isolated) {
        return Ok(None);
    }
    let namespace = egress_namespace::namespace().map_err(str::to_owned)?;
    // A thread under the base seccomp layer cannot let its child `setns`
    // (the layer refuses namespace calls): a spawner thread that failed to
    // enter the namespace leaves its calls with network unconfined to
    // their egress.
    if carried.is_some_and(|c| c.seccomp_base) {
        return Err(
            "the host's spawner thread could not enter the egress network namespace".into(),
        );
    }
    Ok(Some(namespace.as_raw_fd()))
}

/// A part found unenforceable only while preparing the call (the seccomp
/// filters would not build): `required`
/// refuses the call, `best-effort` adds `reason` to its warning.
#[cfg(target_os = "linux")]
fn shortfall_at_preparation(
    mode: ConfinementMode,
    warning: Option<String>,
    reason: String,
) -> Result<String, ConfineError> {
    if mode == ConfinementMode::Required {
        return Err(ConfineError::Unconfined {
            reason,
            remedy: "run the host where this part can be enforced, or set confinement = \"best-effort\" in config.toml to run with a warning".into(),
        });
    }
    Ok(match warning {
        Some(w) => format!("{w}; {reason}"),
        None => reason,
    })
}

/// The `RLIMIT_NPROC` of a call: the kernel counts processes per user, so a
/// fixed small cap would fail on a busy desktop; the user's current count
/// plus [`PROCESS_MARGIN`] stops a fork bomb without breaking honest helpers.
/// The count is cached for a few seconds: scanning `/proc` on every call
/// would cost more than the spawn itself.
pub(crate) fn process_cap() -> u64 {
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
mod capabilities;
#[cfg(target_os = "linux")]
mod cgroup_path;
#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod errno;
#[cfg(target_os = "linux")]
mod launch;
#[cfg(target_os = "linux")]
mod memory_bound;
#[cfg(target_os = "linux")]
pub mod memory_cgroup;
#[cfg(target_os = "linux")]
mod path_watch;
#[cfg(target_os = "linux")]
pub mod pids;
#[cfg(target_os = "linux")]
mod ruleset;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
pub mod spawn;
#[cfg(target_os = "linux")]
mod spawner;
#[cfg(target_os = "linux")]
pub mod spawner_pool;

#[cfg(test)]
mod tests;
