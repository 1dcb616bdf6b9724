//! Sigstore bundles (JSON, v0.1 to v0.3), read with the official types
//! (`sigstore_protobuf_specs`) into a [`Signed`].
//!
//! v0.1 bundles carry an inclusion promise; from v0.2 the spec requires an
//! inclusion proof with its checkpoint as well, and a bundle of those
//! versions without them is refused. A DSSE envelope must hold exactly one signature (the spec's
//! rule).

use sigstore_protobuf_specs::dev::sigstore::bundle::v1::{Bundle, bundle, verification_material};
use sigstore_protobuf_specs::dev::sigstore::common::v1::HashAlgorithm;

use super::signed::{Content, Signed};
use super::transparency::{InclusionProof, LogEntry};

const MEDIA_TYPES: &[(&str, u8)] = &[
    ("application/vnd.dev.sigstore.bundle+json;version=0.1", 1),
    ("application/vnd.dev.sigstore.bundle+json;version=0.2", 2),
    ("application/vnd.dev.sigstore.bundle+json;version=0.3", 3),
    ("application/vnd.dev.sigstore.bundle.v0.3+json", 3),
];

/// Read a bundle; `Err` says why it is not one this verifier accepts.
pub(crate) fn decode(bytes: &[u8], from: &str) -> Result<Signed, String> {
    let _: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    // The generated types' deserializer ends in an `expect` (converting the
    // message it parsed by reflection into the concrete type); untrusted
    // bytes must not end the host, so a panic there is a refusal too.
    let bundle: Bundle = std::panic::catch_unwind(|| serde_json::from_slice::<Bundle>(bytes))
        .map_err(|_| "not a Sigstore bundle (its structure could not be converted)".to_string())?
        .map_err(|e| format!("not a Sigstore bundle: {e}"))?;
    let version = MEDIA_TYPES
        .iter()
        .find(|(media_type, _)| *media_type == bundle.media_type)
        .map(|(_, version)| *version)
        .ok_or_else(|| {
            format!(
                "its mediaType {:?} is not a Sigstore bundle version 0.1 to 0.3",
                bundle.media_type
            )
        })?;
    let material = bundle
        .verification_material
        .ok_or("it has no verificationMaterial")?;
    let certificate = match material.content {
        Some(verification_material::Content::Certificate(cert)) => Some(cert.raw_bytes),
        Some(verification_material::Content::X509CertificateChain(chain)) => Some(
            chain
                .certificates
                .into_iter()
                .next()
                .ok_or("its certificate chain is empty")?
                .raw_bytes,
        ),
        Some(verification_material::Content::PublicKey(_)) => None,
        None => return Err("it names neither a certificate nor a public key".into()),
    };
    let (content, signature) = match bundle.content {
        Some(bundle::Content::MessageSignature(message)) => {
            let digest = match message.message_digest {
                Some(hash) if hash.algorithm == HashAlgorithm::Sha2256 as i32 => Some(
                    <[u8; 32]>::try_from(hash.digest.as_slice())
                        .map_err(|_| "its message digest is not 32 bytes")?,
                ),
                Some(_) => return Err("its message digest is not SHA-256".into()),
                None => None,
            };
            (Content::Artifact(digest), message.signature)
        }
        Some(bundle::Content::DsseEnvelope(envelope)) => {
            let [signature] = <[_; 1]>::try_from(envelope.signatures)
                .map_err(|_| "its DSSE envelope must hold exactly one signature".to_string())?;
            (
                Content::Dsse {
                    payload_type: envelope.payload_type,
                    payload: envelope.payload,
                },
                signature.sig,
            )
        }
        None => return Err("it holds no signature".into()),
    };
    let log_entries: Vec<LogEntry> = material
        .tlog_entries
        .into_iter()
        .map(|entry| LogEntry {
            log_index: entry.log_index,
            log_id: entry.log_id.map(|id| id.key_id).unwrap_or_default(),
            integrated_time: entry.integrated_time,
            body: entry.canonicalized_body,
            promise: entry
                .inclusion_promise
                .map(|promise| promise.signed_entry_timestamp),
            proof: entry.inclusion_proof.map(|proof| InclusionProof {
                log_index: proof.log_index,
                tree_size: proof.tree_size,
                root_hash: proof.root_hash,
                hashes: proof.hashes,
                checkpoint: proof.checkpoint.map(|c| c.envelope),
            }),
        })
        .collect();
    if version >= 2 && log_entries.iter().any(|entry| entry.proof.is_none()) {
        return Err(format!(
            "it is a version 0.{version} bundle whose log entry has no inclusion proof"
        ));
    }
    // A proof without its checkpoint hashes up to a root the bundle itself
    // names: it proves nothing. The spec requires one from v0.2 on.
    if version >= 2
        && log_entries
            .iter()
            .any(|entry| entry.proof.as_ref().is_some_and(|p| p.checkpoint.is_none()))
    {
        return Err(format!(
            "it is a version 0.{version} bundle whose inclusion proof has no checkpoint (the \
             log's signature over the tree the proof leads to)"
        ));
    }
    Ok(Signed {
        from: from.to_string(),
        content,
        signature,
        certificate,
        log_entries,
    })
}
