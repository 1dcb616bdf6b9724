//! `cargo bench -p modhost --bench audit`: what the audit log costs a call.
//!
//! 1. Call latency with the audit log on (the default) and off (`[audit]
//!    enabled = false`), in the same run: homes with the same trivial
//!    module, called in turn (each round in another order) through the tool
//!    layer of a host that keeps processes warm (as `modhost mcp` does), so
//!    all see the same machine load. A second home with the log off is the
//!    control: its difference from the first is the noise of the
//!    measurement. Reports each p50, the differences and the ratio (target:
//!    the log's cost within the noise).
//! 2. One record alone: what `Host::record_refusal` costs its caller (the
//!    record handed to the log's writer thread), p50 and p99, and how long
//!    the writer takes for all of them (lock, head, line, head each).
//!
//! The module is a tiny `/bin/sh` script written into a temp home, so the
//! benchmark depends on no other crate's binaries.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use modhost::{Host, HostOptions};
use serde_json::json;

const CALLS: usize = 500;
/// Fewer than the writer's queue holds, so the caller never waits for room.
const RECORDS: usize = 1000;
const TOOL: &str = "trivial__trivial_ping";

fn install(home: &Path) {
    let descriptor = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "id": "trivial", "version": "1.0.0",
        "capabilities": [{"id": "trivial.ping", "input_schema": {"type": "object"},
                          "output_schema": {"type": "object"}}]
    }});
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": {"output": {"pong": true}}});
    let script = format!(
        "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{descriptor}' ;;\n  *) printf '%s\\n' '{result}' ;;\nesac\n"
    );
    let path = home.join("modules/trivial/trivial");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn open(dir: &Path, config: &str) -> Host {
    let home = dir.join("home");
    install(&home);
    std::fs::write(home.join("config.toml"), config).unwrap();
    Host::open(HostOptions {
        home: Some(home),
        workspace: Some(dir.into()),
    })
    .unwrap()
    .keep_warm()
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p) as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let temp = tempfile::tempdir().unwrap();
    let off_config = "[audit]\nenabled = false\n";
    let on = open(&temp.path().join("on"), "");
    let off = open(&temp.path().join("off"), off_config);
    let control = open(&temp.path().join("control"), off_config);

    // 1. Calls, in turn with the log on, off, and off again.
    let [mut with, mut without, mut again] = runtime.block_on(async {
        let hosts = [&on, &off, &control];
        for host in hosts {
            host.pin("trivial").await.unwrap();
        }
        // Past the racy window of the pins just written (see benches/host.rs).
        std::thread::sleep(Duration::from_millis(1200));
        let mut toolboxes = Vec::new();
        for host in hosts {
            toolboxes.push(modhost::tools::open_toolbox(host).await.unwrap());
        }
        for _ in 0..20 {
            for toolbox in &toolboxes {
                toolbox.call(TOOL, json!({}), None, None).await.unwrap();
            }
        }
        let mut samples: [Vec<Duration>; 3] = Default::default();
        for round in 0..CALLS {
            // Each round starts with another home, so none always follows
            // the same one.
            for step in 0..3 {
                let which = (round + step) % 3;
                let started = Instant::now();
                let outcome = toolboxes[which]
                    .call(TOOL, json!({}), None, None)
                    .await
                    .unwrap();
                samples[which].push(started.elapsed());
                assert!(!outcome.is_error, "{}", outcome.text);
            }
        }
        for host in hosts {
            host.shutdown().await;
        }
        samples
    });
    on.flush_audit_log();
    let records = std::fs::read_to_string(on.layout().audit_log_path())
        .map(|text| text.lines().count())
        .unwrap_or(0);
    assert!(records > CALLS, "the calls with the log on were recorded");
    assert!(
        !off.layout().audit_dir().exists(),
        "nothing recorded when off"
    );
    let (p50_on, p50_off, p50_again) = (
        percentile(&mut with, 0.5),
        percentile(&mut without, 0.5),
        percentile(&mut again, 0.5),
    );
    println!(
        "call latency, warm: audit on p50 {:.3} ms, audit off p50 {:.3} ms: on costs {:+.3} ms, ratio {:.3}; \
         control (off again) p50 {:.3} ms, {:+.3} ms from off: the noise ({CALLS} calls each, in turn)",
        ms(p50_on),
        ms(p50_off),
        ms(p50_on) - ms(p50_off),
        p50_on.as_secs_f64() / p50_off.as_secs_f64(),
        ms(p50_again),
        ms(p50_again) - ms(p50_off),
    );

    // 2. One record alone.
    let input = json!({"query": "TODO", "path": "src"});
    let mut appends = Vec::with_capacity(RECORDS);
    let all_started = Instant::now();
    for _ in 0..RECORDS {
        let mut call = modhost::audit::RefusedCall::new(
            TOOL,
            &input,
            modproto::HostErrorKind::RateLimited.into(),
        );
        call.module = Some("trivial");
        call.capability = Some("trivial.ping");
        call.rule = Some("bench");
        let started = Instant::now();
        on.record_refusal(&call);
        appends.push(started.elapsed());
    }
    on.flush_audit_log();
    let written = all_started.elapsed();
    let verified = modhost::audit::verify(on.layout()).unwrap();
    assert!(verified.is_intact(), "{verified:?}");
    println!(
        "one audit record, to its caller: p50 {:.1} µs, p99 {:.1} µs; written by the log's thread at {:.1} µs each ({RECORDS} records; the log verifies: {} records)",
        percentile(&mut appends, 0.5).as_secs_f64() * 1e6,
        percentile(&mut appends, 0.99).as_secs_f64() * 1e6,
        written.as_secs_f64() * 1e6 / RECORDS as f64,
        verified.records
    );
}
