//! Starting a module process without copying the host.
//!
//! Confinement has to be entered by the child itself, between fork and exec:
//! landlock and seccomp apply to the calling process. `std::process::Command`
//! with a `pre_exec` hook does that after a `fork`, which copies the page
//! tables of the whole host and write-protects its memory, so the host then
//! takes a copy-on-write fault on every page it touches. On a busy host that
//! is most of a millisecond per call, more than the confinement itself (the
//! host bench measured +0.84 ms for a `pre_exec` hook that does nothing).
//!
//! This does what `posix_spawn` does instead: `clone(CLONE_VM | CLONE_VFORK)`.
//! The child runs on a stack of its own inside the host's memory until it
//! execs, while the calling thread waits. Rules for the child, which shares
//! memory with a host whose other threads keep running:
//!
//! - system calls only: no allocation, no locks, nothing but what was
//!   prepared before the clone (C strings, descriptors, the confinement);
//! - every signal is blocked across the clone, and the child resets every
//!   handler to the default before unblocking, so no host handler ever runs
//!   on the child's stack; as with `std::process::Command`, the module starts
//!   with no signal blocked and `SIGPIPE` (which Rust programs ignore) back
//!   to its default;
//! - a failure is reported as a stage and an errno through a close-on-exec
//!   pipe, which closes unwritten when the exec succeeds.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use libc::{c_char, c_int, c_void};

use crate::confine::ChildConfinement;

/// The child's stack. It only makes system calls; generous all the same,
/// since an overflow here would write into the host's heap.
const STACK_BYTES: usize = 256 * 1024;

/// A started child: its pid (also its process group) and the host's ends of
/// its standard streams.
#[derive(Debug)]
pub struct Child {
    pub pid: i32,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Where in the child a spawn failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Setup = 1,
    Confine = 2,
    Exec = 3,
}

/// How often an exec refused with `ETXTBSY` is tried again.
const TEXT_BUSY_RETRIES: u32 = 5;

/// Start `program` (an absolute or relative path, never searched in `PATH`)
/// with exactly `env`, in `cwd`, as the leader of a new process group, its
/// stdin, stdout and stderr piped to the host, confined by `confinement`
/// just before exec. Returns once the exec has succeeded or failed.
///
/// An exec refused with `ETXTBSY` ("text file busy") is retried a few times,
/// a few milliseconds apart: a file just written by this process can still
/// be open for writing in a child another thread is starting, until that
/// child's own exec closes it (every process that writes and runs files
/// from several threads meets this race).
pub fn spawn(
    program: &Path,
    env: impl Iterator<Item = (OsString, OsString)>,
    cwd: Option<&Path>,
    confinement: Option<&ChildConfinement>,
) -> std::io::Result<Child> {
    let env: Vec<(OsString, OsString)> = env.collect();
    let mut attempt = 0;
    loop {
        match spawn_once(program, env.iter().cloned(), cwd, confinement) {
            Err(e) if errno_of(&e) == Some(libc::ETXTBSY) && attempt < TEXT_BUSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(u64::from(attempt) * 2));
            }
            result => return result,
        }
    }
}

#[allow(unsafe_code)]
fn spawn_once(
    program: &Path,
    env: impl Iterator<Item = (OsString, OsString)>,
    cwd: Option<&Path>,
    confinement: Option<&ChildConfinement>,
) -> std::io::Result<Child> {
    let invalid = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    };
    let program = CString::new(program.as_os_str().as_bytes()).map_err(|_| invalid("the path"))?;
    let env: Vec<CString> = env
        .map(|(key, value)| {
            let mut pair = key.into_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            CString::new(pair).map_err(|_| invalid("the environment"))
        })
        .collect::<Result<_, _>>()?;
    let cwd = cwd
        .map(|dir| CString::new(dir.as_os_str().as_bytes()).map_err(|_| invalid("the directory")))
        .transpose()?;
    let argv: [*const c_char; 2] = [program.as_ptr(), std::ptr::null()];
    let envp: Vec<*const c_char> = env
        .iter()
        .map(|pair| pair.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let (report_read, report_write) = pipe()?;
    let mut stack = vec![0u8; STACK_BYTES];

    let mut context = ChildContext {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        streams: [
            stdin_read.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        report: report_write.as_raw_fd(),
        confinement,
    };

    // SAFETY: sigfillset and pthread_sigmask only write the sets passed in;
    // the old mask is restored right after the clone, on every path.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut host_mask: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut host_mask);
        // The stack grows down from its end, 16-byte aligned as the ABI asks.
        let top = stack.as_mut_ptr().add(STACK_BYTES);
        let top = top.sub(top as usize % 16);
        // SAFETY of the clone: with CLONE_VFORK this thread is suspended
        // until the child execs or exits, so `context`, the strings it
        // points at and `stack` all outlive every use the child makes of
        // them; the child only makes system calls (see `child_main`).
        let pid = libc::clone(
            child_main,
            top.cast::<c_void>(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut context).cast::<c_void>(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(
            libc::SIG_SETMASK,
            &raw const host_mask,
            std::ptr::null_mut(),
        );
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    // The child's ends close here; the child has exec'd (or exited) by now.
    drop((stdin_read, stdout_write, stderr_write, report_write));

    let mut report = [0u8; 5];
    let read = match read_all(&report_read, &mut report) {
        Ok(read) => read,
        Err(e) => {
            // Whether the exec happened is unknown: the child must not run on.
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            reap(pid);
            return Err(e);
        }
    };
    if read == 0 {
        return Ok(Child {
            pid,
            stdin: stdin_write,
            stdout: stdout_read,
            stderr: stderr_read,
        });
    }
    // The child failed before exec and exited: reap it, then say why.
    reap(pid);
    if read < report.len() {
        return Err(std::io::Error::other(
            "the child failed before exec without saying why",
        ));
    }
    let errno = i32::from_le_bytes([report[1], report[2], report[3], report[4]]);
    let stage = match report[0] {
        x if x == Stage::Setup as u8 => "setting up the process",
        x if x == Stage::Confine as u8 => "entering the confinement",
        _ => "exec",
    };
    Err(std::io::Error::new(
        std::io::Error::from_raw_os_error(errno).kind(),
        SpawnFailure { stage, errno },
    ))
}

/// Why the child did not reach its exec, or why the exec failed.
#[derive(Debug)]
struct SpawnFailure {
    stage: &'static str,
    errno: i32,
}

impl std::fmt::Display for SpawnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cause = std::io::Error::from_raw_os_error(self.errno);
        write!(f, "{}: {cause}", self.stage)
    }
}

impl std::error::Error for SpawnFailure {}

/// The errno of a failure from [`spawn_once`], wherever it happened.
fn errno_of(error: &std::io::Error) -> Option<i32> {
    error.raw_os_error().or_else(|| {
        error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<SpawnFailure>())
            .map(|failure| failure.errno)
    })
}

/// What the child needs, prepared before the clone.
struct ChildContext<'a> {
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    /// Null for "stay where the host is".
    cwd: *const c_char,
    /// The descriptors that become the child's 0, 1 and 2.
    streams: [RawFd; 3],
    /// Close-on-exec; the child writes its failure here.
    report: RawFd,
    confinement: Option<&'a ChildConfinement>,
}

/// The child, between clone and exec. System calls only (see the module
/// documentation); never returns.
#[allow(unsafe_code)]
extern "C" fn child_main(context: *mut c_void) -> c_int {
    // SAFETY: `context` is the ChildContext the parent passed to clone, alive
    // and unmoved while the parent is suspended (CLONE_VFORK).
    let context = unsafe { &*context.cast::<ChildContext<'_>>() };
    // SAFETY: every call below is an async-signal-safe system call wrapper
    // on integers, the prepared C strings and arrays, or stack values.
    unsafe {
        reset_signal_handlers();
        for (target, &fd) in context.streams.iter().enumerate() {
            let target = target as c_int;
            let status = if fd == target {
                // Already in place: only the close-on-exec flag must go.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if status < 0 {
                fail(context.report, Stage::Setup, last_errno());
            }
        }
        if !context.cwd.is_null() && libc::chdir(context.cwd) != 0 {
            fail(context.report, Stage::Setup, last_errno());
        }
        if libc::setpgid(0, 0) != 0 {
            fail(context.report, Stage::Setup, last_errno());
        }
        if let Some(confinement) = context.confinement
            && let Err(e) = confinement.enter()
        {
            fail(
                context.report,
                Stage::Confine,
                e.raw_os_error().unwrap_or(libc::EPERM),
            );
        }
        // A module starts with no signal blocked, whatever the host thread had.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut());
        libc::execve(context.program, context.argv, context.envp);
        fail(context.report, Stage::Exec, last_errno())
    }
}

/// Every signal the host handles goes back to its default action, and
/// `SIGPIPE` too; ignored signals stay ignored, as exec would keep them.
///
/// # Safety
///
/// Only in the child, with every signal blocked.
#[allow(unsafe_code)]
unsafe fn reset_signal_handlers() {
    // SAFETY: sigaction on a stack value; signals the kernel refuses to
    // change (SIGKILL, SIGSTOP, libc's internal ones) just fail.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..libc::SIGRTMAX() {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &raw mut current) != 0 {
                continue;
            }
            let ignored = current.sa_sigaction == libc::SIG_IGN && signal != libc::SIGPIPE;
            if current.sa_sigaction != libc::SIG_DFL && !ignored {
                libc::sigaction(signal, &raw const default, std::ptr::null_mut());
            }
        }
    }
}

/// Report `errno` at `stage` on the report pipe and exit.
///
/// # Safety
///
/// Only in the child.
#[allow(unsafe_code)]
unsafe fn fail(report: RawFd, stage: Stage, errno: c_int) -> ! {
    let errno = errno.to_le_bytes();
    let message = [stage as u8, errno[0], errno[1], errno[2], errno[3]];
    // SAFETY: write and _exit are async-signal-safe; `message` is on the
    // child's stack. A short write only loses the reason, never the exit.
    unsafe {
        libc::write(report, message.as_ptr().cast::<c_void>(), message.len());
        libc::_exit(127)
    }
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A close-on-exec pipe: (read end, write end).
#[allow(unsafe_code)]
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which are then owned
    // exactly once each.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// Read until `buf` is full or EOF; the number of bytes read.
fn read_all(fd: &OwnedFd, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::read(fd, &mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(filled)
}

/// Wait for `pid`, which has exited or is about to.
fn reap(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        while let Err(rustix::io::Errno::INTR) =
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
        {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn env() -> impl Iterator<Item = (OsString, OsString)> {
        [
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ONLY".into(), "this".into()),
        ]
        .into_iter()
    }

    fn wait(pid: i32) -> i32 {
        let pid = rustix::process::Pid::from_raw(pid).unwrap();
        let (_, status) =
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
                .unwrap()
                .unwrap();
        status.exit_status().unwrap()
    }

    #[test]
    fn the_child_gets_its_streams_environment_directory_and_own_group() {
        let dir = tempfile::tempdir().unwrap();
        let child = spawn(Path::new("/bin/sh"), env(), Some(dir.path()), None);
        // `sh` with no arguments reads its script from stdin.
        let child = child.unwrap();
        let mut stdin = std::fs::File::from(child.stdin);
        stdin
            .write_all(
                b"echo \"$ONLY:$HOME:$(pwd)\"; echo err >&2; read -r _ _ _ _ pgid _ < /proc/$$/stat; echo $pgid; exit 3\n",
            )
            .unwrap();
        drop(stdin);
        let mut out = String::new();
        std::fs::File::from(child.stdout)
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        std::fs::File::from(child.stderr)
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(wait(child.pid), 3);
        let mut lines = out.lines();
        let expected = format!("this::{}", dir.path().canonicalize().unwrap().display());
        assert_eq!(lines.next(), Some(expected.as_str()));
        assert_eq!(
            lines.next(),
            Some(child.pid.to_string().as_str()),
            "its own group"
        );
        assert_eq!(err, "err\n");
    }

    #[test]
    fn a_failed_exec_is_an_error_with_its_cause_and_leaves_no_zombie() {
        let err = spawn(Path::new("/nonexistent/module"), env(), None, None).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        assert!(err.to_string().starts_with("exec: "), "{err}");
        let err = spawn(
            Path::new("/bin/sh"),
            env(),
            Some(Path::new("/nonexistent")),
            None,
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("setting up the process: "),
            "{err}"
        );
    }

    #[test]
    fn a_busy_text_file_is_retried_and_then_reported_with_its_errno() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("busy");
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        // Held open for writing for the whole test: every exec is ETXTBSY.
        let _writer = std::fs::File::options().write(true).open(&program).unwrap();
        let err = spawn(&program, env(), None, None).unwrap_err();
        assert_eq!(errno_of(&err), Some(libc::ETXTBSY), "{err}");
        assert!(err.to_string().starts_with("exec: "), "{err}");
    }

    #[test]
    fn sigpipe_is_back_to_the_default_and_nothing_is_blocked_in_the_child() {
        // Rust ignores SIGPIPE; a module must not inherit that.
        let child = spawn(Path::new("/bin/sh"), env(), None, None).unwrap();
        let mut stdin = std::fs::File::from(child.stdin);
        stdin.write_all(b"grep SigIgn /proc/self/status\n").unwrap();
        drop(stdin);
        let mut out = String::new();
        std::fs::File::from(child.stdout)
            .read_to_string(&mut out)
            .unwrap();
        wait(child.pid);
        // The mask is hex; SIGPIPE (13) is bit 12.
        let ignored = u64::from_str_radix(out.split_whitespace().nth(1).unwrap(), 16).unwrap();
        assert_eq!(
            ignored & (1 << 12),
            0,
            "SIGPIPE ignored in the child: {out}"
        );
    }
}
