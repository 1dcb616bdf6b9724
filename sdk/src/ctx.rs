//! [`Ctx`]: what a handler gets besides its input.
//!
//! Roots are opened lazily, on first use, so a capability that does not
//! touch a root never fails because it is missing, and a missing one fails
//! with a message that says which root and how the operator grants it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use modproto::{
    ArtifactRef, Effects, GrantedRoot, InvokeParams, Notification, ProgressParams, RootDecl,
    RootKind,
};
use serde_json::{Map, Value};

use crate::{ModError, Root};

/// The context of one invocation.
pub struct Ctx {
    request_id: String,
    capability: String,
    deadline: Instant,
    granted: BTreeMap<String, GrantedRoot>,
    declared: Vec<RootDecl>,
    /// What the invoked capability declares it touches: a root it does not
    /// name is never granted, whatever the operator configures.
    effects: Effects,
    opened: BTreeMap<String, Root>,
    binaries: BTreeMap<String, PathBuf>,
    extra: Map<String, Value>,
    out: Rc<RefCell<dyn Write>>,
    pub(crate) artifacts: Vec<ArtifactRef>,
    pub(crate) warnings: Vec<String>,
    pub(crate) text: Option<String>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("request_id", &self.request_id)
            .field("capability", &self.capability)
            .field("granted", &self.granted)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    pub(crate) fn new(
        params: InvokeParams,
        declared: &[RootDecl],
        effects: &Effects,
        started: Instant,
        out: Rc<RefCell<dyn Write>>,
    ) -> Self {
        Ctx {
            request_id: params.request_id,
            capability: params.capability,
            deadline: started + std::time::Duration::from_millis(params.deadline_ms),
            granted: params.roots,
            declared: declared.to_vec(),
            effects: effects.clone(),
            opened: BTreeMap::new(),
            binaries: params
                .binaries
                .into_iter()
                .map(|(k, v)| (k, PathBuf::from(v)))
                .collect(),
            extra: params.extra,
            out,
            artifacts: Vec::new(),
            warnings: Vec::new(),
            text: None,
        }
    }

    /// The host's id for this call.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The capability being invoked.
    pub fn capability(&self) -> &str {
        &self.capability
    }

    /// When the host stops waiting. Long work should check it and return
    /// what it has (marked truncated) rather than be killed.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    pub fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The granted root `name`, opened. Fails with `root_missing` when the
    /// host did not grant it for this call or it cannot be opened.
    pub fn root(&mut self, name: &str) -> Result<&Root, ModError> {
        if !self.opened.contains_key(name) {
            let root = self.open_root(name)?;
            self.opened.insert(name.to_owned(), root);
        }
        Ok(&self.opened[name])
    }

    /// Whether root `name` was granted for this call (without opening it).
    pub fn has_root(&self, name: &str) -> bool {
        self.granted.contains_key(name)
    }

    /// The path of a granted binary.
    pub fn binary(&self, name: &str) -> Result<&std::path::Path, ModError> {
        self.binaries.get(name).map(PathBuf::as_path).ok_or_else(|| {
            ModError::root_missing(format!("binary `{name}` was not granted for this call"))
                .with_remedy(format!(
                    "declare `{name}` in the module's binaries and in the capability's effects.spawns; the operator must make it available to the host"
                ))
        })
    }

    /// The secret `name`, which this capability declares
    /// ([`crate::Capability::secrets`]) and the host gave this call as an
    /// environment variable. Fails when the capability does not declare it
    /// (a bug in the module: the host never gives an undeclared secret), or
    /// when the call did not get it (a host that grants secrets refuses the
    /// call instead; another host may not).
    ///
    /// Treat the value as the credential it is: the host masks it in what
    /// the call returns, but a module that writes it into a file or sends
    /// it somewhere has given it away.
    pub fn secret(&self, name: &str) -> Result<String, ModError> {
        if !self.effects.secrets.iter().any(|s| s == name) {
            return Err(ModError::new(
                modproto::ModuleErrorKind::Internal,
                format!(
                    "capability `{}` asked for secret `{name}`, which it does not declare",
                    self.capability
                ),
            )
            .with_remedy(format!(
                "declare it with `.secrets([\"{name}\"])` on the capability, so the operator can grant it"
            )));
        }
        std::env::var(name).map_err(|_| {
            ModError::failed(format!("secret `{name}` was not given to this call"))
                .with_remedy(format!(
                    "the operator stores it in the host's secrets.toml and grants it with `secrets = [\"{name}\"]` under the capability's [capabilities.\"<module>.{}\"] entry in config.toml",
                    self.capability
                ))
        })
    }

    /// Caller keys that passed through at the request root (never reserved keys).
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// Send a `progress` notification now (flushed, before the response).
    pub fn progress(&mut self, done: f64, total: Option<f64>, message: Option<&str>) {
        let params = ProgressParams {
            request_id: self.request_id.clone(),
            progress: done,
            total,
            message: message.map(str::to_owned),
        };
        let note = Notification::new(modproto::METHOD_PROGRESS, serde_json::to_value(params).ok());
        let line = modproto::Message::Notification(note).to_line();
        let mut out = self.out.borrow_mut();
        // Progress is advisory: a closed pipe here surfaces when the response is written.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }

    /// Something the caller should know that did not stop the call.
    pub fn warn(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }

    /// A human/model-readable rendering of the output.
    pub fn set_text(&mut self, text: impl Into<String>) {
        self.text = Some(text.into());
    }

    /// Write `bytes` to `path` in the artifacts root and report it in the result.
    pub fn write_artifact(
        &mut self,
        path: &str,
        bytes: &[u8],
        media_type: Option<&str>,
        title: Option<&str>,
    ) -> Result<ArtifactRef, ModError> {
        if !modproto::invoke::is_clean_relative_path(path) {
            return Err(ModError::path_escape(format!(
                "artifact path {path:?} must be relative, `/`-separated and stay inside the artifacts root"
            )));
        }
        let root_name = self.artifacts_root_name();
        self.root(&root_name)?.write(path, bytes)?;
        let artifact = ArtifactRef {
            root: root_name,
            path: path.to_owned(),
            media_type: media_type.map(str::to_owned),
            title: title.map(str::to_owned),
        };
        self.artifacts.push(artifact.clone());
        Ok(artifact)
    }

    /// The declared root of kind `artifacts`, else the conventional name.
    fn artifacts_root_name(&self) -> String {
        self.declared
            .iter()
            .find(|r| r.kind == RootKind::Artifacts)
            .map_or_else(|| "artifacts".to_owned(), |r| r.name.clone())
    }

    fn open_root(&self, name: &str) -> Result<Root, ModError> {
        let Some(granted) = self.granted.get(name) else {
            return Err(ModError::root_missing(format!(
                "root `{name}` was not granted for this call"
            ))
            .with_remedy(self.grant_remedy(name)));
        };
        Root::open(name, &granted.path, granted.kind, granted.access).map_err(|e| {
            ModError::root_missing(format!(
                "root `{name}` was granted as {:?} but cannot be opened: {e}",
                granted.path
            ))
            .with_remedy(self.grant_remedy(name))
        })
    }

    /// How `name` comes to be granted. The SDK knows its own declarations,
    /// so it tells apart the author's omission (the capability does not name
    /// the root in its effects: the host never grants it, whatever the
    /// operator configures) from the operator's (a source root named but
    /// not configured, a workspace that does not exist).
    fn grant_remedy(&self, name: &str) -> String {
        let Some(kind) = self
            .declared
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.kind)
        else {
            return format!(
                "root `{name}` is not declared by this module: the module's author must declare it in the descriptor's roots and name it in capability `{}`'s effects.reads (or effects.writes)",
                self.capability
            );
        };
        let named = self
            .effects
            .reads
            .iter()
            .chain(&self.effects.writes)
            .any(|r| r == name);
        if !named {
            return format!(
                "capability `{cap}` does not name root `{name}` in its effects, and the host grants a call only the roots its capability names: the module's author must add `{name}` to `{cap}`'s effects.reads (effects.writes to change it); configuring the root does not help until then",
                cap = self.capability
            );
        }
        match kind {
            RootKind::Source => format!(
                "capability `{}` names source root `{name}`; the operator must configure it: pass `--source-root {name}=PATH` to `modhost invoke`, or set `{name} = \"PATH\"` under `[source_roots]` in config.toml",
                self.capability
            ),
            RootKind::Workspace => format!(
                "root `{name}` is the workspace: run the host from an existing directory or pass `--workspace DIR`"
            ),
            RootKind::State | RootKind::Artifacts => format!(
                "capability `{}` names `{name}`, which the host creates under its home for every call that names it: check the host's warnings and that its home is writable",
                self.capability
            ),
        }
    }
}
