//! `/metrics`: what `modhost mcp --http` is doing, in the Prometheus
//! (OpenMetrics) text format, through the `prometheus-client` crate.
//!
//! Design decisions:
//!
//! - **Labels from closed sets only.** A call is labelled by its outcome
//!   kind ([`CallResult`]), a request by its status code, a refusal by its
//!   reason: never by tool name, principal or anything else a client
//!   chooses, which would let one client grow the server's memory and every
//!   scrape without bound. Who called what is the request log's and the
//!   audit log's.
//! - **On the same listener,** so a Kubernetes scrape annotation or a
//!   `ServiceMonitor` needs only the service port. It answers without
//!   authentication, as `/healthz` and `/readyz` do: counts and durations,
//!   no names.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How a `tools/call` ended, as the request log and the metrics say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallResult {
    /// A result, not an error.
    Ok,
    /// A result with `isError: true` (the tool failed, or the host refused
    /// it with a reason the model reads).
    ToolError,
    /// A JSON-RPC error (unknown tool, bad params, a missing capability).
    RpcError,
    /// The stateless era's `input_required` (an approval question).
    InputRequired,
    /// The client left (closed the stream or the connection) before the
    /// result: the call was stopped.
    Cancelled,
    /// Refused before it ran by this server's bound on concurrent calls.
    Busy,
}

impl CallResult {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallResult::Ok => "ok",
            CallResult::ToolError => "tool_error",
            CallResult::RpcError => "rpc_error",
            CallResult::InputRequired => "input_required",
            CallResult::Cancelled => "cancelled",
            CallResult::Busy => "busy",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

type DurationFamily = Family<ResultLabel, Histogram, fn() -> Histogram>;

/// Every metric the server keeps.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    calls: Family<ResultLabel, Counter>,
    durations: DurationFamily,
    in_flight: Gauge,
    open_streams: Gauge,
    requests: Family<StatusLabel, Counter>,
    refusals: Family<ReasonLabel, Counter>,
}

fn call_histogram() -> Histogram {
    // 1 ms to ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("modhost_mcp");
        let calls = Family::<ResultLabel, Counter>::default();
        let durations: DurationFamily = Family::new_with_constructor(call_histogram);
        let in_flight = Gauge::default();
        let open_streams = Gauge::default();
        let requests = Family::<StatusLabel, Counter>::default();
        let refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "calls",
            "tools/call requests answered, by how they ended",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "How long tools/call requests took, by how they ended",
            durations.clone(),
        );
        registry.register(
            "calls_in_flight",
            "tools/call requests running now",
            in_flight.clone(),
        );
        registry.register(
            "open_streams",
            "SSE response streams open now",
            open_streams.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests answered, by status",
            requests.clone(),
        );
        registry.register(
            "refusals",
            "Requests refused before they were served, by reason",
            refusals.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            calls,
            durations,
            in_flight,
            open_streams,
            requests,
            refusals,
        }
    }
}

impl Metrics {
    /// A call ended as `result` after `took`.
    pub(crate) fn call_ended(&self, result: CallResult, took: Duration) {
        let label = ResultLabel {
            result: result.as_str(),
        };
        self.calls.get_or_create(&label).inc();
        self.durations
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// A call started (+1) or ended (-1).
    pub(crate) fn in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
    }

    /// A stream opened (+1) or closed (-1).
    pub(crate) fn streams(&self, delta: i64) {
        self.open_streams.inc_by(delta);
    }

    /// An HTTP request was answered with `status`.
    pub(crate) fn answered(&self, status: u16) {
        self.requests.get_or_create(&StatusLabel { status }).inc();
    }

    /// A request was refused for `reason` before it was served.
    pub(crate) fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// The exposition, in the OpenMetrics text format.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &registry);
        text
    }
}

/// The `Content-Type` of [`Metrics::render`].
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_counted_timed_and_labelled_by_its_result_only() {
        let metrics = Metrics::default();
        metrics.in_flight(1);
        metrics.call_ended(CallResult::Ok, Duration::from_millis(3));
        metrics.in_flight(-1);
        metrics.answered(200);
        metrics.refused("origin");
        let text = metrics.render();
        assert!(
            text.contains("modhost_mcp_calls_total{result=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("modhost_mcp_call_duration_seconds_count{result=\"ok\"} 1"),
            "{text}"
        );
        assert!(text.contains("modhost_mcp_calls_in_flight 0"), "{text}");
        assert!(
            text.contains("modhost_mcp_http_requests_total{status=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("modhost_mcp_refusals_total{reason=\"origin\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
