//! The native transport: one OS process per call.
//!
//! Lifecycle of a call:
//!
//! 1. Spawn the executable (`spawn`) in its own process group, confined,
//!    with a cleared environment (only [`modhost_sandbox::environment::is_allowed_env`] passes: PATH, LANG,
//!    LC_*, TZ and the host's own `MODHOST_*`; never the caller's secrets),
//!    working directory the module's folder; or take the process a
//!    long-running host started ahead for this call ([`warm`]).
//! 2. Write the request line and `\n`, close stdin.
//! 3. Read stdout incrementally, counting every byte against the output cap;
//!    collect `progress`/`log` notifications (and forward them live), read
//!    the response, then on to the end of stdout (a short grace at most).
//!    stderr is drained concurrently into a bounded tail.
//! 4. Give the process a short grace to exit, then SIGKILL the whole group
//!    (grandchildren included) and reap; a long-running host answers a
//!    successful call first and does this in the background. The group is
//!    only ever signalled while its leader is unreaped ([`group`]): a
//!    waiter task polls the leader's pidfd on the runtime, learns of its
//!    exit without reaping it, kills the group, and only then reaps.
//!
//! Design decisions:
//!
//! - **The group, not the pid, is the unit of cleanup.** A module may fork
//!   helpers; killing only the leader would leave them holding our pipes or
//!   running on. Every exit path (response, timeout, output cap, crash,
//!   cancellation by dropping the future) ends with SIGKILL to `-pgid`;
//!   cancellation goes through [`group::Group`]'s `Drop`.
//! - **A response ends the read.** We never wait for stdout EOF after the
//!   response: a grandchild holding stdout open must not hang the host.
//! - **Strict framing, shared.** Lines are judged by `super::framing`, as
//!   the wasm transport's are: one response, nothing after it, unique keys,
//!   unknown notifications ignored with a host warning.
//! - **The request is written while stdout is read.** A module may answer
//!   before it has read all of a large request; its answer ends the call.
//! - **Read to the end after the response** (bounded by `EXIT_GRACE`),
//!   except in a long-running host that answers a successful call at once
//!   and ends its process in the background: there only what arrived with
//!   the response is checked.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::{Call, CallLimits, Exchange, NotificationSink, RunError, framing};

pub mod group;
mod process;
pub mod resident;
pub mod warm;
#[cfg(test)]
mod warm_tests;

use group::Group;
use process::{ExitReceiver, TailBuffer, start};

pub use process::{SpawnSpec, Spawned, Started, Streams, start_blocking};
pub use warm::WarmPool;

pub use super::framing::REQUEST_ID;

/// How long a process that answered may take to exit before its group is killed.
const EXIT_GRACE: Duration = Duration::from_millis(250);

/// How long the stderr drain may run on once the group is dead.
const STDERR_DRAIN: Duration = Duration::from_millis(100);

/// Run one call of the native executable at `program`: on a process from
/// `warm` when one is waiting for this call's spec, else on one started now.
///
/// Only a call with [`Call::start_ahead`] (its capability is allowed
/// outright by the host's policy) is served from, or followed by, processes
/// started ahead; any other call starts cold, after its approval. A call
/// with network always starts cold: its process carries the proxy (port
/// and token) of that call alone; so does a call with secrets, whose values
/// are variables of its own process only.
pub async fn run(
    program: &Path,
    call: &Call<'_>,
    notifications: Option<&NotificationSink>,
    warm: Option<&WarmPool>,
) -> Result<Exchange, RunError> {
    let spec = SpawnSpec::of(program, call);
    let ahead =
        warm.filter(|_| call.start_ahead && call.network.is_none() && call.secrets.is_empty());
    let waiting = match ahead {
        Some(pool) => pool.take(&spec).await,
        None => None,
    };
    let started = match waiting {
        Some(started) => started,
        // The start is within the deadline too: it may queue for a spawner
        // thread, or block on a granted path. Dropped at the deadline, it
        // leaves no process behind (`process::spawn_off_runtime`).
        None => {
            match tokio::time::timeout(call.limits.deadline, start(&spec, call.secrets)).await {
                Ok(started) => started?,
                Err(_) => {
                    return Err(RunError::Timeout {
                        deadline_ms: call.limits.deadline.as_millis() as u64,
                        stderr_tail: String::new(),
                    });
                }
            }
        }
    };
    let exchange = answer(started, call, notifications, warm).await;
    // Only a spec that started once is worth starting ahead: a spawn or
    // confinement failure would only fail again, in the background.
    if let Some(pool) = ahead {
        pool.refill(&spec);
    }
    exchange
}

/// Send the request to a started process, read its answer, and end it.
async fn answer(
    started: Started,
    call: &Call<'_>,
    notifications: Option<&NotificationSink>,
    finish_in_background: Option<&WarmPool>,
) -> Result<Exchange, RunError> {
    let Started {
        guard,
        exit: mut exit_rx,
        stdin,
        stdout,
        stderr: stderr_task,
        tail,
        mut host_warnings,
        stamp: _,
        memory,
    } = started;
    let limits = call.limits;
    let mut exited: Option<ExitStatus> = None;
    let mut lingered = false;
    let reading = Reading {
        exit: &mut exit_rx,
        exited: &mut exited,
        lingered: &mut lingered,
        guard: &guard,
        max_output_bytes: limits.max_output_bytes,
        // A long-running host answers at the response (see below); every
        // other call reads on to the end of stdout, so a second response
        // or any line after the response is caught.
        read_after_response: finish_in_background.is_none(),
    };
    let converse = async {
        // The request is written while stdout is read: a module may answer
        // before it has read all of a large request (or without reading it),
        // and then its answer must end the call, not a write that blocks
        // until the deadline.
        let write = write_request(stdin, call.request_line);
        let read = converse(reading, stdout, notifications);
        tokio::pin!(write, read);
        let mut written = false;
        loop {
            tokio::select! {
                () = &mut write, if !written => written = true,
                outcome = &mut read => break outcome,
            }
        }
    };
    let outcome = match tokio::time::timeout(limits.deadline, converse).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::Timeout),
    };

    let end = Ending {
        guard,
        exit: exit_rx,
        exited,
        stderr: stderr_task,
        tail,
        memory: memory.clone(),
    };
    // A long-running host answers a successful call at once and ends its
    // process in the background: a module's exit (freeing its memory,
    // unmapping its binary) can take longer than its answer did. Failures
    // wait, so their report carries the whole stderr tail and exit status.
    let outcome = match (finish_in_background, outcome) {
        (Some(pool), Ok(answer)) if answer.response.outcome.is_ok() => {
            let stderr_tail = end.tail.lock().map(|t| t.text()).unwrap_or_default();
            pool.finish(end.finish(true));
            host_warnings.extend(answer.warnings);
            return Ok(Exchange {
                notifications: answer.notifications,
                response: answer.response,
                stderr_tail,
                host_warnings,
            });
        }
        (_, outcome) => outcome,
    };
    // A module that kept stdout open through the whole grace after its
    // response has had its grace: it is not given a second one to exit.
    let (status, stderr_tail) = end.finish(outcome.is_ok() && !lingered).await;
    // Asked once the group is dead: the kernel killed a process of the
    // call at its memory limit. Then the limit is how the call ended,
    // whatever that looked like from here (a crash, a timeout, the
    // module's error about a helper that died), unless it still answered.
    if let Some(memory) = memory.filter(|m| m.limit_was_hit()) {
        match &outcome {
            Ok(answer) if answer.response.outcome.is_ok() => host_warnings.push(format!(
                "a process of the call was killed at its memory limit ({}); the module answered all the same",
                modhost_sandbox::bytes_in_words(memory.limit())
            )),
            _ => {
                return Err(RunError::NativeMemoryLimit {
                    limit: memory.limit(),
                    stderr_tail,
                });
            }
        }
    }

    match outcome {
        Ok(answer) => {
            host_warnings.extend(answer.warnings);
            // The response stands; a failing exit after it is the host's
            // note, not the call's failure (PROTOCOL.md section 2).
            if let Some(status) = status.filter(|s| !s.success() && s.code().is_some()) {
                host_warnings.push(format!(
                    "the module exited with {} after answering; a module exits 0 once it has written its response",
                    describe_status(Some(status))
                ));
            }
            Ok(Exchange {
                notifications: answer.notifications,
                response: answer.response,
                stderr_tail,
                host_warnings,
            })
        }
        Err(failure) => Err(failure.into_error(&limits, status, stderr_tail)),
    }
}

/// What is left of a call once its conversation is over: a process group
/// to end and a stderr drain to finish.
struct Ending {
    guard: Group,
    exit: ExitReceiver,
    exited: Option<ExitStatus>,
    stderr: tokio::task::JoinHandle<()>,
    tail: Arc<Mutex<TailBuffer>>,
    /// The process's memory bound, held until its group is dead (its
    /// cgroup goes back to the pool then).
    memory: Option<modhost_sandbox::memory_cgroup::MemoryBound>,
}

impl Ending {
    /// End the group: after a response (`answered`) the leader gets a short
    /// grace to exit on its own first (a clean exit is the norm); then the
    /// whole group is killed and the leader reaped. Returns the exit status,
    /// when known, and the stderr tail.
    async fn finish(self, answered: bool) -> (Option<ExitStatus>, String) {
        let Ending {
            guard,
            mut exit,
            mut exited,
            stderr,
            tail,
            memory,
        } = self;
        if exited.is_none()
            && answered
            && let Ok(Ok(Ok(status))) = tokio::time::timeout(EXIT_GRACE, &mut exit).await
        {
            exited = Some(status);
        }
        // A no-op when the leader is already reaped (its waiter killed the
        // group just before); else the leader dies with its group and the
        // waiter reaps it.
        guard.kill();
        let status = match exited {
            Some(status) => Some(status),
            None => exit.await.ok().and_then(Result::ok),
        };
        let _ = tokio::time::timeout(STDERR_DRAIN, stderr).await;
        let stderr_tail = tail.lock().map(|t| t.text()).unwrap_or_default();
        drop(memory);
        (status, stderr_tail)
    }
}

/// Why a conversation ended without a response.
enum Failure {
    Timeout,
    OutputLimit,
    Bad(String),
    /// stdout closed before a response; the exit status if already known.
    NoResponse(Option<ExitStatus>),
}

impl Failure {
    /// The error a call that ended so reports, whether its process served
    /// one call or several (`resident.rs`); `status` is the exit status
    /// once its group is dead, when known.
    fn into_error(
        self,
        limits: &CallLimits,
        status: Option<ExitStatus>,
        stderr_tail: String,
    ) -> RunError {
        match self {
            Failure::Timeout => RunError::Timeout {
                deadline_ms: limits.deadline.as_millis() as u64,
                stderr_tail,
            },
            Failure::OutputLimit => RunError::OutputLimit {
                limit: limits.max_output_bytes,
                stderr_tail,
            },
            Failure::Bad(problem) => RunError::BadResponse {
                problem,
                stderr_tail,
            },
            Failure::NoResponse(exit) => RunError::Crashed {
                status: describe_status(exit.or(status)),
                stderr_tail,
            },
        }
    }
}

async fn write_request(mut stdin: pipe::Sender, line: &str) {
    // A module may exit (or close stdin) without reading: a broken pipe here is
    // not the error to report; what it wrote, or did not, is.
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    if let Err(e) = stdin.write_all(&bytes).await {
        tracing::debug!("writing the request: {e}");
    }
    drop(stdin);
}

/// What reading one call's stdout needs from its process.
struct Reading<'a> {
    exit: &'a mut ExitReceiver,
    exited: &'a mut Option<ExitStatus>,
    /// Set when stdout was still open when the grace after the response ran out.
    lingered: &'a mut bool,
    guard: &'a Group,
    max_output_bytes: u64,
    /// After the response, read on until stdout ends (bounded by
    /// [`EXIT_GRACE`]) so that anything written after it is refused.
    read_after_response: bool,
}

/// Read stdout until the response (and, when asked, on to its end), the
/// cap, or EOF.
async fn converse(
    reading: Reading<'_>,
    mut stdout: pipe::Receiver,
    sink: Option<&NotificationSink>,
) -> Result<modproto::framing::Answer, Failure> {
    let Reading {
        exit,
        exited,
        lingered,
        guard,
        max_output_bytes,
        read_after_response,
    } = reading;
    let mut lines = framing::Lines::default();
    let mut transcript = framing::transcript();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut total: u64 = 0;
    // Set once the response is read: how long the rest of stdout may take.
    let mut after: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        if transcript.answered() && after.is_none() {
            if !read_after_response {
                break;
            }
            after = Some(Box::pin(tokio::time::sleep(EXIT_GRACE)));
        }
        tokio::select! {
            read = stdout.read(&mut chunk) => {
                let n = match read {
                    Ok(n) => n,
                    Err(e) => return Err(Failure::Bad(format!("reading stdout failed: {e}"))),
                };
                if n == 0 {
                    // EOF: a last line without its newline still counts.
                    let rest = lines.take_rest();
                    if !rest.is_empty() {
                        framing::take_line(&mut transcript, sink, &rest).map_err(Failure::Bad)?;
                    }
                    break;
                }
                total += n as u64;
                if total > max_output_bytes {
                    return Err(Failure::OutputLimit);
                }
                lines
                    .push(&chunk[..n], |line| framing::take_line(&mut transcript, sink, line))
                    .map_err(Failure::Bad)?;
            }
            status = &mut *exit, if exited.is_none() => {
                // The leader is gone; helpers it left in the group must not
                // keep stdout open, so the group went too (the waiter kills
                // it before the reap; this kill is then a no-op). Reading
                // continues: the response may still sit in the pipe.
                *exited = status.ok().and_then(Result::ok);
                guard.kill();
                if exited.is_none() {
                    // The waiter failed; do not poll the spent channel again.
                    return Err(Failure::NoResponse(None));
                }
            }
            // A helper holding stdout open after the response must not
            // hold up the answer: the group is killed after the grace.
            () = async { after.as_mut().expect("armed").await }, if after.is_some() => {
                *lingered = true;
                break;
            }
        }
    }
    transcript.finish().ok_or(Failure::NoResponse(*exited))
}

fn describe_status(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => s.to_string(),
        },
        None => "exit status unknown".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::CallLimits;
    use crate::STDERR_TAIL_BYTES;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    pub(crate) fn call(line: &str, deadline_ms: u64, max: u64) -> Call<'_> {
        Call {
            request_line: line,
            limits: CallLimits {
                deadline: Duration::from_millis(deadline_ms),
                max_output_bytes: max,
                ..CallLimits::default()
            },
            grants: &[],
            executables: tools(),
            module_writes: &[],
            network: None,
            start_ahead: false,
            secrets: &[],
        }
    }

    /// The programs the test scripts run, granted as a capability's
    /// `spawns` would be: a confined module executes nothing else.
    pub(crate) fn tools() -> &'static [std::path::PathBuf] {
        static TOOLS: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();
        TOOLS.get_or_init(|| {
            ["sleep", "yes", "tr", "touch", "env", "cat"]
                .iter()
                .map(|t| Path::new("/usr/bin").join(t))
                .filter(|p| p.exists())
                .collect()
        })
    }

    pub(crate) fn write_grant(path: &Path) -> modhost_sandbox::Grant {
        modhost_sandbox::Grant {
            name: "out".into(),
            host: path.to_path_buf(),
            guest: path.display().to_string(),
            access: modproto::Access::ReadWrite,
        }
    }

    pub(crate) const REQ: &str = r#"{"jsonrpc":"2.0","id":1,"method":"describe"}"#;

    #[tokio::test]
    async fn answers_with_notifications() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "ok",
            r#"read line
echo '{"jsonrpc":"2.0","method":"progress","params":{"request_id":"r","progress":1}}'
echo 'oops' >&2
echo '{"jsonrpc":"2.0","id":1,"result":{"x":1}}'"#,
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let exchange = run(&module, &call(REQ, 5000, 1 << 20), Some(&tx), None)
            .await
            .unwrap();
        assert_eq!(exchange.response.outcome.unwrap()["x"], 1);
        assert_eq!(exchange.notifications.len(), 1);
        assert_eq!(rx.try_recv().unwrap().method, "progress");
        assert!(exchange.stderr_tail.contains("oops"));
    }

    #[tokio::test]
    async fn environment_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "env",
            r#"read line
if [ -n "$HOME" ]; then h=leaked; else h=clean; fi
echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"$h\"}""#,
        );
        let exchange = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap();
        assert_eq!(exchange.response.outcome.unwrap(), "clean");
    }

    #[tokio::test]
    async fn garbage_is_bad_response() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "garbage", "read line\necho 'hello there'");
        let err = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "bad_response", "{err}");
        assert!(err.to_string().contains("not JSON"), "{err}");
    }

    #[tokio::test]
    async fn wrong_id_is_bad_response() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "wrongid",
            r#"read line; echo '{"jsonrpc":"2.0","id":7,"result":1}'"#,
        );
        let err = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "bad_response");
        assert!(err.to_string().contains("id 7"), "{err}");
    }

    #[tokio::test]
    async fn a_second_response_is_bad_not_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "twice",
            r#"read line
echo '{"jsonrpc":"2.0","id":1,"result":1}'
sleep 0.05
echo '{"jsonrpc":"2.0","id":1,"result":2}'"#,
        );
        let err = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "bad_response", "{err}");
        assert!(err.to_string().contains("second response"), "{err}");
    }

    #[tokio::test]
    async fn an_unknown_notification_is_a_host_warning_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "bogus",
            r#"read line
echo '{"jsonrpc":"2.0","method":"bogus","params":{}}'
echo '{"jsonrpc":"2.0","id":1,"result":1}'"#,
        );
        let exchange = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap();
        assert_eq!(exchange.response.outcome.unwrap(), 1);
        assert!(exchange.notifications.is_empty());
        assert!(
            exchange
                .host_warnings
                .iter()
                .any(|w| w.contains("\"bogus\"")),
            "{:?}",
            exchange.host_warnings
        );
    }

    #[tokio::test]
    async fn a_failing_exit_after_the_response_is_a_host_warning() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "exit3",
            r#"read line
echo '{"jsonrpc":"2.0","id":1,"result":1}'
exit 3"#,
        );
        let exchange = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap();
        assert_eq!(exchange.response.outcome.unwrap(), 1);
        assert!(
            exchange
                .host_warnings
                .iter()
                .any(|w| w.contains("exit status 3") && w.contains("after answering")),
            "{:?}",
            exchange.host_warnings
        );
    }

    #[tokio::test]
    async fn an_answer_before_reading_a_large_request_is_the_answer_not_a_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // Answers without reading, then lingers with stdin open: the write
        // of a request larger than the pipe buffer can never finish.
        let module = script(
            dir.path(),
            "early",
            r#"echo '{"jsonrpc":"2.0","id":1,"result":"early"}'
sleep 30"#,
        );
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"describe","params":{{"pad":"{}"}}}}"#,
            "x".repeat(1 << 20)
        );
        let started = std::time::Instant::now();
        let exchange = run(&module, &call(&big, 10_000, 1 << 20), None, None)
            .await
            .unwrap();
        assert_eq!(exchange.response.outcome.unwrap(), "early");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn crash_reports_status_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "crash", "echo 'boom' >&2; exit 3");
        let err = run(&module, &call(REQ, 5000, 1 << 20), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "crashed");
        assert!(err.to_string().contains("exit status 3"), "{err}");
        assert!(err.stderr_tail().contains("boom"));
    }

    #[tokio::test]
    async fn hang_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "hang", "read line; sleep 30");
        let err = run(&module, &call(REQ, 300, 1 << 20), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "timeout");
    }

    #[tokio::test]
    async fn flood_hits_output_limit() {
        let dir = tempfile::tempdir().unwrap();
        // One endless line: no newline ever arrives to end the read.
        let module = script(dir.path(), "flood", "read line; yes | tr -d '\\n'");
        let err = run(&module, &call(REQ, 5000, 64 * 1024), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "output_limit");
    }

    #[tokio::test]
    async fn grandchild_holding_stdout_does_not_hang_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        // The pid file goes to a granted write root: the module is confined.
        let out = tempfile::tempdir().unwrap();
        let grants = [write_grant(out.path())];
        let pidfile = out.path().join("grandchild.pid");
        let module = script(
            dir.path(),
            "daemon",
            &format!(
                r#"read line
sleep 30 &
echo $! > {}
echo '{{"jsonrpc":"2.0","id":1,"result":null}}'
sleep 30"#,
                pidfile.display()
            ),
        );
        let started = std::time::Instant::now();
        let call = Call {
            grants: &grants,
            ..call(REQ, 10_000, 1 << 20)
        };
        run(&module, &call, None, None).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed and reaped by init: /proc entry gone or a zombie at most briefly.
        assert!(is_dead(pid, 50).await, "grandchild {pid} survived the call");
    }

    /// Whether `pid` is gone (or a zombie about to be reaped) within
    /// `tries` looks, 20 ms apart.
    pub(crate) async fn is_dead(pid: i32, tries: u32) -> bool {
        for _ in 0..tries {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// The processes whose command is `name` that are zombies (exited,
    /// never reaped).
    fn zombies_named(name: &str) -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .filter(|stat| stat.contains(&format!("({name}) Z ")))
            .collect()
    }

    /// The attack: a call cancelled after its start was handed off the
    /// runtime but before it took the child (an MCP cancel, a client gone).
    /// The child must still be killed and reaped, confined (started on a
    /// spawner thread) or not (the blocking pool): a zombie would hold its
    /// pid, and its place in the pids cgroup, for the host's life.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_dropped_after_the_hand_off_leaves_no_zombie() {
        use super::process::spawn_off_runtime;
        let dir = tempfile::tempdir().unwrap();
        use modhost_sandbox::ConfinementMode;
        for confinement in [ConfinementMode::BestEffort, ConfinementMode::Off] {
            // A script's command is its file name: unique to this test.
            let name = format!("zomb{}{}", std::process::id() % 100_000, confinement as u8);
            let program = script(dir.path(), &name, "read line; sleep 30");
            let spec = SpawnSpec {
                program,
                grants: Vec::new(),
                executables: tools().to_vec(),
                module_writes: Vec::new(),
                network: None,
                confinement,
                memory_bytes: modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES,
            };
            let mut start = Box::pin(spawn_off_runtime(spec));
            // One poll hands the start off the runtime...
            let first = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(std::future::Future::poll(start.as_mut(), cx))
            })
            .await;
            assert!(first.is_pending(), "{confinement:?}: {first:?}");
            // ...which clones, execs and hands the child over while
            // nobody polls; then the call is cancelled.
            std::thread::sleep(Duration::from_millis(500));
            drop(start);
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert_eq!(
                zombies_named(&name),
                Vec::<String>::new(),
                "{confinement:?}: the cancelled start left a zombie"
            );
        }
    }

    /// The attack: a host whose runtime goes away right after it started a
    /// module, before the task that waits for the module's exit ever ran
    /// (a current-thread runtime whose `block_on` ends in the poll that
    /// started it). The module must still be killed and reaped.
    #[test]
    fn a_process_whose_runtime_went_before_its_waiter_ran_is_killed_and_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("gone{}", std::process::id() % 100_000);
        let spec = SpawnSpec {
            program: script(dir.path(), &name, "read line; sleep 30"),
            grants: Vec::new(),
            executables: tools().to_vec(),
            module_writes: Vec::new(),
            network: None,
            confinement: modhost_sandbox::ConfinementMode::Off,
            memory_bytes: modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = runtime.block_on(async { process::start(&spec, &[]).await.unwrap() });
        drop(runtime);
        drop(started);
        let left = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
                .filter(|stat| stat.contains(&format!("({name}) ")))
                .collect::<Vec<String>>()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !left().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(left(), Vec::<String>::new(), "the module was left behind");
    }

    /// The attack: starts that do not end (a preparation stuck on a hung
    /// mount) hold every spawner thread. A call queued behind them still
    /// ends at its deadline, and never starts its module afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_waiting_for_a_spawner_thread_still_ends_at_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let started = out.path().join("started");
        let module = script(
            dir.path(),
            "quick",
            &format!(
                "touch {}; read line; echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}}'",
                started.display()
            ),
        );
        // The threads of calls with network, which few tests use: the
        // others' starts do not queue behind these.
        for _ in 0..4 {
            modhost_sandbox::spawner_pool::run(modhost_sandbox::Flavour::of(true, tools()), || {
                std::thread::sleep(Duration::from_millis(1200))
            })
            .unwrap();
        }
        let grants = [write_grant(out.path())];
        let network = crate::CallNetwork {
            proxy_port: 9,
            proxy_url: "http://modhost:t@127.0.0.1:9".into(),
        };
        let mut call = call(REQ, 300, 1 << 20);
        call.network = Some(&network);
        call.grants = &grants;
        let began = std::time::Instant::now();
        let result = run(&module, &call, None, None).await;
        assert!(
            began.elapsed() < Duration::from_millis(1000),
            "the call waited {:?} for a spawner thread past its 300 ms deadline",
            began.elapsed()
        );
        assert_eq!(result.unwrap_err().kind(), "timeout");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !started.exists(),
            "the module was started after its call had ended"
        );
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let grants = [write_grant(out.path())];
        let pidfile = out.path().join("pids");
        let module = script(
            dir.path(),
            "slow",
            &format!(
                "read line
sleep 30 &
echo $$ $! > {}
sleep 30",
                pidfile.display()
            ),
        );
        let line = REQ.to_owned();
        let limits = CallLimits {
            deadline: Duration::from_secs(60),
            max_output_bytes: 1024,
            ..CallLimits::default()
        };
        let call = Call {
            request_line: &line,
            limits,
            grants: &grants,
            executables: tools(),
            module_writes: &[],
            network: None,
            start_ahead: false,
            secrets: &[],
        };
        let cancelled =
            tokio::time::timeout(Duration::from_millis(500), run(&module, &call, None, None)).await;
        assert!(
            cancelled.is_err(),
            "the call should still be running when dropped"
        );
        let pids = std::fs::read_to_string(&pidfile).unwrap();
        for pid in pids.split_whitespace() {
            let pid: i32 = pid.parse().unwrap();
            assert!(
                is_dead(pid, 100).await,
                "process {pid} survived cancellation"
            );
        }
    }

    #[tokio::test]
    async fn missing_executable_is_spawn_error() {
        let err = run(
            Path::new("/nonexistent/module"),
            &call(REQ, 1000, 1024),
            None,
            None,
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), "spawn_failed");
    }

    #[test]
    fn tail_keeps_the_end() {
        let mut tail = TailBuffer::default();
        for _ in 0..10 {
            tail.push(&[b'a'; STDERR_TAIL_BYTES]);
        }
        tail.push(b"END");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("END"));
    }
}
