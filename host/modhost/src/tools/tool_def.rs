//! One agent tool as every surface and export format sees it, what a
//! client may assume about it, and the module it belongs to.

use std::path::PathBuf;
use std::sync::Arc;

use modproto::{Descriptor, Effects};
use serde::Serialize;
use serde_json::Value;

use crate::approval::{PolicyDecision, PolicyVerdict};
use crate::grants;

/// One agent tool: what every export format is rendered from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub module: String,
    pub capability: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The capability's (or the operator's) description, then the effect summary.
    pub description: String,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub effects: Effects,
    /// The network each call is granted (the declaration as the operator
    /// narrowed it): `None` for none.
    #[serde(skip)]
    pub network: Option<modhost_egress::CallGrant>,
    pub hints: Hints,
    /// The policy's verdict and the rule that gave it ([`ToolDef::verdict`],
    /// [`ToolDef::approval_rule`]); the decision record itself is the
    /// host's.
    pub(crate) approval: PolicyDecision,
}

/// What a client may assume about a tool (MCP's tool annotations), derived
/// from the capability's `grants::Authority` (what each call is granted)
/// and its declared network use, never from hints a module states itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Hints {
    /// Granted no writable root and no program, no network.
    pub read_only: bool,
    /// Granted a writable root besides its own artifacts: state and
    /// workspace writes change what was there.
    pub destructive: bool,
    /// Only vouched for when read-only: the one case the host can tell.
    pub idempotent: bool,
    /// Reaches the network.
    pub open_world: bool,
}

impl Hints {
    pub(crate) fn derive(descriptor: &Descriptor, effects: &Effects) -> Self {
        let authority = grants::authority(descriptor, effects);
        let read_only = authority.touches_nothing_but_reads() && !effects.network.is_used();
        let destructive = authority
            .writable()
            .any(|root| root.kind != modproto::RootKind::Artifacts);
        Hints {
            read_only,
            destructive: !read_only && destructive,
            idempotent: read_only,
            open_world: effects.network.is_used(),
        }
    }
}

impl ToolDef {
    /// Whether a tool list (`modhost tools`, the MCP server's `tools/list`)
    /// offers this tool: deny never; ask too, so the user learns it exists
    /// (the MCP server asks the user through the client before each call,
    /// or says how to allow it; `modhost tools` leaves it to whoever pastes
    /// the definitions).
    pub fn is_offered(&self) -> bool {
        self.approval.verdict != PolicyVerdict::Deny
    }

    /// What the operator's approval policy says about calling it: `allow`
    /// runs it, `ask` only with an approver ([`crate::tools::ApprovedBy`]),
    /// `deny` never.
    pub fn verdict(&self) -> PolicyVerdict {
        self.approval.verdict
    }

    /// Which rule of `config.toml` (or which default) gave the verdict, as
    /// a person reads it: `rule "name"`, `rule #2 (tool = "x*")`,
    /// `default: ...`.
    pub fn approval_rule(&self) -> &str {
        &self.approval.rule
    }
}

/// A module the host may act on: described, enabled, its contract accepted.
#[derive(Debug, Clone)]
pub struct ModuleEntry {
    pub descriptor: Arc<Descriptor>,
    /// The module's own folder (knowledge lives there); `None` for a bare executable.
    pub dir: Option<PathBuf>,
}

#[cfg(test)]
impl ToolDef {
    /// A tool of `module`'s `capability` named `name`, the approval
    /// policy's default giving it `verdict` (for tests).
    pub(crate) fn for_test(
        name: &str,
        module: &str,
        capability: &str,
        verdict: PolicyVerdict,
    ) -> ToolDef {
        ToolDef {
            name: name.into(),
            module: module.into(),
            capability: capability.into(),
            title: String::new(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            effects: Default::default(),
            network: None,
            hints: Default::default(),
            approval: PolicyDecision {
                verdict,
                rule: "default".into(),
                from_rule: false,
            },
        }
    }
}
