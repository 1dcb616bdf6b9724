//! The writer's tests: chains, rotation, crashes and the tampering a repair must not hide
//! (checked through `verify`, which is why they live beside the writer, not in it).

use super::*;
use crate::audit::record::{AuditRecord, GENESIS};
use crate::audit::verify;

fn entry(tool: &str) -> Entry {
    let mut entry = Entry::now(Event::Call);
    entry.tool = Some(tool.to_owned());
    entry
}

fn records(layout: &HomeLayout) -> Vec<(String, AuditRecord)> {
    files::all(layout)
        .unwrap()
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(&f.path).unwrap();
            text.lines()
                .map(|l| (l.to_owned(), serde_json::from_str(l).unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The chain as the writer promises it: seq 1, 2, ... and each `prev`
/// the hash of the line before, across files.
fn assert_chained(records: &[(String, AuditRecord)]) {
    let mut prev = GENESIS.to_owned();
    for (i, (line, record)) in records.iter().enumerate() {
        assert_eq!(record.seq, i as u64 + 1, "{line}");
        assert_eq!(record.prev, prev, "{line}");
        prev = record::sha256_hex(line.as_bytes());
    }
}

#[test]
fn records_chain_from_genesis_and_across_rotated_files() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let log = AuditLog::new(&layout);
    let config = AuditConfig {
        max_file_bytes: 4096,
        ..AuditConfig::default()
    };
    for i in 0..60 {
        log.append(&config, &entry(&format!("t{i}"))).unwrap();
    }
    let all = records(&layout);
    assert_eq!(all.len(), 60);
    assert_chained(&all);
    let rotated = files::rotated(&layout).unwrap();
    assert!(rotated.len() >= 2, "{rotated:?}");
    for file in files::all(&layout).unwrap() {
        let size = std::fs::metadata(&file.path).unwrap().len();
        assert!(size <= 4096, "{}: {size}", file.path.display());
    }
    let head = Head::read(&File::open(layout.audit_head_path()).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(head.seq, 60);
    assert_eq!(head.generation, rotated.len() as u64);
}

/// Two hosts on one home (two `AuditLog`s, each with its own open
/// files, as two processes have) writing at once keep one chain.
#[test]
fn concurrent_writers_keep_one_linear_chain() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let config = AuditConfig {
        max_file_bytes: 8192,
        ..AuditConfig::default()
    };
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let (layout, config) = (&layout, &config);
            scope.spawn(move || {
                let log = AuditLog::new(layout);
                for i in 0..50 {
                    log.append(config, &entry(&format!("w{writer}-{i}")))
                        .unwrap();
                }
            });
        }
    });
    let all = records(&layout);
    assert_eq!(all.len(), 200);
    assert_chained(&all);
}

/// A writer killed in the middle of a line: the next one cuts the torn
/// end off, says so in a repair record, and the chain goes on.
#[test]
fn a_torn_last_line_is_cut_off_and_the_repair_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let config = AuditConfig::default();
    AuditLog::new(&layout).append(&config, &entry("a")).unwrap();
    let mut file = File::options()
        .append(true)
        .open(layout.audit_log_path())
        .unwrap();
    let torn = b"{\"seq\":2,\"prev\":\"ab";
    file.write_all(torn).unwrap();
    AuditLog::new(&layout).append(&config, &entry("b")).unwrap();
    let all = records(&layout);
    assert_chained(&all);
    assert_eq!(all.len(), 3);
    let repair = all[1].1.entry.repair.clone().expect("a repair record");
    assert_eq!(repair.torn_bytes, torn.len() as u64);
    assert!(repair.reason.contains("torn"), "{repair:?}");
    assert_eq!(all[2].1.entry.tool.as_deref(), Some("b"));
}

/// A head behind its log (a crash between the line and the head) and a
/// head that names records the log no longer has are each repaired
/// from the log, and the second says records were lost.
#[test]
fn a_head_that_does_not_match_the_log_is_rebuilt_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let config = AuditConfig::default();
    let log = AuditLog::new(&layout);
    log.append(&config, &entry("a")).unwrap();
    let behind = std::fs::read(layout.audit_head_path()).unwrap();
    log.append(&config, &entry("b")).unwrap();
    std::fs::write(layout.audit_head_path(), &behind).unwrap();
    log.append(&config, &entry("c")).unwrap();
    let all = records(&layout);
    assert_chained(&all);
    let repair = all[2].1.entry.repair.clone().expect("a repair record");
    assert!(repair.reason.contains("behind"), "{repair:?}");
    assert_eq!(repair.head_seq, Some(1));

    // The last two lines removed: the head names record 4.
    let text = std::fs::read_to_string(layout.audit_log_path()).unwrap();
    let kept: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(layout.audit_log_path(), kept).unwrap();
    log.append(&config, &entry("d")).unwrap();
    let all = records(&layout);
    assert_chained(&all);
    let repair = all[2].1.entry.repair.clone().expect("a repair record");
    assert!(repair.reason.contains("lost or removed"), "{repair:?}");
    assert_eq!(repair.head_seq, Some(4));
}

/// Records handed to the writer thread from many threads at once are
/// all written, in one chain, by the time the log is flushed, and the
/// ones submitted after that by the time it is dropped.
#[test]
fn submitted_records_are_all_written_by_flush_and_by_drop() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let config = AuditConfig::default();
    let log = AuditLog::new(&layout);
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (log, config) = (&log, &config);
            scope.spawn(move || {
                for i in 0..100 {
                    log.submit(config, entry(&format!("t{thread}-{i}")));
                }
            });
        }
    });
    log.flush();
    assert_eq!(records(&layout).len(), 400);
    for i in 0..10 {
        log.submit(&config, entry(&format!("last{i}")));
    }
    drop(log);
    let all = records(&layout);
    assert_eq!(all.len(), 410);
    assert_chained(&all);
    assert_eq!(all[409].1.entry.tool.as_deref(), Some("last9"));
}

#[test]
fn a_copy_goes_to_the_configured_file_line_for_line() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path().join("home"));
    let copy = dir.path().join("copy.jsonl");
    let config = AuditConfig {
        copy_to: Some(copy.display().to_string()),
        ..AuditConfig::default()
    };
    let log = AuditLog::new(&layout);
    let first = log.append(&config, &entry("a")).unwrap();
    let second = log.append(&config, &entry("b")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        format!("{first}\n{second}\n")
    );
    assert_eq!(
        std::fs::read_to_string(layout.audit_log_path()).unwrap(),
        format!("{first}\n{second}\n")
    );
}

/// A log of `records` calls, rotated by `max_file_bytes`.
fn log_of(records: usize, max_file_bytes: u64) -> (tempfile::TempDir, HomeLayout, AuditConfig) {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path());
    let config = AuditConfig {
        max_file_bytes,
        ..AuditConfig::default()
    };
    let log = AuditLog::new(&layout);
    for i in 0..records {
        log.append(&config, &entry(&format!("t{i}"))).unwrap();
    }
    (dir, layout, config)
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Every way of hiding what was done to the log that the red team
/// found a writer laundering: after the next record, `verify` still
/// says the log is not intact, naming the repair record and what it
/// says (what was lost, the old head's record and hash).
#[test]
fn tampering_the_next_writer_repairs_stays_flagged_for_good() {
    type Attack = fn(&HomeLayout);
    let forge = |layout: &HomeLayout, count: usize| {
        let path = layout.audit_log_path();
        let mut lines = lines_of(&path);
        for _ in 0..count {
            let last = lines.last().unwrap().clone();
            let mut record: AuditRecord = serde_json::from_str(&last).unwrap();
            record.seq += 1;
            record.prev = record::sha256_hex(last.as_bytes());
            record.entry.principal = Some("local:forged".into());
            lines.push(serde_json::to_string(&record).unwrap());
        }
        write_lines(&path, &lines);
    };
    let attacks: [(&str, Attack, &str); 10] = [
        (
            "delete the last record",
            |l| {
                let path = l.audit_log_path();
                let lines = lines_of(&path);
                write_lines(&path, &lines[..lines.len() - 1]);
            },
            "lost",
        ),
        (
            "delete the last three",
            |l| {
                let path = l.audit_log_path();
                let lines = lines_of(&path);
                write_lines(&path, &lines[..lines.len() - 3]);
            },
            "lost",
        ),
        (
            "delete audit.jsonl",
            |l| std::fs::remove_file(l.audit_log_path()).unwrap(),
            "lost",
        ),
        (
            "delete every log file",
            |l| {
                for file in files::all(l).unwrap() {
                    std::fs::remove_file(file.path).unwrap();
                }
            },
            "lost",
        ),
        (
            "edit the last record",
            |l| {
                let path = l.audit_log_path();
                let mut lines = lines_of(&path);
                let last = lines.len() - 1;
                lines[last] = lines[last].replace("\"tool\":\"t", "\"tool\":\"evil-t");
                write_lines(&path, &lines);
            },
            "changed",
        ),
        (
            "rewrite the last record with a new chain link",
            |l| {
                let path = l.audit_log_path();
                let mut lines = lines_of(&path);
                let mut record: AuditRecord = serde_json::from_str(lines.last().unwrap()).unwrap();
                record.entry.outcome = Some(record::Outcome::Refused);
                *lines.last_mut().unwrap() = serde_json::to_string(&record).unwrap();
                write_lines(&path, &lines);
            },
            "changed",
        ),
        (
            "remove the head",
            |l| std::fs::remove_file(l.audit_head_path()).unwrap(),
            "missing",
        ),
        (
            "a CR at the end of the last line",
            |l| {
                let path = l.audit_log_path();
                let mut lines = lines_of(&path);
                lines.last_mut().unwrap().push('\r');
                write_lines(&path, &lines);
            },
            "changed",
        ),
        ("append five forged records, chained", |_| {}, "changed"),
        (
            "remove the head and the last record",
            |l| {
                std::fs::remove_file(l.audit_head_path()).unwrap();
                let path = l.audit_log_path();
                let lines = lines_of(&path);
                write_lines(&path, &lines[..lines.len() - 1]);
            },
            "missing",
        ),
    ];
    for (what, attack, says) in attacks {
        let (_dir, layout, config) = log_of(40, 4096);
        let head = Head::read(&File::open(layout.audit_head_path()).unwrap())
            .unwrap()
            .unwrap();
        if what.starts_with("append five") {
            forge(&layout, 5);
        } else {
            attack(&layout);
        }
        assert!(
            !verify::verify(&layout).unwrap().is_intact(),
            "{what}: before"
        );
        let log = AuditLog::new(&layout);
        log.append(&config, &entry("after")).unwrap();
        log.append(&config, &entry("and after")).unwrap();
        let found = verify::verify(&layout).unwrap();
        let verify::Verdict::Flagged { problem, seq, .. } = &found.verdict else {
            panic!("{what}: not flagged: {found:#?}");
        };
        assert!(problem.contains("no crash explains"), "{what}: {problem}");
        assert!(problem.contains(says), "{what}: {problem}");
        let repair = records(&layout)
            .into_iter()
            .find(|(_, r)| r.seq == *seq)
            .and_then(|(_, r)| r.entry.repair)
            .unwrap_or_else(|| panic!("{what}: record {seq} is no repair"));
        assert!(!repair.after_crash(), "{what}: {repair:?}");
        if repair.found != Some(RepairFound::HeadMissing) {
            // The old head's record and hash are kept.
            assert_eq!(repair.head_seq, Some(head.seq), "{what}");
            assert_eq!(
                repair.head_hash.as_deref(),
                Some(head.hash.as_str()),
                "{what}"
            );
        }
        // More records change nothing: flagged for good.
        for i in 0..30 {
            log.append(&config, &entry(&format!("later{i}"))).unwrap();
        }
        assert!(
            matches!(
                verify::verify(&layout).unwrap().verdict,
                verify::Verdict::Flagged { .. }
            ),
            "{what}: no longer flagged"
        );
    }
}

/// What a crash leaves, and only that, is repaired as a crash: a
/// torn line after the head's record, one record the head does not
/// name yet, a rotation under way. The log then verifies, with a note.
#[test]
fn what_a_crash_leaves_is_repaired_and_the_log_stays_intact() {
    type Crash = fn(&HomeLayout, &AuditConfig);
    let crashes: [(&str, Crash, RepairFound); 4] = [
        (
            "a torn last line",
            |l, _| {
                let mut file = File::options()
                    .append(true)
                    .open(l.audit_log_path())
                    .unwrap();
                file.write_all(b"{\"seq\":41,\"pr").unwrap();
            },
            RepairFound::TornTail,
        ),
        (
            "a head one record behind",
            |l, c| {
                let behind = std::fs::read(l.audit_head_path()).unwrap();
                AuditLog::new(l).append(c, &entry("unheaded")).unwrap();
                std::fs::write(l.audit_head_path(), behind).unwrap();
            },
            RepairFound::HeadBehind,
        ),
        (
            "a rotation renamed the file, nothing more",
            |l, _| {
                let head = Head::read(&File::open(l.audit_head_path()).unwrap())
                    .unwrap()
                    .unwrap();
                std::fs::rename(
                    l.audit_log_path(),
                    l.rotated_audit_log_path(head.generation + 1),
                )
                .unwrap();
            },
            RepairFound::Rotation,
        ),
        (
            "a rotation and its record, without the head",
            |l, _| {
                let head = Head::read(&File::open(l.audit_head_path()).unwrap())
                    .unwrap()
                    .unwrap();
                std::fs::rename(
                    l.audit_log_path(),
                    l.rotated_audit_log_path(head.generation + 1),
                )
                .unwrap();
                let json = serde_json::to_string(&entry("first of the new file")).unwrap();
                let line = record::line(head.seq + 1, &head.hash, &json);
                std::fs::write(l.audit_log_path(), format!("{line}\n")).unwrap();
            },
            RepairFound::HeadBehind,
        ),
    ];
    for (what, crash, expected) in crashes {
        let (_dir, layout, config) = log_of(40, 4096);
        crash(&layout, &config);
        AuditLog::new(&layout)
            .append(&config, &entry("after"))
            .unwrap();
        let found = verify::verify(&layout).unwrap();
        assert!(found.is_intact(), "{what}: {found:#?}");
        assert!(found.flagged.is_empty(), "{what}: {found:#?}");
        let repairs: Vec<Repair> = records(&layout)
            .into_iter()
            .filter_map(|(_, r)| r.entry.repair)
            .collect();
        assert_eq!(repairs.len(), 1, "{what}: {repairs:?}");
        assert_eq!(repairs[0].found, Some(expected), "{what}: {repairs:?}");
        assert!(
            found.notes.iter().any(|n| n.contains("after a crash")),
            "{what}: {found:#?}"
        );
    }
}

/// Records that cannot be written (here: `audit.jsonl` replaced by a
/// link, which the writer does not follow) are counted; the writer
/// that fails them may end (a `modhost invoke`) before any record
/// could say so, and the next writer of the home writes the `gap`.
/// `verify` reports the count while it is pending and the gap after.
#[test]
fn records_that_could_not_be_written_leave_a_gap_verify_reports() {
    let (dir, layout, config) = log_of(5, 1 << 20);
    let path = layout.audit_log_path();
    let aside = dir.path().join("aside.jsonl");
    std::fs::rename(&path, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &path).unwrap();
    {
        let failing = AuditLog::new(&layout);
        assert!(failing.append(&config, &entry("lost 1")).is_err());
        assert!(failing.append(&config, &entry("lost 2")).is_err());
    }
    let pending = verify::verify(&layout).unwrap();
    let verify::Verdict::Flagged { file, problem, .. } = &pending.verdict else {
        panic!("not flagged: {pending:#?}");
    };
    assert_eq!(file, "head");
    assert!(
        problem.contains("2 records could not be written"),
        "{problem}"
    );

    std::fs::remove_file(&path).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    let log = AuditLog::new(&layout);
    assert!(log.append(&config, &entry("lost 3")).is_ok());
    let all = records(&layout);
    assert_chained(&all);
    let gap = all[5].1.entry.gap.clone().expect("a gap record");
    assert_eq!(gap.records, 2);
    assert!(gap.error.contains("symbolic links"), "{gap:?}");
    assert_eq!(all[6].1.entry.tool.as_deref(), Some("lost 3"));
    let found = verify::verify(&layout).unwrap();
    let verify::Verdict::Flagged { seq, problem, .. } = &found.verdict else {
        panic!("not flagged: {found:#?}");
    };
    assert_eq!(*seq, 6);
    assert!(
        problem.contains("2 records could not be written"),
        "{problem}"
    );
    assert_eq!(
        found.flagged.len(),
        1,
        "the note in the head is cleared: {found:#?}"
    );
}

/// A file left at the name the next rotation takes is skipped, never
/// overwritten, and records go on being written.
#[test]
fn a_rotation_name_taken_already_is_skipped() {
    let (_dir, layout, config) = log_of(30, 4096);
    let head = Head::read(&File::open(layout.audit_head_path()).unwrap())
        .unwrap()
        .unwrap();
    let taken = layout.rotated_audit_log_path(head.generation + 1);
    std::fs::write(&taken, "").unwrap();
    let log = AuditLog::new(&layout);
    for i in 0..30 {
        log.append(&config, &entry(&format!("more{i}"))).unwrap();
    }
    assert_eq!(std::fs::read(&taken).unwrap(), b"", "left as it was");
    assert!(layout.rotated_audit_log_path(head.generation + 2).exists());
    let found = verify::verify(&layout).unwrap();
    assert!(found.is_intact(), "{found:#?}");
    assert_eq!(found.records, 60);
}

/// `audit/head` removed while a host holds it open: the host's next
/// record locks the file at the path, not the one it holds, so it and
/// a second host write one chain, not two; the head's removal stays
/// flagged.
#[test]
fn a_head_removed_under_a_running_writer_does_not_fork_the_chain() {
    let (_dir, layout, config) = log_of(3, 1 << 20);
    let running = AuditLog::new(&layout);
    running.append(&config, &entry("running")).unwrap();
    std::fs::remove_file(layout.audit_head_path()).unwrap();
    let other = AuditLog::new(&layout);
    for i in 0..20 {
        running.append(&config, &entry(&format!("r{i}"))).unwrap();
        other.append(&config, &entry(&format!("o{i}"))).unwrap();
    }
    let all = records(&layout);
    assert_eq!(all.len(), 4 + 1 + 40);
    assert_chained(&all);
    let found = verify::verify(&layout).unwrap();
    let verify::Verdict::Flagged { problem, .. } = &found.verdict else {
        panic!("not flagged: {found:#?}");
    };
    assert!(problem.contains("head was missing"), "{problem}");
}

/// A head edited to the largest numbers: the writer neither panics nor
/// stops recording.
#[test]
fn a_head_at_the_largest_numbers_does_not_stop_the_writer() {
    for field in [0, 1] {
        let (_dir, layout, config) = log_of(30, 4096);
        let path = layout.audit_head_path();
        let mut head = Head::read(&File::open(&path).unwrap()).unwrap().unwrap();
        if field == 0 {
            head.generation = u64::MAX;
        } else {
            head.seq = u64::MAX;
        }
        std::fs::write(&path, head.encode()).unwrap();
        let log = AuditLog::new(&layout);
        for i in 0..30 {
            log.append(&config, &entry(&format!("more{i}"))).unwrap();
        }
        let tools = records(&layout)
            .into_iter()
            .filter(|(_, r)| {
                r.entry
                    .tool
                    .as_deref()
                    .is_some_and(|t| t.starts_with("more"))
            })
            .count();
        assert_eq!(tools, 30, "field {field}");
    }
}

/// Records taken by the writer thread a batch at a time, each with its
/// own config, are written in one chain in the order submitted, rotated
/// where each one's own bound says, and copied line for line where each
/// one's own config says.
#[test]
fn records_written_in_batches_keep_order_chain_rotation_and_copies() {
    let dir = tempfile::tempdir().unwrap();
    let layout = HomeLayout::new(dir.path().join("home"));
    let copy = dir.path().join("copy.jsonl");
    let rotating = AuditConfig {
        max_file_bytes: 4096,
        ..AuditConfig::default()
    };
    let copied = AuditConfig {
        max_file_bytes: 4096,
        copy_to: Some(copy.display().to_string()),
        ..AuditConfig::default()
    };
    let log = AuditLog::new(&layout);
    // Submitted faster than the thread wakes: batches of many records.
    for i in 0..300 {
        let config = if i % 3 == 0 { &copied } else { &rotating };
        log.submit(config, entry(&format!("t{i}")));
    }
    log.flush();
    let all = records(&layout);
    assert_eq!(all.len(), 300);
    assert_chained(&all);
    for (i, (_, record)) in all.iter().enumerate() {
        assert_eq!(record.entry.tool.as_deref(), Some(format!("t{i}").as_str()));
    }
    assert!(files::rotated(&layout).unwrap().len() >= 2);
    for file in files::all(&layout).unwrap() {
        let size = std::fs::metadata(&file.path).unwrap().len();
        assert!(size <= 4096, "{}: {size}", file.path.display());
    }
    let expected: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 0)
        .map(|(_, (line, _))| line.as_str())
        .collect();
    let copies = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(copies.lines().collect::<Vec<_>>(), expected);
}

/// A batch whose records cannot be written loses each one as a record at
/// a time would: every one counted, the next record written preceded by a
/// `gap` with the count.
#[test]
fn a_batch_that_cannot_be_written_counts_every_record_in_the_gap() {
    let (dir, layout, config) = log_of(5, 1 << 20);
    let path = layout.audit_log_path();
    let aside = dir.path().join("aside.jsonl");
    std::fs::rename(&path, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &path).unwrap();
    {
        let failing = AuditLog::new(&layout);
        let batch: Vec<(AuditConfig, Entry)> = (0..3)
            .map(|i| (config.clone(), entry(&format!("lost {i}"))))
            .collect();
        failing.writer.append_all(&batch);
    }
    std::fs::remove_file(&path).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    let log = AuditLog::new(&layout);
    let batch = vec![
        (config.clone(), entry("after 1")),
        (config.clone(), entry("after 2")),
    ];
    log.writer.append_all(&batch);
    let all = records(&layout);
    assert_eq!(all.len(), 8);
    assert_chained(&all);
    let gap = all[5].1.entry.gap.clone().expect("a gap record");
    assert_eq!(gap.records, 3);
    assert_eq!(all[6].1.entry.tool.as_deref(), Some("after 1"));
    assert_eq!(all[7].1.entry.tool.as_deref(), Some("after 2"));
}
