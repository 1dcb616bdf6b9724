//! Contract 2's no-weakening check: a capability must declare at least the
//! effects of every operation that names it.
//!
//! The operation layer says what a product action means (it reads the
//! transcripts, mutates the artifacts, reaches the network); the capability's
//! `effects` are what approval and the tool description actually read. A
//! projection that declares weaker effects than its operation looks correct
//! at the layer a reviewer reads and makes the gate fire on nothing, so the
//! comparison is mechanical and every gap is a finding.
//!
//! The network is compared host by host ([`Network::covers`]): an operation
//! that reaches any public host (`external: true`) needs a capability that
//! declares `network: true`; one that names hosts needs each of them granted
//! by an entry of the capability's list (`*.example.org:443` grants
//! `a.example.org:443`, never `example.org:443` or another port), and the
//! finding names exactly the hosts missing. A malformed `external` entry is
//! an error of its own (`network.malformed_host`), not a weakening.
//!
//! Output is compared as a fact of its own: an operation whose output is
//! untrusted (it reaches outside the machine, or says
//! `semantics.untrusted_output: true`) needs a capability whose output is
//! untrusted too ([`modproto::Effects::output_is_untrusted`]). Declaring
//! `untrusted_output: false` there would keep an agent that reads the
//! result out of lockdown, so it is a weakening like any other.
//!
//! Secrets are compared by name: an operation that uses a credential
//! (`semantics.secrets`) needs a capability that declares it in
//! `effects.secrets`, so the approval question and `modhost describe`
//! name every credential a call acts with.
//!
//! The check takes a [`V2Accepted`], which only the contract pin can
//! produce: operations are never treated as binding before the pin ran.

use modproto::contract::V2Accepted;
use modproto::{Descriptor, Network};
use std::collections::HashSet;

use crate::finding::{ConformanceReport, Finding};
use crate::network;

/// Every way the capabilities of `accepted` weaken its operations, one
/// finding per gap. Empty when the projection is faithful.
pub fn check_no_weakening(accepted: &V2Accepted) -> Vec<Finding> {
    let descriptor = accepted.descriptor();
    let mut findings = Vec::new();
    let mut seen = HashSet::new();
    for operation in accepted.operations() {
        let op = operation.id.as_str();
        if op.is_empty() {
            findings.push(Finding::error(
                "operation.empty_id",
                format!(
                    "an operation naming capability {:?} has an empty id",
                    operation.capability
                ),
                "give every operation a non-empty id",
            ));
        } else if !seen.insert(op) {
            findings.push(Finding::error(
                "operation.duplicate_id",
                format!("operation id {op:?} is declared more than once"),
                "give every operation a unique id",
            ));
        }
        let semantics = &operation.semantics;
        check_declared(descriptor, op, semantics, &mut findings);
        // Malformed entries are findings of their own; the comparison below
        // is of the entries that parse.
        let named = descriptor
            .capability(&operation.capability)
            .map(|c| c.id.as_str());
        findings.extend(network::check_external(op, &semantics.external, named));
        let external = network::well_formed(&semantics.external);
        findings.extend(crate::secrets::check_names(
            &format!("the semantics.secrets of operation {op:?}"),
            &semantics.secrets,
        ));

        let Some(capability) = descriptor.capability(&operation.capability) else {
            findings.push(Finding::error(
                "operation.unknown_capability",
                format!(
                    "operation {op:?} names capability {:?}, which the module does not declare",
                    operation.capability
                ),
                "name an existing capability id in the operation, or declare the capability",
            ));
            continue;
        };
        let cap = capability.id.as_str();
        let effects = &capability.effects;
        for root in &semantics.reads {
            if !effects.reads.contains(root) && !effects.writes.contains(root) {
                findings.push(
                    Finding::error(
                        "weakening.read_undeclared",
                        format!(
                            "operation {op:?} reads root {root:?}, but capability {cap:?} declares no read or write of it"
                        ),
                        format!("add {root:?} to the effects.reads of capability {cap:?}"),
                    )
                    .on(cap),
                );
            }
        }
        for root in &semantics.mutates {
            if !effects.writes.contains(root) {
                findings.push(
                    Finding::error(
                        "weakening.mutate_not_written",
                        format!(
                            "operation {op:?} mutates root {root:?}, but capability {cap:?} does not declare it in effects.writes"
                        ),
                        format!("add {root:?} to the effects.writes of capability {cap:?}"),
                    )
                    .on(cap),
                );
            }
        }
        if let Some(finding) = external_weakening(op, cap, &effects.network, &external) {
            findings.push(finding.on(cap));
        }
        for binary in &semantics.runs {
            if !effects.spawns.contains(binary) {
                findings.push(
                    Finding::error(
                        "weakening.run_not_spawned",
                        format!(
                            "operation {op:?} runs binary {binary:?}, but capability {cap:?} does not declare it in effects.spawns"
                        ),
                        format!("add {binary:?} to the effects.spawns of capability {cap:?}"),
                    )
                    .on(cap),
                );
            }
        }
        // A credential the operation acts with is one the approval
        // question and `modhost describe` must name: the capability
        // declares it, or the operator is asked about less than it does.
        for secret in &semantics.secrets {
            if !effects.secrets.contains(secret) {
                findings.push(
                    Finding::error(
                        "weakening.secret_undeclared",
                        format!(
                            "operation {op:?} uses secret {secret:?}, but capability {cap:?} does not declare it in effects.secrets"
                        ),
                        format!("add {secret:?} to the effects.secrets of capability {cap:?}"),
                    )
                    .on(cap),
                );
            }
        }
        // Trusted output where the operation's is untrusted (it reaches
        // the network, or says so) would keep an agent that reads it out
        // of lockdown: the capability must not say less than the operation.
        // A gap that comes from the defaults alone follows from a network
        // the capability does not declare, which is its own finding above.
        let declared = effects.untrusted_output.is_some() || semantics.untrusted_output.is_some();
        if declared && semantics.output_is_untrusted() && !effects.output_is_untrusted() {
            let why = match semantics.untrusted_output {
                Some(true) => "declares untrusted output",
                _ => "reaches outside the machine, so its output is untrusted",
            };
            let remedy = match effects.untrusted_output {
                Some(false) => format!(
                    "remove \"untrusted_output\": false from the effects of capability {cap:?}"
                ),
                _ => format!("set effects.untrusted_output to true on capability {cap:?}"),
            };
            findings.push(
                Finding::error(
                    "weakening.untrusted_output_declared_trusted",
                    format!(
                        "operation {op:?} {why}, but capability {cap:?} declares its output trusted"
                    ),
                    remedy,
                )
                .on(cap),
            );
        }
        if semantics.needs_approval && !effects.approval {
            findings.push(
                Finding::error(
                    "weakening.approval_not_required",
                    format!(
                        "operation {op:?} needs approval, but capability {cap:?} does not set effects.approval"
                    ),
                    format!("set effects.approval to true on capability {cap:?}"),
                )
                .on(cap),
            );
        }
    }
    findings
}

/// The gap when capability `cap`'s `network` does not cover everything
/// operation `op` reaches (`external`, its well-formed entries), naming
/// exactly the entries it lacks.
fn external_weakening(
    op: &str,
    cap: &str,
    network: &Network,
    external: &Network,
) -> Option<Finding> {
    if network.covers(external) {
        return None;
    }
    let (reaches, remedy) = match external {
        Network::Hosts(hosts) => {
            let missing: Vec<&str> = hosts
                .iter()
                .filter(|h| !network.covers(&Network::Hosts(vec![(*h).clone()])))
                .map(String::as_str)
                .collect();
            let quoted = missing
                .iter()
                .map(|h| format!("{h:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            let remedy = match network {
                Network::Hosts(list) if !list.is_empty() => {
                    format!("add {quoted} to the effects.network of capability {cap:?}")
                }
                _ => {
                    format!("declare \"network\": [{quoted}] in the effects of capability {cap:?}")
                }
            };
            (missing.join(", "), remedy)
        }
        // `None` is covered by everything; this is `AnyPublic`.
        _ => (
            "any public host".to_owned(),
            format!(
                "set effects.network to true on capability {cap:?}, or have operation {op:?} name the hosts it reaches in semantics.external"
            ),
        ),
    };
    Some(Finding::error(
        "weakening.external_without_network",
        format!(
            "operation {op:?} reaches {reaches}, but capability {cap:?} does not declare it: its effects.network is {}",
            network.summary()
        ),
        remedy,
    ))
}

/// The roots and binaries an operation names must be declared by the module:
/// an undeclared one can never be granted, so the operation describes
/// something the module cannot do.
fn check_declared(
    descriptor: &Descriptor,
    op: &str,
    semantics: &modproto::Semantics,
    findings: &mut Vec<Finding>,
) {
    let roots = semantics.reads.iter().chain(&semantics.mutates);
    let mut reported = HashSet::new();
    for root in roots {
        if descriptor.root(root).is_none() && reported.insert(root) {
            findings.push(Finding::error(
                "operation.unknown_root",
                format!("operation {op:?} names root {root:?}, which the module does not declare"),
                format!("declare a root named {root:?} in roots, or fix the operation's root name"),
            ));
        }
    }
    for binary in &semantics.runs {
        if !descriptor.binaries.iter().any(|b| &b.name == binary) {
            findings.push(Finding::error(
                "operation.unknown_binary",
                format!(
                    "operation {op:?} runs binary {binary:?}, which the module does not declare"
                ),
                format!("declare a binary named {binary:?} in binaries, or fix the operation"),
            ));
        }
    }
}

/// The host's no-weakening verdict on one accepted v2 module. The host
/// registers none of the module's capabilities unless it [`ConformanceReport::conforms`].
pub fn check_host_conformance(accepted: &V2Accepted) -> ConformanceReport {
    ConformanceReport::new(
        accepted.descriptor().id.clone(),
        check_no_weakening(accepted),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use modproto::contract::{ContractDecision, evaluate};
    use serde_json::{Value, json};
    use std::sync::Arc;

    /// A faithful v2 module: every operation is covered by its capability.
    fn good() -> Value {
        json!({
            "id": "sessions", "version": "0.3.1", "contract_version": "2.0.0",
            "roots": [
                {"name": "transcripts", "kind": "source"},
                {"name": "artifacts", "kind": "artifacts"},
                {"name": "state", "kind": "state"}
            ],
            "binaries": [{"name": "git"}],
            "capabilities": [{
                "id": "sessions.assay", "description": "assay a session",
                "input_schema": {"type": "object"},
                "effects": {"reads": ["transcripts"], "writes": ["artifacts", "state"],
                            "network": true, "spawns": ["git"], "approval": true,
                            "secrets": ["SESSIONS_TOKEN"]}
            }],
            "operations": [{
                "id": "assay", "capability": "sessions.assay",
                "semantics": {"reads": ["transcripts", "state"], "mutates": ["artifacts"],
                              "external": true, "runs": ["git"], "needs_approval": true,
                              "secrets": ["SESSIONS_TOKEN"]}
            }]
        })
    }

    fn accept(value: Value) -> V2Accepted {
        let descriptor: Descriptor = serde_json::from_value(value).unwrap();
        match evaluate(Arc::new(descriptor)) {
            ContractDecision::V2(accepted) => accepted,
            other => panic!("fixture not accepted as v2: {other:?}"),
        }
    }

    fn ids(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn a_faithful_projection_conforms() {
        let verdict = check_host_conformance(&accept(good()));
        assert_eq!(verdict.module, "sessions");
        assert!(verdict.findings.is_empty(), "{}", verdict.render());
        assert!(verdict.conforms());
    }

    #[test]
    fn each_weakening_is_refused_with_its_own_finding() {
        // (what the fixture changes, the finding it must produce)
        type Edit = fn(&mut Value);
        let table: &[(&str, Edit, &str)] = &[
            (
                "read root missing from reads and writes",
                |d| d["capabilities"][0]["effects"]["reads"] = json!([]),
                "weakening.read_undeclared",
            ),
            (
                "mutated root only read",
                |d| {
                    d["capabilities"][0]["effects"]["writes"] = json!(["state"]);
                    d["capabilities"][0]["effects"]["reads"] = json!(["transcripts", "artifacts"]);
                },
                "weakening.mutate_not_written",
            ),
            (
                "external without network",
                |d| d["capabilities"][0]["effects"]["network"] = json!(false),
                "weakening.external_without_network",
            ),
            (
                "binary run but not spawned",
                |d| d["capabilities"][0]["effects"]["spawns"] = json!([]),
                "weakening.run_not_spawned",
            ),
            (
                "untrusted output declared trusted",
                |d| d["capabilities"][0]["effects"]["untrusted_output"] = json!(false),
                "weakening.untrusted_output_declared_trusted",
            ),
            (
                "approval needed but not required",
                |d| d["capabilities"][0]["effects"]["approval"] = json!(false),
                "weakening.approval_not_required",
            ),
            (
                "secret used but not declared",
                |d| d["capabilities"][0]["effects"]["secrets"] = json!([]),
                "weakening.secret_undeclared",
            ),
            (
                "operation names a malformed secret",
                |d| {
                    d["operations"][0]["semantics"]["secrets"] = json!(["sessions-token"]);
                    d["capabilities"][0]["effects"]["secrets"] = json!(["sessions-token"]);
                },
                "secrets.malformed_name",
            ),
            (
                "operation names a missing capability",
                |d| d["operations"][0]["capability"] = json!("sessions.nope"),
                "operation.unknown_capability",
            ),
            (
                "duplicate operation id",
                |d| {
                    let op = d["operations"][0].clone();
                    d["operations"].as_array_mut().unwrap().push(op);
                },
                "operation.duplicate_id",
            ),
            (
                "operation names an undeclared root",
                |d| {
                    d["operations"][0]["semantics"]["reads"] = json!(["transcripts", "ghost"]);
                    d["capabilities"][0]["effects"]["reads"] = json!(["transcripts", "ghost"]);
                },
                "operation.unknown_root",
            ),
            (
                "operation runs an undeclared binary",
                |d| {
                    d["operations"][0]["semantics"]["runs"] = json!(["curl"]);
                    d["capabilities"][0]["effects"]["spawns"] = json!(["curl"]);
                },
                "operation.unknown_binary",
            ),
        ];
        for (what, edit, expected) in table {
            let mut fixture = good();
            edit(&mut fixture);
            let verdict = check_host_conformance(&accept(fixture));
            assert_eq!(
                ids(&verdict.findings),
                vec![*expected],
                "{what}: {}",
                verdict.render()
            );
            assert!(!verdict.conforms(), "{what}");
            let finding = &verdict.findings[0];
            assert!(
                !finding.reason.is_empty() && !finding.remedy.is_empty(),
                "{what}"
            );
            assert!(verdict.refusal().contains(expected), "{what}");
        }
    }

    #[test]
    fn every_weakening_is_reported_at_once() {
        let mut fixture = good();
        fixture["capabilities"][0]["effects"] = json!({});
        let findings = check_no_weakening(&accept(fixture));
        let mut found = ids(&findings);
        found.sort_unstable();
        assert_eq!(
            found,
            vec![
                "weakening.approval_not_required",
                "weakening.external_without_network",
                "weakening.mutate_not_written",
                "weakening.read_undeclared",
                "weakening.read_undeclared",
                "weakening.run_not_spawned",
                "weakening.secret_undeclared",
            ]
        );
        assert!(
            findings
                .iter()
                .all(|f| f.capability.as_deref() == Some("sessions.assay"))
        );
    }

    /// `good()` with the capability's `effects.network` and the operation's
    /// `semantics.external` replaced.
    fn with_network(network: Value, external: Value) -> Vec<Finding> {
        let mut fixture = good();
        fixture["capabilities"][0]["effects"]["network"] = network;
        fixture["operations"][0]["semantics"]["external"] = external;
        check_no_weakening(&accept(fixture))
    }

    #[test]
    fn a_host_list_covers_the_hosts_an_operation_reaches_by_name_or_wildcard() {
        for (network, external) in [
            (json!(["*.example.org:443"]), json!(["a.example.org:443"])),
            (
                json!(["*.example.org"]),
                json!(["a.b.example.org", "*.c.example.org:443"]),
            ),
            (json!(["api.github.com:443"]), json!(["API.GitHub.com."])),
            (json!(["api.github.com:443"]), json!(false)),
            (json!(["api.github.com:443"]), json!([])),
            (json!(false), json!(false)),
        ] {
            let findings = with_network(network.clone(), external.clone());
            assert!(findings.is_empty(), "{network} / {external}: {findings:#?}");
        }
    }

    #[test]
    fn any_public_host_is_wider_than_every_host_list() {
        for network in [
            json!(["*.example.org:443", "api.github.com"]),
            json!([]),
            json!(false),
        ] {
            let findings = with_network(network.clone(), json!(true));
            assert_eq!(
                ids(&findings),
                vec!["weakening.external_without_network"],
                "{network}"
            );
            let f = &findings[0];
            assert!(f.reason.contains("reaches any public host"), "{}", f.reason);
            assert!(
                f.remedy.contains("set effects.network to true"),
                "{}",
                f.remedy
            );
            assert_eq!(f.capability.as_deref(), Some("sessions.assay"));
        }
    }

    #[test]
    fn a_capability_declaring_true_covers_every_operation() {
        for external in [
            json!(true),
            json!(false),
            json!(["a.example.org:443", "198.51.100.7:80"]),
        ] {
            let findings = with_network(json!(true), external.clone());
            assert!(findings.is_empty(), "{external}: {findings:#?}");
        }
    }

    #[test]
    fn a_host_outside_the_capability_s_list_is_named_in_the_finding() {
        let findings = with_network(
            json!(["*.example.org:443"]),
            json!(["a.example.org:443", "example.org", "a.example.org:80"]),
        );
        assert_eq!(ids(&findings), vec!["weakening.external_without_network"]);
        let f = &findings[0];
        // The apex and another port are not covered; the subdomain is.
        assert!(
            f.reason
                .contains("reaches example.org, a.example.org:80, but"),
            "{}",
            f.reason
        );
        assert!(f.reason.contains("*.example.org:443"), "{}", f.reason);
        assert_eq!(
            f.remedy,
            "add \"example.org\", \"a.example.org:80\" to the effects.network of capability \"sessions.assay\""
        );

        let findings = with_network(json!(false), json!(["a.example.org:443"]));
        assert_eq!(ids(&findings), vec!["weakening.external_without_network"]);
        assert!(
            findings[0].reason.contains("effects.network is none"),
            "{}",
            findings[0].reason
        );
        assert!(
            findings[0]
                .remedy
                .contains("declare \"network\": [\"a.example.org:443\"]"),
            "{}",
            findings[0].remedy
        );
    }

    #[test]
    fn a_malformed_external_entry_is_its_own_error_not_a_weakening() {
        let findings = with_network(
            json!(["*.example.org:443"]),
            json!(["https://a.example.org/x", "b.example.org"]),
        );
        assert_eq!(
            ids(&findings),
            vec!["network.malformed_host"],
            "{findings:#?}"
        );
        let f = &findings[0];
        assert!(f.is_error());
        assert!(
            f.reason
                .contains("semantics.external of operation \"assay\""),
            "{}",
            f.reason
        );
        assert!(
            f.remedy.starts_with("write \"a.example.org:443\""),
            "{}",
            f.remedy
        );
        assert_eq!(f.capability.as_deref(), Some("sessions.assay"));
        assert!(
            !check_host_conformance(&accept({
                let mut d = good();
                d["operations"][0]["semantics"]["external"] = json!(["*.org"]);
                d
            }))
            .conforms()
        );
    }

    /// The attack: a fetching capability that declares its output trusted
    /// so that what it fetches never locks an agent down. Its operation
    /// reaches the network (or says its output is untrusted), so that is a
    /// weakening; where neither says so, `false` is the capability's own
    /// business.
    #[test]
    fn declaring_trusted_output_where_the_operation_s_is_untrusted_is_a_weakening() {
        let verdict = |effects: Value, semantics: Value| {
            let mut d = good();
            d["capabilities"][0]["effects"] = effects;
            d["operations"][0]["semantics"] = semantics;
            check_no_weakening(&accept(d))
        };
        for (effects, semantics, why) in [
            (
                json!({"network": true, "untrusted_output": false}),
                json!({"external": true}),
                "reaches outside the machine",
            ),
            (
                json!({"network": ["a.example.org"], "untrusted_output": false}),
                json!({"external": ["a.example.org"]}),
                "reaches outside the machine",
            ),
            (
                json!({}),
                json!({"untrusted_output": true}),
                "declares untrusted output",
            ),
            (
                json!({"untrusted_output": false}),
                json!({"untrusted_output": true}),
                "declares untrusted output",
            ),
        ] {
            let findings = verdict(effects.clone(), semantics.clone());
            assert_eq!(
                ids(&findings),
                vec!["weakening.untrusted_output_declared_trusted"],
                "{effects} / {semantics}: {findings:#?}"
            );
            assert!(findings[0].reason.contains(why), "{}", findings[0].reason);
            assert_eq!(findings[0].capability.as_deref(), Some("sessions.assay"));
        }
        for (effects, semantics) in [
            (json!({"network": true}), json!({"external": true})),
            (
                json!({"untrusted_output": true}),
                json!({"untrusted_output": true}),
            ),
            (
                json!({"network": true, "untrusted_output": false}),
                json!({"external": false}),
            ),
            (
                json!({"network": true, "untrusted_output": false}),
                json!({"external": true, "untrusted_output": false}),
            ),
            (json!({"untrusted_output": true}), json!({})),
        ] {
            let findings = verdict(effects.clone(), semantics.clone());
            assert!(
                findings.is_empty(),
                "{effects} / {semantics}: {findings:#?}"
            );
        }
    }

    #[test]
    fn verdicts_are_per_module() {
        let good_verdict = check_host_conformance(&accept(good()));
        let mut bad = good();
        bad["id"] = json!("other");
        bad["capabilities"][0]["effects"]["network"] = json!(false);
        let bad_verdict = check_host_conformance(&accept(bad));
        assert!(good_verdict.conforms());
        assert!(!bad_verdict.conforms());
        assert_eq!(bad_verdict.module, "other");
    }
}
