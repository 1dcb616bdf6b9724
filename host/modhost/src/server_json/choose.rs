//! Which of an entry's packages modhost can install, and why each other one
//! cannot be.
//!
//! Two kinds can be pinned before anything runs: an MCP bundle (`mcpb`)
//! downloaded over https and checked against its `fileSha256`, and an OCI
//! artifact (`oci`) fetched by digest or by a tag resolved to one. An npm
//! or PyPI package is what `npx`/`uvx` fetch when the server starts, bytes
//! no pin covers, so it is refused with the commands that make it a folder
//! modhost can pin. The first installable package in the entry's order is
//! chosen (the publisher's preference).

use std::collections::BTreeMap;

use super::entry::{Package, ServerEntry};

/// The package modhost installs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChosenPackage {
    /// An MCP bundle at an https URL, with its sha256.
    Mcpb {
        url: String,
        sha256: String,
        /// The variables the entry sets (fixed values and defaults).
        env: BTreeMap<String, String>,
    },
    /// A modhost module as an OCI artifact: `oci://registry/repository…`.
    Oci {
        reference: String,
        /// The entry's `fileSha256`, when it gives one.
        sha256: Option<String>,
    },
}

impl ChosenPackage {
    /// The registry type, as server.json spells it.
    pub fn registry_type(&self) -> &'static str {
        match self {
            ChosenPackage::Mcpb { .. } => "mcpb",
            ChosenPackage::Oci { .. } => "oci",
        }
    }

    /// What is fetched.
    pub fn source(&self) -> &str {
        match self {
            ChosenPackage::Mcpb { url, .. } => url,
            ChosenPackage::Oci { reference, .. } => reference,
        }
    }
}

/// The first package of `entry` modhost can install, or every package's
/// reason.
pub(crate) fn choose(entry: &ServerEntry) -> Result<ChosenPackage, Vec<String>> {
    let mut reasons = Vec::new();
    for package in &entry.packages {
        match installable(package) {
            Ok(chosen) => return Ok(chosen),
            Err(why) => reasons.push(format!(
                "{} package {}: {why}",
                package.registry_type, package.identifier
            )),
        }
    }
    if entry.packages.is_empty() {
        reasons.push(match entry.remotes.is_empty() {
            true => "it lists no package".to_owned(),
            false => "it lists only remote servers (an HTTP endpoint an MCP client connects to itself), and modhost runs packages it can pin".to_owned(),
        });
    }
    Err(reasons)
}

/// `package` as modhost installs it, or why not.
fn installable(package: &Package) -> Result<ChosenPackage, String> {
    let version = package.version.as_deref().unwrap_or("VERSION");
    let id = &package.identifier;
    match package.registry_type.as_str() {
        "mcpb" | "oci" => {}
        "npm" => {
            return Err(format!(
                "an npm package is fetched by npx when the server starts, bytes no pin covers; install it into a folder (`npm install --prefix FOLDER {id}@{version}`) and that folder with `modhost install --mcp FOLDER -- node {{module}}/node_modules/{id}/ENTRY.js`, ENTRY.js being the file its package.json `bin` names"
            ));
        }
        "pypi" => {
            return Err(format!(
                "a PyPI package is fetched by uvx or pip when the server starts, bytes no pin covers; install it into a folder (`pip install --target FOLDER {id}=={version}`) and that folder with `modhost install --mcp FOLDER --env PYTHONPATH={{module}} -- python3 -m MODULE`, MODULE being the package's Python module"
            ));
        }
        other => {
            return Err(format!(
                "registryType {other:?} is not one modhost installs (an `mcpb` bundle with fileSha256, or an `oci` artifact)"
            ));
        }
    }
    if package.transport.kind != "stdio" {
        return Err(format!(
            "its transport is {:?}, a server listening for HTTP; modhost starts stdio servers, a fresh one per call",
            package.transport.kind
        ));
    }
    if !package.runtime_arguments.is_empty() || !package.package_arguments.is_empty() {
        return Err("it passes arguments (runtimeArguments, packageArguments) whose values modhost does not collect; install the package file itself and give the command yourself".to_owned());
    }
    if package.registry_type == "oci" {
        if !package.environment_variables.is_empty() {
            return Err("an OCI package modhost installs is a modhost module, which takes no environment variables (a capability declares its secrets)".to_owned());
        }
        let bare = id.strip_prefix("oci://").unwrap_or(id);
        let registry = bare.split('/').next().unwrap_or_default();
        if !bare.contains('/')
            || !(registry.contains('.') || registry.contains(':') || registry == "localhost")
        {
            return Err(format!(
                "{id:?} names no registry host; name it in full (`ghcr.io/OWNER/REPOSITORY@sha256:…`)"
            ));
        }
        return Ok(ChosenPackage::Oci {
            reference: format!("oci://{bare}"),
            sha256: package.file_sha256.clone(),
        });
    }
    let Some(sha256) = package.file_sha256.clone() else {
        return Err(
            "it gives no fileSha256, so its bytes could not be checked before they run".to_owned(),
        );
    };
    if !id.starts_with("https://") {
        return Err("its identifier is not an https URL".to_owned());
    }
    let mut env = BTreeMap::new();
    for variable in &package.environment_variables {
        let value = match (&variable.value, &variable.default) {
            (Some(value), _) => Some(value),
            (None, Some(default)) if !variable.is_secret => Some(default),
            _ => None,
        };
        match value {
            Some(value) if value.contains('{') && !variable.variables.is_empty() => {
                return Err(format!(
                    "environment variable {} is built from variables ({}) modhost does not collect",
                    variable.name,
                    variable
                        .variables
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Some(value) => {
                env.insert(variable.name.clone(), value.clone());
            }
            None if variable.is_required => {
                let what = match variable.is_secret {
                    true => "a secret",
                    false => "a value",
                };
                return Err(format!(
                    "it needs {what} for {} that modhost does not ask for at install; download the bundle ({id}, sha256 {sha256}), unpack it, and install the folder with `modhost install --mcp FOLDER --env {}=VALUE -- COMMAND ARGS...`",
                    variable.name, variable.name
                ));
            }
            None => {}
        }
    }
    Ok(ChosenPackage::Mcpb {
        url: id.clone(),
        sha256,
        env,
    })
}
