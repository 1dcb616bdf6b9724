//! What a sync would change: the lockfile compared with the home as it is,
//! reading only (`pins.json`, `modules/`, `config.sync.toml`, local
//! sources); no describe, no fetch, nothing written.
//!
//! A module counts as unchanged when its pin records the very bytes the
//! lockfile names (the file's sha256, the OCI manifest digest, for a local
//! folder its tree digest), the lockfile's `tree` and `signer` (when given)
//! match the pin, and its installed files still have the pinned tree
//! digest. Anything else is installed again: a second sync of the same file
//! is a plan of no changes.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::discovery::DISABLED_MARKER;
use crate::host::{Host, HostError};
use crate::lockfile::{LockedModule, LockedSource, Lockfile};
use crate::managed_config::ManagedConfig;
use crate::module_id::is_module_id;
use crate::pins::{PinRecord, Pins};

/// What `sync` does, module by module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncPlan {
    /// The lockfile it converges to.
    pub lockfile: PathBuf,
    /// One step per module of the lockfile (in its order), then removals.
    pub steps: Vec<PlanStep>,
    /// How `config.sync.toml` changes, when it does.
    pub config: Option<ConfigChange>,
    /// Installed modules the lockfile does not name, kept (without `prune`).
    pub kept: Vec<String>,
    /// Modules a killed commit left aside under `modules/` (their names),
    /// which the sync settles before it plans (`sync/leftovers.rs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<String>,
}

/// One module's step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    pub id: String,
    pub action: StepAction,
    /// The source as the lockfile names it (for a removal, empty).
    pub source: String,
    /// Why this step, in a few words.
    pub reason: String,
    /// Whether the module is enabled after the sync.
    pub enabled: bool,
    /// For a local source: the digest its bytes have now, which the
    /// install must see again (`sha256` of a file, `tree` of a folder).
    #[serde(skip)]
    pub(crate) local: Option<LocalDigest>,
}

/// The digest of a local source read at planning time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LocalDigest {
    File { sha256: String },
    Folder { tree: String },
}

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAction {
    Install,
    Upgrade,
    Enable,
    Disable,
    Remove,
    Unchanged,
}

impl StepAction {
    pub fn as_str(self) -> &'static str {
        match self {
            StepAction::Install => "install",
            StepAction::Upgrade => "upgrade",
            StepAction::Enable => "enable",
            StepAction::Disable => "disable",
            StepAction::Remove => "remove",
            StepAction::Unchanged => "unchanged",
        }
    }

    /// Whether the step fetches and installs bytes.
    pub fn installs(self) -> bool {
        matches!(self, StepAction::Install | StepAction::Upgrade)
    }
}

/// How `config.sync.toml` changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigChange {
    /// The file.
    pub path: PathBuf,
    /// The source root names it holds afterwards.
    pub source_roots: Vec<String>,
    /// How many approval rules it holds afterwards.
    pub approval_rules: usize,
    /// Each source root it holds afterwards with its path and the module
    /// whose entry brings it (`transcripts = /srv/sessions (sessions)`):
    /// what a dry run must show before a fleet file grants a folder.
    pub roots: Vec<String>,
    /// Each approval rule it holds afterwards, with its decision
    /// (`sessions: allow, effect = writes`): an `allow` turns the default's
    /// question into no question, and the operator sees it before it does.
    pub rules: Vec<String>,
}

impl SyncPlan {
    /// Whether the sync changes nothing.
    pub fn is_noop(&self) -> bool {
        self.config.is_none()
            && self.leftovers.is_empty()
            && self
                .steps
                .iter()
                .all(|step| step.action == StepAction::Unchanged)
    }

    /// How many steps change something.
    pub fn changes(&self) -> usize {
        self.steps
            .iter()
            .filter(|step| step.action != StepAction::Unchanged)
            .count()
            + usize::from(self.config.is_some())
            + self.leftovers.len()
    }
}

/// Compare `lockfile` with the home of `host`.
pub(crate) fn compute(
    host: &Host,
    lockfile: &Lockfile,
    prune: bool,
) -> Result<SyncPlan, HostError> {
    let layout = host.layout();
    let pins = Pins::load(host.home())?;
    let mut steps = Vec::new();
    for entry in &lockfile.modules {
        steps.push(step_for(host, &pins, entry)?);
    }
    let named: BTreeSet<&str> = lockfile.modules.iter().map(|m| m.id.as_str()).collect();
    let mut kept = Vec::new();
    for id in installed_ids(&layout.modules_dir()) {
        if named.contains(id.as_str()) {
            continue;
        }
        if prune {
            steps.push(PlanStep {
                id,
                action: StepAction::Remove,
                source: String::new(),
                reason: "not in the lockfile (--prune); its state is kept".into(),
                enabled: false,
                local: None,
            });
        } else {
            kept.push(id);
        }
    }
    let path = layout.managed_config_path();
    let current = ManagedConfig::read(&path)
        .map_err(HostError::Refused)?
        .unwrap_or_default();
    let wanted = lockfile.managed_config();
    let config = (current != wanted).then(|| ConfigChange {
        path,
        source_roots: wanted
            .modules
            .values()
            .flat_map(|m| m.source_roots.keys().cloned())
            .collect(),
        approval_rules: wanted.modules.values().map(|m| m.approval.len()).sum(),
        roots: wanted
            .modules
            .iter()
            .flat_map(|(id, m)| {
                m.source_roots
                    .iter()
                    .map(move |(name, path)| format!("{name} = {} ({id})", path.display()))
            })
            .collect(),
        rules: wanted
            .modules
            .iter()
            .flat_map(|(id, m)| m.approval.iter().map(move |rule| rule_summary(id, rule)))
            .collect(),
    });
    let leftovers = crate::sync::leftovers::find(&layout.modules_dir())
        .into_iter()
        .filter_map(|leftover| {
            Some(format!(
                "modules/{}",
                leftover.path.file_name()?.to_string_lossy()
            ))
        })
        .collect();
    Ok(SyncPlan {
        lockfile: lockfile.path.clone(),
        steps,
        config,
        kept,
        leftovers,
    })
}

/// `module: decision, matchers` of a managed rule (`every capability`
/// when it names none).
fn rule_summary(module: &str, rule: &crate::managed_config::ModuleRule) -> String {
    let mut matchers = Vec::new();
    if let Some(capability) = &rule.capability {
        matchers.push(format!("capability = {capability}"));
    }
    if let Some(effect) = rule.effect {
        let name = serde_json::to_value(effect)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        matchers.push(format!("effect = {name}"));
    }
    for (key, value) in [
        ("principal", &rule.principal),
        ("scope", &rule.scope),
        ("without_scope", &rule.without_scope),
    ] {
        if let Some(value) = value {
            matchers.push(format!("{key} = {value}"));
        }
    }
    if matchers.is_empty() {
        matchers.push("every capability".into());
    }
    format!(
        "{module}: {}, {}",
        rule.decision.as_str(),
        matchers.join(", ")
    )
}

/// The ids of what is installed under `modules/` (folders, bare files,
/// `<id>.wasm`), sorted; hidden names (a replaced module aside) skipped.
pub(crate) fn installed_ids(modules: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(modules)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".wasm").unwrap_or(&name).to_owned();
            is_module_id(&id).then_some(id)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The step for one entry of the lockfile.
fn step_for(host: &Host, pins: &Pins, entry: &LockedModule) -> Result<PlanStep, HostError> {
    let local = match &entry.source {
        LockedSource::Local(path) => Some(local_digest(entry, path)?),
        _ => None,
    };
    let installed = crate::manage::taken_path(host.layout(), &entry.id);
    let step = |action: StepAction, reason: String| PlanStep {
        id: entry.id.clone(),
        action,
        source: entry.source_text.clone(),
        reason,
        enabled: entry.enabled,
        local: local.clone(),
    };
    let Some(installed) = installed else {
        return Ok(step(StepAction::Install, "not installed".into()));
    };
    let Some(pin) = pins.get(&entry.id) else {
        return Ok(step(
            StepAction::Upgrade,
            "installed but not pinned: installed again from the lockfile".into(),
        ));
    };
    if let Some(why) = differs(pin, entry, local.as_ref()) {
        return Ok(step(StepAction::Upgrade, why));
    }
    match crate::module_tree::walk_and_digest(&installed) {
        Ok((_, digest)) if digest == pin.digest => {}
        _ => {
            return Ok(step(
                StepAction::Upgrade,
                "its files changed since they were pinned: installed again".into(),
            ));
        }
    }
    let disabled = std::fs::symlink_metadata(installed.join(DISABLED_MARKER)).is_ok();
    Ok(match (disabled, entry.enabled) {
        (true, true) => step(
            StepAction::Enable,
            "disabled here, enabled in the lockfile".into(),
        ),
        (false, false) => step(
            StepAction::Disable,
            "enabled here, disabled in the lockfile".into(),
        ),
        _ => step(
            StepAction::Unchanged,
            "the pinned bytes are the lockfile's".into(),
        ),
    })
}

/// Why the pinned module is not what the entry names; `None` when it is.
fn differs(pin: &PinRecord, entry: &LockedModule, local: Option<&LocalDigest>) -> Option<String> {
    let short = |hex: &str| hex.chars().take(12).collect::<String>();
    let provenance = pin.provenance.as_ref();
    let bytes = match (&entry.source, local) {
        (LockedSource::Https(_), _) => {
            let wanted = entry.sha256.as_deref().unwrap_or_default();
            match provenance.map(|p| p.sha256.as_str()) {
                Some(have) if have == wanted => None,
                Some(have) => Some(format!("sha256 {} → {}", short(have), short(wanted))),
                None => Some("installed from elsewhere".into()),
            }
        }
        (LockedSource::Oci { digest, .. }, _) => {
            match provenance.and_then(|p| p.origin.oci_digest.as_deref()) {
                Some(have) if have == digest => None,
                Some(have) => Some(format!("digest {} → {}", short(have), short(digest))),
                None => Some("installed from elsewhere".into()),
            }
        }
        (LockedSource::Local(_), Some(LocalDigest::File { sha256 })) => {
            match pinned_file_sha256(pin) {
                Some(have) if have == *sha256 => None,
                Some(have) => Some(format!("sha256 {} → {}", short(&have), short(sha256))),
                None => Some("installed from elsewhere".into()),
            }
        }
        (LockedSource::Local(_), Some(LocalDigest::Folder { tree })) => {
            (pin.digest != *tree).then(|| format!("tree {} → {}", short(&pin.digest), short(tree)))
        }
        (LockedSource::Local(_), None) => Some("installed from elsewhere".into()),
    };
    if let Some(bytes) = bytes {
        return Some(format!("its pinned bytes are not the lockfile's ({bytes})"));
    }
    if let Some(tree) = &entry.tree
        && *tree != pin.digest
    {
        return Some(format!(
            "its pinned tree is not the lockfile's (tree {} → {})",
            short(&pin.digest),
            short(tree)
        ));
    }
    // A signature the lockfile names is checked when the bytes are fetched:
    // a pin that shows none was installed without it, and is fetched again
    // so that the signature is verified.
    if entry.signature.is_some() && provenance.and_then(|p| p.signature.as_ref()).is_none() {
        return Some("the lockfile names a signature, and its pin shows none verified".into());
    }
    if let Some(signer) = &entry.signer {
        let verified = provenance.and_then(|p| p.signature.as_ref());
        if !entry.names_the_signer(verified) {
            return Some(format!("its pin does not show the signer {signer}"));
        }
    }
    None
}

/// The sha256 of the file a pin's bytes were installed from, as recorded:
/// the provenance, else the `(sha256 …)` of its source.
pub(crate) fn pinned_file_sha256(pin: &PinRecord) -> Option<String> {
    if let Some(provenance) = &pin.provenance {
        return Some(provenance.sha256.clone());
    }
    let (_, detail) = pin.source.as_deref()?.rsplit_once(" (")?;
    let hex = detail.strip_prefix("sha256 ")?.strip_suffix(')')?;
    Some(hex.to_owned())
}

/// The digest a local source has now: the file's sha256 (which must be the
/// lockfile's when it names one), or a folder's tree digest.
fn local_digest(entry: &LockedModule, path: &Path) -> Result<LocalDigest, HostError> {
    let refuse = |why: String| {
        HostError::Refused(format!(
            "module {:?} (line {}): {why}; nothing was changed",
            entry.id, entry.line
        ))
    };
    let meta = std::fs::metadata(path)
        .map_err(|e| refuse(format!("cannot read its source {}: {e}", path.display())))?;
    if meta.is_dir() {
        if entry.sha256.is_some() {
            return Err(refuse(format!(
                "sha256 checks one file, and {} is a folder: pin a folder with `tree` (what `modhost lock` writes)",
                path.display()
            )));
        }
        let (_, tree) = crate::module_tree::walk_and_digest(path)
            .map_err(|e| refuse(format!("{}: {e}", path.display())))?;
        return Ok(LocalDigest::Folder { tree });
    }
    // A device or pipe never ends (`/dev/zero`) or never starts (a FIFO no
    // one writes): the plan would hang reading it, and install refuses it.
    if !meta.is_file() {
        return Err(refuse(format!(
            "its source {} is neither a regular file nor a folder",
            path.display()
        )));
    }
    let sha256 = file_sha256(path)
        .map_err(|e| refuse(format!("cannot read its source {}: {e}", path.display())))?;
    if let Some(wanted) = &entry.sha256
        && *wanted != sha256
    {
        return Err(refuse(format!(
            "sha256 mismatch for {}: the lockfile says {wanted}, the file has {sha256}",
            path.display()
        )));
    }
    Ok(LocalDigest::File { sha256 })
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
