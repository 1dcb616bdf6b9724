//! The host never writes where a module can: a tool result over the size cap
//! is spilled into the host's own `<home>/spill/`, never into a module's
//! writable root, and no symlink on the way is followed.
//!
//! The attack (`tests/fixtures/grants.rs`, `grants.flood`): a module with a
//! writable artifacts root plants `modhost-output` there (where the host
//! used to spill) as a symlink to a folder outside every grant, tries the
//! same at the spill folder, and answers with a result far over the cap,
//! through `modhost mcp` (the surface that cuts and spills).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Home, Layout, binaries};

/// How long one MCP answer may take before the test calls the server hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// Run `modhost mcp`, call the tool `name` with `arguments`, and return the
/// `tools/call` result.
fn mcp_call(home: &Home, name: &str, arguments: &Value) -> Value {
    let mut child = Command::new(&binaries().modhost)
        .arg("--home")
        .arg(home.path())
        .arg("--workspace")
        .arg(home.workspace())
        .arg("mcp")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn modhost mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("write to modhost mcp");
        stdin.flush().expect("flush");
    };
    let answer = |id: u64| loop {
        let line = received
            .recv_timeout(ANSWER_WITHIN)
            .unwrap_or_else(|e| panic!("modhost mcp gave no answer to request {id}: {e}"));
        let message: Value = serde_json::from_str(&line).expect("a JSON line");
        if message["id"] == id {
            break message;
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "spill-test", "version": "0"}}}));
    answer(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}));
    let response = answer(2);
    drop(stdin);
    let status = child.wait().expect("wait for modhost mcp");
    assert!(status.success(), "modhost mcp exited with {status}");
    response["result"].clone()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect()
}

#[test]
fn a_symlinked_output_folder_does_not_redirect_the_hosts_spill() {
    let home = Home::new();
    home.install_binary(
        Path::new(env!("CARGO_BIN_EXE_fixture_grants")),
        "grants",
        Layout::Folder,
    );
    let outside = home.outside().join("redirected");
    std::fs::create_dir_all(&outside).unwrap();
    let old_spill = home.path().join("artifacts/grants/modhost-output");
    let bytes = 200_000;
    let arguments = json!({
        "links": [
            {"at": old_spill, "to": outside},
            {"at": home.path().join("spill"), "to": outside},
            {"at": home.path().join("spill/grants"), "to": outside},
        ],
        "bytes": bytes,
    });
    let result = mcp_call(&home, "grants__grants_flood", &arguments);
    assert_eq!(result["isError"], false, "{result:#}");

    // The attack was real: the module could plant the old folder's symlink,
    // but could not reach the host's spill folder.
    let planted = &result["structuredContent"]["planted"];
    assert_eq!(planted[0]["result"]["succeeded"], true, "{planted:#}");
    assert!(
        std::fs::symlink_metadata(&old_spill)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(planted[1]["result"]["succeeded"], false, "{planted:#}");
    assert_eq!(planted[2]["result"]["succeeded"], false, "{planted:#}");

    assert!(
        entries(&outside).is_empty(),
        "the host wrote through the module's symlink: {:?}",
        entries(&outside)
    );

    // The full output is readable where the result says.
    let text = result["content"][0]["text"].as_str().expect("text content");
    let artifact: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("@artifact "))
        .map(|l| serde_json::from_str(l).expect("artifact JSON"))
        .unwrap_or_else(|| panic!("no artifact line in {text}"));
    let file = PathBuf::from(artifact["file"].as_str().expect("artifact file"));
    assert!(
        text.contains(&format!("the full output is saved at {}", file.display())),
        "{text}"
    );
    let spill = home.path().join("spill").canonicalize().unwrap();
    assert!(
        file.canonicalize().unwrap().starts_with(&spill),
        "{} is not in the host's spill folder",
        file.display()
    );
    assert!(
        !std::fs::symlink_metadata(home.path().join("spill"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert_eq!(saved.len(), bytes);
    assert!(saved.bytes().all(|b| b == b'm'));
    let link = result["content"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "resource_link"))
        .unwrap_or_else(|| panic!("no resource_link: {result:#}"));
    assert_eq!(
        link["uri"].as_str().unwrap_or_default(),
        format!("file://{}", file.display())
    );
}
