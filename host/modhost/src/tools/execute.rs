//! Executing a tool: one bounded invocation, and a result a model can read.
//!
//! Design decisions:
//!
//! - The invocation itself is behind [`Invoker`], the seam to the host's
//!   invoke pipeline (request building, grants, the runner). The adapter only
//!   shapes what comes back, so it can be tested without a module process.
//! - **The model-facing text is bounded** ([`MAX_TEXT_BYTES`]): a larger
//!   result is cut at a character boundary with a notice, and the full text is
//!   saved in the host's own spill folder (`<home>/spill/<module>/`, never
//!   granted to a module, see [`super::spill`]) and reported as an artifact
//!   line whose `file` is its path, so nothing is lost, only moved out of the
//!   context window.
//! - **Artifacts are one `@artifact {json}` line each**
//!   ([`modproto::ARTIFACT_MARKER`]): a UI scanning output and a model reading
//!   it see identical facts.
//! - **A failure is a result**, not an error: its text says what happened and
//!   what to do, so the model can correct itself (fix its input, pick another
//!   tool) instead of the turn dying.

use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};

use modproto::{
    Approval, ArtifactRef, Descriptor, ErrorKind, HostErrorKind, InvokeResult, ModuleErrorKind,
    RootKind,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::ToolDef;
use crate::home::HomeLayout;

/// The most bytes of model-facing text one result carries before it is cut.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// One progress report from a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress reports go. Bounded: a report that finds it full
/// is dropped (progress is advisory), so a module that floods progress while
/// the client reads slowly costs nothing that grows.
pub type ProgressSink = mpsc::Sender<Progress>;

/// One call as the invoke pipeline needs it.
#[derive(Debug, Clone)]
pub struct InvokeCall {
    pub module: String,
    pub capability: String,
    /// The caller's arguments, as given (the pipeline validates and strips reserved keys).
    pub input: Value,
    /// The host's approval record for this call; `None` when the call
    /// needed no approval (the default allowed it).
    pub approval: Option<Approval>,
    /// Whether processes may be started ahead for calls of this tool: its
    /// verdict is `allow` (`crate::approval::PolicyDecision::allows_starting_ahead`).
    pub start_ahead: bool,
    pub progress: Option<ProgressSink>,
    /// The workspace for this call: the host's, an MCP client's root, or none.
    pub workspace: crate::CallWorkspace,
    /// The lockdown this call runs under (its connection received
    /// untrusted content, `crate::lockdown`): the pipeline narrows its
    /// network with it. `None` outside lockdown.
    pub lockdown: Option<crate::lockdown::CallLockdown>,
    /// What the toolbox saw of the home when this call started, for the
    /// pipeline's own checks to share (`file_identity::Glance`).
    pub(crate) glance: modhost_runner::file_identity::Glance,
    /// Who the call is made for ([`crate::Caller::principal`], through
    /// `Toolbox::call_as`); `None`: the local user. The audit log records
    /// it and `[quotas]` counts by it.
    pub principal: Option<String>,
    /// The rule (or default) the gate allowed this call by when it needs
    /// no approval record, decided for its caller: what its audit record
    /// names.
    pub(crate) allowed_by: Option<String>,
}

/// Why an invocation produced no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokeFailure {
    /// `invalid_input`, `timeout`, `failed`, ...: the module's, or the host's.
    pub kind: ErrorKind,
    pub message: String,
    pub remedy: Option<String>,
    /// Every individual problem (schema violations).
    pub problems: Vec<String>,
    /// The module's stderr tail, when it has one worth showing.
    pub stderr_tail: String,
    /// Whether the capability ran (and so the message or the stderr tail
    /// may carry its words), as opposed to a call the host refused or
    /// could not make ([`crate::InvokeError::capability_ran`]).
    pub ran: bool,
}

/// The seam between a [`super::Toolbox`] and the host's invoke pipeline:
/// [`super::HostInvoker`] in every toolbox the library opens, fakes in this
/// crate's tests. Public because `Toolbox` is generic over it.
///
/// Dropping the returned future must end the call (the native runner kills
/// the module's process group on drop): that is how cancellation works.
pub trait Invoker: Send + Sync + 'static {
    fn invoke(
        &self,
        call: InvokeCall,
    ) -> impl Future<Output = Result<Invoked, InvokeFailure>> + Send;

    /// Record a call refused before it was invoked (the toolbox's gate, an
    /// MCP server's own bounds): a host's invoker writes it to the audit
    /// log (`crate::Host::record_refusal`). By default nothing is recorded.
    fn refused(&self, call: &crate::audit::RefusedCall<'_>) {
        let _ = call;
    }

    /// Whether one more approval question about a call of `principal`
    /// (`None`: the local user) may be asked now (`[quotas]
    /// elicitations_per_minute`, per principal); by default always.
    fn admit_question(&self, principal: Option<&str>) -> Result<(), crate::quota::RateLimited> {
        let _ = principal;
        Ok(())
    }

    /// Count a call of a tool name nobody offers against the `[quotas]` of
    /// `principal` (`None`: the local user); by default never over.
    fn admit_unknown_tool(&self, principal: Option<&str>) -> Result<(), crate::quota::RateLimited> {
        let _ = principal;
        Ok(())
    }
}

/// What an invocation that answered gave back: the module's result, and
/// what its egress proxy saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Invoked {
    pub result: InvokeResult,
    /// The hosts contacted and refused; `None` for a call without network.
    pub network: Option<modhost_egress::Contacts>,
}

impl From<InvokeResult> for Invoked {
    fn from(result: InvokeResult) -> Invoked {
        Invoked {
            result,
            network: None,
        }
    }
}

/// A file a call produced, with where it lies on the host when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolArtifact {
    pub module: String,
    #[serde(flatten)]
    pub artifact: ArtifactRef,
    /// The host path; absent when the root cannot be resolved here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl ToolArtifact {
    /// The `@artifact {json}` line.
    pub fn line(&self) -> String {
        format!(
            "{}{}",
            modproto::ARTIFACT_MARKER,
            serde_json::to_string(self).unwrap_or_default()
        )
    }
}

/// What a tool call gives back to its caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub is_error: bool,
    /// Model-facing text: bounded body, then warnings, then one line per artifact.
    pub text: String,
    /// The module's structured output, on success.
    pub structured: Option<Value>,
    pub artifacts: Vec<ToolArtifact>,
    /// The hosts the call contacted and those refused (MCP: in the
    /// result's `_meta`); `None` for a call without network.
    pub network: Option<modhost_egress::Contacts>,
    /// `Some` when returning this result puts its connection in lockdown
    /// (`crate::lockdown`): its capability's output is untrusted, its
    /// module ran, and `[lockdown]` is enabled. A connection already in
    /// lockdown keeps the one it entered first.
    pub enters_lockdown: Option<crate::lockdown::Lockdown>,
}

impl ToolOutcome {
    /// A failed result carrying `text` alone.
    pub fn failure(text: impl Into<String>) -> Self {
        ToolOutcome {
            is_error: true,
            text: text.into(),
            structured: None,
            artifacts: Vec::new(),
            network: None,
            enters_lockdown: None,
        }
    }
}

/// How to turn a module's root names into host paths, for artifact lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootPaths<'a> {
    pub descriptor: &'a Descriptor,
    pub home: &'a HomeLayout,
    pub workspace: Option<&'a Path>,
}

impl RootPaths<'_> {
    fn host_dir(&self, root: &str) -> Option<PathBuf> {
        let id = &self.descriptor.id;
        match self.descriptor.root(root)?.kind {
            RootKind::State => Some(self.home.state_dir(id)),
            RootKind::Artifacts => Some(self.home.artifacts_dir(id)),
            RootKind::Workspace => self.workspace.map(Path::to_path_buf),
            // Source roots are read-only: no artifact is ever written there.
            RootKind::Source => None,
        }
    }
}

/// Shape an invocation's result for the model.
pub(crate) fn outcome(
    tool: &ToolDef,
    result: Result<Invoked, InvokeFailure>,
    roots: &RootPaths<'_>,
) -> ToolOutcome {
    match result {
        Ok(Invoked { result, network }) => ToolOutcome {
            network,
            ..success(tool, result, roots)
        },
        Err(failure) => ToolOutcome::failure(failure_text(tool, &failure)),
    }
}

fn success(tool: &ToolDef, result: InvokeResult, roots: &RootPaths<'_>) -> ToolOutcome {
    let body = match &result.text {
        Some(text) => text.clone(),
        None => serde_json::to_string_pretty(&result.output).unwrap_or_default(),
    };
    let mut artifacts: Vec<ToolArtifact> = result
        .artifacts
        .iter()
        .filter(|a| modproto::invoke::is_clean_relative_path(&a.path))
        .map(|a| ToolArtifact {
            module: tool.module.clone(),
            artifact: a.clone(),
            file: roots.host_dir(&a.root).map(|dir| dir.join(&a.path)),
        })
        .collect();
    let mut text = String::new();
    if body.len() > MAX_TEXT_BYTES {
        let cut = floor_char_boundary(&body, MAX_TEXT_BYTES);
        text.push_str(&body[..cut]);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        match save_full_output(tool, &body, roots) {
            Ok(saved) => {
                let _ = writeln!(
                    text,
                    "[output cut: showing {cut} of {} bytes; the full output is saved at {}]",
                    body.len(),
                    saved
                        .file
                        .as_deref()
                        .map_or_else(String::new, |f| f.display().to_string())
                );
                artifacts.push(saved);
            }
            Err(e) => {
                let _ = writeln!(
                    text,
                    "[output cut: showing {cut} of {} bytes; saving the full output failed: {e}]",
                    body.len()
                );
            }
        }
    } else {
        text.push_str(&body);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
    }
    for w in &result.warnings {
        let _ = writeln!(text, "warning: {w}");
    }
    for a in &artifacts {
        let _ = writeln!(text, "{}", a.line());
    }
    ToolOutcome {
        is_error: false,
        text: text.trim_end_matches('\n').to_owned(),
        structured: Some(result.output),
        artifacts,
        network: None,
        enters_lockdown: None,
    }
}

/// The root name a spilled output is reported under: not a module root, the
/// host's own folder ([`super::spill`]).
pub(crate) const SPILL_ROOT: &str = "modhost-spill";

/// Save `body` in the host's spill folder, outside every root a module is
/// granted, and describe it as an artifact whose `file` is where it lies.
fn save_full_output(
    tool: &ToolDef,
    body: &str,
    roots: &RootPaths<'_>,
) -> std::io::Result<ToolArtifact> {
    let saved = super::spill::save(roots.home, &tool.module, &tool.name, body)?;
    Ok(ToolArtifact {
        module: tool.module.clone(),
        artifact: ArtifactRef {
            root: SPILL_ROOT.to_owned(),
            path: format!("{}/{}", tool.module, saved.file_name),
            media_type: Some("text/plain".to_owned()),
            title: Some(format!("full output of {}", tool.name)),
        },
        file: Some(saved.file),
    })
}

/// What happened and what to do, for a failed call.
pub(crate) fn failure_text(tool: &ToolDef, failure: &InvokeFailure) -> String {
    let mut text = format!(
        "{} failed ({}): {}",
        tool.name, failure.kind, failure.message
    );
    if !failure.problems.is_empty() {
        text.push_str("\nProblems:");
        for p in &failure.problems {
            let _ = write!(text, "\n- {p}");
        }
    }
    let remedy = failure
        .remedy
        .clone()
        .unwrap_or_else(|| default_remedy(&failure.kind).to_owned());
    if !remedy.is_empty() {
        let _ = write!(text, "\nWhat to do: {remedy}");
    }
    let tail = failure.stderr_tail.trim();
    if !tail.is_empty() {
        // Keep the end of stderr: the last lines say why a program died.
        let start = ceil_char_boundary(tail, tail.len().saturating_sub(2048));
        let _ = write!(text, "\nModule stderr (tail):\n{}", &tail[start..]);
    }
    text
}

fn default_remedy(kind: &ErrorKind) -> &'static str {
    use ErrorKind::{Host, Module};
    match kind {
        Module(ModuleErrorKind::InvalidInput) => {
            "fix the arguments to match the tool's input schema and call again"
        }
        Host(HostErrorKind::Timeout) => {
            "narrow the request (a smaller scope or input) or ask the operator to raise [limits] deadline_ms"
        }
        Host(HostErrorKind::OutputLimit) => "narrow the request so it produces less output",
        Module(ModuleErrorKind::RootMissing) => {
            "the operator must configure the root this capability needs"
        }
        Module(ModuleErrorKind::Denied | ModuleErrorKind::PathEscape) => {
            "stay inside the granted roots"
        }
        Host(HostErrorKind::Cancelled) => "",
        Host(
            HostErrorKind::Crashed
            | HostErrorKind::BadResponse
            | HostErrorKind::Trapped
            | HostErrorKind::SpawnFailed,
        )
        | Module(ModuleErrorKind::Internal | ModuleErrorKind::Panic) => {
            "this is a fault of the module, not of the call; try another tool or report it to the module's author"
        }
        _ => "read the message above, adjust the call, or try another tool",
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::PolicyVerdict;
    use serde_json::json;

    fn tool() -> ToolDef {
        ToolDef::for_test(
            "files__files_read",
            "files",
            "files.read",
            PolicyVerdict::Allow,
        )
    }

    fn descriptor() -> Descriptor {
        serde_json::from_value(json!({"id": "files", "version": "1.0.0",
            "roots": [{"name": "out", "kind": "artifacts"}, {"name": "src", "kind": "source"}],
            "capabilities": []}))
        .unwrap()
    }

    #[test]
    fn small_results_pass_through_with_artifact_lines() {
        let home = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(home.path());
        let d = descriptor();
        let roots = RootPaths {
            descriptor: &d,
            home: &layout,
            workspace: None,
        };
        let mut result = InvokeResult::new(json!({"n": 1}));
        result.warnings.push("slow disk".into());
        result.artifacts.push(ArtifactRef {
            root: "out".into(),
            path: "a.txt".into(),
            media_type: None,
            title: None,
        });
        result.artifacts.push(ArtifactRef {
            root: "out".into(),
            path: "../escape".into(),
            media_type: None,
            title: None,
        });
        let o = outcome(&tool(), Ok(result.into()), &roots);
        assert!(!o.is_error);
        assert_eq!(o.structured, Some(json!({"n": 1})));
        let lines: Vec<&str> = o.text.lines().collect();
        assert_eq!(lines[..3], ["{", "  \"n\": 1", "}"]);
        assert_eq!(lines[3], "warning: slow disk");
        let file = home.path().join("artifacts/files/a.txt");
        assert_eq!(
            lines[4],
            format!(
                "@artifact {{\"module\":\"files\",\"root\":\"out\",\"path\":\"a.txt\",\"file\":{:?}}}",
                file.display().to_string()
            )
        );
        assert_eq!(lines.len(), 5, "the escaping artifact is dropped");
    }

    #[test]
    fn large_results_are_cut_and_saved_in_full() {
        let home = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(home.path());
        let d = descriptor();
        let roots = RootPaths {
            descriptor: &d,
            home: &layout,
            workspace: None,
        };
        // Multi-byte characters straddle the cut: it must land on a boundary.
        let big = "é".repeat(MAX_TEXT_BYTES);
        let mut result = InvokeResult::new(json!(null));
        result.text = Some(big.clone());
        let o = outcome(&tool(), Ok(result.into()), &roots);
        assert!(o.text.len() < MAX_TEXT_BYTES + 1024);
        assert_eq!(o.artifacts.len(), 1);
        let saved = o.artifacts[0].file.clone().unwrap();
        assert!(o.text.contains(&format!(
            "of {} bytes; the full output is saved at {}",
            big.len(),
            saved.display()
        )));
        assert!(
            saved.starts_with(home.path().join("spill/files")),
            "outside every module root: {}",
            saved.display()
        );
        assert!(!home.path().join("artifacts").exists());
        assert_eq!(std::fs::read_to_string(saved).unwrap(), big);
        assert_eq!(o.artifacts[0].artifact.root, SPILL_ROOT);
        assert!(o.text.lines().last().unwrap().starts_with("@artifact "));
    }

    #[test]
    fn failures_say_what_happened_and_what_to_do() {
        let failure = InvokeFailure {
            kind: ModuleErrorKind::InvalidInput.into(),
            message: "the input does not match the schema".into(),
            remedy: None,
            problems: vec!["/q: 5 is not of type \"string\"".into()],
            stderr_tail: String::new(),
            ran: false,
        };
        let text = failure_text(&tool(), &failure);
        assert_eq!(
            text,
            "files__files_read failed (invalid_input): the input does not match the schema\n\
             Problems:\n- /q: 5 is not of type \"string\"\n\
             What to do: fix the arguments to match the tool's input schema and call again"
        );
        let crashed = InvokeFailure {
            kind: HostErrorKind::Crashed.into(),
            message: "exit 101".into(),
            remedy: Some("reinstall".into()),
            problems: vec![],
            stderr_tail: format!("{}\nthread panicked at main.rs", "x".repeat(5000)),
            ran: true,
        };
        let text = failure_text(&tool(), &crashed);
        assert!(text.contains("What to do: reinstall"));
        assert!(text.ends_with("thread panicked at main.rs"));
        assert!(text.len() < 2300);
    }
}
