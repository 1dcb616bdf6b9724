//! Changing what is installed: enable, disable, install, remove.
//!
//! - **Disable never uninstalls.** It drops a `.disabled` marker in the
//!   module's folder; executable, state and knowledge stay, so enabling
//!   restores exactly what was there. A bare executable has no folder to mark,
//!   so enable and disable first move it into `modules/<id>/` (the describe
//!   cache is content-addressed, so the move costs no re-describe).
//! - **Install is all or nothing.** The file is checked against `--sha256`
//!   first (the sha256 of the file the operator names, executable or
//!   archive, as before); then the executable is copied (or the archive
//!   safely unpacked, see [`crate::install`]) into a staging folder inside
//!   the home, described there under confinement, its tree digested (a
//!   symlink out of the module's folder is refused here) and stored as a
//!   snapshot ([`crate::snapshot`]), and only a working module whose id is
//!   free and not reserved is renamed into `modules/<id>/` (one `rename`,
//!   same filesystem) and pinned, with its source and sha256 recorded. Any
//!   failure removes the staging folder.
//! - **Remove keeps state** unless `purge` is asked for.
//! - **One change at a time.** The part of install, remove, enable and
//!   disable that changes `modules/` and `pins.json` runs under the home's
//!   lock ([`crate::home_lock`]), after any describe (which can be slow), so
//!   parallel commands each take effect.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::describe_cache::{DescribeCache, DescribeKey};
use crate::discovery::{self, DISABLED_MARKER, InstalledModule, is_module_id};
use crate::home_lock::HomeLock;
use crate::host::{Host, HostError};
use crate::install::{self, ArchiveFormat, ArchiveLimits, DigestError};
use crate::module_tree;
use crate::pins::{PinRecord, Pins};
use crate::runner::Transport;

/// What `install` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct InstallRequest {
    /// A local native executable, `.wasm` component, or `.tar.gz` / `.zip`
    /// archive holding one.
    pub source: PathBuf,
    /// The module id; default the file's stem.
    pub id: Option<String>,
    /// Expected sha256 (hex) of the file; nothing is installed on mismatch.
    pub sha256: Option<String>,
}

/// What `remove` did.
#[derive(Debug, Clone, Serialize)]
pub struct RemoveReport {
    pub id: String,
    pub removed: PathBuf,
    /// The state and artifacts folders removed (with `purge`).
    pub purged: Vec<PathBuf>,
    /// The state folder kept (without `purge`), when it exists.
    pub kept_state: Option<PathBuf>,
}

impl Host {
    /// Disable `id`: it stays installed and listed, and contributes nothing
    /// invocable.
    pub async fn disable(&self, id: &str) -> Result<InstalledModule, HostError> {
        let module = self.module(id).await?;
        {
            let _lock = HomeLock::acquire(self.home())?;
            let folder = self.own_folder(&module)?;
            let marker = folder.join(DISABLED_MARKER);
            std::fs::write(&marker, b"").map_err(|e| HostError::io("create", &marker, e))?;
        }
        self.module(id).await
    }

    /// Enable `id` (remove its `.disabled` marker).
    pub async fn enable(&self, id: &str) -> Result<InstalledModule, HostError> {
        let module = self.module(id).await?;
        {
            let _lock = HomeLock::acquire(self.home())?;
            let folder = self.own_folder(&module)?;
            let marker = folder.join(DISABLED_MARKER);
            match std::fs::remove_file(&marker) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(HostError::io("remove", &marker, e)),
            }
        }
        self.module(id).await
    }

    /// The module's own folder, moving a bare executable into `modules/<id>/`
    /// first. The caller holds the home's lock.
    fn own_folder(&self, module: &InstalledModule) -> Result<PathBuf, HostError> {
        let module = module.clone();
        if let Some(folder) = module.folder {
            return Ok(folder);
        }
        if std::fs::symlink_metadata(&module.path).is_err() {
            // Moved by another command between discovery and the lock.
            let folder = self.layout().module_dir(&module.id);
            if folder.is_dir() {
                return Ok(folder);
            }
        }
        if !is_module_id(&module.id) {
            return Err(HostError::InvalidId { id: module.id });
        }
        let folder = self.layout().module_dir(&module.id);
        let name = module
            .path
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| module.id.clone().into());
        // A bare `modules/<id>` occupies the very name its folder needs:
        // step aside to a hidden name first (discovery skips dotfiles).
        let source = if module.path == folder {
            let aside = self
                .layout()
                .modules_dir()
                .join(format!(".{}.moving", module.id));
            std::fs::rename(&module.path, &aside)
                .map_err(|e| HostError::io("move the bare module", &module.path, e))?;
            aside
        } else if folder.exists() {
            return Err(HostError::ModuleExists {
                id: module.id,
                path: folder,
            });
        } else {
            module.path.clone()
        };
        let target = folder.join(name);
        let moved = std::fs::create_dir(&folder).and_then(|()| std::fs::rename(&source, &target));
        if let Err(e) = moved {
            // Put it back where it was; the module must not vanish.
            let _ = std::fs::remove_dir(&folder);
            let _ = std::fs::rename(&source, &module.path);
            return Err(HostError::io("move the bare module into", &folder, e));
        }
        Ok(folder)
    }

    /// Install a local executable, `.wasm` component, or `.tar.gz` / `.zip`
    /// archive holding one, as `modules/<id>/`, and pin it.
    pub async fn install(&self, request: InstallRequest) -> Result<InstalledModule, HostError> {
        let source = &request.source;
        let meta = std::fs::metadata(source).map_err(|e| HostError::io("read", source, e))?;
        if !meta.is_file() {
            return Err(HostError::NotAModule {
                path: source.clone(),
                reason: "not a regular file".into(),
            });
        }
        // The digest is checked before a single byte is unpacked or run.
        let sha256 = match &request.sha256 {
            Some(expected) => install::verify_sha256(source, expected),
            None => install::sha256_file(source),
        }
        .map_err(|e| match e {
            DigestError::Mismatch {
                path,
                expected,
                actual,
            } => HostError::Sha256Mismatch {
                path,
                expected,
                actual,
            },
            DigestError::Read { path, source } => HostError::io("read", &path, source),
            malformed @ DigestError::Malformed { .. } => HostError::Refused(malformed.to_string()),
        })?;
        if let Some(id) = &request.id {
            check_new_id(id)?;
        }

        let staging_root = self.layout().staging_dir();
        std::fs::create_dir_all(&staging_root)
            .map_err(|e| HostError::io("create", &staging_root, e))?;
        let staging = staging_root.join(crate::request::new_request_id());
        let result = self.stage_and_move(&request, &sha256, &staging).await;
        let _ = std::fs::remove_dir_all(&staging);
        let id = result?;
        self.module(&id).await
    }

    /// Unpack or copy into `staging`, describe there, move into place, pin.
    /// Returns the installed id.
    async fn stage_and_move(
        &self,
        request: &InstallRequest,
        sha256: &str,
        staging: &Path,
    ) -> Result<String, HostError> {
        let source = &request.source;
        let (folder, program) = match ArchiveFormat::of_path(source) {
            Some(format) => {
                let unpacked = staging.join("unpacked");
                install::extract(source, format, &unpacked, ArchiveLimits::default())
                    .map_err(|e| HostError::Refused(format!("{e}; nothing was installed")))?;
                let located = install::locate_module(&unpacked, request.id.as_deref())
                    .map_err(|e| HostError::Refused(format!("{e}; nothing was installed")))?;
                (located.folder, located.program)
            }
            None => {
                let folder = staging.join("module");
                std::fs::create_dir_all(&folder)
                    .map_err(|e| HostError::io("create", &folder, e))?;
                let stem = stem_of(source);
                let id = request.id.clone().unwrap_or(stem);
                let file_name = match Transport::of_path(source) {
                    Transport::Native => id,
                    Transport::Component => format!("{id}.wasm"),
                };
                let program = folder.join(file_name);
                std::fs::copy(source, &program).map_err(|e| HostError::io("copy", source, e))?;
                std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| HostError::io("make executable", &program, e))?;
                (folder, program)
            }
        };
        let id = request.id.clone().unwrap_or_else(|| stem_of(&program));
        check_new_id(&id)?;
        let target = self.layout().module_dir(&id);
        self.refuse_taken_id(&id, &target).await?;

        // Described where it stands, confined like any call: a module that
        // does not answer is not installed.
        let not_a_module = |reason: String| HostError::NotAModule {
            path: source.clone(),
            reason,
        };
        let value = discovery::describe(&program, self.config().limits.describe(), self.engines())
            .await
            .map_err(|e| not_a_module(e.message))?;
        let descriptor =
            discovery::parse_descriptor(value.clone()).map_err(|e| not_a_module(e.message))?;
        if descriptor.id != id {
            return Err(HostError::Refused(format!(
                "{} describes itself as {:?}, not {id:?}; install it with --id {} (nothing was installed)",
                source.display(),
                descriptor.id,
                descriptor.id
            )));
        }
        // The whole tree is what is approved; a link out of it is refused.
        let (_, digest) = module_tree::walk_and_digest(&folder)
            .map_err(|e| HostError::Refused(format!("{e}; nothing was installed")))?;
        crate::snapshot::ensure(self.layout(), &folder, &digest)
            .map_err(|e| HostError::Refused(format!("{e}; nothing was installed")))?;
        // Seed the describe cache so the first `list` does not run it again.
        let entry = program.strip_prefix(&folder).unwrap_or(&program);
        let cache = DescribeCache::load(self.layout());
        let _ = cache.store_result(
            &DescribeKey {
                name: &id,
                entry,
                digest: &digest,
            },
            &value,
        );

        let modules = self.layout().modules_dir();
        std::fs::create_dir_all(&modules).map_err(|e| HostError::io("create", &modules, e))?;
        let lock = HomeLock::acquire(self.home())?;
        if let Some(taken) = taken_path(self.layout(), &id) {
            return Err(HostError::ModuleExists {
                id: id.clone(),
                path: taken,
            });
        }
        // rename(2) onto an existing non-empty directory fails, so a racing
        // install of the same id cannot be overwritten.
        std::fs::rename(&folder, &target)
            .map_err(|e| HostError::io("move the staged module to", &target, e))?;

        // Installing is the operator approving these bytes: record where they
        // came from, their sha256, and pin them. A pin that cannot be written
        // undoes the install rather than leave an unpinned module behind.
        let origin = format!(
            "{} (sha256 {sha256})",
            std::path::absolute(source)
                .unwrap_or_else(|_| source.clone())
                .display()
        );
        let pinned = Pins::load_locked(self.home(), &lock)
            .and_then(|mut pins| pins.pin(PinRecord::new(&descriptor, &digest, Some(origin))));
        if let Err(e) = pinned {
            let _ = std::fs::remove_dir_all(&target);
            return Err(HostError::Refused(format!("{e}; nothing was installed")));
        }
        Ok(id)
    }

    async fn refuse_taken_id(&self, id: &str, target: &Path) -> Result<(), HostError> {
        if let Some(path) = taken_path(self.layout(), id) {
            return Err(HostError::ModuleExists {
                id: id.to_owned(),
                path,
            });
        }
        if std::fs::symlink_metadata(target).is_ok() {
            return Err(HostError::ModuleExists {
                id: id.to_owned(),
                path: target.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Remove `id`; its state stays unless `purge`.
    pub async fn remove(&self, id: &str, purge: bool) -> Result<RemoveReport, HostError> {
        let module = self.module(id).await?;
        let lock = HomeLock::acquire(self.home())?;
        // A pinned module whose files are already gone only loses its pin
        // (also when a parallel remove got there first).
        let removed = match &module.folder {
            Some(folder) if std::fs::symlink_metadata(folder).is_err() => folder.clone(),
            Some(folder) => {
                std::fs::remove_dir_all(folder).map_err(|e| HostError::io("remove", folder, e))?;
                folder.clone()
            }
            None if std::fs::symlink_metadata(&module.path).is_err() => module.path.clone(),
            None => {
                std::fs::remove_file(&module.path)
                    .map_err(|e| HostError::io("remove", &module.path, e))?;
                module.path.clone()
            }
        };
        if let Ok(mut pins) = Pins::load_locked(self.home(), &lock) {
            pins.unpin(&module.id).map_err(|e| {
                HostError::Refused(format!("removed {}, but {e}", removed.display()))
            })?;
        }
        // Its approved snapshot goes too, unless another pin names it.
        crate::snapshot::remove_unused(self.layout(), &lock);
        drop(lock);
        let state = self.layout().state_dir(&module.id);
        let artifacts = self.layout().artifacts_dir(&module.id);
        let mut purged = Vec::new();
        if purge {
            for dir in [state.clone(), artifacts] {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(|e| HostError::io("remove", &dir, e))?;
                    purged.push(dir);
                }
            }
        }
        let kept_state = (!purge && state.exists()).then_some(state);
        Ok(RemoveReport {
            id: module.id,
            removed,
            purged,
            kept_state,
        })
    }
}

/// What already occupies the id `id` under `modules/`: its folder, or a
/// bare file named after it (a module is named by its folder or file).
fn taken_path(layout: &crate::home::HomeLayout, id: &str) -> Option<PathBuf> {
    let modules = layout.modules_dir();
    [modules.join(id), modules.join(format!("{id}.wasm"))]
        .into_iter()
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// A file's name without `.wasm` (or any extension): the default id.
fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// An id a new module may take: well-formed and not reserved.
fn check_new_id(id: &str) -> Result<(), HostError> {
    if !is_module_id(id) {
        return Err(HostError::InvalidId { id: id.to_owned() });
    }
    if install::is_reserved_id(id) {
        return Err(HostError::Refused(format!(
            "{id:?} is reserved (it would shadow a host name); install it with --id OTHER (nothing was installed)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostOptions;
    use crate::discovery::ModuleStatus;
    use crate::test_modules::{describes, install, write_executable};

    fn open(home: &Path) -> Host {
        Host::open(HostOptions {
            home: Some(home.to_path_buf()),
            workspace: Some(home.to_path_buf()),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn disabling_a_bare_module_moves_it_into_its_folder_and_enabling_restores() {
        let dir = tempfile::tempdir().unwrap();
        let (_, counter) = install(dir.path(), "loose", true);
        // The describe counter is a file outside any grant.
        std::fs::write(dir.path().join("config.toml"), "confinement = \"off\"\n").unwrap();
        let host = open(dir.path());
        // Enabled (rather than `unpinned`) needs the operator's pin; moving
        // the bytes into a folder keeps it valid.
        host.pin("loose").await.unwrap();
        assert!(host.module("loose").await.unwrap().folder.is_none());
        let module = host.disable("loose").await.unwrap();
        assert_eq!(module.status, ModuleStatus::Disabled);
        assert!(dir.path().join("modules/loose/.disabled").exists());
        assert!(dir.path().join("modules/loose/loose").is_file());
        let module = host.enable("loose").await.unwrap();
        assert_eq!(module.status, ModuleStatus::Enabled);
        assert_eq!(
            describes(&counter),
            1,
            "moving the module must not cost a describe"
        );
    }

    #[tokio::test]
    async fn install_checks_sha256_and_describes_before_moving() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let host = Host::open(HostOptions {
            home: Some(home.clone()),
            workspace: Some(dir.path().into()),
        })
        .unwrap();
        let (source, _) = install(&dir.path().join("src"), "tool", true);

        let err = host
            .install(InstallRequest {
                source: source.clone(),
                id: None,
                sha256: Some("00".repeat(32)),
            })
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::Sha256Mismatch { .. }), "{err}");
        assert!(!home.join("modules/tool").exists());

        let good = install::sha256_file(&source).unwrap();
        let module = host
            .install(InstallRequest {
                source: source.clone(),
                id: None,
                sha256: Some(good),
            })
            .await
            .unwrap();
        assert_eq!(module.status, ModuleStatus::Enabled);
        assert_eq!(
            module.path,
            std::fs::canonicalize(&home)
                .unwrap()
                .join("modules/tool/tool")
        );

        let err = host
            .install(InstallRequest {
                source: source.clone(),
                id: None,
                sha256: None,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::ModuleExists { .. }), "{err}");

        let broken = dir.path().join("broken");
        write_executable(&broken, "#!/bin/sh\nexit 1\n");
        let err = host
            .install(InstallRequest {
                source: broken,
                id: None,
                sha256: None,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::NotAModule { .. }), "{err}");
        assert!(!home.join("modules/broken").exists());
        let staged: Vec<_> = std::fs::read_dir(home.join("staging")).unwrap().collect();
        assert!(staged.is_empty(), "staging must be left empty");
    }

    #[tokio::test]
    async fn remove_keeps_state_unless_purged() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "a", false);
        install(dir.path(), "b", false);
        std::fs::create_dir_all(dir.path().join("state/a")).unwrap();
        std::fs::create_dir_all(dir.path().join("state/b")).unwrap();
        let host = open(dir.path());
        let report = host.remove("a", false).await.unwrap();
        assert!(report.kept_state.is_some());
        assert!(dir.path().join("state/a").exists());
        host.remove("b", true).await.unwrap();
        assert!(!dir.path().join("state/b").exists());
        assert!(host.discover().await.is_empty());
    }
}
