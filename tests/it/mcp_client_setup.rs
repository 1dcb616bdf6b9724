//! The README's "Use from an MCP client" section, taken at its word: each
//! configuration snippet (the `claude mcp add` line and every JSON config)
//! is parsed out of README.md, its placeholders pointed at a test home and
//! workspace, and the command it names is started through a real MCP client
//! (the Python `mcp` package) from `/`, as clients start servers. The
//! client must list the files tools and list the configured workspace, so a
//! snippet that forgets the home or the workspace fails here.
//!
//! Never skips: a machine without the Python `mcp` 1.x venv fails with the
//! command that installs it (`tests/setup`, part of the README's test command).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Home, binaries};

use crate::mcp::{INSTALL, python};

/// Start the server a spec describes, list its tools, list the workspace.
const CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

spec = json.loads(sys.argv[1])

async def main():
    params = StdioServerParameters(command=spec["command"], args=spec["args"], env=spec["env"], cwd="/")
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 60)
            listed = await asyncio.wait_for(session.list_tools(), 60)
            result = await asyncio.wait_for(session.call_tool("files__files_list", {}), 120)
            texts = [c.text for c in result.content if getattr(c, "text", None)]
            print(json.dumps({"tools": [t.name for t in listed.tools], "is_error": result.isError,
                              "structured": result.structuredContent, "text": texts}))

asyncio.run(main())
"#;

/// One server configuration as a client would run it.
#[derive(Debug)]
struct ServerSpec {
    label: String,
    command: String,
    args: Vec<String>,
    env: serde_json::Map<String, Value>,
}

/// The README's section, from its heading to the next `## `.
fn section() -> String {
    let readme = crate::support::tests_dir().join("../README.md");
    let text = std::fs::read_to_string(&readme).expect("read README.md");
    let start = text
        .find("## Use from an MCP client")
        .expect("README.md has a \"Use from an MCP client\" section");
    let rest = &text[start + 3..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// The fenced blocks of `language` in `text`.
fn blocks(text: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}\n");
    text.split(&fence)
        .skip(1)
        .map(|b| b[..b.find("```").expect("a closed fence")].to_owned())
        .collect()
}

/// Point the README's placeholders at the test's home and workspace.
fn substitute(text: &str, home: &Path, workspace: &Path) -> String {
    let home = home.display().to_string();
    let workspace = workspace.display().to_string();
    text.replace("${userHome}/.local/share/modhost", &home)
        .replace("$HOME/.local/share/modhost", &home)
        .replace("/home/you/.local/share/modhost", &home)
        .replace("${workspaceFolder}", &workspace)
        .replace("/home/you/project", &workspace)
        .replace("$PWD", &workspace)
}

/// Words of a shell line, with double quotes removed (the README's line
/// quotes only whole words).
fn words(line: &str) -> Vec<String> {
    line.split_whitespace()
        .map(|w| w.replace('"', ""))
        .collect()
}

/// `claude mcp add NAME -e K=V ... -- COMMAND ARGS...`.
fn claude_code(line: &str) -> ServerSpec {
    let words = words(line);
    assert_eq!(&words[..3], ["claude", "mcp", "add"], "{line}");
    let split = words
        .iter()
        .position(|w| w == "--")
        .expect("a `--` before the command");
    let mut env = serde_json::Map::new();
    let mut options = words[4..split].iter();
    while let Some(option) = options.next() {
        assert_eq!(option, "-e", "an option the test does not know: {line}");
        let pair = options.next().expect("-e KEY=VALUE");
        let (key, value) = pair.split_once('=').expect("KEY=VALUE");
        env.insert(key.to_owned(), json!(value));
    }
    ServerSpec {
        label: "Claude Code".into(),
        command: words[split + 1].clone(),
        args: words[split + 2..].to_vec(),
        env,
    }
}

/// A JSON config: `mcpServers.modhost` (Claude Desktop, Cursor) or
/// `servers.modhost` (VS Code).
fn json_config(text: &str) -> ServerSpec {
    let config: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("a README JSON snippet does not parse: {e}\n{text}"));
    let (label, server) = match (config.get("mcpServers"), config.get("servers")) {
        (Some(servers), None) => ("mcpServers", &servers["modhost"]),
        (None, Some(servers)) => {
            assert_eq!(servers["modhost"]["type"], "stdio", "{text}");
            ("servers (VS Code)", &servers["modhost"])
        }
        _ => panic!("neither mcpServers nor servers: {text}"),
    };
    ServerSpec {
        label: label.into(),
        command: server["command"].as_str().expect("a command").to_owned(),
        args: server["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| a.as_str().expect("string args").to_owned())
            .collect(),
        env: server["env"].as_object().cloned().unwrap_or_default(),
    }
}

/// Run the client against `spec`; its JSON report.
fn drive(spec: &ServerSpec) -> Value {
    let bin_dir = binaries()
        .modhost
        .parent()
        .expect("the binary's folder")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let request = json!({"command": spec.command, "args": spec.args, "env": spec.env});
    let output = Command::new(python())
        .args(["-c", CLIENT, &request.to_string()])
        .env("PATH", path)
        .env_remove("MODHOST_HOME")
        .env_remove("MODHOST_WORKSPACE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("the Python mcp 1.x venv could not be run ({e}); install it with: {INSTALL}")
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'mcp'"),
        "the Python `mcp` package is needed; install it with: {INSTALL}"
    );
    assert!(
        output.status.success(),
        "{}: the client failed with {spec:?}:\n{stderr}",
        spec.label
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no report ({e}): {}",
            spec.label,
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn every_client_setup_in_the_readme_starts_a_working_server_on_the_configured_workspace() {
    let home = Home::new();
    home.install_files();
    std::fs::write(home.workspace().join("readme-marker.txt"), "x").expect("marker");
    let text = substitute(&section(), &home.path(), &home.workspace());

    let mut specs = Vec::new();
    for block in blocks(&text, "sh") {
        for line in block.lines().filter(|l| l.starts_with("claude mcp add")) {
            specs.push(claude_code(line));
        }
    }
    let configs = blocks(&text, "json");
    assert!(
        configs.len() >= 3,
        "Claude Desktop, Cursor and VS Code: {configs:?}"
    );
    specs.extend(configs.iter().map(|c| json_config(c)));
    assert!(specs.iter().any(|s| s.label == "Claude Code"), "{specs:?}");
    assert!(
        section().contains("\"MODHOST_WORKSPACE\": \"${workspaceFolder}\""),
        "VS Code's config takes the opened folder as the workspace"
    );

    for spec in &specs {
        assert_eq!(spec.command, "modhost", "{spec:?}");
        assert!(
            spec.env.contains_key("MODHOST_HOME"),
            "{}: MODHOST_HOME is not set",
            spec.label
        );
        assert!(
            spec.env.contains_key("MODHOST_WORKSPACE")
                || spec.args.iter().any(|a| a == "--workspace"),
            "{}: no workspace is configured",
            spec.label
        );
        let report = drive(spec);
        let tools: Vec<&str> = report["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            tools.contains(&"files__files_list"),
            "{}: the configured home's tools are not listed: {report:#}",
            spec.label
        );
        assert_eq!(report["is_error"], false, "{}: {report:#}", spec.label);
        assert!(
            report.to_string().contains("readme-marker.txt"),
            "{}: the configured workspace was not the one listed: {report:#}",
            spec.label
        );
    }
}
