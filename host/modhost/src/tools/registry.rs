//! Capabilities made tools: one per enabled capability, names that clash
//! refused on both sides, and the policy gate a direct call goes through.

use std::collections::{BTreeMap, HashMap};

use modproto::Descriptor;

use super::description;
use super::knowledge_tool;
use super::tool_def::{Hints, ModuleEntry, ToolDef};
use crate::approval::{self, ApprovalConfig, ApprovedBy, Refusal};
use crate::caller::Caller;
use crate::overrides::{self, CapabilityOverride};

/// The tools of a set of modules, and what was refused while building them.
#[derive(Debug, Clone, Default)]
pub(super) struct Registry {
    pub tools: Vec<ToolDef>,
    /// Tools left out, one line each (name collisions).
    pub problems: Vec<String>,
}

/// Build one tool per enabled capability of `modules`, plus the knowledge
/// tool when some module ships knowledge.
pub(super) fn build_registry(
    modules: &[ModuleEntry],
    approval: &ApprovalConfig,
    overrides: &BTreeMap<String, CapabilityOverride>,
) -> Registry {
    let local = Caller::the_local_user();
    let mut candidates = Vec::new();
    for module in modules {
        let d = &module.descriptor;
        for c in &d.capabilities {
            let found = overrides::find_override(overrides, &d.id, &c.id);
            if found.is_some_and(|o| !o.is_enabled()) {
                continue;
            }
            let name = modconform::tool_name(&d.id, &c.id);
            let base = found
                .and_then(|o| o.description.as_deref())
                .unwrap_or(&c.description);
            let network = crate::network_grant::call_grant(c, overrides::network_lines(found));
            // The operator's word on the output's trust beats the module's.
            let mut effects = c.effects.clone();
            effects.untrusted_output = Some(overrides::output_is_untrusted(c, found));
            candidates.push(ToolDef {
                description: description::tool_description(base, d, &c.effects, network.as_ref()),
                // The local user's verdict; another caller's is decided
                // for it when some rule names callers (`Loaded::decision`).
                approval: approval::decide(approval, local, d, c, &name, network.as_ref()),
                network,
                name,
                module: d.id.clone(),
                capability: c.id.clone(),
                title: c.title.clone(),
                input_schema: c.input_schema.clone(),
                output_schema: c.output_schema.clone(),
                hints: Hints::derive(d, &effects),
                effects,
            });
        }
    }
    // The guides of a module none of whose tools is offered (all denied or
    // disabled) are not served either.
    let guided: Vec<ModuleEntry> = modules
        .iter()
        .filter(|m| {
            candidates
                .iter()
                .any(|t| t.module == m.descriptor.id && t.is_offered())
        })
        .cloned()
        .collect();
    candidates.insert(0, knowledge_tool::definition(&guided, approval));
    let mut registry = refuse_collisions(candidates);
    if !knowledge_tool::is_offered(&guided) {
        registry.tools.retain(|t| !knowledge_tool::is_this(t));
    }
    registry
}

/// Keep the tools whose names are unique; report every clash naming both sides.
fn refuse_collisions(candidates: Vec<ToolDef>) -> Registry {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in candidates.iter().enumerate() {
        by_name.entry(&t.name).or_default().push(i);
    }
    let mut problems = Vec::new();
    let mut refused = vec![false; candidates.len()];
    for (i, t) in candidates.iter().enumerate() {
        let clash = &by_name[t.name.as_str()];
        if clash.len() > 1 && clash[0] == i {
            let who: Vec<String> = clash
                .iter()
                .map(|&j| {
                    format!(
                        "{} of module {}",
                        candidates[j].capability, candidates[j].module
                    )
                })
                .collect();
            problems.push(format!(
                "tool name {} is claimed by {}; none of them is offered until the ids differ in more than punctuation",
                t.name,
                who.join(" and ")
            ));
            for &j in clash {
                refused[j] = true;
            }
        }
    }
    let tools = candidates
        .into_iter()
        .zip(refused)
        .filter(|(_, r)| !r)
        .map(|(t, _)| t)
        .collect();
    Registry { tools, problems }
}

/// The policy gate for one direct call of `capability` (what `modhost
/// invoke` applies; the `Toolbox` applies the same decisions to its
/// registered tools): an override that disables the capability refuses it,
/// then the approval rules decide, for the network the call is granted (a
/// refusal's rule names its hosts: `approval::CallPolicy`). On success,
/// the host's approval record the request must carry, if any. A one-shot
/// call has no connection, so no lockdown (`crate::lockdown`), and is the
/// local user's.
pub fn gate(
    approval: &ApprovalConfig,
    overrides: &BTreeMap<String, CapabilityOverride>,
    descriptor: &Descriptor,
    capability: &modproto::Capability,
    approver: Option<ApprovedBy>,
) -> Result<Option<modproto::Approval>, Refusal> {
    let tool = modconform::tool_name(&descriptor.id, &capability.id);
    if let Some((key, o)) =
        overrides::find_override_entry(overrides, &descriptor.id, &capability.id)
        && !o.is_enabled()
    {
        return Err(Refusal::Disabled {
            tool,
            key: key.to_owned(),
        });
    }
    let over = overrides::find_override(overrides, &descriptor.id, &capability.id);
    let network = crate::network_grant::call_grant(capability, overrides::network_lines(over));
    let decision = approval::decide(
        approval,
        Caller::the_local_user(),
        descriptor,
        capability,
        &tool,
        network.as_ref(),
    );
    let policy = approval::CallPolicy::new(decision, network.as_ref());
    approval::authorize_call(&policy, &tool, approver)
}
