//! `modhost install oci://…` against a real registry (Debian's
//! `docker-registry` with TLS from a test CA, [`crate::oci_lab`]), through
//! the CLI:
//!
//! - a component (the `echo` guest, pushed as `wkg oci push` lays it out)
//!   installs by tag and by digest; the pin records the manifest digest the
//!   tag resolved to, which the operator is shown;
//! - a native module installs from an image index, the entry for this
//!   machine's platform chosen; an index without one is refused naming the
//!   platforms it has;
//! - attacks, each leaving the home's files exactly as they were: a layer
//!   tampered with on the registry's disk, a manifest whose bytes are not
//!   its digest, a tag moved after the pin (the pinned digest still gets
//!   the old bytes; `--upgrade` by tag shows the new digest), a layer over
//!   the configured size limit, a registry over plain http, and a hostile
//!   registry whose layer stalls or never ends;
//! - the signature material the registry holds for the pinned digest
//!   (cosign's `.sig` tag, a Sigstore-bundle referrer) is gathered, and its
//!   absence is no error.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use modhost_distribution::oci::{self, OciSettings};
use modhost_distribution::signature::Material;
use modhost_distribution::{FetchLimits, NoProgress};
use serde_json::{Value, json};

use crate::oci_lab::{HostileBlob, HostileRegistry, Layer, Registry, digest_of, this_architecture};
use crate::support::{Fixture, Home, components};

/// A home trusting `registry`'s test CA (plus `extra` config lines).
fn home_for(registry: &Registry, extra: &str) -> Home {
    let home = Home::new();
    home.write_config(&format!("{}{extra}", registry.config_toml()));
    home
}

/// Every file under the home with its sha256: "the home's files".
fn home_files(home: &Home) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                let bytes = std::fs::read(&path).unwrap_or_default();
                out.insert(rel, digest_of(&bytes));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&home.path(), &home.path(), &mut out);
    out
}

fn pins(home: &Home) -> Value {
    std::fs::read_to_string(home.path().join("pins.json"))
        .map(|text| serde_json::from_str(&text).expect("pins.json is JSON"))
        .unwrap_or(Value::Null)
}

/// The provenance recorded with `id`'s pin.
fn provenance(home: &Home, id: &str) -> Value {
    let pins = pins(home);
    let provenance = pins["modules"][id]["provenance"].clone();
    assert!(provenance.is_object(), "no provenance for {id}: {pins:#}");
    provenance
}

/// Run `install ARGS…`, which must be refused: the output names `needle`,
/// and the home's files are exactly as before.
#[track_caller]
fn refused(home: &Home, args: &[&str], needle: &str) -> String {
    let before = home_files(home);
    let run = home.run(&[&["install"], args].concat());
    assert_ne!(run.code, 0, "install was not refused: {run:#?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains(needle), "expected {needle:?} in: {run:#?}");
    assert!(
        said.contains("nothing was installed"),
        "the refusal says nothing was installed: {run:#?}"
    );
    assert_eq!(home_files(home), before, "the home changed: {run:#?}");
    said
}

/// The echo guest component's bytes.
fn echo_wasm() -> Vec<u8> {
    std::fs::read(components().path("echo")).expect("the echo component")
}

/// `wasm` with a custom section appended: other bytes, the same component.
fn with_custom_section(wasm: &[u8], payload: &[u8]) -> Vec<u8> {
    let name = b"modhost-test";
    let content_len = 1 + name.len() + payload.len();
    assert!(content_len < 128, "one-byte LEB128 lengths");
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    out.push(content_len as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

#[track_caller]
fn echo_answers(home: &Home) {
    let run = home.invoke("echo", "echo.run", &json!({"n": 1}), &[]);
    assert_eq!(
        run.invoke_result()["output"],
        json!({"echo": {"n": 1}}),
        "{run:#?}"
    );
}

#[test]
fn a_component_installs_by_tag_and_by_digest_and_the_pin_records_the_manifest_digest() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let wasm = echo_wasm();
    let pushed = pusher.component("team/tools/echo", "1.0", &wasm);

    let by_tag = home_for(&registry, "");
    let reference = registry.reference("team/tools/echo", ":1.0");
    let run = by_tag.run(&["install", &reference]);
    run.expect_code(0);
    // The digest the tag resolved to is shown to the operator.
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains(&pushed.digest),
        "the resolved digest is not shown: {run:#?}"
    );
    let recorded = provenance(&by_tag, "echo");
    assert_eq!(
        recorded["oci_digest"],
        pushed.digest.as_str(),
        "{recorded:#}"
    );
    assert_eq!(recorded["resolved_tag"], "1.0", "{recorded:#}");
    assert_eq!(
        format!("sha256:{}", recorded["sha256"].as_str().unwrap()),
        digest_of(&wasm),
        "{recorded:#}"
    );
    assert_eq!(
        std::fs::read(by_tag.modules().join("echo/echo.wasm")).unwrap(),
        wasm
    );
    echo_answers(&by_tag);

    let by_digest = home_for(&registry, "");
    let reference = registry.reference("team/tools/echo", &format!("@{}", pushed.digest));
    by_digest.run(&["install", &reference]).expect_code(0);
    let recorded = provenance(&by_digest, "echo");
    assert_eq!(
        recorded["oci_digest"],
        pushed.digest.as_str(),
        "{recorded:#}"
    );
    assert!(recorded.get("resolved_tag").is_none(), "{recorded:#}");
    echo_answers(&by_digest);
    assert!(
        std::fs::read_dir(by_digest.path().join("staging"))
            .map_or(true, |mut d| d.next().is_none()),
        "staging left behind"
    );
}

/// `tar czf` of a folder `echo-1.0/arch` holding the echo fixture (which
/// names itself after its file: `arch`).
fn echo_archive(home: &Home, marker: &str) -> Vec<u8> {
    let src = home.outside().join(format!("src-{marker}"));
    std::fs::create_dir_all(src.join("echo-1.0/knowledge")).unwrap();
    std::fs::copy(Fixture::Echo.path(), src.join("echo-1.0/arch")).unwrap();
    std::fs::write(src.join("echo-1.0/knowledge/intro.md"), marker).unwrap();
    let archive = home.outside().join(format!("{marker}.tar.gz"));
    let status = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg("echo-1.0")
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed");
    std::fs::read(archive).unwrap()
}

#[test]
fn a_native_module_installs_from_the_image_index_entry_for_this_machine() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let home = home_for(&registry, "");
    let other = if this_architecture() == "arm64" {
        "amd64"
    } else {
        "arm64"
    };
    let ours = echo_archive(&home, "ours");
    let theirs = echo_archive(&home, "theirs");
    let index = pusher.archive_index(
        "mods/arch",
        "1.0",
        &[
            ("windows", this_architecture(), theirs.clone()),
            ("linux", other, theirs),
            ("linux", this_architecture(), ours.clone()),
        ],
    );
    let run = home.run(&["install", &registry.reference("mods/arch", ":1.0")]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(home.modules().join("arch/knowledge/intro.md")).unwrap(),
        "ours",
        "the entry for this machine was installed"
    );
    let recorded = provenance(&home, "arch");
    // The pin is the index's digest: what the tag resolved to, the same on
    // every machine of a fleet.
    assert_eq!(
        recorded["oci_digest"],
        index.digest.as_str(),
        "{recorded:#}"
    );
    assert_eq!(
        format!("sha256:{}", recorded["sha256"].as_str().unwrap()),
        digest_of(&ours)
    );
    home.invoke("arch", "arch.list_state", &json!({}), &[])
        .invoke_result();
}

#[test]
fn an_index_without_this_platform_is_refused_naming_the_platforms_it_has() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let home = home_for(&registry, "");
    let archive = echo_archive(&home, "elsewhere");
    pusher.archive_index(
        "mods/arch",
        "1.0",
        &[
            ("linux", "s390x", archive.clone()),
            ("windows", this_architecture(), archive),
        ],
    );
    let said = refused(
        &home,
        &[&registry.reference("mods/arch", ":1.0")],
        "linux/s390x",
    );
    assert!(
        said.contains(&format!("windows/{}", this_architecture())),
        "{said}"
    );
    assert!(
        said.contains(&format!("linux/{}", this_architecture())),
        "{said}"
    );
}

#[test]
fn a_layer_tampered_with_on_the_registry_disk_is_refused() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let wasm = echo_wasm();
    let pushed = pusher.component("mods/echo", "1.0", &wasm);
    // Same length, one byte changed: the registry serves it as the blob the
    // manifest names.
    let stored = registry.blob_data(&pushed.layers[0]);
    let mut bytes = std::fs::read(&stored).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&stored, &bytes).unwrap();

    let home = home_for(&registry, "");
    for reference in [
        registry.reference("mods/echo", ":1.0"),
        registry.reference("mods/echo", &format!("@{}", pushed.digest)),
    ] {
        refused(&home, &[&reference], "tampered");
    }
    assert!(!home.modules().join("echo").exists());
}

#[test]
fn a_manifest_whose_bytes_are_not_its_digest_is_refused() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let pushed = pusher.component("mods/echo", "1.0", &echo_wasm());
    // Rewrite the stored manifest (one space more): still JSON the registry
    // serves under the old digest and tag, no longer the bytes that digest
    // names, as a compromised registry or mirror would serve them.
    let stored = registry.blob_data(&pushed.digest);
    let text = std::fs::read_to_string(&stored).unwrap();
    let swapped = text.replace("\"schemaVersion\":2", "\"schemaVersion\":2 ");
    assert_ne!(swapped, text);
    std::fs::write(&stored, swapped).unwrap();

    let home = home_for(&registry, "");
    for reference in [
        registry.reference("mods/echo", &format!("@{}", pushed.digest)),
        registry.reference("mods/echo", ":1.0"),
    ] {
        refused(&home, &[&reference], "does not match");
    }
}

#[test]
fn a_tag_moved_after_the_pin_changes_the_digest_never_the_bytes_behind_it() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let v1 = echo_wasm();
    let v2 = with_custom_section(&v1, b"v2");
    let first = pusher.component("mods/echo", "stable", &v1);

    let home = home_for(&registry, "");
    let by_tag = registry.reference("mods/echo", ":stable");
    home.run(&["install", &by_tag]).expect_code(0);
    assert_eq!(
        provenance(&home, "echo")["oci_digest"],
        first.digest.as_str()
    );

    // The publisher (or an attacker with push rights) moves the tag.
    let second = pusher.component("mods/echo", "stable", &v2);
    assert_ne!(first.digest, second.digest);

    // The pin still names the first digest, and the module is its bytes.
    assert_eq!(
        provenance(&home, "echo")["oci_digest"],
        first.digest.as_str()
    );
    assert_eq!(
        std::fs::read(home.modules().join("echo/echo.wasm")).unwrap(),
        v1
    );

    // Installing by the pinned digest still gets the old bytes.
    let pinned = home_for(&registry, "");
    pinned
        .run(&[
            "install",
            &registry.reference("mods/echo", &format!("@{}", first.digest)),
        ])
        .expect_code(0);
    assert_eq!(
        std::fs::read(pinned.modules().join("echo/echo.wasm")).unwrap(),
        v1
    );

    // An upgrade by tag resolves anew and shows (and pins) the new digest.
    let run = home.run(&["install", "--upgrade", &by_tag]);
    run.expect_code(0);
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains(&second.digest),
        "the new digest is not shown: {run:#?}"
    );
    assert_eq!(
        provenance(&home, "echo")["oci_digest"],
        second.digest.as_str()
    );
    assert_eq!(
        std::fs::read(home.modules().join("echo/echo.wasm")).unwrap(),
        v2
    );
    echo_answers(&home);
}

#[test]
fn a_layer_over_the_configured_limit_is_refused() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let wasm = echo_wasm();
    pusher.component("mods/echo", "1.0", &wasm);
    let limit = wasm.len() / 2;
    let home = home_for(&registry, &format!("max_download_bytes = {limit}\n"));
    refused(
        &home,
        &[&registry.reference("mods/echo", ":1.0")],
        "larger than the limit",
    );
    assert!(!home.modules().join("echo").exists());
}

#[test]
fn other_layouts_and_unknown_references_are_refused_with_what_was_found() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    // A container image: two layers, not a module.
    pusher.image(
        "mods/image",
        Some("1.0"),
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[
            Layer::new("application/vnd.oci.image.layer.v1.tar+gzip", b"a".to_vec()),
            Layer::new("application/vnd.oci.image.layer.v1.tar+gzip", b"b".to_vec()),
        ],
        json!({}),
    );
    let home = home_for(&registry, "");
    refused(
        &home,
        &[&registry.reference("mods/image", ":1.0")],
        "application/vnd.oci.image.config.v1+json",
    );
    refused(
        &home,
        &[&registry.reference("mods/missing", ":1.0")],
        "no such manifest",
    );
    refused(
        &home,
        &[&registry.reference("mods/image", "")],
        "neither a tag nor a digest",
    );
}

#[test]
fn a_registry_over_plain_http_is_refused() {
    let registry = Registry::start_plain_http();
    let home = Home::new();
    let said = refused(
        &home,
        &[&registry.reference("mods/echo", ":1.0")],
        "only over https",
    );
    assert!(said.contains(&registry.host()), "{said}");
}

/// Pull `reference` with the library, trusting the lab's CA: the signature
/// material is what the CLI does not show (the verifier consumes it).
fn pull_materials(registry: &Registry, reference: &str) -> Vec<Material> {
    let roots = modhost_distribution::trust::load_ca_certificates(&[registry.ca_pem()])
        .expect("the lab CA");
    let settings = OciSettings::new(FetchLimits::default(), roots);
    let into = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(oci::pull(reference, &settings, into.path(), &NoProgress))
        .unwrap_or_else(|e| panic!("pull {reference}: {e}"))
        .materials
}

#[test]
fn the_signature_material_beside_the_pinned_digest_is_gathered_and_none_is_no_error() {
    let registry = Registry::start();
    let pusher = registry.pusher();
    let pushed = pusher.component("mods/echo", "1.0", &echo_wasm());
    let reference = registry.reference("mods/echo", ":1.0");
    assert_eq!(pull_materials(&registry, &reference), Vec::new());

    // cosign's layout: the tag `sha256-<hex>.sig`, one simple-signing
    // payload per layer, the signature in the layer's annotations.
    let payload = json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/mods/echo", registry.host())},
            "image": {"docker-manifest-digest": pushed.digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    })
    .to_string()
    .into_bytes();
    let mut layer = Layer::new(
        "application/vnd.dev.cosign.simplesigning.v1+json",
        payload.clone(),
    );
    layer.annotations.insert(
        "dev.cosignproject.cosign/signature".into(),
        "MEUCIQ-not-checked-here".into(),
    );
    let sig_tag = format!("{}.sig", pushed.digest.replace(':', "-"));
    pusher.image(
        "mods/echo",
        Some(&sig_tag),
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[layer.clone()],
        json!({}),
    );

    // An OCI 1.1 referrer holding a Sigstore bundle, listed (this registry
    // has no referrers API) under the tag schema's `sha256-<hex>` index.
    let bundle_type = "application/vnd.dev.sigstore.bundle.v0.3+json";
    let bundle = br#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}"#.to_vec();
    let referrer = pusher.image(
        "mods/echo",
        None,
        ("application/vnd.oci.empty.v1+json", b"{}"),
        &[Layer::new(bundle_type, bundle.clone())],
        json!({
            "artifactType": bundle_type,
            "subject": crate::oci_lab::descriptor(crate::oci_lab::OCI_MANIFEST, &pushed.bytes),
        }),
    );
    let mut entry = crate::oci_lab::descriptor(crate::oci_lab::OCI_MANIFEST, &referrer.bytes);
    entry["artifactType"] = json!(bundle_type);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": crate::oci_lab::OCI_INDEX,
        "manifests": [entry],
    });
    pusher.manifest(
        "mods/echo",
        &pushed.digest.replace(':', "-"),
        crate::oci_lab::OCI_INDEX,
        &serde_json::to_vec(&index).unwrap(),
    );

    let materials = pull_materials(&registry, &reference);
    assert_eq!(
        materials,
        vec![
            Material::OciLayer {
                payload,
                annotations: layer.annotations,
            },
            Material::OciBundle { bytes: bundle },
        ]
    );
}

#[test]
fn a_stalled_layer_is_cut_off_at_the_stall_limit() {
    let registry = HostileRegistry::start(HostileBlob::Stall);
    let home = Home::new();
    home.write_config(&format!(
        "{}stall_timeout_secs = 2\ndownload_timeout_secs = 20\n",
        registry.config_toml()
    ));
    let started = Instant::now();
    refused(&home, &[&registry.reference()], "stalled");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the stall was not cut off at its limit: {:?}",
        started.elapsed()
    );
}

#[test]
fn an_endless_layer_is_cut_off_at_its_declared_size() {
    let registry = HostileRegistry::start(HostileBlob::Endless);
    let home = home_for_hostile(&registry);
    refused(
        &home,
        &[&registry.reference()],
        &format!(
            "sent more than the {} bytes its manifest declares",
            HostileRegistry::DECLARED
        ),
    );
}

fn home_for_hostile(registry: &HostileRegistry) -> Home {
    let home = Home::new();
    home.write_config(&registry.config_toml());
    home
}
