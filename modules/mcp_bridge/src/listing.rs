//! `mcp_list_tools`: what `modhost install --mcp` asks the bridge, once,
//! confined like a call granted nothing but the server's command: start
//! the server, list its tools, and write the manifest and the snapshot the
//! host puts in the module's folder before it pins it.
//!
//! Design decisions:
//!
//! - **Only the host sends it,** and only at install: it is not a
//!   capability (no agent can call it), and its answer is two files the
//!   host writes beside the server's code and then checks like any module
//!   (describe, conformance, pin).
//! - **The least authority, always.** A first install grants every tool
//!   nothing; an upgrade (the previous manifest given) keeps the roots, the
//!   `env` the operator wrote and each grant of a tool that is still
//!   listed, and reports every tool added, removed or changed, so the
//!   operator re-reads exactly what is new.
//! - **An operator's manifest is the operator's word.** When the folder or
//!   archive carries `mcp-server.toml`, its roots, `env` and grants are
//!   installed as written (the command line given to `install --mcp`, if
//!   any, replaces its command and args); a table for a tool the server
//!   does not list is refused, naming it, and a listed tool without a table
//!   gets nothing. When it carries `tools.json`, the server must list
//!   exactly those tools, or nothing is installed.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{BridgeError, BridgeKind};
use crate::manifest::{self, Manifest, ServerCommand};
use crate::pinned::{self, PinnedTools, ToolChanges, tool_name};
use crate::server::{Server, ServerSpec, with_exit};
use crate::session::Silent;

/// The request's method.
pub(crate) const METHOD: &str = "mcp_list_tools";

/// What the host sends.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    /// The module id.
    pub(crate) id: String,
    /// The command line given to `install --mcp` (`-- COMMAND ARGS`,
    /// `--env`), when given: without an operator's manifest it is the
    /// server; with one it replaces its command and args and adds to its
    /// `env`.
    #[serde(default)]
    pub(crate) server: Option<ServerCommand>,
    /// The command's path, by name (the operator's `[binaries]`).
    pub(crate) binaries: BTreeMap<String, String>,
    /// The manifest of the module being upgraded, when there is one.
    #[serde(default)]
    pub(crate) previous: Option<String>,
    /// Its `tools.json`, when there is one.
    #[serde(default)]
    pub(crate) previous_tools: Option<String>,
    /// The `mcp-server.toml` the operator wrote, found in the folder or
    /// archive being installed: its grants are the ones installed.
    #[serde(default)]
    pub(crate) manifest: Option<String>,
    /// The `tools.json` found there: the server must list exactly these.
    #[serde(default)]
    pub(crate) pinned_tools: Option<String>,
    /// The longest line read from the server.
    pub(crate) max_output_bytes: u64,
    /// `install --mcp --lifetime`: set in the manifest written; `None`
    /// keeps what the operator's (or the upgraded) manifest says.
    #[serde(default)]
    pub(crate) lifetime: Option<crate::manifest::Lifetime>,
}

/// What the bridge answers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Listed {
    /// The text of `mcp-server.toml`.
    pub(crate) manifest: String,
    /// The text of `tools.json`.
    pub(crate) tools: String,
    /// The tool names, in the server's order.
    pub(crate) names: Vec<String>,
    /// Against the previous snapshot, on an upgrade.
    pub(crate) changes: Option<ToolChanges>,
}

/// Start the server, list its tools, render the files.
pub(crate) fn list(folder: &Path, params: &ListParams) -> Result<Listed, BridgeError> {
    let parse = |text: &str, remedy: &str| {
        Manifest::parse(text, manifest::FILE).map_err(|e| {
            BridgeError::new(BridgeKind::BadManifest, e.to_string()).with_remedy(remedy.to_owned())
        })
    };
    let previous = match &params.previous {
        Some(text) => Some(parse(
            text,
            "fix the installed mcp-server.toml, or remove the module and install it afresh",
        )?),
        None => None,
    };
    let operator = match &params.manifest {
        Some(text) => Some(parse(
            text,
            "fix mcp-server.toml in the folder or archive you install (the message says what), then install again",
        )?),
        None => None,
    };
    let written_by_operator = operator.is_some();
    let mut fresh = match (operator, &params.server) {
        (Some(mut manifest), Some(given)) => {
            manifest.server.command = given.command.clone();
            manifest.server.args = given.args.clone();
            manifest.server.env.extend(given.env.clone());
            manifest
        }
        (Some(manifest), None) => manifest,
        (None, Some(given)) => Manifest {
            id: String::new(),
            version: String::new(),
            title: String::new(),
            description: String::new(),
            server: given.clone(),
            roots: BTreeMap::new(),
            tools: BTreeMap::new(),
        },
        (None, None) => {
            return Err(BridgeError::new(
                BridgeKind::BadManifest,
                "there is no server to list: no command was given and the folder holds no mcp-server.toml",
            )
            .with_remedy("give the server's command after `--`, or write mcp-server.toml in the folder"));
        }
    };
    fresh.id = params.id.clone();
    // Checked as the calls will read it, before anything starts.
    Manifest::parse(&manifest::render(&with_version(&fresh, "0.0.0")), manifest::FILE)
        .map_err(|e| BridgeError::new(BridgeKind::BadManifest, e.to_string())
            .with_remedy("give the command as a binary name (`node`, `python3`) configured under [binaries] in config.toml, and name the server's files as {module}/..."))?;
    let spec = ServerSpec::new(&fresh, folder, &params.binaries, Vec::new())?;
    let (mut server, mut session) = Server::start(&spec, params.max_output_bytes)?;
    let outcome = (|| {
        let initialized = session.initialize(&mut Silent)?;
        let tools = session.list_tools(&mut Silent)?;
        Ok((initialized, tools))
    })();
    let outcome = outcome.map_err(|e| with_exit(e, &mut server));
    server.end(session);
    let (initialized, tools) = outcome?;
    // Names are present and unique: `list_tools` refuses anything else.
    let names: Vec<String> = tools
        .iter()
        .filter_map(tool_name)
        .map(str::to_owned)
        .collect();
    let snapshot = PinnedTools {
        protocol_version: initialized.protocol_version,
        server_info: initialized.server_info,
        tools,
    };
    if let Some(text) = &params.pinned_tools {
        let shipped = PinnedTools::parse(text, pinned::FILE).map_err(|e| {
            BridgeError::new(BridgeKind::BadManifest, e.to_string()).with_remedy(
                "fix or remove tools.json in the folder or archive you install (without it, the tools are listed afresh)",
            )
        })?;
        let changes = pinned::compare(&shipped.tools, &snapshot.tools);
        if !changes.is_empty() {
            return Err(BridgeError::new(
                BridgeKind::ToolsChanged,
                "the MCP server does not list the tools of the tools.json it was installed with",
            )
            .with_problems(changes.problems())
            .with_remedy("review what changed; to pin what the server lists now, remove tools.json from the folder or archive and install again"));
        }
    }
    if written_by_operator {
        let stale: Vec<String> = fresh
            .tools
            .keys()
            .filter(|name| !names.contains(name))
            .map(|name| format!("{name:?}"))
            .collect();
        if !stale.is_empty() {
            return Err(BridgeError::new(
                BridgeKind::BadManifest,
                format!(
                    "mcp-server.toml grants tools the MCP server does not list: {} (it lists {})",
                    stale.join(", "),
                    names.join(", ")
                ),
            )
            .with_remedy(
                "remove those [tools.NAME] tables or fix their names, then install again",
            ));
        }
    }
    if fresh.version.is_empty() {
        fresh.version = semver_or_zero(snapshot.server_info.get("version"));
    }
    let mut changes = None;
    if let Some(previous) = previous {
        if !written_by_operator {
            fresh.server.lifetime = previous.server.lifetime;
            fresh.roots = previous.roots.clone();
            fresh.title = previous.title.clone();
            fresh.description = previous.description.clone();
            for name in &names {
                if let Some(grant) = previous.tools.get(name) {
                    fresh.tools.insert(name.clone(), grant.clone());
                }
            }
        }
        let before = params
            .previous_tools
            .as_deref()
            .and_then(|text| serde_json::from_str::<PinnedTools>(text).ok());
        changes = Some(match before {
            Some(before) => pinned::compare(&before.tools, &snapshot.tools),
            // No readable snapshot: what changed is known by name only.
            None => by_name(&previous, &names),
        });
    }
    for name in &names {
        fresh.tools.entry(name.clone()).or_default();
    }
    if let Some(lifetime) = params.lifetime {
        fresh.server.lifetime = lifetime;
    }
    let tools_text = serde_json::to_string_pretty(&snapshot).map_err(|e| {
        BridgeError::new(
            BridgeKind::BadMessage,
            format!("the tool list cannot be written: {e}"),
        )
        .with_remedy("report it to modhost's authors")
    })?;
    Ok(Listed {
        manifest: manifest::render(&fresh),
        tools: format!("{tools_text}\n"),
        names,
        changes,
    })
}

fn with_version(manifest: &Manifest, version: &str) -> Manifest {
    let mut manifest = manifest.clone();
    manifest.version = version.to_owned();
    manifest
}

/// Changes known from the previous manifest's tables alone.
fn by_name(previous: &Manifest, names: &[String]) -> ToolChanges {
    ToolChanges {
        added: names
            .iter()
            .filter(|n| !previous.tools.contains_key(*n))
            .cloned()
            .collect(),
        removed: previous
            .tools
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect(),
        changed: Vec::new(),
    }
}

/// The server's version when it is semver (`MAJOR.MINOR.PATCH`, optional
/// pre-release and build), else `0.0.0`: a descriptor's version must be
/// semver, and a date such as `2026.10.19` is one.
fn semver_or_zero(version: Option<&Value>) -> String {
    let Some(version) = version.and_then(Value::as_str) else {
        return "0.0.0".to_owned();
    };
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = |p: &&str| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && (p.len() == 1 || !p.starts_with('0'))
    };
    let valid_rest = version[core.len()..]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-+.".contains(&b));
    if parts.len() == 3 && parts.iter().all(numeric) && valid_rest {
        version.to_owned()
    } else {
        "0.0.0".to_owned()
    }
}

#[cfg(test)]
pub(crate) fn semver_or_zero_for_tests(version: &str) -> String {
    semver_or_zero(Some(&Value::String(version.to_owned())))
}
