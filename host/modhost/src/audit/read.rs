//! Reading the audit log back: every record, oldest first, and the
//! filters `modhost audit show` and `tail` take.
//!
//! Reading checks nothing (that is `verify`'s job): a line that is no
//! record is counted and skipped, and a torn last line is no line.
//!
//! Design decision: **one line in memory at a time.** A log is as large
//! as its rotated files together (hundreds of megabytes); `show` goes
//! through it line by line ([`each_record`]), and `tail -n N`
//! ([`last_records`]) reads the newest file backwards from its end, and
//! older ones only while fewer than N records matched.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
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
    read.unreadable = each_record(layout, |record| read.records.push(record))?;
    Ok(read)
}

/// Hand every record of the log to `each`, oldest first, holding one line
/// at a time; the number of whole lines that are no record.
pub fn each_record(
    layout: &HomeLayout,
    mut each: impl FnMut(AuditRecord),
) -> Result<usize, AuditError> {
    let mut unreadable = 0;
    let mut line = Vec::new();
    for file in files::all(layout)? {
        let open = File::open(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
        let mut reader = BufReader::with_capacity(1 << 16, open);
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| AuditError::io("read", &file.path, e))?;
            // A torn last line (no newline) is no line.
            if read == 0 || line.pop() != Some(b'\n') {
                break;
            }
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice(&line) {
                Ok(record) => each(record),
                Err(_) => unreadable += 1,
            }
        }
    }
    Ok(unreadable)
}

/// The last `count` records that `filter` matches, oldest first: the
/// files are read from the newest, each backwards from its end, until
/// `count` matched.
pub fn last_records(
    layout: &HomeLayout,
    filter: &Filter,
    count: usize,
) -> Result<Records, AuditError> {
    let mut found = Records::default();
    if count == 0 {
        return Ok(found);
    }
    for file in files::all(layout)?.iter().rev() {
        let open = File::open(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
        let done = lines_backwards(&open, |line| {
            if line.is_empty() {
                return ControlFlow::Continue(());
            }
            match serde_json::from_slice::<AuditRecord>(line) {
                Ok(record) if filter.matches(&record) => {
                    found.records.push(record);
                    if found.records.len() >= count {
                        return ControlFlow::Break(());
                    }
                }
                Ok(_) => {}
                Err(_) => found.unreadable += 1,
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| AuditError::io("read", &file.path, e))?;
        if done.is_break() {
            break;
        }
    }
    found.records.reverse();
    Ok(found)
}

/// How much of a file is read at a time, backwards.
const BACKWARDS_CHUNK: u64 = 1 << 16;

/// Hand each whole line of `file` (without its newline) to `visit`, the
/// last first, until it breaks; bytes after the last newline (a torn
/// line) are no line.
fn lines_backwards(
    file: &File,
    mut visit: impl FnMut(&[u8]) -> ControlFlow<()>,
) -> std::io::Result<ControlFlow<()>> {
    let mut position = file.metadata()?.len();
    // The start of a line whose beginning is in an earlier chunk.
    let mut carry: Vec<u8> = Vec::new();
    let mut torn = true;
    while position > 0 {
        let start = position.saturating_sub(BACKWARDS_CHUNK);
        let mut chunk = vec![0u8; (position - start) as usize];
        file.read_exact_at(&mut chunk, start)?;
        chunk.extend_from_slice(&carry);
        let mut end = chunk.len();
        for newline in (0..chunk.len()).rev().filter(|&i| chunk[i] == b'\n') {
            if torn {
                torn = false;
            } else if visit(&chunk[newline + 1..end]).is_break() {
                return Ok(ControlFlow::Break(()));
            }
            end = newline;
        }
        carry = if torn {
            Vec::new()
        } else {
            chunk[..end].to_vec()
        };
        position = start;
    }
    if torn {
        return Ok(ControlFlow::Continue(()));
    }
    Ok(visit(&carry))
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
    use std::fs::File;

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

    /// `tail -n N` reads backwards from the end: the last N matching
    /// records across rotated files, lines longer than a chunk included,
    /// a torn last line left out; the same as reading everything.
    #[test]
    fn the_last_records_read_backwards_are_the_last_of_everything() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let log = AuditLog::new(&layout);
        let config = AuditConfig {
            max_file_bytes: 200_000,
            ..AuditConfig::default()
        };
        for i in 0..40 {
            let mut entry = Entry::now(Event::Call);
            // Some lines longer than a chunk read backwards.
            entry.tool = Some(if i % 7 == 0 {
                format!("long{i}-{}", "x".repeat(100_000))
            } else {
                format!("t{i}")
            });
            entry.module = Some(if i % 2 == 0 { "even" } else { "odd" }.into());
            log.append(&config, &entry).unwrap();
        }
        let mut torn = File::options()
            .append(true)
            .open(layout.audit_log_path())
            .unwrap();
        std::io::Write::write_all(&mut torn, b"{\"seq\":41,\"torn").unwrap();
        assert!(crate::audit::files::rotated(&layout).unwrap().len() >= 2);
        let all = read(&layout).unwrap();
        assert_eq!(all.records.len(), 40);
        assert_eq!(all.unreadable, 0);
        for (filter, count) in [
            (Filter::default(), 5),
            (Filter::default(), 40),
            (Filter::default(), 100),
            (
                Filter {
                    module: Some("odd".into()),
                    ..Filter::default()
                },
                12,
            ),
        ] {
            let expected: Vec<&AuditRecord> =
                all.records.iter().filter(|r| filter.matches(r)).collect();
            let expected = &expected[expected.len().saturating_sub(count)..];
            let last = last_records(&layout, &filter, count).unwrap();
            let got: Vec<&AuditRecord> = last.records.iter().collect();
            assert_eq!(got, expected, "{filter:?} {count}");
        }
    }
}
