//! Checking the artifacts a module reports.
//!
//! A module's result is untrusted: an artifact is passed on only when its path
//! is a clean relative path ([`modproto::invoke::is_clean_relative_path`]),
//! its root is one granted for this call, and the file, with symlinks
//! resolved, exists inside that root. Anything else is dropped with a host
//! warning, so a module cannot make the host (or an agent reading
//! `@artifact` lines) point at a file outside its grants.

use std::path::PathBuf;

use modproto::ArtifactRef;
use modproto::invoke::is_clean_relative_path;
use serde::Serialize;

use modhost_runner::Grant;

/// An artifact that passed the checks, with where it is on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckedArtifact {
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    /// The canonical host path of the file.
    pub host_path: PathBuf,
}

/// Keep the artifacts that lie inside granted roots; a warning for each
/// dropped one.
pub(crate) fn check_artifacts(
    artifacts: &[ArtifactRef],
    grants: &[Grant],
) -> (Vec<CheckedArtifact>, Vec<String>) {
    let mut kept = Vec::new();
    let mut warnings = Vec::new();
    for artifact in artifacts {
        match locate(artifact, grants) {
            Ok(host_path) => kept.push(CheckedArtifact {
                artifact: artifact.clone(),
                host_path,
            }),
            Err(problem) => warnings.push(format!(
                "artifact {:?} in root {:?} dropped: {problem}",
                artifact.path, artifact.root
            )),
        }
    }
    (kept, warnings)
}

fn locate(artifact: &ArtifactRef, grants: &[Grant]) -> Result<PathBuf, String> {
    if !is_clean_relative_path(&artifact.path) {
        return Err("not a clean relative path".into());
    }
    let grant = grants
        .iter()
        .find(|g| g.name == artifact.root)
        .ok_or_else(|| "no such root was granted for this call".to_owned())?;
    let root = std::fs::canonicalize(&grant.host)
        .map_err(|e| format!("the root {} does not resolve: {e}", grant.host.display()))?;
    let file = std::fs::canonicalize(root.join(&artifact.path))
        .map_err(|e| format!("the file does not resolve: {e}"))?;
    if !file.starts_with(&root) {
        return Err(format!(
            "it resolves to {}, outside its root",
            file.display()
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use modproto::Access;

    fn artifact(root: &str, path: &str) -> ArtifactRef {
        ArtifactRef {
            root: root.into(),
            path: path.into(),
            media_type: None,
            title: None,
        }
    }

    #[test]
    fn only_files_inside_granted_roots_survive() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("artifacts");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/report.md"), "x").unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
        let grants = [Grant {
            name: "artifacts".into(),
            host: root.clone(),
            guest: root.to_string_lossy().into_owned(),
            access: Access::ReadWrite,
        }];
        let reported = [
            artifact("artifacts", "sub/report.md"),
            artifact("artifacts", "../secret"),
            artifact("artifacts", "/etc/passwd"),
            artifact("artifacts", "link"),
            artifact("artifacts", "missing.txt"),
            artifact("state", "sub/report.md"),
        ];
        let (kept, warnings) = check_artifacts(&reported, &grants);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].host_path, root.join("sub/report.md"));
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.contains("outside its root")),
            "{warnings:?}"
        );
    }
}
