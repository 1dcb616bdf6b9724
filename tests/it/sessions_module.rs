//! The shipped `sessions` module through the real host: transcripts of both
//! formats generated here (a 20,000-line Claude Code session, a Codex
//! session, a corrupt file) under an operator-configured `transcripts`
//! source root; list, search and assay by `invoke`, an assay over `modhost
//! mcp` with its progress, conformance, the knowledge skill, and the attack
//! on the read-only root.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::python_attacker::{EACCES, EPERM, assert_refused};
use crate::support::{Home, module_binary, write_file};

const CLAUDE: &str = "claude/-home-ana-shop/5f0c1d2e-big.jsonl";
const CODEX: &str = "codex/2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4.jsonl";
const CORRUPT: &str = "claude/-home-ana-shop/corrupt.jsonl";
/// Exchanges of the big Claude Code session, four lines each.
const EXCHANGES: u64 = 5_000;
/// The exchange whose user turn holds [`MARKER`].
const MARKED_EXCHANGE: u64 = 4_990;
const MARKER: &str = "needle-7f3a";
/// Codex exchanges.
const CODEX_EXCHANGES: u64 = 6;
/// Errno of a write to a read-only filesystem, which a read-only bind could give.
const EROFS: i64 = 30;

/// `2025-06-01T10:00:00.000Z` plus `seconds`.
fn stamp(seconds: u64) -> String {
    let s = 10 * 3600 + seconds;
    format!(
        "2025-06-01T{:02}:{:02}:{:02}.000Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A Claude Code session of [`EXCHANGES`] exchanges: a user turn, one
/// assistant message streamed as two records (text, then a `Bash` or `Read`
/// tool use) repeating its usage, and the tool result (every tenth an error).
fn claude_transcript() -> String {
    let mut out = String::new();
    for i in 0..EXCHANGES {
        let t = i * 4;
        let base = |kind: &str, at: u64| {
            json!({"type": kind, "sessionId": "5f0c1d2e-big", "cwd": "/home/ana/shop", "timestamp": stamp(at),
                   "uuid": format!("u{at}"), "isSidechain": false, "userType": "external", "version": "1.0.98"})
        };
        let mut user = base("user", t);
        let text = if i == MARKED_EXCHANGE {
            format!("step {i}: look for {MARKER} in the logs")
        } else {
            format!("step {i}: run the tests")
        };
        user["message"] = json!({"role": "user", "content": text});
        let usage = json!({"input_tokens": 3, "output_tokens": 7, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 10});
        let tool = if i % 2 == 0 { "Bash" } else { "Read" };
        let mut said = base("assistant", t + 1);
        said["message"] = json!({"id": format!("msg_{i}"), "role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": format!("Running step {i}.")}], "usage": usage});
        let mut used = base("assistant", t + 2);
        used["message"] = json!({"id": format!("msg_{i}"), "role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": [{"type": "tool_use", "id": format!("toolu_{i}"), "name": tool, "input": {}}], "usage": usage});
        let mut result = base("user", t + 3);
        result["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
            "content": "ok", "is_error": i % 10 == 9}]});
        for line in [user, said, used, result] {
            out.push_str(&format!("{line}\n"));
        }
    }
    out
}

/// A Codex session (envelopes): meta, the injected context, then
/// [`CODEX_EXCHANGES`] exchanges of a user turn, a shell call (every third
/// exits 1), an assistant turn and the running token count.
fn codex_transcript() -> String {
    let env = |at: u64, kind: &str, payload: Value| {
        format!(
            "{}\n",
            json!({"timestamp": format!("2025-10-29T01:00:{at:02}.000Z"), "type": kind, "payload": payload})
        )
    };
    let mut out = env(
        0,
        "session_meta",
        json!({"id": "019a2d7a-41c4", "timestamp": "2025-10-29T01:00:00.000Z", "cwd": "/srv/api",
               "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": null}),
    );
    out += &env(
        0,
        "response_item",
        json!({"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "<environment_context>rename the handler</environment_context>"}]}),
    );
    for i in 0..CODEX_EXCHANGES {
        let at = 1 + i * 5;
        out += &env(
            at,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("part {i}: rename the handler")}]}),
        );
        out += &env(
            at,
            "turn_context",
            json!({"cwd": "/srv/api", "model": "gpt-5-codex"}),
        );
        out += &env(
            at + 1,
            "response_item",
            json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": format!("c{i}")}),
        );
        let exit = if i % 3 == 2 { 1 } else { 0 };
        out += &env(
            at + 2,
            "response_item",
            json!({"type": "function_call_output", "call_id": format!("c{i}"),
                   "output": format!("{{\"output\":\"\",\"metadata\":{{\"exit_code\":{exit}}}}}")}),
        );
        out += &env(
            at + 3,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("Done with part {i}.")}]}),
        );
        out += &env(
            at + 4,
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage":
                {"input_tokens": 100 * (i + 1), "cached_input_tokens": 40 * (i + 1), "output_tokens": 9 * (i + 1)}}}),
        );
    }
    out
}

/// Transcripts of both formats and a corrupt file, in a folder outside the
/// home and workspace, newest first: the Claude session, the Codex one, the
/// corrupt file.
fn write_transcripts(home: &Home) -> PathBuf {
    let root = home.outside().join("transcripts");
    let claude = claude_transcript();
    assert_eq!(claude.lines().count(), 20_000);
    write_file(&root, CLAUDE, claude);
    write_file(&root, CODEX, codex_transcript());
    write_file(
        &root,
        CORRUPT,
        b"\x00\x01PK\x03\x04 not a transcript\n\xff\xfe{{{\n",
    );
    let now = SystemTime::now();
    for (path, age) in [(CLAUDE, 10), (CODEX, 20), (CORRUPT, 30)] {
        let file = std::fs::File::options()
            .write(true)
            .open(root.join(path))
            .unwrap();
        file.set_modified(now - Duration::from_secs(age)).unwrap();
    }
    root
}

/// Install the built `sessions` module as the README says: its binary and
/// its knowledge in one folder, archived, `modhost install`ed (which pins
/// it); then point `transcripts` at `root`.
fn install_sessions(home: &Home, root: &Path) {
    let staged = home.outside().join("package/sessions");
    std::fs::create_dir_all(staged.join("knowledge")).unwrap();
    std::fs::copy(module_binary("sessions"), staged.join("sessions")).unwrap();
    let knowledge =
        crate::support::tests_dir().join("../modules/sessions/knowledge/using-sessions.md");
    std::fs::copy(&knowledge, staged.join("knowledge/using-sessions.md")).unwrap();
    let archive = home.outside().join("sessions.tar.gz");
    let status = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(staged.parent().unwrap())
        .arg("sessions")
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed");
    home.run(&["install", &archive.to_string_lossy()])
        .expect_code(0);
    assert_eq!(
        home.entry("sessions")["pin"],
        "pinned",
        "{:#}",
        home.entry("sessions")
    );
    home.write_config(&format!("[source_roots]\ntranscripts = {:?}\n", root));
}

fn sessions_home() -> (Home, PathBuf) {
    let home = Home::new();
    let root = write_transcripts(&home);
    install_sessions(&home, &root);
    (home, root)
}

/// Every file under `root` with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

fn invoke(home: &Home, capability: &str, input: &Value) -> Value {
    home.invoke("sessions", capability, input, &[])
        .invoke_result()
}

#[test]
fn list_search_and_assay_read_both_formats_and_report_the_corrupt_file() {
    let (home, root) = sessions_home();
    let before = tree(&root);

    let list = invoke(&home, "sessions.list", &json!({}))["output"].clone();
    let sessions = list["sessions"].as_array().unwrap();
    let names: Vec<&str> = sessions
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, [CLAUDE, CODEX], "newest first: {list:#}");
    assert_eq!(sessions[0]["format"], "claude-code");
    assert_eq!(sessions[0]["lines"], 20_000);
    assert_eq!(sessions[0]["turns"], 2 * EXCHANGES);
    assert_eq!(sessions[0]["project"], "/home/ana/shop");
    assert_eq!(sessions[0]["models"], json!(["claude-sonnet-4-20250514"]));
    assert_eq!(sessions[0]["started"], "2025-06-01T10:00:00.000Z");
    assert_eq!(sessions[0]["duration_seconds"], EXCHANGES * 4 - 1);
    assert_eq!(sessions[1]["format"], "codex");
    assert_eq!(sessions[1]["models"], json!(["gpt-5-codex"]));
    assert_eq!(list["files"], 3);
    assert_eq!(list["skipped"].as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list["skipped"][0]["session"], CORRUPT);
    let reason = list["skipped"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("not JSON Lines (line 1"), "{reason}");

    // The marker sits in one user turn near the end of the 20,000 lines.
    let search = invoke(
        &home,
        "sessions.search",
        &json!({"query": MARKER.to_uppercase()}),
    )["output"]
        .clone();
    assert_eq!(
        search["matches"],
        json!([{"session": CLAUDE, "turn": 2 * MARKED_EXCHANGE + 1, "line": 4 * MARKED_EXCHANGE + 1,
                "role": "user", "timestamp": stamp(4 * MARKED_EXCHANGE),
                "snippet": format!("step {MARKED_EXCHANGE}: look for {MARKER} in the logs")}]),
        "{search:#}"
    );
    assert_eq!(search["sessions_searched"], 2);
    assert_eq!(search["skipped"][0]["session"], CORRUPT);
    // Bounded: more matches exist than asked for.
    let bounded = invoke(
        &home,
        "sessions.search",
        &json!({"query": "step", "max_results": 3}),
    )["output"]
        .clone();
    assert_eq!(bounded["matches"].as_array().unwrap().len(), 3);
    assert_eq!(bounded["truncated"], true);
    // The injected context is not a turn; the real user turns are.
    let codex = invoke(
        &home,
        "sessions.search",
        &json!({"query": "rename the handler", "sessions": ["019a2d7a-41c4"]}),
    )["output"]
        .clone();
    let turns: Vec<u64> = codex["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 3, 5, 7, 9, 11], "{codex:#}");

    let assay = invoke(&home, "sessions.assay", &json!({"last": 3}));
    let out = &assay["output"];
    let big = &out["sessions"][0];
    assert_eq!(big["session"], CLAUDE);
    assert_eq!(
        big["turns"],
        json!({"user": EXCHANGES, "assistant": EXCHANGES})
    );
    assert_eq!(
        big["tool_calls"],
        json!({"Bash": EXCHANGES / 2, "Read": EXCHANGES / 2})
    );
    assert_eq!(big["tool_errors"], EXCHANGES / 10);
    assert_eq!(
        big["tokens"],
        json!({"input": 3 * EXCHANGES, "output": 7 * EXCHANGES, "cache_read": 1000 * EXCHANGES, "cache_write": 10 * EXCHANGES}),
        "each streamed message's usage counted once"
    );
    let codex = &out["sessions"][1];
    assert_eq!(
        codex["turns"],
        json!({"user": CODEX_EXCHANGES, "assistant": CODEX_EXCHANGES})
    );
    assert_eq!(codex["tool_calls"], json!({"shell": CODEX_EXCHANGES}));
    assert_eq!(codex["tool_errors"], 2);
    assert_eq!(
        codex["tokens"],
        json!({"input": 360, "output": 54, "cache_read": 240, "cache_write": 0})
    );
    assert_eq!(out["skipped"][0]["session"], CORRUPT);
    assert_eq!(out["totals"]["sessions"], 2);

    // The report is an artifact in the module's own artifacts root.
    let report_rel = out["report"].as_str().unwrap();
    let report_path = home.path().join("artifacts/sessions").join(report_rel);
    let report = std::fs::read_to_string(&report_path)
        .unwrap_or_else(|e| panic!("{}: {e}; {assay:#}", report_path.display()));
    for needle in [
        format!("## {CLAUDE}"),
        format!("## {CODEX}"),
        format!("- {CORRUPT}: not JSON Lines"),
    ] {
        assert!(
            report.contains(&needle),
            "{needle:?} not in the report:\n{report}"
        );
    }
    assert_eq!(assay["artifacts"][0]["path"], report_rel, "{assay:#}");

    assert_eq!(tree(&root), before, "the transcripts changed");
    home.assert_no_module_processes();
}

#[test]
fn the_sessions_module_conforms_with_its_examples_run_on_a_source_root() {
    let (home, _root) = sessions_home();
    let run = home.run(&["conformance", "sessions", "--json"]);
    let report = run.json();
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["warnings"], 0, "{report:#}");
    run.expect_code(0);
}

#[test]
fn its_skill_is_served_with_the_digest_the_descriptor_declares() {
    let (home, _root) = sessions_home();
    let run = home.run(&[
        "knowledge",
        "sessions",
        "--skill",
        "using-sessions",
        "--json",
    ]);
    run.expect_code(0);
    let loaded = run.json();
    assert_eq!(loaded["warnings"], json!([]), "{loaded:#}");
    let content = loaded["skills"][0]["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("# Using the sessions module"),
        "{loaded:#}"
    );
}

#[test]
fn an_assay_over_mcp_answers_with_its_report_and_progress_per_session() {
    let (home, _root) = sessions_home();
    let ws = home.workspace();
    let mut server = McpStdio::start(&home, Some(&ws), |_| {});
    let tool = server
        .tool_names()
        .into_iter()
        .find(|n| n.starts_with("sessions") && n.ends_with("assay"))
        .expect("an assay tool");
    let id = server.send_request(
        "tools/call",
        &json!({"name": tool, "arguments": {"last": 2}, "_meta": {"progressToken": "assay-1"}}),
    );
    let mut progress = Vec::new();
    let response = loop {
        let message = server.next_message(Duration::from_secs(60));
        if message["method"] == "notifications/progress" {
            progress.push(message["params"].clone());
        } else if message.get("method").is_none() {
            break message;
        }
    };
    assert_eq!(response["id"], json!(id), "{response:#}");
    let result = &response["result"];
    assert_ne!(result["isError"], json!(true), "{result:#}");
    let text = result.to_string();
    assert!(text.contains(CLAUDE) && text.contains(CODEX), "{result:#}");
    assert!(
        progress.iter().all(|p| p["progressToken"] == "assay-1") && progress.len() >= 2,
        "one progress notification per session: {progress:#?}"
    );
    let messages: Vec<&str> = progress
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert!(
        messages.contains(&format!("reading {CLAUDE}").as_str()),
        "{messages:?}"
    );
    server.finish();
    home.assert_no_module_processes();
}

/// A module declaring the very `transcripts` root `sessions` declares, whose
/// capability even claims to write it, tries every kind of write there.
#[test]
fn no_module_can_write_to_the_transcripts_root() {
    let (home, root) = sessions_home();
    home.require_landlock();
    let before = tree(&root);
    let described = home
        .run(&["describe", "sessions", "--json"])
        .expect_code(0)
        .json();
    let transcripts = described["descriptor"]["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "transcripts")
        .cloned()
        .expect("sessions declares transcripts");
    let descriptor = json!({
        "id": "scribbler", "version": "1.0.0", "roots": [transcripts],
        "capabilities": [{"id": "scribbler.write", "description": "tries to write the transcripts",
            "input_schema": {"type": "object"},
            "effects": {"reads": ["transcripts"], "writes": ["transcripts"]}}]
    });
    let script = format!(
        r#"#!/usr/bin/python3
import json, os, sys
request = json.loads(sys.stdin.readline())
if request["method"] != "invoke":
    print(json.dumps({{"jsonrpc": "2.0", "id": request["id"], "result": {descriptor}}}))
    sys.exit(0)
granted = request["params"]["roots"]["transcripts"]
root = granted["path"]
def attempt(action):
    try:
        action()
        return {{"ok": True, "errno": 0}}
    except OSError as e:
        return {{"ok": False, "errno": e.errno}}
def overwrite():
    with open(os.path.join(root, "{CLAUDE}"), "r+b") as f:
        f.write(b"forged")
def plant():
    with open(os.path.join(root, "planted.jsonl"), "xb") as f:
        f.write(b"{{}}")
output = {{
    "access": granted["access"],
    "overwrite": attempt(overwrite),
    "truncate": attempt(lambda: os.truncate(os.path.join(root, "{CLAUDE}"), 0)),
    "plant": attempt(plant),
    "unlink": attempt(lambda: os.unlink(os.path.join(root, "{CODEX}"))),
    "rename": attempt(lambda: os.rename(os.path.join(root, "{CODEX}"), os.path.join(root, "moved.jsonl"))),
    "mkdir": attempt(lambda: os.mkdir(os.path.join(root, "new"))),
}}
print(json.dumps({{"jsonrpc": "2.0", "id": request["id"], "result": {{"output": output}}}}))
"#
    );
    let folder = home.modules().join("scribbler");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("scribbler");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", "scribbler"]).expect_code(0);

    let report = home
        .invoke("scribbler", "scribbler.write", &json!({}), &["--approve"])
        .invoke_result()["output"]
        .clone();
    assert_eq!(
        report["access"], "read",
        "a source root is granted read-only: {report:#}"
    );
    for attempt in [
        "overwrite",
        "truncate",
        "plant",
        "unlink",
        "rename",
        "mkdir",
    ] {
        assert_refused(&report[attempt], &[EACCES, EPERM, EROFS], attempt);
    }
    assert_eq!(tree(&root), before, "a write reached the transcripts");
    home.assert_no_module_processes();
}
