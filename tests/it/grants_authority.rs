//! Authority is per capability: a call is granted exactly the roots its
//! capability names in `effects`, whatever else its module declares, and
//! every surface that describes a capability (`describe`, `tools`, MCP
//! annotations) says what the module then receives.
//!
//! The attacks come from `tests/fixtures/grants.rs` (native, confined by
//! landlock) and the `unnamed` guest (a component): both declare the
//! workspace at module level and read it from a capability that names no
//! root. Landlock is required here: a kernel without it fails these tests
//! instead of letting them pass unconfined.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Home, Layout};

const SECRET: &str = "workspace secret";

/// A home with the grants fixture installed (pinned) and a file in the
/// workspace its module declares; returns the home and that file.
fn grants_home() -> (Home, PathBuf) {
    let home = Home::new();
    home.install_binary(
        Path::new(env!("CARGO_BIN_EXE_fixture_grants")),
        "grants",
        Layout::Folder,
    );
    let secret = home.workspace().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    (home, secret)
}

/// The output of `grants.<verb>`, after checking the call answered.
#[track_caller]
fn call(home: &Home, verb: &str, input: &Value) -> Value {
    let run = home.invoke("grants", &format!("grants.{verb}"), input, &[]);
    let result = run.invoke_result();
    home.assert_no_module_processes();
    result["output"].clone()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|e| panic!("canonicalize {}: {e}", path.display()))
}

#[test]
fn a_capability_naming_no_root_cannot_read_the_workspace_its_module_declares() {
    let (home, secret) = grants_home();
    home.require_landlock();
    let output = call(&home, "peek", &json!({"path": secret}));
    assert_eq!(
        output["roots"],
        json!({}),
        "the module is told of no root: {output:#}"
    );
    let read = &output["read"];
    assert_eq!(read["succeeded"], false, "the read got through: {output:#}");
    assert_eq!(
        read["errno"], 13,
        "refused by the confinement (EACCES): {output:#}"
    );
    assert!(!output.to_string().contains(SECRET));
}

#[test]
fn a_capability_naming_the_workspace_in_reads_gets_it_read_only() {
    let (home, secret) = grants_home();
    home.require_landlock();
    let output = call(&home, "read", &json!({"path": secret}));
    let roots = output["roots"].as_object().expect("roots");
    assert_eq!(
        roots.keys().collect::<Vec<_>>(),
        ["workspace"],
        "exactly the root it names: {output:#}"
    );
    assert_eq!(roots["workspace"]["access"], "read");
    assert_eq!(
        canonical(Path::new(roots["workspace"]["path"].as_str().unwrap())),
        canonical(&home.workspace())
    );
    assert_eq!(output["read"]["got"], SECRET, "{output:#}");
    assert_eq!(output["write"]["succeeded"], false, "{output:#}");
    assert_eq!(output["write"]["errno"], 13, "{output:#}");
    assert!(!home.workspace().join("secret.txt.pwned").exists());
}

#[test]
fn a_component_capability_naming_no_root_gets_no_preopen() {
    let home = Home::new();
    home.install_component("unnamed");
    std::fs::write(home.workspace().join("secret.txt"), SECRET).unwrap();
    let run = home.invoke(
        "unnamed",
        "unnamed.run",
        &json!({"name": "secret.txt"}),
        &[],
    );
    let output = run.invoke_result()["output"].clone();
    assert_eq!(output["roots"], json!({}), "{output:#}");
    assert_eq!(output["preopen"]["succeeded"], false, "{output:#}");
    assert_eq!(output["told"]["succeeded"], false, "{output:#}");
    assert_eq!(
        output["lists_roots"], false,
        "nothing is preopened: {output:#}"
    );
    assert!(!output.to_string().contains(SECRET));
}

/// `(name, access, canonical path)` of each root in a `roots` object.
fn received(roots: &Value) -> Vec<(String, String, PathBuf)> {
    let mut list: Vec<_> = roots
        .as_object()
        .expect("roots object")
        .iter()
        .map(|(name, root)| {
            (
                name.clone(),
                root["access"].as_str().unwrap_or_default().to_owned(),
                canonical(Path::new(root["path"].as_str().unwrap_or_default())),
            )
        })
        .collect();
    list.sort();
    list
}

/// The same, from `describe --json`'s `grants.<capability>.roots`.
fn described(grants: &Value) -> Vec<(String, String, PathBuf)> {
    let mut list: Vec<_> = grants["roots"]
        .as_array()
        .expect("roots array")
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap_or_default().to_owned(),
                g["access"].as_str().unwrap_or_default().to_owned(),
                canonical(Path::new(g["path"].as_str().unwrap_or_default())),
            )
        })
        .collect();
    list.sort();
    list
}

#[test]
fn describe_tools_and_annotations_say_what_the_module_receives() {
    let (home, secret) = grants_home();
    let described_json = home
        .run(&["describe", "grants", "--json"])
        .expect_code(0)
        .json();
    let run = home.run(&["tools", "--format", "mcp"]);
    run.expect_code(0);
    let tools = run.json();
    let inputs = [
        ("peek", json!({"path": secret})),
        ("read", json!({"path": secret})),
        ("flood", json!({"links": [], "bytes": 1})),
    ];
    for (verb, input) in inputs {
        let capability = format!("grants.{verb}");
        let roots = received(&call(&home, verb, &input)["roots"]);
        assert_eq!(
            described(&described_json["grants"][&capability]),
            roots,
            "describe disagrees with what {capability} received: {described_json:#}"
        );
        let tool = tools
            .as_array()
            .and_then(|t| {
                t.iter()
                    .find(|t| t["name"] == format!("grants__grants_{verb}"))
            })
            .unwrap_or_else(|| panic!("no tool for {capability}: {tools:#}"));
        let description = tool["description"].as_str().unwrap_or_default();
        if roots.is_empty() {
            assert!(
                description.contains("- reads nothing beyond its input"),
                "{description}"
            );
        } else {
            for (name, _, _) in &roots {
                assert!(
                    description.contains(&format!("({name})")),
                    "{capability} receives {name} but its description does not say so: {description}"
                );
            }
        }
        let writes = roots.iter().any(|(_, access, _)| access == "read-write");
        assert_eq!(
            tool["annotations"]["readOnlyHint"],
            json!(!writes),
            "{capability}: {tool:#}"
        );
        assert_eq!(
            description.contains("- writes nothing"),
            !writes,
            "{description}"
        );
    }
    // The declared roots no capability asked for were never handed out.
    let peek = received(&call(&home, "peek", &json!({"path": secret}))["roots"]);
    assert!(peek.is_empty());
}
