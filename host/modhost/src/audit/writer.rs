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
//!    torn last line is cut off, the head rebuilt from the last whole line,
//!    and a `repair` record says what was found (`rebuild`);
//! 3. rotate first when the line would take the file past
//!    `max_file_bytes`: `audit.jsonl` is renamed `audit-<n>.jsonl` (`n` one
//!    past the head's generation and every rotated file; a name taken is
//!    skipped, never overwritten) and a new one started, the chain going on
//!    from the renamed file's last line;
//! 4. append the line (`seq` one more, `prev` the last hash) with
//!    `O_APPEND`, in one `write` of the whole line;
//! 5. write the new head over the old one.
//!
//! A crash anywhere leaves the log readable up to its last whole line:
//! before 4 nothing changed, during 3 a rotation under way, during 4 a torn
//! tail that `verify` reports as such and the next writer cuts off, between
//! 4 and 5 a head one record behind, which the next writer rebuilds (and
//! says so).
//!
//! Design decisions:
//!
//! - **Only what a crash leaves is repaired as a crash.** A torn line after
//!   the head's record, one record after it chained from it, a rotation
//!   under way: the `repair` record says which, and `verify` notes it.
//!   Anything else (records the head named gone, a last record that is not
//!   the head's, the head gone) is repaired too, so that calls go on being
//!   recorded, but its `repair` record says what was found and keeps the
//!   old head's record number and hash, and `verify` reports the log as
//!   not intact from then on: a log tampered with stays flagged. What this
//!   cannot catch: someone who can write the files can rewrite the whole
//!   chain and the head consistently (or remove `audit/` whole), and one
//!   forged record chained after the head's looks like a crash between a
//!   record and its head. A copy of each record kept elsewhere (`[audit]
//!   copy_to`, sent on to a collector the host's user cannot write) is the
//!   anchor that rules these out; every line (repairs and gaps too) is
//!   copied.
//! - **A record that cannot be written is counted, never silently lost.**
//!   A full disk, a file made immutable, `audit.jsonl` replaced by a link
//!   (never followed): the call goes on, the error is logged, and the count
//!   is noted after the head line (`head::Unwritten`; kept in memory when
//!   even that fails), so the next record written, by this process or
//!   another, is preceded by a `gap` record with the count, which `verify`
//!   reports as records missing. A rename that fails at rotation is a
//!   warning and the record goes into the current file past its size.
//! - **The lock is the file at the path.** After its `flock`, a writer
//!   compares the head it holds with the one at `audit/head` (device and
//!   inode) and reopens when they differ, so a head removed under a running
//!   host does not split the writers into two locks and the chain in two.
//! - **Off the call's path.** A call hands its record to the log's writer
//!   thread ([`AuditLog::submit`]) and returns; the thread writes records
//!   in the order they came. Written on the call's own path, a record cost
//!   a call about 40 µs at the median on a two-core machine busy with the
//!   call's processes (13 µs alone): measurable. The queue is bounded (a
//!   caller waits when it is full, no record is dropped), and the thread is
//!   joined when the host's last clone is dropped, so a host that ends
//!   normally has written every record; only a host killed outright can
//!   lose the records still queued (those of its last few milliseconds),
//!   never leave a half record that breaks the chain. [`AuditLog::flush`]
//!   waits for the queue.
//! - **A batch under one lock.** The thread takes every record queued at
//!   once (`writer/queue.rs`: woken only when idle, lingering a moment
//!   after each batch) and appends them under one `flock`, one head read
//!   and one check of the files, each still one whole-line `write`
//!   followed by the head, so a crash leaves what it leaves with one record
//!   at a time; a record that cannot be written is counted as before and
//!   the next is tried. Measured on a busy two-core server: the wake and
//!   the locking per record were most of the log's cost.
//! - **No `fsync`.** A record reaches the page cache, so a host crash loses
//!   nothing written; only a machine crash can lose the last records (and
//!   then the head shows it, and the next writer's repair says records were
//!   lost: such a log does not verify as intact, rightly). An `fsync` per
//!   record would cost milliseconds.
//!   Measured in `benches/audit.rs`.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustix::fs::FlockOperation;
use serde::Deserialize;

use self::queue::{Job, Queue};
use super::files::{self, AuditError};
use super::head::{Head, Unwritten};
use super::record::{self, Entry, Event, Gap, Repair, RepairFound};
use super::settings::{AuditConfig, CopyTo};
use crate::home::HomeLayout;

/// The writer thread's nice value (Linux: per thread), below the threads
/// that serve calls.
const WRITER_NICE: i32 = 10;

/// The audit log of one home, shared by a host's clones: records are
/// submitted to a writer thread of its own, started by the first, which
/// takes them a batch at a time (`queue.rs`).
#[derive(Debug)]
pub(crate) struct AuditLog {
    writer: Arc<Writer>,
    thread: Mutex<Option<WriterThread>>,
}

/// The writer thread and the way to it.
#[derive(Debug)]
struct WriterThread {
    queue: Arc<Queue>,
    thread: std::thread::JoinHandle<()>,
}

impl AuditLog {
    /// The log of the home at `layout`; nothing is created until the
    /// first record.
    pub(crate) fn new(layout: &HomeLayout) -> AuditLog {
        AuditLog {
            writer: Arc::new(Writer::new(layout)),
            thread: Mutex::new(None),
        }
    }

    /// Append one record of `entry` now, on this thread; its line.
    #[cfg(test)]
    pub(crate) fn append(&self, config: &AuditConfig, entry: &Entry) -> Result<String, AuditError> {
        self.writer.append(config, entry)
    }

    /// The writer thread's queue, the thread started first when none runs
    /// yet; `None` when none can be started.
    fn queue(&self) -> Option<Arc<Queue>> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_none() {
            *thread = self.start();
        }
        thread.as_ref().map(|t| Arc::clone(&t.queue))
    }

    /// Hand one record to the writer thread, which appends it after every
    /// record submitted before it. Waits only while the queue is full. A
    /// record that cannot be written is logged as an error.
    pub(crate) fn submit(&self, config: &AuditConfig, entry: Entry) {
        let job = Job::Record(Box::new((config.clone(), entry)));
        let unsent = match self.queue() {
            Some(queue) => match queue.push(job) {
                Ok(()) => return,
                Err(job) => job,
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
        let queue = {
            let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
            thread.as_ref().map(|t| Arc::clone(&t.queue))
        };
        if let Some(queue) = queue {
            queue.flush();
        }
    }

    /// The writer thread; `None` when none can be started.
    fn start(&self) -> Option<WriterThread> {
        let queue = Arc::new(Queue::default());
        let writer = Arc::clone(&self.writer);
        let served = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name("modhost-audit".into())
            .spawn(move || {
                // Below the calls' own threads: on a busy machine the
                // record waits a moment rather than the next call.
                let _ = rustix::process::setpriority_process(None, WRITER_NICE);
                let mut records: Vec<(AuditConfig, Entry)> = Vec::new();
                served.serve(|jobs| {
                    // The records of a batch in order, under one lock of
                    // the log (`Writer::append_all`); a flush is answered
                    // once the records before it are written.
                    for job in jobs.drain(..) {
                        match job {
                            Job::Record(record) => records.push(*record),
                            Job::Flush(done) => {
                                writer.append_all(&records);
                                records.clear();
                                let _ = done.send(());
                            }
                        }
                    }
                    writer.append_all(&records);
                    records.clear();
                });
            });
        match thread {
            Ok(thread) => Some(WriterThread { queue, thread }),
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
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(WriterThread { queue, thread }) = thread {
            queue.close();
            let _ = thread.join();
        }
    }
}

/// Log a record that could not be written: the call it records happened,
/// and the next record written says how many are missing (a `gap`).
fn report(written: Result<String, AuditError>) {
    if let Err(e) = written {
        tracing::error!("a call is not in the audit log: {e}");
    }
}

/// The files of the log as this process holds them, and the copy.
#[derive(Debug)]
struct Writer {
    layout: HomeLayout,
    state: Mutex<WriterState>,
    /// Where copies go, opened on the first record with a copy.
    copy: Mutex<Option<(CopyTo, Option<File>)>>,
}

/// What one writer holds between records.
#[derive(Debug, Default)]
struct WriterState {
    /// The files, open; `None` before the first record and after an error.
    files: Option<OpenLog>,
    /// Records this writer could not write and could not note in the head
    /// either (`head::Unwritten`), since the last it could write.
    unwritten: Option<Unwritten>,
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
            state: Mutex::new(WriterState::default()),
            copy: Mutex::new(None),
        }
    }

    /// Append one record of `entry` (after a `repair` and a `gap` record
    /// when due), then copy every line written (when `config` names a
    /// copy). The record's line is returned. A record that cannot be
    /// written is counted, for the next one that can to say so.
    fn append(&self, config: &AuditConfig, entry: &Entry) -> Result<String, AuditError> {
        let mut lines = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.append(&self.layout, config, entry) {
                Ok(lines) => lines,
                Err(e) => {
                    state.count_unwritten(&self.layout, &e);
                    return Err(e);
                }
            }
        };
        if let Some(target) = config.copy_target() {
            for line in &lines {
                self.copy(target.clone(), line);
            }
        }
        Ok(lines.pop().unwrap_or_default())
    }

    /// Append a record of each of `records`, in order, under one lock of
    /// the log (`WriterState::append_all`), then copy each line written as
    /// its record's config says. A record that cannot be written is logged
    /// and counted, as [`Writer::append`] does, and the next is tried.
    fn append_all(&self, records: &[(AuditConfig, Entry)]) {
        if records.is_empty() {
            return;
        }
        let written = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.append_all(&self.layout, records)
        };
        for (index, line) in written {
            if let Some(target) = records[index].0.copy_target() {
                self.copy(target.clone(), &line);
            }
        }
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

impl WriterState {
    /// The lines written for `entry`: a `repair` and a `gap` record when
    /// due, then its own, last.
    fn append(
        &mut self,
        layout: &HomeLayout,
        config: &AuditConfig,
        entry: &Entry,
    ) -> Result<Vec<String>, AuditError> {
        let entry_json = encode(layout, entry)?;
        if self.files.is_none() {
            self.files = Some(OpenLog::open(layout)?);
        }
        let Some(files) = self.files.as_mut() else {
            unreachable!("opened above")
        };
        let appended = files.append_locked(
            layout,
            &mut self.unwritten,
            &[(config, entry_json.as_str())],
        );
        match appended.error {
            None => Ok(appended.lines.into_iter().map(|(_, line)| line).collect()),
            Some(e) => {
                // Whatever broke (the folder removed, the disk), the next
                // record starts from the files as they are then.
                self.files = None;
                Err(e)
            }
        }
    }

    /// The lines written for each of `records`, in order, each with the
    /// index of the record it was written for (a `repair` or `gap` record
    /// with the record after it). Records are appended under one lock as
    /// long as they can be; one that cannot is logged and counted as
    /// [`WriterState::append`] does (and the files opened anew), and the
    /// rest go on after it, so a batch loses exactly the records a record
    /// at a time would.
    fn append_all(
        &mut self,
        layout: &HomeLayout,
        records: &[(AuditConfig, Entry)],
    ) -> Vec<(usize, String)> {
        let mut written = Vec::with_capacity(records.len());
        let mut encoded: Vec<(usize, String)> = Vec::with_capacity(records.len());
        for (index, (_, entry)) in records.iter().enumerate() {
            match encode(layout, entry) {
                Ok(json) => encoded.push((index, json)),
                Err(e) => {
                    self.count_unwritten(layout, &e);
                    report(Err(e));
                }
            }
        }
        let mut rest = &encoded[..];
        while !rest.is_empty() {
            let opened = match self.files.as_mut() {
                Some(files) => Ok(files),
                None => OpenLog::open(layout).map(|files| self.files.insert(files)),
            };
            let files = match opened {
                Ok(files) => files,
                Err(e) => {
                    self.count_unwritten(layout, &e);
                    report(Err(e));
                    rest = &rest[1..];
                    continue;
                }
            };
            let jobs: Vec<(&AuditConfig, &str)> = rest
                .iter()
                .map(|(index, json)| (&records[*index].0, json.as_str()))
                .collect();
            let appended = files.append_locked(layout, &mut self.unwritten, &jobs);
            written.extend(
                appended
                    .lines
                    .into_iter()
                    .map(|(at, line)| (rest[at].0, line)),
            );
            match appended.error {
                None => break,
                Some(e) => {
                    // The record at `records_written` failed: counted, and
                    // the files opened anew for the ones after it.
                    self.files = None;
                    self.count_unwritten(layout, &e);
                    report(Err(e));
                    rest = &rest[(appended.records_written + 1).min(rest.len())..];
                }
            }
        }
        written
    }

    /// Count one record that could not be written: noted in the head when
    /// the head can be written (so that the next writer of the home, in
    /// whichever process, says so), else here until it can.
    fn count_unwritten(&mut self, layout: &HomeLayout, error: &AuditError) {
        let mut missing = self.unwritten.take().unwrap_or_else(|| Unwritten {
            records: 0,
            since: Entry::now(Event::Gap).time,
            error: String::new(),
        });
        missing.records = missing.records.saturating_add(1);
        missing.error = error.to_string();
        let noted = (|| -> Result<(), AuditError> {
            let mut files = OpenLog::open(layout)?;
            files.lock(layout)?;
            let _unlock = Unlock(&files.head);
            let all = merged(Unwritten::read(&files.head), Some(missing.clone()));
            if let Some(all) = all {
                all.write(&files.head)
                    .map_err(|e| AuditError::io("write", layout.audit_head_path(), e))?;
            }
            Ok(())
        })();
        if let Err(e) = noted {
            tracing::warn!("the count of records not written could not be noted in the head: {e}");
            self.unwritten = Some(missing);
        }
    }
}

/// Two counts of records not written as one.
fn merged(a: Option<Unwritten>, b: Option<Unwritten>) -> Option<Unwritten> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Unwritten {
            records: a.records.saturating_add(b.records),
            since: a.since.min(b.since),
            error: b.error,
        }),
        (a, b) => a.or(b),
    }
}

/// `entry` as the JSON object its line is made of.
fn encode(layout: &HomeLayout, entry: &Entry) -> Result<String, AuditError> {
    serde_json::to_string(entry)
        .map_err(|e| AuditError::io("encode a record for", layout.audit_log_path(), e.into()))
}

impl OpenLog {
    fn open(layout: &HomeLayout) -> Result<OpenLog, AuditError> {
        Ok(OpenLog {
            head: open_head(layout)?,
            log: None,
        })
    }

    /// Take the home's audit lock: the `flock` of `audit/head`, of the
    /// file at that path now. A head removed (or replaced) while this
    /// process held it open is a lock nobody else takes, so the file
    /// held is compared with the path's once locked, and reopened when
    /// they differ (the lock-file pattern).
    fn lock(&mut self, layout: &HomeLayout) -> Result<(), AuditError> {
        let path = layout.audit_head_path();
        for _ in 0..16 {
            flock_exclusive(&self.head, &path)?;
            let same = match (self.head.metadata(), std::fs::symlink_metadata(&path)) {
                (Ok(held), Ok(at_path)) => {
                    held.dev() == at_path.dev() && held.ino() == at_path.ino()
                }
                _ => false,
            };
            if same {
                return Ok(());
            }
            let _ = rustix::fs::flock(&self.head, FlockOperation::Unlock);
            self.head = open_head(layout)?;
        }
        Err(AuditError::io(
            "lock",
            path,
            std::io::Error::other("the head is replaced again and again while being locked"),
        ))
    }

    /// Steps 1-5 of the module docs for each of `records` (its config and
    /// its entry's JSON), in order, under one taking of the home's audit
    /// lock (one head read, one check of the files); a `repair` record
    /// first when due, a `gap` record first when records could not be
    /// written before. Each line is still written whole in one `write`, and
    /// the head after it, so a crash leaves exactly what it leaves with one
    /// record at a time. Stops at the first record that cannot be written.
    fn append_locked(
        &mut self,
        layout: &HomeLayout,
        unwritten: &mut Option<Unwritten>,
        records: &[(&AuditConfig, &str)],
    ) -> Appended {
        let mut appended = Appended {
            lines: Vec::with_capacity(records.len() + 2),
            records_written: 0,
            error: None,
        };
        if let Err(e) = self.locked(layout, unwritten, records, &mut appended) {
            appended.error = Some(e);
        }
        appended
    }

    /// [`OpenLog::append_locked`]'s work, its lines gathered in `appended`
    /// as they are written.
    fn locked(
        &mut self,
        layout: &HomeLayout,
        unwritten: &mut Option<Unwritten>,
        records: &[(&AuditConfig, &str)],
        appended: &mut Appended,
    ) -> Result<(), AuditError> {
        let Some((first_config, _)) = records.first() else {
            return Ok(());
        };
        self.lock(layout)?;
        let OpenLog { head: lock, log } = self;
        let lock: &File = lock;
        let unlock = Unlock(lock);
        let head_path = layout.audit_head_path();
        let seen = Head::read(lock).map_err(|e| AuditError::io("read", &head_path, e))?;
        let size = current_log(log, layout)?
            .metadata()
            .map_err(|e| AuditError::io("read", layout.audit_log_path(), e))?
            .len();
        let mut head = match seen {
            // A head at the last record number cannot be appended to; only
            // a hand makes one, and the repair says so.
            Some(head) if head.size == size && head.seq < u64::MAX => head,
            seen => {
                let (mut head, repair) = rebuild(layout, current_log(log, layout)?, seen.as_ref())?;
                if let Some(repair) = repair {
                    if !repair.after_crash() {
                        tracing::error!(
                            "the audit log is not as its head says: {}; recorded",
                            repair.reason
                        );
                    }
                    let mut entry = Entry::now(Event::Repair);
                    entry.repair = Some(repair);
                    let json = encode(layout, &entry)?;
                    let line = write_line(lock, log, layout, first_config, &mut head, &json)?;
                    appended.lines.push((0, line));
                }
                head
            }
        };
        let noted = Unwritten::read(lock);
        let noted_any = noted.is_some();
        if let Some(missing) = merged(noted, unwritten.clone()) {
            let mut entry = Entry::now(Event::Gap);
            entry.gap = Some(Gap {
                records: missing.records,
                since: missing.since,
                error: missing.error,
            });
            let json = encode(layout, &entry)?;
            let line = write_line(lock, log, layout, first_config, &mut head, &json)?;
            appended.lines.push((0, line));
            *unwritten = None;
            if noted_any && let Err(e) = Unwritten::clear(lock) {
                // The next writer says it again: counted twice, never lost.
                tracing::warn!("the note of records not written could not be cleared: {e}");
            }
        }
        for (index, (config, entry_json)) in records.iter().enumerate() {
            let line = write_line(lock, log, layout, config, &mut head, entry_json)?;
            appended.lines.push((index, line));
            appended.records_written = index + 1;
        }
        drop(unlock);
        Ok(())
    }
}

/// What [`OpenLog::append_locked`] wrote.
struct Appended {
    /// Each line written, with the index of the record it was written for
    /// (a `repair` or `gap` record goes with the first).
    lines: Vec<(usize, String)>,
    /// How many of the records were written (the rest were not tried when
    /// `error` is set: the record at this index failed).
    records_written: usize,
    error: Option<AuditError>,
}

/// Open (creating) `audit/head`, and the folder, through no link.
fn open_head(layout: &HomeLayout) -> Result<File, AuditError> {
    let dir = layout.audit_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| AuditError::io("create", &dir, e))?;
    let path = layout.audit_head_path();
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .map_err(|e| AuditError::io("open", &path, e))
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
    let full = || {
        AuditError::io(
            "append to",
            layout.audit_log_path(),
            std::io::Error::other(
                "the head's record number or size is at its maximum; the head was changed by hand",
            ),
        )
    };
    let seq = head.seq.checked_add(1).ok_or_else(full)?;
    let mut line = record::line(seq, &head.hash, entry_json);
    line.push('\n');
    let bytes = line.len() as u64;
    if head.size > 0 && head.size.saturating_add(bytes) > config.max_file_bytes {
        rotate(log, layout, head)?;
    }
    let size = head.size.checked_add(bytes).ok_or_else(full)?;
    let path = layout.audit_log_path();
    // One write of the whole line; `write_all` goes on only after a short
    // write (a full disk), whose torn end the next writer cuts off.
    // The file held: it was checked to be the one at the path once the
    // lock was taken (and replaced at a rotation), and under the lock no
    // writer of the home changes it; a check per line would only repeat
    // that one for every record of a batch.
    let mut writer: &File = match log {
        Some(held) => held,
        None => current_log(log, layout)?,
    };
    writer
        .write_all(line.as_bytes())
        .map_err(|e| AuditError::io("append to", &path, e))?;
    line.pop();
    head.seq = seq;
    head.hash = record::sha256_hex(line.as_bytes());
    head.size = size;
    head.write(lock)
        .map_err(|e| AuditError::io("write", layout.audit_head_path(), e))?;
    Ok(line)
}

/// `audit.jsonl` becomes `audit-<n>.jsonl`, `n` one past both the head's
/// generation and the newest rotated file (a name taken already, say by a
/// file left there by hand, is skipped, never overwritten); a new one
/// starts empty. The chain goes on: `head` still names the last record.
///
/// A rename that fails (the file made append-only, say) is a warning and
/// the record goes into `audit.jsonl` past its size: a record lost to a
/// rotation would cost more than a file too large.
fn rotate(log: &mut Option<File>, layout: &HomeLayout, head: &mut Head) -> Result<(), AuditError> {
    let newest = files::rotated(layout)?
        .last()
        .and_then(|f| f.rotated)
        .unwrap_or(0);
    let path = layout.audit_log_path();
    let mut next = head.generation.max(newest).checked_add(1);
    let mut tries = 0;
    let renamed = loop {
        let Some(n) = next else {
            break Err(std::io::Error::other("no rotation number is left"));
        };
        let rotated = layout.rotated_audit_log_path(n);
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            &path,
            rustix::fs::CWD,
            &rotated,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => break Ok(n),
            Err(rustix::io::Errno::EXIST) if tries < 64 => {
                tries += 1;
                next = n.checked_add(1);
            }
            Err(e) => break Err(e.into()),
        }
    };
    match renamed {
        Ok(n) => {
            *log = Some(open_log(&path)?);
            head.generation = n;
            head.size = 0;
        }
        Err(e) => tracing::warn!(
            "the audit log {} could not be rotated ({e}); the record goes into it all the same",
            path.display()
        ),
    }
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

/// Take the exclusive `flock` of `file`.
fn flock_exclusive(file: &File, path: &Path) -> Result<(), AuditError> {
    loop {
        match rustix::fs::flock(file, FlockOperation::LockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(AuditError::io("lock", path, e.into())),
        }
    }
}

/// Releases the `flock` of the head when dropped.
struct Unlock<'a>(&'a File);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, FlockOperation::Unlock);
    }
}

/// The chain fields of a line, read alone.
#[derive(Deserialize)]
struct ChainOnly {
    seq: u64,
    prev: String,
}

/// The last record of the log, as a writer repairing it sees it.
#[derive(Debug)]
struct LastRecord {
    /// Its `seq` and `prev`; `None` when the line is no record.
    chain: Option<(u64, String)>,
    hash: String,
    /// Whether it is in `audit.jsonl` (else the newest rotated file).
    in_current: bool,
    /// Its bytes with the newline.
    bytes: u64,
}

/// The head as the files say it is, after cutting a torn last line off
/// `log` (the open `audit.jsonl`); and what to record about the repair,
/// when there was one. `seen` is the head as it was read (`None`: none).
///
/// Only what a crash leaves is repaired as such (`RepairFound::after_crash`):
/// a torn line after the head's record, one whole record after it chained
/// from it, a rotation under way. Anything else (records the head names
/// gone, a last record that is not the head's, a head gone) is repaired
/// too, so calls go on being recorded, but the repair record says what
/// was found and keeps the old head's record number and hash, and
/// `verify` reports the log as not intact from then on.
fn rebuild(
    layout: &HomeLayout,
    log: &File,
    seen: Option<&Head>,
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
    let last_of = |line: &[u8], in_current: bool| LastRecord {
        chain: serde_json::from_slice::<ChainOnly>(line)
            .ok()
            .map(|c| (c.seq, c.prev)),
        hash: record::sha256_hex(line),
        in_current,
        bytes: line.len() as u64 + 1,
    };
    let last = match files::last_line(&content[..whole]) {
        Some(line) => Some(last_of(line, true)),
        None => match rotated.last() {
            Some(file) => {
                let tail =
                    std::fs::read(&file.path).map_err(|e| AuditError::io("read", &file.path, e))?;
                files::last_line(&tail).map(|line| last_of(line, false))
            }
            None => None,
        },
    };
    let whole = whole as u64;
    let head = Head {
        generation,
        seq: match &last {
            Some(LastRecord {
                chain: Some((seq, _)),
                ..
            }) => *seq,
            Some(_) => seen.map_or(0, |h| h.seq),
            None => 0,
        },
        size: whole,
        hash: last
            .as_ref()
            .map_or_else(|| record::GENESIS.to_owned(), |l| l.hash.clone()),
    };
    let Some(found) = what_was_found(seen, last.as_ref(), &rotated, generation, whole, torn_bytes)
    else {
        return Ok((head, None));
    };
    let log_seq = last.as_ref().and_then(|l| l.chain.as_ref()).map(|c| c.0);
    let head_seq = seen.map(|h| h.seq);
    let named =
        |seq: Option<u64>| seq.map_or_else(|| "no record".to_owned(), |s| format!("record {s}"));
    let reason = match found {
        RepairFound::TornTail => {
            "a torn last line (a writer stopped in the middle of a record) was cut off".to_owned()
        }
        RepairFound::HeadBehind => {
            "the head was one record behind the log (a writer stopped between a record and the head); it was rebuilt from the log".to_owned()
        }
        RepairFound::Rotation => {
            "a rotation was under way (a writer stopped during it); the head was rebuilt from the log".to_owned()
        }
        RepairFound::Lost => format!(
            "records at the end were lost or removed: the head named record {}, the log ends at {}",
            head_seq.unwrap_or_default(),
            named(log_seq)
        ),
        RepairFound::Changed => format!(
            "the log's end is not what its head says (the head named record {} in generation {}, the log ends at {} in generation {generation}): records were changed, added or removed by hand",
            head_seq.unwrap_or_default(),
            seen.map_or(0, |h| h.generation),
            named(log_seq)
        ),
        RepairFound::HeadMissing => format!(
            "the head was missing or unreadable while the log holds records (up to {}): records removed from the end cannot be ruled out",
            named(log_seq)
        ),
    };
    let repair = Repair {
        reason,
        found: Some(found),
        torn_bytes,
        head_seq,
        head_hash: if found.after_crash() {
            None
        } else {
            seen.map(|h| h.hash.clone())
        },
        log_seq,
    };
    Ok((head, Some(repair)))
}

/// What a writer found where the head said the log ends; `None` when
/// there is nothing to say (a log that never had a record).
fn what_was_found(
    seen: Option<&Head>,
    last: Option<&LastRecord>,
    rotated: &[files::LogFile],
    generation: u64,
    whole: u64,
    torn_bytes: u64,
) -> Option<RepairFound> {
    let Some(head) = seen else {
        return match last {
            None if torn_bytes > 0 => Some(RepairFound::TornTail),
            None => None,
            // The first record written, its head not yet: a crash
            // between the two.
            Some(l)
                if rotated.is_empty()
                    && l.in_current
                    && whole == l.bytes
                    && l.chain
                        .as_ref()
                        .is_some_and(|(seq, prev)| *seq == 1 && prev == record::GENESIS) =>
            {
                Some(RepairFound::HeadBehind)
            }
            Some(_) => Some(RepairFound::HeadMissing),
        };
    };
    let Some(last) = last else {
        return Some(RepairFound::Lost);
    };
    let Some((seq, prev)) = &last.chain else {
        return Some(RepairFound::Changed);
    };
    let same_generation = generation == head.generation;
    let rotated_since = head.generation.checked_add(1) == Some(generation);
    if *seq == head.seq && last.hash == head.hash {
        if same_generation && last.in_current && whole == head.size {
            return Some(RepairFound::TornTail);
        }
        if rotated_since && !last.in_current {
            return Some(RepairFound::Rotation);
        }
        return Some(RepairFound::Changed);
    }
    if head.seq.checked_add(1) == Some(*seq) && *prev == head.hash && last.in_current {
        let behind = (same_generation && head.size.checked_add(last.bytes) == Some(whole))
            || (rotated_since && whole == last.bytes);
        return Some(if behind {
            RepairFound::HeadBehind
        } else {
            RepairFound::Changed
        });
    }
    if *seq < head.seq {
        return Some(RepairFound::Lost);
    }
    Some(RepairFound::Changed)
}

mod queue;

#[cfg(test)]
mod tests;
