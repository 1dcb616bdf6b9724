//! [`BridgeError`]: every way a call through the bridge fails, as the
//! modhost error the caller reads.
//!
//! Design decisions:
//!
//! - **The host's kinds stay the host's.** How long a call ran, how much it
//!   wrote, how much memory it used and whether it was cancelled are
//!   decided by the host, which bounds the bridge and the server together
//!   (the server is the bridge's child, in the call's process group and
//!   memory cgroup). What only the bridge can see it reports with kinds of
//!   its own, all starting `mcp_`, so a caller can tell "the server broke
//!   the protocol" from "the tool failed".
//! - **A tool's failure is `failed`.** An MCP result with `isError` is the
//!   tool saying it ran and did not succeed, which is what `failed` means;
//!   a JSON-RPC error for invalid arguments is `invalid_input`.

use modproto::{ErrorCode, ErrorData, ModuleErrorKind, RpcError};

/// The kinds only this bridge reports (PROTOCOL.md: a module's own kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BridgeKind {
    /// The manifest or the tool snapshot is missing or invalid.
    BadManifest,
    /// The server's command could not be started.
    ServerStartFailed,
    /// The server closed its output or exited before it answered.
    ServerExited,
    /// The server wrote something that is not a JSON-RPC message, or a
    /// message of the wrong shape.
    BadMessage,
    /// One message of the server was longer than the call's output bound.
    MessageTooLarge,
    /// The server's tools differ from the pinned snapshot.
    ToolsChanged,
    /// The server speaks no protocol revision the bridge knows.
    UnsupportedVersion,
    /// The server answered `initialize`, `tools/list` or `tools/call` with
    /// a JSON-RPC error.
    ServerError,
}

impl BridgeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BridgeKind::BadManifest => "mcp_bad_manifest",
            BridgeKind::ServerStartFailed => "mcp_server_start_failed",
            BridgeKind::ServerExited => "mcp_server_exited",
            BridgeKind::BadMessage => "mcp_bad_message",
            BridgeKind::MessageTooLarge => "mcp_message_too_large",
            BridgeKind::ToolsChanged => "mcp_tools_changed",
            BridgeKind::UnsupportedVersion => "mcp_unsupported_version",
            BridgeKind::ServerError => "mcp_server_error",
        }
    }
}

/// The kind of a [`BridgeError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One of the protocol's module kinds.
    Protocol(ModuleErrorKind),
    Bridge(BridgeKind),
}

/// A failed call, as it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BridgeError {
    pub(crate) kind: Kind,
    pub(crate) message: String,
    pub(crate) remedy: String,
    pub(crate) problems: Vec<String>,
}

impl BridgeError {
    pub(crate) fn new(kind: BridgeKind, message: impl Into<String>) -> BridgeError {
        BridgeError {
            kind: Kind::Bridge(kind),
            message: message.into(),
            remedy: String::new(),
            problems: Vec::new(),
        }
    }

    pub(crate) fn protocol(kind: ModuleErrorKind, message: impl Into<String>) -> BridgeError {
        BridgeError {
            kind: Kind::Protocol(kind),
            message: message.into(),
            remedy: String::new(),
            problems: Vec::new(),
        }
    }

    pub(crate) fn with_remedy(mut self, remedy: impl Into<String>) -> BridgeError {
        self.remedy = remedy.into();
        self
    }

    pub(crate) fn with_problems(mut self, problems: Vec<String>) -> BridgeError {
        self.problems = problems;
        self
    }

    /// The JSON-RPC error the bridge answers with.
    pub(crate) fn to_rpc(&self) -> RpcError {
        let (code, kind) = match &self.kind {
            Kind::Protocol(kind) => (code_of(kind), kind.clone()),
            Kind::Bridge(kind) => (
                ErrorCode::CapabilityFailed,
                // Every word is outside the protocol's and the host's
                // vocabularies (a unit test holds it), so this cannot fail.
                ModuleErrorKind::from_wire(kind.as_str()).unwrap_or(ModuleErrorKind::Failed),
            ),
        };
        let mut data = ErrorData::new(kind, self.remedy.clone());
        if !self.problems.is_empty() {
            data = data.with_problems(self.problems.clone());
        }
        RpcError::new(code, self.message.clone()).with_data(data)
    }
}

fn code_of(kind: &ModuleErrorKind) -> ErrorCode {
    match kind {
        ModuleErrorKind::Parse => ErrorCode::ParseError,
        ModuleErrorKind::InvalidRequest => ErrorCode::InvalidRequest,
        ModuleErrorKind::UnknownMethod => ErrorCode::MethodNotFound,
        ModuleErrorKind::InvalidInput => ErrorCode::InvalidParams,
        ModuleErrorKind::Internal | ModuleErrorKind::Panic => ErrorCode::InternalError,
        ModuleErrorKind::RootMissing => ErrorCode::RootMissing,
        ModuleErrorKind::Denied | ModuleErrorKind::PathEscape => ErrorCode::Denied,
        ModuleErrorKind::UnknownCapability => ErrorCode::UnknownCapability,
        ModuleErrorKind::Failed | ModuleErrorKind::NotFound | ModuleErrorKind::Own(_) => {
            ErrorCode::CapabilityFailed
        }
    }
}

/// Every bridge kind, for the test that holds them outside the host's words.
#[cfg(test)]
pub(crate) const ALL_BRIDGE_KINDS: &[BridgeKind] = &[
    BridgeKind::BadManifest,
    BridgeKind::ServerStartFailed,
    BridgeKind::ServerExited,
    BridgeKind::BadMessage,
    BridgeKind::MessageTooLarge,
    BridgeKind::ToolsChanged,
    BridgeKind::UnsupportedVersion,
    BridgeKind::ServerError,
];
