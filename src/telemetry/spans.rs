//! The spans of a turn, named and attributed by OpenTelemetry's GenAI semantic conventions so
//! that tools reading `gen_ai.*` (Langfuse, Phoenix, Grafana…) understand them: a turn is an
//! `invoke_agent` span (a sub-agent's turn its child), each model call a `chat` span, each
//! tool call an `execute_tool` span; approvals, compaction, MCP calls and checkpoint snapshots
//! get spans of their own. Values known only at the end are recorded on the span then.

use tracing::Span;
use tracing::field::Empty;

/// A turn of an agent.
pub fn invoke_agent(
    conversation_id: &str,
    session_id: &str,
    turn_id: &str,
    agent: &str,
    provider: &str,
    model: &str,
) -> Span {
    tracing::info_span!(
        target: "openvaala::turn",
        "invoke_agent",
        otel.name = format!("invoke_agent {agent}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_message = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.conversation.id = conversation_id,
        openvaala.session.id = session_id,
        openvaala.turn.id = turn_id,
        openvaala.turn.status = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
    )
}

/// One model call.
pub fn chat(conversation_id: &str, provider: &str, model: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: "openvaala::model",
        "chat",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_message = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.conversation.id = conversation_id,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        openvaala.attempt = attempt,
        openvaala.time_to_first_token_s = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
    )
}

/// One tool call.
pub fn execute_tool(conversation_id: &str, tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: "openvaala::tool",
        "execute_tool",
        otel.name = format!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_message = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.conversation.id = conversation_id,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        openvaala.tool.status = Empty,
    )
}

/// A user's answer waited for.
pub fn approval(tool: &str) -> Span {
    tracing::info_span!(
        target: "openvaala::approval",
        "approval",
        otel.name = format!("approval {tool}"),
        gen_ai.tool.name = tool,
        openvaala.approval.outcome = Empty,
    )
}

/// A compaction's summary call.
pub fn compaction(conversation_id: &str, reason: &str) -> Span {
    tracing::info_span!(
        target: "openvaala::compaction",
        "compaction",
        otel.name = "compaction",
        gen_ai.conversation.id = conversation_id,
        openvaala.compaction.reason = reason,
    )
}

/// A call to an MCP server's tool.
pub fn mcp_call(server: &str, tool: &str) -> Span {
    tracing::info_span!(
        target: "openvaala::mcp",
        "mcp_call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "client",
        mcp.server.name = server,
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
    )
}

/// A checkpoint snapshot of the working tree.
pub fn snapshot(when: &'static str) -> Span {
    tracing::info_span!(
        target: "openvaala::checkpoint",
        "checkpoint_snapshot",
        otel.name = "checkpoint snapshot",
        openvaala.snapshot.when = when,
    )
}

/// Marks `span` failed, with why.
pub fn failed(span: &Span, why: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_message", why);
}

/// Content goes on spans only when `telemetry.capture_content` is on, and redacted; `text` is
/// made only then.
pub fn record_content(span: &Span, field: &'static str, text: impl FnOnce() -> String) {
    if super::capture_content() {
        span.record(field, crate::redact::redact(&text()).as_ref());
    }
}
