//! What a fetch produced: a complete local file and where it came from.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One artifact fetched into the caller's folder.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The complete file, inside the folder the caller gave. Its name keeps
    /// the source's extension (`.wasm`, `.tar.gz`, `.zip`, none for an
    /// executable) so the install path recognises what it is.
    pub path: PathBuf,
    /// sha256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// The file's size in bytes.
    pub bytes: u64,
    pub origin: Origin,
}

/// Where fetched bytes came from: recorded with the pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The source as the operator named it (`https://…`, `oci://…`).
    pub source: String,
    /// For OCI, the manifest digest (`sha256:…`) the reference resolved to:
    /// what a lockfile pins and a later fetch asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci_digest: Option<String>,
    /// The tag the digest was resolved from, when a tag was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_tag: Option<String>,
}
