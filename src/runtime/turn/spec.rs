//! What a turn is handed when it starts: read by the loop (`mod.rs`) and by its model call.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{ReasoningContext, RetryConfig};
use crate::domain::Item;
use crate::model::{ModelClient, ToolSpec};
use crate::runtime::approvals::CallGate;
use crate::runtime::compaction::Compactor;
use crate::runtime::usage::UsageTracker;
use crate::tools::ToolContext;

/// Everything a turn needs, handed over by the actor when the turn starts.
pub struct TurnSpec {
    pub session_id: String,
    pub turn_id: String,
    pub client: Arc<dyn ModelClient>,
    pub model_name: String,
    /// The instructions but for the environment block.
    pub prompt: crate::runtime::instructions::Prompt,
    /// The session's environment block and what it says; `None` leaves it out.
    pub environment: Option<(
        Arc<crate::runtime::instructions::EnvironmentCell>,
        crate::runtime::instructions::Facts,
    )>,
    /// The whole instructions, set when the turn starts (`prompt` with the environment).
    pub instructions: Option<String>,
    /// The session's history so far, the messages of this turn included.
    pub history: Vec<Item>,
    pub tools: Vec<ToolSpec>,
    pub tool_context: ToolContext,
    /// Which calls run, ask a user first, or are refused.
    pub gate: Arc<CallGate>,
    pub max_output_tokens: u64,
    pub retry: RetryConfig,
    pub max_steps: u32,
    pub cancel: CancellationToken,
    /// Cuts short a wait before the model call's next attempt.
    pub retry_now: Arc<tokio::sync::Notify>,
    /// The model's window, and the usage at the start of the turn (its messages included): the
    /// turn keeps counting, and compacts before a model call that would reach the threshold.
    pub context_window: u64,
    pub usage: UsageTracker,
    pub compactor: Compactor,
    /// Which earlier reasoning the model takes back; unset: that of this turn.
    pub reasoning_context: Option<ReasoningContext>,
    /// Whether the provider takes reasoning back at all (`model::reasoning_carried`): if not,
    /// reasoning tokens take no room in the next request.
    pub reasoning_carried: bool,
    /// Snapshots of the working directory around calls that may change files.
    pub files: Option<crate::runtime::checkpointing::TurnFiles>,
}
