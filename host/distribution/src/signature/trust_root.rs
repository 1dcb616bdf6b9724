//! The operator's pinned Sigstore trust root: a `trusted_root.json` file
//! (the format the Sigstore TUF repository distributes and `cosign` and
//! `sigstore-python` read), loaded once, never refreshed over the network.
//!
//! Design decisions:
//! - **A file, read offline.** Keeping it current is the operator's act
//!   (copy the new `trusted_root.json`); a verifier that fetched it would
//!   trust whatever the network said at install time.
//! - **Validity periods are kept.** A CA or log key rotated out still
//!   verifies what it signed while it was valid, and nothing after.
//! - CT logs (`ctlogs`) are kept too: a Fulcio certificate's embedded SCT
//!   is checked against them (`sct.rs`).
//! - Logs whose key is not ECDSA (Rekor v2's Ed25519 keys) are left out:
//!   their entries carry no signed integration time, which this verifier
//!   needs (see [`super::transparency`]).

use std::path::Path;

use sigstore_protobuf_specs::dev::sigstore::common::v1::TimeRange;
use sigstore_protobuf_specs::dev::sigstore::trustroot::v1::TrustedRoot;

use super::error::SignatureError;
use super::public_key::PublicKey;

/// A loaded trust root: Fulcio CAs and Rekor logs, each with its validity.
#[derive(Debug, Clone)]
pub struct TrustRoot {
    /// Where it was read from, for messages.
    name: String,
    pub(crate) authorities: Vec<Authority>,
    pub(crate) logs: Vec<Log>,
    /// The certificate transparency logs Fulcio submits to (their SCTs).
    pub(crate) ctlogs: Vec<Log>,
}

/// One certificate authority: its chain, leafmost first, root last.
#[derive(Debug, Clone)]
pub(crate) struct Authority {
    pub(crate) uri: String,
    pub(crate) chain: Vec<Vec<u8>>,
    pub(crate) valid: Validity,
}

/// One transparency log: its id (SHA-256 of its key's DER) and key.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    pub(crate) base_url: String,
    pub(crate) id: Vec<u8>,
    pub(crate) key: PublicKey,
    pub(crate) valid: Validity,
}

/// A validity period in Unix seconds; an open end is unbounded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Validity {
    pub(crate) start: Option<i64>,
    pub(crate) end: Option<i64>,
}

impl Log {
    /// A `tlogs` or `ctlogs` entry; `None` (left out) unless its key is
    /// ECDSA P-256 or P-384.
    fn from_instance(
        log: &sigstore_protobuf_specs::dev::sigstore::trustroot::v1::TransparencyLogInstance,
    ) -> Option<Self> {
        let key = log.public_key.as_ref()?;
        let der = key.raw_bytes.as_ref()?;
        let public = PublicKey::from_spki_der(der).ok()?;
        let id = match log.log_id.as_ref() {
            Some(id) if !id.key_id.is_empty() => id.key_id.clone(),
            _ => sha2_256(der).to_vec(),
        };
        Some(Log {
            base_url: log.base_url.clone(),
            id,
            key: public,
            valid: Validity::from_range(key.valid_for.as_ref()),
        })
    }
}

impl Validity {
    fn from_range(range: Option<&TimeRange>) -> Self {
        Self {
            start: range.and_then(|r| r.start.as_ref()).map(|t| t.seconds),
            end: range.and_then(|r| r.end.as_ref()).map(|t| t.seconds),
        }
    }

    pub(crate) fn contains(&self, at: i64) -> bool {
        self.start.is_none_or(|start| at >= start) && self.end.is_none_or(|end| at <= end)
    }
}

impl TrustRoot {
    /// Read a `trusted_root.json`.
    pub fn load(path: &Path) -> Result<Self, SignatureError> {
        let bytes = std::fs::read(path).map_err(|error| SignatureError::TrustRoot {
            path: path.display().to_string(),
            reason: error.to_string(),
        })?;
        Self::from_json(&bytes, &path.display().to_string())
    }

    /// Parse a `trusted_root.json` read elsewhere; `name` names it in errors.
    pub fn from_json(bytes: &[u8], name: &str) -> Result<Self, SignatureError> {
        let fail = |reason: String| SignatureError::TrustRoot {
            path: name.to_string(),
            reason,
        };
        // The generated type's deserializer expects JSON; check the shape
        // first so garbage gets serde's message.
        let _: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| fail(format!("not JSON: {e}")))?;
        let root: TrustedRoot = serde_json::from_slice(bytes)
            .map_err(|e| fail(format!("not a Sigstore trusted root: {e}")))?;
        if !root
            .media_type
            .starts_with("application/vnd.dev.sigstore.trustedroot")
        {
            return Err(fail(format!(
                "its mediaType is {:?}, not a Sigstore trusted root \
                 (application/vnd.dev.sigstore.trustedroot+json;version=0.1)",
                root.media_type
            )));
        }
        let authorities: Vec<Authority> = root
            .certificate_authorities
            .iter()
            .filter_map(|ca| {
                let chain: Vec<Vec<u8>> = ca
                    .cert_chain
                    .as_ref()?
                    .certificates
                    .iter()
                    .map(|c| c.raw_bytes.clone())
                    .collect();
                (!chain.is_empty()).then(|| Authority {
                    uri: ca.uri.clone(),
                    chain,
                    valid: Validity::from_range(ca.valid_for.as_ref()),
                })
            })
            .collect();
        let logs: Vec<Log> = root.tlogs.iter().filter_map(Log::from_instance).collect();
        let ctlogs: Vec<Log> = root.ctlogs.iter().filter_map(Log::from_instance).collect();
        if authorities.is_empty() {
            return Err(fail(
                "it names no certificate authority (Fulcio) with a certificate chain".into(),
            ));
        }
        if logs.is_empty() {
            return Err(fail(
                "it names no transparency log (Rekor) with an ECDSA key".into(),
            ));
        }
        if ctlogs.is_empty() {
            return Err(fail(
                "it names no certificate transparency log (ctlogs) with an ECDSA key, so a \
                 signing certificate's SCT cannot be checked"
                    .into(),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            authorities,
            logs,
            ctlogs,
        })
    }

    /// Where it was read from.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn log(&self, id: &[u8]) -> Option<&Log> {
        self.logs.iter().find(|log| log.id == id)
    }
}

pub(crate) fn sha2_256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}
