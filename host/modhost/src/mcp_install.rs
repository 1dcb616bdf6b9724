//! `modhost install --mcp FOLDER|ARCHIVE [-- COMMAND ARGS...]`: an existing
//! stdio MCP server installed as a module of the MCP bridge
//! (`modules/mcp_bridge`).
//!
//! What is installed is a folder module: a copy of `FOLDER` (the server's
//! code: an npm project with its `node_modules`, a `pip install --target`
//! folder, a script), or of what a `.tar.gz` / `.tgz` / `.zip` archive of
//! it unpacks to, the bridge as its program (named after the id), and
//! two files the bridge writes: `mcp-server.toml` (the command, and per
//! tool what the operator grants it: nothing, unless the folder carried
//! the operator's own manifest) and `tools.json` (the tools the server
//! listed). Then it goes through
//! [`Host::install`] like any folder: described, checked, pinned as one
//! tree, so the server's bytes, its tool definitions and the grants are
//! approved together.
//!
//! Design decisions:
//!
//! - **Nothing is fetched, nothing outside the folder is taken.** The
//!   server's code must be in `FOLDER` (`npm ci`, `pip install --target`
//!   run by the operator beforehand): a registry name or a virtual
//!   environment would put bytes the pin does not cover on the call's
//!   path (a venv's interpreter is a link out of it). The interpreter is
//!   the one exception, and it is the operator's: `COMMAND` must be a
//!   binary configured under `[binaries]` in config.toml, the program
//!   every call runs and the same one the tools are listed with.
//! - **Listed confined, granted nothing.** The server is started once, by
//!   the bridge, under the same confinement as a call of a tool granted
//!   nothing but the command (no root, no network, no secret), in the
//!   staging folder; a server that needs more to list its tools is not a
//!   server that can be run per call, and the install says why.
//! - **An upgrade keeps the operator's decisions** for the tools still
//!   listed (the bridge carries the previous manifest's `[roots]` and
//!   `[tools.NAME]` over) and reports what was added, removed or changed,
//!   so the operator reviews exactly that.
//! - **An archive is unpacked by the one unpacker** `install` uses
//!   ([`crate::install::extract`]: no path out, links inside, real bytes
//!   capped), its server in its one top-level folder or at its top.
//! - **The operator may write the manifest** and ship it in the folder or
//!   archive: its grants are installed as written (the bridge checks it
//!   against what the server lists, refusing a grant for a tool it does
//!   not list), `-- COMMAND ARGS` becomes optional, and a shipped
//!   `tools.json` must match what the server lists. The host reads only
//!   the manifest's `id` and `[server] command`, of the staged copy.
//! - **The bridge's answer is untrusted like any module's:** two bounded
//!   texts the host writes under fixed names in the staged folder, then
//!   checks as it checks every module it installs.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use modproto::Request;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::host::{Host, HostError};
use crate::install::{ArchiveFormat, ArchiveLimits};
use crate::manage::{InstallReport, InstallRequest, check_new_id};
use modhost_runner::{Call, Transport};

/// The manifest's file name in an MCP server module (the bridge's
/// `manifest::FILE`).
pub(crate) const MANIFEST_FILE: &str = "mcp-server.toml";

/// The pinned tool snapshot's file name (the bridge's `pinned::FILE`).
pub(crate) const TOOLS_FILE: &str = "tools.json";

/// The bridge's method that lists a server's tools (its `listing::METHOD`).
const LIST_METHOD: &str = "mcp_list_tools";

/// The most bytes of either file the host writes from the bridge's answer.
const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// What `install --mcp` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct McpInstallRequest {
    /// The folder holding the server's code, copied whole into the
    /// module, or a `.tar.gz` / `.tgz` / `.zip` archive of it (unpacked as
    /// `install` unpacks a module archive).
    pub source: PathBuf,
    /// The module id; default the `id` of the operator's manifest, else
    /// the folder's (or archive's) name.
    pub id: Option<String>,
    /// The program that runs the server: a binary name configured under
    /// `[binaries]` in config.toml (`node`, `python3`). `None` takes it
    /// from the `mcp-server.toml` the folder carries.
    pub command: Option<String>,
    /// Its arguments; `{module}` is the module's folder, an argument
    /// `{roots}` the call's granted roots.
    pub args: Vec<String>,
    /// Variables the server gets (`{module}` allowed in values).
    pub env: BTreeMap<String, String>,
    /// The MCP bridge program (`mcp_bridge`), copied in as the module's
    /// program.
    pub bridge: PathBuf,
    /// Replace the installed module of the same id, keeping the grants of
    /// the tools still listed.
    pub upgrade: bool,
    /// How long one server process lives, written as `[server] lifetime`
    /// (`--lifetime`); `None` keeps what the operator's manifest, or the
    /// module upgraded, says (per call when neither says).
    pub lifetime: Option<McpLifetime>,
}

/// How long one MCP server process lives (`[server] lifetime` of
/// `mcp-server.toml`, `crate::session_server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpLifetime {
    /// A fresh process for every call, with that call's grants (the default).
    Call,
    /// One process for a client connection of `modhost mcp` over stdio,
    /// confined to the union of every tool's grants.
    Session,
}

/// What `install --mcp` did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpInstallReport {
    pub install: InstallReport,
    /// The server's tools, in its order.
    pub tools: Vec<String>,
    /// Against the module it replaced, with `upgrade`.
    pub changes: Option<McpToolChanges>,
    /// The installed manifest, where the operator grants each tool.
    pub manifest: PathBuf,
    /// The server's command (a `[binaries]` name).
    pub command: String,
    /// Whether the folder carried the operator's own `mcp-server.toml`
    /// (its grants installed as written) rather than the install writing
    /// one that grants nothing.
    pub operator_manifest: bool,
    /// How long one server process lives, as the installed manifest says.
    pub lifetime: McpLifetime,
}

/// How an upgrade's tools differ from the ones it replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct McpToolChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

/// The bridge's answer to [`LIST_METHOD`].
#[derive(Debug, Deserialize)]
struct Listed {
    manifest: String,
    tools: String,
    names: Vec<String>,
    changes: Option<McpToolChanges>,
}

impl Host {
    /// Install the MCP server in `request.source` as a module of the
    /// bridge, listing its tools confined, and pin it; see the module docs.
    /// A `.mcpb` bundle is read by [`crate::mcpb`], its command taken from
    /// its `manifest.json`.
    pub async fn install_mcp(
        &self,
        request: McpInstallRequest,
    ) -> Result<McpInstallReport, HostError> {
        if crate::mcpb::detect::is_bundle(&request.source) {
            return self.install_mcpb(request, None).await;
        }
        self.install_mcp_recorded(request, crate::install_origin::Recorded::default())
            .await
    }

    /// [`Host::install_mcp`], the pin recording `recorded` (where a bundle's
    /// bytes came from) rather than the source folder.
    pub(crate) async fn install_mcp_recorded(
        &self,
        request: McpInstallRequest,
        recorded: crate::install_origin::Recorded,
    ) -> Result<McpInstallReport, HostError> {
        let source = &request.source;
        let meta = std::fs::metadata(source).map_err(|e| HostError::io("read", source, e))?;
        let archive = ArchiveFormat::of_path(source).filter(|_| meta.is_file());
        if !meta.is_dir() && archive.is_none() {
            return Err(HostError::Refused(format!(
                "{} is neither a folder nor a .tar.gz, .tgz or .zip archive: `install --mcp` takes the server's code (an npm project after `npm ci`, a `pip install --target` folder), as a folder or packed; nothing was installed",
                source.display()
            )));
        }
        if let Some(id) = &request.id {
            check_new_id(id)?;
        }
        if !std::fs::metadata(&request.bridge).is_ok_and(|m| m.is_file()) {
            return Err(HostError::Refused(format!(
                "the MCP bridge {} is not there; build it (`cargo build -p mcp_bridge`) or name it with --bridge PATH (nothing was installed)",
                request.bridge.display()
            )));
        }

        let staging_root = self.layout().staging_dir();
        let staging = staging_root.join(crate::request::new_request_id());
        std::fs::create_dir_all(&staging).map_err(|e| HostError::io("create", &staging, e))?;
        let result = async {
            let nothing_installed =
                |e: &dyn std::fmt::Display| HostError::Refused(format!("{e}; nothing was installed"));
            // The server's files, staged: every later read is of this copy.
            let staged = match archive {
                Some(format) => {
                    let received = staging.join("received");
                    crate::install::receive(source, &received, None)
                        .map_err(|e| nothing_installed(&e))?;
                    let unpacked = staging.join("unpacked");
                    crate::install::extract(&received, format, &unpacked, ArchiveLimits::default())
                        .map_err(|e| nothing_installed(&e))?;
                    server_tree(&unpacked).map_err(|e| HostError::io("read", &unpacked, e))?
                }
                None => {
                    let copied = staging.join("copied");
                    crate::install::copy_folder(source, &copied)
                        .map_err(|e| nothing_installed(&e))?;
                    copied
                }
            };
            let shipped = Shipped::read(&staged)?;
            let id = match (&request.id, &shipped.id) {
                (Some(id), _) => id.clone(),
                (None, Some(id)) => id.clone(),
                (None, None) => default_id(source, archive.is_some()),
            };
            check_new_id(&id)?;
            let command_name = match (&request.command, &shipped.command) {
                (Some(command), _) | (None, Some(command)) => command.clone(),
                (None, None) => {
                    return Err(HostError::Refused(format!(
                        "no server command: give it after `--` (`-- node {{module}}/dist/index.js`), or write it in {MANIFEST_FILE} in the folder ([server] command = \"node\"); nothing was installed"
                    )));
                }
            };
            let command = self.mcp_command(&command_name)?;
            let previous = match request.upgrade {
                true => self.installed_mcp_files(&id).await?,
                false => None,
            };
            let parent = staging.join("module");
            std::fs::create_dir_all(&parent).map_err(|e| HostError::io("create", &parent, e))?;
            let folder = parent.join(&id);
            std::fs::rename(&staged, &folder)
                .map_err(|e| HostError::io("move into staging", &staged, e))?;
            let program = folder.join(&id);
            if std::fs::symlink_metadata(&program).is_ok() {
                return Err(HostError::Refused(format!(
                    "{} holds a file named {id:?}, the name the MCP bridge takes as the module's program; install it with another --id (nothing was installed)",
                    source.display()
                )));
            }
            std::fs::copy(&request.bridge, &program)
                .map_err(|e| HostError::io("copy the MCP bridge to", &program, e))?;
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| HostError::io("make executable", &program, e))?;
            let listed = self
                .list_mcp_tools(
                    &program,
                    &id,
                    &request,
                    (&command_name, &command),
                    &shipped,
                    previous.as_ref(),
                )
                .await?;
            for (name, text) in [(MANIFEST_FILE, &listed.manifest), (TOOLS_FILE, &listed.tools)] {
                if text.len() > MAX_FILE_BYTES {
                    return Err(HostError::Refused(format!(
                        "the MCP bridge wrote a {name} of {} bytes, more than {MAX_FILE_BYTES}; nothing was installed",
                        text.len()
                    )));
                }
                let path = folder.join(name);
                std::fs::write(&path, text).map_err(|e| HostError::io("write", &path, e))?;
            }
            let run_as = match request.command {
                Some(_) => format!(
                    "`{command_name}{}`",
                    request
                        .args
                        .iter()
                        .map(|a| format!(" {a}"))
                        .collect::<String>()
                ),
                None => format!("its {MANIFEST_FILE} says (`{command_name} ...`)"),
            };
            let origin = format!(
                "{}, an MCP server run as {run_as}",
                match &recorded.origin {
                    Some(origin) => origin.clone(),
                    None => std::path::absolute(source)
                        .unwrap_or_else(|_| source.clone())
                        .display()
                        .to_string(),
                }
            );
            let install = self
                .install_from(
                    InstallRequest {
                        source: folder.clone(),
                        id: Some(id.clone()),
                        sha256: None,
                        force: false,
                        upgrade: request.upgrade,
                        provenance: recorded.provenance.clone(),
                    },
                    Some(origin),
                )
                .await?;
            Ok::<_, HostError>((install, listed, id, command_name, shipped.manifest.is_some()))
        }
        .await;
        let _ = std::fs::remove_dir_all(&staging);
        let _ = std::fs::remove_dir(&staging_root);
        let (install, listed, id, command, operator_manifest) = result?;
        let lifetime = if crate::session_server::manifest_says_session(&listed.manifest) {
            McpLifetime::Session
        } else {
            McpLifetime::Call
        };
        let manifest = install
            .module
            .folder
            .clone()
            .unwrap_or_else(|| self.layout().module_dir(&id))
            .join(MANIFEST_FILE);
        Ok(McpInstallReport {
            install,
            tools: listed.names,
            changes: listed.changes,
            manifest,
            command,
            operator_manifest,
            lifetime,
        })
    }

    /// The path of the server's command: a binary the operator configured.
    fn mcp_command(&self, command: &str) -> Result<PathBuf, HostError> {
        if command.is_empty() || command.contains('/') {
            return Err(HostError::Refused(format!(
                "the server's command {command:?} must be a binary name (`node`, `python3`) configured under [binaries] in {}: the program every call of the server runs is the operator's to name; nothing was installed",
                self.layout().config_path().display()
            )));
        }
        let Some(configured) = self.config().binaries.get(command) else {
            let found = on_module_path(command)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("/absolute/path/of/{command}"));
            return Err(HostError::Refused(format!(
                "the server's command `{command}` is not a binary configured for modules: add `{command} = \"{found}\"` under [binaries] in {} (the program itself, not a version manager's shim), then install again; nothing was installed",
                self.layout().config_path().display()
            )));
        };
        let path = std::fs::canonicalize(configured).map_err(|e| {
            HostError::Refused(format!(
                "[binaries] {command} = {} does not resolve ({e}); nothing was installed",
                configured.display()
            ))
        })?;
        if path.starts_with(self.home()) {
            return Err(HostError::Refused(format!(
                "[binaries] {command} = {} lies in the modhost home, where modules write; point it outside (nothing was installed)",
                path.display()
            )));
        }
        Ok(path)
    }

    /// The manifest and tool snapshot of the installed module `id`, when it
    /// is an MCP server module (an upgrade carries its grants over).
    async fn installed_mcp_files(
        &self,
        id: &str,
    ) -> Result<Option<(String, Option<String>)>, HostError> {
        let Ok(module) = self.module(id).await else {
            return Ok(None);
        };
        let Some(folder) = module.folder else {
            return Ok(None);
        };
        let read = |name: &str| std::fs::read_to_string(folder.join(name)).ok();
        Ok(read(MANIFEST_FILE).map(|manifest| (manifest, read(TOOLS_FILE))))
    }

    /// Run the bridge at `program` (in staging), confined as a call granted
    /// only the command, asking it to list the server's tools.
    async fn list_mcp_tools(
        &self,
        program: &Path,
        id: &str,
        request: &McpInstallRequest,
        (command_name, command): (&str, &Path),
        shipped: &Shipped,
        previous: Option<&(String, Option<String>)>,
    ) -> Result<Listed, HostError> {
        let limits = self.config().limits.invoke();
        let server = request
            .command
            .as_ref()
            .map(|command| json!({"command": command, "args": request.args, "env": request.env}));
        let params = json!({
            "id": id,
            "server": server,
            "binaries": {command_name: command},
            "previous": previous.map(|(manifest, _)| manifest),
            "previous_tools": previous.and_then(|(_, tools)| tools.as_ref()),
            "manifest": shipped.manifest,
            "pinned_tools": shipped.tools,
            "max_output_bytes": limits.max_output_bytes,
            "lifetime": request.lifetime,
        });
        let line = serde_json::to_string(&Request::new(1, LIST_METHOD, Some(params)))
            .map_err(|e| HostError::Refused(format!("could not encode the request: {e}")))?;
        let executables = [command.to_path_buf()];
        let mut module_writes = vec![self.home().to_path_buf()];
        if let Some(workspace) = self.workspace() {
            module_writes.push(workspace.to_path_buf());
        }
        let call = Call {
            request_line: &line,
            limits,
            grants: &[],
            executables: &executables,
            module_writes: &module_writes,
            network: None,
            start_ahead: false,
            secrets: &[],
        };
        let engines = self.engines().cold();
        let failed = |message: String| {
            HostError::Refused(format!(
                "the MCP server's tools could not be listed: {message}; nothing was installed"
            ))
        };
        let exchange = modhost_runner::run(&engines, Transport::Native, program, &call, None)
            .await
            .map_err(|e| {
                let tail = e.stderr_tail().trim();
                failed(match tail.is_empty() {
                    true => e.to_string(),
                    false => format!("{e}; the server's stderr ends: {}", tail_lines(tail)),
                })
            })?;
        match exchange.response.outcome {
            Ok(value) => serde_json::from_value(value)
                .map_err(|e| failed(format!("the bridge's answer does not parse: {e}"))),
            Err(error) => {
                let remedy = error
                    .data
                    .as_ref()
                    .and_then(|d| d.remedy.clone())
                    .unwrap_or_default();
                let tail = exchange.stderr_tail.trim();
                let mut message = error.message.clone();
                let problems = error
                    .data
                    .as_ref()
                    .map(|d| d.problems.clone())
                    .unwrap_or_default();
                if !problems.is_empty() {
                    message.push_str(&format!(": {}", problems.join("; ")));
                }
                if !tail.is_empty() {
                    message.push_str(&format!("; the server's stderr ends: {}", tail_lines(tail)));
                }
                if !remedy.is_empty() {
                    message.push_str(&format!(" ({remedy})"));
                }
                Err(failed(message))
            }
        }
    }
}

/// What the operator shipped with the server's code: its own manifest and
/// tool snapshot, if any (read from the staged copy, bounded).
#[derive(Debug, Default)]
struct Shipped {
    /// The text of `mcp-server.toml`.
    manifest: Option<String>,
    /// The text of `tools.json`.
    tools: Option<String>,
    /// The manifest's `id`, when it names one.
    id: Option<String>,
    /// The manifest's `[server] command`, when it names one.
    command: Option<String>,
}

impl Shipped {
    /// Read the two files in the staged `folder`. The host reads only the
    /// id and the command of the manifest (to name the module and grant
    /// the listing its binary); the bridge reads the rest, strictly.
    fn read(folder: &Path) -> Result<Shipped, HostError> {
        let manifest = read_shipped(folder, MANIFEST_FILE)?;
        let tools = read_shipped(folder, TOOLS_FILE)?;
        let (mut id, mut command) = (None, None);
        if let Some(text) = &manifest {
            #[derive(Deserialize)]
            struct Head {
                id: Option<String>,
                server: Option<Server>,
            }
            #[derive(Deserialize)]
            struct Server {
                command: Option<String>,
            }
            let head: Head = toml::from_str(text).map_err(|e| {
                HostError::Refused(format!(
                    "{MANIFEST_FILE} in the server's folder is not valid TOML: {e}; fix it (nothing was installed)"
                ))
            })?;
            id = head.id.filter(|id| !id.is_empty());
            command = head.server.and_then(|s| s.command);
        }
        Ok(Shipped {
            manifest,
            tools,
            id,
            command,
        })
    }
}

/// The file `name` at the top of `folder`, when it is a regular file (a
/// link is refused: the staged tree's links point inside it, but a
/// manifest is read as it was packed, not through one).
fn read_shipped(folder: &Path, name: &str) -> Result<Option<String>, HostError> {
    let path = folder.join(name);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(None);
    };
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES as u64 {
        return Err(HostError::Refused(format!(
            "{name} in the server's folder is not a regular file of at most {MAX_FILE_BYTES} bytes; nothing was installed"
        )));
    }
    std::fs::read_to_string(&path)
        .map(Some)
        .map_err(|e| HostError::io("read", &path, e))
}

/// The folder an archive's server lives in: its one top-level folder when
/// it holds nothing else (the way release archives are packed), else the
/// archive's top.
fn server_tree(unpacked: &Path) -> std::io::Result<PathBuf> {
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(unpacked)?.collect::<Result<_, _>>()?;
    match entries.as_slice() {
        [only] if only.file_type()?.is_dir() => Ok(only.path()),
        _ => Ok(unpacked.to_path_buf()),
    }
}

/// The id of a module installed from `source` with no `--id` and no id in
/// its manifest: the folder's name, or the archive's without `.tar.gz`,
/// `.tgz` or `.zip`.
fn default_id(source: &Path, archive: bool) -> String {
    let name = match archive {
        true => source.file_name().map(|n| n.to_string_lossy().into_owned()),
        false => source
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
    }
    .unwrap_or_default();
    if !archive {
        return name;
    }
    let lower = name.to_ascii_lowercase();
    let cut = [".tar.gz", ".tgz", ".zip"]
        .iter()
        .find(|ext| lower.ends_with(*ext))
        .map_or(0, |ext| ext.len());
    name[..name.len() - cut].to_owned()
}

/// At most the last 2 KiB of a stderr tail (what an agent's error shows
/// of a module's stderr), its lines joined on one.
fn tail_lines(tail: &str) -> String {
    let mut start = tail.len().saturating_sub(2048);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    tail[start..]
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `command` found on the PATH modules get (version-manager shims
/// resolved), for the suggestion of a `[binaries]` line.
fn on_module_path(command: &str) -> Option<PathBuf> {
    let path = modhost_sandbox::environment::module_path()?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|found| std::fs::canonicalize(found).ok())
}
