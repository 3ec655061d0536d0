//! Log lines as JSON (`log.format = "json"`): one object a line with the time, level, target,
//! message and fields, the span it was logged in, and, while traces are exported, that span's
//! trace and span ids, so a log line leads to its trace. Written through the same redacting
//! writer as text lines.

use std::fmt;

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats each event as one JSON object.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut line = Map::new();
        line.insert(
            "timestamp".to_owned(),
            Value::String(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
        );
        line.insert("level".to_owned(), Value::String(meta.level().to_string()));
        line.insert("target".to_owned(), Value::String(meta.target().to_owned()));
        if let Some(message) = fields.0.remove("message") {
            line.insert("message".to_owned(), message);
        }
        if !fields.0.is_empty() {
            line.insert("fields".to_owned(), Value::Object(fields.0));
        }
        if let Some(span) = ctx.lookup_current() {
            line.insert("span".to_owned(), Value::String(span.name().to_owned()));
        }
        // Valid only while traces are exported (the OpenTelemetry layer keeps them).
        let context = tracing::Span::current().context();
        let span = context.span();
        let ids = span.span_context();
        if ids.is_valid() {
            line.insert(
                "trace_id".to_owned(),
                Value::String(ids.trace_id().to_string()),
            );
            line.insert(
                "span_id".to_owned(),
                Value::String(ids.span_id().to_string()),
            );
        }
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::Bool(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
}
