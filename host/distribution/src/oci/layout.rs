//! What modhost installs from a registry, told apart by media types.
//!
//! Two layouts are accepted, nothing else:
//! - **A WebAssembly component**: the layout of the CNCF TAG-runtime "Wasm
//!   OCI artifact" spec, which `wkg oci push` (wasm-pkg-tools, through the
//!   `oci-wasm` crate) writes: an image manifest whose config has media type
//!   `application/vnd.wasm.config.v0+json` and exactly one layer of media
//!   type `application/wasm` (the component's bytes). The older
//!   wasm-to-oci pair (`application/vnd.wasm.config.v1+json`,
//!   `application/vnd.wasm.content.layer.v1+wasm`) is read the same way.
//! - **A native module archive**: an image manifest with exactly one
//!   `application/vnd.oci.image.layer.v1.tar+gzip` layer (or Docker's
//!   `…rootfs.diff.tar.gzip`) holding the module folder, as `modhost install
//!   ARCHIVE.tar.gz` takes it; published for several machines as an image
//!   index with one such manifest per platform. The entry for `linux` and
//!   this machine's architecture (Go's names: `amd64`, `arm64`, …) is
//!   chosen; none is an error that names the platforms there are.
//!
//! The manifests are read into this file's own small types (only the
//! fields modhost relies on), so what is checked is visible here.

use std::collections::BTreeMap;

use serde::Deserialize;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Every manifest media type a fetch accepts.
pub const MANIFEST_TYPES: [&str; 4] = [
    OCI_MANIFEST,
    OCI_INDEX,
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
];

/// The Wasm OCI artifact spec's config and layer.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER: &str = "application/wasm";
const WASM_TO_OCI_CONFIG: &str = "application/vnd.wasm.config.v1+json";
const WASM_TO_OCI_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// The archive layer of a native module.
pub const ARCHIVE_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const DOCKER_ARCHIVE_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// A content descriptor (config, layer, index entry).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub artifact_type: Option<String>,
    #[serde(default)]
    pub platform: Option<Platform>,
}

/// An index entry's platform.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

/// An image manifest or an image index.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
}

/// What a manifest is to modhost.
#[derive(Debug, Clone)]
pub enum Shape {
    /// Pick one entry for this machine, then read that manifest.
    Index(Vec<Descriptor>),
    /// Fetch this layer: a component (`.wasm`).
    Component(Descriptor),
    /// Fetch this layer: a module archive (`.tar.gz`).
    Archive(Descriptor),
}

impl Manifest {
    /// Parse a manifest's bytes; `Err` says why it is not one.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|e| format!("it is not a manifest: {e}"))?;
        if manifest.schema_version != 2 {
            return Err(format!(
                "its schemaVersion is {}, not 2",
                manifest.schema_version
            ));
        }
        Ok(manifest)
    }

    /// Tell what this manifest holds; `Err` says why modhost does not take it.
    pub fn shape(&self) -> Result<Shape, String> {
        let is_index = matches!(
            self.media_type.as_deref(),
            Some(OCI_INDEX | DOCKER_MANIFEST_LIST)
        ) || (self.media_type.is_none() && self.manifests.is_some());
        if is_index {
            return match &self.manifests {
                Some(entries) => Ok(Shape::Index(entries.clone())),
                None => Err("it is an image index without `manifests`".into()),
            };
        }
        let (Some(config), Some(layers)) = (&self.config, &self.layers) else {
            return Err("it is an image manifest without `config` or `layers`".into());
        };
        let kinds: Vec<&str> = layers.iter().map(|l| l.media_type.as_str()).collect();
        let expected = "modhost installs a WebAssembly component (config application/vnd.wasm.config.v0+json, one application/wasm layer) or a module archive (one application/vnd.oci.image.layer.v1.tar+gzip layer; several platforms in an image index)";
        match (config.media_type.as_str(), layers.as_slice()) {
            (WASM_CONFIG | WASM_TO_OCI_CONFIG, [layer])
                if matches!(layer.media_type.as_str(), WASM_LAYER | WASM_TO_OCI_LAYER) =>
            {
                Ok(Shape::Component(layer.clone()))
            }
            (WASM_CONFIG | WASM_TO_OCI_CONFIG, _) => Err(format!(
                "it is a WebAssembly artifact with layers {kinds:?}; {expected}"
            )),
            (_, [layer])
                if matches!(
                    layer.media_type.as_str(),
                    ARCHIVE_LAYER | DOCKER_ARCHIVE_LAYER
                ) =>
            {
                Ok(Shape::Archive(layer.clone()))
            }
            (config, _) => Err(format!(
                "its config is {config} and its layers are {kinds:?}; {expected}"
            )),
        }
    }
}

/// This machine as an index names it: `linux` and Go's architecture name.
pub fn this_platform() -> Platform {
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    };
    Platform {
        os: std::env::consts::OS.to_string(),
        architecture: architecture.to_string(),
        variant: None,
    }
}

/// The index entry for `wanted` (os and architecture; the first when
/// several variants are there), or the platforms there are.
pub fn choose_platform<'a>(
    entries: &'a [Descriptor],
    wanted: &Platform,
) -> Result<&'a Descriptor, Vec<String>> {
    entries
        .iter()
        .find(|entry| {
            entry
                .platform
                .as_ref()
                .is_some_and(|p| p.os == wanted.os && p.architecture == wanted.architecture)
        })
        .ok_or_else(|| {
            entries
                .iter()
                .map(|e| match &e.platform {
                    Some(p) => p.to_string(),
                    None => format!("(no platform: {})", e.digest),
                })
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(json: &serde_json::Value) -> Manifest {
        Manifest::parse(json.to_string().as_bytes()).unwrap()
    }

    fn desc(media_type: &str) -> serde_json::Value {
        serde_json::json!({"mediaType": media_type, "digest": "sha256:00", "size": 1})
    }

    #[test]
    fn component_archive_and_index_are_told_apart() {
        let component = manifest(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": desc(WASM_CONFIG), "layers": [desc(WASM_LAYER)]}));
        assert!(matches!(component.shape(), Ok(Shape::Component(_))));
        let archive = manifest(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": desc("application/vnd.oci.empty.v1+json"), "layers": [desc(ARCHIVE_LAYER)]}));
        assert!(matches!(archive.shape(), Ok(Shape::Archive(_))));
        let index = manifest(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}));
        assert!(matches!(index.shape(), Ok(Shape::Index(_))));
    }

    #[test]
    fn other_layouts_are_refused_with_what_was_found() {
        let two = manifest(&serde_json::json!({
            "schemaVersion": 2, "config": desc(WASM_CONFIG),
            "layers": [desc(WASM_LAYER), desc(WASM_LAYER)]}));
        assert!(two.shape().unwrap_err().contains("WebAssembly artifact"));
        let image = manifest(&serde_json::json!({
            "schemaVersion": 2, "config": desc("application/vnd.oci.image.config.v1+json"),
            "layers": [desc(ARCHIVE_LAYER), desc(ARCHIVE_LAYER)]}));
        let why = image.shape().unwrap_err();
        assert!(
            why.contains("application/vnd.oci.image.config.v1+json"),
            "{why}"
        );
        assert!(Manifest::parse(br#"{"schemaVersion":1}"#).is_err());
        assert!(Manifest::parse(b"not json").is_err());
    }

    #[test]
    fn the_platform_is_chosen_or_the_ones_there_are_named() {
        let entry = |os: &str, arch: &str| Descriptor {
            media_type: OCI_MANIFEST.into(),
            digest: format!("sha256:{os}{arch}"),
            size: 1,
            annotations: None,
            artifact_type: None,
            platform: Some(Platform {
                os: os.into(),
                architecture: arch.into(),
                variant: None,
            }),
        };
        let entries = [entry("linux", "amd64"), entry("linux", "arm64")];
        let arm = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: None,
        };
        assert_eq!(
            choose_platform(&entries, &arm).unwrap().digest,
            "sha256:linuxarm64"
        );
        let riscv = Platform {
            architecture: "riscv64".into(),
            ..arm
        };
        assert_eq!(
            choose_platform(&entries, &riscv).unwrap_err(),
            vec!["linux/amd64".to_string(), "linux/arm64".to_string()]
        );
        let here = this_platform();
        assert_eq!(here.os, "linux");
        assert!(!here.architecture.is_empty());
    }
}
