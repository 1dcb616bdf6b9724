//! Carrying out a sync plan, all or nothing.
//!
//! 1. **Prepare, touching nothing the host runs:** every module to install
//!    is fetched ([`Host::fetch_source`]; a local path is read directly),
//!    checked against the lockfile (digest, tree, signer), unpacked,
//!    described confined and checked as `install` checks it, each in a
//!    staging folder of its own ([`Host::prepare_install`]); the
//!    configuration the sync would leave is loaded once to prove it loads.
//!    The first failure ends the sync here: staging is removed, the home is
//!    byte for byte as it was.
//! 2. **Commit under the home's lock:** each prepared module is renamed into
//!    `modules/` (the one it replaces aside), `.disabled` markers set,
//!    pruned modules moved aside, `config.sync.toml` written, and then
//!    `pins.json` written once with every change: that write is the commit.
//!    A failure at any step before it undoes the earlier steps in reverse.
//!    Only after the commit are replaced and pruned modules deleted.
//!
//! A process killed during the prepare phase leaves only staging folders;
//! killed during the commit (renames, milliseconds), a module may stand in
//! place with its new bytes and its old pin, which the host refuses to run
//! as changed until the next sync, which converges it; and the modules it
//! had moved aside (`.<id>.replaced-…`, `.<id>.removed-…`) stay there until
//! the next sync, install or remove settles them (`sync/leftovers.rs`: put
//! back when its id stands empty and its pin approves exactly it, else
//! deleted).

use std::path::{Path, PathBuf};

use crate::discovery::DISABLED_MARKER;
use crate::fetch_source::{FetchRequest, FetchedSource};
use crate::home_lock::HomeLock;
use crate::host::{Host, HostError};
use crate::lockfile::{LockedModule, LockedSource, Lockfile};
use crate::manage::{InstallRequest, PinChange, Placed, PreparedInstall, taken_path};
use crate::pins::{PinRecord, Pins};
use crate::sync::options::{SyncOptions, SyncProgress};
use crate::sync::plan::{LocalDigest, PlanStep, StepAction, SyncPlan};
use modhost_runner::atomic_file::write_bytes_atomically;

/// Carry out `plan` (computed from `lockfile` for this home).
pub(crate) async fn apply(
    host: &Host,
    lockfile: &Lockfile,
    plan: &SyncPlan,
    options: &SyncOptions,
    progress: &dyn SyncProgress,
) -> Result<(), HostError> {
    let mut prepared = Vec::new();
    for step in plan.steps.iter().filter(|step| step.action.installs()) {
        let Some(entry) = lockfile.modules.iter().find(|m| m.id == step.id) else {
            continue;
        };
        let one = prepare_one(host, lockfile, entry, step, options, progress)
            .await
            .map_err(|e| entry_error(lockfile, entry, &e))?;
        prepared.push(one);
    }
    if plan.config.is_some() {
        check_config_loads(host, lockfile)?;
    }
    progress.committing();
    commit(host, lockfile, plan, &prepared).map_err(|e| {
        HostError::Refused(format!(
            "the sync could not be committed: {e}; every change was undone and the home is as it was"
        ))
    })?;
    for one in &prepared {
        host.seed_describe_cache(one);
    }
    Ok(())
}

/// Fetch (or read) one module and prepare its install.
async fn prepare_one(
    host: &Host,
    lockfile: &Lockfile,
    entry: &LockedModule,
    step: &PlanStep,
    options: &SyncOptions,
    progress: &dyn SyncProgress,
) -> Result<PreparedInstall, HostError> {
    let id = &entry.id;
    // The entry's signature (an https source's only): read as
    // `install --signature` reads one, and recorded with the pin.
    let signature = lockfile.signature_location(entry);
    let fetch = |source: String| FetchRequest {
        source,
        sha256: entry.sha256.clone(),
        signature: signature.clone(),
        allow_unsigned: options.allow_unsigned,
    };
    let mut request = InstallRequest {
        id: Some(id.clone()),
        upgrade: true,
        ..InstallRequest::default()
    };
    // Held until the bytes are in staging (the fetched file lives in it).
    let mut fetched: Option<FetchedSource> = None;
    let origin = match &entry.source {
        LockedSource::Local(path) => {
            request.source = path.clone();
            if let Some(LocalDigest::File { sha256 }) = &step.local {
                // The bytes read again must be the ones planned with.
                request.sha256 = Some(sha256.clone());
            }
            None
        }
        LockedSource::Https(url) => {
            progress.module(id, "fetching");
            fetched = Some(
                host.fetch_source(&fetch(url.clone()), progress.download())
                    .await?,
            );
            Some(url.clone())
        }
        LockedSource::Oci { reference, digest } => {
            progress.module(id, "fetching");
            // The digest is what is fetched; a tag beside it is a label.
            let pinned = format!("{}@{digest}", without_tag(reference));
            let mut request = fetch(pinned.clone());
            request.sha256 = None;
            fetched = Some(host.fetch_source(&request, progress.download()).await?);
            Some(pinned)
        }
    };
    if let Some(fetched) = &fetched {
        request.source = fetched.file.clone();
        request.provenance = Some(fetched.provenance.clone());
    }
    progress.module(id, "checking");
    let prepared = host.prepare_install(&request, origin).await?;
    drop(fetched);
    if let Some(LocalDigest::Folder { tree }) = &step.local
        && prepared.digest != *tree
    {
        return Err(HostError::Refused(format!(
            "its folder changed while it was read (tree digest {tree} when planned, {} when staged)",
            prepared.digest
        )));
    }
    if let Some(tree) = &entry.tree
        && prepared.digest != *tree
    {
        return Err(HostError::Refused(format!(
            "its module tree digest is {}, and the lockfile says tree = {tree:?}: these are other bytes than the lockfile's",
            prepared.digest
        )));
    }
    if let Some(signer) = &entry.signer {
        let verified = request
            .provenance
            .as_ref()
            .and_then(|p| p.signature.as_ref());
        match verified {
            Some(_) if entry.names_the_signer(verified) => {}
            Some(verified) => {
                return Err(HostError::Refused(format!(
                    "it is signed by {}{}, and the lockfile says signer = {signer:?}{}",
                    verified.signer,
                    verified
                        .issuer
                        .as_deref()
                        .map(|i| format!(" (issuer {i})"))
                        .unwrap_or_default(),
                    entry
                        .issuer
                        .as_deref()
                        .map(|i| format!(", issuer = {i:?}"))
                        .unwrap_or_default(),
                )));
            }
            None => {
                return Err(HostError::Refused(format!(
                    "the lockfile says signer = {signer:?}, and no signature was verified for it (a signature policy in [signatures] checks one; a local path carries none)"
                )));
            }
        }
    }
    progress.module(id, "staged");
    Ok(prepared)
}

/// `oci://registry/repository` without a `:tag` on its last segment.
fn without_tag(reference: &str) -> &str {
    let last = reference.rfind('/').map_or(0, |slash| slash + 1);
    match reference[last..].rfind(':') {
        Some(colon) => &reference[..last + colon],
        None => reference,
    }
}

/// An entry's failure, naming the file, line and module.
fn entry_error(lockfile: &Lockfile, entry: &LockedModule, error: &HostError) -> HostError {
    let message = error.to_string();
    let message = message
        .trim_end_matches(" (nothing was installed)")
        .trim_end_matches("; nothing was installed")
        .trim_end_matches("; nothing was changed");
    HostError::Refused(format!(
        "{}:{}: module {:?}: {message}; nothing was changed (the sync is all or nothing)",
        lockfile.path.display(),
        entry.line,
        entry.id
    ))
}

/// Load the configuration this sync would leave (the operator's
/// `config.toml` with the lockfile's `config.sync.toml`) from copies in
/// staging: a root the two name differently stops the sync here, not every
/// later command.
fn check_config_loads(host: &Host, lockfile: &Lockfile) -> Result<(), HostError> {
    let layout = host.layout();
    let staging = layout
        .staging_dir()
        .join(format!("sync-config-{}", crate::request::new_request_id()));
    std::fs::create_dir_all(&staging).map_err(|e| HostError::io("create", &staging, e))?;
    let config = staging.join("config.toml");
    let result = (|| {
        match std::fs::read(layout.config_path()) {
            Ok(bytes) => {
                std::fs::write(&config, bytes).map_err(|e| HostError::io("write", &config, e))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(HostError::io("read", &layout.config_path(), e)),
        }
        let managed = lockfile.managed_config();
        let managed_path = staging.join(crate::home::MANAGED_CONFIG_FILE);
        std::fs::write(&managed_path, managed.render(&lockfile.path))
            .map_err(|e| HostError::io("write", &managed_path, e))?;
        crate::config::Config::load(&config).map(|_| ()).map_err(|e| {
            HostError::Refused(format!(
                "the lockfile's source roots or approval rules do not fit this home's config.toml: {e}; nothing was changed"
            ))
        })
    })();
    let _ = std::fs::remove_dir_all(&staging);
    let _ = std::fs::remove_dir(layout.staging_dir());
    result
}

/// One change made under the lock, and how to take it back.
enum Undo {
    /// A prepared module moved into place.
    Placed(Placed),
    /// A `.disabled` marker created (`existed: false`) or removed.
    Marker { path: PathBuf, existed: bool },
    /// A pruned module moved aside.
    Removed { from: PathBuf, aside: PathBuf },
    /// `config.sync.toml` and what it held before (`None`: no file).
    Managed { path: PathBuf, old: Option<Vec<u8>> },
}

impl Undo {
    fn undo(self, host: &Host, lock: &HomeLock) {
        match self {
            Undo::Placed(placed) => placed.undo(host.layout(), lock),
            Undo::Marker {
                path,
                existed: true,
            } => {
                let _ = std::fs::write(&path, b"");
            }
            Undo::Marker {
                path,
                existed: false,
            } => {
                let _ = std::fs::remove_file(&path);
            }
            Undo::Removed { from, aside } => {
                let _ = std::fs::rename(&aside, &from);
            }
            Undo::Managed { path, old } => {
                let _ = match old {
                    Some(bytes) => write_bytes_atomically(&path, &bytes),
                    None => std::fs::remove_file(&path),
                };
            }
        }
    }

    fn finish(self, host: &Host, lock: &HomeLock) {
        match self {
            Undo::Placed(placed) => placed.finish(host.layout(), lock),
            Undo::Removed { aside, .. } => {
                let removed = match std::fs::symlink_metadata(&aside) {
                    Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&aside),
                    _ => std::fs::remove_file(&aside),
                };
                if let Err(e) = removed {
                    tracing::warn!(
                        "could not remove the pruned module at {}: {e}",
                        aside.display()
                    );
                }
            }
            Undo::Marker { .. } | Undo::Managed { .. } => {}
        }
    }
}

/// Every change under one hold of the home's lock, `pins.json` last.
fn commit(
    host: &Host,
    lockfile: &Lockfile,
    plan: &SyncPlan,
    prepared: &[PreparedInstall],
) -> Result<(), HostError> {
    let modules = host.layout().modules_dir();
    std::fs::create_dir_all(&modules).map_err(|e| HostError::io("create", &modules, e))?;
    let lock = HomeLock::acquire(host.home())?;
    let mut undo = Vec::new();
    let result = change_everything(host, lockfile, plan, prepared, &lock, &mut undo).and_then(
        |(records, unpinned)| {
            let mut pins = Pins::load_locked(host.home(), &lock)?;
            pins.change_all(records, &unpinned)?;
            Ok(())
        },
    );
    match result {
        Err(e) => {
            for change in undo.into_iter().rev() {
                change.undo(host, &lock);
            }
            Err(e)
        }
        Ok(()) => {
            for change in undo {
                change.finish(host, &lock);
            }
            crate::snapshot::remove_unused(host.layout(), &lock);
            Ok(())
        }
    }
}

/// Everything but the pins; returns the pin changes to write.
fn change_everything(
    host: &Host,
    lockfile: &Lockfile,
    plan: &SyncPlan,
    prepared: &[PreparedInstall],
    lock: &HomeLock,
    undo: &mut Vec<Undo>,
) -> Result<(Vec<PinRecord>, Vec<String>), HostError> {
    let layout = host.layout();
    let mut records = Vec::new();
    let mut unpinned = Vec::new();
    for one in prepared {
        let placed = host.place_prepared(one, lock)?;
        undo.push(Undo::Placed(placed));
        match one.pin_change() {
            PinChange::Pin(record) => records.push(*record),
            PinChange::Unpin(id) => unpinned.push(id),
        }
    }
    for step in &plan.steps {
        if step.action == StepAction::Remove {
            let Some(from) = taken_path(layout, &step.id) else {
                continue;
            };
            let aside = layout.modules_dir().join(format!(
                ".{}.removed-{}",
                step.id,
                crate::request::new_request_id()
            ));
            std::fs::rename(&from, &aside)
                .map_err(|e| HostError::io("move aside the pruned module", &from, e))?;
            undo.push(Undo::Removed { from, aside });
            unpinned.push(step.id.clone());
            continue;
        }
        set_enabled(&layout.module_dir(&step.id), step, undo)?;
    }
    if plan.config.is_some() {
        let path = layout.managed_config_path();
        let old = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(HostError::io("read", &path, e)),
        };
        let wanted = lockfile.managed_config();
        let written = match wanted.is_empty() {
            true => std::fs::remove_file(&path).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }),
            false => write_bytes_atomically(&path, wanted.render(&lockfile.path).as_bytes()),
        };
        written.map_err(|e| HostError::io("write", &path, e))?;
        undo.push(Undo::Managed { path, old });
    }
    Ok((records, unpinned))
}

/// Give the module in `folder` the step's enabled state.
fn set_enabled(folder: &Path, step: &PlanStep, undo: &mut Vec<Undo>) -> Result<(), HostError> {
    if !folder.is_dir() {
        if step.enabled {
            return Ok(());
        }
        return Err(HostError::Refused(format!(
            "module {} is a bare file under modules/ and cannot carry a .disabled marker; run `modhost disable {}` once (it moves the module into its folder) and sync again",
            step.id, step.id
        )));
    }
    let marker: PathBuf = folder.join(DISABLED_MARKER);
    let existed = std::fs::symlink_metadata(&marker).is_ok();
    // A freshly placed folder goes as a whole on undo; only a marker of a
    // module left in place needs taking back.
    let record = !step.action.installs();
    if existed && step.enabled {
        std::fs::remove_file(&marker).map_err(|e| HostError::io("remove", &marker, e))?;
    } else if !existed && !step.enabled {
        std::fs::write(&marker, b"").map_err(|e| HostError::io("create", &marker, e))?;
    } else {
        return Ok(());
    }
    if record {
        undo.push(Undo::Marker {
            path: marker,
            existed,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::options::Quiet;
    use modhost_test_support::modules::install;
    use std::collections::BTreeMap;

    /// Every path under `root` with its contents.
    fn state(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    out.insert(path.clone(), b"<dir>".to_vec());
                    stack.push(path);
                } else {
                    out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        out
    }

    /// The attack: the commit fails after some modules were placed (a
    /// parallel install took an id; `pins.json` cannot be written). Every
    /// earlier change of that commit must be undone: the upgraded module's
    /// old bytes back, no new module, no marker, no managed config.
    #[tokio::test]
    async fn a_failure_during_the_commit_undoes_every_earlier_change() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), "confinement = \"off\"\n").unwrap();
        let host = Host::open_at(&home);
        let (a, _) = install(&dir.path().join("src"), "a", true);
        let (b, _) = install(&dir.path().join("src"), "b", true);
        host.install(InstallRequest {
            source: a.clone(),
            ..InstallRequest::default()
        })
        .await
        .unwrap();
        // Other bytes of `a` (an upgrade), and `b` new and disabled.
        let mut bytes = std::fs::read(&a).unwrap();
        bytes.extend_from_slice(b"\n# v2\n");
        std::fs::write(&a, bytes).unwrap();
        let text = format!(
            "version = 1\n[[module]]\nid = \"a\"\nsource = {:?}\nsource_roots = {{ data = \"/srv/data\" }}\n[[module]]\nid = \"b\"\nsource = {:?}\nenabled = false\n",
            a.display().to_string(),
            b.display().to_string()
        );
        let lockfile = Lockfile::parse(&text, &dir.path().join("modhost.toml")).unwrap();
        let plan = crate::sync::plan::compute(&host, &lockfile, false).unwrap();
        assert!(plan.config.is_some());

        for sabotage in ["pins.json", "modules/b"] {
            let mut prepared = Vec::new();
            for step in plan.steps.iter().filter(|s| s.action.installs()) {
                let entry = lockfile.modules.iter().find(|m| m.id == step.id).unwrap();
                prepared.push(
                    prepare_one(
                        &host,
                        &lockfile,
                        entry,
                        step,
                        &SyncOptions::default(),
                        &Quiet,
                    )
                    .await
                    .unwrap(),
                );
            }
            assert_eq!(prepared.len(), 2, "{plan:?}");
            let before = state(&home.join("modules"));
            let pins_before = std::fs::read(home.join("pins.json")).unwrap();
            let in_the_way = home.join(sabotage);
            let saved = home.join("saved");
            if sabotage == "pins.json" {
                std::fs::rename(&in_the_way, &saved).unwrap();
            }
            std::fs::create_dir_all(&in_the_way).unwrap();
            let err = commit(&host, &lockfile, &plan, &prepared).unwrap_err();
            std::fs::remove_dir(&in_the_way).unwrap();
            if sabotage == "pins.json" {
                std::fs::rename(&saved, &in_the_way).unwrap();
            }
            assert_eq!(before, state(&home.join("modules")), "{sabotage}: {err}");
            assert_eq!(pins_before, std::fs::read(home.join("pins.json")).unwrap());
            assert!(!home.join("config.sync.toml").exists(), "{sabotage}");
        }
        // Unsabotaged, the same plan commits.
        apply(&host, &lockfile, &plan, &SyncOptions::default(), &Quiet)
            .await
            .unwrap();
        assert!(home.join("modules/b/.disabled").exists());
        assert!(home.join("config.sync.toml").exists());
        assert!(
            crate::sync::plan::compute(&host, &lockfile, false)
                .unwrap()
                .is_noop()
        );
    }

    /// `config.sync.toml` joins `config.toml`: its roots and its rules (for
    /// its module only); a root both name differently is refused naming
    /// both, never resolved by picking one.
    #[test]
    fn the_managed_file_joins_the_operators_config_and_a_clash_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            "[source_roots]\nmine = \"/srv/mine\"\n[[approval.rules]]\neffect = \"network\"\ndecision = \"deny\"\n",
        )
        .unwrap();
        let managed = dir.path().join(crate::home::MANAGED_CONFIG_FILE);
        std::fs::write(
            &managed,
            "[modules.sessions]\nsource_roots = { transcripts = \"/srv/sessions\", mine = \"/srv/mine\" }\n[[modules.sessions.approval]]\neffect = \"writes\"\ndecision = \"ask\"\n",
        )
        .unwrap();
        let loaded = crate::config::Config::load(&config).unwrap();
        assert_eq!(loaded.source_roots.len(), 2);
        assert_eq!(loaded.approval.rules.len(), 2);
        assert_eq!(loaded.approval.rules[1].module.as_deref(), Some("sessions"));

        std::fs::write(
            &managed,
            "[modules.sessions]\nsource_roots = { mine = \"/srv/theirs\" }\n",
        )
        .unwrap();
        let err = crate::config::Config::load(&config)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/srv/theirs") && err.contains("/srv/mine") && err.contains("config.toml"),
            "{err}"
        );
        std::fs::write(&managed, "[modules.sessions]\nsource_root = {}\n").unwrap();
        let err = crate::config::Config::load(&config)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("config.sync.toml") && err.contains("source_root"),
            "{err}"
        );
    }

    #[test]
    fn a_tag_is_dropped_and_a_registry_port_kept() {
        assert_eq!(
            without_tag("oci://r.example/a/b:1.2"),
            "oci://r.example/a/b"
        );
        assert_eq!(
            without_tag("oci://r.example:5000/a/b"),
            "oci://r.example:5000/a/b"
        );
        assert_eq!(
            without_tag("oci://r.example:5000/a/b:latest"),
            "oci://r.example:5000/a/b"
        );
    }
}
