//! A resident process: one native module process that serves several
//! calls in turn, for a host that keeps it for a client connection (an MCP
//! server module marked `session`, `modhost::session_server`).
//!
//! What stays as for a per-call process:
//!
//! - **The same start.** It is started through `process::start`, the
//!   very path of a cold call: the landlock ruleset and seccomp filter of
//!   its spec, its own process group, its memory cgroup, the cleared
//!   environment, its secrets as variables. The spec is the caller's
//!   business: a host that keeps a resident process gives it the union of
//!   the grants its calls may need, and keys it by that union.
//! - **The same framing, per exchange.** Each call writes one request line
//!   (stdin stays open) and reads notifications and one response, judged
//!   by `framing` exactly as a per-call process's lines are, counted
//!   against that call's output cap, within that call's deadline.
//!
//! What differs, and why it is safe to keep going only on a clean answer:
//!
//! - **Any failure ends the process.** A timeout, an output cap reached,
//!   a bad line, bytes after the response, the process exiting, or the
//!   call's future dropped (cancellation) kills the whole group and
//!   reports as a per-call process would; the next call starts a new one.
//!   So a process is reused only after an exchange that ended exactly at
//!   its response, with nothing pending.
//! - **Nothing written between calls is taken as an answer.** Before a
//!   request is written, anything the process wrote since its last
//!   response, a dead leader, or a confinement that a start now would not
//!   prepare the same (a granted folder replaced since) makes it unusable
//!   ([`Resident::usable`]); the caller ends it and starts another.
//! - **stderr is per call:** the tail is cleared as each exchange starts,
//!   so a call's error quotes what the process said during that call.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::{self, SpawnSpec, Started};
use super::{Ending, Failure};
use crate::{Call, Exchange, NotificationSink, RunError, framing};

/// A module process kept between calls. Dropping it kills its group.
#[derive(Debug)]
pub struct Resident {
    started: Started,
    spec: SpawnSpec,
    /// The leader's exit status, once an exchange saw it (its receiver is
    /// then spent: see `read_answer`).
    exited: Option<std::process::ExitStatus>,
}

impl Resident {
    /// Start a resident process of `program` confined as `call` says (its
    /// grants, executables, network, secrets, limits): within the call's
    /// deadline, as a cold start is.
    pub async fn start(program: &Path, call: &Call<'_>) -> Result<Resident, RunError> {
        let spec = SpawnSpec::of(program, call);
        match tokio::time::timeout(call.limits.deadline, process::start(&spec, call.secrets)).await
        {
            Ok(started) => Ok(Resident {
                started: started?,
                spec,
                exited: None,
            }),
            Err(_) => Err(RunError::Timeout {
                deadline_ms: call.limits.deadline.as_millis() as u64,
                stderr_tail: String::new(),
            }),
        }
    }

    /// What the host noticed about the process's confinement at its start.
    pub fn host_warnings(&self) -> &[String] {
        &self.started.host_warnings
    }

    /// Whether the process may serve another call: its leader lives, it
    /// wrote nothing since its last response, and a start now would
    /// prepare the very confinement it entered.
    pub fn usable(&mut self) -> bool {
        if !self.started.is_alive() {
            return false;
        }
        let mut probe = [0u8; 1];
        match self.started.stdout.try_read(&mut probe) {
            // Unasked bytes, or its stdout closed: not a process to talk to.
            Ok(_) => return false,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
        process::confined_as_now(&self.spec, &self.started)
    }

    /// Run one call on the process: `call.request_line` in, notifications
    /// (forwarded live to `notifications`) and one response out. On a
    /// clean answer the process comes back for the next call; on any
    /// failure its group is killed and the error says what a per-call
    /// process's would.
    pub async fn exchange(
        mut self,
        call: &Call<'_>,
        notifications: Option<&NotificationSink>,
    ) -> (Result<Exchange, RunError>, Option<Resident>) {
        if let Ok(mut tail) = self.started.tail.lock() {
            tail.bytes.clear();
        }
        let limits = call.limits;
        let outcome = {
            let Started {
                guard,
                exit,
                stdin,
                stdout,
                ..
            } = &mut self.started;
            let exited = &mut self.exited;
            let talk = async {
                let mut request = Vec::with_capacity(call.request_line.len() + 1);
                request.extend_from_slice(call.request_line.as_bytes());
                request.push(b'\n');
                let write = stdin.write_all(&request);
                let read = read_answer(
                    Reading {
                        stdout,
                        exit,
                        exited,
                        guard,
                    },
                    limits.max_output_bytes,
                    notifications,
                );
                tokio::pin!(write, read);
                let mut written = false;
                loop {
                    tokio::select! {
                        wrote = &mut write, if !written => match wrote {
                            Ok(()) => written = true,
                            // The process stopped reading: what it wrote,
                            // or not, is the answer (as for a per-call one).
                            Err(e) => {
                                tracing::debug!("writing the request: {e}");
                                written = true;
                            }
                        },
                        outcome = &mut read => break outcome,
                    }
                }
            };
            match tokio::time::timeout(limits.deadline, talk).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Failure::Timeout),
            }
        };
        match outcome {
            Ok(answer) if self.started.is_alive() => {
                let stderr_tail = self
                    .started
                    .tail
                    .lock()
                    .map(|t| t.text())
                    .unwrap_or_default();
                let exchange = Exchange {
                    notifications: answer.notifications,
                    response: answer.response,
                    stderr_tail,
                    host_warnings: answer.warnings,
                };
                (Ok(exchange), Some(self))
            }
            outcome => (self.end(outcome, call).await, None),
        }
    }

    /// Kill the group and report `outcome` as a per-call process would.
    async fn end(
        self,
        outcome: Result<modproto::framing::Answer, Failure>,
        call: &Call<'_>,
    ) -> Result<Exchange, RunError> {
        let Started {
            guard,
            exit,
            stderr,
            tail,
            memory,
            ..
        } = self.started;
        let ending = Ending {
            guard,
            exit,
            exited: self.exited,
            stderr,
            tail,
            memory: memory.clone(),
        };
        let (status, stderr_tail) = ending.finish(false).await;
        if let Some(memory) = memory.filter(|m| m.limit_was_hit()) {
            return Err(RunError::NativeMemoryLimit {
                limit: memory.limit(),
                stderr_tail,
            });
        }
        let limits = call.limits;
        match outcome {
            // It answered, then exited: the answer stands, the process is
            // gone (the next call starts another).
            Ok(answer) => Ok(Exchange {
                notifications: answer.notifications,
                response: answer.response,
                stderr_tail,
                host_warnings: answer.warnings,
            }),
            Err(failure) => Err(failure.into_error(&limits, status, stderr_tail)),
        }
    }
}

/// Read one answer from a resident process's stdout: up to and including
/// its response line, never beyond (the next call's bytes are not ours),
/// at most `max_output_bytes` of it. A response followed by more bytes in
/// the same read is refused: a module writes nothing after its response.
async fn read_answer(
    reading: Reading<'_>,
    max_output_bytes: u64,
    sink: Option<&NotificationSink>,
) -> Result<modproto::framing::Answer, Failure> {
    let Reading {
        stdout,
        exit,
        exited,
        guard,
    } = reading;
    let mut lines = framing::Lines::default();
    let mut transcript = framing::transcript();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut total: u64 = 0;
    let mut spent = false;
    loop {
        tokio::select! {
            read = stdout.read(&mut chunk) => {
                let n = read.map_err(|e| Failure::Bad(format!("reading stdout failed: {e}")))?;
                if n == 0 {
                    let rest = lines.take_rest();
                    if !rest.is_empty() {
                        framing::take_line(&mut transcript, sink, &rest).map_err(Failure::Bad)?;
                    }
                    return transcript.finish().ok_or(Failure::NoResponse(*exited));
                }
                total += n as u64;
                if total > max_output_bytes {
                    return Err(Failure::OutputLimit);
                }
                lines
                    .push(&chunk[..n], |line| framing::take_line(&mut transcript, sink, line))
                    .map_err(Failure::Bad)?;
                if transcript.answered() {
                    if !lines.take_rest().is_empty() {
                        return Err(Failure::Bad(
                            "the module wrote more after its response; a module writes nothing after its response".into(),
                        ));
                    }
                    return transcript.finish().ok_or(Failure::NoResponse(*exited));
                }
            }
            status = &mut *exit, if !spent => {
                // The leader is gone: its group goes too; the response may
                // still sit in the pipe, so reading goes on to its end. The
                // receiver is spent: a closed one takes its place, so the
                // ending (and `is_alive`) can ask it again.
                spent = true;
                *exited = status.ok().and_then(Result::ok);
                *exit = closed_exit();
                guard.kill();
                if exited.is_none() {
                    return Err(Failure::NoResponse(None));
                }
            }
        }
    }
}

/// What reading one answer needs of the process.
struct Reading<'a> {
    stdout: &'a mut tokio::net::unix::pipe::Receiver,
    exit: &'a mut process::ExitReceiver,
    exited: &'a mut Option<std::process::ExitStatus>,
    guard: &'a super::group::Group,
}

/// An exit receiver whose sender is gone: it answers at once, with an
/// error, however often it is asked.
fn closed_exit() -> process::ExitReceiver {
    tokio::sync::oneshot::channel().1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::tests::{call, is_dead, script, write_grant};

    fn request(id: u32) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"invoke","params":{{"n":{id}}}}}"#)
    }

    /// A module that answers every line it reads, with its pid and a
    /// count, until stdin ends: what a session-aware module does.
    const SERVING: &str = r#"n=0
while read line; do
  n=$((n+1))
  echo "{\"jsonrpc\":\"2.0\",\"method\":\"progress\",\"params\":{\"request_id\":\"r\",\"progress\":$n}}"
  echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[$$,$n]}"
done"#;

    #[tokio::test]
    async fn one_process_answers_call_after_call_with_its_own_progress() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "serving", SERVING);
        let first = request(1);
        let mut resident = Resident::start(&module, &call(&first, 5000, 1 << 20))
            .await
            .unwrap();
        let mut pids = Vec::new();
        for n in 1..=3 {
            let line = request(n);
            assert!(resident.usable());
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let (exchange, back) = resident
                .exchange(&call(&line, 5000, 1 << 20), Some(&tx))
                .await;
            let exchange = exchange.unwrap();
            let result = exchange.response.outcome.unwrap();
            assert_eq!(result[1], n, "{result}");
            pids.push(result[0].as_i64().unwrap());
            assert_eq!(exchange.notifications.len(), 1);
            assert_eq!(rx.try_recv().unwrap().method, "progress");
            resident = back.expect("a clean answer keeps the process");
        }
        assert!(pids.windows(2).all(|w| w[0] == w[1]), "{pids:?}");
    }

    /// The attack: a call that hangs holds the process past its deadline.
    /// The call times out, the whole group dies (a helper too), and no
    /// process comes back for the next call.
    #[tokio::test]
    async fn a_call_that_times_out_ends_the_process_and_its_helpers() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let pids = out.path().join("pids");
        let module = script(
            dir.path(),
            "hangs",
            &format!(
                "read line\nsleep 30 &\necho $$ $! > {}\nsleep 30",
                pids.display()
            ),
        );
        let grants = [write_grant(out.path())];
        let line = request(1);
        let call = Call {
            grants: &grants,
            ..call(&line, 400, 1 << 20)
        };
        let resident = Resident::start(&module, &call).await.unwrap();
        let (result, back) = resident.exchange(&call, None).await;
        assert_eq!(result.unwrap_err().kind(), "timeout");
        assert!(back.is_none(), "a timed-out process was kept");
        for pid in std::fs::read_to_string(&pids).unwrap().split_whitespace() {
            let pid: i32 = pid.parse().unwrap();
            assert!(
                is_dead(pid, 100).await,
                "process {pid} survived the timeout"
            );
        }
    }

    /// The attack: a response followed by a second line in the same
    /// write (an answer smuggled ahead for the next call). Refused, and
    /// the process ended.
    #[tokio::test]
    async fn bytes_after_the_response_end_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "smuggles",
            r#"while read line; do
printf '%s\n%s\n' '{"jsonrpc":"2.0","id":1,"result":1}' '{"jsonrpc":"2.0","id":1,"result":"next"}'
done"#,
        );
        let line = request(1);
        let call = call(&line, 5000, 1 << 20);
        let resident = Resident::start(&module, &call).await.unwrap();
        let (result, back) = resident.exchange(&call, None).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), "bad_response", "{err}");
        assert!(back.is_none());
    }

    /// The attack: a process that writes between calls (an answer ready
    /// before the question). It is not used again.
    #[tokio::test]
    async fn a_process_that_wrote_between_calls_is_not_used_again() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(
            dir.path(),
            "early",
            r#"read line
echo '{"jsonrpc":"2.0","id":1,"result":1}'
sleep 0.1
echo '{"jsonrpc":"2.0","id":1,"result":"forged"}'
sleep 30"#,
        );
        let line = request(1);
        let call = call(&line, 5000, 1 << 20);
        let resident = Resident::start(&module, &call).await.unwrap();
        let (result, back) = resident.exchange(&call, None).await;
        assert_eq!(result.unwrap().response.outcome.unwrap(), 1);
        let mut resident = back.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !resident.usable(),
            "a process that wrote unasked was usable"
        );
    }

    /// The per-call cap counts each call's own bytes, and a call over it
    /// ends the process.
    #[tokio::test]
    async fn the_output_cap_is_per_call_and_ends_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "flood", "read line; yes | tr -d '\\n'");
        let line = request(1);
        let call = call(&line, 5000, 64 * 1024);
        let resident = Resident::start(&module, &call).await.unwrap();
        let (result, back) = resident.exchange(&call, None).await;
        assert_eq!(result.unwrap_err().kind(), "output_limit");
        assert!(back.is_none());
    }

    /// Dropping a call mid-exchange (a cancellation) kills the group.
    #[tokio::test]
    async fn a_cancelled_call_kills_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let pids = out.path().join("pids");
        let module = script(
            dir.path(),
            "slow",
            &format!("read line\necho $$ > {}\nsleep 30", pids.display()),
        );
        let grants = [write_grant(out.path())];
        let line = request(1);
        let call = Call {
            grants: &grants,
            ..call(&line, 60_000, 1 << 20)
        };
        let resident = Resident::start(&module, &call).await.unwrap();
        let cancelled = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            resident.exchange(&call, None),
        )
        .await;
        assert!(cancelled.is_err());
        let pid: i32 = std::fs::read_to_string(&pids)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            is_dead(pid, 100).await,
            "process {pid} survived cancellation"
        );
    }
}
