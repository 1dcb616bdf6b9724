//! MCP message shapes the server produces, each built whole and cut to
//! the revision's own fields ([`super::revision`]): the `initialize` and
//! `server/discover` results, tool lists, `tools/call` results, the
//! multi-round-trip `input_required` result, and the stateless era's errors.

use modproto::{ErrorCode, ErrorData, RpcError};
use serde_json::{Map, Value, json};

use super::lockdown::META_LOCKDOWN;
use super::revision::{self, Revision, keep_fields};
use modhost::tools::{Lockdown, ToolArtifact, ToolOutcome};

/// The per-request `_meta` key naming the revision (2026-07-28).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The per-request `_meta` key carrying the client's capabilities (2026-07-28).
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The result `_meta` key identifying the server (2026-07-28).
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The result `_meta` key carrying the hosts a call contacted and those
/// its egress proxy refused (`{"contacted": [...], "refused": [{"host",
/// "reason"}]}`).
pub(crate) const META_NETWORK: &str = "dev.modhost/network";
/// The notification `_meta` key naming a `subscriptions/listen` stream.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// 2026-07-28 `MissingRequiredClientCapabilityError`.
pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28 `UnsupportedProtocolVersionError`.
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// How long (ms) a client may cache a list that never changes while the
/// server runs: an hour.
pub(crate) const TTL_MS_FIXED: u64 = 3_600_000;
/// How long (ms) a client may cache a list that changes with the operator's
/// installs and edits: ten seconds (a client that wants changes at once
/// subscribes with `subscriptions/listen`).
pub(crate) const TTL_MS_LIVE: u64 = 10_000;

const INSTRUCTIONS: &str = "Each tool is a capability of a modhost module; its description ends with what it \
                            reads, writes, runs and costs. Call modhost__knowledge with a module id to read \
                            the guides that module ships.";

/// The server's `Implementation` in `revision`'s shape.
pub(crate) fn server_info(revision: &Revision) -> Value {
    keep_fields(
        json!({
            "name": "modhost",
            "title": "modhost",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A plugin host for AI agents: each tool is a confined module capability.",
        }),
        revision.implementation,
    )
}

/// The server's capabilities: tools, and whether their list may change.
fn capabilities(list_changed: bool) -> Value {
    json!({"tools": {"listChanged": list_changed}})
}

/// `result` as `revision` requires every result: in the stateless era with
/// `resultType` (`complete` unless set) and the server's identity in `_meta`.
pub(crate) fn stamp(revision: &Revision, result: Value) -> Value {
    let Value::Object(mut map) = result else {
        return result;
    };
    if revision.result_type {
        map.entry("resultType").or_insert(json!("complete"));
        let meta = map.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(META_SERVER_INFO.into(), server_info(revision));
        }
    }
    Value::Object(map)
}

/// `result` with the cache hints of a list in `revision` (when it has them).
fn cacheable(revision: &Revision, mut result: Value, ttl_ms: u64) -> Value {
    if revision.cache_hints {
        result["ttlMs"] = json!(ttl_ms);
        // The list depends on this user's configuration: never shared.
        result["cacheScope"] = json!("private");
    }
    stamp(revision, result)
}

/// The `initialize` result (handshake revisions).
pub(crate) fn initialize_result(revision: &Revision, list_changed: bool) -> Value {
    json!({
        "protocolVersion": revision.version,
        "capabilities": capabilities(list_changed),
        "serverInfo": server_info(revision),
        "instructions": INSTRUCTIONS,
    })
}

/// The `server/discover` result (stateless revision): every version this
/// server speaks, its capabilities and identity, cacheable.
pub(crate) fn discover_result(revision: &Revision, list_changed: bool, ttl_ms: u64) -> Value {
    cacheable(
        revision,
        json!({
            "supportedVersions": revision::all_versions(),
            "capabilities": capabilities(list_changed),
            "instructions": INSTRUCTIONS,
        }),
        ttl_ms,
    )
}

/// The `tools/list` result: each tool in `revision`'s shape.
pub(crate) fn tools_list_result(revision: &Revision, tools: Vec<Value>, ttl_ms: u64) -> Value {
    let tools: Vec<Value> = tools.into_iter().map(|t| revision.tool(t)).collect();
    cacheable(revision, json!({"tools": tools}), ttl_ms)
}

/// The `tools/call` result for an outcome: the text (with its `@artifact`
/// lines), a `resource_link` per artifact with a host file where the
/// revision has them, and `structuredContent` when the output is an object
/// and the revision has it; in `_meta`, what the call's egress proxy saw
/// and the connection's `lockdown` (`lockdown.rs`).
pub(crate) fn call_result(
    revision: &Revision,
    outcome: &ToolOutcome,
    lockdown: Option<&Lockdown>,
) -> Value {
    // Only the members `revision` defines are written: what `keep_fields`
    // would leave, without building the others first.
    let defined = |member: &str| revision.call_result.contains(&member);
    let mut result = Map::new();
    if defined("content") {
        let mut content = vec![json!({"type": "text", "text": outcome.text})];
        if revision.has_content("resource_link") {
            content.extend(
                outcome
                    .artifacts
                    .iter()
                    .filter_map(resource_link)
                    .map(|link| keep_fields(link, revision.resource_link)),
            );
        }
        result.insert("content".into(), Value::Array(content));
    }
    if defined("structuredContent")
        && let Some(structured @ Value::Object(_)) = &outcome.structured
    {
        result.insert("structuredContent".into(), structured.clone());
    }
    if defined("isError") {
        result.insert("isError".into(), json!(outcome.is_error));
    }
    // Every revision lets a result carry `_meta`: what the call's egress
    // proxy saw, and the connection's lockdown, go to the client whatever
    // it speaks.
    let mut meta = Map::new();
    if let Some(network) = &outcome.network {
        meta.insert(META_NETWORK.into(), json!(network));
    }
    if let Some(lockdown) = lockdown {
        meta.insert(META_LOCKDOWN.into(), super::lockdown::meta(lockdown));
    }
    if !meta.is_empty() {
        result.insert("_meta".into(), Value::Object(meta));
    }
    stamp(revision, Value::Object(result))
}

/// The multi-round-trip interim result (2026-07-28): the client asks the
/// user `requests`, then calls again with the answers and `request_state`.
pub(crate) fn input_required_result(
    revision: &Revision,
    requests: &Value,
    request_state: &str,
) -> Value {
    stamp(
        revision,
        json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": request_state,
        }),
    )
}

/// `UnsupportedProtocolVersionError` (2026-07-28): what was asked, and every
/// version this server speaks.
pub(crate) fn unsupported_version(requested: &str) -> RpcError {
    let mut data = ErrorData::new(
        modproto::HostErrorKind::UnsupportedProtocolVersion,
        format!(
            "send {} in _meta[\"{META_PROTOCOL_VERSION}\"], or start a session with initialize \
             for one of the handshake versions",
            stateless_versions().join(", ")
        ),
    );
    data.extra
        .insert("supported".into(), json!(revision::all_versions()));
    data.extra.insert("requested".into(), json!(requested));
    let why = match revision::find(requested) {
        Some(_) => format!("{requested} is served after an initialize handshake, not per request"),
        None => format!("this server does not speak {requested}"),
    };
    RpcError::new(
        ErrorCode::Other(UNSUPPORTED_PROTOCOL_VERSION),
        format!("Unsupported protocol version: {why}"),
    )
    .with_data(data)
}

/// `MissingRequiredClientCapabilityError` (2026-07-28) for a call of `tool`
/// that waits for the user's approval from a client whose request did not
/// declare form elicitation; `remedy` says how to allow the tool instead.
pub(crate) fn missing_elicitation(tool: &str, remedy: &str) -> RpcError {
    let mut data = ErrorData::new(modproto::ModuleErrorKind::Denied, remedy);
    data.extra.insert(
        "requiredCapabilities".into(),
        json!({"elicitation": {"form": {}}}),
    );
    RpcError::new(
        ErrorCode::Other(MISSING_REQUIRED_CLIENT_CAPABILITY),
        format!(
            "{tool} needs the user's approval, asked through form elicitation, which this request's \
             clientCapabilities do not declare"
        ),
    )
    .with_data(data)
}

fn stateless_versions() -> Vec<&'static str> {
    revision::REVISIONS
        .iter()
        .filter(|r| r.era == revision::Era::Stateless)
        .map(|r| r.version)
        .collect()
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
            network: None,
            enters_lockdown: None,
        };
        let r = |v| revision::find(v).unwrap();
        assert_eq!(
            call_result(r("2025-06-18"), &outcome, None),
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
        // Neither links nor structure where the revision has none.
        assert_eq!(
            call_result(r("2025-03-26"), &outcome, None),
            json!({"content": [{"type": "text", "text": "{}\n@artifact {...}"}], "isError": false})
        );
        let modern = call_result(r("2026-07-28"), &outcome, None);
        assert_eq!(modern["resultType"], json!("complete"));
        assert_eq!(modern["_meta"][META_SERVER_INFO]["name"], json!("modhost"));
        let failed = ToolOutcome::failure("boom");
        assert_eq!(
            call_result(r("2025-11-25"), &failed, None),
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true})
        );
        let array = ToolOutcome {
            structured: Some(json!([1])),
            ..ToolOutcome::failure("x")
        };
        assert!(
            call_result(r("2025-11-25"), &array, None)
                .get("structuredContent")
                .is_none()
        );
    }
}

#[cfg(test)]
mod lockdown_meta_tests {
    use super::*;

    /// Every revision's result carries the lockdown, beside what the
    /// egress proxy saw, and the stateless era's server info stays.
    #[test]
    fn a_result_in_lockdown_says_so_in_every_revision() {
        let lockdown = Lockdown {
            since: "web__web_get".into(),
        };
        let outcome = ToolOutcome {
            network: Some(modhost::Contacts::default()),
            ..ToolOutcome::failure("x")
        };
        for revision in revision::REVISIONS {
            let result = call_result(revision, &outcome, Some(&lockdown));
            assert_eq!(
                result["_meta"][META_LOCKDOWN],
                json!({"active": true, "since": "web__web_get"}),
                "{}",
                revision.version
            );
            assert!(result["_meta"][META_NETWORK].is_object(), "{result}");
            let clean = call_result(revision, &ToolOutcome::failure("x"), None);
            assert!(clean["_meta"].get(META_LOCKDOWN).is_none(), "{clean}");
        }
        let stateless = revision::REVISIONS
            .iter()
            .find(|r| r.era == revision::Era::Stateless)
            .unwrap();
        let result = call_result(stateless, &outcome, Some(&lockdown));
        assert_eq!(result["_meta"][META_SERVER_INFO]["name"], json!("modhost"));
    }
}
