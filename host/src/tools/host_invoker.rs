//! The tool adapter wired to a real [`Host`]: discovery in, invocations out.
//!
//! A long-running caller (the MCP server) discovers once, at start, and
//! invokes the modules it found ([`Host::invoke_module`]) rather than
//! re-reading `modules/` on every call: the tool list it announced is the one
//! it serves.

use std::collections::HashMap;
use std::sync::Arc;

use modproto::contract::{self, Decision};
use modproto::{InvokeResult, Notification, ProgressParams};
use tokio::sync::mpsc;

use super::{InvokeCall, InvokeFailure, Invoker, ModuleEntry, Progress, ProgressSink, Toolbox};
use crate::discovery::InstalledModule;
use crate::host::Host;
use crate::invoke::{InvokeError, InvokeRequest};
use crate::overrides::{self, OverrideError};

/// Invokes through a [`Host`], over modules discovered once.
#[derive(Debug)]
pub struct HostInvoker {
    host: Host,
    modules: HashMap<String, InstalledModule>,
}

impl HostInvoker {
    pub fn new(host: Host, modules: Vec<InstalledModule>) -> Self {
        HostInvoker {
            host,
            modules: modules.into_iter().map(|m| (m.id.clone(), m)).collect(),
        }
    }
}

impl Invoker for HostInvoker {
    async fn invoke(&self, call: InvokeCall) -> Result<InvokeResult, InvokeFailure> {
        let Some(module) = self.modules.get(&call.module) else {
            return Err(InvokeFailure {
                kind: "unknown_module".into(),
                message: format!("module {:?} is no longer installed", call.module),
                remedy: Some("restart the server to pick up module changes".into()),
                problems: Vec::new(),
                stderr_tail: String::new(),
            });
        };
        let (sink, mut notifications) = mpsc::unbounded_channel::<Notification>();
        let request = InvokeRequest {
            approval: call.approval,
            start_ahead: call.start_ahead,
            progress: call.progress.is_some().then_some(sink),
            workspace: call.workspace,
            ..InvokeRequest::new(&call.module, &call.capability, call.input)
        };
        let invocation = self.host.invoke_module(module, request);
        tokio::pin!(invocation);
        // Relay progress while the call runs, in this same future: dropping it
        // (a cancel) drops the invocation and the relay together.
        let result = loop {
            tokio::select! {
                biased;
                Some(n) = notifications.recv() => relay(&n, call.progress.as_ref()),
                result = &mut invocation => {
                    while let Ok(n) = notifications.try_recv() {
                        relay(&n, call.progress.as_ref());
                    }
                    break result;
                }
            }
        };
        match result {
            Ok(outcome) => {
                let mut result = outcome.result;
                result.warnings.extend(
                    outcome
                        .host_warnings
                        .into_iter()
                        .map(|w| format!("host: {w}")),
                );
                Ok(result)
            }
            Err(e) => Err(failure(&e)),
        }
    }
}

fn relay(notification: &Notification, sink: Option<&ProgressSink>) {
    let Some(sink) = sink else { return };
    if notification.method != modproto::METHOD_PROGRESS {
        return;
    }
    let Some(params) = notification
        .params
        .clone()
        .and_then(|p| serde_json::from_value::<ProgressParams>(p).ok())
    else {
        return;
    };
    let _ = sink.try_send(Progress {
        progress: params.progress,
        total: params.total,
        message: params.message,
    });
}

fn failure(e: &InvokeError) -> InvokeFailure {
    InvokeFailure {
        kind: e.kind().to_owned(),
        message: e.to_string(),
        remedy: Some(e.remedy()),
        problems: e.problems(),
        stderr_tail: e.stderr_tail().to_owned(),
    }
}

/// The modules whose capabilities become tools: enabled, described, and not
/// refused by the contract pin.
pub fn tool_modules(discovered: &[InstalledModule]) -> Vec<ModuleEntry> {
    discovered
        .iter()
        .filter(|m| m.is_invocable())
        .filter_map(|m| {
            let descriptor = m.descriptor.clone()?;
            if matches!(
                contract::evaluate(Arc::clone(&descriptor)),
                Decision::Refused(_)
            ) {
                return None;
            }
            Some(ModuleEntry {
                descriptor,
                dir: m.knowledge_dir().map(|d| d.to_path_buf()),
            })
        })
        .collect()
}

/// Discover the host's modules, check the operator's overrides against them,
/// and build the toolbox. An override naming nothing is an error here, at
/// startup, rather than silently ignored.
pub async fn open_toolbox(host: &Host) -> Result<Toolbox<HostInvoker>, OverrideError> {
    let discovered = host.discover().await;
    let config = host.config();
    overrides::validate_overrides(
        &config.capabilities,
        discovered.iter().filter_map(|m| m.descriptor.as_deref()),
    )?;
    let modules = tool_modules(&discovered);
    host.engines().load_components_ahead(
        discovered
            .iter()
            .filter(|m| {
                m.transport == crate::runner::Transport::Component
                    && m.status == crate::discovery::ModuleStatus::Enabled
            })
            .map(|m| m.program.clone())
            .collect(),
    );
    Ok(Toolbox::new(
        modules,
        &config.approval,
        &config.capabilities,
        HostInvoker::new(host.clone(), discovered),
        host.layout().clone(),
        host.workspace().map(std::path::Path::to_path_buf),
    ))
}
