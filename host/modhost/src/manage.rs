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
//!   safely unpacked, or the module folder copied, see [`crate::install`])
//!   into a staging folder inside the home, described there under
//!   confinement, its tree digested (a symlink out of the module's folder is
//!   refused here) and stored as a snapshot ([`crate::snapshot`]), and only
//!   a working module whose id is free and not reserved is renamed into
//!   `modules/<id>/` (one `rename`, same filesystem) and pinned, with its
//!   source and sha256 recorded. Any failure removes the staging folder and
//!   leaves the home as it was.
//! - **Install refuses what the host would refuse.** Before anything is
//!   written outside staging, the conformance kit's static checks run on
//!   the descriptor with the knowledge files of what is being installed
//!   (an input schema that is not an object schema, duplicate ids, effects
//!   naming undeclared roots, a bad version, a refused contract, a
//!   weakening contract-2 module, a knowledge file that is missing). Any
//!   error refuses the install with every finding and its remedy
//!   ([`HostError::InstallRefused`]); `force` installs it anyway, but
//!   unpinned: the operator did not approve bytes the host found wrong.
//! - **Upgrade replaces, keeping state.** An installed id is refused with
//!   the remedy (`--upgrade`); with `upgrade` the same checks run, the old
//!   module steps aside under the lock, the new one is renamed in and
//!   pinned, and only then is the old one (and its unused snapshot)
//!   removed; any failure puts it back. `state/<id>/` is never touched.
//! - **Remove keeps state** unless `purge` is asked for.
//! - **One change at a time.** The part of install, remove, enable and
//!   disable that changes `modules/` and `pins.json` runs under the home's
//!   lock ([`crate::home_lock`]), after any describe (which can be slow), so
//!   parallel commands each take effect.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::describe_cache::{DescribeCache, DescribeKey};
use crate::discovery::{self, DISABLED_MARKER, InstalledModule};
use crate::home_lock::HomeLock;
use crate::host::{Host, HostError};
use crate::install::{self, ArchiveFormat, ArchiveLimits};
use crate::module_id::is_module_id;
use crate::module_tree;
use crate::pins::{PinOutcome, PinProvenance, PinRecord, PinStanding, Pins, PinsError};
use modhost_runner::Transport;

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
    /// Install despite findings the host would refuse it for: unpinned,
    /// the findings in the report.
    pub force: bool,
    /// Replace the installed module of the same id (its state is kept).
    pub upgrade: bool,
    /// Where the (fetched) bytes came from and who signed them, recorded
    /// with the pin; `source` is then the fetched local file.
    pub provenance: Option<PinProvenance>,
}

/// What `install` did.
#[derive(Debug, Clone)]
pub struct InstallReport {
    pub module: InstalledModule,
    /// Every finding of the checks: warnings, and under `force` errors.
    pub findings: Vec<modconform::Finding>,
    /// Whether the new bytes are pinned (not when forced past errors).
    pub pinned: bool,
    /// The module it replaced, with `upgrade`.
    pub replaced: Option<ReplacedModule>,
}

/// The module an upgrade replaced ([`InstallReport::replaced`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplacedModule {
    /// Its version, when it described itself.
    pub version: Option<String>,
}

/// An install checked in its own staging folder and not yet moved into
/// `modules/`: what [`Host::prepare_install`] makes and
/// [`Host::place_prepared`] moves into place. `install` prepares one and
/// commits it at once; `sync` prepares every module of a lockfile before it
/// commits any, so that one bad entry changes nothing. Dropping it removes
/// its staging folder (and `staging/` once no install is using it).
#[derive(Debug)]
pub(crate) struct PreparedInstall {
    /// The module id it installs as.
    pub(crate) id: String,
    /// The module's folder in staging, and its entry file there.
    folder: PathBuf,
    program: PathBuf,
    descriptor: Option<modproto::Descriptor>,
    /// The descriptor as the module sent it (for the describe cache).
    value: Option<serde_json::Value>,
    pub(crate) findings: Vec<modconform::Finding>,
    /// Whether it is pinned (it conforms; not when forced past errors).
    pub(crate) conforms: bool,
    /// The tree digest of `folder`.
    pub(crate) digest: String,
    /// What the pin records as its source.
    origin: String,
    provenance: Option<PinProvenance>,
    /// What occupied the id under `modules/` when it was prepared; it must
    /// still be so when it is placed.
    pub(crate) installed: Option<PathBuf>,
    /// Held for its drop, which removes the staging folder.
    _staging: StagingFolder,
}

/// One install's staging folder, removed (with `staging/` when empty) on drop.
#[derive(Debug)]
struct StagingFolder {
    path: PathBuf,
    root: PathBuf,
}

impl Drop for StagingFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        // `staging/` itself goes too once no install is using it (removing
        // a folder that is not empty fails, and then it stays).
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// A prepared module moved into `modules/<id>/`, the module it replaced
/// aside under a hidden name: undone by [`Placed::undo`], made final by
/// [`Placed::finish`]. Both need the home's lock that placed it.
#[derive(Debug)]
pub(crate) struct Placed {
    target: PathBuf,
    /// The replaced module's path and where it stands aside.
    aside: Option<(PathBuf, PathBuf)>,
}

impl Placed {
    /// Put the home back as it was before the module was placed.
    pub(crate) fn undo(self, layout: &crate::home::HomeLayout, lock: &HomeLock) {
        let _ = std::fs::remove_dir_all(&self.target);
        if let Some((old, aside)) = &self.aside {
            let _ = std::fs::rename(aside, old);
        }
        crate::snapshot::remove_unused(layout, lock);
    }

    /// Remove the replaced module (once the new one is in place and pinned).
    pub(crate) fn finish(self, layout: &crate::home::HomeLayout, lock: &HomeLock) {
        if let Some((_, aside)) = &self.aside {
            let removed = match std::fs::symlink_metadata(aside) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(aside),
                _ => std::fs::remove_file(aside),
            };
            if let Err(e) = removed {
                tracing::warn!(
                    "could not remove the replaced module at {}: {e}",
                    aside.display()
                );
            }
            // Its approved snapshot goes too, unless another pin names it.
            crate::snapshot::remove_unused(layout, lock);
        }
    }
}

/// What placing a prepared module does to `pins.json`.
#[derive(Debug)]
pub(crate) enum PinChange {
    /// Pin these bytes.
    Pin(Box<PinRecord>),
    /// Not approved (forced past findings): no pin, and the one of the
    /// module it replaced goes.
    Unpin(String),
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

    /// Install a local executable, `.wasm` component, module folder, or
    /// `.tar.gz` / `.zip` archive holding one, as `modules/<id>/`, and pin
    /// it; with `upgrade`, in place of the installed module of that id.
    ///
    /// Refused, with every finding and its remedy, when the module would be
    /// broken, refused or nonconforming ([`HostError::InstallRefused`]),
    /// unless `force`: then it is installed unpinned and the findings are in
    /// the report.
    pub async fn install(&self, request: InstallRequest) -> Result<InstallReport, HostError> {
        self.install_from(request, None).await
    }

    /// [`Host::install`], the pin recording `origin` as where the bytes came
    /// from instead of the source path (`install --mcp` installs a folder it
    /// staged, from the operator's server folder).
    pub(crate) async fn install_from(
        &self,
        request: InstallRequest,
        origin: Option<String>,
    ) -> Result<InstallReport, HostError> {
        // What a killed commit left under `modules/` is settled first
        // (`sync/leftovers.rs`), so the install sees the home as committed.
        self.sweep_commit_leftovers()?;
        let prepared = self.prepare_install(&request, origin).await?;
        // The version being replaced, for the report (read before any change).
        let replaced_version = match &prepared.installed {
            Some(_) => Some(self.module(&prepared.id).await.ok().and_then(|m| m.version)),
            None => None,
        };
        let id = prepared.id.clone();
        let findings = prepared.findings.clone();
        let pinned = prepared.conforms;
        self.commit_prepared(&prepared)?;
        // The staging folder goes before the report is made.
        drop(prepared);
        Ok(InstallReport {
            module: self.module(&id).await?,
            findings,
            pinned,
            replaced: replaced_version.map(|version| ReplacedModule { version }),
        })
    }

    /// Everything of an install that touches nothing outside its staging
    /// folder: read the source once (checking `--sha256`), copy or unpack
    /// it, describe it there confined, check it as the host would, digest
    /// its tree. Refused as `install` refuses (an installed id without
    /// `upgrade`, findings without `force`); nothing in `modules/`,
    /// `pins.json` or the snapshots changes.
    pub(crate) async fn prepare_install(
        &self,
        request: &InstallRequest,
        origin: Option<String>,
    ) -> Result<PreparedInstall, HostError> {
        let source = &request.source;
        let meta = std::fs::metadata(source).map_err(|e| HostError::io("read", source, e))?;
        if meta.is_dir() {
            if request.sha256.is_some() {
                return Err(HostError::Refused(format!(
                    "--sha256 checks one file, and {} is a folder; pack it (.tar.gz or .zip) to check its sha256, or leave --sha256 out (nothing was installed)",
                    source.display()
                )));
            }
        } else if !meta.is_file() {
            return Err(HostError::NotAModule {
                path: source.clone(),
                reason: "neither a regular file nor a folder".into(),
            });
        }
        if let Some(id) = &request.id {
            check_new_id(id)?;
        }

        let staging_root = self.layout().staging_dir();
        let staging = StagingFolder {
            path: staging_root.join(crate::request::new_request_id()),
            root: staging_root,
        };
        create_staging(&staging.path).map_err(|e| HostError::io("create", &staging.path, e))?;
        let received = match meta.is_file() {
            true => Some(receive(request, &staging.path)?),
            false => None,
        };
        self.stage(request, received.as_ref(), staging, origin)
            .await
    }

    /// Copy, unpack or copy the folder into `staging`, describe there, check
    /// it as the host would, digest its tree.
    async fn stage(
        &self,
        request: &InstallRequest,
        received: Option<&Received>,
        staging: StagingFolder,
        origin: Option<String>,
    ) -> Result<PreparedInstall, HostError> {
        let source = &request.source;
        let sha256 = received.map(|r| r.sha256.as_str());
        let nothing_installed =
            |e: &dyn std::fmt::Display| HostError::Refused(format!("{e}; nothing was installed"));
        let bare = ArchiveFormat::of_path(source).is_none() && received.is_some();
        let (folder, program) = match (ArchiveFormat::of_path(source), received) {
            (_, None) => {
                // A module folder, copied as it is.
                let name = source
                    .file_name()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| "module".into());
                let unpacked = staging.path.join("unpacked");
                install::copy_folder(source, &unpacked.join(&name))
                    .map_err(|e| nothing_installed(&e))?;
                let preferred = request.id.clone().unwrap_or_else(|| stem_of(&name));
                let located = install::locate_module(&unpacked, Some(&preferred))
                    .map_err(|e| nothing_installed(&e))?;
                (located.folder, located.program)
            }
            (Some(format), Some(received)) => {
                let unpacked = staging.path.join("unpacked");
                install::extract(&received.path, format, &unpacked, ArchiveLimits::default())
                    .map_err(|e| nothing_installed(&e))?;
                let located = install::locate_module(&unpacked, request.id.as_deref())
                    .map_err(|e| nothing_installed(&e))?;
                (located.folder, located.program)
            }
            (None, Some(received)) => {
                let folder = staging.path.join("module");
                std::fs::create_dir_all(&folder)
                    .map_err(|e| HostError::io("create", &folder, e))?;
                let stem = stem_of(source);
                let id = request.id.clone().unwrap_or(stem);
                let file_name = match Transport::of_path(source) {
                    Transport::Native => id,
                    Transport::Component => format!("{id}.wasm"),
                };
                let program = folder.join(file_name);
                std::fs::rename(&received.path, &program)
                    .map_err(|e| HostError::io("move into staging", &received.path, e))?;
                std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| HostError::io("make executable", &program, e))?;
                (folder, program)
            }
        };
        let id = request.id.clone().unwrap_or_else(|| stem_of(&program));
        check_new_id(&id)?;
        let installed = taken_path(self.layout(), &id);
        if let Some(path) = &installed
            && !request.upgrade
        {
            return Err(HostError::Refused(format!(
                "a module {id:?} is already installed at {}; to replace it with these bytes (its state is kept), run `modhost install {} --upgrade` (nothing was installed)",
                path.display(),
                source.display()
            )));
        }

        // Described where it stands, confined like any call. A module that
        // does not answer (or answers no descriptor) is a finding like any
        // other: refused, or with `force` installed unpinned, and broken.
        let described =
            discovery::describe(&program, self.config().limits.describe(), self.engines())
                .await
                .and_then(|value| Ok((discovery::parse_descriptor(value.clone())?, value)));
        let (descriptor, value, findings) = match described {
            Ok((descriptor, value)) => {
                if descriptor.id != id {
                    return Err(HostError::Refused(format!(
                        "{} describes itself as {:?}, not {id:?}; install it with --id {} (nothing was installed)",
                        source.display(),
                        descriptor.id,
                        descriptor.id
                    )));
                }
                // What the host would refuse at discovery or at a call,
                // found now: the conformance kit's static checks, knowledge
                // files read from what is being installed.
                let findings = install_findings(&descriptor, &value, &folder, bare);
                (Some(descriptor), Some(value), findings)
            }
            Err(error) => (
                None,
                None,
                vec![modconform::Finding::error(
                    "describe.failed",
                    format!(
                        "{} is not a working module: {}",
                        source.display(),
                        error.message
                    ),
                    format!(
                        "make it answer a describe request with one response line holding its descriptor; `modhost conformance {}` runs it and shows why it does not",
                        source.display()
                    ),
                )],
            ),
        };
        let conforms = descriptor.is_some() && !modconform::has_errors(&findings);
        if !conforms && !request.force {
            return Err(HostError::InstallRefused {
                path: source.clone(),
                findings,
            });
        }
        // The whole tree is what is approved; a link out of it is refused.
        let (_, digest) =
            module_tree::walk_and_digest(&folder).map_err(|e| nothing_installed(&e))?;
        let origin = format!(
            "{} ({})",
            origin
                .or_else(|| request.provenance.as_ref().map(|p| p.origin.source.clone()))
                .unwrap_or_else(|| std::path::absolute(source)
                    .unwrap_or_else(|_| source.clone())
                    .display()
                    .to_string()),
            match sha256 {
                Some(sha256) => format!("sha256 {sha256}"),
                None => format!("folder, tree digest {digest}"),
            }
        );
        Ok(PreparedInstall {
            id,
            folder,
            program,
            descriptor,
            value,
            findings,
            conforms,
            digest,
            origin,
            provenance: request.provenance.clone(),
            installed,
            _staging: staging,
        })
    }

    /// Move one prepared module into place and pin it, under the home's
    /// lock; any failure leaves the home as it was.
    fn commit_prepared(&self, prepared: &PreparedInstall) -> Result<(), HostError> {
        let nothing_installed =
            |e: &dyn std::fmt::Display| HostError::Refused(format!("{e}; nothing was installed"));
        let modules = self.layout().modules_dir();
        std::fs::create_dir_all(&modules).map_err(|e| HostError::io("create", &modules, e))?;
        let lock = HomeLock::acquire(self.home())?;
        let placed = self.place_prepared(prepared, &lock)?;
        // Installing is the operator approving these bytes: record where they
        // came from, their sha256, and pin them. A pin that cannot be written
        // undoes the install rather than leave an unpinned module behind. A
        // module installed with --force despite its findings is not approved:
        // it stays unpinned (and a pin of the module it replaced goes).
        let pinned = Pins::load_locked(self.home(), &lock).and_then(|mut pins| {
            match prepared.pin_change() {
                PinChange::Pin(record) => pins.pin(*record),
                PinChange::Unpin(id) => pins.unpin(&id).map(|_| ()),
            }
        });
        if let Err(e) = pinned {
            placed.undo(self.layout(), &lock);
            return Err(nothing_installed(&e));
        }
        placed.finish(self.layout(), &lock);
        drop(lock);
        self.seed_describe_cache(prepared);
        Ok(())
    }

    /// Move `prepared` into `modules/<id>/` under `lock` (the caller holds
    /// it until the pins are written): checked again that what occupies the
    /// id is what it was prepared against, its snapshot stored (when it is
    /// to be pinned), the module it replaces aside. On failure the home is
    /// as it was.
    pub(crate) fn place_prepared(
        &self,
        prepared: &PreparedInstall,
        lock: &HomeLock,
    ) -> Result<Placed, HostError> {
        let nothing_installed =
            |e: &dyn std::fmt::Display| HostError::Refused(format!("{e}; nothing was installed"));
        let id = &prepared.id;
        let folder = &prepared.folder;
        let target = self.layout().module_dir(id);
        let modules = self.layout().modules_dir();
        // Taken meanwhile by a parallel install, or replaced by a parallel
        // upgrade: checked again under the lock.
        let taken = taken_path(self.layout(), id);
        if taken.is_some() != prepared.installed.is_some() {
            return Err(HostError::ModuleExists {
                id: id.clone(),
                path: taken.unwrap_or_else(|| target.clone()),
            });
        }
        // What a pinned module runs; an unpinned one runs nothing yet.
        if prepared.conforms {
            crate::snapshot::ensure(self.layout(), folder, &prepared.digest)
                .map_err(|e| nothing_installed(&e))?;
        }
        // The operator's switch outlives the bytes: a disabled module stays
        // disabled when upgraded (the marker is not part of the tree digest).
        if let Some(old) = &taken
            && std::fs::symlink_metadata(old.join(DISABLED_MARKER)).is_ok()
        {
            let marker = folder.join(DISABLED_MARKER);
            std::fs::write(&marker, b"").map_err(|e| HostError::io("create", &marker, e))?;
        }
        // The module being replaced steps aside to a hidden name (discovery
        // skips dotfiles) and goes only once the new one is in place and
        // pinned; any failure before that puts it back.
        let aside = match &taken {
            Some(old) => {
                let aside = modules.join(format!(
                    ".{id}.replaced-{}",
                    crate::request::new_request_id()
                ));
                std::fs::rename(old, &aside)
                    .map_err(|e| HostError::io("move aside the installed module", old, e))?;
                Some((old.clone(), aside))
            }
            None => None,
        };
        // rename(2) onto an existing non-empty directory fails, so a racing
        // install of the same id cannot be overwritten.
        if let Err(e) = std::fs::rename(folder, &target) {
            if let Some((old, aside)) = &aside {
                let _ = std::fs::rename(aside, old);
            }
            crate::snapshot::remove_unused(self.layout(), lock);
            return Err(HostError::io("move the staged module to", &target, e));
        }
        Ok(Placed { target, aside })
    }

    /// Seed the describe cache so the first `list` does not run it again.
    pub(crate) fn seed_describe_cache(&self, prepared: &PreparedInstall) {
        let entry = prepared
            .program
            .strip_prefix(&prepared.folder)
            .unwrap_or(&prepared.program);
        if let Some(value) = &prepared.value {
            let cache = DescribeCache::load(self.layout());
            let _ = cache.store_result(
                &DescribeKey {
                    name: &prepared.id,
                    entry,
                    digest: &prepared.digest,
                },
                value,
            );
        }
    }

    /// Remove `id`; its state stays unless `purge`.
    pub async fn remove(&self, id: &str, purge: bool) -> Result<RemoveReport, HostError> {
        self.sweep_commit_leftovers()?;
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

impl PreparedInstall {
    /// What placing it does to `pins.json`.
    pub(crate) fn pin_change(&self) -> PinChange {
        match &self.descriptor {
            Some(descriptor) if self.conforms => {
                let mut record =
                    PinRecord::new(descriptor, &self.digest, Some(self.origin.clone()));
                record.provenance = self.provenance.clone();
                PinChange::Pin(Box::new(record))
            }
            _ => PinChange::Unpin(self.id.clone()),
        }
    }
}

/// The conformance kit's static checks of `descriptor`, its knowledge files
/// read from `folder` (what is being installed). A bare executable carries
/// no knowledge files, so one its descriptor names is missing, and the
/// remedy says how to install them with it.
fn install_findings(
    descriptor: &modproto::Descriptor,
    described: &serde_json::Value,
    folder: &Path,
    bare: bool,
) -> Vec<modconform::Finding> {
    // Typos (unknown keys) are read off the module's own JSON: the parsed
    // descriptor has already dropped them.
    let mut findings = modconform::check_unknown_keys(described);
    findings.extend(modconform::check_descriptor(descriptor, Some(folder)));
    if bare {
        for finding in &mut findings {
            if finding.id == "knowledge.missing" {
                finding.remedy = "a bare executable carries no knowledge files: install the module's folder (`modhost install DIR`) or an archive of it (.tar.gz or .zip) holding the files its descriptor names".into();
            }
        }
    }
    findings
}

/// A file source as the host received it: its one copy in staging, and the
/// sha256 of those bytes (checked against `--sha256` when given).
struct Received {
    path: PathBuf,
    sha256: String,
}

/// Copy the file `request.source` into `staging`, reading it once, and
/// check its sha256 before a single byte is unpacked or run. What is
/// unpacked, described and pinned is this copy, never the source again.
fn receive(request: &InstallRequest, staging: &Path) -> Result<Received, HostError> {
    let path = staging.join("received");
    let sha256 = install::receive(&request.source, &path, request.sha256.as_deref())
        .map_err(HostError::from)?;
    Ok(Received { path, sha256 })
}

/// Create one install's staging folder (and `staging/` when missing). A
/// parallel install removes `staging/` when it is empty, so it can vanish
/// between its creation and this folder's: then it is created again.
fn create_staging(dir: &Path) -> std::io::Result<()> {
    for _ in 0..8 {
        match std::fs::create_dir_all(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            other => return other,
        }
    }
    std::fs::create_dir_all(dir)
}

/// What already occupies the id `id` under `modules/`: its folder, or a
/// bare file named after it (a module is named by its folder or file).
pub(crate) fn taken_path(layout: &crate::home::HomeLayout, id: &str) -> Option<PathBuf> {
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
pub(crate) fn check_new_id(id: &str) -> Result<(), HostError> {
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

impl crate::Host {
    /// Pin `id` as it is installed now: its bytes, descriptor and contract.
    ///
    /// Refuses a module that is broken (it did not describe itself, its
    /// contract is refused, its id is claimed twice, ...): a pin is an
    /// approval of something that works, and pinning a broken module would
    /// make it silently callable the moment it describes itself.
    pub async fn pin(&self, id: &str) -> Result<PinOutcome, crate::HostError> {
        // The operator asked: a changed module is described from its new
        // files, which are what this pin approves.
        let module = self.module_for_review(id).await?;
        let refuse = |why: String| crate::HostError::Refused(format!("cannot pin {id}: {why}"));
        if module.status == crate::ModuleStatus::Broken {
            let (kind, message) = module
                .error
                .as_ref()
                .map(|e| (e.kind.as_str(), e.message.as_str()))
                .unwrap_or(("broken", "it is broken"));
            return Err(refuse(format!(
                "it is broken ({kind}): {message}; fix or reinstall it first, `modhost describe {id}` has the details"
            )));
        }
        let (Some(descriptor), Some(digest)) = (&module.descriptor, &module.digest) else {
            return Err(refuse("it did not describe itself".into()));
        };
        // The snapshot first: a pin is only written for bytes the store
        // holds, copied and verified against the digest just described.
        crate::snapshot::ensure(self.layout(), module.tree_root(), digest)
            .map_err(|e| refuse(e.to_string()))?;
        let lock = HomeLock::acquire(self.home()).map_err(PinsError::from)?;
        let mut pins = Pins::load_locked(self.home(), &lock)?;
        let before = pins.standing(descriptor, digest);
        // Where the bytes came from stays with the module across re-pins
        // (an operator's edit of its grants, say): `lock` and `server-json`
        // read it, and the tree digest says whether the bytes changed.
        let earlier = pins.get(id);
        let source = earlier.and_then(|r| r.source.clone());
        let provenance = earlier.and_then(|r| r.provenance.clone());
        let mut record = PinRecord::new(descriptor, digest, source);
        record.provenance = provenance;
        pins.pin(record.clone())?;
        // The snapshot of an earlier pin of this module may be unused now.
        crate::snapshot::remove_unused(self.layout(), &lock);
        Ok(PinOutcome {
            record,
            before: before.label(),
            change: match &before {
                PinStanding::Changed(change) => Some(change.to_string()),
                _ => None,
            },
        })
    }

    /// Remove the pin of `id` (installed or not). Returns whether there was one.
    pub fn unpin(&self, id: &str) -> Result<bool, crate::HostError> {
        let lock = HomeLock::acquire(self.home()).map_err(PinsError::from)?;
        let had = Pins::load_locked(self.home(), &lock)?.unpin(id)?;
        crate::snapshot::remove_unused(self.layout(), &lock);
        Ok(had)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostOptions;
    use crate::discovery::ModuleStatus;
    use modhost_test_support::modules::{describes, install, write_executable};

    fn sha256_hex(bytes: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[tokio::test]
    async fn disabling_a_bare_module_moves_it_into_its_folder_and_enabling_restores() {
        let dir = tempfile::tempdir().unwrap();
        let (_, counter) = install(dir.path(), "loose", true);
        // The describe counter is a file outside any grant.
        std::fs::write(dir.path().join("config.toml"), "confinement = \"off\"\n").unwrap();
        let host = Host::open_at(dir.path());
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

    /// The attack: a module writing the folder the operator installs from
    /// swaps the file once `--sha256` has read it (it watches the file with
    /// inotify, as the sandbox allows), so the host installs and pins other
    /// bytes under the checked digest. The host must read the source once:
    /// counted here by the kernel (inotify `IN_OPEN`), for a bare file and
    /// an archive, and what is installed has the digest checked.
    #[tokio::test]
    async fn a_file_source_is_read_once_so_the_bytes_checked_are_the_bytes_installed() {
        use rustix::fs::inotify;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let host = Host::open_at(&home);
        let (bare, _) = install(&dir.path().join("src"), "tool", true);
        let (packed, _) = install(&dir.path().join("src2"), "packed", true);
        let archive = dir.path().join("packed.tar.gz");
        {
            let file = std::fs::File::create(&archive).unwrap();
            let encoder = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            let mut builder = tar::Builder::new(encoder);
            builder
                .append_path_with_name(&packed, "packed/packed")
                .unwrap();
            builder.into_inner().unwrap().finish().unwrap();
        }
        for (source, installed) in [
            (&bare, "modules/tool/tool"),
            (&archive, "modules/packed/packed"),
        ] {
            let checked = sha256_hex(&std::fs::read(source).unwrap());
            let watch =
                inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
                    .unwrap();
            // Closes too: the kernel merges identical events in a row.
            let flags = inotify::WatchFlags::OPEN | inotify::WatchFlags::CLOSE_NOWRITE;
            inotify::add_watch(&watch, source.as_path(), flags).unwrap();
            host.install(InstallRequest {
                source: source.clone(),
                sha256: Some(checked.clone()),
                ..InstallRequest::default()
            })
            .await
            .unwrap();
            let mut buffer = [std::mem::MaybeUninit::uninit(); 4096];
            let mut events = inotify::Reader::new(&watch, &mut buffer);
            let mut opens = 0;
            while let Ok(event) = events.next() {
                opens += usize::from(event.events().contains(inotify::ReadFlags::OPEN));
            }
            assert_eq!(opens, 1, "{}: opened {opens} times", source.display());
            if source == &bare {
                let bytes = std::fs::read(home.join(installed)).unwrap();
                assert_eq!(sha256_hex(&bytes), checked);
            } else {
                assert!(home.join(installed).is_file());
            }
        }
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
                ..InstallRequest::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::Sha256Mismatch { .. }), "{err}");
        assert!(!home.join("modules/tool").exists());

        let good = sha256_hex(&std::fs::read(&source).unwrap());
        let module = host
            .install(InstallRequest {
                source: source.clone(),
                id: None,
                sha256: Some(good),
                ..InstallRequest::default()
            })
            .await
            .unwrap()
            .module;
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
                ..InstallRequest::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("--upgrade"), "{err}");

        let broken = dir.path().join("broken");
        write_executable(&broken, "#!/bin/sh\nexit 1\n");
        let err = host
            .install(InstallRequest {
                source: broken,
                id: None,
                sha256: None,
                ..InstallRequest::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::InstallRefused { .. }), "{err}");
        assert!(err.to_string().contains("describe.failed"), "{err}");
        assert!(!home.join("modules/broken").exists());
        assert!(
            !home.join("staging").exists(),
            "a failed install must leave no staging folder"
        );
    }

    #[tokio::test]
    async fn remove_keeps_state_unless_purged() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "a", false);
        install(dir.path(), "b", false);
        std::fs::create_dir_all(dir.path().join("state/a")).unwrap();
        std::fs::create_dir_all(dir.path().join("state/b")).unwrap();
        let host = Host::open_at(dir.path());
        let report = host.remove("a", false).await.unwrap();
        assert!(report.kept_state.is_some());
        assert!(dir.path().join("state/a").exists());
        host.remove("b", true).await.unwrap();
        assert!(!dir.path().join("state/b").exists());
        assert!(host.discover().await.is_empty());
    }
}
