//! Where the host's own cgroup of a controller is: the cgroup v1 hierarchy
//! that mounts the controller, else the v2 (unified) hierarchy.
//!
//! Read from `/proc/self/mountinfo` (where each hierarchy is mounted, and
//! which part of it the mount shows: a container sees its own cgroup as
//! the mount's root) and `/proc/self/cgroup` (the host's cgroup in each
//! hierarchy). Parsing is split from reading so the tests can feed it the
//! two files as text.
//!
//! The pids bound (`pids.rs`) and the memory bound (`memory_cgroup.rs`)
//! both find their hierarchy here.

use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hierarchy {
    V1,
    V2,
}

impl Hierarchy {
    /// The file a single-threaded process moves itself in by writing `0`:
    /// under v1 `tasks` (the calling thread alone, without the kernel's
    /// global lock against forks: see `pids.rs`), under v2 `cgroup.procs`
    /// (a domain cgroup takes processes only).
    pub(crate) fn membership_file(self) -> &'static str {
        match self {
            Hierarchy::V1 => "tasks",
            Hierarchy::V2 => "cgroup.procs",
        }
    }

    /// As `doctor` names it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Hierarchy::V1 => "cgroup v1",
            Hierarchy::V2 => "cgroup v2",
        }
    }
}

/// The host's own cgroup in the hierarchy that has `controller`: a v1
/// mount of it, else the v2 mount. `None` when neither is mounted (or
/// `/proc` cannot be read).
pub(crate) fn own_cgroup(controller: &str) -> Option<(PathBuf, Hierarchy)> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let memberships = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    locate(controller, &mountinfo, &memberships)
}

/// [`own_cgroup`] from the text of the two files.
pub(crate) fn locate(
    controller: &str,
    mountinfo: &str,
    memberships: &str,
) -> Option<(PathBuf, Hierarchy)> {
    // mountinfo: id parent dev root mountpoint options ... - fstype source super
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fields = before.split(' ');
            let root = fields.nth(3)?;
            let mount_point = fields.next()?;
            let mut after = after.split(' ');
            let fstype = after.next()?;
            let super_options = after.nth(1).unwrap_or("");
            Some((root, mount_point, fstype, super_options))
        })
        .collect();
    let v1 = mounts.iter().find(|(_, _, fstype, options)| {
        *fstype == "cgroup" && options.split(',').any(|o| o == controller)
    });
    let (root, mount_point, own, hierarchy) = match v1 {
        Some(&(root, mount_point, _, _)) => {
            let own = memberships.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let _id = parts.next()?;
                let controllers = parts.next()?;
                let path = parts.next()?;
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then_some(path)
            })?;
            (root, mount_point, own, Hierarchy::V1)
        }
        None => {
            let &(root, mount_point, _, _) = mounts
                .iter()
                .find(|(_, _, fstype, _)| *fstype == "cgroup2")?;
            let own = memberships
                .lines()
                .find_map(|line| line.strip_prefix("0::"))?;
            (root, mount_point, own, Hierarchy::V2)
        }
    };
    let relative = own.strip_prefix(root).unwrap_or(own);
    Some((
        Path::new(mount_point).join(relative.trim_start_matches('/')),
        hierarchy,
    ))
}

/// Remove the `modhost-<pid>` cgroups beneath `parent` whose host is gone
/// (the pids bound's, and the memory bound's with their call cgroups):
/// their processes were killed with their groups, or died with the
/// host's. One that still holds a process (`EBUSY`) is left for a later
/// host.
pub(crate) fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("modhost-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(calls) = std::fs::read_dir(entry.path()) {
            for call in calls.flatten() {
                if call.file_type().is_ok_and(|t| t.is_dir()) {
                    // EBUSY while a process is still inside: left for later.
                    let _ = std::fs::remove_dir(call.path());
                }
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This project's CI: v1 controllers, the host in a memory cgroup of
    /// its own, an empty unified hierarchy beside them.
    const CI_MOUNTS: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const CI_CGROUPS: &str = "\
8:pids:/
4:memory:/process_api/a57d
1:cpu:/
0::/
";

    #[test]
    fn a_v1_controller_is_found_in_its_own_hierarchy() {
        assert_eq!(
            locate("memory", CI_MOUNTS, CI_CGROUPS),
            Some((
                PathBuf::from("/sys/fs/cgroup/memory/process_api/a57d"),
                Hierarchy::V1
            ))
        );
        assert_eq!(
            locate("pids", CI_MOUNTS, CI_CGROUPS),
            Some((PathBuf::from("/sys/fs/cgroup/pids"), Hierarchy::V1))
        );
    }

    #[test]
    fn without_a_v1_mount_the_unified_hierarchy_is_the_answer() {
        let mounts = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let cgroups = "0::/user.slice/user-1000.slice/session-2.scope\n";
        assert_eq!(
            locate("memory", mounts, cgroups),
            Some((
                PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"),
                Hierarchy::V2
            ))
        );
    }

    #[test]
    fn a_container_sees_its_cgroup_as_the_mounts_root() {
        let mounts = "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let cgroups = "4:memory:/docker/abc\n";
        assert_eq!(
            locate("memory", mounts, cgroups),
            Some((PathBuf::from("/sys/fs/cgroup/memory"), Hierarchy::V1))
        );
    }

    #[test]
    fn no_cgroup_mount_is_none() {
        assert_eq!(locate("memory", "", "0::/\n"), None);
    }
}
