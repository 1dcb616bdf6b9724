//! Running one call of a module: one request line in, optional notification
//! lines and exactly one response line out, then the module is gone.
//!
//! Two transports share this contract: [`native`] (one OS process per call,
//! its own process group) and `wasm` (one fresh component instance per call).
//! Everything above this layer (discovery, invoke, conformance, tools) speaks
//! only `Exchange` and [`RunError`], never a transport's details.
//!
//! The state a transport keeps across calls lives in [`Engines`], one per
//! [`crate::Host`]: the wasm engine (compiled components, the epoch ticker),
//! created on the first component call so a host that only ever runs native
//! modules never pays for it, and, in a long-running host that asked for it,
//! the [`native::WarmPool`] of processes started ahead of their calls.
//! Without the `wasm` feature a component call is a clear "built without
//! component support" error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "wasm")]
use std::sync::OnceLock;
use std::time::Duration;

use modproto::{Access, ErrorKind, Notification, Response};
use serde::{Deserialize, Serialize};

use crate::confine::ConfinementMode;

mod framing;
pub mod native;
#[cfg(feature = "wasm")]
pub mod wasm;

/// How a module's bytes are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A native executable: one OS process per call.
    Native,
    /// A WebAssembly component (`.wasm`): one fresh instance per call.
    Component,
}

impl Transport {
    /// The transport of the module file at `path`: `.wasm` is a component,
    /// anything else a native executable.
    pub fn of_path(path: &Path) -> Transport {
        match path.extension() {
            Some(ext) if ext == "wasm" => Transport::Component,
            _ => Transport::Native,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Native => "native",
            Transport::Component => "component",
        }
    }

    /// The path a module of this transport sees a granted root at: the host
    /// path natively, `/roots/<name>` inside a component.
    pub fn guest_path(self, name: &str, host: &Path) -> String {
        match self {
            Transport::Native => host.to_string_lossy().into_owned(),
            Transport::Component => format!("/roots/{name}"),
        }
    }
}

/// Where notifications go live while a call runs (an MCP server relays
/// `progress` from here). They are also collected in `Exchange`.
pub type NotificationSink = tokio::sync::mpsc::UnboundedSender<Notification>;

/// The default cap on one component call's linear memory (`[limits]
/// memory_limit_bytes`).
pub const DEFAULT_MEMORY_LIMIT_BYTES: u64 = 256 * 1024 * 1024;

/// The engines behind the transports, shared by every call of one host.
///
/// Cheap to clone (clones share the engine). The wasm engine is created on
/// first use, with compiled components cached in `component_cache_dir`.
#[derive(Debug, Clone)]
pub struct Engines {
    component_cache_dir: PathBuf,
    memory_limit_bytes: u64,
    /// Set by [`Engines::keep_warm`]: native processes started ahead.
    warm: Option<Arc<native::WarmPool>>,
    #[cfg(feature = "wasm")]
    wasm: Arc<OnceLock<Result<wasm::WasmEngine, String>>>,
}

impl Engines {
    /// Engines for a host whose compiled components live in
    /// `component_cache_dir` (normally `<home>/cache/components`) and whose
    /// component calls may use `memory_limit_bytes` of memory.
    pub fn new(component_cache_dir: PathBuf, memory_limit_bytes: u64) -> Engines {
        Engines {
            component_cache_dir,
            memory_limit_bytes,
            warm: None,
            #[cfg(feature = "wasm")]
            wasm: Arc::default(),
        }
    }

    /// These engines, keeping the next native process of each call started
    /// ahead ([`native::warm`]): only of calls marked [`Call::start_ahead`],
    /// and for at most [`native::warm::IDLE_LIFE`] after the last one. For
    /// hosts that serve many calls (the MCP server); such a host must call
    /// [`Engines::shutdown`] before it ends.
    pub fn keep_warm(mut self) -> Engines {
        self.warm = Some(Arc::new(native::WarmPool::new()));
        self
    }

    /// These engines without the processes started ahead: for one-off calls
    /// (a describe happens once per module's bytes), whose next process
    /// would only wait until shutdown.
    pub fn cold(&self) -> Engines {
        Engines {
            warm: None,
            ..self.clone()
        }
    }

    /// For engines that keep processes warm (a long-running host): set up
    /// the wasm engine and load `components` (compiled code from the
    /// host's cache, or compiled now) on a background thread, so the first
    /// call of each does not pay for it. Only code is loaded; nothing is
    /// instantiated or run before its call. A no-op for other engines.
    pub fn load_components_ahead(&self, components: Vec<PathBuf>) {
        #[cfg(feature = "wasm")]
        if self.warm.is_some() && !components.is_empty() {
            let engines = self.clone();
            let loading = std::thread::Builder::new()
                .name("modhost-load-ahead".into())
                .spawn(move || {
                    let Ok(engine) = engines.wasm() else { return };
                    for component in components {
                        // A failure here is reported by the call itself.
                        let _ = engine.load(&component);
                    }
                });
            if let Err(e) = loading {
                tracing::debug!("not loading components ahead: {e}");
            }
        }
        #[cfg(not(feature = "wasm"))]
        drop(components);
    }

    /// Kill and reap every process started ahead (a no-op for engines that
    /// keep none).
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.warm {
            pool.shutdown().await;
        }
    }

    pub fn component_cache_dir(&self) -> &Path {
        &self.component_cache_dir
    }

    pub fn memory_limit_bytes(&self) -> u64 {
        self.memory_limit_bytes
    }

    /// Whether this build runs WebAssembly components at all.
    pub fn supports_components(&self) -> bool {
        cfg!(feature = "wasm")
    }

    /// The wasm engine, created on the first call (and the reason when it
    /// cannot be; the failure is remembered, not retried on every call).
    #[cfg(feature = "wasm")]
    pub fn wasm(&self) -> Result<&wasm::WasmEngine, String> {
        self.wasm
            .get_or_init(|| {
                wasm::WasmEngine::new(&self.component_cache_dir, self.memory_limit_bytes)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Run one call of the module at `module` over its transport.
///
/// The single seam between the host and its transports: discovery, invoke and
/// conformance all come through here.
pub async fn run(
    engines: &Engines,
    transport: Transport,
    module: &Path,
    call: &Call<'_>,
    notifications: Option<&NotificationSink>,
) -> Result<Exchange, RunError> {
    match transport {
        Transport::Native => {
            native::run(module, call, notifications, engines.warm.as_deref()).await
        }
        Transport::Component => run_component(engines, module, call, notifications).await,
    }
}

/// Run a component call on a blocking-pool thread, not on the caller's
/// runtime thread.
///
/// A guest runs on a fiber that yields only at epoch ticks (10 ms) and host
/// calls, and instantiating it is CPU work; on the runtime thread of a
/// single-threaded server (`modhost mcp`) that would hold up `ping` and
/// cancellations for as long. The call's future is driven by
/// `Handle::block_on` on its own thread (timers and I/O still come from the
/// caller's runtime), and dropping this future drops the call there at once.
#[cfg(feature = "wasm")]
async fn run_component(
    engines: &Engines,
    module: &Path,
    call: &Call<'_>,
    notifications: Option<&NotificationSink>,
) -> Result<Exchange, RunError> {
    // The engine is created on the first call (seconds of setup): there too.
    let engines = engines.clone();
    let module = module.to_path_buf();
    let request_line = call.request_line.to_owned();
    let grants = call.grants.to_vec();
    let executables = call.executables.to_vec();
    let (limits, network, start_ahead) = (call.limits, call.network, call.start_ahead);
    let notifications = notifications.cloned();
    let runtime = tokio::runtime::Handle::current();
    // Dropped with this future: the call on the other thread ends with it.
    let (_cancel_on_drop, cancelled) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::task::spawn_blocking(move || {
        runtime.block_on(async move {
            let engine = engines.wasm().map_err(|message| RunError::Spawn {
                message: format!("{}: {message}", module.display()),
            })?;
            let call = Call {
                request_line: &request_line,
                limits,
                grants: &grants,
                executables: &executables,
                network,
                start_ahead,
            };
            tokio::select! {
                biased;
                _ = cancelled => Err(RunError::Cancelled),
                result = engine.run_module(&module, &call, notifications.as_ref()) => result,
            }
        })
    });
    worker.await.map_err(|e| RunError::Spawn {
        message: format!("the component call's thread failed: {e}"),
    })?
}

#[cfg(not(feature = "wasm"))]
async fn run_component(
    _engines: &Engines,
    module: &Path,
    _call: &Call<'_>,
    _notifications: Option<&NotificationSink>,
) -> Result<Exchange, RunError> {
    Err(RunError::Spawn {
        message: format!(
            "{}: this modhost was built without component support (the `wasm` cargo feature); rebuild it with default features to run WebAssembly modules",
            module.display()
        ),
    })
}

/// Bounds for one call.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// Wall-clock budget, from spawn to reaped.
    pub deadline: Duration,
    /// The most bytes of stdout read before the call is killed.
    pub max_output_bytes: u64,
    /// How a native call is confined (`confinement` in config.toml).
    pub confinement: ConfinementMode,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            deadline: Duration::from_secs(30),
            max_output_bytes: 1024 * 1024,
            confinement: ConfinementMode::default(),
        }
    }
}

/// A filesystem grant as the transport must enforce it: the host path, the
/// path the module will see it at, and the access.
///
/// Native modules see host paths (`guest == host`); components see
/// `/roots/<name>`. Confinement (landlock for native, preopens for wasm) is
/// built from this list and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grant {
    pub name: String,
    pub host: PathBuf,
    pub guest: String,
    pub access: Access,
}

/// Everything a transport needs for one call besides the module itself.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The request, serialized, without the trailing newline.
    pub request_line: &'a str,
    pub limits: CallLimits,
    pub grants: &'a [Grant],
    /// Host paths of the binaries granted for this call: a confined native
    /// module may read and execute exactly these besides the system folders.
    pub executables: &'a [PathBuf],
    /// Whether the call may use the network (the capability declared it).
    pub network: bool,
    /// Whether a long-running host may serve this call from a process
    /// started ahead of it, and start the next ones for calls like it
    /// ([`native::warm`]). Only the host sets it, from its approval policy:
    /// a process started ahead runs before anyone approved the call it
    /// will serve, so it is true only for a capability the policy allows
    /// outright ([`crate::approval::Decision::allows_starting_ahead`]).
    /// False (start cold, after approval) for every caller that did not
    /// evaluate the policy.
    pub start_ahead: bool,
}

/// What came back from a call that answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Notifications (`progress`, `log`) received before the response, in order.
    pub notifications: Vec<Notification>,
    /// The one response.
    pub response: Response,
    /// The bounded tail of the module's stderr.
    pub stderr_tail: String,
    /// What the host noticed while running the call (for instance, less than
    /// full confinement).
    pub host_warnings: Vec<String>,
}

/// How much of a module's stderr the host keeps for error reports.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// A call that did not produce a usable response. A module failure is data,
/// never a host panic.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    #[error("the module did not answer within {deadline_ms} ms and was killed")]
    Timeout {
        deadline_ms: u64,
        stderr_tail: String,
    },
    #[error("the module wrote more than {limit} bytes to stdout and was killed")]
    OutputLimit { limit: u64, stderr_tail: String },
    #[error("the module exceeded its memory limit of {limit} bytes")]
    MemoryLimit { limit: u64, stderr_tail: String },
    #[error("the module trapped: {trap}")]
    Trapped { trap: String, stderr_tail: String },
    #[error("the module exited ({status}) without a response")]
    Crashed { status: String, stderr_tail: String },
    #[error("the module's answer is not a valid response: {problem}")]
    BadResponse {
        problem: String,
        stderr_tail: String,
    },
    #[error("could not start the module: {message}")]
    Spawn { message: String },
    /// `confinement = "required"` and this machine cannot enforce every part
    /// of confinement the call implies; `remedy` says what would.
    #[error("refused to run the module less than fully confined: {reason}")]
    Unconfined { reason: String, remedy: String },
    #[error("the call was cancelled")]
    Cancelled,
}

impl RunError {
    /// The machine-readable kind ([`ErrorKind`]).
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Timeout { .. } => ErrorKind::TIMEOUT,
            RunError::OutputLimit { .. } => ErrorKind::OUTPUT_LIMIT,
            RunError::MemoryLimit { .. } => ErrorKind::MEMORY_LIMIT,
            RunError::Trapped { .. } => ErrorKind::TRAPPED,
            RunError::Crashed { .. } => ErrorKind::CRASHED,
            RunError::BadResponse { .. } => ErrorKind::BAD_RESPONSE,
            RunError::Spawn { .. } => ErrorKind::SPAWN_FAILED,
            RunError::Unconfined { .. } => "unconfined",
            RunError::Cancelled => ErrorKind::CANCELLED,
        }
    }

    /// A permission error in the stderr of a module that died or broke the
    /// protocol before answering: the sandbox likely stopped it
    /// ([`crate::confine::denial`]).
    pub fn sandbox_denial(&self) -> Option<crate::confine::denial::Denial> {
        match self {
            RunError::Crashed { stderr_tail, .. } | RunError::BadResponse { stderr_tail, .. } => {
                crate::confine::denial::permission_denial(stderr_tail)
            }
            _ => None,
        }
    }

    pub fn stderr_tail(&self) -> &str {
        match self {
            RunError::Timeout { stderr_tail, .. }
            | RunError::OutputLimit { stderr_tail, .. }
            | RunError::MemoryLimit { stderr_tail, .. }
            | RunError::Trapped { stderr_tail, .. }
            | RunError::Crashed { stderr_tail, .. }
            | RunError::BadResponse { stderr_tail, .. } => stderr_tail,
            RunError::Spawn { .. } | RunError::Unconfined { .. } | RunError::Cancelled => "",
        }
    }
}
