//! The transport contract: what one call is given ([`Call`], its
//! [`CallLimits`] and [`Grant`]s) and what comes back ([`Exchange`] or a
//! [`RunError`]). Both transports and everything above them speak these
//! types, so they live below the transports rather than in `runner/mod.rs`,
//! which dispatches to them.

use std::path::PathBuf;
use std::time::Duration;

use modproto::{HostErrorKind, Notification, Response};

use modhost_sandbox::ConfinementMode;
use modhost_sandbox::Grant;

/// Where notifications go live while a call runs (an MCP server relays
/// `progress` from here). They are also collected in `Exchange`.
pub type NotificationSink = tokio::sync::mpsc::UnboundedSender<Notification>;

/// Bounds for one call.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// Wall-clock budget, from spawn to reaped.
    pub deadline: Duration,
    /// The most bytes of stdout read before the call is killed.
    pub max_output_bytes: u64,
    /// How a native call is confined (`confinement` in config.toml).
    pub confinement: ConfinementMode,
    /// The memory a native call's processes may use together (`[limits]
    /// native_memory_bytes`, or the module's own line), bounded by a memory
    /// cgroup of the call's own where the host can make one
    /// ([`modhost_sandbox::memory_cgroup`]).
    pub native_memory_bytes: u64,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            deadline: Duration::from_secs(30),
            max_output_bytes: 1024 * 1024,
            confinement: ConfinementMode::default(),
            native_memory_bytes: modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES,
        }
    }
}

/// Everything a transport needs for one call besides the module itself.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The request, serialized, without the trailing newline.
    pub request_line: &'a str,
    pub limits: CallLimits,
    pub grants: &'a [Grant],
    /// Host paths of the binaries granted for this call: a confined native
    /// module may read and execute exactly these besides the system folders.
    pub executables: &'a [PathBuf],
    /// Where modules write (the workspace, the modhost home): nothing the
    /// call executes beside the module's own entry may lie there, since any
    /// module writing it could replace what this call runs
    /// ([`modhost_sandbox::prepare`]).
    pub module_writes: &'a [PathBuf],
    /// How the call reaches the network: `None` for no network; else the
    /// egress proxy the host opened for this call (the capability declared
    /// network and the operator granted hosts).
    pub network: Option<&'a CallNetwork>,
    /// Whether a long-running host may serve this call from a process
    /// started ahead of it, and start the next ones for calls like it
    /// ([`native::warm`](crate::native::warm)). Only the host sets it, from its approval policy:
    /// a process started ahead runs before anyone approved the call it
    /// will serve, so it is true only for a capability the policy allows
    /// outright (`modhost::approval::PolicyDecision::allows_starting_ahead`).
    /// False (start cold, after approval) for every caller that did not
    /// evaluate the policy.
    pub start_ahead: bool,
    /// The secrets granted to this call (`modhost::secrets`): variables of
    /// its module's environment, natively and under WASI, and nothing
    /// else. They belong to this call alone: a native call with any is
    /// never served by, nor followed by, a process started ahead, whose
    /// start carries no secret ([`native::warm`](crate::native::warm)).
    pub secrets: &'a [CallSecret],
}

/// One secret of a call: its name, the variable a module reads it from, and
/// its value. `Debug` shows the name only, so no log or panic message of a
/// call carries the value.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CallSecret {
    name: String,
    value: String,
}

impl CallSecret {
    /// The secret `name` (an environment variable name, checked by the host
    /// against `modproto::check_secret_name`) holding `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> CallSecret {
        CallSecret {
            name: name.into(),
            value: value.into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// The variable as a process environment takes it.
    pub fn variable(&self) -> (std::ffi::OsString, std::ffi::OsString) {
        (self.name.clone().into(), self.value.clone().into())
    }
}

impl std::fmt::Debug for CallSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CallSecret({}, value withheld)", self.name)
    }
}

/// The network of a call: the egress proxy the host opened for it.
///
/// A native process gets the proxy's address in its proxy variables
/// (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and their lower-case forms) and
/// may connect to its port and nowhere else
/// ([`modhost_sandbox::NetworkAccess::Proxy`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallNetwork {
    /// The proxy's port on 127.0.0.1, in the host's egress network
    /// namespace when the call is confined.
    pub proxy_port: u16,
    /// `http://modhost:<token>@127.0.0.1:<port>`, token and all.
    pub proxy_url: String,
}

impl CallNetwork {
    /// The proxy variables of the module's environment: upper and lower
    /// case, since clients disagree on which they read (curl reads
    /// `http_proxy` only in lower case).
    pub fn environment(&self) -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
        [
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "ALL_PROXY",
            "https_proxy",
            "http_proxy",
            "all_proxy",
        ]
        .into_iter()
        .map(|name| (name.into(), self.proxy_url.clone().into()))
    }
}

/// What came back from a call that answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Notifications (`progress`, `log`) received before the response, in order.
    pub notifications: Vec<Notification>,
    /// The one response.
    pub response: Response,
    /// The bounded tail of the module's stderr.
    pub stderr_tail: String,
    /// What the host noticed while running the call (for instance, less than
    /// full confinement).
    pub host_warnings: Vec<String>,
}

/// How much of a module's stderr the host keeps for error reports.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// A call that did not produce a usable response. A module failure is data,
/// never a host panic.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    #[error("the module did not answer within {deadline_ms} ms and was killed")]
    Timeout {
        deadline_ms: u64,
        stderr_tail: String,
    },
    #[error("the module wrote more than {limit} bytes to stdout and was killed")]
    OutputLimit { limit: u64, stderr_tail: String },
    #[error("the module exceeded its memory limit of {limit} bytes")]
    MemoryLimit { limit: u64, stderr_tail: String },
    /// A native call's processes together reached their memory limit and
    /// the kernel killed one (its memory cgroup's OOM killer).
    #[error(
        "the module's processes used their memory limit of {} ({limit} bytes, all of the call's processes together) and the kernel killed them at it",
        modhost_sandbox::bytes_in_words(*.limit)
    )]
    NativeMemoryLimit { limit: u64, stderr_tail: String },
    #[error("the module trapped: {trap}")]
    Trapped { trap: String, stderr_tail: String },
    #[error("the module exited ({status}) without a response")]
    Crashed { status: String, stderr_tail: String },
    #[error("the module's answer is not a valid response: {problem}")]
    BadResponse {
        problem: String,
        stderr_tail: String,
    },
    #[error("could not start the module: {message}")]
    Spawn { message: String },
    /// `confinement = "required"` and this machine cannot enforce every part
    /// of confinement the call implies; `remedy` says what would.
    #[error("refused to run the module less than fully confined: {reason}")]
    Unconfined { reason: String, remedy: String },
    #[error("the call was cancelled")]
    Cancelled,
}

impl RunError {
    /// The machine-readable kind: how the call ended, as only the host
    /// can tell.
    pub fn kind(&self) -> HostErrorKind {
        match self {
            RunError::Timeout { .. } => HostErrorKind::Timeout,
            RunError::OutputLimit { .. } => HostErrorKind::OutputLimit,
            RunError::MemoryLimit { .. } | RunError::NativeMemoryLimit { .. } => {
                HostErrorKind::MemoryLimit
            }
            RunError::Trapped { .. } => HostErrorKind::Trapped,
            RunError::Crashed { .. } => HostErrorKind::Crashed,
            RunError::BadResponse { .. } => HostErrorKind::BadResponse,
            RunError::Spawn { .. } => HostErrorKind::SpawnFailed,
            RunError::Unconfined { .. } => HostErrorKind::Unconfined,
            RunError::Cancelled => HostErrorKind::Cancelled,
        }
    }

    /// A permission error in the stderr of a module that died or broke the
    /// protocol before answering: the sandbox likely stopped it
    /// ([`modhost_sandbox::denial`]).
    pub fn sandbox_denial(&self) -> Option<modhost_sandbox::denial::Denial> {
        match self {
            RunError::Crashed { stderr_tail, .. } | RunError::BadResponse { stderr_tail, .. } => {
                modhost_sandbox::denial::permission_denial(stderr_tail)
            }
            _ => None,
        }
    }

    pub fn stderr_tail(&self) -> &str {
        match self {
            RunError::Timeout { stderr_tail, .. }
            | RunError::OutputLimit { stderr_tail, .. }
            | RunError::MemoryLimit { stderr_tail, .. }
            | RunError::NativeMemoryLimit { stderr_tail, .. }
            | RunError::Trapped { stderr_tail, .. }
            | RunError::Crashed { stderr_tail, .. }
            | RunError::BadResponse { stderr_tail, .. } => stderr_tail,
            RunError::Spawn { .. } | RunError::Unconfined { .. } | RunError::Cancelled => "",
        }
    }
}
