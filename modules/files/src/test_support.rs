//! Fixtures the capabilities' tests share.

use std::time::{Duration, Instant};

use modsdk::{Access, Root, RootKind};

/// A temporary workspace with `files` (path, content), opened read-only.
pub fn workspace(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let root = Root::open(
        "workspace",
        dir.path().to_str().unwrap(),
        RootKind::Workspace,
        Access::Read,
    )
    .unwrap();
    (dir, root)
}

pub fn far_deadline() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}
