//! Certificate Transparency: the signed certificate timestamp (SCT) a
//! Fulcio certificate embeds, checked offline against the trust root's CT
//! logs (RFC 6962 section 3.2, precertificate entries).
//!
//! Why: Fulcio submits every certificate to a CT log before issuing it, so
//! a certificate without a valid SCT is one nobody can audit (a CA key
//! misused, a Fulcio bug). cosign, sigstore-python and sigstore-go refuse
//! such certificates by default; so does this verifier. One SCT from a log
//! the trust root names, valid when it was made, suffices.
//!
//! The SCT signs the *precertificate*: the leaf's TBSCertificate without
//! the SCT list extension, and the SHA-256 of the issuing CA's public key.
//! That TBS is rebuilt here by removing the one extension from the DER.

use x509_parser::prelude::{FromDer as _, ParsedExtension, X509Certificate};

use super::public_key::hex;
use super::transparency::show_time;
use super::trust_root::{Log, sha2_256};

/// 1.3.6.1.4.1.11129.2.4.2, the embedded SCT list extension.
const SCT_LIST: &str = "1.3.6.1.4.1.11129.2.4.2";
/// The same OID as a DER TLV (what an `Extension` SEQUENCE starts with).
const SCT_LIST_DER: &[u8] = &[
    0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02,
];
/// RFC 5246's SignatureAlgorithm `ecdsa`.
const ECDSA: u8 = 3;

/// Check that `leaf` (DER) embeds an SCT from one of `logs` over it as a
/// precertificate issued by the key `issuer_spki` (DER).
pub(crate) fn verify_embedded(leaf: &[u8], issuer_spki: &[u8], logs: &[Log]) -> Result<(), String> {
    let (_, cert) = X509Certificate::from_der(leaf)
        .map_err(|_| "the signing certificate is not a DER X.509 certificate".to_string())?;
    let mut scts = None;
    for extension in cert.iter_extensions() {
        if extension.oid.to_id_string() == SCT_LIST {
            match extension.parsed_extension() {
                ParsedExtension::SCT(list) => scts = Some(list.clone()),
                _ => return Err("the signing certificate's SCT list cannot be read".into()),
            }
        }
    }
    let scts = scts.ok_or(
        "the signing certificate carries no signed certificate timestamp (SCT): it was never \
         logged in a certificate transparency log",
    )?;
    let tbs = precertificate_tbs(cert.tbs_certificate.as_ref())
        .ok_or("the signing certificate's TBS cannot be read as DER")?;
    let issuer_key_hash = sha2_256(issuer_spki);
    let mut reasons = Vec::new();
    for sct in &scts {
        let Some(log) = logs.iter().find(|log| log.id == sct.id.key_id) else {
            reasons.push(format!(
                "an SCT is from a CT log the trust root does not name (log id {})",
                hex(sct.id.key_id)
            ));
            continue;
        };
        if sct.version.0 != 0 || sct.signature.sign_alg_id != ECDSA {
            reasons.push("an SCT is not a version 1 ECDSA timestamp".into());
            continue;
        }
        let at = i64::try_from(sct.timestamp / 1000).unwrap_or(i64::MAX);
        if !log.valid.contains(at) {
            reasons.push(format!(
                "the CT log {} key was not valid at the SCT's time {}",
                log.base_url,
                show_time(at)
            ));
            continue;
        }
        let (Ok(tbs_len), Ok(ext_len)) = (
            u32::try_from(tbs.len()),
            u16::try_from(sct.extensions.0.len()),
        ) else {
            reasons.push("an SCT or its certificate is too large".into());
            continue;
        };
        // RFC 6962 3.2: version, signature_type = certificate_timestamp,
        // timestamp, entry_type = precert_entry, issuer_key_hash,
        // tbs_certificate<1..2^24-1>, extensions<0..2^16-1>.
        let mut signed = vec![0u8, 0u8];
        signed.extend_from_slice(&sct.timestamp.to_be_bytes());
        signed.extend_from_slice(&[0, 1]);
        signed.extend_from_slice(&issuer_key_hash);
        signed.extend_from_slice(&tbs_len.to_be_bytes()[1..]);
        signed.extend_from_slice(&tbs);
        signed.extend_from_slice(&ext_len.to_be_bytes());
        signed.extend_from_slice(sct.extensions.0);
        match log.key.verify_message(&signed, sct.signature.data) {
            Ok(()) => return Ok(()),
            Err(_) => reasons.push(format!(
                "the SCT does not verify with the key of the CT log {}",
                log.base_url
            )),
        }
    }
    if reasons.is_empty() {
        reasons.push("its SCT list is empty".into());
    }
    Err(format!(
        "the signing certificate's certificate transparency proof does not hold: {}",
        reasons.join("; ")
    ))
}

/// The TBSCertificate (DER) without the SCT list extension: what the CT
/// log signed.
fn precertificate_tbs(tbs: &[u8]) -> Option<Vec<u8>> {
    let (tag, fields, rest) = tlv(tbs)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(fields.len());
    let mut input = fields;
    while !input.is_empty() {
        let (tag, value, rest) = tlv(input)?;
        let whole = &input[..input.len() - rest.len()];
        if tag == 0xa3 {
            // [3] EXPLICIT Extensions ::= SEQUENCE OF Extension
            let (seq, mut extensions, after) = tlv(value)?;
            if seq != 0x30 || !after.is_empty() {
                return None;
            }
            let mut kept = Vec::with_capacity(extensions.len());
            while !extensions.is_empty() {
                let (tag, extension, next) = tlv(extensions)?;
                if tag != 0x30 {
                    return None;
                }
                if !extension.starts_with(SCT_LIST_DER) {
                    kept.extend_from_slice(&extensions[..extensions.len() - next.len()]);
                }
                extensions = next;
            }
            out.extend(encode(0xa3, &encode(0x30, &kept)));
        } else {
            out.extend_from_slice(whole);
        }
        input = rest;
    }
    Some(encode(0x30, &out))
}

/// One DER TLV: its tag (low tag numbers only), value and what follows.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b))
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

fn encode(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_lengths_round_trip_short_and_long() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let value = vec![7u8; len];
            let der = encode(0x04, &value);
            let (tag, read, rest) = tlv(&der).unwrap();
            assert_eq!((tag, read.len(), rest.len()), (0x04, len, 0));
        }
        // A length past the input, an indefinite length: not DER.
        assert!(tlv(&[0x04, 0x05, 1]).is_none());
        assert!(tlv(&[0x30, 0x80]).is_none());
    }
}
