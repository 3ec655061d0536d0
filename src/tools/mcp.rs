//! MCP servers' tools as tools of the turn: their specs for the model, and a call's outcome as
//! a tool result (output capped like any tool's).

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::{ToolContext, ToolResult, ToolStatus, cap_head_and_tail};
use crate::mcp::CallStatus;
use crate::model::ToolSpec;

/// The specs of the tools of the agent's MCP servers, starting the servers not running.
pub async fn specs(ctx: &ToolContext) -> Vec<ToolSpec> {
    let Some(access) = &ctx.mcp else {
        return Vec::new();
    };
    access
        .hub
        .tools(access)
        .await
        .into_iter()
        .map(|tool| ToolSpec {
            name: tool.name.into(),
            description: tool.description.into(),
            parameters: tool.parameters,
        })
        .collect()
}

pub async fn run(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    live: &UnboundedSender<String>,
    cancel: &CancellationToken,
) -> ToolResult {
    let Some(access) = &ctx.mcp else {
        return ToolResult::failed(format!("unknown tool `{name}`"));
    };
    let outcome = access.hub.call(access, name, arguments, live, cancel).await;
    ToolResult {
        output: cap_head_and_tail(&outcome.text, ctx.max_output_bytes),
        exit_code: None,
        status: match outcome.status {
            CallStatus::Completed => ToolStatus::Completed,
            CallStatus::Failed => ToolStatus::Failed,
            CallStatus::Interrupted => ToolStatus::Interrupted,
        },
    }
}
