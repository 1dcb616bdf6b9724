//! Network declarations: `effects.network` of a capability and
//! `semantics.external` of an operation (see [`modproto::network`]).
//!
//! Design decisions:
//!
//! - **Every malformed entry is an error of its own**, naming the entry, what
//!   is wrong with it and, when [`HostPattern::parse`] can tell, the entry
//!   that was probably meant. The host refuses such a module and never
//!   guesses what an entry meant, so the author has to hear it here first.
//! - **Trusted output from the network is a warning.** A capability that
//!   uses the network returns untrusted content unless it says otherwise
//!   (`effects.untrusted_output`, [`modproto::Effects::output_is_untrusted`]);
//!   saying `false` keeps an agent's connection out of lockdown, which is
//!   right only when the module checked what it returns, so a reviewer
//!   hears of it.
//! - **Redundant entries and `true` are warnings.** A duplicate or an entry
//!   another one covers grants nothing more, and `true` (any public host) is
//!   the widest grant an operator can be asked for: all work, but each
//!   makes the declaration harder to review than it needs to be.

use modproto::{Capability, HostPattern, HostPatternError, Network};

use crate::finding::Finding;

/// The forms an entry may take, for remedies.
const ENTRY_FORMS: &str = "NAME[:PORT], *.NAME[:PORT], IPV4[:PORT] or [IPV6][:PORT] (without a port, 443), for example \"api.github.com:443\"";

/// The findings about one capability's `effects.network`.
pub(crate) fn check_capability(capability: &Capability) -> Vec<Finding> {
    let cap = capability.id.as_str();
    let network = &capability.effects.network;
    let mut findings = Vec::new();
    let place = format!("the effects.network of capability {cap:?}");
    for (entry, error) in network.malformed() {
        findings.push(malformed_finding(&place, entry, &error).on(cap));
    }
    match network {
        Network::AnyPublic => findings.push(
            Finding::warning(
                "network.any_public_host",
                format!(
                    "capability {cap:?} declares effects.network true: any public host, the widest network grant an operator can be asked for"
                ),
                format!(
                    "list the hosts capability {cap:?} connects to instead, for example \"network\": [\"api.github.com:443\"]; keep true only if it must reach hosts no one can name in advance"
                ),
            )
            .on(cap),
        ),
        Network::Hosts(hosts) => {
            for redundancy in redundant(hosts) {
                findings.push(redundancy.finding(&place).on(cap));
            }
        }
        Network::None => {}
    }
    if network.is_used() && capability.effects.untrusted_output == Some(false) {
        findings.push(
            Finding::warning(
                "output.trusted_network_output",
                format!(
                    "capability {cap:?} uses the network but declares effects.untrusted_output false: an agent's connection that receives its output is not locked down, although what it brings back may have been written by anyone"
                ),
                format!(
                    "remove \"untrusted_output\": false from capability {cap:?} unless the module checks everything it returns (a signature, a number it parsed); text from the network is untrusted"
                ),
            )
            .on(cap),
        );
    }
    findings
}

/// The findings about malformed entries of an operation's
/// `semantics.external` (attributed to `capability` when it exists).
pub(crate) fn check_external(
    op: &str,
    external: &Network,
    capability: Option<&str>,
) -> Vec<Finding> {
    let place = format!("the semantics.external of operation {op:?}");
    external
        .malformed()
        .into_iter()
        .map(|(entry, error)| {
            let finding = malformed_finding(&place, entry, &error);
            match capability {
                Some(cap) => finding.on(cap),
                None => finding,
            }
        })
        .collect()
}

/// `external` without its malformed entries (reported on their own by
/// [`check_external`]).
pub(crate) fn well_formed(external: &Network) -> Network {
    match external {
        Network::Hosts(hosts) => Network::Hosts(
            hosts
                .iter()
                .filter(|h| HostPattern::parse(h).is_ok())
                .cloned()
                .collect(),
        ),
        other => other.clone(),
    }
}

fn malformed_finding(place: &str, entry: &str, error: &HostPatternError) -> Finding {
    // Most problems start with the entry itself; it is named already.
    let problem = error
        .problem
        .strip_prefix(&format!("{entry:?}: "))
        .unwrap_or(&error.problem);
    let remedy = match &error.suggestion {
        Some(suggestion) => format!("write {suggestion:?} instead of {entry:?} in {place}"),
        None => format!("write the entry in {place} as {ENTRY_FORMS}, or remove it"),
    };
    Finding::error(
        "network.malformed_host",
        format!("{place} holds {entry:?}, which the host refuses: {problem}"),
        remedy,
    )
}

/// An entry of a host list that grants nothing the others do not.
#[derive(Debug, PartialEq, Eq)]
struct Redundancy<'a> {
    entry: &'a str,
    /// The entry that makes it redundant.
    by: &'a str,
    /// Whether the two are the same host and port (else `by` is wider).
    same: bool,
}

impl Redundancy<'_> {
    fn finding(&self, place: &str) -> Finding {
        let Redundancy { entry, by, same } = self;
        let reason = if *same {
            format!("{place} lists {entry:?} and {by:?}, the same host and port")
        } else {
            format!("{place} lists {entry:?}, which {by:?} already covers")
        };
        Finding::warning(
            "network.redundant_host",
            reason,
            format!("remove {entry:?} from {place}: it grants nothing more"),
        )
    }
}

/// Each entry of `hosts` that an earlier equal entry, or a wider one
/// anywhere in the list, makes redundant. Malformed entries are left out
/// (they are errors of their own).
fn redundant(hosts: &[String]) -> Vec<Redundancy<'_>> {
    let parsed: Vec<(&str, HostPattern)> = hosts
        .iter()
        .filter_map(|h| HostPattern::parse(h).ok().map(|p| (h.as_str(), p)))
        .collect();
    let mut found = Vec::new();
    for (i, (entry, pattern)) in parsed.iter().enumerate() {
        let earlier_equal = parsed[..i].iter().find(|(_, other)| other == pattern);
        let wider = || {
            parsed
                .iter()
                .find(|(_, other)| other != pattern && other.covers(pattern))
        };
        if let Some((by, _)) = earlier_equal {
            found.push(Redundancy {
                entry,
                by,
                same: true,
            });
        } else if let Some((by, _)) = wider() {
            found.push(Redundancy {
                entry,
                by,
                same: false,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn capability(network: Value) -> Capability {
        let mut capability = json!({
            "id": "web.get", "description": "Fetch a page.",
            "input_schema": {"type": "object"},
            "effects": {}
        });
        capability["effects"]["network"] = network;
        serde_json::from_value(capability).unwrap()
    }

    fn ids(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn a_list_of_well_formed_distinct_hosts_has_no_findings() {
        for network in [
            json!(false),
            json!([]),
            json!([
                "api.github.com:443",
                "*.example.org",
                "example.org",
                "198.51.100.7:8080",
                "[2001:db8::1]"
            ]),
            // The same host on two ports is two grants.
            json!(["example.org:443", "example.org:80"]),
        ] {
            let findings = check_capability(&capability(network.clone()));
            assert!(findings.is_empty(), "{network}: {findings:#?}");
        }
    }

    #[test]
    fn each_malformed_entry_is_an_error_naming_the_capability_entry_and_problem() {
        let findings = check_capability(&capability(json!([
            "https://api.github.com/repos",
            "api.github.com:443",
            "*.org",
            "2001:db8::1",
        ])));
        assert_eq!(
            ids(&findings),
            vec!["network.malformed_host"; 3],
            "{findings:#?}"
        );
        assert!(
            findings
                .iter()
                .all(|f| f.is_error() && f.capability.as_deref() == Some("web.get"))
        );

        let url = &findings[0];
        assert!(
            url.reason.contains("capability \"web.get\""),
            "{}",
            url.reason
        );
        assert!(
            url.reason.contains("\"https://api.github.com/repos\""),
            "{}",
            url.reason
        );
        assert!(url.reason.contains("is a URL"), "{}", url.reason);
        assert!(
            url.remedy.starts_with(
                "write \"api.github.com:443\" instead of \"https://api.github.com/repos\""
            ),
            "{}",
            url.remedy
        );

        // No suggestion: the remedy names the forms.
        let tld = &findings[1];
        assert!(
            tld.reason.contains("\"*.org\"") && tld.reason.contains("too wide"),
            "{}",
            tld.reason
        );
        // The entry is named once, not repeated by the problem.
        assert_eq!(tld.reason.matches("\"*.org\"").count(), 1, "{}", tld.reason);
        assert!(tld.remedy.contains("*.NAME[:PORT]"), "{}", tld.remedy);

        let v6 = &findings[2];
        assert!(
            v6.remedy.starts_with("write \"[2001:db8::1]:443\""),
            "{}",
            v6.remedy
        );
    }

    #[test]
    fn duplicates_and_covered_entries_are_warnings_naming_what_covers_them() {
        let findings = check_capability(&capability(json!([
            "a.example.org:443",
            "*.example.org:443",
            "api.github.com",
            "API.GitHub.com:443",
            "*.b.example.org",
            "a.example.org:80",
        ])));
        assert_eq!(
            ids(&findings),
            vec!["network.redundant_host"; 3],
            "{findings:#?}"
        );
        assert!(
            findings
                .iter()
                .all(|f| !f.is_error() && f.capability.as_deref() == Some("web.get"))
        );
        let covered = &findings[0];
        assert!(
            covered
                .reason
                .contains("\"a.example.org:443\", which \"*.example.org:443\" already covers"),
            "{}",
            covered.reason
        );
        assert!(
            covered.remedy.starts_with("remove \"a.example.org:443\""),
            "{}",
            covered.remedy
        );
        let same = &findings[1];
        assert!(
            same.reason
                .contains("\"API.GitHub.com:443\" and \"api.github.com\", the same host and port"),
            "{}",
            same.reason
        );
        assert!(
            findings[2].reason.contains("\"*.b.example.org\""),
            "{}",
            findings[2].reason
        );
    }

    #[test]
    fn any_public_host_is_a_warning_suggesting_the_hosts() {
        let findings = check_capability(&capability(json!(true)));
        assert_eq!(ids(&findings), vec!["network.any_public_host"]);
        let f = &findings[0];
        assert!(!f.is_error());
        assert!(f.reason.contains("any public host"), "{}", f.reason);
        assert!(f.reason.contains("widest"), "{}", f.reason);
        assert!(f.remedy.contains("list the hosts"), "{}", f.remedy);
    }

    /// The attack: a network module that declares its output trusted, so
    /// the pages it fetches never lock an agent down. It works, but a
    /// reviewer is told; declaring nothing, or `true`, says nothing.
    #[test]
    fn a_network_capability_declaring_trusted_output_is_a_warning() {
        let with = |network: Value, untrusted: Value| {
            let mut c = capability(network);
            c.effects.untrusted_output = serde_json::from_value(untrusted).unwrap();
            check_capability(&c)
        };
        let findings = with(json!(["api.github.com:443"]), json!(false));
        assert_eq!(ids(&findings), vec!["output.trusted_network_output"]);
        let f = &findings[0];
        assert!(!f.is_error());
        assert_eq!(f.capability.as_deref(), Some("web.get"));
        assert!(f.reason.contains("untrusted_output false"), "{}", f.reason);
        assert!(f.remedy.contains("remove"), "{}", f.remedy);
        for (network, untrusted) in [
            (json!(["api.github.com:443"]), json!(null)),
            (json!(["api.github.com:443"]), json!(true)),
            (json!(false), json!(false)),
            (json!([]), json!(false)),
        ] {
            let findings = with(network.clone(), untrusted.clone());
            assert!(
                findings.is_empty(),
                "{network} / {untrusted}: {findings:#?}"
            );
        }
    }

    #[test]
    fn malformed_external_entries_are_errors_and_left_out_of_the_comparison() {
        let external = Network::Hosts(vec!["http://example.org".into(), "a.example.org".into()]);
        let findings = check_external("fetch", &external, Some("web.get"));
        assert_eq!(ids(&findings), vec!["network.malformed_host"]);
        assert!(
            findings[0].reason.contains("operation \"fetch\""),
            "{}",
            findings[0].reason
        );
        assert!(
            findings[0].remedy.starts_with("write \"example.org:80\""),
            "{}",
            findings[0].remedy
        );
        assert_eq!(findings[0].capability.as_deref(), Some("web.get"));
        assert_eq!(
            well_formed(&external),
            Network::Hosts(vec!["a.example.org".into()])
        );
        assert!(check_external("fetch", &Network::AnyPublic, None).is_empty());
    }
}
