//! `[audit]` in `config.toml`: whether calls are recorded, when the log
//! rotates, and where a copy of each record goes.
//!
//! ```toml
//! [audit]
//! enabled = true                 # one record per call in <home>/audit/ (the default)
//! max_file_bytes = 16777216      # audit.jsonl is rotated before it would pass this
//! copy_to = "stderr"             # also each record here: "stderr" or an absolute file path
//! ```
//!
//! Design decisions: **on by default**, because an operator who lets agents
//! call tools must be able to answer afterwards who called what, and a log
//! switched on after the fact answers nothing. **No `stdout` copy:** stdout
//! carries `modhost mcp`'s protocol and `modhost invoke --json`'s result, and
//! a record there would corrupt both; a collector reads `stderr` or a file.

use std::path::PathBuf;

use serde::Deserialize;

/// The smallest `max_file_bytes`: below it a rotation would follow nearly
/// every record.
pub(crate) const MIN_FILE_BYTES: u64 = 4096;

/// `[audit]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Whether every call leaves a record in `<home>/audit/`.
    pub enabled: bool,
    /// `audit.jsonl` is rotated (renamed `audit-<n>.jsonl`) before a
    /// record would take it past this many bytes.
    pub max_file_bytes: u64,
    /// Where a copy of each record goes as well, for a log collector:
    /// `"stderr"`, or an absolute path of a file appended to.
    pub copy_to: Option<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            max_file_bytes: 16 * 1024 * 1024,
            copy_to: None,
        }
    }
}

/// Where the copy of each record goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CopyTo {
    Stderr,
    File(PathBuf),
}

impl AuditConfig {
    /// What is wrong with the section, one line each (empty: nothing).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_file_bytes < MIN_FILE_BYTES {
            problems.push(format!(
                "[audit] max_file_bytes = {}: at least {MIN_FILE_BYTES}",
                self.max_file_bytes
            ));
        }
        if let Some(copy) = &self.copy_to
            && let Err(why) = parse_copy_to(copy)
        {
            problems.push(format!("[audit] copy_to = {copy:?}: {why}"));
        }
        problems
    }

    /// The copy's target, when one is configured (and valid).
    pub(crate) fn copy_target(&self) -> Option<CopyTo> {
        self.copy_to.as_deref().and_then(|c| parse_copy_to(c).ok())
    }
}

fn parse_copy_to(value: &str) -> Result<CopyTo, String> {
    match value {
        "stderr" => Ok(CopyTo::Stderr),
        "stdout" => Err(
            "stdout carries `modhost mcp`'s protocol and `modhost invoke --json`'s result; write \"stderr\" or an absolute file path".into(),
        ),
        path if PathBuf::from(path).is_absolute() => Ok(CopyTo::File(PathBuf::from(path))),
        _ => Err("write \"stderr\" or an absolute file path".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_by_default_and_a_copy_goes_to_stderr_or_an_absolute_file_only() {
        let config = AuditConfig::default();
        assert!(config.enabled);
        assert!(config.problems().is_empty());
        let with = |copy: &str| AuditConfig {
            copy_to: Some(copy.into()),
            ..AuditConfig::default()
        };
        assert_eq!(with("stderr").copy_target(), Some(CopyTo::Stderr));
        assert_eq!(
            with("/var/log/modhost.jsonl").copy_target(),
            Some(CopyTo::File("/var/log/modhost.jsonl".into()))
        );
        for refused in ["stdout", "relative/file.jsonl", ""] {
            let problems = with(refused).problems();
            assert_eq!(problems.len(), 1, "{refused:?}: {problems:?}");
            assert!(problems[0].contains("[audit] copy_to"), "{problems:?}");
        }
        let tiny = AuditConfig {
            max_file_bytes: 10,
            ..AuditConfig::default()
        };
        assert!(tiny.problems()[0].contains("max_file_bytes"));
    }
}
