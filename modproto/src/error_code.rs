//! JSON-RPC error codes: the standard range and the module range. Below
//! both the error data and the error kinds, which map to codes.

/// JSON-RPC error codes used by modhost.
///
/// The standard range is JSON-RPC's own. `-32000..=-32099` is the module range:
/// a module reports a failure of its capability there, with a [`ErrorData::kind`](crate::ErrorData::kind)
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
