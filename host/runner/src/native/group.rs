//! A module's process group, killed only while its leader is unreaped.
//!
//! The host kills a call's whole process group (`kill(-pgid)`) whenever the
//! call ends. The group id is the leader's pid, and a pid is free for reuse
//! the moment its process is reaped: a kill sent after the reap can reach
//! an unrelated group that got the same number (with `pid_max` 32768 that
//! is a matter of time on a busy host). So the order is fixed here, for
//! every path (answer, error, timeout, cancellation, a warm process found
//! dead, drop):
//!
//! 1. learn that the leader exited *without reaping it*: its pidfd (from
//!    `clone(CLONE_PIDFD)`) turns readable, `waitid(P_PIDFD, WNOWAIT)`;
//! 2. kill the group, while the zombie leader still holds the pgid;
//! 3. reap the leader.
//!
//! A lock makes 2 and 3 one step against any other kill: [`Leader::kill`]
//! signals the group only while the leader is unreaped, and the reap
//! happens under the same lock, so no kill can slip in after it.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitIdStatus, kill_process_group};

/// The leader of a module's process group: its pgid and pidfd.
#[derive(Debug)]
pub struct Leader {
    pgid: Pid,
    pidfd: OwnedFd,
    /// Set once the leader is reaped; the pgid is then no longer ours.
    reaped: Mutex<bool>,
}

/// Kills the group when dropped (a cancelled call, a discarded process).
#[derive(Debug)]
pub struct Group {
    leader: Arc<Leader>,
}

impl Group {
    /// The group led by `pid` (its own group leader), known by `pidfd`.
    pub fn new(pid: Pid, pidfd: OwnedFd) -> Group {
        Group {
            leader: Arc::new(Leader {
                pgid: pid,
                pidfd,
                reaped: Mutex::new(false),
            }),
        }
    }

    /// The leader, for a waiter in another task or thread.
    pub fn leader(&self) -> Arc<Leader> {
        Arc::clone(&self.leader)
    }

    /// Kill the group (see [`Leader::kill`]).
    pub fn kill(&self) {
        self.leader.kill();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.leader.kill();
    }
}

impl Leader {
    /// SIGKILL the whole group, if and only if the leader is not reaped yet
    /// (then the pgid is still its own). A no-op afterwards.
    pub fn kill(&self) {
        let reaped = self.lock();
        if !*reaped {
            self.kill_group();
        }
    }

    /// Block until the leader has exited, without reaping it; `false` when
    /// `timeout` passed first (`None`: wait as long as it takes).
    pub fn wait_exit(&self, timeout: Option<Duration>) -> std::io::Result<bool> {
        let timeout_ms = timeout.map_or(-1, |t| {
            libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX)
        });
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: poll on one pollfd on the stack; a pidfd is readable
            // once its process has exited.
            #[allow(unsafe_code)]
            let ready = unsafe { libc::poll(&raw mut poll, 1, timeout_ms) };
            match ready {
                0 => return Ok(false),
                n if n > 0 => return Ok(true),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Whether the leader has exited (reaped or not), asked of its pidfd
    /// without waiting.
    pub(crate) fn has_exited(&self) -> bool {
        self.wait_exit(Some(Duration::ZERO)).unwrap_or(false)
    }

    /// Kill the group, then reap the leader, which must have exited (see
    /// [`Self::wait_exit`]): its exit status. Both under the lock, so no
    /// kill follows the reap.
    pub fn kill_and_reap(&self) -> std::io::Result<ExitStatus> {
        let mut reaped = self.lock();
        if *reaped {
            return Err(std::io::Error::other("the leader was already reaped"));
        }
        self.kill_group();
        let status = loop {
            match rustix::process::waitid(WaitId::PidFd(self.pidfd.as_fd()), WaitIdOptions::EXITED)
            {
                Ok(Some(status)) => break status,
                Ok(None) => return Err(std::io::Error::other("waitid returned no status")),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        };
        *reaped = true;
        Ok(exit_status(&status))
    }

    /// Wait for the leader to exit, kill its group, reap it, blocking the
    /// calling thread.
    pub(crate) fn wait_kill_reap(&self) -> std::io::Result<ExitStatus> {
        self.wait_exit(None)?;
        self.kill_and_reap()
    }

    /// [`Self::wait_kill_reap`] on the tokio runtime: the leader's pidfd is
    /// polled with the runtime's other descriptors, so a call's exit costs
    /// no thread and no hand-off between threads (it usually arrives in
    /// the same wake-up as the end of its stdout). To be run on a runtime
    /// with I/O enabled.
    ///
    /// Never leaves a zombie: the wait holds a guard from the moment it is
    /// made, so one dropped before it reaped (never polled, or its runtime
    /// shut down meanwhile) kills the group and reaps on a thread of its
    /// own; a pidfd the runtime cannot poll is waited for on the blocking
    /// pool; and the guard stands down only once the leader is reaped.
    pub(crate) fn reap_when_exited(
        self: Arc<Self>,
    ) -> impl Future<Output = std::io::Result<ExitStatus>> + Send + 'static {
        let unreaped = ReapIfDropped(Some(Arc::clone(&self)));
        async move {
            // A pidfd turns readable once its process has exited, and stays
            // so: one readiness is the exit.
            // SAFETY: the descriptor is the leader's own, open for as long
            // as `self` lives, which outlives the registration (dropped at
            // the end of this statement).
            #[allow(unsafe_code)]
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    self.pidfd.as_fd(),
                    tokio::io::Interest::READABLE,
                )
            };
            let exited = match registered {
                Ok(pidfd) => pidfd.readable().await.is_ok(),
                Err(_) => false,
            };
            let status = if exited {
                self.kill_and_reap()
            } else {
                let leader = Arc::clone(&self);
                tokio::task::spawn_blocking(move || leader.wait_kill_reap())
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            };
            // Not reaped (the blocking pool shut down under the wait, say):
            // the guard's thread kills and reaps.
            if status.is_ok() {
                unreaped.disarm();
            }
            status
        }
    }

    fn kill_group(&self) {
        #[cfg(test)]
        tests::record_kill(self.pgid);
        // ESRCH (nobody left in the group) cannot happen while the leader
        // is unreaped; any error only means there was nothing to kill.
        let _ = kill_process_group(self.pgid, Signal::KILL);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        // A bool cannot be left inconsistent by a panic.
        self.reaped.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Armed while [`Leader::reap_when_exited`] has not reaped: dropped armed,
/// it kills the group and reaps the leader on a thread of its own.
struct ReapIfDropped(Option<Arc<Leader>>);

impl ReapIfDropped {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for ReapIfDropped {
    fn drop(&mut self) {
        let Some(leader) = self.0.take() else {
            return;
        };
        leader.kill();
        // The leader dies of the kill; waiting for that is the thread's
        // business, not the dropping runtime's.
        let reaping = std::thread::Builder::new()
            .name("modhost-reaper".into())
            .spawn(move || {
                let _ = leader.wait_kill_reap();
            });
        if let Err(e) = reaping {
            tracing::warn!("no thread to reap a module's process: {e}");
        }
    }
}

/// A `waitid` status as the `wait` status std's `ExitStatus` is built from.
fn exit_status(status: &WaitIdStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    let raw = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(signal)) => (signal & 0x7f) | if status.dumped() { 0x80 } else { 0 },
        (None, None) => 0,
    };
    ExitStatus::from_raw(raw)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    /// For every pgid killed in this test process: the state of its leader
    /// (`/proc/<pid>/stat`'s third field) at the moment of the kill, or
    /// `'-'` when the pid did not exist.
    static KILLS: Mutex<Option<HashMap<i32, Vec<char>>>> = Mutex::new(None);

    pub(super) fn record_kill(pgid: Pid) {
        let pid = pgid.as_raw_nonzero().get();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .unwrap_or('-');
        let mut kills = KILLS.lock().unwrap_or_else(|e| e.into_inner());
        kills
            .get_or_insert_with(HashMap::new)
            .entry(pid)
            .or_default()
            .push(state);
    }

    /// The leader states seen at each kill of `pid`'s group.
    pub(crate) fn kills_of(pid: i32) -> Vec<char> {
        let kills = KILLS.lock().unwrap_or_else(|e| e.into_inner());
        kills
            .as_ref()
            .and_then(|k| k.get(&pid))
            .cloned()
            .unwrap_or_default()
    }

    fn start(script: &str) -> (Pid, Group) {
        let child = modhost_sandbox::spawn::spawn(
            Path::new("/bin/sh"),
            std::iter::once(("PATH".into(), "/usr/bin:/bin".into())),
            None,
            None,
        )
        .unwrap();
        let mut stdin = std::fs::File::from(child.stdin);
        std::io::Write::write_all(&mut stdin, script.as_bytes()).unwrap();
        drop(stdin);
        let pid = Pid::from_raw(child.pid).unwrap();
        (pid, Group::new(pid, child.pidfd))
    }

    /// The start time of `pid` (field 22 of its `/proc` stat), which tells
    /// a process from a later one given the same number; `None` once the
    /// pid is gone (reaped).
    fn started_at(pid: Pid) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).ok()?;
        let (_, rest) = stat.rsplit_once(") ")?;
        rest.split_whitespace().nth(19)?.parse().ok()
    }

    fn one_thread_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// An `exit 7` leader, waited for and reaped by `reap`: every kill of
    /// its group found it a zombie (the pgid still its own), and none
    /// followed the reap.
    fn reaped_after_its_group_was_killed(reap: impl FnOnce(Arc<Leader>) -> ExitStatus) {
        let (pid, group) = start("exit 7\n");
        let status = reap(group.leader());
        assert_eq!(status.code(), Some(7));
        let raw = pid.as_raw_nonzero().get();
        assert_eq!(
            kills_of(raw),
            vec!['Z'],
            "the group was killed before the reap"
        );
        assert_eq!(started_at(pid), None, "the leader was not reaped");
        // After the reap, the pgid may belong to anyone: nothing is sent.
        group.kill();
        drop(group);
        assert_eq!(
            kills_of(raw),
            vec!['Z'],
            "a reaped leader's pgid was signalled"
        );
    }

    #[test]
    fn an_exited_leader_is_killed_as_a_zombie_and_then_never_again() {
        reaped_after_its_group_was_killed(|leader| {
            assert!(leader.wait_exit(Some(Duration::from_secs(10))).unwrap());
            leader.kill_and_reap().unwrap()
        });
    }

    #[test]
    fn a_wait_on_the_runtime_kills_the_group_while_the_leader_is_a_zombie_then_reaps() {
        reaped_after_its_group_was_killed(|leader| {
            one_thread_runtime()
                .block_on(leader.reap_when_exited())
                .unwrap()
        });
    }

    /// The attack: a host (or a library user) whose runtime shuts down
    /// while a module runs. The wait for the module's exit is dropped with
    /// the runtime; the module must still be killed and reaped, not left
    /// running or as a zombie for the host's life.
    #[test]
    fn a_wait_dropped_with_its_runtime_still_kills_and_reaps_the_leader() {
        let (pid, group) = start("sleep 30\n");
        let born = started_at(pid).expect("the module runs");
        let runtime = one_thread_runtime();
        let waiting = runtime.spawn(group.leader().reap_when_exited());
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
        assert!(!waiting.is_finished(), "the module exited on its own");
        drop(runtime);
        assert_reaped(pid, born);
        drop(group);
    }

    /// The same attack, sooner: the runtime goes before the wait ever ran
    /// (a current-thread runtime whose `block_on` ends in the poll that
    /// started the module).
    #[test]
    fn a_wait_dropped_before_it_ever_ran_still_kills_and_reaps_the_leader() {
        let (pid, group) = start("sleep 30\n");
        let born = started_at(pid).expect("the module runs");
        let runtime = one_thread_runtime();
        runtime.block_on(async {
            tokio::spawn(group.leader().reap_when_exited());
        });
        drop(runtime);
        assert_reaped(pid, born);
        drop(group);
    }

    /// Wait (10 s at most) until the process `pid` born at `born` is gone
    /// from the process table, zombie included.
    fn assert_reaped(pid: Pid, born: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while started_at(pid) == Some(born) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_ne!(
            started_at(pid),
            Some(born),
            "the module is still running, or a zombie, after its runtime shut down"
        );
        let states = kills_of(pid.as_raw_nonzero().get());
        assert!(
            !states.is_empty() && states.iter().all(|&s| s != '-'),
            "{states:?}"
        );
    }

    #[test]
    fn a_running_leader_is_killed_then_reaped() {
        let (pid, group) = start("sleep 30\n");
        let leader = group.leader();
        assert!(!leader.wait_exit(Some(Duration::from_millis(50))).unwrap());
        group.kill();
        assert!(leader.wait_exit(Some(Duration::from_secs(10))).unwrap());
        let status = leader.kill_and_reap().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        let states = kills_of(pid.as_raw_nonzero().get());
        assert!(states.iter().all(|&s| s != '-'), "{states:?}");
    }
}
