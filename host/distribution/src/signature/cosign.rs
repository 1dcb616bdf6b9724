//! cosign's own formats: a `cosign sign-blob` signature (base64 DER ECDSA
//! over the file), and the layer of a cosign signature manifest
//! (`sha256-<hex>.sig`) in an OCI registry: a simple-signing payload, its
//! signature in the `dev.cosignproject.cosign/signature` annotation, and
//! for keyless signing the certificate and the log's signed entry
//! timestamp in `dev.sigstore.cosign/certificate` and `…/bundle`.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::signed::{Content, Signed};
use super::transparency::LogEntry;

pub(crate) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
pub(crate) const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
pub(crate) const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

/// A `cosign sign-blob --key` signature: base64 of a DER ECDSA signature.
pub(crate) fn decode_blob_signature(bytes: &[u8], from: &str) -> Result<Signed, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        "neither a Sigstore bundle (JSON) nor a base64 cosign signature".to_string()
    })?;
    let signature = BASE64.decode(text.trim()).map_err(|_| {
        "neither a Sigstore bundle (JSON) nor a base64 cosign signature".to_string()
    })?;
    Ok(Signed {
        from: from.to_string(),
        content: Content::Artifact(None),
        signature,
        certificate: None,
        log_entries: Vec::new(),
    })
}

/// One layer of a cosign signature manifest.
pub(crate) fn decode_layer(
    payload: &[u8],
    annotations: &BTreeMap<String, String>,
    from: &str,
) -> Result<Signed, String> {
    let signature = annotations
        .get(SIGNATURE_ANNOTATION)
        .ok_or_else(|| format!("the layer has no {SIGNATURE_ANNOTATION} annotation"))?;
    let signature = BASE64
        .decode(signature.trim())
        .map_err(|_| format!("its {SIGNATURE_ANNOTATION} annotation is not base64"))?;
    let certificate = match annotations.get(CERTIFICATE_ANNOTATION) {
        Some(pem) => Some(
            x509_parser::pem::parse_x509_pem(pem.as_bytes())
                .map_err(|_| {
                    format!("its {CERTIFICATE_ANNOTATION} annotation is not a PEM certificate")
                })?
                .1
                .contents,
        ),
        None => None,
    };
    let log_entries = match annotations.get(BUNDLE_ANNOTATION) {
        Some(json) => vec![rekor_bundle(json)?],
        None => Vec::new(),
    };
    Ok(Signed {
        from: from.to_string(),
        content: Content::SimpleSigning(payload.to_vec()),
        signature,
        certificate,
        log_entries,
    })
}

/// cosign's "rekor bundle": `{"SignedEntryTimestamp": b64, "Payload":
/// {"body": b64, "integratedTime": n, "logIndex": n, "logID": hex}}`.
fn rekor_bundle(json: &str) -> Result<LogEntry, String> {
    let bad = || format!("its {BUNDLE_ANNOTATION} annotation is not a cosign Rekor bundle");
    let value: serde_json::Value = serde_json::from_str(json).map_err(|_| bad())?;
    let payload = &value["Payload"];
    let body = payload["body"]
        .as_str()
        .and_then(|b| BASE64.decode(b).ok())
        .ok_or_else(bad)?;
    let log_id = payload["logID"]
        .as_str()
        .and_then(decode_hex)
        .ok_or_else(bad)?;
    Ok(LogEntry {
        log_index: payload["logIndex"].as_i64().ok_or_else(bad)?,
        log_id,
        integrated_time: payload["integratedTime"].as_i64().ok_or_else(bad)?,
        body,
        promise: value["SignedEntryTimestamp"]
            .as_str()
            .and_then(|s| BASE64.decode(s).ok()),
        proof: None,
    })
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
