//! A module made ready to check without installing it: what `modhost
//! conformance FOLDER|ARCHIVE|URL` runs ([`stage_module`]).
//!
//! Design decisions:
//!
//! - **The install path's own unpacking, not a second one.** A folder is
//!   copied through no link (`crate::install::copy_folder`), a file is read
//!   once with its sha256 checked when one is given
//!   (`crate::install::receive`), an archive is unpacked by
//!   `crate::install::extract` under the same `ArchiveLimits`, and the
//!   module is found by `crate::install::locate_module` with the same
//!   preference for the id. So what is checked is what `install` would
//!   install, and an archive `install` refuses (a link out, a path escaping,
//!   too many entries, two candidate executables) is refused here with the
//!   same reason.
//! - **Outside the home, gone when dropped.** The staged copy lives in a
//!   temporary folder of its own (`$TMPDIR`), never in the home: checking
//!   installs nothing, and must not create a home or leave anything in one.
//!   Dropping the [`StagedModule`] removes it, on every path.
//! - **A bare executable or component is staged too** (a folder holding it
//!   under its id), as install stages it, so a file fetched from a URL runs
//!   from a folder no one else writes. A local bare file can also be run
//!   where it lies; that is the caller's choice.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use modhost_runner::Transport;

use crate::host::HostError;
use crate::install::{self, ArchiveFormat, ArchiveLimits};

/// A module copied or unpacked into a temporary folder, removed on drop.
#[derive(Debug)]
pub struct StagedModule {
    /// The id it would be installed as (`--id`, else the name of its
    /// executable without `.wasm`).
    pub id: String,
    /// The module's folder (what install would make `modules/<id>/`): its
    /// knowledge files are read from here.
    pub folder: PathBuf,
    /// The executable or component inside `folder`.
    pub program: PathBuf,
    pub transport: Transport,
    /// sha256 of the file it came from (an archive or a bare file); `None`
    /// for a folder.
    pub sha256: Option<String>,
    /// Whether it came as a bare executable or component (no knowledge
    /// files can come with one).
    pub bare: bool,
    staging: tempfile::TempDir,
}

impl StagedModule {
    /// The temporary folder everything staged lies in.
    pub fn staging(&self) -> &Path {
        self.staging.path()
    }
}

/// Copy (a folder), unpack (a `.tar.gz`, `.tgz` or `.zip` archive) or copy
/// into a folder of its own (a native executable or `.wasm` component) the
/// module at `source`, as `install` would, into a new temporary folder, and
/// find the module in it. `id` chooses among several candidates, as
/// `install --id` does; `sha256` is checked against a file source before a
/// byte of it is unpacked (a folder has no sha256 to check: refused).
pub fn stage_module(
    source: &Path,
    id: Option<&str>,
    sha256: Option<&str>,
) -> Result<StagedModule, HostError> {
    let meta = std::fs::metadata(source).map_err(|e| HostError::io("read", source, e))?;
    if meta.is_dir() && sha256.is_some() {
        return Err(HostError::Refused(format!(
            "--sha256 checks one file, and {} is a folder; pack it (.tar.gz or .zip) to check its sha256, or leave --sha256 out",
            source.display()
        )));
    }
    if !meta.is_dir() && !meta.is_file() {
        return Err(HostError::NotAModule {
            path: source.to_path_buf(),
            reason: "neither a regular file nor a folder".into(),
        });
    }
    let staging = tempfile::Builder::new()
        .prefix("modhost-staged-")
        .tempdir()
        .map_err(|e| HostError::io("create a staging folder in", &std::env::temp_dir(), e))?;
    let refused = |e: &dyn std::fmt::Display| HostError::Refused(e.to_string());
    let unpacked = staging.path().join("unpacked");
    if meta.is_dir() {
        let name = source
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| "module".into());
        install::copy_folder(source, &unpacked.join(&name)).map_err(|e| refused(&e))?;
        let preferred = id.map(str::to_owned).unwrap_or_else(|| stem_of(&name));
        let located =
            install::locate_module(&unpacked, Some(&preferred)).map_err(|e| refused(&e))?;
        return Ok(staged(
            id,
            located.folder,
            located.program,
            None,
            false,
            staging,
        ));
    }
    let received = staging.path().join("received");
    let digest = install::receive(source, &received, sha256).map_err(HostError::from)?;
    if let Some(format) = ArchiveFormat::of_path(source) {
        install::extract(&received, format, &unpacked, ArchiveLimits::default())
            .map_err(|e| refused(&e))?;
        let located = install::locate_module(&unpacked, id).map_err(|e| refused(&e))?;
        return Ok(staged(
            id,
            located.folder,
            located.program,
            Some(digest),
            false,
            staging,
        ));
    }
    // A bare executable or component: a folder of its own, named as install
    // names it.
    let module_id = id.map(str::to_owned).unwrap_or_else(|| stem_of(source));
    let folder = staging.path().join("module");
    std::fs::create_dir(&folder).map_err(|e| HostError::io("create", &folder, e))?;
    let program = folder.join(match Transport::of_path(source) {
        Transport::Native => module_id.clone(),
        Transport::Component => format!("{module_id}.wasm"),
    });
    std::fs::rename(&received, &program)
        .map_err(|e| HostError::io("move into staging", &received, e))?;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| HostError::io("make executable", &program, e))?;
    Ok(staged(
        Some(&module_id),
        folder,
        program,
        Some(digest),
        true,
        staging,
    ))
}

/// Whether `path` is named as an archive install unpacks (`.tar.gz`,
/// `.tgz`, `.zip`).
pub fn is_archive(path: &Path) -> bool {
    ArchiveFormat::of_path(path).is_some()
}

fn staged(
    id: Option<&str>,
    folder: PathBuf,
    program: PathBuf,
    sha256: Option<String>,
    bare: bool,
    staging: tempfile::TempDir,
) -> StagedModule {
    StagedModule {
        id: id.map(str::to_owned).unwrap_or_else(|| stem_of(&program)),
        transport: Transport::of_path(&program),
        folder,
        program,
        sha256,
        bare,
        staging,
    }
}

/// A file's name without `.wasm` (or any extension): the default id.
fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_folder_is_copied_and_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("greeter");
        executable(&source.join("greeter"), "#!/bin/sh\n");
        std::fs::create_dir_all(source.join("knowledge")).unwrap();
        std::fs::write(source.join("knowledge/guide.md"), "# guide\n").unwrap();
        let staged = stage_module(&source, None, None).unwrap();
        assert_eq!(staged.id, "greeter");
        assert!(staged.folder.join("knowledge/guide.md").is_file());
        assert!(staged.program.starts_with(staged.staging()));
        assert!(!staged.bare);
        let staging = staged.staging().to_path_buf();
        drop(staged);
        assert!(!staging.exists(), "the staged copy must go on drop");
        assert!(source.join("greeter").is_file(), "the source stays");
    }

    #[test]
    fn a_folder_with_a_sha256_and_a_wrong_sha256_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("tool");
        executable(&source.join("tool"), "#!/bin/sh\n");
        let err = stage_module(&source, None, Some(&"00".repeat(32))).unwrap_err();
        assert!(err.to_string().contains("is a folder"), "{err}");
        let err = stage_module(&source.join("tool"), None, Some(&"00".repeat(32))).unwrap_err();
        assert!(matches!(err, HostError::Sha256Mismatch { .. }), "{err}");
    }

    #[test]
    fn a_bare_executable_gets_a_folder_named_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("tool");
        executable(&source, "#!/bin/sh\n");
        let staged = stage_module(&source, Some("other"), None).unwrap();
        assert_eq!(staged.id, "other");
        assert_eq!(staged.program, staged.folder.join("other"));
        assert!(staged.bare);
        assert_eq!(staged.sha256.as_deref().map(str::len), Some(64));
    }
}
