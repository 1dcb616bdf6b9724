//! Reading the audit log back: every record, oldest first, and the
//! filters `modhost audit show` and `tail` take.
//!
//! Reading checks nothing (that is `verify`'s job): a line that is no
//! record is counted and skipped, and a torn last line is no line.

use std::time::{Duration, SystemTime};

use super::files::{self, AuditError};
use super::record::{AuditRecord, Outcome};
use crate::home::HomeLayout;

/// The records of a log, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub records: Vec<AuditRecord>,
    /// Whole lines that are not records (`modhost audit verify` names them).
    pub unreadable: usize,
}

/// Every record of the log of the home at `layout`; none when there is no
/// log yet.
pub fn read(layout: &HomeLayout) -> Result<Records, AuditError> {
    let mut read = Records::default();
    for file in files::all(layout)? {
        let content =
            std::fs::read(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
        let whole = content
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        for line in content[..whole].split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice(line) {
                Ok(record) => read.records.push(record),
                Err(_) => read.unreadable += 1,
            }
        }
    }
    Ok(read)
}

/// Which records to show; every condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The module id, exactly.
    pub module: Option<String>,
    /// The capability id (`files.search`) or the tool name
    /// (`files__files_search`), exactly.
    pub capability: Option<String>,
    pub principal: Option<String>,
    pub outcome: Option<Outcome>,
    /// Records written at or after this time.
    pub since: Option<SystemTime>,
}

impl Filter {
    pub fn matches(&self, record: &AuditRecord) -> bool {
        let entry = &record.entry;
        let equals = |wanted: &Option<String>, actual: &Option<String>| {
            wanted.as_ref().is_none_or(|w| actual.as_ref() == Some(w))
        };
        equals(&self.module, &entry.module)
            && equals(&self.principal, &entry.principal)
            && self.capability.as_ref().is_none_or(|wanted| {
                entry.capability.as_ref() == Some(wanted) || entry.tool.as_ref() == Some(wanted)
            })
            && self
                .outcome
                .is_none_or(|wanted| entry.outcome == Some(wanted))
            && self.since.is_none_or(|since| {
                humantime::parse_rfc3339_weak(&entry.time).is_ok_and(|time| time >= since)
            })
    }
}

/// `--since`: an RFC 3339 time (`2025-06-18T12:00:00Z`), or a span back
/// from `now` (`90s`, `10m`, `2h`, `3days`).
pub fn parse_since(text: &str, now: SystemTime) -> Result<SystemTime, String> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    let span: Duration = humantime::parse_duration(text).map_err(|_| {
        format!(
            "{text:?} is neither a time (2025-06-18T12:00:00Z) nor a span back from now (10m, 2h, 3days)"
        )
    })?;
    now.checked_sub(span)
        .ok_or_else(|| format!("{text:?} reaches back before the clock's start"))
}

/// `--outcome`: `ok`, `failed`, `refused` or `cancelled`.
pub fn parse_outcome(text: &str) -> Result<Outcome, String> {
    [
        Outcome::Ok,
        Outcome::Failed,
        Outcome::Refused,
        Outcome::Cancelled,
    ]
    .into_iter()
    .find(|o| o.as_str() == text)
    .ok_or_else(|| format!("{text:?} is not an outcome: ok, failed, refused or cancelled"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{Entry, Event};
    use crate::audit::settings::AuditConfig;
    use crate::audit::writer::AuditLog;

    #[test]
    fn filters_select_by_every_field_given() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let log = AuditLog::new(&layout);
        for (module, principal, outcome) in [
            ("files", "local:alice", Outcome::Ok),
            ("files", "local:bob", Outcome::Refused),
            ("git", "local:alice", Outcome::Failed),
        ] {
            let mut entry = Entry::now(Event::Call);
            entry.module = Some(module.into());
            entry.capability = Some(format!("{module}.run"));
            entry.tool = Some(format!("{module}__{module}_run"));
            entry.principal = Some(principal.into());
            entry.outcome = Some(outcome);
            log.append(&AuditConfig::default(), &entry).unwrap();
        }
        let all = read(&layout).unwrap();
        assert_eq!(all.records.len(), 3);
        let count = |filter: Filter| all.records.iter().filter(|r| filter.matches(r)).count();
        assert_eq!(count(Filter::default()), 3);
        let files = Filter {
            module: Some("files".into()),
            ..Filter::default()
        };
        assert_eq!(count(files), 2);
        let alice_files = Filter {
            capability: Some("files__files_run".into()),
            principal: Some("local:alice".into()),
            ..Filter::default()
        };
        assert_eq!(count(alice_files), 1);
        let refused = Filter {
            outcome: Some(parse_outcome("refused").unwrap()),
            ..Filter::default()
        };
        assert_eq!(count(refused), 1);
        let now = SystemTime::now();
        let recent = Filter {
            since: Some(parse_since("1h", now).unwrap()),
            ..Filter::default()
        };
        assert_eq!(count(recent), 3);
        let future = Filter {
            since: Some(now + Duration::from_secs(3600)),
            ..Filter::default()
        };
        assert_eq!(count(future), 0);
        assert!(parse_since("2025-06-18T12:00:00Z", now).is_ok());
        assert!(parse_since("yesterday-ish", now).is_err());
        assert!(parse_outcome("fine").is_err());
    }
}
