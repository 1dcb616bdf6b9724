//! The modhost wire contract.
//!
//! Everything a module and the host say to each other is defined here as plain
//! data: the JSON-RPC 2.0 envelope ([`jsonrpc`]), what a module says about itself
//! ([`descriptor`]), one invocation and its result ([`invoke`]), the
//! module-to-host notifications ([`notify`]), the error codes ([`error`]) and
//! kinds ([`error_kind`]: what a module may report, what only the host decides),
//! the decision of which contract governs a module ([`contract`]), and the
//! framing rules every reader of a module's stdout applies ([`framing`]: one
//! response and nothing after it, over JSON whose objects never repeat a key,
//! [`strict_json`]), and what a secret may be called ([`secret`]).
//!
//! Design decisions:
//!
//! - **No I/O.** This crate parses and produces values; it never reads a pipe,
//!   a file or a clock. The host, the SDK and the conformance kit all share it,
//!   and any of them can be tested without the others.
//! - **Versioned on its own.** [`PROTOCOL_VERSION`] is the version of the bytes
//!   on the wire; it changes only when the wire changes, never because a crate
//!   was released. The *contract version* a module declares
//!   (`contract_version`, decided by [`contract::evaluate`]) is a separate, semantic axis: which
//!   declarations the host may rely on.
//! - **Untrusted input is the default.** Every decoder here is written for
//!   bytes that came from a program the host does not trust: unknown fields are
//!   tolerated where the protocol allows growth, but the shape of the envelope
//!   is checked strictly ([`jsonrpc::Message::parse`]).
//!
//! The language-neutral specification is `PROTOCOL.md` beside this crate; a
//! JSON Schema of the descriptor ships as `descriptor.schema.json`.

pub mod contract;
pub mod descriptor;
pub mod error;
pub mod error_code;
pub mod error_kind;
pub mod framing;
pub mod invoke;
pub mod jsonrpc;
pub mod network;
pub mod notify;
pub mod schema_formats;
pub mod secret;
pub mod strict_json;

pub use descriptor::{
    Access, BinaryDecl, Capability, Cost, Descriptor, Effects, Example, Knowledge, KnowledgeDoc,
    Operation, RootDecl, RootKind, Semantics,
};
pub use error::ErrorData;
pub use error_code::ErrorCode;
pub use error_kind::{ErrorKind, HostErrorKind, HostOnlyKind, ModuleErrorKind, OwnKind};
pub use invoke::{Approval, ArtifactRef, GrantedRoot, InvokeParams, InvokeResult, RESERVED_KEYS};
pub use jsonrpc::{Id, Message, Notification, Request, Response, RpcError};
pub use network::{HostName, HostPattern, HostPatternError, Network};
pub use notify::{LogParams, ProgressParams};
pub use secret::{SecretNameError, check_secret_name};

/// The version of the wire protocol: framing, methods and message shapes.
///
/// Sent by the host in every invoke request (`protocol`); a module may refuse a
/// major it does not speak. Independent of every crate version.
pub const PROTOCOL_VERSION: &str = "1.0";

/// Method a host calls to ask a module to describe itself.
pub const METHOD_DESCRIBE: &str = "describe";
/// Method a host calls to run one capability.
pub const METHOD_INVOKE: &str = "invoke";
/// Notification a module may send while it works.
pub const METHOD_PROGRESS: &str = "progress";
/// Notification a module may send to log a line through the host.
pub const METHOD_LOG: &str = "log";

/// The marker that prefixes one artifact line in human and model-facing output.
pub const ARTIFACT_MARKER: &str = "@artifact ";

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
