//! `[telemetry]` in `config.toml`.
//!
//! ```toml
//! [telemetry]
//! enabled = false                      # on: traces and metrics over OTLP/HTTP (protobuf)
//! endpoint = "http://127.0.0.1:4318"   # the collector's base URL (/v1/traces, /v1/metrics)
//! service_name = "modhost"
//! ```
//!
//! The standard variables win over the file, as a collector's deployment
//! expects: `OTEL_EXPORTER_OTLP_ENDPOINT` (and the per-signal
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._METRICS_ENDPOINT`) over
//! `endpoint`, `OTEL_SERVICE_NAME` over `service_name`; the exporter also
//! reads `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT` and
//! `OTEL_RESOURCE_ATTRIBUTES`, the batch processor `OTEL_BSP_*`, the metric
//! reader `OTEL_METRIC_EXPORT_INTERVAL`, and `OTEL_SDK_DISABLED=true`
//! turns it off whatever the file says. Only `enabled` turns it on: off by
//! default, so a host never sends anything anywhere unasked.

use serde::Deserialize;

/// `[telemetry]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Whether calls are traced and counted over OTLP.
    pub enabled: bool,
    /// The collector's OTLP/HTTP base URL (`http://host:4318`); the
    /// exporter's default, `http://localhost:4318`, when unset.
    pub endpoint: Option<String>,
    /// The `service.name` of what is sent; `modhost` when unset.
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// What is wrong with the section, one line each.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(endpoint) = &self.endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            problems.push(format!(
                "[telemetry] endpoint = {endpoint:?}: an http:// or https:// URL of the collector's OTLP/HTTP port, such as \"http://127.0.0.1:4318\""
            ));
        }
        if self.enabled && !cfg!(feature = "otel") {
            problems.push(
                "[telemetry] enabled = true, but this modhost was built without OpenTelemetry (the `otel` feature); rebuild it with the feature, or remove the line".into(),
            );
        }
        problems
    }

    /// Whether telemetry runs: enabled in the file, not disabled by
    /// `OTEL_SDK_DISABLED`.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))] // read by the `otel` feature only
    pub(crate) fn is_on(&self) -> bool {
        let disabled =
            std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        self.enabled && !disabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_an_endpoint_must_be_a_url() {
        let config = TelemetryConfig::default();
        assert!(!config.enabled);
        assert!(!config.is_on());
        assert!(config.problems().is_empty());
        let bad = TelemetryConfig {
            endpoint: Some("127.0.0.1:4318".into()),
            ..TelemetryConfig::default()
        };
        assert!(bad.problems()[0].contains("[telemetry] endpoint"));
    }
}
