//! `cargo bench -p modhost`: the host's overhead against the floor.
//!
//! 1. Invoke latency of a trivial native capability through the library,
//!    against a bare spawn of the same executable with the same request line,
//!    measured in the same run (target: p50 ratio <= 1.5).
//! 2. `discover` with 100 installed, describe-cached modules (target: p50 <= 20 ms).
//!
//! The module is a tiny `/bin/sh` script written into a temp home, so the
//! benchmark depends on no other crate's binaries.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use modhost::{Host, HostOptions, InvokeRequest};
use serde_json::json;

const INVOKE_RUNS: usize = 300;
const DISCOVER_RUNS: usize = 50;
const MODULES: usize = 100;

fn module_script(id: &str) -> String {
    let descriptor = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.ping"), "input_schema": {"type": "object"},
                          "output_schema": {"type": "object"}}]
    }});
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": {"output": {"pong": true}}});
    format!(
        "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{descriptor}' ;;\n  *) printf '%s\\n' '{result}' ;;\nesac\n"
    )
}

fn install(home: &Path, id: &str) -> std::path::PathBuf {
    let path = home.join("modules").join(id).join(id);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, module_script(id)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn bare_spawn(path: &Path, line: &str) -> Duration {
    let started = Instant::now();
    let mut child = Command::new(path)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(line.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    let mut response = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut response)
        .unwrap();
    child.wait().unwrap();
    assert!(response.contains("pong"));
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let temp = tempfile::tempdir().unwrap();

    // 1. Invoke latency.
    let home = temp.path().join("invoke-home");
    let module = install(&home, "trivial");
    let host = Host::open(HostOptions {
        home: Some(home.clone()),
        workspace: Some(temp.path().into()),
    })
    .unwrap();
    let line = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "method": "invoke", "params": {
        "protocol": "1.0", "contract_version": "1.0", "request_id": "bench", "capability": "trivial.ping",
        "input": {}, "roots": {}, "binaries": {}, "deadline_ms": 30000, "max_output_bytes": 1048576
    }}))
    .unwrap();
    let mut host_samples = Vec::with_capacity(INVOKE_RUNS);
    let mut bare_samples = Vec::with_capacity(INVOKE_RUNS);
    runtime.block_on(async {
        host.discover().await; // warm the describe cache
        for _ in 0..10 {
            host.invoke(InvokeRequest::new("trivial", "trivial.ping", json!({})))
                .await
                .unwrap();
            bare_spawn(&module, &line);
        }
        // Interleave so both see the same machine load.
        for _ in 0..INVOKE_RUNS {
            let started = Instant::now();
            let outcome = host
                .invoke(InvokeRequest::new("trivial", "trivial.ping", json!({})))
                .await
                .unwrap();
            host_samples.push(started.elapsed());
            assert_eq!(outcome.result.output, json!({"pong": true}));
            bare_samples.push(bare_spawn(&module, &line));
        }
    });
    if std::env::var_os("MODHOST_BENCH_BREAKDOWN").is_some() {
        runtime.block_on(async {
            let mut find = Vec::new();
            let mut run = Vec::new();
            for _ in 0..INVOKE_RUNS {
                let started = Instant::now();
                host.module("trivial").await.unwrap();
                find.push(started.elapsed());
                let call = modhost::runner::Call {
                    request_line: &line,
                    limits: modhost::runner::CallLimits::default(),
                    grants: &[],
                    network: false,
                };
                let started = Instant::now();
                modhost::runner::native::run(&module, &call, None)
                    .await
                    .unwrap();
                run.push(started.elapsed());
            }
            println!("  module lookup p50 {:?}", p50(find));
            println!("  native run    p50 {:?}", p50(run));
        });
    }
    let host_p50 = p50(host_samples);
    let bare_p50 = p50(bare_samples);
    println!(
        "invoke via host library  p50 {:>9.3} ms",
        host_p50.as_secs_f64() * 1e3
    );
    println!(
        "bare spawn, same request p50 {:>9.3} ms",
        bare_p50.as_secs_f64() * 1e3
    );
    println!(
        "ratio host/bare          {:>9.2}   (target <= 1.5)",
        host_p50.as_secs_f64() / bare_p50.as_secs_f64()
    );

    // 2. discover with 100 cached modules.
    let home = temp.path().join("discover-home");
    for i in 0..MODULES {
        install(&home, &format!("mod{i:03}"));
    }
    let host = Host::open(HostOptions {
        home: Some(home),
        workspace: Some(temp.path().into()),
    })
    .unwrap();
    let samples = runtime.block_on(async {
        let first = host.discover().await;
        assert_eq!(first.len(), MODULES);
        assert!(first.iter().all(|m| m.error.is_none()));
        let mut samples = Vec::with_capacity(DISCOVER_RUNS);
        for _ in 0..DISCOVER_RUNS {
            let started = Instant::now();
            let modules = host.discover().await;
            samples.push(started.elapsed());
            assert_eq!(modules.len(), MODULES);
        }
        samples
    });
    println!(
        "discover, {MODULES} cached modules p50 {:>6.3} ms   (target <= 20 ms)",
        p50(samples).as_secs_f64() * 1e3
    );
}
