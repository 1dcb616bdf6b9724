//! Approval policy: rules from `config.toml` that decide allow, ask or deny per call.
//!
//! ```toml
//! [[approval.rules]]
//! name = "no network"          # optional; named in every decision it makes
//! effect = "network"           # and/or tool = "files__*", module = "files", capability = "files.search"
//! decision = "deny"            # allow | ask | deny
//! ```
//!
//! Design decisions:
//!
//! - **Every matching rule counts, the strictest wins** (deny beats ask beats
//!   allow), rather than the first match. An operator adding a deny rule
//!   never has to think about where in the file it goes, and an allow rule can
//!   never quietly shadow a deny written below it.
//! - **A rule's matchers are ANDed.** `module = "git", effect = "network"`
//!   means "git's capabilities that reach the network". A rule with no matcher
//!   applies to every tool: that is how an operator writes a blanket policy.
//! - **The default is decided from declared effects**, the same facts the
//!   model reads in the tool description: a read-only local capability is
//!   allowed; one that writes outside its own state and artifacts roots,
//!   reaches the network, runs a binary, or asks for approval itself, asks.
//! - The decision names the rule (or the default) that made it, so a refusal
//!   can always say why, and the approval record a module receives says which
//!   rule let the call through. A call the default allows needed no approval
//!   and carries no record: the record means "someone (or a rule the
//!   operator wrote) approved this", never "nothing objected".
//! - Approval is the host's alone: the record (`approval_record`) is written
//!   here, and any `approval` a caller puts in its arguments is stripped by the
//!   request builder (it is a reserved key).

use std::fmt;

use modproto::{Capability, Descriptor, RootKind};
use serde::{Deserialize, Serialize};

/// The `[approval]` section of `config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// One `[[approval.rules]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Shown in decisions; without it the rule is named by its position and matchers.
    #[serde(default)]
    pub name: Option<String>,
    /// A glob over tool names: `*` any run of characters, `?` any one.
    #[serde(default)]
    pub tool: Option<String>,
    /// A module id, exactly.
    #[serde(default)]
    pub module: Option<String>,
    /// A capability id, exactly (`files.search`).
    #[serde(default)]
    pub capability: Option<String>,
    #[serde(default)]
    pub effect: Option<EffectClass>,
    pub decision: PolicyVerdict,
}

/// The effect classes a rule can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectClass {
    /// Writes nothing, no network, runs nothing.
    ReadOnly,
    /// Declares any write.
    Writes,
    /// Reaches outside the machine.
    Network,
    /// Runs a binary.
    Spawns,
}

/// What the operator's approval policy says about a call: `allow` runs it,
/// `ask` runs it only once someone approves it ([`ApprovedBy`]), `deny`
/// never. Ordered by strictness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyVerdict {
    Allow,
    Ask,
    Deny,
}

impl PolicyVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyVerdict::Allow => "allow",
            PolicyVerdict::Ask => "ask",
            PolicyVerdict::Deny => "deny",
        }
    }
}

impl fmt::Display for PolicyVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy's answer for one tool, and which rule gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    pub verdict: PolicyVerdict,
    /// `rule "name"`, `rule #2 (tool = "x*")`, or `default: …`.
    pub rule: String,
    /// Whether a configured rule decided (as opposed to the default or a
    /// built-in): an allow only produces an approval record when it did.
    #[serde(skip)]
    pub from_rule: bool,
}

impl PolicyDecision {
    /// Whether a long-running host may start processes for this tool before
    /// its calls come ([`modhost_runner::Call::start_ahead`]).
    ///
    /// Only on `allow`: a process started ahead executes the module (its
    /// start-up, with the call's grants) before any call exists to approve.
    /// An `ask` approval covers one call, so the process serving it is
    /// started after that approval and for it alone; a `deny` never runs.
    pub(crate) fn allows_starting_ahead(&self) -> bool {
        self.verdict == PolicyVerdict::Allow
    }
}

/// Decide the policy for capability `capability` of module `descriptor`,
/// exposed as tool `tool`.
pub(crate) fn decide(
    config: &ApprovalConfig,
    descriptor: &Descriptor,
    capability: &Capability,
    tool: &str,
) -> PolicyDecision {
    let subject = Subject {
        module: &descriptor.id,
        capability: &capability.id,
        effects: &capability.effects,
        tool,
    };
    strictest_rule(config, &subject).unwrap_or_else(|| default_decision(descriptor, capability))
}

/// The decision for a tool the host itself provides (listed under the
/// module id `modhost`): the operator's rules apply to it as to any tool,
/// and `built_in` is what holds when none matches.
pub(crate) fn decide_built_in(
    config: &ApprovalConfig,
    capability: &str,
    effects: &modproto::Effects,
    tool: &str,
    built_in: PolicyDecision,
) -> PolicyDecision {
    let subject = Subject {
        module: "modhost",
        capability,
        effects,
        tool,
    };
    strictest_rule(config, &subject).unwrap_or(built_in)
}

/// What a rule is matched against.
struct Subject<'a> {
    module: &'a str,
    capability: &'a str,
    effects: &'a modproto::Effects,
    tool: &'a str,
}

/// The strictest rule matching `subject`; of equal verdicts the first in
/// the file is the one named.
fn strictest_rule(config: &ApprovalConfig, subject: &Subject<'_>) -> Option<PolicyDecision> {
    let (index, rule) = config
        .rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule_matches(rule, subject))
        .fold(None::<(usize, &Rule)>, |best, (i, rule)| match best {
            Some((_, b)) if b.decision >= rule.decision => best,
            _ => Some((i, rule)),
        })?;
    Some(PolicyDecision {
        verdict: rule.decision,
        rule: rule_label(index, rule),
        from_rule: true,
    })
}

fn rule_matches(rule: &Rule, subject: &Subject<'_>) -> bool {
    rule.tool
        .as_deref()
        .is_none_or(|pattern| glob_matches(pattern, subject.tool))
        && rule.module.as_deref().is_none_or(|m| m == subject.module)
        && rule
            .capability
            .as_deref()
            .is_none_or(|c| c == subject.capability)
        && rule
            .effect
            .is_none_or(|class| effect_matches(class, subject.effects))
}

fn effect_matches(class: EffectClass, effects: &modproto::Effects) -> bool {
    match class {
        EffectClass::ReadOnly => effects.is_read_only(),
        EffectClass::Writes => !effects.writes.is_empty(),
        EffectClass::Network => effects.network,
        EffectClass::Spawns => !effects.spawns.is_empty(),
    }
}

fn rule_label(index: usize, rule: &Rule) -> String {
    if let Some(name) = &rule.name {
        return format!("rule {name:?}");
    }
    let mut matchers = Vec::new();
    if let Some(t) = &rule.tool {
        matchers.push(format!("tool = {t:?}"));
    }
    if let Some(m) = &rule.module {
        matchers.push(format!("module = {m:?}"));
    }
    if let Some(c) = &rule.capability {
        matchers.push(format!("capability = {c:?}"));
    }
    if let Some(e) = rule.effect {
        let name = match e {
            EffectClass::ReadOnly => "read-only",
            EffectClass::Writes => "writes",
            EffectClass::Network => "network",
            EffectClass::Spawns => "spawns",
        };
        matchers.push(format!("effect = {name:?}"));
    }
    let matchers = if matchers.is_empty() {
        "every tool".to_owned()
    } else {
        matchers.join(", ")
    };
    // 1-based, as a person counts `[[approval.rules]]` entries in the file.
    format!("rule #{} ({matchers})", index + 1)
}

/// The decision when no rule matches: from the declared effects.
fn default_decision(descriptor: &Descriptor, capability: &Capability) -> PolicyDecision {
    let effects = &capability.effects;
    let mut reasons = Vec::new();
    if effects.approval {
        reasons.push("the module asks that every call be approved".to_owned());
    }
    let foreign_writes: Vec<&str> = effects
        .writes
        .iter()
        .filter(|root| {
            // A write into the module's own state or artifacts stays inside
            // what the host gave that module alone; anything else (the
            // workspace, an undeclared name) touches what someone else owns.
            !matches!(
                descriptor.root(root).map(|r| r.kind),
                Some(RootKind::State | RootKind::Artifacts)
            )
        })
        .map(String::as_str)
        .collect();
    if !foreign_writes.is_empty() {
        reasons.push(format!("writes {}", foreign_writes.join(", ")));
    }
    if effects.network {
        reasons.push("reaches the network".to_owned());
    }
    if !effects.spawns.is_empty() {
        reasons.push(format!("runs {}", effects.spawns.join(", ")));
    }
    if reasons.is_empty() {
        PolicyDecision {
            verdict: PolicyVerdict::Allow,
            rule: "default: local, writes only its own state and artifacts".to_owned(),
            from_rule: false,
        }
    } else {
        PolicyDecision {
            verdict: PolicyVerdict::Ask,
            rule: format!("default: {}", reasons.join("; ")),
            from_rule: false,
        }
    }
}

/// Who approved a call that the policy did not simply allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovedBy {
    /// `modhost invoke --approve`.
    Flag,
    /// An interactive yes on a terminal.
    Prompt,
    /// An MCP client that was delegated approval (`modhost mcp --delegate-approval`).
    Client,
    /// The user, asked through the MCP client (elicitation) for this one call.
    User,
}

impl ApprovedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovedBy::Flag => "flag",
            ApprovedBy::Prompt => "prompt",
            ApprovedBy::Client => "client",
            ApprovedBy::User => "user",
        }
    }
}

/// Why a call may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{tool} is denied by {rule}")]
    Denied { tool: String, rule: String },
    #[error("{tool} needs approval ({rule}) and none was given")]
    NeedsApproval { tool: String, rule: String },
    /// An operator override (`enabled = false`) removed the tool.
    #[error("{tool} is disabled by the override [capabilities.{key:?}] in config.toml")]
    Disabled { tool: String, key: String },
}

impl Refusal {
    /// What a person can do about it.
    pub fn remedy(&self) -> &'static str {
        match self {
            Refusal::Denied { .. } => {
                "the operator's approval rules in config.toml forbid this call; change the rule if it should run"
            }
            Refusal::NeedsApproval { .. } => {
                "approve the call (modhost invoke --approve), or add an allow rule for it to [[approval.rules]] in config.toml"
            }
            Refusal::Disabled { .. } => {
                "remove `enabled = false` from that override in config.toml if the capability should run"
            }
        }
    }

    /// Machine-readable: `denied`, `approval_required` or `disabled`.
    /// `denied` is the shared word (a module says it of an access its grant
    /// forbids); a refusal reaches its caller as a refusal, never as a
    /// failed call, so the two are not confused.
    pub fn kind(&self) -> modproto::ErrorKind {
        match self {
            Refusal::Denied { .. } => modproto::ModuleErrorKind::Denied.into(),
            Refusal::NeedsApproval { .. } => modproto::HostErrorKind::ApprovalRequired.into(),
            Refusal::Disabled { .. } => modproto::HostErrorKind::Disabled.into(),
        }
    }

    /// The rule (or default) that decided, when a rule did.
    pub fn rule(&self) -> Option<&str> {
        match self {
            Refusal::Denied { rule, .. } | Refusal::NeedsApproval { rule, .. } => Some(rule),
            Refusal::Disabled { .. } => None,
        }
    }
}

/// Gate one call: the approval record it carries, or why it may not run.
///
/// `approver` is who can answer an `ask` for this call, if anyone. A call
/// the default (or a built-in) allows needed no approval and carries no
/// record; one an allow rule let through carries `by: "rule"`, one that was
/// asked and approved says who approved it.
pub(crate) fn authorize(
    decision: &PolicyDecision,
    tool: &str,
    approver: Option<ApprovedBy>,
) -> Result<Option<modproto::Approval>, Refusal> {
    match (decision.verdict, approver) {
        (PolicyVerdict::Deny, _) => Err(Refusal::Denied {
            tool: tool.to_owned(),
            rule: decision.rule.clone(),
        }),
        (PolicyVerdict::Ask, None) => Err(Refusal::NeedsApproval {
            tool: tool.to_owned(),
            rule: decision.rule.clone(),
        }),
        (PolicyVerdict::Ask, Some(by)) => Ok(Some(approval_record(by.as_str(), &decision.rule))),
        (PolicyVerdict::Allow, _) if decision.from_rule => {
            Ok(Some(approval_record("rule", &decision.rule)))
        }
        (PolicyVerdict::Allow, _) => Ok(None),
    }
}

/// The host's approval record for a call, stamped now.
pub(crate) fn approval_record(by: &str, rule: &str) -> modproto::Approval {
    modproto::Approval {
        by: by.to_owned(),
        rule: Some(rule.to_owned()),
        at: rfc3339_now(),
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters and
/// `?` any one character. Everything else matches itself.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with single-star backtracking: linear in practice,
    // never exponential on patterns like `a*a*a*b`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The current UTC time as RFC 3339 (`2025-06-18T12:00:00Z`), formatted
/// as `pins.json`'s `pinned_at` is: one formatter for the host's times.
fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn module(roots: &serde_json::Value, effects: &serde_json::Value) -> Descriptor {
        serde_json::from_value(json!({
            "id": "files", "version": "0.1.0",
            "roots": roots,
            "capabilities": [{"id": "files.op", "description": "d", "input_schema": {"type": "object"}, "effects": effects}]
        }))
        .unwrap()
    }

    fn config(toml_text: &str) -> ApprovalConfig {
        #[derive(Deserialize)]
        struct Wrapper {
            approval: ApprovalConfig,
        }
        toml::from_str::<Wrapper>(toml_text).unwrap().approval
    }

    fn decide_for(cfg: &ApprovalConfig, d: &Descriptor) -> PolicyDecision {
        decide(cfg, d, &d.capabilities[0], "files__files_op")
    }

    #[test]
    fn default_allows_read_only_and_own_roots_but_asks_for_the_rest() {
        let roots = json!([{"name": "state", "kind": "state"}, {"name": "out", "kind": "artifacts"},
                           {"name": "workspace", "kind": "workspace", "access": "read-write"}]);
        let cfg = ApprovalConfig::default();
        let read = module(&roots, &json!({"reads": ["workspace"]}));
        assert_eq!(decide_for(&cfg, &read).verdict, PolicyVerdict::Allow);
        let own = module(&roots, &json!({"writes": ["state", "out"]}));
        assert_eq!(decide_for(&cfg, &own).verdict, PolicyVerdict::Allow);
        let ws = module(&roots, &json!({"writes": ["workspace"]}));
        let d = decide_for(&cfg, &ws);
        assert_eq!(d.verdict, PolicyVerdict::Ask);
        assert!(d.rule.contains("writes workspace"), "{}", d.rule);
        let net = module(&roots, &json!({"network": true}));
        assert_eq!(decide_for(&cfg, &net).verdict, PolicyVerdict::Ask);
        let spawn = module(&roots, &json!({"spawns": ["git"]}));
        assert!(decide_for(&cfg, &spawn).rule.contains("runs git"));
        let flagged = module(&roots, &json!({"approval": true}));
        assert_eq!(decide_for(&cfg, &flagged).verdict, PolicyVerdict::Ask);
    }

    #[test]
    fn deny_beats_ask_beats_allow_regardless_of_order() {
        let d = module(&json!([]), &json!({"network": true}));
        let cfg = config(
            r#"
            [[approval.rules]]
            tool = "files__*"
            decision = "allow"
            [[approval.rules]]
            effect = "network"
            decision = "ask"
            [[approval.rules]]
            name = "no files"
            module = "files"
            decision = "deny"
            "#,
        );
        assert_eq!(
            decide_for(&cfg, &d),
            PolicyDecision {
                verdict: PolicyVerdict::Deny,
                rule: "rule \"no files\"".into(),
                from_rule: true,
            }
        );
        let cfg = config(
            r#"
            [[approval.rules]]
            effect = "network"
            decision = "ask"
            [[approval.rules]]
            tool = "files__*"
            decision = "allow"
            "#,
        );
        let decision = decide_for(&cfg, &d);
        assert_eq!(decision.verdict, PolicyVerdict::Ask);
        assert_eq!(decision.rule, "rule #1 (effect = \"network\")");
    }

    #[test]
    fn an_allow_rule_overrides_the_default_ask_and_matchers_are_anded() {
        let d = module(&json!([]), &json!({"spawns": ["git"]}));
        let cfg = config(
            r#"
            [[approval.rules]]
            module = "files"
            capability = "files.op"
            decision = "allow"
            [[approval.rules]]
            module = "other"
            effect = "spawns"
            decision = "deny"
            "#,
        );
        let decision = decide_for(&cfg, &d);
        assert_eq!(decision.verdict, PolicyVerdict::Allow);
        assert!(decision.rule.starts_with("rule #1"));
    }

    #[test]
    fn unknown_keys_and_decisions_are_config_errors() {
        #[derive(Debug, Deserialize)]
        struct Wrapper {
            #[allow(dead_code)]
            approval: ApprovalConfig,
        }
        assert!(toml::from_str::<Wrapper>("[[approval.rules]]\ndecision = \"maybe\"").is_err());
        assert!(
            toml::from_str::<Wrapper>("[[approval.rules]]\ntol = \"x\"\ndecision = \"allow\"")
                .is_err()
        );
        assert!(
            toml::from_str::<Wrapper>(
                "[[approval.rules]]\neffect = \"read-only\"\ndecision = \"allow\""
            )
            .is_ok()
        );
    }

    #[test]
    fn authorize_refuses_deny_always_and_ask_without_an_approver() {
        let deny = PolicyDecision {
            verdict: PolicyVerdict::Deny,
            rule: "rule \"x\"".into(),
            from_rule: true,
        };
        assert!(matches!(
            authorize(&deny, "t", Some(ApprovedBy::Flag)),
            Err(Refusal::Denied { .. })
        ));
        let ask = PolicyDecision {
            verdict: PolicyVerdict::Ask,
            rule: "default: reaches the network".into(),
            from_rule: false,
        };
        assert!(matches!(
            authorize(&ask, "t", None),
            Err(Refusal::NeedsApproval { .. })
        ));
        let record = authorize(&ask, "t", Some(ApprovedBy::Client))
            .unwrap()
            .expect("a record");
        assert_eq!(record.by, "client");
        assert_eq!(record.rule.as_deref(), Some("default: reaches the network"));
        let mut allow = PolicyDecision {
            verdict: PolicyVerdict::Allow,
            rule: "default: local".into(),
            from_rule: false,
        };
        assert_eq!(authorize(&allow, "t", None).unwrap(), None);
        allow.from_rule = true;
        allow.rule = "rule \"ok\"".into();
        assert_eq!(
            authorize(&allow, "t", None).unwrap().expect("a record").by,
            "rule"
        );
    }

    #[test]
    fn only_an_allow_lets_processes_start_ahead() {
        let roots = json!([{"name": "state", "kind": "state"}]);
        let cfg = ApprovalConfig::default();
        let allowed = module(&roots, &json!({"writes": ["state"]}));
        assert!(decide_for(&cfg, &allowed).allows_starting_ahead());
        // Asked for by the module itself, or by the default for the network:
        // approved call by call, so never started ahead of one.
        for effects in [json!({"approval": true}), json!({"network": true})] {
            let asks = module(&roots, &effects);
            assert!(
                !decide_for(&cfg, &asks).allows_starting_ahead(),
                "{effects}"
            );
        }
        let deny = config("[[approval.rules]]\ndecision = \"deny\"");
        assert!(!decide_for(&deny, &allowed).allows_starting_ahead());
        // An operator's allow rule is an approval given ahead for every call.
        let allow = config("[[approval.rules]]\neffect = \"network\"\ndecision = \"allow\"");
        let net = module(&roots, &json!({"network": true}));
        assert!(decide_for(&allow, &net).allows_starting_ahead());
    }

    #[test]
    fn globs() {
        assert!(glob_matches("files__*", "files__files_search"));
        assert!(glob_matches("*search", "files__files_search"));
        assert!(glob_matches("f?les__*", "files__x"));
        assert!(glob_matches("*", ""));
        assert!(!glob_matches("files__*", "git__files"));
        assert!(!glob_matches("a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    }

    #[test]
    fn rfc3339_formatting() {
        // The record's `at` keeps the shape it had: seconds, `Z`, no offset.
        let at = |secs| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
            )
            .to_string()
        };
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_750_248_000), "2025-06-18T12:00:00Z");
        let now = rfc3339_now();
        assert!(now.len() == 20 && now.ends_with('Z'), "{now}");
    }
}
