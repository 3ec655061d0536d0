//! What a model call is, for every protocol: the request, the stream of events it answers with
//! and its errors, and the traits a model's or a provider's client implements. Kept apart from
//! the front (`model/mod.rs`), which builds the protocols' clients, so that the protocol
//! modules use no module that uses them.

use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::config::ModelOptions;
use crate::domain::Item;

/// What a model call needs: the instructions, the history as items, and the tools it may call.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The provider's name for the model.
    pub model: String,
    pub instructions: Option<String>,
    pub history: Vec<Item>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: u64,
    /// Which earlier reasoning the model takes back (`reasoning_context`; unset: the running
    /// turn's). The caller leaves the provider state of the rest out of `history`; a protocol
    /// sends back what state is there.
    pub reasoning_context: Option<crate::config::ReasoningContext>,
    /// What the provider keys its prompt cache by (the session's id: stable across a
    /// conversation's calls, another for each sub-agent); `None` asks for no caching.
    pub cache_key: Option<String>,
    /// A request for a compaction summary of the older history. Real providers get it as any
    /// request (the instructions say what to write); the demo model answers it with its own
    /// summary.
    pub compaction: bool,
}

#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Fixed for the built-in tools; an MCP server's tool is `mcp__<server>__<tool>`.
    pub name: std::borrow::Cow<'static, str>,
    /// Fixed for most tools; `spawn_agent`'s lists the configured agents.
    pub description: std::borrow::Cow<'static, str>,
    /// JSON Schema of the parameters (`Null` for a native tool, which has none of its own).
    pub parameters: Value,
    /// Set for a tool the provider defines itself: the request names its type, not a schema.
    pub native: Option<NativeTool>,
}

/// A tool a provider defines itself and trains its models on. Only the protocol it belongs to
/// is offered it (the runtime picks the shape per model); its calls are stored as tool calls
/// like any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeTool {
    /// OpenAI Responses' built-in `apply_patch` (`{"type": "apply_patch"}`): calls are
    /// `apply_patch_call` items, stored as `apply_patch` with `{"operation": …}` arguments.
    ApplyPatch,
    /// Anthropic's text editor tool (`text_editor_20250728`, named
    /// `str_replace_based_edit_tool`): calls are ordinary `tool_use` blocks.
    TextEditor,
}

impl NativeTool {
    /// The name its calls carry.
    pub fn name(self) -> &'static str {
        match self {
            NativeTool::ApplyPatch => "apply_patch",
            NativeTool::TextEditor => "str_replace_based_edit_tool",
        }
    }

    /// Its spec, for a request's tool list.
    pub fn spec(self) -> ToolSpec {
        ToolSpec {
            name: self.name().into(),
            description: "".into(),
            parameters: Value::Null,
            native: Some(self),
        }
    }
}

/// One step of a streamed model answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// What the provider needs back to carry the reasoning just streamed into a later request
    /// (kept with the reasoning item; see `ItemKind::Reasoning::state`).
    ReasoningState(Value),
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
    },
    Usage(TokenUsage),
    /// The provider sent something that is not yet an event of its own (a piece of a tool
    /// call's arguments, a ping): the stream is alive. Sent at most every `PROGRESS_EVERY`.
    Progress,
    /// The provider's completion marker. A stream that ends without it was cut.
    Done,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `output_tokens` that was reasoning, when the provider says.
    pub reasoning_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache (Anthropic charges it apart).
    pub cache_write_tokens: u64,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ModelError {
    /// Worth retrying (the turn retries it, waiting longer each time): connection errors,
    /// timeouts, 408/429/5xx, a cut stream.
    #[error("{message}")]
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help: 400/401/403/404, an invalid request, a missing key.
    #[error("{0}")]
    Fatal(String),
    /// The provider refused the request as larger than the model's context window (its count
    /// was higher than the meter's estimate). Sending it again cannot help; a turn compacts
    /// its history and calls once more.
    #[error("{0}")]
    ContextOverflow(String),
}

impl ModelError {
    pub fn transient(message: impl Into<String>) -> ModelError {
        ModelError::Transient {
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error with where it happened added in parentheses (the URL called and the
    /// status it answered), keeping its class.
    pub fn context(self, context: &str) -> ModelError {
        match self {
            ModelError::Transient {
                message,
                retry_after,
            } => ModelError::Transient {
                message: format!("{message} ({context})"),
                retry_after,
            },
            ModelError::Fatal(message) => ModelError::Fatal(format!("{message} ({context})")),
            ModelError::ContextOverflow(message) => {
                ModelError::ContextOverflow(format!("{message} ({context})"))
            }
        }
    }
}

pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A model endpoint. Implementations are cheap to share between turns.
pub trait ModelClient: Send + Sync {
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

/// A provider's endpoint, shared by every model it serves: each call says the options of the
/// model it is for.
pub trait ProviderClient: Send + Sync {
    fn stream(&self, request: ModelRequest, options: &ModelOptions) -> ModelStream;
}
