//! Model calls: one trait for every protocol, one internal event stream. A provider module turns
//! its wire format into `ModelEvent`s; the turn loop never sees a protocol's details.

pub mod anthropic_messages;
pub mod demo;
pub mod openai_chat;
pub mod openai_responses;
pub mod reader;
pub mod tokens;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::config::{Config, ModelOptions, Protocol};
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
    /// JSON Schema of the parameters.
    pub parameters: Value,
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

/// One configured model on its provider's shared endpoint: its requests carry its options.
struct ConfiguredModel {
    provider: Arc<dyn ProviderClient>,
    options: ModelOptions,
}

impl ModelClient for ConfiguredModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.provider.stream(request, &self.options)
    }
}

/// Whether a model's provider gets its reasoning back in the running turn's later requests
/// (so the reasoning takes room there): the Responses API's encrypted reasoning and
/// Anthropic's thinking blocks go back; Chat Completions has no way to take reasoning back.
pub fn reasoning_carried(config: &Config, model_id: &str) -> bool {
    config
        .model(model_id)
        .and_then(|model| config.providers.get(&model.provider))
        .is_some_and(|provider| {
            matches!(
                provider.protocol,
                Protocol::OpenaiResponses | Protocol::AnthropicMessages
            )
        })
}

/// The clients of the configured models, built once at start: one per provider, so a provider's
/// connections are shared by every model and turn that uses it.
#[derive(Clone)]
pub struct Models {
    demo: Arc<demo::DemoModel>,
    /// By provider name; the built-in provider is `demo`, not in here.
    providers: BTreeMap<String, Arc<dyn ProviderClient>>,
}

impl Models {
    pub fn new(config: &Config) -> Models {
        let providers = config
            .providers
            .iter()
            .filter_map(|(name, provider)| {
                let client: Arc<dyn ProviderClient> = match provider.protocol {
                    Protocol::OpenaiChat => Arc::new(openai_chat::OpenaiChat::new(provider)),
                    Protocol::OpenaiResponses => {
                        Arc::new(openai_responses::OpenaiResponses::new(provider))
                    }
                    Protocol::AnthropicMessages => {
                        Arc::new(anthropic_messages::AnthropicMessages::new(provider))
                    }
                    Protocol::Demo => return None,
                };
                Some((name.clone(), client))
            })
            .collect();
        Models {
            demo: Arc::new(demo::DemoModel::default()),
            providers,
        }
    }

    /// The client for a configured model id, or an explanation of why there is none.
    pub fn client(&self, config: &Config, model_id: &str) -> Result<Arc<dyn ModelClient>, String> {
        let model = config
            .model(model_id)
            .ok_or_else(|| format!("model `{model_id}` is not configured"))?;
        let provider = config
            .providers
            .get(&model.provider)
            .ok_or_else(|| format!("provider `{}` is not configured", model.provider))?;
        if provider.protocol == Protocol::Demo {
            return Ok(self.demo.clone());
        }
        let provider = self
            .providers
            .get(&model.provider)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "provider `{}` was not configured when the service started",
                    model.provider
                )
            })?;
        Ok(Arc::new(ConfiguredModel {
            provider,
            options: model.options.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_is_carried_where_the_protocol_sends_it_back() {
        let mut text = String::new();
        for protocol in ["openai_chat", "openai_responses", "anthropic_messages"] {
            text.push_str(&format!(
                "[providers.{protocol}]\nprotocol = \"{protocol}\"\nbase_url = \"https://x.test\"\n\
                 [models.{protocol}]\nprovider = \"{protocol}\"\nname = \"m\"\n\
                 context_window = 9000\nmax_output_tokens = 1000\n"
            ));
        }
        let config = Config::from_toml_str(&text, None).unwrap();
        let carried = |model: &str| reasoning_carried(&config, model);
        assert!(!carried("openai_chat"));
        assert!(carried("openai_responses"));
        assert!(carried("anthropic_messages"));
        assert!(!carried(crate::config::DEMO_MODEL));
        assert!(!carried("no_such_model"));
    }
}
