//! Where a folder lives in its filesystem, through the mount table.
//!
//! Two names can reach one folder without either lying inside the other: a
//! bind mount makes `/srv/ws` show what `~/.local/share/modhost/state/x` is,
//! and neither the names nor the identities of `/srv/ws`'s ancestors say so
//! (its parent is `/srv`, wherever the mounted folder sits). The mount table
//! does: each mount records its device and the path of its root inside that
//! filesystem (`/proc/self/mountinfo`, fields 3 and 4). A canonical path's
//! place is then the device of the innermost mount holding it and that
//! mount's root joined with the rest of the path; two paths overlap when
//! their places share a device and one place holds the other.
//!
//! The table is read again when the kernel says it changed (the file polls
//! `POLLPRI` after a mount or unmount in this namespace) and when a mount
//! point is no longer where the table says: renaming a folder above a mount
//! point changes no mount, so no event comes, yet the table's names for
//! every mount below it are stale. Before each use, every mount point that
//! could have moved (found once per read: its parent folder is neither `/`,
//! nor a mount point, nor a folder of `proc` or `sysfs`, none of which can
//! be renamed) is opened through no link and must still be the root of the
//! mount with its id (`statx`: `STATX_MNT_ID`, `STATX_ATTR_MOUNT_ROOT`). A
//! call pays one `poll` and a few such opens, not a read of the whole table
//! (some 50 µs). When no device is shown twice (no bind mount, nothing
//! mounted twice), a place has one name and the names alone answer. Of a
//! stack of mounts at one point, the one seen is the one no other there
//! sits on (by parent id: a mount moved onto another keeps its earlier
//! place in the table). A mount hidden under a mount of a folder above its
//! point (mounted on `/x/h`, then another on `/x`) is no name's place,
//! though the table still lists its point. A kernel filesystem is known at
//! a path by `statfs`, whatever the table says.
//!
//! Only root can mount, and no module can (seccomp refuses `mount`); what
//! the table can miss is root rearranging mounts at the same moment: a
//! folder renamed inside the filesystem a bind mount shows (the mount's root
//! changes, not where it is mounted), or a mount point renamed from another
//! mount namespace (no event reaches this one).

use std::fs::File;
use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Filesystems that show the kernel's objects (processes, settings,
/// devices, control groups, tracing) rather than files someone wrote.
const KERNEL_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "securityfs",
    "debugfs",
    "tracefs",
    "bpf",
    "configfs",
    "efivarfs",
    "pstore",
    "fusectl",
    "binfmt_misc",
    "mqueue",
    "hugetlbfs",
    "selinuxfs",
    "nsfs",
];

/// The `statfs` magic numbers of the kernel filesystems statfs can tell
/// apart (`devtmpfs` answers as `tmpfs`: `/dev` is refused by name).
const KERNEL_MAGIC: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x1cd1, "devpts"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x7363_6673, "securityfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
    (0x6573_5543, "fusectl"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x1980_0202, "mqueue"),
    (0x9584_58f6, "hugetlbfs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x6e73_6673, "nsfs"),
];

/// The kernel filesystem whose `statfs` magic is `magic`, if it is one:
/// its files are the kernel's (process environments, device attributes,
/// debug knobs), never a project's or an operator's.
pub fn kernel_filesystem_named(magic: i64) -> Option<&'static str> {
    KERNEL_MAGIC
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|&(_, name)| name)
}

/// One line of the mount table: what is mounted where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The mount's id (what `statx` reports as `stx_mnt_id`).
    id: u64,
    /// The id of the mount it sits on (for stacked mounts at one point: the
    /// one below it).
    parent: u64,
    /// `major:minor` of the filesystem.
    device: String,
    /// The mount's root, as a path inside its filesystem.
    root: PathBuf,
    /// Where it is mounted, in this namespace.
    mount_point: PathBuf,
    /// The filesystem type (`ext4`, `proc`, ...).
    fstype: String,
}

/// A path's place: its filesystem, and its path inside that filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    device: String,
    inside: PathBuf,
}

impl Place {
    /// One holds the other (or they are the same folder).
    fn overlaps(&self, other: &Place) -> bool {
        self.device == other.device
            && (self.inside.starts_with(&other.inside) || other.inside.starts_with(&self.inside))
    }
}

/// The mount table, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MountTable {
    /// In the kernel's order: a later mount on the same point covers an
    /// earlier one.
    mounts: Vec<Mount>,
    /// Devices shown under more than one name: mounted twice, or as a
    /// mount of a folder inside them (a bind mount). A path on any other
    /// device has one name, so names alone answer for it.
    aliased: Vec<String>,
    /// The mounts whose mount point could move without a mount event
    /// (`still_placed`), by index.
    movable: Vec<usize>,
    /// By index: whether the mount is hidden under a mount of a folder
    /// above its point ([`Self::hidden_mounts`]).
    hidden: Vec<bool>,
}

impl MountTable {
    /// Parse `/proc/self/mountinfo` text; lines it cannot read are skipped.
    fn parse(text: &[u8]) -> MountTable {
        let mounts = text
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                let mut fields = line.split(|&b| b == b' ');
                let number = |field: &[u8]| std::str::from_utf8(field).ok()?.parse().ok();
                let id = number(fields.next()?)?;
                let parent = number(fields.next()?)?;
                let device = fields.next()?;
                let root = fields.next()?;
                let mount_point = fields.next()?;
                // Optional fields, then `-`, then the filesystem type.
                let fstype = fields.skip_while(|&f| f != b"-").nth(1)?;
                Some(Mount {
                    id,
                    parent,
                    device: String::from_utf8_lossy(device).into_owned(),
                    root: unescape(root),
                    mount_point: unescape(mount_point),
                    fstype: String::from_utf8_lossy(fstype).into_owned(),
                })
            })
            .collect();
        let mut table = MountTable {
            mounts,
            aliased: Vec::new(),
            movable: Vec::new(),
            hidden: Vec::new(),
        };
        table.hidden = table.hidden_mounts();
        table.aliased = table.aliased_devices();
        table.movable = table.movable_mounts();
        table
    }

    /// By index, the mounts no path reaches: a mount is hidden when a
    /// mount of the same parent sits on a folder above its point (mounted
    /// on `/x` after one on `/x/h`: `/x/h` now names a folder of the upper
    /// mount, or a mount on it), or when its parent is hidden. The table
    /// still lists a hidden mount with its point, and names alone would
    /// take it for the one a path reaches.
    fn hidden_mounts(&self) -> Vec<bool> {
        let above = |mount: &Mount| {
            self.mounts.iter().any(|other| {
                other.parent == mount.parent
                    && other.mount_point != mount.mount_point
                    && mount.mount_point.starts_with(&other.mount_point)
            })
        };
        let mut hidden: Vec<bool> = self.mounts.iter().map(above).collect();
        // A parent's state reaches its children: at most one pass per
        // level of nesting.
        loop {
            let mut changed = false;
            for (i, mount) in self.mounts.iter().enumerate() {
                let parent_hidden = self
                    .mounts
                    .iter()
                    .position(|m| m.id == mount.parent && m.id != mount.id)
                    .is_some_and(|p| hidden[p]);
                if parent_hidden && !hidden[i] {
                    hidden[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return hidden;
            }
        }
    }

    fn aliased_devices(&self) -> Vec<String> {
        let mut aliased: Vec<String> = Vec::new();
        for (i, mount) in self.mounts.iter().enumerate() {
            let twice = self.mounts[..i].iter().any(|m| m.device == mount.device);
            if (twice || mount.root != Path::new("/")) && !aliased.contains(&mount.device) {
                aliased.push(mount.device.clone());
            }
        }
        aliased
    }

    /// The mounts whose mount point could be renamed away without a mount
    /// event: neither hidden nor covered by a later mount on the same point, and whose
    /// parent folder is neither `/`, nor a mount point (which cannot be
    /// renamed), nor a folder of `proc` or `sysfs` (whose folders cannot be).
    fn movable_mounts(&self) -> Vec<usize> {
        let is_mount_point = |path: &Path| self.mounts.iter().any(|m| m.mount_point == path);
        let unrenamable = |path: &Path| {
            self.innermost(path)
                .is_some_and(|m| matches!(m.fstype.as_str(), "proc" | "sysfs"))
        };
        (0..self.mounts.len())
            .filter(|&i| {
                let mount = &self.mounts[i];
                let covered = self.covered(mount);
                let pinned = mount.mount_point.parent().is_none_or(|parent| {
                    parent == Path::new("/") || is_mount_point(parent) || unrenamable(parent)
                });
                // A hidden mount is no name's place: its point resolves
                // into the mount above, and it would never be found there.
                !covered && !pinned && !self.hidden[i]
            })
            .collect()
    }

    /// Whether every mount point that could have moved is still where the
    /// table says (see the module docs).
    fn still_placed(&self) -> bool {
        self.movable.iter().all(|&i| {
            let mount = &self.mounts[i];
            is_mount_root(&mount.mount_point, mount.id)
        })
    }

    /// The innermost mount holding the canonical `path` (the last of equals,
    /// which covers the others), of those not hidden.
    fn innermost(&self, path: &Path) -> Option<&Mount> {
        let holding = || {
            self.mounts
                .iter()
                .zip(&self.hidden)
                .filter(|(m, hidden)| !**hidden && path.starts_with(&m.mount_point))
                .map(|(m, _)| m)
        };
        let depth = holding()
            .map(|m| m.mount_point.components().count())
            .max()?;
        let mut at_point = holding().filter(|m| m.mount_point.components().count() == depth);
        // Of a stack at one point, the top: the one no other there sits on
        // (the table lists mounts in the order they were made, and a mount
        // moved onto another keeps its earlier place in it).
        at_point
            .clone()
            .find(|m| !self.covered(m))
            .or_else(|| at_point.next_back())
    }

    /// Whether another mount at the same point sits on `mount`.
    fn covered(&self, mount: &Mount) -> bool {
        self.mounts
            .iter()
            .any(|other| other.parent == mount.id && other.mount_point == mount.mount_point)
    }

    /// The place of the canonical `path`: under the innermost mount that
    /// holds it (the last of equals, which covers the others). `None` when
    /// no mount holds it (a table that could not be read).
    fn place(&self, path: &Path) -> Option<Place> {
        let mount = self.innermost(path)?;
        let rest = path.strip_prefix(&mount.mount_point).ok()?;
        Some(Place {
            device: mount.device.clone(),
            inside: mount.root.join(rest),
        })
    }

    /// The type (`ext4`) and device (`major:minor`) of mount `id` (what
    /// `statx` reports as `stx_mnt_id` for a path on it): exact, where a
    /// name may have two mounts at its point, one hidden by a mount above.
    pub(crate) fn filesystem_of_mount(&self, id: u64) -> Option<(&str, &str)> {
        self.mounts
            .iter()
            .find(|m| m.id == id)
            .map(|m| (m.fstype.as_str(), m.device.as_str()))
    }

    /// The kernel's own filesystem (`proc`, `sysfs`, `devtmpfs`, ...) that
    /// shows at or under the canonical `path`, if one does: no project
    /// lives there, and a module granted it would reach processes, kernel
    /// settings or devices.
    pub fn kernel_filesystem(&self, path: &Path) -> Option<&str> {
        // The path itself, by what the kernel says it is now.
        if let Some(name) = rustix::fs::statfs(path).ok().and_then(|fs| {
            // `f_type` is narrower on 32-bit targets.
            #[allow(clippy::unnecessary_cast)]
            kernel_filesystem_named(fs.f_type as i64)
        }) {
            return Some(name);
        }
        let innermost = self.innermost(path);
        let below = self
            .mounts
            .iter()
            .filter(|m| m.mount_point.starts_with(path));
        innermost
            .into_iter()
            .chain(below)
            .map(|m| m.fstype.as_str())
            .find(|fstype| KERNEL_FILESYSTEMS.contains(fstype))
    }

    /// Everything reachable at or under the canonical `path`: its own place,
    /// and the place of each mount's root mounted below it.
    fn regions(&self, path: &Path) -> Vec<Place> {
        let below = self
            .mounts
            .iter()
            .filter(|m| m.mount_point.starts_with(path) && m.mount_point != path);
        self.place(path)
            .into_iter()
            .chain(below.map(|m| Place {
                device: m.device.clone(),
                inside: m.root.clone(),
            }))
            .collect()
    }

    /// Whether what is reachable under the canonical `a` and under the
    /// canonical `b` share anything: by name, or through their places.
    pub fn overlap(&self, a: &Path, b: &Path) -> bool {
        if a.starts_with(b) || b.starts_with(a) {
            return true;
        }
        // Without a device shown twice, a place has one name: the names
        // said it all.
        if self.aliased.is_empty() {
            return false;
        }
        let b = self.regions(b);
        self.regions(a)
            .iter()
            .any(|a| b.iter().any(|b| a.overlaps(b)))
    }

    /// Whether the canonical `inner` can be reached at or under the
    /// canonical `outer` (so that writing there writes it): by name, or
    /// through their places.
    pub fn holds(&self, outer: &Path, inner: &Path) -> bool {
        if inner.starts_with(outer) {
            return true;
        }
        if self.aliased.is_empty() {
            return false;
        }
        let Some(inner) = self.place(inner) else {
            return false;
        };
        // On a device shown once, `inner` has one name, which said no.
        if !self.aliased.contains(&inner.device) {
            return false;
        }
        self.regions(outer)
            .iter()
            .any(|region| region.device == inner.device && inner.inside.starts_with(&region.inside))
    }
}

/// `\040`-style octal escapes (space, tab, newline, backslash) undone.
fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|_| field[i] == b'\\');
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The table as last read, and the open file that says when it changed.
struct Watched {
    file: File,
    table: Arc<MountTable>,
}

static CURRENT: Mutex<Option<Watched>> = Mutex::new(None);

/// The current mount table: read again when the kernel reports a mount or
/// unmount since the last read, else the one already parsed. Empty (every
/// `place` is `None`) when `/proc` cannot be read.
pub fn current() -> Arc<MountTable> {
    let mut current = CURRENT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(watched) = current.as_mut() {
        if !changed(&watched.file) && watched.table.still_placed() {
            return Arc::clone(&watched.table);
        }
        if let Some(table) = read(&mut watched.file) {
            watched.table = Arc::new(table);
            return Arc::clone(&watched.table);
        }
    }
    let fresh = File::open(MOUNTINFO).ok().and_then(|mut file| {
        let table = Arc::new(read(&mut file)?);
        Some(Watched { file, table })
    });
    match fresh {
        Some(watched) => {
            let table = Arc::clone(&watched.table);
            *current = Some(watched);
            table
        }
        None => {
            *current = None;
            Arc::default()
        }
    }
}

/// Whether `path`, opened through no link, is the root of mount `id`.
fn is_mount_root(path: &Path, id: u64) -> bool {
    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, StatxAttributes, StatxFlags};
    let Ok(fd) = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) else {
        return false;
    };
    rustix::fs::statx(&fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID).is_ok_and(|st| {
        st.stx_mnt_id == id
            && (!st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
                || st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
    })
}

/// Whether a mount or unmount happened since `file` was last polled.
fn changed(file: &File) -> bool {
    let mut poll = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: poll on one pollfd on the stack, without waiting.
    #[allow(unsafe_code)]
    let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
    // An error is taken as a change: the table is read again.
    ready != 0 && (ready < 0 || poll.revents & (libc::POLLPRI | libc::POLLERR) != 0)
}

fn read(file: &mut File) -> Option<MountTable> {
    file.rewind().ok()?;
    let mut text = Vec::with_capacity(4096);
    file.read_to_end(&mut text).ok()?;
    Some(MountTable::parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[u8] = b"\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 27 8:1 /root/.local/share/modhost/state/x /srv/my\\040ws rw - ext4 /dev/sda1 rw
41 27 0:30 / /mnt rw - tmpfs tmpfs rw
42 41 8:1 /data /mnt rw - ext4 /dev/sda1 rw
";

    /// The attack on names: a tmpfs on `/x/h`, then one on `/x` (hiding
    /// the first), then one on the new `/x/h`. Two mounts at `/x/h` sit on
    /// no other there; the path reaches the third, never the hidden first.
    /// Without the third, `/x/h` is a folder of the tmpfs on `/x`.
    #[test]
    fn a_mount_hidden_under_a_mount_above_its_point_is_no_place() {
        let layout = b"\
27 1 8:1 / / rw - ext4 /dev/sda1 rw
50 27 0:40 / /x/h rw - tmpfs hidden rw
51 27 0:41 / /x rw - tmpfs above rw
52 51 0:42 / /x/h rw - tmpfs seen rw
";
        let table = MountTable::parse(layout);
        let place = table.place(Path::new("/x/h/f")).unwrap();
        assert_eq!(place.device, "0:42");
        assert_eq!(place.inside, Path::new("/f"));
        let without_the_third =
            &layout[..layout.len() - "52 51 0:42 / /x/h rw - tmpfs seen rw\n".len()];
        let table = MountTable::parse(without_the_third);
        let place = table.place(Path::new("/x/h/f")).unwrap();
        assert_eq!(place.device, "0:41");
        assert_eq!(place.inside, Path::new("/h/f"));
        // A mount inside a hidden one is hidden too.
        let nested = b"\
27 1 8:1 / / rw - ext4 /dev/sda1 rw
50 27 0:40 / /x/h rw - tmpfs hidden rw
53 50 0:43 / /x/h/deep rw - tmpfs below-hidden rw
51 27 0:41 / /x rw - tmpfs above rw
";
        let table = MountTable::parse(nested);
        assert_eq!(
            table.place(Path::new("/x/h/deep/f")).unwrap().device,
            "0:41"
        );
    }

    #[test]
    fn a_place_is_the_innermost_mount_and_the_path_inside_it() {
        let table = MountTable::parse(TABLE);
        let place = |p: &str| table.place(Path::new(p)).unwrap();
        assert_eq!(
            place("/srv/my ws/sub"),
            Place {
                device: "8:1".into(),
                inside: "/root/.local/share/modhost/state/x/sub".into()
            }
        );
        // Two mounts on /mnt: the later one covers the tmpfs.
        assert_eq!(place("/mnt/a").inside, Path::new("/data/a"));
        assert_eq!(place("/mnt/a").device, "8:1");
        assert_eq!(place("/proc/self").device, "0:21");
        let home = place("/root/.local/share/modhost");
        assert!(
            place("/srv/my ws").overlaps(&home),
            "a bind mount of a folder inside the home"
        );
        assert!(place("/root").overlaps(&home), "a folder holding the home");
        assert!(!place("/srv").overlaps(&home), "the bind mount's parent");
        assert!(!place("/mnt/a").overlaps(&home), "another folder");
        assert!(!place("/proc").overlaps(&place("/")), "another filesystem");
        let holds = |outer: &str, inner: &str| table.holds(Path::new(outer), Path::new(inner));
        assert!(holds("/root/.local/share/modhost", "/srv/my ws/bin/python"));
        assert!(holds("/srv", "/srv/my ws"), "by name");
        assert!(
            !holds("/srv/my ws", "/root/.local/share/modhost"),
            "held, not holding"
        );
        assert!(
            holds("/srv", "/root/.local/share/modhost/state/x/bin/python"),
            "reached through a mount below /srv"
        );
        assert!(
            !holds("/srv", "/root/.local/share/modhost/state/y"),
            "not reached"
        );
        let overlap = |a: &str, b: &str| table.overlap(Path::new(a), Path::new(b));
        assert!(
            overlap("/srv", "/root/.local/share/modhost"),
            "a mount below shows part of it"
        );
        assert!(overlap("/root/.local/share/modhost", "/srv"));
        assert!(
            overlap("/mnt", "/data/x"),
            "a mount covering /mnt shows /data"
        );
        assert!(!overlap("/mnt", "/root"), "nothing shared");
        assert!(!overlap("/srv", "/proc"));
        assert_eq!(table.kernel_filesystem(Path::new("/proc/1")), Some("proc"));
        assert_eq!(
            table.kernel_filesystem(Path::new("/")),
            Some("proc"),
            "holds /proc"
        );
        assert_eq!(table.kernel_filesystem(Path::new("/mnt/a")), None);
        assert_eq!(table.kernel_filesystem(Path::new("/srv")), None);
    }

    #[test]
    fn escapes_are_undone_and_short_ones_kept() {
        assert_eq!(unescape(b"a\\040b\\011c\\134d"), Path::new("a b\tc\\d"));
        assert_eq!(unescape(b"end\\04"), Path::new("end\\04"));
        assert_eq!(unescape(b"\\999"), Path::new("\\999"));
    }

    /// The live table follows a mount made after it was first read.
    #[test]
    fn the_current_table_sees_a_new_mount() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (source, target) = (root.join("source"), root.join("target"));
        std::fs::create_dir_all(source.join("inner")).unwrap();
        std::fs::create_dir(&target).unwrap();
        let before = current().place(&target).unwrap();
        assert!(!before.overlaps(&current().place(&source).unwrap()));
        let _mount = modhost_test_support::mounts::bind(&source.join("inner"), &target);
        let after = current().place(&target).unwrap();
        assert!(
            after.overlaps(&current().place(&source).unwrap()),
            "the bind mount is seen: {after:?}"
        );
    }

    /// The attack on a cached table: a mount made where it is checked,
    /// then the folder above it renamed (no mount event comes). The table
    /// read before must not vouch for the new name; and a link left at the
    /// old name must not make the stale names look right.
    #[test]
    fn a_mount_whose_folder_was_renamed_is_seen_under_its_new_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (before, after) = (root.join("k"), root.join("k2"));
        std::fs::create_dir_all(before.join("sub/proc")).unwrap();
        let _proc = modhost_test_support::mounts::proc(&before.join("sub/proc"));
        assert_eq!(current().kernel_filesystem(&before), Some("proc"));
        std::fs::rename(&before, &after).unwrap();
        std::os::unix::fs::symlink(&after, &before).unwrap();
        assert_eq!(
            current().kernel_filesystem(&after),
            Some("proc"),
            "the renamed folder still holds the proc mount"
        );
        // The mount itself is known by what the kernel says it is, even to
        // a table that never saw it (a mount moved in another namespace).
        let blind = MountTable::parse(TABLE);
        assert_eq!(
            blind.kernel_filesystem(&after.join("sub/proc")),
            Some("proc")
        );
        // Unmounted by its present name, whatever the guard says.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(after.join("sub/proc"))
            .status();
    }

    /// The attack on the stacking order: the user's home bind-mounted at
    /// `q/b`, a `tmpfs` at `s/b`, then the bind moved onto `s/b`. The table
    /// lists the moved mount before the one it now covers; the place of
    /// `s/b` is still the home's.
    #[test]
    fn a_mount_moved_onto_another_is_the_one_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (home, from, onto) = (root.join("home"), root.join("q/b"), root.join("s/b"));
        for folder in [&home, &from, &onto] {
            std::fs::create_dir_all(folder).unwrap();
        }
        std::fs::write(home.join("secret"), "x").unwrap();
        let _bind = modhost_test_support::mounts::bind(&home, &from);
        let _below = modhost_test_support::mounts::tmpfs(&onto);
        let _moved = modhost_test_support::mounts::move_mount(&from, &onto);
        assert!(onto.join("secret").exists(), "the move took");
        let table = current();
        assert!(table.overlap(&onto, &home), "{:?}", table.place(&onto));
        assert!(table.holds(&root.join("s"), &home.join("secret")));
    }
}
