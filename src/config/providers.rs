//! The `[providers.*]` and `[models.*]` tables: the wire protocol and URL of each provider, the
//! models each serves with their context sizes, and the built-in offline provider and model.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::validator::{ConfigError, Validator, join_names};

/// The provider behind the built-in offline model; always present.
pub const BUILTIN_PROVIDER: &str = "builtin";
/// The built-in offline model; always present.
pub const DEMO_MODEL: &str = "demo";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub protocol: Protocol,
    /// Starts with `http://` or `https://`; empty only for the built-in provider.
    pub base_url: String,
    /// The name of the environment variable holding the API key, not the key itself.
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Names an entry of `Config::providers`.
    pub provider: String,
    /// The provider's name for the model.
    pub name: String,
    /// In tokens; greater than `max_output_tokens`.
    pub context_window: u64,
    pub max_output_tokens: u64,
    /// Which turns' reasoning goes back to the model (unset: the running turn's); read by the
    /// protocols that take reasoning back (`openai_responses`, `anthropic_messages`).
    pub reasoning_context: Option<ReasoningContext>,
    /// How the usage meter counts this model's tokens; `None`: chosen from the protocol and
    /// the model's name (`model::tokens::Tokenizer::for_model`).
    pub tokenizer: Option<TokenizerName>,
    /// What the model's requests ask of its provider besides the history.
    pub options: ModelOptions,
    /// The shape the agents' edit tool is offered in to this model (`edit_tool`).
    pub edit_tool: EditTool,
    /// What its tokens cost (`price`); `None`: turns show tokens only, never a made-up cost.
    pub price: Option<Price>,
    /// The models a call goes to, in order, once this one's retries are used up on an
    /// overload, a rate limit or a server error (`fallback`); each names another model.
    pub fallback: Vec<String>,
}

/// A model's `price`: currency units per million tokens, as the provider's price list gives
/// them. Cached input and cache writes cost the input price unless given.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cached_input: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// What one call's reported tokens cost: the input read fresh, read from the cache and
    /// written to it, and the output, each at its own price.
    pub fn cost(&self, input: u64, cache_read: u64, cache_write: u64, output: u64) -> f64 {
        let fresh = input.saturating_sub(cache_read + cache_write);
        let per_token = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per_token(fresh, self.input)
            + per_token(cache_read, self.cached_input.unwrap_or(self.input))
            + per_token(cache_write, self.cache_write.unwrap_or(self.input))
            + per_token(output, self.output)
    }
}

/// The `edit_tool` key of a model: which shape of the one edit operation its requests offer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditTool {
    /// The provider's own tool where its protocol has one (OpenAI Responses: the built-in
    /// `apply_patch`; Anthropic: the text editor tool), else the `edit_file` function.
    #[default]
    Native,
    /// The `edit_file` function (exact string replacement), on every protocol.
    EditFile,
    /// The `edit_file` function and beside it `apply_patch`, a function taking a whole V4A
    /// patch, for models trained on it.
    ApplyPatch,
}

/// A model's switches that belong to one protocol each (the validator refuses them on a model
/// of another protocol), sent with every request to that model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelOptions {
    /// `anthropic_messages`: extended thinking.
    pub thinking: Option<Thinking>,
    /// `openai_responses`: the request's `reasoning` object.
    pub reasoning: Option<Reasoning>,
    /// `openai_chat`: the name the output limit is sent under.
    pub max_tokens_field: MaxTokensField,
    /// Whether requests ask the provider to cache their prefix (`prompt_cache`, on by
    /// default): Anthropic's `cache_control` breakpoints, OpenAI's `prompt_cache_key`.
    pub prompt_cache: bool,
    /// `anthropic_messages`: how long a cached prefix lives (`cache_ttl`; unset: 5 minutes).
    pub cache_ttl: Option<CacheTtl>,
    /// `openai_chat`, `openai_responses`: `prompt_cache_retention` as the request carries it.
    pub prompt_cache_retention: Option<CacheRetention>,
}

/// The `prompt_cache` key of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptCache {
    Auto,
    Off,
}

/// The `cache_ttl` key of an `anthropic_messages` model: Anthropic's two cache lifetimes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CacheTtl {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }
}

/// The `prompt_cache_retention` key of an OpenAI model, sent as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CacheRetention {
    #[serde(rename = "in_memory")]
    InMemory,
    #[serde(rename = "24h")]
    Day,
}

impl CacheRetention {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheRetention::InMemory => "in_memory",
            CacheRetention::Day => "24h",
        }
    }
}

impl Default for ModelOptions {
    /// No thinking or reasoning object, the current output-limit name, prompt caching on.
    fn default() -> ModelOptions {
        ModelOptions {
            thinking: None,
            reasoning: None,
            max_tokens_field: MaxTokensField::default(),
            prompt_cache: true,
            cache_ttl: None,
            prompt_cache_retention: None,
        }
    }
}

/// The `max_tokens_field` key of an `openai_chat` model. OpenAI's reference marks `max_tokens`
/// deprecated and its reasoning models refuse it; some compatible servers know only it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    #[default]
    MaxCompletionTokens,
    MaxTokens,
}

impl MaxTokensField {
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        }
    }
}

/// The `reasoning` key of an `openai_responses` model: how hard a reasoning model thinks and
/// whether it writes a summary of its reasoning (what clients see of it); either may be left
/// to the provider's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<ReasoningSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningSummary {
    Auto,
    Concise,
    Detailed,
}

/// The `thinking` key of an `anthropic_messages` model: `{ budget_tokens = N }` or
/// `"adaptive"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// At most this many tokens of thinking: at least 1024, and fewer than
    /// `max_output_tokens`, which they count towards.
    Budget(u64),
    /// The model decides how much to think.
    Adaptive,
}

/// Anthropic's smallest thinking budget.
pub const MIN_THINKING_BUDGET: u64 = 1024;

/// The `tokenizer` key of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerName {
    O200kBase,
    Cl100kBase,
    Anthropic,
}

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    OpenaiChat,
    OpenaiResponses,
    AnthropicMessages,
    /// The built-in offline model; not allowed in a file.
    Demo,
}

impl Protocol {
    /// The provider as OpenTelemetry's GenAI conventions name it (`gen_ai.provider.name`).
    pub fn provider_name(self) -> &'static str {
        match self {
            Protocol::OpenaiChat | Protocol::OpenaiResponses => "openai",
            Protocol::AnthropicMessages => "anthropic",
            Protocol::Demo => "openvaala.demo",
        }
    }
}

/// Whether earlier turns' reasoning stays in the context; read by the protocols that take
/// reasoning back (`openai_responses`, `anthropic_messages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningContext {
    AllTurns,
    CurrentTurn,
}

impl Protocol {
    pub fn as_str(&self) -> &'static str {
        match self {
            Protocol::OpenaiChat => "openai_chat",
            Protocol::OpenaiResponses => "openai_responses",
            Protocol::AnthropicMessages => "anthropic_messages",
            Protocol::Demo => "demo",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ReasoningContext {
    pub fn as_str(&self) -> &'static str {
        match self {
            ReasoningContext::AllTurns => "all_turns",
            ReasoningContext::CurrentTurn => "current_turn",
        }
    }
}

impl fmt::Display for ReasoningContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(super) fn builtin_provider() -> ProviderConfig {
    ProviderConfig {
        protocol: Protocol::Demo,
        base_url: String::new(),
        api_key_env: None,
    }
}

pub(super) fn demo_model() -> ModelConfig {
    ModelConfig {
        provider: BUILTIN_PROVIDER.to_string(),
        name: DEMO_MODEL.to_string(),
        context_window: 32_768,
        max_output_tokens: 4_096,
        reasoning_context: None,
        tokenizer: None,
        options: ModelOptions::default(),
        edit_tool: EditTool::default(),
        price: None,
        fallback: Vec::new(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    protocol: Protocol,
    base_url: String,
    api_key_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    provider: String,
    name: String,
    context_window: u64,
    max_output_tokens: u64,
    reasoning_context: Option<ReasoningContext>,
    tokenizer: Option<TokenizerName>,
    /// Read by [`Validator::thinking`], which explains a wrong shape better than serde.
    thinking: Option<toml::Value>,
    reasoning: Option<Reasoning>,
    max_tokens_field: Option<MaxTokensField>,
    edit_tool: Option<EditTool>,
    prompt_cache: Option<PromptCache>,
    cache_ttl: Option<CacheTtl>,
    prompt_cache_retention: Option<CacheRetention>,
    price: Option<Price>,
    fallback: Option<Vec<String>>,
}

impl Validator<'_> {
    pub(super) fn providers(
        &self,
        raw: BTreeMap<String, RawProvider>,
    ) -> Result<BTreeMap<String, ProviderConfig>, ConfigError> {
        let mut providers = BTreeMap::new();
        for (id, provider) in raw {
            if id == BUILTIN_PROVIDER {
                return Err(self.invalid(
                    format!("providers.{id}"),
                    format!("`{BUILTIN_PROVIDER}` is reserved for the built-in provider"),
                ));
            }
            if provider.protocol == Protocol::Demo {
                return Err(self.invalid(
                    format!("providers.{id}.protocol"),
                    "`demo` is reserved for the built-in model \
                     (use openai_chat, openai_responses or anthropic_messages)",
                ));
            }
            let base_url = &provider.base_url;
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(self.invalid(
                    format!("providers.{id}.base_url"),
                    format!("must start with http:// or https://, got `{base_url}`"),
                ));
            }
            let has_host = reqwest::Url::parse(base_url)
                .is_ok_and(|url| url.host_str().is_some_and(|host| !host.is_empty()));
            if !has_host {
                return Err(self.invalid(
                    format!("providers.{id}.base_url"),
                    format!("must be a URL with a host, got `{base_url}`"),
                ));
            }
            if provider.api_key_env.as_deref().is_some_and(str::is_empty) {
                return Err(self.invalid(
                    format!("providers.{id}.api_key_env"),
                    "must name an environment variable, or be left out",
                ));
            }
            providers.insert(
                id,
                ProviderConfig {
                    protocol: provider.protocol,
                    base_url: provider.base_url,
                    api_key_env: provider.api_key_env,
                },
            );
        }
        providers.insert(BUILTIN_PROVIDER.to_string(), builtin_provider());
        Ok(providers)
    }

    pub(super) fn models(
        &self,
        raw: BTreeMap<String, Spanned<RawModel>>,
        providers: &BTreeMap<String, ProviderConfig>,
    ) -> Result<BTreeMap<String, ModelConfig>, ConfigError> {
        let mut models = BTreeMap::new();
        for (id, model) in raw {
            let model = model.into_inner();
            if id == DEMO_MODEL {
                return Err(self.invalid(
                    format!("models.{id}"),
                    format!("`{DEMO_MODEL}` is reserved for the built-in model"),
                ));
            }
            if !providers.contains_key(&model.provider) {
                return Err(self.invalid(
                    format!("models.{id}.provider"),
                    format!(
                        "unknown provider `{}` (providers: {})",
                        model.provider,
                        join_names(providers.keys())
                    ),
                ));
            }
            if model.context_window == 0 {
                return Err(
                    self.invalid(format!("models.{id}.context_window"), "must be at least 1")
                );
            }
            if model.max_output_tokens == 0 {
                return Err(self.invalid(
                    format!("models.{id}.max_output_tokens"),
                    "must be at least 1",
                ));
            }
            if model.max_output_tokens >= model.context_window {
                return Err(self.invalid(
                    format!("models.{id}.max_output_tokens"),
                    format!(
                        "must be smaller than context_window ({} >= {})",
                        model.max_output_tokens, model.context_window
                    ),
                ));
            }
            let protocol = providers[&model.provider].protocol;
            let options = ModelOptions {
                thinking: self.thinking(&id, &model, protocol)?,
                reasoning: model.reasoning,
                max_tokens_field: model.max_tokens_field.unwrap_or_default(),
                prompt_cache: model.prompt_cache != Some(PromptCache::Off),
                cache_ttl: model.cache_ttl,
                prompt_cache_retention: model.prompt_cache_retention,
            };
            if let Some(price) = &model.price {
                let prices = [
                    Some(price.input),
                    Some(price.output),
                    price.cached_input,
                    price.cache_write,
                ];
                if prices
                    .into_iter()
                    .flatten()
                    .any(|value| !value.is_finite() || value < 0.0)
                {
                    return Err(self.invalid(
                        format!("models.{id}.price"),
                        "prices must be numbers of 0 or more (currency units per million tokens)",
                    ));
                }
            }
            if model.cache_ttl.is_some() {
                let key = format!("models.{id}.cache_ttl");
                self.only_for(&key, protocol, Protocol::AnthropicMessages)?;
            }
            if model.prompt_cache_retention.is_some() && protocol != Protocol::OpenaiResponses {
                let key = format!("models.{id}.prompt_cache_retention");
                self.only_for(&key, protocol, Protocol::OpenaiChat)?;
            }
            if model.max_tokens_field.is_some() {
                let key = format!("models.{id}.max_tokens_field");
                self.only_for(&key, protocol, Protocol::OpenaiChat)?;
            }
            if model.reasoning.is_some() {
                let key = format!("models.{id}.reasoning");
                self.only_for(&key, protocol, Protocol::OpenaiResponses)?;
            }
            // The documented example sets reasoning_context on an openai_chat model, so it is
            // accepted everywhere and only read by the protocols that take reasoning back.
            models.insert(
                id,
                ModelConfig {
                    provider: model.provider,
                    name: model.name,
                    context_window: model.context_window,
                    max_output_tokens: model.max_output_tokens,
                    reasoning_context: model.reasoning_context,
                    tokenizer: model.tokenizer,
                    options,
                    edit_tool: model.edit_tool.unwrap_or_default(),
                    price: model.price,
                    fallback: model.fallback.unwrap_or_default(),
                },
            );
        }
        models.insert(DEMO_MODEL.to_string(), demo_model());
        for (id, model) in &models {
            let key = || format!("models.{id}.fallback");
            for (index, other) in model.fallback.iter().enumerate() {
                if !models.contains_key(other) {
                    return Err(self.invalid(
                        key(),
                        format!(
                            "unknown model `{other}` (models: {})",
                            join_names(models.keys())
                        ),
                    ));
                }
                if other == id || model.fallback[..index].contains(other) {
                    return Err(self.invalid(
                        key(),
                        format!("names `{other}` twice (a model is never its own fallback)"),
                    ));
                }
            }
        }
        Ok(models)
    }

    /// A model's `thinking`: only for `anthropic_messages`, with a budget Anthropic accepts.
    fn thinking(
        &self,
        id: &str,
        model: &RawModel,
        protocol: Protocol,
    ) -> Result<Option<Thinking>, ConfigError> {
        let Some(value) = &model.thinking else {
            return Ok(None);
        };
        let key = format!("models.{id}.thinking");
        self.only_for(&key, protocol, Protocol::AnthropicMessages)?;
        let shape = || self.invalid(&key, "must be { budget_tokens = N } or \"adaptive\"");
        let thinking = match value {
            toml::Value::String(mode) if mode == "adaptive" => Thinking::Adaptive,
            toml::Value::Table(table) if table.len() == 1 => {
                let budget = table
                    .get("budget_tokens")
                    .and_then(toml::Value::as_integer)
                    .ok_or_else(shape)?;
                let budget = u64::try_from(budget).unwrap_or(0);
                if budget < MIN_THINKING_BUDGET || budget >= model.max_output_tokens {
                    return Err(self.invalid(
                        format!("{key}.budget_tokens"),
                        format!(
                            "must be at least {MIN_THINKING_BUDGET} and smaller than \
                             max_output_tokens ({}), got {budget}",
                            model.max_output_tokens
                        ),
                    ));
                }
                Thinking::Budget(budget)
            }
            _ => return Err(shape()),
        };
        Ok(Some(thinking))
    }

    /// Refuses a protocol's key on a model of another protocol.
    fn only_for(&self, key: &str, protocol: Protocol, wanted: Protocol) -> Result<(), ConfigError> {
        if protocol == wanted {
            return Ok(());
        }
        Err(self.invalid(
            key,
            format!("only {wanted} models take it (this model's provider speaks {protocol})"),
        ))
    }
}

/// See [`Config::unpriced_model`]; also used while the config is validated.
pub(super) fn unpriced_model(
    models: &BTreeMap<String, ModelConfig>,
    model_id: &str,
) -> Option<String> {
    let fallbacks = models.get(model_id).map(|model| model.fallback.as_slice());
    std::iter::once(model_id)
        .chain(fallbacks.unwrap_or_default().iter().map(String::as_str))
        .find(|id| models.get(*id).is_none_or(|model| model.price.is_none()))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_match_serde() {
        #[derive(Deserialize)]
        struct Wrapper {
            protocol: Protocol,
        }
        for protocol in [
            Protocol::OpenaiChat,
            Protocol::OpenaiResponses,
            Protocol::AnthropicMessages,
            Protocol::Demo,
        ] {
            let toml_text = format!("protocol = \"{}\"", protocol.as_str());
            let wrapper: Wrapper = toml::from_str(&toml_text).unwrap();
            assert_eq!(wrapper.protocol, protocol);
        }
    }

    /// A config with an Anthropic and an OpenAI model, `line` added to the model `model`.
    fn with(model: &str, line: &str) -> Result<super::super::Config, ConfigError> {
        let text = format!(
            r#"
[providers.claude]
protocol = "anthropic_messages"
base_url = "https://api.anthropic.com"

[providers.openai]
protocol = "openai_chat"
base_url = "https://api.openai.com/v1"

[models.c]
provider = "claude"
name = "claude-x"
context_window = 200000
max_output_tokens = 16000
{c}

[models.o]
provider = "openai"
name = "gpt-x"
context_window = 200000
max_output_tokens = 16000
{o}
"#,
            c = if model == "c" { line } else { "" },
            o = if model == "o" { line } else { "" },
        );
        super::super::Config::from_toml_str(&text, None)
    }

    fn error_of(model: &str, line: &str) -> String {
        match with(model, line) {
            Ok(_) => panic!("`{line}` on model {model} was accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn thinking_is_a_budget_or_adaptive_on_anthropic_models_only() {
        let thinking = |line: &str| with("c", line).unwrap().models["c"].options.thinking;
        assert_eq!(
            thinking("thinking = { budget_tokens = 8000 }"),
            Some(Thinking::Budget(8000))
        );
        assert_eq!(
            thinking("thinking = \"adaptive\""),
            Some(Thinking::Adaptive)
        );
        assert_eq!(thinking(""), None);
        for (line, expected) in [
            (
                "thinking = { budget_tokens = 1023 }",
                "models.c.thinking.budget_tokens",
            ),
            (
                "thinking = { budget_tokens = 16000 }",
                "max_output_tokens (16000)",
            ),
            (
                "thinking = \"on\"",
                "must be { budget_tokens = N } or \"adaptive\"",
            ),
            ("thinking = { budget = 2000 }", "models.c.thinking"),
        ] {
            let error = error_of("c", line);
            assert!(error.contains(expected), "{line}: {error}");
        }
        let error = error_of("o", "thinking = \"adaptive\"");
        assert!(
            error.contains("models.o.thinking") && error.contains("only anthropic_messages"),
            "{error}"
        );
    }

    #[test]
    fn reasoning_is_for_responses_models_only() {
        let text = |line: &str| {
            format!(
                "[providers.r]\nprotocol = \"openai_responses\"\nbase_url = \"https://api.openai.com/v1\"\n\
                 [models.r]\nprovider = \"r\"\nname = \"o-x\"\ncontext_window = 9000\n\
                 max_output_tokens = 1000\n{line}\n"
            )
        };
        let parse = |line: &str| super::super::Config::from_toml_str(&text(line), None);
        let config = parse("reasoning = { effort = \"high\", summary = \"auto\" }").unwrap();
        assert_eq!(
            config.models["r"].options.reasoning,
            Some(Reasoning {
                effort: Some(ReasoningEffort::High),
                summary: Some(ReasoningSummary::Auto),
            })
        );
        let config = parse("reasoning = { effort = \"minimal\" }").unwrap();
        assert_eq!(
            config.models["r"].options.reasoning,
            Some(Reasoning {
                effort: Some(ReasoningEffort::Minimal),
                summary: None,
            })
        );
        assert!(parse("reasoning = { effort = \"extreme\" }").is_err());
        assert!(parse("reasoning = { budget = 3 }").is_err());
        let error = error_of("o", "reasoning = { effort = \"low\" }");
        assert!(
            error.contains("models.o.reasoning") && error.contains("only openai_responses"),
            "{error}"
        );
    }

    #[test]
    fn the_limit_field_is_chosen_on_chat_models_only() {
        let field = |line: &str| {
            with("o", line).unwrap().models["o"]
                .options
                .max_tokens_field
        };
        assert_eq!(field(""), MaxTokensField::MaxCompletionTokens);
        assert_eq!(
            field("max_tokens_field = \"max_tokens\""),
            MaxTokensField::MaxTokens
        );
        assert_eq!(
            field("max_tokens_field = \"max_completion_tokens\""),
            MaxTokensField::MaxCompletionTokens
        );
        assert!(with("o", "max_tokens_field = \"limit\"").is_err());
        let error = error_of("c", "max_tokens_field = \"max_tokens\"");
        assert!(
            error.contains("models.c.max_tokens_field") && error.contains("only openai_chat"),
            "{error}"
        );
    }
}
