//! Signed images in a real registry (`oci_lab.rs`): cosign's signature
//! manifest, tagged `sha256-<hex>.sig` beside the image, as `cosign sign`
//! pushes it (a simple-signing layer per signature, its signature and, for
//! keyless, the certificate and Rekor bundle in the layer's annotations).

use std::collections::BTreeMap;

use serde_json::json;

use super::sigstore_lab::{self, KeyPair, Leaf};
use super::{Trust, home_files, provenance, refused};
use crate::oci_lab::{Layer, Pushed, Registry};
use crate::support::{Home, components};

const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// Push the echo component as `repository:1.0`.
fn push_echo(registry: &Registry, repository: &str) -> Pushed {
    let wasm = std::fs::read(components().path("echo")).expect("the echo component");
    registry.pusher().component(repository, "1.0", &wasm)
}

/// Push cosign's signature manifest for `signed` (a manifest digest) in
/// `repository`, one layer per `(payload, annotations)`.
fn push_signatures(
    registry: &Registry,
    repository: &str,
    signed: &str,
    layers: Vec<(Vec<u8>, BTreeMap<String, String>)>,
) {
    let layers: Vec<Layer> = layers
        .into_iter()
        .map(|(payload, annotations)| Layer {
            media_type: SIMPLE_SIGNING.into(),
            bytes: payload,
            annotations,
        })
        .collect();
    let config = json!({"architecture": "", "os": "", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}});
    let tag = format!("{}.sig", signed.replace(':', "-"));
    registry.pusher().image(
        repository,
        Some(&tag),
        (IMAGE_CONFIG, &serde_json::to_vec(&config).unwrap()),
        &layers,
        json!({}),
    );
}

fn home_for(registry: &Registry, trust_policy: impl Fn(&Trust) -> String) -> (Home, Trust) {
    let home = Home::new();
    let trust = Trust::new(&home);
    home.write_config(&format!(
        "{}{}",
        registry.config_toml(),
        trust_policy(&trust)
    ));
    (home, trust)
}

#[test]
fn an_image_signed_with_the_operators_key_installs_and_the_pin_names_key_and_manifest() {
    let registry = Registry::start();
    let (home, trust) = home_for(&registry, |trust| trust.policy(true));
    let pushed = push_echo(&registry, "mods/echo");
    // A signature by a stranger's key beside the operator's: one accepted
    // signature suffices, as with `cosign verify`.
    push_signatures(
        &registry,
        "mods/echo",
        &pushed.digest,
        vec![
            sigstore_lab::keyed_image_layer(&KeyPair::generate(), &pushed.digest),
            sigstore_lab::keyed_image_layer(&trust.key, &pushed.digest),
        ],
    );
    let run = home.run(&["install", &registry.reference("mods/echo", ":1.0")]);
    run.expect_code(0);
    assert_eq!(
        provenance(&home, "echo")["signature"],
        json!({"kind": "key", "signer": trust.key.fingerprint(), "digest": pushed.digest}),
    );
}

#[test]
fn an_image_signed_keyless_installs_and_the_pin_names_the_identity() {
    let registry = Registry::start();
    let (home, trust) = home_for(&registry, |trust| trust.policy(true));
    let pushed = push_echo(&registry, "mods/echo");
    push_signatures(
        &registry,
        "mods/echo",
        &pushed.digest,
        vec![trust.sigstore.image_layer(&pushed.digest, &Leaf::default())],
    );
    home.run(&[
        "install",
        &registry.reference("mods/echo", &format!("@{}", pushed.digest)),
    ])
    .expect_code(0);
    let signature = &provenance(&home, "echo")["signature"];
    assert_eq!(signature["kind"], "keyless", "{signature:#}");
    assert_eq!(signature["signer"], sigstore_lab::SUBJECT, "{signature:#}");
    assert_eq!(signature["digest"], pushed.digest.as_str(), "{signature:#}");
}

#[test]
fn unsigned_wrongly_signed_or_another_images_signature_installs_nothing() {
    let registry = Registry::start();
    let (home, trust) = home_for(&registry, |trust| trust.policy(true));
    let before = home_files(&home);

    // No signature manifest at all.
    let unsigned = push_echo(&registry, "mods/unsigned");
    refused(
        &home,
        &before,
        &[&registry.reference("mods/unsigned", ":1.0")],
        &["carries no signature", "--allow-unsigned", &unsigned.digest],
    );
    // Signed by a key the operator does not trust.
    let stranger = push_echo(&registry, "mods/stranger");
    push_signatures(
        &registry,
        "mods/stranger",
        &stranger.digest,
        vec![sigstore_lab::keyed_image_layer(
            &KeyPair::generate(),
            &stranger.digest,
        )],
    );
    refused(
        &home,
        &before,
        &[&registry.reference("mods/stranger", ":1.0")],
        &["not made by a trusted signer"],
    );
    // The operator's own key, but the payload names another manifest (a
    // signature copied from another image under this one's tag).
    let copied = push_echo(&registry, "mods/copied");
    let other = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    push_signatures(
        &registry,
        "mods/copied",
        &copied.digest,
        vec![sigstore_lab::keyed_image_layer(&trust.key, other)],
    );
    refused(
        &home,
        &before,
        &[&registry.reference("mods/copied", ":1.0")],
        &[other, &copied.digest, "made for other bytes"],
    );
    // `--allow-unsigned` lets the unsigned image in, and the pin records
    // no signer.
    home.run(&[
        "install",
        "--allow-unsigned",
        &registry.reference("mods/unsigned", ":1.0"),
    ])
    .expect_code(0);
    assert!(provenance(&home, "echo").get("signature").is_none());
}
