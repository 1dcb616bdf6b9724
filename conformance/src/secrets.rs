//! Secret declarations: `effects.secrets` of a capability and
//! `semantics.secrets` of an operation (see [`modproto::secret`]).
//!
//! Design decisions:
//!
//! - **A malformed or reserved name is an error of its own**, naming the
//!   name, what is wrong and, when it is evident, the name that was meant
//!   ([`modproto::check_secret_name`]). The operator cannot grant such a
//!   name (`config.toml` refuses it), so every call of the capability would
//!   be refused; the author has to hear it here first.
//! - **A duplicate is a warning:** it grants nothing more, but a reviewer
//!   reading the list should not have to wonder why.
//! - **The report names the secrets** each capability needs
//!   ([`crate::ConformanceReport::secrets`]), so the operator reviewing a
//!   module before installing it knows which credentials it will ask for.

use std::collections::HashSet;

use modproto::{Capability, check_secret_name};

use crate::finding::Finding;

/// The findings about one capability's `effects.secrets`.
pub(crate) fn check_capability(capability: &Capability) -> Vec<Finding> {
    let cap = capability.id.as_str();
    let place = format!("the effects.secrets of capability {cap:?}");
    check_names(&place, &capability.effects.secrets)
        .into_iter()
        .map(|f| f.on(cap))
        .collect()
}

/// The findings about the secret names at `place` (an `effects.secrets` or
/// a `semantics.secrets` list): every malformed or reserved name, and each
/// duplicate.
pub(crate) fn check_names(place: &str, names: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut seen = HashSet::new();
    for name in names {
        if let Err(error) = check_secret_name(name) {
            let remedy = match &error.suggestion {
                Some(meant) => format!("write {meant:?} instead of {name:?} in {place}"),
                None => format!(
                    "name the secret as an environment variable of upper-case letters, digits and `_`, for example \"GITHUB_TOKEN\", in {place}"
                ),
            };
            findings.push(Finding::error(
                "secrets.malformed_name",
                format!("{place} holds {}", error.problem),
                remedy,
            ));
        } else if !seen.insert(name.as_str()) {
            findings.push(Finding::warning(
                "secrets.duplicate_name",
                format!("{place} names secret {name:?} more than once"),
                format!("keep one {name:?} in {place}"),
            ));
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(secrets: &serde_json::Value) -> Capability {
        serde_json::from_value(json!({
            "id": "gh.issues", "input_schema": {"type": "object"},
            "effects": {"secrets": secrets}
        }))
        .unwrap()
    }

    #[test]
    fn well_formed_names_have_no_finding() {
        assert!(check_capability(&capability(&json!(["GITHUB_TOKEN", "NPM_TOKEN"]))).is_empty());
        assert!(check_capability(&capability(&json!([]))).is_empty());
    }

    #[test]
    fn every_malformed_name_is_an_error_with_the_name_meant() {
        let findings = check_capability(&capability(&json!(["github-token", "PATH", "--"])));
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, vec!["secrets.malformed_name"; 3]);
        assert!(
            findings[0].remedy.contains("\"GITHUB_TOKEN\""),
            "{}",
            findings[0]
        );
        assert!(findings[1].reason.contains("sets"), "{}", findings[1]);
        assert!(
            findings[1].remedy.contains("SECRET_PATH"),
            "{}",
            findings[1]
        );
        assert!(
            findings[2].remedy.contains("for example"),
            "{}",
            findings[2]
        );
        assert!(
            findings
                .iter()
                .all(|f| f.capability.as_deref() == Some("gh.issues"))
        );
    }

    #[test]
    fn a_duplicate_is_a_warning() {
        let findings = check_capability(&capability(&json!(["TOKEN", "TOKEN"])));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, "secrets.duplicate_name");
        assert_eq!(findings[0].severity, crate::Severity::Warning);
    }
}
