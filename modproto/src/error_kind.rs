//! The error-kind vocabulary: what goes in `error.data.kind`.
//!
//! Design decisions:
//!
//! - **Two enums, split by who may say it.** [`ModuleErrorKind`] is what a
//!   module may report (PROTOCOL.md section 5: the protocol kinds, `failed`,
//!   `not_found`, `root_missing`, `denied`, `path_escape`,
//!   `unknown_capability`, and the module's own). [`HostErrorKind`] is what
//!   only the host decides: how a call ended that the module cannot know or
//!   must not claim (`timeout`, `bad_response`, ...), and the host's policy
//!   (`unpinned`, `approval_required`, `contract_refused`, ...).
//!   [`ErrorKind`] is either, as the host reports it.
//! - **A module's own kinds are kept, opaque.** PROTOCOL.md promises a module
//!   may use "your own" kind (with -32000 or a code in -32004..-32099); a
//!   kind this crate does not know is kept as it came
//!   ([`ModuleErrorKind::Own`]) and passed on, never guessed at. An
//!   [`OwnKind`] is never a word of the vocabulary: `from_wire` is the only
//!   way to make one.
//! - **A module never speaks for the host.** A module's answer naming a
//!   host-only kind (`approval_required`, `unpinned`, `timeout`, ...) is not a
//!   valid response: [`ModuleErrorKind::from_wire`] refuses it with
//!   [`HostOnlyKind`], and the host reports the call as `bad_response`, so no
//!   caller reads a module's words as the host's refusal.
//! - **Each word is written once**, in an `as_str`; parsing looks it up
//!   through `ALL`, so the two directions cannot disagree. On the wire a kind
//!   is the same plain string it always was.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error_code::ErrorCode;

/// A kind a module may report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModuleErrorKind {
    /// -32700: the line was not JSON.
    Parse,
    /// -32600: JSON, but not a request.
    InvalidRequest,
    /// -32601: the method does not exist.
    UnknownMethod,
    /// -32602: the input does not fit (also the host's, when it validates).
    InvalidInput,
    /// -32603: a bug in the module.
    Internal,
    /// -32603: the module panicked.
    Panic,
    /// -32000: the capability ran and failed.
    Failed,
    /// -32000: the thing asked for does not exist.
    NotFound,
    /// -32001: a root the capability needs was not granted.
    RootMissing,
    /// -32002: the grant forbids the access (also the host's policy refusal,
    /// which reaches a caller as a refusal, never as a failed call).
    Denied,
    /// -32002: a path tried to leave its root.
    PathEscape,
    /// -32003: the capability does not exist.
    UnknownCapability,
    /// A kind of the module's own, kept as it came.
    Own(OwnKind),
}

/// A module's own kind: a string that is no word of the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnKind(String);

impl OwnKind {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A kind only the host decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostErrorKind {
    // How a call ended, observed by the host.
    Timeout,
    OutputLimit,
    MemoryLimit,
    /// A module's `state` and `artifacts` folders hold more bytes or files
    /// than its bound (`[limits] storage_bytes`, `storage_files`): the call
    /// was stopped, or refused before it ran.
    StorageLimit,
    /// Exited without a response.
    Crashed,
    /// A component trap.
    Trapped,
    /// Not a valid response (framing, a wrong id, a host-only kind, ...).
    BadResponse,
    /// The output does not fit `output_schema`.
    InvalidOutput,
    SpawnFailed,
    Cancelled,
    /// `confinement = "required"` and this machine cannot confine the call.
    Unconfined,
    // The host's policy.
    Unpinned,
    Changed,
    ContractRefused,
    /// Contract-2 declarations that do not hold.
    Nonconforming,
    ApprovalRequired,
    /// An override switched the capability off.
    Disabled,
    UnknownModule,
    ModuleBroken,
    ModuleDisabled,
    NoWorkspace,
    UndeclaredSourceRoot,
    BadSchema,
    /// The capability declares a secret the host cannot give it: not
    /// granted to it, no value stored, or the secrets file refused.
    SecretUnavailable,
    /// The host itself failed (its home, its config).
    Host,
    // Why discovery lists a module as broken.
    DescribeFailed,
    BadDescriptor,
    IdMismatch,
    DuplicateId,
    NoExecutable,
    AmbiguousExecutable,
    Missing,
    SnapshotFailed,
    /// The module's folder cannot be read.
    Unreadable,
    /// A link out of the module's folder, or a special file in it.
    UnsafeFile,
    /// MCP: the request names a protocol revision the server does not speak.
    UnsupportedProtocolVersion,
    /// A quota of the operator's (`[quotas]`: calls per minute, concurrent
    /// calls, approval questions per minute) refused the call; it may be
    /// retried later.
    RateLimited,
}

/// Any kind, as the host reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Module(ModuleErrorKind),
    Host(HostErrorKind),
}

/// A module's answer named a kind only the host decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOnlyKind(pub HostErrorKind);

impl ModuleErrorKind {
    /// Every named kind (not [`ModuleErrorKind::Own`]).
    pub const ALL: [ModuleErrorKind; 12] = [
        ModuleErrorKind::Parse,
        ModuleErrorKind::InvalidRequest,
        ModuleErrorKind::UnknownMethod,
        ModuleErrorKind::InvalidInput,
        ModuleErrorKind::Internal,
        ModuleErrorKind::Panic,
        ModuleErrorKind::Failed,
        ModuleErrorKind::NotFound,
        ModuleErrorKind::RootMissing,
        ModuleErrorKind::Denied,
        ModuleErrorKind::PathEscape,
        ModuleErrorKind::UnknownCapability,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            ModuleErrorKind::Parse => "parse",
            ModuleErrorKind::InvalidRequest => "invalid_request",
            ModuleErrorKind::UnknownMethod => "unknown_method",
            ModuleErrorKind::InvalidInput => "invalid_input",
            ModuleErrorKind::Internal => "internal",
            ModuleErrorKind::Panic => "panic",
            ModuleErrorKind::Failed => "failed",
            ModuleErrorKind::NotFound => "not_found",
            ModuleErrorKind::RootMissing => "root_missing",
            ModuleErrorKind::Denied => "denied",
            ModuleErrorKind::PathEscape => "path_escape",
            ModuleErrorKind::UnknownCapability => "unknown_capability",
            ModuleErrorKind::Own(own) => own.as_str(),
        }
    }

    /// The JSON-RPC code a module answers with for this kind (PROTOCOL.md
    /// section 5); a module's own kinds go with -32000.
    pub fn code(&self) -> ErrorCode {
        match self {
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

    /// The kind an error that names none means, from its code.
    pub fn for_code(code: ErrorCode) -> Self {
        match code {
            ErrorCode::ParseError => ModuleErrorKind::Parse,
            ErrorCode::InvalidRequest => ModuleErrorKind::InvalidRequest,
            ErrorCode::MethodNotFound => ModuleErrorKind::UnknownMethod,
            ErrorCode::InvalidParams => ModuleErrorKind::InvalidInput,
            ErrorCode::InternalError => ModuleErrorKind::Internal,
            ErrorCode::RootMissing => ModuleErrorKind::RootMissing,
            ErrorCode::Denied => ModuleErrorKind::Denied,
            ErrorCode::UnknownCapability => ModuleErrorKind::UnknownCapability,
            ErrorCode::CapabilityFailed | ErrorCode::Other(_) => ModuleErrorKind::Failed,
        }
    }

    /// The kind a module sent: a named one, else its own; refused when only
    /// the host may say it.
    pub fn from_wire(kind: &str) -> Result<Self, HostOnlyKind> {
        if let Some(host) = HostErrorKind::from_wire(kind) {
            return Err(HostOnlyKind(host));
        }
        Ok(ModuleErrorKind::ALL
            .into_iter()
            .find(|known| known.as_str() == kind)
            .unwrap_or_else(|| ModuleErrorKind::Own(OwnKind(kind.to_owned()))))
    }
}

impl HostErrorKind {
    pub const ALL: [HostErrorKind; 37] = [
        HostErrorKind::Timeout,
        HostErrorKind::OutputLimit,
        HostErrorKind::MemoryLimit,
        HostErrorKind::StorageLimit,
        HostErrorKind::Crashed,
        HostErrorKind::Trapped,
        HostErrorKind::BadResponse,
        HostErrorKind::InvalidOutput,
        HostErrorKind::SpawnFailed,
        HostErrorKind::Cancelled,
        HostErrorKind::Unconfined,
        HostErrorKind::Unpinned,
        HostErrorKind::Changed,
        HostErrorKind::ContractRefused,
        HostErrorKind::Nonconforming,
        HostErrorKind::ApprovalRequired,
        HostErrorKind::Disabled,
        HostErrorKind::UnknownModule,
        HostErrorKind::ModuleBroken,
        HostErrorKind::ModuleDisabled,
        HostErrorKind::NoWorkspace,
        HostErrorKind::UndeclaredSourceRoot,
        HostErrorKind::BadSchema,
        HostErrorKind::SecretUnavailable,
        HostErrorKind::Host,
        HostErrorKind::DescribeFailed,
        HostErrorKind::BadDescriptor,
        HostErrorKind::IdMismatch,
        HostErrorKind::DuplicateId,
        HostErrorKind::NoExecutable,
        HostErrorKind::AmbiguousExecutable,
        HostErrorKind::Missing,
        HostErrorKind::SnapshotFailed,
        HostErrorKind::Unreadable,
        HostErrorKind::UnsafeFile,
        HostErrorKind::UnsupportedProtocolVersion,
        HostErrorKind::RateLimited,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            HostErrorKind::Timeout => "timeout",
            HostErrorKind::OutputLimit => "output_limit",
            HostErrorKind::MemoryLimit => "memory_limit",
            HostErrorKind::StorageLimit => "storage_limit",
            HostErrorKind::Crashed => "crashed",
            HostErrorKind::Trapped => "trapped",
            HostErrorKind::BadResponse => "bad_response",
            HostErrorKind::InvalidOutput => "invalid_output",
            HostErrorKind::SpawnFailed => "spawn_failed",
            HostErrorKind::Cancelled => "cancelled",
            HostErrorKind::Unconfined => "unconfined",
            HostErrorKind::Unpinned => "unpinned",
            HostErrorKind::Changed => "changed",
            HostErrorKind::ContractRefused => "contract_refused",
            HostErrorKind::Nonconforming => "nonconforming",
            HostErrorKind::ApprovalRequired => "approval_required",
            HostErrorKind::Disabled => "disabled",
            HostErrorKind::UnknownModule => "unknown_module",
            HostErrorKind::ModuleBroken => "module_broken",
            HostErrorKind::ModuleDisabled => "module_disabled",
            HostErrorKind::NoWorkspace => "no_workspace",
            HostErrorKind::UndeclaredSourceRoot => "undeclared_source_root",
            HostErrorKind::BadSchema => "bad_schema",
            HostErrorKind::SecretUnavailable => "secret_unavailable",
            HostErrorKind::Host => "host",
            HostErrorKind::DescribeFailed => "describe_failed",
            HostErrorKind::BadDescriptor => "bad_descriptor",
            HostErrorKind::IdMismatch => "id_mismatch",
            HostErrorKind::DuplicateId => "duplicate_id",
            HostErrorKind::NoExecutable => "no_executable",
            HostErrorKind::AmbiguousExecutable => "ambiguous_executable",
            HostErrorKind::Missing => "missing",
            HostErrorKind::SnapshotFailed => "snapshot_failed",
            HostErrorKind::Unreadable => "unreadable",
            HostErrorKind::UnsafeFile => "unsafe_file",
            HostErrorKind::UnsupportedProtocolVersion => "unsupported_protocol_version",
            HostErrorKind::RateLimited => "rate_limited",
        }
    }

    pub fn from_wire(kind: &str) -> Option<Self> {
        HostErrorKind::ALL
            .into_iter()
            .find(|known| known.as_str() == kind)
    }
}

impl ErrorKind {
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::Module(kind) => kind.as_str(),
            ErrorKind::Host(kind) => kind.as_str(),
        }
    }

    /// Any kind as read from the wire; never fails.
    pub fn from_wire(kind: &str) -> Self {
        match ModuleErrorKind::from_wire(kind) {
            Ok(module) => ErrorKind::Module(module),
            Err(HostOnlyKind(host)) => ErrorKind::Host(host),
        }
    }

    /// The kind as a module may report it; `Err` when only the host may.
    pub fn as_module(&self) -> Result<&ModuleErrorKind, HostOnlyKind> {
        match self {
            ErrorKind::Module(kind) => Ok(kind),
            ErrorKind::Host(kind) => Err(HostOnlyKind(*kind)),
        }
    }
}

impl From<ModuleErrorKind> for ErrorKind {
    fn from(kind: ModuleErrorKind) -> Self {
        ErrorKind::Module(kind)
    }
}

impl From<HostErrorKind> for ErrorKind {
    fn from(kind: HostErrorKind) -> Self {
        ErrorKind::Host(kind)
    }
}

impl PartialEq<ModuleErrorKind> for ErrorKind {
    fn eq(&self, other: &ModuleErrorKind) -> bool {
        matches!(self, ErrorKind::Module(kind) if kind == other)
    }
}

impl PartialEq<HostErrorKind> for ErrorKind {
    fn eq(&self, other: &HostErrorKind) -> bool {
        matches!(self, ErrorKind::Host(kind) if kind == other)
    }
}

impl fmt::Display for HostOnlyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error kind {:?} is decided by the host only; a module may not report it",
            self.0.as_str()
        )
    }
}

impl std::error::Error for HostOnlyKind {}

/// Display, serde and comparison with a string, for each of the three: on
/// the wire and in text a kind is its word.
macro_rules! kind_as_word {
    ($($kind:ty => $parse:expr;)*) => {$(
        impl fmt::Display for $kind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $kind {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $kind {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = String::deserialize(deserializer)?;
                let parse: fn(&str) -> Result<$kind, String> = $parse;
                parse(&word).map_err(serde::de::Error::custom)
            }
        }

        impl PartialEq<str> for $kind {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $kind {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    )*};
}

kind_as_word! {
    ErrorKind => |word| Ok(ErrorKind::from_wire(word));
    ModuleErrorKind => |word| ModuleErrorKind::from_wire(word).map_err(|e| e.to_string());
    HostErrorKind => |word| HostErrorKind::from_wire(word)
        .ok_or_else(|| format!("{word:?} is not an error kind the host decides"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_one_kind_and_round_trips() {
        let mut words: Vec<&str> = ModuleErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        words.extend(HostErrorKind::ALL.iter().map(|k| k.as_str()));
        let count = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), count, "a word names two kinds");
        for word in words {
            let kind = ErrorKind::from_wire(word);
            assert_eq!(kind.as_str(), word);
            assert_eq!(serde_json::to_value(&kind).unwrap(), word);
            assert!(!matches!(kind, ErrorKind::Module(ModuleErrorKind::Own(_))));
        }
    }

    #[test]
    fn a_module_cannot_claim_a_host_kind() {
        for host in HostErrorKind::ALL {
            assert_eq!(
                ModuleErrorKind::from_wire(host.as_str()),
                Err(HostOnlyKind(host))
            );
            assert!(serde_json::from_value::<ModuleErrorKind>(host.as_str().into()).is_err());
        }
    }

    #[test]
    fn a_modules_own_kind_is_kept_as_it_came() {
        let own = ModuleErrorKind::from_wire("too_busy").unwrap();
        assert!(matches!(own, ModuleErrorKind::Own(_)));
        assert_eq!(serde_json::to_value(&own).unwrap(), "too_busy");
        assert_eq!(ErrorKind::from_wire("too_busy"), ErrorKind::Module(own));
    }

    #[test]
    fn protocol_md_names_every_kind() {
        let doc = include_str!("../PROTOCOL.md");
        let words = ModuleErrorKind::ALL
            .iter()
            .map(|k| k.as_str().to_owned())
            .chain(HostErrorKind::ALL.iter().map(|k| k.as_str().to_owned()));
        for word in words {
            assert!(
                doc.contains(&format!("`{word}`")),
                "PROTOCOL.md does not name the error kind {word:?}"
            );
        }
    }
}
