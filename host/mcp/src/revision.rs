//! What each MCP revision this server speaks has, as one table.
//!
//! Design decisions:
//!
//! - **One row per revision, consulted where results are built.** Every
//!   result is first built whole (every field modhost can say), then cut to
//!   the row's field lists by [`keep_fields`]; the server never asks "is this
//!   revision older than…" anywhere else. A field the row does not name is
//!   never sent, so an older client never receives a field its revision does
//!   not define. The lists were read off each revision's `schema.ts`
//!   (`Tool`, `ToolAnnotations`, `Implementation`, `CallToolResult`,
//!   `ResourceLink`/`Resource`, `ContentBlock`), not off summaries.
//! - **Two eras.** The handshake revisions (2024-11-05 … 2025-11-25) are
//!   chosen once per connection by `initialize`; the stateless one
//!   (2026-07-28) is named in every request's `_meta`. A dual-era server
//!   selects from how the client opens (the 2026-07-28 versioning page):
//!   a request carrying `io.modelcontextprotocol/protocolVersion` is served
//!   statelessly, `initialize` starts a handshake session.
//! - **What the server advertises.** `server/discover` and the
//!   unsupported-version error list every version (the spec's example of a
//!   dual-era server does the same); per-request `_meta` must name a
//!   stateless one, and the error's message says that a handshake version is
//!   reached through `initialize`.

use serde_json::{Map, Value};

/// How a revision is entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize` once per connection, then `notifications/initialized`.
    Handshake,
    /// Every request carries its version and capabilities in `_meta`.
    Stateless,
}

/// How the server asks the user a question (elicitation) in a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AskUser {
    /// The revision has no elicitation.
    Never,
    /// A server-to-client `elicitation/create` request; `mode` says whether
    /// its params carry `"mode": "form"` (defined from 2025-11-25).
    Request { mode: bool },
    /// An `InputRequiredResult` (`resultType: "input_required"`) the client
    /// answers by retrying the call with `inputResponses` (multi round-trip).
    InputRequired,
}

/// How the server announces that its tool list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListChanges {
    /// `notifications/tools/list_changed` after the handshake, when the
    /// server declared `listChanged: true`.
    Notification,
    /// `notifications/tools/list_changed` on a `subscriptions/listen` stream
    /// that asked for `toolsListChanged`, tagged with its subscription id.
    Subscription,
}

/// What one revision defines, as far as this server produces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Revision {
    pub version: &'static str,
    pub era: Era,
    /// `Tool` members.
    pub tool: &'static [&'static str],
    /// `ToolAnnotations` members (empty: the revision has none).
    pub tool_annotations: &'static [&'static str],
    /// `Implementation` (`serverInfo`) members.
    pub implementation: &'static [&'static str],
    /// `CallToolResult` members.
    pub call_result: &'static [&'static str],
    /// The `ContentBlock` types a call result may carry.
    pub content_types: &'static [&'static str],
    /// `ResourceLink` members (used only when `content_types` has it).
    pub resource_link: &'static [&'static str],
    /// `notifications/progress` params members.
    pub progress: &'static [&'static str],
    /// Every result carries `resultType` and `_meta` with the server's identity.
    pub result_type: bool,
    /// List results carry `ttlMs` and `cacheScope` (`CacheableResult`).
    pub cache_hints: bool,
    /// `ping` exists.
    pub ping: bool,
    /// The server may ask `roots/list` (as a server-to-client request).
    pub roots_request: bool,
    pub ask_user: AskUser,
    pub list_changes: ListChanges,
}

const ANNOTATIONS: &[&str] = &[
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Every revision this server speaks, newest first.
pub(crate) const REVISIONS: &[Revision] = &[
    Revision {
        version: "2026-07-28",
        era: Era::Stateless,
        tool: &[
            "name",
            "title",
            "icons",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
            "_meta",
        ],
        tool_annotations: ANNOTATIONS,
        implementation: &[
            "name",
            "title",
            "icons",
            "version",
            "description",
            "websiteUrl",
        ],
        call_result: &[
            "resultType",
            "content",
            "structuredContent",
            "isError",
            "_meta",
        ],
        content_types: &["text", "resource_link"],
        resource_link: &[
            "type",
            "uri",
            "name",
            "title",
            "icons",
            "description",
            "mimeType",
            "annotations",
            "size",
            "_meta",
        ],
        progress: &["progressToken", "progress", "total", "message"],
        result_type: true,
        cache_hints: true,
        ping: false,
        roots_request: false,
        ask_user: AskUser::InputRequired,
        list_changes: ListChanges::Subscription,
    },
    Revision {
        version: "2025-11-25",
        era: Era::Handshake,
        tool: &[
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
        tool_annotations: ANNOTATIONS,
        implementation: &[
            "name",
            "title",
            "icons",
            "version",
            "description",
            "websiteUrl",
        ],
        call_result: &["content", "structuredContent", "isError", "_meta"],
        content_types: &["text", "resource_link"],
        resource_link: &[
            "type",
            "uri",
            "name",
            "title",
            "icons",
            "description",
            "mimeType",
            "annotations",
            "size",
            "_meta",
        ],
        progress: &["progressToken", "progress", "total", "message"],
        result_type: false,
        cache_hints: false,
        ping: true,
        roots_request: true,
        ask_user: AskUser::Request { mode: true },
        list_changes: ListChanges::Notification,
    },
    Revision {
        version: "2025-06-18",
        era: Era::Handshake,
        tool: &[
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
            "_meta",
        ],
        tool_annotations: ANNOTATIONS,
        implementation: &["name", "title", "version"],
        call_result: &["content", "structuredContent", "isError", "_meta"],
        content_types: &["text", "resource_link"],
        resource_link: &[
            "type",
            "uri",
            "name",
            "title",
            "description",
            "mimeType",
            "annotations",
            "size",
            "_meta",
        ],
        progress: &["progressToken", "progress", "total", "message"],
        result_type: false,
        cache_hints: false,
        ping: true,
        roots_request: true,
        ask_user: AskUser::Request { mode: false },
        list_changes: ListChanges::Notification,
    },
    Revision {
        version: "2025-03-26",
        era: Era::Handshake,
        tool: &["name", "description", "inputSchema", "annotations"],
        tool_annotations: ANNOTATIONS,
        implementation: &["name", "version"],
        call_result: &["content", "isError", "_meta"],
        content_types: &["text"],
        resource_link: &[],
        progress: &["progressToken", "progress", "total", "message"],
        result_type: false,
        cache_hints: false,
        ping: true,
        roots_request: true,
        ask_user: AskUser::Never,
        list_changes: ListChanges::Notification,
    },
    Revision {
        version: "2024-11-05",
        era: Era::Handshake,
        tool: &["name", "description", "inputSchema"],
        tool_annotations: &[],
        implementation: &["name", "version"],
        call_result: &["content", "isError", "_meta"],
        content_types: &["text"],
        resource_link: &[],
        progress: &["progressToken", "progress", "total"],
        result_type: false,
        cache_hints: false,
        ping: true,
        roots_request: true,
        ask_user: AskUser::Never,
        list_changes: ListChanges::Notification,
    },
];

/// The row of `version`, if this server speaks it.
pub(crate) fn find(version: &str) -> Option<&'static Revision> {
    REVISIONS.iter().find(|r| r.version == version)
}

/// Every version this server speaks, newest first.
pub(crate) fn all_versions() -> Vec<&'static str> {
    REVISIONS.iter().map(|r| r.version).collect()
}

/// The newest handshake revision: what `initialize` falls back to, and how
/// a client that sends requests without `initialize` or `_meta` is served.
pub(crate) fn latest_handshake() -> &'static Revision {
    REVISIONS
        .iter()
        .find(|r| r.era == Era::Handshake)
        .expect("a handshake revision")
}

/// The revision to answer `initialize` with: the client's when it is a
/// handshake revision this server speaks, otherwise the newest handshake
/// revision (the client then decides whether it can go on), as the
/// lifecycle spec of every handshake revision prescribes.
pub(crate) fn negotiate(requested: Option<&str>) -> &'static Revision {
    requested
        .and_then(find)
        .filter(|r| r.era == Era::Handshake)
        .unwrap_or_else(latest_handshake)
}

/// `value` (an object) with only the members in `fields`; anything else is
/// returned as it is.
pub(crate) fn keep_fields(value: Value, fields: &[&str]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| fields.contains(&k.as_str()))
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}

impl Revision {
    /// A `Tool` as this revision defines it.
    pub(crate) fn tool(&self, tool: Value) -> Value {
        let mut tool = keep_fields(tool, self.tool);
        if let Some(annotations) = tool.get_mut("annotations") {
            *annotations = keep_fields(annotations.take(), self.tool_annotations);
        }
        tool
    }

    /// Whether a call result may carry a content block of this type.
    pub(crate) fn has_content(&self, kind: &str) -> bool {
        self.content_types.contains(&kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn initialize_answers_the_clients_handshake_version_or_the_newest_handshake_one() {
        for v in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
            assert_eq!(negotiate(Some(v)).version, v);
        }
        // The stateless revision is not entered through a handshake.
        assert_eq!(negotiate(Some("2026-07-28")).version, "2025-11-25");
        assert_eq!(negotiate(Some("2099-01-01")).version, "2025-11-25");
        assert_eq!(negotiate(None).version, "2025-11-25");
    }

    #[test]
    fn an_old_revision_gets_no_field_it_does_not_define() {
        let tool = json!({"name": "t", "title": "T", "description": "d",
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "annotations": {"title": "T", "readOnlyHint": true, "futureHint": 1}, "_meta": {}});
        assert_eq!(
            find("2024-11-05").unwrap().tool(tool.clone()),
            json!({"name": "t", "description": "d", "inputSchema": {"type": "object"}})
        );
        assert_eq!(
            find("2025-03-26").unwrap().tool(tool.clone()),
            json!({"name": "t", "description": "d", "inputSchema": {"type": "object"},
                   "annotations": {"title": "T", "readOnlyHint": true}})
        );
        let newest = find("2025-06-18").unwrap().tool(tool);
        assert_eq!(newest["title"], json!("T"));
        assert_eq!(newest["outputSchema"], json!({"type": "object"}));
        assert!(newest["annotations"].get("futureHint").is_none());
    }

    #[test]
    fn every_revision_is_listed_once_newest_first() {
        let versions = all_versions();
        let mut sorted = versions.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.dedup();
        assert_eq!(versions, sorted);
        assert_eq!(
            REVISIONS.iter().filter(|r| r.era == Era::Stateless).count(),
            1
        );
    }
}
