//! Invoking one capability: the host's main job.
//!
//! In order, and nothing is spawned before step 4:
//!
//! 1. find the module; it must be enabled, described, its contract
//!    accepted ([`crate::contract`]: the version pin, and for contract 2 the
//!    no-weakening verdict), and, under `pins = "enforce"`, pinned with
//!    unchanged bytes and descriptor ([`crate::pins`]);
//! 2. place the caller's arguments (`crate::request`) and validate `input`
//!    against `input_schema`, listing every violation;
//! 3. decide the grants for this call ([`crate::grants`]): exactly the roots
//!    and binaries the capability names in its effects; a source root that
//!    does not resolve is left out and becomes a host warning;
//! 4. open the call's egress when its capability declares network and the
//!    operator left it some (`crate::network_grant`, `crate::call_network`;
//!    on a connection in lockdown, narrowed further: `crate::lockdown`),
//!    and run the one call over the module's transport
//!    ([`modhost_runner::run`]); the hosts the module contacted and those
//!    refused come back with the outcome (and, when the call fails, in its
//!    diagnosis). The call's secrets are read just before (`crate::secrets`: refused,
//!    `secret_unavailable`, when its capability declares one the operator
//!    did not grant or that has no value), and everything the module says
//!    is masked with their values as the run ends, before step 5 looks at
//!    it (`crate::redact`; live progress on its way);
//! 5. check the answer: a module error becomes [`InvokeError::Module`] with
//!    the module's kind and remedy, unless its kind is one only the host
//!    decides (`approval_required`, `unpinned`, `timeout`, ...): that answer
//!    is not valid, [`InvokeError::ClaimedHostKind`] (`bad_response`), so no
//!    caller reads the module's words as the host's decision; a result must parse, its `output` must
//!    validate against `output_schema` when declared (else `invalid_output`,
//!    and the output is not passed on), and each artifact must lie inside a
//!    granted root (else dropped with a host warning).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use modproto::contract::{self, ContractDecision};
use modproto::{
    Approval, ErrorCode, ErrorKind, HostErrorKind, HostOnlyKind, InvokeParams, InvokeResult,
    ModuleErrorKind, Notification, RpcError,
};
use serde::Serialize;

use crate::artifacts::{CheckedArtifact, check_artifacts};
use crate::call_workspace::CallWorkspace;
use crate::contract::ContractStanding;
use crate::discovery::{Drift, InstalledModule, ModuleStatus};
use crate::host::{Host, HostError};
use crate::pins::PinsMode;
use crate::request::{new_request_id, place_arguments};
use crate::validate::SchemaFailure;
use modhost_runner::file_identity::{FileIdentity, Glance};
use modhost_runner::{self as runner, Call, CallLimits, NotificationSink, RunError};

/// One call, as a caller asks for it.
#[derive(Debug, Clone, Default)]
pub struct InvokeRequest {
    /// Module id.
    pub module: String,
    /// Capability id (`files.search`); a short form (`search`) is accepted
    /// when `<module>.<short>` names a capability.
    pub capability: String,
    /// The caller's arguments (see `crate::request` for placement).
    pub args: serde_json::Value,
    /// Source roots for this call; they win over `[source_roots]`.
    pub source_roots: BTreeMap<String, PathBuf>,
    /// Overrides `[limits] deadline_ms`.
    pub deadline: Option<Duration>,
    /// Overrides `[limits] max_output_bytes`.
    pub max_output_bytes: Option<u64>,
    /// The approval decision, when the call was approved (written into the
    /// request by the host; a caller's `approval` argument never is).
    pub approval: Option<Approval>,
    /// Whether this call may be served by a process started ahead, and
    /// leave the next ones started (in a host that keeps processes warm).
    /// Set only by a caller that evaluated the approval policy and got
    /// `allow` (`crate::approval::PolicyDecision::allows_starting_ahead`); the
    /// default, false, starts the process cold, after approval.
    pub(crate) start_ahead: bool,
    /// Receives `progress`/`log` notifications live.
    pub progress: Option<NotificationSink>,
    /// The workspace for this call: the host's by default, an MCP client's
    /// root, or none when the client's roots may not be granted.
    pub workspace: CallWorkspace,
    /// What a long-running caller saw of the home as this call started
    /// (`file_identity::Glance`): the checks below read a path's identity
    /// from it rather than `stat` it again. Empty by default.
    pub(crate) glance: Glance,
    /// The lockdown of the connection this call comes from (it received
    /// untrusted content, `crate::lockdown`): the call's network is
    /// narrowed to what it allows. `None`, the default, for a call with no
    /// connection behind it (`modhost invoke`).
    pub lockdown: Option<crate::lockdown::CallLockdown>,
    /// Who the call is made for, as an authenticating transport names its
    /// caller; `None`, the default, is the local user
    /// ([`crate::audit::local_principal`]). The audit log records it and
    /// `[quotas]` counts by it.
    pub principal: Option<String>,
    /// The rule (or default) by which the caller's gate allowed this call
    /// without an approval record (the toolbox's, decided for the call's
    /// principal): what the audit record names. `None`: the pipeline
    /// names what the policy says for the principal.
    pub(crate) allowed_by: Option<String>,
    /// The client connection's session (`crate::session_server`): a call
    /// of an MCP server module marked `session` runs on the connection's
    /// process of it, confined to the union of the module's grants. `None`,
    /// the default, runs every call per call.
    pub session: Option<crate::SessionScope>,
}

impl InvokeRequest {
    pub fn new(
        module: impl Into<String>,
        capability: impl Into<String>,
        args: serde_json::Value,
    ) -> Self {
        InvokeRequest {
            module: module.into(),
            capability: capability.into(),
            args,
            ..InvokeRequest::default()
        }
    }
}

/// A call that succeeded.
#[derive(Debug, Clone, Serialize)]
pub struct InvokeOutcome {
    pub module: String,
    pub capability: String,
    pub request_id: String,
    /// The module's result; `artifacts` holds only the ones that passed the checks.
    #[serde(flatten)]
    pub result: InvokeResult,
    /// The checked artifacts with their host paths (same order as `result.artifacts`).
    #[serde(skip)]
    pub artifacts: Vec<CheckedArtifact>,
    /// What the host noticed (missing roots, dropped artifacts, dropped keys).
    pub host_warnings: Vec<String>,
    /// The hosts the call's module contacted through the egress proxy, and
    /// those refused with the reason; `None` for a call without network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<modhost_egress::Contacts>,
    #[serde(skip)]
    pub notifications: Vec<Notification>,
    #[serde(skip)]
    pub stderr_tail: String,
    #[serde(skip)]
    pub elapsed: Duration,
}

/// A call that did not succeed. [`InvokeError::kind`] is machine-readable,
/// [`InvokeError::remedy`] a sentence a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The host could not do its part (unknown module, unreadable home, ...).
    #[error(transparent)]
    Host(#[from] HostError),
    /// A quota of `[quotas]` refused the call before anything ran
    /// ([`crate::quota`]).
    #[error(transparent)]
    RateLimited(#[from] crate::quota::RateLimited),
    #[error("module {id:?} is broken: {reason}")]
    ModuleBroken { id: String, reason: String },
    #[error("module {id:?} is disabled")]
    ModuleDisabled { id: String },
    #[error("module {id:?} is refused by the contract pin: {reason}")]
    ContractRefused {
        id: String,
        reason: String,
        remedy: String,
    },
    /// Contract 2 declarations that do not hold: a capability weakens an
    /// operation, or an operation is itself invalid (a duplicate id, an
    /// unknown capability). Every finding is in `problems`.
    #[error(
        "module {id:?} is refused: its contract-2 declarations do not conform (every finding is listed)"
    )]
    Nonconforming { id: String, findings: Vec<String> },
    /// Under `pins = "enforce"`: the operator never approved its bytes.
    #[error("{refusal}")]
    Unpinned { id: String, refusal: String },
    /// Under `pins = "enforce"`: bytes or descriptor differ from the pin.
    #[error("{refusal}")]
    Changed { id: String, refusal: String },
    #[error("module {module:?} has no capability {capability:?} (it has: {})", .available.join(", "))]
    UnknownCapability {
        module: String,
        capability: String,
        available: Vec<String>,
    },
    #[error("the input does not fit the schema of {capability}: {}", .problems.join("; "))]
    InvalidInput {
        capability: String,
        problems: Vec<String>,
    },
    #[error("the {which} schema of {capability} does not compile: {message}")]
    BadSchema {
        capability: String,
        which: &'static str,
        message: String,
    },
    /// A `--source-root` name the module does not declare.
    #[error(transparent)]
    UndeclaredSourceRoot(#[from] crate::grants::UndeclaredSourceRoot),
    /// The call did not produce a usable response (timeout, crash, ...).
    /// `host_diagnosis`: what the host could not grant the call (see
    /// `Module`).
    #[error("{module}: {source}{}", diagnosis(.host_diagnosis))]
    Run {
        module: String,
        source: RunError,
        host_diagnosis: Vec<String>,
        /// What the call's egress proxy saw; `None` without network.
        network: Option<modhost_egress::Contacts>,
    },
    /// The module answered with an error. `host_diagnosis` is why the host
    /// could not grant a root the capability names (a source root whose
    /// path does not resolve, ...): kept whatever the module answered, so
    /// a module failing closed with `root_missing` still shows the real
    /// cause, not only its generic remedy.
    #[error("{capability} failed: {}{}", .error.message, diagnosis(.host_diagnosis))]
    Module {
        capability: String,
        error: RpcError,
        stderr_tail: String,
        host_diagnosis: Vec<String>,
        /// What the call's egress proxy saw; `None` without network.
        network: Option<modhost_egress::Contacts>,
    },
    /// The module answered an error with a kind only the host decides: not a
    /// valid response (`bad_response`), whatever the module meant.
    #[error("{capability} answered an error of kind {:?}, which only the host decides, so the answer is not valid (the module's message: {message})", .claimed.0.as_str())]
    ClaimedHostKind {
        capability: String,
        claimed: HostOnlyKind,
        message: String,
        stderr_tail: String,
    },
    #[error("{capability} returned a result that does not parse: {problem}")]
    BadResult {
        capability: String,
        problem: String,
        stderr_tail: String,
    },
    #[error("{capability} returned output that does not fit its output_schema: {}", .problems.join("; "))]
    InvalidOutput {
        capability: String,
        problems: Vec<String>,
    },
    /// The module's `state` and `artifacts` folders are over their bound:
    /// the call was refused before it ran, or stopped while it ran
    /// ([`crate::storage_bound`]).
    #[error(transparent)]
    StorageLimit(#[from] crate::storage_bound::StorageOverrun),
    /// The capability declares a secret the call cannot be given (not
    /// granted to it, no value, the secrets file refused): refused before
    /// anything ran ([`crate::secrets`]).
    #[error(transparent)]
    SecretUnavailable(#[from] crate::secrets::SecretRefusal),
}

/// The host's diagnosis appended to a failed call's message.
fn diagnosis(lines: &[String]) -> String {
    lines.iter().map(|line| format!("; host: {line}")).collect()
}

impl InvokeError {
    /// The machine-readable kind: the module's own for
    /// [`InvokeError::Module`], else the host's.
    pub fn kind(&self) -> ErrorKind {
        match self {
            InvokeError::Host(HostError::UnknownModule { .. }) => {
                HostErrorKind::UnknownModule.into()
            }
            InvokeError::Host(HostError::NoWorkspace { .. }) => HostErrorKind::NoWorkspace.into(),
            InvokeError::Host(_) => HostErrorKind::Host.into(),
            InvokeError::RateLimited(_) => HostErrorKind::RateLimited.into(),
            InvokeError::ModuleBroken { .. } => HostErrorKind::ModuleBroken.into(),
            InvokeError::ModuleDisabled { .. } => HostErrorKind::ModuleDisabled.into(),
            InvokeError::ContractRefused { .. } => HostErrorKind::ContractRefused.into(),
            InvokeError::Nonconforming { .. } => HostErrorKind::Nonconforming.into(),
            InvokeError::Unpinned { .. } => HostErrorKind::Unpinned.into(),
            InvokeError::Changed { .. } => HostErrorKind::Changed.into(),
            InvokeError::UnknownCapability { .. } => ModuleErrorKind::UnknownCapability.into(),
            InvokeError::UndeclaredSourceRoot(_) => HostErrorKind::UndeclaredSourceRoot.into(),
            InvokeError::InvalidInput { .. } => ModuleErrorKind::InvalidInput.into(),
            InvokeError::BadSchema { .. } => HostErrorKind::BadSchema.into(),
            InvokeError::Run { source, .. } => source.kind().into(),
            InvokeError::Module { error, .. } => module_error_kind(error).into(),
            InvokeError::ClaimedHostKind { .. } | InvokeError::BadResult { .. } => {
                HostErrorKind::BadResponse.into()
            }
            InvokeError::InvalidOutput { .. } => HostErrorKind::InvalidOutput.into(),
            InvokeError::StorageLimit(_) => HostErrorKind::StorageLimit.into(),
            InvokeError::SecretUnavailable(_) => HostErrorKind::SecretUnavailable.into(),
        }
    }

    /// What a person can do about it.
    pub fn remedy(&self) -> String {
        match self {
            InvokeError::Host(HostError::UnknownModule { .. }) => {
                "run `modhost list` to see the installed modules".into()
            }
            InvokeError::Host(HostError::NoWorkspace { .. }) => {
                crate::host::NO_WORKSPACE_REMEDY.into()
            }
            InvokeError::Host(_) => "check the host home and its config.toml".into(),
            InvokeError::RateLimited(limited) => limited.remedy(),
            // A describe the sandbox stopped: its stderr is in the reason.
            InvokeError::ModuleBroken { id, reason } => {
                match modhost_sandbox::denial::permission_denial(reason) {
                    Some(denial) => denial.remedy(id),
                    None => format!(
                        "run `modhost describe {id}` for details, then reinstall or fix the module"
                    ),
                }
            }
            InvokeError::ModuleDisabled { id } => format!("enable it with `modhost enable {id}`"),
            InvokeError::ContractRefused { remedy, .. } => remedy.clone(),
            InvokeError::Nonconforming { id, .. } => format!(
                "the module's author must fix the findings (`modhost describe {id}` lists them, each with a remedy); nothing the operator can pin makes it callable"
            ),
            InvokeError::Unpinned { id, .. } => {
                format!("review `modhost describe {id}`, then run `modhost pin {id}`")
            }
            InvokeError::Changed { id, .. } => format!(
                "review `modhost describe {id}`, then run `modhost pin {id}` to accept the change"
            ),
            InvokeError::UnknownCapability { module, .. } => {
                format!("run `modhost describe {module}` to see its capabilities")
            }
            InvokeError::InvalidInput { .. } => {
                "fix the arguments so they match the capability's input_schema".into()
            }
            InvokeError::UndeclaredSourceRoot(e) => match e.declared.as_slice() {
                [] => "leave out --source-root: the module reads no source root".into(),
                _ => "pass --source-root with one of the declared names".into(),
            },
            InvokeError::BadSchema { .. } => {
                "the module declares an invalid JSON Schema; report it to its author".into()
            }
            InvokeError::Run { module, source, .. } => match source {
                _ if source.sandbox_denial().is_some() => source
                    .sandbox_denial()
                    .map(|denial| denial.remedy(module))
                    .unwrap_or_default(),
                RunError::Timeout { .. } => {
                    "raise --deadline-ms (or [limits] deadline_ms) or narrow the request".into()
                }
                RunError::OutputLimit { .. } => {
                    "raise --max-output-bytes (or [limits] max_output_bytes) or narrow the request"
                        .into()
                }
                RunError::Spawn { .. } => {
                    "check that the module's executable exists and is runnable".into()
                }
                RunError::Unconfined { remedy, .. } => remedy.clone(),
                RunError::NativeMemoryLimit { .. } => format!(
                    "raise the module's limit in config.toml: `[limits.modules.\"{module}\"] native_memory_bytes = ...` (or `[limits] native_memory_bytes` for every module), or narrow the request"
                ),
                _ => {
                    "the module misbehaved; see its stderr tail and report it to its author".into()
                }
            },
            InvokeError::Module { error, .. } => error
                .data
                .as_ref()
                .and_then(|d| d.remedy.clone())
                .unwrap_or_else(|| "see the message; the module gave no remedy".into()),
            InvokeError::ClaimedHostKind { .. }
            | InvokeError::BadResult { .. }
            | InvokeError::InvalidOutput { .. } => {
                "the module broke its contract; report it to its author".into()
            }
            InvokeError::StorageLimit(overrun) => overrun.remedy(),
            InvokeError::SecretUnavailable(refusal) => refusal.remedy(),
        }
    }

    /// Individual problems (schema violations), when there are several.
    pub fn problems(&self) -> Vec<String> {
        match self {
            InvokeError::InvalidInput { problems, .. }
            | InvokeError::InvalidOutput { problems, .. } => problems.clone(),
            InvokeError::Nonconforming { findings, .. } => findings.clone(),
            InvokeError::Module { error, .. } => error
                .data
                .as_ref()
                .map(|d| d.problems.clone())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The module's stderr tail, when it ran.
    pub fn stderr_tail(&self) -> &str {
        match self {
            InvokeError::Run { source, .. } => source.stderr_tail(),
            InvokeError::Module { stderr_tail, .. }
            | InvokeError::ClaimedHostKind { stderr_tail, .. }
            | InvokeError::BadResult { stderr_tail, .. } => stderr_tail,
            _ => "",
        }
    }

    /// Whether the capability ran and failed (exit 1), as opposed to a call
    /// the host refused or could not make (exit 2): an unknown name, a
    /// module whose standing forbids it (broken, disabled, refused,
    /// unpinned, changed), input that does not fit its schema, a host
    /// problem. The module never ran in any of those, so a script can tell
    /// "the host said no" from "the tool failed".
    pub fn capability_ran(&self) -> bool {
        matches!(
            self,
            InvokeError::Run { .. }
                | InvokeError::Module { .. }
                | InvokeError::ClaimedHostKind { .. }
                | InvokeError::BadResult { .. }
                | InvokeError::InvalidOutput { .. }
        ) || matches!(self, InvokeError::StorageLimit(overrun) if overrun.stopped)
    }

    /// `{"kind", "message", "remedy"}` (plus `problems` and `stderr_tail`
    /// when present), as `invoke --json` prints it under `"error"`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({
            "kind": self.kind(),
            "message": self.to_string(),
            "remedy": self.remedy(),
        });
        let problems = self.problems();
        if !problems.is_empty() {
            value["problems"] = serde_json::json!(problems);
        }
        if !self.stderr_tail().is_empty() {
            value["stderr_tail"] = serde_json::json!(self.stderr_tail());
        }
        if let Some(network) = self.network() {
            value["network"] = serde_json::json!(network);
        }
        if let InvokeError::RateLimited(limited) = self {
            value["retry_after_s"] = serde_json::json!(limited.retry_after_s);
        }
        value
    }

    /// What the failed call's egress proxy saw: the hosts it contacted and
    /// those refused; `None` for a call without network, or one that never
    /// ran.
    pub fn network(&self) -> Option<&modhost_egress::Contacts> {
        match self {
            InvokeError::Run { network, .. } | InvokeError::Module { network, .. } => {
                network.as_ref()
            }
            _ => None,
        }
    }
}

/// The `invoke` request as the module reads it: a [`modproto::Request`] whose params
/// are `params`, written out in one pass rather than through a `Value`.
#[derive(Serialize)]
struct InvokeLine<'a> {
    jsonrpc: &'static str,
    id: i64,
    method: &'static str,
    params: &'a InvokeParams,
}

/// A change under a discovered module, found by a call: what changed, and
/// what the operator can do (the refusal under `enforce`; under `warn` the
/// problem alone is the call's warning).
struct Change {
    problem: String,
    remedy: String,
}

/// Which side of a call a schema checks.
#[derive(Debug, Clone, Copy)]
enum Side {
    Input,
    Output,
}

/// A schema check's failure on `side` of a call of `capability`.
fn schema_error(capability: &str, side: Side, failure: SchemaFailure) -> InvokeError {
    let capability = capability.to_owned();
    match (failure, side) {
        (SchemaFailure::BadSchema(message), side) => InvokeError::BadSchema {
            capability,
            which: match side {
                Side::Input => "input",
                Side::Output => "output",
            },
            message,
        },
        (SchemaFailure::Violations(problems), Side::Input) => InvokeError::InvalidInput {
            capability,
            problems,
        },
        (SchemaFailure::Violations(problems), Side::Output) => InvokeError::InvalidOutput {
            capability,
            problems,
        },
    }
}

/// The kind of a module's error: its own `data.kind`, else one derived from
/// the code. An error whose kind only the host decides never becomes
/// [`InvokeError::Module`] (see [`module_error`]), so this is a module's.
fn module_error_kind(error: &RpcError) -> ModuleErrorKind {
    match error.kind().map(ErrorKind::as_module) {
        Some(Ok(kind)) => kind.clone(),
        Some(Err(_)) | None => ModuleErrorKind::for_code(ErrorCode::from_code(error.code)),
    }
}

/// The module's error answer as the pipeline's error: the module's failure,
/// or, when it names a kind only the host decides, a bad response.
fn module_error(
    capability: &str,
    error: RpcError,
    stderr_tail: String,
    host_diagnosis: Vec<String>,
    network: Option<modhost_egress::Contacts>,
) -> InvokeError {
    if let Some(Err(claimed)) = error.kind().map(ErrorKind::as_module) {
        return InvokeError::ClaimedHostKind {
            capability: capability.to_owned(),
            claimed,
            message: error.message,
            stderr_tail,
        };
    }
    InvokeError::Module {
        capability: capability.to_owned(),
        error,
        stderr_tail,
        host_diagnosis,
        network,
    }
}

impl Host {
    /// Invoke one capability (finds the module first).
    pub async fn invoke(&self, request: InvokeRequest) -> Result<InvokeOutcome, InvokeError> {
        let module = match self.module(&request.module).await {
            Ok(module) => module,
            Err(e) => {
                // No module to invoke: recorded all the same.
                let e = InvokeError::from(e);
                let tool = modconform::tool_name(&request.module, &request.capability);
                let mut refused = crate::audit::RefusedCall::new(&tool, &request.args, e.kind());
                refused.module = Some(&request.module);
                refused.principal = request.principal.as_deref();
                self.record_refusal(&refused);
                return Err(e);
            }
        };
        self.invoke_module(&module, request).await
    }

    /// What changed in `module`'s files since it was discovered, if anything
    /// (its tree, its snapshot, or whether they can be read at all). What
    /// runs is the snapshot either way; this is what makes a folder changed
    /// under a long-running host `changed` until it is restored. Not looked
    /// at under `pins = "off"`.
    fn change_since_discovery(&self, module: &InstalledModule, glance: &Glance) -> Option<Change> {
        if self.config().pins == PinsMode::Off {
            return None;
        }
        let root = module.tree_root();
        let id = &module.id;
        let restore_or_pin = || {
            format!(
                "refused until the files are restored, or reviewed and pinned again (`modhost pin {id}`), which `modhost mcp` picks up while it runs"
            )
        };
        match module.drift(glance) {
            Ok(None) => None,
            Ok(Some(Drift::Tree)) => Some(Change {
                problem: format!(
                    "{} changed since module {id} was discovered: these are not the files that were checked and approved",
                    root.display(),
                ),
                remedy: restore_or_pin(),
            }),
            Ok(Some(Drift::Snapshot)) => {
                let snapshot = module.program.parent().unwrap_or(&module.program);
                Some(Change {
                    problem: format!(
                        "the snapshot module {id} runs from ({}) no longer holds the files that were approved; the host's own copy was changed",
                        snapshot.display()
                    ),
                    remedy: format!(
                        "refused until the snapshot is made again: remove {} (snapshots are read-only: `chmod -R u+w` it first) and start the host again; discovery makes it again from {} when that still holds the approved files",
                        snapshot.display(),
                        root.display()
                    ),
                })
            }
            Err(e) => Some(Change {
                problem: format!(
                    "{} can no longer be read to check it is unchanged: {e}",
                    root.display()
                ),
                remedy: restore_or_pin(),
            }),
        }
    }

    /// The pipeline of one call of an already discovered module
    /// (`request.module` is ignored), as [`Host::invoke_module`] runs it:
    /// `facts` gets what the call's audit record and span need as each is
    /// decided (`crate::audit::CallFacts`).
    pub(crate) async fn invoke_pipeline(
        &self,
        module: &InstalledModule,
        request: InvokeRequest,
        facts: &mut crate::audit::CallFacts,
    ) -> Result<InvokeOutcome, InvokeError> {
        let started = Instant::now();
        let descriptor = standing_refusal(module)?;
        // Disabled since discovery: `modhost disable` while a long-running
        // host (`modhost mcp`) serves the module. The operator's switch
        // takes effect on the next call, not at the next restart (one
        // `stat`, or none, see `marker_present`; a bare module is moved
        // into a folder by disable).
        let folder = module.folder.as_deref().unwrap_or(&module.path);
        if marker_present(folder, &request.glance) {
            return Err(InvokeError::ModuleDisabled {
                id: module.id.clone(),
            });
        }
        // Unpinned since discovery: `modhost unpin` (or a re-pin of other
        // bytes) while a long-running host serves the module. A revoked
        // approval takes effect on the next call: `pins.json` is read again
        // when it changed (it is replaced atomically, so no lock is needed).
        if self.config().pins == PinsMode::Enforce {
            let standing = self.pin_standing_now(
                descriptor,
                module.digest.as_deref().unwrap_or_default(),
                &request.glance,
            );
            let refusal = match &standing {
                Ok(standing) => standing.refusal(&module.id),
                Err(e) => Some(format!("{e}; refused until the pins can be read again")),
            };
            if let Some(refusal) = refusal {
                let id = module.id.clone();
                return Err(match standing {
                    Ok(crate::pins::PinStanding::Changed(_)) => {
                        InvokeError::Changed { id, refusal }
                    }
                    _ => InvokeError::Unpinned { id, refusal },
                });
            }
        }
        // Under `pins = "enforce"` a change refuses the call, under
        // `"warn"` it is a warning.
        let changed = self.change_since_discovery(module, &request.glance);
        if let Some(Change { problem, remedy }) = &changed
            && self.config().pins == PinsMode::Enforce
        {
            return Err(InvokeError::Changed {
                id: module.id.clone(),
                refusal: format!("{problem}; {remedy}"),
            });
        }
        // Decided at discovery; only a module that was never assessed (one
        // assembled by hand rather than discovered) is pinned here.
        let contract_version = match module.contract.effective() {
            Some(effective) => effective.to_owned(),
            None => match contract::evaluate(descriptor.clone()) {
                ContractDecision::Refused(pin) => {
                    return Err(InvokeError::ContractRefused {
                        id: module.id.clone(),
                        reason: pin.reason,
                        remedy: pin.remedy,
                    });
                }
                decision => decision
                    .pin()
                    .effective
                    .clone()
                    .unwrap_or_else(|| "1.0".into()),
            },
        };
        let capability = descriptor
            .capability(&request.capability)
            .or_else(|| descriptor.capability(&format!("{}.{}", module.id, request.capability)))
            .ok_or_else(|| InvokeError::UnknownCapability {
                module: module.id.clone(),
                capability: request.capability.clone(),
                available: module.capability_ids(),
            })?;
        facts.contract_version = Some(contract_version.clone());

        // A mistyped `--source-root` name is an error, never ignored.
        crate::grants::check_source_root_names(
            &module.id,
            descriptor,
            request.source_roots.keys(),
        )?;

        let mut host_warnings = module.host_warnings.clone();
        host_warnings.extend(changed.map(|change| change.problem));
        let placed = place_arguments(request.args);
        if !placed.dropped.is_empty() {
            host_warnings.push(format!(
                "ignored host-owned keys in the arguments: {}",
                placed.dropped.join(", ")
            ));
        }
        self.validators()
            .check_in(descriptor, &capability.input_schema, &placed.input)
            .map_err(|failure| schema_error(&capability.id, Side::Input, failure))?;

        // A given workspace (a client's root) is checked again as it
        // resolves now: one swapped for a link to the user's home since
        // the client named it is not granted.
        let (workspace, withheld) = match &request.workspace {
            CallWorkspace::Given(dir) => {
                let dir = crate::host::check_workspace(dir)?;
                let homes = crate::user_home::user_homes();
                match crate::host::never_a_workspace(&dir, homes, &[]) {
                    None => (Some(dir), None),
                    Some(why) => (
                        None,
                        Some(format!("{} is never a workspace: {why}", dir.display())),
                    ),
                }
            }
            CallWorkspace::Withheld(why) => (None, Some(why.clone())),
            CallWorkspace::Host => (self.workspace().map(Path::to_path_buf), None),
        };
        // Exactly what the capability names, decided in one place
        // (`grants::authority`): nothing else of the module's roots or
        // binaries reaches the call.
        let mut plan = self.grants_in(
            module,
            capability,
            &request.source_roots,
            workspace.as_deref(),
            true,
        )?;
        // No workspace granted (started in / or the home, or one that
        // overlaps the modhost home): a capability that reads or writes it
        // is refused here, with the remedy, rather than run without it.
        if let Some(missing) = plan
            .missing
            .iter()
            .find(|m| m.kind == modproto::RootKind::Workspace.as_str())
        {
            let why = match (withheld, &workspace) {
                (Some(why), _) => why,
                (None, None) => "modhost was started in / or the home directory, which are never taken as the workspace".to_owned(),
                (None, Some(_)) => missing.reason.clone(),
            };
            return Err(InvokeError::Host(HostError::NoWorkspace {
                capability: capability.id.clone(),
                why,
            }));
        }
        // Why a named root is not granted: a warning when the call
        // succeeds, part of the error when it fails.
        let diagnosis = plan.warnings();
        host_warnings.extend(diagnosis.iter().cloned());

        let configured = self.config().limits.invoke();
        let limits = CallLimits {
            deadline: request.deadline.unwrap_or(configured.deadline),
            max_output_bytes: request
                .max_output_bytes
                .unwrap_or(configured.max_output_bytes),
            confinement: configured.confinement,
            native_memory_bytes: self.config().limits.native_memory_for(&module.id),
        };
        // A component cannot start a process at all: it is told of no
        // binary, rather than of host paths it could never run.
        if module.transport == runner::Transport::Component && !plan.binaries.is_empty() {
            let names: Vec<&str> = plan.binaries.keys().map(String::as_str).collect();
            host_warnings.push(format!(
                "components cannot run programs, so {} {} not granted",
                names.join(", "),
                if names.len() == 1 { "was" } else { "were" }
            ));
            plan.binaries.clear();
        }
        let executables: Vec<std::path::PathBuf> = plan.binaries.values().cloned().collect();
        let over = crate::overrides::find_override(
            &self.config().capabilities,
            &module.id,
            &capability.id,
        );
        let network_grant =
            crate::network_grant::call_grant(capability, crate::overrides::network_lines(over));
        // In lockdown the call gets what both its grant and `[lockdown]
        // allowed_hosts` allow; left with no host, its proxy still runs
        // and refuses every connection, saying why (`crate::lockdown`).
        let (network_grant, unlocked_grant) = match (network_grant, &request.lockdown) {
            (Some(granted), Some(lockdown)) => {
                let narrowed = lockdown.narrow(&granted);
                if narrowed != granted {
                    host_warnings.push(lockdown.warning(&narrowed));
                }
                (Some(narrowed), Some(granted))
            }
            (granted, _) => (granted, None),
        };
        let request_id = new_request_id();
        facts.request_id = Some(request_id.clone());
        let params = InvokeParams {
            protocol: modproto::PROTOCOL_VERSION.to_owned(),
            contract_version,
            request_id: request_id.clone(),
            capability: capability.id.clone(),
            input: placed.input,
            roots: plan.request_roots(),
            binaries: plan.request_binaries(),
            deadline_ms: limits.deadline.as_millis() as u64,
            max_output_bytes: limits.max_output_bytes,
            approval: request.approval,
            extra: placed.extra,
        };
        let line = serde_json::to_string(&InvokeLine {
            jsonrpc: modproto::jsonrpc::JSONRPC_VERSION,
            id: runner::native::REQUEST_ID,
            method: modproto::METHOD_INVOKE,
            params: &params,
        })
        .map_err(|e| {
            InvokeError::Host(HostError::Refused(format!(
                "could not encode the request: {e}"
            )))
        })?;
        let grants = &plan.roots;
        // Where modules write, what this call executes must not lie: its
        // workspace, the host's own (every call without a client's roots
        // gets that one: a server started in a project with its venv
        // activated serves other projects too) and the home.
        let mut module_writes: Vec<std::path::PathBuf> = Vec::with_capacity(3);
        for place in [workspace.as_deref(), self.workspace(), Some(self.home())]
            .into_iter()
            .flatten()
        {
            if !module_writes.iter().any(|known| known == place) {
                module_writes.push(place.to_path_buf());
            }
        }
        // A call that may write the module's own folders runs under their
        // bound: refused when they are over it already, stopped when it
        // takes them over (`crate::storage_bound`). Any other pays nothing.
        let mut storage = crate::storage_bound::watch_for(
            &module.id,
            &[
                self.layout().state_dir(&module.id),
                self.layout().artifacts_dir(&module.id),
            ],
            self.config().limits.storage_for(&module.id),
            &plan.roots,
            &plan.kinds,
            // A long-running host keeps the watch for the next call.
            self.engines().keeps_warm(),
        )?;
        if let Some(warning) = storage.as_ref().and_then(|w| w.warning.clone()) {
            host_warnings.push(warning);
        }
        facts.granted(&plan, network_grant.as_ref());
        // The secrets this call gets, read now (`crate::secrets`): a call
        // whose capability declares one it cannot be given is refused here,
        // before its proxy opens or anything starts. Whatever the module
        // says is masked with their values (`crate::redact`).
        let secrets = self.call_secrets(module, capability)?;
        facts.received_secrets(secrets.iter().map(|s| s.name().to_owned()));
        // Masked with every value the module's capabilities were granted,
        // not only this call's: one capability may print what another
        // stashed in the module's state.
        let mut masked = self.module_secrets_to_mask(descriptor, module);
        masked.retain(|other| secrets.iter().all(|own| own.name() != other.name()));
        masked.extend(secrets.iter().cloned());
        let redactor = crate::redact::Redactor::new(&masked);
        // Opened last, just before the run: the proxy serves this call
        // from here until the ticket drops.
        let egress = network_grant
            .map(|grant| {
                crate::call_network::open(self, grant, module.transport, limits.confinement)
            })
            .transpose()?;
        let call = Call {
            request_line: &line,
            limits,
            grants,
            executables: &executables,
            module_writes: &module_writes,
            network: egress.as_ref().map(|(_, network)| network),
            start_ahead: request.start_ahead,
            secrets: &secrets,
        };
        let instance = facts.running(module.transport);
        // Live progress reaches its listener masked, in order, before the
        // outcome does (the relay ends with the run's sink).
        let (progress, relay) = redactor.relay(request.progress.as_ref());
        let running = async {
            let run = async {
                // A `session` MCP server's call on its connection's
                // process, when there is one to use (`crate::session_server`).
                let in_session = match &request.session {
                    Some(scope) => {
                        let session = crate::session_server::SessionCall {
                            scope,
                            module,
                            descriptor,
                            source_roots: &request.source_roots,
                            workspace: workspace.as_deref(),
                            lockdown: request.lockdown.as_ref(),
                            params: &params,
                            call: &call,
                        };
                        self.run_in_session(session, progress.as_ref()).await
                    }
                    None => None,
                };
                let ran = match in_session {
                    Some(session) => (session.ran, Some(session.held)),
                    None => {
                        let ran = runner::run(
                            self.engines(),
                            module.transport,
                            &module.program,
                            &call,
                            progress.as_ref(),
                        )
                        .await;
                        (ran, None)
                    }
                };
                drop(progress);
                ran
            };
            tokio::join!(run, relay.forward()).0
        };
        // Past the bound, the run is dropped: that kills its process group.
        let ran = match storage.as_mut() {
            Some(watch) => tokio::select! {
                biased;
                () = watch.overrun() => None,
                ran = running => Some(ran),
            },
            None => Some(running.await),
        };
        drop(instance);
        // A call served by its connection's session process ran with the
        // union that process holds: its record names that, not the call's
        // own narrower plan.
        let ran = ran.map(|(ran, held)| {
            if let Some(held) = held {
                facts.granted_parts(&held.roots, &held.binaries, held.network.as_ref());
                facts.received_secrets(held.secrets.into_iter());
            }
            ran
        });
        // Everything the module said, masked before any of it is looked at,
        // kept or passed on: what follows builds outcomes and errors from
        // masked data only.
        let ran = ran.map(|ran| redactor.ran(ran));
        // The module has exited: what it reached is final, and the ticket
        // (its listener, any tunnel left) is closed here.
        let mut contacts = egress.map(|(ticket, _)| ticket.contacts());
        if let Some(contacts) = &mut contacts {
            redactor.contacts(contacts);
        }
        if let (Some(contacts), Some(lockdown), Some(granted)) =
            (&mut contacts, &request.lockdown, &unlocked_grant)
        {
            lockdown.note_refusals(contacts, granted);
        }
        let mut diagnosis = diagnosis;
        diagnosis.extend(contacts.iter().flat_map(crate::call_network::refusal_lines));
        if let Some(watch) = storage {
            watch.finish(ran.is_none())?;
        }
        let Some(ran) = ran else {
            return Err(InvokeError::Host(HostError::Refused(
                "the call was stopped at its storage bound".into(),
            )));
        };
        let exchange = match ran {
            Ok(exchange) => exchange,
            Err(source) => {
                return Err(InvokeError::Run {
                    module: module.id.clone(),
                    source,
                    host_diagnosis: diagnosis,
                    network: contacts,
                });
            }
        };
        host_warnings.extend(exchange.host_warnings);

        let value = match exchange.response.outcome {
            Ok(value) => value,
            Err(error) => {
                return Err(module_error(
                    &capability.id,
                    error,
                    exchange.stderr_tail,
                    diagnosis,
                    contacts,
                ));
            }
        };
        let mut result: InvokeResult =
            serde_json::from_value(value).map_err(|e| InvokeError::BadResult {
                capability: capability.id.clone(),
                problem: e.to_string(),
                stderr_tail: exchange.stderr_tail.clone(),
            })?;
        if let Some(schema) = &capability.output_schema {
            self.validators()
                .check_in(descriptor, schema, &result.output)
                .map_err(|failure| schema_error(&capability.id, Side::Output, failure))?;
        }
        let (artifacts, dropped) = check_artifacts(&result.artifacts, &plan.roots);
        host_warnings.extend(dropped);
        result.artifacts = artifacts.iter().map(|a| a.artifact.clone()).collect();

        Ok(InvokeOutcome {
            module: module.id.clone(),
            capability: capability.id.clone(),
            request_id,
            result,
            artifacts,
            host_warnings,
            network: contacts,
            notifications: exchange.notifications,
            stderr_tail: exchange.stderr_tail,
            elapsed: started.elapsed(),
        })
    }
}

/// Whether `folder` holds the `.disabled` marker now: one `lstat` of the
/// marker, or none when the call's `glance` saw the folder with the very
/// identity at which the marker was last found absent, and that identity
/// had settled by then (its last change [`RACY`] older than the look).
/// Creating the marker in the folder, or renaming it in, moves the folder's
/// modification and status-change times, and the status-change time cannot
/// be set back: the folder's unchanged identity proves the marker is still
/// absent (the reasoning of `modhost_runner::file_identity`). A folder changed within
/// the racy second is looked into again, as is every folder of a caller
/// that took no glance.
///
/// [`RACY`]: modhost_runner::file_identity::RACY
fn marker_present(folder: &Path, glance: &Glance) -> bool {
    type AbsentAt = std::sync::Mutex<std::collections::HashMap<PathBuf, FileIdentity>>;
    static ABSENT_AT: std::sync::OnceLock<AbsentAt> = std::sync::OnceLock::new();
    let absent_at = || {
        ABSENT_AT
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    };
    let seen = glance.glanced(folder);
    if seen.is_some() && absent_at().get(folder) == seen.as_ref() {
        return false;
    }
    let looked_at = std::time::SystemTime::now();
    let present = std::fs::symlink_metadata(folder.join(crate::discovery::DISABLED_MARKER)).is_ok();
    match seen {
        Some(seen) if !present && seen.settled_at(looked_at) => {
            absent_at().insert(folder.to_path_buf(), seen);
        }
        // Present, or not provably absent from now on: forget any proof.
        _ => {
            absent_at().remove(folder);
        }
    }
    present
}

/// Why `module`, as discovery found it, may not be called at all (its
/// contract standing, `.disabled`, its pin, a broken describe), before
/// anything about the call is looked at; else its descriptor. A long-running
/// host also tells a client with it why a tool it listed before is gone.
#[allow(clippy::result_large_err)] // the pipeline's own error, as `invoke_module` returns it
pub(crate) fn standing_refusal(
    module: &InstalledModule,
) -> Result<&std::sync::Arc<modproto::Descriptor>, InvokeError> {
    // The contract standing was decided at discovery; a refused module
    // says why in its own terms rather than as merely "broken".
    match &module.contract {
        ContractStanding::VersionRefused(pin) => {
            return Err(InvokeError::ContractRefused {
                id: module.id.clone(),
                reason: pin.reason.clone(),
                remedy: pin.remedy.clone(),
            });
        }
        ContractStanding::Nonconforming { verdict, .. } => {
            return Err(InvokeError::Nonconforming {
                id: module.id.clone(),
                findings: verdict.errors().map(|f| f.to_string()).collect(),
            });
        }
        _ => {}
    }
    match (&module.status, &module.descriptor) {
        (ModuleStatus::Disabled, _) => Err(InvokeError::ModuleDisabled {
            id: module.id.clone(),
        }),
        (ModuleStatus::Enabled, Some(descriptor)) => Ok(descriptor),
        (ModuleStatus::Unpinned | ModuleStatus::Changed, _) => {
            let refusal = module
                .pin
                .as_ref()
                .and_then(|p| p.refusal(&module.id))
                .unwrap_or_else(|| format!("module {} is not pinned", module.id));
            let id = module.id.clone();
            Err(if module.status == ModuleStatus::Changed {
                InvokeError::Changed { id, refusal }
            } else {
                InvokeError::Unpinned { id, refusal }
            })
        }
        _ => Err(InvokeError::ModuleBroken {
            id: module.id.clone(),
            reason: module.error.as_ref().map_or_else(
                || "it did not describe itself".into(),
                |e| e.message.clone(),
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modhost_test_support::modules::{descriptor, install, script, write_executable};
    use serde_json::json;

    /// The host, with every module that describes itself pinned as the
    /// operator would (`modhost pin`), so tests of the call itself pass the
    /// pin gate.
    async fn open(home: &std::path::Path) -> Host {
        let host = Host::open_at(home);
        for module in host.discover().await {
            if module.status != ModuleStatus::Broken {
                host.pin(&module.id).await.unwrap();
            }
        }
        host
    }

    /// Rewrite the file at `path` in place: the same size, one byte
    /// different, its modification time put back. Returns what it held.
    fn rewrite_in_place(path: &std::path::Path) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
        let swapped = text.replacen('x', "y", 1);
        assert_eq!(swapped.len(), text.len());
        assert_ne!(swapped, text);
        std::fs::write(path, &swapped).unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        text
    }

    /// A module whose invoke answer is `answer`, at `modules/<id>/<id>`.
    fn module_answering(home: &std::path::Path, id: &str, answer: &serde_json::Value) {
        let counter = home.join(format!("{id}.describes"));
        write_executable(
            &home.join("modules").join(id).join(id),
            &script(&descriptor(id), answer, &counter),
        );
    }

    #[tokio::test]
    async fn reserved_keys_are_written_by_the_host_only() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "echo", false);
        let host = open(dir.path()).await;
        let outcome = host
            .invoke(InvokeRequest::new(
                "echo",
                "echo.run",
                json!({
                    "input": {"msg": "hi"},
                    "request_id": "forged",
                    "roots": {"state": {"path": "/", "kind": "state", "access": "read-write"}},
                    "deadline_ms": 99999999,
                    "mode": "fast"
                }),
            ))
            .await
            .unwrap();
        assert_eq!(outcome.result.output, json!({"ok": true}));
        // The module echoed its request line to stderr.
        let line = outcome
            .stderr_tail
            .lines()
            .find(|l| l.contains("\"invoke\""))
            .unwrap();
        let request: serde_json::Value = serde_json::from_str(line).unwrap();
        let params = &request["params"];
        assert_eq!(params["request_id"], json!(outcome.request_id));
        assert_eq!(params["input"], json!({"msg": "hi"}));
        assert_eq!(params["mode"], "fast");
        assert_eq!(params["deadline_ms"], 30_000);
        let state = params["roots"]["state"]["path"].as_str().unwrap();
        assert!(state.ends_with("/state/echo"), "{state}");
        assert!(
            params["roots"].get("data").is_none(),
            "an unset source root is not granted"
        );
        assert!(
            outcome.host_warnings.iter().any(|w| w.contains("\"data\"")),
            "{:?}",
            outcome.host_warnings
        );
        assert!(
            outcome
                .host_warnings
                .iter()
                .any(|w| w.contains("request_id"))
        );
    }

    #[tokio::test]
    async fn invalid_input_is_refused_before_spawning() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        // The module would write a marker if it ever ran for invoke.
        let marker = home.join("ran");
        let text = format!(
            "#!/bin/sh\nread line\ncase \"$line\" in *'\"describe\"'*) printf '%s\\n' '{}' ;; *) touch '{}' ;; esac\n",
            json!({"jsonrpc": "2.0", "id": 1, "result": descriptor("strict")}),
            marker.display()
        );
        write_executable(&home.join("modules/strict/strict"), &text);
        let host = open(home).await;
        let err = host
            .invoke(InvokeRequest::new(
                "strict",
                "run",
                json!({"msg": 5, "other": 1}),
            ))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "invalid_input");
        assert_eq!(err.problems().len(), 1, "{:?}", err.problems());
        assert!(!marker.exists());
    }

    #[tokio::test]
    async fn output_violating_its_schema_is_not_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        module_answering(
            dir.path(),
            "liar",
            &json!({"result": {"output": {"nope": 1}}}),
        );
        let err = open(dir.path())
            .await
            .invoke(InvokeRequest::new("liar", "liar.run", json!({"msg": "x"})))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "invalid_output");
    }

    #[tokio::test]
    async fn module_error_keeps_its_kind_and_remedy() {
        let dir = tempfile::tempdir().unwrap();
        module_answering(
            dir.path(),
            "picky",
            &json!({"error": {"code": -32001, "message": "root data missing",
                   "data": {"kind": "root_missing", "remedy": "pass --source-root data=PATH"}}}),
        );
        let err = open(dir.path())
            .await
            .invoke(InvokeRequest::new(
                "picky",
                "picky.run",
                json!({"msg": "x"}),
            ))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "root_missing");
        assert_eq!(err.remedy(), "pass --source-root data=PATH");
        assert!(err.capability_ran());
    }

    /// The attack across projects: a server started in project A with A's
    /// venv first on `PATH` serves a client whose root is project B. A
    /// module writing A (any call without a client's roots gets A) could
    /// replace A's interpreter; a call in B must not run it. Here the
    /// module's shebang names an interpreter in A, the host's workspace,
    /// and the call's workspace is B: refused, naming the file.
    #[tokio::test]
    async fn no_call_runs_an_interpreter_in_the_hosts_workspace_whatever_its_own() {
        let home = tempfile::tempdir().unwrap();
        let (project_a, project_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let interpreter = std::fs::canonicalize(project_a.path())
            .unwrap()
            .join(".venv/bin/sh");
        std::fs::create_dir_all(interpreter.parent().unwrap()).unwrap();
        std::fs::copy("/bin/sh", &interpreter).unwrap();
        let (program, _) = install(home.path(), "reader", false);
        let text = std::fs::read_to_string(&program).unwrap();
        let text = text.replacen("#!/bin/sh", &format!("#!{}", interpreter.display()), 1);
        write_executable(&program, &text);
        let host = Host::open(crate::host::HostOptions {
            home: Some(home.path().to_path_buf()),
            workspace: Some(project_a.path().to_path_buf()),
        })
        .unwrap();
        for module in host.discover().await {
            host.pin(&module.id).await.unwrap();
        }
        let mut request = InvokeRequest::new("reader", "reader.run", json!({"msg": "x"}));
        request.workspace = CallWorkspace::Given(project_b.path().to_path_buf());
        let err = host.invoke(request).await.unwrap_err();
        assert_eq!(err.kind(), "unconfined", "{err}");
        assert!(
            err.to_string().contains(&interpreter.display().to_string()),
            "{err}"
        );
    }

    #[tokio::test]
    async fn source_root_override_is_granted_read_only() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "reader", false);
        // Outside the home: a root inside it is never granted.
        let outside = tempfile::tempdir().unwrap();
        let data = outside.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mut request = InvokeRequest::new("reader", "reader.run", json!({"msg": "x"}));
        request.source_roots.insert("data".into(), data.clone());
        let outcome = open(dir.path()).await.invoke(request).await.unwrap();
        let line = outcome
            .stderr_tail
            .lines()
            .find(|l| l.contains("\"invoke\""))
            .unwrap();
        let request: serde_json::Value = serde_json::from_str(line).unwrap();
        let granted = &request["params"]["roots"]["data"];
        assert_eq!(granted["access"], "read");
        assert_eq!(
            granted["path"],
            json!(std::fs::canonicalize(&data).unwrap())
        );
    }

    #[tokio::test]
    async fn disabled_unknown_and_missing_capability() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "off", false);
        std::fs::write(dir.path().join("modules/off/.disabled"), "").unwrap();
        install(dir.path(), "on", false);
        let host = open(dir.path()).await;
        let args = json!({"msg": "x"});
        let err = host
            .invoke(InvokeRequest::new("off", "off.run", args.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "module_disabled");
        let err = host
            .invoke(InvokeRequest::new("nope", "x", args.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unknown_module");
        assert!(!err.capability_ran());
        let err = host
            .invoke(InvokeRequest::new("on", "fly", args))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unknown_capability");
    }
    #[tokio::test]
    async fn pins_gate_the_call_under_enforce_and_warn() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = install(dir.path(), "gated", false);
        let args = json!({"msg": "x"});
        let host = Host::open_at(dir.path());
        let err = host
            .invoke(InvokeRequest::new("gated", "gated.run", args.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unpinned");
        assert!(
            err.remedy().contains("modhost pin gated"),
            "{}",
            err.remedy()
        );

        host.pin("gated").await.unwrap();
        host.invoke(InvokeRequest::new("gated", "gated.run", args.clone()))
            .await
            .unwrap();

        // New bytes: refused, and the refusal says what changed.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("# changed\n");
        write_executable(&path, &text);
        let err = host
            .invoke(InvokeRequest::new("gated", "gated.run", args.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "changed");
        assert!(err.to_string().contains("bytes changed"), "{err}");

        // Under warn the same call goes through, with a host warning.
        std::fs::write(dir.path().join("config.toml"), "pins = \"warn\"\n").unwrap();
        let outcome = Host::open_at(dir.path())
            .invoke(InvokeRequest::new("gated", "gated.run", args))
            .await
            .unwrap();
        assert!(
            outcome
                .host_warnings
                .iter()
                .any(|w| w.contains("changed since it was pinned")),
            "{:?}",
            outcome.host_warnings
        );
    }

    #[tokio::test]
    async fn bytes_swapped_after_discovery_never_run_as_the_approved_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = install(dir.path(), "swapped", false);
        let host = open(dir.path()).await;
        // Discovered once, as a long-running caller (the MCP server) does.
        let module = host.module("swapped").await.unwrap();
        let call = || InvokeRequest::new("swapped", "swapped.run", json!({"msg": "x"}));
        host.invoke_module(&module, call()).await.unwrap();

        let text = rewrite_in_place(&path);
        let err = host.invoke_module(&module, call()).await.unwrap_err();
        assert_eq!(err.kind(), "changed", "{err}");
        assert!(
            err.to_string()
                .contains("changed since module swapped was discovered"),
            "{err}"
        );

        // Put back byte for byte: the approved bytes run again.
        std::fs::write(&path, &text).unwrap();
        host.invoke_module(&module, call()).await.unwrap();
    }

    /// The host's own copy under a long-running host: an entry linked
    /// elsewhere (a backup, a profiler's build-id cache) or touched has a
    /// new identity but the approved bytes, and keeps running; new bytes in
    /// it are refused, naming the snapshot, until they are put back.
    #[tokio::test]
    async fn a_snapshot_changed_under_a_long_running_host_is_digested_again_never_trusted() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "kept", false);
        let host = open(dir.path()).await;
        let module = host.module("kept").await.unwrap();
        assert!(module.program_identity.is_some(), "runs from its snapshot");
        let call = || InvokeRequest::new("kept", "kept.run", json!({"msg": "x"}));
        host.invoke_module(&module, call()).await.unwrap();

        std::fs::hard_link(&module.program, dir.path().join("backup")).unwrap();
        host.invoke_module(&module, call())
            .await
            .expect("a new link to the same bytes changes nothing that runs");

        let writable = |mode| {
            std::fs::set_permissions(&module.program, {
                use std::os::unix::fs::PermissionsExt;
                std::fs::Permissions::from_mode(mode)
            })
            .unwrap()
        };
        writable(0o755);
        let text = rewrite_in_place(&module.program);
        writable(0o555);
        let err = host.invoke_module(&module, call()).await.unwrap_err();
        assert_eq!(err.kind(), "changed", "{err}");
        let snapshot = module.program.parent().unwrap().display().to_string();
        assert!(
            err.to_string().contains(&format!(
                "the snapshot module kept runs from ({snapshot}) no longer holds the files that were approved"
            )),
            "{err}"
        );

        writable(0o755);
        std::fs::write(&module.program, &text).unwrap();
        writable(0o555);
        host.invoke_module(&module, call())
            .await
            .expect("the approved bytes put back run again");
    }

    /// The attack on the checks a long-running host shares with its
    /// toolbox's look at the home (`Glance`: pins.json and the module's
    /// folder, as `tools::live` takes them at the start of each call): a
    /// module disabled, unpinned, or rewritten in place (same size, mtime
    /// put back) between two calls is refused on the very next call, also
    /// once the folder settled and the marker's absence is remembered.
    #[tokio::test]
    async fn a_change_between_two_calls_is_refused_by_the_next_one_despite_the_shared_glance() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = install(dir.path(), "glanced", false);
        let host = open(dir.path()).await;
        let module = host.module("glanced").await.unwrap();
        let folder = module.folder.clone().unwrap();
        let watched: std::sync::Arc<[PathBuf]> =
            vec![host.layout().pins_path(), folder.clone()].into();
        let call = || InvokeRequest {
            glance: Glance::taken(std::sync::Arc::clone(&watched)),
            ..InvokeRequest::new("glanced", "glanced.run", json!({"msg": "x"}))
        };
        // Settled: from now on an unchanged folder vouches for its marker.
        std::thread::sleep(modhost_runner::file_identity::RACY + Duration::from_millis(100));
        for _ in 0..2 {
            host.invoke_module(&module, call()).await.unwrap();
        }

        let marker = folder.join(crate::discovery::DISABLED_MARKER);
        std::fs::write(&marker, "").unwrap();
        let err = host.invoke_module(&module, call()).await.unwrap_err();
        assert_eq!(err.kind(), "module_disabled", "{err}");
        std::fs::remove_file(&marker).unwrap();
        host.invoke_module(&module, call()).await.unwrap();

        let text = rewrite_in_place(&path);
        let err = host.invoke_module(&module, call()).await.unwrap_err();
        assert_eq!(err.kind(), "changed", "{err}");
        std::fs::write(&path, &text).unwrap();
        host.invoke_module(&module, call()).await.unwrap();

        assert!(host.unpin("glanced").unwrap());
        let err = host.invoke_module(&module, call()).await.unwrap_err();
        assert_eq!(err.kind(), "unpinned", "{err}");
    }

    /// The request line is the JSON-RPC request a module parses, written in
    /// one pass: the same message as through a `Value`.
    #[test]
    fn the_invoke_line_is_the_request_it_always_was() {
        let mut extra = serde_json::Map::new();
        extra.insert("mode".into(), json!("fast"));
        let params = InvokeParams {
            protocol: modproto::PROTOCOL_VERSION.to_owned(),
            contract_version: "1.0".into(),
            request_id: "r".into(),
            capability: "m.run".into(),
            input: json!({"msg": "x"}),
            roots: BTreeMap::new(),
            binaries: BTreeMap::new(),
            deadline_ms: 5,
            max_output_bytes: 7,
            approval: None,
            extra,
        };
        let line = serde_json::to_string(&InvokeLine {
            jsonrpc: modproto::jsonrpc::JSONRPC_VERSION,
            id: runner::native::REQUEST_ID,
            method: modproto::METHOD_INVOKE,
            params: &params,
        })
        .unwrap();
        let expected = modproto::Request::new(
            runner::native::REQUEST_ID,
            modproto::METHOD_INVOKE,
            Some(serde_json::to_value(&params).unwrap()),
        );
        assert_eq!(
            serde_json::from_str::<modproto::Request>(&line).unwrap(),
            expected
        );
    }

    #[tokio::test]
    async fn a_weakening_v2_module_is_refused_with_its_findings() {
        let dir = tempfile::tempdir().unwrap();
        let mut weak = descriptor("weak");
        weak["contract_version"] = json!("2.0.0");
        weak["operations"] =
            json!([{"id": "store", "capability": "weak.run", "semantics": {"mutates": ["state"]}}]);
        let counter = dir.path().join("weak.describes");
        write_executable(
            &dir.path().join("modules/weak/weak"),
            &script(
                &weak,
                &json!({"result": {"output": {"ok": true}}}),
                &counter,
            ),
        );
        let host = open(dir.path()).await;
        let err = host
            .invoke(InvokeRequest::new("weak", "weak.run", json!({"msg": "x"})))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "nonconforming");
        assert!(
            err.problems().iter().any(|p| p.contains("weak.run")),
            "{:?}",
            err.problems()
        );
    }
}

#[cfg(test)]
mod discovery_reuse_tests {
    use std::time::Duration;

    use serde_json::json;

    use super::{InvokeError, InvokeRequest};
    use crate::{Host, HostError};
    use modhost_runner::file_identity::RACY;
    use modhost_test_support::modules::{install, write_executable};

    /// Let every change so far age past the racy window, as a home the
    /// operator last touched a moment ago would.
    fn settle() {
        std::thread::sleep(RACY + Duration::from_millis(100));
    }

    /// A host on `home` with module `one` installed, pinned, and every
    /// change settled; the path of `one`'s program.
    async fn pinned_and_settled(home: &std::path::Path) -> (Host, std::path::PathBuf) {
        std::fs::write(home.join("config.toml"), "confinement = \"off\"\n").unwrap();
        let (one, _) = install(home, "one", false);
        let host = Host::open_at(home);
        host.pin("one").await.unwrap();
        settle();
        (host, one)
    }

    fn run(id: &str) -> InvokeRequest {
        InvokeRequest::new(id, format!("{id}.run"), json!({"msg": "hi"}))
    }

    /// The attack: an operator change made between two calls of a host
    /// that reuses its last discovery. Each one is seen by the next call.
    #[tokio::test]
    async fn a_reused_discovery_never_hides_an_operator_change() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let (host, one) = pinned_and_settled(home).await;
        host.invoke(run("one")).await.unwrap();
        assert!(host.reuses_its_last_discovery(), "a settled home is reused");
        host.invoke(run("one")).await.unwrap();

        // Installed since: found.
        install(home, "two", false);
        assert!(!host.reuses_its_last_discovery(), "modules/ changed");
        assert_eq!(host.module("two").await.unwrap().id, "two");
        assert!(
            !host.reuses_its_last_discovery(),
            "a change this recent is not vouched for"
        );

        // Disabled since: refused.
        settle();
        host.module("one").await.unwrap();
        assert!(host.reuses_its_last_discovery());
        std::fs::write(home.join("modules/one/.disabled"), "").unwrap();
        let refused = host.invoke(run("one")).await.unwrap_err();
        assert!(
            matches!(refused, InvokeError::ModuleDisabled { .. }),
            "{refused:?}"
        );
        std::fs::remove_file(home.join("modules/one/.disabled")).unwrap();

        // Removed since: unknown.
        std::fs::remove_dir_all(home.join("modules/two")).unwrap();
        let gone = host.module("two").await.unwrap_err();
        assert!(matches!(gone, HostError::UnknownModule { .. }), "{gone:?}");

        // Changed in place, which no watched path shows: the call's own
        // check of the tree refuses it.
        settle();
        host.invoke(run("one")).await.unwrap();
        assert!(host.reuses_its_last_discovery());
        write_executable(&one, "#!/bin/sh\necho '{}'\n");
        assert!(
            host.reuses_its_last_discovery(),
            "the folder did not change"
        );
        let changed = host.invoke(run("one")).await.unwrap_err();
        assert!(
            matches!(changed, InvokeError::Changed { .. }),
            "{changed:?}"
        );
    }
    /// A link in `modules/` whose target appears later: `modules/` itself
    /// does not change, the link's target does.
    #[tokio::test]
    async fn a_module_linked_into_modules_is_seen_when_its_target_appears() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(home.join("modules")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("two"), home.join("modules/two")).unwrap();
        let (host, _) = pinned_and_settled(&home).await;
        host.invoke(run("one")).await.unwrap();
        assert!(host.reuses_its_last_discovery());
        install(&elsewhere, "two", false);
        std::fs::rename(elsewhere.join("modules/two"), elsewhere.join("two")).unwrap();
        assert!(
            !host.reuses_its_last_discovery(),
            "the link's target appeared"
        );
        assert_eq!(host.module("two").await.unwrap().id, "two");
    }

    /// Under `pins = "off"` a module edited in place is described anew by
    /// the next call, as before: no discovery is reused there.
    #[tokio::test]
    async fn without_enforced_pins_every_call_discovers_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let config = "confinement = \"off\"\npins = \"off\"\n";
        std::fs::write(home.join("config.toml"), config).unwrap();
        install(home, "one", false);
        let host = Host::open_at(home);
        settle();
        host.invoke(run("one")).await.unwrap();
        host.invoke(run("one")).await.unwrap();
        assert!(!host.reuses_its_last_discovery());
    }
}
