//! A pull from an OCI registry: `oci://registry/repository:tag` or
//! `…@sha256:<hex>`, into one local file the install path recognises.
//!
//! The steps, each in its own file:
//! 1. [`reference`](mod@reference): the reference parsed strictly (registry always named,
//!    a tag or a digest required, sha256 only).
//! 2. [`registry`]: the manifest fetched over https with the operator's
//!    trust; its sha256 is computed from its bytes. A digest reference must
//!    match it; a tag resolves to it. That digest is what is pinned
//!    ([`Origin::oci_digest`]) and what signatures must cover.
//! 3. [`layout`]: what the manifest holds. A component (the Wasm OCI
//!    artifact layout) or a module archive; an image index has the entry
//!    for this machine's platform chosen and fetched by its digest.
//! 4. [`blob`]: the layer streamed into `<name>.wasm` or `<name>.tar.gz` in
//!    the caller's folder, its digest checked on the way, bounded by
//!    [`FetchLimits`].
//! 5. [`signatures`]: cosign's `.sig` tag and Sigstore-bundle referrers of
//!    the pinned digest, gathered for the verifier.
//!
//! Design decisions:
//! - **Every byte is checked against a digest the operator can see:** the
//!   manifest against the reference's digest (or, for a tag, the digest
//!   that is then shown and pinned), an index entry's manifest against the
//!   index, the layer against its manifest. A moved tag therefore changes
//!   the pinned digest, never the bytes behind an old one.
//! - **Nothing half-done:** on any error no file is left in the caller's
//!   folder by this fetch (blob.rs writes a partial file and renames it).
//! - **The https source's own client** ([`crate::trust::https_client`]:
//!   https only, redirects included) reads everything, each read bounded
//!   as it arrives ([`registry`]); oci-client's client, which follows
//!   redirects to plain http and reads answers whole, is not used to pull.

pub mod blob;
pub mod error;
pub mod layout;
pub mod reference;
pub mod registry;
pub mod signatures;

use std::path::Path;

use rustls::pki_types::CertificateDer;

use crate::fetched::{Fetched, Origin};
use crate::limits::{FetchLimits, Progress};
use crate::signature::Material;
pub use error::OciError;
pub use layout::Platform;
pub use reference::OciReference;

/// How a pull is made.
#[derive(Debug, Clone)]
pub struct OciSettings {
    pub limits: FetchLimits,
    /// CA certificates trusted beside the webpki roots
    /// (`[distribution] ca_certificates`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The platform an image index's entry is chosen for.
    pub platform: Platform,
}

impl OciSettings {
    /// These limits and extra roots, for this machine's platform.
    pub fn new(limits: FetchLimits, extra_roots: Vec<CertificateDer<'static>>) -> OciSettings {
        OciSettings {
            limits,
            extra_roots,
            platform: layout::this_platform(),
        }
    }
}

/// What kind of module the pulled file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Artifact {
    /// A WebAssembly component (`<name>.wasm`).
    Component,
    /// A module archive (`<name>.tar.gz`).
    Archive,
}

/// A completed pull.
#[derive(Debug, Clone)]
pub struct OciPulled {
    /// The file; `origin.oci_digest` is the manifest digest the reference
    /// resolved to, `origin.resolved_tag` the tag when one was named.
    pub fetched: Fetched,
    pub artifact: Artifact,
    /// The platform entry chosen from an image index.
    pub platform: Option<String>,
    /// Signature material the registry holds for `origin.oci_digest`.
    pub materials: Vec<Material>,
}

/// Pull `source` (`oci://…`) into the folder `into` (which must exist):
/// resolve, check, stream the layer, gather signature material.
pub async fn pull(
    source: &str,
    settings: &OciSettings,
    into: &Path,
    progress: &dyn Progress,
) -> Result<OciPulled, OciError> {
    let reference = OciReference::parse(source)?;
    let deadline = blob::Deadline::starting_now(&settings.limits);
    let client = registry::client(&settings.extra_roots, settings.limits.stall)?;

    // 1. The manifest the reference names, and the digest that is pinned.
    let top = deadline
        .bound(
            "the manifest",
            registry::manifest(&client, &reference, &layout::MANIFEST_TYPES),
        )
        .await?
        .ok_or_else(|| OciError::NotFound {
            reference: reference.to_string(),
        })?;
    let pinned = reference.at_digest(&top.digest);
    if let Some(tag) = &reference.tag
        && reference.digest.is_none()
    {
        tracing::info!("{reference}: tag {tag} resolved to {}", top.digest);
    }

    // 2. What it holds; an index's entry for this machine.
    let unsupported = |at: &OciReference, reason: String| OciError::UnsupportedManifest {
        reference: at.to_string(),
        reason,
    };
    let manifest = layout::Manifest::parse(&top.bytes).map_err(|r| unsupported(&pinned, r))?;
    let mut platform = None;
    let shape = match manifest.shape().map_err(|r| unsupported(&pinned, r))? {
        layout::Shape::Index(entries) => {
            let entry =
                layout::choose_platform(&entries, &settings.platform).map_err(|available| {
                    OciError::NoPlatform {
                        reference: pinned.to_string(),
                        wanted: settings.platform.to_string(),
                        available,
                    }
                })?;
            platform = entry.platform.as_ref().map(Platform::to_string);
            let at = reference.at_digest(&entry.digest);
            if !reference::is_sha256_digest(&entry.digest) {
                return Err(unsupported(
                    &pinned,
                    format!("its entry digest `{}` is not a sha256 digest", entry.digest),
                ));
            }
            let raw = deadline
                .bound(
                    "the platform manifest",
                    registry::manifest(
                        &client,
                        &at,
                        &[layout::OCI_MANIFEST, layout::DOCKER_MANIFEST],
                    ),
                )
                .await?
                .ok_or_else(|| OciError::NotFound {
                    reference: at.to_string(),
                })?;
            let inner = layout::Manifest::parse(&raw.bytes).map_err(|r| unsupported(&at, r))?;
            match inner.shape().map_err(|r| unsupported(&at, r))? {
                layout::Shape::Index(_) => {
                    return Err(unsupported(
                        &at,
                        "its platform entry is another index".into(),
                    ));
                }
                shape => shape,
            }
        }
        shape => shape,
    };
    let (artifact, layer, file_name) = match shape {
        layout::Shape::Component(layer) => (
            Artifact::Component,
            layer,
            format!("{}.wasm", reference.name()),
        ),
        layout::Shape::Archive(layer) => (
            Artifact::Archive,
            layer,
            format!("{}.tar.gz", reference.name()),
        ),
        layout::Shape::Index(_) => unreachable!("an index was resolved above"),
    };

    // 3. The layer, streamed and checked.
    let path = into.join(&file_name);
    let (sha256, bytes) = blob::fetch(
        &client,
        &pinned,
        &layer,
        settings.limits.max_bytes,
        &deadline,
        blob::Sink::File(&path),
        progress,
    )
    .await?;
    let remove_on_error = |e: OciError| {
        let _ = std::fs::remove_file(&path);
        e
    };

    // 4. Signature material for the pinned digest.
    let materials = signatures::gather(&client, &reference, &top.digest, &deadline)
        .await
        .map_err(remove_on_error)?;

    Ok(OciPulled {
        fetched: Fetched {
            path: path.clone(),
            sha256,
            bytes,
            origin: Origin {
                source: reference.to_string(),
                oci_digest: Some(top.digest),
                resolved_tag: if reference.digest.is_none() {
                    reference.tag.clone()
                } else {
                    None
                },
            },
        },
        artifact,
        platform,
        materials,
    })
}
