//! [`ModError`]: a capability's failure as the host will see it.
//!
//! A failure is data, not a crash: a kind a module may report
//! ([`modproto::ModuleErrorKind`]: the shared vocabulary, or the module's own;
//! never one only the host decides), a message that names what failed (with the path
//! when there is one, ripgrep style), and a remedy a person can act on. The
//! kind decides the JSON-RPC code, so authors never pick numbers.

use std::fmt;
use std::io;

use modproto::{ErrorCode, ErrorData, ModuleErrorKind, RpcError};

/// A capability failure: kind, message, remedy.
#[derive(Debug, Clone, PartialEq)]
pub struct ModError {
    kind: ModuleErrorKind,
    message: String,
    remedy: Option<String>,
    problems: Vec<String>,
}

impl ModError {
    /// A failure of any kind. Prefer the named constructors; a kind of the
    /// module's own comes from [`ModuleErrorKind::from_wire`], which refuses
    /// the words only the host may use.
    pub fn new(kind: ModuleErrorKind, message: impl Into<String>) -> Self {
        ModError {
            kind,
            message: message.into(),
            remedy: None,
            problems: Vec::new(),
        }
    }

    /// The input is well-formed but makes no sense (a bad regex, an end before a start).
    pub fn invalid_input(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::InvalidInput, message)
    }

    /// The input does not fit the schema; each problem is listed.
    pub fn invalid_input_problems(problems: Vec<String>) -> Self {
        let message = match problems.as_slice() {
            [one] => format!("invalid input: {one}"),
            many => format!("invalid input: {} problems", many.len()),
        };
        ModError {
            problems,
            ..ModError::invalid_input(message)
                .with_remedy("fix the listed problems and call again; the capability's input_schema says what fits")
        }
    }

    /// The thing asked for does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::NotFound, message)
    }

    /// The grant forbids this access (a write through a read-only root).
    pub fn denied(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::Denied, message)
    }

    /// A path tried to leave its root (`..`, absolute, or a symlink out).
    pub fn path_escape(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::PathEscape, message)
            .with_remedy("use a path relative to the root that stays inside it")
    }

    /// A root the capability needs was not granted for this call.
    pub fn root_missing(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::RootMissing, message)
    }

    /// The capability ran and failed.
    pub fn failed(message: impl Into<String>) -> Self {
        ModError::new(ModuleErrorKind::Failed, message)
    }

    /// Replace the remedy.
    pub fn with_remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = Some(remedy.into());
        self
    }

    /// Prefix the message with context, keeping kind and remedy:
    /// `reading notes.md: No such file or directory`.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// An io error met while working on `path`, classified; the path is in the message.
    pub fn io(path: impl fmt::Display, err: &io::Error) -> Self {
        ModError::from_io(err).context(path)
    }

    pub fn kind(&self) -> &ModuleErrorKind {
        &self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn remedy(&self) -> Option<&str> {
        self.remedy.as_deref()
    }

    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The JSON-RPC code this kind maps to.
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// The wire form.
    pub fn to_rpc_error(&self) -> RpcError {
        let remedy = self
            .remedy
            .clone()
            .unwrap_or_else(|| default_remedy(&self.kind).to_owned());
        RpcError::new(self.code(), self.message.clone()).with_data(
            ErrorData::new(self.kind.clone(), remedy).with_problems(self.problems.clone()),
        )
    }

    fn from_io(err: &io::Error) -> Self {
        if is_escape_attempt(err) {
            return ModError::path_escape(err.to_string());
        }
        let message = portable_message(err);
        match err.kind() {
            io::ErrorKind::NotFound => ModError::not_found(message)
                .with_remedy("check the path; list the directory to see what exists"),
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                ModError::denied(message)
            }
            _ => ModError::failed(message),
        }
    }
}

/// The error's text without its ` (os error N)` suffix: errno numbers differ
/// between targets (`ENOENT` is 2 on Linux and 44 in WASI), and one module
/// must say the same thing natively and as a component.
fn portable_message(err: &io::Error) -> String {
    let text = err.to_string();
    match err.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .unwrap_or(&text)
            .to_owned(),
        None => text,
    }
}

/// cap-std reports an escape (`..` above the root, an absolute path, a
/// symlink out) as a synthetic `PermissionDenied` with no OS error number;
/// a real `EACCES` carries one. Linux's `RESOLVE_BENEATH` says `EXDEV`.
fn is_escape_attempt(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        && err.raw_os_error().is_none()
        && err.to_string().contains("outside of the filesystem")
}

fn default_remedy(kind: &ModuleErrorKind) -> &'static str {
    match kind {
        ModuleErrorKind::NotFound => "check the name or path and call again",
        ModuleErrorKind::Denied => "this call's grant does not allow that access",
        ModuleErrorKind::PathEscape => "use a path relative to the root that stays inside it",
        ModuleErrorKind::RootMissing => "the operator must grant the root",
        ModuleErrorKind::InvalidInput => "fix the input and call again",
        _ => "see the message; if it persists, report it to the module's author",
    }
}

impl fmt::Display for ModError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.kind)?;
        if let Some(remedy) = &self.remedy {
            write!(f, "; {remedy}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ModError {}

/// `?` on an io error: classified by kind, without a path (prefer
/// [`ModError::io`] when there is one).
impl From<io::Error> for ModError {
    fn from(err: io::Error) -> Self {
        ModError::from_io(&err)
    }
}

impl From<serde_json::Error> for ModError {
    fn from(err: serde_json::Error) -> Self {
        ModError::failed(format!("JSON: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_messages_carry_no_platform_errno() {
        // ENOENT: 2 on Linux, 44 in WASI; the message must not say which.
        for errno in [2, 44] {
            let err = ModError::io("workspace:nope.txt", &io::Error::from_raw_os_error(errno));
            assert!(!err.message().contains("os error"), "{}", err.message());
            assert!(
                err.message().starts_with("workspace:nope.txt"),
                "{}",
                err.message()
            );
        }
    }

    #[test]
    fn kinds_map_to_module_range_codes() {
        assert_eq!(ModError::failed("x").code().code(), -32000);
        assert_eq!(ModError::root_missing("x").code().code(), -32001);
        assert_eq!(ModError::path_escape("x").code().code(), -32002);
        assert_eq!(ModError::denied("x").code().code(), -32002);
        assert_eq!(ModError::invalid_input("x").code().code(), -32602);
        assert_eq!(ModError::not_found("x").code().code(), -32000);
    }

    #[test]
    fn io_errors_are_classified_with_their_path() {
        let err = ModError::io("notes.md", &io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(*err.kind(), ModuleErrorKind::NotFound);
        assert!(err.message().starts_with("notes.md: "), "{}", err.message());
        let escape = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert_eq!(*ModError::from(escape).kind(), ModuleErrorKind::PathEscape);
        let eacces = io::Error::from_raw_os_error(13);
        assert_eq!(*ModError::from(eacces).kind(), ModuleErrorKind::Denied);
    }
}
