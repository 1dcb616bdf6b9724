//! What to fetch and what it must be.

/// What to fetch and what it must be.
#[derive(Debug, Clone, Default)]
pub struct FetchRequest {
    /// `https://…` or `oci://registry/repository[:tag|@sha256:…]`.
    pub source: String,
    /// The sha256 (hex) the bytes must have: required for `https://`; for
    /// OCI, the digest in the reference is the check.
    pub sha256: Option<String>,
    /// A signature or Sigstore bundle for an `https://` source (a local path
    /// or an `https://` URL); OCI signatures are found in the registry.
    pub signature: Option<String>,
    /// Install without a signature although `[signatures]` requires one.
    pub allow_unsigned: bool,
}
