//! The service's Prometheus metrics, through the `metrics` facade and its Prometheus exporter:
//! counters and histograms recorded where things happen (requests, turns, model and tool calls,
//! approvals, fsyncs), gauges set from the service's state when `/metrics` is read. Every name
//! starts with `openvaala_`; labels take bounded values (routes, not paths; configured model and
//! tool names).

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::model::TokenUsage;

/// Seconds: from a fast request to a long turn.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder (once per process) and returns what renders it.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), DURATION_BUCKETS)
                .expect("the buckets are not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder installed first (a test process) keeps its own: this one then
            // renders only what was described here.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "openvaala_http_requests_total",
        "HTTP requests answered, by route and status"
    );
    describe_histogram!(
        "openvaala_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request (an event stream: to its first byte), by route"
    );
    describe_counter!("openvaala_turns_total", "Turns ended, by status");
    describe_histogram!(
        "openvaala_turn_duration_seconds",
        Unit::Seconds,
        "How long a turn ran, by status"
    );
    describe_counter!(
        "openvaala_model_calls_total",
        "Model calls, by model and outcome"
    );
    describe_histogram!(
        "openvaala_model_call_duration_seconds",
        Unit::Seconds,
        "How long a model call took, by model"
    );
    describe_histogram!(
        "openvaala_model_time_to_first_token_seconds",
        Unit::Seconds,
        "Time to a model call's first streamed output, by model"
    );
    describe_counter!(
        "openvaala_model_tokens_total",
        "Tokens of model calls, by model and kind (input, cached, output)"
    );
    describe_counter!(
        "openvaala_tool_calls_total",
        "Tool calls, by tool and outcome"
    );
    describe_histogram!(
        "openvaala_tool_call_duration_seconds",
        Unit::Seconds,
        "How long a tool call ran, by tool"
    );
    describe_histogram!(
        "openvaala_approval_wait_seconds",
        Unit::Seconds,
        "How long an approval waited to be settled, by how it was"
    );
    describe_histogram!(
        "openvaala_fsync_duration_seconds",
        Unit::Seconds,
        "How long an append's fsync took"
    );
    describe_counter!(
        "openvaala_push_notifications_total",
        "Push notifications, by outcome: sent, gone or failed (POSTed to a push service), \
         skipped (the device was following)"
    );
    describe_counter!(
        "openvaala_sandbox_refusals_total",
        "Tool calls the sandbox or the permissions refused, by kind"
    );
    describe_gauge!(
        "openvaala_approvals_pending",
        "Approvals waiting for an answer"
    );
    describe_gauge!("openvaala_live_conversations", "Conversations in memory");
    describe_gauge!("openvaala_sse_subscribers", "Open event streams");
    describe_gauge!(
        "openvaala_index_queue_depth",
        "Index updates waiting to be written"
    );
    describe_gauge!(
        "openvaala_index_queue_oldest_seconds",
        "Age of the oldest index update waiting"
    );
    describe_gauge!("openvaala_mcp_servers", "MCP servers, by state");
    describe_gauge!(
        "openvaala_background_processes",
        "Background processes running"
    );
}

pub fn http_request(route: &str, status: u16, took: Duration) {
    metrics::counter!("openvaala_http_requests_total", "route" => route.to_owned(), "status" => status.to_string()).increment(1);
    metrics::histogram!("openvaala_http_request_duration_seconds", "route" => route.to_owned())
        .record(took.as_secs_f64());
}

pub fn turn_ended(status: &'static str, took: Duration) {
    metrics::counter!("openvaala_turns_total", "status" => status).increment(1);
    metrics::histogram!("openvaala_turn_duration_seconds", "status" => status)
        .record(took.as_secs_f64());
}

/// One model call's attempt: `outcome` is `ok`, `error` or `interrupted`.
pub fn model_call(
    model: &str,
    outcome: &'static str,
    took: Duration,
    first_token: Option<Duration>,
    usage: Option<&TokenUsage>,
) {
    let model = model.to_owned();
    metrics::counter!("openvaala_model_calls_total", "model" => model.clone(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!("openvaala_model_call_duration_seconds", "model" => model.clone())
        .record(took.as_secs_f64());
    if let Some(first) = first_token {
        metrics::histogram!("openvaala_model_time_to_first_token_seconds", "model" => model.clone())
            .record(first.as_secs_f64());
    }
    if let Some(usage) = usage {
        let tokens = |kind: &'static str, count: u64| {
            metrics::counter!("openvaala_model_tokens_total", "model" => model.clone(), "kind" => kind)
                .increment(count);
        };
        tokens("input", usage.input_tokens);
        tokens("cached", usage.cache_read_tokens);
        tokens("output", usage.output_tokens);
    }
}

pub fn tool_call(tool: &str, outcome: &'static str, took: Duration) {
    metrics::counter!("openvaala_tool_calls_total", "tool" => tool.to_owned(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!("openvaala_tool_call_duration_seconds", "tool" => tool.to_owned())
        .record(took.as_secs_f64());
}

pub fn approval_settled(status: &'static str, waited: Duration) {
    metrics::histogram!("openvaala_approval_wait_seconds", "status" => status)
        .record(waited.as_secs_f64());
}

pub fn fsync(took: Duration) {
    metrics::histogram!("openvaala_fsync_duration_seconds").record(took.as_secs_f64());
}

pub fn sandbox_refusal(kind: &'static str) {
    metrics::counter!("openvaala_sandbox_refusals_total", "kind" => kind).increment(1);
}

/// A push notification's attempt: `sent`, `gone` or `failed`; `skipped` when its device was
/// following the service (an event stream open).
pub fn push_sent(outcome: &'static str) {
    metrics::counter!("openvaala_push_notifications_total", "outcome" => outcome).increment(1);
}

/// The service's state when `/metrics` is read.
#[derive(Debug, Default)]
pub struct Gauges {
    pub approvals_pending: usize,
    pub live_conversations: usize,
    pub index_queue_depth: usize,
    pub index_queue_oldest: Duration,
    /// Servers by state name (`running`, `starting`, `failed`, …).
    pub mcp_servers: Vec<(&'static str, usize)>,
    pub background_processes: usize,
}

/// Sets the gauges, then renders every metric in Prometheus's text format.
pub fn render(handle: &PrometheusHandle, gauges: &Gauges) -> String {
    metrics::gauge!("openvaala_approvals_pending").set(gauges.approvals_pending as f64);
    metrics::gauge!("openvaala_live_conversations").set(gauges.live_conversations as f64);
    metrics::gauge!("openvaala_index_queue_depth").set(gauges.index_queue_depth as f64);
    metrics::gauge!("openvaala_index_queue_oldest_seconds")
        .set(gauges.index_queue_oldest.as_secs_f64());
    for (state, count) in &gauges.mcp_servers {
        metrics::gauge!("openvaala_mcp_servers", "state" => *state).set(*count as f64);
    }
    metrics::gauge!("openvaala_background_processes").set(gauges.background_processes as f64);
    handle.render()
}

/// An open event stream, counted in `openvaala_sse_subscribers` while it lives.
pub struct Subscriber(());

impl Subscriber {
    /// Counts one more open stream until it is dropped.
    pub fn open() -> Subscriber {
        metrics::gauge!("openvaala_sse_subscribers").increment(1.0);
        Subscriber(())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        metrics::gauge!("openvaala_sse_subscribers").decrement(1.0);
    }
}
