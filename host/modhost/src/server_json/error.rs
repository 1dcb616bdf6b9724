//! Why a server.json entry could not be read, installed or written.

use std::path::PathBuf;

/// Why a server.json entry (or the bundle it names) cannot be read,
/// installed or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerJsonError {
    #[error("could not read the server.json {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("not a server.json entry modhost can read: {message}; nothing was installed")]
    Invalid { message: String },
    #[error(
        "{name}: no package modhost can install (an `mcpb` bundle at an https URL with fileSha256, or an `oci` artifact); nothing was installed:{}",
        render_reasons(.reasons)
    )]
    NoPackage { name: String, reasons: Vec<String> },
    #[error(
        "{url} has sha256 {actual}, and the server.json says fileSha256 {expected}; nothing was installed"
    )]
    Sha256Mismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("the MCP bundle {bundle} cannot be installed: {error}; nothing was installed")]
    Bundle {
        bundle: String,
        #[source]
        error: crate::mcpb::error::McpbError,
    },
    #[error(
        "{id} was installed from a local file or folder, and a server.json entry names where others fetch the same bytes: publish it (an MCP bundle at an https URL, or an OCI registry), install it from there (`modhost install https://… --sha256 HEX`, `modhost install oci://…`), then write the entry"
    )]
    NoProvenance { id: String },
    #[error(
        "{id} came from {origin}, which is not an MCP bundle, and server.json's direct downloads are MCP bundles (`mcpb`): publish the module to an OCI registry and install it from there (`modhost install oci://…`) to write an `oci` entry for it"
    )]
    NotPublishable { id: String, origin: String },
}

fn render_reasons(reasons: &[String]) -> String {
    reasons.iter().map(|r| format!("\n  - {r}")).collect()
}
