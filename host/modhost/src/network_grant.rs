//! What network one call gets: the hosts its capability declares
//! (`effects.network`), narrowed by the operator, and the non-public
//! addresses the operator granted outright.
//!
//! ```toml
//! [capabilities."fetch.fetch.get"]
//! network = ["docs.rs:443", "*.wikipedia.org:443"]   # narrows the declaration
//! allow_private = ["127.0.0.1:8080"]                  # reachable although not public
//! ```
//!
//! Design decisions:
//!
//! - **The operator can only narrow.** Each entry of `network` must be
//!   covered by the declaration (`*.example.org:443` declared allows
//!   `api.example.org:443`, never `example.org:443` or another port): an
//!   override that widens what a module declared would grant what no
//!   reviewer of the module's declaration saw. It is refused at startup,
//!   naming the entry, like every override that names nothing.
//! - **Nothing non-public without a line naming it.** The proxy refuses
//!   loopback, private, link-local (the cloud metadata endpoint), CGNAT and
//!   the other non-public ranges whatever the host list says; only an exact
//!   `address:port` in `allow_private` of that capability opens one. A
//!   granted address is reachable by its literal even when the host list
//!   does not name it: the operator named it.
//! - **Declared network, granted nothing: no network.** `network = []`
//!   turns it off for that capability; the call then runs as one without
//!   network (no proxy, no TCP at all).

use std::net::SocketAddr;

use modhost_egress::{CallGrant, HostGrant};
use modproto::{Capability, HostPattern, Network};

/// What a call of a capability would get of the network, as `modhost
/// describe` shows it ([`crate::Host::network_grant`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkView {
    /// The hosts it may reach; `None` for any public host.
    pub hosts: Option<Vec<String>>,
    /// Non-public addresses the operator granted it.
    pub private: Vec<SocketAddr>,
    /// One line for people (`summary`).
    pub summary: String,
    /// What a call gets on a connection in lockdown (`[lockdown]
    /// allowed_hosts` applied, `crate::lockdown`), for people.
    pub under_lockdown: String,
}

impl NetworkView {
    /// The view of `grant`, and of `locked`, the same grant under lockdown.
    pub(crate) fn new(grant: &CallGrant, locked: &CallGrant) -> NetworkView {
        NetworkView {
            hosts: match &grant.hosts {
                HostGrant::AnyPublic => None,
                HostGrant::Only(patterns) => {
                    Some(patterns.iter().map(ToString::to_string).collect())
                }
            },
            private: grant.private.clone(),
            summary: summary(grant),
            under_lockdown: summary(locked),
        }
    }
}

/// The network lines of one capability's `config.toml` override: the
/// narrowed host list (`None`: the declaration as is) and the granted
/// non-public addresses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NetworkLines<'a> {
    pub network: Option<&'a [String]>,
    pub allow_private: &'a [String],
}

/// The network grant of a call of `capability` under its operator's
/// `lines`: `None` when the call gets no network. Entries the override
/// check ([`override_problems`]) refuses at startup are left out here.
pub(crate) fn call_grant(capability: &Capability, lines: NetworkLines<'_>) -> Option<CallGrant> {
    let declared = &capability.effects.network;
    if !declared.is_used() {
        return None;
    }
    let hosts = match lines.network {
        Some(narrowed) => {
            let patterns: Vec<HostPattern> = narrowed
                .iter()
                .filter_map(|entry| HostPattern::parse(entry).ok())
                .filter(|p| covered(declared, p))
                .collect();
            if patterns.is_empty() {
                return None;
            }
            HostGrant::Only(patterns)
        }
        None => match declared.patterns() {
            None => HostGrant::AnyPublic,
            Some(patterns) if patterns.is_empty() => return None,
            Some(patterns) => HostGrant::Only(patterns),
        },
    };
    let private = lines
        .allow_private
        .iter()
        .filter_map(|a| a.parse::<SocketAddr>().ok())
        .collect();
    Some(CallGrant { hosts, private })
}

fn covered(declared: &Network, pattern: &HostPattern) -> bool {
    declared.covers(&Network::Hosts(vec![pattern.to_string()]))
}

/// What is wrong with the network `lines` of override `key` for
/// `capability`, one sentence each.
pub(crate) fn override_problems(
    key: &str,
    capability: &Capability,
    lines: NetworkLines<'_>,
) -> Vec<String> {
    let declared = &capability.effects.network;
    let mut problems = Vec::new();
    let place = format!("[capabilities.{key:?}]");
    if !declared.is_used()
        && (lines.network.is_some_and(|n| !n.is_empty()) || !lines.allow_private.is_empty())
    {
        problems.push(format!(
            "{place} grants network, but capability {} declares none: the module would never use it; remove the line, or ask the module's author to declare the hosts",
            capability.id
        ));
        return problems;
    }
    for entry in lines.network.into_iter().flatten() {
        match HostPattern::parse(entry) {
            Err(error) => problems.push(format!("{place} network entry {entry:?}: {error}")),
            Ok(pattern) if !covered(declared, &pattern) => problems.push(format!(
                "{place} network entry {entry:?} is not among the hosts capability {} declares ({}): config.toml can narrow a declaration, never widen it",
                capability.id,
                declared.summary()
            )),
            Ok(_) => {}
        }
    }
    for entry in lines.allow_private {
        match entry.parse::<SocketAddr>() {
            Err(_) => problems.push(format!(
                "{place} allow_private entry {entry:?} is not an address with a port, such as \"127.0.0.1:5432\" or \"[::1]:8080\""
            )),
            Ok(addr) if modhost_egress::classify(addr.ip()) == modhost_egress::AddressClass::Public => problems.push(format!(
                "{place} allow_private entry {entry:?} is a public address, which needs no allow_private line: name it in network instead"
            )),
            Ok(_) => {}
        }
    }
    problems
}

/// How a person reads a grant: `"api.github.com:443"`, `"any public
/// host"`, with the granted non-public addresses; `"no host"` for one
/// that admits nothing (a call in lockdown, `crate::lockdown`).
pub(crate) fn summary(grant: &CallGrant) -> String {
    let hosts = match &grant.hosts {
        HostGrant::AnyPublic => "any public host".to_owned(),
        HostGrant::Only(patterns) if patterns.is_empty() && grant.private.is_empty() => {
            return "no host".to_owned();
        }
        HostGrant::Only(patterns) if patterns.is_empty() => {
            let private: Vec<String> = grant.private.iter().map(ToString::to_string).collect();
            return format!(
                "no public host; and, though not public, {}",
                private.join(", ")
            );
        }
        HostGrant::Only(patterns) => patterns
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    if grant.private.is_empty() {
        hosts
    } else {
        let private: Vec<String> = grant.private.iter().map(ToString::to_string).collect();
        format!("{hosts}; and, though not public, {}", private.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(network: serde_json::Value) -> Capability {
        let mut capability = json!({
            "id": "fetch", "description": "d", "input_schema": {"type": "object"},
            "effects": {}
        });
        capability["effects"]["network"] = network;
        serde_json::from_value(capability).unwrap()
    }

    /// The network lines of an override, owned (`lines()` borrows them).
    struct Over {
        network: Option<Vec<String>>,
        allow_private: Vec<String>,
    }

    impl Over {
        fn lines(&self) -> NetworkLines<'_> {
            NetworkLines {
                network: self.network.as_deref(),
                allow_private: &self.allow_private,
            }
        }
    }

    fn over(network: Option<&[&str]>, private: &[&str]) -> Over {
        Over {
            network: network.map(|n| n.iter().map(|s| (*s).to_owned()).collect()),
            allow_private: private.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn hosts(grant: &CallGrant) -> Vec<String> {
        match &grant.hosts {
            HostGrant::AnyPublic => vec!["*".into()],
            HostGrant::Only(p) => p.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn the_declaration_is_the_grant_unless_the_operator_narrows_it() {
        let declared = capability(json!(["*.example.org", "api.github.com:443"]));
        let grant = call_grant(&declared, NetworkLines::default()).unwrap();
        assert_eq!(hosts(&grant), ["*.example.org:443", "api.github.com:443"]);
        assert!(grant.private.is_empty());

        let narrowed = over(Some(&["docs.example.org:443"]), &[]);
        let grant = call_grant(&declared, narrowed.lines()).unwrap();
        assert_eq!(hosts(&grant), ["docs.example.org:443"]);

        let any = call_grant(&capability(json!(true)), NetworkLines::default()).unwrap();
        assert!(matches!(any.hosts, HostGrant::AnyPublic));
        assert!(call_grant(&capability(json!(false)), NetworkLines::default()).is_none());
        assert!(call_grant(&capability(json!([])), NetworkLines::default()).is_none());
        assert!(
            call_grant(&declared, over(Some(&[]), &[]).lines()).is_none(),
            "network = [] turns it off"
        );
    }

    /// The attack: an operator line (or a tampered config) that widens the
    /// module's declaration. It is a problem at startup, and the grant
    /// never carries the wider entry.
    #[test]
    fn an_override_cannot_widen_the_declaration() {
        let declared = capability(json!(["*.example.org:443"]));
        let wider = over(
            Some(&["example.org:443", "a.example.org:80", "evil.test"]),
            &[],
        );
        let problems = override_problems("fetch.fetch", &declared, wider.lines());
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].contains("\"example.org:443\" is not among the hosts"),
            "{}",
            problems[0]
        );
        assert!(problems[0].contains("never widen"), "{}", problems[0]);
        assert!(call_grant(&declared, wider.lines()).is_none());

        let mixed = over(Some(&["a.example.org", "evil.test"]), &[]);
        assert_eq!(
            hosts(&call_grant(&declared, mixed.lines()).unwrap()),
            ["a.example.org:443"]
        );
    }

    #[test]
    fn private_addresses_are_granted_by_exact_address_and_port() {
        let declared = capability(json!(["db.internal:5432"]));
        let lines = over(None, &["127.0.0.1:5432", "[::1]:8080"]);
        assert!(override_problems("k", &declared, lines.lines()).is_empty());
        let grant = call_grant(&declared, lines.lines()).unwrap();
        assert_eq!(
            grant.private,
            [
                "127.0.0.1:5432".parse().unwrap(),
                "[::1]:8080".parse().unwrap()
            ] as [SocketAddr; 2]
        );
        assert!(summary(&grant).contains("though not public, 127.0.0.1:5432, [::1]:8080"));

        let bad = over(None, &["127.0.0.1", "localhost:5432", "93.184.216.34:80"]);
        let problems = override_problems("k", &declared, bad.lines());
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[2].contains("public address"), "{}", problems[2]);

        let none = capability(json!(false));
        let problems = override_problems("k", &none, over(None, &["127.0.0.1:5432"]).lines());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("declares none"), "{}", problems[0]);
    }
}
