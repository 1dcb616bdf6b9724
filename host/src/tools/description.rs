//! The description a model reads: the capability's own words, then what it
//! does to the world, in plain language.
//!
//! The effect summary is the host's statement, not the module's: it is
//! rendered from the declared effects (the same facts approval decides on),
//! and stays even when the operator replaces the description. A model that
//! can see "no network, cost: trivial" next to "reaches the network, cost:
//! expensive" prefers the cheap tool long before any approval prompt.

use modproto::{Cost, Descriptor, Effects};

/// `base` followed by a blank line and the effect summary.
pub fn tool_description(base: &str, descriptor: &Descriptor, effects: &Effects) -> String {
    let base = base.trim();
    let summary = effect_summary(descriptor, effects);
    if base.is_empty() {
        summary
    } else {
        format!("{base}\n\n{summary}")
    }
}

/// One line per fact: reads, writes, network, runs, cost, approval.
pub fn effect_summary(descriptor: &Descriptor, effects: &Effects) -> String {
    let mut lines = vec!["Effects:".to_owned()];
    lines.push(match effects.reads.as_slice() {
        [] => "- reads nothing beyond its input".to_owned(),
        roots => format!("- reads {}", describe_roots(descriptor, roots)),
    });
    lines.push(match effects.writes.as_slice() {
        [] => "- writes nothing".to_owned(),
        roots => format!("- writes {}", describe_roots(descriptor, roots)),
    });
    lines.push(
        if effects.network {
            "- reaches the network"
        } else {
            "- no network access"
        }
        .to_owned(),
    );
    lines.push(match effects.spawns.as_slice() {
        [] => "- runs no other programs".to_owned(),
        programs => format!("- runs {}", programs.join(", ")),
    });
    lines.push(format!("- cost: {}", cost_phrase(effects.cost)));
    if effects.approval {
        lines.push("- every call needs the operator's approval".to_owned());
    }
    lines.join("\n")
}

/// Root names with what they are, so `state` reads as "its own state".
fn describe_roots(descriptor: &Descriptor, roots: &[String]) -> String {
    roots
        .iter()
        .map(|name| match descriptor.root(name).map(|r| r.kind) {
            Some(modproto::RootKind::State) => format!("its own state ({name})"),
            Some(modproto::RootKind::Artifacts) => format!("its own artifacts ({name})"),
            Some(modproto::RootKind::Workspace) => format!("the workspace ({name})"),
            Some(modproto::RootKind::Source) => format!("the operator's source {name}"),
            None => name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn cost_phrase(cost: Cost) -> &'static str {
    match cost {
        Cost::Trivial => "trivial (milliseconds of local work)",
        Cost::Local => "local (local work that may take a while)",
        Cost::Remote => "remote (calls a remote service)",
        Cost::Expensive => "expensive (spends money or significant resources per call)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_every_effect_in_plain_language() {
        let d: Descriptor = serde_json::from_value(json!({
            "id": "git", "version": "1.0.0",
            "roots": [{"name": "workspace", "kind": "workspace"}, {"name": "state", "kind": "state"}],
            "capabilities": []
        }))
        .unwrap();
        let effects: Effects = serde_json::from_value(json!({
            "reads": ["workspace"], "writes": ["state"], "network": true, "spawns": ["git"],
            "cost": "remote", "approval": true
        }))
        .unwrap();
        let text = tool_description("Push the branch.", &d, &effects);
        assert_eq!(
            text,
            "Push the branch.\n\nEffects:\n- reads the workspace (workspace)\n- writes its own state (state)\n\
             - reaches the network\n- runs git\n- cost: remote (calls a remote service)\n\
             - every call needs the operator's approval"
        );
        let quiet = tool_description(
            "",
            &d,
            &Effects {
                cost: Cost::Trivial,
                ..Effects::default()
            },
        );
        assert!(quiet.starts_with("Effects:\n- reads nothing"));
        assert!(quiet.contains(
            "- writes nothing\n- no network access\n- runs no other programs\n- cost: trivial"
        ));
    }
}
