//! Starting a native module's process: the spec it is started from, the
//! clone and exec ([`spawn`]), and the started process with its pipes,
//! reaper and stderr drain ([`attach`]). Both a cold call (`native.rs`) and
//! the warm pool (`warm.rs`) start processes here, so it sits below both.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;

use super::group::Group;
use crate::{Call, CallNetwork, CallSecret, RunError, STDERR_TAIL_BYTES};
use modhost_sandbox::Grant;
use modhost_sandbox::memory_cgroup::MemoryBound;
use modhost_sandbox::{self as confine, ConfineError, ConfinementMode, NetworkAccess, interpreter};
use modhost_sandbox::{environment, spawn, spawner_pool};

/// Delivers the exit status once the waiter task has reaped the child.
pub(super) type ExitReceiver = tokio::sync::oneshot::Receiver<std::io::Result<ExitStatus>>;

/// What a native process is started with: everything about a call but its
/// request. Processes started from equal specs are interchangeable, which is
/// what lets a [`warm`](super::warm) process stand in for a cold one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpawnSpec {
    /// The module's executable.
    pub program: PathBuf,
    /// The filesystem roots the process may reach.
    pub grants: Vec<Grant>,
    /// The binaries it may execute besides its own chain.
    pub executables: Vec<PathBuf>,
    /// The folders the module may write that are not roots (its state).
    pub module_writes: Vec<PathBuf>,
    /// The egress proxy it may use, if any.
    pub network: Option<CallNetwork>,
    /// How strictly it is confined.
    pub confinement: ConfinementMode,
    /// The memory its processes may use together
    /// ([`crate::CallLimits::native_memory_bytes`]): each process started
    /// from the spec gets a memory cgroup of its own with this limit.
    pub memory_bytes: u64,
}

impl SpawnSpec {
    pub fn of(program: &Path, call: &Call<'_>) -> SpawnSpec {
        SpawnSpec {
            program: program.to_path_buf(),
            grants: call.grants.to_vec(),
            executables: call.executables.to_vec(),
            module_writes: call.module_writes.to_vec(),
            network: call.network.cloned(),
            confinement: call.limits.confinement,
            memory_bytes: call.limits.native_memory_bytes,
        }
    }

    /// The confinement a process started from this spec enters.
    fn prepare_confinement(&self) -> Result<confine::Confinement, ConfineError> {
        confine::prepare(
            &self.program,
            &self.grants,
            &self.executables,
            &self.module_writes,
            match &self.network {
                Some(network) => NetworkAccess::Proxy {
                    port: network.proxy_port,
                },
                None => NetworkAccess::None,
            },
            self.confinement,
        )
    }
}

/// A module process, started and waiting for its request on stdin.
///
/// Dropping it kills its process group (the waiter task reaps it).
#[derive(Debug)]
pub struct Started {
    pub(super) guard: Group,
    pub(super) exit: ExitReceiver,
    pub(super) stdin: pipe::Sender,
    pub(super) stdout: pipe::Receiver,
    pub(super) stderr: tokio::task::JoinHandle<()>,
    pub(super) tail: Arc<Mutex<TailBuffer>>,
    pub(super) host_warnings: Vec<String>,
    /// The stamp of the landlock ruleset it was started in
    /// (`Confinement::stamp`).
    pub(super) stamp: Option<u64>,
    /// Its memory bound, held as long as the process may live: its memory
    /// cgroup goes back to the host's pool only when this is dropped.
    pub(super) memory: Option<MemoryBound>,
}

impl Started {
    /// Whether the process is still running (it may have died while waiting).
    /// Asked of its pidfd, not only of its waiter task: the task may not
    /// have run since the exit (the runtime is busy with this very call).
    pub(super) fn is_alive(&mut self) -> bool {
        matches!(
            self.exit.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        ) && !self.guard.leader().has_exited()
    }

    /// Kill the group and wait (briefly) until the leader is reaped.
    pub(super) async fn stop(mut self) {
        self.guard.kill();
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.exit).await;
    }
}

/// Start the process for `spec`: spawn and attach. The spawn blocks
/// (landlock ruleset, clone, exec, its retries), so it runs off the runtime
/// ([`spawn_off_runtime`]) and the runtime thread that answers `ping` and
/// cancellations never waits for it.
///
/// `secrets`, the call's, are variables of this one process's environment.
/// Only a call starts this way; a process started ahead ([`super::warm`])
/// starts through [`spawn_off_runtime`], which gives none, so no secret
/// ever sits in a process no call has claimed yet.
pub(super) async fn start(spec: &SpawnSpec, secrets: &[CallSecret]) -> Result<Started, RunError> {
    attach(spawn_off_runtime_with_secrets(spec.clone(), secrets.to_vec()).await?)
}

/// [`spawn`] off the runtime: a confined start on a spawner thread
/// ([`spawner_pool`]: each child inherits the confinement the thread carries),
/// an unconfined one on the blocking pool. A call dropped meanwhile still
/// gets its child killed and reaped, whenever it drops: before the start
/// ran (the start is skipped), while it runs (the thread that started the
/// child kills and reaps it), or after the child was handed over and not
/// yet taken ([`PendingStart`]).
pub(super) async fn spawn_off_runtime(spec: SpawnSpec) -> Result<Spawned, RunError> {
    spawn_off_runtime_with_secrets(spec, Vec::new()).await
}

/// [`spawn_off_runtime`], the process given `secrets` as variables.
async fn spawn_off_runtime_with_secrets(
    spec: SpawnSpec,
    secrets: Vec<CallSecret>,
) -> Result<Spawned, RunError> {
    let failed = |e: &dyn std::fmt::Display| RunError::Spawn {
        message: format!("the start of the module failed: {e}"),
    };
    let confinement = spec.confinement;
    // The spawner threads whose shared confinement fits the call: its
    // network, and whether its capability declares no spawns (exec gated).
    let flavour = confine::Flavour::of(spec.network.is_some(), &spec.executables);
    // A module that looks commands up in PATH gets it with version-manager
    // shims resolved; a spawner thread never asks a manager, so while PATH
    // is unresolved the need is decided here and the answer had first, off
    // the runtime (once per host process). Once it is resolved, the thread
    // that starts the module decides.
    let resolved_path = (!environment::module_path_is_resolved())
        .then(|| interpreter::path_needs_resolving(&spec.program, !spec.executables.is_empty()));
    if resolved_path == Some(true) {
        let _ = tokio::task::spawn_blocking(environment::module_path).await;
    }
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let start = move || {
        // Its caller went away while it queued: nothing to start.
        if sender.is_closed() {
            return;
        }
        // Its caller went away while it ran: nobody will attach the child.
        if let Err(orphan) = sender.send(spawn_with_secrets(&spec, resolved_path, &secrets)) {
            kill_orphan(orphan);
        }
    };
    if confinement == ConfinementMode::Off {
        tokio::task::spawn_blocking(start);
    } else {
        spawner_pool::run(flavour, start).map_err(|e| failed(&e))?;
    }
    let mut pending = PendingStart(Some(receiver));
    let receiver = pending.0.as_mut().expect("taken only on drop");
    let spawned = receiver.await.map_err(|e| failed(&e))?;
    pending.0 = None;
    spawned
}

/// The caller's end of a start handed off the runtime. Dropped before the
/// child was taken (the call cancelled, or past its deadline): a start not
/// yet done is told so (its thread kills and reaps what it starts), and a
/// child already handed over is killed and reaped here, off the runtime
/// when there is one (the reaping waits for the kernel).
struct PendingStart(Option<tokio::sync::oneshot::Receiver<Result<Spawned, RunError>>>);

impl Drop for PendingStart {
    fn drop(&mut self) {
        let Some(mut receiver) = self.0.take() else {
            return;
        };
        receiver.close();
        let Ok(Ok(spawned)) = receiver.try_recv() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || kill_orphan(Ok(spawned)));
            }
            Err(_) => kill_orphan(Ok(spawned)),
        }
    }
}

/// A child whose caller went away before it was started: killed and
/// reaped at once (nobody will attach its waiter).
fn kill_orphan(spawned: Result<Spawned, RunError>) {
    if let Ok(spawned) = spawned {
        let _ = spawned.guard.leader().kill_and_reap();
    }
}

/// A child that has exec'd, its group already guarded.
#[derive(Debug)]
pub struct Spawned {
    /// The host's ends of its standard streams.
    pub child: Streams,
    /// Its process group, killed when dropped.
    pub guard: Group,
    /// What the host has to say about its confinement (a part this machine
    /// cannot enforce).
    pub host_warnings: Vec<String>,
    pub(super) stamp: Option<u64>,
    /// Its memory bound (see [`Started`]).
    pub(super) memory: Option<MemoryBound>,
}

/// Start the process for `spec` on the calling thread, which blocks until
/// the exec succeeded or failed; no runtime needed. The one start of a
/// native module outside a call: the conformance battery starts every
/// process with it, exactly as a call's start (`spawn_off_runtime`) does.
pub fn start_blocking(spec: &SpawnSpec) -> Result<Spawned, RunError> {
    spawn(spec, None)
}

/// Fork and exec the module, confined (landlock and rlimits, entered by the
/// child just before exec; refused under `confinement = "required"` when the
/// kernel falls short). Blocks until the exec succeeded or failed, and needs
/// no runtime, so a background start can run it on the blocking pool.
/// `resolved_path`: whether the module gets PATH with shims resolved, when
/// the caller decided it already.
pub(super) fn spawn(spec: &SpawnSpec, resolved_path: Option<bool>) -> Result<Spawned, RunError> {
    spawn_with_secrets(spec, resolved_path, &[])
}

/// [`spawn`], the module's environment holding `secrets` too.
fn spawn_with_secrets(
    spec: &SpawnSpec,
    resolved_path: Option<bool>,
    secrets: &[CallSecret],
) -> Result<Spawned, RunError> {
    let program = &spec.program;
    // The memory bound is taken here, not in `prepare_confinement`: that
    // one also runs to compare a warm process with a start now, which must
    // not take a cgroup.
    let confinement = spec
        .prepare_confinement()
        .and_then(|c| c.bound_memory(spec.memory_bytes, spec.confinement))
        .map_err(|e| match e {
            ConfineError::Unconfined { reason, remedy } => RunError::Unconfined { reason, remedy },
            other => RunError::Spawn {
                message: format!("{}: {other}", program.display()),
            },
        })?;
    let host_warnings: Vec<String> = confinement
        .warning()
        .map(str::to_owned)
        .into_iter()
        .collect();
    let stamp = confinement.stamp();
    let memory = confinement.memory_bound();
    let resolved_path = resolved_path.unwrap_or_else(|| {
        interpreter::path_needs_resolving(program, !spec.executables.is_empty())
    });
    let child = spawn::spawn(
        program,
        environment::module_environment(resolved_path)
            .chain(spec.network.iter().flat_map(CallNetwork::environment))
            .chain(secrets.iter().map(CallSecret::variable)),
        program.parent().filter(|d| !d.as_os_str().is_empty()),
        confinement.into_child().as_ref(),
    )
    .map_err(|e| RunError::Spawn {
        message: format!("{}: {e}", program.display()),
    })?;
    // The child is its own group leader, so its pid is the group id. From
    // here on every exit path, cancellation included, kills the group.
    let Some(pgid) = Pid::from_raw(child.pid) else {
        return Err(RunError::Spawn {
            message: format!("{}: the spawn returned no pid", program.display()),
        });
    };
    let spawn::Child {
        pid: _,
        pidfd,
        stdin,
        stdout,
        stderr,
    } = child;
    let guard = Group::new(pgid, pidfd);
    Ok(Spawned {
        child: Streams {
            stdin,
            stdout,
            stderr,
        },
        guard,
        host_warnings,
        stamp,
        memory,
    })
}

/// The host's ends of a spawned child's standard streams (its pid and
/// pidfd went to its [`Group`]).
#[derive(Debug)]
pub struct Streams {
    /// The module's stdin.
    pub stdin: std::os::fd::OwnedFd,
    /// The module's stdout.
    pub stdout: std::os::fd::OwnedFd,
    /// The module's stderr.
    pub stderr: std::os::fd::OwnedFd,
}

/// Hand a spawned child's pipes to the runtime and start its waiter and
/// stderr drain.
pub(super) fn attach(spawned: Spawned) -> Result<Started, RunError> {
    let Spawned {
        child,
        guard,
        host_warnings,
        stamp,
        memory,
    } = spawned;
    let Streams {
        stdin,
        stdout,
        stderr,
    } = child;
    // A waiter task reaps the child whenever it dies, even when the call is
    // dropped: no zombie survives a cancelled call. It kills the group
    // between the exit and the reap, while the pgid is still the leader's.
    // Made here, not in the task: the wait guards the child from now on,
    // even if the task never runs.
    let (exit_tx, exit) = tokio::sync::oneshot::channel();
    let reaping = guard.leader().reap_when_exited();
    tokio::spawn(async move {
        let _ = exit_tx.send(reaping.await);
    });
    let pipe_error = |e: std::io::Error| RunError::Spawn {
        message: format!("the module's pipes could not be set up: {e}"),
    };
    // The ends are the host's, from `spawn`'s own pipes: only the
    // non-blocking flag is missing (tokio's checked conversion would look
    // that up, and `fstat` each end, on every call).
    let stdin = pipe::Sender::from_owned_fd_unchecked(non_blocking(stdin).map_err(pipe_error)?)
        .map_err(pipe_error)?;
    let stdout = pipe::Receiver::from_owned_fd_unchecked(non_blocking(stdout).map_err(pipe_error)?)
        .map_err(pipe_error)?;
    let stderr = pipe::Receiver::from_owned_fd_unchecked(non_blocking(stderr).map_err(pipe_error)?)
        .map_err(pipe_error)?;
    let tail = Arc::new(Mutex::new(TailBuffer::default()));
    let stderr = tokio::spawn(drain_stderr(stderr, Arc::clone(&tail)));
    Ok(Started {
        guard,
        exit,
        stdin,
        stdout,
        stderr,
        tail,
        host_warnings,
        stamp,
        memory,
    })
}

/// Whether `started`, a process started ahead for `spec`, is confined as a
/// start now would be: the preparation gives the ruleset it entered (no
/// granted or system path names another inode since, say) and refuses
/// nothing. A landlock domain is fixed at the process's exec; this is what
/// keeps a process started before a folder was moved away from reaching
/// it.
pub(super) fn confined_as_now(spec: &SpawnSpec, started: &Started) -> bool {
    spec.prepare_confinement()
        .is_ok_and(|now| now.stamp() == started.stamp)
}

/// `fd`, one end of a pipe `spawn` made (no status flag set), made
/// non-blocking.
fn non_blocking(fd: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    rustix::fs::fcntl_setfl(&fd, rustix::fs::OFlags::NONBLOCK)?;
    Ok(fd)
}

/// The last [`STDERR_TAIL_BYTES`] of a stream.
#[derive(Debug, Default)]
pub(super) struct TailBuffer {
    pub(super) bytes: Vec<u8>,
}

impl TailBuffer {
    pub(super) fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        // Trim in batches so a flood costs amortized O(1) per byte.
        if self.bytes.len() > 2 * STDERR_TAIL_BYTES {
            let cut = self.bytes.len() - STDERR_TAIL_BYTES;
            self.bytes.drain(..cut);
        }
    }

    pub(super) fn text(&self) -> String {
        let start = self.bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&self.bytes[start..]).into_owned()
    }
}

pub(super) async fn drain_stderr(mut stderr: impl AsyncRead + Unpin, tail: Arc<Mutex<TailBuffer>>) {
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut tail) = tail.lock() {
                    tail.push(&chunk[..n]);
                }
            }
        }
    }
}
