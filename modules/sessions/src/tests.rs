//! The module answering whole requests over small hand-written transcripts
//! of both formats, in the record shapes the agents write.

use std::cell::RefCell;
use std::io::Cursor;
use std::path::Path;
use std::rc::Rc;

use serde_json::{Value, json};

/// Claude Code: one user turn, one assistant message streamed as three
/// records (text, tool_use, tool_use) with its usage repeated, a failed
/// tool result, an injected meta message, a second assistant message with
/// an API error, a system error.
fn claude_lines() -> Vec<Value> {
    let base = |kind: &str, ts: &str| {
        json!({"type": kind, "sessionId": "c1a0de", "cwd": "/home/ana/shop", "timestamp": ts,
               "uuid": "u", "parentUuid": null, "isSidechain": false, "userType": "external", "version": "1.0.98"})
    };
    let mut lines = Vec::new();
    let mut user = base("user", "2025-06-01T10:00:00.000Z");
    user["message"] = json!({"role": "user", "content": "Why does the Checkout test fail?"});
    lines.push(user);
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20});
    for (i, block) in [
        json!({"type": "text", "text": "Let me look at the checkout flow."}),
        json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cargo test"}}),
        json!({"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "/x"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut a = base("assistant", &format!("2025-06-01T10:00:0{}.000Z", i + 1));
        a["message"] = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-20250514", "content": [block], "usage": usage});
        a["requestId"] = json!("req_1");
        lines.push(a);
    }
    let mut result = base("user", "2025-06-01T10:00:05.000Z");
    result["message"] = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "test failed", "is_error": true},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "fn main() {}"}]});
    lines.push(result);
    let mut meta = base("user", "2025-06-01T10:00:06.000Z");
    meta["isMeta"] = json!(true);
    meta["message"] = json!({"role": "user", "content": "Caveat: checkout injected"});
    lines.push(meta);
    let mut err = base("assistant", "2025-06-01T10:02:00.000Z");
    err["isApiErrorMessage"] = json!(true);
    err["message"] = json!({"id": "msg_2", "role": "assistant", "model": "<synthetic>",
        "content": [{"type": "text", "text": "API Error: overloaded"}],
        "usage": {"input_tokens": 0, "output_tokens": 0}});
    lines.push(err);
    let mut system = base("system", "2025-06-01T10:03:00.000Z");
    system["level"] = json!("error");
    system["content"] = json!("hook failed");
    lines.push(system);
    lines.push(json!({"type": "summary", "summary": "Checkout test", "leafUuid": "u"}));
    lines
}

/// Codex (envelopes): meta, injected context, a user turn, two shell
/// calls (one failing), an assistant turn, running token counts, an error.
fn codex_lines() -> Vec<Value> {
    let env = |ts: &str, kind: &str, payload: Value| json!({"timestamp": ts, "type": kind, "payload": payload});
    vec![
        env(
            "2025-10-29T00:59:38.317Z",
            "session_meta",
            json!({"id": "019a2d7a-41c4", "timestamp": "2025-10-29T00:59:38.308Z",
            "cwd": "/srv/api", "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": null, "git": {}}),
        ),
        env(
            "2025-10-29T00:59:38.317Z",
            "response_item",
            json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>\n<cwd>/srv/api</cwd>\n</environment_context>"}]}),
        ),
        env(
            "2025-10-29T00:59:38.400Z",
            "response_item",
            json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Rename the Checkout handler"}]}),
        ),
        env(
            "2025-10-29T00:59:38.400Z",
            "event_msg",
            json!({"type": "user_message", "message": "Rename the Checkout handler", "kind": "plain"}),
        ),
        env(
            "2025-10-29T00:59:38.500Z",
            "turn_context",
            json!({"cwd": "/srv/api", "approval_policy": "never", "model": "gpt-5-codex", "effort": "high"}),
        ),
        env(
            "2025-10-29T00:59:40.000Z",
            "response_item",
            json!({"type": "function_call", "name": "shell",
            "arguments": "{\"command\":[\"rg\",\"Checkout\"]}", "call_id": "call_1"}),
        ),
        env(
            "2025-10-29T00:59:41.000Z",
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_1",
            "output": "{\"output\":\"\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.1}}"}),
        ),
        env(
            "2025-10-29T00:59:42.000Z",
            "response_item",
            json!({"type": "function_call", "name": "shell",
            "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_2"}),
        ),
        env(
            "2025-10-29T00:59:43.000Z",
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_2",
            "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nsrc\n"}),
        ),
        env(
            "2025-10-29T00:59:44.000Z",
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "call_3"}),
        ),
        env(
            "2025-10-29T00:59:45.000Z",
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage":
            {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 50, "reasoning_output_tokens": 10, "total_tokens": 1050}}}),
        ),
        env(
            "2025-10-29T00:59:46.000Z",
            "response_item",
            json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Renamed the checkout handler."}]}),
        ),
        env(
            "2025-10-29T00:59:47.000Z",
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage":
            {"input_tokens": 3000, "cached_input_tokens": 1000, "output_tokens": 80, "total_tokens": 3080}}}),
        ),
        env(
            "2025-10-29T01:01:38.317Z",
            "event_msg",
            json!({"type": "error", "message": "stream disconnected"}),
        ),
    ]
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn transcripts(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// Every line the module wrote for one invoke (progress, then the response).
fn invoke(root: &Path, artifacts: &Path, capability: &str, input: &Value) -> Vec<Value> {
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "invoke", "params": {
        "protocol": "1.0", "contract_version": "2.0", "request_id": "r/1",
        "capability": capability, "input": input,
        "roots": {
            "transcripts": {"path": root.to_str().unwrap(), "kind": "source", "access": "read"},
            "artifacts": {"path": artifacts.to_str().unwrap(), "kind": "artifacts", "access": "read-write"}},
        "deadline_ms": 30000, "max_output_bytes": 1048576
    }});
    let out = Shared::default();
    crate::module().serve_io(Cursor::new(format!("{request}\n")), out.clone());
    let bytes = out.0.borrow().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn output(lines: &[Value]) -> Value {
    let last = lines.last().expect("a response");
    assert!(last.get("error").is_none(), "{last:#}");
    last["result"]["output"].clone()
}

fn both() -> tempfile::TempDir {
    transcripts(&[
        (
            "claude/-home-ana-shop/c1a0de.jsonl",
            &jsonl(&claude_lines()),
        ),
        (
            "codex/2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4.jsonl",
            &jsonl(&codex_lines()),
        ),
    ])
}

#[test]
fn claude_code_counts_a_streamed_message_once_and_tool_results_are_not_turns() {
    let dir = both();
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({"sessions": ["c1a0de"]}),
    ));
    let s = &out["sessions"][0];
    assert_eq!(s["format"], "claude-code");
    assert_eq!(s["id"], "c1a0de");
    assert_eq!(s["project"], "/home/ana/shop");
    assert_eq!(
        s["models"],
        json!(["claude-sonnet-4-20250514"]),
        "<synthetic> is no model"
    );
    assert_eq!(s["turns"], json!({"user": 1, "assistant": 2}), "{s:#}");
    assert_eq!(s["tool_calls"], json!({"Bash": 1, "Read": 1}));
    assert_eq!(s["tool_errors"], 1);
    assert_eq!(s["errors"], 2, "the API error message and the system error");
    // Three records of msg_1 repeat one usage: counted once.
    assert_eq!(
        s["tokens"],
        json!({"input": 10, "output": 5, "cache_read": 100, "cache_write": 20})
    );
    assert_eq!(s["duration_seconds"], 180);
    assert_eq!(s["unreadable_lines"], 0);
}

#[test]
fn codex_skips_injected_context_and_takes_the_last_running_usage() {
    let dir = both();
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({"sessions": ["019a2d7a-41c4"]}),
    ));
    let s = &out["sessions"][0];
    assert_eq!(s["format"], "codex");
    assert_eq!(s["id"], "019a2d7a-41c4");
    assert_eq!(s["project"], "/srv/api");
    assert_eq!(s["models"], json!(["gpt-5-codex"]));
    assert_eq!(s["turns"], json!({"user": 1, "assistant": 1}), "{s:#}");
    assert_eq!(s["tool_calls"], json!({"apply_patch": 1, "shell": 2}));
    assert_eq!(s["tool_errors"], 1, "exit code 1, not exit code 0");
    assert_eq!(s["errors"], 1);
    assert_eq!(
        s["tokens"],
        json!({"input": 2000, "output": 80, "cache_read": 1000, "cache_write": 0})
    );
    assert_eq!(s["duration_seconds"], 120);
}

#[test]
fn the_older_bare_codex_format_is_read_too() {
    let lines = [
        json!({"id": "5973b6c0-94b8", "timestamp": "2025-05-01T09:00:00.000Z", "instructions": null, "git": {"branch": "main"}}),
        json!({"record_type": "state"}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}),
        json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c"}),
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}),
    ];
    let dir = transcripts(&[(
        "2025/05/01/rollout-2025-05-01T09-00-00-5973b6c0-94b8.jsonl",
        &jsonl(&lines),
    )]);
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(dir.path(), art.path(), "sessions.list", &json!({})));
    let s = &out["sessions"][0];
    assert_eq!(s["format"], "codex", "{out:#}");
    assert_eq!(s["id"], "5973b6c0-94b8");
    assert_eq!(s["turns"], 2);
    assert_eq!(s["started"], "2025-05-01T09:00:00.000Z");
}

#[test]
fn what_is_not_a_transcript_is_skipped_with_file_and_reason_and_the_rest_is_read() {
    let mut damaged = jsonl(&claude_lines());
    damaged.insert_str(
        damaged.find('\n').unwrap() + 1,
        "{\"type\": \"assistant\", trunc\n",
    );
    let dir = transcripts(&[
        ("p/damaged.jsonl", &damaged),
        (
            "p/garbage.jsonl",
            "\u{1}\u{2}not json at all\n\u{0}\u{ff}\n",
        ),
        ("p/other.jsonl", "{\"event\": \"something else\"}\n"),
        ("p/empty.jsonl", ""),
        ("p/notes.txt", "not a transcript name, not looked at"),
    ]);
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(dir.path(), art.path(), "sessions.list", &json!({})));
    let listed: Vec<&str> = out["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["p/damaged.jsonl"], "{out:#}");
    assert_eq!(out["files"], 4);
    let reasons: std::collections::BTreeMap<String, String> = out["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["session"].as_str().unwrap().to_owned(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        reasons["p/garbage.jsonl"].starts_with("not JSON Lines (line 1: not JSON"),
        "{reasons:#?}"
    );
    assert!(
        reasons["p/other.jsonl"].contains("not a known transcript format"),
        "{reasons:#?}"
    );
    assert_eq!(reasons["p/empty.jsonl"], "empty file");

    let assay = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({"sessions": ["damaged"]}),
    ));
    assert_eq!(assay["sessions"][0]["unreadable_lines"], 1);
    assert!(
        assay["sessions"][0]["first_unreadable"]
            .as_str()
            .unwrap()
            .starts_with("line 2: not JSON")
    );
    assert_eq!(assay["sessions"][0]["turns"]["assistant"], 2);
}

#[test]
fn search_names_session_turn_and_line_and_stops_at_max_results() {
    let dir = both();
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.search",
        &json!({"query": "CHECKOUT"}),
    ));
    let mut found: Vec<(String, u64, u64, String)> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["session"].as_str().unwrap().to_owned(),
                m["turn"].as_u64().unwrap(),
                m["line"].as_u64().unwrap(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    found.sort();
    let claude = "claude/-home-ana-shop/c1a0de.jsonl".to_owned();
    let codex = "codex/2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4.jsonl".to_owned();
    assert_eq!(
        found,
        [
            (claude.clone(), 1, 1, "user".into()),
            (claude, 2, 2, "assistant".into()),
            (codex.clone(), 1, 3, "user".into()),
            (codex, 2, 12, "assistant".into()),
        ],
        "injected context, meta messages and tool calls are not searched: {out:#}"
    );
    assert_eq!(out["truncated"], false);

    let users = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.search",
        &json!({"query": "checkout", "role": "user", "max_results": 1}),
    ));
    assert_eq!(users["matches"].as_array().unwrap().len(), 1);
    assert_eq!(users["matches"][0]["role"], "user");
    assert_eq!(users["truncated"], true);
}

#[test]
fn assay_reports_progress_per_session_and_writes_its_report_as_an_artifact() {
    let dir = both();
    let art = tempfile::tempdir().unwrap();
    let lines = invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({"last": 5}),
    );
    let progress: Vec<&Value> = lines.iter().filter(|l| l["method"] == "progress").collect();
    assert_eq!(
        progress.len(),
        3,
        "one per session and one for the report: {lines:#?}"
    );
    assert_eq!(progress[0]["params"]["total"], 2.0);
    let response = lines.last().unwrap();
    let out = &response["result"]["output"];
    assert_eq!(out["totals"]["sessions"], 2);
    assert_eq!(
        out["report"], "assay/r_1.md",
        "the request id made safe for a file name"
    );
    assert_eq!(response["result"]["artifacts"][0]["root"], "artifacts");
    let report = std::fs::read_to_string(art.path().join("assay/r_1.md")).unwrap();
    assert!(report.starts_with("# Session assay"), "{report}");
    assert!(
        report.contains("## claude/-home-ana-shop/c1a0de.jsonl"),
        "{report}"
    );
    assert!(report.contains("| shell | 2 |"), "{report}");
}

#[test]
fn a_session_name_is_never_a_path_nothing_outside_the_root_is_read() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(outer.path().join("secret.jsonl"), jsonl(&claude_lines())).unwrap();
    let art = tempfile::tempdir().unwrap();
    let names = json!({"sessions": ["../secret.jsonl", "../secret", "/etc/passwd", "secret"]});
    let out = output(&invoke(&root, art.path(), "sessions.assay", &names));
    assert_eq!(out["sessions"], json!([]));
    assert_eq!(out["not_found"], names["sessions"]);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outer.path().join("secret.jsonl"), root.join("leak.jsonl"))
            .unwrap();
        let out = output(&invoke(&root, art.path(), "sessions.list", &json!({})));
        assert_eq!(out["sessions"], json!([]), "a link out is not followed");
        assert_eq!(out["skipped"][0]["session"], "leak.jsonl");
    }
}

#[test]
fn the_skill_digest_is_the_shipped_file_s() {
    let on_disk =
        // The folder cargo names when it starts the test, not the one the
        // binary was compiled in (a shared target directory may hold a
        // binary built from another checkout).
        std::fs::read(Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join(crate::SKILL_PATH))
            .unwrap();
    let descriptor = crate::module();
    let skill = &descriptor.descriptor().knowledge.skills[0];
    assert_eq!(skill.sha256, crate::sha256_hex(&on_disk));
    assert_eq!(
        crate::sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn the_last_sessions_are_chosen_by_file_time_without_reading_the_others() {
    let dir = transcripts(&[
        ("new.jsonl", &jsonl(&claude_lines())),
        ("old.jsonl", "corrupt, and never read\n"),
    ]);
    let old = std::fs::File::options()
        .write(true)
        .open(dir.path().join("old.jsonl"))
        .unwrap();
    old.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
    let art = tempfile::tempdir().unwrap();
    for (capability, input) in [
        ("sessions.list", json!({"last": 1})),
        ("sessions.assay", json!({"last": 1})),
        ("sessions.search", json!({"query": "checkout", "last": 1})),
    ] {
        let out = output(&invoke(dir.path(), art.path(), capability, &input));
        assert_eq!(
            out["skipped"],
            json!([]),
            "{capability} read the older file: {out:#}"
        );
    }
    let all = output(&invoke(dir.path(), art.path(), "sessions.list", &json!({})));
    assert_eq!(all["skipped"][0]["session"], "old.jsonl");
}

#[test]
fn a_line_too_long_to_hold_is_skipped_and_the_session_still_read() {
    let mut lines = jsonl(&claude_lines());
    let huge = format!(
        "{{\"type\": \"user\", \"message\": {{\"role\": \"user\", \"content\": \"{}\"}}}}\n",
        "x".repeat(crate::line_reader::MAX_LINE_BYTES + 1)
    );
    lines.insert_str(lines.find('\n').unwrap() + 1, &huge);
    let dir = transcripts(&[("p/s.jsonl", &lines)]);
    let art = tempfile::tempdir().unwrap();
    let out = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({"last": 1}),
    ));
    let s = &out["sessions"][0];
    assert_eq!(s["unreadable_lines"], 1, "{s:#}");
    assert_eq!(s["first_unreadable"], "line 2: longer than 8 MiB, skipped");
    assert_eq!(s["turns"], json!({"user": 1, "assistant": 2}));
}

#[test]
fn every_descriptor_example_succeeds_on_an_empty_root() {
    let dir = transcripts(&[]);
    let art = tempfile::tempdir().unwrap();
    for capability in crate::module().descriptor().capabilities.iter() {
        for example in &capability.examples {
            let out = output(&invoke(
                dir.path(),
                art.path(),
                &capability.id,
                &example.input,
            ));
            assert_eq!(out["skipped"], json!([]), "{}: {out:#}", capability.id);
        }
    }
    let assay = output(&invoke(
        dir.path(),
        art.path(),
        "sessions.assay",
        &json!({}),
    ));
    assert_eq!(assay["totals"]["sessions"], 0);
    assert!(art.path().join("assay/r_1.md").is_file());
}
