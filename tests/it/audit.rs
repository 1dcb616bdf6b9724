//! A record of every call (`modhost::audit`), read back and checked by
//! `modhost audit verify|show|tail`, and the calls' traces over OTLP
//! (`modhost::telemetry`).
//!
//! Each test is the attack or accident the guarantee is for: a record
//! edited, removed or moved (in the current file or a rotated one) must be
//! named by `verify`, at the first bad record; a writer killed mid-line
//! must read as a torn tail, not as tampering, and be repaired by the next
//! call; a call refused by a rule, a quota or the sandbox must leave a
//! record saying so; the input and output of a call must never be in the
//! log. The trace test receives what `modhost mcp` exports with a small
//! OTLP/HTTP receiver and decodes it with the official protobuf types.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home};

const TOOL: &str = "echo__echo_echo";

fn audit_file(home: &Home, name: &str) -> PathBuf {
    home.path().join("audit").join(name)
}

/// `modhost audit verify --json`: its exit code and report.
fn verify(home: &Home) -> (i32, Value) {
    let run = home.run(&["audit", "verify", "--json"]);
    assert!(run.code == 0 || run.code == 1, "{run:#?}");
    (run.code, run.json())
}

#[track_caller]
fn assert_intact(home: &Home, records: u64) -> Value {
    let (code, report) = verify(home);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["verdict"]["status"], "intact", "{report:#}");
    assert_eq!(report["records"], records, "{report:#}");
    report
}

/// The first bad record `verify` names: (file, line).
#[track_caller]
fn named(home: &Home) -> (String, u64) {
    let (code, report) = verify(home);
    assert_eq!(code, 1, "{report:#}");
    let verdict = &report["verdict"];
    assert_eq!(verdict["status"], "tampered", "{report:#}");
    (
        verdict["file"].as_str().unwrap_or_default().to_owned(),
        verdict["line"].as_u64().unwrap_or_default(),
    )
}

/// `modhost audit show --json [args]`.
fn show(home: &Home, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["audit", "show", "--json"];
    all.extend_from_slice(args);
    let run = home.run(&all);
    run.expect_code(0);
    run.json().as_array().cloned().unwrap_or_default()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write the log file");
}

/// Call `name` with `arguments` over a running `modhost mcp`.
fn call(server: &mut McpStdio, name: &str, arguments: &Value) -> Value {
    server.request("tools/call", &json!({"name": name, "arguments": arguments}))
}

#[test]
fn a_hundred_calls_leave_a_hundred_records_and_any_change_to_one_is_named() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    // Small files, so the hundred records rotate into several.
    home.write_config("[audit]\nmax_file_bytes = 16384\n");
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    for i in 0..100 {
        let response = call(
            &mut server,
            TOOL,
            &json!({"marker": format!("SECRET-INPUT-{i}")}),
        );
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
    }
    server.finish();

    let report = assert_intact(&home, 100);
    let files: Vec<String> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    assert!(files.len() >= 3, "the log rotated: {files:?}");
    assert_eq!(files.last().map(String::as_str), Some("audit.jsonl"));

    let records = show(&home, &[]);
    assert_eq!(records.len(), 100);
    let workspace = std::fs::canonicalize(home.workspace()).unwrap();
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["seq"], i as u64 + 1, "{record:#}");
        assert_eq!(record["event"], "call");
        assert_eq!(record["outcome"], "ok", "{record:#}");
        assert_eq!(record["tool"], TOOL);
        assert_eq!(record["module"], "echo");
        assert_eq!(record["capability"], "echo.echo");
        assert!(record["principal"].as_str().unwrap().starts_with("local:"));
        assert!(
            !record["digest"].as_str().unwrap_or_default().is_empty(),
            "{record:#}"
        );
        assert!(record["contract_version"].is_string());
        assert!(record["request_id"].is_string());
        assert_eq!(
            record["grants"]["roots"]["workspace"],
            json!({"path": workspace.display().to_string(), "access": "read"})
        );
        assert!(
            record["approval"]["rule"]
                .as_str()
                .unwrap()
                .starts_with("default:"),
            "{record:#}"
        );
        assert_eq!(record["input_sha256"].as_str().unwrap().len(), 64);
        assert!(record["output_bytes"].as_u64().unwrap() > 0);
        assert!(record["duration_ms"].as_f64().unwrap() > 0.0);
    }
    // Never what a call carried: the input came back in each output, and
    // neither is in any file of the log.
    for file in &files {
        let text = std::fs::read_to_string(audit_file(&home, file)).unwrap();
        assert!(
            !text.contains("SECRET-INPUT"),
            "{file} holds a call's input"
        );
    }

    // Edits, deletions and swaps, in rotated files and the current one:
    // each is named at its first bad record, and the log is whole again
    // once restored.
    let rotated = audit_file(&home, "audit-2.jsonl");
    let current = audit_file(&home, "audit.jsonl");
    let first = audit_file(&home, "audit-1.jsonl");
    type Change = fn(&mut Vec<String>);
    let cases: [(&Path, Change, &str, u64); 6] = [
        (
            &rotated,
            |l| l[2] = l[2].replace("\"outcome\":\"ok\"", "\"outcome\":\"failed\""),
            "audit-2.jsonl",
            3,
        ),
        (&rotated, |l| drop(l.remove(0)), "audit-2.jsonl", 1),
        (&first, |l| l.swap(1, 2), "audit-1.jsonl", 2),
        (&current, |l| drop(l.remove(1)), "audit.jsonl", 2),
        (
            &current,
            |l| {
                let last = l.len() - 1;
                l[last] = l[last].replace("\"principal\":\"local:", "\"principal\":\"local:x");
            },
            "audit.jsonl",
            0,
        ),
        (&current, |l| drop(l.pop()), "audit.jsonl", 0),
    ];
    for (path, change, file, line) in cases {
        let original = lines(path);
        let mut changed = original.clone();
        change(&mut changed);
        write_lines(path, &changed);
        // 0: the file's last line (the record changed, or the one removed).
        let line = if line == 0 {
            original.len() as u64
        } else {
            line
        };
        assert_eq!(named(&home), (file.to_owned(), line), "{}", path.display());
        write_lines(path, &original);
        assert_intact(&home, 100);
    }

    // A writer stopped in the middle of a line: a torn tail, not tampering;
    // the next call (here `modhost invoke`) cuts it off and says so.
    let half = b"{\"seq\":101,\"prev\":\"0a1b";
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(&current)
        .unwrap();
    torn.write_all(half).unwrap();
    let (code, report) = verify(&home);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["verdict"]["status"], "torn_tail", "{report:#}");
    assert_eq!(report["verdict"]["bytes"], half.len(), "{report:#}");
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    let report = assert_intact(&home, 102);
    assert!(
        report["notes"][0].as_str().unwrap().contains("torn"),
        "{report:#}"
    );
    let tail = home.run(&["audit", "tail", "-n", "2", "--json"]).json();
    assert_eq!(tail[0]["event"], "repair", "{tail:#}");
    assert_eq!(tail[0]["repair"]["torn_bytes"], half.len(), "{tail:#}");
    assert_eq!(tail[1]["outcome"], "ok", "{tail:#}");
    assert_eq!(tail[1]["seq"], 102);
}

/// A module in POSIX sh that opens a file it was granted nothing for: the
/// sandbox refuses the open, and it exits without an answer.
const PEEKER: &str = r#"#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"peeker","version":"1.0.0","title":"peeker","description":"Reads a file it was not granted.","capabilities":[{"id":"peeker.peek","title":"Peek","description":"Read a file outside every grant.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":false,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  exec 3< "OUTSIDE/secret.txt"
  IFS= read -r secret <&3
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"output":{"secret":"'"$secret"'"}}}'
  ;;
esac
"#;

#[test]
fn a_call_refused_by_a_rule_a_quota_or_the_sandbox_leaves_a_record_saying_so() {
    let home = Home::new();
    home.require_landlock();
    home.install(Fixture::Echo, "echo");
    let outside = home.outside();
    std::fs::write(outside.join("secret.txt"), "the operator's secret\n").unwrap();
    let peeker = home.modules().join("peeker").join("peeker");
    std::fs::create_dir_all(peeker.parent().unwrap()).unwrap();
    std::fs::write(
        &peeker,
        PEEKER.replace("OUTSIDE", &outside.display().to_string()),
    )
    .unwrap();
    std::fs::set_permissions(&peeker, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", "peeker"]).expect_code(0);
    home.write_config(
        "[[approval.rules]]\nname = \"no listing\"\ncapability = \"echo.list_state\"\ndecision = \"deny\"\n\n\
         [quotas.tools.\"echo__echo_echo\"]\ncalls_per_minute = 1\n",
    );

    // A rule: `modhost invoke` refuses it before anything runs.
    let run = home.invoke("echo", "echo.list_state", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "denied");
    let denied = show(&home, &["--capability", "echo.list_state"]);
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0]["outcome"], "refused");
    assert_eq!(denied[0]["kind"], "denied");
    assert_eq!(denied[0]["approval"]["rule"], "rule \"no listing\"");
    assert_eq!(denied[0]["module"], "echo");

    // A quota: the second call in one minute, in one server.
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let first = call(&mut server, TOOL, &json!({}));
    assert_eq!(first["result"]["isError"], json!(false), "{first}");
    let second = call(&mut server, TOOL, &json!({}));
    assert_eq!(second["result"]["isError"], json!(true), "{second}");
    server.finish();
    let limited = show(&home, &["--capability", TOOL, "--outcome", "refused"]);
    assert_eq!(limited.len(), 1, "{limited:#?}");
    assert_eq!(limited[0]["kind"], "rate_limited");
    let retry = limited[0]["retry_after_s"].as_u64().unwrap();
    assert!((1..=60).contains(&retry), "{limited:#?}");

    // The sandbox: the module's open of a file outside its grants fails.
    let run = home.invoke("peeker", "peeker.peek", &json!({}), &[]);
    let error = run.invoke_error();
    assert!(!run.stdout.contains("operator's secret"), "{run:#?}");
    let peeked = show(&home, &["--module", "peeker"]);
    assert_eq!(peeked.len(), 1, "{peeked:#?}");
    assert_eq!(peeked[0]["outcome"], "failed", "{peeked:#?}");
    assert_eq!(peeked[0]["kind"], error["kind"]);
    assert_eq!(peeked[0]["sandbox_denied"], true, "{peeked:#?}");

    // Every record of the three, and the calls between, chain.
    assert_intact(&home, 4);
    let text = home.run(&["audit", "show", "--outcome", "refused"]);
    text.expect_code(0);
    assert_eq!(text.stdout.lines().count(), 2, "{}", text.stdout);
    assert!(text.stdout.contains("rate_limited"), "{}", text.stdout);
}

/// What an OTLP/HTTP receiver got: each request's path and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A receiver of OTLP over HTTP/1.1 on the loopback: it answers every POST
/// `200` with an empty (valid) export response and keeps what it got.
fn otlp_receiver() -> (u16, Received) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
    let port = listener.local_addr().unwrap().port();
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve_otlp(stream, &kept));
        }
    });
    (port, received)
}

fn serve_otlp(stream: std::net::TcpStream, kept: &Received) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut writer = stream;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request).unwrap_or(0) == 0 {
            return;
        }
        let path = request
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push((path, body));
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_calls_span_reaches_an_otlp_receiver_under_the_mcp_requests_traceparent() {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[telemetry]\nenabled = true\n");
    let (port, received) = otlp_receiver();
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |command| {
        command
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            )
            .env("OTEL_BSP_SCHEDULE_DELAY", "100");
        for proxy in [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            command.env_remove(proxy);
        }
    });
    let response = server.request(
        "tools/call",
        &json!({"name": TOOL, "arguments": {},
                "_meta": {"traceparent": format!("00-{trace_id}-{parent}-01")}}),
    );
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    // The server ends, and sends what it still holds as it does.
    server.finish();

    let spans_of = |received: &[(String, Vec<u8>)]| {
        received
            .iter()
            .filter(|(path, _)| path == "/v1/traces")
            .flat_map(|(_, body)| {
                let request = ExportTraceServiceRequest::decode(body.as_slice())
                    .expect("an ExportTraceServiceRequest");
                request
                    .resource_spans
                    .into_iter()
                    .flat_map(|r| r.scope_spans)
                    .flat_map(|s| s.spans)
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = spans_of(&received.lock().unwrap());
        if spans.len() >= 2 || Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let call_span = spans
        .iter()
        .find(|s| s.name == format!("execute_tool {TOOL}"))
        .unwrap_or_else(|| panic!("no call span in {spans:#?}"));
    assert_eq!(hex(&call_span.trace_id), trace_id, "{call_span:#?}");
    assert_eq!(hex(&call_span.parent_span_id), parent, "{call_span:#?}");
    let process = spans
        .iter()
        .find(|s| s.name == "module process")
        .unwrap_or_else(|| panic!("no module process span in {spans:#?}"));
    assert_eq!(hex(&process.trace_id), trace_id);
    assert_eq!(process.parent_span_id, call_span.span_id, "{process:#?}");

    let received = received.lock().unwrap();
    let metrics: Vec<String> = received
        .iter()
        .filter(|(path, _)| path == "/v1/metrics")
        .flat_map(|(_, body)| {
            ExportMetricsServiceRequest::decode(body.as_slice())
                .expect("an ExportMetricsServiceRequest")
                .resource_metrics
                .into_iter()
                .flat_map(|r| r.scope_metrics)
                .flat_map(|s| s.metrics)
                .map(|m| m.name)
                .collect::<Vec<_>>()
        })
        .collect();
    for name in ["modhost.calls", "modhost.call.duration"] {
        assert!(
            metrics.iter().any(|m| m == name),
            "{name} not in {metrics:?}"
        );
    }
    // The record of the call names the same trace.
    let records = show(&home, &[]);
    assert_eq!(records[0]["trace_id"], trace_id, "{records:#?}");
}

/// `modhost audit verify --json` of a log a record in which says it is not
/// whole: exit 1, status `flagged`; the flagged record's problem.
#[track_caller]
fn flagged(home: &Home) -> String {
    let (code, report) = verify(home);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["verdict"]["status"], "flagged", "{report:#}");
    report["verdict"]["problem"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The red team's laundering: records removed (or the head removed), then
/// one more call, whose writer repairs the head. The log must stay not
/// intact, for good, naming the repair and what it says was lost, in
/// `verify` and in `audit show`.
#[test]
fn tampering_a_later_call_repairs_stays_not_intact_for_good() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    for _ in 0..6 {
        let response = call(&mut server, TOOL, &json!({}));
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
    }
    server.finish();
    assert_intact(&home, 6);
    let current = audit_file(&home, "audit.jsonl");
    let original = lines(&current);
    write_lines(&current, &original[..4]);
    assert_eq!(named(&home).0, "audit.jsonl");

    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    let problem = flagged(&home);
    assert!(
        problem.contains("record 5 is a repair no crash explains"),
        "{problem}"
    );
    assert!(problem.contains("the head named record 6"), "{problem}");
    let repair = &show(&home, &["--since", "1h"])[4];
    assert_eq!(repair["event"], "repair", "{repair:#}");
    assert_eq!(repair["repair"]["found"], "lost", "{repair:#}");
    assert_eq!(repair["repair"]["head_seq"], 6, "{repair:#}");
    let text = home.run(&["audit", "tail", "-n", "2"]);
    assert!(
        text.stdout.contains("NOT explained by a crash"),
        "{}",
        text.stdout
    );

    // And the head removed next: one more flag; neither goes away.
    std::fs::remove_file(audit_file(&home, "head")).unwrap();
    for _ in 0..3 {
        home.invoke("echo", "echo.echo", &json!({}), &[])
            .invoke_result();
    }
    let (_, report) = verify(&home);
    let flags = report["flagged"].as_array().unwrap();
    assert_eq!(flags.len(), 2, "{report:#}");
    assert!(
        flags[1]["problem"]
            .as_str()
            .unwrap()
            .contains("head was missing"),
        "{report:#}"
    );
    let text = home.run(&["audit", "verify"]);
    text.expect_code(1);
    assert!(text.stdout.starts_with("NOT INTACT"), "{}", text.stdout);
}

/// A record that cannot be written (`audit.jsonl` replaced by a link,
/// which the writer does not follow) does not fail the call, is counted in
/// the head by the `modhost invoke` that lost it, and the next call's
/// writer says so in a `gap` record; `verify` reports both.
#[test]
fn a_record_that_could_not_be_written_is_counted_and_never_verifies_as_intact() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    assert_intact(&home, 1);
    let current = audit_file(&home, "audit.jsonl");
    let aside = home.outside().join("aside.jsonl");
    std::fs::rename(&current, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &current).unwrap();
    for _ in 0..2 {
        home.invoke("echo", "echo.echo", &json!({}), &[])
            .invoke_result();
    }
    let problem = flagged(&home);
    assert!(
        problem.contains("2 records could not be written"),
        "{problem}"
    );
    assert_eq!(std::fs::read_to_string(&aside).unwrap().lines().count(), 1);

    std::fs::remove_file(&current).unwrap();
    std::fs::rename(&aside, &current).unwrap();
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    let problem = flagged(&home);
    assert!(
        problem.contains("record 2 says records are missing"),
        "{problem}"
    );
    let records = show(&home, &[]);
    assert_eq!(records[1]["event"], "gap", "{records:#?}");
    assert_eq!(records[1]["gap"]["records"], 2, "{records:#?}");
    assert_eq!(records[2]["outcome"], "ok", "{records:#?}");
}

/// An MCP client names tools that do not exist: a name that forges a line
/// of `audit show` with a newline and hides with an escape sequence, and
/// names of a megabyte. Each is recorded as at most 128 printable
/// characters and the whole name's digest, `audit show` prints no control
/// character, and the calls count against the principal's quota.
#[test]
fn an_mcp_clients_made_up_tool_names_are_recorded_short_printable_and_counted() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config("[quotas.each_principal]\ncalls_per_minute = 4\n");
    let forged = "x\n2026-12-06T05:00:00.000Z  #1  local:alice  echo__echo_echo  ok\u{1b}[8m";
    let huge = "B".repeat(1 << 20);
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    for name in [forged, &huge, &huge, &huge, &huge] {
        let response = call(&mut server, name, &json!({}));
        assert!(
            response.get("error").is_some() || response["result"]["isError"] == json!(true),
            "{response:.300}"
        );
    }
    // The principal's minute is used up by the made-up names.
    let real = call(&mut server, TOOL, &json!({}));
    assert_eq!(real["result"]["isError"], json!(true), "{real}");
    server.finish();

    let records = show(&home, &[]);
    assert_eq!(records.len(), 6, "{records:#?}");
    for record in &records[..5] {
        let tool = record["tool"].as_str().unwrap();
        assert!(tool.chars().count() <= 128, "{}", tool.len());
        assert!(!tool.chars().any(char::is_control), "{tool:?}");
        assert_eq!(record["tool_sha256"].as_str().unwrap().len(), 64);
    }
    let digest = |text: &str| sha256sum(text.as_bytes());
    assert_eq!(records[0]["tool_sha256"], digest(forged));
    assert_eq!(records[1]["tool_sha256"], digest(&huge));
    assert_eq!(records[3]["kind"], "not_found", "{:#}", records[3]);
    assert_eq!(records[4]["kind"], "rate_limited", "{:#}", records[4]);
    assert_eq!(records[5]["kind"], "rate_limited", "{:#}", records[5]);
    let size = std::fs::metadata(audit_file(&home, "audit.jsonl"))
        .unwrap()
        .len();
    assert!(size < 16 * 1024, "{size} bytes for six records");

    let text = home.run(&["audit", "show"]);
    text.expect_code(0);
    assert_eq!(text.stdout.lines().count(), 6, "{}", text.stdout);
    assert!(!text.stdout.contains('\u{1b}'), "{}", text.stdout);
}

/// A module that fails with a kind of its own 100,000 characters long,
/// with an escape sequence: recorded as `own` and the digest of what it
/// sent, never the kind itself.
const OWN_KIND: &str = r#"#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"ownkind","version":"1.0.0","title":"ownkind","description":"Fails with a kind of its own.","capabilities":[{"id":"ownkind.fail","title":"Fail","description":"Fail with a long kind.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":false,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  kind="\\u001b[31m$(printf '%0100000d' 0)"
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32000,"message":"failed","data":{"kind":"'"$kind"'"}}}'
  ;;
esac
"#;

#[test]
fn a_modules_own_error_kind_is_recorded_only_as_a_plain_word() {
    let home = Home::new();
    let module = home.modules().join("ownkind").join("ownkind");
    std::fs::create_dir_all(module.parent().unwrap()).unwrap();
    std::fs::write(&module, OWN_KIND).unwrap();
    std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", "ownkind"]).expect_code(0);
    let run = home.invoke("ownkind", "ownkind.fail", &json!({}), &[]);
    assert!(run.code == 1 || run.code == 2, "{run:#?}");
    let records = show(&home, &["--module", "ownkind"]);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["kind"], "own", "{:.300}", records[0]);
    let sent = format!("\u{1b}[31m{}", "0".repeat(100_000));
    assert_eq!(records[0]["kind_sha256"], sha256sum(sent.as_bytes()));
    let size = std::fs::metadata(audit_file(&home, "audit.jsonl"))
        .unwrap()
        .len();
    assert!(size < 4096, "{size} bytes for one record");
}

/// SHA-256 (hex) of `bytes`, as `sha256sum` (coreutils) computes it: how
/// anyone checks a digest the log holds.
fn sha256sum(bytes: &[u8]) -> String {
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils) runs");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// `timeout 1 modhost invoke …` and a terminal's Ctrl-C end the command
/// with a signal: the call is cancelled (its module killed), and its record
/// is written before the command exits.
#[test]
fn a_call_ended_by_a_signal_to_the_host_is_recorded_as_cancelled() {
    let home = Home::new();
    home.install(Fixture::Hang, "hang");
    home.run(&["pin", "hang"]).expect_code(0);
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let host = std::process::Command::new(&crate::support::binaries().modhost)
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args(["invoke", "hang", "hang.run", "--input", "{}"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Until the module runs: its process is up.
        let started = std::time::Instant::now();
        while home.live_module_processes().is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "no module started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let killed = std::process::Command::new("kill")
            .args([format!("-{signal}"), host.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let ended = host.wait_with_output().unwrap();
        assert_eq!(ended.status.code(), Some(code), "{ended:?}");
        home.assert_no_module_processes();
        let log = std::fs::read_to_string(home.path().join("audit/audit.jsonl")).unwrap();
        let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(last["capability"], "hang.run", "{last:#}");
        assert_eq!(last["outcome"], "cancelled", "{last:#}");
    }
    let verified = home.run(&["audit", "verify"]);
    verified.expect_code(0);
}
