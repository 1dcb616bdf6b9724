//! A Rekor transparency-log entry, checked offline against the trust root.
//!
//! What is checked, and why:
//! - **The signed entry timestamp (inclusion promise) is required.** It is
//!   the log's signature over the entry's body, index and integration time,
//!   and the only thing that authenticates the time at which a short-lived
//!   Fulcio certificate must have been valid. An entry without one (Rekor
//!   v2, which relies on RFC 3161 timestamps this verifier does not read)
//!   is refused with that reason.
//! - **An inclusion proof, when present, must hold:** the entry's leaf
//!   hashes up to the proof's root (RFC 9162), and the checkpoint (a signed
//!   note) is signed by the same log and names that root and size.
//! - **The body must describe this signature:** a `hashedrekord` names the
//!   signed digest, the signature and the certificate; a `dsse` entry the
//!   payload's digest, the signature and the certificate. Otherwise a valid
//!   entry for something else could vouch for these bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::public_key::hex;
use super::trust_root::{TrustRoot, sha2_256};

/// One log entry, from a bundle or from cosign's `dev.sigstore.cosign/bundle`
/// annotation.
#[derive(Debug, Clone)]
pub(crate) struct LogEntry {
    pub(crate) log_index: i64,
    pub(crate) log_id: Vec<u8>,
    pub(crate) integrated_time: i64,
    /// The canonicalized body the log stored (JSON).
    pub(crate) body: Vec<u8>,
    /// The signed entry timestamp.
    pub(crate) promise: Option<Vec<u8>>,
    pub(crate) proof: Option<InclusionProof>,
}

#[derive(Debug, Clone)]
pub(crate) struct InclusionProof {
    pub(crate) log_index: i64,
    pub(crate) tree_size: i64,
    pub(crate) root_hash: Vec<u8>,
    pub(crate) hashes: Vec<Vec<u8>>,
    pub(crate) checkpoint: Option<String>,
}

/// What the entry's body must say.
#[derive(Debug)]
pub(crate) struct Expected<'a> {
    pub(crate) kind: ExpectedKind,
    pub(crate) signature: &'a [u8],
    /// The signing certificate (DER), or `None` for a key signature.
    pub(crate) certificate: Option<&'a [u8]>,
}

#[derive(Debug)]
pub(crate) enum ExpectedKind {
    /// `hashedrekord`: the SHA-256 of what was signed.
    Hashed([u8; 32]),
    /// `dsse`: the SHA-256 of the envelope's payload.
    Dsse([u8; 32]),
}

impl LogEntry {
    /// Check the entry against the trust root's logs; return the
    /// integration time it authenticates (Unix seconds).
    pub(crate) fn verify(&self, root: &TrustRoot) -> Result<i64, String> {
        let log = root.log(&self.log_id).ok_or_else(|| {
            format!(
                "the log entry is from a transparency log the trust root {} does not name (log id {})",
                root.name(),
                hex(&self.log_id)
            )
        })?;
        let promise = self.promise.as_ref().ok_or(
            "the log entry carries no signed entry timestamp (inclusion promise), so the signing \
             time cannot be established offline",
        )?;
        // The log signs the canonical JSON (RFC 8785) of these four fields;
        // keys sorted, no whitespace; none of the values needs escaping.
        let signed = format!(
            r#"{{"body":"{}","integratedTime":{},"logID":"{}","logIndex":{}}}"#,
            BASE64.encode(&self.body),
            self.integrated_time,
            hex(&self.log_id),
            self.log_index
        );
        log.key.verify_message(signed.as_bytes(), promise).map_err(|_| {
            format!(
                "the signed entry timestamp does not verify with the key of the log {}: the entry \
                 was altered or not made by that log",
                log.base_url
            )
        })?;
        if !log.valid.contains(self.integrated_time) {
            return Err(format!(
                "the log {} key was not valid at the entry's integration time {}",
                log.base_url,
                show_time(self.integrated_time)
            ));
        }
        if let Some(proof) = &self.proof {
            proof.verify(&self.body, log)?;
        }
        Ok(self.integrated_time)
    }

    /// Check that the body describes this signature.
    pub(crate) fn check_body(&self, expected: &Expected<'_>) -> Result<(), String> {
        let body: serde_json::Value = serde_json::from_slice(&self.body)
            .map_err(|_| "the log entry's body is not JSON".to_string())?;
        let kind = body["kind"].as_str().unwrap_or_default();
        let spec = &body["spec"];
        let mismatch =
            |what: &str| format!("the log entry's {what} does not match the signature's");
        match &expected.kind {
            ExpectedKind::Hashed(hash) => {
                if kind != "hashedrekord" {
                    return Err(format!(
                        "the log entry is a {kind:?}, expected a hashedrekord"
                    ));
                }
                let data = &spec["data"]["hash"];
                if data["algorithm"].as_str() != Some("sha256")
                    || data["value"].as_str() != Some(hex(hash).as_str())
                {
                    return Err(mismatch("digest"));
                }
                if decode(&spec["signature"]["content"]).as_deref() != Some(expected.signature) {
                    return Err(mismatch("signature"));
                }
                if let Some(cert) = expected.certificate {
                    let named = decode(&spec["signature"]["publicKey"]["content"])
                        .and_then(|pem| pem_der(&pem));
                    if named.as_deref() != Some(cert) {
                        return Err(mismatch("certificate"));
                    }
                }
            }
            ExpectedKind::Dsse(payload_hash) => {
                if kind != "dsse" {
                    return Err(format!(
                        "the log entry is a {kind:?}, expected a dsse entry"
                    ));
                }
                let hash = &spec["payloadHash"];
                if hash["algorithm"].as_str() != Some("sha256")
                    || hash["value"].as_str() != Some(hex(payload_hash).as_str())
                {
                    return Err(mismatch("payload digest"));
                }
                let signatures = spec["signatures"].as_array().cloned().unwrap_or_default();
                let found = signatures.iter().any(|entry| {
                    decode(&entry["signature"]).as_deref() == Some(expected.signature)
                        && expected.certificate.is_none_or(|cert| {
                            decode(&entry["verifier"])
                                .and_then(|pem| pem_der(&pem))
                                .as_deref()
                                == Some(cert)
                        })
                });
                if !found {
                    return Err(mismatch("signature or certificate"));
                }
            }
        }
        Ok(())
    }
}

impl InclusionProof {
    fn verify(&self, body: &[u8], log: &super::trust_root::Log) -> Result<(), String> {
        let bad = |why: &str| format!("the log entry's inclusion proof does not hold: {why}");
        let index = u64::try_from(self.log_index).map_err(|_| bad("a negative index"))?;
        let size = u64::try_from(self.tree_size).map_err(|_| bad("a negative tree size"))?;
        let mut leaf = vec![0u8];
        leaf.extend_from_slice(body);
        let path: Option<Vec<[u8; 32]>> = self
            .hashes
            .iter()
            .map(|h| <[u8; 32]>::try_from(h.as_slice()).ok())
            .collect();
        let path = path.ok_or_else(|| bad("a hash is not 32 bytes"))?;
        let root = root_from_inclusion(index, size, sha2_256(&leaf), &path)
            .ok_or_else(|| bad("its path does not fit the tree size"))?;
        if root.as_slice() != self.root_hash.as_slice() {
            return Err(bad("the entry does not hash up to the proof's root"));
        }
        if let Some(note) = &self.checkpoint {
            let checkpoint = verify_checkpoint(note, log).map_err(|why| bad(&why))?;
            if checkpoint.size != size || checkpoint.root != self.root_hash {
                return Err(bad("the checkpoint names another tree than the proof"));
            }
        }
        Ok(())
    }
}

/// RFC 9162 section 2.1.3.2: the root a leaf and its audit path lead to.
fn root_from_inclusion(
    index: u64,
    size: u64,
    leaf: [u8; 32],
    path: &[[u8; 32]],
) -> Option<[u8; 32]> {
    if index >= size {
        return None;
    }
    let node = |left: &[u8; 32], right: &[u8; 32]| {
        let mut bytes = Vec::with_capacity(65);
        bytes.push(1u8);
        bytes.extend_from_slice(left);
        bytes.extend_from_slice(right);
        sha2_256(&bytes)
    };
    let (mut fnode, mut snode, mut root) = (index, size - 1, leaf);
    for sibling in path {
        if snode == 0 {
            return None;
        }
        if fnode & 1 == 1 || fnode == snode {
            root = node(sibling, &root);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            root = node(&root, sibling);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    (snode == 0).then_some(root)
}

struct Checkpoint {
    size: u64,
    root: Vec<u8>,
}

/// A checkpoint is a signed note: `origin\nsize\nbase64(root)\n[extra]\n\n`
/// then lines `— name base64(key hint ‖ signature)`. One signature must be
/// the log's (key hint = the first four bytes of its log id).
fn verify_checkpoint(note: &str, log: &super::trust_root::Log) -> Result<Checkpoint, String> {
    let split = note
        .find("\n\n")
        .ok_or("the checkpoint is not a signed note")?;
    let (text, signatures) = (&note[..=split], &note[split + 2..]);
    let mut lines = text.lines();
    let (_origin, size, root) = (lines.next(), lines.next(), lines.next());
    let size: u64 = size
        .and_then(|s| s.parse().ok())
        .ok_or("the checkpoint has no tree size")?;
    let root = root
        .and_then(|r| BASE64.decode(r).ok())
        .ok_or("the checkpoint has no root hash")?;
    let signed_by_log = signatures.lines().any(|line| {
        let Some(rest) = line.strip_prefix("\u{2014} ") else {
            return false;
        };
        let Some(encoded) = rest.rsplit(' ').next() else {
            return false;
        };
        let Ok(bytes) = BASE64.decode(encoded) else {
            return false;
        };
        bytes.len() > 4
            && bytes[..4] == log.id[..4.min(log.id.len())]
            && log.key.verify_message(text.as_bytes(), &bytes[4..]).is_ok()
    });
    if !signed_by_log {
        return Err("the checkpoint is not signed by the log".into());
    }
    Ok(Checkpoint { size, root })
}

fn decode(value: &serde_json::Value) -> Option<Vec<u8>> {
    BASE64.decode(value.as_str()?).ok()
}

/// The DER inside a PEM block (a certificate or a public key).
fn pem_der(pem: &[u8]) -> Option<Vec<u8>> {
    x509_parser::pem::parse_x509_pem(pem)
        .ok()
        .map(|(_, pem)| pem.contents)
}

/// A Unix time as RFC 3339 (UTC), for messages.
pub(crate) fn show_time(seconds: i64) -> String {
    // Days to a civil date: Howard Hinnant's `civil_from_days`.
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(n: u8) -> [u8; 32] {
        sha2_256(&[0, n])
    }

    fn node(l: [u8; 32], r: [u8; 32]) -> [u8; 32] {
        let mut b = vec![1u8];
        b.extend_from_slice(&l);
        b.extend_from_slice(&r);
        sha2_256(&b)
    }

    #[test]
    fn times_read_as_rfc_3339() {
        assert_eq!(show_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(show_time(1_741_132_800), "2025-03-05T00:00:00Z");
        assert_eq!(show_time(951_825_599), "2000-02-29T11:59:59Z");
    }

    #[test]
    fn inclusion_proofs_of_a_five_leaf_tree_lead_to_its_root() {
        // RFC 9162's shape: ((ab)(cd))e.
        let [a, b, c, d, e] = [leaf(0), leaf(1), leaf(2), leaf(3), leaf(4)];
        let (ab, cd) = (node(a, b), node(c, d));
        let root = node(node(ab, cd), e);
        assert_eq!(root_from_inclusion(0, 5, a, &[b, cd, e]), Some(root));
        assert_eq!(root_from_inclusion(3, 5, d, &[c, ab, e]), Some(root));
        assert_eq!(root_from_inclusion(4, 5, e, &[node(ab, cd)]), Some(root));
        // Wrong index, short or long path: not this root.
        assert_ne!(root_from_inclusion(1, 5, a, &[b, cd, e]), Some(root));
        assert_eq!(root_from_inclusion(0, 5, a, &[b, cd]), None);
        assert_eq!(root_from_inclusion(4, 5, e, &[node(ab, cd), a]), None);
        assert_eq!(root_from_inclusion(5, 5, e, &[]), None);
    }
}
