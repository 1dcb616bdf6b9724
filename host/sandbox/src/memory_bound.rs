//! The memory bound a call's confinement carries:
//! [`Confinement::bound_memory`] takes a cgroup of the host's pool (or
//! falls back to `RLIMIT_DATA`) for the call, and
//! [`Confinement::memory_bound`] hands it to the caller, which holds it as
//! long as the process lives and asks it afterwards whether the limit was
//! hit. The pool and the bound themselves are `memory_cgroup`'s; this file
//! joins them to the confinement, apart from both so that neither depends
//! on the other.

use crate::memory_cgroup::{self, MemoryBound};
use crate::{ConfineError, Confinement, ConfinementMode};

impl Confinement {
    /// This confinement, with its memory bounded to `limit` bytes: a call
    /// cgroup of the host's pool, or `RLIMIT_DATA` where the host has none
    /// (which `support` reports; `required` refused such a call in
    /// [`crate::prepare`] already when the host is root). A confinement
    /// that enters nothing (`confinement = "off"`) stays so. A pool that
    /// exists but cannot give a cgroup now (every one busy, a write the
    /// kernel refused) is refused under `required`, warned about otherwise.
    pub fn bound_memory(mut self, limit: u64, mode: ConfinementMode) -> Result<Self, ConfineError> {
        if self.child.is_empty() || mode == ConfinementMode::Off {
            return Ok(self);
        }
        let (bound, failure) = memory_cgroup::bound(limit);
        if let Some(failure) = failure {
            let reason = format!(
                "this call's memory cgroup could not be set up ({failure}): its memory is bounded per process only (RLIMIT_DATA)"
            );
            if mode == ConfinementMode::Required {
                return Err(ConfineError::Unconfined {
                    reason,
                    remedy: "try again once fewer calls run, or set confinement = \"best-effort\" in config.toml to run such calls with a warning".into(),
                });
            }
            self.warning = Some(match self.warning.take() {
                Some(w) => format!("{w}; {reason}"),
                None => reason,
            });
        }
        self.child.memory = Some(bound);
        Ok(self)
    }

    /// The memory bound the child will enter ([`Self::bound_memory`]): the
    /// caller keeps it for as long as the process lives, and asks it
    /// afterwards whether the limit was hit.
    pub fn memory_bound(&self) -> Option<MemoryBound> {
        self.child.memory.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn read(path: &Path, file: &str) -> String {
        std::fs::read_to_string(path.join(file)).unwrap()
    }

    /// Through the production path: a confined child started with a
    /// bound sits in its call's cgroup from its exec on (read from outside:
    /// the module cannot read `/proc/<pid>`), and the cgroup goes back to
    /// the pool only once the bound is dropped.
    #[test]
    fn a_confined_child_is_in_its_calls_cgroup_from_its_exec() {
        use std::io::Write;
        assert!(
            memory_cgroup::per_call_mechanism().is_ok(),
            "this test needs per-call memory cgroups"
        );
        let confinement = crate::prepare(
            Path::new("/bin/sh"),
            &[],
            &[],
            &[],
            crate::NetworkAccess::None,
            ConfinementMode::Required,
        )
        .unwrap()
        .bound_memory(48 << 20, ConfinementMode::Required)
        .unwrap();
        let bound = confinement.memory_bound().expect("a bound");
        assert!(bound.is_per_call() && bound.limit() == 48 << 20);
        let cgroup = bound.cgroup_path().unwrap();
        let child = crate::spawn::spawn(
            Path::new("/bin/sh"),
            std::iter::once(("PATH".into(), "/usr/bin:/bin".into())),
            None,
            confinement.into_child().as_ref(),
        )
        .unwrap();
        let membership = std::fs::read_to_string(format!("/proc/{}/cgroup", child.pid)).unwrap();
        let line = membership
            .lines()
            .find(|l| {
                l.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == "memory"))
            })
            .or_else(|| membership.lines().find(|l| l.starts_with("0::")))
            .unwrap()
            .to_owned();
        let name = cgroup.file_name().unwrap().to_string_lossy().into_owned();
        let parent = cgroup
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            line.ends_with(&format!("/{parent}/{name}")),
            "{line} is not {}",
            cgroup.display()
        );
        let mut stdin = std::fs::File::from(child.stdin);
        stdin.write_all(b"exit 0\n").unwrap();
        drop(stdin);
        let pid = rustix::process::Pid::from_raw(child.pid).unwrap();
        rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
        assert_eq!(read(&cgroup, "cgroup.procs"), "", "the child was reaped");
    }

    /// What `doctor` and `required` see: a root host that can make no
    /// memory cgroup leaves the resource-limits part unenforced (its
    /// processes, which no RLIMIT_NPROC counts, are bounded each alone); an
    /// unprivileged host is bounded per process and says it is weaker.
    #[test]
    fn without_cgroups_a_root_host_reports_the_part_unenforced() {
        use crate::support::{ConfinementSupport, Part};
        let root = ConfinementSupport::new(Some(7), Ok(()), true)
            .without_memory_cgroup("no memory controller");
        let part = root.part(Part::ResourceLimits);
        assert!(!part.enforced, "{part:?}");
        assert!(
            part.why.contains("RLIMIT_DATA") && part.why.contains("no memory controller"),
            "{}",
            part.why
        );
        assert!(part.remedy.is_some_and(|r| r.contains("memory cgroups")));
        // What `required` refuses a call on, with the remedy.
        let unenforced = root.unenforced(false);
        assert!(unenforced.iter().any(|p| p.part == Part::ResourceLimits));
        assert!(crate::support::remedy_for(&unenforced).contains("memory cgroups"));
        let user =
            ConfinementSupport::new(Some(7), Ok(()), false).without_memory_cgroup("not root");
        let part = user.part(Part::ResourceLimits);
        assert!(part.enforced && part.why.contains("weaker"), "{}", part.why);
        let here = crate::probe();
        assert!(
            here.part(Part::ResourceLimits)
                .why
                .contains("a cgroup per call"),
            "{:?}",
            here.part(Part::ResourceLimits)
        );
    }
}
