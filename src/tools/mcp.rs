//! MCP servers' tools as tools of the turn: their specs for the model, and a call's outcome as
//! a tool result (output capped like any tool's).

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::call::{ToolContext, ToolResult, ToolStatus};
use super::output::cap_head_and_tail;
use crate::domain::Image;
use crate::mcp::CallStatus;
use crate::model::ToolSpec;

/// The agent's MCP servers as a turn found them: the specs of the tools of those ready, and
/// the servers still starting or that could not start.
#[derive(Debug, Default)]
pub struct McpSpecs {
    pub specs: Vec<ToolSpec>,
    pub starting: Vec<String>,
    pub failed: Vec<(String, String)>,
}

/// The agent's MCP servers, starting those not running and waiting for them at most their
/// `start_wait` (`tools.mcp_start_wait_ms`): a server not ready by then is left out of the
/// first model call, and offered from the first call after it is.
pub async fn specs(ctx: &ToolContext) -> McpSpecs {
    match &ctx.mcp {
        Some(access) => as_specs(access.hub.tools(access, access.start_wait).await),
        None => McpSpecs::default(),
    }
}

/// Those of `names` (still starting when last asked) that are ready now.
pub async fn ready_specs(ctx: &ToolContext, names: &[String]) -> McpSpecs {
    match &ctx.mcp {
        Some(access) => as_specs(access.hub.ready_now(access, names).await),
        None => McpSpecs::default(),
    }
}

/// Sorted by name, so that the tool list of every request is the same bytes whatever order
/// servers answered in (a provider's prompt cache depends on it).
fn as_specs(found: crate::mcp::TurnTools) -> McpSpecs {
    let mut specs: Vec<ToolSpec> = found
        .tools
        .into_iter()
        .map(|tool| ToolSpec {
            name: tool.name.into(),
            description: tool.description.into(),
            parameters: tool.parameters,
            native: None,
        })
        .collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    McpSpecs {
        specs,
        starting: found.starting,
        failed: found.failed,
    }
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
    let (images, left_out) = usable_images(outcome.images);
    let mut output = outcome.text;
    for reason in left_out {
        output.push_str(&format!("\n[image left out: {reason}]"));
    }
    ToolResult {
        output: cap_head_and_tail(&output, ctx.max_output_bytes),
        exit_code: None,
        status: match outcome.status {
            CallStatus::Completed => ToolStatus::Completed,
            CallStatus::Failed => ToolStatus::Failed,
            CallStatus::Interrupted => ToolStatus::Interrupted,
        },
        images,
    }
}

/// The images a provider will take, by the rules of a message's images (they go with every
/// later request of the conversation, so one a provider refuses would fail every turn after
/// it); the others are left out, each with its reason.
fn usable_images(images: Vec<Image>) -> (Vec<Image>, Vec<String>) {
    let mut kept: Vec<Image> = Vec::new();
    let mut left_out = Vec::new();
    for image in images {
        kept.push(image);
        if let Err(refusal) = crate::images::check(&kept) {
            kept.pop();
            // The message names the image by its place in `kept` (`images[2]: …`): dropped.
            let message = refusal.message();
            let reason = message.split_once(": ").map_or(message, |(_, why)| why);
            left_out.push(reason.to_owned());
        }
    }
    (kept, left_out)
}
