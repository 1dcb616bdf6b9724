//! One call as telemetry sees it: a span `execute_tool <tool>` (the
//! GenAI conventions' name for a tool's execution) whose parent is the
//! context current when the call starts (an MCP request's `traceparent`,
//! `super::with_remote_parent`), a child span for the module process or
//! component instance that ran it, and the call's metrics.
//!
//! Without a running pipeline every method is a no-op that costs a branch.

use std::time::Duration;

#[cfg(feature = "otel")]
use opentelemetry::KeyValue;
#[cfg(feature = "otel")]
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};

#[cfg(feature = "otel")]
use super::provider;

/// What identifies a call in its span and metrics.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "otel"), allow(dead_code))] // read by the `otel` feature only
pub(crate) struct CallLabels<'a> {
    pub tool: &'a str,
    pub module: &'a str,
    pub capability: &'a str,
    pub principal: &'a str,
}

/// How a call ended, for its span and metrics.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "otel"), allow(dead_code))] // read by the `otel` feature only
pub(crate) struct CallEnd<'a> {
    /// `ok`, `failed`, `refused` or `cancelled`.
    pub outcome: &'a str,
    /// The error kind, when it did not succeed.
    pub kind: Option<&'a str>,
    pub request_id: Option<&'a str>,
}

/// A call's span; ended by [`CallTrace::end`] (or when dropped).
#[derive(Debug, Default)]
pub(crate) struct CallTrace {
    #[cfg(feature = "otel")]
    context: Option<opentelemetry::Context>,
}

/// The span of the module process or component instance of a call, ended
/// when dropped.
#[derive(Debug)]
pub(crate) struct ChildSpan {
    #[cfg(feature = "otel")]
    span: Option<opentelemetry_sdk::trace::Span>,
}

impl Drop for ChildSpan {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(span) = &mut self.span {
            span.end();
        }
    }
}

impl CallTrace {
    /// Start the span of a call labelled `labels`, child of the current
    /// context.
    pub(crate) fn start(labels: CallLabels<'_>) -> CallTrace {
        #[cfg(feature = "otel")]
        {
            let Some(pipeline) = provider::running() else {
                return CallTrace::default();
            };
            let parent = opentelemetry::Context::current();
            let span = pipeline
                .tracer
                .span_builder(format!("execute_tool {}", labels.tool))
                .with_kind(SpanKind::Internal)
                .with_attributes([
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", labels.tool.to_owned()),
                    KeyValue::new("modhost.module", labels.module.to_owned()),
                    KeyValue::new("modhost.capability", labels.capability.to_owned()),
                    KeyValue::new("modhost.principal", labels.principal.to_owned()),
                ])
                .start_with_context(&pipeline.tracer, &parent);
            CallTrace {
                context: Some(parent.with_span(span)),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = labels;
            CallTrace::default()
        }
    }

    /// The call's trace id (hex), when it is traced: the audit record
    /// carries it, so a record and its trace find each other.
    pub(crate) fn trace_id(&self) -> Option<String> {
        #[cfg(feature = "otel")]
        {
            let context = self.context.as_ref()?;
            let span = context.span();
            let id = span.span_context();
            id.is_valid().then(|| id.trace_id().to_string())
        }
        #[cfg(not(feature = "otel"))]
        None
    }

    /// Start the span of the process (`native`) or instance (`component`)
    /// that runs the call, child of the call's.
    pub(crate) fn child(&self, transport: modhost_runner::Transport) -> ChildSpan {
        #[cfg(feature = "otel")]
        {
            let (Some(context), Some(pipeline)) = (&self.context, provider::running()) else {
                return ChildSpan { span: None };
            };
            let (name, kind) = match transport {
                modhost_runner::Transport::Native => ("module process", "native"),
                modhost_runner::Transport::Component => ("component instance", "component"),
            };
            let span = pipeline
                .tracer
                .span_builder(name)
                .with_kind(SpanKind::Internal)
                .with_attributes([KeyValue::new("modhost.transport", kind)])
                .start_with_context(&pipeline.tracer, context);
            ChildSpan { span: Some(span) }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = transport;
            ChildSpan {}
        }
    }

    /// End the call's span with how it ended, and count it.
    pub(crate) fn end(&mut self, labels: CallLabels<'_>, end: CallEnd<'_>, took: Duration) {
        #[cfg(feature = "otel")]
        {
            if let Some(context) = self.context.take() {
                let span = context.span();
                span.set_attribute(KeyValue::new("modhost.outcome", end.outcome.to_owned()));
                if let Some(id) = end.request_id {
                    span.set_attribute(KeyValue::new("modhost.request_id", id.to_owned()));
                }
                if let Some(kind) = end.kind {
                    span.set_attribute(KeyValue::new("error.type", kind.to_owned()));
                    span.set_status(Status::error(kind.to_owned()));
                }
                span.end();
            }
            count(labels, end, Some(took));
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (labels, end, took);
        }
    }
}

/// Count one call in the metrics: `modhost.calls`, `modhost.call.errors`
/// when it did not succeed, and its duration when it ran.
pub(crate) fn count(labels: CallLabels<'_>, end: CallEnd<'_>, took: Option<Duration>) {
    #[cfg(feature = "otel")]
    {
        let Some(pipeline) = provider::running() else {
            return;
        };
        let tool = KeyValue::new("gen_ai.tool.name", labels.tool.to_owned());
        let outcome = KeyValue::new("modhost.outcome", end.outcome.to_owned());
        pipeline.calls.add(1, &[tool.clone(), outcome.clone()]);
        if let Some(kind) = end.kind {
            pipeline.errors.add(
                1,
                &[tool.clone(), KeyValue::new("error.type", kind.to_owned())],
            );
        }
        if let Some(took) = took {
            pipeline
                .durations
                .record(took.as_secs_f64(), &[tool, outcome]);
        }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (labels, end, took);
    }
}
