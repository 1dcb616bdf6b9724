//! Lockdown after taint: what an agent's later calls may do once its
//! connection received untrusted content.
//!
//! ```toml
//! [lockdown]
//! enabled = true                    # the default
//! allowed_hosts = ["docs.rs:443"]   # what calls may still reach; the default, [], is none
//! ```
//!
//! A capability's output is untrusted content when it says so
//! (`effects.untrusted_output`), and by default exactly when it uses the
//! network ([`modproto::Effects::output_is_untrusted`]): a page, a mail or
//! an issue comment was written by someone else, and may carry
//! instructions aimed at the agent that reads it. Once such a result
//! reached the agent, every later call of that connection runs in
//! lockdown: its network is narrowed to `allowed_hosts`, and a capability
//! that writes or runs a program needs a person's yes for that one call.
//!
//! Design decisions:
//!
//! - **What taints is what the module wrote.** A result of a capability
//!   whose output is untrusted taints its connection, and so does a failure
//!   of one that ran (its message and stderr tail are the module's words);
//!   a refusal by the host (approval, a module's standing, input that does
//!   not fit) taints nothing, since nothing of the module reached the agent
//!   ([`crate::tools::InvokeFailure::ran`]).
//! - **Per connection, kept by the caller.** The library keeps no state: a
//!   caller that holds an agent's context across calls (`modhost mcp`, per
//!   connection) keeps the [`Lockdown`] the first tainting result starts
//!   ([`crate::tools::ToolOutcome::enters_lockdown`]) and hands it to each
//!   later call. A one-shot `modhost invoke` has no connection: no lockdown.
//! - **Narrowed, never widened.** A call's network (the declaration as the
//!   operator narrowed it, `crate::network_grant`) is intersected with
//!   `allowed_hosts` (`narrow`): an entry is kept where both grant it;
//!   a non-public address the operator granted outright stays only when
//!   `allowed_hosts` names that very address and port. `allowed_hosts`
//!   cannot open anything the call was not granted already.
//! - **No host left: the proxy still runs, and refuses with the reason.**
//!   A call left with no host gets its egress proxy all the same, which
//!   refuses every connection; each refusal the lockdown caused says so,
//!   and what to do, in the call's `network` contacts and in a failed
//!   call's diagnosis (`CallLockdown::note_refusals`). Running it with no
//!   network at all would fail it on a socket with no reason anyone reads.
//! - **Writes, spawns and secrets need a person.** A capability that
//!   writes (any root, its own state too: a note is how an injected
//!   instruction outlives the conversation), runs a program or receives a
//!   secret (a credential acts for the operator) moves from `allow` to
//!   `ask`; a `deny` stays one. Only a person's yes for that one call runs
//!   it ([`crate::approval::CallPolicy::needs_a_person`]): a client with
//!   delegated approval is the very agent the content may be steering, and
//!   an allow rule was written before the content arrived.
//! - **Once entered, it lasts.** `enabled` decides whether a connection
//!   enters lockdown; one in lockdown stays in it until it ends, whatever
//!   `config.toml` says later (its `allowed_hosts` are read at each call).
//!   The way out is a new connection: a context that never read the content.
//! - **On by default, with no host.** The secure default: an operator who
//!   wants an agent to keep reaching, say, documentation after it read a
//!   web page names those hosts.

use modhost_egress::{CallGrant, Contacts, HostGrant, Target};
use modproto::{Effects, HostPattern};
use serde::{Deserialize, Serialize};

use crate::approval::{CallPolicy, PolicyDecision, PolicyVerdict};
use crate::network_grant;

/// `[lockdown]` in `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LockdownConfig {
    /// Whether a connection that received untrusted content enters
    /// lockdown (default: yes).
    pub enabled: bool,
    /// What calls may still reach in lockdown: entries as in
    /// `effects.network` ([`HostPattern`]); none by default.
    pub allowed_hosts: Vec<String>,
}

impl Default for LockdownConfig {
    fn default() -> Self {
        LockdownConfig {
            enabled: true,
            allowed_hosts: Vec::new(),
        }
    }
}

impl LockdownConfig {
    /// What is wrong with `allowed_hosts`, one sentence per entry that does
    /// not parse, naming it (checked when `config.toml` is read).
    pub(crate) fn problems(&self) -> Vec<String> {
        self.allowed_hosts
            .iter()
            .filter_map(|entry| {
                HostPattern::parse(entry).err().map(|error| {
                    format!(
                        "[lockdown] allowed_hosts entry {entry:?}: {error}; write it as NAME[:PORT], *.NAME[:PORT], IPV4[:PORT] or [IPV6][:PORT] (without a port, 443)"
                    )
                })
            })
            .collect()
    }

    /// The entries of `allowed_hosts` (those that parse: the others are
    /// refused when the file is read).
    pub fn patterns(&self) -> Vec<HostPattern> {
        self.allowed_hosts
            .iter()
            .filter_map(|entry| HostPattern::parse(entry).ok())
            .collect()
    }
}

/// A connection in lockdown: it returned `since`'s untrusted content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lockdown {
    /// The tool whose result started it.
    pub since: String,
}

impl Lockdown {
    /// The lockdown one call runs under: this one, with what `config`
    /// allows now.
    pub(crate) fn for_call(&self, config: &LockdownConfig) -> CallLockdown {
        CallLockdown {
            since: self.since.clone(),
            allowed_hosts: config.patterns(),
        }
    }
}

/// The lockdown one call runs under (`InvokeRequest::lockdown`,
/// `InvokeCall::lockdown`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallLockdown {
    /// The tool whose result started the lockdown.
    pub since: String,
    /// `[lockdown] allowed_hosts`.
    pub allowed_hosts: Vec<HostPattern>,
}

impl CallLockdown {
    /// `grant` as this call may use it: what both it and `allowed_hosts`
    /// grant, never more.
    pub fn narrow(&self, grant: &CallGrant) -> CallGrant {
        narrow(grant, &self.allowed_hosts)
    }

    /// The host warning of a call whose `granted` network this lockdown
    /// narrowed to `narrowed`.
    pub(crate) fn warning(&self, narrowed: &CallGrant) -> String {
        format!(
            "lockdown: {} returned untrusted content earlier on this connection, so this call may connect to {} only ([lockdown] allowed_hosts in config.toml)",
            self.since,
            network_grant::summary(narrowed)
        )
    }

    /// Add to each refusal of `contacts` that this lockdown caused (one
    /// `granted`, the call's network before it, admits) why, and what to
    /// do. The proxy's own words stay: they are what the module was told.
    pub(crate) fn note_refusals(&self, contacts: &mut Contacts, granted: &CallGrant) {
        let narrowed = self.narrow(granted);
        for refusal in &mut contacts.refused {
            let Some(target) = target(&refusal.host) else {
                continue;
            };
            if granted.admits(&target).is_ok() && narrowed.admits(&target).is_err() {
                refusal.reason = format!("{}; {}", refusal.reason, self.refusal_note());
            }
        }
    }

    /// Why the lockdown refused a host, and what to do.
    fn refusal_note(&self) -> String {
        let allowed = if self.allowed_hosts.is_empty() {
            "none".to_owned()
        } else {
            self.allowed_hosts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "refused by the lockdown: {} returned untrusted content earlier on this connection, so its calls reach only the [lockdown] allowed_hosts of config.toml ({allowed}); to reach this host, continue in a new connection that has not read that content, or ask the operator to add it to allowed_hosts",
            self.since
        )
    }
}

/// `host:port` as the proxy names a target (`[v6]:port` for IPv6).
fn target(named: &str) -> Option<Target> {
    let (host, port) = named.rsplit_once(':')?;
    Some(Target::new(host, port.parse().ok()?))
}

/// `grant` intersected with `allowed`: each entry kept where both grant it
/// (of two entries on one port, one covers the other or they share no
/// host), a granted non-public address only when `allowed` names it
/// exactly. Never wider than `grant`.
pub(crate) fn narrow(grant: &CallGrant, allowed: &[HostPattern]) -> CallGrant {
    let mut hosts: Vec<HostPattern> = Vec::new();
    let mut keep = |pattern: &HostPattern| {
        if !hosts.contains(pattern) {
            hosts.push(pattern.clone());
        }
    };
    match &grant.hosts {
        // Any public host: exactly the allowed ones (the proxy still
        // refuses their non-public addresses).
        HostGrant::AnyPublic => allowed.iter().for_each(&mut keep),
        HostGrant::Only(granted) => {
            for g in granted {
                for a in allowed {
                    if g.covers(a) {
                        keep(a);
                    } else if a.covers(g) {
                        keep(g);
                    }
                }
            }
        }
    }
    let private = grant
        .private
        .iter()
        .filter(|address| {
            allowed.iter().any(|a| {
                a.port == address.port()
                    && a.host
                        == modproto::HostName::Address(modproto::network::canonical_ip(
                            address.ip(),
                        ))
            })
        })
        .copied()
        .collect();
    CallGrant {
        hosts: HostGrant::Only(hosts),
        private,
    }
}

/// The policy of a call under `lockdown` of a tool with `effects`, granted
/// `network` (already narrowed), whose policy without the lockdown is
/// `base` (decided with that same network): moved to `ask`, for a person
/// to answer, when the tool writes, runs a program or receives a secret;
/// else `base`.
pub(crate) fn policy(
    base: PolicyDecision,
    effects: &Effects,
    network: Option<&CallGrant>,
    lockdown: &CallLockdown,
) -> CallPolicy {
    let mut acts = Vec::new();
    if !effects.writes.is_empty() {
        acts.push(format!("writes {}", effects.writes.join(", ")));
    }
    if !effects.spawns.is_empty() {
        acts.push(format!("runs {}", effects.spawns.join(", ")));
    }
    // A credential acts for the operator wherever the call may still
    // connect: after untrusted words, a person decides each use.
    if !effects.secrets.is_empty() {
        acts.push(format!(
            "receives secret{} {}",
            if effects.secrets.len() == 1 { "" } else { "s" },
            effects.secrets.join(", ")
        ));
    }
    if base.verdict == PolicyVerdict::Deny || acts.is_empty() {
        return CallPolicy::new(base, network);
    }
    if let Some(grant) = network {
        acts.push(format!("connects to {}", network_grant::summary(grant)));
    }
    let rule = format!(
        "lockdown since {} returned untrusted content: {}",
        lockdown.since,
        acts.join("; ")
    );
    CallPolicy {
        decision: PolicyDecision {
            verdict: PolicyVerdict::Ask,
            rule: rule.clone(),
            from_rule: false,
        },
        question: rule,
        needs_a_person: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patterns(entries: &[&str]) -> Vec<HostPattern> {
        entries
            .iter()
            .map(|e| HostPattern::parse(e).unwrap())
            .collect()
    }

    fn only(entries: &[&str]) -> CallGrant {
        CallGrant {
            hosts: HostGrant::Only(patterns(entries)),
            private: Vec::new(),
        }
    }

    fn lockdown(allowed: &[&str]) -> CallLockdown {
        CallLockdown {
            since: "web__web_get".into(),
            allowed_hosts: patterns(allowed),
        }
    }

    fn hosts(grant: &CallGrant) -> Vec<String> {
        match &grant.hosts {
            HostGrant::AnyPublic => vec!["*".into()],
            HostGrant::Only(p) => p.iter().map(ToString::to_string).collect(),
        }
    }

    /// The attack: an agent steered by a page it read sends what it knows
    /// to a host of the attacker's. In lockdown a call reaches only what
    /// both its grant and `allowed_hosts` name, however wide its grant.
    #[test]
    fn a_grant_is_narrowed_to_what_both_it_and_the_lockdown_allow() {
        let l = lockdown(&["docs.rs:443", "a.example.org:443", "*.internal.test:8080"]);
        let any = CallGrant {
            hosts: HostGrant::AnyPublic,
            private: Vec::new(),
        };
        assert_eq!(
            hosts(&l.narrow(&any)),
            ["docs.rs:443", "a.example.org:443", "*.internal.test:8080"]
        );
        let declared = only(&["*.example.org:443", "evil.test:443", "x.internal.test:8080"]);
        assert_eq!(
            hosts(&l.narrow(&declared)),
            ["a.example.org:443", "x.internal.test:8080"],
            "the narrower of each pair that overlaps; nothing else"
        );
        // Another port is another host; no overlap is no host.
        assert_eq!(
            hosts(&l.narrow(&only(&["docs.rs:80"]))),
            Vec::<String>::new()
        );
        assert_eq!(hosts(&lockdown(&[]).narrow(&any)), Vec::<String>::new());
        assert_eq!(
            hosts(&lockdown(&[]).narrow(&declared)),
            Vec::<String>::new()
        );
        // Never wider: every host the result admits, the grant admitted.
        for (host, port) in [("a.example.org", 443), ("x.internal.test", 8080)] {
            let target = Target::new(host, port);
            assert!(l.narrow(&declared).admits(&target).is_ok());
            assert!(declared.admits(&target).is_ok());
        }
        assert!(
            l.narrow(&declared)
                .admits(&Target::new("b.example.org", 443))
                .is_err()
        );
        assert!(
            l.narrow(&declared)
                .admits(&Target::new("docs.rs", 443))
                .is_err()
        );
    }

    #[test]
    fn a_private_address_stays_only_when_the_lockdown_names_it_exactly() {
        let grant = CallGrant {
            hosts: HostGrant::Only(patterns(&["db.internal:5432"])),
            private: vec![
                "127.0.0.1:5432".parse().unwrap(),
                "[::1]:8080".parse().unwrap(),
            ],
        };
        let narrowed = lockdown(&["127.0.0.1:5432", "[::1]:8081"]).narrow(&grant);
        assert_eq!(
            narrowed.private,
            ["127.0.0.1:5432".parse().unwrap()] as [std::net::SocketAddr; 1]
        );
        assert_eq!(hosts(&narrowed), Vec::<String>::new());
        assert!(lockdown(&[]).narrow(&grant).private.is_empty());
    }

    /// A refusal the lockdown caused says so and what to do; one the call
    /// would have met anyway keeps the proxy's words alone.
    #[test]
    fn refusals_the_lockdown_caused_say_lockdown_and_what_to_do() {
        let granted = only(&["198.51.100.6:8080", "198.51.100.10:8080"]);
        let l = lockdown(&["198.51.100.6:8080"]);
        let mut contacts = Contacts::default();
        for (host, reason) in [
            (
                "198.51.100.10:8080",
                "198.51.100.10:8080 is not granted to this call",
            ),
            ("evil.test:443", "evil.test:443 is not granted to this call"),
        ] {
            contacts.refused.push(modhost_egress::Refusal {
                host: host.into(),
                reason: reason.into(),
            });
        }
        l.note_refusals(&mut contacts, &granted);
        let lockdown_refusal = &contacts.refused[0].reason;
        assert!(
            lockdown_refusal.starts_with("198.51.100.10:8080 is not granted"),
            "{lockdown_refusal}"
        );
        assert!(
            lockdown_refusal
                .contains("refused by the lockdown: web__web_get returned untrusted content"),
            "{lockdown_refusal}"
        );
        assert!(
            lockdown_refusal.contains("(198.51.100.6:8080)"),
            "{lockdown_refusal}"
        );
        assert!(
            lockdown_refusal.contains("new connection"),
            "{lockdown_refusal}"
        );
        assert_eq!(
            contacts.refused[1].reason,
            "evil.test:443 is not granted to this call"
        );
        assert_eq!(
            target("[2001:db8::1]:443"),
            Some(Target::new("2001:db8::1", 443))
        );
        assert_eq!(target("nonsense"), None);
    }

    fn effects(value: serde_json::Value) -> Effects {
        serde_json::from_value(value).unwrap()
    }

    fn allow() -> PolicyDecision {
        PolicyDecision {
            verdict: PolicyVerdict::Allow,
            rule: "rule \"notes\"".into(),
            from_rule: true,
        }
    }

    /// The attack: a page tells the agent to write a note (an instruction
    /// that outlives the conversation) or to run a program. In lockdown
    /// a tool that writes or spawns asks a person, whatever allowed it.
    #[test]
    fn writes_and_spawns_move_to_ask_for_a_person_and_a_deny_stays() {
        let l = lockdown(&[]);
        for (declared, says) in [
            (json!({"writes": ["state"]}), "writes state"),
            (json!({"spawns": ["git"]}), "runs git"),
            (
                json!({"writes": ["workspace"], "spawns": ["git"]}),
                "writes workspace; runs git",
            ),
            (
                json!({"secrets": ["GITHUB_TOKEN"]}),
                "receives secret GITHUB_TOKEN",
            ),
            (
                json!({"spawns": ["git"], "secrets": ["A_TOKEN", "B_TOKEN"]}),
                "runs git; receives secrets A_TOKEN, B_TOKEN",
            ),
        ] {
            let p = policy(allow(), &effects(declared.clone()), None, &l);
            assert_eq!(p.decision.verdict, PolicyVerdict::Ask, "{declared}");
            assert!(p.needs_a_person, "{declared}");
            assert!(!p.decision.allows_starting_ahead());
            assert_eq!(
                p.question,
                format!("lockdown since web__web_get returned untrusted content: {says}")
            );
        }
        let with_network = policy(
            allow(),
            &effects(json!({"writes": ["state"], "network": true})),
            Some(&only(&[])),
            &l,
        );
        assert!(
            with_network
                .question
                .ends_with("writes state; connects to no host"),
            "{}",
            with_network.question
        );

        let read_only = policy(allow(), &effects(json!({"reads": ["workspace"]})), None, &l);
        assert_eq!(read_only.decision, allow());
        assert!(!read_only.needs_a_person);
        let deny = PolicyDecision {
            verdict: PolicyVerdict::Deny,
            rule: "rule \"no\"".into(),
            from_rule: true,
        };
        let denied = policy(
            deny.clone(),
            &effects(json!({"writes": ["state"]})),
            None,
            &l,
        );
        assert_eq!(denied.decision, deny);
    }

    #[test]
    fn the_config_is_on_with_no_host_and_names_each_malformed_entry() {
        let default = LockdownConfig::default();
        assert!(default.enabled);
        assert!(default.allowed_hosts.is_empty() && default.problems().is_empty());
        let config = LockdownConfig {
            enabled: true,
            allowed_hosts: vec![
                "docs.rs:443".into(),
                "https://docs.rs/x".into(),
                "*.org".into(),
            ],
        };
        let problems = config.problems();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(
            problems[0].contains("\"https://docs.rs/x\""),
            "{}",
            problems[0]
        );
        assert!(
            problems[0].contains("did you mean \"docs.rs:443\""),
            "{}",
            problems[0]
        );
        assert!(problems[1].contains("\"*.org\""), "{}", problems[1]);
        assert_eq!(config.patterns(), patterns(&["docs.rs:443"]));
    }
}
