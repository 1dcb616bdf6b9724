//! One invocation: the `invoke` params the host sends, and the result a module returns.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

use crate::descriptor::{Access, RootKind};

/// Request keys only the host writes. A caller's argument with one of these
/// names never reaches the request root: a caller can never widen roots,
/// forge a request id, extend a deadline or claim an approval.
pub const RESERVED_KEYS: &[&str] = &[
    "protocol",
    "capability",
    "request_id",
    "input",
    "roots",
    "grants",
    "binaries",
    "deadline_ms",
    "max_output_bytes",
    "approval",
    "contract_version",
];

/// The params of an `invoke` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvokeParams {
    /// Wire protocol version ([`crate::PROTOCOL_VERSION`]).
    pub protocol: String,
    /// The contract version the host pinned this module to (`"1.0"`, `"2.0"`, ...).
    pub contract_version: String,
    /// Unique per call; echo it in `progress` notifications.
    pub request_id: String,
    /// The capability id to run.
    pub capability: String,
    /// The caller's arguments, already validated against `input_schema`.
    pub input: Value,
    /// The roots granted for this call only, by declared name. A declared root
    /// absent here was not granted: fail closed and say which.
    #[serde(default)]
    pub roots: BTreeMap<String, GrantedRoot>,
    /// Paths of the binaries granted for this call, by declared name.
    #[serde(default)]
    pub binaries: BTreeMap<String, String>,
    /// Milliseconds the module has for this call, counted from its start.
    pub deadline_ms: u64,
    /// The most bytes of stdout the host reads before killing the call.
    pub max_output_bytes: u64,
    /// Present only when the operator approved this call; written by the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Caller keys other than `input` that pass through at the request root
    /// (never a reserved key).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A root as the module sees it for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedRoot {
    /// The path to open, as the module sees it (host path natively,
    /// `/roots/<name>` inside a component).
    pub path: String,
    pub kind: RootKind,
    pub access: Access,
}

/// The host's record that this call was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// How: `rule` (an allow rule matched), `flag` (`--approve`), `prompt` (an
    /// interactive yes), `client` (an MCP client that was delegated approval),
    /// `user` (the user's yes to this one call, asked through the MCP client).
    pub by: String,
    /// The rule or default that applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// RFC 3339 time of the decision.
    pub at: String,
}

/// What a successful `invoke` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvokeResult {
    /// Structured output; validated against `output_schema` when declared.
    pub output: Value,
    /// Optional human/model-readable rendering of the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Files the call produced, inside granted roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
    /// Things the caller should know that did not stop the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl InvokeResult {
    pub fn new(output: Value) -> Self {
        InvokeResult {
            output,
            text: None,
            artifacts: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// A file a call produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// The granted root it lies in.
    pub root: String,
    /// Relative to that root, `/`-separated, never absolute, never `..`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Whether `path` is a clean relative path: not empty, not absolute, no `..`,
/// no NUL. Applies to artifact paths and any path a module reports.
pub fn is_clean_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && !path.contains('\\')
        && path.split('/').all(|seg| seg != "..")
}
