//! `tools.json`: the server's tool definitions as they were when the
//! operator installed it, and the comparison every call makes with what
//! the server lists now.
//!
//! Design decisions:
//!
//! - **Pinned with the bytes.** The file lies in the module's folder, so
//!   the host's pin (a digest of the whole tree) covers the definitions
//!   together with the server's code and the manifest: the tools an agent
//!   was shown, and the grants the operator gave them, are the ones that
//!   run.
//! - **Any difference refuses the call.** A server's tool list can change
//!   without its bytes changing (it reads a file, a clock, the network, a
//!   counter in its state). The bridge compares every definition, whole,
//!   before each `tools/call` (names as a set, each tool as a JSON value,
//!   so key order does not matter and everything else does: a changed
//!   description is a changed instruction to the model) and refuses with
//!   what changed, until the operator lists and pins the tools again.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The snapshot's file name in the module's folder.
pub(crate) const FILE: &str = "tools.json";

/// What `tools.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PinnedTools {
    /// The protocol revision the server spoke when it was listed.
    #[serde(rename = "protocolVersion")]
    pub(crate) protocol_version: String,
    /// The server's `serverInfo` from `initialize`.
    #[serde(rename = "serverInfo", default)]
    pub(crate) server_info: Value,
    /// The tools, as the server listed them.
    pub(crate) tools: Vec<Value>,
}

/// Why the snapshot cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PinnedError {
    #[error("could not read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a tool snapshot: {message}")]
    Invalid { path: String, message: String },
}

impl PinnedTools {
    /// Read the snapshot of the module in `folder`.
    pub(crate) fn load(folder: &Path) -> Result<PinnedTools, PinnedError> {
        let path = folder.join(FILE);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| PinnedError::Read {
            path: shown.clone(),
            source,
        })?;
        PinnedTools::parse(&text, &shown)
    }

    /// Parse a snapshot's `text` (read from `shown`, named in errors).
    pub(crate) fn parse(text: &str, shown: &str) -> Result<PinnedTools, PinnedError> {
        let invalid = |message: String| PinnedError::Invalid {
            path: shown.to_owned(),
            message,
        };
        let pinned: PinnedTools = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let mut seen = Vec::new();
        for tool in &pinned.tools {
            let name = tool_name(tool).ok_or_else(|| invalid("a tool has no name".into()))?;
            if seen.contains(&name) {
                return Err(invalid(format!("tool {name:?} is listed twice")));
            }
            seen.push(name);
        }
        Ok(pinned)
    }

    /// The tool names, in the server's order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools.iter().filter_map(tool_name).collect()
    }
}

/// A tool definition's `name`.
pub(crate) fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("name").and_then(Value::as_str)
}

/// How the server's list differs from the pinned one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ToolChanges {
    pub(crate) added: Vec<String>,
    pub(crate) removed: Vec<String>,
    pub(crate) changed: Vec<String>,
}

impl ToolChanges {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// One line per kind of change, for a refusal's problems.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (what, names) in [
            ("new, not pinned", &self.added),
            ("pinned, no longer listed", &self.removed),
            ("definition changed since it was pinned", &self.changed),
        ] {
            if !names.is_empty() {
                problems.push(format!("{what}: {}", names.join(", ")));
            }
        }
        problems
    }
}

/// Compare the `listed` tools with the `pinned` ones. A listed tool
/// without a name counts as added under an empty name.
pub(crate) fn compare(pinned: &[Value], listed: &[Value]) -> ToolChanges {
    let by_name = |tools: &[Value]| -> BTreeMap<String, Value> {
        tools
            .iter()
            .map(|t| (tool_name(t).unwrap_or_default().to_owned(), t.clone()))
            .collect()
    };
    let (pinned, listed) = (by_name(pinned), by_name(listed));
    let mut changes = ToolChanges::default();
    for (name, tool) in &listed {
        match pinned.get(name) {
            None => changes.added.push(name.clone()),
            Some(before) if before != tool => changes.changed.push(name.clone()),
            Some(_) => {}
        }
    }
    changes.removed = pinned
        .keys()
        .filter(|name| !listed.contains_key(*name))
        .cloned()
        .collect();
    changes
}
