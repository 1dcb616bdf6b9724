//! Running one call of a module: one request line in, optional notification
//! lines and exactly one response line out, then the module is gone.
//!
//! Two transports share this contract: [`native`] (one OS process per call,
//! its own process group) and `wasm` (one fresh component instance per call).
//! Everything above this layer (discovery, invoke, conformance, tools) speaks
//! only `Exchange` and [`RunError`], never a transport's details.
//!
//! The state a transport keeps across calls lives in [`Engines`], one per
//! `modhost::Host`: the wasm engine (compiled components, the epoch ticker),
//! created on the first component call (a long-running host whose home holds
//! a component sets it up while it starts) so a host that only ever runs
//! native modules never pays for it, and, in a long-running host that asked for it,
//! the [`native::WarmPool`] of processes started ahead of their calls.
//! Without the `wasm` feature a component call is a clear "built without
//! component support" error.
//!
//! # API
//!
//! The library (`modhost`) is its one user and reaches only this
//! (`unreachable_pub` is denied below):
//!
//! - [`run`] one [`Call`] under [`CallLimits`], with its [`CallSecret`]s, on
//!   a [`Transport`], with the [`Engines`] of its host; the answer is an
//!   [`Exchange`] or a [`RunError`]; progress goes to a [`NotificationSink`].
//! - [`native::start_blocking`] starts a module from a
//!   [`native::SpawnSpec`] without a call (the conformance caller), and
//!   [`native::WarmPool`] keeps processes started ahead of their calls;
//!   [`native::resident::Resident`] keeps one process for call after call
//!   (a `session` MCP server module, started as a cold call is).
//! - `wasm::WasmEngine` (feature `wasm`): compile, keep and run components;
//!   `wasm::watch_compiles` lets a test see a compile happen.
//! - [`file_identity`] (what a file is, cheaply: the pin and cache key) and
//!   [`atomic_file`] (write a file whole or not at all), shared by the layers
//!   above.

// A public field, signature or trait impl that reaches a type no user can
// name is a compile error: the type is made private or exported on purpose.
#![deny(unnameable_types)]
#![deny(unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "wasm")]
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub mod atomic_file;
mod call;
pub mod file_identity;
mod framing;
pub mod native;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use call::{
    Call, CallLimits, CallNetwork, CallSecret, Exchange, NotificationSink, RunError,
    STDERR_TAIL_BYTES,
};
pub use modhost_sandbox::Grant;

/// A component a long-running host loads before its first call
/// ([`Engines::load_components_ahead`]).
#[derive(Debug, Clone)]
// Only read by the wasm engine; a build without it only drops them.
#[cfg_attr(not(feature = "wasm"), allow(dead_code))]
pub struct ComponentAhead {
    /// The component's file, as its calls run it (the approved snapshot of a
    /// pinned module, else the installed file); what is made is keyed by
    /// the digest of its bytes.
    pub program: PathBuf,
    /// Whether its first call's instance may be made ahead too: only when a
    /// call of it may start ahead ([`Call::start_ahead`]), as a call that may
    /// not would never take it.
    pub instance_too: bool,
}

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

/// The default cap on one component call's linear memory (`[limits]
/// memory_limit_bytes`).
pub const DEFAULT_MEMORY_LIMIT_BYTES: u64 = 256 * 1024 * 1024;

/// The engines behind the transports, shared by every call of one host.
///
/// Cheap to clone (clones share the engine). The wasm engine is created on
/// first use, with compiled components cached in `component_cache_dir`.
#[derive(Debug, Clone)]
pub struct Engines {
    // Read by the wasm engine and by `modhost doctor`; a build with
    // neither only keeps them.
    #[cfg_attr(not(feature = "wasm"), allow(dead_code))]
    component_cache_dir: PathBuf,
    #[cfg_attr(not(feature = "wasm"), allow(dead_code))]
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
    /// ahead ([`native::warm`]), and the next instance of each component
    /// made ahead (`wasm/ahead.rs`, the first one at load,
    /// [`Engines::load_components_ahead`]): only of calls marked [`Call::start_ahead`],
    /// and for at most `native::warm::IDLE_LIFE` after the last one. For
    /// hosts that serve many calls (the MCP server); such a host must call
    /// [`Engines::shutdown`] before it ends.
    pub fn keep_warm(mut self) -> Engines {
        self.warm = Some(Arc::new(native::WarmPool::new()));
        self
    }

    /// Whether these engines keep processes started ahead: a long-running
    /// host, for which preparing ahead pays off.
    pub fn keeps_warm(&self) -> bool {
        self.warm.is_some()
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
    /// the wasm engine on a background thread now if `modules_dir` holds a
    /// component (a `.wasm` file, bare or in a module's folder), while the
    /// host discovers its modules, so the first component's load does not
    /// wait for it. A host without one never creates the engine.
    pub fn set_up_wasm_ahead(&self, modules_dir: &Path) {
        #[cfg(feature = "wasm")]
        if self.warm.is_some() {
            let engines = self.clone();
            let modules_dir = modules_dir.to_owned();
            let setting_up = std::thread::Builder::new()
                .name("modhost-wasm-ahead".into())
                .spawn(move || {
                    if holds_a_component(&modules_dir) {
                        // A failure is reported by the first call that needs it.
                        let _ = engines.wasm();
                    }
                });
            if let Err(e) = setting_up {
                tracing::debug!("not setting up the wasm engine ahead: {e}");
            }
        }
        #[cfg(not(feature = "wasm"))]
        let _ = modules_dir;
    }

    /// Forget the compiled code (and known digest) of every component but
    /// those at `programs`: a host's whole set after it looked at its home
    /// again. A call in flight keeps its own; a component forgotten is
    /// loaded again by its next call. A no-op before the wasm engine is set
    /// up (nothing is loaded then, and nothing sets it up here).
    pub fn keep_loaded_only_for<'a>(&self, programs: impl Iterator<Item = &'a Path>) {
        #[cfg(feature = "wasm")]
        if let Some(Ok(engine)) = self.wasm.get() {
            engine.keep_loaded_only_for(programs);
        }
        #[cfg(not(feature = "wasm"))]
        let _ = programs;
    }

    /// For engines that keep processes warm (a long-running host): set up
    /// the wasm engine and load `components` (compiled code from the
    /// host's cache, or compiled now) on a background thread, so the first
    /// call of each does not pay for it; and for those marked
    /// [`ComponentAhead::instance_too`], make their first call's instance
    /// ahead as well (`wasm/ahead.rs`: no guest code runs, the instance gets
    /// its call's context only when a call takes it). A no-op for other
    /// engines.
    ///
    /// `components` is the host's whole set: the compiled code of any other
    /// component (disabled, removed or changed since the last load) is
    /// forgotten now, and so are instances made ahead of any component not
    /// (or no longer) allowed to start ahead.
    pub fn load_components_ahead(&self, components: Vec<ComponentAhead>) {
        self.keep_loaded_only_for(components.iter().map(|c| c.program.as_path()));
        #[cfg(feature = "wasm")]
        if let Some(Ok(engine)) = self.wasm.get() {
            engine.keep_made_ahead_only_for(
                components
                    .iter()
                    .filter(|c| c.instance_too)
                    .map(|c| c.program.as_path()),
            );
        }
        #[cfg(feature = "wasm")]
        if self.warm.is_some() && !components.is_empty() {
            let engines = self.clone();
            let loading = std::thread::Builder::new()
                .name("modhost-load-ahead".into())
                .spawn(move || {
                    let Ok(engine) = engines.wasm() else { return };
                    // Making an instance is bounded in time by a timer: a
                    // runtime of this thread's own drives it (the caller's
                    // may be gone by then, as a reload's is).
                    let mut runtime = None;
                    for component in components {
                        // A failure here is reported by the call itself.
                        let Ok(loaded) = engine.load(&component.program) else {
                            continue;
                        };
                        if !component.instance_too {
                            continue;
                        }
                        if runtime.is_none() {
                            runtime = tokio::runtime::Builder::new_current_thread()
                                .enable_time()
                                .build()
                                .ok();
                        }
                        if let Some(runtime) = &runtime {
                            runtime.block_on(engine.make_ahead(&loaded));
                        }
                    }
                });
            if let Err(e) = loading {
                tracing::debug!("not loading components ahead: {e}");
            }
        }
        #[cfg(not(feature = "wasm"))]
        drop(components);
    }

    /// For engines that keep processes warm: resolve the `PATH` native
    /// modules that look commands up start with, on a background thread now
    /// (a version manager takes tens of milliseconds to answer, see
    /// `native::environment`), so their first call does not wait for it.
    /// `modules`: each native module the host serves, as its program and
    /// whether it may be granted executables; nothing is asked when none of
    /// them needs the answer. A no-op for other engines.
    pub fn resolve_native_path_ahead<'a>(&self, modules: impl Iterator<Item = (&'a Path, bool)>) {
        if self.warm.is_some()
            && !modhost_sandbox::environment::module_path_is_resolved()
            && modules.into_iter().any(|(program, grants_executables)| {
                modhost_sandbox::interpreter::path_needs_resolving(program, grants_executables)
            })
        {
            modhost_sandbox::environment::resolve_module_path_ahead();
        }
    }

    /// Kill and reap every process started ahead (a no-op for engines that
    /// keep none).
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.warm {
            pool.shutdown().await;
        }
    }

    /// Where compiled components are cached (`modhost doctor` reports it).
    pub fn component_cache_dir(&self) -> &Path {
        &self.component_cache_dir
    }

    /// The memory cap of one component call (`modhost doctor` reports it).
    pub fn memory_limit_bytes(&self) -> u64 {
        self.memory_limit_bytes
    }

    /// Whether this build runs WebAssembly components at all (`modhost
    /// doctor` reports it).
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

/// Whether `modules_dir` holds a component: a `.wasm` file in it or in one
/// of its folders (where discovery finds them).
#[cfg(feature = "wasm")]
fn holds_a_component(modules_dir: &Path) -> bool {
    let is_component = |path: &Path| Transport::of_path(path) == Transport::Component;
    let Ok(entries) = std::fs::read_dir(modules_dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        is_component(&path)
            || std::fs::read_dir(&path)
                .map(|inner| inner.flatten().any(|e| is_component(&e.path())))
                .unwrap_or(false)
    })
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

/// Run a component call: its first slice on the caller's thread, the rest,
/// if there is a rest, on a blocking-pool thread.
///
/// A guest runs on a fiber that yields only at epoch ticks
/// ([`wasm::EPOCH_TICK`]) and when it waits (a slot, a compile, a file, a
/// timer). Most calls (instantiate from the pool, read the request, write
/// the answer) finish before either, in well under a millisecond: handing
/// them to another thread and back would cost two thread wake-ups, more
/// than the call itself on a busy two-core machine. So the call's future is
/// polled once here; when it is not done by then, the rest is driven by
/// `Handle::block_on` on a blocking-pool thread (timers and I/O still come
/// from the caller's runtime), so a long or spinning guest never holds up
/// the caller's thread (the single thread of `modhost mcp`, which must go on
/// reading `ping` and cancellations) for more than one epoch tick. Dropping
/// this future drops the call at once, wherever it runs.
///
/// Not inline: the very first component call of a host, which creates the
/// engine (seconds of setup); it runs wholly on the blocking thread.
///
/// The hand-off keeps the call's deadline: a blocking pool that something
/// else has filled queues the rest of the call, and a call still queued at
/// its deadline ends there as a timeout (its guest, never run again, is
/// dropped with its instance when the queued work finally starts).
#[cfg(feature = "wasm")]
async fn run_component(
    engines: &Engines,
    module: &Path,
    call: &Call<'_>,
    notifications: Option<&NotificationSink>,
) -> Result<Exchange, RunError> {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Poll;

    let deadline = tokio::time::Instant::now() + call.limits.deadline;
    let inline = engines.wasm.get().is_some();
    let engines = engines.clone();
    let module = module.to_path_buf();
    let request_line = call.request_line.to_owned();
    let grants = call.grants.to_vec();
    let executables = call.executables.to_vec();
    // Instances are made ahead only by a host that keeps things ready (a
    // long-running one, `warm_processes` on), as native processes are.
    let start_ahead = call.start_ahead && engines.keeps_warm();
    let (limits, network) = (call.limits, call.network.cloned());
    let secrets = call.secrets.to_vec();
    let notifications = notifications.cloned();
    let mut guest: Pin<Box<dyn Future<Output = Result<Exchange, RunError>> + Send>> =
        Box::pin(async move {
            let engine = engines.wasm().map_err(|message| RunError::Spawn {
                message: format!("{}: {message}", module.display()),
            })?;
            let call = Call {
                request_line: &request_line,
                limits,
                grants: &grants,
                executables: &executables,
                // A component executes no file.
                module_writes: &[],
                network: network.as_ref(),
                start_ahead,
                secrets: &secrets,
            };
            engine
                .run_module(&module, &call, notifications.as_ref())
                .await
        });
    if inline {
        // One poll, no await around it: either the call is done, or it is
        // handed on below within this same poll of ours.
        let first = std::future::poll_fn(|cx| Poll::Ready(guest.as_mut().poll(cx))).await;
        if let Poll::Ready(result) = first {
            return result;
        }
    }
    let runtime = tokio::runtime::Handle::current();
    // Dropped with this future: the call on the other thread ends with it.
    let (_cancel_on_drop, cancelled) = tokio::sync::oneshot::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let starting = Arc::clone(&started);
    let mut worker = tokio::task::spawn_blocking(move || {
        starting.store(true, Ordering::Release);
        runtime.block_on(async move {
            tokio::select! {
                biased;
                _ = cancelled => Err(RunError::Cancelled),
                result = guest => result,
            }
        })
    });
    let joined = tokio::select! {
        joined = &mut worker => joined,
        () = tokio::time::sleep_until(deadline) => {
            // Started: the guest judges its own deadline (and keeps its
            // stderr for the error); only a call still queued ends here.
            if !started.load(Ordering::Acquire) {
                return Err(RunError::Timeout {
                    deadline_ms: call.limits.deadline.as_millis() as u64,
                    stderr_tail: String::new(),
                });
            }
            worker.await
        }
    };
    joined.map_err(|e| RunError::Spawn {
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

#[cfg(all(test, feature = "wasm"))]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::wasm::tests::{
        TEST_MEMORY_LIMIT, guest, long_call, request, target_dir, wait_all_free,
    };
    use super::{Engines, Transport, run};

    /// A server sets the wasm engine up ahead only for a home that holds a
    /// component, bare or in a module's folder: a home of native modules
    /// never pays for it.
    #[test]
    fn the_engine_is_set_up_ahead_only_for_a_home_with_a_component() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("modules");
        assert!(!super::holds_a_component(&modules), "no modules folder");
        std::fs::create_dir_all(modules.join("tool")).unwrap();
        std::fs::write(modules.join("tool/tool"), "#!/bin/sh\n").unwrap();
        std::fs::write(modules.join("script.sh"), "#!/bin/sh\n").unwrap();
        assert!(!super::holds_a_component(&modules), "native modules only");
        std::fs::write(modules.join("tool/tool.wasm"), "").unwrap();
        assert!(super::holds_a_component(&modules), "in a module's folder");
        std::fs::remove_file(modules.join("tool/tool.wasm")).unwrap();
        std::fs::write(modules.join("bare.wasm"), "").unwrap();
        assert!(super::holds_a_component(&modules), "bare");
    }

    /// Instances are made ahead only by engines that keep things ready (a
    /// long-running host with `warm_processes` on), as native processes
    /// are: with it off, every call instantiates its own.
    #[tokio::test(flavor = "current_thread")]
    async fn only_engines_that_keep_warm_make_instances_ahead() {
        let echo = guest("echo");
        let line = request(&json!({}));
        let mut call = long_call(&line);
        call.start_ahead = true;
        for keep_warm in [false, true] {
            let cache = target_dir().join("modhost-wasm-test-cache");
            let engines = Engines::new(cache, TEST_MEMORY_LIMIT);
            let engines = if keep_warm {
                engines.keep_warm()
            } else {
                engines
            };
            for _ in 0..3 {
                run(&engines, Transport::Component, &echo, &call, None)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let took = engines.wasm().unwrap().took_ahead();
            assert_eq!(took > 0, keep_warm, "keep_warm {keep_warm}: {took} taken");
            engines.shutdown().await;
        }
    }

    /// The attack: a guest that spins, called on the single thread of a
    /// server that must go on reading `ping` and cancellations. Its first
    /// slice runs on the caller's thread (at most one epoch tick), the rest
    /// on a blocking thread: a timer on the caller's runtime keeps firing
    /// while the guest spins, and the caller's thread spends almost none of
    /// its CPU time on the guest.
    #[tokio::test(flavor = "current_thread")]
    async fn a_spinning_guest_does_not_hold_the_callers_thread() {
        let cache = target_dir().join("modhost-wasm-test-cache");
        let engines = Engines::new(cache, TEST_MEMORY_LIMIT);
        // Created ahead, so the call takes the inline path a server's
        // calls take once its engine exists.
        engines.wasm().expect("the wasm engine");
        let line = request(&json!({}));
        let call = long_call(&line);
        let spin = guest("spin");
        let running = run(&engines, Transport::Component, &spin, &call, None);
        let cpu_before = thread_cpu_ticks();
        let mut ticks = 0u32;
        let counting = async {
            let mut interval = tokio::time::interval(Duration::from_millis(20));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                ticks += 1;
            }
        };
        tokio::select! {
            outcome = running => panic!("the spinning guest ended before it was dropped: {outcome:?}"),
            () = counting => unreachable!(),
            () = tokio::time::sleep(Duration::from_millis(1000)) => {}
        }
        // 50 ticks fit in the second; a guest held on this thread would
        // let through one or two.
        assert!(
            ticks >= 20,
            "the caller's thread ran its timer {ticks} times in 1 s while the guest spun"
        );
        // A guest driven here would have used most of the second (about
        // 100 ticks of 10 ms), yielding only at epoch ticks.
        let cpu = thread_cpu_ticks() - cpu_before;
        assert!(
            cpu < 30,
            "the caller's thread spent {cpu} clock ticks of CPU while the guest spun elsewhere"
        );
    }

    /// The attack: a guest whose first act is one `memory.fill` of 200 MiB
    /// (a single instruction: epoch interruption cannot cut it), run on the
    /// single thread of a server, whose first slice of every component call
    /// runs inline. The caller's thread must be back within a few epoch
    /// ticks, not held for the whole fill.
    #[tokio::test(flavor = "current_thread")]
    #[ignore = "hole: a component call's first slice runs on the caller's thread, and one uninterruptible instruction (memory.fill of the memory limit) holds it for many epoch ticks"]
    async fn a_guest_filling_its_memory_at_once_does_not_hold_the_callers_thread() {
        use std::future::Future;
        use std::task::Poll;
        let cache = target_dir().join("modhost-wasm-test-cache");
        // The production cap: what a guest of `modhost mcp` may fill.
        let engines = Engines::new(cache, super::DEFAULT_MEMORY_LIMIT_BYTES);
        let fill = guest("fill");
        load_settled(&engines, &fill).await;
        let line = request(&json!({}));
        let call = long_call(&line);
        let mut running = std::pin::pin!(run(&engines, Transport::Component, &fill, &call, None));
        let started = std::time::Instant::now();
        let first = std::future::poll_fn(|cx| Poll::Ready(running.as_mut().poll(cx))).await;
        let held = started.elapsed();
        assert!(first.is_pending(), "the filling guest ended: {first:?}");
        assert!(
            held < super::wasm::EPOCH_TICK * 3,
            "the caller's thread was held {held:?} by one poll (an epoch tick is {:?})",
            super::wasm::EPOCH_TICK
        );
    }

    /// Set up `engines`' wasm engine and load `component` once its file is
    /// settled, so a call finds it loaded and its first slice runs inline
    /// (a file just built is hashed again by every call, on a blocking
    /// thread).
    async fn load_settled(engines: &Engines, component: &std::path::Path) {
        let engine = engines.wasm().expect("the wasm engine").clone();
        let settled = crate::file_identity::RACY + Duration::from_millis(100);
        let age = std::fs::metadata(component)
            .and_then(|m| m.modified())
            .map(|modified| modified.elapsed().unwrap_or_default())
            .unwrap_or_default();
        tokio::time::sleep(settled.saturating_sub(age)).await;
        let loading = component.to_path_buf();
        tokio::task::spawn_blocking(move || engine.load(&loading))
            .await
            .unwrap()
            .expect("the guest loads");
    }

    /// The attack on the hand-off: the caller's blocking pool is full (its
    /// one thread held by other work), so the rest of a component call,
    /// whose guest sleeps past its first slice, cannot start. The call ends
    /// as a timeout at its deadline instead of waiting for the pool, and
    /// once the pool frees, its guest is dropped without running again:
    /// its instance slot comes back.
    #[test]
    fn a_call_queued_behind_a_full_blocking_pool_ends_at_its_deadline() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let cache = target_dir().join("modhost-wasm-test-cache");
        let engines = Engines::new(cache, TEST_MEMORY_LIMIT);
        let sleeper = guest("sleep");
        runtime.block_on(async {
            load_settled(&engines, &sleeper).await;
            let (release, held) = std::sync::mpsc::channel::<()>();
            let holder = tokio::task::spawn_blocking(move || held.recv());
            let line = request(&json!({}));
            let mut call = long_call(&line);
            call.limits.deadline = Duration::from_millis(300);
            let ended = tokio::time::timeout(
                Duration::from_secs(20),
                run(&engines, Transport::Component, &sleeper, &call, None),
            )
            .await;
            release.send(()).unwrap();
            holder.await.unwrap().unwrap();
            let outcome = ended.expect("the call waited for the blocking pool past its deadline");
            assert!(
                matches!(outcome, Err(super::RunError::Timeout { .. })),
                "{outcome:?}"
            );
            let engine = engines.wasm().expect("the wasm engine");
            wait_all_free(engine, "the queued call").await;
        });
    }

    /// CPU time (user + system, in clock ticks) of the calling thread.
    fn thread_cpu_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc is mounted");
        // Fields after the command name (which may hold spaces): utime and
        // stime are the 12th and 13th.
        let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}
