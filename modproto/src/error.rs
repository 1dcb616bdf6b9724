//! Error codes and the machine-readable `error.data`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error_kind::ErrorKind;

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
    /// Machine-readable kind ([`crate::error_kind`]): a module's
    /// ([`crate::ModuleErrorKind`]) or the host's ([`crate::HostErrorKind`]).
    pub kind: ErrorKind,
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
    pub fn new(kind: impl Into<ErrorKind>, remedy: impl Into<String>) -> Self {
        ErrorData {
            kind: kind.into(),
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
