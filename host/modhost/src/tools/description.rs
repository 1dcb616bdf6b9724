//! The description a model reads: the capability's own words, then what it
//! does to the world, in plain language.
//!
//! The effect summary is the host's statement, not the module's: it is
//! rendered from the capability's [`Authority`] (the very decision the host
//! grants each call from, so "reads nothing beyond its input" means the call
//! is granted no root at all), and stays even when the operator replaces the
//! description. A model that can see "no network, cost: trivial" next to
//! "reaches the network, cost: expensive" prefers the cheap tool long before
//! any approval prompt.

use modhost_egress::CallGrant;
use modproto::{Cost, Descriptor, Effects, RootKind};

use crate::grants::{self, Authority, RootAuthority};

/// `base` followed by a blank line and the effect summary. `network` is
/// what each call is granted (`crate::network_grant::call_grant`).
pub(crate) fn tool_description(
    base: &str,
    descriptor: &Descriptor,
    effects: &Effects,
    network: Option<&CallGrant>,
) -> String {
    let base = base.trim();
    let summary = effect_summary(descriptor, effects, network);
    if base.is_empty() {
        summary
    } else {
        format!("{base}\n\n{summary}")
    }
}

/// One line per fact: reads, writes, network, runs, secrets (when any),
/// cost, approval. Reads
/// lists every root the call is granted (a writable root can be read too),
/// writes the ones granted read-write, runs the binaries it may be given.
pub(crate) fn effect_summary(
    descriptor: &Descriptor,
    effects: &Effects,
    network: Option<&CallGrant>,
) -> String {
    let authority = grants::authority(descriptor, effects);
    let mut lines = vec!["Effects:".to_owned()];
    lines.push(match authority.roots.as_slice() {
        [] => "- reads nothing beyond its input".to_owned(),
        roots => format!("- reads {}", describe_roots(roots.iter())),
    });
    let writable: Vec<&RootAuthority> = authority.writable().collect();
    lines.push(if writable.is_empty() {
        "- writes nothing".to_owned()
    } else {
        format!("- writes {}", describe_roots(writable.into_iter()))
    });
    lines.push(match network {
        Some(grant) => format!("- connects to {}", crate::network_grant::summary(grant)),
        None => "- no network access".to_owned(),
    });
    lines.push(runs_line(&authority));
    if !effects.secrets.is_empty() {
        lines.push(format!(
            "- uses the operator's secret{} {} (its value is never shown)",
            if effects.secrets.len() == 1 { "" } else { "s" },
            effects.secrets.join(", ")
        ));
    }
    lines.push(format!("- cost: {}", cost_phrase(effects.cost)));
    if effects.approval {
        lines.push("- every call needs the operator's approval".to_owned());
    }
    lines.join("\n")
}

fn runs_line(authority: &Authority) -> String {
    match authority.binaries.as_slice() {
        [] => "- runs no other programs".to_owned(),
        programs => format!("- runs {}", programs.join(", ")),
    }
}

/// Root names with what they are, so `state` reads as "its own state".
fn describe_roots<'a>(roots: impl Iterator<Item = &'a RootAuthority>) -> String {
    roots
        .map(|root| {
            let name = &root.name;
            match root.kind {
                RootKind::State => format!("its own state ({name})"),
                RootKind::Artifacts => format!("its own artifacts ({name})"),
                RootKind::Workspace => format!("the workspace ({name})"),
                RootKind::Source => format!("the operator's source {name}"),
            }
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
            "binaries": [{"name": "git"}],
            "capabilities": []
        }))
        .unwrap();
        let effects: Effects = serde_json::from_value(json!({
            "reads": ["workspace"], "writes": ["state"], "network": true, "spawns": ["git"],
            "secrets": ["GITHUB_TOKEN"], "cost": "remote", "approval": true
        }))
        .unwrap();
        let grant = CallGrant {
            hosts: modhost_egress::HostGrant::Only(vec![
                modproto::HostPattern::parse("github.com").unwrap(),
            ]),
            private: Vec::new(),
        };
        let text = tool_description("Push the branch.", &d, &effects, Some(&grant));
        assert_eq!(
            text,
            "Push the branch.\n\nEffects:\n- reads the workspace (workspace), its own state (state)\n- writes its own state (state)\n\
             - connects to github.com:443\n- runs git\n\
             - uses the operator's secret GITHUB_TOKEN (its value is never shown)\n\
             - cost: remote (calls a remote service)\n\
             - every call needs the operator's approval"
        );
        let quiet = tool_description(
            "",
            &d,
            &Effects {
                cost: Cost::Trivial,
                ..Effects::default()
            },
            None,
        );
        assert!(quiet.starts_with("Effects:\n- reads nothing"));
        assert!(quiet.contains(
            "- writes nothing\n- no network access\n- runs no other programs\n- cost: trivial"
        ));
    }

    #[test]
    fn says_what_the_call_is_granted_not_what_the_module_declares() {
        let d: Descriptor = serde_json::from_value(json!({
            "id": "m", "version": "1.0.0",
            "roots": [{"name": "workspace", "kind": "workspace"}, {"name": "state", "kind": "state"}],
            "capabilities": []
        }))
        .unwrap();
        // The module declares a workspace, but this capability names no root.
        let text = effect_summary(&d, &Effects::default(), None);
        assert!(
            text.starts_with("Effects:\n- reads nothing beyond its input\n- writes nothing"),
            "{text}"
        );
        // A write to a root declared read-only is granted (and described) as
        // a read; a program the module does not declare is never run.
        let effects: Effects = serde_json::from_value(json!({
            "writes": ["workspace"], "spawns": ["rm"]
        }))
        .unwrap();
        let text = effect_summary(&d, &effects, None);
        assert!(
            text.contains("- reads the workspace (workspace)\n- writes nothing"),
            "{text}"
        );
        assert!(text.contains("- runs no other programs"), "{text}");
    }
}
