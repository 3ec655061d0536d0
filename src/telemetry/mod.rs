//! What an operator's tools see of the service: log lines as text or JSON (`json_log.rs`, with
//! the trace and span ids), the `tracing` spans of every turn exported over OTLP when
//! configured (named and attributed by the GenAI conventions: `spans.rs`), and Prometheus
//! metrics at `/metrics` (`metrics.rs`). Commands other than `serve` log text to stderr;
//! `serve` sets up what its config's `[log]` and `[telemetry]` ask (`init`), before anything
//! else logs. Off, export costs nothing but the spans' bookkeeping in the process.

mod json_log;
pub mod metrics;
pub mod spans;

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use crate::config::{LogFormat, TelemetryConfig};

/// The service's name in exported traces, unless `OTEL_SERVICE_NAME` says otherwise.
const SERVICE_NAME: &str = "openvaala";

/// The exporter, kept to flush what is buffered at the end (`shutdown`).
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
/// Whether message contents go on spans (`telemetry.capture_content`).
static CAPTURE_CONTENT: OnceLock<bool> = OnceLock::new();

/// The log filter: `OPENVAALA_LOG`, else info (sqlx's per-query lines left out).
fn filter() -> EnvFilter {
    EnvFilter::try_from_env("OPENVAALA_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx::query=error"))
}

/// Text lines on stderr, secrets taken out: for every command but `serve`.
pub fn init_plain() {
    let _ = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter())
        .with_writer(|| crate::redact::RedactingWriter(std::io::stderr()))
        .try_init();
}

/// What `serve` logs and exports, as its config says; `Err` says why trace export cannot be
/// set up (then nothing is set up: the caller logs plain text and goes on).
pub fn init(log: LogFormat, telemetry: &TelemetryConfig) -> Result<(), String> {
    let _ = CAPTURE_CONTENT.set(telemetry.capture_content);
    let exporter = match exported_endpoint(telemetry) {
        Some(endpoint) => Some(tracer_provider(endpoint.as_deref())?),
        None => None,
    };
    let traces = exporter.map(|provider| {
        let tracer = provider.tracer(SERVICE_NAME);
        let _ = PROVIDER.set(provider);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            // The service's own spans only (not its libraries'), at info and above.
            .with_filter(EnvFilter::new("openvaala=info"))
            .boxed()
    });
    // Two shapes rather than an `Option` layer: an absent layer would declare an interest in
    // every callsite, so each disabled `debug!` would be dispatched and filtered at run time.
    let set = match traces {
        Some(traces) => tracing_subscriber::registry()
            .with(traces)
            .with(lines(log))
            .try_init(),
        None => tracing_subscriber::registry().with(lines(log)).try_init(),
    };
    set.map_err(|error| error.to_string())
}

/// The log lines on stderr, as `log` says, secrets taken out.
fn lines<S>(log: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let writer = || crate::redact::RedactingWriter(std::io::stderr());
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match log {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colours)
            .with_writer(writer)
            .with_filter(filter())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .event_format(json_log::JsonLines)
            .with_writer(writer)
            .with_filter(filter())
            .boxed(),
    }
}

/// Whether traces are exported, and to where: `[telemetry] endpoint`, else the standard
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` (then `Some(None)`:
/// the exporter reads them itself). `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
/// turn it off.
fn exported_endpoint(telemetry: &TelemetryConfig) -> Option<Option<String>> {
    let set = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
    };
    if set("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|value| value.eq_ignore_ascii_case("none"))
    {
        return None;
    }
    if let Some(endpoint) = &telemetry.endpoint {
        return Some(Some(endpoint.clone()));
    }
    (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some())
    .then_some(None)
}

/// An OTLP/HTTP (protobuf) exporter in a batch: spans leave on a thread of their own, never
/// holding up a turn. `endpoint` is the collector's base URL (`/v1/traces` is added).
fn tracer_provider(endpoint: Option<&str>) -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::WithExportConfig;
    crate::tls::install_crypto_provider();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(endpoint) = endpoint {
        let endpoint = endpoint.trim_end_matches('/');
        let traces = match endpoint.ends_with("/v1/traces") {
            true => endpoint.to_owned(),
            false => format!("{endpoint}/v1/traces"),
        };
        exporter = exporter.with_endpoint(traces);
    }
    let exporter = exporter
        .build()
        .map_err(|error| format!("cannot set up the OTLP trace exporter: {error}"))?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| SERVICE_NAME.to_owned());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// Whether message contents may go on spans.
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.get().copied().unwrap_or(false)
}

/// Sends what is buffered and ends the exporter (at the service's stop).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.shutdown()
    {
        tracing::warn!(%error, "the trace exporter did not shut down cleanly");
    }
}
