//! OpenTelemetry: a trace span per call and the calls' metrics, sent over
//! OTLP/HTTP (protobuf) to a collector. Off unless `[telemetry] enabled =
//! true` (`settings`); the standard `OTEL_*` variables configure the rest.
//!
//! What is sent:
//!
//! - a span `execute_tool <tool>` per call that reaches the invoke
//!   pipeline (refused or not), with the module, capability, principal,
//!   outcome and error kind; its parent is the caller's trace when the
//!   caller sent one (an MCP request's `_meta.traceparent`:
//!   [`with_remote_parent`]); its child, `module process` or `component
//!   instance`, covers the run of the module;
//! - metrics `modhost.calls` (by tool and outcome), `modhost.call.errors`
//!   (by tool and error kind) and `modhost.call.duration` (seconds),
//!   refusals before the pipeline included.
//!
//! Never what a call carried: no input, output or message, as in the audit
//! log (`crate::audit`), whose records carry the trace id.
//!
//! The OpenTelemetry crates are the `otel` feature's (default on); without
//! it this module's functions do nothing and `enabled = true` is refused.
//!
//! # API
//!
//! [`TelemetryConfig`] (`[telemetry]`), [`with_remote_parent`] (a caller's
//! trace continued), [`shutdown`] (flush at the end of a process).

mod call_span;
#[cfg(feature = "otel")]
mod http_client;
#[cfg(feature = "otel")]
mod provider;
mod remote_parent;
mod settings;

pub(crate) use call_span::{CallEnd, CallLabels, CallTrace, ChildSpan, count};
pub use remote_parent::with_remote_parent;
pub use settings::TelemetryConfig;

/// Start this process's pipeline for `config` (once; a no-op when off).
pub(crate) fn start(config: &TelemetryConfig) {
    #[cfg(feature = "otel")]
    provider::start(config);
    #[cfg(not(feature = "otel"))]
    let _ = config;
}

/// Send what is still buffered and stop exporting; a no-op when telemetry
/// is off. A program that opened a host with telemetry on calls it before
/// it exits (`modhost` does), else the last spans may be lost.
pub fn shutdown() {
    #[cfg(feature = "otel")]
    provider::shutdown();
}
