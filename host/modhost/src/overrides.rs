//! Operator overrides per capability (`[capabilities."<tool or module.capability>"]` in `config.toml`).
//!
//! ```toml
//! [capabilities."files.files.search"]   # <module id>.<capability id>
//! description = "Search the workspace. Prefer this over reading files one by one."
//!
//! [capabilities.git__git_push]          # or the tool name
//! enabled = false
//!
//! [capabilities."fetch.fetch.get"]       # network: see crate::network_grant
//! network = ["docs.rs:443"]              # narrows effects.network
//! allow_private = ["127.0.0.1:8080"]     # a non-public address it may reach
//! untrusted_output = true                # its results lock a connection down,
//!                                        # whatever the module declared (crate::lockdown)
//!
//! [capabilities."gh.gh.issues"]          # secrets: see crate::secrets
//! secrets = ["GITHUB_TOKEN"]             # each declared in effects.secrets
//! ```
//!
//! Design decisions:
//!
//! - **An override that names nothing is an error at startup**
//!   ([`validate_overrides`]), never silently ignored: a typo in a key would
//!   otherwise leave a capability the operator meant to disable enabled.
//! - Both spellings are accepted because operators meet both: the dotted form
//!   in `describe`, the tool name in an agent's transcript. A module id
//!   cannot contain `.`, so the dotted key splits unambiguously at its first
//!   dot even though capability ids contain dots themselves.
//! - Two keys naming the same capability are an error too: which one wins
//!   would otherwise depend on spelling.
//! - Unknown fields inside an entry are refused by the parser (`enabeld`).

use std::collections::BTreeMap;

use modproto::Descriptor;
use serde::Deserialize;

use crate::network_grant::NetworkLines;

/// One override entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityOverride {
    /// `false` removes the tool: the agent is never told it exists.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Replaces the capability's own description (the effect summary the host
    /// appends stays: it is the host's statement, not the module's).
    #[serde(default)]
    pub description: Option<String>,
    /// Narrows the hosts the capability may reach: each entry covered by
    /// its `effects.network`; `[]` for none (`crate::network_grant`).
    #[serde(default)]
    pub network: Option<Vec<String>>,
    /// Non-public addresses (`"127.0.0.1:5432"`) its calls may reach
    /// through the egress proxy.
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// Whether the capability's output is untrusted content, whatever the
    /// module declared (`effects.untrusted_output`): `true` makes a
    /// `modhost mcp` connection enter lockdown after its result even where
    /// the module calls its output trusted (`crate::lockdown`).
    #[serde(default)]
    pub untrusted_output: Option<bool>,
    /// The secrets its calls get (each one it declares in
    /// `effects.secrets`, with its value in `secrets.toml`): see
    /// `crate::secrets`.
    #[serde(default)]
    pub secrets: Vec<String>,
}

/// Whether a capability's output is untrusted content: the operator's
/// `untrusted_output` line when there is one, else what the module declared
/// (`effects.untrusted_output`, by default: it uses the network).
pub fn output_is_untrusted(
    capability: &modproto::Capability,
    over: Option<&CapabilityOverride>,
) -> bool {
    over.and_then(|o| o.untrusted_output)
        .unwrap_or_else(|| capability.effects.output_is_untrusted())
}

impl CapabilityOverride {
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// The network lines of `over`, if any (none: the declaration as is).
pub(crate) fn network_lines(over: Option<&CapabilityOverride>) -> NetworkLines<'_> {
    over.map(|o| NetworkLines {
        network: o.network.as_deref(),
        allow_private: &o.allow_private,
    })
    .unwrap_or_default()
}

/// Keys in `config.toml` that must name an installed capability
/// (`[capabilities]`, `[quotas.tools]`) but name none, or name one twice:
/// the toolbox is not opened ([`crate::tools::open_toolbox`]) until the
/// operator fixes them. Each problem starts with its section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config.toml: {}", problems.join("; "))]
pub struct OverrideError {
    pub problems: Vec<String>,
}

/// The override for a capability, by either spelling of its key.
pub(crate) fn find_override<'a>(
    overrides: &'a BTreeMap<String, CapabilityOverride>,
    module_id: &str,
    capability_id: &str,
) -> Option<&'a CapabilityOverride> {
    find_override_entry(overrides, module_id, capability_id).map(|(_, o)| o)
}

/// Like [`find_override`], with the key as the operator spelled it (for
/// messages that point at the line to change).
pub(crate) fn find_override_entry<'a>(
    overrides: &'a BTreeMap<String, CapabilityOverride>,
    module_id: &str,
    capability_id: &str,
) -> Option<(&'a str, &'a CapabilityOverride)> {
    overrides
        .get_key_value(&format!("{module_id}.{capability_id}"))
        .or_else(|| overrides.get_key_value(&modconform::tool_name(module_id, capability_id)))
        .map(|(k, o)| (k.as_str(), o))
}

/// Check that every override key names a capability of a discovered module,
/// and that no capability is named twice. Pass every module that described
/// itself, enabled or not: a disabled module's overrides are still valid.
pub fn validate_overrides<'a>(
    overrides: &BTreeMap<String, CapabilityOverride>,
    modules: impl IntoIterator<Item = &'a Descriptor>,
) -> Result<(), OverrideError> {
    let modules: Vec<&Descriptor> = modules.into_iter().collect();
    let mut problems = Vec::new();
    // key -> the capability it resolves to, to spot two keys for one capability.
    let mut resolved: BTreeMap<(String, String), &str> = BTreeMap::new();
    for (key, over) in overrides {
        match resolve_key(key, &modules) {
            Ok((module, capability)) => {
                let declared = modules
                    .iter()
                    .find(|d| d.id == module)
                    .and_then(|d| d.capability(&capability));
                if let Some(declared) = declared {
                    problems.extend(crate::network_grant::override_problems(
                        key,
                        declared,
                        network_lines(Some(over)),
                    ));
                    problems.extend(secret_grant_problems(key, declared, over));
                }
                if let Some(first) = resolved.insert((module.clone(), capability.clone()), key) {
                    problems.push(format!(
                        "[capabilities] {first:?} and {key:?} both name capability {capability} of module {module}; keep one"
                    ));
                }
            }
            Err(problem) => problems.push(format!("[capabilities] {problem}")),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OverrideError { problems })
    }
}

/// Check that every `[quotas.tools]` key names a capability of a discovered
/// module, by either spelling, and no capability twice: a typo would limit
/// nothing, and two keys for one tool would leave which one counts unsaid.
pub fn validate_quota_tools<'a, T>(
    tools: &BTreeMap<String, T>,
    modules: impl IntoIterator<Item = &'a Descriptor>,
) -> Result<(), OverrideError> {
    let modules: Vec<&Descriptor> = modules.into_iter().collect();
    let mut problems = Vec::new();
    let mut resolved: BTreeMap<(String, String), &str> = BTreeMap::new();
    for key in tools.keys() {
        match resolve_key(key, &modules) {
            Ok((module, capability)) => {
                if let Some(first) = resolved.insert((module.clone(), capability.clone()), key) {
                    problems.push(format!(
                        "[quotas.tools] {first:?} and {key:?} both name capability {capability} of module {module}; keep one"
                    ));
                }
            }
            Err(problem) => problems.push(format!("[quotas.tools] {problem}")),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OverrideError { problems })
    }
}

/// Which (module, capability) a key names, or a problem a person can act on.
fn resolve_key(key: &str, modules: &[&Descriptor]) -> Result<(String, String), String> {
    for d in modules {
        for c in &d.capabilities {
            if key == modconform::tool_name(&d.id, &c.id) {
                return Ok((d.id.clone(), c.id.clone()));
            }
        }
    }
    let Some((module_id, capability_id)) = key.split_once('.') else {
        return Err(format!(
            "{key:?} is neither a tool name nor <module>.<capability>; `modhost tools` lists the names"
        ));
    };
    let Some(d) = modules.iter().find(|d| d.id == module_id) else {
        return Err(format!(
            "{key:?} names module {module_id:?}, which is not installed"
        ));
    };
    if d.capability(capability_id).is_none() {
        let known: Vec<&str> = d.capabilities.iter().map(|c| c.id.as_str()).collect();
        return Err(format!(
            "{key:?}: module {module_id} has no capability {capability_id:?} (it has: {})",
            known.join(", ")
        ));
    }
    Ok((module_id.to_owned(), capability_id.to_owned()))
}

/// The problems with `over`'s `secrets` line under `key` for `capability`:
/// a malformed name, or one the capability does not declare (a grant that
/// would give nothing). Checked at startup with the other overrides.
pub(crate) fn secret_grant_problems(
    key: &str,
    capability: &modproto::Capability,
    over: &CapabilityOverride,
) -> Vec<String> {
    let mut problems = Vec::new();
    for name in &over.secrets {
        if let Err(error) = modproto::check_secret_name(name) {
            problems.push(format!("{key:?} secrets: {error}"));
        } else if !capability.effects.secrets.contains(name) {
            let declared = match capability.effects.secrets.as_slice() {
                [] => "it declares none".to_owned(),
                names => format!("it declares {}", names.join(", ")),
            };
            problems.push(format!(
                "{key:?} grants secret {name} to capability {}, which does not declare it ({declared}); a capability gets only the secrets it declares, so remove it",
                capability.id
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn files() -> Descriptor {
        serde_json::from_value(json!({
            "id": "files", "version": "0.1.0",
            "capabilities": [
                {"id": "files.search", "description": "d", "input_schema": {"type": "object"}},
                {"id": "files.list", "description": "d", "input_schema": {"type": "object"}}
            ]
        }))
        .unwrap()
    }

    fn parse(text: &str) -> BTreeMap<String, CapabilityOverride> {
        #[derive(Deserialize)]
        struct Wrapper {
            capabilities: BTreeMap<String, CapabilityOverride>,
        }
        toml::from_str::<Wrapper>(text).unwrap().capabilities
    }

    #[test]
    fn both_spellings_resolve() {
        let o = parse(
            "[capabilities.\"files.files.search\"]\nenabled = false\n[capabilities.files__files_list]\ndescription = \"x\"\n",
        );
        validate_overrides(&o, [&files()]).unwrap();
        assert_eq!(
            find_override(&o, "files", "files.search").unwrap().enabled,
            Some(false)
        );
        assert_eq!(
            find_override(&o, "files", "files.list")
                .unwrap()
                .description
                .as_deref(),
            Some("x")
        );
        assert!(find_override(&o, "git", "git.log").is_none());
    }

    #[test]
    fn unknown_module_or_capability_is_an_error_naming_it() {
        let o = parse("[capabilities.\"fils.files.search\"]\nenabled = false\n");
        let err = validate_overrides(&o, [&files()]).unwrap_err();
        assert!(
            err.to_string().contains("\"fils\", which is not installed"),
            "{err}"
        );
        let o = parse("[capabilities.\"files.files.serch\"]\nenabled = false\n");
        let err = validate_overrides(&o, [&files()]).unwrap_err();
        assert!(
            err.to_string().contains("files.search, files.list"),
            "{err}"
        );
        let o = parse("[capabilities.files__nothing]\nenabled = false\n");
        assert!(validate_overrides(&o, [&files()]).is_err());
    }

    #[test]
    fn two_keys_for_one_capability_are_an_error() {
        let o = parse(
            "[capabilities.\"files.files.search\"]\nenabled = false\n[capabilities.files__files_search]\nenabled = true\n",
        );
        let err = validate_overrides(&o, [&files()]).unwrap_err();
        assert!(
            err.to_string()
                .contains("both name capability files.search"),
            "{err}"
        );
    }

    #[test]
    fn misspelled_fields_are_refused() {
        #[derive(Debug, Deserialize)]
        struct Wrapper {
            #[allow(dead_code)]
            capabilities: BTreeMap<String, CapabilityOverride>,
        }
        assert!(toml::from_str::<Wrapper>("[capabilities.x]\nenabeld = false\n").is_err());
    }
}
