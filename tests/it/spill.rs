//! The host never writes where a module can: a tool result over the size cap
//! is spilled into the host's own `<home>/spill/`, never into a module's
//! writable root, and no symlink on the way is followed.
//!
//! The attack (`tests/fixtures/grants.rs`, `grants.flood`): a module with a
//! writable artifacts root plants `modhost-output` there (where the host
//! used to spill) as a symlink to a folder outside every grant, tries the
//! same at the spill folder, and answers with a result far over the cap,
//! through `modhost mcp` (the surface that cuts and spills).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Home, Layout};

/// How long one MCP answer may take before the test calls the server hung.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// Run `modhost mcp`, call the tool `name` with `arguments`, and return the
/// `tools/call` result.
fn mcp_call(home: &Home, name: &str, arguments: &Value) -> Value {
    let mut server =
        McpStdio::spawn(home, Some(&home.workspace()), |_| {}).answering_within(ANSWER_WITHIN);
    server.initialize(&json!({}));
    let response = server.request("tools/call", &json!({"name": name, "arguments": arguments}));
    server.finish();
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
