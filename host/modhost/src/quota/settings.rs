//! `[quotas]` in `config.toml`: how often, and how many at once.
//!
//! ```toml
//! [quotas]
//! elicitations_per_minute = 30        # approval questions `modhost mcp` asks about one
//!                                     # principal's calls (default 30; each principal its own)
//!
//! [quotas.each_tool]                  # every tool, each counted on its own
//! calls_per_minute = 120
//! concurrent_calls = 4
//!
//! [quotas.each_principal]             # every caller, each counted on its own
//! calls_per_minute = 600
//!
//! [quotas.tools."git__git_log"]       # one tool: its own limits (tool name or module.capability)
//! calls_per_minute = 10
//!
//! [quotas.principals."local:ci"]      # one caller
//! concurrent_calls = 1
//! ```
//!
//! A limit left out is no limit; a tool or principal listed on its own
//! takes each limit it does not set from `each_tool` / `each_principal`.
//! Nothing is limited by default but the approval questions.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Approval questions per minute when `[quotas]` does not say: more than a
/// person answers in earnest, fewer than a model that asks in a loop.
pub(crate) const DEFAULT_ELICITATIONS_PER_MINUTE: u32 = 30;

/// `[quotas]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuotaConfig {
    /// The most approval questions one `modhost mcp` asks in a minute
    /// about the calls of one principal (each principal has its own
    /// budget, so one caller asking in a loop cannot spend another's); a
    /// call beyond is refused (`rate_limited`) without asking.
    pub elicitations_per_minute: u32,
    /// The limits of every tool, each counted on its own.
    pub each_tool: Limits,
    /// The limits of every principal (caller), each counted on its own.
    pub each_principal: Limits,
    /// Limits of single tools, by tool name or `module.capability` (as in
    /// `[capabilities]`); unset fields come from `each_tool`.
    pub tools: BTreeMap<String, Limits>,
    /// Limits of single principals (`local:alice`); unset fields come from
    /// `each_principal`.
    pub principals: BTreeMap<String, Limits>,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig {
            elicitations_per_minute: DEFAULT_ELICITATIONS_PER_MINUTE,
            each_tool: Limits::default(),
            each_principal: Limits::default(),
            tools: BTreeMap::new(),
            principals: BTreeMap::new(),
        }
    }
}

/// The limits of one tool or one principal; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Calls admitted in any 60 seconds.
    pub calls_per_minute: Option<u32>,
    /// Calls running at once.
    pub concurrent_calls: Option<u32>,
}

impl Limits {
    /// These limits, each unset one taken from `fallback`.
    fn over(self, fallback: Limits) -> Limits {
        Limits {
            calls_per_minute: self.calls_per_minute.or(fallback.calls_per_minute),
            concurrent_calls: self.concurrent_calls.or(fallback.concurrent_calls),
        }
    }

    fn is_none(self) -> bool {
        self.calls_per_minute.is_none() && self.concurrent_calls.is_none()
    }
}

impl QuotaConfig {
    /// The limits of the tool `tool` (capability `capability` of module
    /// `module`).
    pub(crate) fn tool_limits(&self, tool: &str, module: &str, capability: &str) -> Limits {
        self.tools
            .get(&format!("{module}.{capability}"))
            .or_else(|| self.tools.get(tool))
            .map_or(self.each_tool, |own| own.over(self.each_tool))
    }

    /// The limits of the principal `principal`.
    pub(crate) fn principal_limits(&self, principal: &str) -> Limits {
        self.principals
            .get(principal)
            .map_or(self.each_principal, |own| own.over(self.each_principal))
    }

    /// Whether no call limit is set at all (the common case: nothing to
    /// count).
    pub(crate) fn limits_no_call(&self) -> bool {
        self.each_tool.is_none()
            && self.each_principal.is_none()
            && self.tools.values().all(|l| l.is_none())
            && self.principals.values().all(|l| l.is_none())
    }

    /// What is wrong with the section, one line each.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut check = |place: String, limits: &Limits| {
            for (name, value) in [
                ("calls_per_minute", limits.calls_per_minute),
                ("concurrent_calls", limits.concurrent_calls),
            ] {
                if value == Some(0) {
                    problems.push(format!(
                        "{place} {name} = 0 would refuse every call; leave it out for no limit, or disable the tool with `enabled = false` in [capabilities]"
                    ));
                }
            }
        };
        check("[quotas.each_tool]".into(), &self.each_tool);
        check("[quotas.each_principal]".into(), &self.each_principal);
        for (key, limits) in &self.tools {
            check(format!("[quotas.tools.{key:?}]"), limits);
        }
        for (key, limits) in &self.principals {
            check(format!("[quotas.principals.{key:?}]"), limits);
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> QuotaConfig {
        #[derive(Deserialize)]
        struct Wrapper {
            quotas: QuotaConfig,
        }
        toml::from_str::<Wrapper>(text).unwrap().quotas
    }

    #[test]
    fn a_listed_tool_or_principal_takes_what_it_leaves_out_from_each() {
        let config = parse(
            r#"
            [quotas]
            elicitations_per_minute = 5
            [quotas.each_tool]
            calls_per_minute = 100
            concurrent_calls = 4
            [quotas.tools."git__git_log"]
            calls_per_minute = 10
            [quotas.tools."files.files.search"]
            concurrent_calls = 1
            [quotas.principals."local:ci"]
            concurrent_calls = 2
            "#,
        );
        assert_eq!(config.elicitations_per_minute, 5);
        let git = config.tool_limits("git__git_log", "git", "git.log");
        assert_eq!(
            (git.calls_per_minute, git.concurrent_calls),
            (Some(10), Some(4))
        );
        let search = config.tool_limits("files__files_search", "files", "files.search");
        assert_eq!(
            (search.calls_per_minute, search.concurrent_calls),
            (Some(100), Some(1))
        );
        let other = config.tool_limits("x__x_y", "x", "x.y");
        assert_eq!(other, config.each_tool);
        assert_eq!(
            config.principal_limits("local:ci").concurrent_calls,
            Some(2)
        );
        assert_eq!(config.principal_limits("local:me"), Limits::default());
        assert!(!config.limits_no_call());
        assert!(config.problems().is_empty());
    }

    #[test]
    fn nothing_is_limited_by_default_but_questions_and_zero_is_refused() {
        let config = QuotaConfig::default();
        assert!(config.limits_no_call());
        assert_eq!(
            config.elicitations_per_minute,
            DEFAULT_ELICITATIONS_PER_MINUTE
        );
        let zero = parse("[quotas.tools.\"a__b\"]\ncalls_per_minute = 0\n");
        let problems = zero.problems();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("[quotas.tools.\"a__b\"] calls_per_minute = 0"));
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Wrapper {
            quotas: QuotaConfig,
        }
        assert!(toml::from_str::<Wrapper>("[quotas.each_tool]\ncalls_per_min = 3\n").is_err());
    }
}
