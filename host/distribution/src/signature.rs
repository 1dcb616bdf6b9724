//! Sigstore signatures, verified offline against what the operator pinned:
//! a public key (cosign key pairs) or an identity (OIDC issuer and subject
//! pattern) with a `trusted_root.json` (keyless).
//!
//! Formats read ([`Material`]):
//! - a Sigstore bundle, JSON v0.1 to v0.3 (`cosign sign-blob --bundle`,
//!   `cosign sign` with the new bundle format, sigstore-python), its content
//!   a message signature or a DSSE envelope with cosign's signing predicate;
//! - a `cosign sign-blob --key` signature (base64);
//! - a cosign signature manifest's layer in an OCI registry (simple
//!   signing), with a key or keyless (certificate and Rekor bundle
//!   annotations).
//!
//! Design decisions:
//! - **Offline.** Nothing here opens a connection: the trust root is a file
//!   the operator pins, the log's promise and proof are checked against its
//!   keys, and the certificate is checked at the log's signed integration
//!   time (`transparency.rs`, `certificate.rs`).
//! - **Not the `sigstore` crate.** Its 0.15 release compiles only with
//!   OpenSSL or aws-lc as its crypto backend (a `compile_error!` otherwise),
//!   which this workspace keeps out. The formats are read with the official
//!   generated types (`sigstore_protobuf_specs`), the chain is checked by
//!   rustls-webpki with ring, and ECDSA by RustCrypto (P-256, P-384).
//! - **The digest first.** Material that signs another digest is refused
//!   as such before any key is tried, so the reason names both digests.
//! - **Every trusted signer is tried; a refusal lists why each refused.**
//!   A bad signature is never "unsigned": the caller refuses it whatever
//!   the policy's `require` says.
//! - **A keyless certificate must embed an SCT** from a CT log the trust
//!   root names (`sct.rs`), as cosign, sigstore-python and sigstore-go
//!   require: a certificate never logged cannot be audited.
//! - Not supported (refused with the reason): Rekor v2 entries and RFC 3161
//!   timestamps (no signed integration time), Ed25519 and RSA keys, and
//!   cosign's older blob bundle format.

mod bundle;
mod certificate;
mod cosign;
mod error;
mod identity;
mod public_key;
mod sct;
mod signed;
mod transparency;
mod trust_root;

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use error::SignatureError;
pub use identity::{IdentityPolicy, SubjectPattern};
pub use public_key::PublicKey;
pub use trust_root::TrustRoot;

use public_key::hex;
use signed::{CoverError, Signed};
use transparency::Expected;

/// What a signature verification established: recorded with the pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// `key` (a public key the operator pinned) or `keyless` (a
    /// certificate chaining to the pinned trust root).
    pub kind: SignatureKind,
    /// Who signed: the certificate's identity (email or URI) for keyless,
    /// the key's fingerprint (`sha256:` of its public key) for a key.
    pub signer: String,
    /// The certificate's OIDC issuer (keyless only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The digest the signature covers (`sha256:…`): the file for https,
    /// the manifest for OCI.
    pub digest: String,
}

/// How a signature was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureKind {
    Key,
    Keyless,
}

/// Signature material found for an artifact, for the verifier to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Material {
    /// A file the operator named (`--signature`, a lockfile's `signature`):
    /// a Sigstore bundle (JSON) or a cosign signature (base64).
    Named { bytes: Vec<u8>, from: String },
    /// One layer of a cosign signature manifest stored beside the image
    /// (`sha256-<hex>.sig`): its simple-signing payload and its annotations
    /// (`dev.cosignproject.cosign/signature`, `dev.sigstore.cosign/certificate`,
    /// `dev.sigstore.cosign/chain`, `dev.sigstore.cosign/bundle`).
    OciLayer {
        payload: Vec<u8>,
        annotations: BTreeMap<String, String>,
    },
    /// A Sigstore bundle attached to the manifest as an OCI referrer.
    OciBundle { bytes: Vec<u8> },
}

impl Material {
    /// Where the material came from, for messages.
    pub fn describe(&self) -> String {
        match self {
            Material::Named { from, .. } => from.clone(),
            Material::OciLayer { .. } => "the registry's cosign signature".into(),
            Material::OciBundle { .. } => "the registry's Sigstore bundle".into(),
        }
    }
}

/// A signer the operator trusts.
#[derive(Debug, Clone)]
pub enum TrustedSigner {
    /// A cosign public key.
    Key(PublicKey),
    /// A keyless identity under a trust root.
    Identity(IdentityPolicy),
}

impl TrustedSigner {
    /// The signer as a policy line, for messages.
    pub fn describe(&self) -> String {
        match self {
            TrustedSigner::Key(key) => format!("key {}", key.fingerprint()),
            TrustedSigner::Identity(policy) => format!(
                "identity {} from {}",
                policy.subject.as_str(),
                policy.issuer
            ),
        }
    }
}

/// Verify `material` for the artifact whose digest is `digest`
/// (`sha256:<hex>`) against the trusted `signers`: `Ok` with what was
/// established when one of them accepts it.
pub fn verify(
    material: &Material,
    digest: &str,
    signers: &[TrustedSigner],
) -> Result<Verified, SignatureError> {
    let artifact = parse_digest(digest)?;
    let from = material.describe();
    let malformed = |reason: String| SignatureError::Malformed {
        from: from.clone(),
        reason,
    };
    let signed = match material {
        Material::Named { bytes, .. } if looks_like_json(bytes) => bundle::decode(bytes, &from),
        Material::Named { bytes, .. } => cosign::decode_blob_signature(bytes, &from),
        Material::OciBundle { bytes } => bundle::decode(bytes, &from),
        Material::OciLayer {
            payload,
            annotations,
        } => cosign::decode_layer(payload, annotations, &from),
    }
    .map_err(malformed)?;
    match signed.check_covers(&artifact) {
        Ok(()) => {}
        Err(CoverError::Other(signed)) => {
            return Err(SignatureError::OtherDigest {
                from,
                signed,
                expected: format!("sha256:{}", hex(&artifact)),
            });
        }
        Err(CoverError::Unreadable(reason)) => return Err(malformed(reason)),
    }
    let mut reasons = Vec::new();
    for signer in signers {
        match accept(signer, &signed, &artifact) {
            Ok(verified) => return Ok(verified),
            Err(reason) => reasons.push(format!("{}: {reason}", signer.describe())),
        }
    }
    if reasons.is_empty() {
        reasons.push("no trusted signer is configured".into());
    }
    Err(SignatureError::Untrusted {
        from: signed.from,
        reasons,
    })
}

fn accept(
    signer: &TrustedSigner,
    signed: &Signed,
    artifact: &[u8; 32],
) -> Result<Verified, String> {
    let digest = format!("sha256:{}", hex(artifact));
    match signer {
        TrustedSigner::Key(key) => {
            if signed.certificate.is_some() {
                return Err(
                    "the signature was made with a certificate (keyless), not a key".into(),
                );
            }
            signed.check_signature(key, artifact)?;
            Ok(Verified {
                kind: SignatureKind::Key,
                signer: key.fingerprint().to_string(),
                issuer: None,
                digest,
            })
        }
        TrustedSigner::Identity(policy) => {
            let cert = signed
                .certificate
                .as_deref()
                .ok_or("the signature carries no certificate (it was made with a key)")?;
            let key = certificate::public_key(cert)?;
            signed.check_signature(&key, artifact).map_err(|_| {
                "the signature does not verify with its certificate's key (it was altered)"
                    .to_string()
            })?;
            let entry = signed.log_entries.first().ok_or(
                "the signature has no transparency-log entry, so when it was made cannot be known",
            )?;
            let integrated = entry.verify(&policy.trust_root)?;
            entry.check_body(&Expected {
                kind: signed.expected_log_body(artifact),
                signature: &signed.signature,
                certificate: Some(cert),
            })?;
            certificate::verify_chain(cert, &policy.trust_root, integrated)?;
            let identity = certificate::identity(cert)?;
            let issuer = identity.issuer.unwrap_or_default();
            if issuer != policy.issuer {
                return Err(format!(
                    "the certificate's issuer is {issuer:?}, not {:?}",
                    policy.issuer
                ));
            }
            if !policy.subject.matches(&identity.subject) {
                return Err(format!(
                    "the certificate's identity {:?} does not match the pattern {:?}",
                    identity.subject,
                    policy.subject.as_str()
                ));
            }
            Ok(Verified {
                kind: SignatureKind::Keyless,
                signer: identity.subject,
                issuer: Some(issuer),
                digest,
            })
        }
    }
}

fn parse_digest(digest: &str) -> Result<[u8; 32], SignatureError> {
    let bad = || SignatureError::Digest(digest.to_string());
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(bytes)
}

fn looks_like_json(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{')
}
