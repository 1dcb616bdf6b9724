//! `modhost__knowledge`: the digest-verified knowledge loader as an ordinary,
//! read-only tool, so an agent can read a module's guide before using it
//! without the operator pasting it anywhere.

use std::collections::BTreeMap;

use modproto::{Cost, Effects};
use serde_json::{Value, json};

use super::{Hints, ModuleEntry, ToolDef, ToolOutcome};
use crate::approval::{self, ApprovalConfig, PolicyDecision, PolicyVerdict};
use crate::caller::Caller;
use crate::knowledge::{self, Selection};

/// The knowledge tool's name; `modhost` is not a module id any module can
/// take without colliding (and being refused) at registration.
pub const KNOWLEDGE_TOOL: &str = "modhost__knowledge";

/// Its capability id, for approval rules that name one.
const CAPABILITY: &str = "knowledge";

/// Whether the tool is offered: only when some module ships knowledge (a
/// tool that can only answer "nothing here" is noise in every agent's
/// context). Its name stays reserved either way: the registry refuses a
/// module tool that claims it.
pub(crate) fn is_offered(modules: &[ModuleEntry]) -> bool {
    modules.iter().any(|m| !m.descriptor.knowledge.is_empty())
}

/// Whether `tool` is this built-in tool (listed under the reserved module
/// id `modhost`), not a module's.
pub(crate) fn is_this(tool: &ToolDef) -> bool {
    tool.name == KNOWLEDGE_TOOL && tool.module == "modhost"
}

/// The tool's definition; the module list is spelled out in the schema so a
/// model cannot guess a module that is not there. It is allowed unless an
/// approval rule of the operator's says otherwise (`tool =
/// "modhost__knowledge"`, `module = "modhost"`, or a rule for every tool).
pub(crate) fn definition(modules: &[ModuleEntry], approval: &ApprovalConfig) -> ToolDef {
    let ids: Vec<&str> = modules
        .iter()
        .filter(|m| !m.descriptor.knowledge.is_empty())
        .map(|m| m.descriptor.id.as_str())
        .collect();
    let mut module_schema = json!({"type": "string", "description": "the module id"});
    if !ids.is_empty() {
        module_schema["enum"] = json!(ids);
    }
    let effects = Effects {
        cost: Cost::Trivial,
        ..Effects::default()
    };
    ToolDef {
        name: KNOWLEDGE_TOOL.to_owned(),
        module: "modhost".to_owned(),
        capability: CAPABILITY.to_owned(),
        title: "Module knowledge".to_owned(),
        description: "Read the guides a module ships for agents (its overlays, or one skill by id). \
                      Each document comes with a line naming the module, version, document and sha256 \
                      it was verified against.\n\nEffects:\n- reads module guides only\n- writes nothing\n\
                      - no network access\n- runs no other programs\n- cost: trivial (milliseconds of local work)"
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "module": module_schema,
                "skill": {"type": ["string", "null"], "description": "one skill id; leave out (or null) for every overlay and skill"}
            },
            "required": ["module"],
            "additionalProperties": false
        }),
        output_schema: None,
        network: None,
        approval: decision(approval, Caller::the_local_user(), &effects),
        effects,
        hints: Hints { read_only: true, destructive: false, idempotent: true, open_world: false },
    }
}

/// The modules whose guides `tool` (this tool's definition) serves: those
/// its schema lists.
pub(crate) fn listed_modules(tool: &ToolDef) -> impl Iterator<Item = &str> {
    tool.input_schema["properties"]["module"]["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `tool` (this tool's definition) with its schema's module list cut to
/// the modules `keep` keeps: what a caller who may read only those guides
/// is shown, so that `tools/list` never names a module the operator hid
/// from it. `None` when `keep` keeps every listed module (the definition
/// serves as it is).
pub(crate) fn narrowed(tool: &ToolDef, keep: &dyn Fn(&str) -> bool) -> Option<ToolDef> {
    let listed: Vec<&str> = listed_modules(tool).collect();
    let kept: Vec<&str> = listed.iter().copied().filter(|id| keep(id)).collect();
    if kept.len() == listed.len() {
        return None;
    }
    let mut narrowed = tool.clone();
    narrowed.input_schema["properties"]["module"]["enum"] = json!(kept);
    Some(narrowed)
}

/// The verdict on calls of the tool by `caller` (whose `effects` are
/// the tool's): allowed, unless a rule of the operator's that applies to
/// `caller` says otherwise.
pub(crate) fn decision(
    approval: &ApprovalConfig,
    caller: &Caller,
    effects: &Effects,
) -> PolicyDecision {
    approval::decide_built_in(
        approval,
        caller,
        CAPABILITY,
        effects,
        KNOWLEDGE_TOOL,
        PolicyDecision {
            verdict: PolicyVerdict::Allow,
            rule: "built-in: reads verified module knowledge only".to_owned(),
            from_rule: false,
        },
    )
}

/// Answer one call of `tool` (this tool's definition: only the modules its
/// schema lists are served, and of those only the ones `serves` keeps: a
/// module none of whose tools is offered to the caller is answered as one
/// that is not there).
pub(crate) fn run(
    tool: &ToolDef,
    modules: &BTreeMap<String, ModuleEntry>,
    input: &Value,
    serves: &dyn Fn(&str) -> bool,
) -> ToolOutcome {
    let Some(module_id) = input.get("module").and_then(Value::as_str) else {
        return ToolOutcome::failure(format!(
            "{KNOWLEDGE_TOOL} failed (invalid_input): \"module\" (a string) is required\n\
             What to do: call again with {{\"module\": \"<id>\"}}"
        ));
    };
    let skill = match input.get("skill") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => {
            return ToolOutcome::failure(format!(
                "{KNOWLEDGE_TOOL} failed (invalid_input): \"skill\" must be a string"
            ));
        }
    };
    let listed: Vec<&str> = listed_modules(tool).filter(|id| serves(id)).collect();
    let Some(module) = modules
        .get(module_id)
        .filter(|_| listed.contains(&module_id))
    else {
        let known = listed;
        return ToolOutcome::failure(format!(
            "{KNOWLEDGE_TOOL} failed (not_found): no module {module_id:?}\nWhat to do: use one of: {}",
            known.join(", ")
        ));
    };
    let selection = skill.map_or(Selection::All, Selection::Skill);
    let loaded = knowledge::load(&module.descriptor, module.dir.as_deref(), selection);
    let mut text = loaded.render();
    if loaded.overlays.is_empty() && loaded.skills.is_empty() {
        text.insert_str(
            0,
            &format!("module {module_id} has no verified knowledge to show\n"),
        );
    }
    ToolOutcome {
        is_error: false,
        text: text.trim_end().to_owned(),
        structured: Some(serde_json::to_value(&loaded).unwrap_or(Value::Null)),
        artifacts: Vec::new(),
        network: None,
        // The module's own guides, pinned and checked by digest: not
        // content from elsewhere.
        enters_lockdown: None,
    }
}
