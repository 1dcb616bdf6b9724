//! Appending to the audit log: one whole line per record, chained, under a
//! lock every writer of the home takes.
//!
//! Each record, in order, while holding this process's mutex and the
//! `flock` of `audit/head` (so two hosts on one home, say `modhost mcp` and
//! a `modhost invoke`, keep one linear chain):
//!
//! 1. read the head: the last record's number and hash, and the size
//!    `audit.jsonl` had after it;
//! 2. check the open `audit.jsonl` is still the file at that path (another
//!    host may have rotated it) and has that size; if not, **repair**: a
//!    torn last line (a writer killed mid-write, the disk full) is cut off,
//!    the head rebuilt from the last whole line, and a `repair` record says
//!    what was found;
//! 3. rotate first when the line would take the file past
//!    `max_file_bytes`: `audit.jsonl` is renamed `audit-<n+1>.jsonl` and a
//!    new one started, the chain going on from the renamed file's last line;
//! 4. append the line (`seq` one more, `prev` the last hash) with
//!    `O_APPEND`, in one `write` of the whole line;
//! 5. write the new head over the old one.
//!
//! A crash anywhere leaves the log readable up to its last whole line:
//! before 4 nothing changed, during 4 a torn tail that `verify` reports as
//! such and the next writer cuts off, between 4 and 5 a head one record
//! behind, which the next writer rebuilds (and says so).
//!
//! Design decisions:
//!
//! - **Off the call's path.** A call hands its record to the log's writer
//!   thread ([`AuditLog::submit`]) and returns; the thread writes records
//!   in the order they came. Written on the call's own path, a record cost
//!   a call about 40 µs at the median on a two-core machine busy with the
//!   call's processes (13 µs alone): measurable. The queue is bounded (a
//!   caller waits when it is full, no record is dropped), and the thread is
//!   joined when the host's last clone is dropped, so a host that ends
//!   normally has written every record; only a host killed outright can
//!   lose the records of its last few microseconds, never leave a half
//!   record that breaks the chain. [`AuditLog::flush`] waits for the queue.
//! - **No `fsync`.** A record reaches the page cache, so a host crash loses
//!   nothing written; only a machine crash can lose the last records (and
//!   then the head shows it). An `fsync` per record would cost milliseconds.
//!   Measured in `benches/audit.rs`.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use rustix::fs::FlockOperation;
use serde::Deserialize;

use super::files::{self, AuditError};
use super::head::Head;
use super::record::{self, Entry, Event, Repair};
use super::settings::{AuditConfig, CopyTo};
use crate::home::HomeLayout;

/// The most records waiting for the writer thread; a call that finds the
/// queue full waits for room (no record is ever dropped).
const QUEUE: usize = 1024;

/// The writer thread's nice value (Linux: per thread), below the threads
/// that serve calls.
const WRITER_NICE: i32 = 10;

/// The audit log of one home, shared by a host's clones: records are
/// submitted to a writer thread of its own, started by the first.
#[derive(Debug)]
pub(crate) struct AuditLog {
    writer: Arc<Writer>,
    queue: Mutex<Option<Queue>>,
}

/// The writer thread and the way to it.
#[derive(Debug)]
struct Queue {
    jobs: SyncSender<Job>,
    thread: std::thread::JoinHandle<()>,
}

/// What the writer thread is given.
enum Job {
    Record(Box<(AuditConfig, Entry)>),
    /// Answered once every job before it is done.
    Flush(SyncSender<()>),
}

impl AuditLog {
    /// The log of the home at `layout`; nothing is created until the
    /// first record.
    pub(crate) fn new(layout: &HomeLayout) -> AuditLog {
        AuditLog {
            writer: Arc::new(Writer::new(layout)),
            queue: Mutex::new(None),
        }
    }

    /// Append one record of `entry` now, on this thread; its line.
    #[cfg(test)]
    pub(crate) fn append(&self, config: &AuditConfig, entry: &Entry) -> Result<String, AuditError> {
        self.writer.append(config, entry)
    }

    /// Hand one record to the writer thread, which appends it after every
    /// record submitted before it. Waits only while the queue is full. A
    /// record that cannot be written is logged as an error.
    pub(crate) fn submit(&self, config: &AuditConfig, entry: Entry) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.is_none() {
            *queue = self.start();
        }
        let job = Job::Record(Box::new((config.clone(), entry)));
        let unsent = match queue.as_ref() {
            Some(queue) => match queue.jobs.send(job) {
                Ok(()) => return,
                Err(std::sync::mpsc::SendError(job)) => job,
            },
            None => job,
        };
        // No thread (none could be started, or it died): written here.
        if let Job::Record(record) = unsent {
            let (config, entry) = *record;
            report(self.writer.append(&config, &entry));
        }
    }

    /// Wait until every record submitted so far is written.
    pub(crate) fn flush(&self) {
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let Some(queue) = queue.as_ref() else { return };
        let (done, written) = sync_channel(1);
        if queue.jobs.send(Job::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }

    /// The writer thread; `None` when none can be started.
    fn start(&self) -> Option<Queue> {
        let (jobs, receiver) = sync_channel::<Job>(QUEUE);
        let writer = Arc::clone(&self.writer);
        let thread = std::thread::Builder::new()
            .name("modhost-audit".into())
            .spawn(move || {
                // Below the calls' own threads: on a busy machine the
                // record waits a moment rather than the next call.
                let _ = rustix::process::setpriority_process(None, WRITER_NICE);
                while let Ok(job) = receiver.recv() {
                    match job {
                        Job::Record(record) => report(writer.append(&record.0, &record.1)),
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        match thread {
            Ok(thread) => Some(Queue { jobs, thread }),
            Err(e) => {
                tracing::warn!("no audit writer thread ({e}): records are written by each call");
                None
            }
        }
    }
}

impl Drop for AuditLog {
    /// Every record submitted is written before the log goes away.
    fn drop(&mut self) {
        let queue = self
            .queue
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(Queue { jobs, thread }) = queue {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

/// Log a record that could not be written: the call it records happened.
fn report(written: Result<String, AuditError>) {
    if let Err(e) = written {
        tracing::error!("a call is not in the audit log: {e}");
    }
}

/// The files of the log as this process holds them, and the copy.
#[derive(Debug)]
struct Writer {
    layout: HomeLayout,
    open: Mutex<Option<OpenLog>>,
    /// Where copies go, opened on the first record with a copy.
    copy: Mutex<Option<(CopyTo, Option<File>)>>,
}

/// The head (also the lock) and the current file, as this process holds
/// them open.
#[derive(Debug)]
struct OpenLog {
    head: File,
    log: Option<File>,
}

impl Writer {
    fn new(layout: &HomeLayout) -> Writer {
        Writer {
            layout: layout.clone(),
            open: Mutex::new(None),
            copy: Mutex::new(None),
        }
    }

    /// Append one record of `entry`, then its copy (when `config` names
    /// one). Its line is returned.
    fn append(&self, config: &AuditConfig, entry: &Entry) -> Result<String, AuditError> {
        let entry_json = serde_json::to_string(entry).map_err(|e| {
            AuditError::io(
                "encode a record for",
                self.layout.audit_log_path(),
                e.into(),
            )
        })?;
        let line = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            if open.is_none() {
                *open = Some(OpenLog::open(&self.layout)?);
            }
            let Some(files) = open.as_mut() else {
                unreachable!("opened above")
            };
            let result = files.append_locked(&self.layout, config, &entry_json);
            if result.is_err() {
                // Whatever broke (the folder removed, the disk), the next
                // record starts from the files as they are then.
                *open = None;
            }
            result?
        };
        if let Some(target) = config.copy_target() {
            self.copy(target, &line);
        }
        Ok(line)
    }

    /// Write `line` to the configured copy; a copy that fails is a warning,
    /// never a lost record (the log has it).
    fn copy(&self, target: CopyTo, line: &str) {
        let mut copy = self.copy.lock().unwrap_or_else(|e| e.into_inner());
        if copy.as_ref().is_none_or(|(current, _)| *current != target) {
            let file = match &target {
                CopyTo::Stderr => None,
                CopyTo::File(path) => match File::options()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(path)
                {
                    Ok(file) => Some(file),
                    Err(e) => {
                        tracing::warn!(
                            "the audit copy to {} could not be opened: {e}",
                            path.display()
                        );
                        return;
                    }
                },
            };
            *copy = Some((target, file));
        }
        let mut text = String::with_capacity(line.len() + 1);
        text.push_str(line);
        text.push('\n');
        let written = match copy.as_mut() {
            Some((_, Some(file))) => file.write_all(text.as_bytes()),
            _ => std::io::stderr().lock().write_all(text.as_bytes()),
        };
        if let Err(e) = written {
            tracing::warn!("the audit copy could not be written: {e}");
        }
    }
}

impl OpenLog {
    fn open(layout: &HomeLayout) -> Result<OpenLog, AuditError> {
        let dir = layout.audit_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| AuditError::io("create", &dir, e))?;
        let path = layout.audit_head_path();
        let head = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| AuditError::io("open", &path, e))?;
        Ok(OpenLog { head, log: None })
    }

    /// Steps 1-5 of the module docs, under the home's audit lock.
    fn append_locked(
        &mut self,
        layout: &HomeLayout,
        config: &AuditConfig,
        entry_json: &str,
    ) -> Result<String, AuditError> {
        let OpenLog { head: lock, log } = self;
        let lock: &File = lock;
        let head_path = layout.audit_head_path();
        let _locked = Locked::exclusive(lock, &head_path)?;
        let seen = Head::read(lock).map_err(|e| AuditError::io("read", &head_path, e))?;
        let size = current_log(log, layout)?
            .metadata()
            .map_err(|e| AuditError::io("read", layout.audit_log_path(), e))?
            .len();
        let mut head = match seen {
            Some(head) if head.size == size => head,
            seen => {
                let (mut head, repair) = rebuild(layout, current_log(log, layout)?, seen)?;
                if let Some(repair) = repair {
                    let mut entry = Entry::now(Event::Repair);
                    entry.repair = Some(repair);
                    let json = serde_json::to_string(&entry).map_err(|e| {
                        AuditError::io("encode a record for", layout.audit_log_path(), e.into())
                    })?;
                    write_line(lock, log, layout, config, &mut head, &json)?;
                }
                head
            }
        };
        write_line(lock, log, layout, config, &mut head, entry_json)
    }
}

/// `audit.jsonl` as it is at its path now: the file held open in `log`,
/// unless another host rotated it away (or it was removed), then opened
/// anew.
fn current_log<'a>(log: &'a mut Option<File>, layout: &HomeLayout) -> Result<&'a File, AuditError> {
    let path = layout.audit_log_path();
    let still_there = match (&*log, std::fs::symlink_metadata(&path)) {
        (Some(held), Ok(at_path)) => held
            .metadata()
            .is_ok_and(|held| held.dev() == at_path.dev() && held.ino() == at_path.ino()),
        _ => false,
    };
    if !still_there {
        *log = Some(open_log(&path)?);
    }
    Ok(log.as_ref().unwrap_or_else(|| unreachable!("set above")))
}

/// Rotate when due, append the line of `entry_json` after `head`, and
/// write the new head into `lock` (the head file). The line, without its
/// newline, is returned.
fn write_line(
    lock: &File,
    log: &mut Option<File>,
    layout: &HomeLayout,
    config: &AuditConfig,
    head: &mut Head,
    entry_json: &str,
) -> Result<String, AuditError> {
    let mut line = record::line(head.seq + 1, &head.hash, entry_json);
    line.push('\n');
    let bytes = line.len() as u64;
    if head.size > 0 && head.size + bytes > config.max_file_bytes {
        rotate(log, layout, head)?;
    }
    let path = layout.audit_log_path();
    // One write of the whole line; `write_all` goes on only after a short
    // write (a full disk), whose torn end the next writer cuts off.
    let mut writer: &File = current_log(log, layout)?;
    writer
        .write_all(line.as_bytes())
        .map_err(|e| AuditError::io("append to", &path, e))?;
    line.pop();
    head.seq += 1;
    head.hash = record::sha256_hex(line.as_bytes());
    head.size += bytes;
    head.write(lock)
        .map_err(|e| AuditError::io("write", layout.audit_head_path(), e))?;
    Ok(line)
}

/// `audit.jsonl` becomes `audit-<generation + 1>.jsonl`; a new one starts
/// empty. The chain goes on: `head` still names the last record.
fn rotate(log: &mut Option<File>, layout: &HomeLayout, head: &mut Head) -> Result<(), AuditError> {
    let next = head.generation + 1;
    let rotated = layout.rotated_audit_log_path(next);
    if std::fs::symlink_metadata(&rotated).is_ok() {
        return Err(AuditError::io(
            "rotate the audit log into",
            &rotated,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it exists already; the log's files were changed by hand",
            ),
        ));
    }
    let path = layout.audit_log_path();
    std::fs::rename(&path, &rotated).map_err(|e| AuditError::io("rotate", &path, e))?;
    *log = Some(open_log(&path)?);
    head.generation = next;
    head.size = 0;
    Ok(())
}

/// Open (creating) `audit.jsonl` for appending, through no link.
fn open_log(path: &Path) -> Result<File, AuditError> {
    File::options()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| AuditError::io("open", path, e))
}

/// The exclusive `flock` of the head, released when dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn exclusive(file: &'a File, path: &Path) -> Result<Locked<'a>, AuditError> {
        loop {
            match rustix::fs::flock(file, FlockOperation::LockExclusive) {
                Ok(()) => return Ok(Locked(file)),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(AuditError::io("lock", path, e.into())),
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, FlockOperation::Unlock);
    }
}

/// The `seq` of a line, read alone.
#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

/// The head as the files say it is, after cutting a torn last line off
/// `log` (the open `audit.jsonl`); and what to record about the repair,
/// when there was one. `seen` is the head as it was read (`None`: none).
fn rebuild(
    layout: &HomeLayout,
    log: &File,
    seen: Option<Head>,
) -> Result<(Head, Option<Repair>), AuditError> {
    let path = layout.audit_log_path();
    let content = std::fs::read(&path).map_err(|e| AuditError::io("read", &path, e))?;
    let whole = content
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let torn_bytes = (content.len() - whole) as u64;
    if torn_bytes > 0 {
        log.set_len(whole as u64)
            .map_err(|e| AuditError::io("cut the torn last line off", &path, e))?;
    }
    let rotated = files::rotated(layout)?;
    let generation = rotated.last().and_then(|f| f.rotated).unwrap_or(0);
    let rotated_tail;
    let last = match files::last_line(&content[..whole]) {
        Some(line) => Some(line),
        None => match rotated.last() {
            Some(file) => {
                rotated_tail =
                    std::fs::read(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
                files::last_line(&rotated_tail)
            }
            None => None,
        },
    };
    let (seq, hash) = match last {
        Some(line) => {
            let seq = serde_json::from_slice::<SeqOnly>(line)
                .map(|s| s.seq)
                .unwrap_or_else(|_| seen.as_ref().map_or(0, |h| h.seq));
            (seq, record::sha256_hex(line))
        }
        None => (0, record::GENESIS.to_owned()),
    };
    let head = Head {
        generation,
        seq,
        size: whole as u64,
        hash,
    };
    let reason = match &seen {
        // A log that has never had a record: nothing to repair.
        None if seq == 0 && torn_bytes == 0 => return Ok((head, None)),
        None => "the head was missing or unreadable; it was rebuilt from the log".to_owned(),
        Some(h) if h.seq == seq && h.hash == head.hash && torn_bytes > 0 => {
            "a torn last line (a writer stopped in the middle of a record) was cut off".to_owned()
        }
        Some(h) if h.seq == seq && h.hash == head.hash => {
            "the head did not match the files' size or rotation (a writer stopped during a rotation); it was rebuilt from the log".to_owned()
        }
        Some(h) if h.seq < seq => {
            "the head was behind the log (a writer stopped between a record and the head); it was rebuilt from the log".to_owned()
        }
        Some(h) => format!(
            "the log ends at record {seq} but the head named record {}: records at the end were lost or removed",
            h.seq
        ),
    };
    let repair = Repair {
        reason,
        torn_bytes,
        head_seq: seen.map(|h| h.seq),
    };
    Ok((head, Some(repair)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{AuditRecord, GENESIS};

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
}
