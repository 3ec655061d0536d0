//! What a turn is handed when it starts: read by the loop (`mod.rs`) and by its model call.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{ReasoningContext, RetryConfig};
use crate::domain::Item;
use crate::model::{ModelClient, ToolSpec};
use crate::runtime::approvals::CallGate;
use crate::runtime::compaction::Compactor;
use crate::runtime::instructions::{EnvironmentCell, Facts};
use crate::runtime::usage::UsageTracker;
use crate::tools::ToolContext;

/// Everything a turn needs, handed over by the actor when the turn starts.
pub struct TurnSpec {
    pub session_id: String,
    pub turn_id: String,
    /// The model the calls go to now: the session's, until it failed and a fallback took over.
    pub model: ModelSetup,
    /// The models to go to next, in order, when the current one fails for good.
    pub fallbacks: std::collections::VecDeque<ModelSetup>,
    /// Reasoning state from before this step of the turn is not sent: another model (a
    /// fallback) answers from it, and a provider's signed state goes to nobody else.
    pub reasoning_from_step: Option<u32>,
    /// The instructions but for the environment block.
    pub prompt: crate::runtime::instructions::Prompt,
    /// The session's environment block (what it says is in each model's `facts`); `None`
    /// leaves it out.
    pub environment: Option<Arc<EnvironmentCell>>,
    /// The whole instructions, set when the turn starts (`prompt` with the environment).
    pub instructions: Option<String>,
    /// The session's history so far, the messages of this turn included.
    pub history: Vec<Item>,
    /// What the current model is offered: its built-in tools, then the MCP tools.
    pub tools: Vec<ToolSpec>,
    pub tool_context: ToolContext,
    /// Which calls run, ask a user first, or are refused.
    pub gate: Arc<CallGate>,
    /// The config's hooks (`pre_tool_use` is asked before the gate), and who this turn is to
    /// them.
    pub hooks: Arc<crate::hooks::Hooks>,
    pub hook_subject: crate::hooks::Subject,
    pub retry: RetryConfig,
    pub max_steps: u32,
    pub cancel: CancellationToken,
    /// Cuts short a wait before the model call's next attempt.
    pub retry_now: Arc<tokio::sync::Notify>,
    /// The usage at the start of the turn (its messages included): the turn keeps counting,
    /// and compacts before a model call that would reach the threshold.
    pub usage: UsageTracker,
    pub compactor: Compactor,
    /// Snapshots of the working directory around calls that may change files.
    pub files: Option<crate::runtime::checkpointing::TurnFiles>,
    /// The user's config directory, where their own skills live (`skills/`).
    pub user_dir: Option<std::path::PathBuf>,
    /// The skills of the working directory, read when the turn starts (when the agent has the
    /// `skill` tool), and the one in use.
    pub skills: super::skills::TurnSkills,
    /// The trace this turn belongs under: the tool call that started this sub-agent's turn.
    pub trace_parent: Option<opentelemetry::Context>,
}

/// One model a turn may call: the session's own, or one of its fallbacks.
pub struct ModelSetup {
    /// Its name in the configuration.
    pub id: String,
    /// Who serves it, as traces name it (`gen_ai.provider.name`).
    pub provider: &'static str,
    pub client: Arc<dyn ModelClient>,
    /// The provider's name of the model.
    pub name: String,
    /// The built-in tools it is offered (the edit tool in its shape); MCP tools join them.
    pub builtin_tools: Vec<ToolSpec>,
    /// What the environment block says with this model; `None` without the block.
    pub facts: Option<Facts>,
    pub max_output_tokens: u64,
    pub context_window: u64,
    /// Which earlier reasoning the model takes back; unset: that of this turn.
    pub reasoning_context: Option<ReasoningContext>,
    /// Whether the provider takes reasoning back at all (`model::reasoning_carried`): if not,
    /// reasoning tokens take no room in the next request.
    pub reasoning_carried: bool,
}
