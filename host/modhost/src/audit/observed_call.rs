//! Every call, observed: admitted by the quotas, traced, and recorded.
//!
//! [`Host::invoke_module`] is the one door of the invoke pipeline: every
//! caller (`modhost invoke`, the library's `Host::invoke`, the toolbox and so
//! `modhost mcp`) goes through it. Around the pipeline it
//!
//! 1. starts the call's span (`crate::telemetry`) and its audit entry: the
//!    time, the principal, the tool, the module and its pin digest, the
//!    input's digest, the approval rule and who approved;
//! 2. admits the call under `[quotas]` (`crate::quota`), holding its place
//!    among the running calls until the call's future ends; a refusal is
//!    the call's result, `rate_limited`;
//! 3. runs the pipeline, which adds what it decides (contract, grants,
//!    request id: `CallFacts`);
//! 4. ends the span, counts the call, and submits the record (outcome,
//!    kind, duration, output size, hosts contacted and refused) as the
//!    result goes back. A call whose future is dropped (a cancelled MCP
//!    call) is recorded then, as `cancelled`.
//!
//! A call refused before it reaches the pipeline (an approval rule, an MCP
//! server's own bounds) is recorded by its refuser through
//! [`Host::record_refusal`].
//!
//! Design decision: **a record that cannot be written does not undo the
//! call.** The record is written after the call ran (by the log's writer
//! thread, off the call's path: `writer`); failing it then would report a
//! call that did run as failed. It is logged as an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use modproto::{ErrorKind, HostErrorKind};

use super::call_facts::CallFacts;
use super::principal::local_principal;
use super::record::{self, ApprovalFacts, Entry, Event, Outcome};
use super::refused_call::RefusedCall;
use super::settings::AuditConfig;
use super::writer::AuditLog;
use crate::discovery::InstalledModule;
use crate::host::Host;
use crate::invoke::{InvokeError, InvokeOutcome, InvokeRequest};
use crate::quota::counters::Caller;
use crate::telemetry::{self, CallEnd, CallLabels, CallTrace};
use modhost_runner::RunError;

impl Host {
    /// Invoke one capability of an already discovered module (`request.module`
    /// is ignored): admitted by `[quotas]`, traced, and recorded in the
    /// audit log whatever its outcome (see `crate::audit`).
    pub async fn invoke_module(
        &self,
        module: &InstalledModule,
        request: InvokeRequest,
    ) -> Result<InvokeOutcome, InvokeError> {
        let mut watch = CallWatch::start(self, module, &request);
        let caller = Caller {
            tool: &watch.tool,
            module: &module.id,
            capability: &watch.capability,
            principal: &watch.principal,
        };
        let result = match self
            .quotas
            .admit(&self.config().quotas, caller, Instant::now())
        {
            Err(limited) => Err(InvokeError::RateLimited(limited)),
            Ok(permit) => {
                let result = self
                    .invoke_pipeline(module, request, &mut watch.facts)
                    .await;
                drop(permit);
                result
            }
        };
        watch.finish(&result);
        result
    }

    /// Whether a server of this host may ask one more approval question
    /// about a call of `principal` (`None`: the local user) now (`[quotas]
    /// elicitations_per_minute`, each principal its own), counting it when
    /// it may.
    pub fn admit_question(&self, principal: Option<&str>) -> Result<(), crate::quota::RateLimited> {
        let principal = principal.unwrap_or_else(|| local_principal());
        self.quotas
            .admit_question(&self.config().quotas, principal, Instant::now())
    }

    /// Count a call of a tool name nobody offers, by `principal` (`None`:
    /// the local user), against the principal's `[quotas]` calls per
    /// minute; `Err` when it is over.
    pub fn admit_unknown_tool(
        &self,
        principal: Option<&str>,
    ) -> Result<(), crate::quota::RateLimited> {
        let principal = principal.unwrap_or_else(|| local_principal());
        self.quotas
            .count_unknown_tool(&self.config().quotas, principal, Instant::now())
    }

    /// Record a call refused before the invoke pipeline saw it (an approval
    /// rule at a gate, an MCP server's bound, a user's no): in the audit
    /// log, and counted in the metrics.
    pub fn record_refusal(&self, call: &RefusedCall<'_>) {
        let principal = call.principal.unwrap_or_else(|| local_principal());
        let labels = CallLabels {
            tool: call.tool,
            module: call.module.unwrap_or_default(),
            capability: call.capability.unwrap_or_default(),
            principal,
        };
        let kind = call.kind.to_string();
        let end = CallEnd {
            outcome: Outcome::Refused.as_str(),
            kind: Some(&kind),
            request_id: None,
        };
        telemetry::count(labels, end, None);
        let config = &self.config().audit;
        if !config.enabled {
            return;
        }
        let mut entry = Entry::now(Event::Call);
        entry.principal = Some(principal.to_owned());
        // The caller chose the name (an MCP client may send any string):
        // kept short and printable, with the whole one's digest.
        let (tool, tool_sha256) = record::caller_name(call.tool);
        entry.tool = Some(tool);
        entry.tool_sha256 = tool_sha256;
        entry.module = call.module.map(str::to_owned);
        entry.digest = call.digest.map(str::to_owned);
        entry.capability = call.capability.map(|c| record::caller_name(c).0);
        entry.input_sha256 = Some(input_digest(call.input));
        if call.rule.is_some() || call.by.is_some() {
            entry.approval = Some(ApprovalFacts {
                rule: call.rule.map(str::to_owned),
                by: call.by.map(str::to_owned),
            });
        }
        entry.outcome = Some(Outcome::Refused);
        let (kind, kind_sha256) = record::recorded_kind(call.kind.clone());
        entry.kind = Some(kind);
        entry.kind_sha256 = kind_sha256;
        entry.retry_after_s = call.retry_after_s;
        self.audit.submit(config, entry);
    }

    /// Wait until every record of this host's calls so far is in the audit
    /// log. Records are written by a thread of the log's own, shortly after
    /// their calls return, and all of them before the host's last clone is
    /// dropped; a caller that reads the log while the host lives (a test)
    /// or ends its process with `exit` calls this first.
    pub fn flush_audit_log(&self) {
        self.audit.flush();
    }
}

/// One call being watched: its labels, its entry so far, its span. Dropped
/// unfinished (the call's future dropped), it records the call as
/// cancelled.
struct CallWatch {
    started: Instant,
    tool: String,
    module: String,
    capability: String,
    principal: String,
    /// The entry so far; `None` when `[audit]` is off.
    entry: Option<Entry>,
    log: Arc<AuditLog>,
    config: AuditConfig,
    facts: CallFacts,
    finished: bool,
}

impl CallWatch {
    fn start(host: &Host, module: &InstalledModule, request: &InvokeRequest) -> CallWatch {
        let capability = module.descriptor.as_ref().and_then(|d| {
            d.capability(&request.capability)
                .or_else(|| d.capability(&format!("{}.{}", module.id, request.capability)))
        });
        let capability_id = capability.map_or_else(|| request.capability.clone(), |c| c.id.clone());
        let tool = modconform::tool_name(&module.id, &capability_id);
        let principal = request
            .principal
            .clone()
            .unwrap_or_else(|| local_principal().to_owned());
        let trace = CallTrace::start(CallLabels {
            tool: &tool,
            module: &module.id,
            capability: &capability_id,
            principal: &principal,
        });
        let config = host.config().audit.clone();
        let entry = config.enabled.then(|| {
            let mut entry = Entry::now(Event::Call);
            entry.principal = Some(principal.clone());
            // An unknown capability is named as the caller wrote it.
            let (recorded_tool, tool_sha256) = record::caller_name(&tool);
            entry.tool = Some(recorded_tool);
            entry.tool_sha256 = tool_sha256;
            entry.module = Some(module.id.clone());
            entry.digest = module.digest.clone();
            entry.capability = Some(record::caller_name(&capability_id).0);
            entry.input_sha256 = Some(input_digest(&request.args));
            entry.trace_id = trace.trace_id();
            entry.approval = match (&request.approval, module.descriptor.as_deref(), capability) {
                (Some(approval), _, _) => Some(ApprovalFacts {
                    rule: approval.rule.clone(),
                    by: Some(approval.by.clone()),
                }),
                // No record: the policy allowed it outright, and the rule
                // is the one the call's gate applied (for its caller), or
                // the caller applied no gate (a library call), and the
                // rule says what it would have decided, for the principal
                // the request names (with no scopes: none were given).
                (None, _, _) if request.allowed_by.is_some() => Some(ApprovalFacts {
                    rule: request.allowed_by.clone(),
                    by: None,
                }),
                (None, Some(descriptor), Some(capability)) => {
                    let named;
                    let caller = match request.principal.as_deref() {
                        None => crate::Caller::the_local_user(),
                        Some(principal) if principal == local_principal() => {
                            crate::Caller::the_local_user()
                        }
                        Some(principal) => {
                            named = crate::Caller::remote(principal, []);
                            &named
                        }
                    };
                    Some(ApprovalFacts {
                        rule: Some(policy_rule(host, caller, descriptor, capability, &tool)),
                        by: None,
                    })
                }
                (None, _, _) => None,
            };
            entry
        });
        CallWatch {
            started: Instant::now(),
            module: module.id.clone(),
            capability: capability_id,
            tool,
            principal,
            entry,
            log: Arc::clone(&host.audit),
            facts: CallFacts {
                recording: config.enabled,
                trace,
                ..CallFacts::default()
            },
            config,
            finished: false,
        }
    }

    /// End the span, count the call and write its record, for `result`.
    fn finish(&mut self, result: &Result<InvokeOutcome, InvokeError>) {
        self.finished = true;
        let took = self.started.elapsed();
        let (outcome, kind) = match result {
            Ok(_) => (Outcome::Ok, None),
            Err(InvokeError::Run {
                source: RunError::Cancelled,
                ..
            }) => (Outcome::Cancelled, Some(HostErrorKind::Cancelled.into())),
            Err(e) if e.capability_ran() => (Outcome::Failed, Some(e.kind())),
            Err(e) => (Outcome::Refused, Some(e.kind())),
        };
        let request_id = match result {
            Ok(outcome) => Some(outcome.request_id.clone()),
            Err(_) => self.facts.request_id.clone(),
        };
        self.end_span(outcome, kind.as_ref(), request_id.as_deref(), took);
        let Some(mut entry) = self.entry.take() else {
            return;
        };
        entry.outcome = Some(outcome);
        // A module's own kind is its words: kept only as a plain word.
        if let Some(kind) = kind {
            let (kind, kind_sha256) = record::recorded_kind(kind);
            entry.kind = Some(kind);
            entry.kind_sha256 = kind_sha256;
        }
        entry.request_id = request_id;
        entry.duration_ms = Some(milliseconds(took));
        entry.contract_version = self.facts.contract_version.take();
        entry.grants = self.facts.grants.take();
        match result {
            Ok(done) => {
                entry.output_bytes = Some(output_bytes(done));
                entry.network = done.network.clone();
            }
            Err(e) => {
                entry.network = e.network().cloned();
                match e {
                    InvokeError::Run { source, .. } => {
                        entry.sandbox_denied = source.sandbox_denial().is_some();
                    }
                    InvokeError::RateLimited(limited) => {
                        entry.retry_after_s = Some(limited.retry_after_s);
                    }
                    _ => {}
                }
            }
        }
        self.log.submit(&self.config, entry);
    }

    fn end_span(
        &mut self,
        outcome: Outcome,
        kind: Option<&ErrorKind>,
        request_id: Option<&str>,
        took: Duration,
    ) {
        let kind = kind.map(ToString::to_string);
        let labels = CallLabels {
            tool: &self.tool,
            module: &self.module,
            capability: &self.capability,
            principal: &self.principal,
        };
        let end = CallEnd {
            outcome: outcome.as_str(),
            kind: kind.as_deref(),
            request_id,
        };
        self.facts.trace.end(labels, end, took);
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let took = self.started.elapsed();
        let kind: ErrorKind = HostErrorKind::Cancelled.into();
        let request_id = self.facts.request_id.clone();
        self.end_span(Outcome::Cancelled, Some(&kind), request_id.as_deref(), took);
        if let Some(mut entry) = self.entry.take() {
            entry.outcome = Some(Outcome::Cancelled);
            entry.kind = Some(kind);
            entry.request_id = request_id;
            entry.duration_ms = Some(milliseconds(took));
            entry.contract_version = self.facts.contract_version.take();
            entry.grants = self.facts.grants.take();
            self.log.submit(&self.config, entry);
        }
    }
}

/// What the operator's policy says of `capability`, named as the gate
/// names it: the rule (or default) that decides its calls by `caller`.
fn policy_rule(
    host: &Host,
    caller: &crate::Caller,
    descriptor: &modproto::Descriptor,
    capability: &modproto::Capability,
    tool: &str,
) -> String {
    let config = host.config();
    let over =
        crate::overrides::find_override(&config.capabilities, &descriptor.id, &capability.id);
    let network =
        crate::network_grant::call_grant(capability, crate::overrides::network_lines(over));
    crate::approval::decide(
        &config.approval,
        caller,
        descriptor,
        capability,
        tool,
        network.as_ref(),
    )
    .rule
}

/// SHA-256 of the caller's arguments as JSON.
fn input_digest(input: &serde_json::Value) -> String {
    record::sha256_hex(&serde_json::to_vec(input).unwrap_or_default())
}

/// The size of a result as the caller receives it: its output as JSON and
/// its text, counted without keeping a copy.
fn output_bytes(outcome: &InvokeOutcome) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, &outcome.result.output);
    count.0 + outcome.result.text.as_ref().map_or(0, |t| t.len() as u64)
}

fn milliseconds(took: Duration) -> f64 {
    // Microseconds are enough, and keep the line short.
    (took.as_micros() as f64) / 1000.0
}
