//! Discovery: what is installed, and what each module says about itself.
//!
//! Installation is files on disk plus a successful `describe`; there is no
//! registry to drift out of sync with the executables. Under `modules/`:
//!
//! - `modules/<id>/` is a module with its own folder. Its executable is the
//!   file named `<id>` (or `<id>.wasm`), else the only executable (or `.wasm`)
//!   in the folder. `.disabled` in the folder disables it.
//! - `modules/<name>` (an executable or `.wasm` file) is a bare module.
//!   A bare module cannot be disabled in place; enable/disable first move it
//!   into its own folder (`crate::manage`).
//!
//! Design decisions:
//!
//! - **A broken module is data.** A module that crashes, hangs, answers
//!   garbage, describes something that does not parse, or claims an id other
//!   than its folder's is listed as [`ModuleStatus::Broken`] with the reason,
//!   and never hides the others.
//! - **Bounded and parallel.** Modules are described a few at a time
//!   (`describe_concurrency`), each with its own timeout, so one hung module
//!   costs one timeout, not one per module after it.
//! - **Cached by identity and content.** See `crate::describe_cache`: an
//!   unchanged module is neither hashed nor run.
//! - **Named by its folder.** A module's id is its folder's name (or the bare
//!   file's stem), never the id its descriptor claims; a descriptor claiming
//!   another id makes the module broken (`id_mismatch`).
//! - **What runs is the approved snapshot.** A module's digest covers its
//!   whole tree (`crate::module_tree`). Under `pins = "enforce"` and
//!   `"warn"`, a pinned module whose tree still has its pinned digest runs
//!   from its snapshot (`crate::snapshot`): [`InstalledModule::program`] is
//!   the snapshot's entry file, for describe and for every call, so nothing
//!   written into `modules/<id>/` after approval runs. A folder that changed
//!   since its pin:
//!   - under `enforce` is never run by discovery: it is described from the
//!     describe cache (the new bytes' result when the operator already
//!     reviewed them, else the approved one) or from the approved snapshot,
//!     and is `changed`, not invocable. Only the operator's explicit review
//!     ([`crate::Host::module_for_review`]: `modhost describe <id>`, `pin`)
//!     describes the new bytes, confined as always;
//!   - under `warn` runs from the folder, as before pins existed, with the
//!     host warning that it changed (the operator chose to be told, not to
//!     be stopped); a long-running host that discovered it unchanged keeps
//!     running its snapshot and warns on each call;
//!   - under `off` pins are not consulted and every module runs from its
//!     folder. An unpinned module also runs (describe only, under `enforce`)
//!     from its folder: there is no approved snapshot to run.
//! - **Disabled is still discovered** (and described), so `list` can show
//!   what there is to turn back on; it just contributes nothing invocable.
//! - **The host's findings stay apart** from the module's: `host_warnings`
//!   versus `warnings` (the descriptor's own).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use modproto::{Descriptor, ErrorKind, HostErrorKind, Request};
use serde::Serialize;
use serde_json::Value;

use crate::config::{Limits, PinsMode};
use crate::contract::{ContractReport, ContractStanding};
use crate::describe_cache::{self, DescribeCache, DescribeKey};
use crate::home::HomeLayout;
use crate::module_id::is_module_id;
use crate::module_tree::{self, TreeError, TreeState};
use crate::pins::{PinCovers, PinStanding, Pins, PinsError};
use crate::snapshot;
use modhost_runner::file_identity::{FileIdentity, Glance};
use modhost_runner::{self as runner, Call, RunError, Transport};

pub use crate::home::DISABLED_MARKER;
pub use crate::module_error::ModuleError;

/// A module's standing in `list`.
///
/// One value, in order of precedence: `broken` (including a contract the
/// host refuses), `disabled`, then, under `pins = "enforce"`, `changed` and
/// `unpinned`; else `enabled`. Only `enabled` is invocable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleStatus {
    Enabled,
    Disabled,
    Broken,
    /// Under `pins = "enforce"`: the operator never pinned it; listed and
    /// describable, not invocable.
    Unpinned,
    /// Under `pins = "enforce"`: its bytes or descriptor differ from its pin.
    Changed,
}

impl ModuleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleStatus::Enabled => "enabled",
            ModuleStatus::Disabled => "disabled",
            ModuleStatus::Broken => "broken",
            ModuleStatus::Unpinned => "unpinned",
            ModuleStatus::Changed => "changed",
        }
    }
}

/// One discovered module: where it is, what it says about itself
/// (`descriptor`) and its standing (`status`, with `error` when broken);
/// [`InstalledModule::summary`] says why, contract and pin included.
#[derive(Debug, Clone)]
pub struct InstalledModule {
    /// The folder name, or the bare file's stem (never the id the
    /// descriptor claims).
    pub id: String,
    /// The descriptor's version, when it described itself.
    pub version: Option<String>,
    /// The executable or component as installed, under `modules/` (for a
    /// folder without one: the folder).
    pub path: PathBuf,
    /// What runs: the entry file of the approved snapshot
    /// (`cache/snapshots/<digest>/...`) for a pinned, unchanged module, else
    /// [`Self::path`] (see the module docs for when).
    pub program: PathBuf,
    /// `modules/<id>/` when the module has its own folder; `None` when bare.
    pub folder: Option<PathBuf>,
    pub transport: Transport,
    pub status: ModuleStatus,
    /// Whether the `.disabled` marker is present (also for a broken module).
    pub disabled: bool,
    pub descriptor: Option<Arc<Descriptor>>,
    /// The tree digest (blake3, hex) of the module's files, when they could
    /// be read (`crate::module_tree`).
    pub digest: Option<String>,
    /// The tree's state when `digest` was taken (or vouched for by the
    /// describe cache): what [`InstalledModule::drift`]
    /// compares against.
    pub(crate) tree: Option<TreeState>,
    /// The identity of [`Self::program`] when it is a snapshot's file.
    pub(crate) program_identity: Option<FileIdentity>,
    /// What the module says about itself (the descriptor's `warnings`).
    pub warnings: Vec<String>,
    /// What the host found.
    pub host_warnings: Vec<String>,
    pub error: Option<ModuleError>,
    /// Which contract governs it (`unevaluated` without a descriptor).
    pub contract: ContractStanding,
    /// How it stands against `pins.json`; `None` when pins are off (or not
    /// yet consulted: see `apply_pins`).
    pub pin: Option<PinStanding>,
}

/// What was found, after discovery, to still digest to an approved digest:
/// by path and that digest.
type Reverified<T> = std::sync::Mutex<std::collections::HashMap<(PathBuf, String), T>>;

/// Tree states found (after discovery) to still digest to a module's
/// approved digest, by module root and digest: a folder touched or restored
/// under a long-running host costs one digest, not one per call.
fn reverified_states() -> &'static Reverified<TreeState> {
    static STATES: std::sync::OnceLock<Reverified<TreeState>> = std::sync::OnceLock::new();
    STATES.get_or_init(Default::default)
}

/// Snapshot entries whose identity changed after discovery but whose
/// snapshot was found (digested again) to still hold the approved tree, by
/// entry path and digest.
fn reverified_snapshots() -> &'static Reverified<FileIdentity> {
    static IDENTITIES: std::sync::OnceLock<Reverified<FileIdentity>> = std::sync::OnceLock::new();
    IDENTITIES.get_or_init(Default::default)
}

/// Walk and digest the tree at `root` again, its errors as I/O errors (the
/// per-call check reports them as "can no longer be read").
fn digest_tree(root: &Path) -> std::io::Result<(module_tree::Tree, String)> {
    module_tree::walk_and_digest(root).map_err(|e| match e {
        TreeError::Read { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    })
}

/// A module's standing and why, as data: what [`InstalledModule::summary`]
/// returns and one entry of `modhost list --json`. Field names are a public
/// contract (scripts and the integration tests read them); fields may be
/// added, so it is built only by the host.
///
/// It is the library's one view of the standing's parts that
/// [`ModuleStatus`] folds into one word: the contract (`contract`,
/// `contract_standing`) and the pin (`pin`, `pin_change`). The host's own
/// records behind them (its contract verdict, pin comparison, tree state)
/// stay private, so that they can change without breaking a user.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ModuleSummary {
    pub id: String,
    pub version: Option<String>,
    pub status: ModuleStatus,
    pub capabilities: Vec<String>,
    pub warnings: Vec<String>,
    pub host_warnings: Vec<String>,
    pub path: PathBuf,
    /// What its calls run: the approved snapshot's entry file for a pinned,
    /// unchanged module, else `path`.
    pub program: PathBuf,
    pub transport: Transport,
    /// The reason a broken module is broken.
    pub error: Option<String>,
    /// Its machine-readable kind.
    pub error_kind: Option<ErrorKind>,
    pub digest: Option<String>,
    /// `v1`, `v2`, `refused` or `unevaluated`.
    pub contract: &'static str,
    /// Why: requested and effective version, what the host supports, reason,
    /// remedy, and for contract 2 the no-weakening findings.
    pub contract_standing: ContractReport,
    /// `pinned`, `unpinned`, `changed` or `off`.
    pub pin: &'static str,
    /// For `changed`: what changed and the command that accepts it.
    pub pin_change: Option<String>,
}

/// What changed under a discovered module since it was discovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drift {
    /// Its own files (its folder, or the bare file) no longer digest to
    /// what was discovered.
    Tree,
    /// The snapshot its calls run no longer holds the approved files.
    Snapshot,
}

impl InstalledModule {
    /// What changed since discovery, if anything: its snapshot (one `stat`
    /// of the snapshot's entry while nothing changed) and its own tree (one
    /// `lstat` per file of the module's tree), a digest of either when
    /// something did. A module discovered once and called for a long time
    /// (the MCP server) checks this on every call: what runs is the
    /// snapshot whatever happens, and a folder that no longer holds the
    /// approved tree is reported (and refused under `enforce`) until it is
    /// restored. A module without a digest has nothing to keep.
    ///
    /// A changed identity is "look again", not "changed": a file touched,
    /// linked or restored byte for byte digests the same, and its new
    /// identity vouches for that digest from then on (once settled), so a
    /// long-running host neither refuses approved bytes nor digests them
    /// on every call.
    /// `glance`: the identities the call already took (the module's
    /// folder, for a long-running host), shared rather than taken again.
    pub(crate) fn drift(&self, glance: &Glance) -> std::io::Result<Option<Drift>> {
        let (Some(tree), Some(digest)) = (&self.tree, &self.digest) else {
            return Ok(None);
        };
        if !self.snapshot_still_holds(digest)? {
            return Ok(Some(Drift::Snapshot));
        }
        if tree.still_matches(glance) {
            return Ok(None);
        }
        let root = self.tree_root();
        let key = (root.to_path_buf(), digest.clone());
        if reverified_states()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .is_some_and(|state| state.still_matches(glance))
        {
            return Ok(None);
        }
        let (now, now_digest) = digest_tree(root)?;
        let holds = now_digest == *digest;
        // Touched or restored: the new state vouches for the same
        // digest from now on, so later calls are `lstat`s again.
        if holds && now.state.settled_at(SystemTime::now()) {
            reverified_states()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, now.state);
        }
        Ok((!holds).then_some(Drift::Tree))
    }

    /// Whether the snapshot this module runs (when it runs one) still holds
    /// the approved tree. Its entry's identity is the cheap side; when that
    /// changed (a hard link to it, a `chmod`, a restore from a backup: or
    /// new bytes), the snapshot folder is digested again.
    fn snapshot_still_holds(&self, digest: &str) -> std::io::Result<bool> {
        let Some(discovered) = self.program_identity else {
            return Ok(true);
        };
        let in_snapshot = |e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("its snapshot {}: {e}", self.program.display()),
            )
        };
        let now = FileIdentity::of_path(&self.program).map_err(in_snapshot)?;
        if now == discovered {
            return Ok(true);
        }
        let key = (self.program.clone(), digest.to_owned());
        if reverified_snapshots()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            == Some(&now)
        {
            return Ok(true);
        }
        // `cache/snapshots/<digest>/`: the folder the entry sits in (or below).
        let Some(folder) = self
            .program
            .ancestors()
            .find(|folder| folder.file_name() == Some(std::ffi::OsStr::new(digest)))
        else {
            return Ok(false);
        };
        let hashed_at = SystemTime::now();
        let (_, now_digest) = digest_tree(folder).map_err(in_snapshot)?;
        let holds = now_digest == digest
            && FileIdentity::of_path(&self.program).map_err(in_snapshot)? == now;
        if holds && now.settled_at(hashed_at) {
            reverified_snapshots()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, now);
        }
        Ok(holds)
    }

    /// The root of the module's tree: its folder, or the bare file.
    pub(crate) fn tree_root(&self) -> &Path {
        self.folder.as_deref().unwrap_or(&self.path)
    }

    /// Where its knowledge documents are read from: the folder of the
    /// snapshot it runs from (the approved documents), else its own folder;
    /// `None` for a bare executable, which has no folder of its own.
    pub fn knowledge_dir(&self) -> Option<&Path> {
        let folder = self.folder.as_deref()?;
        if self.program_identity.is_some() {
            self.program.parent()
        } else {
            Some(folder)
        }
    }

    /// Its standing and why, as data (see [`ModuleSummary`]).
    pub fn summary(&self) -> ModuleSummary {
        ModuleSummary {
            id: self.id.clone(),
            version: self.version.clone(),
            status: self.status,
            capabilities: self.capability_ids(),
            warnings: self.warnings.clone(),
            host_warnings: self.host_warnings.clone(),
            path: self.path.clone(),
            program: self.program.clone(),
            transport: self.transport,
            error: self.error.as_ref().map(|e| e.message.clone()),
            error_kind: self.error.as_ref().map(|e| e.kind.clone()),
            digest: self.digest.clone(),
            contract: self.contract.label(),
            contract_standing: self.contract.report(),
            pin: self.pin_label(),
            pin_change: match &self.pin {
                Some(standing @ PinStanding::Changed(_)) => standing.refusal(&self.id),
                _ => None,
            },
        }
    }

    /// `pinned`, `unpinned`, `changed` or `off`.
    pub fn pin_label(&self) -> &'static str {
        self.pin.as_ref().map_or("off", PinStanding::label)
    }

    /// The ids of its capabilities (empty when it did not describe itself).
    pub fn capability_ids(&self) -> Vec<String> {
        self.descriptor
            .as_ref()
            .map(|d| d.capabilities.iter().map(|c| c.id.clone()).collect())
            .unwrap_or_default()
    }

    /// Whether its capabilities may be invoked (enabled and described).
    pub fn is_invocable(&self) -> bool {
        self.status == ModuleStatus::Enabled && self.descriptor.is_some()
    }
}

/// Something under `modules/` that looks like a module, before describe.
#[derive(Debug)]
struct Candidate {
    /// Folder name, or the bare file's stem.
    name: String,
    executable: Option<PathBuf>,
    folder: Option<PathBuf>,
    disabled: bool,
    host_warnings: Vec<String>,
    error: Option<ModuleError>,
}

/// The entry of a pinned module whose files are gone: broken, kind
/// `missing`, with where it came from.
pub(crate) fn missing_module(
    layout: &HomeLayout,
    record: &crate::pins::PinRecord,
) -> InstalledModule {
    let folder = layout.module_dir(&record.module);
    let source = record
        .source
        .as_deref()
        .map(|s| format!(" (installed from {s})"))
        .unwrap_or_default();
    InstalledModule {
        id: record.module.clone(),
        version: Some(record.version.clone()),
        path: folder.clone(),
        program: folder.clone(),
        folder: None,
        transport: Transport::Native,
        status: ModuleStatus::Broken,
        disabled: false,
        descriptor: None,
        digest: Some(record.digest.clone()),
        tree: None,
        program_identity: None,
        warnings: Vec::new(),
        host_warnings: Vec::new(),
        contract: ContractStanding::Unevaluated,
        pin: Some(PinStanding::Pinned),
        error: Some(ModuleError {
            kind: HostErrorKind::Missing.into(),
            message: format!(
                "pinned{source} but its files are gone from {}; reinstall it, or `modhost remove {}` to forget it",
                folder.display(),
                record.module
            ),
        }),
    }
}

/// Consult `pins.json` for every discovered module, under `mode`.
///
/// Sets each module's [`InstalledModule::pin`] and, under `enforce`, turns an
/// `enabled` module that is unpinned or changed into `unpinned` / `changed`
/// (broken and disabled modules keep their status: the pin adds nothing a
/// caller could act on first). Under `warn` the module stays enabled and the
/// refusal becomes a host warning. A pinned module whose files are gone is
/// added as broken (kind `missing`).
///
/// A `pins.json` that cannot be read is never treated as empty (that would
/// unpin everything, or under `warn` hide it): every module counts as
/// unpinned and says why. [`crate::Host::open`] refuses such a file up front;
/// this covers one that breaks while a host is running.
pub(crate) fn apply_pins(layout: &HomeLayout, modules: &mut Vec<InstalledModule>, mode: PinsMode) {
    let pins = Pins::load(layout.root());
    if let Ok(pins) = &pins {
        for record in pins.records() {
            if !modules.iter().any(|m| m.id == record.module) {
                modules.push(missing_module(layout, record));
            }
        }
    }
    if mode == PinsMode::Off {
        for module in modules.iter_mut() {
            module.pin = None;
        }
        return;
    }
    for module in modules.iter_mut() {
        if module
            .error
            .as_ref()
            .is_some_and(|e| e.kind == HostErrorKind::Missing)
        {
            continue;
        }
        let standing = match &pins {
            Ok(pins) => pin_standing(pins, module),
            Err(error) => {
                module.host_warnings.push(unreadable_pins(error));
                PinStanding::Unpinned
            }
        };
        if let Some(refusal) = standing.refusal(&module.id)
            && module.status == ModuleStatus::Enabled
        {
            match mode {
                PinsMode::Enforce => {
                    module.status = match standing {
                        PinStanding::Changed(_) => ModuleStatus::Changed,
                        _ => ModuleStatus::Unpinned,
                    };
                }
                PinsMode::Warn => module
                    .host_warnings
                    .push(format!("{refusal} (invoked anyway: pins = \"warn\")")),
                PinsMode::Off => {}
            }
        }
        module.pin = Some(standing);
    }
}

/// How `module` stands against `pins`. Without a descriptor only the bytes
/// can be compared.
pub(crate) fn pin_standing(pins: &Pins, module: &InstalledModule) -> PinStanding {
    let digest = module.digest.as_deref().unwrap_or_default();
    match &module.descriptor {
        Some(descriptor) => pins.standing(descriptor, digest),
        None => match pins.get(&module.id) {
            None => PinStanding::Unpinned,
            Some(record) if record.digest == digest && record.covers == PinCovers::Tree => {
                PinStanding::Pinned
            }
            Some(record) => PinStanding::Changed(crate::pins::PinChange {
                bytes: record.digest != digest,
                entry_file_only: record.covers != PinCovers::Tree,
                ..Default::default()
            }),
        },
    }
}

fn unreadable_pins(error: &PinsError) -> String {
    format!("pins are unusable, so no module counts as pinned: {error}")
}

/// How discovery treats pins: the mode, and the one module (if any) the
/// operator asked to review, whose changed files may be described.
#[derive(Debug, Clone, Copy, Default)]
pub struct PinPolicy<'a> {
    pub mode: PinsMode,
    pub review: Option<&'a str>,
}

/// Find and describe every module under `layout`'s `modules/`.
///
/// Always the whole folder: whether an id is claimed twice can only be known
/// by looking at every module, and the cache makes looking cheap.
pub async fn discover(
    layout: &HomeLayout,
    limits: &Limits,
    engines: &runner::Engines,
    policy: PinPolicy<'_>,
) -> Vec<InstalledModule> {
    let candidates = scan(&layout.modules_dir());
    let mut cache = DescribeCache::load(layout);
    // An unusable pins.json approves nothing: every module runs (describe
    // only) from its folder, and `apply_pins` says why none is pinned.
    let pins = match policy.mode {
        PinsMode::Off => None,
        _ => Pins::load(layout.root()).ok(),
    };

    // Phase 1 (filesystem only): digest, snapshot and cached result of each
    // candidate.
    let mut prepared = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        prepared.push(prepare(
            candidate,
            &mut cache,
            layout,
            pins.as_ref(),
            policy,
        ));
    }

    // Phase 2: describe the cache misses, a few at a time.
    let semaphore = Arc::new(tokio::sync::Semaphore::new(
        limits.describe_concurrency.max(1),
    ));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, item) in prepared.iter().enumerate() {
        if item.result.is_some() || item.remembered.is_some() || item.candidate.error.is_some() {
            continue;
        }
        let Some(program) = item.program.clone() else {
            continue;
        };
        let semaphore = Arc::clone(&semaphore);
        let call_limits = limits.describe();
        let engines = engines.clone();
        tasks.spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            (index, describe(&program, call_limits, &engines).await)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, outcome)) => prepared[index].described = Some(outcome),
            Err(e) => tracing::error!("a describe task failed: {e}"),
        }
    }

    // Phase 3: parse, check, cache (failures too, for a while).
    for item in &prepared {
        if let (Some(Err(error)), Some(root)) = (&item.described, item.candidate.root()) {
            cache.remember_failure(&root, &error.kind, &error.message);
        }
    }
    let mut modules: Vec<InstalledModule> = prepared
        .into_iter()
        .map(|item| finish(item, &cache))
        .collect();
    check_duplicate_ids(&mut modules);
    let live: Vec<PathBuf> = modules
        .iter()
        .map(|m| m.tree_root().to_path_buf())
        .collect();
    cache.save(Some(&live));
    modules
}

/// Ask the executable at `path` to describe itself, uncached: the raw
/// `result` value, or why there is none.
pub async fn describe(
    path: &Path,
    limits: runner::CallLimits,
    engines: &runner::Engines,
) -> Result<Value, ModuleError> {
    let request = Request::new(1, modproto::METHOD_DESCRIBE, None);
    let line = serde_json::to_string(&request).unwrap_or_default();
    let call = Call {
        request_line: &line,
        limits,
        grants: &[],
        executables: &[],
        module_writes: &[],
        network: None,
        start_ahead: false,
        // A describe never gets a secret.
        secrets: &[],
    };
    let engines = engines.cold();
    match runner::run(&engines, Transport::of_path(path), path, &call, None).await {
        Ok(exchange) => match exchange.response.outcome {
            Ok(value) => Ok(value),
            Err(rpc) => Err(ModuleError {
                kind: HostErrorKind::DescribeFailed.into(),
                message: format!("describe was answered with an error: {rpc}"),
            }),
        },
        Err(run) => Err(run_error(&run)),
    }
}

fn run_error(err: &RunError) -> ModuleError {
    let mut message = format!("describe: {err}");
    let tail = err.stderr_tail().trim();
    if !tail.is_empty() {
        message.push_str(&format!("; stderr: {}", last_line(tail)));
    }
    ModuleError {
        kind: err.kind().into(),
        message,
    }
}

fn last_line(text: &str) -> &str {
    text.lines().next_back().unwrap_or(text)
}

/// Parse a describe result into a descriptor.
pub(crate) fn parse_descriptor(value: Value) -> Result<Descriptor, ModuleError> {
    serde_json::from_value(value).map_err(|e| ModuleError {
        kind: HostErrorKind::BadDescriptor.into(),
        message: format!("the descriptor does not parse: {e}"),
    })
}

struct Prepared {
    candidate: Candidate,
    digest: Option<String>,
    tree: Option<TreeState>,
    /// What describe (and later every call) runs.
    program: Option<PathBuf>,
    /// Whose describe result `result`/`described` is: the tree digest of
    /// what `program` belongs to.
    described_digest: Option<String>,
    /// From the cache.
    result: Option<Value>,
    /// A recent describe failure of the same tree, from the cache.
    remembered: Option<ModuleError>,
    /// From running describe.
    described: Option<Result<Value, ModuleError>>,
    /// Changed since its pin under `enforce`, and not run: what is shown is
    /// the approved module (or the operator's earlier review of the new one).
    withheld: bool,
}

impl Candidate {
    /// The root of the candidate's tree: its folder, or the bare file.
    fn root(&self) -> Option<PathBuf> {
        self.folder.clone().or_else(|| self.executable.clone())
    }

    /// The entry file's path inside its tree.
    fn entry(&self) -> PathBuf {
        let executable = self.executable.as_deref().unwrap_or(Path::new(""));
        match &self.folder {
            Some(folder) => executable
                .strip_prefix(folder)
                .unwrap_or(executable)
                .to_path_buf(),
            None => executable
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_default(),
        }
    }
}

fn prepare(
    mut candidate: Candidate,
    cache: &mut DescribeCache,
    layout: &HomeLayout,
    pins: Option<&Pins>,
    policy: PinPolicy<'_>,
) -> Prepared {
    let prepared = |candidate, digest, tree| Prepared {
        candidate,
        digest,
        tree,
        program: None,
        described_digest: None,
        result: None,
        remembered: None,
        described: None,
        withheld: false,
    };
    let (Some(executable), Some(root)) = (candidate.executable.clone(), candidate.root()) else {
        return prepared(candidate, None, None);
    };
    if candidate.error.is_some() {
        return prepared(candidate, None, None);
    }
    let tree = match module_tree::walk(&root) {
        Ok(tree) => tree,
        Err(e) => {
            candidate.error = Some(tree_error(&e));
            return prepared(candidate, None, None);
        }
    };
    let digest = match cache.indexed_digest(&root, &tree.state) {
        Some(digest) => digest.to_owned(),
        None => match module_tree::digest(&tree) {
            Ok(digest) => {
                cache.record_digest(&root, &tree.state, &digest);
                digest
            }
            Err(e) => {
                candidate.error = Some(tree_error(&e));
                return prepared(candidate, None, None);
            }
        },
    };
    let entry = candidate.entry();
    let state = tree.state;
    let approved = pins
        .and_then(|pins| pins.get(&candidate.name))
        .filter(|record| record.covers == PinCovers::Tree)
        .map(|record| record.digest.clone());
    let reviewed = policy.review == Some(candidate.name.as_str());
    let key = |digest: &str| {
        cache.result(&DescribeKey {
            name: &candidate.name,
            entry: &entry,
            digest,
        })
    };

    // Pinned and unchanged: run the approved snapshot.
    if approved.as_deref() == Some(digest.as_str()) {
        match snapshot::ensure(layout, &root, &digest) {
            Ok(dir) => {
                let program = dir.join(&entry);
                let result = key(&digest);
                return Prepared {
                    program: Some(program),
                    described_digest: Some(digest.clone()),
                    result,
                    ..prepared(candidate, Some(digest), Some(state))
                };
            }
            Err(e) => {
                candidate.error = Some(ModuleError {
                    kind: HostErrorKind::SnapshotFailed.into(),
                    message: format!(
                        "could not make the snapshot its calls run from: {e}; check that {} is writable",
                        layout.snapshots_dir().display()
                    ),
                });
                return prepared(candidate, Some(digest), Some(state));
            }
        }
    }

    // Changed since its pin under `enforce`: the new files never run here.
    if let Some(approved) = approved.filter(|_| policy.mode == PinsMode::Enforce && !reviewed) {
        let snapshot = snapshot::existing(layout, &approved).map(|dir| dir.join(&entry));
        let withheld = |candidate, result, program, described_digest| Prepared {
            result,
            program,
            described_digest,
            withheld: true,
            ..prepared(candidate, Some(digest.clone()), Some(state.clone()))
        };
        if let Some(result) = key(&digest) {
            return withheld(candidate, Some(result), None, None);
        }
        let result = key(&approved);
        return withheld(candidate, result, snapshot, Some(approved));
    }

    // Unpinned, changed under `warn`, reviewed, or pins off: the folder.
    let result = key(&digest);
    if result.is_some() {
        tracing::debug!("describe cache hit: {}", executable.display());
    }
    let remembered = match result {
        Some(_) => None,
        None => cache
            .remembered_failure(&root, &state, SystemTime::now())
            .map(|failure| remembered_error(failure, &executable)),
    };
    Prepared {
        program: Some(executable),
        described_digest: Some(digest.clone()),
        result,
        remembered,
        ..prepared(candidate, Some(digest), Some(state))
    }
}

fn tree_error(error: &TreeError) -> ModuleError {
    let kind = match error {
        TreeError::Read { .. } => HostErrorKind::Unreadable,
        TreeError::LinkOutside { .. } | TreeError::Special { .. } => HostErrorKind::UnsafeFile,
    };
    ModuleError {
        kind: kind.into(),
        message: error.to_string(),
    }
}

/// A remembered describe failure as the module's error, saying how to retry.
fn remembered_error(failure: &describe_cache::Failure, path: &Path) -> ModuleError {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let retry = describe_cache::FAILURE_TTL
        .as_secs()
        .saturating_sub(now.saturating_sub(failure.at));
    ModuleError {
        kind: failure.kind.clone(),
        message: format!(
            "{} (remembered from an earlier describe; it is tried again in {retry} s, or at once after `touch {}`)",
            failure.message,
            path.display()
        ),
    }
}

fn finish(item: Prepared, cache: &DescribeCache) -> InstalledModule {
    let Prepared {
        candidate,
        digest,
        tree,
        program,
        described_digest,
        result,
        remembered,
        described,
        withheld,
    } = item;
    let transport = candidate
        .executable
        .as_deref()
        .map(Transport::of_path)
        .unwrap_or(Transport::Native);
    let path = candidate
        .executable
        .clone()
        .or_else(|| candidate.folder.clone())
        .unwrap_or_default();
    // Only a snapshot's file is vouched for by its own identity; a folder
    // program is covered by the tree state.
    let entry = candidate.entry();
    let program_identity = program
        .as_deref()
        .filter(|p| Some(*p) != candidate.executable.as_deref() && !withheld)
        .and_then(|p| FileIdentity::of_path(p).ok());
    let mut module = InstalledModule {
        id: candidate.name.clone(),
        version: None,
        program: match (&program, withheld) {
            (Some(program), false) => program.clone(),
            _ => path.clone(),
        },
        path,
        folder: candidate.folder.clone(),
        transport,
        status: ModuleStatus::Broken,
        disabled: candidate.disabled,
        descriptor: None,
        digest: digest.clone(),
        tree,
        program_identity,
        warnings: Vec::new(),
        host_warnings: candidate.host_warnings,
        error: candidate.error,
        contract: ContractStanding::Unevaluated,
        pin: None,
    };
    if module.error.is_some() {
        return module;
    }
    let (value, fresh) = match (result, described) {
        (Some(value), _) => (value, false),
        (None, Some(Ok(value))) => (value, true),
        (None, Some(Err(error))) => {
            module.error = Some(error);
            return module;
        }
        (None, None) if withheld => {
            // Nothing approved left to describe it from, and its new files
            // are not run: changed, with nothing to show but that.
            module.status = ModuleStatus::Changed;
            module.host_warnings.push(format!(
                "its files changed since they were pinned and were not run; review them with `modhost describe {}`",
                module.id
            ));
            return module;
        }
        (None, None) => {
            module.error = Some(remembered.unwrap_or_else(|| ModuleError {
                kind: HostErrorKind::DescribeFailed.into(),
                message: "the module was not described".into(),
            }));
            return module;
        }
    };
    let descriptor = match parse_descriptor(value.clone()) {
        Ok(descriptor) => descriptor,
        Err(error) => {
            module.error = Some(error);
            return module;
        }
    };
    if fresh
        && let Some(digest) = &described_digest
        && let Err(e) = cache.store_result(
            &DescribeKey {
                name: &candidate.name,
                entry: &entry,
                digest,
            },
            &value,
        )
    {
        tracing::warn!(
            "could not cache the describe result of {}: {e}",
            module.path.display()
        );
    }
    if descriptor.id != candidate.name {
        let place = match &candidate.folder {
            Some(_) => format!("in the folder {:?}", candidate.name),
            None => format!("as the file {:?}", module.path.display().to_string()),
        };
        module.error = Some(ModuleError {
            kind: HostErrorKind::IdMismatch.into(),
            message: format!(
                "the module describes itself as {:?} but is installed {place}; a module is named by its folder: rename it to modules/{} or reinstall it",
                descriptor.id, descriptor.id
            ),
        });
    } else if !is_module_id(&descriptor.id) {
        module.error = Some(ModuleError {
            kind: HostErrorKind::BadDescriptor.into(),
            message: format!(
                "{:?} is not a valid module id (lowercase letters, digits, '-' and '_', starting with a letter)",
                descriptor.id
            ),
        });
    }
    module.version = Some(descriptor.version.clone());
    module.warnings = descriptor.warnings.clone();
    let descriptor = Arc::new(descriptor);
    // The contract is decided before anything could register a capability:
    // a refusal makes the module broken, with its own error kind.
    module.contract = crate::contract::assess(Arc::clone(&descriptor));
    module.descriptor = Some(descriptor);
    if module.error.is_none() {
        module.error = module.contract.refusal();
    }
    if module.error.is_none() {
        module.status = if module.disabled {
            ModuleStatus::Disabled
        } else if withheld {
            ModuleStatus::Changed
        } else {
            ModuleStatus::Enabled
        };
    }
    module
}

/// Two modules claiming one id are both broken: which one a call would reach
/// must never depend on directory order.
fn check_duplicate_ids(modules: &mut [InstalledModule]) {
    let paths_of = |id: &str, modules: &[InstalledModule]| -> Vec<String> {
        modules
            .iter()
            .filter(|m| m.id == id && m.descriptor.is_some())
            .map(|m| m.path.display().to_string())
            .collect()
    };
    let duplicates: Vec<(usize, Vec<String>)> = modules
        .iter()
        .enumerate()
        .filter(|(_, m)| m.descriptor.is_some())
        .map(|(i, m)| (i, paths_of(&m.id, modules)))
        .filter(|(_, paths)| paths.len() > 1)
        .collect();
    for (index, paths) in duplicates {
        let module = &mut modules[index];
        module.status = ModuleStatus::Broken;
        module.error = Some(ModuleError {
            kind: HostErrorKind::DuplicateId.into(),
            message: format!(
                "the id {:?} is claimed by several modules ({}); remove all but one",
                module.id,
                paths.join(", ")
            ),
        });
    }
}

/// List the candidates under `modules_dir`, sorted by name.
fn scan(modules_dir: &Path) -> Vec<Candidate> {
    let Ok(entries) = std::fs::read_dir(modules_dir) else {
        return Vec::new();
    };
    let mut names: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .filter(|(name, _)| !name.starts_with('.'))
        .collect();
    names.sort();
    let mut candidates = Vec::new();
    for (name, path) in names {
        // Follow symlinks: linking a freshly built module in is a normal
        // development setup.
        let Ok(meta) = std::fs::metadata(&path) else {
            tracing::debug!("skipping {}: dangling or unreadable", path.display());
            continue;
        };
        if meta.is_dir() {
            candidates.push(scan_folder(name, path));
        } else if is_module_file(&path, &meta) {
            let stem = name.strip_suffix(".wasm").unwrap_or(&name).to_owned();
            candidates.push(Candidate {
                name: stem,
                executable: Some(path),
                folder: None,
                disabled: false,
                host_warnings: Vec::new(),
                error: None,
            });
        } else {
            tracing::debug!(
                "skipping {}: not an executable or component",
                path.display()
            );
        }
    }
    candidates
}

/// The file names a module folder `id` runs, in order of preference: the
/// native `<id>` before the component `<id>.wasm`. Install picks its entry
/// by the same order, so what it describes and checks is what later runs.
pub(crate) fn entry_names(id: &str) -> [String; 2] {
    [id.to_owned(), format!("{id}.wasm")]
}

fn scan_folder(name: String, folder: PathBuf) -> Candidate {
    let mut host_warnings = Vec::new();
    let disabled = match std::fs::symlink_metadata(folder.join(DISABLED_MARKER)) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            // Refusing a module because a marker could not be checked would
            // be a silent capability loss; say so instead.
            host_warnings.push(format!(
                "could not check {}: {e}; treating the module as enabled",
                folder.join(DISABLED_MARKER).display()
            ));
            false
        }
    };
    let preferred = entry_names(&name).map(|entry| folder.join(entry));
    let (executable, error) = match std::fs::read_dir(&folder) {
        Ok(entries) => {
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .filter(|p| std::fs::metadata(p).is_ok_and(|m| is_module_file(p, &m)))
                .collect();
            found.sort();
            if let Some(p) = preferred.iter().find(|p| found.contains(p)) {
                (Some(p.clone()), None)
            } else if found.len() == 1 {
                (found.pop(), None)
            } else if found.is_empty() {
                (
                    None,
                    Some(ModuleError {
                        kind: HostErrorKind::NoExecutable.into(),
                        message: format!(
                            "{} holds no executable or .wasm component; reinstall the module or remove the folder",
                            folder.display()
                        ),
                    }),
                )
            } else {
                let names: Vec<String> = found
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect();
                (
                    None,
                    Some(ModuleError {
                        kind: HostErrorKind::AmbiguousExecutable.into(),
                        message: format!(
                            "{} holds several executables ({}); name the module's executable {name:?}",
                            folder.display(),
                            names.join(", ")
                        ),
                    }),
                )
            }
        }
        Err(e) => {
            host_warnings.push(format!(
                "could not read the module folder {}: {e}; treating the module as enabled",
                folder.display()
            ));
            match preferred
                .iter()
                .find(|p| std::fs::metadata(p).is_ok_and(|m| is_module_file(p, &m)))
            {
                Some(p) => (Some(p.clone()), None),
                None => (
                    None,
                    Some(ModuleError {
                        kind: HostErrorKind::NoExecutable.into(),
                        message: format!(
                            "{} cannot be listed and has no file named {name:?}: {e}",
                            folder.display()
                        ),
                    }),
                ),
            }
        }
    };
    Candidate {
        name,
        executable,
        folder: Some(folder),
        disabled,
        host_warnings,
        error,
    }
}

/// An executable regular file, or a `.wasm` component. Documentation and
/// data files beside a module are never mistaken for it.
fn is_module_file(path: &Path, meta: &std::fs::Metadata) -> bool {
    if !meta.is_file() {
        return false;
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("wasm") => true,
        Some("md" | "txt" | "json" | "toml" | "yaml" | "yml" | "sha256" | "disabled") => false,
        _ => meta.permissions().mode() & 0o111 != 0,
    }
}

/// The few paths whose identity changes with every operator change that
/// can change what discovery finds: `config.toml` and `pins.json` are
/// replaced atomically, `install` and `remove` rename entries of `modules/`,
/// `enable` and `disable` create or delete `.disabled` in a module's folder.
/// A long-running host follows them (`tools::live`), and a host reuses its
/// last discovery while they are unchanged (`discovery_memo`). Discovery
/// follows symbolic links in `modules/`, and a link's target can appear,
/// vanish or change without `modules/` changing, so every link there is
/// watched too (its `stat` follows it; a dangling one has no identity until
/// its target appears).
pub(crate) fn watched_paths(layout: &HomeLayout, discovered: &[InstalledModule]) -> Vec<PathBuf> {
    let modules = layout.modules_dir();
    let links = std::fs::read_dir(&modules)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_symlink()))
        .map(|entry| entry.path());
    let mut paths = vec![
        layout.config_path(),
        layout.managed_config_path(),
        layout.pins_path(),
        modules.clone(),
    ];
    paths.extend(links);
    paths.extend(discovered.iter().filter_map(|m| m.folder.clone()));
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_exec(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn module_ids() {
        assert!(is_module_id("files"));
        assert!(is_module_id("my-mod_2"));
        assert!(!is_module_id("Files"));
        assert!(!is_module_id("2files"));
        assert!(!is_module_id("a.b"));
        assert!(!is_module_id(""));
    }

    #[test]
    fn scan_finds_folder_and_bare_modules_and_skips_docs() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path();
        write_exec(&modules.join("files/files"), "#!/bin/sh\n");
        std::fs::write(modules.join("files/README.md"), "doc").unwrap();
        write_exec(&modules.join("bare"), "#!/bin/sh\n");
        std::fs::write(modules.join("notes.txt"), "x").unwrap();
        std::fs::write(modules.join("plain"), "not executable").unwrap();
        write_exec(&modules.join(".hidden"), "#!/bin/sh\n");
        std::fs::write(modules.join("comp.wasm"), b"\0asm").unwrap();
        write_exec(&modules.join("off/off"), "#!/bin/sh\n");
        std::fs::write(modules.join("off/.disabled"), "").unwrap();

        let candidates = scan(modules);
        let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["bare", "comp", "files", "off"]);
        let files = candidates.iter().find(|c| c.name == "files").unwrap();
        assert_eq!(
            files.executable.as_deref(),
            Some(modules.join("files/files").as_path())
        );
        assert!(!files.disabled);
        assert!(
            candidates
                .iter()
                .find(|c| c.name == "off")
                .unwrap()
                .disabled
        );
        assert!(
            candidates
                .iter()
                .find(|c| c.name == "bare")
                .unwrap()
                .folder
                .is_none()
        );
    }

    #[test]
    fn folder_with_two_executables_and_no_preferred_one_is_ambiguous() {
        let dir = tempfile::tempdir().unwrap();
        write_exec(&dir.path().join("m/a"), "#!/bin/sh\n");
        write_exec(&dir.path().join("m/b"), "#!/bin/sh\n");
        let candidates = scan(dir.path());
        assert_eq!(
            candidates[0].error.as_ref().unwrap().kind,
            "ambiguous_executable"
        );
    }

    #[test]
    fn empty_folder_has_no_executable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("gone")).unwrap();
        let candidates = scan(dir.path());
        assert_eq!(candidates[0].error.as_ref().unwrap().kind, "no_executable");
    }
}

#[cfg(test)]
mod discover_tests {
    use super::*;
    use modhost_test_support::modules::{describes, install, write_executable};

    fn engines(layout: &HomeLayout) -> runner::Engines {
        runner::Engines::new(
            layout.component_cache_dir(),
            runner::DEFAULT_MEMORY_LIMIT_BYTES,
        )
    }

    fn limits() -> Limits {
        Limits {
            describe_timeout_ms: 1000,
            // The describe counter is a file outside any grant.
            confinement: modhost_sandbox::ConfinementMode::Off,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn unchanged_module_is_not_described_again_and_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let (path, counter) = install(dir.path(), "alpha", false);

        let first = discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        assert_eq!(
            first[0].status,
            ModuleStatus::Enabled,
            "{:?}",
            first[0].error
        );
        assert_eq!(first[0].version.as_deref(), Some("1.2.3"));
        assert_eq!(describes(&counter), 1);

        let second = discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        assert_eq!(second[0].status, ModuleStatus::Enabled);
        assert_eq!(
            describes(&counter),
            1,
            "a cache hit must not run the module"
        );

        // New bytes: a miss, described again.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("# changed\n");
        write_executable(&path, &text);
        discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        assert_eq!(describes(&counter), 2);
    }

    #[tokio::test]
    async fn broken_modules_are_listed_beside_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        install(dir.path(), "good", false);
        let modules_dir = dir.path().join("modules");
        write_executable(
            &modules_dir.join("crash"),
            "#!/bin/sh\necho dying >&2\nexit 7\n",
        );
        write_executable(
            &modules_dir.join("hang"),
            "#!/bin/sh\nread line\nsleep 30\n",
        );
        write_executable(
            &modules_dir.join("garbage"),
            "#!/bin/sh\nread line\necho hello\n",
        );
        write_executable(
            &modules_dir.join("shapeless"),
            "#!/bin/sh\nread line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"name\":\"x\"}}'\n",
        );
        install(dir.path(), "other", false);
        std::fs::rename(modules_dir.join("other"), modules_dir.join("renamed")).unwrap();

        let modules = discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        let kind = |id: &str| {
            let m = modules
                .iter()
                .find(|m| m.id == id)
                .unwrap_or_else(|| panic!("{id} not listed"));
            m.error.as_ref().map(|e| e.kind.to_string())
        };
        assert_eq!(kind("good"), None);
        assert_eq!(kind("crash").as_deref(), Some("crashed"));
        assert_eq!(kind("hang").as_deref(), Some("timeout"));
        assert_eq!(kind("garbage").as_deref(), Some("bad_response"));
        assert_eq!(kind("shapeless").as_deref(), Some("bad_descriptor"));
        // The folder says "renamed", the module says "other": it is listed
        // by its folder.
        assert_eq!(kind("renamed").as_deref(), Some("id_mismatch"));
        let crash = modules.iter().find(|m| m.id == "crash").unwrap();
        assert!(crash.error.as_ref().unwrap().message.contains("dying"));
    }

    #[tokio::test]
    async fn a_module_that_hangs_on_describe_costs_one_timeout_not_one_per_discovery() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        let counter = dir.path().join("hang.describes");
        let hang = dir.path().join("modules").join("hang");
        write_executable(
            &hang,
            &format!(
                "#!/bin/sh\necho x >> '{}'\nread line\nsleep 30\n",
                counter.display()
            ),
        );
        // Only a file older than the racy window is vouched for by its identity.
        std::thread::sleep(
            modhost_runner::file_identity::RACY + std::time::Duration::from_millis(50),
        );
        let limits = Limits {
            describe_timeout_ms: 200,
            ..limits()
        };

        let first = discover(&layout, &limits, &engines(&layout), PinPolicy::default()).await;
        assert_eq!(first[0].error.as_ref().unwrap().kind, "timeout");
        assert_eq!(describes(&counter), 1);

        let second = discover(&layout, &limits, &engines(&layout), PinPolicy::default()).await;
        let error = second[0].error.as_ref().unwrap();
        assert_eq!(error.kind, "timeout", "the same failure");
        assert!(error.message.contains("remembered"), "{}", error.message);
        assert!(error.message.contains("touch"), "{}", error.message);
        assert_eq!(describes(&counter), 1, "not run again");

        // Touched: described again at once.
        std::fs::File::options()
            .write(true)
            .open(&hang)
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
        discover(&layout, &limits, &engines(&layout), PinPolicy::default()).await;
        assert_eq!(describes(&counter), 2);
    }

    #[tokio::test]
    async fn disabled_module_is_listed_but_not_invocable() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        install(dir.path(), "sleepy", false);
        std::fs::write(dir.path().join("modules/sleepy/.disabled"), "").unwrap();
        let modules = discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        assert_eq!(modules[0].status, ModuleStatus::Disabled);
        assert_eq!(modules[0].capability_ids(), ["sleepy.run"]);
        assert!(!modules[0].is_invocable());
    }

    #[tokio::test]
    async fn a_copy_claiming_another_id_is_named_by_its_file_and_breaks_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        install(dir.path(), "twin", false);
        // A bare copy under another file name claims the same id.
        let modules_dir = dir.path().join("modules");
        let text = std::fs::read_to_string(modules_dir.join("twin/twin")).unwrap();
        write_executable(&modules_dir.join("twin-copy"), &text);
        let modules = discover(&layout, &limits(), &engines(&layout), PinPolicy::default()).await;
        let ids: Vec<&str> = modules.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["twin", "twin-copy"], "named by folder and file");
        assert_eq!(modules[0].status, ModuleStatus::Enabled);
        assert_eq!(modules[1].error.as_ref().unwrap().kind, "id_mismatch");
    }
}
