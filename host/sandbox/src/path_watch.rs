//! Knowing, without a `statx` per path per call, that a fixed set of paths
//! still name what they named: the system paths every call's ruleset holds.
//!
//! The ruleset cache (`ruleset.rs`) reuses a ruleset only while each rule's
//! path still names the inode the rule bound. Checked by `statx`, that is
//! some forty path walks per call, three quarters of them the same system
//! paths (`/usr`, `/etc/...`, `/dev/null`) for every call, which almost
//! never change. A path's binding changes only through an entry of a folder
//! its resolution looks a name up in (a rename, link, unlink or creation
//! there) or through a mount. So this watches, with inotify, every folder
//! the resolution of each path looks names up in, following links as the
//! rules do, and the mount table; while neither reports anything, every
//! path covered names what it named when the watch was armed.
//!
//! Design decisions:
//!
//! - **Any report re-arms.** An event in any watched folder (the name does
//!   not matter), a lost watch, an overflowed queue or a changed mount table
//!   closes the inotify descriptor, resolves every path again (a link may
//!   lead elsewhere now) with fresh watches, and starts a new epoch. Every
//!   ruleset verified in an earlier epoch is checked by `statx` again, once.
//! - **Watched before looked at.** Resolution adds the watch on a folder
//!   before it looks a name up in it, and the cache records the epoch read
//!   before its own checks: a change after the watch is an event, a change
//!   before it is what the lookup or the `statx` sees.
//! - **Local filesystems only.** A path is covered only when every folder
//!   its resolution looks in is on a filesystem whose every change passes
//!   through this kernel's VFS (ext2/3/4, xfs, btrfs, tmpfs, by `statfs`
//!   and by the mount table's type alike, and not in a loop device's image
//!   file). A network or FUSE filesystem can change under the kernel
//!   without an event, an overlay's lower layers without one on the merged
//!   folder, and an image file beneath its mounted filesystem: such paths,
//!   and `proc` and `sysfs`, are checked by `statx` on every call. What
//!   remains is root writing a mounted block device directly; the `statx`
//!   check saw that only once the kernel dropped its cached names.
//! - **Armed from the second call.** An inotify descriptor that held
//!   watches is released after an SRCU grace period (fsnotify's), waited
//!   for by whoever closes it, the process's exit included: measured on
//!   Linux 6.18, a fork that exits at once took 0.9 to 19 ms from fork to
//!   reaped with one watch, 0.34 to 0.45 ms without. A host that makes a
//!   single call (a one-shot `modhost invoke`) would pay that at its end
//!   and gain nothing, so the first [`PathWatch::settle`] covers no path
//!   (that call checks each by `statx`, as without inotify) and the watch
//!   is armed at the second. A re-arm closes the old descriptor too; it
//!   comes only after a change in a watched system folder, which is rare.
//! - **One descriptor, one read per call.** A call's check is a
//!   non-blocking `read` of the descriptor (nothing to read: quiet) and the
//!   mount table's `poll`; the folders are few (about fifteen here).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

use crate::mount_table::MountTable;

/// The most links one resolution follows (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// Filesystems whose entries change only through this kernel's VFS, where
/// inotify sees every change: ext2/3/4, xfs, btrfs, tmpfs. Both what
/// `statfs` says (a network filesystem may pass its server's answer on)
/// and the mount table's type must be one of them.
const LOCAL_MAGIC: &[i64] = &[0xef53, 0x5846_5342, 0x9123_683e, 0x0102_1994];
const LOCAL_TYPES: &[&str] = &["ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "devtmpfs"];

/// The major number of loop devices: a filesystem in an image file can be
/// rewritten through the file, beneath the mounted filesystem.
const LOOP_MAJOR: &str = "7";

/// What a folder's watch reports: a change of its entries, or of itself.
fn watch_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

/// The next epoch of any watch: unique across watches, so that a ruleset
/// verified under one watch is never trusted under another's epoch.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// A fixed set of absolute paths, watched.
pub(super) struct PathWatch {
    paths: Vec<PathBuf>,
    state: Mutex<State>,
}

struct State {
    /// Whether [`PathWatch::settle`] was called before: the first call
    /// does not arm (see the module documentation).
    settled_before: bool,
    /// `None` before the first arming, and when inotify is unavailable.
    inotify: Option<OwnedFd>,
    /// The mount table the watches were armed under.
    mounts: Option<Arc<MountTable>>,
    /// 0 before the first arming: the first call's epoch, which covers no
    /// path.
    epoch: u64,
    covered: Arc<HashSet<PathBuf>>,
}

/// The watch as one call sees it: the epoch it is in, and the paths
/// unchanged since that epoch began.
#[derive(Clone)]
pub(super) struct Quiet {
    epoch: u64,
    covered: Arc<HashSet<PathBuf>>,
}

impl Quiet {
    /// Since when nothing was reported.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether `path` names what it named when [`Self::epoch`] began.
    pub(super) fn covers(&self, path: &Path) -> bool {
        self.covered.contains(path)
    }
}

impl PathWatch {
    /// A watch over `paths` (absolute), armed at its second
    /// [`Self::settle`].
    pub(super) fn over(paths: Vec<PathBuf>) -> PathWatch {
        PathWatch {
            paths,
            state: Mutex::new(State {
                settled_before: false,
                inotify: None,
                mounts: None,
                epoch: 0,
                covered: Arc::default(),
            }),
        }
    }

    /// The watch now, under the mount table as it is now (`mounts`, from
    /// `mount_table::current`): re-armed, in a new epoch, when anything
    /// was reported since the last call (or it was never armed). The
    /// first call gets epoch 0, which covers no path.
    pub(super) fn settle(&self, mounts: Arc<MountTable>) -> Quiet {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !std::mem::replace(&mut state.settled_before, true) {
            return Quiet {
                epoch: 0,
                covered: Arc::default(),
            };
        }
        let quiet = state.inotify.as_ref().is_some_and(nothing_reported)
            && state
                .mounts
                .as_ref()
                .is_some_and(|m| Arc::ptr_eq(m, &mounts));
        if !quiet {
            // The old descriptor goes first, with its watches.
            state.inotify = None;
            let (inotify, covered) = self.arm(&mounts);
            state.inotify = inotify;
            state.covered = Arc::new(covered);
            state.mounts = Some(mounts);
            state.epoch = EPOCHS.fetch_add(1, Ordering::Relaxed);
        }
        Quiet {
            epoch: state.epoch,
            covered: Arc::clone(&state.covered),
        }
    }

    /// A new descriptor watching the resolution of every path; the paths
    /// covered (none without inotify).
    fn arm(&self, mounts: &MountTable) -> (Option<OwnedFd>, HashSet<PathBuf>) {
        let Ok(inotify) = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
            return (None, HashSet::new());
        };
        // The paths share most of their folders (`/`, `/usr`, `/etc`):
        // each is looked at and watched once per arming.
        let mut folders = HashMap::new();
        let covered = self
            .paths
            .iter()
            .filter(|path| watch_resolution(&inotify, path, mounts, &mut folders))
            .cloned()
            .collect();
        (Some(inotify), covered)
    }
}

/// Whether the descriptor has nothing to read: no event, no overflow, no
/// watch lost. Any error counts as a report.
fn nothing_reported(inotify: &OwnedFd) -> bool {
    let mut buffer = [0u8; 4096];
    matches!(
        rustix::io::read(inotify, &mut buffer),
        Err(rustix::io::Errno::AGAIN)
    )
}

/// Walk `path` as a lookup following links does, adding a watch on each
/// folder before looking a name up in it. Whether every such folder is
/// watched and local (the path is covered). A path that ends early (a
/// missing name, a file where a folder was wanted) is covered: what would
/// change that is an entry of a watched folder. `folders`: the folders
/// this arming looked at already, and whether each is watched and local.
fn watch_resolution(
    inotify: &OwnedFd,
    path: &Path,
    mounts: &MountTable,
    folders: &mut HashMap<PathBuf, bool>,
) -> bool {
    if !path.is_absolute() {
        return false;
    }
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut folder = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            folder.pop();
            continue;
        }
        let watched = match folders.get(&folder) {
            Some(&watched) => watched,
            None => {
                let watched = watch_local_folder(inotify, &folder, mounts);
                folders.insert(folder.clone(), watched);
                watched
            }
        };
        if !watched {
            return false;
        }
        let next = folder.join(&name);
        let found = match std::fs::symlink_metadata(&next) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) => return false,
        };
        if found.file_type().is_symlink() {
            links += 1;
            let Ok(target) = std::fs::read_link(&next) else {
                return false;
            };
            if links > MAX_LINKS {
                return false;
            }
            if target.is_absolute() {
                folder = PathBuf::from("/");
            }
            push_components(&mut pending, &target);
        } else if !found.is_dir() && !pending.is_empty() {
            return true;
        } else {
            folder = next;
        }
    }
    true
}

/// `path`'s names, pushed so that the first is popped first (`..` kept as
/// a name: it is resolved against the folder reached, as the kernel does).
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(names.into_iter().rev());
}

/// Watch `folder` if it is a folder on a local filesystem (not in an image
/// file).
fn watch_local_folder(inotify: &OwnedFd, folder: &Path, mounts: &MountTable) -> bool {
    let magic = rustix::fs::statfs(folder).is_ok_and(|fs| {
        // `f_type` is narrower on 32-bit targets.
        #[allow(clippy::unnecessary_cast)]
        let magic = fs.f_type as i64;
        LOCAL_MAGIC.contains(&magic)
    });
    let mounted = mount_of(folder)
        .and_then(|id| mounts.filesystem_of_mount(id))
        .is_some_and(|(kind, device)| {
            LOCAL_TYPES.contains(&kind) && device.split(':').next() != Some(LOOP_MAJOR)
        });
    magic && mounted && inotify::add_watch(inotify, folder, watch_flags()).is_ok()
}

/// The id of the mount `folder` is on, as the kernel resolves it now (a
/// name can have two mounts at its point in the table, one hidden).
fn mount_of(folder: &Path) -> Option<u64> {
    use rustix::fs::{AtFlags, CWD, StatxFlags};
    let stx = rustix::fs::statx(CWD, folder, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::MNT_ID).ok()?;
    StatxFlags::from_bits_retain(stx.stx_mask)
        .contains(StatxFlags::MNT_ID)
        .then_some(stx.stx_mnt_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount_table;

    /// A watch over paths in a fresh folder of the test's own (on the
    /// temporary folder's filesystem, which must be local here), past its
    /// first call (which does not arm it).
    fn watched(paths: &[PathBuf]) -> PathWatch {
        let watch = PathWatch::over(paths.to_vec());
        watch.settle(mount_table::current());
        watch
    }

    /// A host that makes one call opens no inotify descriptor (whose
    /// release would hold up its exit) and trusts no path on that call;
    /// the second call arms the watch.
    #[test]
    fn the_first_call_covers_nothing_and_the_second_arms() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let watch = PathWatch::over(vec![file.clone()]);
        let first = watch.settle(mount_table::current());
        assert_eq!(first.epoch(), 0);
        assert!(!first.covers(&file), "the first call trusted a path");
        assert!(
            watch.state.lock().unwrap().inotify.is_none(),
            "the first call armed the watch"
        );
        let second = watch.settle(mount_table::current());
        assert_ne!(second.epoch(), 0);
        assert!(second.covers(&file), "the second call did not arm");
    }

    #[test]
    fn a_quiet_watch_stays_in_its_epoch_and_covers_its_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let missing = dir.path().join("missing/deeper");
        let watch = watched(&[file.clone(), missing.clone()]);
        let first = watch.settle(mount_table::current());
        assert!(first.covers(&file), "a local file is not covered");
        assert!(first.covers(&missing), "a missing path is not covered");
        // Writing a file changes no name. (Other tests of this process
        // mount and unmount, which ends an epoch too: a few tries.)
        let stayed = (0..10).any(|_| {
            let before = watch.settle(mount_table::current());
            std::fs::write(&file, "y").unwrap();
            watch.settle(mount_table::current()).epoch() == before.epoch()
        });
        assert!(stayed, "writing a watched file ended the epoch every time");
    }

    /// The attacks on a cached binding: each way of making a watched path
    /// name something else (a rename over it, an unlink and a new file,
    /// a folder on its way renamed, a link on its way retargeted, a name
    /// created where none was) ends the epoch.
    #[test]
    fn every_change_of_what_a_path_names_ends_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::create_dir_all(dir.join("elsewhere/b")).unwrap();
        std::fs::write(dir.join("a/b/file"), "x").unwrap();
        std::fs::write(dir.join("elsewhere/b/file"), "y").unwrap();
        std::os::unix::fs::symlink(dir.join("a"), dir.join("link")).unwrap();
        let through_link = dir.join("link/b/file");
        let direct = dir.join("a/b/file");
        let missing = dir.join("a/new");
        let watch = watched(&[through_link.clone(), direct.clone(), missing.clone()]);
        let changes: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| {
                std::fs::write(dir.join("a/b/other"), "z").unwrap();
                std::fs::rename(dir.join("a/b/other"), dir.join("a/b/file")).unwrap();
            }),
            Box::new(|| {
                std::fs::remove_file(dir.join("a/b/file")).unwrap();
                std::fs::write(dir.join("a/b/file"), "w").unwrap();
            }),
            Box::new(|| {
                std::fs::rename(dir.join("a/b"), dir.join("a/old-b")).unwrap();
                std::fs::create_dir(dir.join("a/b")).unwrap();
            }),
            Box::new(|| {
                std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("new-link")).unwrap();
                std::fs::rename(dir.join("new-link"), dir.join("link")).unwrap();
            }),
            Box::new(|| std::fs::create_dir(dir.join("a/new")).unwrap()),
        ];
        let mut epoch = watch.settle(mount_table::current());
        assert!(epoch.covers(&through_link) && epoch.covers(&direct));
        for (i, change) in changes.iter().enumerate() {
            change();
            let now = watch.settle(mount_table::current());
            assert_ne!(now.epoch(), epoch.epoch(), "change {i} went unseen");
            epoch = watch.settle(mount_table::current());
        }
        // After the link moved, the folder it leads to now is watched.
        std::fs::write(dir.join("elsewhere/b/other"), "v").unwrap();
        std::fs::rename(dir.join("elsewhere/b/other"), dir.join("elsewhere/b/file")).unwrap();
        assert_ne!(
            watch.settle(mount_table::current()).epoch(),
            epoch.epoch(),
            "the new target is unwatched"
        );
    }

    /// A bind mount over a watched path is no folder event: the mount
    /// table's change ends the epoch.
    #[test]
    fn a_mount_over_a_watched_path_ends_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let (target, source) = (dir.join("target"), dir.join("source"));
        std::fs::create_dir(&target).unwrap();
        std::fs::create_dir(&source).unwrap();
        let watch = watched(std::slice::from_ref(&target));
        let before = watch.settle(mount_table::current());
        let _mounted = modhost_test_support::mounts::bind(&source, &target);
        assert_ne!(watch.settle(mount_table::current()).epoch(), before.epoch());
    }

    /// The attack on the filesystem check: a mount hidden under a mount of
    /// its parent leaves two mounts at one point in the table, neither on
    /// the other. The folder's filesystem is the one the kernel resolves
    /// it to (here the third tmpfs), never the hidden one the table lists
    /// first, which a loop-mounted image on top would pass for.
    #[test]
    fn a_hidden_mount_at_the_same_point_is_not_taken_for_the_one_seen() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let (parent, point) = (dir.join("parent"), dir.join("parent/point"));
        std::fs::create_dir_all(&point).unwrap();
        let _hidden = modhost_test_support::mounts::tmpfs(&point);
        let hidden_device = std::fs::metadata(&point).unwrap().dev();
        let _above = modhost_test_support::mounts::tmpfs(&parent);
        std::fs::create_dir(&point).unwrap();
        let _seen = modhost_test_support::mounts::tmpfs(&point);
        let seen_device = std::fs::metadata(&point).unwrap().dev();
        assert_ne!(seen_device, hidden_device);
        let mounts = mount_table::current();
        let (_, device) = mount_of(&point)
            .and_then(|id| mounts.filesystem_of_mount(id))
            .expect("the folder's mount is in the table");
        let (major, minor) = (libc::major(seen_device), libc::minor(seen_device));
        assert_eq!(device, format!("{major}:{minor}"));
    }

    /// `proc` is never covered: its names are not the VFS's to report.
    #[test]
    fn a_path_on_a_kernel_filesystem_is_not_covered() {
        let watch = watched(&[PathBuf::from("/proc/meminfo")]);
        assert!(
            !watch
                .settle(mount_table::current())
                .covers(Path::new("/proc/meminfo"))
        );
    }
}
