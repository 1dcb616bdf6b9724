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
//! The check takes a [`V2Accepted`], which only the contract pin can
//! produce: operations are never treated as binding before the pin ran.

use modproto::Descriptor;
use modproto::contract::V2Accepted;
use std::collections::HashSet;

use crate::finding::{ConformanceReport, Finding};

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
        if semantics.external && !effects.network {
            findings.push(
                Finding::error(
                    "weakening.external_without_network",
                    format!(
                        "operation {op:?} reaches outside the machine, but capability {cap:?} declares effects.network false"
                    ),
                    format!("set effects.network to true on capability {cap:?}"),
                )
                .on(cap),
            );
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
                            "network": true, "spawns": ["git"], "approval": true}
            }],
            "operations": [{
                "id": "assay", "capability": "sessions.assay",
                "semantics": {"reads": ["transcripts", "state"], "mutates": ["artifacts"],
                              "external": true, "runs": ["git"], "needs_approval": true}
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
                "approval needed but not required",
                |d| d["capabilities"][0]["effects"]["approval"] = json!(false),
                "weakening.approval_not_required",
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
            ]
        );
        assert!(
            findings
                .iter()
                .all(|f| f.capability.as_deref() == Some("sessions.assay"))
        );
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
