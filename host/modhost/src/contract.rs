//! The contract standing of one discovered module: which contract governs it,
//! and, for contract 2, whether its capabilities honour its operations.
//!
//! Design decisions:
//!
//! - **Decided at discovery, before any capability is registered.** The pin
//!   ([`modproto::contract::evaluate`]) runs on every descriptor; a contract-2
//!   module then gets the no-weakening verdict
//!   ([`modconform::check_host_conformance`]). Either refusal makes the module
//!   `broken` with its own error kind (`contract_refused` for a version the
//!   host does not speak, `nonconforming` for capabilities that weaken their
//!   operations), so nothing downstream (tools, MCP, invoke) ever sees its
//!   capabilities as callable. The descriptor is kept so `describe` can
//!   explain the refusal.
//! - **Four standings, always distinguishable**: `v1` (no v2 declaration),
//!   `v2` (declared and honoured), `refused` (declared something this host
//!   refuses: an unknown contract or a weakening projection) and
//!   `unevaluated` (no descriptor could be obtained, so nothing was decided).
//! - **Per module.** A verdict is computed from one descriptor alone; a
//!   refused module never affects another.

use std::sync::Arc;

use modconform::{ConformanceReport, Finding, check_host_conformance};
use modproto::contract::{self, ContractDecision, Pin, V2Accepted};
use modproto::{Descriptor, HostErrorKind};
use serde::Serialize;

use crate::module_error::ModuleError;

/// Which contract governs a module, and whether the host accepts it.
#[derive(Debug, Clone)]
pub enum ContractStanding {
    /// No descriptor could be obtained: nothing was decided.
    Unevaluated,
    /// Contract 1: no operations, nothing to check them against.
    V1(Pin),
    /// Contract 2, operations binding and honoured. The verdict has no
    /// error (it may carry warnings).
    V2 {
        accepted: V2Accepted,
        verdict: ConformanceReport,
    },
    /// The pin refused the declared contract version.
    VersionRefused(Pin),
    /// Contract 2 accepted, but a capability weakens an operation.
    Nonconforming {
        accepted: V2Accepted,
        verdict: ConformanceReport,
    },
}

/// Decide the standing of `descriptor`.
pub(crate) fn assess(descriptor: Arc<Descriptor>) -> ContractStanding {
    match contract::evaluate(descriptor) {
        ContractDecision::V1(pin) => ContractStanding::V1(pin),
        ContractDecision::Refused(pin) => ContractStanding::VersionRefused(pin),
        ContractDecision::V2(accepted) => {
            let verdict = check_host_conformance(&accepted);
            if verdict.conforms() {
                ContractStanding::V2 { accepted, verdict }
            } else {
                ContractStanding::Nonconforming { accepted, verdict }
            }
        }
    }
}

impl ContractStanding {
    /// `v1`, `v2`, `refused` or `unevaluated`, as `list --json` spells it.
    pub fn label(&self) -> &'static str {
        match self {
            ContractStanding::Unevaluated => "unevaluated",
            ContractStanding::V1(_) => "v1",
            ContractStanding::V2 { .. } => "v2",
            ContractStanding::VersionRefused(_) | ContractStanding::Nonconforming { .. } => {
                "refused"
            }
        }
    }

    /// The contract version the host speaks to the module (`"1.0"`, `"2.0"`);
    /// `None` when it may not be spoken to at all.
    pub fn effective(&self) -> Option<&str> {
        match self {
            ContractStanding::V1(pin) => pin.effective.as_deref(),
            ContractStanding::V2 { accepted, .. } => accepted.pin().effective.as_deref(),
            _ => None,
        }
    }

    /// The accepted contract-2 declarations, only when they are honoured.
    /// No host code reads them yet (only the tests, which hold that a
    /// refused standing yields none).
    #[cfg(test)]
    pub fn accepted(&self) -> Option<&V2Accepted> {
        match self {
            ContractStanding::V2 { accepted, .. } => Some(accepted),
            _ => None,
        }
    }

    /// The host's error for a refused module; `None` when accepted or
    /// unevaluated.
    pub fn refusal(&self) -> Option<ModuleError> {
        match self {
            ContractStanding::VersionRefused(pin) => Some(ModuleError {
                kind: HostErrorKind::ContractRefused.into(),
                message: format!(
                    "refused by the contract pin: {}; remedy: {}",
                    pin.reason, pin.remedy
                ),
            }),
            ContractStanding::Nonconforming { verdict, .. } => Some(ModuleError {
                kind: HostErrorKind::Nonconforming.into(),
                message: format!(
                    "refused: {}; no capability was registered",
                    refusal_cause(verdict)
                ),
            }),
            _ => None,
        }
    }

    /// The serializable explanation `list --json` and `describe` show.
    pub fn report(&self) -> ContractReport {
        let supported = contract::supported_ranges();
        let from_pin = |pin: &Pin| ContractReport {
            contract: self.label(),
            requested: pin.requested.clone(),
            effective: pin.effective.clone(),
            supported: pin.supported.clone(),
            reason: pin.reason.clone(),
            remedy: pin.remedy.clone(),
            refusal: None,
            findings: Vec::new(),
        };
        match self {
            ContractStanding::Unevaluated => ContractReport {
                contract: self.label(),
                requested: None,
                effective: None,
                supported,
                reason: "the module did not describe itself, so its contract was not evaluated"
                    .into(),
                remedy: "fix the error that keeps it from describing itself (see `error`)".into(),
                refusal: None,
                findings: Vec::new(),
            },
            ContractStanding::V1(pin) => from_pin(pin),
            ContractStanding::VersionRefused(pin) => ContractReport {
                refusal: Some(HostErrorKind::ContractRefused),
                ..from_pin(pin)
            },
            ContractStanding::V2 { accepted, verdict } => {
                let mut report = from_pin(accepted.pin());
                report.reason = format!(
                    "{}; every capability declares at least the effects of its operations",
                    report.reason
                );
                report.findings = verdict.findings.clone();
                report
            }
            ContractStanding::Nonconforming { accepted, verdict } => {
                let mut report = from_pin(accepted.pin());
                report.reason = format!("{}, but {}", report.reason, refusal_cause(verdict));
                report.remedy = "the module author must fix every finding (each has its own remedy) and ship a new build; until then the host registers none of its capabilities".into();
                report.refusal = Some(HostErrorKind::Nonconforming);
                report.findings = verdict.findings.clone();
                report
            }
        }
    }
}

/// Why a contract-2 module was refused, by the kind of its findings: a
/// capability weaker than its operation (`weakening.*`) is a weakening;
/// an operation that is itself wrong (`operation.*`: a duplicate id, an
/// unknown capability, root or binary) is named as such, never as a
/// weakening. Each finding id is listed, with the capability it concerns.
fn refusal_cause(verdict: &ConformanceReport) -> String {
    let list = |weakening: bool| {
        verdict
            .errors()
            .filter(|f| f.id.starts_with("weakening.") == weakening)
            .map(|f| match &f.capability {
                Some(cap) => format!("{} on {cap}", f.id),
                None => format!("{} ({})", f.id, f.reason),
            })
            .collect::<Vec<_>>()
    };
    let (weakenings, invalid) = (list(true), list(false));
    let mut causes = Vec::new();
    if !weakenings.is_empty() {
        causes.push(format!(
            "{} capability declaration(s) weaken its operations, and a capability must declare at least the effects of every operation that names it ({})",
            weakenings.len(),
            weakenings.join(", ")
        ));
    }
    if !invalid.is_empty() {
        causes.push(format!(
            "{} of its contract-2 operations are invalid ({})",
            invalid.len(),
            invalid.join(", ")
        ));
    }
    causes.join("; and ")
}

/// Which contract governs a module and whether the host accepts it, for
/// people and scripts ([`crate::ModuleSummary::contract_standing`];
/// `contract_standing` in `list --json` and `describe --json`). Fields may
/// be added, so it is built only by the host.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ContractReport {
    /// `v1`, `v2`, `refused` or `unevaluated`.
    pub contract: &'static str,
    /// The `contract_version` the descriptor declared; `None` when absent.
    pub requested: Option<String>,
    /// The version the host speaks to the module; `None` when refused.
    pub effective: Option<String>,
    /// What this host supports.
    pub supported: String,
    pub reason: String,
    /// Empty when there is nothing to do.
    pub remedy: String,
    /// `contract_refused` or `nonconforming` when refused.
    pub refusal: Option<HostErrorKind>,
    /// The no-weakening verdict of a contract-2 module, every finding.
    pub findings: Vec<Finding>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn standing(value: serde_json::Value) -> ContractStanding {
        assess(Arc::new(serde_json::from_value(value).unwrap()))
    }

    fn v2(writes: &[&str]) -> serde_json::Value {
        json!({
            "id": "m", "version": "1.0.0", "contract_version": "2.0.0",
            "roots": [{"name": "artifacts", "kind": "artifacts"}],
            "capabilities": [{"id": "m.make", "input_schema": {"type": "object"},
                              "effects": {"writes": writes}}],
            "operations": [{"id": "make", "capability": "m.make",
                            "semantics": {"mutates": ["artifacts"]}}]
        })
    }

    #[test]
    fn the_four_standings_are_distinct() {
        let v1 = standing(json!({"id": "m", "version": "1.0.0", "capabilities": []}));
        assert_eq!(v1.label(), "v1");
        assert!(v1.refusal().is_none());
        assert_eq!(v1.effective(), Some("1.0"));

        let good = standing(v2(&["artifacts"]));
        assert_eq!(good.label(), "v2");
        assert!(good.accepted().is_some() && good.refusal().is_none());

        let weak = standing(v2(&[]));
        assert_eq!(weak.label(), "refused");
        assert!(weak.accepted().is_none());
        assert_eq!(weak.refusal().unwrap().kind, HostErrorKind::Nonconforming);
        let report = weak.report();
        assert_eq!(report.refusal, Some(HostErrorKind::Nonconforming));
        assert!(report.findings.iter().any(|f| f.is_error()), "{report:?}");

        let newer = standing(
            json!({"id": "m", "version": "1.0.0", "contract_version": "2.9.0", "capabilities": []}),
        );
        assert_eq!(newer.label(), "refused");
        let error = newer.refusal().unwrap();
        assert_eq!(error.kind, HostErrorKind::ContractRefused);
        assert!(error.message.contains("2.9"), "{}", error.message);

        assert_eq!(ContractStanding::Unevaluated.label(), "unevaluated");
    }

    #[test]
    fn a_duplicate_operation_id_is_refused_as_invalid_not_as_a_weakening() {
        let mut value = v2(&["artifacts"]);
        let op = value["operations"][0].clone();
        value["operations"].as_array_mut().unwrap().push(op);
        let standing = standing(value);
        let error = standing.refusal().unwrap();
        assert_eq!(error.kind, HostErrorKind::Nonconforming);
        assert!(
            error.message.contains("operation.duplicate_id"),
            "{}",
            error.message
        );
        assert!(error.message.contains("invalid"), "{}", error.message);
        assert!(!error.message.contains("weaken"), "{}", error.message);
        assert!(
            !standing.report().reason.contains("weaken"),
            "{}",
            standing.report().reason
        );

        let weak = standing_of_weak();
        assert!(weak.refusal().unwrap().message.contains("weaken"));
    }

    fn standing_of_weak() -> ContractStanding {
        standing(v2(&[]))
    }
}
