//! Building the landlock ruleset in the parent, once per set of rules.
//!
//! A call's ruleset is some thirty rules (system folders, `/etc` files, the
//! module, its grants), each an `open`, an `fstat` and a
//! `landlock_add_rule`: about a tenth of a millisecond per cold call, the
//! same every time a capability is called with the same grants. A ruleset
//! is a kernel object that may be applied by any number of processes, so
//! it is built once per set of rules and each call gets a duplicate of its
//! descriptor.
//!
//! Design decisions:
//!
//! - **Never stale.** A landlock rule binds the inode its path named when the
//!   rule was added, not the path. So the cache remembers, for every rule,
//!   the identity of what it bound (device, inode, type, and birth time where
//!   the filesystem has one, else change time), taken from the very
//!   descriptor the rule was built from, and a call reuses the ruleset only
//!   when every path `stat`s to that same identity now (a path that did not
//!   exist must still not exist; a path that carries two rules is checked
//!   once). A
//!   granted folder replaced (renamed over, deleted and recreated) gets a
//!   new ruleset naming the new inode, and the old inode, wherever it went,
//!   is no longer granted.
//! - **The system paths are watched, not walked.** Some thirty of a call's
//!   paths are the same system paths for every call (`/usr`, `/etc/...`),
//!   which almost never change. `path_watch.rs` watches what each of them
//!   names (inotify on every folder its resolution looks in, and the mount
//!   table); a ruleset verified in the watch's current epoch skips their
//!   `statx` and checks only the call's own paths. Any report from the watch
//!   starts a new epoch, and each ruleset is checked whole once more.
//! - **Bounded.** At most [`MAX_RULESETS`] rulesets are kept; beyond, the
//!   cache is emptied and refilled by the calls that follow.
//! - **Cheap to look up, checked outside the lock.** A look-up compares the
//!   call's rules in place (a hash first, then the paths as bytes) and builds
//!   no key; the lock is held only to copy the entry's identities and
//!   duplicate its descriptor, and the paths are checked after, so
//!   concurrent calls do not queue behind each other's `statx`es.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, ResolveFlags, StatxFlags};

use super::error::ConfineError;
use super::path_rule::{Opening, PathAccess, PathRule};
use super::path_watch::{PathWatch, Quiet};
use super::support::ConfinementSupport;
use crate::mount_table::MountTable;
use crate::network_access::NetworkAccess;

/// The most rulesets kept (each is one descriptor).
const MAX_RULESETS: usize = 64;

/// What a rule's path named when its rule was added; `None`: nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    kind: u32,
    /// Birth time when the filesystem records one, else change time.
    born: (i64, u32),
}

/// What decides a ruleset besides its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Flags {
    /// TCP bind and connect handled (landlock ABI 4+): denied but for
    /// `connect_port`.
    handle_tcp: bool,
    /// The one port TCP connect is allowed to (a call's egress proxy).
    connect_port: Option<u16>,
    scopes: bool,
}

impl Flags {
    fn of(network: NetworkAccess, support: &ConfinementSupport) -> Flags {
        let handle_tcp = support.landlock_tcp();
        Flags {
            handle_tcp,
            connect_port: network.proxy_port().filter(|_| handle_tcp),
            scopes: support.landlock_scopes(),
        }
    }
}

/// A ruleset kept, with what it was built from.
struct Cached {
    /// [`fingerprint`] of `rules` and `flags`: compared first.
    fingerprint: u64,
    /// Paths as bytes (`Path` compares component by component).
    rules: Vec<(std::ffi::OsString, u8)>,
    flags: Flags,
    identities: Vec<Option<Identity>>,
    /// The [`PathWatch`] epoch in which every identity was last found
    /// true (built, or each path checked).
    verified: u64,
    /// Unique to this build ([`Built::stamp`]).
    stamp: u64,
    ruleset: OwnedFd,
}

/// A call's ruleset: a descriptor, and a stamp unique to the kernel ruleset
/// it duplicates (equal stamps: the same rules bound to the same inodes).
#[derive(Debug)]
pub(super) struct Built {
    pub(super) ruleset: OwnedFd,
    pub(super) stamp: u64,
}

/// The next [`Built::stamp`].
static STAMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Cached {
    fn built_from(&self, fingerprint: u64, rules: &[PathRule], flags: Flags) -> bool {
        self.fingerprint == fingerprint
            && self.flags == flags
            && self.rules.len() == rules.len()
            && self.rules.iter().zip(rules).all(|((path, access), rule)| {
                path.as_os_str() == rule.path.as_os_str() && *access == rule.kind_byte()
            })
    }
}

/// At most [`MAX_RULESETS`], found by a scan (no key is built for a look-up:
/// a call's rules are compared in place).
static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// A hash of the rules as bytes and the flags.
fn fingerprint(rules: &[PathRule], flags: Flags) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::ffi::OsStrExt;
    let mut hasher = std::hash::DefaultHasher::new();
    flags.hash(&mut hasher);
    for rule in rules {
        hasher.write(rule.path.as_os_str().as_bytes());
        hasher.write_u8(rule.kind_byte());
    }
    hasher.finish()
}

/// The filesystem rights the host asks the kernel to handle: everything
/// the crate knows; the crate drops what the running kernel lacks.
fn handled_fs() -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI::V9)
}

fn rights(access: PathAccess) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    match access {
        PathAccess::Read => read,
        PathAccess::ReadExecute => read | AccessFs::Execute,
        // No execute, and never a device node: a module that could
        // `mknod` a character or block device in its state root would
        // reach the kernel log or the raw disk through it.
        PathAccess::ReadWrite => {
            handled_fs() & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
        }
    }
}

/// A descriptor of the ruleset for `rules`: a duplicate of the cached one
/// when every path still names what its rule bound, else a new one.
///
/// The paths `watch` covers are taken as unchanged while it stays in the
/// epoch a ruleset was verified in; `mounts` is the mount table the call
/// was checked under.
pub(super) fn build(
    rules: &[PathRule],
    network: NetworkAccess,
    support: &ConfinementSupport,
    watch: &PathWatch,
    mounts: &Arc<MountTable>,
) -> Result<Built, ConfineError> {
    let error = |message: String| ConfineError::Ruleset { message };
    // Read before any path is looked at: a change after this is the next
    // epoch's (`path_watch.rs`).
    let quiet = watch.settle(Arc::clone(mounts));
    let flags = Flags::of(network, support);
    let fingerprint = fingerprint(rules, flags);
    // The lock is held only to copy the entry out: the paths are checked
    // with other calls free to look up theirs.
    let known = lock()
        .iter()
        .find(|c| c.built_from(fingerprint, rules, flags))
        .map(|c| {
            let copy = c.ruleset.try_clone();
            (c.identities.clone(), copy, c.verified, c.stamp)
        });
    if let Some((identities, Ok(ruleset), verified, stamp)) = known {
        let trusted = (verified == quiet.epoch()).then_some(&quiet);
        if unchanged(rules, &identities, trusted) {
            if trusted.is_none() {
                let mut cache = lock();
                let entry = cache.iter_mut().find(|c| {
                    c.built_from(fingerprint, rules, flags) && c.identities == identities
                });
                if let Some(entry) = entry {
                    entry.verified = entry.verified.max(quiet.epoch());
                }
            }
            return Ok(Built { ruleset, stamp });
        }
    }
    let stamp = STAMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (ruleset, identities) = create(rules, flags)?;
    let copy = ruleset
        .try_clone()
        .map_err(|e| error(format!("duplicating the ruleset: {e}")))?;
    let mut cache = lock();
    cache.retain(|c| !c.built_from(fingerprint, rules, flags));
    if cache.len() >= MAX_RULESETS {
        cache.clear();
    }
    cache.push(Cached {
        fingerprint,
        rules: rules
            .iter()
            .map(|r| (r.path.as_os_str().to_owned(), r.kind_byte()))
            .collect(),
        flags,
        identities,
        verified: quiet.epoch(),
        stamp,
        ruleset,
    });
    Ok(Built {
        ruleset: copy,
        stamp,
    })
}

/// Whether every rule's path still names what its rule bound: one `statx`
/// per distinct path (a path can carry two rules: the approved snapshot is
/// the module's folder, read, and the snapshot, read and execute; the entry
/// file is also the first file of its interpreter chain; `/usr` is a system
/// folder and an interpreter's prefix), but for the paths `trusted` covers
/// (the identities were verified in its epoch, and nothing changed since).
fn unchanged(rules: &[PathRule], identities: &[Option<Identity>], trusted: Option<&Quiet>) -> bool {
    let mut checked: Vec<(&Path, Option<Identity>)> = Vec::with_capacity(rules.len());
    rules.len() == identities.len()
        && rules.iter().zip(identities).all(|(rule, known)| {
            if trusted.is_some_and(|quiet| quiet.covers(&rule.path)) {
                return true;
            }
            // Byte equality: `Path`'s own compares component by component.
            let same = |path: &&Path| path.as_os_str() == rule.path.as_os_str();
            let now = match checked.iter().find(|(path, _)| same(path)) {
                Some((_, identity)) => *identity,
                None => {
                    let identity = identity_at(&rule.path);
                    checked.push((&rule.path, identity));
                    identity
                }
            };
            now == *known
        })
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Cached>> {
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A new ruleset and the identity each rule bound.
fn create(
    rules: &[PathRule],
    flags: Flags,
) -> Result<(OwnedFd, Vec<Option<Identity>>), ConfineError> {
    let error = |message: String| ConfineError::Ruleset { message };
    let mut ruleset = Ruleset::default()
        .handle_access(handled_fs())
        .map_err(|e| error(e.to_string()))?;
    if flags.handle_tcp {
        // Handled with at most one port rule: every TCP bind is denied, and
        // every connect but to the egress proxy's port.
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| error(e.to_string()))?;
    }
    if flags.scopes {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| error(e.to_string()))?;
    }
    let mut created = ruleset.create().map_err(|e| error(e.to_string()))?;
    if let Some(port) = flags.connect_port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| error(format!("TCP connect to port {port}: {e}")))?;
    }
    let mut identities = Vec::with_capacity(rules.len());
    for rule in rules {
        // A path that does not exist (a system folder this distribution
        // lacks, a state root not yet created) simply grants nothing.
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let opened = match rule.opening {
            Opening::FollowingLinks => rustix::fs::open(&rule.path, flags, Mode::empty()),
            Opening::NoLinks => rustix::fs::openat2(
                CWD,
                &rule.path,
                flags,
                Mode::empty(),
                ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
            ),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP) if rule.opening == Opening::NoLinks => {
                return Err(error(format!(
                    "{}: a symbolic link stands in this path now, swapped in since the host resolved and checked it; the call was not run",
                    rule.path.display()
                )));
            }
            Err(_) => {
                identities.push(None);
                continue;
            }
        };
        let Some(identity) = identity_of(&fd) else {
            identities.push(None);
            continue;
        };
        let mut access = rights(rule.access);
        if FileType::from_raw_mode(identity.kind) != FileType::Directory {
            access &= AccessFs::from_file(ABI::V9);
        }
        identities.push(Some(identity));
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| error(format!("{}: {e}", rule.path.display())))?;
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| error("the kernel did not create a ruleset".into()))?;
    Ok((fd, identities))
}

fn identity_of(fd: impl AsFd) -> Option<Identity> {
    statx_identity(fd, "", AtFlags::EMPTY_PATH)
}

/// What `path` names now, following links as the rule's `open` did.
fn identity_at(path: &Path) -> Option<Identity> {
    statx_identity(CWD, path, AtFlags::empty())
}

fn statx_identity(
    dir: impl AsFd,
    path: impl rustix::path::Arg,
    flags: AtFlags,
) -> Option<Identity> {
    let stx = rustix::fs::statx(
        dir,
        path,
        flags,
        StatxFlags::TYPE | StatxFlags::INO | StatxFlags::BTIME | StatxFlags::CTIME,
    )
    .ok()?;
    let born = if StatxFlags::from_bits_retain(stx.stx_mask).contains(StatxFlags::BTIME) {
        stx.stx_btime
    } else {
        stx.stx_ctime
    };
    Some(Identity {
        dev: (u64::from(stx.stx_dev_major) << 32) | u64::from(stx.stx_dev_minor),
        ino: stx.stx_ino,
        kind: u32::from(stx.stx_mode) & libc::S_IFMT,
        born: (born.tv_sec, born.tv_nsec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount_table;

    /// What the kernel supports; these tests need landlock.
    fn landlock_support() -> ConfinementSupport {
        let support = super::super::probe();
        if support.abi.is_none() {
            panic!("needs landlock: run on a kernel with landlock enabled (lsm=...,landlock)");
        }
        support
    }

    /// [`build`] without network under a watch over no path (every path
    /// checked by `statx`).
    fn build_unwatched(
        rules: &[PathRule],
        support: &ConfinementSupport,
    ) -> Result<Built, ConfineError> {
        let unwatched = PathWatch::over(Vec::new());
        build(
            rules,
            NetworkAccess::None,
            support,
            &unwatched,
            &mount_table::current(),
        )
    }

    fn cached_identities(
        rules: &[PathRule],
        support: &ConfinementSupport,
    ) -> Vec<Option<Identity>> {
        let flags = Flags::of(NetworkAccess::None, support);
        let fingerprint = fingerprint(rules, flags);
        lock()
            .iter()
            .find(|c| c.built_from(fingerprint, rules, flags))
            .map(|c| c.identities.clone())
            .expect("the ruleset was kept")
    }

    /// The attack on the watch: a path the system watch covers (here a
    /// folder of the test's own, watched the same way) is replaced, renamed
    /// over or retargeted through a link on its way, between calls that
    /// find the ruleset verified in the watch's epoch. Each next call gets
    /// a ruleset naming what the path names now, never the kept one.
    #[test]
    fn a_watched_path_replaced_between_calls_gets_a_new_ruleset() {
        let support = landlock_support();
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        for name in ["first/etc", "second/etc"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(dir.join("first"), dir.join("root")).unwrap();
        let system = dir.join("root/etc");
        let rules = [PathRule {
            path: system.clone(),
            access: PathAccess::Read,
            opening: Opening::FollowingLinks,
        }];
        let watch = PathWatch::over(vec![system.clone()]);
        let replacements: [&dyn Fn(); 2] = [
            &|| {
                std::fs::rename(dir.join("first/etc"), dir.join("first/old-etc")).unwrap();
                std::fs::create_dir(dir.join("first/etc")).unwrap();
            },
            &|| {
                std::os::unix::fs::symlink(dir.join("second"), dir.join("new-root")).unwrap();
                std::fs::rename(dir.join("new-root"), dir.join("root")).unwrap();
            },
        ];
        for (i, replace) in replacements.iter().enumerate() {
            build(
                &rules,
                NetworkAccess::None,
                &support,
                &watch,
                &mount_table::current(),
            )
            .unwrap();
            build(
                &rules,
                NetworkAccess::None,
                &support,
                &watch,
                &mount_table::current(),
            )
            .unwrap();
            assert!(
                watch.settle(mount_table::current()).covers(&system),
                "the folder is not covered"
            );
            let before = cached_identities(&rules, &support);
            replace();
            build(
                &rules,
                NetworkAccess::None,
                &support,
                &watch,
                &mount_table::current(),
            )
            .unwrap();
            let after = cached_identities(&rules, &support);
            assert_ne!(after, before, "replacement {i}: the old ruleset was reused");
            assert_eq!(after, vec![identity_at(&system)], "replacement {i}");
        }
    }

    /// A folder that carries two rules (read, and read-write) is checked
    /// once per call, and still: replaced between two calls, the second
    /// call gets a ruleset naming the new folder, for both rules.
    #[test]
    fn a_replaced_path_that_carries_two_rules_gets_a_new_ruleset() {
        let support = landlock_support();
        let dir = tempfile::tempdir().unwrap();
        let granted = dir.path().join("granted");
        std::fs::create_dir(&granted).unwrap();
        let rule = |access| PathRule {
            path: granted.clone(),
            access,
            opening: Opening::NoLinks,
        };
        let rules = [rule(PathAccess::Read), rule(PathAccess::ReadWrite)];
        build_unwatched(&rules, &support).unwrap();
        let before = cached_identities(&rules, &support);
        assert_eq!(before[0], identity_at(&granted));
        assert_eq!(before[0], before[1]);

        std::fs::rename(&granted, dir.path().join("moved")).unwrap();
        std::fs::create_dir(&granted).unwrap();
        build_unwatched(&rules, &support).unwrap();
        let after = cached_identities(&rules, &support);
        assert_ne!(after[0], before[0], "the old folder's ruleset was reused");
        assert_eq!(after, vec![identity_at(&granted); 2]);
    }
    /// The attack: a granted path (canonical when the host checked it) is
    /// swapped for a link, itself or a folder on it, before the ruleset is
    /// built, so that the rule would bind the link's target (the modhost
    /// home). A grant's rule is opened through no link: the build is
    /// refused, and nothing is cached for it.
    #[test]
    fn a_link_swapped_into_a_granted_path_is_refused() {
        let support = landlock_support();
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let (granted, protected) = (dir.join("granted"), dir.join("protected"));
        std::fs::create_dir_all(protected.join("inner")).unwrap();
        std::os::unix::fs::symlink(&protected, &granted).unwrap();
        for path in [granted.clone(), granted.join("inner")] {
            let rules = [PathRule {
                path: path.clone(),
                access: PathAccess::ReadWrite,
                opening: Opening::NoLinks,
            }];
            let error = build_unwatched(&rules, &support).unwrap_err();
            assert!(
                error.to_string().contains("symbolic link"),
                "{}: {error}",
                path.display()
            );
            let flags = Flags::of(NetworkAccess::None, &support);
            let fingerprint = fingerprint(&rules, flags);
            assert!(
                !lock()
                    .iter()
                    .any(|c| c.built_from(fingerprint, &rules, flags)),
                "a refused ruleset was cached"
            );
        }
    }

    /// The attack: the granted path is a symlink, swapped (a new link
    /// renamed over it) between two calls to point at another folder. The
    /// path's bytes are the same; what it names is not, so the second call
    /// gets a ruleset bound to the new target, never the kept one.
    #[test]
    fn a_granted_symlink_swapped_between_calls_gets_a_new_ruleset() {
        let support = landlock_support();
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::create_dir(&first).unwrap();
        std::fs::create_dir(&second).unwrap();
        let granted = dir.path().join("granted");
        std::os::unix::fs::symlink(&first, &granted).unwrap();
        let rules = [PathRule {
            path: granted.clone(),
            access: PathAccess::ReadWrite,
            opening: Opening::FollowingLinks,
        }];
        build_unwatched(&rules, &support).unwrap();
        assert_eq!(
            cached_identities(&rules, &support),
            vec![identity_at(&first)]
        );

        let swapped = dir.path().join("swapped");
        std::os::unix::fs::symlink(&second, &swapped).unwrap();
        std::fs::rename(&swapped, &granted).unwrap();
        build_unwatched(&rules, &support).unwrap();
        let after = cached_identities(&rules, &support);
        assert_eq!(
            after,
            vec![identity_at(&second)],
            "the first folder's ruleset was reused"
        );
        assert_ne!(identity_at(&first), identity_at(&second));
    }
}
