//! `cargo bench -p modhost`: the host's overhead against the floor.
//!
//! 1. Invoke latency of a trivial native capability through the library,
//!    against a bare spawn of the same executable with the same request line,
//!    measured in the same run (target: p50 ratio <= 1.5): unconfined,
//!    confined (the default), and confined with the processes started ahead
//!    as a long-running host does. Back to back, then confined with a pause
//!    before each pair, as an agent's calls or one-shot `modhost invoke`s
//!    come: the kernel makes some operations wait for an RCU grace period
//!    (moving a process between cgroups, for one) unless another did moments
//!    before, which calls back to back never show.
//!    The cost of two bounds, each call made with the bound and again
//!    without it, back to back, so both see the same machine: the call's
//!    memory cgroup (`memcg`, `memcg-paused`), and the storage bound's
//!    watch of a state folder of 100 files the capability may write
//!    (`state-100`, `state-100-warm`).
//! 2. `discover` with 100 installed, describe-cached modules (target: p50 <= 20 ms).
//!
//! The module is a tiny `/bin/sh` script written into a temp home, so the
//! benchmark depends on no other crate's binaries.
//!
//! `cargo bench -p modhost --bench host -- <parts>` runs only the parts
//! named (`off`, `default`, `warm`, `paused`, `memcg`, `memcg-paused`,
//! `state-100`, `state-100-warm`, `discover`): to profile one part alone
//! (`perf record -g`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use modhost::{Host, HostOptions};
use serde_json::json;

const INVOKE_RUNS: usize = 300;
/// Runs of the paused part, and the pause before each pair.
const PAUSED_RUNS: usize = 60;
const PAUSE: Duration = Duration::from_millis(50);
const DISCOVER_RUNS: usize = 50;
const MODULES: usize = 100;

/// The trivial module; with `state`, its ping may write its state folder
/// (and so runs under the storage bound's watch).
fn module_script(id: &str, state: bool) -> String {
    let mut capability = json!({"id": format!("{id}.ping"), "input_schema": {"type": "object"},
                                "output_schema": {"type": "object"}});
    let mut result = json!({"id": id, "version": "1.0.0"});
    if state {
        capability["effects"] = json!({"reads": ["state"], "writes": ["state"]});
        result["roots"] = json!([{"name": "state", "kind": "state"}]);
    }
    result["capabilities"] = json!([capability]);
    let descriptor = json!({"jsonrpc": "2.0", "id": 1, "result": result});
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": {"output": {"pong": true}}});
    format!(
        "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{descriptor}' ;;\n  *) printf '%s\\n' '{result}' ;;\nesac\n"
    )
}

fn install(home: &Path, id: &str, state: bool) -> std::path::PathBuf {
    let path = home.join("modules").join(id).join(id);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, module_script(id, state)).unwrap();
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

/// How one part calls.
struct Part {
    /// Written as the home's config.toml.
    config: &'static str,
    /// Open the host as `modhost mcp` does, starting processes ahead.
    warm: bool,
    /// Sleep this long before each pair of measurements.
    pause: Option<Duration>,
    runs: usize,
    /// The ping may write its state folder, which holds this many files.
    state_files: Option<usize>,
    /// A bound each call is also made without, right after it.
    without: Option<Bound>,
}

/// A bound whose cost a part measures.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// Each native call in a memory cgroup of its own (else `RLIMIT_DATA`).
    MemoryCgroup,
    /// A call that may write its module's folders watched against their bound.
    StorageWatch,
}

impl Bound {
    fn set(self, on: bool) {
        match self {
            Bound::MemoryCgroup => modhost_sandbox::memory_cgroup::set_per_call_cgroups(on),
            Bound::StorageWatch => modhost::storage_bound::set_watching(on),
        }
    }
}

/// What one part measured: the p50 of calls through the host, of bare
/// spawns, and of calls without the part's bound.
struct Measured {
    host: Duration,
    bare: Duration,
    without: Option<Duration>,
}

/// p50 of invoke through the host, of a bare spawn (and of invoke without
/// the part's bound), interleaved so all see the same machine load.
fn measure_invoke(runtime: &tokio::runtime::Runtime, dir: &Path, part: &Part) -> Measured {
    let &Part {
        config,
        warm,
        pause,
        runs,
        state_files,
        without,
    } = part;
    let home = dir.join("home");
    let module = install(&home, "trivial", state_files.is_some());
    if let Some(files) = state_files {
        let state = home.join("state/trivial");
        std::fs::create_dir_all(&state).unwrap();
        for i in 0..files {
            std::fs::write(state.join(format!("{i}")), b"state").unwrap();
        }
    }
    std::fs::write(home.join("config.toml"), config).unwrap();
    let host = Host::open(HostOptions {
        home: Some(home.clone()),
        workspace: Some(dir.into()),
    })
    .unwrap();
    let host = if warm { host.keep_warm() } else { host };
    let line = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "method": "invoke", "params": {
        "protocol": "1.0", "contract_version": "1.0", "request_id": "bench", "capability": "trivial.ping",
        "input": {}, "roots": {}, "binaries": {}, "deadline_ms": 30000, "max_output_bytes": 1048576
    }}))
    .unwrap();
    // Calls go through the tool layer, as `modhost mcp` makes them: the
    // ping reads and writes nothing, so the default policy allows it, and a
    // host kept warm serves it from a process started ahead (which it may
    // only for an `allow`).
    let tool = "trivial__trivial_ping";
    let mut host_samples = Vec::with_capacity(runs);
    let mut bare_samples = Vec::with_capacity(runs);
    let mut without_samples = Vec::with_capacity(runs);
    runtime.block_on(async {
        host.discover().await; // warm the describe cache
        host.pin("trivial").await.unwrap(); // pins are enforced by default
        // The host trusts a path's identity only once it is older than its
        // racy window (one second, `file_identity::RACY`); until then each
        // call discovers the home again. A deployed home was pinned longer
        // ago than that: wait it out instead of measuring the first second.
        std::thread::sleep(Duration::from_millis(1200));
        let toolbox = modhost::tools::open_toolbox(&host).await.unwrap();
        for _ in 0..10 {
            toolbox.call(tool, json!({}), None, None).await.unwrap();
            bare_spawn(&module, &line);
        }
        for _ in 0..runs {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            let started = Instant::now();
            let outcome = toolbox.call(tool, json!({}), None, None).await.unwrap();
            host_samples.push(started.elapsed());
            assert_eq!(outcome.structured, Some(json!({"pong": true})));
            if let Some(bound) = without {
                bound.set(false);
                if let Some(pause) = pause {
                    std::thread::sleep(pause);
                }
                let started = Instant::now();
                toolbox.call(tool, json!({}), None, None).await.unwrap();
                without_samples.push(started.elapsed());
                bound.set(true);
            }
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            bare_samples.push(bare_spawn(&module, &line));
        }
        host.shutdown().await;
    });
    Measured {
        host: p50(host_samples),
        bare: p50(bare_samples),
        without: (!without_samples.is_empty()).then(|| p50(without_samples)),
    }
}

fn report_invoke(label: &str, measured: &Measured) {
    let Measured {
        host,
        bare,
        without,
    } = measured;
    println!(
        "invoke [{label}]: host library p50 {:.3} ms, bare spawn p50 {:.3} ms, ratio {:.2} (target <= 1.5)",
        host.as_secs_f64() * 1e3,
        bare.as_secs_f64() * 1e3,
        host.as_secs_f64() / bare.as_secs_f64()
    );
    if let Some(without) = without {
        println!(
            "invoke [{label}]: without the bound p50 {:.3} ms; with/without ratio {:.3} ({:+.3} ms)",
            without.as_secs_f64() * 1e3,
            host.as_secs_f64() / without.as_secs_f64(),
            (host.as_secs_f64() - without.as_secs_f64()) * 1e3
        );
    }
}

/// Whether the part `name` was asked for (every part when none was named;
/// cargo passes `--bench`, which names none).
fn selected(name: &str) -> bool {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    names.is_empty() || names.iter().any(|n| n == name)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let temp = tempfile::tempdir().unwrap();

    // 1. Invoke latency: the host's own overhead (confinement off), and with
    //    the default confinement (landlock + rlimits applied before exec).
    let back_to_back = |config, warm| Part {
        config,
        warm,
        pause: None,
        runs: INVOKE_RUNS,
        state_files: None,
        without: None,
    };
    let paused = |without| Part {
        config: "",
        warm: false,
        pause: Some(PAUSE),
        runs: PAUSED_RUNS,
        state_files: None,
        without,
    };
    let state = |warm| Part {
        state_files: Some(100),
        without: Some(Bound::StorageWatch),
        ..back_to_back("", warm)
    };
    let parts = [
        (
            "off",
            "confinement off",
            back_to_back("confinement = \"off\"\n", false),
        ),
        ("default", "confinement default", back_to_back("", false)),
        // A long-running host (`modhost mcp`) starts each call's process ahead.
        (
            "warm",
            "confinement default, warm processes",
            back_to_back("", true),
        ),
        (
            "paused",
            "confinement default, 50 ms pause before each",
            paused(None),
        ),
        (
            "memcg",
            "confinement default, with and without the memory cgroup",
            Part {
                without: Some(Bound::MemoryCgroup),
                ..back_to_back("", false)
            },
        ),
        (
            "memcg-paused",
            "confinement default, 50 ms pause, with and without the memory cgroup",
            paused(Some(Bound::MemoryCgroup)),
        ),
        (
            "state-100",
            "writable state folder of 100 files, with and without its watch",
            state(false),
        ),
        (
            "state-100-warm",
            "warm processes, writable state folder of 100 files, with and without its watch",
            state(true),
        ),
    ];
    for (name, label, part) in parts {
        if selected(name) {
            let dir = temp.path().join(format!("invoke-{name}"));
            report_invoke(label, &measure_invoke(&runtime, &dir, &part));
        }
    }

    // 2. discover with 100 cached modules.
    if !selected("discover") {
        return;
    }
    let home = temp.path().join("discover-home");
    for i in 0..MODULES {
        install(&home, &format!("mod{i:03}"), false);
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
