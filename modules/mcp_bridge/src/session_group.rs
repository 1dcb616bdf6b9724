//! A session's process group ends with the session, whatever ends it.
//!
//! A `session` bridge lives for a whole client connection, its server (and
//! whatever the server started) with it. Everything it runs is in the
//! bridge's process group: the host starts the bridge as the leader of its
//! own group, and the seccomp filter refuses `setsid`/`setpgid`, so nothing
//! can leave it. The host kills that group when it ends a session; this
//! file makes the group end when the host cannot.
//!
//! Design decisions:
//!
//! - **A watcher process, not only a last act.** The host starts the
//!   bridge to die with it (`PR_SET_PDEATHSIG`, SIGKILL): a host
//!   killed with SIGKILL takes the bridge down before it runs another
//!   instruction, so nothing the bridge does at its end can run then. So
//!   the bridge forks, before it starts any server (while it has one
//!   thread), a watcher into its group that holds the read end of a pipe
//!   whose only writer is the bridge. However the bridge ends (its
//!   session over, a panic, SIGKILL), the kernel closes its end, the
//!   watcher's read returns, and the watcher kills the group, itself
//!   included. The watcher closes stdin, stdout and stderr first, so it
//!   never holds the bridge's pipes to the host open.
//! - **And a last act too:** at the end of its session the bridge kills
//!   its group itself ([`end_own_group`]) after its last response is
//!   flushed, so the group goes at once even if the watcher could not be
//!   started.
//! - **Only a group the bridge leads.** Run by hand from a shell without
//!   job control, the bridge shares its caller's group, which is not its to
//!   end: then neither happens (the host, which always makes the bridge a
//!   leader, is not affected).

use std::ffi::c_int;
use std::io::PipeWriter;
use std::os::fd::AsRawFd;

use libc::{_exit, SIGKILL, close, fork, getpgrp, kill, read};

/// The bridge's process group id, when it leads that group.
fn own_group() -> Option<c_int> {
    // SAFETY: getpgrp takes no argument and cannot fail.
    #[allow(unsafe_code)]
    let group = unsafe { getpgrp() };
    (u32::try_from(group).ok() == Some(std::process::id())).then_some(group)
}

/// While the returned pipe end lives (the whole process: the caller keeps
/// it to its end), a watcher waits; once the bridge is gone it kills the
/// bridge's group. `None` when the bridge leads no group of its own, or
/// the watcher could not be started (said on stderr; the last act and the
/// host still end the group).
///
/// Call it only while the process has one thread: the forked watcher runs
/// nothing but async-signal-safe calls, but a fork of a process with other
/// threads is best avoided altogether.
pub(crate) fn watch_own_group() -> Option<PipeWriter> {
    own_group()?;
    let (reader, writer) = match std::io::pipe() {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("mcp_bridge: could not make the pipe of the session's group watcher: {e}");
            return None;
        }
    };
    // Both ends are close-on-exec: the server and its children never
    // hold the writer, so only the bridge's end keeps the watcher waiting.
    let (reader_fd, writer_fd) = (reader.as_raw_fd(), writer.as_raw_fd());
    // SAFETY: fork takes no argument; the child runs only `watch_then_end`,
    // which makes async-signal-safe calls and never returns.
    #[allow(unsafe_code)]
    let pid = unsafe { fork() };
    match pid {
        0 => watch_then_end(reader_fd, writer_fd),
        pid if pid > 0 => {
            drop(reader);
            Some(writer)
        }
        _ => {
            eprintln!(
                "mcp_bridge: could not start the session's group watcher ({}); the group still ends with the session",
                std::io::Error::last_os_error()
            );
            None
        }
    }
}

/// The watcher: wait until no writer holds the pipe (the bridge has
/// ended), then kill the group.
fn watch_then_end(reader: c_int, writer: c_int) -> ! {
    // SAFETY: close, read, kill and _exit are async-signal-safe and take
    // descriptors and integers; `byte` outlives the read into it.
    #[allow(unsafe_code)]
    unsafe {
        close(writer);
        close(0);
        close(1);
        close(2);
        let mut byte = 0u8;
        while read(reader, (&raw mut byte).cast(), 1) > 0 {}
        kill(0, SIGKILL);
        _exit(0)
    }
}

/// Kill the bridge's own process group, itself included, when it leads
/// it: the session's last act, once every response is flushed.
pub(crate) fn end_own_group() {
    let Some(group) = own_group() else {
        return;
    };
    // SAFETY: kill takes two integers and touches no memory of ours; the
    // group is the bridge's own (checked above).
    #[allow(unsafe_code)]
    let _ = unsafe { kill(-group, SIGKILL) };
}
