//! Why an [`Authenticator`](super::Authenticator) could not be built: a
//! file of its own, so the parts that can fail at start (static tokens,
//! the JWKS client) name it without importing the authenticator.

use std::path::PathBuf;

/// Why an [`Authenticator`](super::Authenticator) could not be built from `[http]`.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// `[http]` breaks a rule the config loader checks (a configuration
    /// built in code rather than loaded).
    #[error("[http] in config.toml: {0}")]
    Invalid(String),
    #[error("{0}")]
    Token(String),
    /// `[http.oauth] jwks_ca_file` cannot be used.
    #[error("[http.oauth] jwks_ca_file {}: {why}; name a readable PEM file of the CA certificates that sign the authorization server's", path.display())]
    CaFile { path: PathBuf, why: String },
}
