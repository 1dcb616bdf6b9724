//! An MCP `CallToolResult` as a modhost invoke result.
//!
//! - `output` is the tool's `structuredContent` when it sent one (what its
//!   `outputSchema`, the capability's `output_schema`, describes), else
//!   `{"content": [...]}`, the content blocks as the server sent them.
//! - `text` is the text blocks joined, plus one line for each block that is
//!   not text (an image, audio, an embedded binary resource, a link), so a
//!   model reading the text learns they exist.
//! - a `resource_link` to a `file://` URI inside a root the call was
//!   granted becomes an artifact of that root (the host checks it lies
//!   there and shows it as a link to the file); any other link (another
//!   scheme or host, a path outside every granted root, one with `.`,
//!   `..`, an empty component or a control character, however encoded)
//!   stays a line of the text.
//! - `isError: true` is a failed call (`failed`), its text the message.

use modproto::{ArtifactRef, InvokeResult, ModuleErrorKind};
use serde_json::{Value, json};

use crate::error::{BridgeError, BridgeKind};
use crate::server::CallRoot;
use crate::session::{excerpt, path_of_file_uri};

/// The invoke result of a `tools/call` result, or the failure it reports.
pub(crate) fn map(result: &Value, roots: &[CallRoot]) -> Result<InvokeResult, BridgeError> {
    let content = match result.get("content") {
        None => Vec::new(),
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(other) => {
            return Err(BridgeError::new(
                BridgeKind::BadMessage,
                format!(
                    "the MCP server's tools/call result has a content that is not a list: {}",
                    excerpt(&other.to_string())
                ),
            )
            .with_remedy("report it to the server's author: content is a list of content blocks"));
        }
    };
    let mut lines = Vec::new();
    let mut artifacts = Vec::new();
    for block in &content {
        describe_block(block, roots, &mut lines, &mut artifacts);
    }
    let text = lines.join("\n");
    if result.get("isError") == Some(&Value::Bool(true)) {
        let message = if text.is_empty() {
            "the tool reported an error and said nothing more".to_owned()
        } else {
            text
        };
        return Err(BridgeError::protocol(ModuleErrorKind::Failed, message)
            .with_remedy("the tool ran and reported this error; change the arguments it names and call again"));
    }
    let output = match result.get("structuredContent") {
        Some(structured @ Value::Object(_)) => structured.clone(),
        Some(other) => {
            return Err(BridgeError::new(
                BridgeKind::BadMessage,
                format!(
                    "the MCP server's structuredContent is not an object: {}",
                    excerpt(&other.to_string())
                ),
            )
            .with_remedy("report it to the server's author: structuredContent is a JSON object"));
        }
        None => json!({ "content": content }),
    };
    let mut invoke = InvokeResult::new(output);
    if !text.is_empty() {
        invoke.text = Some(text);
    }
    invoke.artifacts = artifacts;
    Ok(invoke)
}

/// The text line(s) of one content block, and its artifact when it is a
/// link to a file in a granted root.
fn describe_block(
    block: &Value,
    roots: &[CallRoot],
    lines: &mut Vec<String>,
    artifacts: &mut Vec<ArtifactRef>,
) {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str);
    match str_of("type") {
        Some("text") => lines.push(str_of("text").unwrap_or_default().to_owned()),
        Some(kind @ ("image" | "audio")) => {
            let size = str_of("data").map_or(0, |d| d.len() / 4 * 3);
            lines.push(format!(
                "[{kind} {}, about {size} bytes, in the output's content]",
                str_of("mimeType").unwrap_or("of unknown type")
            ));
        }
        Some("resource_link") => {
            let uri = str_of("uri").unwrap_or_default();
            let name = str_of("name").unwrap_or(uri);
            match artifact_of(uri, block, roots) {
                Some(artifact) => artifacts.push(artifact),
                None => lines.push(format!("[resource {name}: {uri}]")),
            }
        }
        Some("resource") => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => lines.push(text.to_owned()),
                None => lines.push(format!(
                    "[embedded resource {uri}, {}, in the output's content]",
                    resource
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("binary")
                )),
            }
        }
        other => lines.push(format!(
            "[a content block of type {}, in the output's content]",
            other.unwrap_or("unknown")
        )),
    }
}

/// The artifact a `resource_link` names: a `file://` URI beneath a
/// granted root, as a clean relative path of that root.
fn artifact_of(uri: &str, block: &Value, roots: &[CallRoot]) -> Option<ArtifactRef> {
    let path = path_of_file_uri(uri)?;
    roots.iter().find_map(|root| {
        let base = root.root.path.trim_end_matches('/');
        let relative = path.strip_prefix(base)?.strip_prefix('/')?;
        let clean = !relative.is_empty()
            && relative
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
            && !relative.chars().any(char::is_control);
        clean.then(|| ArtifactRef {
            root: root.name.clone(),
            path: relative.to_owned(),
            media_type: block
                .get("mimeType")
                .and_then(Value::as_str)
                .map(str::to_owned),
            title: block
                .get("title")
                .or_else(|| block.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    })
}
