//! The hostile Python modules of the attack batteries: `attacker.py` tries
//! the kernel surface (`sandbox_kernel.rs`), `redteam.py` the ways around
//! the sandbox (`redteam.rs`). Each is installed as a pinned folder module
//! under the system Python; one call is one attack, and each attempt inside
//! it reports `{"ok": bool, "errno": n}`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::support::{Home, Layout};

/// errno values the attacks may meet.
pub const EPERM: i64 = 1;
pub const EBADF: i64 = 9;
pub const EACCES: i64 = 13;
pub const ENOSYS: i64 = 38;

/// A fixture script of `tests/fixtures` (its name there) and the module id it describes.
#[derive(Debug, Clone, Copy)]
pub struct Attacker {
    pub id: &'static str,
    pub script: &'static str,
}

pub const KERNEL_ATTACKER: Attacker = Attacker {
    id: "attacker",
    script: "attacker.py",
};

pub const RED_TEAM: Attacker = Attacker {
    id: "redteam",
    script: "redteam.py",
};

impl Attacker {
    /// A fresh home with this module installed and pinned, on a machine that
    /// confines (the attacks prove nothing otherwise, so this fails).
    pub fn install(self) -> Home {
        assert!(
            Path::new("/usr/bin/python3").exists(),
            "the {} fixture needs the system /usr/bin/python3",
            self.id
        );
        let home = Home::new();
        let target = home.module_path(self.id, Layout::Folder);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(
            crate::support::tests_dir()
                .join("fixtures")
                .join(self.script),
            &target,
        )
        .unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        home.run(&["pin", self.id]).expect_code(0);
        home.require_landlock();
        home
    }

    /// Run the attack `verb`; its report, with no module process left.
    #[track_caller]
    pub fn attack(self, home: &Home, verb: &str, input: &Value) -> Value {
        let run = home.invoke(self.id, &format!("{}.{verb}", self.id), input, &[]);
        let output = run.invoke_result()["output"].clone();
        home.assert_no_module_processes();
        output
    }
}

/// The attempt failed, with one of `errnos`.
#[track_caller]
pub fn assert_refused(report: &Value, errnos: &[i64], what: &str) {
    assert_eq!(report["ok"], false, "{what} succeeded: {report:#}");
    let errno = report["errno"].as_i64().unwrap_or_default();
    assert!(
        errnos.contains(&errno),
        "{what} failed with errno {errno}, not one of {errnos:?}: {report:#}"
    );
}
