//! The signature material a registry holds for a manifest digest, gathered
//! for the verifier (`crate::signature`); nothing here decides trust.
//!
//! Two places are read:
//! - **cosign's tag** `sha256-<hex>.sig` in the same repository: an image
//!   manifest whose layers are simple-signing payloads, each signature and
//!   certificate in the layer's annotations. Each layer becomes
//!   [`Material::OciLayer`].
//! - **OCI 1.1 referrers** of the digest (the referrers API, or its tag
//!   schema fallback, read bounded by registry.rs) whose artifact type is a Sigstore
//!   bundle (`application/vnd.dev.sigstore.bundle…`): each such manifest's
//!   bundle layers become [`Material::OciBundle`].
//!
//! Design decisions:
//! - **Absence is not an error:** no `.sig` tag and no referrers is an
//!   empty list (the signature policy decides whether unsigned is fine). A
//!   registry without the referrers API, or one that fails it, counts as
//!   having none (logged): a registry can always withhold signatures, so
//!   failing the install there protects nothing the policy does not.
//! - **Bounded:** at most [`MAX_LAYERS`] cosign layers and [`MAX_LAYERS`]
//!   bundles in all (not per referrer), each at most [`MAX_LAYER_BYTES`],
//!   every blob's digest checked (blob.rs).

use std::collections::BTreeMap;

use super::blob::{self, Deadline, Sink};
use super::error::OciError;
use super::layout::{self, Manifest};
use super::reference::OciReference;
use super::registry;
use crate::limits::NoProgress;
use crate::signature::Material;

/// The most signature layers (or bundles) read.
pub const MAX_LAYERS: usize = 16;
/// The largest signature layer or bundle read.
pub const MAX_LAYER_BYTES: u64 = 1024 * 1024;
/// The artifact and layer media types of a Sigstore bundle start so.
const BUNDLE_TYPE_PREFIX: &str = "application/vnd.dev.sigstore.bundle";

/// cosign's signature tag for `digest` (`sha256:<hex>` → `sha256-<hex>.sig`).
pub fn cosign_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

/// Everything the registry holds for `digest` in `reference`'s repository.
pub async fn gather(
    client: &registry::RegistryClient,
    reference: &OciReference,
    digest: &str,
    deadline: &Deadline,
) -> Result<Vec<Material>, OciError> {
    let mut materials = cosign_layers(client, reference, digest, deadline).await?;
    match referrer_bundles(client, reference, digest, deadline).await {
        Ok(bundles) => materials.extend(bundles),
        Err(e) => tracing::debug!(error = %e, "no referrers read for {reference}"),
    }
    Ok(materials)
}

async fn cosign_layers(
    client: &registry::RegistryClient,
    reference: &OciReference,
    digest: &str,
    deadline: &Deadline,
) -> Result<Vec<Material>, OciError> {
    let tagged = reference.at_tag(&cosign_tag(digest));
    let Some(raw) = deadline
        .bound(
            "the signature manifest",
            registry::manifest(
                client,
                &tagged,
                &[layout::OCI_MANIFEST, layout::DOCKER_MANIFEST],
            ),
        )
        .await?
    else {
        return Ok(Vec::new());
    };
    let manifest = Manifest::parse(&raw.bytes).map_err(|reason| OciError::UnsupportedManifest {
        reference: tagged.to_string(),
        reason,
    })?;
    let layers = manifest.layers.unwrap_or_default();
    let mut materials = Vec::new();
    for layer in layers.iter().take(MAX_LAYERS) {
        let at = tagged.at_digest(&raw.digest);
        let mut payload = Vec::new();
        blob::fetch(
            client,
            &at,
            layer,
            MAX_LAYER_BYTES,
            deadline,
            Sink::Memory(&mut payload),
            &NoProgress,
        )
        .await?;
        materials.push(Material::OciLayer {
            payload,
            annotations: layer.annotations.clone().unwrap_or_else(BTreeMap::new),
        });
    }
    Ok(materials)
}

async fn referrer_bundles(
    client: &registry::RegistryClient,
    reference: &OciReference,
    digest: &str,
    deadline: &Deadline,
) -> Result<Vec<Material>, OciError> {
    let subject = reference.at_digest(digest);
    let listed = deadline
        .bound(
            "the referrers",
            registry::referrers(client, &subject, digest),
        )
        .await?;
    // No referrers API (404): the tag schema's index, `sha256-<hex>`.
    let listed = match listed {
        Some(bytes) => bytes,
        None => {
            let tagged = reference.at_tag(&digest.replace(':', "-"));
            match deadline
                .bound(
                    "the referrers",
                    registry::manifest(client, &tagged, &[layout::OCI_INDEX]),
                )
                .await?
            {
                Some(raw) => raw.bytes,
                None => return Ok(Vec::new()),
            }
        }
    };
    let index = Manifest::parse(&listed).map_err(|reason| OciError::UnsupportedManifest {
        reference: subject.to_string(),
        reason: format!("its referrers list: {reason}"),
    })?;
    let entries = index.manifests.unwrap_or_default();
    let mut materials = Vec::new();
    let bundles = entries.iter().filter(|entry| {
        entry
            .artifact_type
            .as_deref()
            .is_some_and(|t| t.starts_with(BUNDLE_TYPE_PREFIX))
    });
    for entry in bundles.take(MAX_LAYERS) {
        let at = subject.at_digest(&entry.digest);
        let Some(raw) = deadline
            .bound(
                "a referrer manifest",
                registry::manifest(client, &at, &[layout::OCI_MANIFEST]),
            )
            .await?
        else {
            continue;
        };
        let manifest =
            Manifest::parse(&raw.bytes).map_err(|reason| OciError::UnsupportedManifest {
                reference: at.to_string(),
                reason,
            })?;
        for layer in manifest.layers.unwrap_or_default().iter().take(MAX_LAYERS) {
            if !layer.media_type.starts_with(BUNDLE_TYPE_PREFIX) {
                continue;
            }
            // MAX_LAYERS bundles in all: per referrer, a registry could
            // make this hold MAX_LAYERS² of MAX_LAYER_BYTES in memory.
            if materials.len() >= MAX_LAYERS {
                return Ok(materials);
            }
            let mut bytes = Vec::new();
            blob::fetch(
                client,
                &at,
                layer,
                MAX_LAYER_BYTES,
                deadline,
                Sink::Memory(&mut bytes),
                &NoProgress,
            )
            .await?;
            materials.push(Material::OciBundle { bytes });
        }
    }
    Ok(materials)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cosign_names_the_signature_tag_after_the_digest() {
        assert_eq!(super::cosign_tag("sha256:abc"), "sha256-abc.sig");
    }
}
