//! `Host::lock`: the lockfile of a home, from its pins.
//!
//! Every installed module must be pinned (a lockfile names approved bytes),
//! and its bytes must be fetchable again elsewhere: the pin's provenance
//! names the `https://` URL and sha256 or the OCI manifest digest. A module
//! installed from a local path is refused, naming each one, unless
//! `allow_local`: then its path is written (relative to the lockfile's
//! folder when it lies beneath it), which only hosts that see the same
//! path can sync. Each entry carries the pin's tree digest (`tree`), its
//! verified signer and where its signature was read from (`signature`, for
//! an https source), its enabled state, and the source roots and approval
//! rules `config.sync.toml` holds for it.
//!
//! An MCP server module (`install --mcp`, an `.mcpb` bundle) is refused,
//! naming it and how to install it on each host: its bytes are the bridge
//! and the grants its install wrote around the server's code, which `sync`
//! (installing modules) would not reproduce; an entry for it would install
//! a bundle as a bare executable, or name a source that is not a path.

use std::path::{Path, PathBuf};

use crate::discovery::DISABLED_MARKER;
use crate::host::{Host, HostError};
use crate::lockfile::{LockedModule, LockedSource, Lockfile};
use crate::managed_config::ManagedConfig;
use crate::pins::{PinCovers, PinRecord, Pins};
use crate::sync::plan::{installed_ids, pinned_file_sha256};

/// How [`Host::lock`] writes the file.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Where the lockfile will be written: local paths are made relative
    /// to its folder when beneath it.
    pub output: PathBuf,
    /// Write local paths for modules installed from one instead of
    /// refusing them.
    pub allow_local: bool,
}

impl Host {
    /// The lockfile of this home as it is now (see [`crate::sync`]).
    pub fn lock(&self, options: &LockOptions) -> Result<Lockfile, HostError> {
        let layout = self.layout();
        let pins = Pins::load(self.home())?;
        let managed = ManagedConfig::read(&layout.managed_config_path())
            .map_err(HostError::Refused)?
            .unwrap_or_default();
        let output = std::path::absolute(&options.output).unwrap_or(options.output.clone());
        let folder = output.parent().unwrap_or(Path::new("/")).to_path_buf();
        let mut modules = Vec::new();
        let mut refused = Vec::new();
        for id in installed_ids(&layout.modules_dir()) {
            let Some(pin) = pins.get(&id).filter(|pin| pin.covers == PinCovers::Tree) else {
                refused.push(format!(
                    "{id} is installed but not pinned (a lockfile names approved bytes): pin it (`modhost pin {id}`) or remove it"
                ));
                continue;
            };
            if let Some(why) = mcp_server_refusal(&id, pin) {
                refused.push(why);
                continue;
            }
            let (source, source_text, sha256) = match remote_source(pin) {
                Some(remote) => remote,
                None => match local_source(pin, &folder) {
                    Some(_) if !options.allow_local => {
                        refused.push(format!(
                            "{id} was installed from the local path {}, which another host cannot fetch: publish it (https:// or oci://) and install it from there, or write the path with --allow-local",
                            local_path(pin).unwrap_or_default()
                        ));
                        continue;
                    }
                    Some(local) => local,
                    None => {
                        refused.push(format!(
                            "{id}: its pin records no source; install it again from its source, then lock"
                        ));
                        continue;
                    }
                },
            };
            let disabled =
                std::fs::symlink_metadata(layout.module_dir(&id).join(DISABLED_MARKER)).is_ok();
            let brings = managed.modules.get(&id).cloned().unwrap_or_default();
            // Only an https entry takes a signature (an OCI artifact's are
            // in its registry).
            let signature = pin
                .provenance
                .as_ref()
                .filter(|p| p.signature.is_some() && matches!(source, LockedSource::Https(_)))
                .and_then(|p| p.signature_source.as_deref())
                .map(|named| relative_to(named, &folder));
            let verified = pin.provenance.as_ref().and_then(|p| p.signature.as_ref());
            modules.push(LockedModule {
                id: id.clone(),
                source,
                source_text,
                sha256,
                tree: Some(pin.digest.clone()),
                signer: verified.map(|s| s.signer.clone()),
                issuer: verified.and_then(|s| s.issuer.clone()),
                signature,
                enabled: !disabled,
                source_roots: brings.source_roots,
                approval: brings.approval,
                line: 0,
            });
        }
        if !refused.is_empty() {
            return Err(HostError::Refused(format!(
                "cannot write a lockfile of this home: {}; nothing was written",
                refused.join("; ")
            )));
        }
        Ok(Lockfile {
            path: output,
            modules,
        })
    }
}

impl Host {
    /// Refuse `output` when it lies in this home: every file there is the
    /// host's (`config.toml`, the operator's; `pins.json`; `config.sync.toml`;
    /// modules and their state), and a lockfile written over one would
    /// replace the operator's configuration or approvals with a list of
    /// modules. Judged by the canonical folder, so a link or `..` to the
    /// home is the home.
    pub fn check_lock_output(&self, output: &Path) -> Result<(), HostError> {
        let absolute = std::path::absolute(output).unwrap_or(output.to_path_buf());
        let folder = absolute.parent().unwrap_or(Path::new("/"));
        // The folder must exist: one made on the way (`new/../..`) could
        // lead anywhere, the home included, once the kernel resolves it.
        let folder = std::fs::canonicalize(folder).map_err(|e| {
            HostError::Refused(format!(
                "the folder of {} cannot be used ({e}): create it first; nothing was written",
                output.display()
            ))
        })?;
        let home = std::fs::canonicalize(self.home()).unwrap_or(self.home().to_path_buf());
        if folder.starts_with(&home) {
            return Err(HostError::Refused(format!(
                "{} lies in the modhost home {}, whose files are the host's (config.toml, pins.json, config.sync.toml, modules): write the lockfile elsewhere; nothing was written",
                output.display(),
                home.display()
            )));
        }
        Ok(())
    }
}

/// The source, its text and sha256 of a pin whose bytes came from a
/// remote source.
fn remote_source(pin: &PinRecord) -> Option<(LockedSource, String, Option<String>)> {
    let provenance = pin.provenance.as_ref()?;
    let source = &provenance.origin.source;
    if source.starts_with("https://") {
        return Some((
            LockedSource::Https(source.clone()),
            source.clone(),
            Some(provenance.sha256.clone()),
        ));
    }
    let rest = source.strip_prefix("oci://")?;
    let digest = provenance.origin.oci_digest.clone()?;
    let name = rest.rsplit_once('@').map_or(rest, |(name, _)| name);
    let text = format!("oci://{name}");
    Some((
        LockedSource::Oci {
            reference: text.clone(),
            digest: digest.clone(),
        },
        format!("{text}@{digest}"),
        None,
    ))
}

/// What `install --mcp` and an MCP bundle's install write in the pin's
/// source (`mcp_install.rs`): the module is an MCP server module.
const MCP_SERVER_MARK: &str = ", an MCP server run as ";

/// Why `id` cannot be written to a lockfile, when it is an MCP server
/// module: its bytes are the bridge and the grants the install wrote around
/// the server's code, not a file `sync` could fetch and install again (an
/// `.mcpb` would be installed as a bare executable, a server folder's
/// recorded source is not a path). Refused naming the module and what to do.
fn mcp_server_refusal(id: &str, pin: &PinRecord) -> Option<String> {
    let source = pin.source.as_deref()?;
    let (from, _) = source.split_once(MCP_SERVER_MARK)?;
    let bundle = pin
        .provenance
        .as_ref()
        .map(|p| (&p.origin.source, &p.sha256));
    Some(match bundle {
        Some((url, sha256)) => format!(
            "{id} is an MCP server module installed from the MCP bundle {url}, which `sync` cannot install (it installs modules, not MCP bundles): install it on each host with `modhost install {url} --sha256 {sha256}`, and remove it here (`modhost remove {id}`) before `modhost lock`"
        ),
        None => format!(
            "{id} is an MCP server module (`install --mcp`, from {from}), which `sync` cannot install: install it on each host with `modhost install --mcp`, and remove it here (`modhost remove {id}`) before `modhost lock`"
        ),
    })
}

/// A signature's location as a lockfile in `folder` names it: an https URL
/// as it is, a path relative to `folder` when beneath it.
fn relative_to(named: &str, folder: &Path) -> String {
    if named.starts_with("https://") {
        return named.to_owned();
    }
    let path = std::path::absolute(named).unwrap_or_else(|_| PathBuf::from(named));
    path.strip_prefix(folder)
        .map(|relative| relative.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// The path a pin's bytes were installed from, as recorded.
fn local_path(pin: &PinRecord) -> Option<String> {
    if let Some(provenance) = &pin.provenance {
        return Some(provenance.origin.source.clone());
    }
    let (path, _) = pin.source.as_deref()?.rsplit_once(" (")?;
    Some(path.to_owned())
}

/// A local source, relative to `folder` when beneath it.
fn local_source(pin: &PinRecord, folder: &Path) -> Option<(LockedSource, String, Option<String>)> {
    let path = PathBuf::from(local_path(pin)?);
    if !path.is_absolute() {
        return None;
    }
    let text = path
        .strip_prefix(folder)
        .map(|relative| relative.display().to_string())
        .unwrap_or_else(|_| path.display().to_string());
    // A folder has no file digest (its `tree` is its check).
    Some((LockedSource::Local(path), text, pinned_file_sha256(pin)))
}
