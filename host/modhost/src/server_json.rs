//! MCP registry interop: read a `server.json` entry and install the package
//! of it modhost can pin (`modhost install ./server.json`), and write one
//! for an installed module (`modhost server-json MODULE`,
//! [`Host::server_json_entry`]).
//!
//! Reading: the entry is parsed strictly ([`entry`]), the first package
//! modhost can honour is chosen ([`choose`]: an MCP bundle at an https URL
//! with its `fileSha256`, or an OCI artifact), fetched through
//! [`Host::fetch_source`] (https only, the sha256 checked as it streams;
//! for OCI every digest), and installed as a local file would be: a bundle
//! as an MCP server module ([`crate::mcpb`], its command from its
//! `manifest.json`), an OCI artifact as `modhost install oci://…` installs
//! it. The pin records the URL or reference and the sha256.
//!
//! Design decisions:
//!
//! - **Refuse what cannot be honoured, saying what to do instead.** An
//!   entry with a field modhost does not know, a package that is fetched
//!   when the server starts (npm, PyPI: bytes no pin covers), a server
//!   listening for HTTP, arguments or secrets the entry expects someone to
//!   type in: each is refused with its reason, never installed halfway or
//!   with a guess.
//! - **The entry's digest is checked twice.** `fileSha256` is the fetch's
//!   expected sha256, and the fetched file's sha256 is compared with it
//!   again before anything is installed (for OCI, where the manifest digest
//!   is the fetch's check, the entry's `fileSha256` is checked here).
//! - **Nothing of the entry reaches the module but the bytes and fixed
//!   variables.** Names, descriptions and icons are a publisher's words;
//!   the module's id is the operator's `--id` or the entry name's last
//!   part, and its grants start at nothing like every MCP server module's.

pub mod choose;
pub mod entry;
pub mod error;
mod write;

use std::path::PathBuf;

use modhost_distribution::Progress;

use crate::fetch_source::FetchRequest;
use crate::host::{Host, HostError};
use crate::manage::{InstallReport, InstallRequest};
use crate::mcp_install::{McpInstallReport, McpInstallRequest};

pub use choose::ChosenPackage;
pub use entry::{SCHEMA_URL, ServerEntry};
pub use error::ServerJsonError;

/// The most bytes of a server.json read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Whether `path` names a server.json rather than a module: a `.json` file
/// (no module is one: modules are executables, `.wasm` components, folders
/// and archives).
pub fn is_server_json(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// What `install_server_json` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ServerJsonInstallRequest {
    /// The server.json file.
    pub file: PathBuf,
    /// The module id; default the last part of the entry's name.
    pub id: Option<String>,
    /// Replace the installed module of the same id.
    pub upgrade: bool,
    /// The MCP bridge program, for a bundle (`mcp_bridge`).
    pub bridge: PathBuf,
    /// Install without a signature although `[signatures]` requires one.
    pub allow_unsigned: bool,
}

/// What was installed from a server.json.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerJsonInstallReport {
    /// The entry's name.
    pub name: String,
    /// The package installed.
    pub package: ChosenPackage,
    pub installed: ServerJsonInstalled,
}

/// An MCP server module (from a bundle) or a module (from OCI).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerJsonInstalled {
    McpServer(Box<McpInstallReport>),
    Module(Box<InstallReport>),
}

impl ServerJsonInstalled {
    /// The install's report, whichever kind.
    pub fn install(&self) -> &InstallReport {
        match self {
            ServerJsonInstalled::McpServer(report) => &report.install,
            ServerJsonInstalled::Module(report) => report,
        }
    }
}

/// Read the server.json at `path`, bounded.
pub fn read_entry(path: &std::path::Path) -> Result<ServerEntry, ServerJsonError> {
    let failed = |message: String| ServerJsonError::Read {
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| failed(e.to_string()))?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(failed(format!(
            "not a regular file of at most {MAX_FILE_BYTES} bytes"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    ServerEntry::parse(&text)
}

impl Host {
    /// Install the package of the server.json `request.file` modhost can
    /// pin; see the module docs.
    pub async fn install_server_json(
        &self,
        request: ServerJsonInstallRequest,
        progress: &dyn Progress,
    ) -> Result<ServerJsonInstallReport, HostError> {
        let entry = read_entry(&request.file)?;
        let package = choose::choose(&entry).map_err(|reasons| ServerJsonError::NoPackage {
            name: entry.name.clone(),
            reasons,
        })?;
        let id = match &request.id {
            Some(id) => Some(id.clone()),
            None => entry
                .name
                .rsplit('/')
                .next()
                .and_then(crate::mcpb::id_from_name),
        };
        let (source, sha256) = match &package {
            ChosenPackage::Mcpb { url, sha256, .. } => (url.clone(), Some(sha256.clone())),
            ChosenPackage::Oci { reference, sha256 } => (reference.clone(), sha256.clone()),
        };
        let fetched = self
            .fetch_source(
                &FetchRequest {
                    source: source.clone(),
                    // For OCI the reference's digest is the fetch's check;
                    // fileSha256 is checked below.
                    sha256: match &package {
                        ChosenPackage::Mcpb { sha256, .. } => Some(sha256.clone()),
                        ChosenPackage::Oci { .. } => None,
                    },
                    signature: None,
                    allow_unsigned: request.allow_unsigned,
                },
                progress,
            )
            .await?;
        if let Some(expected) = sha256
            && !fetched.provenance.sha256.eq_ignore_ascii_case(&expected)
        {
            return Err(ServerJsonError::Sha256Mismatch {
                url: source,
                expected,
                actual: fetched.provenance.sha256.clone(),
            }
            .into());
        }
        let installed = match &package {
            ChosenPackage::Mcpb { env, .. } => {
                let report = self
                    .install_mcpb(
                        McpInstallRequest {
                            source: fetched.file.clone(),
                            id,
                            command: None,
                            args: Vec::new(),
                            env: env.clone(),
                            bridge: request.bridge.clone(),
                            upgrade: request.upgrade,
                            lifetime: None,
                        },
                        Some(fetched.provenance.clone()),
                    )
                    .await?;
                ServerJsonInstalled::McpServer(Box::new(report))
            }
            ChosenPackage::Oci { .. } => {
                let report = self
                    .install(InstallRequest {
                        source: fetched.file.clone(),
                        id,
                        sha256: None,
                        force: false,
                        upgrade: request.upgrade,
                        provenance: Some(fetched.provenance.clone()),
                    })
                    .await?;
                ServerJsonInstalled::Module(Box::new(report))
            }
        };
        Ok(ServerJsonInstallReport {
            name: entry.name,
            package,
            installed,
        })
    }
}

#[cfg(test)]
mod tests;
