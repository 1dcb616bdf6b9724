//! Why a signature was refused, or the policy could not be loaded.

/// Why a signature was refused, or the policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("the digest {0:?} is not a sha256 digest (sha256: and 64 hex digits)")]
    Digest(String),
    #[error(
        "the signature from {from} cannot be read: {reason}; give a Sigstore bundle \
         (cosign sign-blob --bundle) or a cosign signature (cosign sign-blob --key)"
    )]
    Malformed { from: String, reason: String },
    #[error(
        "the signature from {from} is for {signed}, not for this module's {expected}: it was made \
         for other bytes"
    )]
    OtherDigest {
        from: String,
        signed: String,
        expected: String,
    },
    #[error(
        "the signature from {from} was not made by a trusted signer ({}); check \
         [[signatures.trusted]] in config.toml",
        reasons.join("; ")
    )]
    Untrusted { from: String, reasons: Vec<String> },
    #[error(
        "the module ({digest}) carries no signature and [signatures] require = true in \
         config.toml; pass --allow-unsigned to install it unsigned"
    )]
    Unsigned { digest: String },
    #[error(
        "a signature came with the module ({from}) but config.toml trusts no signer to check it \
         against: add a [[signatures.trusted]] entry (a public_key, or issuer, subject and \
         trust_root)"
    )]
    NoTrustedSigner { from: String },
    #[error("[[signatures.trusted]] entry {entry} in config.toml cannot be used: {reason}")]
    Policy { entry: usize, reason: String },
    #[error("the trust root {path} cannot be used: {reason}")]
    TrustRoot { path: String, reason: String },
    #[error("the subject pattern {pattern:?} is not a valid regular expression: {reason}")]
    SubjectPattern { pattern: String, reason: String },
}
