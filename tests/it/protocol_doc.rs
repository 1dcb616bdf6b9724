//! PROTOCOL.md is what the host does: the document's examples are extracted
//! from its fenced code blocks (so editing the document changes this test)
//! and run against the real host. The section 9 Python module is installed
//! exactly as written and must pass `modhost conformance` and answer
//! `invoke`; the section 7 and 8 exchanges are replayed by a module that
//! answers with the document's own lines, and the request the host writes
//! is compared with the document's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::Home;

const PROTOCOL: &str = include_str!("../../modproto/PROTOCOL.md");

/// One fenced code block and the `## ` section it sits in.
#[derive(Debug)]
struct Block {
    section: String,
    lang: String,
    body: String,
}

/// Every fenced code block of PROTOCOL.md, in order.
fn blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for line in PROTOCOL.lines() {
        match &mut open {
            Some(block) if line.trim_start() == "```" => {
                blocks.push(std::mem::replace(
                    block,
                    Block {
                        section: String::new(),
                        lang: String::new(),
                        body: String::new(),
                    },
                ));
                open = None;
            }
            Some(block) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            None if line.starts_with("```") => {
                open = Some(Block {
                    section: section.clone(),
                    lang: line.trim_start_matches('`').trim().to_owned(),
                    body: String::new(),
                });
            }
            None if line.starts_with("## ") => section = line[3..].to_owned(),
            None => {}
        }
    }
    assert!(open.is_none(), "PROTOCOL.md has an unclosed code block");
    blocks
}

/// The JSON lines of the code blocks of the section whose title starts with `prefix`.
fn json_lines(prefix: &str) -> Vec<Value> {
    let lines: Vec<Value> = blocks()
        .into_iter()
        .filter(|b| b.section.starts_with(prefix) && b.lang == "json")
        .flat_map(|b| {
            b.body
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect::<Vec<Value>>()
        })
        .collect();
    assert!(!lines.is_empty(), "no JSON lines in section {prefix:?}");
    lines
}

/// Write `script` as an executable outside the home and install it with
/// `modhost install`, as an author would.
fn install_script(home: &Home, id: &str, script: &str) -> PathBuf {
    let path = home.outside().join(id);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["install", &path.to_string_lossy()])
        .expect_code(0);
    path
}

fn require_python() {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "the document's module is Python: this test needs python3"
    );
}

/// The `modhost conformance --json` report, asserted free of errors.
#[track_caller]
fn assert_conforms(home: &Home, id: &str) -> Value {
    let run = home.run(&["conformance", id, "--json"]);
    let report = run.json();
    assert_eq!(report["errors"], 0, "{report:#}");
    run.expect_code(0);
    report
}

#[test]
fn the_documents_python_module_passes_conformance_and_answers_invoke() {
    require_python();
    let python: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.lang == "python")
        .collect();
    assert_eq!(python.len(), 1, "one Python module in PROTOCOL.md");
    assert!(
        python[0].section.starts_with("9."),
        "{:?}",
        python[0].section
    );

    let home = Home::new();
    install_script(&home, "notes", &python[0].body);
    let report = assert_conforms(&home, "notes");
    // The module trusts its input; nothing fails it for that.
    assert!(!report.to_string().contains("invalid_input"), "{report:#}");

    let first = home
        .invoke("notes", "notes.add", &json!({"text": "buy milk"}), &[])
        .invoke_result();
    assert_eq!(first["output"], json!({"count": 1}), "{first:#}");
    // Input that does not fit never reaches the module: the host refuses it.
    let refused = home
        .invoke("notes", "notes.add", &json!({"text": 5}), &[])
        .refusal_error();
    assert_eq!(refused["kind"], "invalid_input", "{refused:#}");
    let second = home
        .invoke("notes", "notes.add", &json!({"text": "call mum"}), &[])
        .invoke_result();
    assert_eq!(
        second["output"],
        json!({"count": 2}),
        "the refused call appended a note: {second:#}"
    );
    // MODULES.md names its tool as the host does.
    let tools = home
        .run(&["tools", "--format", "json"])
        .expect_code(0)
        .json();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"notes__notes_add"), "{names:?}");
    assert!(
        include_str!("../../modproto/MODULES.md").contains("`notes__notes_add`"),
        "MODULES.md no longer shows the tool name of its example"
    );
    home.assert_no_module_processes();
}

/// A module that answers `describe` with section 7's module line and
/// `invoke` with section 8's module lines, verbatim but for the id, and
/// keeps every request it reads in its state root.
fn replaying_module(describe: &Value, invoke: &[Value]) -> String {
    format!(
        r#"#!/usr/bin/python3
import json, os, sys
DESCRIBE = json.loads({describe:?})
INVOKE = [json.loads(l) for l in {invoke:?}]
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
line = sys.stdin.readline()
if not line:
    sys.exit(0)
try:
    req = json.loads(line)
except ValueError as e:
    send({{"jsonrpc": "2.0", "id": None, "error": {{"code": -32700, "message": str(e)}}}}); sys.exit(0)
if req.get("method") == "describe":
    DESCRIBE["id"] = req["id"]
    send(DESCRIBE)
elif req.get("method") == "invoke":
    with open(os.path.join(req["params"]["roots"]["state"]["path"], "requests.jsonl"), "a") as f:
        f.write(line)
    for msg in INVOKE:
        if "id" in msg:
            msg["id"] = req["id"]
        send(msg)
else:
    send({{"jsonrpc": "2.0", "id": req.get("id"), "error": {{"code": -32601, "message": "unknown method"}}}})
"#,
        describe = describe.to_string(),
        invoke = invoke.iter().map(Value::to_string).collect::<Vec<_>>(),
    )
}

#[test]
fn the_documents_exchanges_are_what_the_host_writes_and_accepts() {
    require_python();
    let describe = json_lines("7.");
    let [describe_request, describe_answer] = describe.as_slice() else {
        panic!("section 7: a request and an answer: {describe:#?}");
    };
    assert_eq!(
        describe_request,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "describe"})
    );
    let invoke = json_lines("8.");
    let [invoke_request, progress, answer, validation_error] = invoke.as_slice() else {
        panic!("section 8: request, progress, answer, error: {invoke:#?}");
    };
    let id = describe_answer["result"]["id"].as_str().unwrap().to_owned();

    let home = Home::new();
    install_script(
        &home,
        &id,
        &replaying_module(describe_answer, &[progress.clone(), answer.clone()]),
    );
    assert_conforms(&home, &id);
    let entry = home.entry(&id);
    assert_eq!(entry["contract"], "v2", "{entry:#}");

    let capability = invoke_request["params"]["capability"].as_str().unwrap();
    let input = &invoke_request["params"]["input"];
    let result = home.invoke(&id, capability, input, &[]).invoke_result();
    assert_eq!(result["output"], answer["result"]["output"], "{result:#}");

    // The request the host wrote has the document's shape and values.
    let state = home.path().join("state").join(&id);
    let requests = std::fs::read_to_string(state.join("requests.jsonl")).unwrap();
    let written: Value = serde_json::from_str(requests.lines().next().unwrap()).unwrap();
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&written), keys(invoke_request), "{written:#}");
    let (ours, doc) = (&written["params"], &invoke_request["params"]);
    assert_eq!(keys(ours), keys(doc), "{written:#}");
    for key in [
        "protocol",
        "contract_version",
        "capability",
        "input",
        "binaries",
        "deadline_ms",
        "max_output_bytes",
    ] {
        assert_eq!(ours[key], doc[key], "params.{key}: {written:#}");
    }
    assert_eq!(keys(&ours["roots"]), keys(&doc["roots"]));
    for key in ["kind", "access"] {
        assert_eq!(ours["roots"]["state"][key], doc["roots"]["state"][key]);
    }
    let state_path = ours["roots"]["state"]["path"].as_str().unwrap();
    assert!(state_path.ends_with(&format!("state/{id}")), "{state_path}");

    // The invalid input of the document never reaches the module.
    let mut bad = input.clone();
    bad["text"] = json!(5);
    let error = home.invoke(&id, capability, &bad, &[]).refusal_error();
    assert_eq!(error["kind"], validation_error["error"]["data"]["kind"]);
    let requests = std::fs::read_to_string(state.join("requests.jsonl")).unwrap();
    assert_eq!(
        requests.lines().count(),
        1,
        "the module ran on invalid input"
    );
    home.assert_no_module_processes();
}
