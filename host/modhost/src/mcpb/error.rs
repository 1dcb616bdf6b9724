//! Why an MCP bundle cannot be installed as it is.

/// Why an MCP bundle cannot be installed as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpbError {
    #[error("it holds no manifest.json at its top: not an MCP bundle")]
    NoManifest,
    #[error("its manifest.json is not a usable MCP bundle manifest: {0}")]
    Manifest(String),
    #[error("{why}; {remedy}")]
    Unsupported { why: String, remedy: String },
    #[error(
        "it carries {file}, the operator's grants for an MCP server module, which a bundle's author does not get to write; install the bundle without it"
    )]
    CarriesGrants { file: &'static str },
    #[error(
        "its command comes from its manifest.json: install it without `-- COMMAND ARGS` (to run it another way, unpack it and install the folder with `modhost install --mcp FOLDER -- COMMAND ARGS...`)"
    )]
    CommandGiven,
    #[error("it could not be unpacked: {0}")]
    Unpack(String),
}
