//! What this machine can enforce on a native call, part by part.
//!
//! A call's confinement is not one thing: it is a list of [`Part`]s
//! (filesystem, TCP, UDP and raw sockets, UNIX sockets, ...), each held by
//! some kernel mechanism (landlock at some ABI, the seccomp filter, dropped
//! capabilities, resource limits, closed descriptors) that this machine may
//! or may not have. [`ConfinementSupport::parts`] says, for every part,
//! whether it is enforced here and why; `doctor` prints exactly that, and
//! [`ConfinementSupport::unenforced`] is what `confinement = "required"`
//! refuses on and `best-effort` warns about.
//!
//! Design decisions:
//!
//! - **Per part, not per ABI.** "Landlock ABI 7" says nothing to an operator
//!   about UDP. Each part names the mechanism that holds it, so a missing one
//!   is named as what a module can do ("UDP and raw sockets are not
//!   refused"), not as a version number.
//! - **Two mechanisms may hold one part.** TCP is held by landlock (ABI 4+)
//!   and by the seccomp filter (which refuses network sockets to a capability
//!   without `network`); a part is enforced when either holds it.
//! - **What a call implies depends on its effects.** A call without network
//!   implies that TCP is denied; a call with network implies instead that
//!   its only way out is the egress proxy ([`Part::Egress`]: landlock's TCP
//!   port rules and the egress network namespace). A call whose capability
//!   declares no spawns implies that it executes nothing after its start
//!   ([`Part::ExecBeyondSpawns`]); one that declares spawns gets landlock's
//!   execute rules on the granted binaries instead, part of
//!   [`Part::Filesystem`]. Every other part applies to every call.
//! - **Probed once.** The landlock ABI, seccomp availability and the host's
//!   uid do not change while the host runs.

use serde::Serialize;

use crate::flavour::Flavour;

/// One part of a native call's confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Reads, writes and execution outside the grants.
    Filesystem,
    /// TCP bind and connect (without `network`).
    Tcp,
    /// With `network`: TCP connect to the call's egress proxy only, from a
    /// network namespace where nothing else is reachable.
    Egress,
    /// UDP, raw IP, packet and netlink sockets.
    UdpAndRawSockets,
    /// Connecting to pathname UNIX sockets outside the grants.
    UnixSockets,
    /// Abstract UNIX sockets of processes outside the call.
    AbstractSockets,
    /// Creating device nodes.
    Devices,
    /// Creating or entering namespaces, `chroot`, `mount`.
    Namespaces,
    /// Leaving the process group the host kills at the end of the call.
    ProcessGroup,
    /// Linux capabilities (what root keeps).
    Capabilities,
    /// Processes, file size and core dumps.
    ResourceLimits,
    /// Descriptors the host inherited, other than stdin, stdout and stderr.
    InheritedDescriptors,
    /// Executing anything after the module's own start, for a capability
    /// that declares no spawns (the ELF loader run on a readable binary, a
    /// memfd, a shell, `execveat`).
    ExecBeyondSpawns,
}

impl Part {
    /// Every part, in the order `doctor` lists them.
    pub const ALL: [Part; 13] = [
        Part::Filesystem,
        Part::Tcp,
        Part::Egress,
        Part::UdpAndRawSockets,
        Part::UnixSockets,
        Part::AbstractSockets,
        Part::Devices,
        Part::Namespaces,
        Part::ProcessGroup,
        Part::Capabilities,
        Part::ResourceLimits,
        Part::InheritedDescriptors,
        Part::ExecBeyondSpawns,
    ];

    /// How a person calls this part.
    pub fn label(self) -> &'static str {
        match self {
            Part::Filesystem => "filesystem",
            Part::Tcp => "TCP",
            Part::Egress => "network egress",
            Part::UdpAndRawSockets => "UDP and raw sockets",
            Part::UnixSockets => "UNIX sockets",
            Part::AbstractSockets => "abstract sockets",
            Part::Devices => "devices",
            Part::Namespaces => "namespaces",
            Part::ProcessGroup => "process group",
            Part::Capabilities => "capabilities",
            Part::ResourceLimits => "resource limits",
            Part::InheritedDescriptors => "inherited descriptors",
            Part::ExecBeyondSpawns => "exec beyond declared spawns",
        }
    }

    /// The parts a call of `flavour` implies: all of them, but TCP (denied)
    /// only without network, [`Part::Egress`] only with it, and
    /// [`Part::ExecBeyondSpawns`] only when its capability declares no
    /// spawns.
    pub(crate) fn implied_by(flavour: Flavour) -> impl Iterator<Item = Part> {
        let excluded = if flavour.network {
            Part::Tcp
        } else {
            Part::Egress
        };
        Part::ALL.into_iter().filter(move |part| {
            *part != excluded && (flavour.exec_gated || *part != Part::ExecBeyondSpawns)
        })
    }
}

/// Whether one part is enforced on this machine, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartSupport {
    pub part: Part,
    /// [`Part::label`], for people.
    pub label: &'static str,
    pub enforced: bool,
    /// What holds it, or what is missing.
    pub why: String,
    /// What the operator can do when it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<&'static str>,
}

/// Filesystem confinement, by landlock ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Full,
    Partial,
    None,
}

/// The landlock ABI at which filesystem confinement counts as full.
pub(crate) const FULL_FS_ABI: u32 = 5;

const LANDLOCK_REMEDY: &str =
    "run on Linux 6.10 or newer with landlock in the lsm= boot list (landlock ABI 5+)";
const SECCOMP_REMEDY: &str =
    "run on x86_64 or aarch64, with a kernel built with seccomp filtering (CONFIG_SECCOMP_FILTER)";

const EGRESS_REMEDY: &str = "run the host as root (it makes a network namespace for calls with network), or set confinement = \"best-effort\" in config.toml to run them with a warning";

const MEMORY_REMEDY: &str = "run the host where it can create memory cgroups: as root with the cgroup v1 memory controller mounted, or in a cgroup v2 tree with memory delegated";

const PIDS_REMEDY: &str = "run the host as an unprivileged user, or where it can create a pids cgroup (cgroup v1 pids, or a cgroup v2 tree with pids delegated)";

/// What this machine can enforce on a native call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConfinementSupport {
    /// The kernel's landlock ABI version, `None` when landlock is unavailable.
    pub abi: Option<u32>,
    /// Whether the seccomp filter is applied: this architecture has one
    /// (x86_64, aarch64) and the kernel filters.
    pub seccomp: bool,
    /// Why there is no seccomp filter, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_missing: Option<&'static str>,
    /// Whether the host runs as root (uid 0).
    pub host_is_root: bool,
    /// Why a root host's modules have no pids cgroup (`RLIMIT_NPROC` does
    /// not bind uid 0, so without it their process count is unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_bound_missing: Option<&'static str>,
    /// Why the host makes no memory cgroup per call (then each process
    /// gets `RLIMIT_DATA`, a bound per process: `memory_cgroup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_cgroup_missing: Option<&'static str>,
    /// Whether the host drew its random key, which the child's own
    /// `setpgid` and `execve` carry past the seccomp filter
    /// (`seccomp::host_key`).
    pub host_key: bool,
}

impl ConfinementSupport {
    /// What a machine with landlock ABI `abi` and (or without) a seccomp
    /// filter enforces, the host running as root or not.
    pub fn new(abi: Option<u32>, seccomp: Result<(), &'static str>, host_is_root: bool) -> Self {
        ConfinementSupport {
            abi,
            seccomp: seccomp.is_ok(),
            seccomp_missing: seccomp.err(),
            host_is_root,
            process_bound_missing: None,
            memory_cgroup_missing: None,
            host_key: true,
        }
    }

    /// The same machine, where the host drew no random key (the kernel
    /// gave no random bytes): an exec-gated module's own exec could not be
    /// told from a later one.
    pub(crate) fn without_host_key(self) -> Self {
        ConfinementSupport {
            host_key: false,
            ..self
        }
    }

    /// The same machine, where the host can make no memory cgroup per
    /// call, for `reason`.
    pub(crate) fn without_memory_cgroup(self, reason: &'static str) -> Self {
        ConfinementSupport {
            memory_cgroup_missing: Some(reason),
            ..self
        }
    }

    /// The same machine, where a root host could not set up the pids
    /// cgroup its modules join, for `reason`.
    pub(crate) fn without_process_bound(self, reason: &'static str) -> Self {
        ConfinementSupport {
            process_bound_missing: Some(reason),
            ..self
        }
    }

    fn at_least(&self, version: u32) -> bool {
        self.abi.is_some_and(|a| a >= version)
    }

    /// Filesystem rules: full from ABI 5 (read, write, execute, rename across
    /// folders, truncate, device ioctl), partial on ABI 1 to 4.
    pub fn fs(&self) -> Enforcement {
        match self.abi {
            None => Enforcement::None,
            Some(a) if a >= FULL_FS_ABI => Enforcement::Full,
            Some(_) => Enforcement::Partial,
        }
    }

    /// TCP bind and connect can be denied by landlock (ABI 4).
    pub(crate) fn landlock_tcp(&self) -> bool {
        self.at_least(4)
    }

    /// Signals and abstract UNIX sockets are scoped to the domain (ABI 6).
    pub(crate) fn landlock_scopes(&self) -> bool {
        self.at_least(6)
    }

    /// Connecting to pathname UNIX sockets is confined by landlock (ABI 9).
    pub(crate) fn landlock_unix_sockets(&self) -> bool {
        self.at_least(9)
    }

    fn landlock_name(&self) -> String {
        match self.abi {
            Some(abi) => format!("landlock ABI {abi}"),
            None => "landlock (unavailable)".into(),
        }
    }

    /// What bounds a call's memory here, as `doctor` says it: a memory
    /// cgroup per call, or `RLIMIT_DATA` per process and why.
    pub fn memory_bound(&self) -> String {
        match self.memory_cgroup_missing {
            None => "memory: a cgroup per call, its processes together (memory and swap)".into(),
            Some(reason) => format!(
                "memory: RLIMIT_DATA per process only, weaker (a module's processes may each use the limit), since the host makes no memory cgroup per call: {reason}"
            ),
        }
    }

    fn seccomp_missing(&self) -> &'static str {
        self.seccomp_missing.unwrap_or("no seccomp filter")
    }

    /// Whether `part` is enforced here, and why.
    pub fn part(&self, part: Part) -> PartSupport {
        let landlock = self.landlock_name();
        let seccomp_missing = self.seccomp_missing();
        let linux = cfg!(target_os = "linux");
        let held = |why: String| (true, why, None);
        let (enforced, why, remedy): (bool, String, Option<&'static str>) = match part {
            Part::Filesystem => match (self.abi, self.fs()) {
                (Some(abi), Enforcement::Full) => held(format!(
                    "landlock ABI {abi}: reading, writing and executing outside the grants is denied"
                )),
                (Some(abi), _) => (
                    false,
                    format!(
                        "landlock ABI {abi} does not confine {} granted files (ABI {FULL_FS_ABI} does)",
                        if abi < 3 {
                            "truncation and device ioctl of"
                        } else {
                            "device ioctl of"
                        }
                    ),
                    Some(LANDLOCK_REMEDY),
                ),
                (None, _) => (
                    false,
                    "landlock is not available in this kernel: a module has the host's filesystem access".into(),
                    Some(LANDLOCK_REMEDY),
                ),
            },
            Part::Tcp => match (self.landlock_tcp(), self.seccomp) {
                (true, _) => held(format!("{landlock} denies TCP bind and connect")),
                (false, true) => held(
                    "the seccomp filter refuses AF_INET and AF_INET6 sockets".into(),
                ),
                (false, false) => (
                    false,
                    format!("{landlock} cannot deny TCP (ABI 4 can) and {seccomp_missing}"),
                    Some(LANDLOCK_REMEDY),
                ),
            },
            Part::Egress => match (self.landlock_tcp(), crate::egress_namespace::namespace()) {
                (true, Ok(_)) => held(format!(
                    "{landlock} allows TCP connect to the call's egress proxy port only, and the call's process sits in a network namespace of the host with nothing but its own loopback: every connection goes through the proxy, which checks each host and address against the call's grant"
                )),
                (false, _) => (
                    false,
                    format!(
                        "{landlock} cannot limit TCP connect to one port (ABI 4 can): a module that declares network could connect past the egress proxy"
                    ),
                    Some(LANDLOCK_REMEDY),
                ),
                (true, Err(reason)) => (
                    false,
                    format!(
                        "{reason}: a module that declares network shares the host's network, and could reach the operator's loopback services on the proxy's port number"
                    ),
                    Some(EGRESS_REMEDY),
                ),
            },
            Part::UdpAndRawSockets => if self.seccomp {
                held("the seccomp filter refuses AF_INET and AF_INET6 sockets but TCP streams, AF_PACKET and AF_NETLINK; a capability that declares network gets TCP stream sockets only (no UDP, so no DNS of its own)".into())
            } else {
                (
                    false,
                    format!("{landlock} confines TCP only and {seccomp_missing}"),
                    Some(SECCOMP_REMEDY),
                )
            },
            Part::UnixSockets => match (self.landlock_unix_sockets(), self.seccomp) {
                (true, _) => held(format!(
                    "{landlock} denies connecting to UNIX sockets outside the grants"
                )),
                (false, true) => held(
                    "the seccomp filter refuses AF_UNIX sockets (socketpair stays allowed)".into(),
                ),
                (false, false) => (
                    false,
                    format!(
                        "{landlock} does not confine pathname UNIX sockets (ABI 9 does) and {seccomp_missing}"
                    ),
                    Some(SECCOMP_REMEDY),
                ),
            },
            Part::AbstractSockets => match (self.landlock_scopes(), self.seccomp) {
                (true, _) => held(format!(
                    "{landlock} scopes abstract sockets and signals to the call"
                )),
                (false, true) => held("the seccomp filter refuses AF_UNIX sockets".into()),
                (false, false) => (
                    false,
                    format!("{landlock} does not scope abstract sockets (ABI 6 does) and {seccomp_missing}"),
                    Some(LANDLOCK_REMEDY),
                ),
            },
            Part::Devices => match (self.abi.is_some(), self.seccomp) {
                (true, true) => held(format!(
                    "{landlock} grants no right to make character or block devices, and the seccomp filter refuses mknod of devices"
                )),
                (true, false) => held(format!(
                    "{landlock} grants no right to make character or block devices"
                )),
                (false, true) => held("the seccomp filter refuses mknod of devices".into()),
                (false, false) => (
                    false,
                    format!("landlock is not available and {seccomp_missing}"),
                    Some(LANDLOCK_REMEDY),
                ),
            },
            Part::Namespaces => if self.seccomp {
                held("the seccomp filter refuses unshare, setns, clone with namespace flags, chroot, pivot_root and mount".into())
            } else {
                (false, seccomp_missing.into(), Some(SECCOMP_REMEDY))
            },
            Part::ProcessGroup => if self.seccomp {
                held("the seccomp filter refuses setsid and setpgid".into())
            } else {
                (false, seccomp_missing.into(), Some(SECCOMP_REMEDY))
            },
            Part::Capabilities if !linux => (false, "not Linux".into(), None),
            Part::Capabilities => held(if self.host_is_root {
                "the host runs as root: the module drops every capability (effective, permitted, inheritable, ambient and bounding) before exec, with no_new_privs and the securebits locked".into()
            } else {
                "the host does not run as root; the module drops every capability before exec".into()
            }),
            Part::ResourceLimits if !linux => (false, "not Linux".into(), None),
            Part::ResourceLimits => match (self.host_is_root, self.process_bound_missing) {
                (true, Some(reason)) => (
                    false,
                    format!(
                        "RLIMIT_NPROC does not bind uid 0 and no pids cgroup could be set up for the host's modules: {reason}"
                    ),
                    Some(PIDS_REMEDY),
                ),
                // A root host's modules are bounded only by their
                // cgroups: without a memory cgroup per call, RLIMIT_DATA
                // binds each of their (uncounted) processes alone.
                (true, None) if self.memory_cgroup_missing.is_some() => (
                    false,
                    format!("{}: a call's processes together are not bounded", self.memory_bound()),
                    Some(MEMORY_REMEDY),
                ),
                (true, None) => held(format!(
                    "{2}; a pids cgroup of the host's own (pids.max {0}; RLIMIT_NPROC does not bind uid 0), RLIMIT_FSIZE ({1} bytes), no core dumps",
                    super::limits::PROCESS_MARGIN,
                    super::limits::MAX_FILE_SIZE,
                    self.memory_bound(),
                )),
                (false, _) => held(format!(
                    "{2}; RLIMIT_NPROC (the user's count + {0}), RLIMIT_FSIZE ({1} bytes), no core dumps",
                    super::limits::PROCESS_MARGIN,
                    super::limits::MAX_FILE_SIZE,
                    self.memory_bound(),
                )),
            },
            Part::InheritedDescriptors if !linux => (false, "not Linux".into(), None),
            Part::InheritedDescriptors => held(
                "every descriptor but stdin, stdout and stderr is closed before exec".into(),
            ),
            Part::ExecBeyondSpawns => match (self.seccomp, self.host_key, self.abi.is_some()) {
                (true, true, true) => held(format!(
                    "for a capability that declares no spawns, the seccomp filter refuses execve and execveat but the module's own start, which carries the host's random key in an argument the kernel ignores, unreadable from the module's {landlock} domain: the kernel starts no program, ELF loader, memfd or shell after it (code the module maps into its own process runs as the module, confined as it is)"
                )),
                (false, _, _) => (false, seccomp_missing.into(), Some(SECCOMP_REMEDY)),
                (true, false, _) => (
                    false,
                    "the host drew no random key (the kernel gave no random bytes), so a module's own start cannot be told from a later exec".into(),
                    None,
                ),
                (true, true, false) => (
                    false,
                    "landlock is not available: a module outside a landlock domain could read the host's key from the host's memory (/proc/<pid>/mem) and exec past the filter".into(),
                    Some(LANDLOCK_REMEDY),
                ),
            },
        };
        PartSupport {
            part,
            label: part.label(),
            enforced,
            why,
            remedy,
        }
    }

    /// Every part, enforced or not.
    pub fn parts(&self) -> Vec<PartSupport> {
        Part::ALL.into_iter().map(|p| self.part(p)).collect()
    }

    /// The parts a call with (or without) `network` whose capability
    /// declares no spawns (the strictest call) implies that this machine
    /// cannot enforce; empty when the call is fully confined.
    pub fn unenforced(&self, network: bool) -> Vec<PartSupport> {
        self.unenforced_for(Flavour {
            network,
            exec_gated: true,
        })
    }

    /// The parts a call of `flavour` implies that this machine cannot
    /// enforce; empty when the call is fully confined.
    pub fn unenforced_for(&self, flavour: Flavour) -> Vec<PartSupport> {
        Part::implied_by(flavour)
            .map(|p| self.part(p))
            .filter(|p| !p.enforced)
            .collect()
    }

    /// One line for `doctor`.
    pub fn summary(&self) -> String {
        let parts = self.parts();
        let (enforced, not): (Vec<_>, Vec<_>) = parts.iter().partition(|p| p.enforced);
        let names = |ps: &[&PartSupport]| {
            ps.iter()
                .map(|p| p.part.label())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mechanisms = format!(
            "{}, {}",
            self.landlock_name(),
            if self.seccomp {
                "seccomp filter"
            } else {
                "no seccomp filter"
            }
        );
        if not.is_empty() {
            format!("{mechanisms}: every part enforced ({})", names(&enforced))
        } else {
            format!(
                "{mechanisms}: enforced: {}; NOT enforced: {}",
                names(&enforced),
                names(&not)
            )
        }
    }
}

/// A call's unenforced parts as one sentence (the reason of a refusal, or
/// the warning a best-effort call carries).
pub(crate) fn describe_unenforced(parts: &[PartSupport]) -> String {
    let list: Vec<String> = parts
        .iter()
        .map(|p| format!("{} ({})", p.part.label(), p.why))
        .collect();
    format!(
        "this machine cannot confine every part of this call: not enforced: {}",
        list.join("; ")
    )
}

/// What the operator can do about `parts` not being enforced.
pub fn remedy_for(parts: &[PartSupport]) -> String {
    let mut remedies: Vec<&str> = Vec::new();
    for remedy in parts.iter().filter_map(|p| p.remedy) {
        if !remedies.contains(&remedy) {
            remedies.push(remedy);
        }
    }
    remedies.push(
        "or set confinement = \"best-effort\" in config.toml to run such calls with a warning",
    );
    remedies.join("; ")
}

/// Ask the kernel (once per process) what it supports.
pub fn probe() -> ConfinementSupport {
    static SUPPORT: std::sync::OnceLock<ConfinementSupport> = std::sync::OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let root = host_is_root();
        let support = ConfinementSupport::new(kernel_abi(), seccomp_available(), root);
        let support = match memory_cgroup_missing() {
            Some(reason) => support.without_memory_cgroup(reason),
            None => support,
        };
        let support = match process_bound_missing(root) {
            Some(reason) => support.without_process_bound(reason),
            None => support,
        };
        if has_host_key() {
            support
        } else {
            support.without_host_key()
        }
    })
}

/// Why a root host's modules cannot join a pids cgroup; `None` for an
/// unprivileged host (RLIMIT_NPROC binds it) or when the cgroup is there.
#[cfg(target_os = "linux")]
fn process_bound_missing(root: bool) -> Option<&'static str> {
    if !root {
        return None;
    }
    super::pids::host_cgroup(super::limits::PROCESS_MARGIN).err()
}

#[cfg(not(target_os = "linux"))]
fn process_bound_missing(_root: bool) -> Option<&'static str> {
    None
}

/// Why the host makes no memory cgroup per call (`memory_cgroup`).
#[cfg(target_os = "linux")]
fn memory_cgroup_missing() -> Option<&'static str> {
    super::memory_cgroup::per_call_mechanism().err()
}

#[cfg(not(target_os = "linux"))]
fn memory_cgroup_missing() -> Option<&'static str> {
    Some("not Linux")
}

#[cfg(target_os = "linux")]
fn has_host_key() -> bool {
    super::seccomp::host_key().is_ok()
}

#[cfg(not(target_os = "linux"))]
fn has_host_key() -> bool {
    false
}

fn host_is_root() -> bool {
    rustix::process::geteuid().is_root()
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

/// Whether the seccomp filter can be applied: built for this architecture,
/// and the kernel filters (`PR_GET_SECCOMP` fails with `EINVAL` on a kernel
/// without seccomp).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn seccomp_available() -> Result<(), &'static str> {
    // SAFETY: PR_GET_SECCOMP takes no pointer and only returns the mode.
    #[allow(unsafe_code)]
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if mode < 0 {
        Err("this kernel has no seccomp filtering")
    } else {
        Ok(())
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn seccomp_available() -> Result<(), &'static str> {
    Err("the host has no seccomp filter for this architecture (only x86_64 and aarch64)")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: bool = true;

    #[test]
    fn this_machine_enforces_every_part() {
        // CI and the development machines have landlock and seccomp; a
        // machine without them must fail here, not pass quietly.
        let support = probe();
        assert!(support.abi.is_some(), "landlock is not available");
        assert!(support.seccomp, "{:?}", support.seccomp_missing);
        assert_eq!(support.unenforced(false), vec![]);
        assert_eq!(support.unenforced(true), vec![], "network egress");
        assert!(support.summary().contains("every part enforced"));
    }

    #[test]
    fn landlock_7_without_seccomp_leaves_udp_namespaces_and_groups_open() {
        let support = ConfinementSupport::new(Some(7), Err("no seccomp here"), ROOT);
        let missing: Vec<Part> = support.unenforced(false).iter().map(|p| p.part).collect();
        assert_eq!(
            missing,
            [
                Part::UdpAndRawSockets,
                Part::UnixSockets,
                Part::Namespaces,
                Part::ProcessGroup,
                Part::ExecBeyondSpawns,
            ]
        );
        let why = describe_unenforced(&support.unenforced(false));
        assert!(
            why.contains(
                "UDP and raw sockets (landlock ABI 7 confines TCP only and no seccomp here)"
            ),
            "{why}"
        );
        let remedy = remedy_for(&support.unenforced(false));
        assert!(
            remedy.contains("seccomp") && remedy.contains("best-effort"),
            "{remedy}"
        );
    }

    #[test]
    fn network_capabilities_do_not_need_tcp_denied() {
        let support = ConfinementSupport::new(Some(3), Ok(()), ROOT);
        assert!(support.part(Part::Tcp).enforced, "seccomp holds TCP");
        let old = ConfinementSupport::new(Some(3), Err("none"), ROOT);
        let without: Vec<Part> = old.unenforced(false).iter().map(|p| p.part).collect();
        let with: Vec<Part> = old.unenforced(true).iter().map(|p| p.part).collect();
        assert!(without.contains(&Part::Tcp) && !with.contains(&Part::Tcp));
        assert!(with.contains(&Part::Filesystem), "ABI 3 is partial");
    }

    /// Seccomp alone cannot make the proxy the only way out (it sees the
    /// socket, not the address): below landlock ABI 4 a call with network
    /// is not confined to its egress, and says what would fix it.
    #[test]
    fn network_calls_need_landlock_tcp_rules_for_their_egress() {
        let support = ConfinementSupport::new(Some(3), Ok(()), ROOT);
        assert!(
            support
                .unenforced(false)
                .iter()
                .all(|p| p.part != Part::Egress)
        );
        let egress = support
            .unenforced(true)
            .into_iter()
            .find(|p| p.part == Part::Egress)
            .expect("egress is not enforced on ABI 3");
        assert!(egress.why.contains("ABI 4"), "{}", egress.why);
        assert!(egress.remedy.is_some_and(|r| r.contains("6.10")));
    }

    #[test]
    fn no_landlock_leaves_the_filesystem_open() {
        let support = ConfinementSupport::new(None, Ok(()), !ROOT);
        let fs = support.part(Part::Filesystem);
        assert!(!fs.enforced && fs.why.contains("not available"));
        assert!(
            support.part(Part::Devices).enforced,
            "seccomp refuses mknod"
        );
        assert!(support.summary().contains("NOT enforced: filesystem"));
    }

    /// The exec part holds only with seccomp, the host's key and a
    /// landlock domain (outside one, a module could read the key from the
    /// host's memory), and only a call whose capability declares no spawns
    /// implies it: `required` refuses exactly those calls.
    #[test]
    fn exec_beyond_declared_spawns_needs_seccomp_the_key_and_landlock() {
        let gated = Flavour {
            network: false,
            exec_gated: true,
        };
        let spawning = Flavour {
            network: false,
            exec_gated: false,
        };
        let exec_unenforced = |support: &ConfinementSupport, flavour| {
            support
                .unenforced_for(flavour)
                .into_iter()
                .find(|p| p.part == Part::ExecBeyondSpawns)
        };
        let full = ConfinementSupport::new(Some(7), Ok(()), ROOT);
        assert!(full.part(Part::ExecBeyondSpawns).enforced);
        assert_eq!(exec_unenforced(&full, gated), None);

        let no_landlock = ConfinementSupport::new(None, Ok(()), ROOT);
        let part = exec_unenforced(&no_landlock, gated).expect("unenforced without landlock");
        assert!(part.why.contains("host's key"), "{}", part.why);
        assert_eq!(part.remedy, Some(LANDLOCK_REMEDY));
        assert_eq!(
            exec_unenforced(&no_landlock, spawning),
            None,
            "a spawning call"
        );

        let no_seccomp = ConfinementSupport::new(Some(7), Err("no seccomp here"), ROOT);
        let part = exec_unenforced(&no_seccomp, gated).expect("unenforced without seccomp");
        assert_eq!(part.remedy, Some(SECCOMP_REMEDY));

        let no_key = full.without_host_key();
        let part = exec_unenforced(&no_key, gated).expect("unenforced without the key");
        assert!(part.why.contains("random key"), "{}", part.why);
        assert_eq!(exec_unenforced(&no_key, spawning), None);
        assert!(
            !no_key.unenforced(false).is_empty(),
            "doctor's strictest call lists it"
        );
    }

    #[test]
    fn doctor_says_the_host_runs_as_root() {
        let root = ConfinementSupport::new(Some(7), Ok(()), ROOT);
        let caps = root.part(Part::Capabilities);
        assert!(
            caps.enforced
                && caps.why.contains("runs as root")
                && caps.why.contains("drops every capability")
        );
    }
}
