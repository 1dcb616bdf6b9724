//! The process's OpenTelemetry pipeline: one tracer provider and one meter
//! provider, each exporting over OTLP/HTTP (protobuf) from a thread of its
//! own, started by the first host opened with `[telemetry] enabled = true`.
//!
//! Design decisions:
//!
//! - **One per process**, however many hosts are opened (a test opens
//!   many): spans and metrics of every host go through it, and
//!   [`shutdown`] flushes it once at the end.
//! - **A pipeline that cannot start is a warning**, never a refused call:
//!   telemetry observes calls, it does not decide them. A malformed
//!   `endpoint` is refused earlier, with `config.toml`.
//! - **Bounded waits.** Each export ends within the exporter's timeout
//!   (`OTEL_EXPORTER_OTLP_TIMEOUT`, else [`EXPORT_TIMEOUT`]), and the end
//!   of a process waits at most [`SHUTDOWN_WAIT`] for the last batch, so an
//!   unreachable collector delays `modhost invoke` by that much, not more.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use super::http_client::BlockingHttp;
use super::settings::TelemetryConfig;

/// How long one export may take when `OTEL_EXPORTER_OTLP_TIMEOUT` does not
/// say.
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the end of a process waits for the last spans and metrics.
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The running pipeline.
#[derive(Debug)]
pub(crate) struct Pipeline {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    pub(crate) tracer: SdkTracer,
    pub(crate) calls: Counter<u64>,
    pub(crate) errors: Counter<u64>,
    pub(crate) durations: Histogram<f64>,
}

static PIPELINE: OnceLock<Option<Pipeline>> = OnceLock::new();

/// The pipeline, when one runs.
pub(crate) fn running() -> Option<&'static Pipeline> {
    PIPELINE.get().and_then(Option::as_ref)
}

/// Start the pipeline for `config`, once per process; later calls (and a
/// config that does not turn it on) change nothing.
pub(crate) fn start(config: &TelemetryConfig) {
    if !config.is_on() || PIPELINE.get().is_some() {
        return;
    }
    PIPELINE.get_or_init(|| match build(config) {
        Ok(pipeline) => Some(pipeline),
        Err(e) => {
            tracing::warn!("telemetry is off: the OTLP exporter could not start: {e}");
            None
        }
    });
}

/// Send what is still buffered and stop exporting; a no-op when nothing
/// runs. `modhost` calls it as it ends.
pub(crate) fn shutdown() {
    if let Some(pipeline) = running() {
        if let Err(e) = pipeline.traces.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!("telemetry: the last spans were not all sent: {e}");
        }
        if let Err(e) = pipeline.metrics.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!("telemetry: the last metrics were not all sent: {e}");
        }
    }
}

fn build(config: &TelemetryConfig) -> Result<Pipeline, opentelemetry_otlp::ExporterBuildError> {
    let timeout = std::env::var("OTEL_EXPORTER_OTLP_TIMEOUT")
        .ok()
        .and_then(|ms| ms.trim().parse().ok())
        .map_or(EXPORT_TIMEOUT, Duration::from_millis);
    let client = BlockingHttp::new(timeout);
    // The file's endpoint is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is;
    // either variable wins over it.
    let endpoint = |signal: &str, path: &str| {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        let from_env = set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || set(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"));
        config
            .endpoint
            .as_deref()
            .filter(|_| !from_env)
            .map(|base| format!("{}/{path}", base.trim_end_matches('/')))
    };
    let mut spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client.clone())
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(timeout);
    if let Some(url) = endpoint("TRACES", "v1/traces") {
        spans = spans.with_endpoint(url);
    }
    let mut metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(timeout);
    if let Some(url) = endpoint("METRICS", "v1/metrics") {
        metrics = metrics.with_endpoint(url);
    }
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
        resource =
            resource.with_service_name(config.service_name.clone().unwrap_or("modhost".into()));
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans.build()?)
        .with_resource(resource.clone())
        .build();
    let metrics = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics.build()?)
        .with_resource(resource)
        .build();
    let tracer = traces.tracer("modhost");
    let meter = metrics.meter("modhost");
    Ok(Pipeline {
        calls: meter
            .u64_counter("modhost.calls")
            .with_description(
                "Calls of tools, by tool and outcome (ok, failed, refused, cancelled).",
            )
            .build(),
        errors: meter
            .u64_counter("modhost.call.errors")
            .with_description("Calls that did not succeed, by tool and error kind.")
            .build(),
        durations: meter
            .f64_histogram("modhost.call.duration")
            .with_unit("s")
            .with_description("How long calls took, by tool and outcome.")
            .build(),
        traces,
        metrics,
        tracer,
    })
}
