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
use crate::approval::{
    self, ApprovalConfig, ApprovedBy, CallPolicy, PolicyDecision, PolicyVerdict,
};
use crate::audit::RefusedCall;
use crate::caller::Caller;
use crate::home::HomeLayout;
use crate::lockdown::{self, CallLockdown, Lockdown, LockdownConfig};
use crate::overrides::CapabilityOverride;
use modhost_egress::CallGrant;
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
    /// decided again, for the network the lockdown leaves it, and so is a
    /// caller other than the local user when some rule names callers.
    approval: ApprovalConfig,
    /// Whether some rule names callers (`ApprovalConfig::names_callers`):
    /// else every caller's verdicts are the registered ones.
    names_callers: bool,
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
            names_callers: approval.names_callers(),
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

    /// Whether a list made now could differ from one `previous` made for
    /// some caller: the tools changed, or the rules that decide for callers
    /// other than the local user did (its verdicts are in the tools).
    pub(super) fn lists_differently_from(&self, previous: &Loaded<I>) -> bool {
        self.registry.tools != previous.registry.tools
            || ((self.names_callers || previous.names_callers)
                && self.approval != previous.approval)
    }

    /// Whether `caller`'s verdicts are decided for it rather than read from
    /// the tools (registered for the local user): only when some rule
    /// names callers, and never for the local user.
    fn decides_for(&self, caller: &Caller) -> bool {
        self.names_callers && !caller.is_the_local_user()
    }

    /// The verdict on calls of `tool` by `caller` granted `network`,
    /// evaluated from the rules (no discovery, nothing run).
    fn decision(
        &self,
        tool: &ToolDef,
        caller: &Caller,
        network: Option<&CallGrant>,
    ) -> PolicyDecision {
        if knowledge_tool::is_this(tool) {
            return knowledge_tool::decision(&self.approval, caller, &tool.effects);
        }
        let found = self
            .modules
            .get(&tool.module)
            .and_then(|m| Some((&m.descriptor, m.descriptor.capability(&tool.capability)?)));
        match found {
            Some((descriptor, capability)) => approval::decide(
                &self.approval,
                caller,
                descriptor,
                capability,
                &tool.name,
                network,
            ),
            // A tool of another load (a list taken before a reload): no
            // rule of this one can be said to allow it.
            None => PolicyDecision {
                verdict: PolicyVerdict::Deny,
                rule: format!(
                    "{} is not among the tools loaded now; list the tools again",
                    tool.name
                ),
                from_rule: false,
            },
        }
    }

    /// Whether `tool` is offered to `caller`: not denied to it, and, for
    /// the knowledge tool, with some module whose guides it may read.
    pub(super) fn offers(&self, tool: &ToolDef, caller: &Caller) -> bool {
        if !self.decides_for(caller) {
            return tool.is_offered();
        }
        let network = tool.network.as_ref();
        if self.decision(tool, caller, network).verdict == PolicyVerdict::Deny {
            return false;
        }
        !knowledge_tool::is_this(tool)
            || knowledge_tool::listed_modules(tool).any(|id| self.serves_guides_of(id, caller))
    }

    /// `tool` as `caller` is shown it: the knowledge tool's module list cut
    /// to the modules whose guides `caller` may read; `None` for every
    /// other tool, and whenever nothing is cut (the registered definition
    /// serves as it is).
    pub(super) fn narrowed_for(&self, tool: &ToolDef, caller: &Caller) -> Option<ToolDef> {
        if !knowledge_tool::is_this(tool) || !self.decides_for(caller) {
            return None;
        }
        knowledge_tool::narrowed(tool, &|id| self.serves_guides_of(id, caller))
    }

    /// Whether `caller` may read the guides of module `id`: some tool of
    /// it is offered to it (as the registry serves the guides of a module
    /// only while some tool of it is offered).
    fn serves_guides_of(&self, id: &str, caller: &Caller) -> bool {
        !self.decides_for(caller)
            || self.registry.tools.iter().any(|t| {
                t.module == id
                    && !knowledge_tool::is_this(t)
                    && self.decision(t, caller, t.network.as_ref()).verdict != PolicyVerdict::Deny
            })
    }

    /// The policy of one call of `tool` by `caller`, in `lockdown` or not:
    /// the verdict registered for it (the local user's, and every caller's
    /// while no rule names callers) or decided for `caller`; in lockdown,
    /// the verdict for the network the lockdown leaves it, moved to ask a
    /// person when it writes or spawns (`crate::lockdown::policy`).
    pub(super) fn policy(
        &self,
        tool: &ToolDef,
        caller: &Caller,
        lockdown: Option<&CallLockdown>,
    ) -> CallPolicy {
        let Some(lockdown) = lockdown else {
            let decision = if self.decides_for(caller) {
                self.decision(tool, caller, tool.network.as_ref())
            } else {
                tool.approval.clone()
            };
            return CallPolicy::new(decision, tool.network.as_ref());
        };
        let narrowed = tool.network.as_ref().map(|grant| lockdown.narrow(grant));
        let base = self.decision(tool, caller, narrowed.as_ref());
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

    /// Refuse a call of `tool` by `caller`, from whom it is hidden (not
    /// offered: denied to it by a rule, or the knowledge tool with no
    /// guide it may read), exactly as a call of a tool that does not
    /// exist is refused: the same error, counted against the caller's
    /// quota as a name nobody offers is. A remote caller then learns
    /// neither which hidden tools exist (by guessing names) nor the
    /// operator's rule names (which often say what is kept from whom). The
    /// audit record keeps the real reason: the deny and its rule.
    fn refuse_hidden(
        &self,
        tool: &ToolDef,
        caller: &Caller,
        input: &Value,
    ) -> Result<ToolOutcome, CallError> {
        let principal = caller.principal_unless_local();
        let decision = self.decision(tool, caller, tool.network.as_ref());
        let (kind, rule): (modproto::ErrorKind, &str) = if decision.verdict == PolicyVerdict::Deny {
            (modproto::ModuleErrorKind::Denied.into(), &decision.rule)
        } else {
            (
                modproto::ModuleErrorKind::NotFound.into(),
                "hidden: the caller may read no module's guides",
            )
        };
        let (kind, retry_after_s) = match self.invoker.admit_unknown_tool(principal) {
            Ok(()) => (kind, None),
            Err(limited) => (
                modproto::HostErrorKind::RateLimited.into(),
                Some(limited.retry_after_s),
            ),
        };
        let mut refused = RefusedCall::new(&tool.name, input, kind);
        refused.rule = Some(rule);
        refused.retry_after_s = retry_after_s;
        refused.principal = principal;
        self.record_refusal(&refused);
        Err(CallError::UnknownTool(tool.name.clone()))
    }

    /// Run tool `name` for `caller`: its policy decided for that caller,
    /// its principal in the call (and so in the audit record and
    /// `[quotas]`) and in every refusal recorded.
    #[allow(clippy::too_many_arguments)] // one call's every part, passed on whole
    pub(super) async fn call_in(
        &self,
        caller: &Caller,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        glance: Glance,
        lockdown: Option<&Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        let principal = caller.principal_unless_local();
        let found = self.get(name);
        if let Some(tool) = found.filter(|t| !caller.is_the_local_user() && !self.offers(t, caller))
        {
            return self.refuse_hidden(tool, caller, &input);
        }
        let Some(tool) = found else {
            // Refused without running anything: recorded all the same.
            let (kind, rule, retry_after_s) = match self.withdrawn.get(name).map(|w| &w.why) {
                Some(Why::Refused(refusal)) => (refusal.kind(), refusal.rule(), None),
                Some(Why::Failed(failure)) => (failure.kind.clone(), None, None),
                // A name nobody offers counts against the caller's quota
                // (each is recorded; a flood of them is bounded too).
                None => match self.invoker.admit_unknown_tool(principal) {
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
            refused.principal = principal;
            self.record_refusal(&refused);
            return match self.withdrawn.get(name) {
                Some(withdrawn) => {
                    // Its module's session process, if the connection has
                    // one, does not run on with its grants.
                    crate::SessionScope::end_module_in_current(&withdrawn.tool.module);
                    withdrawn.answer()
                }
                None => Err(CallError::UnknownTool(name.to_owned())),
            };
        };
        let locked = self.call_lockdown(tool, lockdown);
        let policy = self.policy(tool, caller, locked.as_ref());
        let record = match approval::authorize_call(&policy, &tool.name, approver) {
            Ok(record) => record,
            Err(refusal) => {
                let mut refused = RefusedCall::new(name, &input, refusal.kind());
                refused.rule = refusal.rule();
                refused.principal = principal;
                self.record_refusal(&refused);
                return Err(refusal.into());
            }
        };
        if knowledge_tool::is_this(tool) {
            let serves = |id: &str| self.serves_guides_of(id, caller);
            return Ok(knowledge_tool::run(tool, &self.modules, &input, &serves));
        }
        let module = &self.modules[&tool.module];
        let call = InvokeCall {
            module: tool.module.clone(),
            capability: tool.capability.clone(),
            input,
            principal: principal.map(str::to_owned),
            // Needing no record, the call was allowed outright, by what
            // this policy says for this caller: its audit record says so.
            allowed_by: record.is_none().then(|| policy.decision.rule.clone()),
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
