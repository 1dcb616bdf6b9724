//! Who may sign keyless: an OIDC issuer, a subject pattern and the trust
//! root their certificates chain to.
//!
//! The subject pattern is a **regular expression matched against the whole
//! identity** (anchored: `^(?:pattern)$`), as `cosign verify
//! --certificate-identity-regexp` does, except that a partial match never
//! counts: `https://github\.com/acme/.*` cannot be satisfied by
//! `https://evil.example/?https://github.com/acme/x`. The issuer is
//! compared exactly.

use std::sync::Arc;

use regex::Regex;

use super::error::SignatureError;
use super::trust_root::TrustRoot;

/// A keyless signer the operator trusts.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    /// The OIDC issuer, exactly (`https://token.actions.githubusercontent.com`).
    pub issuer: String,
    /// The identity the certificate must name.
    pub subject: SubjectPattern,
    /// The Fulcio CAs and Rekor logs to check against.
    pub trust_root: Arc<TrustRoot>,
}

/// An anchored regular expression over a certificate's identity.
#[derive(Debug, Clone)]
pub struct SubjectPattern {
    source: String,
    regex: Regex,
}

impl SubjectPattern {
    /// Compile `pattern`, anchored at both ends.
    pub fn new(pattern: &str) -> Result<Self, SignatureError> {
        let regex = Regex::new(&format!("^(?:{pattern})$")).map_err(|error| {
            SignatureError::SubjectPattern {
                pattern: pattern.to_string(),
                reason: error.to_string(),
            }
        })?;
        Ok(Self {
            source: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as the operator wrote it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `subject` matches the whole pattern.
    pub fn matches(&self, subject: &str) -> bool {
        self.regex.is_match(subject)
    }
}
