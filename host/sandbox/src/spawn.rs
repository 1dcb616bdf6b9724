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
//!   prepared before the clone (C strings, descriptors, the confinement,
//!   the highest signal number); nothing that can panic either (no
//!   `unwrap`, no indexing, no formatting, no overflowing arithmetic), in
//!   debug builds too, since a panic would unwind on the host's memory;
//! - every signal is blocked across the clone, and the child resets every
//!   signal from 1 to `SIGRTMAX` (but `SIGKILL` and `SIGSTOP`) to its
//!   default before unblocking, so no host handler ever runs on the child's
//!   stack and no disposition of the host (`SIGPIPE` ignored by Rust, a
//!   `SIGHUP` ignored by `nohup`) reaches the module; it starts with no
//!   signal blocked;
//! - only stdin, stdout and stderr reach the module: every other descriptor
//!   the host holds, inherited without close-on-exec from whoever started
//!   it (a shell's `5<secret`, a job server, socket activation), is marked
//!   close-on-exec in the child (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`,
//!   else a loop up to a bound read in the parent); marking rather than
//!   closing keeps the landlock ruleset usable until the exec;
//! - the parent gets a pidfd of the child from the clone itself
//!   (`CLONE_PIDFD`), so the host can learn that the leader exited without
//!   reaping it, and kill its group while the pgid still belongs to it
//!   (`runner::native::group`);
//! - a failure is reported as a stage and an errno in the memory the child
//!   shares with the parent (`ChildContext::failure`), written before the
//!   child exits; the parent reads it once the clone returns, which is
//!   after the child exec'd or exited (`CLONE_VFORK`), so it never waits
//!   for the child's descriptors to close as a report pipe would (on this
//!   kind of machine that wait was a wake-up of its own, tens of
//!   microseconds per spawn).
//!
//! The child's stack is kept by the calling thread for its next spawn
//! (`ChildStack`): mapping and unmapping a fresh one per spawn costs page
//! faults and, in a host with many threads, a TLB shootdown on every
//! unmap. A thread's stack is never used by two children at once: the
//! thread is suspended (`CLONE_VFORK`) until its child has exec'd or exited.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_char, c_int, c_void};

use crate::ChildConfinement;

/// A child's stack, kept by the thread that spawns for its next spawn.
struct ChildStack(Box<[u8]>);

impl ChildStack {
    /// The calling thread's stack (a new one the first time, zeroed lazily by
    /// the kernel), to give back with [`ChildStack::keep`].
    fn take() -> ChildStack {
        KEPT_STACK
            .with(|kept| kept.take())
            .unwrap_or_else(|| ChildStack(vec![0u8; STACK_BYTES].into_boxed_slice()))
    }

    /// Keep it for the calling thread's next spawn. Only once the child no
    /// longer runs on it (it has exec'd or exited).
    fn keep(self) {
        KEPT_STACK.with(|kept| kept.set(Some(self)));
    }
}

thread_local! {
    static KEPT_STACK: std::cell::Cell<Option<ChildStack>> = const { std::cell::Cell::new(None) };
}

/// The child's stack. It only makes system calls; generous all the same,
/// since an overflow here would write into the host's heap.
const STACK_BYTES: usize = 256 * 1024;

/// A started child: its pid (also its process group), a pidfd of it, and the
/// host's ends of its standard streams.
#[derive(Debug)]
pub struct Child {
    pub pid: i32,
    /// Close-on-exec; readable once the child has exited.
    pub pidfd: OwnedFd,
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
/// The argument list is `[program]`, unless the confinement says to
/// execute something else (`ChildConfinement::launch`: an exec-gated
/// entry's `#!/usr/bin/env` line, done by the host). The exec is a raw
/// `execve` with the host's key in its fourth argument, which the kernel
/// ignores and an exec-gated call's filter asks for (`seccomp::EXEC_GATE`).
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
    let only_program = [program.as_os_str().to_owned()];
    let (program, argv) = match confinement.and_then(ChildConfinement::launch) {
        Some((launched, argv)) => (launched, argv),
        None => (program, &only_program[..]),
    };
    let mut attempt = 0;
    loop {
        match spawn_once(program, argv, env.iter().cloned(), cwd, confinement) {
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
    argv: &[OsString],
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
    if confinement.is_some_and(|c| !c.may_start_here()) {
        return Err(std::io::Error::other(
            "the confinement was prepared on another thread (a spawner thread whose state the child would inherit): start it from that thread",
        ));
    }
    let program = CString::new(program.as_os_str().as_bytes()).map_err(|_| invalid("the path"))?;
    let arguments: Vec<CString> = argv
        .iter()
        .map(|arg| CString::new(arg.as_bytes()).map_err(|_| invalid("an argument")))
        .collect::<Result<_, _>>()?;
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
    let argv: Vec<*const c_char> = arguments
        .iter()
        .map(|arg| arg.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const c_char> = env
        .iter()
        .map(|pair| pair.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let mut stack = ChildStack::take();
    let mut pidfd: c_int = -1;

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
        failure: AtomicU64::new(0),
        confinement,
        highest_signal: libc::SIGRTMAX(),
        descriptor_bound: descriptor_bound(),
    };

    // SAFETY: sigfillset and pthread_sigmask only write the sets passed in;
    // the old mask is restored right after the clone, on every path.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut host_mask: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut host_mask);
        // The stack grows down from its end, 16-byte aligned as the ABI asks.
        let top = stack.0.as_mut_ptr().add(stack.0.len());
        let top = top.sub(top as usize % 16);
        // SAFETY of the clone: with CLONE_VFORK this thread is suspended
        // until the child execs or exits, so `context`, the strings it
        // points at and `stack` all outlive every use the child makes of
        // them; the child only makes system calls (see `child_main`).
        // CLONE_PIDFD writes the pidfd (close-on-exec) through the parent
        // tid argument.
        let pid = libc::clone(
            child_main,
            top.cast::<c_void>(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            (&raw mut context).cast::<c_void>(),
            &raw mut pidfd,
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
    // The child has exec'd or exited (CLONE_VFORK): its stack is free again.
    stack.keep();
    // The child's ends close here; the child has exec'd (or exited) by now.
    drop((stdin_read, stdout_write, stderr_write));
    // SAFETY: the kernel wrote a new descriptor there (CLONE_PIDFD), owned
    // by nobody else; the clone succeeded, so it is valid.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };

    // Written by the child before it exited, if it failed; the clone
    // returned only after that (CLONE_VFORK), so nothing is waited for.
    let failure = context.failure.load(Ordering::Acquire);
    if failure == 0 {
        return Ok(Child {
            pid,
            pidfd,
            stdin: stdin_write,
            stdout: stdout_read,
            stderr: stderr_read,
        });
    }
    // The child failed before exec and exited: reap it, then say why.
    reap(pid);
    let (stage, errno) = unpack_failure(failure);
    let stage = match stage {
        x if x == Stage::Setup as u8 => "setting up the process",
        x if x == Stage::Confine as u8 => "entering the confinement",
        _ => "exec",
    };
    Err(std::io::Error::new(
        std::io::Error::from_raw_os_error(errno).kind(),
        SpawnFailure { stage, errno },
    ))
}

/// A child's failure as one word in shared memory: the stage in the high
/// half, the errno in the low; 0 for none (no stage is 0).
fn pack_failure(stage: Stage, errno: c_int) -> u64 {
    (u64::from(stage as u8) << 32) | u64::from(errno as u32)
}

/// The stage and errno of a word [`pack_failure`] made.
fn unpack_failure(word: u64) -> (u8, i32) {
    ((word >> 32) as u8, word as u32 as i32)
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
    /// Where the child writes its failure ([`pack_failure`]) before it exits:
    /// in the parent's memory (`CLONE_VM`), read once the clone returns.
    failure: AtomicU64,
    confinement: Option<&'a ChildConfinement>,
    /// `SIGRTMAX`, read in the parent (glibc computes it at run time).
    highest_signal: c_int,
    /// Where the descriptor loop stops when `close_range` is missing.
    descriptor_bound: c_int,
}

/// The highest descriptor number the host can hold, plus one: its
/// `RLIMIT_NOFILE` soft limit, bounded so a huge limit cannot make the
/// fallback loop of the child (kernels before 5.11) take seconds.
#[allow(unsafe_code)]
fn descriptor_bound() -> c_int {
    const MOST: c_int = 1 << 16;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes a stack value.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return MOST;
    }
    c_int::try_from(limit.rlim_cur).map_or(MOST, |n| n.min(MOST))
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
        reset_signals(context.highest_signal);
        for (target, &fd) in (0 as c_int..).zip(context.streams.iter()) {
            let status = if fd == target {
                // Already in place: only the close-on-exec flag must go.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if status < 0 {
                fail(&context.failure, Stage::Setup, last_errno());
            }
        }
        if let Err(errno) = close_on_exec_from_3(context.descriptor_bound) {
            fail(&context.failure, Stage::Setup, errno);
        }
        if !context.cwd.is_null() && libc::chdir(context.cwd) != 0 {
            fail(&context.failure, Stage::Setup, last_errno());
        }
        // Its own process group, the one the host kills. A spawner thread's
        // filter lets this call through only with the host's key in its
        // third argument, which the kernel ignores (`seccomp::Layer::Base`).
        let key = context.confinement.map_or(0, ChildConfinement::host_key);
        if libc::syscall(libc::SYS_setpgid, 0 as libc::c_long, 0 as libc::c_long, key) != 0 {
            fail(&context.failure, Stage::Setup, last_errno());
        }
        if let Some(confinement) = context.confinement
            && let Err(errno) = confinement.enter()
        {
            fail(&context.failure, Stage::Confine, errno);
        }
        // A module starts with no signal blocked, whatever the host thread had.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut());
        // The key again, in the fourth argument, which the kernel ignores
        // for `execve`: an exec-gated call's filter lets no exec through
        // without it (`seccomp::EXEC_GATE`). A successful exec leaves it
        // nowhere the program can read (fresh registers and address space;
        // this stack is the host's); a failed one ends the child below.
        libc::syscall(
            libc::SYS_execve,
            context.program,
            context.argv,
            context.envp,
            key,
        );
        fail(&context.failure, Stage::Exec, last_errno())
    }
}

/// Every signal from 1 to `highest` but `SIGKILL` and `SIGSTOP` back to its
/// default action, handled and ignored alike. Signals the C library keeps
/// for itself (glibc's 32 and 33) are refused by its `sigaction` and keep
/// their handler; exec resets those, and they stay blocked until then.
///
/// # Safety
///
/// Only in the child, with every signal blocked.
#[allow(unsafe_code)]
unsafe fn reset_signals(highest: c_int) {
    // SAFETY: sigaction on a stack value.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        let mut signal: c_int = 1;
        while signal <= highest {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::sigaction(signal, &raw const default, std::ptr::null_mut());
            }
            signal += 1;
        }
    }
}

/// Mark every descriptor from 3 up close-on-exec. `close_range` does it in
/// one call (Linux 5.11); before that, one `fcntl` per number below `bound`.
///
/// # Safety
///
/// Only in the child.
#[allow(unsafe_code)]
unsafe fn close_on_exec_from_3(bound: c_int) -> Result<(), c_int> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range and fcntl take integers; the child's descriptor
    // table is its own (no CLONE_FILES), so the host's stay as they are.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return Ok(());
        }
        let errno = last_errno();
        if errno != libc::ENOSYS && errno != libc::EINVAL {
            return Err(errno);
        }
        let mut fd: c_int = 3;
        while fd < bound {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
            fd += 1;
        }
    }
    Ok(())
}

/// Report `errno` at `stage` to the parent and exit.
///
/// # Safety
///
/// Only in the child.
#[allow(unsafe_code)]
unsafe fn fail(failure: &AtomicU64, stage: Stage, errno: c_int) -> ! {
    // A plain store to memory the parent reads after the child is gone; the
    // release pairs with the parent's acquire (the vfork completion orders
    // them as well).
    failure.store(pack_failure(stage, errno), Ordering::Release);
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(127) }
}

/// The calling thread's errno, read directly (no `io::Error`, nothing that
/// could allocate or panic).
#[allow(unsafe_code)]
fn last_errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot;
    // in the child that is the slot of the host thread it runs on behalf
    // of, which is suspended (CLONE_VFORK) and does not read it meanwhile.
    unsafe { *libc::__errno_location() }
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
