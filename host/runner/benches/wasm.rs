//! Wasm runner benchmarks. Prints figures; asserts nothing.
//!
//! 1. Per-call latency of a trivial capability (the `echo` guest) through the
//!    host's runner, against a bare pre-instantiated instantiate-and-run of
//!    the same component measured in the same run (target: p50 ratio <= 2.0).
//! 2. The first call after a host restart with a warm compiled cache: a fresh
//!    engine, load, one call (target: <= 5 ms).
//!
//! Builds the `echo` guest itself (profile `wasm-test`, like the tests);
//! `ECHO_COMPONENT=PATH` measures the SDK's echo example instead (built
//! for release: what `tests/mcp/bench_mcp_http.py` serves), answering
//! [`SDK_REQUEST`] as the host would send it: that benchmark's floor, the
//! cost of a fresh instance per call with nothing of the host around it.
//! Run: `cargo bench -p modhost-runner --bench wasm`
//! (`--profile dev` for a quick look; figures are then pessimistic).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use modhost_runner::wasm::WasmEngine;
use modhost_runner::{Call, CallLimits};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

const CALLS: usize = 2000;
const WARMUP: usize = 100;
const RESTARTS: usize = 20;
const REQUEST: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"invoke","params":{"capability":"echo","input":{"x":1}}}"#;
/// The request the host sends the SDK's echo example (`echo.echo`).
const SDK_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"invoke","params":{"protocol":"1.0","contract_version":"1.0","request_id":"bench","capability":"echo.echo","input":{"message":"hello"},"roots":{},"binaries":{},"deadline_ms":30000,"max_output_bytes":1048576}}"#;

/// The `echo` guest, built first (a nested `$CARGO build --target
/// wasm32-wasip2 --profile wasm-test -p files -p modhost-guests`, as the
/// tests do).
fn echo_component() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("the bench binary's path");
            exe.ancestors()
                .nth(3)
                .expect("<target>/<profile>/deps/<bench>")
                .to_owned()
        });
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // The folder cargo names when it runs the bench, not the one it was
    // compiled in (a shared target directory may hold another checkout's).
    let host = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo names host/"));
    let workspace = host.parent().expect("host/ lives in the workspace root");
    let status = Command::new(&cargo)
        .current_dir(workspace)
        .args(["build", "--quiet", "--target", "wasm32-wasip2"])
        // The same packages as the tests build (same feature unification).
        .args([
            "--profile",
            "wasm-test",
            "-p",
            "files",
            "-p",
            "modhost-guests",
            "--bins",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .status()
        .expect("running cargo to build the guests");
    assert!(
        status.success(),
        "building the guests failed ({status}); is the target installed? rustup target add wasm32-wasip2"
    );
    let path = target.join("wasm32-wasip2/wasm-test/echo.wasm");
    assert!(path.is_file(), "{} is missing", path.display());
    path
}

struct Bare {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(label: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let p50 = percentile(samples, 0.5);
    println!(
        "{label:<44} p50 {:>9.1} us   p90 {:>9.1} us   p99 {:>9.1} us   (n={})",
        p50.as_secs_f64() * 1e6,
        percentile(samples, 0.9).as_secs_f64() * 1e6,
        percentile(samples, 0.99).as_secs_f64() * 1e6,
        samples.len()
    );
    p50
}

fn main() {
    let sdk_echo = std::env::var_os("ECHO_COMPONENT").map(PathBuf::from);
    let request = if sdk_echo.is_some() {
        SDK_REQUEST
    } else {
        REQUEST
    };
    let echo = sdk_echo.unwrap_or_else(echo_component);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache/components");

    // Through the host's runner.
    let started = Instant::now();
    let engine = WasmEngine::new(&cache, 256 << 20).unwrap();
    let component = engine.load(&echo).unwrap();
    println!(
        "cold compile of echo.wasm ({} bytes): {:.1} ms",
        std::fs::metadata(&echo).unwrap().len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let call = Call {
        request_line: request,
        limits: CallLimits::default(),
        grants: &[],
        executables: &[],
        module_writes: &[],
        network: None,
        start_ahead: false,
        secrets: &[],
    };
    let mut host = Vec::with_capacity(CALLS);
    runtime.block_on(async {
        for i in 0..WARMUP + CALLS {
            let t = Instant::now();
            let exchange = engine.run(&component, &call, None).await.unwrap();
            let elapsed = t.elapsed();
            assert!(exchange.response.outcome.is_ok());
            if i >= WARMUP {
                host.push(elapsed);
            }
        }
    });

    // Bare: the same component, pre-instantiated, instantiate-and-run.
    let bare_engine = Engine::default();
    let mut linker = Linker::<Bare>::new(&bare_engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    let bare_component = Component::from_file(&bare_engine, &echo).unwrap();
    let pre = CommandPre::new(linker.instantiate_pre(&bare_component).unwrap()).unwrap();
    let mut bare = Vec::with_capacity(CALLS);
    runtime.block_on(async {
        for i in 0..WARMUP + CALLS {
            let t = Instant::now();
            let stdout = MemoryOutputPipe::new(1 << 20);
            let mut builder = WasiCtxBuilder::new();
            builder
                .stdin(MemoryInputPipe::new(format!("{request}\n")))
                .stdout(stdout.clone());
            let mut store = Store::new(
                &bare_engine,
                Bare {
                    ctx: builder.build(),
                    table: ResourceTable::new(),
                },
            );
            let command = pre.instantiate_async(&mut store).await.unwrap();
            // The SDK's `serve` ends with `exit(0)`, which wasmtime
            // returns as an error carrying the status.
            match command.wasi_cli_run().call_run(&mut store).await {
                Ok(ran) => ran.unwrap(),
                Err(e) => assert_eq!(
                    e.downcast_ref::<wasmtime_wasi::I32Exit>()
                        .map(|exit| exit.0),
                    Some(0),
                    "{e:?}"
                ),
            }
            let line = stdout.contents();
            let elapsed = t.elapsed();
            assert!(line.starts_with(b"{"));
            if i >= WARMUP {
                bare.push(elapsed);
            }
        }
    });

    let host_p50 = report("per call, through the host's wasm runner", &mut host);
    let bare_p50 = report("per call, bare instantiate-and-run", &mut bare);
    println!(
        "p50 ratio host/bare: {:.2} (target <= 2.0)",
        host_p50.as_secs_f64() / bare_p50.as_secs_f64()
    );

    // Restart with a warm cache: new engine, load from disk, first call.
    drop(engine);
    let mut first_call = Vec::with_capacity(RESTARTS);
    let mut engine_only = Vec::with_capacity(RESTARTS);
    let mut load_only = Vec::with_capacity(RESTARTS);
    for _ in 0..RESTARTS {
        let t = Instant::now();
        let engine = WasmEngine::new(&cache, 256 << 20).unwrap();
        engine_only.push(t.elapsed());
        let loading = Instant::now();
        let component = engine.load(&echo).unwrap();
        load_only.push(loading.elapsed());
        assert_eq!(
            component.origin(),
            modhost_runner::wasm::LoadOrigin::DiskCache
        );
        runtime
            .block_on(engine.run(&component, &call, None))
            .unwrap();
        first_call.push(t.elapsed());
    }
    report("restart: engine setup only", &mut engine_only);
    report("restart: load from the compiled cache only", &mut load_only);
    let p50 = report(
        "restart: engine + cached load + first call",
        &mut first_call,
    );
    println!(
        "first call after restart, warm cache: {:.2} ms p50 (target <= 5 ms)",
        p50.as_secs_f64() * 1e3
    );
}
