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
use super::withdrawn::Withdrawn;
use crate::CallWorkspace;
use crate::approval::{self, ApprovalConfig, ApprovedBy};
use crate::home::HomeLayout;
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
}

impl<I: Invoker> Loaded<I> {
    pub(crate) fn new(
        modules: Vec<ModuleEntry>,
        approval: &ApprovalConfig,
        overrides: &BTreeMap<String, CapabilityOverride>,
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
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&ToolDef> {
        self.index.get(name).map(|&i| &self.registry.tools[i])
    }

    pub(super) async fn call_in(
        &self,
        name: &str,
        input: Value,
        approver: Option<ApprovedBy>,
        progress: Option<ProgressSink>,
        workspace: &CallWorkspace,
        glance: Glance,
    ) -> Result<ToolOutcome, CallError> {
        let Some(tool) = self.get(name) else {
            return match self.withdrawn.get(name) {
                Some(withdrawn) => withdrawn.answer(),
                None => Err(CallError::UnknownTool(name.to_owned())),
            };
        };
        let record = approval::authorize(&tool.approval, &tool.name, approver)?;
        if knowledge_tool::is_this(tool) {
            return Ok(knowledge_tool::run(tool, &self.modules, &input));
        }
        let module = &self.modules[&tool.module];
        let call = InvokeCall {
            module: tool.module.clone(),
            capability: tool.capability.clone(),
            input,
            approval: record,
            start_ahead: tool.approval.allows_starting_ahead(),
            progress,
            workspace: workspace.clone(),
            glance,
        };
        let result = self.invoker.invoke(call).await;
        let roots = execute::RootPaths {
            descriptor: &module.descriptor,
            home: &self.home,
            workspace: workspace.resolve(self.workspace.as_deref()),
        };
        Ok(execute::outcome(tool, result, &roots))
    }
}
