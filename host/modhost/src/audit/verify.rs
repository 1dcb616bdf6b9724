//! `modhost audit verify`: does the log hold exactly what its writers
//! wrote?
//!
//! Every line of every file, oldest first, must be a record whose `seq` is
//! one more than the line before it and whose `prev` is the SHA-256 of that
//! line; the last one must be the record the head names. The first line
//! that breaks this is named (file and line) with what is wrong:
//!
//! - a record **changed**: the next record chained from another hash (or,
//!   for the last one, the head holds another);
//! - records **removed**: a gap in `seq`, or a head naming records past
//!   the end;
//! - records **reordered or copied**: a `seq` lower than expected;
//! - a **torn tail**: the current file ends in bytes without a newline, what
//!   a writer stopped in the middle of a record leaves. It is reported as
//!   such, not as tampering: the next writer cuts it off and records that.
//!
//! A chain that is whole can still say the log is not
//! ([`Verdict::Flagged`]): a `repair` record of a writer that found what
//! no crash leaves (records the head named gone, a last record that is not
//! the head's, the head gone), or a `gap` record counting records the host
//! could not write. Such a record stays in the chain, so a log once
//! tampered with (or short of records) is reported so for good; a repair
//! a crash explains is only a note.
//!
//! What it cannot see: someone who can write the files can rewrite the
//! whole chain from a record on, head included, and make a log that
//! verifies; and one forged record appended after the head's, chained
//! from it, is what a writer stopped between a record and the head
//! leaves. The chain makes tampering evident, not impossible; a copy of
//! the records kept elsewhere (`[audit] copy_to`, a collector) is the
//! anchor that rules it out.
//!
//! Writers wait only a moment: the head's lock (shared) is held while the
//! head is read, the files listed and `audit.jsonl` opened and measured;
//! the walk then reads that snapshot (rotated files never change, the
//! current one is read up to its size then) while writers go on.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};

use rustix::fs::FlockOperation;
use serde::Serialize;

use super::files::{self, AuditError, LogFile};
use super::head::{Head, Unwritten};
use super::record::{self, AuditRecord, Event, GENESIS};
use crate::home::HomeLayout;

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verification {
    pub verdict: Verdict,
    /// Whole records read before the verdict (all of them when intact).
    pub records: u64,
    /// The files read, oldest first.
    pub files: Vec<String>,
    /// Records in the chain that say the log is not whole: repairs no
    /// crash explains, and gaps (records that could not be written).
    pub flagged: Vec<Flagged>,
    /// What a writer repaired after a crash (each such `repair` record),
    /// and a last record the head does not name yet: worth knowing, not
    /// tampering.
    pub notes: Vec<String>,
}

impl Verification {
    /// Whether every record is there as written, in order, with nothing torn.
    pub fn is_intact(&self) -> bool {
        self.verdict == Verdict::Intact
    }
}

/// A record that says the log is not whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flagged {
    pub file: String,
    pub line: u64,
    pub seq: u64,
    pub problem: String,
}

/// The log as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// Every record is there as written, in order.
    Intact,
    /// The current file ends in a line without its newline: a writer
    /// stopped in the middle of a record (the records before it are
    /// intact; the next writer cuts it off).
    TornTail { file: String, line: u64, bytes: u64 },
    /// The first record that is not as written, and what is wrong.
    Tampered {
        file: String,
        line: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        problem: String,
    },
    /// The chain is whole, but a record in it (the first of
    /// [`Verification::flagged`]) says records were lost, changed or never
    /// written.
    Flagged {
        file: String,
        line: u64,
        seq: u64,
        problem: String,
    },
}

/// A line's place, for a report.
#[derive(Debug, Clone)]
struct At {
    file: String,
    line: u64,
    seq: u64,
}

/// The log as it was at one moment, read under the head's lock.
struct Snapshot {
    head: Option<Head>,
    /// Records writers could not write, noted in the head for the next
    /// record to say.
    unwritten: Option<Unwritten>,
    /// Each file, oldest first, with how many of its bytes to read
    /// (`None`: all; rotated files no longer change).
    files: Vec<(LogFile, File, Option<u64>)>,
}

impl Snapshot {
    fn take(layout: &HomeLayout) -> Result<Snapshot, AuditError> {
        let head_path = layout.audit_head_path();
        let head_file = match File::open(&head_path) {
            Ok(file) => Some(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(AuditError::io("open", head_path, e)),
        };
        if let Some(file) = &head_file {
            loop {
                match rustix::fs::flock(file, FlockOperation::LockShared) {
                    Ok(()) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(AuditError::io("lock", &head_path, e.into())),
                }
            }
        }
        let head = match &head_file {
            Some(file) => Head::read(file).map_err(|e| AuditError::io("read", &head_path, e))?,
            None => None,
        };
        let unwritten = head_file.as_ref().and_then(Unwritten::read);
        let mut files = Vec::new();
        for file in files::all(layout)? {
            let open = File::open(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
            let limit = match file.rotated {
                Some(_) => None,
                None => Some(
                    open.metadata()
                        .map_err(|e| AuditError::io("read", &file.path, e))?
                        .len(),
                ),
            };
            files.push((file, open, limit));
        }
        // Dropping the file releases the lock: writers go on.
        drop(head_file);
        Ok(Snapshot {
            head,
            unwritten,
            files,
        })
    }
}

/// Check the log of the home at `layout`.
pub fn verify(layout: &HomeLayout) -> Result<Verification, AuditError> {
    walk(Snapshot::take(layout)?)
}

/// Check the log as `snapshot` saw it.
fn walk(snapshot: Snapshot) -> Result<Verification, AuditError> {
    let count = snapshot.files.len();
    let mut check = Check {
        files: snapshot.files.iter().map(|(f, _, _)| f.name()).collect(),
        ..Check::default()
    };
    let mut torn = None;
    let mut line = Vec::new();
    for (index, (file, open, limit)) in snapshot.files.into_iter().enumerate() {
        let name = file.name();
        let source: Box<dyn Read> = match limit {
            Some(limit) => Box::new(open.take(limit)),
            None => Box::new(open),
        };
        let mut reader = BufReader::with_capacity(1 << 16, source);
        let mut number = 0;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| AuditError::io("read", &file.path, e))?;
            if read == 0 {
                break;
            }
            number += 1;
            if line.last() != Some(&b'\n') {
                let bytes = line.len() as u64;
                let current = file.rotated.is_none() && index + 1 == count;
                if current {
                    torn = Some(Verdict::TornTail {
                        file: name.clone(),
                        line: number,
                        bytes,
                    });
                } else {
                    return Ok(check.tampered(
                        &name,
                        number,
                        None,
                        format!("{bytes} bytes without a newline end a rotated file, which no writer leaves"),
                    ));
                }
                break;
            }
            line.pop();
            if let Some(verdict) = check.line(&name, number, &line) {
                return Ok(verdict);
            }
        }
    }
    if let Some(missing) = snapshot.unwritten {
        check.flagged.push(Flagged {
            file: "head".into(),
            line: 2,
            seq: snapshot.head.as_ref().map_or(0, |h| h.seq),
            problem: format!(
                "{} records could not be written since {} (the last because: {}); the next record written says so",
                missing.records, missing.since, missing.error
            ),
        });
    }
    Ok(check.end(snapshot.head, torn))
}

/// The walk along the chain.
#[derive(Debug)]
struct Check {
    files: Vec<String>,
    records: u64,
    flagged: Vec<Flagged>,
    notes: Vec<String>,
    /// The hash the next record must chain from.
    prev: String,
    /// The last record read, and the one before it (with its hash).
    last: Option<At>,
    before_last: Option<(At, String)>,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            files: Vec::new(),
            records: 0,
            flagged: Vec::new(),
            notes: Vec::new(),
            prev: GENESIS.to_owned(),
            last: None,
            before_last: None,
        }
    }
}

impl Check {
    fn verification(&self, verdict: Verdict) -> Verification {
        Verification {
            verdict,
            records: self.records,
            files: self.files.clone(),
            flagged: self.flagged.clone(),
            notes: self.notes.clone(),
        }
    }

    fn tampered(&self, file: &str, line: u64, seq: Option<u64>, problem: String) -> Verification {
        self.verification(Verdict::Tampered {
            file: file.to_owned(),
            line,
            seq,
            problem,
        })
    }

    /// Check one whole line; the verdict when it breaks the chain.
    fn line(&mut self, file: &str, number: u64, line: &[u8]) -> Option<Verification> {
        let record: AuditRecord = match serde_json::from_slice(line) {
            Ok(record) => record,
            Err(e) => {
                return Some(self.tampered(file, number, None, format!("not a record ({e})")));
            }
        };
        let expected = self.last.as_ref().map_or(1, |at| at.seq.saturating_add(1));
        if record.seq > expected {
            let missing = if record.seq == expected + 1 {
                format!("record {expected} is")
            } else {
                format!("records {expected} to {} are", record.seq - 1)
            };
            return Some(self.tampered(
                file,
                number,
                Some(record.seq),
                format!("{missing} missing before it (removed)"),
            ));
        }
        if record.seq < expected {
            return Some(self.tampered(
                file,
                number,
                Some(record.seq),
                format!(
                    "record {} where record {expected} belongs: records were reordered or copied",
                    record.seq
                ),
            ));
        }
        if record.prev != self.prev {
            return Some(match &self.last {
                Some(at) => self.tampered(
                    &at.file,
                    at.line,
                    Some(at.seq),
                    format!(
                        "record {} was changed: the record after it ({file} line {number}) chained from another hash (or its own `prev` was changed)",
                        at.seq
                    ),
                ),
                None => self.tampered(
                    file,
                    number,
                    Some(record.seq),
                    "the first record does not chain from the genesis value".into(),
                ),
            });
        }
        self.judge(file, number, &record);
        let at = At {
            file: file.to_owned(),
            line: number,
            seq: record.seq,
        };
        let hash = record::sha256_hex(line);
        self.before_last = self.last.take().map(|last| (last, self.prev.clone()));
        self.prev = hash;
        self.last = Some(at);
        self.records += 1;
        None
    }

    /// Note a repair a crash explains; flag one nothing explains, and a
    /// gap.
    fn judge(&mut self, file: &str, number: u64, record: &AuditRecord) {
        let flag = |problem: String| Flagged {
            file: file.to_owned(),
            line: number,
            seq: record.seq,
            problem,
        };
        match (record.entry.event, &record.entry.repair, &record.entry.gap) {
            (Event::Repair, Some(repair), _) if repair.after_crash() => {
                self.notes.push(format!(
                    "record {} ({file} line {number}) is a repair after a crash: {}",
                    record.seq, repair.reason
                ));
            }
            (Event::Repair, repair, _) => {
                let reason = repair
                    .as_ref()
                    .map_or("it does not say what it repaired", |r| r.reason.as_str());
                let lost = match repair {
                    Some(r) => match (r.head_seq, &r.head_hash) {
                        (Some(seq), Some(hash)) => {
                            format!(" (the head then named record {seq}, hash {hash})")
                        }
                        (Some(seq), None) => format!(" (the head then named record {seq})"),
                        _ => String::new(),
                    },
                    None => String::new(),
                };
                self.flagged.push(flag(format!(
                    "record {} is a repair no crash explains: {reason}{lost}",
                    record.seq
                )));
            }
            (Event::Gap, _, gap) => {
                let what = gap.as_ref().map_or_else(
                    || "records could not be written".to_owned(),
                    |g| {
                        format!(
                            "{} records could not be written since {} (the last because: {})",
                            g.records, g.since, g.error
                        )
                    },
                );
                self.flagged.push(flag(format!(
                    "record {} says records are missing before it: {what}",
                    record.seq
                )));
            }
            _ => {}
        }
    }

    /// The end of the log against its head; `torn`, a torn tail found.
    fn end(mut self, head: Option<Head>, torn: Option<Verdict>) -> Verification {
        let verification = self.end_of_chain(head, torn);
        match (&verification.verdict, verification.flagged.first()) {
            (Verdict::Intact | Verdict::TornTail { .. }, Some(first)) => Verification {
                verdict: Verdict::Flagged {
                    file: first.file.clone(),
                    line: first.line,
                    seq: first.seq,
                    problem: first.problem.clone(),
                },
                ..verification
            },
            _ => verification,
        }
    }

    fn end_of_chain(&mut self, head: Option<Head>, torn: Option<Verdict>) -> Verification {
        let Some(last) = self.last.clone() else {
            return match (head, torn) {
                (_, Some(torn)) => self.verification(torn),
                (Some(head), None) if head.seq > 0 => self.tampered(
                    "audit.jsonl",
                    1,
                    None,
                    format!(
                        "the log has no record, but its head names record {}: every record was removed",
                        head.seq
                    ),
                ),
                _ => self.verification(Verdict::Intact),
            };
        };
        let Some(head) = head else {
            return self.tampered(
                "head",
                1,
                None,
                "the head is missing or unreadable, so records removed from the end cannot be ruled out; the next record a host writes rebuilds it (and says so)".into(),
            );
        };
        if head.seq == last.seq && head.hash == self.prev {
            return self.verification(torn.unwrap_or(Verdict::Intact));
        }
        if head.seq == last.seq {
            return self.tampered(
                &last.file,
                last.line,
                Some(last.seq),
                format!(
                    "record {} was changed: the head holds another hash for it",
                    last.seq
                ),
            );
        }
        if head.seq > last.seq {
            let missing = if head.seq == last.seq.saturating_add(1) {
                format!("record {} is", head.seq)
            } else {
                format!("records {} to {} are", last.seq.saturating_add(1), head.seq)
            };
            return self.tampered(
                &last.file,
                last.line + 1,
                None,
                format!(
                    "{missing} missing at the end (removed): the head names record {}",
                    head.seq
                ),
            );
        }
        if let Some((before, hash)) = &self.before_last
            && head.seq == before.seq
            && head.hash == *hash
        {
            self.notes.push(format!(
                "record {} ({} line {}) is not in the head yet: a writer stopped between the record and the head, or is writing now; the next record repairs the head",
                last.seq, last.file, last.line
            ));
            return self.verification(torn.unwrap_or(Verdict::Intact));
        }
        self.tampered(
            &last.file,
            last.line,
            Some(last.seq),
            format!(
                "the head names record {} but the log goes on to record {}: records were added that no writer recorded in the head, or the head was replaced",
                head.seq, last.seq
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{Entry, Event};
    use crate::audit::settings::AuditConfig;
    use crate::audit::writer::AuditLog;

    fn home_with(records: usize, max_file_bytes: u64) -> (tempfile::TempDir, HomeLayout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let log = AuditLog::new(&layout);
        let config = AuditConfig {
            max_file_bytes,
            ..AuditConfig::default()
        };
        for i in 0..records {
            let mut entry = Entry::now(Event::Call);
            entry.tool = Some(format!("tool{i}"));
            log.append(&config, &entry).unwrap();
        }
        (dir, layout)
    }

    fn lines(path: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn write_lines(path: &std::path::Path, lines: &[String]) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(path, text).unwrap();
    }

    fn tampered_at(verification: &Verification) -> (String, u64, String) {
        match &verification.verdict {
            Verdict::Tampered {
                file,
                line,
                problem,
                ..
            } => (file.clone(), *line, problem.clone()),
            other => panic!("not tampered: {other:?}"),
        }
    }

    #[test]
    fn an_empty_or_whole_log_is_intact() {
        let (_dir, layout) = home_with(0, 1 << 20);
        let empty = verify(&layout).unwrap();
        assert!(empty.is_intact(), "{empty:?}");
        assert_eq!(empty.records, 0);
        let (_dir, layout) = home_with(60, 4096);
        let whole = verify(&layout).unwrap();
        assert!(whole.is_intact(), "{whole:?}");
        assert_eq!(whole.records, 60);
        assert!(whole.files.len() > 2, "rotated: {:?}", whole.files);
    }

    #[test]
    fn every_edit_deletion_and_swap_is_named_at_its_first_bad_record() {
        let (_dir, layout) = home_with(10, 1 << 20);
        let path = layout.audit_log_path();
        let original = lines(&path);
        for i in 0..original.len() {
            let mut edited = original.clone();
            edited[i] = edited[i].replace("\"tool\":\"tool", "\"tool\":\"TOOL");
            write_lines(&path, &edited);
            let (file, line, problem) = tampered_at(&verify(&layout).unwrap());
            assert_eq!(
                (file.as_str(), line),
                ("audit.jsonl", i as u64 + 1),
                "{problem}"
            );
            assert!(problem.contains("changed"), "{problem}");

            let mut deleted = original.clone();
            deleted.remove(i);
            write_lines(&path, &deleted);
            let (_, line, problem) = tampered_at(&verify(&layout).unwrap());
            assert_eq!(line, i as u64 + 1, "deleting line {}: {problem}", i + 1);
            assert!(problem.contains("missing"), "{problem}");
        }
        for i in 0..original.len() - 1 {
            let mut swapped = original.clone();
            swapped.swap(i, i + 1);
            write_lines(&path, &swapped);
            let (_, line, problem) = tampered_at(&verify(&layout).unwrap());
            assert_eq!(
                line,
                i as u64 + 1,
                "swapping {} and {}: {problem}",
                i + 1,
                i + 2
            );
        }
        write_lines(&path, &original);
        assert!(verify(&layout).unwrap().is_intact());
    }

    #[test]
    fn a_torn_tail_is_not_tampering_and_a_writer_repairs_it() {
        let (_dir, layout) = home_with(5, 1 << 20);
        let path = layout.audit_log_path();
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"seq\":6,\"pr");
        std::fs::write(&path, &text).unwrap();
        let found = verify(&layout).unwrap();
        assert_eq!(
            found.verdict,
            Verdict::TornTail {
                file: "audit.jsonl".into(),
                line: 6,
                bytes: 12
            }
        );
        assert_eq!(found.records, 5);
        let mut entry = Entry::now(Event::Call);
        entry.tool = Some("after".into());
        AuditLog::new(&layout)
            .append(&AuditConfig::default(), &entry)
            .unwrap();
        let repaired = verify(&layout).unwrap();
        assert!(repaired.is_intact(), "{repaired:?}");
        assert_eq!(repaired.records, 7, "the repair record and the new one");
        assert!(repaired.notes[0].contains("torn"), "{:?}", repaired.notes);
    }

    #[test]
    fn a_record_removed_or_a_head_replaced_at_the_end_is_seen() {
        let (_dir, layout) = home_with(4, 1 << 20);
        let path = layout.audit_log_path();
        let original = lines(&path);
        write_lines(&path, &original[..3]);
        let (_, line, problem) = tampered_at(&verify(&layout).unwrap());
        assert_eq!(line, 4, "{problem}");
        assert!(
            problem.contains("record 4 is missing at the end"),
            "{problem}"
        );

        std::fs::remove_file(layout.audit_head_path()).unwrap();
        write_lines(&path, &original);
        let (file, _, problem) = tampered_at(&verify(&layout).unwrap());
        assert_eq!(file, "head", "{problem}");
    }

    #[test]
    fn a_record_in_a_rotated_file_is_named_by_its_file() {
        let (_dir, layout) = home_with(100, 4096);
        let rotated = layout.rotated_audit_log_path(1);
        let original = lines(&rotated);
        let mut edited = original.clone();
        edited[2] = edited[2].replace("\"event\":\"call\"", "\"event\":\"call\" ");
        write_lines(&rotated, &edited);
        let (file, line, _) = tampered_at(&verify(&layout).unwrap());
        assert_eq!((file.as_str(), line), ("audit-1.jsonl", 3));

        // The first line of the next file, edited: named there.
        write_lines(&rotated, &original);
        let second = layout.rotated_audit_log_path(2);
        let mut edited = lines(&second);
        edited.remove(0);
        write_lines(&second, &edited);
        let (file, line, problem) = tampered_at(&verify(&layout).unwrap());
        assert_eq!((file.as_str(), line), ("audit-2.jsonl", 1), "{problem}");
    }

    /// `verify` holds the head's lock only while it takes its snapshot: a
    /// writer (a `modhost invoke` joining its writer at exit) takes it at
    /// once while the walk goes on, and what it writes meanwhile, a
    /// rotation included, is not read.
    #[test]
    fn the_lock_is_held_for_the_snapshot_only() {
        let (_dir, layout) = home_with(20, 4096);
        let snapshot = Snapshot::take(&layout).unwrap();
        let head = File::open(layout.audit_head_path()).unwrap();
        rustix::fs::flock(&head, FlockOperation::NonBlockingLockExclusive)
            .expect("a writer locks the head while the walk goes on");
        rustix::fs::flock(&head, FlockOperation::Unlock).unwrap();
        let log = AuditLog::new(&layout);
        let config = AuditConfig {
            max_file_bytes: 4096,
            ..AuditConfig::default()
        };
        let files_before = files::all(&layout).unwrap().len();
        for i in 0..20 {
            let mut entry = Entry::now(Event::Call);
            entry.tool = Some(format!("later{i}"));
            log.append(&config, &entry).unwrap();
        }
        assert!(
            files::all(&layout).unwrap().len() > files_before,
            "rotated meanwhile"
        );
        let found = walk(snapshot).unwrap();
        assert!(found.is_intact(), "{found:#?}");
        assert_eq!(found.records, 20);
        assert_eq!(verify(&layout).unwrap().records, 40);
    }
}
