//! The [`ModuleCaller`]s: how `modhost conformance` reaches a live module
//! for the conformance battery, a native executable ([`NativeCaller`]) or a
//! WebAssembly component ([`WasmCaller`]).
//!
//! Natively, each call is one fresh process, started exactly as the host
//! starts a module (`runner::native::spawn`): a cleared environment (only the
//! variables the native runner also passes),
//! the request bytes on stdin, stdin closed, stdout and a bounded stderr tail
//! collected until the process exits or the timeout passes, then the whole
//! process group killed. The module runs confined like any call
//! ([`crate::confine`]) to the roots it is granted.
//!
//! Design decisions:
//!
//! - **Synchronous, on plain threads.** [`ModuleCaller::call`] is a blocking
//!   trait method; the CLI runs the battery on a blocking thread. Pipes are
//!   pumped by their own threads so a module that never reads stdin, or
//!   floods stdout, cannot deadlock the caller.
//! - **Grants fit for examples, and nothing real.** A declared `state` or
//!   `artifacts` root points into a scratch directory the caller owns (never
//!   the operator's real state), the `workspace` is granted read-only,
//!   source roots and binaries only when the operator configured them.
//!   Examples that need more fail with the battery's own remedy.
//! - **Components run as the host runs them, minus the protocol.** Each call
//!   is a fresh instance with the raw stdin bytes (the battery sends
//!   malformed lines and empty stdin on purpose), its grants preopened at
//!   `/roots/<name>`, no network and no binaries; stdout comes back unparsed
//!   ([`crate::runner::wasm::WasmEngine::run_raw`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use modconform::{CallerError, Grants, ModuleCaller, RawCall};
use modproto::{Access, Capability, Descriptor, GrantedRoot, RootKind};
use rustix::process::Pid;

use crate::confine::{self, ConfinementMode};
use crate::runner::native::group::Group;
use crate::runner::native::{environment, spawn};
#[cfg(feature = "wasm")]
use crate::runner::wasm::{LoadedComponent, WasmEngine, WasmError};
use crate::runner::{Grant, STDERR_TAIL_BYTES, Transport};

/// The most stdout one conformance call may produce before the rest is
/// discarded (the battery then sees a truncated answer).
const MAX_STDOUT_BYTES: usize = 8 << 20;

/// How long pipe readers may take after the process group was killed.
const PIPE_DRAIN: Duration = Duration::from_millis(500);

/// Where a conformance run points the roots a module declares.
#[derive(Debug, Clone, Copy)]
pub struct ConformanceRoots<'a> {
    /// A scratch directory: `state/` and `artifacts/` are made in it.
    pub scratch: &'a Path,
    /// Granted read-only as any `workspace` root.
    pub workspace: &'a Path,
    /// Operator-configured source roots (read-only), by name.
    pub source_roots: &'a BTreeMap<String, PathBuf>,
    /// Operator-configured binaries, by name.
    pub binaries: &'a BTreeMap<String, PathBuf>,
}

/// Runs a native module executable, one process per call.
#[derive(Debug, Clone)]
pub struct NativeCaller {
    program: PathBuf,
    confinement: ConfinementMode,
    /// What the process is confined to.
    grants: Vec<Grant>,
    /// The same grants, as the invoke request states them.
    request: Grants,
    network: bool,
}

impl NativeCaller {
    /// A caller of the executable at `program` that grants nothing yet.
    pub fn new(program: impl Into<PathBuf>, confinement: ConfinementMode) -> Self {
        NativeCaller {
            program: program.into(),
            confinement,
            grants: Vec::new(),
            request: Grants::default(),
            network: false,
        }
    }

    /// Grant what `descriptor` declares, pointed at `roots`. Creates the
    /// scratch `state/` and `artifacts/` directories.
    pub fn grant(
        &mut self,
        descriptor: &Descriptor,
        roots: ConformanceRoots<'_>,
    ) -> std::io::Result<()> {
        let granted = scratch_grants(descriptor, roots, Transport::Native)?;
        self.grants = granted.grants;
        self.request = granted.request;
        self.network = granted.network;
        Ok(())
    }

    /// Ask the module to describe itself (see [`describe`]).
    pub fn describe(&mut self, timeout: Duration) -> Result<Descriptor, String> {
        describe(self, timeout)
    }
}

impl ModuleCaller for NativeCaller {
    fn call(&mut self, stdin: &[u8], timeout: Duration) -> Result<RawCall, CallerError> {
        let started = Instant::now();
        let executables: Vec<PathBuf> = self.request.binaries.values().map(PathBuf::from).collect();
        let confinement = confine::prepare(
            &self.program,
            &self.grants,
            &executables,
            self.network,
            self.confinement,
        )
        .map_err(|e| CallerError::Start(format!("{}: {e}", self.program.display())))?;
        // Started exactly as the native runner starts a module.
        let child = spawn::spawn(
            &self.program,
            environment::module_environment(),
            self.program.parent().filter(|d| !d.as_os_str().is_empty()),
            confinement.into_child().as_ref(),
        )
        .map_err(|e| CallerError::Start(format!("{}: {e}", self.program.display())))?;
        // Its own group leader: the pid is the group id. The group is only
        // killed while the leader is unreaped (`runner::native::group`).
        let pgid = Pid::from_raw(child.pid)
            .ok_or_else(|| CallerError::Start("the spawn returned no pid".into()))?;
        let group = Group::new(pgid, child.pidfd);
        let leader = group.leader();

        let input = stdin.to_vec();
        let stdin_pipe = std::fs::File::from(child.stdin);
        std::thread::spawn(move || {
            let mut pipe = stdin_pipe;
            // A module may exit without reading; a broken pipe is fine.
            let _ = pipe.write_all(&input);
            // Dropping the pipe closes the module's stdin.
        });
        let stdout = pump(std::fs::File::from(child.stdout), MAX_STDOUT_BYTES, false);
        let stderr = pump(std::fs::File::from(child.stderr), STDERR_TAIL_BYTES, true);

        let remaining = timeout.saturating_sub(started.elapsed());
        let exited = match leader.wait_exit(Some(remaining)) {
            Ok(exited) => exited,
            Err(e) => {
                // Dropping `group` kills it; the leader may stay a zombie.
                return Err(CallerError::Io(format!("waiting for the module: {e}")));
            }
        };
        if !exited {
            // Timed out: the leader dies with its group, then is reaped.
            group.kill();
            let _ = leader.wait_exit(None);
        }
        // Whatever happened, nothing the module started outlives the call:
        // the group is killed (again) while the leader is still unreaped.
        let reaped = leader.kill_and_reap();
        let status = match (exited, reaped) {
            (true, Ok(status)) => status.to_string(),
            (true, Err(e)) => format!("exit status unknown ({e})"),
            (false, Ok(status)) => format!("killed after {timeout:?} ({status})"),
            (false, Err(e)) => format!("killed after {timeout:?} (not reaped: {e})"),
        };
        Ok(RawCall {
            stdout: stdout.recv_timeout(PIPE_DRAIN).unwrap_or_default(),
            stderr: stderr.recv_timeout(PIPE_DRAIN).unwrap_or_default(),
            exited,
            exit_status: Some(status),
            elapsed: started.elapsed(),
        })
    }

    fn grants(&mut self, _capability: &Capability) -> Grants {
        self.request.clone()
    }
}

/// Runs a WebAssembly component, one fresh instance per call.
#[cfg(feature = "wasm")]
#[derive(Debug)]
pub struct WasmCaller {
    engine: WasmEngine,
    component: std::sync::Arc<LoadedComponent>,
    /// The async runtime the calls are driven on; [`ModuleCaller::call`] is
    /// made from a blocking thread of it.
    runtime: tokio::runtime::Handle,
    /// What the instance gets preopened.
    grants: Vec<Grant>,
    /// The same grants, as the invoke request states them.
    request: Grants,
}

#[cfg(feature = "wasm")]
impl WasmCaller {
    /// A caller of the component at `path` that grants nothing yet. Loads
    /// (compiles) the component, so call it from a blocking thread; each
    /// call is driven on `runtime`.
    pub fn new(
        engine: &WasmEngine,
        path: &Path,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, WasmError> {
        Ok(WasmCaller {
            engine: engine.clone(),
            component: engine.load(path)?,
            runtime,
            grants: Vec::new(),
            request: Grants::default(),
        })
    }

    /// Grant what `descriptor` declares, pointed at `roots`, preopened at
    /// `/roots/<name>`. Creates the scratch `state/` and `artifacts/`
    /// directories.
    pub fn grant(
        &mut self,
        descriptor: &Descriptor,
        roots: ConformanceRoots<'_>,
    ) -> std::io::Result<()> {
        let granted = scratch_grants(descriptor, roots, Transport::Component)?;
        self.grants = granted.grants;
        self.request = granted.request;
        Ok(())
    }
}

#[cfg(feature = "wasm")]
impl ModuleCaller for WasmCaller {
    fn call(&mut self, stdin: &[u8], timeout: Duration) -> Result<RawCall, CallerError> {
        let started = Instant::now();
        let run = self.engine.run_raw(
            &self.component,
            stdin,
            &self.grants,
            timeout,
            MAX_STDOUT_BYTES as u64,
        );
        let raw = self
            .runtime
            .block_on(run)
            .map_err(|e| CallerError::Start(e.to_string()))?;
        Ok(RawCall {
            stdout: raw.stdout,
            stderr: raw.stderr_tail.into_bytes(),
            exited: raw.finished,
            exit_status: Some(raw.status),
            elapsed: started.elapsed(),
        })
    }

    fn grants(&mut self, _capability: &Capability) -> Grants {
        self.request.clone()
    }
}

/// Ask the module behind `caller` to describe itself: the parsed descriptor,
/// or why not.
pub fn describe(caller: &mut dyn ModuleCaller, timeout: Duration) -> Result<Descriptor, String> {
    let request = modproto::Request::new(1, modproto::METHOD_DESCRIBE, None);
    let mut line = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let raw = caller.call(&line, timeout).map_err(|e| e.to_string())?;
    if !raw.exited && raw.stdout.is_empty() {
        return Err(format!("describe did not answer within {timeout:?}"));
    }
    let stdout = String::from_utf8_lossy(&raw.stdout);
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        match modproto::Message::parse(line) {
            Ok(modproto::Message::Response(response)) => {
                return match response.outcome {
                    Ok(value) => serde_json::from_value(value)
                        .map_err(|e| format!("the descriptor does not parse: {e}")),
                    Err(error) => Err(format!("describe was answered with an error: {error}")),
                };
            }
            Ok(_) => continue,
            Err(e) => {
                return Err(format!(
                    "describe answered a line that is not JSON-RPC: {e}"
                ));
            }
        }
    }
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let tail = stderr.trim().lines().next_back().unwrap_or_default();
    Err(format!(
        "describe gave no response ({}){}",
        raw.exit_status.as_deref().unwrap_or("no exit status"),
        if tail.is_empty() {
            String::new()
        } else {
            format!("; stderr: {tail}")
        }
    ))
}

/// The grants of one conformance run: what the module is confined to, the
/// same roots as the invoke request states them (guest paths), and whether
/// it may use the network.
struct ScratchGrants {
    grants: Vec<Grant>,
    request: Grants,
    network: bool,
}

/// Grant what `descriptor` declares, pointed at `roots`, as `transport` sees
/// it. Creates the scratch `state/` and `artifacts/` directories. Binaries
/// are granted to native modules only: a component cannot run one.
fn scratch_grants(
    descriptor: &Descriptor,
    roots: ConformanceRoots<'_>,
    transport: Transport,
) -> std::io::Result<ScratchGrants> {
    let mut grants = Vec::new();
    let mut request = Grants::default();
    for decl in &descriptor.roots {
        let (path, access) = match decl.kind {
            RootKind::State | RootKind::Artifacts => {
                let dir = roots.scratch.join(decl.kind.as_str()).join(&decl.name);
                std::fs::create_dir_all(&dir)?;
                (dir, decl.effective_access())
            }
            RootKind::Workspace => (roots.workspace.to_path_buf(), Access::Read),
            RootKind::Source => match roots.source_roots.get(&decl.name) {
                Some(path) => (path.clone(), Access::Read),
                None => continue,
            },
        };
        let guest = transport.guest_path(&decl.name, &path);
        request.roots.insert(
            decl.name.clone(),
            GrantedRoot {
                path: guest.clone(),
                kind: decl.kind,
                access,
            },
        );
        grants.push(Grant {
            name: decl.name.clone(),
            guest,
            host: path,
            access,
        });
    }
    for binary in descriptor
        .binaries
        .iter()
        .filter(|_| transport == Transport::Native)
    {
        if let Some(path) = roots.binaries.get(&binary.name) {
            request
                .binaries
                .insert(binary.name.clone(), path.to_string_lossy().into_owned());
        }
    }
    Ok(ScratchGrants {
        grants,
        request,
        network: descriptor.capabilities.iter().any(|c| c.effects.network),
    })
}

/// Read `pipe` to its end on a thread, keeping at most `limit` bytes (the
/// first ones, or the last ones when `keep_tail`); the rest is drained so the
/// writer never blocks on a full pipe.
fn pump(
    mut pipe: impl Read + Send + 'static,
    limit: usize,
    keep_tail: bool,
) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if keep_tail {
                        kept.extend_from_slice(&buffer[..n]);
                        if kept.len() > limit {
                            kept.drain(..kept.len() - limit);
                        }
                    } else if kept.len() < limit {
                        let room = limit - kept.len();
                        kept.extend_from_slice(&buffer[..n.min(room)]);
                    }
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_modules::write_executable;

    #[test]
    fn answers_times_out_and_clears_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("m");
        write_executable(
            &program,
            "#!/bin/sh\nread line\ncase \"$line\" in\n  hang*) sleep 30 ;;\n  *) echo \"got $line home=${HOME:-unset}\" ;;\nesac\n",
        );
        let mut caller = NativeCaller::new(&program, ConfinementMode::Off);
        let raw = caller.call(b"hello\n", Duration::from_secs(5)).unwrap();
        assert!(raw.exited, "{raw:?}");
        assert_eq!(
            String::from_utf8_lossy(&raw.stdout),
            "got hello home=unset\n"
        );

        let raw = caller.call(b"hang\n", Duration::from_millis(200)).unwrap();
        assert!(!raw.exited);
        assert!(raw.exit_status.unwrap().contains("killed after"));
    }

    #[test]
    fn a_missing_program_cannot_start() {
        let mut caller = NativeCaller::new("/nonexistent/module", ConfinementMode::Off);
        let err = caller.call(b"", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, CallerError::Start(_)), "{err}");
    }
}
