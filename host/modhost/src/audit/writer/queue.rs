//! The way from the calls to the audit writer thread: records gathered in
//! order, taken by the thread a batch at a time.
//!
//! Design decisions:
//!
//! - **One wake per batch, not per call.** A channel wakes its receiver at
//!   every send that finds it asleep, and a writer faster than the calls
//!   is asleep at nearly every send: on a busy two-core server that futex
//!   wake and the thread switches it causes cost more than writing the
//!   record (profiled: about 6 % of the server's CPU at 4,000 calls/s).
//!   Here a submitter wakes the thread only when it is idle (it found
//!   nothing to write); after each batch the thread lingers
//!   ([`LINGER`]) before taking the next, so the records of the calls that
//!   end meanwhile are taken, and written under one lock of the log, at
//!   once. A record so reaches the log at most about `LINGER` later than
//!   it would have (a few milliseconds: a host killed outright could
//!   already lose every record still queued, up to [`QUEUE`] of them on a
//!   busy machine; a host that ends normally writes them all, and
//!   [`Queue::flush`] waits for them).
//! - **Bounded:** a submitter that finds [`QUEUE`] jobs waiting waits for
//!   room (no record is ever dropped).

use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::super::record::Entry;
use super::super::settings::AuditConfig;

/// The most jobs waiting for the writer thread.
pub(super) const QUEUE: usize = 1024;

/// How long the writer thread waits after a batch before it takes the
/// next: the bound on how much later a record is written for batching.
pub(super) const LINGER: Duration = Duration::from_millis(2);

/// What the writer thread is given.
pub(super) enum Job {
    Record(Box<(AuditConfig, Entry)>),
    /// Answered once every job before it is done.
    Flush(SyncSender<()>),
}

/// The jobs between the submitters and the writer thread.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pending: Mutex<Pending>,
    /// The idle writer thread waits here.
    work: Condvar,
    /// Submitters that found the queue full wait here.
    room: Condvar,
}

#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    /// The thread found nothing to write and waits on `work`.
    writer_idle: bool,
    /// Submitters waiting on `room`.
    waiting_for_room: usize,
    /// No more jobs come (the log is dropped): the thread writes what is
    /// left and ends.
    closed: bool,
    /// The thread is gone (it ended or panicked): jobs are not taken.
    writer_gone: bool,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("jobs", &self.jobs.len())
            .field("writer_idle", &self.writer_idle)
            .field("closed", &self.closed)
            .field("writer_gone", &self.writer_gone)
            .finish()
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `job` after every job before it, waiting while the queue is
    /// full; the job back when no thread takes it any more.
    pub(super) fn push(&self, job: Job) -> Result<(), Job> {
        let mut pending = self.lock();
        while pending.jobs.len() >= QUEUE && !pending.writer_gone {
            pending.waiting_for_room += 1;
            pending = self.room.wait(pending).unwrap_or_else(|e| e.into_inner());
            pending.waiting_for_room -= 1;
        }
        if pending.writer_gone {
            return Err(job);
        }
        pending.jobs.push(job);
        // Only an idle thread is woken: one that is writing or lingering
        // takes this job with its next batch.
        if pending.writer_idle {
            pending.writer_idle = false;
            self.work.notify_one();
        }
        Ok(())
    }

    /// Wait until every job queued so far is done (or the thread is gone).
    pub(super) fn flush(&self) {
        let (done, written) = sync_channel(1);
        if self.push(Job::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }

    /// No more jobs: the thread writes what is queued and ends.
    pub(super) fn close(&self) {
        let mut pending = self.lock();
        pending.closed = true;
        self.work.notify_one();
    }

    /// The writer thread's loop: take every job queued, in order, hand
    /// them to `write`, linger, again; until closed and empty.
    pub(super) fn serve(self: &Arc<Queue>, mut write: impl FnMut(&mut Vec<Job>)) {
        // Whatever way the thread ends, submitters stop waiting for it.
        let _gone = Gone(Arc::clone(self));
        let mut batch = Vec::new();
        loop {
            let closed = {
                let mut pending = self.lock();
                while pending.jobs.is_empty() && !pending.closed {
                    pending.writer_idle = true;
                    pending = self.work.wait(pending).unwrap_or_else(|e| e.into_inner());
                }
                pending.writer_idle = false;
                if pending.jobs.is_empty() {
                    return;
                }
                std::mem::swap(&mut batch, &mut pending.jobs);
                if pending.waiting_for_room > 0 {
                    self.room.notify_all();
                }
                pending.closed
            };
            write(&mut batch);
            batch.clear();
            if !closed {
                std::thread::sleep(LINGER);
            }
        }
    }
}

/// Marks the writer thread gone when dropped.
struct Gone(Arc<Queue>);

impl Drop for Gone {
    fn drop(&mut self) {
        let mut pending = self.0.lock();
        pending.writer_gone = true;
        // Flushes waiting in the queue are answered by their drop.
        pending.jobs.clear();
        self.0.room.notify_all();
    }
}
