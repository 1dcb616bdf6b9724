//! A failure of the host itself, as opposed to a module's.
//!
//! It lives below everything that can fail this way (the home layout, pins,
//! install), so those files report it without depending on [`crate::Host`].

use std::path::{Path, PathBuf};

use crate::config::ConfigError;

/// A failure of the host itself (as opposed to a module's).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no host home: pass --home, set $MODHOST_HOME, or set $HOME")]
    NoHome,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the workspace {path} is not usable: {reason}")]
    Workspace { path: PathBuf, reason: String },
    /// The capability reads or writes the workspace, and none is granted:
    /// `why`.
    #[error("{capability} works on the workspace, and no workspace is granted: {why}")]
    NoWorkspace { capability: String, why: String },
    #[error("no module {id:?} is installed{}", known_suffix(.known))]
    UnknownModule { id: String, known: Vec<String> },
    #[error(
        "{id:?} is not a valid module id: lowercase letters, digits, '-' and '_', starting with a letter"
    )]
    InvalidId { id: String },
    #[error("a module {id:?} is already installed at {}", .path.display())]
    ModuleExists { id: String, path: PathBuf },
    #[error("sha256 mismatch for {}: expected {expected}, got {actual}; nothing was installed", .path.display())]
    Sha256Mismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{} is not a working module: {reason}; nothing was installed", .path.display())]
    NotAModule { path: PathBuf, reason: String },
    #[error("{0}")]
    Refused(String),
    /// `pins.json` is unreadable or corrupt (never silently reset).
    #[error(transparent)]
    Pins(#[from] crate::pins::PinsError),
    /// The home's lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::home_lock::HomeLockError),
    /// `install` found what the host would refuse (every finding, each with
    /// its remedy); nothing was installed.
    #[error(
        "{} would not work as a module: {}; nothing was installed (fix the module, or install it anyway, unpinned, with --force){}",
        .path.display(),
        error_count(.findings),
        render_findings(.findings)
    )]
    InstallRefused {
        path: PathBuf,
        findings: Vec<modconform::Finding>,
    },
    /// A remote source could not be fetched, or its bytes or signature did
    /// not check out; nothing was installed.
    #[error(transparent)]
    Distribution(#[from] modhost_distribution::DistributionError),
    /// A server.json entry or MCP bundle that cannot be honoured, with why
    /// and what to do instead.
    #[error(transparent)]
    ServerJson(#[from] crate::server_json::error::ServerJsonError),
}

fn error_count(findings: &[modconform::Finding]) -> String {
    match findings.iter().filter(|f| f.is_error()).count() {
        1 => "1 error".to_owned(),
        n => format!("{n} errors"),
    }
}

fn known_suffix(known: &[String]) -> String {
    if known.is_empty() {
        " (no modules are installed)".to_owned()
    } else {
        format!(" (installed: {})", known.join(", "))
    }
}

impl HostError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        HostError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Findings for a person: one per line, each with its remedy indented
/// below; empty for none.
pub(crate) fn render_findings(findings: &[modconform::Finding]) -> String {
    findings.iter().map(|f| format!("\n{f}")).collect()
}

/// A file install could not receive: the same errors wherever a file is
/// read into staging (install, conformance).
impl From<crate::install::DigestError> for HostError {
    fn from(error: crate::install::DigestError) -> Self {
        use crate::install::DigestError;
        match error {
            DigestError::Mismatch {
                path,
                expected,
                actual,
            } => HostError::Sha256Mismatch {
                path,
                expected,
                actual,
            },
            DigestError::Read { path, source } => HostError::io("read", &path, source),
            DigestError::Write { path, source } => HostError::io("write", &path, source),
            malformed @ DigestError::Malformed { .. } => HostError::Refused(malformed.to_string()),
        }
    }
}
