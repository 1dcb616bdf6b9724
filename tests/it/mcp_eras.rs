//! The real `modhost mcp` in every MCP revision it speaks: a client pinned to 2026-07-28 connects without a handshake, and a
//! client of each handshake revision gets that revision, with tool lists
//! and call results that carry no field its schema does not define. The
//! tools here are the host's own exports (`tools::export`), so a field added
//! there later is checked against every revision too.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home};

/// The `Tool` members each handshake revision's schema.ts defines.
const TOOL_FIELDS: [(&str, &[&str]); 4] = [
    (
        "2025-11-25",
        &[
            "name",
            "title",
            "icons",
            "description",
            "inputSchema",
            "execution",
            "outputSchema",
            "annotations",
            "_meta",
        ],
    ),
    (
        "2025-06-18",
        &[
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
            "_meta",
        ],
    ),
    (
        "2025-03-26",
        &["name", "description", "inputSchema", "annotations"],
    ),
    ("2024-11-05", &["name", "description", "inputSchema"]),
];

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn home_with_echo() -> Home {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home
}

fn echo_tool(tools: &Value) -> Value {
    tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("echo__") && n.ends_with("_echo"))
        })
        .unwrap_or_else(|| panic!("no echo tool in {tools}"))
        .clone()
}

#[test]
fn each_handshake_revision_gets_its_own_version_and_only_its_fields() {
    let home = home_with_echo();
    for (version, fields) in TOOL_FIELDS {
        let allowed: BTreeSet<String> = fields.iter().map(|f| (*f).to_owned()).collect();
        let mut server = McpStdio::spawn(&home, Some(&home.workspace()), |_| {});
        let init = server.result(
            "initialize",
            &json!({"protocolVersion": version, "capabilities": {},
                    "clientInfo": {"name": "it", "version": "0"}}),
        );
        assert_eq!(init["protocolVersion"], json!(version));
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let listed = server.result("tools/list", &json!({}));
        assert_eq!(keys(&listed), BTreeSet::from(["tools".to_owned()]));
        for tool in listed["tools"].as_array().expect("tools") {
            let extra: Vec<String> = keys(tool).difference(&allowed).cloned().collect();
            assert!(
                extra.is_empty(),
                "{version} does not define {extra:?}: {tool}"
            );
        }
        let tool = echo_tool(&listed["tools"]);
        let called = server.result(
            "tools/call",
            &json!({"name": tool["name"], "arguments": {}}),
        );
        assert_eq!(called["isError"], json!(false), "{called}");
        let has_structure = called.get("structuredContent").is_some();
        assert_eq!(
            has_structure,
            !matches!(version, "2024-11-05" | "2025-03-26"),
            "{version}: {called}"
        );
        assert!(called.get("resultType").is_none(), "{version}: {called}");
        server.finish();
    }
}

#[test]
fn a_client_pinned_to_2026_07_28_connects_without_a_handshake() {
    let home = home_with_echo();
    let mut server = McpStdio::spawn(&home, Some(&home.workspace()), |_| {});
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "0"}});
    let discover = server.result("server/discover", &json!({"_meta": meta}));
    assert_eq!(discover["resultType"], json!("complete"), "{discover}");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .expect("versions")
            .contains(&json!("2026-07-28"))
    );
    assert!(discover["ttlMs"].is_u64() && discover["cacheScope"].is_string());
    let listed = server.result("tools/list", &json!({"_meta": meta}));
    assert_eq!(listed["resultType"], json!("complete"));
    assert!(listed["ttlMs"].is_u64(), "{listed}");
    let tool = echo_tool(&listed["tools"]);
    let called = server.result(
        "tools/call",
        &json!({"name": tool["name"], "arguments": {}, "_meta": meta}),
    );
    assert_eq!(called["resultType"], json!("complete"));
    assert_eq!(called["isError"], json!(false), "{called}");
    // ping is gone in this revision; an unknown version names what is spoken.
    let ping = server.request("ping", &json!({"_meta": meta}));
    assert_eq!(ping["error"]["code"], json!(-32601), "{ping}");
    let unknown = server.request(
        "tools/list",
        &json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01",
                          "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    assert_eq!(unknown["error"]["code"], json!(-32022), "{unknown}");
    assert_eq!(
        unknown["error"]["data"]["supported"][0],
        json!("2026-07-28")
    );
    server.finish();
}
