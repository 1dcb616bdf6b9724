//! `modhost tools --format ...` against each provider's published request
//! shape: every export is type-checked with tsc against the official SDKs'
//! type definitions (`openai`, `@anthropic-ai/sdk`,
//! `@modelcontextprotocol/sdk`), installed by `.ci/run` into
//! `tests/providers/` from its committed lock file, offline.
//!
//! The home holds the real `files` module, the echo fixture, a module that
//! ships knowledge, and `odd`, a script module whose schemas carry what
//! providers reject (a root `anyOf`, schemars' `uint64` format, `$schema`,
//! an open map). The attack: one such tool pasted into a request breaks the
//! whole request; so it must be transformed faithfully or left out, named.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Fixture, Home};

/// The TypeScript type each format's array must have.
const SHAPES: &[(&str, &str)] = &[
    ("openai", "ChatCompletionTool[]"),
    ("openai-responses", "FunctionTool[]"),
    ("anthropic", "AnthropicTool[]"),
    ("mcp", "McpTool[]"),
];

const IMPORTS: &str = r#"import type { ChatCompletionTool } from "openai/resources/chat/completions";
import type { FunctionTool } from "openai/resources/responses/responses";
import type { Tool as AnthropicTool } from "@anthropic-ai/sdk/resources/messages/messages";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
"#;

fn providers_dir() -> PathBuf {
    crate::support::tests_dir().join("providers")
}

/// The TypeScript compiler installed in `tests/providers` (by `tests/setup`).
/// Never a skip: without it the exports are not checked, so the test fails
/// with the remedy.
fn tsc() -> PathBuf {
    let tsc = providers_dir().join("node_modules/typescript/bin/tsc");
    assert!(
        tsc.is_file(),
        "{} is missing: run `tests/setup` (it runs `npm ci` in tests/providers)",
        tsc.display()
    );
    tsc
}

/// Type-check `declarations` (`(name, type, value)`) against the SDKs;
/// tsc's output on failure.
fn type_check(tsc: &Path, declarations: &[(&str, &str, &Value)]) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("out-")
        .tempdir_in(providers_dir())
        .expect("a scratch folder beside node_modules");
    let mut source = IMPORTS.to_owned();
    for (name, ty, value) in declarations {
        source.push_str(&format!("export const {name}: {ty} = {value:#};\n"));
    }
    std::fs::write(dir.path().join("exports.ts"), source).expect("write exports.ts");
    std::fs::write(
        dir.path().join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "noEmit": true, "module": "nodenext",
            "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": true, "types": []},
            "files": ["exports.ts"]}"#,
    )
    .expect("write tsconfig.json");
    let output = Command::new("node")
        .arg(tsc)
        .arg("-p")
        .arg(dir.path())
        .output()
        .expect("run node (Node 20 is on every machine of this project)");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A script module answering `describe` with `capabilities` (no single
/// quote in them: the descriptor is quoted for the shell).
fn install_script_module(home: &Home, id: &str, capabilities: &Value) {
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let descriptor = json!({"id": id, "version": "1.0.0", "capabilities": capabilities});
    let script = format!(
        "#!/bin/sh\nIFS= read -r line\nid=${{line#*\\\"id\\\":}}\nid=${{id%%,*}}\nprintf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":'\"$id\"',\"result\":{descriptor}}}'\n"
    );
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run(&["pin", id]).expect_code(0);
}

/// The home every test here exports from.
fn home_with_every_kind_of_tool() -> Home {
    let home = Home::new();
    home.install_files();
    home.install(Fixture::Echo, "echo");
    crate::tools::install_knowledge_module(&home, "Overlay.\n", "Skill.\n");
    install_script_module(
        &home,
        "odd",
        &json!([
            {"id": "odd.either", "description": "one of two keys",
             "input_schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                              "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}},
            {"id": "odd.count", "description": "the schemars defaults, hand-written",
             "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                              "properties": {"n": {"type": "integer", "format": "uint64", "minimum": 0}},
                              "required": ["n"], "additionalProperties": false},
             "output_schema": {"type": "object", "properties": {"total": {"type": "number", "format": "double"}}}},
            {"id": "odd.labels", "description": "an open map",
             "input_schema": {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}},
                              "required": ["labels"]}}
        ]),
    );
    home
}

fn export(home: &Home, args: &[&str]) -> (Vec<Value>, String) {
    let mut all = vec!["tools", "--format"];
    all.extend_from_slice(args);
    let run = home.run(&all);
    run.expect_code(0);
    match run.json() {
        Value::Array(tools) => (tools, run.stderr.clone()),
        other => panic!("tools {args:?} is not an array: {other:#}"),
    }
}

fn name(tool: &Value) -> &str {
    tool["name"]
        .as_str()
        .or_else(|| tool["function"]["name"].as_str())
        .unwrap_or_default()
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(name).collect()
}

#[test]
fn every_export_type_checks_against_the_providers_official_sdk_types() {
    let home = home_with_every_kind_of_tool();
    let mut exported = Vec::new();
    for (format, _) in SHAPES {
        exported.push(Value::Array(export(&home, &[format]).0));
    }
    for format in ["openai", "openai-responses"] {
        exported.push(Value::Array(export(&home, &[format, "--strict"]).0));
    }
    let tsc = tsc();
    let mut declarations: Vec<(String, &str, &Value)> = SHAPES
        .iter()
        .zip(&exported)
        .enumerate()
        .map(|(i, ((_, ty), value))| (format!("export{i}"), *ty, value))
        .collect();
    declarations.push(("strictChat".into(), "ChatCompletionTool[]", &exported[4]));
    declarations.push(("strictResponses".into(), "FunctionTool[]", &exported[5]));
    let declarations: Vec<(&str, &str, &Value)> = declarations
        .iter()
        .map(|(n, t, v)| (n.as_str(), *t, *v))
        .collect();
    if let Err(errors) = type_check(&tsc, &declarations) {
        panic!("an export does not match its provider's type:\n{errors}");
    }
    // The check can fail: the Chat Completions shape is not a Responses
    // tool (a mistake an export once made), and tsc says so.
    let wrong = type_check(&tsc, &[("wrong", "FunctionTool[]", &exported[0])])
        .expect_err("a Chat Completions tool passed as a Responses tool");
    assert!(wrong.contains("function"), "{wrong}");
}

#[test]
fn a_tool_a_provider_rejects_is_left_out_of_that_export_by_name_and_the_rest_is_faithful() {
    let home = home_with_every_kind_of_tool();
    for format in ["openai", "openai-responses", "anthropic"] {
        let (tools, stderr) = export(&home, &[format]);
        let listed = names(&tools);
        assert!(!listed.contains(&"odd__odd_either"), "{format}: {listed:?}");
        assert!(
            listed.contains(&"odd__odd_count") && listed.contains(&"files__files_search"),
            "{format}: {listed:?}"
        );
        assert!(
            stderr.contains("odd__odd_either left out of the")
                && stderr.contains("anyOf")
                && stderr.contains("Anthropic"),
            "{format}: {stderr}"
        );
        let text = Value::Array(tools).to_string();
        assert!(
            !text.contains("uint64") && !text.contains("\"double\""),
            "{format}: {text}"
        );
        assert!(!text.contains("$schema"), "{format}: {text}");
    }
    // MCP takes any object schema: nothing is left out, formats are dropped.
    let (tools, stderr) = export(&home, &["mcp"]);
    assert!(names(&tools).contains(&"odd__odd_either"));
    assert!(!stderr.contains("left out"), "{stderr}");
    let count = tools
        .iter()
        .find(|t| t["name"] == "odd__odd_count")
        .unwrap();
    assert_eq!(
        count["inputSchema"]["properties"]["n"],
        json!({"type": "integer", "minimum": 0})
    );
    assert_eq!(
        count["outputSchema"]["properties"]["total"],
        json!({"type": "number"})
    );
    // Derived by modsdk: the files module's schemas carry no extension format.
    let files = Value::Array(tools).to_string();
    assert!(!files.contains("\"format\":\"uint"), "{files}");
}

#[test]
fn strict_mode_is_given_to_every_tool_it_keeps_the_meaning_of_and_the_others_are_named() {
    let home = home_with_every_kind_of_tool();
    let (tools, stderr) = export(&home, &["openai-responses", "--strict"]);
    let strict = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} not exported: {tools:#?}"))["strict"]
            .clone()
    };
    eprintln!("strict export report:\n{stderr}");
    for made_strict in [
        "odd__odd_count",
        "modhost__knowledge",
        "files__files_read",
        "files__files_list",
    ] {
        assert_eq!(strict(made_strict), json!(true), "{made_strict}: {stderr}");
    }
    let count = tools
        .iter()
        .find(|t| t["name"] == "odd__odd_count")
        .unwrap();
    assert_eq!(count["parameters"]["additionalProperties"], json!(false));
    for (kept_loose, why) in [
        ("odd__odd_labels", "additionalProperties"),
        ("echo__echo_echo", "free-form"),
        ("files__files_search", "does not accept null"),
    ] {
        assert_eq!(strict(kept_loose), json!(false), "{kept_loose}");
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("{kept_loose} exported without strict mode")))
            .unwrap_or_else(|| panic!("{kept_loose} not reported: {stderr}"));
        assert!(line.contains(why), "{line}");
    }
    // --strict means OpenAI's strict mode; elsewhere it is a usage error.
    let run = home.run(&["tools", "--format", "anthropic", "--strict"]);
    run.expect_code(2);
    assert!(run.stderr.contains("--format openai"), "{}", run.stderr);
}

#[test]
fn the_knowledge_tool_is_listed_only_when_a_module_ships_knowledge() {
    let home = Home::new();
    home.install_files();
    for format in ["json", "mcp", "anthropic"] {
        let (tools, _) = export(&home, &[format]);
        assert!(!names(&tools).contains(&"modhost__knowledge"), "{format}");
    }
    crate::tools::install_knowledge_module(&home, "Overlay.\n", "Skill.\n");
    let (tools, _) = export(&home, &["mcp"]);
    assert!(names(&tools).contains(&"modhost__knowledge"));
}

#[test]
fn conformance_names_the_provider_hostile_constructs_and_finds_none_in_sdk_derived_schemas() {
    let home = home_with_every_kind_of_tool();
    let run = home.run(&["conformance", "odd", "--json"]);
    let report = run.json();
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    let format = findings
        .iter()
        .find(|f| f["id"] == "portability.non_standard_format" && f["capability"] == "odd.count")
        .unwrap_or_else(|| panic!("uint64 not reported: {report:#}"));
    assert_eq!(format["severity"], "warning");
    let reason = format["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("uint64") && reason.contains("MCP Inspector"),
        "{reason}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["id"] == "portability.non_standard_format"
                && f["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("output_schema"))),
        "the output schema's double: {report:#}"
    );
    // The files module's schemas are derived by modsdk: nothing to report.
    let files = home.run(&["conformance", "files", "--json"]).json();
    let portability: Vec<&Value> = files["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| {
            f["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("portability."))
        })
        .collect();
    assert!(portability.is_empty(), "{portability:#?}");
}
