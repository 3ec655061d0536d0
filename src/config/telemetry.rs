//! The `[log]` and `[telemetry]` tables: how log lines are written, and where traces go.

use serde::Deserialize;

use super::validator::{ConfigError, Validator};

/// How log lines are written (`log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Readable lines (the default).
    #[default]
    Text,
    /// One JSON object a line, with the trace and span ids while traces are exported.
    Json,
}

/// `[telemetry]`: trace export over OTLP, off unless an endpoint is given here or in the
/// standard `OTEL_EXPORTER_OTLP_ENDPOINT` variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector's base URL (`/v1/traces` is added).
    pub endpoint: Option<String>,
    /// Whether message contents go on spans (redacted like everything else).
    pub capture_content: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    format: Option<LogFormat>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    endpoint: Option<String>,
    capture_content: Option<bool>,
}

impl Validator<'_> {
    pub(super) fn log(&self, raw: RawLog) -> LogFormat {
        raw.format.unwrap_or_default()
    }

    pub(super) fn telemetry(&self, raw: RawTelemetry) -> Result<TelemetryConfig, ConfigError> {
        if let Some(endpoint) = &raw.endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(self.invalid(
                "telemetry.endpoint",
                format!("`{endpoint}` must start with http:// or https:// (OTLP over HTTP)"),
            ));
        }
        Ok(TelemetryConfig {
            endpoint: raw.endpoint,
            capture_content: raw.capture_content.unwrap_or(false),
        })
    }
}
