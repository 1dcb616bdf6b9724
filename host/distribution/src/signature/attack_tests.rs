//! The verifier attacked where Sigstore verifiers have failed before
//! (cosign, sigstore-python, sigstore-go advisories): log entries and
//! proofs that vouch for nothing, certificates outside the Fulcio profile,
//! trust-root validity windows, issuer extensions, DSSE and digest-algorithm
//! confusion. Each test is the attack; each must be refused, naming why.
//!
//! The test Sigstore is `tests/it/distribution_signatures/sigstore_lab.rs`
//! (its CA is trusted, so it can be made to issue what Fulcio never would).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::*;

// The lab is loaded once, by `tests.rs` (a file may be one module only).
use super::tests::lab::{self, Leaf, Sigstore};

const MODULE: &[u8] = b"the bytes of a module archive";

fn named(bundle: &serde_json::Value) -> Material {
    Material::Named {
        bytes: bundle.to_string().into_bytes(),
        from: "module.sigstore.json".into(),
    }
}

fn signer_with_root(root: &str) -> TrustedSigner {
    TrustedSigner::Identity(IdentityPolicy {
        issuer: lab::ISSUER.into(),
        subject: SubjectPattern::new(&regex::escape(lab::SUBJECT)).unwrap(),
        trust_root: Arc::new(TrustRoot::from_json(root.as_bytes(), "trusted_root.json").unwrap()),
    })
}

fn signer(sigstore: &Sigstore) -> TrustedSigner {
    signer_with_root(&sigstore.trusted_root())
}

fn check(material: &Material, signer: &TrustedSigner) -> Result<Verified, String> {
    verify(
        material,
        &lab::sha256_digest(MODULE),
        std::slice::from_ref(signer),
    )
    .map_err(|e| e.to_string())
}

#[track_caller]
fn refused(material: &Material, signer: &TrustedSigner, reason: &str) {
    let error = check(material, signer).expect_err("the attack must be refused");
    assert!(error.contains(reason), "expected {reason:?} in: {error}");
}

/// The lab's bundles verify as made: every attack below is one change.
#[test]
fn the_unaltered_lab_bundle_verifies() {
    let sigstore = Sigstore::new();
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    check(&named(&bundle), &signer(&sigstore)).unwrap();
}

/// v0.2+ bundles must carry an inclusion proof *with its checkpoint*
/// (the bundle spec; sigstore-python and sigstore-go refuse without): a
/// proof without one leads to a root hash the bundle itself chose, so it
/// proves nothing while looking checked.
#[test]
fn a_v0_3_bundle_whose_inclusion_proof_has_no_checkpoint_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
        .as_object_mut()
        .unwrap()
        .remove("checkpoint");
    refused(&named(&bundle), &signer(&sigstore), "no checkpoint");
}

/// Fulcio's profile: the leaf's key usage is digital signature
/// (sigstore-python refuses otherwise); a certificate for key
/// encipherment is not a signing certificate.
#[test]
fn a_leaf_whose_key_usage_is_not_digital_signature_is_refused() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        digital_signature: false,
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf);
    refused(&named(&bundle), &signer(&sigstore), "digital signature");
}

#[test]
fn a_leaf_that_is_a_ca_is_refused() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        ca: true,
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf);
    refused(
        &named(&bundle),
        &signer(&sigstore),
        "does not chain to the trust root",
    );
}

#[test]
fn a_leaf_not_for_code_signing_is_refused() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        code_signing: false,
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf);
    refused(&named(&bundle), &signer(&sigstore), "not for code signing");
}

/// The deprecated v1 issuer extension naming the trusted issuer does not
/// stand in for a v2 extension naming another.
#[test]
fn a_v1_issuer_extension_does_not_override_the_v2_issuer() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        issuer: "https://accounts.evil.example".into(),
        issuer_v1: Some(lab::ISSUER.into()),
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf);
    refused(&named(&bundle), &signer(&sigstore), "accounts.evil.example");
}

fn root_with(sigstore: &Sigstore, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut root: serde_json::Value = serde_json::from_str(&sigstore.trusted_root()).unwrap();
    edit(&mut root);
    root.to_string()
}

/// A log key rotated out before the entry's time vouches for nothing.
#[test]
fn a_log_key_outside_its_validity_is_refused() {
    let sigstore = Sigstore::new();
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let root = root_with(&sigstore, |root| {
        root["tlogs"][0]["publicKey"]["validFor"]["end"] = "2025-02-01T00:00:00Z".into();
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "key was not valid at the entry's integration time",
    );
    let root = root_with(&sigstore, |root| {
        root["tlogs"][0]["publicKey"]["validFor"]["start"] = "2025-04-01T00:00:00Z".into();
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "key was not valid at the entry's integration time",
    );
}

/// A CA whose `validFor` ended before the signature issues nothing.
#[test]
fn a_certificate_authority_outside_its_validity_is_refused() {
    let sigstore = Sigstore::new();
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let root = root_with(&sigstore, |root| {
        root["certificateAuthorities"][0]["validFor"]["end"] = "2025-02-01T00:00:00Z".into();
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "was not valid at",
    );
}

/// Proof shapes that must never hold: an empty tree, an index at or past
/// the tree's size, a negative index.
#[test]
fn inclusion_proofs_of_impossible_trees_are_refused() {
    let sigstore = Sigstore::new();
    for (field, value) in [
        ("treeSize", "0"),
        ("logIndex", "1"),
        ("logIndex", "-1"),
        ("treeSize", "2"),
    ] {
        let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
        bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"][field] = value.into();
        refused(
            &named(&bundle),
            &signer(&sigstore),
            "inclusion proof does not hold",
        );
    }
}

/// A checkpoint is the log's signature over the tree: one signed by
/// another log (here a rogue's, over the very same one-leaf tree) is not.
#[test]
fn a_checkpoint_signed_by_another_log_is_refused() {
    let (sigstore, rogue) = (Sigstore::new(), Sigstore::new());
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let entry = &bundle["verificationMaterial"]["tlogEntries"][0];
    let body: serde_json::Value = serde_json::from_slice(
        &BASE64
            .decode(entry["canonicalizedBody"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let rogue_entry = rogue.log_entry(&body, "hashedrekord", lab::SIGNED_AT);
    bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"] =
        rogue_entry["inclusionProof"]["checkpoint"].clone();
    refused(
        &named(&bundle),
        &signer(&sigstore),
        "checkpoint is not signed by the log",
    );
}

/// DSSE payload-type confusion: the statement is the same, the type says
/// it is something else; the type is part of what was signed (PAE), and
/// only in-toto statements are read.
#[test]
fn a_dsse_envelope_of_another_payload_type_is_refused() {
    let sigstore = Sigstore::new();
    let manifest = lab::sha256_digest(MODULE);
    let mut bundle = sigstore.image_bundle(&manifest, &Leaf::default());
    bundle["dsseEnvelope"]["payloadType"] =
        "application/vnd.dev.cosign.simplesigning.v1+json".into();
    refused(
        &named(&bundle),
        &signer(&sigstore),
        "not an in-toto statement",
    );
    // Back to in-toto with a one-byte change in the type's case: the
    // signature is over the exact type.
    bundle["dsseEnvelope"]["payloadType"] = "application/vnd.in-toto+JSON".into();
    refused(
        &named(&bundle),
        &signer(&sigstore),
        "not an in-toto statement",
    );
}

/// A message digest of another algorithm naming the same bytes is not
/// taken as SHA-256.
#[test]
fn a_message_digest_of_another_algorithm_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    bundle["messageSignature"]["messageDigest"]["algorithm"] = "SHA2_384".into();
    refused(&named(&bundle), &signer(&sigstore), "not SHA-256");
}

/// The bundle's certificate swapped for another trusted identity's (same
/// CA): the log entry names the certificate that signed, so the identity
/// cannot be moved onto someone else's signature.
#[test]
fn a_certificate_swapped_for_another_identitys_is_refused() {
    let sigstore = Sigstore::new();
    let mallory = Leaf {
        subject: "https://github.com/mallory/x/.github/workflows/r.yml@refs/tags/v1".into(),
        ..Leaf::default()
    };
    let mut bundle = sigstore.blob_bundle(MODULE, &mallory);
    let trusted = sigstore.blob_bundle(MODULE, &Leaf::default());
    bundle["verificationMaterial"]["certificate"] =
        trusted["verificationMaterial"]["certificate"].clone();
    refused(&named(&bundle), &signer(&sigstore), "altered");
}

/// A certificate the CA issued but never logged in certificate
/// transparency (a misused CA key, a Fulcio bug): cosign, sigstore-python
/// and sigstore-go refuse it; so must this verifier.
#[test]
fn a_certificate_without_an_sct_is_refused() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        sct: false,
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf);
    refused(
        &named(&bundle),
        &signer(&sigstore),
        "no signed certificate timestamp",
    );
}

/// An SCT from a CT log the trust root does not name (here its key is
/// swapped for a rogue's), or from one whose key was not valid then.
#[test]
fn an_sct_from_an_untrusted_or_expired_ct_log_is_refused() {
    let (sigstore, rogue) = (Sigstore::new(), Sigstore::new());
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let rogue_root: serde_json::Value = serde_json::from_str(&rogue.trusted_root()).unwrap();
    let root = root_with(&sigstore, |root| {
        root["ctlogs"] = rogue_root["ctlogs"].clone();
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "from a CT log the trust root does not name",
    );
    let root = root_with(&sigstore, |root| {
        root["ctlogs"][0]["publicKey"]["validFor"]["end"] = "2025-02-01T00:00:00Z".into();
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "key was not valid at the SCT's time",
    );
    // Same log id, another key: the SCT's signature does not hold.
    let root = root_with(&sigstore, |root| {
        let id = root["ctlogs"][0]["logId"].clone();
        root["ctlogs"] = rogue_root["ctlogs"].clone();
        root["ctlogs"][0]["logId"] = id;
    });
    refused(
        &named(&bundle),
        &signer_with_root(&root),
        "SCT does not verify with the key of the CT log",
    );
}

/// A trust root without CT logs cannot vouch for a keyless signature: it
/// is refused when loaded, naming what is missing.
#[test]
fn a_trust_root_without_ct_logs_is_refused_at_load() {
    let sigstore = Sigstore::new();
    let root = root_with(&sigstore, |root| root["ctlogs"] = serde_json::json!([]));
    let error = TrustRoot::from_json(root.as_bytes(), "trusted_root.json")
        .unwrap_err()
        .to_string();
    assert!(error.contains("ctlogs"), "{error}");
}

/// The real cosign bundle (public-good Sigstore, see `tests.rs`) verifies
/// through its real SCT; with the trust root's CT logs swapped for the
/// lab's, the same bundle is refused: the SCT check runs on real data.
#[test]
fn a_real_bundles_sct_is_checked_against_the_trust_roots_ct_logs() {
    let good: serde_json::Value =
        serde_json::from_slice(include_bytes!("tests/public_good_trusted_root.json")).unwrap();
    let lab_root: serde_json::Value =
        serde_json::from_str(&Sigstore::new().trusted_root()).unwrap();
    let mut swapped = good.clone();
    swapped["ctlogs"] = lab_root["ctlogs"].clone();
    let bundle = Material::OciBundle {
        bytes: include_bytes!("tests/kubewarden_controller_v1.34.0.sigstore.json").to_vec(),
    };
    let manifest = "sha256:c811d58de79c92f03214e63aa339484e488d694ae8a6283b5f3f17a9faf50172";
    let signer = |root: &serde_json::Value| {
        TrustedSigner::Identity(IdentityPolicy {
            issuer: "https://token.actions.githubusercontent.com".into(),
            subject: SubjectPattern::new(r"https://github\.com/kubewarden/.*").unwrap(),
            trust_root: Arc::new(
                TrustRoot::from_json(root.to_string().as_bytes(), "public good").unwrap(),
            ),
        })
    };
    verify(&bundle, manifest, &[signer(&good)]).unwrap();
    let error = verify(&bundle, manifest, &[signer(&swapped)])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("from a CT log the trust root does not name"),
        "{error}"
    );
}

/// One key, one signer name: the same P-256 key written with a compressed
/// point (a valid SubjectPublicKeyInfo too) must get the fingerprint of
/// its usual uncompressed form, or a lockfile's `signer` and the pins of
/// two hosts would name one signer two ways.
#[test]
fn a_keys_fingerprint_does_not_depend_on_its_point_encoding() {
    let key = lab::KeyPair::generate();
    let spki = key.spki_der();
    let point = &spki[spki.len() - 65..];
    // id-ecPublicKey, prime256v1, a BIT STRING of 33 bytes.
    let mut compressed = vec![
        0x30, 0x39, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x22, 0x00,
    ];
    compressed.push(if point[64] & 1 == 1 { 3 } else { 2 });
    compressed.extend_from_slice(&point[1..33]);
    let written = PublicKey::from_spki_der(&compressed).unwrap();
    assert_eq!(written.fingerprint(), key.fingerprint());
    let verified = verify(
        &Material::Named {
            bytes: lab::blob_signature(&key, MODULE).into_bytes(),
            from: "module.sig".into(),
        },
        &lab::sha256_digest(MODULE),
        &[TrustedSigner::Key(written)],
    )
    .unwrap();
    assert_eq!(verified.signer, key.fingerprint());
}
