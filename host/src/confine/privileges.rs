//! What the host does about running with privileges, in words for `doctor`.
//!
//! A host running as root is the common case in containers and CI, and the
//! one where a module would otherwise hold most power; the operator should
//! see that it is root and what stands between its modules and root's
//! powers: every capability dropped ([`super::capabilities`]) and, since
//! `RLIMIT_NPROC` does not bind uid 0, the pids cgroup ([`super::pids`]).

use serde::Serialize;

use super::{PROCESS_MARGIN, capabilities, pids};

/// The host's privileges and what confined modules get of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Privileges {
    /// The host runs as uid 0.
    pub root: bool,
    /// The host holds capabilities, and confined modules drop them all.
    pub capabilities_dropped: bool,
    /// The pids cgroup root's modules join, when the host is root and one
    /// could be set up.
    pub process_cgroup: Option<String>,
    /// Why a root host's modules have no process bound.
    pub process_bound_missing: Option<String>,
}

/// Ask once (creating the pids cgroup if the host is root, as the first
/// confined call would).
pub fn privileges() -> Privileges {
    let root = rustix::process::getuid().is_root();
    let capabilities_dropped = capabilities::prepare().is_some();
    let (process_cgroup, process_bound_missing) = if root {
        match pids::host_cgroup(PROCESS_MARGIN) {
            Ok(cgroup) => (Some(cgroup.path().display().to_string()), None),
            Err(reason) => (None, Some(reason)),
        }
    } else {
        (None, None)
    };
    Privileges {
        root,
        capabilities_dropped,
        process_cgroup,
        process_bound_missing,
    }
}

impl Privileges {
    /// One line for `doctor`.
    pub fn summary(&self) -> String {
        let who = if self.root {
            "the host runs as root"
        } else {
            "the host runs unprivileged"
        };
        let capabilities = if self.capabilities_dropped {
            "confined modules drop every capability (bounding, ambient, inheritable, permitted, effective; securebits locked; no_new_privs)"
        } else {
            "the host holds no capability to pass on"
        };
        let processes = match (&self.process_cgroup, &self.process_bound_missing) {
            (Some(path), _) => format!(
                "their processes are bounded by the pids cgroup {path} (pids.max {PROCESS_MARGIN}, shared by the host's modules), as RLIMIT_NPROC does not bind uid 0"
            ),
            (None, Some(reason)) => format!(
                "their process count is NOT bounded (RLIMIT_NPROC does not bind uid 0, and {reason}): run the host as an unprivileged user, or give it a pids cgroup"
            ),
            (None, None) => "their processes are bounded by RLIMIT_NPROC".to_string(),
        };
        format!("{who}: {capabilities}; {processes}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_host_says_so_and_what_bounds_its_modules() {
        let privileges = privileges();
        let summary = privileges.summary();
        if privileges.root {
            assert!(summary.contains("runs as root"), "{summary}");
            assert!(
                summary.contains("pids") || summary.contains("NOT bounded"),
                "{summary}"
            );
        }
        if privileges.capabilities_dropped {
            assert!(summary.contains("drop every capability"), "{summary}");
        }
    }
}
