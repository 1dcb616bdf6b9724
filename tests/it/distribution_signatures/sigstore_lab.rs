//! A Sigstore of the test's own: a Fulcio CA, a Rekor log key, the
//! `trusted_root.json` naming them, cosign key pairs, and signatures in the
//! formats cosign writes (a `sign-blob` base64 signature, v0.3 bundles with
//! a message signature or a DSSE statement, an OCI simple-signing layer).
//!
//! Shared by the distribution crate's unit tests (included by path) and the
//! `it` tests, so it uses only rcgen, ring, base64, serde_json and sha2.
//! Every log entry is a one-leaf tree with a signed checkpoint, as Rekor
//! answers for its first entry, so inclusion proofs are real proofs.

#![allow(dead_code)]

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
use sha2::{Digest as _, Sha256};

/// 2025-03-01T00:00:00Z: when the test certificates start.
pub const CERT_START: i64 = 1_740_787_200;
/// 2025-03-01T12:00:00Z: the log's integration time of a good signature.
pub const SIGNED_AT: i64 = CERT_START + 12 * 3600;
/// 2025-03-05T00:00:00Z: after every leaf certificate expired.
pub const AFTER_EXPIRY: i64 = CERT_START + 4 * 86_400;

pub const ISSUER: &str = "https://issuer.example";
pub const SUBJECT: &str =
    "https://github.com/acme/modules/.github/workflows/release.yml@refs/tags/v1";

/// An ECDSA P-256 key pair (what `cosign generate-key-pair` makes).
pub struct KeyPair {
    rcgen: rcgen::KeyPair,
    ring: EcdsaKeyPair,
}

impl KeyPair {
    pub fn generate() -> Self {
        let rcgen = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let ring = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &rcgen.serialize_der(),
            &SystemRandom::new(),
        )
        .unwrap();
        Self { rcgen, ring }
    }

    /// A DER ECDSA signature over `message` (SHA-256).
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.ring
            .sign(&SystemRandom::new(), message)
            .unwrap()
            .as_ref()
            .to_vec()
    }

    pub fn spki_der(&self) -> Vec<u8> {
        use rcgen::PublicKeyData as _;
        self.rcgen.subject_public_key_info()
    }

    /// `cosign.pub`.
    pub fn public_pem(&self) -> String {
        pem("PUBLIC KEY", &self.spki_der())
    }

    /// `sha256:` of the SPKI DER: what the pin records as the signer.
    pub fn fingerprint(&self) -> String {
        format!("sha256:{}", hex(&Sha256::digest(self.spki_der())))
    }
}

/// Who a leaf certificate is for, and when it is valid.
#[derive(Clone)]
pub struct Leaf {
    pub subject: String,
    pub issuer: String,
    pub not_before: i64,
    pub not_after: i64,
    /// The log's integration time.
    pub signed_at: i64,
    /// Attack knobs (a CA the test trusts may be made to issue what a
    /// Fulcio never would): a leaf that is a CA, one not for code signing,
    /// one whose key usage is not digital signature.
    pub ca: bool,
    pub code_signing: bool,
    pub digital_signature: bool,
    /// The deprecated v1 issuer extension (1.3.6.1.4.1.57264.1.1), raw.
    pub issuer_v1: Option<String>,
    /// Embed a signed certificate timestamp from the lab's CT log, as
    /// Fulcio does (false: a certificate never logged).
    pub sct: bool,
}

impl Default for Leaf {
    fn default() -> Self {
        Self {
            subject: SUBJECT.into(),
            issuer: ISSUER.into(),
            not_before: CERT_START,
            not_after: CERT_START + 86_400,
            signed_at: SIGNED_AT,
            ca: false,
            code_signing: true,
            digital_signature: true,
            issuer_v1: None,
            sct: true,
        }
    }
}

/// A Fulcio CA, a Rekor log and a certificate transparency log.
pub struct Sigstore {
    ca_key: rcgen::KeyPair,
    ca_params: rcgen::CertificateParams,
    ca_der: Vec<u8>,
    rekor: KeyPair,
    ctlog: KeyPair,
}

impl Sigstore {
    pub fn new() -> Self {
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test fulcio");
        ca_params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        ca_params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let ca_der = ca_params.self_signed(&ca_key).unwrap().der().to_vec();
        Self {
            ca_key,
            ca_params,
            ca_der,
            rekor: KeyPair::generate(),
            ctlog: KeyPair::generate(),
        }
    }

    /// The `trusted_root.json` naming this CA and log.
    pub fn trusted_root(&self) -> String {
        let log_id = BASE64.encode(Sha256::digest(self.rekor.spki_der()));
        serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{
                "baseUrl": "https://rekor.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": BASE64.encode(self.rekor.spki_der()),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"}
                },
                "logId": {"keyId": log_id}
            }],
            "certificateAuthorities": [{
                "subject": {"organization": "test", "commonName": "test fulcio"},
                "uri": "https://fulcio.test",
                "certChain": {"certificates": [{"rawBytes": BASE64.encode(&self.ca_der)}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"}
            }],
            "ctlogs": [{
                "baseUrl": "https://ctfe.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": BASE64.encode(self.ctlog.spki_der()),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"}
                },
                "logId": {"keyId": BASE64.encode(Sha256::digest(self.ctlog.spki_der()))}
            }],
            "timestampAuthorities": []
        })
        .to_string()
    }

    /// A Fulcio-style leaf: the identity in the SAN, the issuer in
    /// 1.3.6.1.4.1.57264.1.8, code signing, for `key`.
    pub fn leaf(&self, key: &KeyPair, leaf: &Leaf) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        let san = rcgen::string::Ia5String::try_from(leaf.subject.clone()).unwrap();
        params.subject_alt_names = vec![if leaf.subject.contains('@') {
            rcgen::SanType::Rfc822Name(san)
        } else {
            rcgen::SanType::URI(san)
        }];
        params.key_usages = vec![if leaf.digital_signature {
            rcgen::KeyUsagePurpose::DigitalSignature
        } else {
            rcgen::KeyUsagePurpose::KeyEncipherment
        }];
        params.extended_key_usages = vec![if leaf.code_signing {
            rcgen::ExtendedKeyUsagePurpose::CodeSigning
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        if leaf.ca {
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        // rcgen's times are the `time` crate's; from the epoch by a duration.
        let at = |unix: i64| {
            rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(unix as u64)
        };
        params.not_before = at(leaf.not_before);
        params.not_after = at(leaf.not_after);
        let mut issuer = vec![0x0c, leaf.issuer.len() as u8];
        issuer.extend_from_slice(leaf.issuer.as_bytes());
        params.custom_extensions = vec![rcgen::CustomExtension::from_oid_content(
            &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
            issuer,
        )];
        if let Some(v1) = &leaf.issuer_v1 {
            params
                .custom_extensions
                .push(rcgen::CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 4, 1, 57264, 1, 1],
                    v1.as_bytes().to_vec(),
                ));
        }
        let ca = rcgen::Issuer::from_params(&self.ca_params, &self.ca_key);
        if leaf.sct {
            // As Fulcio: the CT log signs the precertificate (this TBS, the
            // SCT extension not yet in it), then the SCT goes in last.
            // rcgen is deterministic (serial and key ids from the key).
            let precert = params.signed_by(&key.rcgen, &ca).unwrap().der().to_vec();
            let extension = self.sct_extension(first_inner_tlv(&precert), leaf.not_before);
            params
                .custom_extensions
                .push(rcgen::CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2],
                    extension,
                ));
        }
        params.signed_by(&key.rcgen, &ca).unwrap().der().to_vec()
    }

    /// The SCT list extension's content (an OCTET STRING holding RFC 6962's
    /// SignedCertificateTimestampList) for a precertificate `tbs`.
    fn sct_extension(&self, tbs: &[u8], at: i64) -> Vec<u8> {
        use rcgen::PublicKeyData as _;
        let timestamp = (at as u64 * 1000).to_be_bytes();
        let mut signed = vec![0u8, 0];
        signed.extend_from_slice(&timestamp);
        signed.extend_from_slice(&[0, 1]);
        signed.extend_from_slice(&Sha256::digest(self.ca_key.subject_public_key_info()));
        signed.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]);
        signed.extend_from_slice(tbs);
        signed.extend_from_slice(&[0, 0]);
        let signature = self.ctlog.sign(&signed);
        let mut sct = vec![0u8];
        sct.extend_from_slice(&Sha256::digest(self.ctlog.spki_der()));
        sct.extend_from_slice(&timestamp);
        sct.extend_from_slice(&[0, 0, 4, 3]);
        sct.extend_from_slice(&(signature.len() as u16).to_be_bytes());
        sct.extend_from_slice(&signature);
        let mut list = ((sct.len() + 2) as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&(sct.len() as u16).to_be_bytes());
        list.extend_from_slice(&sct);
        let mut content = vec![0x04];
        if list.len() < 0x80 {
            content.push(list.len() as u8);
        } else {
            content.push(0x82);
            content.extend_from_slice(&(list.len() as u16).to_be_bytes());
        }
        content.extend_from_slice(&list);
        content
    }

    /// A log entry for `body`, signed by this log at `signed_at`: the
    /// bundle's `tlogEntries[0]`.
    pub fn log_entry(
        &self,
        body: &serde_json::Value,
        kind: &str,
        signed_at: i64,
    ) -> serde_json::Value {
        let body = body.to_string();
        let log_id = Sha256::digest(self.rekor.spki_der());
        let log_index = 7;
        let set_payload = format!(
            r#"{{"body":"{}","integratedTime":{},"logID":"{}","logIndex":{}}}"#,
            BASE64.encode(&body),
            signed_at,
            hex(&log_id),
            log_index
        );
        let set = self.rekor.sign(set_payload.as_bytes());
        // A one-leaf tree: its root is the leaf hash, the path is empty.
        let mut leaf = vec![0u8];
        leaf.extend_from_slice(body.as_bytes());
        let root = Sha256::digest(&leaf);
        let note = format!("rekor.test - 1\n1\n{}\n", BASE64.encode(root));
        let mut note_sig = log_id[..4].to_vec();
        note_sig.extend(self.rekor.sign(note.as_bytes()));
        let checkpoint = format!("{note}\n\u{2014} rekor.test {}\n", BASE64.encode(note_sig));
        serde_json::json!({
            "logIndex": log_index.to_string(),
            "logId": {"keyId": BASE64.encode(log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": signed_at.to_string(),
            "inclusionPromise": {"signedEntryTimestamp": BASE64.encode(set)},
            "inclusionProof": {
                "logIndex": "0",
                "rootHash": BASE64.encode(root),
                "treeSize": "1",
                "hashes": [],
                "checkpoint": {"envelope": checkpoint}
            },
            "canonicalizedBody": BASE64.encode(&body)
        })
    }

    /// `cosign sign-blob --bundle` (keyless): a v0.3 bundle whose content
    /// is a message signature over `artifact`.
    pub fn blob_bundle(&self, artifact: &[u8], leaf: &Leaf) -> serde_json::Value {
        let key = KeyPair::generate();
        let cert = self.leaf(&key, leaf);
        let signature = key.sign(artifact);
        let digest = Sha256::digest(artifact);
        let body = hashedrekord(&digest, &signature, &pem("CERTIFICATE", &cert));
        serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": BASE64.encode(&cert)},
                "tlogEntries": [self.log_entry(&body, "hashedrekord", leaf.signed_at)]
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": BASE64.encode(digest)},
                "signature": BASE64.encode(&signature)
            }
        })
    }

    /// `cosign sign` (keyless, new bundle format) of an OCI manifest: a v0.3
    /// bundle with a DSSE in-toto statement naming `manifest_digest`.
    pub fn image_bundle(&self, manifest_digest: &str, leaf: &Leaf) -> serde_json::Value {
        let key = KeyPair::generate();
        let cert = self.leaf(&key, leaf);
        let hex_digest = manifest_digest.trim_start_matches("sha256:");
        let statement = serde_json::json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"digest": {"sha256": hex_digest}, "annotations": {}}],
            "predicateType": "https://sigstore.dev/cosign/sign/v1"
        })
        .to_string();
        let payload_type = "application/vnd.in-toto+json";
        let mut pae = format!(
            "DSSEv1 {} {} {} ",
            payload_type.len(),
            payload_type,
            statement.len()
        )
        .into_bytes();
        pae.extend_from_slice(statement.as_bytes());
        let signature = key.sign(&pae);
        let body = serde_json::json!({
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hex(&Sha256::digest(b"envelope"))},
                "payloadHash": {"algorithm": "sha256", "value": hex(&Sha256::digest(statement.as_bytes()))},
                "signatures": [{
                    "signature": BASE64.encode(&signature),
                    "verifier": BASE64.encode(pem("CERTIFICATE", &cert))
                }]
            }
        });
        serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": BASE64.encode(&cert)},
                "tlogEntries": [self.log_entry(&body, "dsse", leaf.signed_at)]
            },
            "dsseEnvelope": {
                "payload": BASE64.encode(statement.as_bytes()),
                "payloadType": payload_type,
                "signatures": [{"sig": BASE64.encode(&signature), "keyid": ""}]
            }
        })
    }

    /// `cosign sign` (keyless, legacy format) of an OCI manifest: the
    /// simple-signing payload and the layer's annotations.
    pub fn image_layer(
        &self,
        manifest_digest: &str,
        leaf: &Leaf,
    ) -> (Vec<u8>, BTreeMap<String, String>) {
        let key = KeyPair::generate();
        let cert = self.leaf(&key, leaf);
        let payload = simple_signing_payload(manifest_digest);
        let signature = key.sign(&payload);
        let cert_pem = pem("CERTIFICATE", &cert);
        let body = hashedrekord(&Sha256::digest(&payload), &signature, &cert_pem);
        let entry = self.log_entry(&body, "hashedrekord", leaf.signed_at);
        let rekor_bundle = serde_json::json!({
            "SignedEntryTimestamp": entry["inclusionPromise"]["signedEntryTimestamp"],
            "Payload": {
                "body": entry["canonicalizedBody"],
                "integratedTime": leaf.signed_at,
                "logIndex": 7,
                "logID": hex(&Sha256::digest(self.rekor.spki_der()))
            }
        });
        let annotations = BTreeMap::from([
            (
                "dev.cosignproject.cosign/signature".to_string(),
                BASE64.encode(&signature),
            ),
            ("dev.sigstore.cosign/certificate".to_string(), cert_pem),
            (
                "dev.sigstore.cosign/bundle".to_string(),
                rekor_bundle.to_string(),
            ),
        ]);
        (payload, annotations)
    }
}

/// `cosign sign --key` of an OCI manifest: payload and annotations.
pub fn keyed_image_layer(
    key: &KeyPair,
    manifest_digest: &str,
) -> (Vec<u8>, BTreeMap<String, String>) {
    let payload = simple_signing_payload(manifest_digest);
    let signature = key.sign(&payload);
    let annotations = BTreeMap::from([(
        "dev.cosignproject.cosign/signature".to_string(),
        BASE64.encode(signature),
    )]);
    (payload, annotations)
}

/// `cosign sign-blob --key cosign.key FILE`: base64 of the DER signature.
pub fn blob_signature(key: &KeyPair, artifact: &[u8]) -> String {
    BASE64.encode(key.sign(artifact))
}

/// cosign's simple-signing payload for an image manifest.
pub fn simple_signing_payload(manifest_digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": "registry.test/modules/echo"},
            "image": {"docker-manifest-digest": manifest_digest},
            "type": "cosign container image signature"
        },
        "optional": null
    })
    .to_string()
    .into_bytes()
}

fn hashedrekord(digest: &[u8], signature: &[u8], cert_pem: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hex(digest)}},
            "signature": {
                "content": BASE64.encode(signature),
                "publicKey": {"content": BASE64.encode(cert_pem)}
            }
        }
    })
}

/// The first TLV inside a DER SEQUENCE (a certificate's TBSCertificate).
fn first_inner_tlv(der: &[u8]) -> &[u8] {
    fn header(der: &[u8]) -> (usize, usize) {
        match der[1] {
            short if short < 0x80 => (2, usize::from(short)),
            long => {
                let count = usize::from(long & 0x7f);
                let len = der[2..2 + count]
                    .iter()
                    .fold(0, |len, b| (len << 8) | usize::from(*b));
                (2 + count, len)
            }
        }
    }
    let (outer, _) = header(der);
    let inner = &der[outer..];
    let (head, len) = header(inner);
    &inner[..head + len]
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = BASE64.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}
