//! `mcp-server.toml`: what the operator decided about one MCP server.
//!
//! An MCP server declares tools, never what they touch, so the authority
//! each tool gets is written here by the operator, in the module's folder,
//! where the pin covers it:
//!
//! ```toml
//! id = "time"
//! version = "2026.10.19"
//!
//! [server]
//! command = "python3"        # a binary granted through [binaries] in config.toml
//! args = ["-m", "mcp_server_time"]
//! env = { PYTHONPATH = "{module}" }
//!
//! [roots.workspace]          # the roots tools may be granted
//! kind = "workspace"
//! access = "read"
//!
//! [tools.get_current_time]   # one table per tool of tools.json
//! reads = []
//! writes = []
//! network = false
//! spawns = []
//! secrets = []
//! approval = false
//! cost = "local"
//! ```
//!
//! Design decisions:
//!
//! - **Least authority is the default.** A tool without a table, and every
//!   table `modhost install --mcp` writes, gets nothing but its server's
//!   command: no root, no host, no other program, no secret.
//! - **Read strictly.** An unknown key is an error naming it (a typo such as
//!   `read = ["workspace"]` would otherwise grant nothing and nobody would
//!   know why), and so is a table for a tool the pinned snapshot does not
//!   list (a stale grant would silently apply to a tool re-added later).
//! - **The command is a granted binary, by name.** Running an interpreter
//!   (`node`, `python3`) after the bridge's own start is an exec the host
//!   allows only for a program the capability names in `effects.spawns`
//!   and the operator configured, so every tool of the server declares the
//!   command's binary: what the call really runs. The server's own code
//!   lives in the module's folder, where the pin covers it.
//! - **Two placeholders, nothing else.** `{module}` is the module's folder
//!   (its approved snapshot) in `args` and `env`; an argument that is
//!   exactly `{roots}` becomes one argument per root the call was granted.
//!   No shell, no other expansion: what is written is what runs.
//! - **The code that runs is the folder's.** `args` and `env` may not make
//!   the interpreter load code from outside `{module}` (a `..` after it, a
//!   script relative to the working folder, the loader's variables, a
//!   search path elsewhere): [`crate::launch_rules`], checked on every
//!   read, so neither an install nor a call runs such a manifest.
//! - **The bridge owns the format.** The host never parses this file: at
//!   install it asks the bridge (confined) to list the server's tools and
//!   to write the manifest ([`render`]), so there is one reader and one
//!   writer of it.

use std::collections::BTreeMap;

use modproto::{Access, Cost, Network, RootKind};
use serde::{Deserialize, Serialize};

/// The manifest's file name in the module's folder.
pub(crate) const FILE: &str = "mcp-server.toml";

pub(crate) use crate::launch_rules::MODULE_PLACEHOLDER;

/// An argument that stands for the call's granted roots, one argument each.
pub(crate) const ROOTS_PLACEHOLDER: &str = "{roots}";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    /// The module id (the folder's name). An operator's manifest may leave
    /// it out: `install --mcp` writes the id the module is installed as.
    #[serde(default)]
    pub(crate) id: String,
    /// The module's version (semver): the server's own when it is one. An
    /// operator's manifest may leave it out (then it is the server's).
    #[serde(default)]
    pub(crate) version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) description: String,
    pub(crate) server: ServerCommand,
    /// The roots tools may be granted, by name.
    #[serde(default)]
    pub(crate) roots: BTreeMap<String, RootEntry>,
    /// Per tool (by its MCP name), what the operator grants it.
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, ToolGrant>,
}

/// How the server is started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerCommand {
    /// A binary name, resolved through the call's granted binaries
    /// (`[binaries]` in the host's config.toml).
    pub(crate) command: String,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// Variables set for the server on top of the bridge's own environment.
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// How long one server process lives: a call (the default) or, where
    /// the host keeps a session, a client connection ([`Lifetime`]).
    #[serde(default, skip_serializing_if = "Lifetime::is_call")]
    pub(crate) lifetime: Lifetime,
}

/// How long one server process lives.
///
/// `session` is the operator's choice, written here where the pin covers
/// it; the host reads it (only this key) from the approved snapshot and
/// keeps one process per client connection of `modhost mcp` over stdio,
/// confined to the union of every tool's grants. Everywhere else calls
/// still run per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Lifetime {
    #[default]
    Call,
    Session,
}

impl Lifetime {
    pub(crate) fn is_call(&self) -> bool {
        *self == Lifetime::Call
    }
}

/// A root tools may be granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RootEntry {
    pub(crate) kind: RootKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) access: Option<Access>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) description: String,
}

/// What one tool is granted. Every field is written out by [`render`], so
/// the operator sees what a tool does not get as plainly as what it gets.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolGrant {
    #[serde(default)]
    pub(crate) reads: Vec<String>,
    #[serde(default)]
    pub(crate) writes: Vec<String>,
    #[serde(default)]
    pub(crate) network: Network,
    /// Programs besides the server's command.
    #[serde(default)]
    pub(crate) spawns: Vec<String>,
    #[serde(default)]
    pub(crate) secrets: Vec<String>,
    #[serde(default)]
    pub(crate) approval: bool,
    #[serde(default)]
    pub(crate) cost: Cost,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) untrusted_output: Option<bool>,
}

impl ToolGrant {
    /// The roots the call may get, in the order the server sees them (its
    /// working folder is the first): `writes`, then `reads`, each once.
    pub(crate) fn root_order(&self) -> Vec<&str> {
        let mut order: Vec<&str> = Vec::new();
        for name in self.writes.iter().chain(&self.reads) {
            if !order.contains(&name.as_str()) {
                order.push(name);
            }
        }
        order
    }
}

/// Why the manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error("could not read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a valid manifest: {message}")]
    Invalid { path: String, message: String },
}

impl Manifest {
    /// Parse `text` (read from `path`, named in errors) and check what
    /// parsing cannot.
    pub(crate) fn parse(text: &str, path: &str) -> Result<Manifest, ManifestError> {
        let invalid = |message: String| ManifestError::Invalid {
            path: path.to_owned(),
            message,
        };
        let manifest: Manifest = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if manifest.server.command.is_empty()
            || manifest.server.command.contains('/')
            || manifest.server.command.chars().any(char::is_whitespace)
        {
            return Err(invalid(format!(
                "server.command {:?} must be the name of a binary the host grants (`node`, `python3`), configured under [binaries] in the host's config.toml: a path or a command line is not one",
                manifest.server.command
            )));
        }
        for (name, value) in &manifest.server.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0')
            {
                return Err(invalid(format!(
                    "server.env has a variable {name:?} no environment can hold"
                )));
            }
        }
        let problems = crate::launch_rules::problems(&manifest.server.args, &manifest.server.env);
        if !problems.is_empty() {
            return Err(invalid(problems.join("; ")));
        }
        Ok(manifest)
    }

    /// Read the manifest of the module in `folder`.
    pub(crate) fn load(folder: &std::path::Path) -> Result<Manifest, ManifestError> {
        let path = folder.join(FILE);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| ManifestError::Read {
            path: shown.clone(),
            source,
        })?;
        Manifest::parse(&text, &shown)
    }

    /// The grant of `tool`: its table, or nothing at all.
    pub(crate) fn grant(&self, tool: &str) -> ToolGrant {
        self.tools.get(tool).cloned().unwrap_or_default()
    }

    /// Every program some tool may run: the command first, then each
    /// tool's `spawns`, each once.
    pub(crate) fn binaries(&self) -> Vec<String> {
        let mut names = vec![self.server.command.clone()];
        for grant in self.tools.values() {
            for name in &grant.spawns {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    }
}

/// The text of a manifest, with a header saying how to edit it.
pub(crate) fn render(manifest: &Manifest) -> String {
    let body = toml::to_string(manifest).unwrap_or_else(|e| {
        // Every value here is a string, list, table or bool: serializing
        // cannot fail, but if it did the install must not write a half file.
        format!("# the manifest could not be written: {e}\n")
    });
    format!("{HEADER}{body}")
}

const HEADER: &str = "\
# mcp-server.toml: how modhost runs this MCP server, and what each tool is granted.
#
# Every call of a tool starts the server afresh, confined to that tool's grants;
# with [server] lifetime = \"session\", one server serves a whole `modhost mcp` stdio
# connection, confined to the union of every tool's grants (see MODULES.md).
# [tools.NAME] grants one tool (a tool without a table gets nothing):
#   reads / writes   roots declared under [roots.NAME] (kind = workspace | source | state | artifacts)
#   network          false, true (any public host) or [\"host:port\", ...]
#   spawns           programs besides the command, configured under [binaries] in config.toml
#   secrets          variable names granted under [capabilities] in config.toml
#   approval         true: ask before every call
# The command is a binary configured under [binaries] in config.toml. In args and env,
# {module} is this folder (its approved copy); an argument `{roots}` becomes the call's
# granted roots, one argument each. After editing, approve the change: `modhost pin ID`.
# The tools the server offers are pinned in tools.json: re-list them with
# `modhost install --mcp FOLDER --id ID --upgrade -- COMMAND ARGS...`.

";
