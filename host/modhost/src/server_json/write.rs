//! `modhost server-json MODULE`: a server.json entry for an installed
//! module, from what its pin records of where its bytes came from.
//!
//! Only a module fetched from somewhere others can fetch it too gets an
//! entry: an OCI artifact (named by the manifest digest the pin recorded,
//! never by a tag, which can move) or an MCP bundle downloaded over https
//! (its URL and the sha256 the pin recorded). A module installed from a
//! local file or folder is refused with the way to publish it, and so is an
//! https archive that is not a bundle: server.json's direct downloads are
//! MCP bundles, and calling a modhost archive one would send other clients
//! to unpack something they cannot run.

use serde_json::{Value, json};

use super::entry::{SCHEMA_URL, valid_name};
use super::error::ServerJsonError;
use crate::host::{Host, HostError};
use crate::pins::{PinProvenance, Pins};

/// The most characters of a description the schema allows.
const MAX_DESCRIPTION: usize = 100;

impl Host {
    /// The server.json entry for the installed module `id`, named `name`
    /// (`namespace/server`; default `io.github.OWNER/ID` for a source on
    /// GitHub or ghcr.io, else `local.modhost/ID`).
    pub async fn server_json_entry(
        &self,
        id: &str,
        name: Option<&str>,
    ) -> Result<Value, HostError> {
        let module = self.module(id).await?;
        let pins = Pins::load(self.home())?;
        let Some(provenance) = pins.get(id).and_then(|pin| pin.provenance.clone()) else {
            return Err(ServerJsonError::NoProvenance { id: id.to_owned() }.into());
        };
        let mcp_server = module
            .folder
            .as_ref()
            .is_some_and(|folder| folder.join(crate::mcp_install::MANIFEST_FILE).is_file());
        let bundle = mcp_server
            && module
                .folder
                .as_ref()
                .is_some_and(|folder| folder.join("manifest.json").is_file());
        let descriptor = module.descriptor.as_deref();
        let version = descriptor
            .map(|d| d.version.clone())
            .or(module.version.clone())
            .unwrap_or_else(|| "0.0.0".to_owned());
        render(&Facts {
            id,
            name,
            provenance: &provenance,
            bundle,
            version: &version,
            description: descriptor.map(|d| d.description.as_str()),
            title: descriptor.map(|d| d.title.as_str()),
        })
        .map_err(HostError::from)
    }
}

/// What an entry is written from.
pub(super) struct Facts<'a> {
    pub(super) id: &'a str,
    pub(super) name: Option<&'a str>,
    pub(super) provenance: &'a PinProvenance,
    /// An MCP server module installed from an MCP bundle.
    pub(super) bundle: bool,
    pub(super) version: &'a str,
    pub(super) description: Option<&'a str>,
    pub(super) title: Option<&'a str>,
}

/// The entry for `facts`.
pub(super) fn render(facts: &Facts<'_>) -> Result<Value, ServerJsonError> {
    let id = facts.id;
    let package = package(id, facts.provenance, facts.bundle, facts.version)?;
    let name = match facts.name {
        Some(name) if valid_name(name) => name.to_owned(),
        Some(name) => {
            return Err(ServerJsonError::Invalid {
                message: format!(
                    "--name {name:?} is not `namespace/server` in reverse-DNS form (`io.github.OWNER/{id}`)"
                ),
            });
        }
        None => default_name(id, facts.provenance),
    };
    let description = facts
        .description
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("{id}, a modhost module"));
    let mut entry = json!({
        "$schema": SCHEMA_URL,
        "name": name,
        "description": cut(&description, MAX_DESCRIPTION),
        "version": facts.version,
        "packages": [package],
    });
    if let Some(title) = facts.title.map(str::trim).filter(|t| !t.is_empty()) {
        entry["title"] = Value::String(cut(title, MAX_DESCRIPTION));
    }
    Ok(entry)
}

/// The package naming `provenance`'s bytes.
fn package(
    id: &str,
    provenance: &PinProvenance,
    bundle: bool,
    version: &str,
) -> Result<Value, ServerJsonError> {
    let source = &provenance.origin.source;
    if let Some(digest) = &provenance.origin.oci_digest {
        let reference = source.strip_prefix("oci://").unwrap_or(source);
        return Ok(json!({
            "registryType": "oci",
            "identifier": format!("{}@{digest}", repository_of(reference)),
            "version": version,
            "transport": {"type": "stdio"},
        }));
    }
    if source.starts_with("https://") && bundle {
        return Ok(json!({
            "registryType": "mcpb",
            "identifier": source,
            "version": version,
            "fileSha256": provenance.sha256,
            "transport": {"type": "stdio"},
        }));
    }
    Err(ServerJsonError::NotPublishable {
        id: id.to_owned(),
        origin: source.clone(),
    })
}

/// `registry/repository` of an OCI reference, its tag and digest cut.
pub(super) fn repository_of(reference: &str) -> &str {
    let reference = reference.split('@').next().unwrap_or(reference);
    match reference.rfind(':') {
        // A colon after the last '/' starts the tag; one before it is the
        // registry's port.
        Some(colon) if reference.rfind('/').is_none_or(|slash| colon > slash) => {
            &reference[..colon]
        }
        _ => reference,
    }
}

/// `io.github.OWNER/ID` for a source on GitHub (release assets) or ghcr.io,
/// else `local.modhost/ID`.
fn default_name(id: &str, provenance: &PinProvenance) -> String {
    let source = &provenance.origin.source;
    let owner = ["https://github.com/", "oci://ghcr.io/"]
        .iter()
        .find_map(|prefix| source.strip_prefix(prefix))
        .and_then(|rest| rest.split('/').next())
        .filter(|owner| {
            !owner.is_empty() && owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    match owner {
        Some(owner) => format!("io.github.{owner}/{id}"),
        None => format!("local.modhost/{id}"),
    }
}

/// At most `max` characters of `text`, an ellipsis marking a cut.
fn cut(text: &str, max: usize) -> String {
    match text.chars().count() <= max {
        true => text.to_owned(),
        false => {
            let mut short: String = text.chars().take(max - 1).collect();
            short.push('…');
            short
        }
    }
}
