//! `[signatures]` in `config.toml`: which signers the operator trusts for
//! modules fetched from elsewhere, and whether a signature is required.
//!
//! ```toml
//! [signatures]
//! require = true        # default false: verify what comes with a module, refuse nothing unsigned
//!
//! [[signatures.trusted]]                  # a cosign key pair's public half
//! public_key = "/etc/modhost/cosign.pub"
//!
//! [[signatures.trusted]]                  # keyless: who, vouched for by which Sigstore
//! issuer = "https://token.actions.githubusercontent.com"
//! subject = 'https://github\.com/acme/modules/\.github/workflows/release\.yml@refs/tags/v.*'
//! trust_root = "/etc/modhost/trusted_root.json"
//! ```
//!
//! Design decisions:
//! - **`subject` is a regular expression over the whole identity**
//!   (anchored at both ends), `issuer` is compared exactly; a partial match
//!   never passes (see `modhost_distribution::signature::SubjectPattern`).
//! - **The trust root is a file the operator pins** (Sigstore's
//!   `trusted_root.json`); verification never goes to the network.
//! - **Checked at load:** a missing or unreadable key or trust root, a bad
//!   pattern, an entry mixing the two kinds or `require` without any
//!   trusted entry stops the host with the line's problem, not the first
//!   install that needs it.
//! - **A bad signature is always refused,** whatever `require` says; `require`
//!   decides only about modules that come with no signature.

use std::path::PathBuf;
use std::sync::Arc;

use modhost_distribution::signature::{
    IdentityPolicy, PublicKey, SignatureError, SubjectPattern, TrustRoot, TrustedSigner,
};
use serde::Deserialize;

/// `[signatures]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignaturePolicyConfig {
    /// Refuse a remote module that comes with no signature (unless the
    /// install says `--allow-unsigned`).
    pub require: bool,
    /// The signers trusted; any one of them may vouch for a module.
    pub trusted: Vec<TrustedEntry>,
}

/// One `[[signatures.trusted]]` entry: a `public_key`, or `issuer`,
/// `subject` and `trust_root` together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedEntry {
    pub public_key: Option<PathBuf>,
    pub issuer: Option<String>,
    pub subject: Option<String>,
    pub trust_root: Option<PathBuf>,
}

impl SignaturePolicyConfig {
    /// What is wrong with the section, one line per problem.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .trusted
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| {
                entry
                    .signer()
                    .err()
                    .map(|why| format!("[[signatures.trusted]] entry {}: {why}", i + 1))
            })
            .collect();
        if self.require && self.trusted.is_empty() {
            problems.push(
                "[signatures] require = true but no [[signatures.trusted]] entry names a signer \
                 (a public_key, or issuer, subject and trust_root)"
                    .into(),
            );
        }
        problems
    }

    /// The trusted signers, loaded (keys and trust roots read from their
    /// files now, so a file replaced since the host started is what counts).
    pub(crate) fn signers(&self) -> Result<Vec<TrustedSigner>, SignatureError> {
        let mut signers = Vec::with_capacity(self.trusted.len());
        for (i, entry) in self.trusted.iter().enumerate() {
            signers.push(entry.signer().map_err(|reason| SignatureError::Policy {
                entry: i + 1,
                reason,
            })?);
        }
        Ok(signers)
    }
}

impl TrustedEntry {
    fn signer(&self) -> Result<TrustedSigner, String> {
        match self {
            TrustedEntry {
                public_key: Some(path),
                issuer: None,
                subject: None,
                trust_root: None,
            } => {
                let path = absolute(path, "public_key")?;
                let pem = std::fs::read(path)
                    .map_err(|e| format!("public_key {}: {e}", path.display()))?;
                let key = PublicKey::from_pem(&pem)
                    .map_err(|why| format!("public_key {}: {why}", path.display()))?;
                Ok(TrustedSigner::Key(key))
            }
            TrustedEntry {
                public_key: None,
                issuer: Some(issuer),
                subject: Some(subject),
                trust_root: Some(root),
            } => {
                if issuer.trim().is_empty() {
                    return Err("issuer is empty (the OIDC issuer URL, e.g. https://token.actions.githubusercontent.com)".into());
                }
                let subject = SubjectPattern::new(subject).map_err(|e| e.to_string())?;
                let root = absolute(root, "trust_root")?;
                let trust_root = TrustRoot::load(root).map_err(|e| e.to_string())?;
                Ok(TrustedSigner::Identity(IdentityPolicy {
                    issuer: issuer.clone(),
                    subject,
                    trust_root: Arc::new(trust_root),
                }))
            }
            TrustedEntry {
                public_key: Some(_),
                ..
            } => Err(
                "give either public_key alone, or issuer, subject and trust_root; not both kinds"
                    .into(),
            ),
            _ => Err(
                "a keyless signer needs issuer, subject and trust_root together (or give a \
                 public_key)"
                    .into(),
            ),
        }
    }
}

fn absolute<'a>(path: &'a std::path::Path, key: &str) -> Result<&'a std::path::Path, String> {
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "{key} = {:?}: the path must be absolute",
            path.display().to_string()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SignaturePolicyConfig, String> {
        #[derive(Deserialize)]
        struct Wrapper {
            signatures: SignaturePolicyConfig,
        }
        let policy = toml::from_str::<Wrapper>(text)
            .map_err(|e| e.to_string())?
            .signatures;
        let problems = policy.problems();
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(problems.join("; "))
        }
    }

    #[test]
    fn the_default_requires_nothing_and_trusts_no_one() {
        let policy = parse("[signatures]\n").unwrap();
        assert!(!policy.require && policy.trusted.is_empty());
    }

    #[test]
    fn each_entry_is_checked_naming_its_problem() {
        let cases = [
            ("require = true\n", "require = true but no"),
            (
                "[[signatures.trusted]]\npublic_key = \"key.pub\"\n",
                "must be absolute",
            ),
            (
                "[[signatures.trusted]]\npublic_key = \"/nonexistent/key.pub\"\n",
                "/nonexistent/key.pub",
            ),
            (
                "[[signatures.trusted]]\nissuer = \"https://i\"\nsubject = \".*\"\n",
                "needs issuer, subject and trust_root",
            ),
            (
                "[[signatures.trusted]]\npublic_key = \"/k\"\nissuer = \"https://i\"\n",
                "not both kinds",
            ),
            (
                "[[signatures.trusted]]\nissuer = \"https://i\"\nsubject = \"(\"\ntrust_root = \"/r.json\"\n",
                "not a valid regular expression",
            ),
            (
                "[[signatures.trusted]]\nissuer = \"https://i\"\nsubject = \".*\"\ntrust_root = \"/nonexistent/r.json\"\n",
                "/nonexistent/r.json",
            ),
            ("[[signatures.trusted]]\nkey = \"/k\"\n", "unknown field"),
        ];
        for (body, expected) in cases {
            let text = if body.starts_with("[[") {
                body.to_string()
            } else {
                format!("[signatures]\n{body}")
            };
            let error = parse(&text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(!error.is_empty());
        }
    }
}
