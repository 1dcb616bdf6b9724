//! The tool adapter wired to a real [`Host`]: discovery in, invocations out.
//!
//! A long-running caller (the MCP server) invokes the modules a discovery
//! found ([`Host::invoke_module`]) rather than re-reading `modules/` on every
//! call: the tool list it announced is the one it serves, until a watched
//! file says the operator changed something ([`open_live_toolbox`],
//! [`super::live`]), and then it discovers again.

use std::collections::HashMap;
use std::sync::Arc;

use modproto::contract::{self, ContractDecision};
use modproto::{Notification, ProgressParams};
use tokio::sync::mpsc;

use super::{
    InvokeCall, InvokeFailure, Invoked, Invoker, Loaded, ModuleEntry, Progress, ProgressSink,
    ToolDef, Toolbox, knowledge_tool, live,
};
use crate::approval::Refusal;
use crate::discovery::{InstalledModule, ModuleStatus};
use crate::host::Host;
use crate::invoke::{InvokeError, InvokeRequest};
use crate::overrides::{self, OverrideError};
use modhost_runner::{ComponentAhead, Transport};

/// The invoker of every toolbox the library opens ([`open_toolbox`],
/// [`open_live_toolbox`]): calls go through a [`Host`], over the modules
/// that toolbox discovered.
#[derive(Debug)]
pub struct HostInvoker {
    host: Host,
    modules: HashMap<String, InstalledModule>,
}

impl HostInvoker {
    pub(crate) fn new(host: Host, modules: Vec<InstalledModule>) -> Self {
        HostInvoker {
            host,
            modules: modules.into_iter().map(|m| (m.id.clone(), m)).collect(),
        }
    }
}

impl Invoker for HostInvoker {
    fn refused(&self, call: &crate::audit::RefusedCall<'_>) {
        let digest = call
            .module
            .and_then(|id| self.modules.get(id))
            .and_then(|m| m.digest.as_deref());
        self.host.record_refusal(&crate::audit::RefusedCall {
            digest: call.digest.or(digest),
            ..call.clone()
        });
    }

    fn admit_question(&self, principal: Option<&str>) -> Result<(), crate::quota::RateLimited> {
        self.host.admit_question(principal)
    }

    fn admit_unknown_tool(&self, principal: Option<&str>) -> Result<(), crate::quota::RateLimited> {
        self.host.admit_unknown_tool(principal)
    }

    async fn invoke(&self, call: InvokeCall) -> Result<Invoked, InvokeFailure> {
        let Some(module) = self.modules.get(&call.module) else {
            crate::SessionScope::end_module_in_current(&call.module);
            return Err(InvokeFailure {
                kind: modproto::HostErrorKind::UnknownModule.into(),
                message: format!("module {:?} is no longer installed", call.module),
                remedy: Some(
                    "`modhost list` shows the installed modules; list the tools again".into(),
                ),
                problems: Vec::new(),
                stderr_tail: String::new(),
                ran: false,
            });
        };
        let (sink, mut notifications) = mpsc::unbounded_channel::<Notification>();
        let request = InvokeRequest {
            approval: call.approval,
            start_ahead: call.start_ahead,
            progress: call.progress.is_some().then_some(sink),
            workspace: call.workspace,
            glance: call.glance,
            lockdown: call.lockdown,
            principal: call.principal,
            allowed_by: call.allowed_by,
            // The connection's session, when the call runs in one.
            session: crate::SessionScope::current(),
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
                Ok(Invoked {
                    result,
                    network: outcome.network,
                })
            }
            Err(e) => {
                // Refused for the module itself: its session process, if
                // the connection has one, does not run on with its grants.
                if matches!(
                    e,
                    InvokeError::ModuleBroken { .. }
                        | InvokeError::ModuleDisabled { .. }
                        | InvokeError::ContractRefused { .. }
                        | InvokeError::Nonconforming { .. }
                        | InvokeError::Unpinned { .. }
                        | InvokeError::Changed { .. }
                ) {
                    crate::SessionScope::end_module_in_current(&call.module);
                }
                Err(failure(&e))
            }
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

pub(crate) fn failure(e: &InvokeError) -> InvokeFailure {
    InvokeFailure {
        kind: e.kind(),
        message: e.to_string(),
        remedy: Some(e.remedy()),
        problems: e.problems(),
        stderr_tail: e.stderr_tail().to_owned(),
        ran: e.capability_ran(),
    }
}

/// The modules whose capabilities become tools: enabled, described, and not
/// refused by the contract pin.
pub(crate) fn tool_modules(discovered: &[InstalledModule]) -> Vec<ModuleEntry> {
    discovered
        .iter()
        .filter(|m| m.is_invocable())
        .filter_map(|m| {
            let descriptor = m.descriptor.clone()?;
            if matches!(
                contract::evaluate(Arc::clone(&descriptor)),
                ContractDecision::Refused(_)
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
    let (loaded, _) = load(host, None).await?;
    Ok(Toolbox {
        live: Arc::new(live::Live::fixed(loaded)),
    })
}

/// [`open_toolbox`] for a long-running server: the toolbox follows the
/// operator's changes to the home (modules installed, removed, enabled,
/// disabled, pinned, unpinned, `config.toml` edited) while it runs, and
/// [`Toolbox::changes`] says when its list changed.
pub async fn open_live_toolbox(host: &Host) -> Result<Toolbox<HostInvoker>, OverrideError> {
    let (loaded, discovered) = load(host, None).await?;
    let first = live::Reloaded {
        loaded,
        watched: crate::discovery::watched_paths(host.layout(), &discovered),
    };
    let source = HostSource { host: host.clone() };
    Ok(Toolbox {
        live: live::Live::following(first, Box::new(source)),
    })
}

/// Discover, check the overrides, build the tools; with `previous`, say why
/// each tool it had and this load lacks is gone.
async fn load(
    host: &Host,
    previous: Option<&Loaded<HostInvoker>>,
) -> Result<(Loaded<HostInvoker>, Vec<InstalledModule>), OverrideError> {
    let discovered = host.discover().await;
    let config = host.config();
    overrides::validate_overrides(
        &config.capabilities,
        discovered.iter().filter_map(|m| m.descriptor.as_deref()),
    )?;
    overrides::validate_quota_tools(
        &config.quotas.tools,
        discovered.iter().filter_map(|m| m.descriptor.as_deref()),
    )?;
    let modules = tool_modules(&discovered);
    host.engines().resolve_native_path_ahead(
        discovered
            .iter()
            .filter(|m| m.transport == Transport::Native && m.status == ModuleStatus::Enabled)
            .map(|m| {
                let declares_binaries = m
                    .descriptor
                    .as_ref()
                    .is_some_and(|d| !d.binaries.is_empty());
                (m.program.as_path(), declares_binaries)
            }),
    );
    host.prepare_schemas_ahead(
        discovered
            .iter()
            .filter(|m| m.status == ModuleStatus::Enabled)
            .filter_map(|m| m.descriptor.as_deref())
            .flat_map(|d| &d.capabilities)
            .flat_map(|c| std::iter::once(&c.input_schema).chain(&c.output_schema))
            .cloned()
            .collect(),
    );
    let mut loaded = Loaded::new(
        modules,
        &config.approval,
        &config.capabilities,
        &config.lockdown,
        HostInvoker::new(host.clone(), discovered.clone()),
        host.layout().clone(),
        host.workspace().map(std::path::Path::to_path_buf),
    );
    host.engines()
        .load_components_ahead(components_ahead(&discovered, &loaded.registry.tools));
    if let Some(previous) = previous {
        let gone = previous
            .registry
            .tools
            .iter()
            .chain(previous.withdrawn.values().map(|w| &w.tool))
            .filter(|t| loaded.get(&t.name).is_none());
        loaded.withdrawn = gone
            .map(|tool| {
                let why = why_withdrawn(host, &discovered, tool);
                let withdrawn = live::Withdrawn {
                    tool: tool.clone(),
                    why,
                };
                (tool.name.clone(), withdrawn)
            })
            .collect();
    }
    Ok((loaded, discovered))
}

/// The enabled components a long-running host loads before their first
/// call, each with whether its first call's instance may be made then too:
/// only when a tool of it may start ahead (its approval verdict is
/// `allow`), as a call that needs approving first would never take it.
/// Only the module's own tools count: the built-in knowledge tool, always
/// allowed, is listed under the reserved id `modhost`, which a module
/// placed by hand in `modules/modhost/` would otherwise share.
fn components_ahead(discovered: &[InstalledModule], tools: &[ToolDef]) -> Vec<ComponentAhead> {
    discovered
        .iter()
        .filter(|m| m.transport == Transport::Component && m.status == ModuleStatus::Enabled)
        .map(|m| ComponentAhead {
            program: m.program.clone(),
            instance_too: tools.iter().any(|t| {
                t.module == m.id
                    && !knowledge_tool::is_this(t)
                    && t.approval.allows_starting_ahead()
            }),
        })
        .collect()
}

/// Why `tool`, offered before, is not offered now. Decided from the new
/// discovery and configuration alone: nothing is run.
fn why_withdrawn(host: &Host, discovered: &[InstalledModule], tool: &ToolDef) -> live::Why {
    let Some(module) = discovered.iter().find(|m| m.id == tool.module) else {
        return live::Why::Failed(InvokeFailure {
            kind: modproto::HostErrorKind::UnknownModule.into(),
            message: format!("module {:?} was removed while this server ran", tool.module),
            remedy: Some("`modhost list` shows the installed modules; list the tools again".into()),
            problems: Vec::new(),
            stderr_tail: String::new(),
            ran: false,
        });
    };
    let descriptor = match crate::invoke::standing_refusal(module) {
        Ok(descriptor) => descriptor,
        Err(e) => return live::Why::Failed(failure(&e)),
    };
    let capability = descriptor
        .capabilities
        .iter()
        .find(|c| c.id == tool.capability);
    let config = host.config();
    if let Some(capability) = capability
        && let Err(refusal @ Refusal::Disabled { .. }) = super::gate(
            &config.approval,
            &config.capabilities,
            descriptor,
            capability,
            None,
        )
    {
        return live::Why::Refused(refusal);
    }
    live::Why::Failed(InvokeFailure {
        kind: modproto::ModuleErrorKind::NotFound.into(),
        message: match capability {
            None => format!(
                "module {} no longer has capability {}",
                tool.module, tool.capability
            ),
            Some(_) => format!("{} is no longer offered", tool.name),
        },
        remedy: Some("list the tools again; `modhost tools` says why one is left out".into()),
        problems: Vec::new(),
        stderr_tail: String::new(),
        ran: false,
    })
}

/// The host as a [`live::ToolSource`]: `config.toml` read again, then
/// discovery, on a thread and runtime of its own.
struct HostSource {
    host: Host,
}

impl live::ToolSource<HostInvoker> for HostSource {
    fn load(&self, previous: &Loaded<HostInvoker>) -> Result<live::Reloaded<HostInvoker>, String> {
        let reason = |e: &dyn std::fmt::Display| {
            format!(
                "the modules or config.toml changed and cannot be loaded again: {e}; every call is refused until this is fixed"
            )
        };
        let host = self.host.with_current_config().map_err(|e| reason(&e))?;
        let loaded = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| reason(&e))?;
                    runtime
                        .block_on(load(&host, Some(previous)))
                        .map_err(|e| reason(&e))
                })
                .join()
                .unwrap_or_else(|_| Err(reason(&"discovery panicked")))
        })?;
        let (loaded, discovered) = loaded;
        Ok(live::Reloaded {
            loaded,
            watched: crate::discovery::watched_paths(host.layout(), &discovered),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(toolbox: &Toolbox<HostInvoker>) -> Vec<String> {
        toolbox.tools().iter().map(|t| t.name.clone()).collect()
    }

    /// The library side of `modhost mcp` following the operator: each change
    /// shows in the next list, bumps the watch the server announces from,
    /// and a call of a tool that went away is refused with why.
    #[tokio::test]
    async fn a_live_toolbox_follows_disable_install_and_config_edits_and_signals_each() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::write(home.join("config.toml"), "pins = \"off\"\n").unwrap();
        modhost_test_support::modules::install(home, "alpha", false);
        let host = Host::open_at(home);
        let toolbox = open_live_toolbox(&host).await.unwrap();
        let mut changes = toolbox.changes().expect("a live toolbox signals");
        assert!(names(&toolbox).contains(&"alpha__alpha_run".to_owned()));
        assert!(!changes.has_changed().unwrap());

        std::fs::write(home.join("modules/alpha/.disabled"), "").unwrap();
        assert!(!names(&toolbox).contains(&"alpha__alpha_run".to_owned()));
        assert!(changes.has_changed().unwrap(), "disable is signalled");
        changes.mark_unchanged();
        let refused = toolbox
            .call("alpha__alpha_run", json!({"msg": "x"}), None, None)
            .await
            .unwrap();
        assert!(refused.is_error);
        assert!(
            refused.text.contains("modhost enable alpha"),
            "{}",
            refused.text
        );

        modhost_test_support::modules::install(home, "beta", false);
        assert!(names(&toolbox).contains(&"beta__beta_run".to_owned()));
        assert!(changes.has_changed().unwrap(), "an install is signalled");
        changes.mark_unchanged();
        let ran = toolbox
            .call("beta__beta_run", json!({"msg": "x"}), None, None)
            .await
            .unwrap();
        assert!(!ran.is_error, "{}", ran.text);

        std::fs::write(
            home.join("config.toml"),
            "pins = \"off\"\n[[approval.rules]]\nname = \"no beta\"\ncapability = \"beta.run\"\ndecision = \"deny\"\n",
        )
        .unwrap();
        let err = toolbox
            .call("beta__beta_run", json!({"msg": "x"}), None, None)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "beta__beta_run is denied by rule \"no beta\""
        );
        assert!(changes.has_changed().unwrap(), "a policy edit is signalled");
    }

    /// A server makes a component's first instance while it waits for the
    /// first call (that call then only hands it its context), but only where
    /// the call may start ahead: while the component's tool asks for
    /// approval it gets none, since such a call never takes one; once the
    /// operator allows the tool, the reloaded toolbox makes it, and the
    /// first call takes it.
    #[cfg(feature = "wasm")]
    #[tokio::test]
    async fn a_server_makes_a_components_first_instance_at_load_only_where_its_call_may_start_ahead()
     {
        use modhost_test_support::guests::guest;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let program = home.join("modules/echo/echo.wasm");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::copy(guest("echo"), &program).unwrap();
        let asks = "pins = \"off\"\n[[approval.rules]]\nmodule = \"echo\"\ndecision = \"ask\"\n";
        std::fs::write(home.join("config.toml"), asks).unwrap();
        // The guest's capability works on the workspace: one outside the
        // home, since a workspace overlapping it is never granted.
        let workspace = tempfile::tempdir().unwrap();
        let host = Host::open(crate::host::HostOptions {
            home: Some(home.to_path_buf()),
            workspace: Some(workspace.path().to_path_buf()),
        })
        .unwrap()
        .keep_warm();
        let toolbox = open_live_toolbox(&host).await.unwrap();
        let engine = host.engines().wasm().unwrap();
        let loaded = async {
            while engine.holds_ahead_of(&program).is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), loaded)
            .await
            .expect("the component is loaded ahead of its first call");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            engine.holds_ahead_of(&program),
            Some(false),
            "made ahead for a tool that asks"
        );

        std::fs::write(home.join("config.toml"), "pins = \"off\"\n").unwrap();
        let tool = toolbox
            .tools()
            .iter()
            .find(|t| t.module == "echo")
            .map(|t| t.name.clone())
            .expect("the echo tool");
        let made = async {
            while engine.holds_ahead_of(&program) != Some(true) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), made)
            .await
            .expect("an instance is made ahead once the tool is allowed");
        let ran = toolbox
            .call(&tool, json!({"n": 1}), None, None)
            .await
            .unwrap();
        assert!(!ran.is_error, "{}", ran.text);
        assert_eq!(engine.took_ahead(), 1, "the first call takes it");

        // The next one, made after that call, goes with the module.
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while engine.holds_ahead_of(&program) != Some(true) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("an instance is made ahead after the call");
        let digest = engine.digest_of(&program).expect("loaded");
        std::fs::write(home.join("modules/echo/.disabled"), "").unwrap();
        assert!(toolbox.tools().iter().all(|t| t.module != "echo"));
        assert_eq!(
            engine.keeps(&digest),
            (false, false),
            "(compiled code, instance made ahead) kept for a disabled module"
        );
        host.shutdown().await;
    }

    /// The attack: a component placed by hand in `modules/modhost/` shares
    /// the reserved id the built-in knowledge tool (always allowed) is
    /// listed under. With the operator denying its own tool, it still gets
    /// no instance made ahead: only a module's own tools count.
    #[test]
    fn only_a_components_own_allowed_tools_make_its_first_instance_ahead() {
        use crate::approval::PolicyVerdict;
        let tool = |module: &str, verdict| {
            let (name, capability) = (format!("{module}__run"), format!("{module}.run"));
            ToolDef::for_test(&name, module, &capability, verdict)
        };
        let component = |id: &str| InstalledModule {
            transport: Transport::Component,
            ..crate::tools::test_support::installed(id, &[&format!("{id}.run")])
        };
        let discovered = [
            component("modhost"),
            component("allowed"),
            component("asks"),
        ];
        let tools = [
            knowledge_tool::definition(&[], &Default::default()),
            tool("modhost", PolicyVerdict::Deny),
            tool("allowed", PolicyVerdict::Allow),
            tool("asks", PolicyVerdict::Ask),
        ];
        let ahead: Vec<(String, bool)> = components_ahead(&discovered, &tools)
            .into_iter()
            .map(|c| (c.program.display().to_string(), c.instance_too))
            .collect();
        assert_eq!(
            ahead,
            [
                ("/m/modhost".to_owned(), false),
                ("/m/allowed".to_owned(), true),
                ("/m/asks".to_owned(), false),
            ]
        );
    }
}
