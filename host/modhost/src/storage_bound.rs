//! A bound on what a module keeps: the bytes and files of its `state/<id>/`
//! and `artifacts/<id>/` folders together, checked before a call and
//! watched while it runs.
//!
//! `RLIMIT_FSIZE` bounds one file (1 GiB); nothing bounded how many. A
//! module that may write its state could fill the disk, or its inode
//! table, with a million small files. There is no filesystem quota to lean
//! on (ext4 without `prjquota`, and a host that is not root could not set
//! one), so the host measures and watches, itself:
//!
//! - **Before the call** the folders are walked (or, while another call of
//!   the module runs, known from its watch): a module already over its
//!   bound is refused with `storage_limit`, naming the bound, the folders
//!   and what they hold; it ran nothing. Only calls whose capability may
//!   write `state` or `artifacts` are looked at: a call that only reads
//!   them, or writes neither, pays nothing and is never refused.
//! - **During the call** one inotify watch per folder of the tree follows
//!   every creation, deletion, rename, write and truncation, and keeps the
//!   count of files (every entry: files, folders, links) and bytes (of each
//!   non-folder its size, or the blocks it holds when more) up to date. A folder created during the
//!   call is watched, then listed: what was made in it before its watch is
//!   counted by the listing, what after by events, and an entry seen twice
//!   is counted once (entries are kept by folder and name). A folder moved
//!   away takes its whole subtree out of the count, one moved in is
//!   listed. The moment either count passes the bound, the call is
//!   stopped: its future is dropped, which kills its process group (or
//!   ends its component), and it ends with `storage_limit`. So is a call
//!   whose folders the host cannot follow: events lost (`IN_Q_OVERFLOW`),
//!   an entry it cannot look at (any error but "gone"), a watch refused or
//!   more folders than it watches for one module; its message says the
//!   host cannot watch them, not that they are over the bound.
//! - **After the call** the events still queued are read and the bound
//!   checked once more: a call that passed it at its very end fails too.
//!   A call that failed is measured again by a walk (outside the lock) for
//!   its message, and its module's watch is not kept: a process killed in
//!   the middle of a system call leaves blocks no event reports. From
//!   then on, the module's next call that may write is refused until the
//!   operator removes files (or raises the bound).
//!
//! What a module can leave behind is the bound plus what it writes between
//! passing it and its death: the time the kernel takes to deliver the
//! event, the host's watcher thread to count it, and the call's task to
//! kill the group. Measured in `tests/it/state_bound.rs` (a Python module
//! creating files as fast as it can, 2,000 allowed, five runs on a
//! two-core machine): 1 to 3 files beyond the bound. The tests hold it to
//! [`SLACK_FILES`], room for a host thread a loaded machine schedules late.
//!
//! Design decisions:
//!
//! - **One inotify descriptor and one watcher thread per host.** An inotify
//!   descriptor that held watches waits for an SRCU grace period when it
//!   is closed (measured on Linux 6.18: 10 to 24 ms; see
//!   `modhost_sandbox`'s `path_watch.rs`); one per call would add that to
//!   every call. The host keeps one, adds a module's watches when a call
//!   that may write its folders starts, and removes them when the last
//!   such call ends (a watch removed well before the host exits costs its
//!   final close nothing). Concurrent calls of one module share its watch,
//!   and its bound: going over it stops every one of them.
//! - **A long-running host keeps a module's watch** for `KEPT_FOR` after
//!   its last call (a host that keeps processes warm: `modhost mcp`): the
//!   events keep the count exact meanwhile, so the next call joins without
//!   walking. The walk is what a call pays otherwise, about 2 µs a file on
//!   this project's virtual machines (one `statx` each): measured with the
//!   host bench (`state-100`, each call made with and without the watch),
//!   a state folder of 100 files adds 0.4 ms to a call of a host that
//!   keeps nothing warm, and nothing measurable to one that does
//!   (`state-100-warm`). A one-shot `modhost invoke` also pays the
//!   descriptor's close as it exits: a Python module's call took 76.5 ms
//!   against 73.7 ms without the watch (p50 of 60, release build).
//! - **The count is of names, in the host's memory.** Each watched folder
//!   keeps its entries by name (size, or the folder's own watch), so a
//!   deletion subtracts exactly what was counted, and a folder moved away
//!   is subtracted without touching the disk. Hard links count once per
//!   name, sparse files at their size, files with blocks beyond their size
//!   (`fallocate` keeping the size) at their blocks: never less than the
//!   disk holds. A module makes no hard link (seccomp refuses `link` and
//!   `linkat` with `EXDEV`): a state file linked to a workspace name and
//!   written through it would grow unseen, since inotify reports a write to
//!   the folder of the name the file was opened through. Nor does it
//!   reserve blocks beyond a file's end (`fallocate` with `KEEP_SIZE`
//!   refused): `RLIMIT_FSIZE` does not bound them, and one call could take
//!   the disk before any event.
//! - **Paths of any length.** A module can nest folders past `PATH_MAX`:
//!   an entry whose path is longer is looked at, listed and watched through
//!   its folder opened a component at a time (a watch through
//!   `/proc/self/fd`), never taken for gone. Not a descriptor kept per
//!   folder: 100,000 folders would take as many descriptors.
//! - **Walks never recurse on the stack:** a module can nest folders as
//!   deep as it likes; the host's walk keeps its own list.
//! - **A watch the kernel refuses stops the call.** When the user's
//!   inotify watches run out (`fs.inotify.max_user_watches`), part of the
//!   tree would go unseen: the call ends saying the host cannot watch it.
//!   One module may hold a quarter of them at most (folders count against
//!   the file bound too), so one module cannot take every other's.
//! - **Lost events stop the calls, never a walk under the lock.** A full
//!   event queue means no count can be trusted. Walking every tree again
//!   there (seconds at 100,000 entries) left every module's events unread
//!   meanwhile, and a module writing on was stopped only after 3.8 GiB
//!   against a bound of 10 MiB. Every watch is dropped instead: the running
//!   calls are stopped at once, measured as they end, and each module's
//!   next call walks its folders as a first call does. A module that floods
//!   the queue so stops the other modules' writing calls of that moment
//!   too: they cannot be held to their bounds either.
//!   When inotify itself is missing, calls run with a warning and the
//!   folders are measured after the call instead.
//! - **Not** a loop-mounted image per module: that needs root and a
//!   mount per module (each mount also changes the mount table every
//!   call's landlock ruleset is checked against), and cannot follow a
//!   raised bound without a resize.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, Mode, OFlags};
use serde::Serialize;

/// The bytes a module's `state` and `artifacts` folders may hold together,
/// unless `config.toml` says otherwise: 1 GiB, the size of the largest
/// single file a module may write (`RLIMIT_FSIZE`).
pub const DEFAULT_STORAGE_BYTES: u64 = 1 << 30;

/// The files (and folders) they may hold together: 100,000, far more than
/// a module keeping notes, caches or indexes makes, and about 400 MiB of
/// inodes and blocks on ext4 at worst.
pub const DEFAULT_STORAGE_FILES: u64 = 100_000;

/// What a module may leave beyond its file bound when it is stopped, as
/// the tests hold it (see the module documentation).
pub const SLACK_FILES: u64 = 1_000;

/// A module's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StorageBound {
    pub bytes: u64,
    pub files: u64,
}

impl Default for StorageBound {
    fn default() -> Self {
        StorageBound {
            bytes: DEFAULT_STORAGE_BYTES,
            files: DEFAULT_STORAGE_FILES,
        }
    }
}

/// What a folder (or a module's folders) holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub bytes: u64,
    pub files: u64,
}

impl Usage {
    fn add(&mut self, other: Usage) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.files = self.files.saturating_add(other.files);
    }

    fn is_over(&self, bound: StorageBound) -> bool {
        self.bytes > bound.bytes || self.files > bound.files
    }
}

/// A module's folders over their bound: the call refused before it ran
/// (`stopped` false) or stopped while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageOverrun {
    pub module: String,
    /// Each folder with what it holds.
    pub folders: Vec<(PathBuf, Usage)>,
    pub bound: StorageBound,
    /// Whether the call was running (and was stopped); else it was refused.
    pub stopped: bool,
    /// Why the watch itself failed, when that is what stopped the call.
    pub unwatchable: Option<String>,
}

impl StorageOverrun {
    fn total(&self) -> Usage {
        let mut total = Usage::default();
        for (_, usage) in &self.folders {
            total.add(*usage);
        }
        total
    }

    /// The config line that raises the bound that was passed.
    fn key(&self) -> &'static str {
        if self.total().files > self.bound.files {
            "storage_files"
        } else {
            "storage_bytes"
        }
    }

    /// What the operator can do.
    pub fn remedy(&self) -> String {
        let folders: Vec<String> = self
            .folders
            .iter()
            .map(|(path, _)| path.display().to_string())
            .collect();
        if self.unwatchable.is_some() && !self.total().is_over(self.bound) {
            return format!(
                "call again; if this recurs, remove what the module no longer needs from {} (fewer folders: the host watches each one)",
                folders.join(" and ")
            );
        }
        format!(
            "remove what the module no longer needs from {}, or raise its bound in config.toml: `[limits.modules.\"{}\"] {} = ...` (or `[limits] {}` for every module)",
            folders.join(" and "),
            self.module,
            self.key(),
            self.key()
        )
    }
}

impl std::fmt::Display for StorageOverrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.total();
        let held: Vec<String> = self
            .folders
            .iter()
            .map(|(path, usage)| {
                format!(
                    "{}: {} files, {}",
                    path.display(),
                    usage.files,
                    modhost_sandbox::bytes_in_words(usage.bytes)
                )
            })
            .collect();
        let what = if self.stopped {
            "the call was stopped: "
        } else {
            "refused before the call ran: "
        };
        if let Some(why) = &self.unwatchable {
            // Not "over its bound": it may not be; the host cannot tell.
            return write!(
                f,
                "{what}the host cannot watch module {}'s state and artifacts folders, so it cannot hold them to their bound of {} files (`storage_files`) and {} (`storage_bytes`): {why}; they hold {} files and {} ({})",
                self.module,
                self.bound.files,
                modhost_sandbox::bytes_in_words(self.bound.bytes),
                total.files,
                modhost_sandbox::bytes_in_words(total.bytes),
                held.join("; ")
            );
        }
        write!(
            f,
            "{what}module {}'s state and artifacts folders hold {} files and {}, over its bound of {} files (`storage_files`) and {} (`storage_bytes`) ({})",
            self.module,
            total.files,
            modhost_sandbox::bytes_in_words(total.bytes),
            self.bound.files,
            modhost_sandbox::bytes_in_words(self.bound.bytes),
            held.join("; ")
        )
    }
}

impl std::error::Error for StorageOverrun {}

/// A call's watch of its module's folders, from before it runs to after it
/// ended. Dropping it (a call cancelled) ends the watch too.
#[derive(Debug)]
pub(crate) struct StorageWatch {
    watcher: Option<&'static Watcher>,
    key: Arc<ModuleKey>,
    over: tokio::sync::watch::Receiver<bool>,
    /// When there is no watcher: the folders and bound, measured after the
    /// call instead.
    unwatched: Option<(String, Vec<PathBuf>, StorageBound)>,
    /// Why there is no watcher, for the call's warning.
    pub(crate) warning: Option<String>,
}

/// Which module's folders (two hosts in one process may have modules of
/// the same id).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ModuleKey {
    id: String,
    folders: Vec<PathBuf>,
}

/// Start watching `module`'s `folders` (its state and artifacts folders;
/// those that do not exist hold nothing) for one call that may write them;
/// refused when they already hold more than `bound`. Blocks on the walk of
/// the folders: call it off the runtime's hot path
/// ([`enter_off_runtime`]).
pub(crate) fn enter(
    module: &str,
    folders: &[PathBuf],
    bound: StorageBound,
    keep: bool,
) -> Result<StorageWatch, StorageOverrun> {
    let key = Arc::new(ModuleKey {
        id: module.to_owned(),
        folders: folders.to_vec(),
    });
    let watcher = match watcher() {
        Ok(watcher) => watcher,
        Err(why) => {
            let folders: Vec<(PathBuf, Usage)> =
                folders.iter().map(|f| (f.clone(), measure(f))).collect();
            let overrun = StorageOverrun {
                module: module.to_owned(),
                folders,
                bound,
                stopped: false,
                unwatchable: None,
            };
            if overrun.total().is_over(bound) {
                return Err(overrun);
            }
            let (_, over) = tokio::sync::watch::channel(false);
            return Ok(StorageWatch {
                watcher: None,
                key,
                over,
                unwatched: Some((module.to_owned(), folders_of(&overrun), bound)),
                warning: Some(format!(
                    "the bound on module {module}'s state and artifacts folders is checked after this call only: {why}"
                )),
            });
        }
    };
    let mut state = watcher.lock();
    state.drain(&watcher.inotify);
    let over = state.join(&watcher.inotify, &key, bound, keep);
    checked_in(watcher, state, key, over)
}

/// A call just joined `key`'s watch: refused (and left again) when the
/// folders are over their bound.
fn checked_in(
    watcher: &'static Watcher,
    mut state: MutexGuard<'_, State>,
    key: Arc<ModuleKey>,
    over: tokio::sync::watch::Receiver<bool>,
) -> Result<StorageWatch, StorageOverrun> {
    let watched = &state.modules[&key];
    let bound = watched.bound;
    let total = watched.total();
    if total.is_over(bound) || watched.unwatchable.is_some() {
        let mut overrun = watched.overrun(&key, false);
        if state.leave(&watcher.inotify, &key) {
            watcher.wake();
        }
        drop(state);
        if overrun.unwatchable.is_some() {
            for (folder, usage) in &mut overrun.folders {
                *usage = measure(folder);
            }
        }
        return Err(overrun);
    }
    drop(state);
    Ok(StorageWatch {
        watcher: Some(watcher),
        key,
        over,
        unwatched: None,
        warning: None,
    })
}

/// The watch a call of `module` runs under, granted `roots` (of the
/// `kinds` its plan says): `None` when it may write neither its `state` nor
/// its `artifacts` folder (it pays nothing then); refused when `folders`
/// (those two) are over `bound`.
pub(crate) fn watch_for(
    module: &str,
    folders: &[PathBuf],
    bound: StorageBound,
    roots: &[modhost_runner::Grant],
    kinds: &std::collections::BTreeMap<String, modproto::RootKind>,
    keep: bool,
) -> Result<Option<StorageWatch>, StorageOverrun> {
    let writes_its_own = roots.iter().any(|grant| {
        grant.access.is_write()
            && matches!(
                kinds.get(&grant.name),
                Some(modproto::RootKind::State | modproto::RootKind::Artifacts)
            )
    });
    if !writes_its_own || WATCHING_OFF.load(Ordering::Relaxed) {
        return Ok(None);
    }
    enter_off_runtime(module, folders, bound, keep).map(Some)
}

/// Set by [`set_watching`] (the host bench): calls run without the bound.
static WATCHING_OFF: AtomicBool = AtomicBool::new(false);

/// Run calls without (`false`) or with their storage bound again: for the
/// host bench, which measures a call with and without the watch in one
/// run. Never needed by a host.
#[doc(hidden)]
pub fn set_watching(enabled: bool) {
    WATCHING_OFF.store(!enabled, Ordering::Relaxed);
}

/// [`enter`] without holding up the runtime thread it is called from. A
/// module whose folders are watched already (a call of it runs, or a
/// long-running host kept the watch) joins at once; a walk runs, on a
/// multi-threaded runtime, with the thread's other tasks handed on (a
/// large tree takes a while).
pub(crate) fn enter_off_runtime(
    module: &str,
    folders: &[PathBuf],
    bound: StorageBound,
    keep: bool,
) -> Result<StorageWatch, StorageOverrun> {
    if let Ok(watcher) = watcher() {
        let key = Arc::new(ModuleKey {
            id: module.to_owned(),
            folders: folders.to_vec(),
        });
        let mut state = watcher.lock();
        state.drain(&watcher.inotify);
        if state.modules.contains_key(&key) {
            let over = state.join(&watcher.inotify, &key, bound, keep);
            return checked_in(watcher, state, key, over);
        }
    }
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| enter(module, folders, bound, keep))
        }
        _ => enter(module, folders, bound, keep),
    }
}

fn folders_of(overrun: &StorageOverrun) -> Vec<PathBuf> {
    overrun.folders.iter().map(|(f, _)| f.clone()).collect()
}

impl StorageWatch {
    /// Resolves once the module's folders passed their bound during the
    /// call (never, when there is no watcher).
    pub(crate) async fn overrun(&mut self) {
        if self.over.wait_for(|over| *over).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The call is over (its processes are dead, or it was stopped): read
    /// what is still queued, and say whether the folders are over their
    /// bound. `stopped` says the call was stopped by [`Self::overrun`].
    pub(crate) fn finish(mut self, stopped: bool) -> Result<(), StorageOverrun> {
        let Some(watcher) = self.watcher.take() else {
            let Some((module, folders, bound)) = self.unwatched.take() else {
                return Ok(());
            };
            let overrun = StorageOverrun {
                module,
                folders: folders.iter().map(|f| (f.clone(), measure(f))).collect(),
                bound,
                stopped: true,
                unwatchable: None,
            };
            return if overrun.total().is_over(bound) {
                Err(overrun)
            } else {
                Ok(())
            };
        };
        let mut state = watcher.lock();
        state.drain(&watcher.inotify);
        let result = match state.modules.get_mut(&self.key) {
            Some(watched) if stopped || watched.is_over() => {
                // A call killed in the middle of a system call (a large
                // write, an allocation) leaves blocks no event reports:
                // the watch is not kept past its calls, and the next call
                // walks the folders again.
                watched.keep = false;
                Err(watched.overrun(&self.key, true))
            }
            _ => Ok(()),
        };
        if state.leave(&watcher.inotify, &self.key) {
            watcher.wake();
        }
        drop(state);
        match result {
            // What the folders hold now, for the message: measured without
            // the lock, so other modules' events are read meanwhile (the
            // watch's counts may be stale, or, when it could not watch or
            // count, incomplete).
            Err(mut overrun) => {
                for (folder, usage) in &mut overrun.folders {
                    *usage = measure(folder);
                }
                Err(overrun)
            }
            Ok(()) => Ok(()),
        }
    }
}

impl Drop for StorageWatch {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.take()
            && watcher.lock().leave(&watcher.inotify, &self.key)
        {
            watcher.wake();
        }
    }
}

/// What `folder` holds, walked without watching (no inotify here, or
/// counts that can no longer be trusted). What cannot be looked at is
/// skipped: the figure is for a message, or a bound checked after the call.
fn measure(folder: &Path) -> Usage {
    let mut usage = Usage::default();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = list(&dir) else {
            continue;
        };
        for (name, seen) in entries {
            usage.files += 1;
            if seen.dir {
                pending.push(dir.join(name));
            } else {
                usage.bytes = usage.bytes.saturating_add(seen.charge);
            }
        }
    }
    usage
}

/// What the bound counts of one entry, from its `lstat`.
#[derive(Debug, Clone, Copy)]
struct Seen {
    dir: bool,
    /// Its size, or the blocks it holds when more (`fallocate` with
    /// `FALLOC_FL_KEEP_SIZE` reserves blocks beyond the size).
    charge: u64,
}

impl Seen {
    fn of(stat: &rustix::fs::Stat) -> Seen {
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        let blocks = u64::try_from(stat.st_blocks).unwrap_or(0);
        Seen {
            dir: rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::Directory,
            charge: size.max(blocks.saturating_mul(512)),
        }
    }
}

/// Paths at most this long are used as they are; longer ones (a module can
/// nest folders past `PATH_MAX`, 4,096 bytes) are opened a folder at a time.
const PATH_FITS: usize = 4000;

/// Open the folder at `path` with `flags` (never through a link as its
/// last component), however long the path: the part that fits is opened
/// as is (the module's own folders are resolved by the host), the rest one
/// folder at a time, through no link.
fn open_folder(path: &Path, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let always = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags | always, Mode::empty()) {
        Err(rustix::io::Errno::NAMETOOLONG) => {}
        other => return other,
    }
    let mut prefix = PathBuf::new();
    let mut rest = Vec::new();
    for component in path.components() {
        let part = component.as_os_str();
        if rest.is_empty() && prefix.as_os_str().len() + part.len() + 1 < PATH_FITS {
            prefix.push(part);
        } else {
            rest.push(part);
        }
    }
    let mut fd = rustix::fs::open(
        &prefix,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let last = rest.len().saturating_sub(1);
    for (index, name) in rest.into_iter().enumerate() {
        let these = if index == last { flags } else { OFlags::PATH };
        fd = rustix::fs::openat(&fd, name, these | always, Mode::empty())?;
    }
    Ok(fd)
}

/// `lstat` of `path`, however long.
fn stat_entry(path: &Path) -> rustix::io::Result<Seen> {
    match rustix::fs::statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NAMETOOLONG) => {}
        other => return other.map(|stat| Seen::of(&stat)),
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(rustix::io::Errno::NAMETOOLONG);
    };
    let folder = open_folder(parent, OFlags::PATH)?;
    rustix::fs::statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW).map(|stat| Seen::of(&stat))
}

/// The entries of the folder at `path`, however long, each with its
/// `lstat`; one removed while listed is left out.
fn list(path: &Path) -> rustix::io::Result<Vec<(OsString, Seen)>> {
    let folder = open_folder(path, OFlags::RDONLY)?;
    let mut entries = Vec::new();
    for entry in rustix::fs::Dir::read_from(&folder)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        match rustix::fs::statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => entries.push((
                OsString::from(std::ffi::OsStr::from_bytes(name.to_bytes())),
                Seen::of(&stat),
            )),
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(entries)
}

/// Add a watch on the folder at `path`, however long.
fn add_watch(inotify: &OwnedFd, path: &Path) -> rustix::io::Result<i32> {
    match inotify::add_watch(inotify, path, watch_flags()) {
        Err(rustix::io::Errno::NAMETOOLONG) => {}
        other => return other,
    }
    // Through the descriptor's name in /proc, which the kernel follows to
    // the folder itself (opened through no link above).
    let folder = open_folder(path, OFlags::PATH)?;
    let name = format!("/proc/self/fd/{}", folder.as_raw_fd());
    inotify::add_watch(
        inotify,
        name.as_str(),
        watch_flags() - WatchFlags::DONT_FOLLOW,
    )
}

/// Whether an error looking at an entry means it is gone (its removal is,
/// or was, an event of its own), rather than that it cannot be looked at.
fn is_gone(error: rustix::io::Errno) -> bool {
    matches!(error, rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR)
}

/// The host's one inotify descriptor, the state of every watched module,
/// and the thread that reads events as they come.
#[derive(Debug)]
struct Watcher {
    inotify: OwnedFd,
    /// An eventfd that wakes the thread when a kept watch falls idle (its
    /// expiry is then due some time).
    wake: OwnedFd,
    state: Mutex<State>,
}

/// How long a long-running host keeps watching a module's folders after
/// its last call: its next call then knows their usage without walking
/// them (the events kept it up to date). As long as processes started
/// ahead wait (`runner::native::warm`).
const KEPT_FOR: Duration = Duration::from_secs(60);

static WATCHER: OnceLock<Result<Watcher, String>> = OnceLock::new();

/// The most folders the host watches for one module (each takes one of
/// the user's inotify watches): a quarter of `fs.inotify.max_user_watches`,
/// so one module cannot take the watches every other module (and every
/// other program of the user) needs. A module with more is stopped as one
/// the host cannot watch.
fn watch_cap() -> usize {
    #[cfg(test)]
    if let Some(cap) = tests::WATCH_CAP.with(std::cell::Cell::get) {
        return cap;
    }
    static CAP: OnceLock<usize> = OnceLock::new();
    *CAP.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok())
            .map_or(2048, |watches| (watches / 4).max(1))
    })
}

/// The events a watched folder reports: every change to its entries and
/// their sizes, and its own removal.
fn watch_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::EXCL_UNLINK
}

fn watcher() -> Result<&'static Watcher, &'static str> {
    WATCHER
        .get_or_init(|| {
            let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
                .map_err(|e| format!("inotify is not available: {e}"))?;
            // SAFETY: eventfd returns a new descriptor or -1.
            #[allow(unsafe_code)]
            let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if wake < 0 {
                return Err(format!(
                    "an eventfd could not be made: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: a descriptor just made, owned by nobody else.
            #[allow(unsafe_code)]
            let wake = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(wake) };
            std::thread::Builder::new()
                .name("modhost-storage".into())
                .spawn(watch_events)
                .map_err(|e| format!("the watcher thread could not start: {e}"))?;
            Ok(Watcher {
                inotify,
                wake,
                state: Mutex::new(State::default()),
            })
        })
        .as_ref()
        .map_err(String::as_str)
}

impl Watcher {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The counts stay consistent whatever panicked while holding them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wake the thread to look at the idle watches' expiry.
    fn wake(&self) {
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }
}

/// The watcher thread: wait for events, count them, and tell the calls of a
/// module that went over its bound.
fn watch_events() {
    let watcher = loop {
        // Started from inside `WATCHER`'s initialisation: wait for it.
        match WATCHER.get() {
            Some(Ok(watcher)) => break watcher,
            Some(Err(_)) => return,
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    };
    let mut timeout: libc::c_int = -1;
    loop {
        let mut ready = [
            libc::pollfd {
                fd: watcher.inotify.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: watcher.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on two pollfds on the stack, on descriptors the
        // watcher keeps open for the host's life.
        #[allow(unsafe_code)]
        let polled = unsafe { libc::poll(ready.as_mut_ptr(), 2, timeout) };
        if polled < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if ready[1].revents != 0 {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&watcher.wake, &mut count);
        }
        let mut state = watcher.lock();
        state.drain(&watcher.inotify);
        let next = state.expire_idle(&watcher.inotify, Instant::now());
        state.expiry_armed = next.is_some();
        drop(state);
        timeout = next.map_or(-1, |wait| {
            libc::c_int::try_from(wait.as_millis().saturating_add(1)).unwrap_or(libc::c_int::MAX)
        });
    }
}

/// Every watched module and folder.
#[derive(Debug, Default)]
struct State {
    modules: HashMap<Arc<ModuleKey>, Watched>,
    dirs: HashMap<i32, Dir>,
    /// Whether the thread waits with a timeout (an idle watch's expiry is
    /// due some time): a watch falling idle then needs no wake-up, since
    /// the thread looks again when that timeout ends.
    expiry_armed: bool,
}

/// One module's folders under watch.
#[derive(Debug)]
struct Watched {
    /// Its folders, each with its watch (none when it does not exist) and
    /// what it holds.
    roots: Vec<Root>,
    /// Calls running under this watch.
    calls: usize,
    /// Whether the watch is kept after the last call (a long-running host).
    keep: bool,
    /// Since when no call runs, while it is kept.
    idle_since: Option<Instant>,
    bound: StorageBound,
    over: tokio::sync::watch::Sender<bool>,
    /// Why part of the tree could not be watched, or its changes could not
    /// be counted: its calls are stopped, and it is measured again after.
    unwatchable: Option<String>,
    /// Folders watched (one inotify watch each).
    watches: usize,
    /// The most it may have ([`watch_cap`]).
    watch_cap: usize,
}

#[derive(Debug)]
struct Root {
    path: PathBuf,
    wd: Option<i32>,
    usage: Usage,
}

/// One watched folder: where it is, whose it is, and its entries.
#[derive(Debug)]
struct Dir {
    module: Arc<ModuleKey>,
    root: usize,
    path: PathBuf,
    /// Its parent's watch and its name there; `None` for a module's folder.
    parent: Option<(i32, OsString)>,
    entries: HashMap<OsString, Entry>,
}

#[derive(Debug, Clone, Copy)]
enum Entry {
    /// Not a folder, with its size.
    File(u64),
    /// A folder, by its watch.
    Dir(i32),
}

impl Watched {
    fn total(&self) -> Usage {
        let mut total = Usage::default();
        for root in &self.roots {
            total.add(root.usage);
        }
        total
    }

    fn is_over(&self) -> bool {
        self.total().is_over(self.bound) || self.unwatchable.is_some()
    }

    fn overrun(&self, key: &ModuleKey, stopped: bool) -> StorageOverrun {
        StorageOverrun {
            module: key.id.clone(),
            folders: self
                .roots
                .iter()
                .map(|r| (r.path.clone(), r.usage))
                .collect(),
            bound: self.bound,
            stopped,
            unwatchable: self.unwatchable.clone(),
        }
    }
}

impl State {
    /// Add a call to `key`'s watch, starting it (walking and watching its
    /// folders) when it is the first; the receiver of its "over" signal.
    fn join(
        &mut self,
        inotify: &OwnedFd,
        key: &Arc<ModuleKey>,
        bound: StorageBound,
        keep: bool,
    ) -> tokio::sync::watch::Receiver<bool> {
        if let Some(watched) = self.modules.get_mut(key) {
            watched.calls += 1;
            watched.keep |= keep;
            watched.idle_since = None;
            watched.bound = bound;
            // Over once and back under (the operator made room): the new
            // call starts unsignalled.
            if !watched.is_over() {
                watched
                    .over
                    .send_if_modified(|over| std::mem::replace(over, false));
            }
            // A folder that did not exist when the watch began (or was
            // removed since, by the operator) may exist now: the host
            // makes a call's granted folders before it runs.
            let lost = watched.unwatchable.is_some();
            let missing: Vec<usize> = watched
                .roots
                .iter()
                .enumerate()
                .filter(|(_, root)| !lost && root.wd.is_none() && root.path.is_dir())
                .map(|(index, _)| index)
                .collect();
            let receiver = watched.over.subscribe();
            for index in missing {
                let path = self.modules[key].roots[index].path.clone();
                let wd = self.watch_tree(inotify, key, index, path, None);
                if let Some(watched) = self.modules.get_mut(key) {
                    watched.roots[index].wd = wd;
                }
            }
            return receiver;
        }
        let (over, receiver) = tokio::sync::watch::channel(false);
        let roots = key
            .folders
            .iter()
            .map(|path| Root {
                path: path.clone(),
                wd: None,
                usage: Usage::default(),
            })
            .collect();
        self.modules.insert(
            Arc::clone(key),
            Watched {
                roots,
                calls: 1,
                keep,
                idle_since: None,
                bound,
                over,
                unwatchable: None,
                watches: 0,
                watch_cap: watch_cap(),
            },
        );
        self.watch_roots(inotify, key);
        receiver
    }

    /// A call of `key` ended: when it was the last, its watches go, or,
    /// kept, fall idle (`true`: the thread must be woken to arm an expiry).
    fn leave(&mut self, inotify: &OwnedFd, key: &Arc<ModuleKey>) -> bool {
        let Some(watched) = self.modules.get_mut(key) else {
            return false;
        };
        watched.calls = watched.calls.saturating_sub(1);
        if watched.calls > 0 {
            return false;
        }
        if watched.keep && watched.unwatchable.is_none() {
            watched.idle_since = Some(Instant::now());
            return !self.expiry_armed;
        }
        self.unwatch_module(inotify, key);
        self.modules.remove(key);
        false
    }

    /// End the kept watches idle for [`KEPT_FOR`] by `now`; how long until
    /// the next one is due, if one waits.
    fn expire_idle(&mut self, inotify: &OwnedFd, now: Instant) -> Option<Duration> {
        let expired: Vec<Arc<ModuleKey>> = self
            .modules
            .iter()
            .filter(|(_, w)| w.idle_since.is_some_and(|since| since + KEPT_FOR <= now))
            .map(|(key, _)| Arc::clone(key))
            .collect();
        for key in expired {
            self.unwatch_module(inotify, &key);
            self.modules.remove(&key);
        }
        self.modules
            .values()
            .filter_map(|w| w.idle_since)
            .map(|since| (since + KEPT_FOR).saturating_duration_since(now))
            .min()
    }

    /// Walk and watch each of `key`'s folders that exists.
    fn watch_roots(&mut self, inotify: &OwnedFd, key: &Arc<ModuleKey>) {
        let count = self.modules.get(key).map_or(0, |w| w.roots.len());
        for index in 0..count {
            let path = self.modules[key].roots[index].path.clone();
            let wd = self.watch_tree(inotify, key, index, path, None);
            if let Some(watched) = self.modules.get_mut(key) {
                watched.roots[index].wd = wd;
            }
        }
    }

    /// Forget every folder of `key` and remove its watches.
    fn unwatch_module(&mut self, inotify: &OwnedFd, key: &Arc<ModuleKey>) {
        let wds: Vec<i32> = self
            .dirs
            .iter()
            .filter(|(_, dir)| dir.module == *key)
            .map(|(wd, _)| *wd)
            .collect();
        for wd in wds {
            self.dirs.remove(&wd);
            let _ = inotify::remove_watch(inotify, wd);
        }
        if let Some(watched) = self.modules.get_mut(key) {
            watched.watches = 0;
            for root in &mut watched.roots {
                root.wd = None;
                root.usage = Usage::default();
            }
        }
    }

    /// Watch the folder at `path` and everything beneath it, counting what
    /// it holds into root `root` of `key` (and, unless it is the root
    /// itself, it too); returns its watch. Watched before listed, so
    /// nothing made in it after the listing goes unseen.
    fn watch_tree(
        &mut self,
        inotify: &OwnedFd,
        key: &Arc<ModuleKey>,
        root: usize,
        path: PathBuf,
        parent: Option<(i32, OsString)>,
    ) -> Option<i32> {
        let mut pending = vec![(path, parent)];
        let mut top = None;
        while let Some((path, parent)) = pending.pop() {
            let Some(watched) = self.modules.get(key) else {
                break;
            };
            if watched.unwatchable.is_some() {
                // It will be stopped (or refused): watching more of it
                // only holds up every other module.
                break;
            }
            if watched.watches >= watched.watch_cap {
                let why = format!(
                    "its folders hold more than {} folders, the most the host watches for one module (a quarter of fs.inotify.max_user_watches)",
                    watched.watch_cap
                );
                self.unwatchable(key, why);
                break;
            }
            let wd = match add_watch(inotify, &path) {
                Ok(wd) => wd,
                // Gone (or no folder) already: its removal is an event of
                // its parent's, or it was never there.
                Err(e) if is_gone(e) => continue,
                Err(e) => {
                    self.unwatchable(key, format!("watching {}: {e}", path.display()));
                    continue;
                }
            };
            if self.dirs.contains_key(&wd) {
                // The same folder, seen by another name or an event and a
                // listing both: counted once.
                continue;
            }
            if let Some((parent_wd, name)) = &parent {
                let Some(parent_dir) = self.dirs.get_mut(parent_wd) else {
                    let _ = inotify::remove_watch(inotify, wd);
                    continue;
                };
                if let Some(old) = parent_dir.entries.insert(name.clone(), Entry::Dir(wd)) {
                    self.uncount(key, root, old, inotify);
                }
                self.count(key, root, Usage { bytes: 0, files: 1 });
            } else {
                top = Some(wd);
            }
            self.dirs.insert(
                wd,
                Dir {
                    module: Arc::clone(key),
                    root,
                    path: path.clone(),
                    parent,
                    entries: HashMap::new(),
                },
            );
            if let Some(watched) = self.modules.get_mut(key) {
                watched.watches += 1;
            }
            let entries = match list(&path) {
                Ok(entries) => entries,
                Err(e) if is_gone(e) => continue,
                Err(e) => {
                    self.unwatchable(key, format!("listing {}: {e}", path.display()));
                    continue;
                }
            };
            for (name, seen) in entries {
                if seen.dir {
                    pending.push((path.join(&name), Some((wd, name))));
                } else {
                    self.set_file(key, root, wd, name, seen.charge, inotify);
                }
            }
        }
        top
    }

    /// Record `name` in folder `wd` as a file of `size` bytes.
    fn set_file(
        &mut self,
        key: &Arc<ModuleKey>,
        root: usize,
        wd: i32,
        name: OsString,
        size: u64,
        inotify: &OwnedFd,
    ) {
        let Some(dir) = self.dirs.get_mut(&wd) else {
            return;
        };
        let old = dir.entries.insert(name, Entry::File(size));
        if let Some(old) = old {
            self.uncount(key, root, old, inotify);
        }
        self.count(
            key,
            root,
            Usage {
                bytes: size,
                files: 1,
            },
        );
    }

    /// Take `entry` (and, for a folder, everything beneath it, whose
    /// watches go) out of the count.
    fn uncount(&mut self, key: &Arc<ModuleKey>, root: usize, entry: Entry, inotify: &OwnedFd) {
        match entry {
            Entry::File(size) => self.count_down(
                key,
                root,
                Usage {
                    bytes: size,
                    files: 1,
                },
            ),
            Entry::Dir(wd) => {
                let mut pending = vec![wd];
                while let Some(wd) = pending.pop() {
                    self.count_down(key, root, Usage { bytes: 0, files: 1 });
                    let Some(dir) = self.dirs.remove(&wd) else {
                        continue;
                    };
                    if let Some(watched) = self.modules.get_mut(key) {
                        watched.watches = watched.watches.saturating_sub(1);
                    }
                    let _ = inotify::remove_watch(inotify, wd);
                    for (_, entry) in dir.entries {
                        match entry {
                            Entry::File(size) => self.count_down(
                                key,
                                root,
                                Usage {
                                    bytes: size,
                                    files: 1,
                                },
                            ),
                            Entry::Dir(child) => pending.push(child),
                        }
                    }
                }
            }
        }
    }

    fn count(&mut self, key: &Arc<ModuleKey>, root: usize, usage: Usage) {
        if let Some(r) = self
            .modules
            .get_mut(key)
            .and_then(|w| w.roots.get_mut(root))
        {
            r.usage.add(usage);
        }
    }

    fn count_down(&mut self, key: &Arc<ModuleKey>, root: usize, usage: Usage) {
        if let Some(r) = self
            .modules
            .get_mut(key)
            .and_then(|w| w.roots.get_mut(root))
        {
            r.usage.bytes = r.usage.bytes.saturating_sub(usage.bytes);
            r.usage.files = r.usage.files.saturating_sub(usage.files);
        }
    }

    fn unwatchable(&mut self, key: &Arc<ModuleKey>, why: String) {
        if let Some(watched) = self.modules.get_mut(key) {
            watched.unwatchable.get_or_insert(why);
        }
    }

    /// Read every queued event, count it, and signal each module that went
    /// over its bound.
    fn drain(&mut self, inotify: &OwnedFd) {
        // A module writing without pause may keep the queue from ever
        // running dry: the lock is let go between rounds, so the calls
        // starting and ending meanwhile are not held up.
        for _ in 0..64 {
            if !self.drain_some(inotify) {
                break;
            }
        }
    }

    /// Read and count up to `MAX_EVENTS` queued events; `true` when there
    /// may be more.
    fn drain_some(&mut self, inotify: &OwnedFd) -> bool {
        const MAX_EVENTS: usize = 64 * 1024;
        let mut read = 0;
        let mut buffer = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(inotify.as_fd(), &mut buffer);
        let mut overflowed = false;
        let mut events: Vec<(i32, ReadFlags, Option<OsString>)> = Vec::new();
        loop {
            if read >= MAX_EVENTS {
                break;
            }
            match reader.next() {
                Ok(event) => events.push((
                    event.wd(),
                    event.events(),
                    event
                        .file_name()
                        .map(|n| OsString::from(std::ffi::OsStr::from_bytes(n.to_bytes()))),
                )),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
            read += 1;
            // Count in batches, so a module writing without pause cannot
            // keep the host reading without counting.
            if events.len() >= 4096 {
                for (wd, mask, name) in events.drain(..) {
                    overflowed |= self.take(inotify, wd, mask, name);
                }
                self.signal();
            }
        }
        for (wd, mask, name) in events {
            overflowed |= self.take(inotify, wd, mask, name);
        }
        if overflowed {
            self.events_lost(inotify);
        }
        self.signal();
        read >= MAX_EVENTS
    }

    /// Count one event; `true` when the queue overflowed (events were lost).
    fn take(
        &mut self,
        inotify: &OwnedFd,
        wd: i32,
        mask: ReadFlags,
        name: Option<OsString>,
    ) -> bool {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            return true;
        }
        let Some(dir) = self.dirs.get(&wd) else {
            return false;
        };
        let (key, root) = (Arc::clone(&dir.module), dir.root);
        if mask.contains(ReadFlags::IGNORED)
            || mask.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
        {
            match dir.parent.clone() {
                // A folder of the tree removed: out of its parent's count.
                Some((parent, name)) => self.remove_entry(inotify, &key, root, parent, &name),
                // A module's folder itself removed or moved (the host's or
                // the operator's doing): list it again.
                None => {
                    self.unwatch_module(inotify, &key);
                    self.watch_roots(inotify, &key);
                }
            }
            return false;
        }
        let Some(name) = name else {
            return false;
        };
        if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
            self.remove_entry(inotify, &key, root, wd, &name);
        }
        if mask.intersects(
            ReadFlags::CREATE | ReadFlags::MOVED_TO | ReadFlags::MODIFY | ReadFlags::CLOSE_WRITE,
        ) {
            self.refresh_entry(inotify, &key, root, wd, name);
        }
        false
    }

    fn remove_entry(
        &mut self,
        inotify: &OwnedFd,
        key: &Arc<ModuleKey>,
        root: usize,
        wd: i32,
        name: &OsString,
    ) {
        let entry = self.dirs.get_mut(&wd).and_then(|d| d.entries.remove(name));
        if let Some(entry) = entry {
            self.uncount(key, root, entry, inotify);
        }
    }

    /// Look at `name` in folder `wd` as it is now, and count it so.
    fn refresh_entry(
        &mut self,
        inotify: &OwnedFd,
        key: &Arc<ModuleKey>,
        root: usize,
        wd: i32,
        name: OsString,
    ) {
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let path = dir.path.join(&name);
        let known = dir.entries.get(&name).copied();
        let seen = match stat_entry(&path) {
            Ok(seen) => seen,
            Err(e) if is_gone(e) => {
                // Gone again: its removal is (or was) an event too.
                self.remove_entry(inotify, key, root, wd, &name);
                return;
            }
            // Still there, but the host cannot tell how much it holds:
            // the call cannot be held to its bound, and is stopped.
            Err(e) => {
                self.unwatchable(
                    key,
                    format!("the host could not look at {}: {e}", path.display()),
                );
                return;
            }
        };
        match (seen.dir, known) {
            (true, Some(Entry::Dir(_))) => {}
            (true, _) => {
                self.watch_tree(inotify, key, root, path, Some((wd, name)));
            }
            (false, Some(Entry::Dir(_))) => {
                self.remove_entry(inotify, key, root, wd, &name);
                self.set_file(key, root, wd, name, seen.charge, inotify);
            }
            (false, _) => self.set_file(key, root, wd, name, seen.charge, inotify),
        }
    }

    /// Events were lost (the kernel's queue overflowed): no module's count
    /// can be trusted, and listing every tree again here, under the lock,
    /// would leave every module's events unread meanwhile (seconds for a
    /// large tree, while a module writes on). Instead every module's
    /// watches go: the calls running are stopped at once (they cannot be
    /// held to their bound), their folders are measured as they end
    /// (`finish`, outside the lock), and a module's next call walks its
    /// folders again as a first call does. A kept watch with no call
    /// running simply ends.
    fn events_lost(&mut self, inotify: &OwnedFd) {
        let keys: Vec<Arc<ModuleKey>> = self.modules.keys().cloned().collect();
        for key in keys {
            self.unwatch_module(inotify, &key);
            if self.modules.get(&key).is_some_and(|w| w.calls == 0) {
                self.modules.remove(&key);
                continue;
            }
            self.unwatchable(
                &key,
                "changes to them were lost (the kernel's inotify event queue overflowed, `fs.inotify.max_queued_events`), so the host could not count them".to_string(),
            );
        }
    }

    /// Tell the calls of every module now over its bound.
    fn signal(&self) {
        for watched in self.modules.values() {
            if watched.is_over() {
                watched
                    .over
                    .send_if_modified(|over| !std::mem::replace(over, true));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// [`watch_cap`] for the watches this test thread starts.
        pub(super) static WATCH_CAP: std::cell::Cell<Option<usize>> =
            const { std::cell::Cell::new(None) };
    }

    fn folders(dir: &Path) -> Vec<PathBuf> {
        let (state, artifacts) = (dir.join("state/m"), dir.join("artifacts/m"));
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&artifacts).unwrap();
        vec![state, artifacts]
    }

    fn bound(files: u64) -> StorageBound {
        StorageBound {
            bytes: 1 << 20,
            files,
        }
    }

    /// What the folders hold on disk, walked.
    fn on_disk(roots: &[PathBuf]) -> Usage {
        let mut usage = Usage::default();
        for root in roots {
            usage.add(measure(root));
        }
        usage
    }

    /// The watch counts `files` entries, and what the disk holds: at least
    /// `size`, the sizes of the files.
    #[track_caller]
    fn assert_counted(watch: &StorageWatch, roots: &[PathBuf], files: u64, size: u64) {
        let usage = counted(watch);
        assert_eq!(usage, on_disk(roots));
        assert_eq!(usage.files, files);
        assert!(usage.bytes >= size, "{usage:?} for {size} bytes of files");
    }

    /// What the watch counts now, read as a call's finish reads it.
    fn counted(watch: &StorageWatch) -> Usage {
        let watcher = watch.watcher.expect("watched");
        let mut state = watcher.lock();
        state.drain(&watcher.inotify);
        state.modules[&watch.key].total()
    }

    #[test]
    fn the_walk_counts_files_folders_and_bytes_of_both_folders() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        std::fs::create_dir_all(roots[0].join("a/b")).unwrap();
        std::fs::write(roots[0].join("a/b/f"), [0u8; 100]).unwrap();
        std::fs::write(roots[1].join("g"), [0u8; 10]).unwrap();
        let watch = enter("m", &roots, bound(100), false).unwrap();
        // a, a/b, a/b/f, g; each file at its size or its blocks, the more.
        assert_eq!(counted(&watch), on_disk(&roots));
        assert_eq!(counted(&watch).files, 4);
        assert_eq!(measure(&roots[0]).files, 3);
        assert!(measure(&roots[0]).bytes >= 100 && measure(&roots[1]).bytes >= 10);
        watch.finish(false).unwrap();
    }

    /// Every way a tree changes is followed, including what happens in a
    /// folder made after the watch began and a folder moved away whole.
    #[test]
    fn creations_writes_deletions_and_moves_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let watch = enter("m", &roots, bound(1000), false).unwrap();
        let state = &roots[0];
        std::fs::create_dir_all(state.join("x/y/z")).unwrap();
        for i in 0..10 {
            std::fs::write(state.join(format!("x/y/z/{i}")), [1u8; 7]).unwrap();
        }
        assert_counted(&watch, &roots, 13, 70);
        std::fs::write(state.join("x/y/z/0"), [1u8; 1000]).unwrap();
        assert_counted(&watch, &roots, 13, 1063);
        std::fs::remove_file(state.join("x/y/z/1")).unwrap();
        assert_counted(&watch, &roots, 12, 1056);
        // Moved out of the tree: its subtree leaves the count.
        std::fs::rename(state.join("x/y"), dir.path().join("away")).unwrap();
        assert_counted(&watch, &roots, 1, 0);
        // And back in, under another name: listed again.
        std::fs::rename(dir.path().join("away"), state.join("x/back")).unwrap();
        assert_counted(&watch, &roots, 12, 1056);
        std::fs::remove_dir_all(state.join("x")).unwrap();
        assert_eq!(counted(&watch), Usage::default());
        watch.finish(false).unwrap();
    }

    /// The attack: folders nested far deeper than any stack would take if
    /// the walk recursed.
    #[test]
    fn a_deep_tree_is_walked_without_recursion() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let mut path = roots[0].clone();
        for _ in 0..300 {
            path.push("d");
        }
        std::fs::create_dir_all(&path).unwrap();
        let watch = enter("m", &roots, bound(1000), false).unwrap();
        assert_eq!(counted(&watch).files, 300);
        watch.finish(false).unwrap();
    }

    #[test]
    fn passing_the_bound_signals_the_call_and_the_next_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let mut watch = enter("m", &roots, bound(20), false).unwrap();
        for i in 0..25 {
            std::fs::write(roots[1].join(format!("{i}")), b"x").unwrap();
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), watch.overrun())
                .await
                .expect("the watcher thread signalled the overrun")
        });
        let overrun = watch.finish(true).unwrap_err();
        assert!(overrun.stopped && overrun.total().files == 25);
        let message = overrun.to_string();
        assert!(
            message.contains("25 files") && message.contains("bound of 20 files"),
            "{message}"
        );
        assert!(
            overrun
                .remedy()
                .contains("[limits.modules.\"m\"] storage_files")
        );
        let refused = enter("m", &roots, bound(20), false).unwrap_err();
        assert!(!refused.stopped && refused.to_string().starts_with("refused"));
        assert!(
            refused
                .to_string()
                .contains(&roots[1].display().to_string())
        );
        std::fs::remove_file(roots[1].join("0")).unwrap();
        for i in 1..10 {
            std::fs::remove_file(roots[1].join(format!("{i}"))).unwrap();
        }
        enter("m", &roots, bound(20), false)
            .unwrap()
            .finish(false)
            .unwrap();
    }

    /// The bytes bound, passed by growing one file in place.
    #[test]
    fn a_file_growing_past_the_byte_bound_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let watch = enter("m", &roots, bound(10), false).unwrap();
        use std::io::Write;
        let mut file = std::fs::File::create(roots[0].join("big")).unwrap();
        for _ in 0..20 {
            file.write_all(&[0u8; 64 * 1024]).unwrap();
        }
        drop(file);
        let overrun = watch.finish(false).unwrap_err();
        assert_eq!(overrun.key(), "storage_bytes");
        assert!(overrun.to_string().contains("1.2 MiB"), "{overrun}");
    }

    /// A long-running host keeps a module's watch after its last call: the
    /// next call knows the usage without a walk, changes made between calls
    /// count, and the watch ends once idle for `KEPT_FOR`.
    #[test]
    fn a_kept_watch_follows_changes_between_calls_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let first = enter("m", &roots, bound(100), true).unwrap();
        let (watcher, key) = (first.watcher.unwrap(), Arc::clone(&first.key));
        first.finish(false).unwrap();
        assert!(watcher.lock().modules[&key].idle_since.is_some(), "kept");
        std::fs::write(roots[0].join("between"), b"calls").unwrap();
        let second = enter_off_runtime("m", &roots, bound(100), true).unwrap();
        assert_counted(&second, &roots, 1, 5);
        second.finish(false).unwrap();
        let later = Instant::now() + KEPT_FOR;
        let next = watcher.lock().expire_idle(&watcher.inotify, later);
        let state = watcher.lock();
        assert!(!state.modules.contains_key(&key), "expired ({next:?})");
        assert!(state.dirs.values().all(|d| d.module != key));
    }

    /// A kept watch that went over its bound, and back under once the
    /// operator made room: the next call runs, not signalled at once.
    #[test]
    fn a_kept_watch_back_under_its_bound_lets_the_next_call_run() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let first = enter("m", &roots, bound(5), true).unwrap();
        for i in 0..10 {
            std::fs::write(roots[0].join(format!("{i}")), b"x").unwrap();
        }
        first.finish(false).unwrap_err();
        enter("m", &roots, bound(5), true).unwrap_err();
        for i in 0..10 {
            std::fs::remove_file(roots[0].join(format!("{i}"))).unwrap();
        }
        let next = enter_off_runtime("m", &roots, bound(5), true).unwrap();
        assert!(!*next.over.borrow(), "the new call starts signalled");
        next.finish(false).unwrap();
    }

    /// Two calls of one module share its watch; the watch ends with the
    /// last one, and nothing is left watched.
    #[test]
    fn concurrent_calls_share_a_watch_that_ends_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let first = enter("m", &roots, bound(100), false).unwrap();
        let second = enter("m", &roots, bound(100), false).unwrap();
        std::fs::write(roots[0].join("f"), b"x").unwrap();
        assert_eq!(counted(&second).files, 1);
        let watcher = first.watcher.unwrap();
        let key = Arc::clone(&first.key);
        first.finish(false).unwrap();
        assert_eq!(watcher.lock().modules[&key].calls, 1);
        drop(second);
        let state = watcher.lock();
        assert!(!state.modules.contains_key(&key));
        assert!(
            state.dirs.values().all(|d| d.module != key),
            "watches left behind"
        );
    }

    /// The attack: blocks reserved beyond the size (`fallocate` with
    /// `FALLOC_FL_KEEP_SIZE`) leave the size at 0. They count, to the
    /// watch and to the walk.
    #[test]
    fn blocks_reserved_beyond_the_size_count() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let watch = enter("m", &roots, bound(100), false).unwrap();
        let file = std::fs::File::create(roots[0].join("reserved")).unwrap();
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, 2 << 20)
            .expect("fallocate");
        // A write of nothing: the event that makes the watch look again.
        std::fs::OpenOptions::new()
            .append(true)
            .open(roots[0].join("reserved"))
            .unwrap();
        drop(file);
        assert_eq!(
            std::fs::metadata(roots[0].join("reserved")).unwrap().len(),
            0
        );
        assert!(counted(&watch).bytes >= 2 << 20, "{:?}", counted(&watch));
        let overrun = watch.finish(false).unwrap_err();
        assert_eq!(overrun.key(), "storage_bytes");
        assert!(measure(&roots[0]).bytes >= 2 << 20);
        let refused = enter("m", &roots, bound(100), false).unwrap_err();
        assert!(!refused.stopped, "{refused}");
    }

    /// Make folders beneath `top` until the path is longer than `PATH_MAX`,
    /// one at a time (as a module can); the deepest folder, open.
    fn deep_folder(top: &Path) -> (OwnedFd, usize) {
        let mut fd =
            rustix::fs::open(top, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mut length = top.as_os_str().len();
        let name = "d".repeat(200);
        while length < 4200 {
            rustix::fs::mkdirat(&fd, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
            fd = rustix::fs::openat(
                &fd,
                name.as_str(),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
            length += 201;
        }
        (fd, length)
    }

    /// Write `bytes` to a new file `name` in the folder `dir`.
    fn write_at(dir: &OwnedFd, name: &str, bytes: usize) {
        let file = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&file, &vec![b'q'; bytes]).unwrap();
    }

    /// The attack: files written where their path is longer than
    /// `PATH_MAX`, where a look by path fails. They count, to the watch
    /// (made before the folders) and to the walk (after).
    #[test]
    fn files_deeper_than_path_max_count() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let watch = enter("m", &roots, bound(1000), false).unwrap();
        let (deep, length) = deep_folder(&roots[0]);
        assert!(length > 4096);
        write_at(&deep, &"f".repeat(250), 2 << 20);
        let usage = counted(&watch);
        assert!(usage.bytes >= 2 << 20, "{usage:?}");
        let overrun = watch.finish(false).unwrap_err();
        assert!(overrun.unwatchable.is_none(), "{overrun}");
        assert_eq!(overrun.key(), "storage_bytes");
        assert!(measure(&roots[0]).bytes >= 2 << 20);
        // A first call's walk finds it too.
        let refused = enter("m", &roots, bound(1000), false).unwrap_err();
        assert!(refused.total().bytes >= 2 << 20, "{refused}");
    }

    /// The attack: events by the tens of thousands while the host is busy,
    /// until the kernel's queue overflows and some are lost. The call is
    /// stopped as one the host cannot count, at once; the message says why
    /// (not "over its bound") and what the folders hold, measured after.
    #[test]
    fn lost_events_stop_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let mut watch = enter("m", &roots, bound(1000), false).unwrap();
        let watcher = watch.watcher.unwrap();
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        {
            // The watcher thread cannot read while this holds the lock.
            let _busy = watcher.lock();
            let path = roots[0].join("churn");
            for _ in 0..limit / 2 + 100 {
                std::fs::File::create(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), watch.overrun())
                .await
                .expect("the lost events stopped the call")
        });
        let overrun = watch.finish(true).unwrap_err();
        let message = overrun.to_string();
        assert!(
            message.contains("cannot watch") && message.contains("overflowed"),
            "{message}"
        );
        assert!(!message.contains("over its bound"), "{message}");
        assert!(
            overrun.remedy().starts_with("call again"),
            "{}",
            overrun.remedy()
        );
        // Nothing is left watched; the next call walks again and runs.
        assert!(!watcher.lock().modules.contains_key(&Arc::new(ModuleKey {
            id: "m".into(),
            folders: roots.clone()
        })));
        enter("m", &roots, bound(1000), false)
            .unwrap()
            .finish(false)
            .unwrap();
    }

    /// The attack on the user's inotify watches: empty folders, many more
    /// than a module may have watched. The call is stopped saying the host
    /// cannot watch them, and the next is refused so.
    #[test]
    fn more_folders_than_the_host_watches_stop_the_call() {
        WATCH_CAP.with(|cap| cap.set(Some(20)));
        let dir = tempfile::tempdir().unwrap();
        let roots = folders(dir.path());
        let watch = enter("m", &roots, bound(1000), false).unwrap();
        for i in 0..30 {
            std::fs::create_dir(roots[0].join(i.to_string())).unwrap();
        }
        let overrun = watch.finish(false).unwrap_err();
        let message = overrun.to_string();
        assert!(
            message.contains("cannot watch") && message.contains("more than 20 folders"),
            "{message}"
        );
        assert_eq!(overrun.total().files, 30, "measured after: {message}");
        let refused = enter("m", &roots, bound(1000), false).unwrap_err();
        assert!(
            refused.to_string().contains("more than 20 folders"),
            "{refused}"
        );
        WATCH_CAP.with(|cap| cap.set(None));
    }
}
