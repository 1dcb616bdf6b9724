//! What a check says: one [`Finding`] per problem, gathered into a [`ConformanceReport`]
//! per module.
//!
//! A finding is data, never an early return: every check in this crate
//! appends to a list and keeps going, so an author sees every defect of a
//! descriptor in one run instead of one rebuild per defect.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How serious a finding is.
///
/// `Error` means the host refuses (or would refuse) to act on the module;
/// `Warning` means it works here but is fragile (a provider may reject the
/// tool, a name gets cut).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable check id, `area.problem` (`schema.input_not_object`). Scripts
    /// and tests match on it; the wording of `reason` may change.
    pub id: String,
    pub severity: Severity,
    /// The capability the finding is about, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// What is wrong, with the values involved.
    pub reason: String,
    /// What the module author (or operator) can do about it.
    pub remedy: String,
}

impl Finding {
    pub fn error(id: &str, reason: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding::new(Severity::Error, id, reason, remedy)
    }

    pub fn warning(id: &str, reason: impl Into<String>, remedy: impl Into<String>) -> Finding {
        Finding::new(Severity::Warning, id, reason, remedy)
    }

    fn new(
        severity: Severity,
        id: &str,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Finding {
        Finding {
            id: id.to_owned(),
            severity,
            capability: None,
            reason: reason.into(),
            remedy: remedy.into(),
        }
    }

    /// The same finding, attributed to `capability`.
    pub fn on(mut self, capability: &str) -> Finding {
        self.capability = Some(capability.to_owned());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    /// `error[schema.input_not_object] files.search: reason` and the remedy
    /// on an indented second line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.severity, self.id)?;
        if let Some(capability) = &self.capability {
            write!(f, " {capability}")?;
        }
        write!(f, ": {}", self.reason)?;
        if !self.remedy.is_empty() {
            write!(f, "\n  remedy: {}", self.remedy)?;
        }
        Ok(())
    }
}

/// Whether any finding in `findings` is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_error)
}

/// The verdict on ONE module: every finding, nothing collapsed.
///
/// A type rather than an error because verdicts are per module and
/// independent: one module failing says nothing about another, and a caller
/// needs the whole list (to show it, to serialize it), not a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ConformanceReport {
    /// The module id (or, when the module could not describe itself, the
    /// label the caller knows it by).
    pub module: String,
    pub findings: Vec<Finding>,
    /// The secrets each capability needs (`effects.secrets`), by capability
    /// id: the credentials an operator is asked to grant. Names, never
    /// values; a capability that needs none is absent.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, Vec<String>>,
}

impl ConformanceReport {
    pub fn new(module: impl Into<String>, findings: Vec<Finding>) -> ConformanceReport {
        ConformanceReport {
            module: module.into(),
            findings,
            secrets: Default::default(),
        }
    }

    /// The report, naming the secrets each capability of `descriptor` needs.
    pub fn naming_secrets(mut self, descriptor: &modproto::Descriptor) -> ConformanceReport {
        self.secrets = descriptor
            .capabilities
            .iter()
            .filter(|c| !c.effects.secrets.is_empty())
            .map(|c| (c.id.clone(), c.effects.secrets.clone()))
            .collect();
        self
    }

    pub fn has_errors(&self) -> bool {
        has_errors(&self.findings)
    }

    /// Whether the host may act on this module: no error-severity finding.
    /// Warnings do not stop a module.
    pub fn conforms(&self) -> bool {
        !self.has_errors()
    }

    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
    }

    /// The verdict for a person: a summary line, then every finding with its
    /// reason and remedy.
    pub fn render(&self) -> String {
        let errors = self.errors().count();
        let warnings = self.warnings().count();
        let mut out = if self.findings.is_empty() {
            format!("module {}: conforms, no findings", self.module)
        } else {
            format!(
                "module {}: {}, {} {}, {} {}",
                self.module,
                if errors == 0 {
                    "conforms"
                } else {
                    "does not conform"
                },
                errors,
                plural(errors, "error", "errors"),
                warnings,
                plural(warnings, "warning", "warnings"),
            )
        };
        for (capability, names) in &self.secrets {
            out.push_str(&format!(
                "\nsecrets: {capability} needs {} (each granted by the operator, never by the module)",
                names.join(", ")
            ));
        }
        for finding in &self.findings {
            out.push('\n');
            out.push_str(&finding.to_string());
        }
        out
    }

    /// Why the host refuses this module, for a person: only the errors, every
    /// one of them with reason and remedy. Empty when the module conforms.
    pub fn refusal(&self) -> String {
        let errors: Vec<&Finding> = self.errors().collect();
        if errors.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "module {} refused: {} {}",
            self.module,
            errors.len(),
            plural(errors.len(), "problem", "problems")
        );
        for finding in errors {
            out.push('\n');
            out.push_str(&finding.to_string());
        }
        out
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ConformanceReport {
        ConformanceReport::new(
            "files",
            vec![
                Finding::error(
                    "schema.input_not_object",
                    "root is an array",
                    "use an object",
                )
                .on("files.search"),
                Finding::warning("portability.remote_ref", "remote $ref", "inline it"),
                Finding::error("root.duplicate_name", "root data twice", "rename one"),
            ],
        )
    }

    #[test]
    fn severity_serializes_lowercase() {
        let json = serde_json::to_value(&sample().findings[0]).unwrap();
        assert_eq!(json["severity"], "error");
        assert_eq!(json["capability"], "files.search");
        let json = serde_json::to_value(&sample().findings[1]).unwrap();
        assert_eq!(json["severity"], "warning");
        assert!(json.get("capability").is_none());
    }

    #[test]
    fn the_report_names_the_secrets_each_capability_needs() {
        let descriptor: modproto::Descriptor = serde_json::from_value(serde_json::json!({
            "id": "gh", "version": "0.1.0",
            "capabilities": [
                {"id": "gh.issues", "input_schema": {"type": "object"},
                 "effects": {"secrets": ["GITHUB_TOKEN"]}},
                {"id": "gh.local", "input_schema": {"type": "object"}}
            ]
        }))
        .unwrap();
        let report = ConformanceReport::new("gh", Vec::new()).naming_secrets(&descriptor);
        assert_eq!(report.secrets.len(), 1);
        assert_eq!(report.secrets["gh.issues"], vec!["GITHUB_TOKEN"]);
        let text = report.render();
        assert!(
            text.contains("secrets: gh.issues needs GITHUB_TOKEN"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["secrets"]["gh.issues"][0], "GITHUB_TOKEN");
    }

    #[test]
    fn render_lists_every_finding_with_remedy() {
        let text = sample().render();
        assert!(text.starts_with("module files: does not conform, 2 errors, 1 warning"));
        for needle in [
            "error[schema.input_not_object] files.search: root is an array",
            "remedy: use an object",
            "warning[portability.remote_ref]",
            "error[root.duplicate_name]: root data twice",
            "remedy: rename one",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn refusal_lists_errors_only_and_is_empty_when_conforming() {
        let verdict = sample();
        assert!(!verdict.conforms());
        let refusal = verdict.refusal();
        assert!(refusal.contains("2 problems"));
        assert!(refusal.contains("schema.input_not_object"));
        assert!(refusal.contains("root.duplicate_name"));
        assert!(!refusal.contains("portability.remote_ref"));

        let only_warnings = ConformanceReport::new(
            "m",
            vec![Finding::warning("portability.x", "fragile", "fix")],
        );
        assert!(only_warnings.conforms());
        assert_eq!(only_warnings.refusal(), "");
    }
}
