//! Approval policy: rules from `config.toml` that decide allow, ask or deny per call.
//!
//! ```toml
//! [[approval.rules]]
//! name = "no network"          # optional; named in every decision it makes
//! effect = "network"           # and/or tool = "files__*", module = "files", capability = "files.search"
//! decision = "deny"            # allow | ask | deny
//!
//! [[approval.rules]]
//! name = "ci reads only"
//! principal = "ci-*"           # a glob over the caller's principal: "ci-*", "local:*",
//!                              # "oauth:https://auth.example.com#*"
//! effect = "writes"
//! decision = "deny"
//!
//! [[approval.rules]]
//! without_scope = "files:write" # a remote caller whose token lacks this scope
//! capability = "files.write"   # (`scope = "..."`: one whose token holds it)
//! decision = "deny"
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
//!   connects anywhere, runs a binary, or asks for approval itself, asks.
//!   Where it connects is what the call is granted (the declaration as the
//!   operator narrowed it, `crate::network_grant`), never the bare
//!   declaration: the default's rule says `connects to 198.51.100.6:8080`,
//!   and every approval question ([`CallPolicy::question`], the CLI's
//!   prompt and `approval_required` message, the MCP server's elicitation)
//!   names those hosts, whichever rule asks. The decision for a capability
//!   that declares secrets names them too (`it receives secret
//!   GITHUB_TOKEN`): a call runs only with each one granted, so that is
//!   what the yes hands over. Receiving a secret does not by itself make
//!   the default ask: the operator granted it by name in `config.toml`.
//! - The decision names the rule (or the default) that made it, so a refusal
//!   can always say why, and the approval record a module receives says which
//!   rule let the call through. A call the default allows needed no approval
//!   and carries no record: the record means "someone (or a rule the
//!   operator wrote) approved this", never "nothing objected".
//! - Approval is the host's alone: the record (`approval_record`) is written
//!   here, and any `approval` a caller puts in its arguments is stripped by the
//!   request builder (it is a reserved key).
//!
//! Rules for callers ([`crate::Caller`]):
//!
//! - **`principal`, `scope` and `without_scope` are matchers like the
//!   others**, ANDed with them, and the strictest matching rule still wins.
//!   A rule with one of them never matches a caller it does not name: a
//!   `principal` glob matches the caller's principal (`local:<user>` for the
//!   local user; a token's name or `oauth:<issuer>#<subject>` over HTTP),
//!   `scope` a remote caller holding that scope, `without_scope` a remote
//!   caller not holding it.
//! - **The local user holds no scopes and no scope matcher matches it:** it
//!   is restricted only by the rules without caller matchers, as before, and
//!   by those naming its principal (`local:*`). A `without_scope` deny is
//!   meant for tokens; it must not lock out the person at the keyboard.
//! - **A caller cannot widen itself.** Its principal is matched as plain
//!   text, so `*` or `?` in a name (an OAuth subject is the identity
//!   provider's, and may hold anything) matches only what those literal
//!   characters match; a scope counts only when held exactly, whole, and
//!   as written. A scope matcher holding `*`, `?` or a space is refused at
//!   load, since it would look like a pattern and match nothing.
//! - **The verdict registered for each tool is the local user's.** `modhost
//!   tools`, `modhost invoke` and `modhost mcp` on stdio read it as before;
//!   only when some rule names callers is a remote caller's verdict decided
//!   for it, per call and per `tools/list` (evaluating the rules, no
//!   discovery).
//! - **Wrong caller matchers stop the host at load,** naming the rule: an
//!   empty glob or scope, one scope both required and excluded, an
//!   `oauth:<issuer>#...` glob whose issuer (no glob character before the
//!   `#`) is not `[http.oauth] issuer` as spelled there (a trailing slash
//!   is another issuer), so that matches no caller.

use std::fmt;

use modhost_egress::{CallGrant, HostGrant};
use modproto::{Capability, Descriptor, RootKind};
use serde::{Deserialize, Serialize};

use crate::caller::Caller;
use crate::network_grant;

/// The `[approval]` section of `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl ApprovalConfig {
    /// Whether some rule names callers (`principal`, `scope`,
    /// `without_scope`): only then can two callers get different verdicts.
    pub fn names_callers(&self) -> bool {
        self.rules.iter().any(Rule::names_callers)
    }

    /// What is wrong with the rules' caller matchers, one line each, naming
    /// the rule.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            let label = rule_label(index, rule);
            if rule.principal.as_deref() == Some("") {
                problems.push(format!(
                    "[[approval.rules]] {label}: principal = \"\" names no caller; give a principal or a glob (\"ci-*\", \"local:*\", \"oauth:https://auth.example.com#*\")"
                ));
            }
            for (key, scope) in [
                ("scope", &rule.scope),
                ("without_scope", &rule.without_scope),
            ] {
                let Some(scope) = scope else { continue };
                if scope.is_empty() {
                    problems.push(format!(
                        "[[approval.rules]] {label}: {key} = \"\" names no scope; give one scope as tokens carry it (\"files:write\")"
                    ));
                } else if scope.contains(['*', '?']) || scope.chars().any(char::is_whitespace) {
                    problems.push(format!(
                        "[[approval.rules]] {label}: {key} = {scope:?}: a scope is matched whole and exactly, never as a pattern or a list; name one scope (\"files:write\"), one rule per scope"
                    ));
                }
            }
            if let (Some(scope), Some(without)) = (&rule.scope, &rule.without_scope)
                && scope == without
            {
                problems.push(format!(
                    "[[approval.rules]] {label}: scope and without_scope both name {scope:?}, so the rule matches no caller; keep one of them"
                ));
            }
        }
        problems
    }

    /// Rules naming OAuth callers of an issuer spelled otherwise than
    /// `[http.oauth] issuer` (`issuer`), one line each naming the rule and
    /// both spellings. An OAuth caller's principal is
    /// `oauth:<issuer>#<subject>` with the issuer exactly as configured, so
    /// `principal = "oauth:https://auth.example.com#*"` matches no caller
    /// of `https://auth.example.com/`: a deny that denies no one. Only a
    /// glob whose issuer part (up to the first `#`) holds no `*` or `?` is
    /// judged; a glob there may match, and is the operator's to write.
    pub(crate) fn oauth_issuer_problems(&self, issuer: &str) -> Vec<String> {
        let mut problems = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            let Some(pattern) = rule.principal.as_deref() else {
                continue;
            };
            let Some(rest) = pattern.strip_prefix("oauth:") else {
                continue;
            };
            let named = rest.split_once('#').map_or(rest, |(named, _)| named);
            if named.contains(['*', '?']) {
                continue;
            }
            let label = rule_label(index, rule);
            if !rest.contains('#') {
                problems.push(format!(
                    "[[approval.rules]] {label}: principal = {pattern:?} matches no OAuth caller, \
                     whose principal is always \"oauth:<issuer>#<subject>\"; write \
                     principal = \"oauth:{issuer}#<subject or glob>\""
                ));
            } else if named != issuer {
                problems.push(format!(
                    "[[approval.rules]] {label}: principal = {pattern:?} names OAuth callers of the \
                     issuer {named:?}, but [http.oauth] issuer is {issuer:?}, and a principal \
                     spells the issuer exactly as configured, so the rule matches no caller; write \
                     principal = \"oauth:{issuer}#{}\"",
                    rest.split_once('#').map_or("", |(_, subject)| subject)
                ));
            }
        }
        problems
    }
}

/// One `[[approval.rules]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
    /// A glob over the caller's principal (`ci-*`, `local:*`,
    /// `oauth:https://issuer#*`): the rule applies only to callers it
    /// matches.
    #[serde(default)]
    pub principal: Option<String>,
    /// A scope the caller must hold, exactly: the rule applies only to
    /// remote callers holding it (never the local user).
    #[serde(default)]
    pub scope: Option<String>,
    /// A scope the caller must not hold: the rule applies only to remote
    /// callers lacking it (never the local user).
    #[serde(default)]
    pub without_scope: Option<String>,
    pub decision: PolicyVerdict,
}

impl Rule {
    /// Whether the rule names callers, so that it applies to some and not
    /// to others.
    fn names_callers(&self) -> bool {
        self.principal.is_some() || self.scope.is_some() || self.without_scope.is_some()
    }
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

/// What the operator's policy says about one call of a tool: the
/// decision, the question an approval asks, and who may answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPolicy {
    pub decision: PolicyDecision,
    /// What asking for approval says: the rule that asks and where the
    /// call connects (the default's rule says it already; another rule's
    /// gets `; it connects to ...`).
    pub question: String,
    /// Only a person's yes for this one call runs it (a connection in
    /// lockdown, `crate::lockdown`): neither an allow rule nor a client
    /// with delegated approval answers for it.
    pub needs_a_person: bool,
}

impl CallPolicy {
    /// The policy of a call that `decision` decides and that is granted
    /// `network`.
    pub(crate) fn new(decision: PolicyDecision, network: Option<&CallGrant>) -> CallPolicy {
        let question = match network {
            Some(grant) if decision.from_rule => format!(
                "{}; it connects to {}",
                decision.rule,
                network_grant::summary(grant)
            ),
            _ => decision.rule.clone(),
        };
        CallPolicy {
            decision,
            question,
            needs_a_person: false,
        }
    }
}

/// Decide the policy for calls by `caller` of capability `capability` of
/// module `descriptor`, exposed as tool `tool`, whose calls are granted
/// `network` (`crate::network_grant::call_grant`).
pub(crate) fn decide(
    config: &ApprovalConfig,
    caller: &Caller,
    descriptor: &Descriptor,
    capability: &Capability,
    tool: &str,
    network: Option<&CallGrant>,
) -> PolicyDecision {
    let subject = Subject {
        module: &descriptor.id,
        capability: &capability.id,
        effects: &capability.effects,
        tool,
        caller,
    };
    let decision = strictest_rule(config, &subject)
        .unwrap_or_else(|| default_decision(descriptor, capability, network));
    naming_secrets(decision, capability)
}

/// `decision`, its rule naming the secrets each call of `capability`
/// receives (`effects.secrets`: a call runs only with every one granted,
/// `crate::secrets`), so every question, refusal and approval record built
/// from it says which credentials the yes hands over. Names only.
fn naming_secrets(mut decision: PolicyDecision, capability: &Capability) -> PolicyDecision {
    let names = &capability.effects.secrets;
    if !names.is_empty() {
        decision.rule = format!(
            "{}; it receives secret{} {}",
            decision.rule,
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
    }
    decision
}

/// The decision for a tool the host itself provides (listed under the
/// module id `modhost`): the operator's rules apply to it as to any tool,
/// and `built_in` is what holds when none matches.
pub(crate) fn decide_built_in(
    config: &ApprovalConfig,
    caller: &Caller,
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
        caller,
    };
    strictest_rule(config, &subject).unwrap_or(built_in)
}

/// What a rule is matched against.
struct Subject<'a> {
    module: &'a str,
    capability: &'a str,
    effects: &'a modproto::Effects,
    tool: &'a str,
    caller: &'a Caller,
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
    caller_matches(rule, subject.caller)
        && rule
            .tool
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

/// Whether `rule`'s caller matchers (none: every caller) match `caller`.
/// The principal is plain text to the glob; scopes are compared whole, and
/// the local user holds none (`Caller::holds`).
fn caller_matches(rule: &Rule, caller: &Caller) -> bool {
    rule.principal
        .as_deref()
        .is_none_or(|pattern| glob_matches(pattern, &caller.principal))
        && rule.scope.as_deref().is_none_or(|s| caller.holds(s))
        && rule
            .without_scope
            .as_deref()
            .is_none_or(|s| !caller.local && !caller.holds(s))
}

fn effect_matches(class: EffectClass, effects: &modproto::Effects) -> bool {
    match class {
        EffectClass::ReadOnly => effects.is_read_only(),
        EffectClass::Writes => !effects.writes.is_empty(),
        EffectClass::Network => effects.network.is_used(),
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
    for (key, value) in [
        ("principal", &rule.principal),
        ("scope", &rule.scope),
        ("without_scope", &rule.without_scope),
    ] {
        if let Some(value) = value {
            matchers.push(format!("{key} = {value:?}"));
        }
    }
    let matchers = if matchers.is_empty() {
        "every tool".to_owned()
    } else {
        matchers.join(", ")
    };
    // 1-based, as a person counts `[[approval.rules]]` entries in the file.
    format!("rule #{} ({matchers})", index + 1)
}

/// The decision when no rule matches: from the declared effects, and the
/// network the call is granted.
fn default_decision(
    descriptor: &Descriptor,
    capability: &Capability,
    network: Option<&CallGrant>,
) -> PolicyDecision {
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
    // What the call gets, not what the module declared: a declaration the
    // operator narrowed asks about the hosts left, and one narrowed to
    // nothing (or a call in lockdown left no host) connects nowhere.
    if let Some(grant) = network.filter(|grant| !admits_nothing(grant)) {
        reasons.push(format!("connects to {}", network_grant::summary(grant)));
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

/// Whether `grant` lets a call reach nothing at all.
fn admits_nothing(grant: &CallGrant) -> bool {
    matches!(&grant.hosts, HostGrant::Only(hosts) if hosts.is_empty()) && grant.private.is_empty()
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
    /// Whether a person said yes to this one call (not a client answering
    /// for every call, nor a rule).
    pub fn is_a_person(self) -> bool {
        !matches!(self, ApprovedBy::Client)
    }

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
    /// A connection in lockdown: only a person's yes for this call counts
    /// (`crate::lockdown`).
    #[error("{tool} needs a person's approval ({rule}) and none was given")]
    NeedsPerson { tool: String, rule: String },
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
            Refusal::NeedsPerson { .. } => {
                "a person must approve this one call: answer the approval question the MCP client shows (a client without elicitation cannot run it now); while the connection is locked down neither an allow rule nor a client's delegated approval counts, and a new connection starts without lockdown"
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
            Refusal::NeedsApproval { .. } | Refusal::NeedsPerson { .. } => {
                modproto::HostErrorKind::ApprovalRequired.into()
            }
            Refusal::Disabled { .. } => modproto::HostErrorKind::Disabled.into(),
        }
    }

    /// The rule (or default) that decided, when a rule did.
    pub fn rule(&self) -> Option<&str> {
        match self {
            Refusal::Denied { rule, .. }
            | Refusal::NeedsApproval { rule, .. }
            | Refusal::NeedsPerson { rule, .. } => Some(rule),
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

/// Gate one call by its [`CallPolicy`]: [`authorize`], except that a
/// refusal names the policy's question (the hosts the call connects to),
/// and that a call which needs a person runs only on a person's yes.
pub(crate) fn authorize_call(
    policy: &CallPolicy,
    tool: &str,
    approver: Option<ApprovedBy>,
) -> Result<Option<modproto::Approval>, Refusal> {
    let verdict = policy.decision.verdict;
    if verdict == PolicyVerdict::Ask
        && policy.needs_a_person
        && !approver.is_some_and(ApprovedBy::is_a_person)
    {
        return Err(Refusal::NeedsPerson {
            tool: tool.to_owned(),
            rule: policy.question.clone(),
        });
    }
    match authorize(&policy.decision, tool, approver) {
        Err(Refusal::NeedsApproval { tool, .. }) => Err(Refusal::NeedsApproval {
            tool,
            rule: policy.question.clone(),
        }),
        other => other,
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

    /// The caller the tests of rules without caller matchers decide for.
    const LOCAL: fn() -> &'static Caller = Caller::the_local_user;

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

    /// The decision for the one capability of `d`, granted the network it
    /// declares (no operator narrowing).
    fn decide_for(cfg: &ApprovalConfig, d: &Descriptor) -> PolicyDecision {
        let network = network_grant::call_grant(&d.capabilities[0], Default::default());
        decide(
            cfg,
            LOCAL(),
            d,
            &d.capabilities[0],
            "files__files_op",
            network.as_ref(),
        )
    }

    fn grant(hosts: &[&str]) -> CallGrant {
        CallGrant {
            hosts: HostGrant::Only(
                hosts
                    .iter()
                    .map(|h| modproto::HostPattern::parse(h).unwrap())
                    .collect(),
            ),
            private: Vec::new(),
        }
    }

    /// The approval question names the hosts the call would actually get,
    /// after the operator's narrowing, never the declaration: a person who
    /// says yes to "any public host" while the call gets one host (or the
    /// reverse) approved something else than what runs.
    #[test]
    fn the_question_names_the_hosts_the_call_gets_not_the_declaration() {
        let d = module(&json!([]), &json!({"network": true}));
        let cap = &d.capabilities[0];
        let narrowed = grant(&["198.51.100.6:8080"]);
        let cfg = ApprovalConfig::default();
        let decision = decide(&cfg, LOCAL(), &d, cap, "t", Some(&narrowed));
        assert_eq!(decision.verdict, PolicyVerdict::Ask);
        assert_eq!(decision.rule, "default: connects to 198.51.100.6:8080");
        let policy = CallPolicy::new(decision, Some(&narrowed));
        assert_eq!(policy.question, "default: connects to 198.51.100.6:8080");
        let refused = authorize_call(&policy, "t", None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "t needs approval (default: connects to 198.51.100.6:8080) and none was given"
        );

        // An operator's rule does not name hosts; the question adds them.
        let asks =
            config("[[approval.rules]]\nname = \"net\"\neffect = \"network\"\ndecision = \"ask\"");
        let policy = CallPolicy::new(
            decide(&asks, LOCAL(), &d, cap, "t", Some(&narrowed)),
            Some(&narrowed),
        );
        assert_eq!(policy.decision.rule, "rule \"net\"");
        assert_eq!(
            policy.question,
            "rule \"net\"; it connects to 198.51.100.6:8080"
        );
        assert_eq!(
            authorize_call(&policy, "t", None).unwrap_err().rule(),
            Some("rule \"net\"; it connects to 198.51.100.6:8080")
        );
        // The approval record keeps the rule alone.
        let record = authorize_call(&policy, "t", Some(ApprovedBy::Flag))
            .unwrap()
            .unwrap();
        assert_eq!(record.rule.as_deref(), Some("rule \"net\""));

        // Narrowed to nothing, the call connects nowhere: nothing to ask.
        let nowhere = grant(&[]);
        assert_eq!(
            decide(&cfg, LOCAL(), &d, cap, "t", Some(&nowhere)).verdict,
            PolicyVerdict::Allow
        );
        assert_eq!(
            decide(&cfg, LOCAL(), &d, cap, "t", None).verdict,
            PolicyVerdict::Allow
        );
    }

    /// A call that needs a person runs on a person's yes only: the client
    /// answering for every call (`--delegate-approval`) is refused, naming
    /// why, and so is no approver.
    #[test]
    fn a_call_that_needs_a_person_is_not_approved_by_a_client() {
        let policy = CallPolicy {
            decision: PolicyDecision {
                verdict: PolicyVerdict::Ask,
                rule: "lockdown".into(),
                from_rule: false,
            },
            question: "lockdown since web returned untrusted content: writes workspace".into(),
            needs_a_person: true,
        };
        for approver in [None, Some(ApprovedBy::Client)] {
            let refused = authorize_call(&policy, "t", approver).unwrap_err();
            assert!(
                matches!(refused, Refusal::NeedsPerson { .. }),
                "{approver:?}"
            );
            assert_eq!(
                refused.kind(),
                modproto::ErrorKind::from(modproto::HostErrorKind::ApprovalRequired)
            );
            assert!(
                refused.to_string().contains("writes workspace"),
                "{refused}"
            );
            assert!(refused.remedy().contains("new connection"));
        }
        for person in [ApprovedBy::User, ApprovedBy::Prompt, ApprovedBy::Flag] {
            let record = authorize_call(&policy, "t", Some(person)).unwrap().unwrap();
            assert_eq!(record.by, person.as_str());
        }
        let deny = CallPolicy {
            decision: PolicyDecision {
                verdict: PolicyVerdict::Deny,
                rule: "rule \"no\"".into(),
                from_rule: true,
            },
            ..policy
        };
        assert!(matches!(
            authorize_call(&deny, "t", Some(ApprovedBy::User)),
            Err(Refusal::Denied { .. })
        ));
    }

    #[test]
    fn the_decision_names_the_secrets_a_call_receives() {
        let d = module(
            &json!([]),
            &json!({"network": true, "secrets": ["GITHUB_TOKEN", "NPM_TOKEN"]}),
        );
        let decision = decide_for(&ApprovalConfig::default(), &d);
        assert_eq!(decision.verdict, PolicyVerdict::Ask);
        assert!(
            decision
                .rule
                .ends_with("; it receives secrets GITHUB_TOKEN, NPM_TOKEN"),
            "{}",
            decision.rule
        );
        // A rule of the operator's says it as well, and the question with it.
        let cfg =
            config("[[approval.rules]]\nname = \"net\"\neffect = \"network\"\ndecision = \"ask\"");
        let decision = decide_for(&cfg, &d);
        assert!(
            decision
                .rule
                .starts_with("rule \"net\"; it receives secrets"),
            "{}",
            decision.rule
        );
        // Local and otherwise allowed: still allowed, and still named.
        let local = module(&json!([]), &json!({"secrets": ["GITHUB_TOKEN"]}));
        let decision = decide_for(&ApprovalConfig::default(), &local);
        assert_eq!(decision.verdict, PolicyVerdict::Allow);
        assert!(
            decision.rule.ends_with("; it receives secret GITHUB_TOKEN"),
            "{}",
            decision.rule
        );
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

    /// The decision for calls by `caller` of the one capability of `d`.
    fn decide_as(cfg: &ApprovalConfig, caller: &Caller, d: &Descriptor) -> PolicyDecision {
        let network = network_grant::call_grant(&d.capabilities[0], Default::default());
        decide(
            cfg,
            caller,
            d,
            &d.capabilities[0],
            "files__files_op",
            network.as_ref(),
        )
    }

    fn remote(principal: &str, scopes: &[&str]) -> Caller {
        Caller::remote(principal, scopes.iter().map(|s| (*s).to_owned()))
    }

    /// A rule naming principals denies the callers its glob matches and no
    /// other: another principal and the local user keep the default, and a
    /// rule naming `local:*` is the one that restricts the local user.
    #[test]
    fn a_principal_rule_applies_only_to_the_callers_its_glob_names() {
        let d = module(&json!([]), &json!({}));
        let cfg = config("[[approval.rules]]\nprincipal = \"ci-*\"\ndecision = \"deny\"");
        assert!(cfg.names_callers());
        let denied = decide_as(&cfg, &remote("ci-bot", &[]), &d);
        assert_eq!(denied.verdict, PolicyVerdict::Deny);
        assert_eq!(denied.rule, "rule #1 (principal = \"ci-*\")");
        for other in [
            remote("ops-bot", &[]),
            remote("xci-bot", &[]),
            Caller::local(),
        ] {
            let decision = decide_as(&cfg, &other, &d);
            assert_eq!(decision.verdict, PolicyVerdict::Allow, "{other:?}");
            assert!(!decision.from_rule, "{other:?}");
        }
        let local_only = config(
            "[[approval.rules]]\nname = \"not here\"\nprincipal = \"local:*\"\ndecision = \"deny\"",
        );
        assert_eq!(
            decide_as(&local_only, &Caller::local(), &d).verdict,
            PolicyVerdict::Deny
        );
        assert_eq!(
            decide_as(&local_only, &remote("ci-bot", &[]), &d).verdict,
            PolicyVerdict::Allow
        );
        // Rules without caller matchers name no caller: no per-caller work.
        assert!(
            !config("[[approval.rules]]\neffect = \"network\"\ndecision = \"ask\"").names_callers()
        );
    }

    /// `scope` matches a remote caller holding the scope, `without_scope`
    /// one lacking it; neither ever matches the local user, who holds none.
    #[test]
    fn scope_matchers_match_remote_callers_and_never_the_local_user() {
        let d = module(&json!([]), &json!({"network": true}));
        let cfg = config(
            r#"
            [[approval.rules]]
            name = "writers only"
            without_scope = "files:write"
            decision = "deny"
            [[approval.rules]]
            name = "admins skip the question"
            scope = "admin"
            decision = "allow"
            "#,
        );
        let lacking = decide_as(&cfg, &remote("ci-bot", &["files:read"]), &d);
        assert_eq!(lacking.verdict, PolicyVerdict::Deny);
        assert_eq!(lacking.rule, "rule \"writers only\"");
        // Holding the scope: the deny does not apply; the default asks.
        let holding = decide_as(&cfg, &remote("ci-bot", &["files:write"]), &d);
        assert_eq!(holding.verdict, PolicyVerdict::Ask);
        assert!(!holding.from_rule);
        let admin = decide_as(&cfg, &remote("ops", &["files:write", "admin"]), &d);
        assert_eq!(admin.verdict, PolicyVerdict::Allow);
        assert_eq!(admin.rule, "rule \"admins skip the question\"");
        // The strictest still wins: an admin without files:write is denied.
        assert_eq!(
            decide_as(&cfg, &remote("ops", &["admin"]), &d).verdict,
            PolicyVerdict::Deny
        );
        // The local user: neither rule, the default.
        let local = decide_as(&cfg, &Caller::local(), &d);
        assert_eq!(local.verdict, PolicyVerdict::Ask);
        assert!(!local.from_rule, "{}", local.rule);
        // Not even a caller that says it is local while holding scopes.
        let odd = Caller {
            local: true,
            ..remote("x", &["admin"])
        };
        assert_eq!(decide_as(&cfg, &odd, &d).verdict, PolicyVerdict::Ask);
    }

    /// The attack: a caller whose name or scopes are written as patterns,
    /// hoping to match rules meant for others. Its principal is plain text
    /// to the glob, and a scope counts only when held exactly.
    #[test]
    fn a_caller_cannot_widen_itself_with_pattern_characters() {
        let d = module(&json!([]), &json!({"network": true}));
        let cfg = config(
            r#"
            [[approval.rules]]
            principal = "ops-alice"
            decision = "allow"
            [[approval.rules]]
            principal = "oauth:https://auth.example.com#admin-*"
            decision = "allow"
            [[approval.rules]]
            scope = "net:any"
            decision = "allow"
            "#,
        );
        assert_eq!(
            decide_as(&cfg, &remote("ops-alice", &[]), &d).verdict,
            PolicyVerdict::Allow
        );
        assert_eq!(
            decide_as(
                &cfg,
                &remote("oauth:https://auth.example.com#admin-bob", &[]),
                &d
            )
            .verdict,
            PolicyVerdict::Allow
        );
        for name in [
            "*",
            "ops-*",
            "ops-alic?",
            "?ps-alice",
            "oauth:*",
            "oauth:https://auth.example.com#*",
            "oauth:https://evil.example#admin-x",
            "oauth:https://auth.example.com.evil#admin-x",
            "OPS-ALICE",
        ] {
            let decision = decide_as(&cfg, &remote(name, &[]), &d);
            assert_eq!(decision.verdict, PolicyVerdict::Ask, "{name}");
            assert!(!decision.from_rule, "{name}: {}", decision.rule);
        }
        for scopes in [
            &["*"][..],
            &["net:*"],
            &["net:any "],
            &["NET:ANY"],
            &["net:any net:x"],
            &["net"],
        ] {
            assert_eq!(
                decide_as(&cfg, &remote("x", scopes), &d).verdict,
                PolicyVerdict::Ask,
                "{scopes:?}"
            );
        }
        // A name with pattern characters is matched like any other by a
        // glob that covers it literally: narrowing still reaches it.
        let deny = config("[[approval.rules]]\nprincipal = \"ci-*\"\ndecision = \"deny\"");
        assert_eq!(
            decide_as(&deny, &remote("ci-*", &[]), &d).verdict,
            PolicyVerdict::Deny
        );
    }

    /// Caller matchers that could only match nothing, or that look like a
    /// pattern where the match is exact, are problems (`config.toml` is
    /// refused with them when read: `tests/it/principals.rs`), each naming
    /// its rule.
    #[test]
    fn wrong_caller_matchers_are_problems_naming_the_rule() {
        let problems = |rule: &str| {
            config(&format!(
                "[[approval.rules]]\n{rule}\ndecision = \"deny\"\n"
            ))
            .problems()
        };
        let empty = problems("name = \"ci\"\nprincipal = \"\"");
        assert_eq!(empty.len(), 1, "{empty:?}");
        assert!(
            empty[0]
                .starts_with("[[approval.rules]] rule \"ci\": principal = \"\" names no caller"),
            "{empty:?}"
        );
        let empty_scope = problems("without_scope = \"\"");
        assert!(
            empty_scope[0]
                .contains("rule #1 (without_scope = \"\"): without_scope = \"\" names no scope"),
            "{empty_scope:?}"
        );
        let both = problems("scope = \"files:write\"\nwithout_scope = \"files:write\"");
        assert!(
            both[0].contains("scope and without_scope both name \"files:write\""),
            "{both:?}"
        );
        for pattern in ["files:*", "files:wr?te", "files:read files:write"] {
            let found = problems(&format!("scope = {pattern:?}"));
            assert!(found[0].contains("matched whole and exactly"), "{found:?}");
        }
        assert!(problems("principal = \"ci-*\"\nscope = \"a\"\nwithout_scope = \"b\"").is_empty());
        assert!(problems("tool = \"x*\"").is_empty());
    }

    /// An `oauth:` glob written for an issuer spelled otherwise than the
    /// configured one matches no caller: a problem naming the rule and
    /// both spellings. One the configured issuer's callers can match, one
    /// with a glob in its issuer part, or another kind of principal, is
    /// none.
    #[test]
    fn an_oauth_glob_for_another_spelling_of_the_issuer_is_a_problem() {
        let issuer = "https://auth.example.test/";
        let problems = |principal: &str| {
            config(&format!(
                "[[approval.rules]]\nname = \"no oauth writes\"\nprincipal = {principal:?}\ndecision = \"deny\"\n"
            ))
            .oauth_issuer_problems(issuer)
        };
        let slashless = problems("oauth:https://auth.example.test#*");
        assert_eq!(slashless.len(), 1, "{slashless:?}");
        assert!(
            slashless[0].contains("rule \"no oauth writes\"")
                && slashless[0].contains("\"https://auth.example.test\"")
                && slashless[0].contains("\"https://auth.example.test/\"")
                && slashless[0].contains("oauth:https://auth.example.test/#*"),
            "{slashless:?}"
        );
        assert_eq!(problems("oauth:HTTPS://auth.example.test/#admin").len(), 1);
        assert_eq!(problems("oauth:https://auth.example.test/").len(), 1);
        for fine in [
            "oauth:https://auth.example.test/#*",
            "oauth:https://auth.example.test/#admin#2",
            "oauth:*",
            "oauth:https://auth.example.*#*",
            "oauth:?ttps://auth.example.test#x",
            "ci-*",
            "local:*",
        ] {
            assert!(problems(fine).is_empty(), "{fine}");
        }
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
