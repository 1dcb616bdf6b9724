//! One load of a toolbox: the registry of the modules as they were when
//! loaded, and the call of one of its tools. A live toolbox swaps loads;
//! a fixed one keeps its first.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;

use super::call_error::CallError;
use super::execute::{self, InvokeCall, Invoker, ProgressSink, ToolOutcome};
use super::knowledge_tool;
use super::registry::{Registry, build_registry};
use super::tool_def::{ModuleEntry, ToolDef};
use super::withdrawn::{Why, Withdrawn};
use crate::CallWorkspace;
use crate::approval::{self, ApprovalConfig, ApprovedBy, CallPolicy};
use crate::audit::RefusedCall;
use crate::home::HomeLayout;
use crate::lockdown::{self, CallLockdown, Lockdown, LockdownConfig};
use crate::overrides::CapabilityOverride;
use modhost_runner::file_identity::Glance;

/// One load of a toolbox: the registry and what executing its tools needs.
#[derive(Debug)]
pub(crate) struct Loaded<I> {
    pub(super) registry: Registry,
    pub(super) index: HashMap<String, usize>,
    pub(super) modules: BTreeMap<String, ModuleEntry>,
    pub(super) invoker: I,
    pub(super) home: HomeLayout,
    pub(super) workspace: Option<PathBuf>,
    /// Tools an earlier load offered that are gone now, with why: a client
    /// that calls one is told the reason, not "no such tool".
    pub(super) withdrawn: HashMap<String, Withdrawn>,
    /// The rules the tools' verdicts came from: a call in lockdown is
    /// decided again, for the network the lockdown leaves it.
    approval: ApprovalConfig,
    /// `[lockdown]` as this load read it.
    lockdown: LockdownConfig,
}

impl<I: Invoker> Loaded<I> {
    pub(crate) fn new(
        modules: Vec<ModuleEntry>,
        approval: &ApprovalConfig,
        overrides: &BTreeMap<String, CapabilityOverride>,
        lockdown: &LockdownConfig,
        invoker: I,
        home: HomeLayout,
        workspace: Option<PathBuf>,
    ) -> Self {
        let registry = build_registry(&modules, approval, overrides);
        let index = registry
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let modules = modules
            .into_iter()
            .map(|m| (m.descriptor.id.clone(), m))
            .collect();
        Loaded {
            registry,
            index,
            modules,
            invoker,
            home,
            workspace,
            withdrawn: HashMap::new(),
            approval: approval.clone(),
            lockdown: lockdown.clone(),
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&ToolDef> {
        self.index.get(name).map(|&i| &self.registry.tools[i])
    }

    /// The lockdown a connection enters once words of a call of `tool`
    /// reached it (its result, a failure it ran into, a progress message):
    /// `None` for a tool whose output is trusted, or with lockdown off.
    pub(super) fn taint_of(&self, tool: &ToolDef) -> Option<Lockdown> {
        (tool.effects.output_is_untrusted() && self.lockdown.enabled).then(|| Lockdown {
            since: tool.name.clone(),
        })
    }

    /// The lockdown a call of `tool` on a connection in `lockdown` runs
    /// under; none for the built-in knowledge tool (the modules' own
    /// guides: nothing to narrow, nothing written).
    pub(super) fn call_lockdown(
        &self,
        tool: &ToolDef,
        lockdown: Option<&Lockdown>,
    ) -> Option<CallLockdown> {
        lockdown
            .filter(|_| !knowledge_tool::is_this(tool))
            .map(|l| l.for_call(&self.lockdown))
    }

    /// The policy of one call of `tool`, in `lockdown` or not: the
    /// verdict registered for it, or, in lockdown, the verdict for the
    /// network the lockdown leaves it, moved to ask a person when it writes
    /// or spawns (`crate::lockdown::policy`).
    pub(super) fn policy(&self, tool: &ToolDef, lockdown: Option<&CallLockdown>) -> CallPolicy {
        let Some(lockdown) = lockdown else {
            return CallPolicy::new(tool.approval.clone(), tool.network.as_ref());
        };
        let narrowed = tool.network.as_ref().map(|grant| lockdown.narrow(grant));
        let base = self
            .modules
            .get(&tool.module)
            .and_then(|m| {
                let capability = m.descriptor.capability(&tool.capability)?;
                Some(approval::decide(
                    &self.approval,
                    &m.descriptor,
                    capability,
                    &tool.name,
                    narrowed.as_ref(),
                ))
            })
            .unwrap_or_else(|| tool.approval.clone());
        lockdown::policy(base, &tool.effects, narrowed.as_ref(), lockdown)
    }

    /// Tell the invoker of `call`, refused before it was invoked, naming
    /// the module and capability of its tool when this load knows them.
    pub(super) fn record_refusal(&self, call: &RefusedCall<'_>) {
        let tool = self
            .get(call.tool)
            .or_else(|| self.withdrawn.get(call.tool).map(|w| &w.tool));
        let call = RefusedCall {
            module: call.module.or(tool.map(|t| t.module.as_str())),
            capability: call.capability.or(tool.map(|t| t.capability.as_str())),
            ..call.clone()
        };
        self.invoker.refused(&call);
    }

    #[allow(clippy::too_many_arguments)] // one call's every part, passed on whole
    pub(super) async fn call_in(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        glance: Glance,
        lockdown: Option<&Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        let Some(tool) = self.get(name) else {
            // Refused without running anything: recorded all the same.
            let (kind, rule, retry_after_s) = match self.withdrawn.get(name).map(|w| &w.why) {
                Some(Why::Refused(refusal)) => (refusal.kind(), refusal.rule(), None),
                Some(Why::Failed(failure)) => (failure.kind.clone(), None, None),
                // A name nobody offers counts against the caller's quota
                // (each is recorded; a flood of them is bounded too).
                None => match self.invoker.admit_unknown_tool() {
                    Ok(()) => (modproto::ModuleErrorKind::NotFound.into(), None, None),
                    Err(limited) => (
                        modproto::HostErrorKind::RateLimited.into(),
                        None,
                        Some(limited.retry_after_s),
                    ),
                },
            };
            let mut refused = RefusedCall::new(name, &input, kind);
            refused.rule = rule;
            refused.retry_after_s = retry_after_s;
            self.record_refusal(&refused);
            return match self.withdrawn.get(name) {
                Some(withdrawn) => withdrawn.answer(),
                None => Err(CallError::UnknownTool(name.to_owned())),
            };
        };
        let locked = self.call_lockdown(tool, lockdown);
        let policy = self.policy(tool, locked.as_ref());
        let record = match approval::authorize_call(&policy, &tool.name, approver) {
            Ok(record) => record,
            Err(refusal) => {
                let mut refused = RefusedCall::new(name, &input, refusal.kind());
                refused.rule = refusal.rule();
                self.record_refusal(&refused);
                return Err(refusal.into());
            }
        };
        if knowledge_tool::is_this(tool) {
            return Ok(knowledge_tool::run(tool, &self.modules, &input));
        }
        let module = &self.modules[&tool.module];
        let call = InvokeCall {
            module: tool.module.clone(),
            capability: tool.capability.clone(),
            input,
            approval: record,
            // As decided for this call: one the lockdown moved to `ask`
            // no longer takes a process started ahead of its approval.
            start_ahead: policy.decision.allows_starting_ahead(),
            progress,
            workspace: workspace.clone(),
            lockdown: locked,
            glance,
        };
        let result = self.invoker.invoke(call).await;
        // What the module wrote reaches the agent: its result, or the
        // words of a failure it ran into (`crate::lockdown`).
        let module_spoke = match &result {
            Ok(_) => true,
            Err(failure) => failure.ran,
        };
        let roots = execute::RootPaths {
            descriptor: &module.descriptor,
            home: &self.home,
            workspace: workspace.resolve(self.workspace.as_deref()),
        };
        let mut outcome = execute::outcome(tool, result, &roots);
        if module_spoke {
            outcome.enters_lockdown = self.taint_of(tool);
        }
        Ok(outcome)
    }
}
