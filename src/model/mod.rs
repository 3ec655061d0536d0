//! Model calls: one trait for every protocol, one internal event stream. A provider module turns
//! its wire format into `ModelEvent`s; the turn loop never sees a protocol's details.

pub mod anthropic_messages;
mod client;
pub mod demo;
pub mod openai_chat;
pub mod openai_responses;
pub mod reader;
pub mod tokens;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{Config, ModelOptions, Protocol};
pub use client::{
    ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, NativeTool, ProviderClient,
    TokenUsage, ToolSpec,
};

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
