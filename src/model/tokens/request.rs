//! What every request carries besides its history, counted the way each provider documents
//! it: the instructions, the tool definitions, and the protocol's fixed framing.
//!
//! - OpenAI (Chat Completions, Responses, and the demo model, which reports as OpenAI does):
//!   the method of OpenAI's cookbook on counting tokens with tiktoken. A message costs 3
//!   tokens of framing plus its role's token (so `MESSAGE_FRAMING`, 4) and its content; every
//!   reply is primed with 3 more. Function definitions are not counted as their JSON but as
//!   the model sees them: per function a fixed start (7 tokens for the `o200k_base` models,
//!   10 for the `cl100k_base` ones) and `name:description` (without a final full stop); when
//!   it has parameters, 3 more and per parameter 3 plus `name:type:description` (an `enum`
//!   costs 3 per value plus the value, less 3); and 12 after the last function.
//! - Anthropic: tools are sent as their JSON (name, description, input schema), and using
//!   tools adds a system prompt whose size Anthropic's pricing documentation gives: 346
//!   tokens for current models with `tool_choice` `auto` (what the runtime sends).

use serde_json::Value;

use super::{MESSAGE_FRAMING, Tokenizer};
use crate::config::{Config, Protocol};
use crate::model::ToolSpec;

/// OpenAI: every reply is primed with `<|start|>assistant<|message|>`.
const REPLY_PRIMING: u64 = 3;
/// OpenAI: tokens per function definition before its name, for `o200k_base` models.
const FUNCTION_START_O200K: u64 = 7;
/// OpenAI: the same for `cl100k_base` models (GPT-4, GPT-3.5).
const FUNCTION_START_CL100K: u64 = 10;
/// OpenAI: tokens when a function has parameters.
const PARAMETERS_START: u64 = 3;
/// OpenAI: tokens per parameter.
const PARAMETER_START: u64 = 3;
/// OpenAI: an `enum` list costs 3 per value, less this once.
const ENUM_START: i64 = -3;
const ENUM_VALUE: u64 = 3;
/// OpenAI: tokens after the last function definition.
const FUNCTIONS_END: u64 = 12;
/// Anthropic: the system prompt that tool use adds (`tool_choice` `auto` or `none`).
const ANTHROPIC_TOOL_PROMPT: u64 = 346;
/// Anthropic: what its text editor tool adds to a request, as its documentation gives it.
const ANTHROPIC_TEXT_EDITOR: u64 = 700;

impl Tokenizer {
    /// The protocol a configured model is called with (OpenAI's Chat Completions for a model
    /// the config does not have, as the default tokenizer is OpenAI's).
    pub fn protocol(config: &Config, model_id: &str) -> Protocol {
        config
            .model(model_id)
            .and_then(|model| config.providers.get(&model.provider))
            .map_or(Protocol::OpenaiChat, |provider| provider.protocol)
    }

    /// What every request carries besides the history: the instructions (the agent's, with
    /// AGENTS.md), the tool definitions and the protocol's fixed framing, counted as the
    /// protocol's provider documents (see the module's comment).
    pub fn request_overhead(
        self,
        protocol: Protocol,
        instructions: Option<&str>,
        tools: &[ToolSpec],
    ) -> u64 {
        let instructions = instructions.map_or(0, |text| self.count(text) + MESSAGE_FRAMING);
        match protocol {
            Protocol::AnthropicMessages => instructions + self.anthropic_tools(tools),
            Protocol::OpenaiChat | Protocol::OpenaiResponses | Protocol::Demo => {
                instructions + REPLY_PRIMING + self.openai_functions(tools)
            }
        }
    }

    fn anthropic_tools(self, tools: &[ToolSpec]) -> u64 {
        if tools.is_empty() {
            return 0;
        }
        let definitions = crate::model::anthropic_messages::tool_definitions(tools);
        let editor = tools
            .iter()
            .any(|tool| tool.native == Some(crate::model::NativeTool::TextEditor));
        ANTHROPIC_TOOL_PROMPT
            + self.count(&definitions.to_string())
            + if editor { ANTHROPIC_TEXT_EDITOR } else { 0 }
    }

    fn openai_functions(self, tools: &[ToolSpec]) -> u64 {
        if tools.is_empty() {
            return 0;
        }
        let start = match self {
            Tokenizer::Cl100kBase => FUNCTION_START_CL100K,
            Tokenizer::O200kBase | Tokenizer::Anthropic => FUNCTION_START_O200K,
        };
        // A native tool (the built-in `apply_patch`) has no definition of its own in the request;
        // OpenAI documents no count for it.
        let functions: u64 = tools
            .iter()
            .filter(|tool| tool.native.is_none())
            .map(|tool| {
                let description = tool.description.strip_suffix('.');
                let description = description.unwrap_or(&tool.description);
                let mut tokens = start + self.count(&format!("{}:{description}", tool.name));
                let properties = tool.parameters["properties"].as_object();
                if let Some(properties) = properties.filter(|properties| !properties.is_empty()) {
                    tokens += PARAMETERS_START;
                    for (name, property) in properties {
                        tokens += PARAMETER_START + self.enum_tokens(property);
                        let kind = property["type"].as_str().unwrap_or_default();
                        let text = property["description"].as_str().unwrap_or_default();
                        let text = text.strip_suffix('.').unwrap_or(text);
                        tokens += self.count(&format!("{name}:{kind}:{text}"));
                    }
                }
                tokens
            })
            .sum();
        functions + FUNCTIONS_END
    }

    /// A parameter's `enum` values, as OpenAI counts them.
    fn enum_tokens(self, property: &Value) -> u64 {
        let Some(values) = property["enum"].as_array() else {
            return 0;
        };
        let values: u64 = values
            .iter()
            .map(|value| {
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                ENUM_VALUE + self.count(&text)
            })
            .sum();
        values.saturating_add_signed(ENUM_START)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::domain::{Item, ItemKind, ItemStatus, MessageSource};

    const CORPUS: &str = include_str!("corpus.txt");

    /// The default agent's tools: every one.
    fn default_tools() -> Vec<ToolSpec> {
        let names: Vec<String> = crate::config::ALL_TOOLS
            .iter()
            .map(|name| name.to_string())
            .collect();
        let tools = crate::tools::specs(&names);
        assert_eq!(tools.len(), crate::config::ALL_TOOLS.len());
        tools
    }

    /// A conversation: the corpus's paragraphs, alternately the user's and the agent's.
    fn conversation() -> Vec<(&'static str, &'static str)> {
        CORPUS
            .split("\n\n")
            .filter(|part| !part.is_empty())
            .enumerate()
            .map(|(index, text)| (if index % 2 == 0 { "user" } else { "assistant" }, text))
            .collect()
    }

    fn item(role: &str, text: &str) -> Item {
        let kind = match role {
            "user" => ItemKind::UserMessage {
                hooks: Vec::new(),
                text: text.to_owned(),
                source: MessageSource::User,
                from_session_id: None,
                images: Vec::new(),
                command: None,
            },
            _ => ItemKind::AgentMessage {
                text: text.to_owned(),
            },
        };
        Item {
            id: "m_1".into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            seq: 1,
            created_at: crate::domain::now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: Some(1),
            kind,
        }
    }

    /// OpenAI's published method, from the messages and functions as sent (the cookbook's
    /// `num_tokens_from_messages` and `num_tokens_for_tools`, for gpt-4o).
    fn openai_published(encode: impl Fn(&str) -> u64, messages: &[Value], tools: &[Value]) -> u64 {
        let mut tokens = 3;
        for message in messages {
            tokens += 3;
            for value in message.as_object().unwrap().values() {
                tokens += encode(value.as_str().unwrap());
            }
        }
        if tools.is_empty() {
            return tokens;
        }
        for tool in tools {
            let function = &tool["function"];
            let description = function["description"].as_str().unwrap();
            let description = description.strip_suffix('.').unwrap_or(description);
            tokens += 7 + encode(&format!(
                "{}:{description}",
                function["name"].as_str().unwrap()
            ));
            let properties = function["parameters"]["properties"].as_object();
            if let Some(properties) = properties.filter(|properties| !properties.is_empty()) {
                tokens += 3;
                for (key, property) in properties {
                    tokens += 3;
                    if let Some(values) = property["enum"].as_array() {
                        tokens -= 3;
                        for value in values {
                            tokens += 3 + encode(value.as_str().unwrap());
                        }
                    }
                    let description = property["description"].as_str().unwrap_or_default();
                    let description = description.strip_suffix('.').unwrap_or(description);
                    let kind = property["type"].as_str().unwrap_or_default();
                    tokens += encode(&format!("{key}:{kind}:{description}"));
                }
            }
        }
        tokens + 12
    }

    /// Anthropic's: the tool-use system prompt and the tools' JSON as sent; messages framed as
    /// OpenAI's are (Anthropic publishes no framing).
    fn anthropic_published(
        encode: impl Fn(&str) -> u64,
        messages: &[Value],
        tools: &[Value],
    ) -> u64 {
        let mut tokens = 0;
        for message in messages {
            tokens += 3;
            for value in message.as_object().unwrap().values() {
                tokens += encode(value.as_str().unwrap());
            }
        }
        if tools.is_empty() {
            return tokens;
        }
        tokens + 346 + encode(&Value::Array(tools.to_vec()).to_string())
    }

    #[test]
    fn request_estimates_are_within_two_percent_of_the_published_methods() {
        let instructions = "You are a careful coding agent. Read before you write, run the tests, \
                            and say what you changed.";
        let items: Vec<Item> = conversation()
            .into_iter()
            .map(|(role, text)| item(role, text))
            .collect();
        let mut messages = vec![json!({"role": "system", "content": instructions})];
        messages.extend(
            conversation()
                .into_iter()
                .map(|(role, text)| json!({"role": role, "content": text})),
        );
        for protocol in [
            Protocol::OpenaiChat,
            Protocol::OpenaiResponses,
            Protocol::AnthropicMessages,
        ] {
            let tokenizer = match protocol {
                Protocol::AnthropicMessages => Tokenizer::Anthropic,
                _ => Tokenizer::O200kBase,
            };
            let encode = |text: &str| tokenizer.encode_count(text);
            for tools in [Vec::new(), default_tools()] {
                let sent: Vec<Value> = tools
                    .iter()
                    .map(|tool| match protocol {
                        Protocol::AnthropicMessages => json!({
                            "name": tool.name,
                            "description": tool.description,
                            "input_schema": tool.parameters,
                        }),
                        _ => json!({"type": "function", "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        }}),
                    })
                    .collect();
                let published = match protocol {
                    Protocol::AnthropicMessages => anthropic_published(encode, &messages, &sent),
                    _ => openai_published(encode, &messages, &sent),
                } as f64;
                let estimate = tokenizer.request_overhead(protocol, Some(instructions), &tools)
                    + items
                        .iter()
                        .map(|item| tokenizer.item_tokens(item).0)
                        .sum::<u64>();
                let error = (estimate as f64 - published) / published;
                assert!(
                    error.abs() <= 0.02,
                    "{protocol:?} with {} tools: estimate {estimate}, published {published}, \
                     error {:.2} %",
                    tools.len(),
                    error * 100.0
                );
            }
        }
    }

    #[test]
    fn tool_use_costs_anthropics_system_prompt() {
        let tools = default_tools();
        let tokenizer = Tokenizer::Anthropic;
        let with = tokenizer.request_overhead(Protocol::AnthropicMessages, None, &tools);
        let without = tokenizer.request_overhead(Protocol::AnthropicMessages, None, &[]);
        assert_eq!(without, 0);
        let sent = crate::model::anthropic_messages::tool_definitions(&tools);
        let json = tokenizer.count(&sent.to_string());
        assert_eq!(with, 346 + json);
    }
}
