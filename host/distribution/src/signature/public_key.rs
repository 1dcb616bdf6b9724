//! An ECDSA public key: the operator's cosign key, a Fulcio certificate's
//! key, a Rekor log's key.
//!
//! P-256 and P-384 (RustCrypto). P-256 is what cosign generates, Fulcio
//! issues and Rekor signs with; P-384 covers keys made otherwise. A
//! `hashedrekord` signature is over the artifact, and for a download the
//! verifier holds only the artifact's SHA-256: RustCrypto checks an ECDSA
//! signature against that digest directly (prehash), which ring cannot.

use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::{Digest as _, Sha256};

/// An ECDSA public key, with the fingerprint that names it.
#[derive(Clone)]
pub struct PublicKey {
    key: Curve,
    fingerprint: String,
}

#[derive(Clone)]
enum Curve {
    P256(p256::ecdsa::VerifyingKey),
    P384(p384::ecdsa::VerifyingKey),
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey")
            .field("curve", &self.curve_name())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl PublicKey {
    /// A `-----BEGIN PUBLIC KEY-----` PEM (what `cosign generate-key-pair`
    /// writes as `cosign.pub`).
    pub fn from_pem(text: &[u8]) -> Result<Self, String> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(text)
            .map_err(|_| "not a PEM file (expected -----BEGIN PUBLIC KEY-----)".to_string())?;
        if pem.label != "PUBLIC KEY" {
            return Err(format!(
                "the PEM block is a {:?}, not a PUBLIC KEY (give the public half, cosign.pub)",
                pem.label
            ));
        }
        Self::from_spki_der(&pem.contents)
    }

    /// A DER SubjectPublicKeyInfo.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, String> {
        let key = if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_der(der) {
            Curve::P256(key)
        } else if let Ok(key) = p384::ecdsa::VerifyingKey::from_public_key_der(der) {
            Curve::P384(key)
        } else {
            return Err("not an ECDSA P-256 or P-384 public key (the kinds accepted)".into());
        };
        // The fingerprint is of the key's canonical encoding (uncompressed
        // point), not of the bytes given: one key, one signer name,
        // however its file writes the point.
        let canonical = match &key {
            Curve::P256(key) => key.to_public_key_der(),
            Curve::P384(key) => key.to_public_key_der(),
        }
        .map_err(|e| format!("the public key cannot be encoded: {e}"))?;
        Ok(Self {
            key,
            fingerprint: fingerprint_of(canonical.as_bytes()),
        })
    }

    /// `sha256:` and the hex SHA-256 of the key's DER SubjectPublicKeyInfo
    /// (its uncompressed point, as `cosign generate-key-pair` writes it).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn curve_name(&self) -> &'static str {
        match self.key {
            Curve::P256(_) => "P-256",
            Curve::P384(_) => "P-384",
        }
    }

    /// Check a DER signature over `message` (hashed with the curve's hash).
    pub(crate) fn verify_message(&self, message: &[u8], signature: &[u8]) -> Result<(), String> {
        let not_der = |_| "the signature is not a DER ECDSA signature".to_string();
        let outcome = match &self.key {
            Curve::P256(key) => key.verify(
                message,
                &p256::ecdsa::DerSignature::from_bytes(signature).map_err(not_der)?,
            ),
            Curve::P384(key) => key.verify(
                message,
                &p384::ecdsa::DerSignature::from_bytes(signature).map_err(not_der)?,
            ),
        };
        outcome.map_err(|_| "the signature does not verify with this key".to_string())
    }

    /// Check a DER signature over a message known only by its SHA-256.
    pub(crate) fn verify_sha256(&self, digest: &[u8; 32], signature: &[u8]) -> Result<(), String> {
        match &self.key {
            Curve::P256(key) => {
                let sig = p256::ecdsa::DerSignature::from_bytes(signature)
                    .map_err(|_| "the signature is not a DER ECDSA signature".to_string())?;
                key.verify_prehash(digest, &sig)
                    .map_err(|_| "the signature does not verify with this key".to_string())
            }
            Curve::P384(_) => Err(
                "a P-384 key signs the SHA-384 of the artifact, and only its SHA-256 is known; \
                 sign with a P-256 key"
                    .into(),
            ),
        }
    }
}

/// The fingerprint of a DER SubjectPublicKeyInfo.
pub(crate) fn fingerprint_of(spki_der: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(spki_der)))
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
