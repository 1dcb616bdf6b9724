//! `config.sync.toml`: the part of a home's configuration a lockfile brings
//! with its modules, written only by `modhost sync`.
//!
//! ```toml
//! # Written by `modhost sync` from /etc/fleet/modhost.toml: the next sync replaces it.
//! [modules.sessions]
//! source_roots = { transcripts = "/srv/sessions" }
//!
//! [[modules.sessions.approval]]
//! effect = "writes"
//! decision = "deny"
//! ```
//!
//! Design decisions:
//!
//! - **A file of its own, beside `config.toml`, never an edit of it.**
//!   `config.toml` is the operator's: comments, order and hand-written rules
//!   stay exactly as written, and a sync that is rolled back restores one
//!   whole file instead of surgery on another. [`crate::config::Config::load`]
//!   reads both; the host runs with their union.
//! - **Only what belongs with a module:** its source roots and approval
//!   rules, grouped by module, so `modhost lock` can write them back into
//!   the lockfile entry they came from. A rule here applies to its module
//!   alone (`module = "<id>"` is implied and neither `module` nor `tool`
//!   may be written), and so does a source root (granted only to the
//!   modules whose entries bring it, though root names are one namespace),
//!   so a lockfile entry cannot make policy for another module nor hand it
//!   a folder.
//! - **The union never loosens the operator's policy:** approval rules
//!   combine by "the strictest matching rule wins" ([`crate::approval`]),
//!   so a managed allow cannot undo the operator's deny. It can turn the
//!   default's question for its own module into an allow (no operator rule
//!   matching): that is the lockfile's to say, so `sync --dry-run` lists
//!   every rule with its decision, and every root with its path. A source root
//!   name both files give different paths is an error naming both (the
//!   host does not pick one); the same path twice is one root.
//! - Read as strictly as `config.toml`: an unknown key is an error naming
//!   the file, because a typo would silently grant or forbid nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::approval::{EffectClass, PolicyVerdict, Rule};

/// The parsed `config.sync.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedConfig {
    /// What each module brings, by module id.
    #[serde(default)]
    pub modules: BTreeMap<String, ManagedModule>,
}

/// What one module brings into the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedModule {
    /// Source roots by name (absolute paths, granted read-only), joined to
    /// `[source_roots]` but granted to this module alone
    /// ([`crate::config::Config::source_roots_for`]), unless `config.toml`
    /// names the root too (then it is the operator's, every module's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub source_roots: BTreeMap<String, PathBuf>,
    /// Approval rules for this module's capabilities, joined to
    /// `[[approval.rules]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval: Vec<ModuleRule>,
}

impl ManagedModule {
    /// Whether it brings nothing.
    pub fn is_empty(&self) -> bool {
        self.source_roots.is_empty() && self.approval.is_empty()
    }
}

/// An approval rule for one module's capabilities: `[[approval.rules]]`
/// without `module` (implied) and `tool` (which could name another
/// module's tools).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A capability id of the module, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<EffectClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_scope: Option<String>,
    pub decision: PolicyVerdict,
}

impl ModuleRule {
    /// The `[[approval.rules]]` entry it is for module `module`.
    pub fn to_rule(&self, module: &str) -> Rule {
        Rule {
            name: self.name.clone(),
            tool: None,
            module: Some(module.to_owned()),
            capability: self.capability.clone(),
            effect: self.effect,
            principal: self.principal.clone(),
            scope: self.scope.clone(),
            without_scope: self.without_scope.clone(),
            decision: self.decision,
        }
    }
}

impl ManagedConfig {
    /// Parse the file's text (`toml`'s message carries line and column).
    pub fn parse(text: &str) -> Result<ManagedConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())
    }

    /// Read `path`; `None` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<ManagedConfig>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => ManagedConfig::parse(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Whether it brings nothing (then the file is not written at all).
    pub fn is_empty(&self) -> bool {
        self.modules.values().all(ManagedModule::is_empty)
    }

    /// The file's text, with a header naming the lockfile it came from.
    pub fn render(&self, lockfile: &Path) -> String {
        let modules: BTreeMap<&String, &ManagedModule> = self
            .modules
            .iter()
            .filter(|(_, module)| !module.is_empty())
            .collect();
        #[derive(Serialize)]
        struct Shape<'a> {
            modules: BTreeMap<&'a String, &'a ManagedModule>,
        }
        let body = toml::to_string(&Shape { modules }).unwrap_or_default();
        format!(
            "# Written by `modhost sync` from {}: the next sync replaces it.\n# Edit config.toml (yours) or the lockfile instead; modhost reads both.\n\n{body}",
            lockfile.display()
        )
    }
}

#[cfg(test)]
mod tests;
