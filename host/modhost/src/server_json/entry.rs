//! A server.json entry as the MCP registry defines it (schema 2025-12-11,
//! `tests/fixtures/mcp-registry/server.schema.json`), read strictly.
//!
//! Every field the schema defines is named here, and an unknown one is an
//! error naming it: a field modhost does not know could change what the
//! entry means (the pre-2025-09-16 snake_case names, a future integrity
//! field), and an entry is installed only when all of it is understood.
//! Display-only fields (`icons`, `repository`, `_meta`, a package's
//! `registryBaseUrl` and `runtimeHint`) are kept as they are, unread.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ServerJsonError;

/// The schema version modhost reads and writes.
pub const SCHEMA_URL: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";

/// One server.json entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerEntry {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Reverse-DNS name, `namespace/server`.
    pub name: String,
    pub description: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<Package>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remotes: Vec<Value>,
}

/// One way to get and run the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Package {
    /// `mcpb`, `oci`, `npm`, `pypi`, `nuget`, ...
    pub registry_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_base_url: Option<String>,
    /// A URL (mcpb), an image reference (oci) or a package name.
    pub identifier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// sha256 of the package file, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_hint: Option<String>,
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_arguments: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub package_arguments: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_variables: Vec<KeyValueInput>,
}

/// How a client talks to the started package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// `stdio`, `streamable-http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Value>,
}

/// An environment variable the package is started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeyValueInput {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Value>,
}

impl ServerEntry {
    /// Parse a server.json text: strict JSON (a repeated key is refused), every
    /// field known, the name and digests in their schema's shape. A registry
    /// API answer (`{"server": {...}, "_meta": {...}}`) is read as its
    /// `server`.
    pub fn parse(text: &str) -> Result<ServerEntry, ServerJsonError> {
        let invalid = |message: String| ServerJsonError::Invalid { message };
        let mut value =
            modproto::strict_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if value.get("name").is_none()
            && let Some(server) = value.get_mut("server")
            && server.is_object()
        {
            value = server.take();
        }
        let entry: ServerEntry = serde_json::from_value(value).map_err(|e| {
            invalid(format!(
                "{e} (modhost reads server.json as the registry's schema 2025-12-11 defines it: camelCase fields, `registryType`, `fileSha256`)"
            ))
        })?;
        if !valid_name(&entry.name) {
            return Err(invalid(format!(
                "name {:?} is not `namespace/server` in reverse-DNS form (letters, digits, '.', '-' before the one '/', also '_' after it)",
                entry.name
            )));
        }
        for package in &entry.packages {
            if let Some(sha) = &package.file_sha256
                && !is_sha256(sha)
            {
                return Err(invalid(format!(
                    "package {}: fileSha256 {sha:?} is not 64 lowercase hexadecimal characters",
                    package.identifier
                )));
            }
        }
        Ok(entry)
    }
}

/// The schema's name pattern, `^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`, 3 to 200
/// characters.
pub(crate) fn valid_name(name: &str) -> bool {
    let Some((namespace, server)) = name.split_once('/') else {
        return false;
    };
    (3..=200).contains(&name.len())
        && !namespace.is_empty()
        && !server.is_empty()
        && namespace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        && server
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
}

/// 64 lowercase hexadecimal characters.
pub(crate) fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
