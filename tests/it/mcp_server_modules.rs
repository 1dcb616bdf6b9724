//! Existing stdio MCP servers as modules (issue 38): installed with
//! `modhost install --mcp`, run through the MCP bridge (`modules/mcp_bridge`)
//! one confined server process per call, and driven through `modhost
//! invoke` and `modhost mcp` like any capability.
//!
//! The servers are real: a tiny server written with each official SDK
//! (`tests/mcp/servers/tiny_server.py` with the Python `mcp` package,
//! `tiny_server.mjs` with `@modelcontextprotocol/sdk`), and the reference
//! servers `@modelcontextprotocol/server-filesystem` (npm) and
//! `mcp-server-time` (PyPI), installed inside the clone by
//! `tests/mcp/servers/setup-servers` (`tests/setup`, which `.ci/run` runs).
//! A missing one is a failure with its remedy, never a skip.
//!
//! The attacks are the tiny Python server doing what a hostile server
//! would: reading outside its roots, reaching a host it was not granted,
//! changing its tools after they were pinned, leaving a child running after
//! its answer, answering with a huge or a malformed message. Each is
//! asserted as refused, with nothing getting out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::net_lab::LoopbackService;
use crate::support::{Home, Run, module_binary, write_file};

pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(60);

pub(crate) fn servers_dir() -> PathBuf {
    crate::support::tests_dir().join("mcp").join("servers")
}

/// Fail (never skip) when `what` at `path` is not installed.
#[track_caller]
pub(crate) fn require(what: &str, path: &Path) {
    if path.exists() {
        return;
    }
    let remedy = "install the MCP servers with `tests/setup` (or `tests/mcp/servers/setup-servers`; Python 3 with pip, Node 20 with npm)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI: {what} is missing ({} does not exist): .ci/run should have installed it; {remedy}",
            path.display()
        );
    }
    panic!(
        "{what} is not installed here ({} does not exist); {remedy}",
        path.display()
    );
}

/// The Python interpreter `setup-servers` installed the Python servers
/// with: the one the modules are granted.
fn python() -> String {
    let file = servers_dir().join(".python-interpreter");
    require("the Python MCP servers", &file);
    require(
        "the Python MCP SDK",
        &servers_dir().join(".python/mcp/__init__.py"),
    );
    std::fs::read_to_string(&file)
        .expect("read .python-interpreter")
        .trim()
        .to_owned()
}

fn node() -> PathBuf {
    let node = crate::mcp_clients::which(Path::new("node"));
    require("Node (node on PATH)", &node);
    std::fs::canonicalize(node).expect("node resolves")
}

/// A fresh home granting `python3` and `node` to modules, with `extra`
/// config lines.
pub(crate) fn server_home(extra: &str) -> Home {
    let home = Home::new();
    home.write_config(&format!(
        "[binaries]\npython3 = {:?}\nnode = {:?}\n{extra}",
        python(),
        node().display().to_string()
    ));
    home.require_landlock();
    home
}

/// Calls of `module` run without asking (each tool runs an interpreter,
/// which the default policy asks about).
pub(crate) fn allow(module: &str) -> String {
    format!("[[approval.rules]]\nmodule = {module:?}\ndecision = \"allow\"\n")
}

/// `to` made a copy of `from` by hard links (cheap; the install copies it
/// for real).
pub(crate) fn linked_copy(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "cp -al {} {}",
        from.display(),
        to.display()
    );
}

/// The folder an operator installs the tiny Python server from: the SDK
/// installed with `pip install --target`, and the server beside it.
fn python_server_source(home: &Home) -> PathBuf {
    let source = home.outside().join("tiny-py-src");
    let packages = servers_dir().join(".python");
    require("the Python MCP servers", &packages);
    linked_copy(&packages, &source);
    std::fs::copy(
        servers_dir().join("tiny_server.py"),
        source.join("tiny_server.py"),
    )
    .expect("copy tiny_server.py");
    source
}

/// The folder an operator installs the tiny TypeScript server from: the
/// SDK's node_modules and the server.
fn typescript_server_source(home: &Home) -> PathBuf {
    let source = home.outside().join("tinyts-src");
    let node_modules = crate::mcp_clients::mcp_dir().join("ts/node_modules");
    require(
        "the TypeScript MCP SDK",
        &node_modules.join("@modelcontextprotocol/sdk"),
    );
    std::fs::create_dir_all(&source).expect("source folder");
    linked_copy(&node_modules, &source.join("node_modules"));
    std::fs::copy(
        servers_dir().join("tiny_server.mjs"),
        source.join("tiny_server.mjs"),
    )
    .expect("copy tiny_server.mjs");
    source
}

/// `modhost install --mcp SOURCE --id ID [--env ...] --json -- COMMAND...`.
fn install_mcp(home: &Home, source: &Path, id: &str, env: &[&str], command: &[&str]) -> Run {
    install_mcp_with(home, source, id, env, command, &[])
}

/// [`install_mcp`] with more flags (`--upgrade`).
pub(crate) fn install_mcp_with(
    home: &Home,
    source: &Path,
    id: &str,
    env: &[&str],
    command: &[&str],
    flags: &[&str],
) -> Run {
    let mut args = vec![
        "install".to_owned(),
        "--mcp".to_owned(),
        source.display().to_string(),
        "--id".to_owned(),
        id.to_owned(),
        "--bridge".to_owned(),
        module_binary("mcp_bridge").display().to_string(),
        "--json".to_owned(),
    ];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    for pair in env {
        args.push("--env".to_owned());
        args.push((*pair).to_owned());
    }
    if !command.is_empty() {
        args.push("--".to_owned());
        args.extend(command.iter().map(|c| (*c).to_owned()));
    }
    home.run(&args)
}

/// Install the tiny Python server as `id`; the install report.
fn install_tiny_python(home: &Home, id: &str, env: &[&str]) -> Value {
    let source = python_server_source(home);
    let mut all = vec!["PYTHONPATH={module}"];
    all.extend_from_slice(env);
    install_mcp(
        home,
        &source,
        id,
        &all,
        &["python3", "{module}/tiny_server.py"],
    )
    .expect_code(0)
    .json()
}

/// Install the tiny TypeScript server as `id`; the install report.
fn install_tiny_typescript(home: &Home, id: &str) -> Value {
    let source = typescript_server_source(home);
    install_mcp(
        home,
        &source,
        id,
        &[],
        &["node", "{module}/tiny_server.mjs"],
    )
    .expect_code(0)
    .json()
}

/// Edit module `id`'s manifest with `edit`, then approve the edit
/// (`modhost pin`), as the operator grants a tool.
pub(crate) fn grant(home: &Home, id: &str, edit: impl FnOnce(String) -> String) {
    let path = home.modules().join(id).join("mcp-server.toml");
    let text = std::fs::read_to_string(&path).expect("read the manifest");
    std::fs::write(&path, edit(text)).expect("write the manifest");
    home.run(&["pin", id]).expect_code(0);
}

/// The manifest edit that declares the workspace root (`access`) and names
/// it in `reads` of each of `reads` and in `writes` of each of `writes`
/// (tools still as installed).
pub(crate) fn workspace_for<'a>(
    access: &'a str,
    reads: &'a [&'a str],
    writes: &'a [&'a str],
) -> impl FnOnce(String) -> String + 'a {
    move |mut text: String| {
        let declared = format!("[roots.workspace]\nkind = \"workspace\"\naccess = \"{access}\"\n");
        text = match text.find("[roots.workspace]\n") {
            // Declared by an earlier grant: its access is the one asked now.
            Some(at) => {
                let end = text[at..].find("\n\n").map_or(text.len(), |e| at + e + 1);
                format!("{}{declared}{}", &text[..at], &text[end..])
            }
            None => text.replace("[roots]\n", &declared),
        };
        for (key, tools) in [("reads", reads), ("writes", writes)] {
            for tool in tools {
                let table = format!("[tools.{tool}]\nreads = []\nwrites = []\n");
                assert!(
                    text.contains(&table),
                    "no fresh table for {tool} in:\n{text}"
                );
                let granted =
                    table.replace(&format!("{key} = []"), &format!("{key} = [\"workspace\"]"));
                text = text.replace(&table, &granted);
            }
        }
        text
    }
}

/// `modhost invoke MODULE MODULE.TOOL --json --input INPUT`.
fn call(home: &Home, module: &str, tool: &str, input: &Value) -> Run {
    home.invoke(module, &format!("{module}.{tool}"), input, &[])
}

#[track_caller]
fn output(run: &Run) -> Value {
    run.invoke_result()["output"].clone()
}

#[track_caller]
fn text_of(run: &Run) -> String {
    run.invoke_result()["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A `file://` URI as the bridge writes one.
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// What every tiny server does, whichever SDK wrote it: listed with its
/// schemas, called with structured output, failing as `failed`, seeing
/// exactly the call's roots, and leaving no process behind. The one grant
/// it makes (one pin) also gives the workspace to `more_reads` and
/// `writes` (with `access`) and makes the edit `more`, for the caller's
/// checks.
fn the_tiny_server_works_as_a_module(
    home: &Home,
    id: &str,
    access: &str,
    more_reads: &[&str],
    writes: &[&str],
    more: impl FnOnce(String) -> String,
) {
    let described = home.run(&["describe", id, "--json"]).expect_code(0).json();
    let capabilities = described["descriptor"]["capabilities"]
        .as_array()
        .unwrap_or_else(|| panic!("no capabilities: {described:#}"));
    let add = capabilities
        .iter()
        .find(|c| c["id"] == format!("{id}.add"))
        .unwrap_or_else(|| panic!("no add capability: {described:#}"));
    assert_eq!(add["input_schema"]["type"], "object", "{add:#}");
    assert!(
        add["output_schema"].is_object(),
        "the tool's outputSchema is kept: {add:#}"
    );
    assert_eq!(
        add["effects"]["spawns"].as_array().map(Vec::len),
        Some(1),
        "{add:#}"
    );
    assert_eq!(
        add["effects"]["reads"],
        json!([]),
        "installed with no grant: {add:#}"
    );

    assert_eq!(
        output(&call(home, id, "add", &json!({"a": 2, "b": 3}))),
        json!({"sum": 5})
    );
    assert!(text_of(&call(home, id, "count", &json!({"n": 3}))).contains("counted to 3"));

    let failed = call(home, id, "fail", &json!({"message": "no such zone"})).invoke_error();
    assert_eq!(failed["kind"], "failed", "{failed:#}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no such zone"),
        "{failed:#}"
    );

    // No root granted: the server is offered none.
    assert_eq!(text_of(&call(home, id, "roots", &json!({}))), "(no roots)");
    let mut reads = vec!["roots"];
    reads.extend_from_slice(more_reads);
    grant(home, id, |text| {
        more(workspace_for(access, &reads, writes)(text))
    });
    let roots = text_of(&call(home, id, "roots", &json!({})));
    let workspace = std::fs::canonicalize(home.workspace()).expect("workspace");
    assert_eq!(roots, file_uri(&workspace), "exactly the call's roots");
    home.assert_no_module_processes();
}

#[test]
fn a_python_sdk_server_is_listed_called_and_given_only_its_roots_and_links() {
    let home = server_home(&allow("tiny"));
    let report = install_tiny_python(&home, "tiny", &[]);
    assert_eq!(report["pinned"], true, "{report:#}");
    let tools = crate::support::strings(&report["tools"]);
    for tool in ["echo", "add", "count", "roots", "huge", "garbage"] {
        assert!(
            tools.contains(&tool.to_owned()),
            "{tool} not listed: {tools:?}"
        );
    }
    // Its working folder is its first root, or `/` without one.
    assert_eq!(text_of(&call(&home, "tiny", "cwd", &json!({}))), "/");
    let state = |text: String| {
        text.replacen(
            "\n[roots.",
            "\n[roots.state]\nkind = \"state\"\n\n[roots.",
            1,
        )
        .replace(
            "[tools.remember]\nreads = []\nwrites = []",
            "[tools.remember]\nreads = []\nwrites = [\"state\"]",
        )
    };
    the_tiny_server_works_as_a_module(
        &home,
        "tiny",
        "read-write",
        &["cwd"],
        &["write_and_link"],
        state,
    );
    // With its state root writable, caches land there (HOME is in it).
    let kept = text_of(&call(&home, "tiny", "remember", &json!({"text": "kept"})));
    let state_dir = std::fs::canonicalize(home.path().join("state/tiny")).unwrap();
    assert_eq!(
        kept,
        state_dir.join(".cache/tiny/note").display().to_string()
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "kept");
    let workspace = std::fs::canonicalize(home.workspace()).unwrap();
    assert_eq!(
        text_of(&call(&home, "tiny", "cwd", &json!({}))),
        workspace.display().to_string()
    );

    // A resource link into a granted root is an artifact the host checked.
    let run = call(
        &home,
        "tiny",
        "write_and_link",
        &json!({"path": "note.txt", "text": "hi"}),
    );
    let result = run.invoke_result();
    let artifacts = result["artifacts"].as_array().cloned().unwrap_or_default();
    assert_eq!(artifacts.len(), 1, "{result:#}");
    assert_eq!(artifacts[0]["root"], "workspace", "{result:#}");
    assert_eq!(artifacts[0]["path"], "note.txt", "{result:#}");
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("note.txt")).unwrap(),
        "hi"
    );
}

#[test]
fn a_typescript_sdk_server_is_listed_called_and_given_only_its_roots() {
    let home = server_home(&allow("tinyts"));
    let report = install_tiny_typescript(&home, "tinyts");
    assert_eq!(report["pinned"], true, "{report:#}");
    the_tiny_server_works_as_a_module(&home, "tinyts", "read", &[], &[], |text| text);
}

/// Both SDKs' servers through `modhost mcp`: listed under provider-safe
/// names, called with progress and structured content, an operator's `ask`
/// rule asked through elicitation, and a cancelled call's server gone.
#[test]
fn mcp_servers_as_modules_are_served_by_modhost_mcp() {
    // The ask rule is stricter than the allow rule: it wins for `slow`.
    let home = server_home(&format!(
        "{}{}[[approval.rules]]\ncapability = \"tiny.slow\"\ndecision = \"ask\"\n",
        allow("tiny"),
        allow("tinyts")
    ));
    install_tiny_python(&home, "tiny", &[]);
    install_tiny_typescript(&home, "tinyts");
    let ws = home.workspace();
    let mut server = McpStdio::spawn(&home, Some(&ws), |_| {}).answering_within(ANSWER_WITHIN);
    server.initialize(&json!({"elicitation": {}}));
    let names = server.tool_names();
    for name in [
        "tiny__tiny_add",
        "tiny__tiny_count",
        "tinyts__tinyts_add",
        "tinyts__tinyts_slow",
    ] {
        assert!(
            names.contains(&name.to_owned()),
            "{name} not offered: {names:?}"
        );
    }

    for tool in ["tiny__tiny_add", "tinyts__tinyts_add"] {
        let result = server.result(
            "tools/call",
            &json!({"name": tool, "arguments": {"a": 20, "b": 22}}),
        );
        assert_eq!(
            result["structuredContent"],
            json!({"sum": 42}),
            "{tool}: {result}"
        );
        assert_eq!(result["isError"], json!(false), "{tool}: {result}");
    }

    for tool in ["tiny__tiny_count", "tinyts__tinyts_count"] {
        let id = server.send_request(
            "tools/call",
            &json!({"name": tool, "arguments": {"n": 3}, "_meta": {"progressToken": "p-1"}}),
        );
        let mut progress = Vec::new();
        let response = loop {
            let message = server.next_message(ANSWER_WITHIN);
            if message["method"] == "notifications/progress" {
                assert_eq!(message["params"]["progressToken"], "p-1", "{message}");
                progress.push(message["params"]["progress"].as_f64().unwrap_or_default());
                continue;
            }
            assert_eq!(message["id"], json!(id), "{message}");
            break message;
        };
        assert!(
            response["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("counted to 3"),
            "{tool}: {response}"
        );
        assert_eq!(
            progress,
            [1.0, 2.0, 3.0],
            "{tool}: each step relayed, in order"
        );
    }

    // The ask rule: the user is asked; a yes runs the call.
    let call = server.send_request(
        "tools/call",
        &json!({"name": "tiny__tiny_slow", "arguments": {"seconds": 0}}),
    );
    let question = server.next_message(ANSWER_WITHIN);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    server.send(&json!({"jsonrpc": "2.0", "id": question["id"],
                        "result": {"action": "accept", "content": {"approve": true}}}));
    let response = server.response();
    assert_eq!(response["id"], json!(call), "{response}");
    assert_eq!(
        response["result"]["content"][0]["text"], "slept",
        "{response}"
    );

    // Cancelled mid-call: the server process (and the bridge) are gone.
    let call = server.send_request(
        "tools/call",
        &json!({"name": "tinyts__tinyts_slow", "arguments": {"seconds": 60}}),
    );
    wait_for_a_server(&home, "tiny_server.mjs");
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call, "reason": "changed my mind"}}),
    );
    // The server process is gone (a bridge started ahead for the next call,
    // which starts no server before its request, may wait meanwhile).
    let left = crate::support::wait_until_empty(|| {
        home.live_module_processes()
            .into_iter()
            .filter(|p| p.cmdline.contains("tiny_server"))
            .collect()
    });
    assert!(
        left.is_empty(),
        "the cancelled call's server survived: {left:#?}"
    );
    server.result("ping", &json!({}));
    server.finish();
    home.assert_no_module_processes();
}

/// Wait until a server process whose command line names `script` runs.
#[track_caller]
fn wait_for_a_server(home: &Home, script: &str) {
    let started = std::time::Instant::now();
    while started.elapsed() < ANSWER_WITHIN {
        if home
            .live_module_processes()
            .iter()
            .any(|p| p.cmdline.contains(script))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "no {script} process started: {:#?}",
        home.live_module_processes()
    );
}

/// Every tool runs the server's interpreter, so the default policy asks
/// before each call; an operator's `ask` rule for one tool is kept over an
/// allow rule for its module. Refused, the server never starts.
#[test]
fn a_call_that_must_be_approved_starts_no_server_until_it_is() {
    let home = server_home("");
    install_tiny_python(&home, "tiny", &[]);
    grant(
        &home,
        "tiny",
        workspace_for("read-write", &[], &["write_and_link"]),
    );
    let input = json!({"path": "approved.txt", "text": "yes"});
    let refused = call(&home, "tiny", "write_and_link", &input);
    assert_eq!(refused.refused_kind(), "approval_required", "{refused:#?}");
    assert!(
        !home.workspace().join("approved.txt").exists(),
        "the server ran unapproved"
    );

    home.write_config(&format!(
        "[binaries]\npython3 = {:?}\n{}[[approval.rules]]\ntool = \"tiny__tiny_write_and_link\"\ndecision = \"ask\"\n",
        python(),
        allow("tiny")
    ));
    let refused = call(&home, "tiny", "write_and_link", &input);
    assert_eq!(refused.refused_kind(), "approval_required", "{refused:#?}");
    assert!(
        !home.workspace().join("approved.txt").exists(),
        "the server ran unapproved"
    );
    // The allow rule holds for the other tools.
    assert_eq!(
        output(&call(&home, "tiny", "add", &json!({"a": 1, "b": 1}))),
        json!({"sum": 2})
    );

    let approved = home.invoke("tiny", "tiny.write_and_link", &input, &["--approve"]);
    approved.invoke_result();
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("approved.txt")).unwrap(),
        "yes"
    );
}

/// Attack: the server reads a file outside its roots. The sandbox refuses
/// the open (the server's own code never gets a byte), whichever SDK.
#[test]
fn a_server_cannot_read_outside_its_roots() {
    let home = server_home(&format!("{}{}", allow("tiny"), allow("tinyts")));
    install_tiny_python(&home, "tiny", &[]);
    install_tiny_typescript(&home, "tinyts");
    let secret = "outside-secret-51c2";
    write_file(&home.outside(), "secret.txt", format!("{secret}\n"));
    write_file(&home.workspace(), "inside.txt", "inside\n");
    let outside = std::fs::canonicalize(home.outside().join("secret.txt")).unwrap();
    let inside = std::fs::canonicalize(home.workspace().join("inside.txt")).unwrap();
    for id in ["tiny", "tinyts"] {
        grant(&home, id, workspace_for("read", &["read_file"], &[]));
        // The granted root is readable: the refusal below is the sandbox's.
        let read = call(&home, id, "read_file", &json!({"path": inside}));
        assert_eq!(text_of(&read).trim(), "inside", "{id}: {read:#?}");
        for path in [outside.clone(), PathBuf::from("/etc/shadow")] {
            let run = call(&home, id, "read_file", &json!({"path": path}));
            assert!(
                !run.stdout.contains(secret),
                "{id} read {}: {run:#?}",
                path.display()
            );
            let error = run.invoke_error();
            assert_eq!(error["kind"], "failed", "{id}: {error:#}");
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("Permission denied") || message.contains("EACCES"),
                "{id}: the sandbox refused the open: {error:#}"
            );
        }
    }
    home.assert_no_module_processes();
}

/// Attack: the server reaches a host it was not granted. Without network
/// it has no socket at all; granted one host, the egress proxy refuses any
/// other, naming why. The host it tried sees no connection either way.
#[test]
fn a_server_cannot_reach_a_host_it_was_not_granted() {
    let home = server_home(&allow("tiny"));
    install_tiny_python(&home, "tiny", &[]);
    let service = LoopbackService::start();
    let url = service.url("/secret");

    let run = call(&home, "tiny", "fetch", &json!({"url": url}));
    let error = run.invoke_error();
    assert_eq!(error["kind"], "failed", "{error:#}");
    assert!(!run.stdout.contains("loopback data"), "{run:#?}");

    grant(&home, "tiny", |text| {
        text.replace(
            "[tools.fetch]\nreads = []\nwrites = []\nnetwork = false",
            "[tools.fetch]\nreads = []\nwrites = []\nnetwork = [\"example.org:80\"]",
        )
    });
    let run = call(&home, "tiny", "fetch", &json!({"url": url}));
    let text = text_of(&run);
    assert!(
        text.starts_with("status 403: refused: "),
        "the proxy refused it: {text}"
    );
    assert!(!text.contains("loopback data"), "{text}");
    assert_eq!(service.hits(), 0, "the host not granted was reached");
    home.assert_no_module_processes();
}

/// Attack: the server changes its tools after they were pinned: a rug pull
/// its caller triggers (a file in the workspace rewrites a description),
/// and an upgrade in place (its environment adds a tool). Every call is
/// refused, naming what changed, before the tool runs; listing and pinning
/// the tools again (an upgrade) lets it run, keeping the grants given.
#[test]
fn a_server_whose_tools_changed_since_they_were_pinned_is_refused() {
    let home = server_home(&allow("tiny"));
    install_tiny_python(&home, "tiny", &[]);
    grant(
        &home,
        "tiny",
        workspace_for("read-write", &[], &["write_and_link"]),
    );
    let write = |name: &str| {
        call(
            &home,
            "tiny",
            "write_and_link",
            &json!({"path": name, "text": "ran"}),
        )
    };
    write("before.txt").invoke_result();

    write_file(&home.workspace(), ".tiny-rug-pull", "");
    let refused = write("rug.txt");
    let error = refused.invoke_error();
    assert_eq!(error["kind"], "mcp_tools_changed", "{error:#}");
    let problems = crate::support::strings(&error["problems"]);
    assert_eq!(
        problems,
        ["definition changed since it was pinned: echo"],
        "{error:#}"
    );
    assert!(
        !home.workspace().join("rug.txt").exists(),
        "the tool ran anyway"
    );
    std::fs::remove_file(home.workspace().join(".tiny-rug-pull")).unwrap();

    // The operator changes the server's environment (and pins the edit):
    // the server now lists a tool the snapshot does not have.
    grant(&home, "tiny", |text| {
        text.replace("[server.env]\n", "[server.env]\nTINY_VARIANT = \"2\"\n")
    });
    let error = write("variant.txt").invoke_error();
    assert_eq!(error["kind"], "mcp_tools_changed", "{error:#}");
    assert_eq!(
        crate::support::strings(&error["problems"]),
        ["new, not pinned: extra"],
        "{error:#}"
    );
    assert!(!home.workspace().join("variant.txt").exists());

    // Listed and pinned again: runs, the grants given kept.
    let source = home.outside().join("tiny-py-src");
    let report = install_mcp_with(
        &home,
        &source,
        "tiny",
        &["PYTHONPATH={module}", "TINY_VARIANT=2"],
        &["python3", "{module}/tiny_server.py"],
        &["--upgrade"],
    )
    .expect_code(0)
    .json();
    assert_eq!(report["changes"]["added"], json!(["extra"]), "{report:#}");
    write("after.txt").invoke_result();
    assert!(home.workspace().join("after.txt").exists());
    assert_eq!(text_of(&call(&home, "tiny", "extra", &json!({}))), "extra");
}

/// Attack: the server forks a child that outlives its answer, to act after
/// the call. The host kills the call's whole process group: the child is
/// gone at once and never writes.
#[test]
fn a_child_the_server_leaves_behind_does_not_outlive_the_call() {
    let home = server_home(&allow("tiny"));
    install_tiny_python(&home, "tiny", &[]);
    grant(&home, "tiny", workspace_for("read-write", &[], &["linger"]));
    let late = std::fs::canonicalize(home.workspace())
        .unwrap()
        .join("late.txt");
    let run = call(
        &home,
        "tiny",
        "linger",
        &json!({"path": late, "seconds": 2}),
    );
    assert!(text_of(&run).starts_with("child "), "{run:#?}");
    home.assert_no_module_processes();
    std::thread::sleep(Duration::from_secs(3));
    assert!(!late.exists(), "the child outlived the call and wrote");
}

/// Attack: the server answers with a message larger than the call's output
/// bound, or with a line that is not JSON-RPC: each a clear error of its
/// own kind, the server gone.
#[test]
fn a_huge_or_malformed_answer_is_refused_with_its_own_kind() {
    let home = server_home(&format!(
        "{}[limits]\nmax_output_bytes = 65536\n",
        allow("tiny")
    ));
    install_tiny_python(&home, "tiny", &[]);
    let error = call(&home, "tiny", "huge", &json!({"size": 200_000})).invoke_error();
    assert_eq!(error["kind"], "mcp_message_too_large", "{error:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("65536"),
        "{error:#}"
    );
    assert!(
        error["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("max_output_bytes"),
        "{error:#}"
    );
    // Under the bound it is answered.
    assert_eq!(
        text_of(&call(&home, "tiny", "huge", &json!({"size": 1000}))).len(),
        1000
    );

    let error = call(&home, "tiny", "garbage", &json!({})).invoke_error();
    assert_eq!(error["kind"], "mcp_bad_message", "{error:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("this line is not JSON-RPC"),
        "{error:#}"
    );
    home.assert_no_module_processes();
}

/// The reference filesystem server (npm), granted the workspace through
/// `{roots}` and MCP roots: it lists and reads there, and its own check
/// refuses elsewhere.
#[test]
fn the_reference_filesystem_server_runs_as_a_module() {
    let node_dir = servers_dir().join("node");
    let package =
        node_dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    require("@modelcontextprotocol/server-filesystem", &package);
    let home = server_home(&allow("fs"));
    let report = install_mcp(
        &home,
        &node_dir,
        "fs",
        &[],
        &[
            "node",
            "{module}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "{roots}",
        ],
    )
    .expect_code(0)
    .json();
    let tools = crate::support::strings(&report["tools"]);
    assert!(tools.contains(&"list_directory".to_owned()), "{tools:?}");
    grant(
        &home,
        "fs",
        workspace_for("read", &["list_directory", "read_text_file"], &[]),
    );
    write_file(&home.workspace(), "hello.txt", "hello from the workspace\n");
    let workspace = std::fs::canonicalize(home.workspace()).unwrap();
    let listed = text_of(&call(
        &home,
        "fs",
        "list_directory",
        &json!({"path": workspace}),
    ));
    assert!(listed.contains("[FILE] hello.txt"), "{listed}");
    let read = call(
        &home,
        "fs",
        "read_text_file",
        &json!({"path": workspace.join("hello.txt")}),
    );
    assert!(text_of(&read).contains("hello from the workspace"));
    let error = call(
        &home,
        "fs",
        "read_text_file",
        &json!({"path": "/etc/passwd"}),
    )
    .invoke_error();
    assert_eq!(error["kind"], "failed", "{error:#}");
    home.assert_no_module_processes();
}

/// The reference time server (PyPI), installed from its `pip install
/// --target` folder and run with `python3 -m`.
#[test]
fn the_reference_time_server_runs_as_a_module() {
    let packages = servers_dir().join(".python");
    require("mcp-server-time", &packages.join("mcp_server_time"));
    let home = server_home(&allow("time"));
    let report = install_mcp(
        &home,
        &packages,
        "time",
        &["PYTHONPATH={module}"],
        &[
            "python3",
            "-m",
            "mcp_server_time",
            "--local-timezone",
            "UTC",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(
        crate::support::strings(&report["tools"]),
        ["get_current_time", "convert_time"],
        "{report:#}"
    );
    let now = output(&call(
        &home,
        "time",
        "get_current_time",
        &json!({"timezone": "Asia/Tokyo"}),
    ));
    assert_eq!(now["timezone"], "Asia/Tokyo", "{now:#}");
    let converted = output(&call(
        &home,
        "time",
        "convert_time",
        &json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}),
    ));
    assert_eq!(converted["time_difference"], "+0.0h", "{converted:#}");
    let error = call(
        &home,
        "time",
        "get_current_time",
        &json!({"timezone": "Mars/Olympus"}),
    )
    .invoke_error();
    assert_eq!(error["kind"], "failed", "{error:#}");
}

/// The install refuses what it cannot run per call, saying what to do:
/// a command that is not a configured binary, and a server that does not
/// start.
#[test]
fn an_install_the_host_could_not_run_is_refused_with_its_remedy() {
    let home = Home::new();
    home.write_config("");
    let source = home.outside().join("empty-server");
    std::fs::create_dir_all(&source).unwrap();
    let run = install_mcp(&home, &source, "nope", &[], &["node", "server.js"]);
    run.expect_code(2);
    assert!(run.stderr.contains("[binaries]"), "{run:#?}");
    assert!(!home.modules().join("nope").exists());

    let home = server_home("");
    let run = install_mcp(
        &home,
        &source,
        "nope",
        &[],
        &["node", "{module}/missing.js"],
    );
    run.expect_code(2);
    assert!(run.stderr.contains("could not be listed"), "{run:#?}");
    assert!(
        run.stderr.contains("missing.js"),
        "the server's stderr is quoted: {run:#?}"
    );
    assert!(
        !home.modules().join("nope").exists(),
        "nothing was installed"
    );
    home.assert_no_module_processes();
}

/// The command line of the hostile server (`tests/mcp/servers/hostile_server.py`).
const HOSTILE: &[&str] = &["python3", "{module}/hostile_server.py"];

/// A folder holding the hostile server, named `name` (under the home's
/// outside folder), with `manifest` as its `mcp-server.toml` when given.
fn hostile_source(home: &Home, name: &str, manifest: Option<&str>) -> PathBuf {
    let source = home.outside().join(name);
    std::fs::create_dir_all(&source).expect("source folder");
    std::fs::copy(
        servers_dir().join("hostile_server.py"),
        source.join("hostile_server.py"),
    )
    .expect("copy hostile_server.py");
    if let Some(manifest) = manifest {
        std::fs::write(source.join("mcp-server.toml"), manifest).expect("write the manifest");
    }
    source
}

/// Install the hostile server as `id`, granting every tool nothing, with
/// `env` (`--env`).
fn install_hostile(home: &Home, id: &str, env: &[&str]) -> Run {
    let source = hostile_source(home, &format!("{id}-src"), None);
    install_mcp(home, &source, id, env, HOSTILE)
}

/// A manifest the operator writes for the hostile server: the workspace
/// readable by `link`, `approval` asked of `bad_structured`.
const OPERATOR_MANIFEST: &str = r#"id = "hostile"

[server]
command = "python3"
args = ["{module}/hostile_server.py"]

[roots.workspace]
kind = "workspace"
access = "read"

[tools.link]
reads = ["workspace"]

[tools.bad_structured]
approval = true
"#;

/// `tar czf ARCHIVE -C DIR ENTRY...`.
fn tar_gz(dir: &Path, archive: &Path, entries: &[&str]) {
    let status = Command::new("tar")
        .arg("czf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .args(entries)
        .status()
        .expect("run tar");
    assert!(status.success(), "tar czf {}", archive.display());
}

/// A `.zip` of the files of `dir` at the archive's top (Python's zipfile).
fn zip(dir: &Path, archive: &Path) {
    let files: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("entry").path().display().to_string())
        .collect();
    let status = Command::new(python())
        .args(["-m", "zipfile", "-c"])
        .arg(archive)
        .args(&files)
        .status()
        .expect("run python -m zipfile");
    assert!(status.success(), "zip {}", archive.display());
}

fn capability<'a>(described: &'a Value, id: &str) -> &'a Value {
    described["descriptor"]["capabilities"]
        .as_array()
        .and_then(|caps| caps.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no capability {id}: {described:#}"))
}

/// `install --mcp` takes an archive as it takes a folder (unpacked by the
/// one unpacker `install` uses), and a folder or archive may carry the
/// operator's own manifest: then `-- COMMAND` is optional, the id is the
/// manifest's, its grants are installed as written, and a grant for a tool
/// the server does not list is refused naming it. A shipped `tools.json`
/// the server no longer matches is refused; `--upgrade` still reports what
/// changed.
#[test]
fn an_mcp_server_installs_from_an_archive_with_the_operators_manifest() {
    let home = server_home(&allow("hostile"));
    let src = home.outside().join("packed");
    let folder = hostile_source(&home, "packed/hostile-1.0", Some(OPERATOR_MANIFEST));
    let archive = home.outside().join("hostile-1.0.tar.gz");
    tar_gz(&src, &archive, &["hostile-1.0"]);
    let mut args = vec!["install", "--mcp", archive.to_str().unwrap()];
    let bridge = module_binary("mcp_bridge").display().to_string();
    args.extend(["--bridge", &bridge, "--json"]);
    let report = home.run(&args).expect_code(0).json();
    assert_eq!(report["id"], "hostile", "the manifest's id: {report:#}");
    assert_eq!(report["operator_manifest"], true, "{report:#}");
    assert_eq!(report["command"], "python3", "{report:#}");
    assert_eq!(report["pinned"], true, "{report:#}");
    let described = home
        .run(&["describe", "hostile", "--json"])
        .expect_code(0)
        .json();
    let link = capability(&described, "hostile.link");
    assert_eq!(link["effects"]["reads"], json!(["workspace"]), "{link:#}");
    let bad = capability(&described, "hostile.bad_structured");
    assert_eq!(bad["effects"]["approval"], true, "{bad:#}");
    let flood = capability(&described, "hostile.flood");
    assert_eq!(flood["effects"]["reads"], json!([]), "unlisted: nothing");
    let installed = std::fs::read_to_string(home.modules().join("hostile/tools.json")).unwrap();
    assert!(installed.contains("good_structured"), "{installed}");
    assert_eq!(
        output(&call(&home, "hostile", "good_structured", &json!({}))),
        json!({"sum": 5})
    );

    // A zip, files at its top, the command given (and the id): installed.
    let flat = hostile_source(&home, "flat", Some(OPERATOR_MANIFEST));
    let zipped = home.outside().join("flat.zip");
    zip(&flat, &zipped);
    let report = install_mcp(&home, &zipped, "hostile2", &[], HOSTILE)
        .expect_code(0)
        .json();
    assert_eq!(report["id"], "hostile2", "{report:#}");
    let described = home
        .run(&["describe", "hostile2", "--json"])
        .expect_code(0)
        .json();
    let link = capability(&described, "hostile2.link");
    assert_eq!(link["effects"]["reads"], json!(["workspace"]), "{link:#}");

    // An upgrade from an archive whose manifest grants more: the new grant,
    // the tools unchanged.
    std::fs::write(
        folder.join("mcp-server.toml"),
        OPERATOR_MANIFEST.replace(
            "[tools.bad_structured]\n",
            "[tools.flood]\nreads = [\"workspace\"]\n\n[tools.bad_structured]\n",
        ),
    )
    .unwrap();
    std::fs::remove_file(&archive).unwrap();
    tar_gz(&src, &archive, &["hostile-1.0"]);
    args.push("--upgrade");
    let report = home.run(&args).expect_code(0).json();
    assert_eq!(
        report["changes"],
        json!({"added": [], "removed": [], "changed": []}),
        "{report:#}"
    );
    let described = home
        .run(&["describe", "hostile", "--json"])
        .expect_code(0)
        .json();
    let flood = capability(&described, "hostile.flood");
    assert_eq!(flood["effects"]["reads"], json!(["workspace"]), "{flood:#}");

    // A grant for a tool the server does not list: refused, naming it.
    let stale = hostile_source(
        &home,
        "stale",
        Some(&OPERATOR_MANIFEST.replace("[tools.link]", "[tools.lnik]")),
    );
    let run = install_mcp(&home, &stale, "stale", &[], &[]);
    run.expect_code(2);
    assert!(run.stderr.contains("\"lnik\""), "{run:#?}");
    assert!(!home.modules().join("stale").exists());

    // A tools.json the server no longer matches: refused, naming the change.
    let shipped = hostile_source(&home, "shipped", Some(OPERATOR_MANIFEST));
    let tools = json!({"protocolVersion": "2025-06-18", "serverInfo": {},
                       "tools": [{"name": "flood", "description": "Harmless.", "inputSchema": {"type": "object"}}]});
    std::fs::write(shipped.join("tools.json"), tools.to_string()).unwrap();
    let run = install_mcp(&home, &shipped, "shipped", &[], &[]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("definition changed since it was pinned: flood"),
        "{run:#?}"
    );
    assert!(!home.modules().join("shipped").exists());

    // The unpacker's rules hold: a link out of the archive installs nothing.
    let evil = hostile_source(&home, "evil-src/evil", Some(OPERATOR_MANIFEST));
    std::os::unix::fs::symlink("/etc/passwd", evil.join("passwd")).unwrap();
    let evil_archive = home.outside().join("evil.tgz");
    tar_gz(&home.outside().join("evil-src"), &evil_archive, &["evil"]);
    let run = install_mcp(&home, &evil_archive, "evil", &[], &[]);
    run.expect_code(2);
    assert!(run.stderr.contains("outside"), "{run:#?}");
    assert!(!home.modules().join("evil").exists());
    assert!(!home.modules().join("hostile-1.0").exists());

    // No manifest and no command: nothing to run, said so.
    let bare = hostile_source(&home, "bare", None);
    let run = install_mcp(&home, &bare, "bare", &[], &[]);
    run.expect_code(2);
    assert!(run.stderr.contains("no server command"), "{run:#?}");
    home.assert_no_module_processes();
}

/// Attack: a manifest that would make the interpreter load code from
/// outside the pinned folder (`{module}/..`, a script relative to the
/// caller's root, the loader's variables, a search path elsewhere). The
/// install refuses each, saying why; an installed manifest edited to do
/// it runs no call.
#[test]
fn a_manifest_with_path_tricks_is_refused() {
    let home = server_home(&allow("tricky"));
    let refused: [(&[&str], &[&str], &str); 5] = [
        (&[], &["python3", "{module}/../../etc/x.py"], "`..`"),
        (&[], &["python3", "hostile_server.py"], "working folder"),
        (&["LD_PRELOAD={module}/x.so"], HOSTILE, "dynamic loader"),
        (&["PYTHONPATH=/tmp"], HOSTILE, "search path"),
        (
            &["NODE_OPTIONS=--require /tmp/evil.js"],
            HOSTILE,
            "/tmp/evil.js",
        ),
    ];
    for (env, command, reason) in refused {
        let source = hostile_source(&home, "tricky-src", None);
        let run = install_mcp(&home, &source, "tricky", env, command);
        run.expect_code(2);
        assert!(run.stderr.contains(reason), "{env:?} {command:?}: {run:#?}");
        assert!(!home.modules().join("tricky").exists());
        std::fs::remove_dir_all(home.outside().join("tricky-src")).ok();
    }
    // Installed clean, then the operator's edit sneaks in PYTHONSTARTUP.
    install_hostile(&home, "tricky", &[]).expect_code(0);
    let path = home.modules().join("tricky/mcp-server.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace(
        "[server.env]\n",
        "[server.env]\nPYTHONSTARTUP = \"/tmp/evil.py\"\n",
    );
    assert_ne!(text, edited, "no [server.env] table in:\n{text}");
    std::fs::write(&path, edited).unwrap();
    let pinned = home.run(&["pin", "tricky"]);
    let run = call(&home, "tricky", "good_structured", &json!({}));
    assert_ne!(run.code, 0, "{run:#?}");
    let said = format!("{}{}{}", pinned.stderr, run.stdout, run.stderr);
    assert!(
        said.contains("PYTHONSTARTUP"),
        "the refusal names the variable: {pinned:#?} {run:#?}"
    );
    home.assert_no_module_processes();
}

/// Attack: a server that answers a call with notifications forever and
/// never with a result. Log lines are relayed, so they count against the
/// call's output bound (`output_limit`); notifications the bridge drops
/// (progress under another token) run into the call's deadline
/// (`timeout`). Either way the server is gone.
#[test]
fn a_server_that_only_sends_notifications_is_ended() {
    let home = server_home(&format!(
        "{}[limits]\ndeadline_ms = 3000\n",
        allow("hostile")
    ));
    install_hostile(&home, "hostile", &[]).expect_code(0);
    for (tool, kind) in [("flood", "output_limit"), ("flood_quietly", "timeout")] {
        let started = std::time::Instant::now();
        let error = call(&home, "hostile", tool, &json!({})).invoke_error();
        assert_eq!(error["kind"], kind, "{tool}: {error:#}");
        assert!(
            started.elapsed() < ANSWER_WITHIN,
            "{tool}: {:?}",
            started.elapsed()
        );
        home.assert_no_module_processes();
    }
}

/// Attack: a server that asks for its roots 100,000 times while the bridge
/// waits for its answer. The bridge answers a bounded number, then ends
/// the call with `mcp_bad_message`, long before any deadline.
#[test]
fn a_server_asking_for_its_roots_without_end_is_cut_off() {
    let home = server_home(&allow("hostile"));
    install_hostile(&home, "hostile", &[]).expect_code(0);
    let error = call(&home, "hostile", "ask_roots", &json!({})).invoke_error();
    assert_eq!(error["kind"], "mcp_bad_message", "{error:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("more than 1000 requests"),
        "{error:#}"
    );
    home.assert_no_module_processes();
}

/// Attack: resource links to files outside the granted roots (a system
/// file, the outside folder, `..` out of the workspace, a link planted in
/// the workspace that points outside): none becomes an artifact; a file
/// really in the workspace does.
#[test]
fn a_resource_link_outside_the_granted_roots_is_no_artifact() {
    let home = server_home(&allow("hostile"));
    install_hostile(&home, "hostile", &[]).expect_code(0);
    grant(&home, "hostile", workspace_for("read", &["link"], &[]));
    write_file(&home.outside(), "secret.txt", "outside-secret\n");
    write_file(&home.workspace(), "inside.txt", "inside\n");
    let workspace = std::fs::canonicalize(home.workspace()).unwrap();
    let outside = std::fs::canonicalize(home.outside()).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), workspace.join("escape")).unwrap();
    let paths = [
        "/etc/passwd".to_owned(),
        outside.join("secret.txt").display().to_string(),
        format!("{}/../secret.txt", workspace.display()),
        workspace.join("escape").display().to_string(),
        workspace.join("inside.txt").display().to_string(),
    ];
    let run = call(&home, "hostile", "link", &json!({"paths": paths}));
    let result = run.invoke_result();
    let artifacts = result["artifacts"].as_array().cloned().unwrap_or_default();
    let named: Vec<&str> = artifacts
        .iter()
        .filter_map(|a| a["path"].as_str())
        .collect();
    assert_eq!(named, ["inside.txt"], "{result:#}");
    assert!(!run.stdout.contains("outside-secret"), "{run:#?}");
}

/// Attack: `structuredContent` that violates the tool's pinned
/// `outputSchema`. The host validates it as it validates any module's
/// output: `invalid_output`, nothing of it passed on.
#[test]
fn structured_content_violating_the_pinned_output_schema_is_refused() {
    let home = server_home(&allow("hostile"));
    install_hostile(&home, "hostile", &[]).expect_code(0);
    let run = call(&home, "hostile", "bad_structured", &json!({}));
    let error = run.invoke_error();
    assert_eq!(error["kind"], "invalid_output", "{error:#}");
    assert!(!run.stdout.contains("\"five\""), "{run:#?}");
    assert_eq!(
        output(&call(&home, "hostile", "good_structured", &json!({}))),
        json!({"sum": 5})
    );
}

/// Attack: a server whose tool names collide once made provider-safe
/// (`get.time`, `get_time`: both `x__x_get_time`), so that one would be
/// called for the other. The install refuses, naming both; and a tool list
/// whose pages loop is refused, not followed forever.
#[test]
fn tool_names_that_collide_or_pages_that_loop_are_refused_at_install() {
    let home = server_home("");
    let run = install_hostile(&home, "collide", &["HOSTILE_LIST=collide"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("collide.get.time") && run.stderr.contains("collide.get_time"),
        "both names: {run:#?}"
    );
    assert!(!home.modules().join("collide").exists());

    let run = install_hostile(&home, "looping", &["HOSTILE_LIST=loop"]);
    run.expect_code(2);
    assert!(run.stderr.contains("loop"), "{run:#?}");
    assert!(!home.modules().join("looping").exists());
    home.assert_no_module_processes();
}
