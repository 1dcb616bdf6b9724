//! The [`ModuleCaller`]s: how `modhost conformance` reaches a live module
//! for the conformance battery, a native executable ([`NativeCaller`]) or a
//! WebAssembly component ([`WasmCaller`]).
//!
//! Natively, each call is one fresh process, started exactly as the host
//! starts a module (`modhost_runner::native::start_blocking`): a cleared environment (only the
//! variables the native runner also passes),
//! the request bytes on stdin, stdin closed, stdout and a bounded stderr tail
//! collected until the process exits or the timeout passes, then the whole
//! process group killed. The module runs confined like any call
//! (`modhost_sandbox`) to the roots it is granted.
//!
//! **Each invoke gets what invoke would grant, and only that.** Before the
//! battery builds an invoke it asks [`ModuleCaller::grants`] for the
//! capability; the answer comes from [`crate::grants::plan`], the one
//! decision `modhost invoke` makes (the roots the capability names in its
//! effects, the binaries it names in `effects.spawns`), and the very next
//! call is confined to exactly that. No call gets network, whatever the
//! capability declares: the battery checks how a module speaks the
//! protocol, with made-up inputs, and must not send them anywhere (a module
//! that needs the network for an example fails it, with the reason in its
//! stderr). Every other call (describe, malformed lines, empty stdin) is
//! granted nothing, as discovery grants nothing. A module whose capability
//! uses a root it does not name therefore fails here as it fails under
//! invoke, and [`unnamed_root_findings`] says which root to name.
//!
//! Design decisions:
//!
//! - **Synchronous, on plain threads.** [`ModuleCaller::call`] is a blocking
//!   trait method; the CLI runs the battery on a blocking thread. Pipes are
//!   pumped by their own threads so a module that never reads stdin, or
//!   floods stdout, cannot deadlock the caller.
//! - **Grants fit for examples, and nothing real.** The plan is made
//!   against a scratch home: a named `state` or `artifacts` root points into
//!   a scratch directory the caller owns (never the operator's real state),
//!   a named `workspace` is granted read-only even when the capability
//!   writes it (the battery must not change the operator's files), source
//!   roots and binaries only when the operator configured them. Examples
//!   that need more fail with the battery's own remedy.
//! - **Components run as the host runs them, minus the protocol.** Each call
//!   is a fresh instance with the raw stdin bytes (the battery sends
//!   malformed lines and empty stdin on purpose), its grants preopened at
//!   `/roots/<name>`, no network and no binaries; stdout comes back unparsed
//!   ([`modhost_runner::wasm::WasmEngine::run_raw`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use modconform::{CallerError, Finding, Grants, ModuleCaller, RawCall};
use modproto::{Access, Capability, Descriptor, Effects, RootKind};

use crate::grants::{self, GrantContext};
use crate::home::HomeLayout;
use modhost_runner::native::{self, SpawnSpec, Spawned};
#[cfg(feature = "wasm")]
use modhost_runner::wasm::{LoadedComponent, WasmEngine, WasmError};
use modhost_runner::{Grant, STDERR_TAIL_BYTES, Transport};
use modhost_sandbox::ConfinementMode;

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
    /// The operator's modhost home (canonical): no root overlaps it, and
    /// nothing the module executes lies in it, as for invoke.
    pub home: &'a Path,
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
    /// Where the roots of each capability's plan point.
    planner: Option<Planner>,
    /// What the next call is confined to: the grants of the capability
    /// the battery is about to invoke, else nothing.
    armed: CallGrants,
}

impl NativeCaller {
    /// A caller of the executable at `program` that grants nothing yet.
    pub fn new(program: impl Into<PathBuf>, confinement: ConfinementMode) -> Self {
        NativeCaller {
            program: program.into(),
            confinement,
            planner: None,
            armed: CallGrants::default(),
        }
    }

    /// From now on, each invoke of a capability of `descriptor` is granted
    /// what its plan decides, pointed at `roots`.
    pub fn grant(
        &mut self,
        descriptor: &Descriptor,
        roots: ConformanceRoots<'_>,
    ) -> std::io::Result<()> {
        self.planner = Some(Planner::new(descriptor, roots));
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
        // Armed for this one call only.
        let granted = std::mem::take(&mut self.armed);
        // Started exactly as the native runner starts a module.
        let spec = SpawnSpec {
            program: self.program.clone(),
            grants: granted.roots,
            executables: granted.executables,
            module_writes: granted.module_writes,
            network: None,
            confinement: self.confinement,
            memory_bytes: modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES,
        };
        let Spawned {
            child,
            guard: group,
            ..
        } = native::start_blocking(&spec).map_err(|e| CallerError::Start(e.to_string()))?;
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

    fn grants(&mut self, capability: &Capability) -> Grants {
        self.arm(&capability.effects)
    }
}

impl PlannedCaller for NativeCaller {
    fn arm(&mut self, effects: &Effects) -> Grants {
        self.armed = arm(self.planner.as_ref(), effects, Transport::Native);
        self.armed.request.clone()
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
    /// Where the roots of each capability's plan point.
    planner: Option<Planner>,
    /// What the next instance gets preopened: the grants of the capability
    /// the battery is about to invoke, else nothing.
    armed: CallGrants,
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
            planner: None,
            armed: CallGrants::default(),
        })
    }

    /// From now on, each invoke of a capability of `descriptor` is granted
    /// what its plan decides, pointed at `roots` and preopened at
    /// `/roots/<name>`.
    pub fn grant(
        &mut self,
        descriptor: &Descriptor,
        roots: ConformanceRoots<'_>,
    ) -> std::io::Result<()> {
        self.planner = Some(Planner::new(descriptor, roots));
        Ok(())
    }
}

#[cfg(feature = "wasm")]
impl ModuleCaller for WasmCaller {
    fn call(&mut self, stdin: &[u8], timeout: Duration) -> Result<RawCall, CallerError> {
        let started = Instant::now();
        let granted = std::mem::take(&mut self.armed);
        let run = self.engine.run_raw(
            &self.component,
            stdin,
            &granted.roots,
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

    fn grants(&mut self, capability: &Capability) -> Grants {
        self.arm(&capability.effects)
    }
}

#[cfg(feature = "wasm")]
impl PlannedCaller for WasmCaller {
    fn arm(&mut self, effects: &Effects) -> Grants {
        self.armed = arm(self.planner.as_ref(), effects, Transport::Component);
        self.armed.request.clone()
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
    // The whole tail the pump kept (at most STDERR_TAIL_BYTES), as
    // PROTOCOL.md promises, not only its last line.
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let tail = stderr.trim();
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

/// A caller whose next call can be granted what a capability with given
/// effects would be granted.
pub trait PlannedCaller: ModuleCaller {
    /// Confine the next call to the plan of a capability with `effects`;
    /// returns the grants as the invoke request states them.
    fn arm(&mut self, effects: &Effects) -> Grants;
}

/// What one call is granted: the roots it is confined to, the same roots
/// and binaries as the invoke request states them, and the binaries it may
/// execute. The default grants nothing.
#[derive(Debug, Clone, Default)]
struct CallGrants {
    roots: Vec<Grant>,
    request: Grants,
    executables: Vec<PathBuf>,
    /// Where modules write: the workspace, the operator's home and the
    /// scratch one.
    module_writes: Vec<PathBuf>,
}

/// The inputs of every capability's plan in one conformance run.
#[derive(Debug, Clone)]
struct Planner {
    descriptor: Descriptor,
    /// A scratch home: `state/` and `artifacts/` roots point into it.
    scratch: HomeLayout,
    home: PathBuf,
    workspace: PathBuf,
    source_roots: BTreeMap<String, PathBuf>,
    binaries: BTreeMap<String, PathBuf>,
}

/// The id the scratch home files a module's `state` and `artifacts` under:
/// fixed, so a hostile descriptor id never names a path.
const SCRATCH_MODULE_ID: &str = "module";

impl Planner {
    fn new(descriptor: &Descriptor, roots: ConformanceRoots<'_>) -> Self {
        Planner {
            descriptor: descriptor.clone(),
            scratch: HomeLayout::new(roots.scratch),
            home: roots.home.to_path_buf(),
            workspace: roots.workspace.to_path_buf(),
            source_roots: roots.source_roots.clone(),
            binaries: roots.binaries.clone(),
        }
    }

    /// What invoke grants a capability with `effects` ([`grants::plan`],
    /// the one decision), against the scratch home, with the workspace
    /// read-only. A component runs no program, so it gets no binary.
    fn plan(&self, effects: &Effects, transport: Transport) -> std::io::Result<CallGrants> {
        let context = GrantContext {
            layout: &self.scratch,
            home: &self.home,
            workspace: &self.workspace,
            source_roots: &self.source_roots,
            binaries: &self.binaries,
        };
        let mut plan = grants::plan(
            &self.descriptor,
            effects,
            SCRATCH_MODULE_ID,
            transport,
            context,
            true,
        )?;
        for root in &mut plan.roots {
            if plan.kinds.get(&root.name) == Some(&RootKind::Workspace) {
                root.access = Access::Read;
            }
        }
        if transport == Transport::Component {
            plan.binaries.clear();
        }
        Ok(CallGrants {
            request: Grants {
                roots: plan.request_roots(),
                binaries: plan.request_binaries(),
                approval: None,
            },
            executables: plan.binaries.values().cloned().collect(),
            module_writes: vec![
                self.workspace.clone(),
                self.home.clone(),
                self.scratch.root().to_path_buf(),
            ],
            roots: plan.roots,
        })
    }
}

/// The grants of the next call for `effects`: its plan, or nothing when
/// no plan can be made (no descriptor yet, or the scratch home cannot be
/// written: the call then fails closed, as invoke would).
fn arm(planner: Option<&Planner>, effects: &Effects, transport: Transport) -> CallGrants {
    planner
        .and_then(|planner| planner.plan(effects, transport).ok())
        .unwrap_or_default()
}

/// For each capability whose example failed (a `battery.example_failed`
/// finding in `findings`): the declared roots it uses without naming them.
///
/// Each example is run once more per declared root the capability does not
/// name, granted that root read-only on top of its own plan; a root that
/// makes a failing example succeed is one the capability reads without
/// saying so, which invoke never grants. Found only for examples that fail
/// as planned, so a module that names its roots costs no extra call.
pub fn unnamed_root_findings(
    caller: &mut dyn PlannedCaller,
    descriptor: &Descriptor,
    findings: &[Finding],
    timeout: std::time::Duration,
) -> Vec<Finding> {
    let contract_version = modproto::contract::evaluate(std::sync::Arc::new(descriptor.clone()))
        .pin()
        .effective
        .clone()
        .unwrap_or_else(|| "1.0".to_owned());
    let mut found = Vec::new();
    for capability in &descriptor.capabilities {
        let failed = findings.iter().any(|f| {
            f.id == "battery.example_failed" && f.capability.as_deref() == Some(&capability.id)
        });
        if !failed {
            continue;
        }
        let effects = &capability.effects;
        let unnamed = descriptor
            .roots
            .iter()
            .map(|r| r.name.as_str())
            .filter(|name| {
                !effects
                    .reads
                    .iter()
                    .chain(&effects.writes)
                    .any(|n| n == name)
            });
        let mut needed = Vec::new();
        for name in unnamed {
            let mut widened = effects.clone();
            widened.reads.push(name.to_owned());
            let succeeds = capability.examples.iter().any(|example| {
                let grants = caller.arm(&widened);
                example_succeeds(
                    caller,
                    &capability.id,
                    &example.input,
                    grants,
                    &contract_version,
                    timeout,
                )
            });
            if succeeds {
                needed.push(name.to_owned());
            }
        }
        if needed.is_empty() {
            continue;
        }
        let listed = needed
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        found.push(
            Finding::error(
                "battery.reads_unnamed_root",
                format!(
                    "an example of {:?} fails with the roots the capability names and succeeds when also granted {listed}: it uses a root its effects do not name, which invoke never grants",
                    capability.id
                ),
                format!(
                    "name {listed} in the effects.reads of capability {:?} (effects.writes if it changes it)",
                    capability.id
                ),
            )
            .on(&capability.id),
        );
    }
    found
}

/// Invoke `capability` with `input` and `grants` through `caller` (armed
/// for it): whether it answered a result.
fn example_succeeds(
    caller: &mut dyn PlannedCaller,
    capability: &str,
    input: &serde_json::Value,
    grants: Grants,
    contract_version: &str,
    timeout: std::time::Duration,
) -> bool {
    let params = modproto::InvokeParams {
        protocol: modproto::PROTOCOL_VERSION.to_owned(),
        contract_version: contract_version.to_owned(),
        request_id: "modhost-conformance-diagnosis".to_owned(),
        capability: capability.to_owned(),
        input: input.clone(),
        roots: grants.roots,
        binaries: grants.binaries,
        deadline_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        max_output_bytes: 1 << 20,
        approval: None,
        extra: serde_json::Map::new(),
    };
    let Ok(params) = serde_json::to_value(params) else {
        return false;
    };
    let request = modproto::Request::new(1, modproto::METHOD_INVOKE, Some(params));
    let Ok(mut line) = serde_json::to_vec(&request) else {
        return false;
    };
    line.push(b'\n');
    let Ok(raw) = caller.call(&line, timeout) else {
        return false;
    };
    String::from_utf8_lossy(&raw.stdout)
        .lines()
        .filter_map(|l| modproto::Message::parse(l).ok())
        .any(|m| matches!(m, modproto::Message::Response(r) if r.outcome.is_ok()))
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
    use modhost_test_support::modules::write_executable;

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
