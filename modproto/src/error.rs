//! Error codes and the machine-readable `error.data`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// JSON-RPC error codes used by modhost.
///
/// The standard range is JSON-RPC's own. `-32000..=-32099` is the module range:
/// a module reports a failure of its capability there, with a [`ErrorData::kind`]
/// that says what kind of failure it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// -32700: the line was not JSON.
    ParseError,
    /// -32600: JSON, but not a valid request.
    InvalidRequest,
    /// -32601: the method does not exist.
    MethodNotFound,
    /// -32602: the params (for `invoke`: the input) do not fit.
    InvalidParams,
    /// -32603: the module failed internally (a panic, a bug).
    InternalError,
    /// -32000: the capability ran and failed.
    CapabilityFailed,
    /// -32001: a root the capability needs was not granted.
    RootMissing,
    /// -32002: a path tried to leave its root, or the grant forbids the access.
    Denied,
    /// -32003: the capability named in the request does not exist.
    UnknownCapability,
    /// Any other code in the module range, or outside all ranges.
    Other(i64),
}

impl ErrorCode {
    pub const MODULE_RANGE: std::ops::RangeInclusive<i64> = -32099..=-32000;

    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::CapabilityFailed => -32000,
            ErrorCode::RootMissing => -32001,
            ErrorCode::Denied => -32002,
            ErrorCode::UnknownCapability => -32003,
            ErrorCode::Other(n) => n,
        }
    }

    pub fn from_code(code: i64) -> Self {
        match code {
            -32700 => ErrorCode::ParseError,
            -32600 => ErrorCode::InvalidRequest,
            -32601 => ErrorCode::MethodNotFound,
            -32602 => ErrorCode::InvalidParams,
            -32603 => ErrorCode::InternalError,
            -32000 => ErrorCode::CapabilityFailed,
            -32001 => ErrorCode::RootMissing,
            -32002 => ErrorCode::Denied,
            -32003 => ErrorCode::UnknownCapability,
            n => ErrorCode::Other(n),
        }
    }
}

/// The `data` member of a modhost error: what kind of failure, and what a
/// person can do about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    /// Machine-readable kind; see [`ErrorKind`] for the shared vocabulary.
    pub kind: String,
    /// One sentence a person can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// Every individual problem, when there are several (schema violations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Anything else the sender wants to say; kept, never interpreted.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorData {
    pub fn new(kind: &str, remedy: impl Into<String>) -> Self {
        ErrorData {
            kind: kind.to_owned(),
            remedy: Some(remedy.into()),
            problems: Vec::new(),
            extra: Map::new(),
        }
    }

    pub fn with_problems(mut self, problems: Vec<String>) -> Self {
        self.problems = problems;
        self
    }
}

/// The shared vocabulary of error kinds. A kind is an open string on the
/// wire; these are the ones modhost itself produces or understands.
#[derive(Debug)]
pub struct ErrorKind;

impl ErrorKind {
    // Protocol-level, from either side.
    pub const PARSE: &'static str = "parse";
    pub const INVALID_REQUEST: &'static str = "invalid_request";
    pub const UNKNOWN_METHOD: &'static str = "unknown_method";
    pub const INVALID_INPUT: &'static str = "invalid_input";
    pub const INTERNAL: &'static str = "internal";
    pub const PANIC: &'static str = "panic";
    // Module-reported.
    pub const FAILED: &'static str = "failed";
    pub const NOT_FOUND: &'static str = "not_found";
    pub const ROOT_MISSING: &'static str = "root_missing";
    pub const DENIED: &'static str = "denied";
    pub const PATH_ESCAPE: &'static str = "path_escape";
    pub const UNKNOWN_CAPABILITY: &'static str = "unknown_capability";
    // Host-observed, never sent by a module.
    pub const TIMEOUT: &'static str = "timeout";
    pub const OUTPUT_LIMIT: &'static str = "output_limit";
    pub const MEMORY_LIMIT: &'static str = "memory_limit";
    pub const CRASHED: &'static str = "crashed";
    pub const TRAPPED: &'static str = "trapped";
    pub const BAD_RESPONSE: &'static str = "bad_response";
    pub const INVALID_OUTPUT: &'static str = "invalid_output";
    pub const SPAWN_FAILED: &'static str = "spawn_failed";
    pub const CANCELLED: &'static str = "cancelled";
    pub const UNCONFINED: &'static str = "unconfined";
    // Host policy, never sent by a module.
    pub const UNPINNED: &'static str = "unpinned";
    pub const CHANGED: &'static str = "changed";
    pub const CONTRACT_REFUSED: &'static str = "contract_refused";
    pub const APPROVAL_REQUIRED: &'static str = "approval_required";
}
