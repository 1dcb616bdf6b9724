//! MCP bundles (`.mcpb`, formerly `.dxt`): a zip of an MCP server's code
//! with a `manifest.json` saying how it starts, installed as an MCP server
//! module (`modhost install ./server.mcpb`, or from a server.json entry
//! whose package is one: [`crate::server_json`]).
//!
//! The bundle is unpacked by the one unpacker `install` uses
//! (`install/archive.rs`: no path out, links inside, bytes capped),
//! its `manifest.json` read (`mcpb/manifest.rs`) for the command, arguments and
//! variables, and the unpacked folder then goes through `install --mcp`
//! (`mcp_install.rs`) exactly as an operator's server folder
//! does: its tools listed confined, everything granted nothing, pinned with
//! the tool definitions.
//!
//! Design decisions:
//!
//! - **A bundle carries no grants.** An operator may ship `mcp-server.toml`
//!   (the grants) in a folder of their own; a bundle is a third party's, so
//!   one holding `mcp-server.toml` or `tools.json` is refused rather than
//!   have its author decide what its tools may touch.
//! - **The manifest decides the command, the operator nothing else.** A
//!   command or arguments given with a bundle are refused (two sources for
//!   one command line); the operator's variables (`--env`) are added on top
//!   of the manifest's.
//! - **Where the bytes came from is recorded:** the bundle's path, or for a
//!   fetched one its URL and sha256 (the pin's provenance), so `modhost
//!   server-json` can name it again.

pub(crate) mod detect;
pub mod error;
pub(crate) mod manifest;

use std::path::{Path, PathBuf};

pub use detect::is_bundle;
pub use error::McpbError;

use crate::host::{Host, HostError};
use crate::install::{ArchiveFormat, ArchiveLimits};
use crate::install_origin::Recorded;
use crate::mcp_install::{McpInstallReport, McpInstallRequest};
use crate::pins::PinProvenance;

/// The bundle's manifest, at its top.
const MANIFEST_FILE: &str = "manifest.json";

/// The most bytes of `manifest.json` read.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// Files only the operator writes in an MCP server module (the grants and
/// the pinned tools), never a bundle.
const OPERATOR_FILES: [&str; 2] = [
    crate::mcp_install::MANIFEST_FILE,
    crate::mcp_install::TOOLS_FILE,
];

impl Host {
    /// Fetch the bundle `fetch.source` (`https://…` with its sha256, checked
    /// as [`Host::fetch_source`] checks every remote source) and install it
    /// as [`Host::install_mcp`] installs a local one, the pin recording the
    /// URL and sha256. `request.source` is ignored.
    pub async fn install_remote_bundle(
        &self,
        fetch: &crate::fetch_source::FetchRequest,
        request: McpInstallRequest,
        progress: &dyn modhost_distribution::Progress,
    ) -> Result<McpInstallReport, HostError> {
        let fetched = self.fetch_source(fetch, progress).await?;
        self.install_mcpb(
            McpInstallRequest {
                source: fetched.file.clone(),
                ..request
            },
            Some(fetched.provenance.clone()),
        )
        .await
    }

    /// Install the bundle `request.source` as an MCP server module, its
    /// command from its manifest; `provenance` when it was fetched.
    pub(crate) async fn install_mcpb(
        &self,
        request: McpInstallRequest,
        provenance: Option<PinProvenance>,
    ) -> Result<McpInstallReport, HostError> {
        let bundle = request.source.clone();
        let named = provenance
            .as_ref()
            .map(|p| p.origin.source.clone())
            .unwrap_or_else(|| {
                std::path::absolute(&bundle)
                    .unwrap_or_else(|_| bundle.clone())
                    .display()
                    .to_string()
            });
        let refused = |error: McpbError| -> HostError {
            crate::server_json::error::ServerJsonError::Bundle {
                bundle: named.clone(),
                error,
            }
            .into()
        };
        if request.command.is_some() || !request.args.is_empty() {
            return Err(refused(McpbError::CommandGiven));
        }
        let meta = std::fs::metadata(&bundle).map_err(|e| HostError::io("read", &bundle, e))?;
        if !meta.is_file() {
            return Err(refused(McpbError::Unpack("not a regular file".into())));
        }
        let staging_root = self.layout().staging_dir();
        let staging = staging_root.join(crate::request::new_request_id());
        std::fs::create_dir_all(&staging).map_err(|e| HostError::io("create", &staging, e))?;
        let result = async {
            // Read once into staging: every later read is of this copy.
            let received = staging.join("bundle.zip");
            crate::install::receive(&bundle, &received, None)
                .map_err(|e| refused(McpbError::Unpack(e.to_string())))?;
            let unpacked = staging.join("unpacked");
            crate::install::extract(
                &received,
                ArchiveFormat::Zip,
                &unpacked,
                ArchiveLimits::default(),
            )
            .map_err(|e| refused(McpbError::Unpack(e.to_string())))?;
            let tree = bundle_tree(&unpacked).map_err(|e| HostError::io("read", &unpacked, e))?;
            let manifest = read_manifest(&tree).map_err(&refused)?;
            for file in OPERATOR_FILES {
                if std::fs::symlink_metadata(tree.join(file)).is_ok() {
                    return Err(refused(McpbError::CarriesGrants { file }));
                }
            }
            let binaries = &self.config().binaries;
            let python3_only = binaries.contains_key("python3") && !binaries.contains_key("python");
            let launch = manifest.launch(&tree, python3_only).map_err(&refused)?;
            let id = match &request.id {
                Some(id) => id.clone(),
                None => id_from_name(&manifest.name).ok_or_else(|| {
                    HostError::Refused(format!(
                        "the MCP bundle {named} is named {:?}, which makes no module id; install it with --id ID (nothing was installed)",
                        manifest.name
                    ))
                })?,
            };
            let mut env = launch.env;
            env.extend(request.env.clone());
            let version = manifest.version.as_deref().unwrap_or("-");
            let recorded = Recorded {
                origin: Some(format!("{named} (MCP bundle {} {version})", manifest.name)),
                provenance,
            };
            self.install_mcp_recorded(
                McpInstallRequest {
                    source: tree,
                    id: Some(id),
                    command: Some(launch.command),
                    args: launch.args,
                    env,
                    bridge: request.bridge.clone(),
                    upgrade: request.upgrade,
                    lifetime: request.lifetime,
                },
                recorded,
            )
            .await
        }
        .await;
        let _ = std::fs::remove_dir_all(&staging);
        let _ = std::fs::remove_dir(&staging_root);
        result
    }
}

/// The folder holding `manifest.json`: the archive's top (how `mcpb pack`
/// packs), else its one top-level folder.
fn bundle_tree(unpacked: &Path) -> std::io::Result<PathBuf> {
    if std::fs::symlink_metadata(unpacked.join(MANIFEST_FILE)).is_ok() {
        return Ok(unpacked.to_path_buf());
    }
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(unpacked)?.collect::<Result<_, _>>()?;
    match entries.as_slice() {
        [only] if only.file_type()?.is_dir() => Ok(only.path()),
        _ => Ok(unpacked.to_path_buf()),
    }
}

/// The bundle's manifest: a regular file at the top of `tree`, bounded.
fn read_manifest(tree: &Path) -> Result<manifest::Manifest, McpbError> {
    let path = tree.join(MANIFEST_FILE);
    let meta = std::fs::symlink_metadata(&path).map_err(|_| McpbError::NoManifest)?;
    if !meta.is_file() || meta.len() > MAX_MANIFEST_BYTES {
        return Err(McpbError::Manifest(format!(
            "not a regular file of at most {MAX_MANIFEST_BYTES} bytes"
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| McpbError::Manifest(e.to_string()))?;
    manifest::Manifest::parse(&text)
}

/// A module id made of a bundle's `name` ("My Server" -> `my-server`), when
/// one can be.
pub(crate) fn id_from_name(name: &str) -> Option<String> {
    let mut id = String::new();
    for c in name.trim().chars() {
        match c {
            'a'..='z' | '0'..='9' | '_' => id.push(c),
            'A'..='Z' => id.push(c.to_ascii_lowercase()),
            _ if !id.ends_with('-') && !id.is_empty() => id.push('-'),
            _ => {}
        }
    }
    let id = id.trim_end_matches('-');
    let id: String = id.chars().take(64).collect();
    let id = id.trim_end_matches('-').to_owned();
    (crate::module_id::is_module_id(&id) && !crate::install::is_reserved_id(&id)).then_some(id)
}

#[cfg(test)]
mod tests;
