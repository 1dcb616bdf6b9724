//! The modhost descriptor of an MCP server: its pinned tools
//! ([`crate::pinned`]) with the operator's grants ([`crate::manifest`]).
//!
//! - One capability per tool, `<module>.<tool name>`: its description is
//!   the tool's, its `input_schema` the tool's `inputSchema`, its
//!   `output_schema` the tool's `outputSchema` when it has one (the host
//!   then validates every structured result against it).
//! - Its effects are the manifest's grant for the tool, plus the server's
//!   command in `spawns`: what every call of it really runs.
//! - The tool's own `annotations` (`readOnlyHint`, ...) are the server's
//!   claims and are left out: what a client is told a tool touches comes
//!   from the grants the host enforces.
//! - The module's roots are the manifest's `[roots]`; its binaries every
//!   program some tool may run.
//! - Nothing is started to describe the module: both files are in its
//!   folder, read-only, covered by the pin.

use std::path::Path;

use modproto::{BinaryDecl, Capability, Descriptor, Effects, Knowledge, RootDecl};
use serde_json::{Value, json};

use crate::error::{BridgeError, BridgeKind};
use crate::manifest::Manifest;
use crate::pinned::{PinnedTools, tool_name};

/// The manifest and the pinned tools of the module in `folder`, checked
/// against each other.
pub(crate) fn load(folder: &Path) -> Result<(Manifest, PinnedTools), BridgeError> {
    let remedy = "install the server again with `modhost install --mcp FOLDER --id ID --upgrade -- COMMAND ARGS...`, or fix the file and `modhost pin ID`";
    let manifest = Manifest::load(folder).map_err(|e| {
        BridgeError::new(BridgeKind::BadManifest, e.to_string()).with_remedy(remedy)
    })?;
    let pinned = PinnedTools::load(folder).map_err(|e| {
        BridgeError::new(BridgeKind::BadManifest, e.to_string()).with_remedy(remedy)
    })?;
    let names = pinned.names();
    let stale: Vec<&String> = manifest
        .tools
        .keys()
        .filter(|name| !names.contains(&name.as_str()))
        .collect();
    if !stale.is_empty() {
        return Err(BridgeError::new(
            BridgeKind::BadManifest,
            format!(
                "mcp-server.toml grants tools the pinned snapshot (tools.json) does not list: {}",
                stale
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .with_remedy(
            "remove those [tools.NAME] tables (or fix their names), then `modhost pin ID`",
        ));
    }
    Ok((manifest, pinned))
}

/// The capability id of the tool `name` of module `id`.
pub(crate) fn capability_id(id: &str, name: &str) -> String {
    format!("{id}.{name}")
}

/// The descriptor `describe` answers with.
pub(crate) fn descriptor(manifest: &Manifest, pinned: &PinnedTools) -> Descriptor {
    let server_name = pinned
        .server_info
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("an MCP server");
    let title = if manifest.title.is_empty() {
        pinned
            .server_info
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(server_name)
            .to_owned()
    } else {
        manifest.title.clone()
    };
    let description = if !manifest.description.is_empty() {
        manifest.description.clone()
    } else if manifest.server.lifetime == crate::manifest::Lifetime::Session {
        format!(
            "The MCP server {server_name}, run by modhost once per client connection of `modhost mcp` over stdio (session), confined to the union of its tools' grants; once per call elsewhere."
        )
    } else {
        format!(
            "The MCP server {server_name}, run by modhost once per call, confined to the call's grants."
        )
    };
    Descriptor {
        id: manifest.id.clone(),
        version: manifest.version.clone(),
        contract_version: None,
        title,
        description,
        roots: manifest
            .roots
            .iter()
            .map(|(name, root)| RootDecl {
                name: name.clone(),
                kind: root.kind,
                description: root.description.clone(),
                access: root.access,
            })
            .collect(),
        binaries: manifest
            .binaries()
            .into_iter()
            .map(|name| BinaryDecl {
                description: if name == manifest.server.command {
                    "the program the MCP server runs on".to_owned()
                } else {
                    String::new()
                },
                name,
            })
            .collect(),
        capabilities: pinned
            .tools
            .iter()
            .filter_map(|tool| capability(manifest, tool))
            .collect(),
        operations: Vec::new(),
        knowledge: Knowledge::default(),
        warnings: Vec::new(),
    }
}

fn capability(manifest: &Manifest, tool: &Value) -> Option<Capability> {
    let name = tool_name(tool)?;
    let grant = manifest.grant(name);
    let mut spawns = vec![manifest.server.command.clone()];
    for program in &grant.spawns {
        if !spawns.contains(program) {
            spawns.push(program.clone());
        }
    }
    let text = |key: &str| {
        tool.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let title = match text("title") {
        t if t.is_empty() => tool
            .pointer("/annotations/title")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        t => t,
    };
    Some(Capability {
        id: capability_id(&manifest.id, name),
        title,
        description: text("description"),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
        output_schema: tool.get("outputSchema").cloned(),
        effects: Effects {
            reads: grant.reads.clone(),
            writes: grant.writes.clone(),
            network: grant.network.clone(),
            spawns,
            cost: grant.cost,
            approval: grant.approval,
            untrusted_output: grant.untrusted_output,
            secrets: grant.secrets.clone(),
        },
        skills: Vec::new(),
        examples: Vec::new(),
    })
}
