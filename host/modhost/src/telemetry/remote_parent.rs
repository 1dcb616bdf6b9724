//! A caller's trace continued: the W3C `traceparent` (and `tracestate`) a
//! caller sent with its request (an MCP client, in the request's `_meta`)
//! made the parent of every span the request's call starts.
//!
//! Design decision: **the context travels with the future**, not through
//! the call's arguments: `modhost mcp` wraps the task of one `tools/call`
//! and every span started while it is polled (the call's, in
//! `Host::invoke_module`) finds its parent as the current context. Nothing
//! between the server and the invoke pipeline has to carry it. A value
//! that is not a valid `traceparent` is ignored (the call starts a trace of
//! its own), as the W3C recommendation says.

use std::future::Future;

/// `future`, run with the trace context of `traceparent` and `tracestate`
/// as its current context (the current one when there is none or it does
/// not parse).
#[cfg(feature = "otel")]
pub fn with_remote_parent<F: Future>(
    traceparent: Option<&str>,
    tracestate: Option<&str>,
    future: F,
) -> impl Future<Output = F::Output> + use<F> {
    use opentelemetry::context::FutureExt as _;
    use opentelemetry::propagation::TextMapPropagator as _;

    let current = opentelemetry::Context::current();
    let context = match traceparent {
        Some(traceparent) if super::provider::running().is_some() => {
            let mut carrier = std::collections::HashMap::new();
            carrier.insert("traceparent".to_owned(), traceparent.to_owned());
            if let Some(state) = tracestate {
                carrier.insert("tracestate".to_owned(), state.to_owned());
            }
            opentelemetry_sdk::propagation::TraceContextPropagator::new()
                .extract_with_context(&current, &carrier)
        }
        _ => current,
    };
    future.with_context(context)
}

/// `future` as it is: this host was built without OpenTelemetry.
#[cfg(not(feature = "otel"))]
pub fn with_remote_parent<F: Future>(
    traceparent: Option<&str>,
    tracestate: Option<&str>,
    future: F,
) -> impl Future<Output = F::Output> + use<F> {
    let _ = (traceparent, tracestate);
    future
}
