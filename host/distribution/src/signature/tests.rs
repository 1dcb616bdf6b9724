//! The verifier against signatures made as cosign makes them (by the
//! test's own Sigstore, `tests/it/distribution_signatures/sigstore_lab.rs`),
//! each attack refused with its reason, and one real bundle made by cosign
//! against the public-good Sigstore.

use std::sync::Arc;

use super::*;

#[path = "../../../../tests/it/distribution_signatures/sigstore_lab.rs"]
pub(super) mod lab;

use lab::{KeyPair, Leaf, Sigstore};

const MODULE: &[u8] = b"the bytes of a module archive";

fn named(bytes: impl Into<Vec<u8>>) -> Material {
    Material::Named {
        bytes: bytes.into(),
        from: "module.sigstore.json".into(),
    }
}

fn key_signer(key: &KeyPair) -> TrustedSigner {
    TrustedSigner::Key(PublicKey::from_pem(key.public_pem().as_bytes()).unwrap())
}

fn identity_signer(sigstore: &Sigstore, issuer: &str, subject: &str) -> TrustedSigner {
    TrustedSigner::Identity(IdentityPolicy {
        issuer: issuer.into(),
        subject: SubjectPattern::new(subject).unwrap(),
        trust_root: Arc::new(
            TrustRoot::from_json(sigstore.trusted_root().as_bytes(), "trusted_root.json").unwrap(),
        ),
    })
}

fn default_identity(sigstore: &Sigstore) -> TrustedSigner {
    identity_signer(
        sigstore,
        lab::ISSUER,
        r"https://github\.com/acme/modules/\.github/workflows/release\.yml@refs/tags/v.*",
    )
}

fn refusal(result: Result<Verified, SignatureError>) -> String {
    result
        .expect_err("the signature must be refused")
        .to_string()
}

#[test]
fn a_cosign_blob_signature_verifies_with_the_operators_key() {
    let key = KeyPair::generate();
    let signature = lab::blob_signature(&key, MODULE);
    let verified = verify(
        &named(signature),
        &lab::sha256_digest(MODULE),
        &[key_signer(&key)],
    )
    .unwrap();
    assert_eq!(
        verified,
        Verified {
            kind: SignatureKind::Key,
            signer: key.fingerprint(),
            issuer: None,
            digest: lab::sha256_digest(MODULE),
        }
    );
}

#[test]
fn a_blob_signature_by_another_key_is_refused_naming_the_key() {
    let (signer, trusted) = (KeyPair::generate(), KeyPair::generate());
    let signature = lab::blob_signature(&signer, MODULE);
    let error = refusal(verify(
        &named(signature),
        &lab::sha256_digest(MODULE),
        &[key_signer(&trusted)],
    ));
    assert!(error.contains(&trusted.fingerprint()), "{error}");
    assert!(error.contains("does not verify with this key"), "{error}");
}

#[test]
fn a_blob_signature_of_other_bytes_is_refused() {
    let key = KeyPair::generate();
    let signature = lab::blob_signature(&key, b"other bytes");
    let error = refusal(verify(
        &named(signature),
        &lab::sha256_digest(MODULE),
        &[key_signer(&key)],
    ));
    assert!(error.contains("does not verify"), "{error}");
}

#[test]
fn a_tampered_blob_signature_is_refused() {
    let key = KeyPair::generate();
    let mut signature = base64_decode(&lab::blob_signature(&key, MODULE));
    let last = signature.len() - 1;
    signature[last] ^= 1;
    let error = refusal(verify(
        &named(base64_encode(&signature)),
        &lab::sha256_digest(MODULE),
        &[key_signer(&key)],
    ));
    assert!(error.contains("not made by a trusted signer"), "{error}");
}

#[test]
fn garbage_material_is_refused_as_unreadable() {
    let key = KeyPair::generate();
    for garbage in [&b"not base64 !!"[..], b"{\"mediaType\": 3}", b"{}"] {
        let error = refusal(verify(
            &named(garbage),
            &lab::sha256_digest(MODULE),
            &[key_signer(&key)],
        ));
        assert!(error.contains("cannot be read"), "{error}");
    }
}

#[test]
fn a_keyless_bundle_verifies_with_issuer_and_subject() {
    let sigstore = Sigstore::new();
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default()).to_string();
    let verified = verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    )
    .unwrap();
    assert_eq!(
        verified,
        Verified {
            kind: SignatureKind::Keyless,
            signer: lab::SUBJECT.into(),
            issuer: Some(lab::ISSUER.into()),
            digest: lab::sha256_digest(MODULE),
        }
    );
}

#[test]
fn a_keyless_bundle_with_an_email_identity_verifies() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        subject: "dev@acme.example".into(),
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf).to_string();
    let signer = identity_signer(&sigstore, lab::ISSUER, r"[a-z]+@acme\.example");
    let verified = verify(&named(bundle), &lab::sha256_digest(MODULE), &[signer]).unwrap();
    assert_eq!(verified.signer, "dev@acme.example");
}

#[test]
fn a_keyless_bundle_for_another_digest_is_refused_naming_both() {
    let sigstore = Sigstore::new();
    let bundle = sigstore
        .blob_bundle(b"other bytes", &Leaf::default())
        .to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(
        error.contains(&lab::sha256_digest(b"other bytes")),
        "{error}"
    );
    assert!(error.contains(&lab::sha256_digest(MODULE)), "{error}");
}

#[test]
fn the_wrong_subject_is_refused_naming_identity_and_pattern() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        subject: "https://github.com/mallory/modules/.github/workflows/release.yml@refs/tags/v1"
            .into(),
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf).to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("mallory"), "{error}");
    assert!(error.contains("does not match the pattern"), "{error}");
}

#[test]
fn the_subject_pattern_is_anchored() {
    let sigstore = Sigstore::new();
    // The trusted identity appears inside the signer's, which must not do.
    let leaf = Leaf {
        subject: format!("https://evil.example/?{}", lab::SUBJECT),
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf).to_string();
    let signer = identity_signer(&sigstore, lab::ISSUER, &regex::escape(lab::SUBJECT));
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[signer],
    ));
    assert!(error.contains("does not match the pattern"), "{error}");
}

#[test]
fn the_wrong_issuer_is_refused_naming_it() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        issuer: "https://accounts.evil.example".into(),
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf).to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("accounts.evil.example"), "{error}");
    assert!(error.contains("issuer"), "{error}");
}

#[test]
fn a_certificate_from_an_untrusted_ca_is_refused() {
    // Another Sigstore (its own CA and log) signs; ours is trusted.
    let (trusted, rogue) = (Sigstore::new(), Sigstore::new());
    let bundle = rogue.blob_bundle(MODULE, &Leaf::default()).to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&trusted)],
    ));
    // The rogue log is the first thing that does not match.
    assert!(error.contains("does not name"), "{error}");
}

#[test]
fn a_certificate_from_an_untrusted_ca_logged_by_the_trusted_log_is_refused() {
    // The trust root names the rogue's log but only the trusted CA.
    let (trusted, rogue) = (Sigstore::new(), Sigstore::new());
    let bundle = rogue.blob_bundle(MODULE, &Leaf::default()).to_string();
    let mut root: serde_json::Value = serde_json::from_str(&trusted.trusted_root()).unwrap();
    let rogue_root: serde_json::Value = serde_json::from_str(&rogue.trusted_root()).unwrap();
    root["tlogs"] = rogue_root["tlogs"].clone();
    let signer = TrustedSigner::Identity(IdentityPolicy {
        issuer: lab::ISSUER.into(),
        subject: SubjectPattern::new(".*").unwrap(),
        trust_root: Arc::new(TrustRoot::from_json(root.to_string().as_bytes(), "mixed").unwrap()),
    });
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[signer],
    ));
    assert!(error.contains("untrusted CA"), "{error}");
}

#[test]
fn a_certificate_expired_at_the_logs_time_is_refused() {
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        signed_at: lab::AFTER_EXPIRY,
        ..Leaf::default()
    };
    let bundle = sigstore.blob_bundle(MODULE, &leaf).to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(
        error.contains("not valid at the log's integration time"),
        "{error}"
    );
    assert!(error.contains("2025-03-05"), "{error}");
}

#[test]
fn a_tampered_signature_in_a_bundle_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let mut signature = base64_decode(bundle["messageSignature"]["signature"].as_str().unwrap());
    let last = signature.len() - 1;
    signature[last] ^= 1;
    bundle["messageSignature"]["signature"] = base64_encode(&signature).into();
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("altered"), "{error}");
}

#[test]
fn a_moved_integration_time_breaks_the_logs_promise() {
    // Moving the time back into the certificate's validity is the attack
    // on an expired certificate; the log's signature covers the time.
    let sigstore = Sigstore::new();
    let leaf = Leaf {
        signed_at: lab::AFTER_EXPIRY,
        ..Leaf::default()
    };
    let mut bundle = sigstore.blob_bundle(MODULE, &leaf);
    bundle["verificationMaterial"]["tlogEntries"][0]["integratedTime"] =
        lab::SIGNED_AT.to_string().into();
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(
        error.contains("signed entry timestamp does not verify"),
        "{error}"
    );
}

#[test]
fn a_log_entry_for_another_signature_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let other = sigstore.blob_bundle(b"other bytes", &Leaf::default());
    bundle["verificationMaterial"]["tlogEntries"] =
        other["verificationMaterial"]["tlogEntries"].clone();
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(
        error.contains("log entry's digest does not match"),
        "{error}"
    );
}

#[test]
fn a_bundle_without_a_signed_entry_timestamp_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    bundle["verificationMaterial"]["tlogEntries"][0]
        .as_object_mut()
        .unwrap()
        .remove("inclusionPromise");
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("no signed entry timestamp"), "{error}");
}

#[test]
fn a_bad_inclusion_proof_is_refused() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["rootHash"] =
        base64_encode(&[7u8; 32]).into();
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("inclusion proof does not hold"), "{error}");
}

#[test]
fn a_keyless_signature_is_not_accepted_by_a_key_and_the_reverse() {
    let sigstore = Sigstore::new();
    let key = KeyPair::generate();
    let bundle = sigstore.blob_bundle(MODULE, &Leaf::default()).to_string();
    let error = refusal(verify(
        &named(bundle),
        &lab::sha256_digest(MODULE),
        &[key_signer(&key)],
    ));
    assert!(error.contains("made with a certificate"), "{error}");
    let signature = lab::blob_signature(&key, MODULE);
    let error = refusal(verify(
        &named(signature),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("carries no certificate"), "{error}");
}

#[test]
fn any_trusted_signer_may_accept_and_a_refusal_lists_each() {
    let sigstore = Sigstore::new();
    let (key, other) = (KeyPair::generate(), KeyPair::generate());
    let signature = lab::blob_signature(&key, MODULE);
    let signers = [
        key_signer(&other),
        default_identity(&sigstore),
        key_signer(&key),
    ];
    let verified = verify(
        &named(signature.clone()),
        &lab::sha256_digest(MODULE),
        &signers,
    )
    .unwrap();
    assert_eq!(verified.signer, key.fingerprint());
    let error = refusal(verify(
        &named(signature),
        &lab::sha256_digest(MODULE),
        &signers[..2],
    ));
    assert!(
        error.contains(&other.fingerprint()) && error.contains("identity"),
        "{error}"
    );
}

const MANIFEST: &str = "sha256:3f4e1f5bd3bb7a3ed23d6d8a40fbf1b5b0f0cb7e0e3c3f0f6e6f2a1a9d8c7b6a";
const OTHER_MANIFEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000001";

#[test]
fn a_keyed_cosign_image_signature_verifies_and_names_its_manifest() {
    let key = KeyPair::generate();
    let (payload, annotations) = lab::keyed_image_layer(&key, MANIFEST);
    let layer = Material::OciLayer {
        payload,
        annotations,
    };
    let verified = verify(&layer, MANIFEST, &[key_signer(&key)]).unwrap();
    assert_eq!(
        (verified.kind, verified.digest.as_str()),
        (SignatureKind::Key, MANIFEST)
    );
    // The same layer does not vouch for another manifest.
    let error = refusal(verify(&layer, OTHER_MANIFEST, &[key_signer(&key)]));
    assert!(
        error.contains(MANIFEST) && error.contains(OTHER_MANIFEST),
        "{error}"
    );
}

#[test]
fn a_keyless_cosign_image_signature_verifies() {
    let sigstore = Sigstore::new();
    let (payload, annotations) = sigstore.image_layer(MANIFEST, &Leaf::default());
    let layer = Material::OciLayer {
        payload,
        annotations,
    };
    let verified = verify(&layer, MANIFEST, &[default_identity(&sigstore)]).unwrap();
    assert_eq!(verified.signer, lab::SUBJECT);
    let (payload, mut annotations) = sigstore.image_layer(MANIFEST, &Leaf::default());
    annotations.insert(
        "dev.cosignproject.cosign/signature".into(),
        lab::blob_signature(&KeyPair::generate(), &payload),
    );
    let error = refusal(verify(
        &Material::OciLayer {
            payload,
            annotations,
        },
        MANIFEST,
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("altered"), "{error}");
}

#[test]
fn a_keyless_image_bundle_verifies_and_names_its_manifest() {
    let sigstore = Sigstore::new();
    let bundle = sigstore
        .image_bundle(MANIFEST, &Leaf::default())
        .to_string()
        .into_bytes();
    let material = Material::OciBundle { bytes: bundle };
    let verified = verify(&material, MANIFEST, &[default_identity(&sigstore)]).unwrap();
    assert_eq!(verified.digest, MANIFEST);
    let error = refusal(verify(
        &material,
        OTHER_MANIFEST,
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("not for this module's"), "{error}");
}

#[test]
fn an_attestation_is_not_a_signature() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.image_bundle(MANIFEST, &Leaf::default());
    let statement = base64_decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap());
    let statement = String::from_utf8(statement).unwrap().replace(
        "https://sigstore.dev/cosign/sign/v1",
        "https://slsa.dev/provenance/v1",
    );
    bundle["dsseEnvelope"]["payload"] = base64_encode(statement.as_bytes()).into();
    let material = Material::OciBundle {
        bytes: bundle.to_string().into_bytes(),
    };
    let error = refusal(verify(&material, MANIFEST, &[default_identity(&sigstore)]));
    assert!(error.contains("attestation"), "{error}");
}

#[test]
fn policy_inputs_are_checked_with_clear_errors() {
    let error =
        PublicKey::from_pem(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
            .unwrap_err();
    assert!(error.contains("not a PUBLIC KEY"), "{error}");
    let error = SubjectPattern::new("(unclosed").unwrap_err().to_string();
    assert!(error.contains("not a valid regular expression"), "{error}");
    let error = TrustRoot::from_json(b"{\"mediaType\": \"application/json\"}", "root.json")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("root.json") && error.contains("mediaType"),
        "{error}"
    );
    let error = verify(&named("x"), "md5:abc", &[]).unwrap_err().to_string();
    assert!(error.contains("sha256"), "{error}");
}

/// A real bundle: cosign (v3, new bundle format) signing the image
/// `ghcr.io/kubewarden/kubewarden-controller:v1.34.0` from its GitHub
/// release workflow on 2026-04-09 against the public-good Sigstore, and
/// the public-good `trusted_root.json`. Both are the test data of
/// sigstore-rs (github.com/sigstore/sigstore-rs, commit 038e36ae:
/// `tests/data/bundle_v03.json`, `trust_root/prod/trusted_root.json`).
#[test]
fn a_real_cosign_bundle_verifies_against_the_public_good_trust_root() {
    let root = TrustRoot::from_json(
        include_bytes!("tests/public_good_trusted_root.json"),
        "public good",
    )
    .unwrap();
    let bundle = include_bytes!("tests/kubewarden_controller_v1.34.0.sigstore.json").to_vec();
    let manifest = "sha256:c811d58de79c92f03214e63aa339484e488d694ae8a6283b5f3f17a9faf50172";
    let subject = "https://github.com/kubewarden/kubewarden-controller/.github/workflows/release.yml@refs/tags/v1.34.0";
    let signer = |issuer: &str, subject: &str| {
        TrustedSigner::Identity(IdentityPolicy {
            issuer: issuer.into(),
            subject: SubjectPattern::new(subject).unwrap(),
            trust_root: Arc::new(root.clone()),
        })
    };
    let material = Material::OciBundle { bytes: bundle };
    let verified = verify(
        &material,
        manifest,
        &[signer(
            "https://token.actions.githubusercontent.com",
            &regex::escape(subject),
        )],
    )
    .unwrap();
    assert_eq!(
        verified,
        Verified {
            kind: SignatureKind::Keyless,
            signer: subject.into(),
            issuer: Some("https://token.actions.githubusercontent.com".into()),
            digest: manifest.into(),
        }
    );
    // The same real bundle under a policy for another repository.
    let error = refusal(verify(
        &material,
        manifest,
        &[signer(
            "https://token.actions.githubusercontent.com",
            r"https://github\.com/other/.*",
        )],
    ));
    assert!(error.contains("does not match the pattern"), "{error}");
}

/// A real blob bundle (v0.3, a message signature in a `hashedrekord`),
/// made by sigstore-python against Sigstore's staging instance, with the
/// staging `trusted_root.json` it verifies offline against: the test data
/// of sigstore-python (github.com/sigstore/sigstore-python, commit
/// 27db13db: `test/assets/bundle_v3.txt{,.sigstore}` and
/// `sigstore/_store/https%3A%2F%2Ftuf-repo-cdn.sigstage.dev/trusted_root.json`).
#[test]
fn a_real_blob_bundle_verifies_against_the_staging_trust_root() {
    let root =
        TrustRoot::from_json(include_bytes!("tests/staging_trusted_root.json"), "staging").unwrap();
    let artifact = include_bytes!("tests/sigstore_python_bundle_v3.txt");
    let bundle =
        named(include_bytes!("tests/sigstore_python_bundle_v3.txt.sigstore.json").to_vec());
    let signer = TrustedSigner::Identity(IdentityPolicy {
        issuer: "https://github.com/login/oauth".into(),
        subject: SubjectPattern::new(r"william@yossarian\.net").unwrap(),
        trust_root: Arc::new(root),
    });
    let verified = verify(
        &bundle,
        &lab::sha256_digest(artifact),
        std::slice::from_ref(&signer),
    )
    .unwrap();
    assert_eq!(verified.signer, "william@yossarian.net");
    assert_eq!(verified.kind, SignatureKind::Keyless);
    // One byte more, and it is a signature for other bytes.
    let mut other = artifact.to_vec();
    other.push(b'\n');
    let error = refusal(verify(&bundle, &lab::sha256_digest(&other), &[signer]));
    assert!(error.contains("made for other bytes"), "{error}");
}

#[test]
fn a_v0_1_bundle_with_a_certificate_chain_verifies_and_a_v0_2_needs_a_proof() {
    let sigstore = Sigstore::new();
    let mut bundle = sigstore.blob_bundle(MODULE, &Leaf::default());
    let cert = bundle["verificationMaterial"]["certificate"].clone();
    let material = bundle["verificationMaterial"].as_object_mut().unwrap();
    material.remove("certificate");
    material.insert(
        "x509CertificateChain".into(),
        serde_json::json!({"certificates": [cert]}),
    );
    material["tlogEntries"][0]
        .as_object_mut()
        .unwrap()
        .remove("inclusionProof");
    bundle["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.1".into();
    let verified = verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    )
    .unwrap();
    assert_eq!(verified.signer, lab::SUBJECT);
    bundle["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.2".into();
    let error = refusal(verify(
        &named(bundle.to_string()),
        &lab::sha256_digest(MODULE),
        &[default_identity(&sigstore)],
    ));
    assert!(error.contains("no inclusion proof"), "{error}");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
