//! An MCPB bundle's `manifest.json`, read for the one thing modhost takes
//! from it: how the server starts (`server.mcp_config`), turned into the
//! command, arguments and variables of an MCP server module.
//!
//! The format is the MCP Bundle spec's (github.com/modelcontextprotocol/mcpb,
//! `MANIFEST.md`, manifest versions 0.1 to 0.4; `dxt_version` is the older
//! name of `manifest_version`). Only the fields read here are typed: the
//! rest (icons, prompts, localization, `_meta`) describe the bundle to a
//! desktop client's user and change nothing about what runs.
//!
//! Design decisions:
//!
//! - **What runs is exactly what the manifest says, or nothing.** Each
//!   `${...}` is replaced as the spec defines or refused: `${__dirname}` is
//!   the module's folder (`{module}`, its approved snapshot), `${/}` and
//!   `${pathSeparator}` are `/`. The user's folders (`${HOME}`,
//!   `${DOCUMENTS}`, ...) are refused: a module never gets the user's home
//!   by a path in its command line, only by a root the operator grants.
//! - **`user_config` is not a prompt.** modhost asks nobody at install: a
//!   value the bundle asks for is its default, an optional one without a
//!   default is left out (the argument or variable dropped, as a desktop
//!   client does for an empty optional value), and a required one without
//!   a default is refused, with the way to install the bundle's folder
//!   with the operator's own values.
//! - **The command is a `[binaries]` name.** `node` or `python`/`python3`
//!   (a `binary` bundle's own program, or `uv`, which installs
//!   dependencies at run time, are refused with what to do instead): the
//!   interpreter is the operator's, the bridge's rule.
//! - **A relative file argument is the bundle's file.** Desktop clients
//!   start a bundle's server in its folder, so `server/index.js` names the
//!   bundle's file; modhost starts servers in the call's root, so an
//!   argument naming a file of the bundle becomes `{module}/server/index.js`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::error::McpbError;

/// What stands for the module's folder in an MCP server's arguments and
/// variables (the bridge's `{module}`).
pub(crate) const MODULE_PLACEHOLDER: &str = "{module}";

/// The parts of `manifest.json` modhost reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Manifest {
    #[serde(default)]
    pub(crate) manifest_version: Option<String>,
    #[serde(default)]
    pub(crate) dxt_version: Option<String>,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) version: Option<String>,
    pub(crate) server: Server,
    #[serde(default)]
    pub(crate) compatibility: Option<Compatibility>,
    #[serde(default)]
    pub(crate) user_config: BTreeMap<String, UserConfig>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Server {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) entry_point: Option<String>,
    #[serde(default)]
    pub(crate) mcp_config: Option<McpConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct McpConfig {
    #[serde(default)]
    pub(crate) command: Option<String>,
    #[serde(default)]
    pub(crate) args: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) platform_overrides: BTreeMap<String, McpConfig>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Compatibility {
    #[serde(default)]
    pub(crate) platforms: Option<Vec<String>>,
}

/// One `user_config` entry: what a desktop client would ask its user.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct UserConfig {
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) required: bool,
    #[serde(default)]
    pub(crate) default: Option<Value>,
}

/// How the server starts, in the terms of `mcp-server.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// A `[binaries]` name.
    pub(crate) command: String,
    /// `{module}` is the module's folder.
    pub(crate) args: Vec<String>,
    pub(crate) env: BTreeMap<String, String>,
}

/// What to do instead, when a bundle cannot be installed as it is.
const UNPACK_REMEDY: &str = "unpack the bundle (it is a zip file) and install its folder with `modhost install --mcp FOLDER -- COMMAND ARGS...`, giving the command and values yourself";

impl Manifest {
    /// Parse `text` (the bundle's `manifest.json`).
    pub(crate) fn parse(text: &str) -> Result<Manifest, McpbError> {
        let value = modproto::strict_json::from_str(text)
            .map_err(|e| McpbError::Manifest(e.to_string()))?;
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|e| McpbError::Manifest(e.to_string()))?;
        if manifest.manifest_version.is_none() && manifest.dxt_version.is_none() {
            return Err(McpbError::Manifest(
                "it names no manifest_version: not an MCP bundle manifest".into(),
            ));
        }
        Ok(manifest)
    }

    /// The command line the server starts with, the bundle's files being in
    /// `tree` (for relative file arguments); `python3_only`: the operator
    /// configured `python3` but not `python`.
    pub(crate) fn launch(&self, tree: &Path, python3_only: bool) -> Result<Launch, McpbError> {
        let refuse = |why: String| McpbError::Unsupported {
            why,
            remedy: UNPACK_REMEDY.to_owned(),
        };
        if let Some(platforms) = self
            .compatibility
            .as_ref()
            .and_then(|c| c.platforms.as_ref())
            && !platforms.iter().any(|p| p == "linux")
        {
            return Err(McpbError::Unsupported {
                why: format!(
                    "the bundle runs on {} only, not on Linux",
                    platforms.join(", ")
                ),
                remedy: "use a build of the server for Linux".to_owned(),
            });
        }
        let default_command = match self.server.kind.as_str() {
            "node" => "node",
            "python" => "python3",
            "binary" => {
                return Err(McpbError::Unsupported {
                    why: "its server is a `binary` bundle: the program it starts is the bundle's own, and an MCP server module runs a program the operator configured".into(),
                    remedy: "unpack the bundle outside the modhost home, name its program under [binaries] in config.toml (`NAME = \"/path/to/server/program\"`), and install the folder with `modhost install --mcp FOLDER -- NAME ARGS...`".into(),
                });
            }
            "uv" => {
                return Err(McpbError::Unsupported {
                    why: "its server is a `uv` bundle, whose dependencies are downloaded when it starts, bytes no pin covers".into(),
                    remedy: "install its dependencies into a folder (`pip install --target FOLDER .` in the unpacked bundle), and install that folder with `modhost install --mcp FOLDER --env PYTHONPATH={module} -- python3 ARGS...`".into(),
                });
            }
            other => {
                return Err(refuse(format!(
                    "its server type {other:?} is not one modhost knows (node, python)"
                )));
            }
        };
        let mut config = self.server.mcp_config.clone().unwrap_or_default();
        if let Some(linux) = config.platform_overrides.remove("linux") {
            if linux.command.is_some() {
                config.command = linux.command;
            }
            if linux.args.is_some() {
                config.args = linux.args;
            }
            config.env.extend(linux.env);
        }
        let command = match config.command {
            Some(command) => command,
            None => default_command.to_owned(),
        };
        let args = match config.args {
            Some(args) => args,
            None => match &self.server.entry_point {
                Some(entry) => vec![format!("${{__dirname}}/{entry}")],
                None => {
                    return Err(refuse(
                        "its manifest names neither server.mcp_config.args nor server.entry_point"
                            .into(),
                    ));
                }
            },
        };
        if command.is_empty()
            || command.contains('/')
            || command.contains("${")
            || command.chars().any(char::is_whitespace)
        {
            return Err(refuse(format!(
                "its command {command:?} is not the name of an interpreter (`node`, `python3`) the operator grants through [binaries]"
            )));
        }
        let command = match command.as_str() {
            // Debian and most distributions ship `python3` only.
            "python" if python3_only => "python3".to_owned(),
            _ => command,
        };
        let mut launch = Launch {
            command,
            args: Vec::new(),
            env: BTreeMap::new(),
        };
        for arg in &args {
            for value in self.substitute(arg, Place::Argument)? {
                launch.args.push(bundle_file(tree, value));
            }
        }
        for (name, value) in &config.env {
            // An optional value left unset drops the variable.
            if let Some(value) = self.substitute(value, Place::Variable)?.into_iter().next() {
                launch.env.insert(name.clone(), value);
            }
        }
        Ok(launch)
    }

    /// `text` with every `${...}` replaced: none, one or (a `multiple`
    /// user_config default standing alone) several values.
    fn substitute(&self, text: &str, place: Place) -> Result<Vec<String>, McpbError> {
        if let Some(key) = whole_user_config(text) {
            return self.user_config_values(key, place);
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.bad_variable(text, "an unclosed ${"));
            };
            let name = &after[..end];
            match name {
                "__dirname" => out.push_str(MODULE_PLACEHOLDER),
                "/" | "pathSeparator" => out.push('/'),
                _ => {
                    match name.strip_prefix("user_config.") {
                        Some(key) => {
                            let values = self.user_config_values(key, place)?;
                            match values.as_slice() {
                                [one] => out.push_str(one),
                                [] => {
                                    return Err(self.bad_variable(
                                    text,
                                    &format!("the optional user_config.{key}, which has no default, inside a longer value"),
                                ));
                                }
                                _ => {
                                    return Err(self.bad_variable(
                                    text,
                                    &format!("user_config.{key}, several values, inside a longer value"),
                                ));
                                }
                            }
                        }
                        None => {
                            return Err(self.bad_variable(
                            text,
                            &format!(
                                "${{{name}}}, a folder of the user's that a module never gets by its command line (a root the operator grants is how a tool reaches a folder)"
                            ),
                        ));
                        }
                    }
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(vec![out])
    }

    /// The values `${user_config.KEY}` stands for: its default.
    fn user_config_values(&self, key: &str, place: Place) -> Result<Vec<String>, McpbError> {
        let Some(entry) = self.user_config.get(key) else {
            return Err(McpbError::Unsupported {
                why: format!(
                    "its mcp_config uses ${{user_config.{key}}}, which user_config does not declare"
                ),
                remedy: UNPACK_REMEDY.to_owned(),
            });
        };
        let strings = match &entry.default {
            None | Some(Value::Null) if entry.required => {
                let title = entry.title.as_deref().unwrap_or(key);
                return Err(McpbError::Unsupported {
                    why: format!(
                        "the bundle asks its user for {title:?} (user_config.{key}, required, no default), and modhost asks nobody at install"
                    ),
                    remedy: format!(
                        "{UNPACK_REMEDY} (your value for {key} in the {})",
                        place.label()
                    ),
                });
            }
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Bool(b)) => vec![b.to_string()],
            Some(Value::Number(n)) => vec![n.to_string()],
            Some(Value::Array(items)) if place == Place::Argument => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    other => Ok(other.to_string()),
                })
                .collect::<Result<_, McpbError>>()?,
            Some(other) => {
                return Err(McpbError::Unsupported {
                    why: format!("user_config.{key} has a default ({other}) that is not one value"),
                    remedy: UNPACK_REMEDY.to_owned(),
                });
            }
        };
        // A default may itself name the user's folders (`${HOME}/Desktop`):
        // refused like any other, by the same substitution.
        let mut values = Vec::new();
        for value in strings {
            // One default naming another could name the first again.
            if value.contains("${user_config.") {
                return Err(self.bad_variable(&value, "a user_config default naming another"));
            }
            values.extend(self.substitute(&value, place)?);
        }
        Ok(values)
    }

    fn bad_variable(&self, text: &str, what: &str) -> McpbError {
        McpbError::Unsupported {
            why: format!("its mcp_config value {text:?} holds {what}"),
            remedy: UNPACK_REMEDY.to_owned(),
        }
    }
}

/// Where a value goes: an argument may expand to several, a variable not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Argument,
    Variable,
}

impl Place {
    fn label(self) -> &'static str {
        match self {
            Place::Argument => "command's arguments",
            Place::Variable => "server's variables (--env)",
        }
    }
}

/// `KEY` when `text` is exactly `${user_config.KEY}`.
fn whole_user_config(text: &str) -> Option<&str> {
    text.strip_prefix("${user_config.")?
        .strip_suffix('}')
        .filter(|key| !key.contains('}') && !key.contains("${"))
}

/// `{module}/ARG` when `arg` is a relative path naming a file or folder of
/// the bundle (in `tree`), else `arg`.
fn bundle_file(tree: &Path, arg: String) -> String {
    let relative = Path::new(&arg);
    let plain = !arg.is_empty()
        && !arg.starts_with('-')
        && !arg.starts_with('{')
        && relative.is_relative()
        && relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    match plain && std::fs::symlink_metadata(tree.join(relative)).is_ok() {
        true => format!("{}/{arg}", MODULE_PLACEHOLDER),
        false => arg,
    }
}
