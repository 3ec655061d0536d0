//! The configuration file (`config.toml`): providers, models, agents and runtime limits, their
//! validation and the built-in defaults. It only reads the one file; it never opens connections
//! or reads the API keys the providers name.

mod agents;
mod budget;
mod cluster;
mod hooks;
mod limits;
mod mcp;
mod providers;
mod server;
mod telemetry;
mod validator;
mod whole_number;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

pub use agents::{
    ALL_TOOLS, AgentConfig, BaseInstructions, DEFAULT_AGENT, ProcessLimits, SandboxMode,
};
pub use budget::{Budget, OnBudget};
pub use cluster::{ClusterConfig, check_advertise_addr, check_database_url};
pub use hooks::{HookAction, HookConfig, HookEvent, OnHookError, ToolMatcher};
pub use limits::{RetryConfig, SubagentsConfig, ToolsConfig, TurnConfig};
pub use mcp::{
    DEFAULT_MCP_TIMEOUT_S, HIDDEN, McpSampling, McpServerConfig, McpServerSpec, McpTransport,
    conversation_servers, valid_server_name,
};
pub use providers::{
    BUILTIN_PROVIDER, CacheRetention, CacheTtl, DEMO_MODEL, EditTool, MaxTokensField, ModelConfig,
    ModelOptions, Price, Protocol, ProviderConfig, Reasoning, ReasoningContext, ReasoningEffort,
    ReasoningSummary, Thinking, TokenizerName,
};
pub use server::{ServerConfig, TlsFiles};
pub use telemetry::{LogFormat, TelemetryConfig};
pub use validator::ConfigError;

use agents::{RawAgent, fallback_agent};
use cluster::RawCluster;
use limits::{RawRetry, RawSubagents, RawTools, RawTurn};
use providers::{RawModel, RawProvider, builtin_provider, demo_model};
use server::RawServer;
use validator::{Validator, join_names};

/// The environment variable naming the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "OPENVAALA_CONFIG";

/// A validated configuration: every name it refers to exists.
///
/// The fields are public for reading; code that changes them must keep the invariants that
/// [`Config::from_toml_str`] checks (for example that `default_agent` names an agent).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Names an entry of `agents`.
    pub default_agent: String,
    /// Writes a short title after a conversation's first turn for every agent without a
    /// `title_model` of its own (`title_model` at the top of the file); `None`: none does.
    pub title_model: Option<String>,
    pub server: ServerConfig,
    pub retry: RetryConfig,
    pub turn: TurnConfig,
    pub tools: ToolsConfig,
    pub subagents: SubagentsConfig,
    /// Cluster mode (several instances over one PostgreSQL database); `None`: embedded.
    pub cluster: Option<ClusterConfig>,
    /// Always holds [`BUILTIN_PROVIDER`].
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Always holds [`DEMO_MODEL`]; every model's provider is in `providers`.
    pub models: BTreeMap<String, ModelConfig>,
    /// Never empty; every agent's model and compact model are in `models`, and every MCP
    /// server it names is in `mcp`.
    pub agents: BTreeMap<String, AgentConfig>,
    /// MCP servers by name (`[mcp.<name>]`); an agent uses those its `mcp` list names.
    pub mcp: BTreeMap<String, McpServerConfig>,
    /// The `[agents.<name>]` tables as written: a repository's agent file of the same name is
    /// merged under one, key by key (see `Config::agent_from_table`).
    pub agent_tables: BTreeMap<String, toml::Table>,
    /// `[[hooks.<event>]]`, in the file's order per event.
    pub hooks: Vec<HookConfig>,
    /// Directories whose repositories' agent files may loosen the sandbox, the network and
    /// the permissions (`trust_repository_agents`); absolute, as written.
    pub trust_repository_agents: Vec<PathBuf>,
    /// The file it came from, `None` for the built-in config.
    pub source: Option<PathBuf>,
    /// How log lines are written (`[log] format`).
    pub log: LogFormat,
    /// Trace export (`[telemetry]`).
    pub telemetry: TelemetryConfig,
}

impl Config {
    /// The configuration used when there is no file: the built-in `demo` model and a `default`
    /// agent using it.
    pub fn builtin() -> Config {
        Config {
            default_agent: DEFAULT_AGENT.to_string(),
            title_model: None,
            server: ServerConfig::default(),
            retry: RetryConfig::default(),
            turn: TurnConfig::default(),
            subagents: SubagentsConfig::default(),
            cluster: None,
            tools: ToolsConfig::default(),
            providers: BTreeMap::from([(BUILTIN_PROVIDER.to_string(), builtin_provider())]),
            models: BTreeMap::from([(DEMO_MODEL.to_string(), demo_model())]),
            agents: BTreeMap::from([(DEFAULT_AGENT.to_string(), fallback_agent(DEMO_MODEL))]),
            mcp: BTreeMap::new(),
            agent_tables: BTreeMap::new(),
            trust_repository_agents: Vec::new(),
            hooks: Vec::new(),
            log: LogFormat::default(),
            telemetry: TelemetryConfig::default(),
            source: None,
        }
    }

    /// Parses and validates a config file's text; `source` is only used in errors and kept in
    /// [`Config::source`].
    pub fn from_toml_str(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        let parse_error = |error: toml::de::Error| ConfigError::Parse {
            path: source.map(Path::to_path_buf),
            message: error.to_string().trim_end().to_string(),
        };
        let raw: RawConfig = toml::from_str(text).map_err(parse_error)?;
        let mut config = Validator { source }.build(raw)?;
        // Read again as plain tables: which keys each agent's table sets, for merging.
        let mut document: toml::Table = toml::from_str(text).map_err(parse_error)?;
        if let Some(toml::Value::Table(agents)) = document.remove("agents") {
            config.agent_tables = agents
                .into_iter()
                .filter_map(|(name, table)| match table {
                    toml::Value::Table(table) => Some((name, table)),
                    _ => None,
                })
                .collect();
        }
        Ok(config)
    }

    /// Reads and validates one file, which must exist.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_toml_str(&text, Some(path))
    }

    /// Loads the `--config` path if given, else `$OPENVAALA_CONFIG`; either must exist. Else
    /// `$HOME/.config/openvaala/config.toml`, falling back to [`Config::builtin`] when it is
    /// missing.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let from_env = non_empty_env(CONFIG_ENV);
        let home = non_empty_env("HOME");
        Config::load_from(explicit, from_env.as_deref(), home.as_deref())
    }

    /// Where the config file is looked for when neither `--config` nor `$OPENVAALA_CONFIG` is
    /// given; `None` when `$HOME` is not set.
    pub fn default_path() -> Option<PathBuf> {
        non_empty_env("HOME").map(|home| home_config_path(&home))
    }

    /// The directory of the config file (or where it is looked for): the global AGENTS.md
    /// lives there.
    pub fn directory(&self) -> Option<PathBuf> {
        match &self.source {
            Some(source) => Some(match source.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                _ => PathBuf::from("."),
            }),
            None => Config::default_path()?.parent().map(Path::to_path_buf),
        }
    }

    pub fn agent(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }

    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.get(id)
    }

    pub fn provider_of(&self, model_id: &str) -> Option<&ProviderConfig> {
        self.providers.get(&self.model(model_id)?.provider)
    }

    /// The models a call of `model_id` may go to: the model itself, then its `fallback`s.
    pub fn model_chain<'a>(&'a self, model_id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        std::iter::once(model_id).chain(
            self.model(model_id)
                .into_iter()
                .flat_map(|model| model.fallback.iter().map(String::as_str)),
        )
    }

    /// The first of a model and its fallbacks that has no `price` (a cost limit cannot be
    /// kept on it).
    pub fn unpriced_model(&self, model_id: &str) -> Option<String> {
        providers::unpriced_model(&self.models, model_id)
    }

    /// An agent written outside the config file as the table an `[agents.<name>]` would be (a
    /// repository's agent file, merged with the config's table of the same name): checked by
    /// the same rules, its errors naming `source`. `names` are the agents it may name in
    /// `spawnable`. `base_instructions` is a path beside the config file, so only the config's
    /// own table may set it, and it is taken from there.
    pub fn agent_from_table(
        &self,
        name: &str,
        mut table: toml::Table,
        names: &[String],
        source: &Path,
    ) -> Result<AgentConfig, ConfigError> {
        let validator = Validator {
            source: Some(source),
        };
        let configured = self.agent_tables.get(name);
        if table.contains_key("base_instructions")
            && configured
                .is_none_or(|own| own.get("base_instructions") != table.get("base_instructions"))
        {
            return Err(validator.invalid(
                format!("agents.{name}.base_instructions"),
                "only the config file sets it",
            ));
        }
        table.remove("base_instructions");
        let raw = RawAgent::deserialize(toml::Value::Table(table)).map_err(|error| {
            ConfigError::Parse {
                path: Some(source.to_path_buf()),
                message: error.to_string().trim_end().to_owned(),
            }
        })?;
        let mut agent = validator.agent(name, raw, names, &self.models, &self.mcp)?;
        if configured.is_some()
            && let Some(own) = self.agent(name)
        {
            agent.base_instructions = own.base_instructions.clone();
        }
        Ok(agent)
    }

    /// The agent named by `default_agent`.
    ///
    /// # Panics
    /// If `default_agent` was changed to name no agent, which validation rules out.
    pub fn default_agent(&self) -> &AgentConfig {
        self.agents
            .get(&self.default_agent)
            .expect("validation guarantees that default_agent names an agent")
    }

    /// The environment is passed in so tests need not change the process's variables.
    fn load_from(
        explicit: Option<&Path>,
        from_env: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        if let Some(path) = explicit.or(from_env) {
            return Config::from_file(path);
        }
        let Some(home) = home else {
            return Ok(Config::builtin());
        };
        let path = home_config_path(home);
        match std::fs::read_to_string(&path) {
            Ok(text) => Config::from_toml_str(&text, Some(&path)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Config::builtin()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }
}

fn non_empty_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

fn home_config_path(home: &Path) -> PathBuf {
    home.join(".config").join("openvaala").join("config.toml")
}

// The file's shape. Every struct denies unknown fields so that a typo is an error naming the key
// and its line instead of a silently ignored setting.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    default_agent: Option<String>,
    title_model: Option<String>,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    retry: RawRetry,
    #[serde(default)]
    turn: RawTurn,
    #[serde(default)]
    tools: RawTools,
    #[serde(default)]
    subagents: RawSubagents,
    cluster: Option<RawCluster>,
    #[serde(default)]
    providers: BTreeMap<String, RawProvider>,
    /// Spanned to find the first model in the file, which the fallback agent uses; the map
    /// itself is sorted by name.
    #[serde(default)]
    models: BTreeMap<String, Spanned<RawModel>>,
    #[serde(default)]
    agents: BTreeMap<String, RawAgent>,
    #[serde(default)]
    mcp: BTreeMap<String, McpServerSpec>,
    #[serde(default)]
    trust_repository_agents: Vec<String>,
    #[serde(default)]
    hooks: BTreeMap<String, Vec<hooks::RawHook>>,
    #[serde(default)]
    log: telemetry::RawLog,
    #[serde(default)]
    telemetry: telemetry::RawTelemetry,
}

/// The whole file's check, section by section; each section's check is in its own file.
impl Validator<'_> {
    fn build(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let server = self.server(raw.server)?;
        let retry = self.retry(raw.retry)?;
        let turn = self.turn(raw.turn)?;
        let tools = self.tools(raw.tools)?;
        let subagents = self.subagents(raw.subagents)?;
        let cluster = raw.cluster.map(|raw| self.cluster(raw)).transpose()?;
        let providers = self.providers(raw.providers)?;
        let first_model = raw
            .models
            .iter()
            .min_by_key(|(_, model)| model.span().start)
            .map(|(id, _)| id.clone());
        let models = self.models(raw.models, &providers)?;
        let mcp = self.mcp_servers(raw.mcp)?;
        let mut agents = self.agents(raw.agents, &models, &mcp)?;
        let trust_repository_agents = self.trusted_repositories(raw.trust_repository_agents)?;
        let hooks = self.hooks(raw.hooks)?;
        let log = self.log(raw.log);
        let telemetry = self.telemetry(raw.telemetry)?;
        if agents.is_empty() {
            let model = first_model.as_deref().unwrap_or(DEMO_MODEL);
            agents.insert(DEFAULT_AGENT.to_string(), fallback_agent(model));
        }
        let default_agent = raw
            .default_agent
            .unwrap_or_else(|| DEFAULT_AGENT.to_string());
        if !agents.contains_key(&default_agent) {
            return Err(self.invalid(
                "default_agent",
                format!(
                    "unknown agent `{default_agent}` (agents: {})",
                    join_names(agents.keys())
                ),
            ));
        }
        if let Some(title_model) = &raw.title_model
            && !models.contains_key(title_model)
        {
            return Err(self.invalid(
                "title_model",
                format!(
                    "unknown model `{title_model}` (models: {})",
                    join_names(models.keys())
                ),
            ));
        }
        Ok(Config {
            default_agent,
            title_model: raw.title_model,
            server,
            retry,
            turn,
            tools,
            subagents,
            cluster,
            providers,
            models,
            agents,
            mcp,
            agent_tables: BTreeMap::new(),
            trust_repository_agents,
            hooks,
            log,
            telemetry,
            source: self.source.map(Path::to_path_buf),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::agents::all_tools;
    use super::*;

    /// The documented example config, every section and key in it.
    const API_EXAMPLE: &str = r#"
default_agent = "default"

[server]
addr = "127.0.0.1:7341"

[retry]                      # model-call retries; tests shrink the delays
max_attempts = 10
initial_delay_ms = 1000
max_delay_ms = 30000

[providers.local]
protocol = "openai_chat"     # openai_chat | openai_responses | anthropic_messages
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "OPENAI_API_KEY"   # optional: name of the variable holding the key

[models.coder]
provider = "local"
name = "qwen2.5-coder:7b"    # the provider's model name
context_window = 32768
max_output_tokens = 4096
reasoning_context = "all_turns"  # openai_responses only: all_turns | current_turn

[agents.default]
description = "General coding agent"
model = "coder"
compact_model = "coder"      # optional, defaults to model
instructions = "You are …"   # optional system prompt; AGENTS.md from cwd is added after it
tools = ["shell", "read_file", "write_file", "edit_file", "list_dir", "grep", "glob", "spawn_agent", "send_message", "wait_agents", "interrupt_agent", "list_agents", "update_plan", "skill"]
sandbox = "workspace_write"  # read_only | workspace_write | off
network = false              # TCP connections and binds from tool commands
"#;

    /// A valid file that the error cases below change one line of.
    const BASE: &str = r#"
[providers.local]
protocol = "openai_chat"
base_url = "http://127.0.0.1:11434/v1"

[providers.cloud]
protocol = "openai_responses"
base_url = "https://api.example.com/v1"

[models.coder]
provider = "local"
name = "qwen2.5-coder:7b"
context_window = 32768
max_output_tokens = 4096

[models.big]
provider = "cloud"
name = "big-1"
context_window = 200000
max_output_tokens = 16000
reasoning_context = "current_turn"

[agents.default]
description = "General coding agent"
model = "coder"
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Some(Path::new("config.toml")))
    }

    #[test]
    fn api_example_parses() {
        let config = parse(API_EXAMPLE).unwrap();
        assert_eq!(config.default_agent, "default");
        assert_eq!(config.server.addr, Some("127.0.0.1:7341".parse().unwrap()));
        assert_eq!(config.retry, RetryConfig::default());
        assert_eq!(config.turn, TurnConfig::default());
        assert_eq!(config.tools, ToolsConfig::default());
        let local = &config.providers["local"];
        assert_eq!(local.protocol, Protocol::OpenaiChat);
        assert_eq!(local.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(local.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let coder = config.model("coder").unwrap();
        assert_eq!(coder.name, "qwen2.5-coder:7b");
        assert_eq!(
            (coder.context_window, coder.max_output_tokens),
            (32768, 4096)
        );
        assert_eq!(coder.reasoning_context, Some(ReasoningContext::AllTurns));
        let agent = config.default_agent();
        assert_eq!(agent.description, "General coding agent");
        assert_eq!(agent.compaction_model(), "coder");
        assert_eq!(agent.instructions.as_deref(), Some("You are …"));
        assert_eq!(agent.tools, all_tools());
        assert_eq!(config.provider_of("coder"), Some(local));
        assert_eq!(config.source.as_deref(), Some(Path::new("config.toml")));
        // The built-in model stays available next to the file's.
        assert_eq!(
            config.provider_of(DEMO_MODEL).unwrap().protocol,
            Protocol::Demo
        );
    }

    #[test]
    fn builtin_has_demo_model_and_default_agent() {
        let config = Config::builtin();
        assert_eq!(config.source, None);
        assert_eq!(config.default_agent, DEFAULT_AGENT);
        let agent = config.default_agent();
        assert_eq!(agent.model, DEMO_MODEL);
        assert_eq!(agent.description, "General coding agent (built-in)");
        assert_eq!(agent.tools, all_tools());
        let demo = config.model(DEMO_MODEL).unwrap();
        assert_eq!(demo.name, "demo");
        assert_eq!((demo.context_window, demo.max_output_tokens), (32768, 4096));
        let provider = config.provider_of(DEMO_MODEL).unwrap();
        assert_eq!(provider.protocol, Protocol::Demo);
        assert_eq!(config.providers.len(), 1);
        assert_eq!(config.models.len(), 1);
        assert_eq!(config.agents.len(), 1);
    }

    #[test]
    fn empty_file_is_the_builtin_config() {
        assert_eq!(Config::from_toml_str("", None).unwrap(), Config::builtin());
    }

    #[test]
    fn each_rule_names_its_key() {
        // (text in BASE, what replaces it, the expected key, a piece of the expected message);
        // an empty first field puts the second before BASE, where top-level keys go.
        #[rustfmt::skip]
        let cases: &[(&str, &str, &str, &str)] = &[
            (r#""local""#, r#""nowhere""#, "models.coder.provider", "unknown provider `nowhere`"),
            (r#"model = "coder""#, r#"model = "ghost""#, "agents.default.model", "unknown model `ghost`"),
            (r#"model = "coder""#, "model = \"coder\"\ncompact_model = \"ghost\"", "agents.default.compact_model", "unknown model `ghost`"),
            (r#"model = "coder""#, "model = \"big\"\ncompact_model = \"coder\"", "agents.default.compact_model", "32768 tokens, smaller than the 200000 tokens of model `big`"),
            ("context_window = 32768", "context_window = 0", "models.coder.context_window", "at least 1"),
            ("max_output_tokens = 4096", "max_output_tokens = 32768", "models.coder.max_output_tokens", "32768 >= 32768"),
            ("max_output_tokens = 4096", "max_output_tokens = 0", "models.coder.max_output_tokens", "at least 1"),
            ("", "[retry]\nmax_attempts = 0\n", "retry.max_attempts", "at least 1"),
            ("", "[retry]\ninitial_delay_ms = 50\nmax_delay_ms = 10\n", "retry.initial_delay_ms", "50 > 10"),
            ("", "[retry]\nchunk_timeout_ms = 0\n", "retry.chunk_timeout_ms", "at least 1"),
            ("", "[turn]\nmax_steps = 0\n", "turn.max_steps", "at least 1"),
            ("", "[subagents]\nmax_depth = 99\n", "subagents.max_depth", "at most 16"),
            ("", "[cluster]\nlease_ms = 5000\n", "cluster.database_url", "is required"),
            ("", "[cluster]\ndatabase_url = \"mysql://x\"\n", "cluster.database_url", "must be a PostgreSQL URL"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nlease_ms = 10\n", "cluster.lease_ms", "between 1000 and 600000"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nadvertise_addr = \"10.0.0.5\"\n", "cluster.advertise_addr", "must be host:port"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nadvertise_addr = \"http://node:7341\"\n", "cluster.advertise_addr", "must be host:port"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nadvertise_addr = \"node:0\"\n", "cluster.advertise_addr", "must be host:port"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nadvertise_addr = \"0.0.0.0:7341\"\n", "cluster.advertise_addr", "names every interface"),
            ("", "[cluster]\ndatabase_url = \"postgres://db/x\"\nadvertise_addr = \"[::]:7341\"\n", "cluster.advertise_addr", "names every interface"),
            ("", "[tools]\nshell_timeout_s = 0\n", "tools.shell_timeout_s", "at least 1"),
            ("", "[server]\nmax_live_conversations = 0\n", "server.max_live_conversations", "at least 1"),
            ("", "[server]\nmax_connections = 0\n", "server.max_connections", "at least 1"),
            ("", "[server]\nheader_read_timeout_s = 0\n", "server.header_read_timeout_s", "at least 1"),
            ("", "[tools]\nmax_output_bytes = 0\n", "tools.max_output_bytes", "at least 1"),
            ("http://127.0.0.1:11434/v1", "127.0.0.1:11434/v1", "providers.local.base_url", "must start with http:// or https://"),
            ("https://api", "ftp://api", "providers.cloud.base_url", "got `ftp://api.example.com/v1`"),
            ("http://127.0.0.1:11434/v1", "http://", "providers.local.base_url", "must be a URL with a host, got `http://`"),
            (r#"base_url = "http"#, "api_key_env = \"\"\nbase_url = \"http", "providers.local.api_key_env", "environment variable"),
            (r#""openai_chat""#, r#""demo""#, "providers.local.protocol", "reserved for the built-in model"),
            ("[providers.local]", "[providers.builtin]", "providers.builtin", "reserved for the built-in provider"),
            ("[models.coder]", "[models.demo]", "models.demo", "reserved for the built-in model"),
            (r#"model = "coder""#, "model = \"coder\"\ntools = [\"shell\", \"fly\"]", "agents.default.tools", "unknown tool `fly`"),
            ("", "default_agent = \"boss\"\n", "default_agent", "unknown agent `boss` (agents: default)"),
        ];
        for (from, to, key, message_part) in cases {
            assert!(BASE.contains(from), "BASE does not contain {from:?}");
            let text = if from.is_empty() {
                format!("{to}\n{BASE}")
            } else {
                BASE.replacen(from, to, 1)
            };
            let Err(error) = parse(&text) else {
                panic!("expected an error at {key} for:\n{text}");
            };
            assert_eq!(error.key(), Some(*key), "{error}");
            let shown = error.to_string();
            let prefix = format!("config.toml: {key}: ");
            assert!(
                shown.starts_with(&prefix),
                "{shown:?} should start with {prefix:?}"
            );
            assert!(
                shown.contains(message_part),
                "{shown:?} should contain {message_part:?}"
            );
        }
    }

    #[test]
    fn default_agent_must_exist_without_file_agents_too() {
        let error = parse("default_agent = \"boss\"\n").unwrap_err();
        assert_eq!(error.key(), Some("default_agent"));
    }

    #[test]
    fn a_global_title_model_must_be_a_configured_model() {
        let error = parse("title_model = \"nope\"\n").unwrap_err();
        assert_eq!(error.key(), Some("title_model"));
        assert!(
            error.to_string().contains("unknown model `nope`"),
            "{error}"
        );
        let config = parse("title_model = \"demo\"\n").unwrap();
        assert_eq!(config.title_model.as_deref(), Some("demo"));
    }

    #[test]
    fn unknown_keys_name_the_key_and_line() {
        // (text, misspelt key, its line)
        let cases: &[(&str, &str, usize)] = &[
            ("defualt_agent = \"default\"\n", "defualt_agent", 1),
            ("\n[sever]\naddr = \"127.0.0.1:1\"\n", "sever", 2),
            ("[server]\nadr = \"127.0.0.1:1\"\n", "adr", 2),
            (
                "[retry]\nmax_attempts = 3\nmax_attempt = 3\n",
                "max_attempt",
                3,
            ),
            ("[turn]\nmax_step = 3\n", "max_step", 2),
            ("[tools]\n\nshell_timeout = 3\n", "shell_timeout", 3),
            (
                "[providers.p]\nprotocol = \"openai_chat\"\nbase_url = \"http://x\"\nbase_uri = \"\"\n",
                "base_uri",
                4,
            ),
            (
                "[models.m]\nprovider = \"builtin\"\nname = \"m\"\ncontext_window = 10\n\
                  max_output_tokens = 1\nctx = 1\n",
                "ctx",
                6,
            ),
            (
                "[agents.a]\ndescription = \"d\"\nmodle = \"demo\"\nmodel = \"demo\"\n",
                "modle",
                3,
            ),
        ];
        for (text, key, line) in cases {
            let error = parse(text).unwrap_err();
            assert!(matches!(error, ConfigError::Parse { .. }), "{error:?}");
            let shown = error.to_string();
            assert!(shown.starts_with("config.toml: "), "{shown}");
            assert!(shown.contains(&format!("unknown field `{key}`")), "{shown}");
            assert!(shown.contains(&format!("line {line}")), "{shown}");
        }
    }

    #[test]
    fn bad_values_name_the_line() {
        // (text, a piece of the expected message, the line)
        let cases: &[(&str, &str, usize)] = &[
            (
                "[providers.p]\nprotocol = \"grpc\"\nbase_url = \"http://x\"\n",
                "unknown variant `grpc`",
                2,
            ),
            ("[server]\naddr = \"localhost\"\n", "socket address", 2),
            (
                "[models.m]\nprovider = \"builtin\"\nname = \"m\"\ncontext_window = 10\n\
                 max_output_tokens = 1\ntokenizer = \"gpt2\"\n",
                "unknown variant `gpt2`, expected one of `o200k_base`, `cl100k_base`, `anthropic`",
                6,
            ),
            ("[retry]\nmax_attempts = -1\n", "max_attempts", 2),
            (
                "[agents.a]\nmodel = \"demo\"\n",
                "missing field `description`",
                1,
            ),
        ];
        for (text, message_part, line) in cases {
            let shown = parse(text).unwrap_err().to_string();
            assert!(shown.contains(message_part), "{shown}");
            assert!(shown.contains(&format!("line {line}")), "{shown}");
        }
    }

    #[test]
    fn load_prefers_explicit_then_env_then_home() {
        let dir =
            std::env::temp_dir().join(format!("openvaala-config-test-{}", std::process::id()));
        let home = dir.join("home");
        let home_file = home_config_path(&home);
        std::fs::create_dir_all(home_file.parent().unwrap()).unwrap();
        let write = |path: &Path, agent: &str| {
            let text = format!(
                "default_agent = \"{agent}\"\n[agents.{agent}]\ndescription = \"d\"\nmodel = \"demo\"\n"
            );
            std::fs::write(path, text).unwrap();
        };
        let explicit = dir.join("explicit.toml");
        let from_env = dir.join("env.toml");
        write(&explicit, "explicit");
        write(&from_env, "env");
        write(&home_file, "home");
        let only_agent = |config: Config| config.agents.into_keys().collect::<Vec<_>>();

        let config = Config::load_from(Some(&explicit), Some(&from_env), Some(&home)).unwrap();
        assert_eq!(config.source.as_deref(), Some(explicit.as_path()));
        assert_eq!(only_agent(config), ["explicit"]);
        let config = Config::load_from(None, Some(&from_env), Some(&home)).unwrap();
        assert_eq!(only_agent(config), ["env"]);
        let config = Config::load_from(None, None, Some(&home)).unwrap();
        assert_eq!(config.source.as_deref(), Some(home_file.as_path()));
        assert_eq!(only_agent(config), ["home"]);

        // A named file must exist; the home file may be missing.
        let missing = dir.join("missing.toml");
        for (explicit, from_env) in [(Some(&*missing), None), (None, Some(&*missing))] {
            let error = Config::load_from(explicit, from_env, None).unwrap_err();
            assert!(matches!(error, ConfigError::Read { .. }), "{error:?}");
            assert!(
                error.to_string().contains("missing.toml: cannot read"),
                "{error}"
            );
        }
        let empty_home = dir.join("empty-home");
        let config = Config::load_from(None, None, Some(&empty_home)).unwrap();
        assert_eq!(config, Config::builtin());
        assert_eq!(
            Config::load_from(None, None, None).unwrap(),
            Config::builtin()
        );

        std::fs::remove_dir_all(&dir).unwrap();
    }
}
