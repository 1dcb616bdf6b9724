//! The WebAssembly transport: one fresh component instance per call.
//!
//! A module compiled for `wasm32-wasip2` is a component exporting
//! `wasi:cli/run`. It speaks the same protocol bytes as a native module, over
//! WASI stdio: the request line and `\n` on stdin (then EOF), notification lines
//! and one response line on stdout, free-form diagnostics on stderr.
//!
//! Design decisions:
//!
//! - **One [`WasmEngine`] per host.** It owns the wasmtime `Engine`, the WASI
//!   linker, the epoch ticker thread and the compiled cache. Each component is
//!   compiled once into a pre-instantiated form ([`LoadedComponent`], kept in
//!   memory by blake3 digest of its bytes and on disk by `cache.rs`).
//! - **A fresh store and instance per call.** Nothing survives a call except
//!   what the module writes into its granted roots. Instances live in pooled
//!   slots that are reset to the component's initial image between calls
//!   (`wasm/pool.rs`): fresh by content, without mapping memory per call.
//!   After an answer the next call's instance of the same component is made
//!   while the host waits (`wasm/ahead.rs`); it gets the call's context only
//!   when the call takes it.
//! - **Only the grants.** Each [`Grant`] is preopened at its guest path
//!   (`/roots/<name>`) with exactly its access; there is no other filesystem,
//!   no environment but the secrets granted to the call (`Call::secrets`),
//!   no sockets and no name lookup, whatever the capability declared. A call with network makes `wasi:http` requests, each sent
//!   through the call's egress proxy under its grant (`wasm/egress_http.rs`);
//!   without network every request is refused before anything opens.
//! - **Bounds that hold by construction.** The async bindings run the guest
//!   on a fiber: epoch interruption (a 10 ms ticker) makes a spinning guest
//!   yield to the executor every tick and traps it at the deadline, and a
//!   guest blocked in a host call (a sleep, a poll) is a pending future, so
//!   the deadline timer around the call ends it and drops the instance. Memory
//!   growth beyond the cap is refused by a [`wasmtime::ResourceLimiter`];
//!   stdout beyond the output cap traps the guest (`wasm/stdio.rs`). Each
//!   failure maps to its own [`RunError`] kind.
//! - **Same framing as native.** Lines are judged by `super::framing`, so
//!   both transports accept and refuse exactly the same bytes. After the
//!   response the guest gets a short grace to return (what it writes
//!   meanwhile is judged too: a second response is `bad_response`), then its
//!   instance is dropped; a failing exit after the response is a host
//!   warning.

mod ahead;
mod cache;
mod egress_http;
mod grant_dir;
// What the CLI's status line implements and installs.
pub use cache::{CompileWatcher, watch_compiles};
mod known_digests;
mod on_thread;
mod own_fd;
mod pool;
mod sealed;
mod stdio;
mod whole_file;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use modproto::Access;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use self::ahead::{Held, InstancesAhead, MadeAhead};
use self::cache::ComponentCache;
use self::egress_http::EgressHooks;
use self::grant_dir::GrantDir;
use self::known_digests::KnownDigests;
use self::on_thread::{GuestThreads, NoThread};
use self::pool::{CallSlot, CallSlots};
use self::stdio::{CappedStdout, StderrTail};
use super::{Call, CallSecret, Exchange, NotificationSink, RunError, framing};
use crate::file_identity::FileIdentity;
use modhost_sandbox::Grant;

/// How often the engine's epoch advances: the granularity at which a spinning
/// guest yields and notices its deadline.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How long a guest that answered may take to return before it is dropped.
const EXIT_GRACE: Duration = Duration::from_millis(250);

/// Why the engine could not be set up or a component not loaded.
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    #[error("could not set up the WebAssembly engine: {message}")]
    Engine { message: String },
    #[error("{path}: could not read the component: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid WebAssembly component: {message}")]
    Compile { path: PathBuf, message: String },
    #[error(
        "{path}: the component cannot run here (it must be a wasm32-wasip2 command exporting wasi:cli/run and import only WASI): {message}"
    )]
    Link { path: PathBuf, message: String },
}

/// How a [`LoadedComponent`] was obtained the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOrigin {
    /// Compiled from the component's bytes (and written to the cache).
    Compiled,
    /// Deserialized from the compiled cache on disk.
    DiskCache,
}

/// A component compiled and pre-instantiated, ready for any number of calls.
pub struct LoadedComponent {
    digest: blake3::Hash,
    name: String,
    origin: LoadOrigin,
    pre: CommandPre<CallState>,
    /// A `start` function runs at instantiation: never made ahead.
    runs_code_at_instantiation: bool,
}

impl std::fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("digest", &self.digest.to_hex().as_str())
            .field("name", &self.name)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl LoadedComponent {
    /// Whether it was compiled or came from the disk cache: what the tests
    /// and the wasm bench (through `internals`) tell a restart by.
    pub fn origin(&self) -> LoadOrigin {
        self.origin
    }
}

/// One path's loads, one at a time (see `EngineInner::loading`).
#[derive(Default)]
struct LoadGate {
    turn: Mutex<()>,
    waiting: Mutex<Waiting>,
}

/// The calls waiting for a load that asked to hear of a compile.
#[derive(Default)]
struct Waiting {
    /// The compile under way, if the load holding the turn compiles.
    compiling: Option<Arc<cache::CompileAnnouncement>>,
    sinks: Vec<NotificationSink>,
}

impl LoadGate {
    /// A call that waits: told now if a compile is under way, else when
    /// one starts during this turn.
    fn listen(&self, sink: &NotificationSink) {
        let mut waiting = self.lock_waiting();
        match &waiting.compiling {
            Some(compile) => compile.tell(sink),
            None => waiting.sinks.push(sink.clone()),
        }
    }

    /// The load holding the turn compiles: tell every call waiting for it.
    fn compiling(&self, compile: &Arc<cache::CompileAnnouncement>) {
        let mut waiting = self.lock_waiting();
        for sink in waiting.sinks.drain(..) {
            compile.tell(&sink);
        }
        waiting.compiling = Some(Arc::clone(compile));
    }

    /// The turn is over: its compile, and who waited for it, are done with.
    fn turn_over(&self) {
        let mut waiting = self.lock_waiting();
        waiting.compiling = None;
        waiting.sinks.clear();
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The host's one WebAssembly engine. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct WasmEngine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    engine: Engine,
    linker: Linker<CallState>,
    cache: ComponentCache,
    memory_limit: u64,
    loaded: Mutex<HashMap<blake3::Hash, Arc<LoadedComponent>>>,
    /// One load at a time per path: a call that finds its component being
    /// loaded (by the host's load-ahead thread, or another call) waits for
    /// that load instead of reading, hashing and deserializing it again
    /// beside it on a two-core machine.
    loading: Mutex<HashMap<PathBuf, Arc<LoadGate>>>,
    digests: KnownDigests,
    slots: CallSlots,
    /// The next call's instance of recently called components (`ahead.rs`).
    ahead: InstancesAhead<CallState>,
    /// Calls with roots run their guests on threads of their own
    /// (`on_thread.rs`), this many at once.
    guest_threads: GuestThreads,
    /// How many calls took an instance made ahead ([`WasmEngine::took_ahead`]).
    took_ahead: std::sync::atomic::AtomicUsize,
    /// Also logged when the engine starts; kept for `modhost doctor`.
    warnings: Vec<String>,
    _ticker: EpochTicker,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine")
            .field("cache", &self.inner.cache)
            .field("memory_limit", &self.inner.memory_limit)
            .finish_non_exhaustive()
    }
}

impl WasmEngine {
    /// Set up the engine, with compiled components cached in `cache_dir`
    /// (normally `<home>/cache/components`, created 0700) and each call's
    /// memory capped at `memory_limit_bytes`.
    pub fn new(cache_dir: &Path, memory_limit_bytes: u64) -> Result<WasmEngine, WasmError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Every call ends in `proc_exit` (the SDK's `serve` exits), which
        // wasmtime returns as an error; with backtraces on, each such exit
        // walked and symbolicated the guest's stack (a measurable share of
        // a component call). A trap's message and the guest's stderr (a
        // Rust panic's text) still say what happened.
        config.wasm_backtrace_max_frames(None);
        let mut pooled = config.clone();
        pool::use_pooled_slots(&mut pooled);
        // The pool reserves its address space up front; where that is
        // refused (a `ulimit -v`), calls allocate per call as before.
        let mut warnings = Vec::new();
        let engine = match Engine::new(&pooled) {
            Ok(engine) => engine,
            Err(e) => {
                warnings.push(format!(
                    "components run without pooled instance slots, slower (could not reserve them: {})",
                    error_chain(&e)
                ));
                Engine::new(&config).map_err(|e| WasmError::Engine {
                    message: error_chain(&e),
                })?
            }
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| WasmError::Engine {
            message: error_chain(&e),
        })?;
        // `wasi:http` outgoing requests, each through the call's egress
        // proxy or refused (`egress_http.rs`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(|e| {
            WasmError::Engine {
                message: error_chain(&e),
            }
        })?;
        let (cache, warning) = ComponentCache::open(cache_dir, &engine);
        warnings.extend(warning);
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        let ticker = EpochTicker::start(engine.clone()).map_err(|e| WasmError::Engine {
            message: format!("starting the epoch ticker: {e}"),
        })?;
        Ok(WasmEngine {
            inner: Arc::new(EngineInner {
                engine,
                linker,
                cache,
                memory_limit: memory_limit_bytes,
                loaded: Mutex::new(HashMap::new()),
                loading: Mutex::default(),
                digests: KnownDigests::default(),
                slots: CallSlots::new(),
                ahead: InstancesAhead::default(),
                guest_threads: GuestThreads::default(),
                took_ahead: std::sync::atomic::AtomicUsize::new(0),
                warnings,
                _ticker: ticker,
            }),
        })
    }

    /// What the host should surface about the engine (for instance, a
    /// disabled compiled cache), for `modhost doctor`.
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// Load the component at `path`: from memory if these exact bytes were
    /// loaded before, else from the compiled cache, else compiled (hundreds of
    /// milliseconds of CPU: call it from a blocking context, or use
    /// `load_async_announcing`).
    pub fn load(&self, path: &Path) -> Result<Arc<LoadedComponent>, WasmError> {
        self.load_announcing(path, None)
    }

    /// [`WasmEngine::load`], announcing a compile as `progress` on
    /// `notifications` too (see [`cache::CompileAnnouncement`]).
    fn load_announcing(
        &self,
        path: &Path,
        notifications: Option<&NotificationSink>,
    ) -> Result<Arc<LoadedComponent>, WasmError> {
        if let Some(loaded) = self.loaded_unchanged(path) {
            return Ok(loaded);
        }
        let gate = Arc::clone(
            self.inner
                .loading
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .entry(path.to_owned())
                .or_default(),
        );
        let loaded = {
            let _turn = match gate.turn.try_lock() {
                Ok(turn) => turn,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if let Some(sink) = notifications {
                        gate.listen(sink);
                    }
                    gate.turn
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                }
            };
            // The load this one waited for may have done the work.
            let loaded = match self.loaded_unchanged(path) {
                Some(loaded) => Ok(loaded),
                None => self.load_now(path, notifications, &gate),
            };
            gate.turn_over();
            loaded
        };
        let mut loading = self
            .inner
            .loading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // The last one through removes the gate (a waiter still holds a clone).
        if Arc::strong_count(&gate) == 2 {
            loading.remove(path);
        }
        loaded
    }

    /// Read, hash and compile (or deserialize) the component at `path`.
    fn load_now(
        &self,
        path: &Path,
        notifications: Option<&NotificationSink>,
        gate: &LoadGate,
    ) -> Result<Arc<LoadedComponent>, WasmError> {
        let read_error = |source| WasmError::Read {
            path: path.to_owned(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(read_error)?;
        // The identity is taken before the read: a write during the read
        // changes the file's identity, so the next call hashes again.
        let meta = file.metadata().map_err(read_error)?;
        let identity = FileIdentity::of(&meta);
        let bytes = whole_file::read_whole(&mut file, meta.len()).map_err(read_error)?;
        let digest = blake3::hash(&bytes);
        self.inner.digests.remember(path, identity, digest);
        if let Some(loaded) = self.lock_loaded().get(&digest) {
            return Ok(Arc::clone(loaded));
        }
        let inner = &*self.inner;
        let (component, origin) = match inner.cache.get(&inner.engine, &digest) {
            Some(component) => (component, LoadOrigin::DiskCache),
            None => {
                // Seconds for a large component: say so, naming the module.
                let announcement = Arc::new(cache::CompileAnnouncement::start(
                    path,
                    bytes.len(),
                    notifications,
                ));
                gate.compiling(&announcement);
                let compiled = Component::new(&inner.engine, &*bytes);
                gate.turn_over();
                if let Ok(announcement) = Arc::try_unwrap(announcement) {
                    announcement.finish(compiled.is_ok());
                }
                let component = compiled.map_err(|e| WasmError::Compile {
                    path: path.to_owned(),
                    message: error_chain(&e),
                })?;
                inner.cache.put(&digest, &component);
                (component, LoadOrigin::Compiled)
            }
        };
        let link_error = |e: wasmtime::Error| WasmError::Link {
            path: path.to_owned(),
            message: error_chain(&e),
        };
        let instance_pre = inner
            .linker
            .instantiate_pre(&component)
            .map_err(link_error)?;
        let pre = CommandPre::new(instance_pre).map_err(link_error)?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = Arc::new(LoadedComponent {
            digest,
            name,
            origin,
            pre,
            runs_code_at_instantiation: ahead::runs_code_at_instantiation(&bytes),
        });
        // Two racing loads of the same bytes both succeed; the first one stays.
        let mut map = self.lock_loaded();
        Ok(Arc::clone(map.entry(digest).or_insert(loaded)))
    }

    /// [`WasmEngine::load`] on a blocking thread, so compiling does not stall
    /// the async workers (the calls go through `load_async_announcing`).
    pub async fn load_async(&self, path: &Path) -> Result<Arc<LoadedComponent>, WasmError> {
        self.load_async_announcing(path, None).await
    }

    /// [`WasmEngine::load`] on a blocking thread, so compiling does not stall
    /// the async workers, announcing a compile on `notifications`.
    async fn load_async_announcing(
        &self,
        path: &Path,
        notifications: Option<&NotificationSink>,
    ) -> Result<Arc<LoadedComponent>, WasmError> {
        // The common case, an unchanged file already loaded, needs no thread.
        if let Some(loaded) = self.loaded_unchanged(path) {
            return Ok(loaded);
        }
        let engine = self.clone();
        let path_owned = path.to_owned();
        let notifications = notifications.cloned();
        match tokio::task::spawn_blocking(move || {
            engine.load_announcing(&path_owned, notifications.as_ref())
        })
        .await
        {
            Ok(result) => result,
            Err(e) => Err(WasmError::Engine {
                message: format!("loading {}: {e}", path.display()),
            }),
        }
    }

    fn lock_loaded(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<blake3::Hash, Arc<LoadedComponent>>> {
        self.inner
            .loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The component at `path`, already loaded, when its file is known to be
    /// unchanged since it was hashed (one `stat`; see [`known_digests`]).
    fn loaded_unchanged(&self, path: &Path) -> Option<Arc<LoadedComponent>> {
        let digest = self.inner.digests.lookup(path)?;
        self.lock_loaded().get(&digest).cloned()
    }

    /// Load the component at `module` (on a blocking thread, see `load_async_announcing`) and
    /// run one call of it: the transport seam's entry point for components.
    pub(crate) async fn run_module(
        &self,
        module: &Path,
        call: &Call<'_>,
        notifications: Option<&NotificationSink>,
    ) -> Result<Exchange, RunError> {
        let component = self
            .load_async_announcing(module, notifications)
            .await
            .map_err(|e| RunError::Spawn {
                message: e.to_string(),
            })?;
        self.run(&component, call, notifications).await
    }

    /// Run one call of `component` in a fresh store and instance (made
    /// ahead of the call when one is ready, see `ahead.rs`).
    pub async fn run(
        &self,
        component: &Arc<LoadedComponent>,
        call: &Call<'_>,
        notifications: Option<&NotificationSink>,
    ) -> Result<Exchange, RunError> {
        let started = Instant::now();
        let limits = call.limits;
        let (lines_tx, lines_rx) = unbounded_channel();
        let stdout = CappedStdout::new(limits.max_output_bytes, lines_tx);
        let stderr = StderrTail::default();
        let memory_hit = Arc::new(AtomicBool::new(false));

        let mut stdin_bytes = Vec::with_capacity(call.request_line.len() + 1);
        stdin_bytes.extend_from_slice(call.request_line.as_bytes());
        stdin_bytes.push(b'\n');
        let mut host_warnings = Vec::new();
        let deadline = started + limits.deadline;
        let timeout = || RunError::Timeout {
            deadline_ms: limits.deadline.as_millis() as u64,
            stderr_tail: String::new(),
        };
        // A call with roots runs its guest on a thread of its own
        // (`on_thread.rs`), waiting for one within its deadline.
        let own_thread = if call.grants.is_empty() {
            None
        } else {
            match self.inner.guest_threads.take(deadline).await {
                Ok(thread) => Some(thread),
                Err(NoThread::Busy) => return Err(timeout()),
                Err(NoThread::Unavailable) => None,
            }
        };
        // Built first: a grant that cannot be preopened fails the call
        // before it takes an instance.
        let wasi = self.call_context(
            component,
            stdin_bytes,
            (stdout.clone(), stderr.clone()),
            (call.grants, call.secrets),
            own_thread.is_some(),
        )?;
        let made = call
            .start_ahead
            .then(|| self.inner.ahead.take(&component.digest))
            .flatten();
        let (mut held, made) = match made {
            Some(MadeAhead { held, command }) => {
                self.inner.took_ahead.fetch_add(1, Ordering::Relaxed);
                (held, Some(command))
            }
            None => {
                let Some(slot) = self.call_slot(deadline).await else {
                    return Err(timeout());
                };
                let store = self.empty_store(false);
                (Held { store, _slot: slot }, None)
            }
        };
        enter_call(
            &mut held.store,
            wasi,
            call.network.cloned(),
            Arc::clone(&memory_hit),
            deadline,
        );

        let ended = match own_thread {
            Some(thread) => {
                let engine = self.clone();
                let component = Arc::clone(component);
                let start_ahead = call.start_ahead;
                // What follows the guest (its teardown, the next instance)
                // is the caller's runtime's work, as for any other call.
                let caller = tokio::runtime::Handle::current();
                let guest = thread.run(async move {
                    let outcome = run_guest(&component.pre, &mut held.store, made).await;
                    let _caller = caller.enter();
                    engine.after_answer(held, &component, start_ahead);
                    outcome
                });
                let guest = async {
                    guest.await.unwrap_or_else(|| {
                        Err(wasmtime::Error::msg(
                            "the guest's thread ended without an outcome",
                        ))
                    })
                };
                converse(guest, lines_rx, &stdout, deadline.into(), notifications).await
            }
            None => {
                let guest = run_guest(&component.pre, &mut held.store, made);
                let ended =
                    converse(guest, lines_rx, &stdout, deadline.into(), notifications).await;
                self.after_answer(held, component, call.start_ahead);
                ended
            }
        };

        let stderr_tail = stderr.text();
        let run_error = |failure: GuestFailure| match failure {
            GuestFailure::Timeout => RunError::Timeout {
                deadline_ms: limits.deadline.as_millis() as u64,
                stderr_tail: stderr_tail.clone(),
            },
            _ if stdout.exceeded() => RunError::OutputLimit {
                limit: limits.max_output_bytes,
                stderr_tail: stderr_tail.clone(),
            },
            _ if memory_hit.load(Ordering::Relaxed) => RunError::MemoryLimit {
                limit: self.inner.memory_limit,
                stderr_tail: stderr_tail.clone(),
            },
            GuestFailure::Bad(problem) => RunError::BadResponse {
                problem,
                stderr_tail: stderr_tail.clone(),
            },
            GuestFailure::Trapped(trap) => RunError::Trapped {
                trap,
                stderr_tail: stderr_tail.clone(),
            },
            GuestFailure::Exited(code) => RunError::Crashed {
                status: format!("exit status {code}"),
                stderr_tail: stderr_tail.clone(),
            },
            GuestFailure::NoResponse => RunError::BadResponse {
                problem: "the module exited (status 0) without writing a response line".into(),
                stderr_tail: stderr_tail.clone(),
            },
        };
        match ended {
            Ok(Answered { answer, after }) => {
                host_warnings.extend(answer.warnings);
                if let Some(after) = after {
                    host_warnings.push(format!(
                        "after answering, the module {}",
                        describe_after(after)
                    ));
                }
                Ok(Exchange {
                    notifications: answer.notifications,
                    response: answer.response,
                    stderr_tail,
                    host_warnings,
                })
            }
            Err(failure) => Err(run_error(failure)),
        }
    }
}

/// What one run of a component over raw stdio produced: the lower level the
/// conformance kit needs (arbitrary stdin bytes, including a malformed line
/// or none at all; stdout as written, not parsed).
#[derive(Debug, Clone)]
pub struct RawRun {
    /// Everything the guest wrote to stdout, up to the cap (the write that
    /// crosses it traps the guest).
    pub stdout: Vec<u8>,
    /// The bounded tail of its stderr.
    pub stderr_tail: String,
    /// Whether the guest ended by itself (returned, exited or trapped)
    /// within the timeout; `false` when the host stopped it.
    pub finished: bool,
    /// How it ended, for people (`"exit status: 0"`, `"trapped: ..."`).
    pub status: String,
}

impl WasmEngine {
    /// Wait for one of the pool's instance slots ([`pool`]) until `deadline`;
    /// `None` when every slot stayed busy until then. An instance made
    /// ahead gives its slot up rather than make a call wait.
    async fn call_slot(&self, deadline: Instant) -> Option<CallSlot> {
        loop {
            if let Some(slot) = self.inner.slots.try_acquire() {
                return Some(slot);
            }
            if !self.inner.ahead.give_up_one() {
                break;
            }
        }
        tokio::time::timeout_at(deadline.into(), self.inner.slots.acquire())
            .await
            .ok()
    }

    /// The WASI context of one call: `stdin` then EOF, the given stdout and
    /// stderr, `grants` preopened at their guest paths with exactly their
    /// access, an environment of the call's `secrets` and nothing else, no
    /// network. `on_own_thread`: the guest runs
    /// on a thread of its own (`on_thread.rs`), which its filesystem
    /// operations may block.
    fn call_context(
        &self,
        component: &LoadedComponent,
        stdin: Vec<u8>,
        (stdout, stderr): (CappedStdout, StderrTail),
        (grants, secrets): (&[Grant], &[CallSecret]),
        on_own_thread: bool,
    ) -> Result<WasiCtx, RunError> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdin(MemoryInputPipe::new(stdin))
            .stdout(stdout)
            .stderr(stderr)
            .arg(&component.name)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .allow_blocking_current_thread(on_own_thread);
        // This call's context alone: an instance made ahead has none until
        // its call sets one (`ahead.rs`), so no secret sits in it before.
        for secret in secrets {
            wasi.env(secret.name(), secret.value());
        }
        for grant in grants {
            let perms = match grant.access {
                Access::Read => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            let could_not_grant = |why: &str| RunError::Spawn {
                message: format!(
                    "could not grant root {:?} ({}) at {}: {why}",
                    grant.name,
                    grant.host.display(),
                    grant.guest
                ),
            };
            // Opened through no link first: what the host checked is what
            // the guest gets (`wasm/grant_dir.rs`).
            let folder = match GrantDir::open(&grant.host) {
                Ok(folder) => folder,
                // WASI preopens are directories; granting the folder around
                // a file would grant its neighbours too.
                Err(_) if grant.host.is_file() => {
                    return Err(RunError::Spawn {
                        message: format!(
                            "root {:?} is the file {}, and a component can only be granted folders; point the root at a folder that holds only what the module may see",
                            grant.name,
                            grant.host.display()
                        ),
                    });
                }
                Err(why) => return Err(could_not_grant(&why)),
            };
            let path = folder.path().map_err(|why| could_not_grant(&why))?;
            wasi.preopened_dir(&path, &grant.guest, perms)
                .map_err(|e| could_not_grant(&error_chain(&e)))?;
        }
        Ok(wasi.build())
    }

    /// A store with no WASI context yet (an empty one if the guest asks:
    /// no input, no output, no root, no network) and the memory cap: what
    /// an instance is made in, before the call's context, memory flag and
    /// deadline are set.
    fn empty_store(&self, making_ahead: bool) -> Store<CallState> {
        let state = CallState {
            wasi: None,
            table: ResourceTable::new(),
            limiter: MemoryCap {
                limit: usize::try_from(self.inner.memory_limit).unwrap_or(usize::MAX),
                hit: Arc::new(AtomicBool::new(false)),
            },
            making_ahead,
            wasi_used_ahead: false,
            http: WasiHttpCtx::new(),
            egress: EgressHooks::default(),
        };
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|state| &mut state.limiter);
        store
    }

    /// After a call's answer: tear its instance down, then, for a call the
    /// host let start ahead, make the next call's instance of the same
    /// component (`ahead.rs`). Dropping a store resets the slot's memory,
    /// tables and stack (rewriting what the guest dirtied, discarding the
    /// rest), work the answer need not wait for. On a runtime both run as a
    /// task that first lets the tasks already woken (the one that writes the
    /// answer out) go ahead; the slot stays taken until the instance is
    /// gone, so the pool's bound holds.
    fn after_answer(
        &self,
        held: Held<CallState>,
        component: &Arc<LoadedComponent>,
        start_ahead: bool,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            drop(held);
            return;
        };
        let engine = self.clone();
        let component = Arc::clone(component);
        runtime.spawn(async move {
            tokio::task::yield_now().await;
            drop(held);
            if start_ahead {
                engine.make_ahead(&component).await;
            }
        });
    }

    /// Forget the compiled code (and the descriptor wasmtime holds for it)
    /// and the known digest of every component but `programs`, a
    /// long-running host's whole set after a reload: a server whose
    /// operator replaces a module again and again keeps only what it can
    /// still call. A call in flight keeps its own component until it ends;
    /// a program whose digest cannot be vouched for by its identity now is
    /// simply loaded again by its next call.
    pub(crate) fn keep_loaded_only_for<'a>(&self, programs: impl Iterator<Item = &'a Path>) {
        let programs: std::collections::HashSet<&Path> = programs.collect();
        let wanted: std::collections::HashSet<blake3::Hash> = programs
            .iter()
            .filter_map(|program| self.inner.digests.lookup(program))
            .collect();
        self.inner.digests.keep_only(&programs);
        self.lock_loaded()
            .retain(|digest, _| wanted.contains(digest));
    }

    /// Keep instances made ahead only of the components at `programs` (as
    /// loaded now): what a long-running host still lets start ahead after
    /// the operator's last change. The others are dropped.
    pub(crate) fn keep_made_ahead_only_for<'a>(&self, programs: impl Iterator<Item = &'a Path>) {
        let wanted = programs
            .filter_map(|program| self.loaded_unchanged(program))
            .map(|component| component.digest)
            .collect();
        self.inner.ahead.keep_only(&wanted);
    }

    /// Make the next call's instance of `component` when none is made or
    /// being made and a slot is free; one that overruns [`ahead::MAKING_AT_MOST`],
    /// fails or reaches WASI refuses the component for good (`ahead.rs`).
    /// Never for a component whose instantiation runs its own code.
    pub(crate) async fn make_ahead(&self, component: &LoadedComponent) {
        if component.runs_code_at_instantiation {
            return;
        }
        let ahead = &self.inner.ahead;
        let Some(making) = ahead.start_making(component.digest) else {
            return;
        };
        let Some(slot) = self.inner.slots.try_acquire() else {
            return;
        };
        let mut store = self.empty_store(true);
        // Anything that spins yields, so the time bound can end it.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|_| Ok(UpdateDeadline::Yield(1)));
        let started = Instant::now();
        let made = tokio::time::timeout(
            ahead::MAKING_AT_MOST,
            component.pre.instantiate_async(&mut store),
        )
        .await;
        // The timer ends a making that waits or reaches an epoch tick; one
        // step of host work that overran it, yet finished, is refused too.
        let in_time = started.elapsed() <= ahead::MAKING_AT_MOST;
        match made {
            Ok(Ok(command)) if in_time && !store.data().wasi_used_ahead => {
                store.data_mut().making_ahead = false;
                let made = MadeAhead {
                    held: Held { store, _slot: slot },
                    command,
                };
                // No free slot: a call may be queued for one; it goes first.
                if self.inner.slots.free() > 0 {
                    ahead.put(making, made);
                }
            }
            _ => {
                tracing::warn!(
                    component = %component.name,
                    "making an instance ahead of its call failed or ran guest code; its instances are made at each call"
                );
                ahead.refuse(making);
            }
        }
    }

    /// Run `component` once with `stdin` as its whole standard input, the
    /// `grants` preopened at their guest paths, no network, until it ends or
    /// `timeout` passes; stdout is kept raw, capped at `max_stdout_bytes`.
    ///
    /// Unlike [`WasmEngine::run`] nothing is parsed and a response does not
    /// end the call: the guest runs to its own end, as a process would.
    /// (`modhost conformance`'s caller.)
    pub async fn run_raw(
        &self,
        component: &LoadedComponent,
        stdin: &[u8],
        grants: &[Grant],
        timeout: Duration,
        max_stdout_bytes: u64,
    ) -> Result<RawRun, RunError> {
        let started = Instant::now();
        let (lines_tx, mut lines_rx) = unbounded_channel();
        let stdout = CappedStdout::new(max_stdout_bytes, lines_tx);
        let stderr = StderrTail::default();

        let deadline = started + timeout;
        let Some(_slot) = self.call_slot(deadline).await else {
            return Ok(RawRun {
                stdout: Vec::new(),
                stderr_tail: String::new(),
                finished: false,
                status: format!("not started within {timeout:?}: every instance slot was busy"),
            });
        };
        // The conformance battery's raw runs get no secret.
        let wasi = self.call_context(
            component,
            stdin.to_vec(),
            (stdout.clone(), stderr.clone()),
            (grants, &[]),
            false,
        )?;
        let mut store = self.empty_store(false);
        // The conformance battery's raw runs get no network.
        enter_call(
            &mut store,
            wasi,
            None,
            Arc::new(AtomicBool::new(false)),
            deadline,
        );
        let guest = run_guest(&component.pre, &mut store, None);
        // Dropping the future on timeout drops the instance with it.
        let outcome = tokio::time::timeout_at(deadline.into(), guest).await;
        let (finished, status) = match outcome {
            Err(_) => (false, format!("killed after {timeout:?}")),
            Ok(outcome) => match exit_of(outcome) {
                Ok(()) => (true, "exit status: 0".to_owned()),
                Err(GuestFailure::Timeout) => (false, format!("killed after {timeout:?}")),
                Err(GuestFailure::Exited(code)) => (true, format!("exit status: {code}")),
                Err(GuestFailure::Trapped(trap)) => (true, format!("trapped: {trap}")),
                // exit_of reports neither; keep the mapping total.
                Err(GuestFailure::Bad(problem)) => (true, problem),
                Err(GuestFailure::NoResponse) => (true, "exited".to_owned()),
            },
        };
        let mut raw = Vec::new();
        while let Ok(line) = lines_rx.try_recv() {
            raw.extend_from_slice(&line);
            raw.push(b'\n');
        }
        raw.extend_from_slice(&stdout.take_partial());
        Ok(RawRun {
            stdout: raw,
            stderr_tail: stderr.text(),
            finished,
            status,
        })
    }
}

/// Instantiate the call's instance (unless it was made ahead) and run it:
/// what `converse` drives, on the caller's task or a thread of its own.
async fn run_guest(
    pre: &CommandPre<CallState>,
    store: &mut Store<CallState>,
    made: Option<wasmtime_wasi::p2::bindings::Command>,
) -> wasmtime::Result<Result<(), ()>> {
    let command = match made {
        Some(command) => command,
        None => pre.instantiate_async(&mut *store).await?,
    };
    command.wasi_cli_run().call_run(&mut *store).await
}

/// How a call that produced no usable response ended.
enum GuestFailure {
    Timeout,
    Bad(String),
    Trapped(String),
    Exited(i32),
    NoResponse,
}

/// A call that produced its response; `after` is how the guest misbehaved
/// after answering, if it did (the response stands; the host notes it).
struct Answered {
    answer: modproto::framing::Answer,
    after: Option<GuestFailure>,
}

/// Drive the guest to its end or the deadline, judging stdout lines as they
/// arrive ([`framing::Transcript`]). After the response the guest gets a
/// short grace to return; what it writes meanwhile is judged too (anything
/// but blank lines is `bad_response`). The guest future is dropped (and
/// with it the instance) on return.
async fn converse(
    guest: impl Future<Output = wasmtime::Result<Result<(), ()>>>,
    mut lines: UnboundedReceiver<Vec<u8>>,
    stdout: &CappedStdout,
    deadline: tokio::time::Instant,
    sink: Option<&NotificationSink>,
) -> Result<Answered, GuestFailure> {
    let mut guest = std::pin::pin!(guest);
    let mut transcript = framing::transcript();

    // Phase 1: until the response, the guest's end, or the deadline.
    let ended = loop {
        tokio::select! {
            biased;
            Some(line) = lines.recv() => {
                framing::take_line(&mut transcript, sink, &line).map_err(GuestFailure::Bad)?;
                if transcript.answered() {
                    break None;
                }
            }
            outcome = &mut guest => break Some(exit_of(outcome)),
            () = tokio::time::sleep_until(deadline) => return Err(GuestFailure::Timeout),
        }
    };
    // Phase 2: answered; a short grace for the guest to return on its own.
    let ended = match ended {
        Some(ended) => Some(ended),
        None => {
            let grace = deadline.min(tokio::time::Instant::now() + EXIT_GRACE);
            loop {
                tokio::select! {
                    biased;
                    Some(line) = lines.recv() => framing::take_line(&mut transcript, sink, &line).map_err(GuestFailure::Bad)?,
                    outcome = &mut guest => break Some(exit_of(outcome)),
                    () = tokio::time::sleep_until(grace) => break None,
                }
            }
        }
    };
    // Every line the guest wrote is queued by now; a last line without its
    // newline still counts, as it does for a native module at EOF.
    while let Ok(line) = lines.try_recv() {
        framing::take_line(&mut transcript, sink, &line).map_err(GuestFailure::Bad)?;
    }
    let partial = stdout.take_partial();
    if !partial.is_empty() {
        framing::take_line(&mut transcript, sink, &partial).map_err(GuestFailure::Bad)?;
    }
    let after = match ended {
        Some(Ok(())) => None,
        Some(Err(failure)) => Some(failure),
        None => Some(GuestFailure::Timeout),
    };
    match transcript.finish() {
        Some(answer) => Ok(Answered { answer, after }),
        None => Err(after.unwrap_or(GuestFailure::NoResponse)),
    }
}

/// How a guest misbehaved after its response (the response stands).
fn describe_after(failure: GuestFailure) -> String {
    match failure {
        GuestFailure::Timeout => "did not return within the grace period and was stopped".into(),
        GuestFailure::Bad(problem) => format!("wrote more: {problem}"),
        GuestFailure::Trapped(trap) => format!("trapped: {trap}"),
        GuestFailure::Exited(code) => format!("exited with status {code}"),
        GuestFailure::NoResponse => "exited".into(),
    }
}

/// What the end of `wasi:cli/run` means: `Ok` for a clean exit.
fn exit_of(outcome: wasmtime::Result<Result<(), ()>>) -> Result<(), GuestFailure> {
    match outcome {
        Ok(Ok(())) => Ok(()),
        // `run` returned its error variant: what a `main` returning `Err` does.
        Ok(Err(())) => Err(GuestFailure::Exited(1)),
        Err(error) => match error.downcast_ref::<I32Exit>() {
            Some(I32Exit(0)) => Ok(()),
            Some(I32Exit(code)) => Err(GuestFailure::Exited(*code)),
            None if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) => {
                Err(GuestFailure::Timeout)
            }
            None => Err(GuestFailure::Trapped(error_chain(&error))),
        },
    }
}

/// An error and its causes on one line ("a: b: c").
fn error_chain(error: &wasmtime::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !text.is_empty() {
            // wasmtime repeats a cause in its context now and then.
            if text.contains(&cause) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// Give `store` (made at the call or ahead of it) to one call: everything
/// the guest can reach is the call's from here on: its WASI context, its
/// memory flag, and epoch ticks that yield to the executor (so a spinning
/// guest lets the deadline timer and other tasks run) and trap once
/// `deadline` passed.
fn enter_call(
    store: &mut Store<CallState>,
    wasi: WasiCtx,
    network: Option<crate::CallNetwork>,
    memory_hit: Arc<AtomicBool>,
    deadline: Instant,
) {
    let state = store.data_mut();
    state.wasi = Some(wasi);
    state.egress.network = network;
    state.limiter.hit = memory_hit;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

/// What one call's store holds.
struct CallState {
    /// The call's context; `None` until the call sets it.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    limiter: MemoryCap,
    /// While the instance is made ahead of its call (`ahead.rs`).
    making_ahead: bool,
    /// Whether the guest used WASI then: its instantiation runs guest code.
    wasi_used_ahead: bool,
    http: WasiHttpCtx,
    /// Where its `wasi:http` requests go: the call's egress proxy, set with
    /// its context; none until then.
    egress: EgressHooks,
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        if self.making_ahead {
            self.wasi_used_ahead = true;
        }
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Every WASI import reaches the context through here.
        if self.making_ahead {
            self.wasi_used_ahead = true;
        }
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| {
                // Only guest code running at instantiation gets here.
                WasiCtxBuilder::new()
                    .allow_tcp(false)
                    .allow_udp(false)
                    .allow_ip_name_lookup(false)
                    .build()
            }),
            table: &mut self.table,
        }
    }
}

/// Refuses memory growth past the cap and remembers that it did, so the
/// abort that usually follows is reported as `memory_limit`, not a trap.
struct MemoryCap {
    limit: usize,
    hit: Arc<AtomicBool>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold references, not data; a million entries is far beyond
        // any honest module and still bounded (the pool's table slots are
        // this size too).
        Ok(desired <= pool::TABLE_ELEMENTS)
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped. The
/// drop wakes the thread rather than waiting out its tick: with a plain
/// sleep, every host that ended waited in the join for up to a tick (a
/// one-shot `modhost invoke` of the SDK's echo component: 17.2 ms p50,
/// 10.6 ms with the wake).
struct EpochTicker {
    /// Dropped to stop the thread.
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> std::io::Result<EpochTicker> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("modhost-epoch".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(EPOCH_TICK)
                {
                    engine.increment_epoch();
                }
            })?;
        Ok(EpochTicker {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What an engine holds, for the tests of the crates above and for
/// diagnostics: read-only looks that change nothing.
impl WasmEngine {
    /// Whether it holds an instance made ahead of the component at
    /// `program`; `None` while that component is not loaded.
    pub fn holds_ahead_of(&self, program: &Path) -> Option<bool> {
        let loaded = self.loaded_unchanged(program)?;
        Some(self.inner.ahead.holds(&loaded.digest))
    }

    /// The digest it knows `program` by, when it loaded it.
    pub fn digest_of(&self, program: &Path) -> Option<blake3::Hash> {
        self.loaded_unchanged(program).map(|loaded| loaded.digest)
    }

    /// What it keeps of the component with `digest`: (its compiled code, an
    /// instance made ahead).
    pub fn keeps(&self, digest: &blake3::Hash) -> (bool, bool) {
        (
            self.lock_loaded().contains_key(digest),
            self.inner.ahead.holds(digest),
        )
    }

    /// How many calls were served by an instance made ahead.
    pub fn took_ahead(&self) -> usize {
        self.inner.took_ahead.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! The hostile guests of `tests/guests`, one call each. The guests are
    //! built by the first test that needs them (a nested `$CARGO build
    //! --target wasm32-wasip2 --profile wasm-test -p files -p modhost-guests`, once per
    //! test process); a failed build fails the test with how to fix it, never
    //! skips it.

    use std::os::unix::fs::PermissionsExt;
    use std::sync::OnceLock;

    use serde_json::{Value, json};

    use super::*;
    use crate::CallLimits;
    use modhost_sandbox::Grant;
    pub(crate) use modhost_test_support::guests::{guest, target_dir};

    pub(crate) const TEST_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;

    /// One engine for all tests, with its cache in the target dir so the
    /// (slow, unoptimized) compile happens once per guest build, not per run.
    fn engine() -> &'static WasmEngine {
        static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
        ENGINE.get_or_init(|| {
            let cache = target_dir().join("modhost-wasm-test-cache");
            WasmEngine::new(&cache, TEST_MEMORY_LIMIT).expect("the wasm engine")
        })
    }

    /// An invoke request whose `input` is `input` (the guests read their
    /// roots at `/roots/<name>` when the request names none).
    pub(crate) fn request(input: &Value) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "method": "invoke", "params": {"input": input}})
            .to_string()
    }

    async fn call_guest(
        name: &str,
        input: Value,
        grants: &[Grant],
        deadline: Duration,
    ) -> Result<Exchange, RunError> {
        let engine = engine();
        let component = engine
            .load_async(&guest(name))
            .await
            .expect("the guest loads");
        call_on(engine, &component, input, grants, deadline).await
    }

    /// A call of `line` with no grants, not allowed to start anything
    /// ahead, and a deadline far beyond the test.
    pub(crate) fn long_call(line: &str) -> Call<'_> {
        Call {
            request_line: line,
            limits: CallLimits {
                deadline: Duration::from_secs(30),
                ..CallLimits::default()
            },
            grants: &[],
            executables: &[],
            module_writes: &[],
            network: None,
            start_ahead: false,
            secrets: &[],
        }
    }

    /// A call of `line` with `grants` and a [`SHORT`] deadline, not allowed
    /// to start anything ahead (so every slot taken is a call's).
    fn short_call<'a>(line: &'a str, grants: &'a [Grant]) -> Call<'a> {
        Call {
            grants,
            limits: CallLimits {
                deadline: SHORT,
                max_output_bytes: 256 * 1024,
                ..CallLimits::default()
            },
            ..long_call(line)
        }
    }

    async fn call_on(
        engine: &WasmEngine,
        component: &Arc<LoadedComponent>,
        input: Value,
        grants: &[Grant],
        deadline: Duration,
    ) -> Result<Exchange, RunError> {
        let line = request(&input);
        let call = Call {
            request_line: &line,
            limits: CallLimits {
                deadline,
                max_output_bytes: 256 * 1024,
                ..CallLimits::default()
            },
            grants,
            executables: &[],
            module_writes: &[],
            network: None,
            // As a long-running host's allowed call: instances are made
            // ahead of the next one (`ahead.rs`).
            start_ahead: true,
            secrets: &[],
        };
        engine.run(component, &call, None).await
    }

    fn grant(name: &str, host: &Path, access: Access) -> Grant {
        Grant {
            name: name.into(),
            host: host.to_owned(),
            guest: format!("/roots/{name}"),
            access,
        }
    }

    const SHORT: Duration = Duration::from_millis(400);
    const LONG: Duration = Duration::from_secs(20);

    #[tokio::test]
    async fn echo_answers_and_sees_only_its_grants() {
        let dir = tempfile::tempdir().unwrap();
        let grants = [grant("data", dir.path(), Access::Read)];
        let exchange = call_guest("echo", json!({"inspect": true}), &grants, LONG)
            .await
            .unwrap();
        let result = exchange.response.outcome.unwrap()["output"].clone();
        assert_eq!(result["env"], json!([]), "no environment leaks in");
        assert_eq!(result["data"], true, "the grant is there");
        for elsewhere in ["roots", "slash", "tmp", "cwd"] {
            assert_eq!(
                result[elsewhere], false,
                "{elsewhere}: nothing but the grant is visible"
            );
        }
    }

    /// A call's secrets are its guest's environment, and only that call's:
    /// the next call of the same component (its instance made ahead while
    /// the first answered) sees none.
    #[tokio::test]
    async fn a_calls_secrets_are_its_guests_environment_and_no_other_calls() {
        let engine = engine();
        let component = engine.load_async(&guest("echo")).await.unwrap();
        let line = request(&json!({"inspect": true}));
        let secrets = [CallSecret::new("GUEST_TOKEN", "guest-secret-value")];
        let with_secret = Call {
            secrets: &secrets,
            start_ahead: true,
            ..long_call(&line)
        };
        let env = |exchange: Exchange| exchange.response.outcome.unwrap()["output"]["env"].clone();
        let seen = env(engine.run(&component, &with_secret, None).await.unwrap());
        assert_eq!(seen, json!(["GUEST_TOKEN=guest-secret-value"]));
        let without = Call {
            start_ahead: true,
            ..long_call(&line)
        };
        for _ in 0..2 {
            let seen = env(engine.run(&component, &without, None).await.unwrap());
            assert_eq!(seen, json!([]), "a secret outlived its call");
        }
    }

    #[tokio::test]
    async fn notifications_arrive_live_and_in_the_exchange() {
        let engine = engine();
        let component = engine.load_async(&guest("echo")).await.unwrap();
        let line = request(&json!({"progress": true}));
        let call = Call {
            request_line: &line,
            limits: CallLimits::default(),
            grants: &[],
            executables: &[],
            module_writes: &[],
            network: None,
            start_ahead: false,
            secrets: &[],
        };
        let (tx, mut rx) = unbounded_channel();
        let exchange = engine.run(&component, &call, Some(&tx)).await.unwrap();
        assert_eq!(exchange.notifications.len(), 1);
        assert_eq!(rx.try_recv().unwrap().method, "progress");
        assert_eq!(
            exchange.response.outcome.unwrap()["output"]["echo"]["progress"],
            true
        );
    }

    #[tokio::test]
    async fn spinning_guest_times_out() {
        let err = call_guest("spin", json!({}), &[], SHORT).await.unwrap_err();
        assert_eq!(err.kind(), "timeout", "{err}");
    }

    #[tokio::test]
    async fn sleeping_guest_times_out() {
        let err = call_guest("sleep", json!({}), &[], SHORT)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "timeout", "{err}");
    }

    #[tokio::test]
    async fn hoarding_guest_hits_the_memory_limit() {
        let err = call_guest("alloc", json!({}), &[], LONG).await.unwrap_err();
        assert_eq!(err.kind(), "memory_limit", "{err}");
    }

    #[tokio::test]
    async fn flooding_guest_hits_the_output_limit() {
        let err = call_guest("flood", json!({}), &[], LONG).await.unwrap_err();
        assert_eq!(err.kind(), "output_limit", "{err}");
    }

    #[tokio::test]
    async fn panicking_guest_is_trapped_with_its_message() {
        let err = call_guest("panic", json!({}), &[], LONG).await.unwrap_err();
        assert_eq!(err.kind(), "trapped", "{err}");
        assert!(
            err.stderr_tail().contains("deliberate panic"),
            "{:?}",
            err.stderr_tail()
        );
    }

    #[tokio::test]
    async fn silent_exit_is_a_crash_with_its_status() {
        let err = call_guest("silent_exit", json!({}), &[], LONG)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "crashed", "{err}");
        // WASI p2 exits carry only success/failure: `exit(3)` arrives as 1.
        assert!(err.to_string().contains("exit status 1"), "{err}");
        assert!(err.stderr_tail().contains("leaving without a word"));
    }

    #[tokio::test]
    async fn read_only_grant_stays_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("existing.txt"), b"original").unwrap();
        let grants = [grant("ro", dir.path(), Access::Read)];
        let exchange = call_guest("write_readonly", json!({}), &grants, LONG)
            .await
            .unwrap();
        let error = exchange
            .response
            .outcome
            .expect_err("every write must fail");
        assert_eq!(error.kind().map(|k| k.as_str()), Some("denied"), "{error}");
        assert_eq!(
            std::fs::read(dir.path().join("existing.txt")).unwrap(),
            b"original"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["existing.txt"]);
    }

    #[tokio::test]
    async fn escapes_from_the_root_fail() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("rw");
        std::fs::create_dir(&root).unwrap();
        let outside = outer.path().join("outside.txt");
        std::fs::write(&outside, b"secret").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let grants = [grant("rw", &root, Access::ReadWrite)];
        let params = json!({"outside": outside.to_str().unwrap()});
        let exchange = call_guest("escape", params, &grants, LONG).await.unwrap();
        let error = exchange
            .response
            .outcome
            .expect_err("every escape must fail");
        assert_eq!(
            error.kind().map(|k| k.as_str()),
            Some("path_escape"),
            "{error}"
        );
        assert_eq!(std::fs::read(&outside).unwrap(), b"secret");
        let mut names: Vec<_> = std::fs::read_dir(outer.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["outside.txt", "rw"],
            "nothing was created beside the root"
        );
    }

    #[tokio::test]
    async fn the_host_goes_on_after_every_kind_of_failure() {
        for hostile in ["spin", "sleep", "flood", "panic", "silent_exit", "alloc"] {
            call_guest(hostile, json!({}), &[], SHORT)
                .await
                .unwrap_err();
        }
        let exchange = call_guest("echo", json!({"n": 1}), &[], LONG)
            .await
            .unwrap();
        assert_eq!(
            exchange.response.outcome.unwrap(),
            json!({"output": {"echo": {"n": 1}}})
        );
    }

    #[tokio::test]
    async fn nothing_a_call_leaves_in_its_instance_reaches_the_next_call() {
        // Instances are pooled: the next call of the same component lands in
        // the slot this one left. Each call leaves a marker in a static and a
        // scrambled token in the heap; the next one must find neither, also
        // after a call that ended in a trap with its memory full.
        let token = "left-behind-by-an-earlier-call";
        for round in 0..4 {
            if round == 2 {
                call_guest("alloc", json!({}), &[], LONG).await.unwrap_err();
            }
            let exchange = call_guest("remember", json!({"token": token}), &[], LONG)
                .await
                .unwrap();
            let seen = exchange.response.outcome.unwrap()["output"].clone();
            assert_eq!(
                seen,
                json!({"counter": 7, "found": false, "zeroed": true, "own_traces_found": true}),
                "call {round} saw state from an earlier call"
            );
        }
    }

    /// Slots keep the read/write extent an earlier call grew their memory
    /// to (no guard pages, `pool.rs`): an instance whose memory is one page
    /// must still trap reading past it, where an earlier call of the same
    /// component grew memory and left a byte. Each call flips a coin on
    /// the clock: grow 16 pages and write there, or read there at its
    /// initial size; a read that returns is the attack working.
    #[tokio::test]
    async fn memory_an_earlier_call_grew_is_beyond_the_reach_of_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let engine = own_engine();
        let text = r#"(component
            (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock (export "now" (func (result u64)))))
            (core func $now (canon lower (func $clock "now")))
            (core module $m
                (import "host" "now" (func $now (result i64)))
                (memory 1)
                (func (export "run") (result i32)
                    (local $t i64)
                    (local.set $t (call $now))
                    (if (i64.eqz (i64.and (i64.xor (i64.shr_u (local.get $t) (i64.const 4))
                                                   (i64.shr_u (local.get $t) (i64.const 11)))
                                          (i64.const 1)))
                        (then
                            (drop (memory.grow (i32.const 16)))
                            (i32.store8 (i32.const 327680) (i32.const 65))
                            (return (i32.const 0))))
                    ;; Past the one page this instance has: must trap.
                    (drop (i32.load8_u (i32.const 327680)))
                    (i32.const 1)))
            (core instance $host (export "now" (func $now)))
            (core instance $i (instantiate $m (with "host" (instance $host))))
            (func $run (result (result)) (canon lift (core func $i "run")))
            (instance $cli (export "run" (func $run)))
            (export "wasi:cli/run@0.2.0" (instance $cli)))"#;
        let component = engine
            .load_async(&write_component(dir.path(), "grow_or_peek", text))
            .await
            .unwrap();
        let (mut grew, mut trapped) = (0, 0);
        for call in 0..200 {
            let err = call_on(&engine, &component, json!({}), &[], LONG)
                .await
                .unwrap_err();
            let message = err.to_string();
            if message.contains("out of bounds memory access") {
                trapped += 1;
            } else {
                // Ran to its end without a word: it grew memory.
                assert_eq!(err.kind(), "bad_response", "call {call}: {message}");
                grew += 1;
            }
            if grew > 4 && trapped > 4 {
                return;
            }
        }
        panic!("the coin never settled both ways: {grew} grew, {trapped} trapped");
    }

    #[tokio::test]
    async fn a_call_beyond_the_pool_waits_for_a_slot_instead_of_failing() {
        // Every slot held by a guest that sleeps until its deadline.
        let mut sleepers = tokio::task::JoinSet::new();
        for _ in 0..pool::SLOTS {
            sleepers.spawn(call_guest("sleep", json!({}), &[], SHORT));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let exchange = call_guest("echo", json!({"n": 1}), &[], LONG)
            .await
            .expect("the call waits for a slot and runs");
        assert_eq!(
            exchange.response.outcome.unwrap(),
            json!({"output": {"echo": {"n": 1}}})
        );
        while let Some(slept) = sleepers.join_next().await {
            let err = slept.unwrap().unwrap_err();
            assert_eq!(err.kind(), "timeout", "{err}");
        }
    }

    /// The hostile guests end the same way with a root (their guest on a
    /// thread of its own, `on_thread.rs`) as without: the deadline, the
    /// memory and output caps, traps and exits are the call's, wherever the
    /// guest runs. After each, the thread and the slot come back (the
    /// sleeper's at its deadline, not after its hour).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_guests_with_a_root_end_as_without_and_give_their_thread_back() {
        let engine = own_engine();
        let dir = tempfile::tempdir().unwrap();
        let root = [grant("data", dir.path(), Access::Read)];
        for (hostile, kind) in [
            ("spin", "timeout"),
            ("sleep", "timeout"),
            ("flood", "output_limit"),
            ("panic", "trapped"),
            ("silent_exit", "crashed"),
            ("alloc", "memory_limit"),
        ] {
            let component = engine.load_async(&guest(hostile)).await.unwrap();
            let line = request(&json!({}));
            for grants in [&[][..], &root[..]] {
                let call = short_call(&line, grants);
                let taken = engine.inner.guest_threads.taken();
                let call = engine.run(&component, &call, None);
                let err = call.await.unwrap_err();
                assert_eq!(
                    err.kind(),
                    kind,
                    "{hostile} with {} roots: {err}",
                    grants.len()
                );
                assert_eq!(
                    engine.inner.guest_threads.taken() - taken,
                    grants.len(),
                    "{hostile}: a guest runs on a thread of its own exactly when it has roots"
                );
                wait_all_free(&engine, hostile).await;
            }
        }
    }

    /// Wait until every guest thread and every instance slot of `engine` is
    /// free again (a dropped guest gives them back on its thread).
    pub(crate) async fn wait_all_free(engine: &WasmEngine, after: &str) {
        let all_free = || {
            engine.inner.guest_threads.free() == on_thread::MAX_THREADS
                && engine.inner.slots.free() == pool::SLOTS as usize
        };
        tokio::time::timeout(Duration::from_secs(10), async {
            while !all_free() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "after {after}: {} of {} guest threads and {} of {} slots free",
                engine.inner.guest_threads.free(),
                on_thread::MAX_THREADS,
                engine.inner.slots.free(),
                pool::SLOTS
            )
        });
    }

    /// The attack: a guest opens a fifo in its root, and nobody ever opens
    /// its other end; its thread is stuck in the kernel, where no timer
    /// reaches it. Call after call, each still ends at its deadline. Stuck
    /// guests hold `MAX_THREADS` threads and slots and no more: the calls
    /// with roots beyond wait for a thread and time out, holding nothing,
    /// and none of them leaves a thread of the caller's runtime stuck in
    /// the kernel (the blocking pool the rest of the host needs). Calls
    /// without roots go on being served. Once the fifo is opened, every
    /// stuck guest is dropped and its thread and slot come back.
    #[test]
    fn guests_stuck_in_the_kernel_hold_neither_their_deadline_nor_more_than_their_share() {
        const CALLER: &str = "stuck-caller";
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(CALLER)
            .enable_all()
            .build()
            .unwrap();
        let engine = own_engine();
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        modhost_test_support::modules::make_fifo(&fifo, 0o600);
        // Whatever happens, the fifo is opened at the end, and the threads
        // stuck on it return.
        let release = OpenedOnDrop(fifo.clone());
        let root = [grant("data", dir.path(), Access::Read)];
        let stuck = request(&json!({"read": "fifo"}));
        let plain = request(&json!({"n": 1}));
        runtime.block_on(async {
            let echo = engine.load_async(&guest("echo")).await.unwrap();
            for n in 0..on_thread::MAX_THREADS + 3 {
                let ended = tokio::time::timeout(
                    Duration::from_secs(10),
                    engine.run(&echo, &short_call(&stuck, &root), None),
                )
                .await
                .unwrap_or_else(|_| panic!("stuck call {n} outlived its deadline"));
                let err = ended.unwrap_err();
                assert_eq!(err.kind(), "timeout", "stuck call {n}: {err}");
            }
            assert_eq!(
                engine.inner.guest_threads.free(),
                0,
                "the first stuck calls hold every guest thread"
            );
            assert_eq!(
                engine.inner.slots.free(),
                pool::SLOTS as usize - on_thread::MAX_THREADS,
                "stuck guests hold only the slots of their threads"
            );
            assert_eq!(
                threads_stuck_on_a_fifo(CALLER),
                0,
                "no thread of the caller's runtime is stuck in the kernel"
            );
            let exchange = engine
                .run(&echo, &short_call(&plain, &[]), None)
                .await
                .expect("a call without roots is served while guests are stuck");
            assert_eq!(
                exchange.response.outcome.unwrap()["output"],
                json!({"echo": {"n": 1}})
            );

            // The other end opened (and closed): every stuck open returns.
            drop(release);
            wait_all_free(&engine, "the fifo was opened").await;
        });
    }

    /// How many threads of this process whose name starts with `name` wait
    /// in the kernel for a fifo's other end.
    fn threads_stuck_on_a_fifo(name: &str) -> usize {
        let read =
            |task: &Path, file: &str| std::fs::read_to_string(task.join(file)).unwrap_or_default();
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|task| task.unwrap().path())
            .filter(|task| {
                read(task, "comm").starts_with(name) && read(task, "wchan") == "wait_for_partner"
            })
            .count()
    }

    /// Opens its fifo for writing, and closes it, when dropped: every open
    /// for reading blocked on it returns.
    struct OpenedOnDrop(PathBuf);

    impl Drop for OpenedOnDrop {
        fn drop(&mut self) {
            use std::os::unix::fs::OpenOptionsExt;
            // Never blocks: fails when no reader waits.
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.0);
        }
    }

    /// An engine of its own, so what it makes ahead is this test's alone
    /// (the compiled cache is shared: a load is a deserialize).
    fn own_engine() -> WasmEngine {
        let cache = target_dir().join("modhost-wasm-test-cache");
        WasmEngine::new(&cache, TEST_MEMORY_LIMIT).expect("the wasm engine")
    }

    /// Wait until the next instance of `component` is made ahead (a task
    /// does it after each answer).
    async fn wait_made_ahead(engine: &WasmEngine, component: &LoadedComponent) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !engine.inner.ahead.holds(&component.digest) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("an instance is made ahead after a call");
    }

    /// A reload forgets what it no longer serves: a server whose operator
    /// replaces a module again and again would otherwise keep every
    /// version's machine code (and a descriptor for each) for its life. A
    /// call that already holds a forgotten component still runs it.
    #[tokio::test]
    async fn a_reload_keeps_only_the_compiled_code_of_what_it_still_serves() {
        let engine = own_engine();
        let (echo, remember) = (guest("echo"), guest("remember"));
        // An identity vouches for a digest only once its file has settled
        // (`RACY`); this run may have built the guests a moment ago.
        for program in [&echo, &remember] {
            while !FileIdentity::of_path(program)
                .unwrap()
                .settled_at(std::time::SystemTime::now())
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let kept = engine.load_async(&echo).await.unwrap();
        let dropped = engine.load_async(&remember).await.unwrap();
        engine.keep_loaded_only_for([echo.as_path()].into_iter());
        assert!(engine.keeps(&kept.digest).0, "echo is still served");
        assert!(Arc::ptr_eq(&engine.load(&echo).unwrap(), &kept));
        assert!(!engine.keeps(&dropped.digest).0, "remember was kept");
        assert!(engine.digest_of(&remember).is_none());
        let exchange = call_on(&engine, &dropped, json!({"token": "t"}), &[], LONG)
            .await
            .unwrap();
        assert!(exchange.response.outcome.is_ok(), "a held component runs");
        let again = engine.load_async(&remember).await.unwrap();
        assert!(!Arc::ptr_eq(&again, &dropped), "loaded anew");
    }

    #[tokio::test]
    async fn an_instance_made_ahead_holds_nothing_of_the_last_call_and_only_its_own_grants() {
        let engine = own_engine();
        let echo = engine.load_async(&guest("echo")).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let grants = [grant("data", dir.path(), Access::Read)];
        let inspect = json!({"inspect": true});
        let granted = call_on(&engine, &echo, inspect.clone(), &grants, LONG)
            .await
            .unwrap();
        assert_eq!(granted.response.outcome.unwrap()["output"]["data"], true);

        // Made while the last call's grant was still fresh: this call, with
        // no grant, must see neither it nor anything else.
        wait_made_ahead(&engine, &echo).await;
        let taken = engine.took_ahead();
        let bare = call_on(&engine, &echo, inspect.clone(), &[], LONG)
            .await
            .unwrap();
        assert_eq!(engine.took_ahead(), taken + 1, "made ahead, then taken");
        let seen = bare.response.outcome.unwrap()["output"].clone();
        assert_eq!(seen["env"], json!([]), "no environment leaks in");
        for elsewhere in ["data", "roots", "slash", "tmp", "cwd"] {
            assert_eq!(seen[elsewhere], false, "{elsewhere} is visible: {seen}");
        }
        // And the grants of the call that takes it are there.
        wait_made_ahead(&engine, &echo).await;
        let regranted = call_on(&engine, &echo, inspect, &grants, LONG)
            .await
            .unwrap();
        assert_eq!(regranted.response.outcome.unwrap()["output"]["data"], true);
        assert_eq!(engine.took_ahead(), taken + 2);

        // Nothing a call leaves in memory or in a static reaches the next
        // call's instance, made ahead in the slot the last one left.
        let remember = engine.load_async(&guest("remember")).await.unwrap();
        for round in 0..3 {
            if round > 0 {
                wait_made_ahead(&engine, &remember).await;
            }
            let exchange = call_on(
                &engine,
                &remember,
                json!({"token": "left-behind"}),
                &[],
                LONG,
            )
            .await
            .unwrap();
            assert_eq!(
                exchange.response.outcome.unwrap()["output"],
                json!({"counter": 7, "found": false, "zeroed": true, "own_traces_found": true}),
                "call {round} saw state from an earlier call"
            );
        }
        assert_eq!(engine.took_ahead(), taken + 4);
    }

    #[tokio::test]
    async fn an_instance_made_ahead_keeps_the_calls_own_bounds() {
        let engine = own_engine();
        for (name, kind) in [
            ("spin", "timeout"),
            ("sleep", "timeout"),
            ("alloc", "memory_limit"),
            ("flood", "output_limit"),
        ] {
            let component = engine.load_async(&guest(name)).await.unwrap();
            call_on(&engine, &component, json!({}), &[], SHORT)
                .await
                .unwrap_err();
            wait_made_ahead(&engine, &component).await;
            let taken = engine.took_ahead();
            let started = Instant::now();
            let err = call_on(&engine, &component, json!({}), &[], SHORT)
                .await
                .unwrap_err();
            assert_eq!(engine.took_ahead(), taken + 1, "{name}: made ahead");
            assert_eq!(err.kind(), kind, "{name}: {err}");
            assert!(
                started.elapsed() < SHORT + Duration::from_secs(2),
                "{name}: ended {:?} after a {SHORT:?} deadline",
                started.elapsed()
            );
        }
    }

    /// A component of one core module, given the clock's `now` as
    /// `host.now`, whose `start` function (run at instantiation) does
    /// `start`, and whose `run` returns at once.
    fn with_start(start: &str) -> String {
        format!(
            r#"(component
                (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock (export "now" (func (result u64)))))
                (core func $now (canon lower (func $clock "now")))
                (core module $m
                    (import "host" "now" (func $now (result i64)))
                    (func $start {start})
                    (start $start)
                    (func (export "run") (result i32) (i32.const 0)))
                (core instance $host (export "now" (func $now)))
                (core instance $i (instantiate $m (with "host" (instance $host))))
                (func $run (result (result)) (canon lift (core func $i "run")))
                (instance $cli (export "run" (func $run)))
                (export "wasi:cli/run@0.2.0" (instance $cli)))"#
        )
    }

    /// The clock's `subscribe-duration` and the pollable's `block`,
    /// lowered as `$subscribe` and `$block`.
    const CLOCK_WAIT: &str = r#"
        (import "wasi:io/poll@0.2.0" (instance $poll
            (export "pollable" (type $pollable (sub resource)))
            (export "[method]pollable.block" (func (param "self" (borrow $pollable))))))
        (alias export $poll "pollable" (type $pollable))
        (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
            (alias outer 1 $pollable (type $pollable))
            (export "subscribe-duration" (func (param "when" u64) (result (own $pollable))))))
        (core func $subscribe (canon lower (func $clock "subscribe-duration")))
        (core func $block (canon lower (func $poll "[method]pollable.block")))"#;

    /// A start function that waits on a monotonic-clock pollable that
    /// never fires (`u64::MAX` ns).
    fn waits_at_instantiation() -> String {
        format!(
            r#"(component
        {CLOCK_WAIT}
        (core module $m
            (import "host" "subscribe" (func $subscribe (param i64) (result i32)))
            (import "host" "block" (func $block (param i32)))
            (func $start (call $block (call $subscribe (i64.const -1))))
            (start $start)
            (func (export "run") (result i32) (i32.const 0)))
        (core instance $host
            (export "subscribe" (func $subscribe))
            (export "block" (func $block)))
        (core instance $i (instantiate $m (with "host" (instance $host))))
        (func $run (result (result)) (canon lift (core func $i "run")))
        (instance $cli (export "run" (func $run)))
        (export "wasi:cli/run@0.2.0" (instance $cli)))"#
        )
    }

    /// The same wait, only when the guest sees no argument: only while it
    /// would be made ahead (a call's context has the component's name as
    /// argv[0]), so each call of it ends at once.
    fn waits_only_when_made_ahead() -> String {
        format!(
            r#"(component
        (core module $libc
            (memory (export "memory") 1)
            (global $next (mut i32) (i32.const 1024))
            (func (export "realloc") (param i32 i32 i32 i32) (result i32)
                (local $at i32)
                (local.set $at (global.get $next))
                (global.set $next (i32.add (local.get $at) (local.get 3)))
                (local.get $at)))
        (core instance $libc (instantiate $libc))
        (alias core export $libc "memory" (core memory $mem))
        (alias core export $libc "realloc" (core func $realloc))
        (import "wasi:cli/environment@0.2.0" (instance $env
            (export "get-arguments" (func (result (list string))))))
        {CLOCK_WAIT}
        (core func $args (canon lower (func $env "get-arguments") (memory $mem) (realloc $realloc)))
        (core module $m
            (import "libc" "memory" (memory 1))
            (import "host" "args" (func $args (param i32)))
            (import "host" "subscribe" (func $subscribe (param i64) (result i32)))
            (import "host" "block" (func $block (param i32)))
            (func $start
                (call $args (i32.const 0))
                (if (i32.eqz (i32.load offset=4 (i32.const 0)))
                    (then (call $block (call $subscribe (i64.const -1))))))
            (start $start)
            (func (export "run") (result i32) (i32.const 0)))
        (core instance $host
            (export "args" (func $args))
            (export "subscribe" (func $subscribe))
            (export "block" (func $block)))
        (core instance $i (instantiate $m
            (with "libc" (instance $libc))
            (with "host" (instance $host))))
        (func $run (result (result)) (canon lift (core func $i "run")))
        (instance $cli (export "run" (func $run)))
        (export "wasi:cli/run@0.2.0" (instance $cli)))"#
        )
    }

    fn write_component(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(format!("{name}.wasm"));
        let bytes = wat::parse_str(text).expect("the test component parses");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn code_at_instantiation_is_read_from_the_bytes() {
        for name in ["echo", "remember", "spin"] {
            let bytes = std::fs::read(guest(name)).unwrap();
            assert!(!ahead::runs_code_at_instantiation(&bytes), "{name}");
        }
        let no_start = with_start("").replace("(start $start)", "");
        for (text, runs) in [
            (no_start, false),
            (with_start(""), true),
            (waits_at_instantiation(), true),
            // A start one component down.
            (
                "(component (component (core module $m (func $s) (start $s)) (core instance (instantiate $m))))".to_owned(),
                true,
            ),
        ] {
            let bytes = wat::parse_str(&text).expect("the test component parses");
            assert_eq!(ahead::runs_code_at_instantiation(&bytes), runs, "{text}");
        }
        assert!(ahead::runs_code_at_instantiation(
            b"\0asm\x0d\0\x01\0\x01\xff"
        ));
    }

    /// The attack: guest code that runs at instantiation, which an instance
    /// made ahead would run outside any call and before its approval:
    /// spinning, reading the clock, waiting on it (for ever, or only when
    /// it sees no call's context). None of it is ever made ahead; each call
    /// runs it within its own deadline, and no slot stays taken: a call of
    /// another component still runs after all of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_component_that_runs_code_at_instantiation_is_never_made_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let engine = own_engine();
        let cases = [
            (
                "spins",
                with_start("(loop $forever (br $forever))"),
                "timeout",
            ),
            (
                "reads_clock",
                with_start("(drop (call $now))"),
                "bad_response",
            ),
            ("waits", waits_at_instantiation(), "timeout"),
            ("waits_unseen", waits_only_when_made_ahead(), "bad_response"),
        ];
        for (name, text, kind) in cases {
            let component = engine
                .load_async(&write_component(dir.path(), name, &text))
                .await
                .unwrap();
            // More calls, at once, than the pool has slots.
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..pool::SLOTS + 4 {
                let (engine, component) = (engine.clone(), Arc::clone(&component));
                calls.spawn(
                    async move { call_on(&engine, &component, json!({}), &[], SHORT).await },
                );
            }
            while let Some(ended) = calls.join_next().await {
                let err = ended.unwrap().unwrap_err();
                assert_eq!(err.kind(), kind, "{name}: {err}");
            }
            // What a server does for it at load, besides after calls.
            engine.make_ahead(&component).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(!engine.inner.ahead.holds(&component.digest), "{name}");
            assert_eq!(
                engine.inner.slots.free(),
                pool::SLOTS as usize,
                "{name}: slots stay taken"
            );
        }
        assert_eq!(engine.took_ahead(), 0, "nothing was made ahead");
        let echo = engine.load_async(&guest("echo")).await.unwrap();
        let exchange = call_on(&engine, &echo, json!({"n": 1}), &[], Duration::from_secs(5)).await;
        assert!(exchange.is_ok(), "{:?}", exchange.err());
    }

    /// A call the host did not let start ahead (its capability asks for
    /// approval, or its caller did not weigh the policy) neither leaves an
    /// instance made ahead nor takes one.
    #[tokio::test]
    async fn only_calls_allowed_to_start_ahead_make_or_take_instances_ahead() {
        let engine = own_engine();
        let echo = engine.load_async(&guest("echo")).await.unwrap();
        let line = request(&json!({"n": 1}));
        let call = long_call(&line);
        engine.run(&echo, &call, None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !engine.inner.ahead.holds(&echo.digest),
            "made after a call not allowed to"
        );
        call_on(&engine, &echo, json!({"n": 1}), &[], LONG)
            .await
            .unwrap();
        wait_made_ahead(&engine, &echo).await;
        engine.run(&echo, &call, None).await.unwrap();
        assert_eq!(engine.took_ahead(), 0, "taken by a call not allowed to");
        assert!(engine.inner.ahead.holds(&echo.digest));
    }

    #[tokio::test]
    async fn a_missing_grant_is_a_spawn_error() {
        let grants = [grant(
            "gone",
            Path::new("/nonexistent/modhost-root"),
            Access::Read,
        )];
        let err = call_guest("echo", json!({}), &grants, LONG)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "spawn_failed", "{err}");
        assert!(
            err.to_string().contains("/nonexistent/modhost-root"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_file_grant_is_refused_with_what_to_grant_instead() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "x").unwrap();
        let grants = [grant("notes", &file, Access::Read)];
        let err = call_guest("echo", json!({}), &grants, LONG)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "spawn_failed", "{err}");
        let message = err.to_string();
        assert!(message.contains("notes.txt"), "{message}");
        assert!(message.contains("only be granted folders"), "{message}");
    }

    #[tokio::test]
    async fn a_first_compile_is_announced_as_progress_naming_the_module_and_a_cached_load_is_not() {
        let home = tempfile::tempdir().unwrap();
        let cache = home.path().join("cache/components");
        // A component installed at modules/<id>/: named by its folder.
        let installed = home.path().join("modules/notes/echo.wasm");
        std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
        std::fs::copy(guest("echo"), &installed).unwrap();
        let line = request(&json!({}));
        let call = Call {
            request_line: &line,
            limits: CallLimits::default(),
            grants: &[],
            executables: &[],
            module_writes: &[],
            network: None,
            start_ahead: false,
            secrets: &[],
        };
        let first = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        let (tx, mut rx) = unbounded_channel();
        first
            .run_module(&installed, &call, Some(&tx))
            .await
            .unwrap();
        let announced = rx.try_recv().expect("a progress notification");
        assert_eq!(announced.method, "progress");
        let params = announced.params.unwrap();
        let message = params["message"].as_str().unwrap();
        assert!(message.contains("compiling module notes"), "{message}");
        assert!(
            !message.contains(home.path().to_str().unwrap()),
            "no path: {message}"
        );
        assert_eq!(params["progress"], json!(0.0));
        // Loaded from the disk cache by a new engine: nothing to announce.
        let second = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        let (tx, mut rx) = unbounded_channel();
        second
            .run_module(&installed, &call, Some(&tx))
            .await
            .unwrap();
        assert!(rx.try_recv().is_err(), "a cached load sent progress");
    }

    #[tokio::test]
    async fn compiled_cache_is_reused_and_a_corrupt_entry_recompiled() {
        let home = tempfile::tempdir().unwrap();
        let cache = home.path().join("cache/components");
        let echo = guest("echo");
        let first = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        assert_eq!(first.load(&echo).unwrap().origin(), LoadOrigin::Compiled);
        // Same engine: the very same pre-instantiated component.
        assert!(Arc::ptr_eq(
            &first.load(&echo).unwrap(),
            &first.load(&echo).unwrap()
        ));
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );

        let restarted = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        let from_disk = restarted.load(&echo).unwrap();
        assert_eq!(from_disk.origin(), LoadOrigin::DiskCache);
        // The code mapped from the cache (a sealed memfd) runs and answers.
        let exchange = call_on(&restarted, &from_disk, json!({"n": 2}), &[], LONG)
            .await
            .unwrap();
        assert_eq!(
            exchange.response.outcome.unwrap(),
            json!({"output": {"echo": {"n": 2}}})
        );

        let entries: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let mut bytes = std::fs::read(&entries[0]).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&entries[0], &bytes).unwrap();
        let after_corruption = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        assert_eq!(
            after_corruption.load(&echo).unwrap().origin(),
            LoadOrigin::Compiled
        );
        let again = WasmEngine::new(&cache, TEST_MEMORY_LIMIT).unwrap();
        assert_eq!(
            again.load(&echo).unwrap().origin(),
            LoadOrigin::DiskCache,
            "rewritten"
        );
    }

    #[test]
    fn not_a_component_is_a_compile_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let bogus = dir.path().join("bogus.wasm");
        std::fs::write(&bogus, b"\0asm garbage").unwrap();
        let engine = WasmEngine::new(&dir.path().join("cache"), TEST_MEMORY_LIMIT).unwrap();
        let err = engine.load(&bogus).unwrap_err();
        assert!(matches!(err, WasmError::Compile { .. }), "{err}");
        assert!(err.to_string().contains("bogus.wasm"), "{err}");
    }
}
