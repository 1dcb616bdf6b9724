//! `Module::serve_io` answering whole request lines, as a host would send them.

use std::cell::RefCell;
use std::io::{Cursor, Write};
use std::path::Path;
use std::rc::Rc;

use crate::{Access, Capability, Cost, Ctx, Effects, ModError, Module, RootKind, reads};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoInput {
    text: String,
    #[schemars(range(min = 1, max = 10))]
    times: u32,
}

#[derive(Serialize, JsonSchema)]
struct EchoOutput {
    echoed: String,
}

#[derive(Deserialize, JsonSchema)]
struct PathInput {
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct Nothing {}

/// Says nothing its type does not: checked by deserialization alone.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PlainInput {
    name: String,
    loud: bool,
}

fn echo(ctx: &mut Ctx, input: EchoInput) -> Result<EchoOutput, ModError> {
    let EchoInput { text, times } = input;
    ctx.progress(1.0, Some(2.0), Some("half way"));
    ctx.warn("echo is not very useful");
    ctx.set_text(format!("echoed {times} times"));
    Ok(EchoOutput {
        echoed: text.repeat(times as usize),
    })
}

fn module() -> Module {
    Module::new("demo", "1.2.3")
        .title("Demo")
        .root("workspace", RootKind::Workspace, Access::Read, "")
        .root("logs", RootKind::Source, Access::Read, "session logs")
        .root("artifacts", RootKind::Artifacts, Access::ReadWrite, "")
        .capability(Capability::new("demo.echo", echo).description("Echo text."))
        .capability(Capability::new(
            "demo.fail",
            |_: &mut Ctx, _: crate::NoInput| {
                Err::<Nothing, _>(ModError::not_found("no such thing").with_remedy("make one"))
            },
        ))
        .capability(Capability::new(
            "demo.plain",
            |_: &mut Ctx, input: PlainInput| -> Result<Value, ModError> {
                Ok(json!({"name": input.name, "loud": input.loud}))
            },
        ))
        .capability(Capability::new(
            "demo.panic",
            |_: &mut Ctx, _: crate::NoInput| -> Result<Nothing, ModError> { panic!("boom {}", 42) },
        ))
        .capability(
            Capability::new("demo.read", |ctx: &mut Ctx, input: PathInput| {
                let text = ctx.root("workspace")?.read_to_string(&input.path)?;
                Ok(EchoOutput { echoed: text })
            })
            .effects(reads(&["workspace"], Cost::Trivial)),
        )
        .capability(
            Capability::new("demo.write", |ctx: &mut Ctx, input: PathInput| {
                ctx.root("workspace")?.write(&input.path, b"x")?;
                Ok(Nothing {})
            })
            .effects(Effects {
                writes: vec!["workspace".into()],
                ..Effects::default()
            }),
        )
        .capability(
            Capability::new("demo.logs", |ctx: &mut Ctx, _: crate::NoInput| {
                ctx.root("logs")?;
                Ok(Nothing {})
            })
            .effects(reads(&["logs"], Cost::Trivial)),
        )
        .capability(Capability::new(
            // Its author forgot to name the workspace in its effects.
            "demo.forgot",
            |ctx: &mut Ctx, input: PathInput| {
                let text = ctx.root("workspace")?.read_to_string(&input.path)?;
                Ok(EchoOutput { echoed: text })
            },
        ))
        .capability(
            // Needs a secret no test environment sets.
            Capability::new("demo.token", |ctx: &mut Ctx, _: crate::NoInput| {
                let token = ctx.secret("DEMO_SDK_UNSET_TOKEN")?;
                Ok(EchoOutput { echoed: token })
            })
            .secrets(["DEMO_SDK_UNSET_TOKEN"])
            .effects(reads(&[], Cost::Trivial)),
        )
        .capability(Capability::new(
            // Asks for a secret it never declared.
            "demo.undeclared_secret",
            |ctx: &mut Ctx, _: crate::NoInput| {
                let token = ctx.secret("PATH_TOKEN")?;
                Ok(EchoOutput { echoed: token })
            },
        ))
        .capability(Capability::new(
            "demo.report",
            |ctx: &mut Ctx, _: crate::NoInput| {
                ctx.write_artifact(
                    "reports/r.md",
                    b"# report\n",
                    Some("text/markdown"),
                    Some("Report"),
                )?;
                Ok(Nothing {})
            },
        ))
}

#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Feed `input` to the module; the exit status and every output line, parsed.
fn run_raw(input: &[u8]) -> (i32, Vec<Value>) {
    let out = Shared::default();
    let status = module().serve_io(Cursor::new(input.to_vec()), out.clone());
    let bytes = out.0.borrow().clone();
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "every line is terminated: {text:?}"
    );
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (status, lines)
}

/// The one response to `request`.
fn call(request: &Value) -> Value {
    let (status, mut lines) = run_raw(format!("{request}\n").as_bytes());
    assert_eq!(status, 0);
    lines.pop().expect("a response line")
}

fn invoke_with_roots(capability: &str, input: &Value, roots: &Value) -> Value {
    call(&invoke_request(capability, input, roots))
}

fn invoke_request(capability: &str, input: &Value, roots: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "req-9", "method": "invoke", "params": {
        "protocol": "1.0", "contract_version": "1.0", "request_id": "r-42",
        "capability": capability, "input": input, "roots": roots,
        "deadline_ms": 10000, "max_output_bytes": 1048576
    }})
}

fn invoke(capability: &str, input: &Value) -> Value {
    invoke_with_roots(capability, input, &json!({}))
}

fn workspace_roots(dir: &Path) -> Value {
    json!({"workspace": {"path": dir.to_str().unwrap(), "kind": "workspace", "access": "read"}})
}

fn error_kind(response: &Value) -> (i64, &str) {
    let error = &response["error"];
    (
        error["code"].as_i64().unwrap(),
        error["data"]["kind"].as_str().unwrap(),
    )
}

#[test]
fn describe_returns_the_descriptor_with_derived_schemas() {
    let response = call(&json!({"jsonrpc": "2.0", "id": 1, "method": "describe"}));
    assert_eq!(response["id"], 1);
    let descriptor: modproto::Descriptor =
        serde_json::from_value(response["result"].clone()).unwrap();
    assert_eq!(
        (descriptor.id.as_str(), descriptor.version.as_str()),
        ("demo", "1.2.3")
    );
    let echo = descriptor.capability("demo.echo").unwrap();
    assert_eq!(echo.input_schema["type"], "object");
    assert_eq!(echo.input_schema["required"], json!(["text", "times"]));
    assert_eq!(echo.input_schema["additionalProperties"], false);
    assert!(echo.input_schema.get("$schema").is_none());
    assert_eq!(
        echo.output_schema.as_ref().unwrap()["properties"]["echoed"]["type"],
        "string"
    );
}

#[test]
fn invoke_returns_output_text_and_warnings_after_progress() {
    let (status, lines) = run_raw(
        format!(
            "{}\n",
            invoke_request("demo.echo", &json!({"text": "ab", "times": 2}), &json!({}))
        )
        .as_bytes(),
    );
    assert_eq!(status, 0);
    assert_eq!(lines.len(), 2, "{lines:?}");
    // The progress notification comes first, and carries the host's request id.
    assert_eq!(lines[0]["method"], "progress");
    assert!(lines[0].get("id").is_none());
    assert_eq!(
        lines[0]["params"],
        json!({"request_id": "r-42", "progress": 1.0, "total": 2.0, "message": "half way"})
    );
    let response = &lines[1];
    assert_eq!(response["id"], "req-9");
    assert_eq!(response["result"]["output"], json!({"echoed": "abab"}));
    assert_eq!(response["result"]["text"], "echoed 2 times");
    assert_eq!(
        response["result"]["warnings"],
        json!(["echo is not very useful"])
    );
}

/// The `problems` of an error response.
fn problems_of(response: &Value) -> Vec<&str> {
    response["error"]["data"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect()
}

#[cfg(feature = "validate")]
#[test]
fn invalid_input_lists_every_problem() {
    let response = invoke("demo.echo", &json!({"text": 5, "times": 99, "extra": true}));
    assert_eq!(error_kind(&response), (-32602, "invalid_input"));
    let problems = problems_of(&response);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.starts_with("input/text:")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("input/times:")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("extra")), "{problems:?}");

    let response = invoke("demo.echo", &json!({}));
    assert_eq!(problems_of(&response).len(), 2, "{response}");
}

#[cfg(feature = "validate")]
#[test]
fn a_schema_constraint_the_type_cannot_carry_is_enforced() {
    // `times: u32` deserializes 99; the declared range (1..=10) refuses it.
    let response = invoke("demo.echo", &json!({"text": "a", "times": 99}));
    assert_eq!(
        error_kind(&response),
        (-32602, "invalid_input"),
        "{response}"
    );
    let problems = problems_of(&response);
    assert_eq!(problems.len(), 1, "{response}");
    assert!(problems[0].starts_with("input/times:"), "{problems:?}");
}

#[cfg(feature = "validate")]
#[test]
fn a_plain_typed_input_is_checked_by_its_type_and_still_lists_every_problem() {
    let ok = invoke("demo.plain", &json!({"name": "x", "loud": true}));
    assert_eq!(ok["result"]["output"], json!({"name": "x", "loud": true}));
    // Deserialization stops at the first problem; the answer lists all three.
    let response = invoke("demo.plain", &json!({"name": 1, "loud": "yes", "extra": 0}));
    assert_eq!(
        error_kind(&response),
        (-32602, "invalid_input"),
        "{response}"
    );
    let problems = problems_of(&response);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.starts_with("input/name:")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("input/loud:")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("extra")), "{problems:?}");
}

/// Without the `validate` feature (the default) no validator is linked:
/// the type is the check. Input of the wrong shape still never reaches the
/// handler, and the answer names the problem.
#[cfg(not(feature = "validate"))]
#[test]
fn invalid_input_is_refused_by_its_type() {
    for input in [
        json!({"name": 1, "loud": true}),
        json!({"name": "x", "loud": "yes"}),
        json!({"name": "x", "loud": true, "extra": 0}),
        json!({}),
    ] {
        let response = invoke("demo.plain", &input);
        assert_eq!(
            error_kind(&response),
            (-32602, "invalid_input"),
            "{input}: {response}"
        );
        let problems = problems_of(&response);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(response.get("result").is_none(), "{response}");
    }
    let response = invoke("demo.echo", &json!({"text": 5, "times": 2}));
    assert_eq!(
        error_kind(&response),
        (-32602, "invalid_input"),
        "{response}"
    );
}

#[test]
fn protocol_errors_get_their_codes() {
    let response = call(&json!({"jsonrpc": "2.0", "id": 3, "method": "frobnicate"}));
    assert_eq!(response["id"], 3);
    assert_eq!(error_kind(&response), (-32601, "unknown_method"));

    let (status, lines) = run_raw(b"{not json\n");
    assert_eq!(status, 0);
    assert_eq!(error_kind(&lines[0]), (-32700, "parse"));
    assert_eq!(lines[0]["id"], Value::Null);

    let response = call(&json!({"jsonrpc": "2.0", "method": "describe"}));
    assert_eq!(error_kind(&response), (-32600, "invalid_request"));

    let response = call(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "invoke", "params": {"capability": "demo.echo"}}),
    );
    assert_eq!(response["error"]["code"], -32602);

    let response = invoke("demo.nope", &json!({}));
    assert_eq!(error_kind(&response), (-32003, "unknown_capability"));
    assert!(
        response["error"]["data"]["remedy"]
            .as_str()
            .unwrap()
            .contains("demo.echo")
    );
}

#[test]
fn empty_stdin_exits_at_once_without_output() {
    assert_eq!(run_raw(b""), (0, Vec::new()));
}

#[test]
fn only_the_first_line_is_answered() {
    let describe = json!({"jsonrpc": "2.0", "id": 1, "method": "describe"});
    let (_, lines) = run_raw(format!("{describe}\n{describe}\n").as_bytes());
    assert_eq!(lines.len(), 1);
}

#[test]
fn a_handler_error_keeps_its_kind_and_remedy() {
    let response = invoke("demo.fail", &json!({}));
    assert_eq!(response["id"], "req-9");
    assert_eq!(error_kind(&response), (-32000, "not_found"));
    assert_eq!(response["error"]["message"], "no such thing");
    assert_eq!(response["error"]["data"]["remedy"], "make one");
}

#[test]
fn a_panic_is_an_internal_error_with_its_message() {
    let response = invoke("demo.panic", &json!({}));
    assert_eq!(response["id"], "req-9");
    assert_eq!(error_kind(&response), (-32603, "panic"));
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("boom 42"), "{message}");
    assert!(
        message.contains("serve_tests.rs"),
        "the location is reported: {message}"
    );
}

#[test]
fn paths_out_of_a_root_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("ws");
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(inside.join("ok.txt"), "fine").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), inside.join("link")).unwrap();
    let roots = workspace_roots(&inside);

    let response = invoke_with_roots("demo.read", &json!({"path": "ok.txt"}), &roots);
    assert_eq!(response["result"]["output"]["echoed"], "fine");

    let absolute = dir.path().join("secret.txt");
    let mut attempts = vec!["../secret.txt", absolute.to_str().unwrap()];
    if cfg!(unix) {
        attempts.push("link");
    }
    for path in attempts {
        let response = invoke_with_roots("demo.read", &json!({"path": path}), &roots);
        assert_eq!(
            error_kind(&response),
            (-32002, "path_escape"),
            "{path}: {response}"
        );
        assert!(!response.to_string().contains("\"secret\""));
    }
}

#[test]
fn a_write_through_a_read_grant_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let response = invoke_with_roots(
        "demo.write",
        &json!({"path": "new.txt"}),
        &workspace_roots(dir.path()),
    );
    assert_eq!(error_kind(&response), (-32002, "denied"));
    assert!(!dir.path().join("new.txt").exists());
}

#[test]
fn a_missing_root_says_which_and_how_to_grant_it() {
    let response = invoke("demo.logs", &json!({}));
    assert_eq!(error_kind(&response), (-32001, "root_missing"));
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`logs`")
    );
    let remedy = response["error"]["data"]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("--source-root logs=PATH") && remedy.contains("[source_roots]"),
        "{remedy}"
    );

    let roots =
        json!({"logs": {"path": "/nonexistent/modsdk-test", "kind": "source", "access": "read"}});
    let response = invoke_with_roots("demo.logs", &json!({}), &roots);
    assert_eq!(error_kind(&response), (-32001, "root_missing"));
}

#[test]
fn a_root_the_capability_does_not_name_is_the_authors_to_fix_not_the_operators() {
    // The host grants a call only the roots its capability names: the
    // workspace exists and is configured, yet `demo.forgot` never gets it.
    let response = invoke("demo.forgot", &json!({"path": "a.txt"}));
    assert_eq!(error_kind(&response), (-32001, "root_missing"));
    let remedy = response["error"]["data"]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("`demo.forgot` does not name root `workspace`")
            && remedy.contains("effects.reads"),
        "the remedy names the capability's omission: {remedy}"
    );
    assert!(
        !remedy.contains("--workspace") && !remedy.contains("--source-root"),
        "configuring the root would not help, so the remedy does not suggest it: {remedy}"
    );

    // A capability that names its source root: the operator's to configure.
    let response = invoke("demo.logs", &json!({}));
    let remedy = response["error"]["data"]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("--source-root logs=PATH") && !remedy.contains("effects.reads"),
        "{remedy}"
    );
}

#[test]
fn artifacts_are_written_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let roots = json!({"artifacts": {"path": dir.path().to_str().unwrap(), "kind": "artifacts", "access": "read-write"}});
    let response = invoke_with_roots("demo.report", &json!({}), &roots);
    assert_eq!(
        response["result"]["artifacts"],
        json!([{"root": "artifacts", "path": "reports/r.md", "media_type": "text/markdown", "title": "Report"}])
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("reports/r.md")).unwrap(),
        "# report\n"
    );
}

#[test]
#[should_panic(expected = "object root")]
fn an_input_type_without_an_object_schema_is_refused_at_declaration() {
    let _ = Capability::new("demo.bad", |_: &mut Ctx, _: String| Ok(Nothing {}));
}

#[test]
fn a_declared_secret_is_in_the_descriptor_and_read_from_the_environment() {
    let response = call(&json!({"jsonrpc": "2.0", "id": 1, "method": "describe"}));
    let descriptor: modproto::Descriptor =
        serde_json::from_value(response["result"].clone()).unwrap();
    let token = descriptor.capability("demo.token").unwrap();
    // `.effects` after `.secrets` keeps the secrets declared before it.
    assert_eq!(token.effects.secrets, vec!["DEMO_SDK_UNSET_TOKEN"]);
    assert!(
        descriptor
            .capability("demo.echo")
            .unwrap()
            .effects
            .secrets
            .is_empty()
    );
    // Not given to this call: a failure that says how the operator grants it.
    let response = invoke("demo.token", &json!({}));
    assert_eq!(error_kind(&response), (-32000, "failed"));
    let remedy = response["error"]["data"]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("secrets = [\"DEMO_SDK_UNSET_TOKEN\"]") && remedy.contains("config.toml"),
        "{remedy}"
    );
}

#[test]
fn a_secret_the_capability_does_not_declare_is_the_authors_bug() {
    let response = invoke("demo.undeclared_secret", &json!({}));
    assert_eq!(error_kind(&response), (-32603, "internal"));
    let remedy = response["error"]["data"]["remedy"].as_str().unwrap();
    assert!(remedy.contains(".secrets("), "{remedy}");
}

#[test]
#[should_panic(expected = "did you mean \"GITHUB_TOKEN\"")]
fn a_secret_name_the_host_cannot_grant_is_refused_at_declaration() {
    let _ = Capability::new("demo.bad", |_: &mut Ctx, _: crate::NoInput| Ok(Nothing {}))
        .secrets(["github-token"]);
}
