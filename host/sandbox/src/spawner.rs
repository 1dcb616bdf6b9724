//! Spawner threads: host threads that take, once, the part of the
//! confinement every child shares, so each child inherits it at its clone
//! instead of entering it between clone and exec.
//!
//! Measured per child (`cargo bench -p modhost --bench host`, Linux 6.18,
//! root host): installing the whole seccomp program cost about 75 us (the
//! kernel converts, compiles and emulates its ~190 instructions at every
//! install), dropping the bounding set one capability at a time (41
//! `prctl`, each a new set of credentials) about 28 us. Both are per thread
//! in Linux and copied to a child by `clone`: the bounding set, securebits
//! and ambient set (the thread's credentials), `no_new_privs`, the seccomp
//! filters. So a thread made for starting modules takes them once
//! ([`carry`]), and a child it starts only lowers its limits, joins the
//! pids cgroup, zeroes its capability sets and enters its landlock domain.
//! The thread's filter refuses `setpgid` too, but for a call carrying the
//! host's key, which the child makes for its own process group; a module
//! in a landlock domain cannot learn the key, and a child without one adds
//! the layer refusing the process-group calls outright (`seccomp::Layer`).
//! Measured the same way, that layer's install cost about 0.1 ms per child.
//! The base of a call whose capability declares no spawns refuses `execve`
//! and `execveat` too, but for the child's own exec, which carries the same
//! key: so the threads come in four flavours (`Flavour`: network, exec
//! gated), each with the base of its calls, and no child installs a layer
//! for the gate.
//!
//! Design decisions:
//!
//! - **Only on threads made for it.** A spawner thread runs nothing but
//!   the preparation and clone of module processes
//!   (`spawner_pool`): everything it would start, a thread or a
//!   program, would inherit the same. It keeps its effective and permitted
//!   capabilities (a root host opens granted paths of other users while
//!   building a ruleset), never execs, and creates no thread.
//! - **What a thread carries is recorded, per part.** [`carried`] says
//!   exactly what the calling thread took; a part it could not take (an
//!   architecture without a filter, a host without capabilities) is entered
//!   by the child as before. `confine::prepare` reads it and leaves out only
//!   what the thread carries.
//! - **Not the pids cgroup.** Under cgroup v1 the thread could join it and
//!   its children be born there, saving a write per child (about 8 us); but
//!   then, while a fork bomb of one call holds the cgroup full, the clone of
//!   every other call's module would fail. A child that joins after its
//!   clone is let in over the limit (the pids controller never refuses an
//!   attach), so a module that does not fork still starts.
//! - **A child is started from the thread that prepared it.** The
//!   preparation records the spawner thread's id; the spawn refuses to clone
//!   from any other thread (`ChildConfinement::may_start_here`), so a
//!   confinement prepared on a spawner thread cannot be started, short of its
//!   inherited parts, from an ordinary thread.

use std::cell::Cell;

use super::flavour::Flavour;
use super::seccomp::Layer;

/// What the calling thread carries for every child it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Carried {
    /// The spawner thread: a child relying on this must be cloned from it.
    pub(super) thread: libc::pid_t,
    /// The host's process: the parent of every child the thread starts.
    pub(super) host: libc::pid_t,
    /// Whose base filter the thread carries: calls with (or without)
    /// network, whose capability declares (or not) no spawns.
    pub(super) flavour: Flavour,
    /// Whether the thread sits in the egress network namespace (a thread
    /// for calls with network, on a host that could make one): its
    /// children are born there.
    pub(super) isolated: bool,
    /// `no_new_privs` and the base seccomp layer.
    pub(super) seccomp_base: bool,
    /// Securebits locked, bounding set empty, ambient set clear.
    pub(super) bounding: bool,
}

thread_local! {
    static CARRIED: Cell<Option<Carried>> = const { Cell::new(None) };
}

/// What the calling thread carries; `None` for an ordinary thread.
pub(super) fn carried() -> Option<Carried> {
    CARRIED.with(Cell::get)
}

/// The calling thread's id.
#[allow(unsafe_code)]
pub(crate) fn current_thread() -> libc::pid_t {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// Make the calling thread a spawner thread of the shared confinement of calls
/// of `flavour`: for network, in the egress network
/// namespace; securebits locked, bounding and ambient
/// sets emptied, `no_new_privs`, the base seccomp layer (with the exec gate
/// for an exec-gated flavour). Irreversible: only on a thread
/// made for starting modules (see the module documentation). A part that
/// fails is left to each child; [`carried`] says which were taken.
pub(crate) fn carry(flavour: Flavour) {
    if carried().is_some() {
        return;
    }
    // Everything a first call computes once per host, computed here while
    // the thread may still start threads. A version manager (a program) is
    // never asked from here: the modules that need its answer have it
    // asked before their start reaches this thread
    // (`runner::native::environment`).
    let support = super::probe();
    crate::environment::never_ask_managers_on_this_thread();
    // First: joining a namespace needs the capabilities dropped below, and
    // the base seccomp layer refuses it.
    let isolated = flavour.network && crate::egress_namespace::enter();
    // The cgroup is created here too, not joined (see the module documentation).
    let _ = super::pids::process_bound();
    let bounding =
        super::capabilities::prepare().is_some_and(|drop| drop.lock_and_empty_bounding().is_ok());
    let seccomp_base = support.seccomp && no_new_privs() && install_base(flavour);
    CARRIED.with(|cell| {
        cell.set(Some(Carried {
            thread: current_thread(),
            host: libc::pid_t::try_from(std::process::id()).unwrap_or(0),
            flavour,
            isolated,
            seccomp_base,
            bounding,
        }));
    });
}

#[allow(unsafe_code)]
fn no_new_privs() -> bool {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 }
}

fn install_base(flavour: Flavour) -> bool {
    super::seccomp::programs(flavour).is_ok_and(|programs| programs.install(Layer::Base).is_ok())
}
