//! MCP message shapes the server produces: version negotiation, the
//! `initialize` result, and `tools/call` results.

use serde_json::{Map, Value, json};

use crate::tools::{ToolArtifact, ToolOutcome};

/// The revisions this server speaks, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];

/// The newest revision this server speaks.
pub const LATEST_VERSION: &str = SUPPORTED_VERSIONS[0];

/// The revision to answer `initialize` with: the client's when this server
/// speaks it, otherwise the newest this server speaks (the client then
/// decides whether it can go on), as the lifecycle spec prescribes.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| SUPPORTED_VERSIONS.iter().copied().find(|v| *v == r))
        .unwrap_or(LATEST_VERSION)
}

/// The `initialize` result.
pub fn initialize_result(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {
            "name": "modhost",
            "title": "modhost",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": "Each tool is a capability of a modhost module; its description ends with what it \
                         reads, writes, runs and costs. Call modhost__knowledge with a module id to read \
                         the guides that module ships."
    })
}

/// The `tools/call` result for an outcome: the text (with its `@artifact`
/// lines), a `resource_link` per artifact with a host file, and
/// `structuredContent` when the output is an object.
pub fn call_result(outcome: &ToolOutcome) -> Value {
    let mut content = vec![json!({"type": "text", "text": outcome.text})];
    content.extend(outcome.artifacts.iter().filter_map(resource_link));
    let mut result = Map::new();
    result.insert("content".into(), Value::Array(content));
    if let Some(structured @ Value::Object(_)) = &outcome.structured {
        result.insert("structuredContent".into(), structured.clone());
    }
    result.insert("isError".into(), json!(outcome.is_error));
    Value::Object(result)
}

fn resource_link(artifact: &ToolArtifact) -> Option<Value> {
    let file = artifact.file.as_ref()?;
    let path = file.to_str()?;
    let mut link = json!({
        "type": "resource_link",
        "uri": format!("file://{}", percent_encode_path(path)),
        "name": artifact.artifact.path,
    });
    if let Some(t) = &artifact.artifact.title {
        link["title"] = json!(t);
    }
    if let Some(m) = &artifact.artifact.media_type {
        link["mimeType"] = json!(m);
    }
    Some(link)
}

/// Percent-encode everything in an absolute path but unreserved characters and `/`.
fn percent_encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use modproto::ArtifactRef;

    #[test]
    fn negotiation_answers_the_clients_version_or_the_latest() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2025-11-25")), "2025-11-25");
        assert_eq!(negotiate(Some("2024-11-05")), LATEST_VERSION);
        assert_eq!(negotiate(Some("2099-01-01")), LATEST_VERSION);
        assert_eq!(negotiate(None), LATEST_VERSION);
    }

    #[test]
    fn call_results_carry_text_structure_and_links() {
        let outcome = ToolOutcome {
            is_error: false,
            text: "{}\n@artifact {...}".into(),
            structured: Some(json!({"n": 1})),
            artifacts: vec![ToolArtifact {
                module: "m".into(),
                artifact: ArtifactRef {
                    root: "out".into(),
                    path: "my file.txt".into(),
                    media_type: Some("text/plain".into()),
                    title: None,
                },
                file: Some("/h/artifacts/m/my file.txt".into()),
            }],
        };
        assert_eq!(
            call_result(&outcome),
            json!({
                "content": [
                    {"type": "text", "text": "{}\n@artifact {...}"},
                    {"type": "resource_link", "uri": "file:///h/artifacts/m/my%20file.txt",
                     "name": "my file.txt", "mimeType": "text/plain"}
                ],
                "structuredContent": {"n": 1},
                "isError": false
            })
        );
        let failed = ToolOutcome::failure("boom");
        assert_eq!(
            call_result(&failed),
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true})
        );
        let array = ToolOutcome {
            structured: Some(json!([1])),
            ..ToolOutcome::failure("x")
        };
        assert!(call_result(&array).get("structuredContent").is_none());
    }
}
