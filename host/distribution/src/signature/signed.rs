//! A signature as read from any of the formats (a bundle, a cosign
//! signature, a cosign OCI layer), in one shape for the verifier.

use super::public_key::{PublicKey, hex};
use super::transparency::{ExpectedKind, LogEntry};
use super::trust_root::sha2_256;

/// cosign's predicate for a plain signature carried in a DSSE statement
/// (`cosign sign` with the new bundle format).
const COSIGN_SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
const IN_TOTO_PAYLOAD: &str = "application/vnd.in-toto+json";

/// One signature and what comes with it.
#[derive(Debug)]
pub(crate) struct Signed {
    /// Where the material came from, for messages.
    pub(crate) from: String,
    pub(crate) content: Content,
    /// The DER ECDSA signature.
    pub(crate) signature: Vec<u8>,
    /// The signing certificate (DER), for keyless signatures.
    pub(crate) certificate: Option<Vec<u8>>,
    pub(crate) log_entries: Vec<LogEntry>,
}

/// What the signature is over.
#[derive(Debug)]
pub(crate) enum Content {
    /// The artifact itself (`hashedrekord`, `cosign sign-blob`): only its
    /// SHA-256 is needed. `None`: the material does not say which digest
    /// (a bare cosign signature), so it is checked against the artifact's.
    Artifact(Option<[u8; 32]>),
    /// A cosign simple-signing payload naming an image manifest digest.
    SimpleSigning(Vec<u8>),
    /// A DSSE envelope; the signature is over its pre-authentication
    /// encoding (PAE).
    Dsse {
        payload_type: String,
        payload: Vec<u8>,
    },
}

impl Signed {
    /// The digest (`sha256:…`) this material says it signs, checked
    /// against the artifact's. `Err` names the digest it signs instead.
    pub(crate) fn check_covers(&self, artifact: &[u8; 32]) -> Result<(), CoverError> {
        match &self.content {
            Content::Artifact(None) => Ok(()),
            Content::Artifact(Some(digest)) if digest == artifact => Ok(()),
            Content::Artifact(Some(digest)) => {
                Err(CoverError::Other(format!("sha256:{}", hex(digest))))
            }
            Content::SimpleSigning(payload) => {
                let payload: serde_json::Value = serde_json::from_slice(payload).map_err(|_| {
                    CoverError::Unreadable("its simple-signing payload is not JSON".into())
                })?;
                let critical = &payload["critical"];
                if critical["type"].as_str() != Some("cosign container image signature") {
                    return Err(CoverError::Unreadable(
                        "its payload is not a cosign container image signature".into(),
                    ));
                }
                let named = critical["image"]["docker-manifest-digest"]
                    .as_str()
                    .ok_or_else(|| {
                        CoverError::Unreadable("its payload names no manifest digest".into())
                    })?;
                if named == format!("sha256:{}", hex(artifact)) {
                    Ok(())
                } else {
                    Err(CoverError::Other(named.to_string()))
                }
            }
            Content::Dsse {
                payload_type,
                payload,
            } => {
                if payload_type != IN_TOTO_PAYLOAD {
                    return Err(CoverError::Unreadable(format!(
                        "its DSSE payload is a {payload_type:?}, not an in-toto statement"
                    )));
                }
                let statement: serde_json::Value =
                    serde_json::from_slice(payload).map_err(|_| {
                        CoverError::Unreadable("its in-toto statement is not JSON".into())
                    })?;
                let predicate = statement["predicateType"].as_str().unwrap_or_default();
                if predicate != COSIGN_SIGN_PREDICATE {
                    return Err(CoverError::Unreadable(format!(
                        "it is an attestation ({predicate}), not a signature \
                         (predicate {COSIGN_SIGN_PREDICATE})"
                    )));
                }
                let wanted = hex(artifact);
                let subjects: Vec<&str> = statement["subject"]
                    .as_array()
                    .map(|subjects| {
                        subjects
                            .iter()
                            .filter_map(|s| s["digest"]["sha256"].as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                if subjects.contains(&wanted.as_str()) {
                    Ok(())
                } else {
                    Err(CoverError::Other(
                        subjects
                            .iter()
                            .map(|s| format!("sha256:{s}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ))
                }
            }
        }
    }

    /// Check the signature with `key`.
    pub(crate) fn check_signature(
        &self,
        key: &PublicKey,
        artifact: &[u8; 32],
    ) -> Result<(), String> {
        match &self.content {
            Content::Artifact(digest) => {
                key.verify_sha256(digest.as_ref().unwrap_or(artifact), &self.signature)
            }
            Content::SimpleSigning(payload) => key.verify_message(payload, &self.signature),
            Content::Dsse {
                payload_type,
                payload,
            } => key.verify_message(&pae(payload_type, payload), &self.signature),
        }
    }

    /// What a log entry's body must name for this signature.
    pub(crate) fn expected_log_body(&self, artifact: &[u8; 32]) -> ExpectedKind {
        match &self.content {
            Content::Artifact(digest) => ExpectedKind::Hashed(digest.unwrap_or(*artifact)),
            Content::SimpleSigning(payload) => ExpectedKind::Hashed(sha2_256(payload)),
            Content::Dsse { payload, .. } => ExpectedKind::Dsse(sha2_256(payload)),
        }
    }
}

/// Why material does not cover an artifact.
#[derive(Debug)]
pub(crate) enum CoverError {
    /// It signs these other digests.
    Other(String),
    /// It cannot be read as covering any digest.
    Unreadable(String),
}

/// DSSE's pre-authentication encoding.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    bytes.extend_from_slice(payload);
    bytes
}
