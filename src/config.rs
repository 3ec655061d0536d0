//! The configuration file (`config.toml`): providers, models, agents and runtime limits, their
//! validation and the built-in defaults. It only reads the one file; it never opens connections
//! or reads the API keys the providers name.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The provider behind the built-in offline model; always present.
pub const BUILTIN_PROVIDER: &str = "builtin";
/// The built-in offline model; always present.
pub const DEMO_MODEL: &str = "demo";
/// The agent used when neither the file nor the client names one.
pub const DEFAULT_AGENT: &str = "default";
/// The environment variable naming the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "OPENVAALA_CONFIG";
/// Every tool the runtime offers; an agent without a `tools` list gets all of them.
pub const ALL_TOOLS: &[&str] = &[
    "shell",
    "read_file",
    "write_file",
    "list_dir",
    "spawn_agent",
    "send_message",
    "wait_agents",
    "interrupt_agent",
    "list_agents",
];

/// A validated configuration: every name it refers to exists.
///
/// The fields are public for reading; code that changes them must keep the invariants that
/// [`Config::from_toml_str`] checks (for example that `default_agent` names an agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Names an entry of `agents`.
    pub default_agent: String,
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
    /// Never empty; every agent's model and compact model are in `models`.
    pub agents: BTreeMap<String, AgentConfig>,
    /// The file it came from, `None` for the built-in config.
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// `None` lets the command line or the server pick its default loopback address.
    pub addr: Option<SocketAddr>,
    /// A conversation with no turn, waiting message, subscriber or request for this long is
    /// unloaded from memory (it stays on disk and loads again on the next request).
    pub idle_unload_s: u64,
    /// Conversations held in memory at most (each holds its open log files); `None` derives
    /// it from the process's open-file limit at start.
    pub max_live_conversations: Option<usize>,
    /// HTTP connections served at once; `None` derives it from the open-file limit.
    pub max_connections: Option<usize>,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout_s: u64,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            addr: None,
            idle_unload_s: 60,
            max_live_conversations: None,
            max_connections: None,
            header_read_timeout_s: 10,
        }
    }
}

/// Retries of transient model-call errors (SPEC §2.3). Tests shrink the delays, never the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryConfig {
    /// At least 1.
    pub max_attempts: u32,
    /// At most `max_delay_ms`.
    pub initial_delay_ms: u64,
    pub max_delay_ms: u64,
    /// A provider stream silent this long counts as a transient error.
    pub chunk_timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnConfig {
    /// The most model calls one turn may make; at least 1.
    pub max_steps: u32,
}

/// Cluster mode: the shared PostgreSQL database and the conversation leases.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `postgres://…`; may hold a password, so it is never logged or shown.
    pub database_url: String,
    /// How long a lease lasts without renewal: a dead instance's conversations are taken over
    /// this long after its last renewal.
    pub lease_ms: u64,
    /// `host:port` at which the other instances reach this one, when that is not the address
    /// it listens on (it listens on every interface, or behind a NAT) [default: that address].
    pub advertise_addr: Option<String>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("database_url", &"…")
            .field("lease_ms", &self.lease_ms)
            .field("advertise_addr", &self.advertise_addr)
            .finish()
    }
}

impl ClusterConfig {
    pub const DEFAULT_LEASE_MS: u64 = 10_000;

    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms)
    }
}

/// Limits on sub-agents (SPEC §5); reaching one is a tool error for the model, never a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentsConfig {
    /// How deep sub-agents may nest: the root agent is at depth 0, its sub-agents at 1.
    pub max_depth: u32,
    /// How many sub-agents of one conversation may run (have a turn in progress) at once.
    pub max_live: u32,
}

impl Default for SubagentsConfig {
    fn default() -> SubagentsConfig {
        SubagentsConfig {
            max_depth: 3,
            max_live: 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsConfig {
    /// Default timeout of a `shell` call when the model gives none.
    pub shell_timeout_s: u64,
    /// Tool output beyond this many bytes is cut before it goes back to the model.
    pub max_output_bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub protocol: Protocol,
    /// Starts with `http://` or `https://`; empty only for the built-in provider.
    pub base_url: String,
    /// The name of the environment variable holding the API key, not the key itself.
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// Names an entry of `Config::providers`.
    pub provider: String,
    /// The provider's name for the model.
    pub name: String,
    /// In tokens; greater than `max_output_tokens`.
    pub context_window: u64,
    pub max_output_tokens: u64,
    /// Only on models whose provider speaks [`Protocol::OpenaiResponses`].
    pub reasoning_context: Option<ReasoningContext>,
    /// How the usage meter counts this model's tokens; `None`: chosen from the protocol and
    /// the model's name (`model::tokens::Tokenizer::for_model`).
    pub tokenizer: Option<TokenizerName>,
}

/// The `tokenizer` key of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerName {
    O200kBase,
    Cl100kBase,
    Anthropic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Shown to models choosing an agent for `spawn_agent`, and to users.
    pub description: String,
    pub model: String,
    /// Writes compaction summaries; `None` means `model`. Its context window is at least the
    /// model's (SPEC §7.7).
    pub compact_model: Option<String>,
    /// The system prompt; AGENTS.md from the working directory is added after it.
    pub instructions: Option<String>,
    /// Names from [`ALL_TOOLS`].
    pub tools: Vec<String>,
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

/// Whether earlier turns' reasoning stays in the context (SPEC §7.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningContext {
    AllTurns,
    CurrentTurn,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// Bad TOML, a wrong type, a missing field or an unknown key; toml's message names the key,
    /// line and column.
    #[error("{}{message}", Origin(path.as_deref()))]
    Parse {
        path: Option<PathBuf>,
        message: String,
    },
    /// Well-formed TOML that breaks a rule; `key` is the dotted path of the offending key.
    #[error("{}{key}: {message}", Origin(path.as_deref()))]
    Invalid {
        path: Option<PathBuf>,
        key: String,
        message: String,
    },
}

impl Config {
    /// The configuration used when there is no file: the built-in `demo` model and a `default`
    /// agent using it.
    pub fn builtin() -> Config {
        Config {
            default_agent: DEFAULT_AGENT.to_string(),
            server: ServerConfig::default(),
            retry: RetryConfig::default(),
            turn: TurnConfig::default(),
            subagents: SubagentsConfig::default(),
            cluster: None,
            tools: ToolsConfig::default(),
            providers: BTreeMap::from([(BUILTIN_PROVIDER.to_string(), builtin_provider())]),
            models: BTreeMap::from([(DEMO_MODEL.to_string(), demo_model())]),
            agents: BTreeMap::from([(DEFAULT_AGENT.to_string(), fallback_agent(DEMO_MODEL))]),
            source: None,
        }
    }

    /// Parses and validates a config file's text; `source` is only used in errors and kept in
    /// [`Config::source`].
    pub fn from_toml_str(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: source.map(Path::to_path_buf),
            message: error.to_string().trim_end().to_string(),
        })?;
        Validator { source }.build(raw)
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

    pub fn agent(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }

    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.get(id)
    }

    pub fn provider_of(&self, model_id: &str) -> Option<&ProviderConfig> {
        self.providers.get(&self.model(model_id)?.provider)
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

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 10,
            initial_delay_ms: 1_000,
            max_delay_ms: 30_000,
            chunk_timeout_ms: 120_000,
        }
    }
}

impl RetryConfig {
    pub fn initial_delay(&self) -> Duration {
        Duration::from_millis(self.initial_delay_ms)
    }

    pub fn max_delay(&self) -> Duration {
        Duration::from_millis(self.max_delay_ms)
    }

    pub fn chunk_timeout(&self) -> Duration {
        Duration::from_millis(self.chunk_timeout_ms)
    }
}

impl Default for TurnConfig {
    fn default() -> Self {
        TurnConfig { max_steps: 200 }
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            shell_timeout_s: 600,
            max_output_bytes: 65_536,
        }
    }
}

impl ToolsConfig {
    pub fn shell_timeout(&self) -> Duration {
        Duration::from_secs(self.shell_timeout_s)
    }
}

impl AgentConfig {
    /// The model that writes this agent's compaction summaries.
    pub fn compaction_model(&self) -> &str {
        self.compact_model.as_deref().unwrap_or(&self.model)
    }
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

impl ConfigError {
    /// The dotted key a validation error is about.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } | ConfigError::Parse { .. } => None,
        }
    }
}

/// Prefixes an error with the file it is about, if any.
struct Origin<'a>(Option<&'a Path>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}: ", path.display()),
            None => Ok(()),
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

fn builtin_provider() -> ProviderConfig {
    ProviderConfig {
        protocol: Protocol::Demo,
        base_url: String::new(),
        api_key_env: None,
    }
}

fn demo_model() -> ModelConfig {
    ModelConfig {
        provider: BUILTIN_PROVIDER.to_string(),
        name: DEMO_MODEL.to_string(),
        context_window: 32_768,
        max_output_tokens: 4_096,
        reasoning_context: None,
        tokenizer: None,
    }
}

/// The agent added when a file defines none.
fn fallback_agent(model: &str) -> AgentConfig {
    AgentConfig {
        description: "General coding agent (built-in)".to_string(),
        model: model.to_string(),
        compact_model: None,
        instructions: None,
        tools: all_tools(),
    }
}

fn all_tools() -> Vec<String> {
    ALL_TOOLS.iter().map(ToString::to_string).collect()
}

// The file's shape. Every struct denies unknown fields so that a typo is an error naming the key
// and its line instead of a silently ignored setting.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    default_agent: Option<String>,
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
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    addr: Option<SocketAddr>,
    idle_unload_s: Option<u64>,
    max_live_conversations: Option<usize>,
    max_connections: Option<usize>,
    header_read_timeout_s: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    max_attempts: Option<u32>,
    initial_delay_ms: Option<u64>,
    max_delay_ms: Option<u64>,
    chunk_timeout_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    max_steps: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    database_url: Option<String>,
    lease_ms: Option<u64>,
    advertise_addr: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSubagents {
    max_depth: Option<u32>,
    max_live: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTools {
    shell_timeout_s: Option<u64>,
    max_output_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    protocol: Protocol,
    base_url: String,
    api_key_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    provider: String,
    name: String,
    context_window: u64,
    max_output_tokens: u64,
    reasoning_context: Option<ReasoningContext>,
    tokenizer: Option<TokenizerName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    description: String,
    model: String,
    compact_model: Option<String>,
    instructions: Option<String>,
    tools: Option<Vec<String>>,
}

/// A database URL must name PostgreSQL (the cluster's engine); the message names the problem
/// without repeating the URL, which may hold a password.
pub fn check_database_url(url: &str) -> Result<(), String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(())
    } else {
        Err("must be a PostgreSQL URL (postgres://user@host:port/database)".to_owned())
    }
}

/// An instance's advertised address is `host:port` (a name, an IPv4 address or a bracketed
/// IPv6 one), which the other instances put after `http://`; an address of every interface
/// names no machine.
pub fn check_advertise_addr(addr: &str) -> Result<(), String> {
    let shape = || format!("must be host:port (10.0.0.5:7341, node-1.internal:7341), got `{addr}`");
    let (host, port) = addr.rsplit_once(':').ok_or_else(shape)?;
    let port_ok = port.parse::<u16>().is_ok_and(|port| port != 0);
    let host_ok = !host.is_empty()
        && !host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '@' | '?' | '#'));
    if !port_ok || !host_ok {
        return Err(shape());
    }
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if ip
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(format!(
            "names every interface, not this machine: give an address the other instances can reach, got `{addr}`"
        ));
    }
    Ok(())
}

/// Turns the file's shape into a [`Config`], checking the rules toml cannot: names that must
/// exist, reserved names and value ranges. Sections are checked in dependency order (providers,
/// models, agents) so each check can rely on the previous ones.
struct Validator<'a> {
    source: Option<&'a Path>,
}

impl Validator<'_> {
    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.source.map(Path::to_path_buf),
            key: key.into(),
            message: message.into(),
        }
    }

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
        let mut agents = self.agents(raw.agents, &models)?;
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
        Ok(Config {
            default_agent,
            server,
            retry,
            turn,
            tools,
            subagents,
            cluster,
            providers,
            models,
            agents,
            source: self.source.map(Path::to_path_buf),
        })
    }

    fn retry(&self, raw: RawRetry) -> Result<RetryConfig, ConfigError> {
        let defaults = RetryConfig::default();
        let retry = RetryConfig {
            max_attempts: raw.max_attempts.unwrap_or(defaults.max_attempts),
            initial_delay_ms: raw.initial_delay_ms.unwrap_or(defaults.initial_delay_ms),
            max_delay_ms: raw.max_delay_ms.unwrap_or(defaults.max_delay_ms),
            chunk_timeout_ms: raw.chunk_timeout_ms.unwrap_or(defaults.chunk_timeout_ms),
        };
        if retry.max_attempts == 0 {
            return Err(self.invalid("retry.max_attempts", "must be at least 1"));
        }
        if retry.initial_delay_ms > retry.max_delay_ms {
            return Err(self.invalid(
                "retry.initial_delay_ms",
                format!(
                    "must not exceed retry.max_delay_ms ({} > {})",
                    retry.initial_delay_ms, retry.max_delay_ms
                ),
            ));
        }
        if retry.chunk_timeout_ms == 0 {
            return Err(self.invalid("retry.chunk_timeout_ms", "must be at least 1"));
        }
        Ok(retry)
    }

    fn turn(&self, raw: RawTurn) -> Result<TurnConfig, ConfigError> {
        let turn = TurnConfig {
            max_steps: raw.max_steps.unwrap_or(TurnConfig::default().max_steps),
        };
        if turn.max_steps == 0 {
            return Err(self.invalid("turn.max_steps", "must be at least 1"));
        }
        Ok(turn)
    }

    fn cluster(&self, raw: RawCluster) -> Result<ClusterConfig, ConfigError> {
        let database_url = raw.database_url.ok_or_else(|| {
            self.invalid("cluster.database_url", "is required in a [cluster] table")
        })?;
        check_database_url(&database_url)
            .map_err(|message| self.invalid("cluster.database_url", message))?;
        let lease_ms = raw.lease_ms.unwrap_or(ClusterConfig::DEFAULT_LEASE_MS);
        if !(1_000..=600_000).contains(&lease_ms) {
            return Err(self.invalid(
                "cluster.lease_ms",
                "must be between 1000 and 600000 (1 s to 10 min)",
            ));
        }
        if let Some(addr) = &raw.advertise_addr {
            check_advertise_addr(addr)
                .map_err(|message| self.invalid("cluster.advertise_addr", message))?;
        }
        Ok(ClusterConfig {
            database_url,
            lease_ms,
            advertise_addr: raw.advertise_addr,
        })
    }

    fn subagents(&self, raw: RawSubagents) -> Result<SubagentsConfig, ConfigError> {
        let defaults = SubagentsConfig::default();
        let subagents = SubagentsConfig {
            max_depth: raw.max_depth.unwrap_or(defaults.max_depth),
            max_live: raw.max_live.unwrap_or(defaults.max_live),
        };
        if subagents.max_depth > 16 {
            return Err(self.invalid("subagents.max_depth", "must be at most 16"));
        }
        if subagents.max_live > 256 {
            return Err(self.invalid("subagents.max_live", "must be at most 256"));
        }
        Ok(subagents)
    }

    fn server(&self, raw: RawServer) -> Result<ServerConfig, ConfigError> {
        let defaults = ServerConfig::default();
        let server = ServerConfig {
            addr: raw.addr,
            idle_unload_s: raw.idle_unload_s.unwrap_or(defaults.idle_unload_s),
            max_live_conversations: raw.max_live_conversations,
            max_connections: raw.max_connections,
            header_read_timeout_s: raw
                .header_read_timeout_s
                .unwrap_or(defaults.header_read_timeout_s),
        };
        if server.max_live_conversations == Some(0) {
            return Err(self.invalid("server.max_live_conversations", "must be at least 1"));
        }
        if server.max_connections == Some(0) {
            return Err(self.invalid("server.max_connections", "must be at least 1"));
        }
        if server.header_read_timeout_s == 0 {
            return Err(self.invalid("server.header_read_timeout_s", "must be at least 1"));
        }
        Ok(server)
    }

    fn tools(&self, raw: RawTools) -> Result<ToolsConfig, ConfigError> {
        let defaults = ToolsConfig::default();
        let tools = ToolsConfig {
            shell_timeout_s: raw.shell_timeout_s.unwrap_or(defaults.shell_timeout_s),
            max_output_bytes: raw.max_output_bytes.unwrap_or(defaults.max_output_bytes),
        };
        if tools.shell_timeout_s == 0 {
            return Err(self.invalid("tools.shell_timeout_s", "must be at least 1"));
        }
        if tools.max_output_bytes == 0 {
            return Err(self.invalid("tools.max_output_bytes", "must be at least 1"));
        }
        Ok(tools)
    }

    fn providers(
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

    fn models(
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
            // API.md's own example sets reasoning_context on an openai_chat model, so it is
            // accepted everywhere and only read by the openai_responses protocol.
            models.insert(
                id,
                ModelConfig {
                    provider: model.provider,
                    name: model.name,
                    context_window: model.context_window,
                    max_output_tokens: model.max_output_tokens,
                    reasoning_context: model.reasoning_context,
                    tokenizer: model.tokenizer,
                },
            );
        }
        models.insert(DEMO_MODEL.to_string(), demo_model());
        Ok(models)
    }

    fn agents(
        &self,
        raw: BTreeMap<String, RawAgent>,
        models: &BTreeMap<String, ModelConfig>,
    ) -> Result<BTreeMap<String, AgentConfig>, ConfigError> {
        let mut agents = BTreeMap::new();
        for (name, agent) in raw {
            let unknown_model = |key: &str, model: &str| {
                self.invalid(
                    format!("agents.{name}.{key}"),
                    format!(
                        "unknown model `{model}` (models: {})",
                        join_names(models.keys())
                    ),
                )
            };
            let Some(model) = models.get(&agent.model) else {
                return Err(unknown_model("model", &agent.model));
            };
            if let Some(compact_id) = &agent.compact_model {
                let Some(compact) = models.get(compact_id) else {
                    return Err(unknown_model("compact_model", compact_id));
                };
                if compact.context_window < model.context_window {
                    return Err(self.invalid(
                        format!("agents.{name}.compact_model"),
                        format!(
                            "`{compact_id}` has a context window of {} tokens, smaller than \
                             the {} tokens of model `{}`",
                            compact.context_window, model.context_window, agent.model
                        ),
                    ));
                }
            }
            let tools = agent.tools.unwrap_or_else(all_tools);
            if let Some(unknown) = tools
                .iter()
                .find(|tool| !ALL_TOOLS.contains(&tool.as_str()))
            {
                return Err(self.invalid(
                    format!("agents.{name}.tools"),
                    format!(
                        "unknown tool `{unknown}` (tools: {})",
                        join_names(ALL_TOOLS.iter())
                    ),
                ));
            }
            agents.insert(
                name,
                AgentConfig {
                    description: agent.description,
                    model: agent.model,
                    compact_model: agent.compact_model,
                    instructions: agent.instructions,
                    tools,
                },
            );
        }
        Ok(agents)
    }
}

fn join_names<T: AsRef<str>>(names: impl Iterator<Item = T>) -> String {
    names
        .map(|name| name.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from API.md, kept verbatim.
    const API_EXAMPLE: &str = r#"
default_agent = "default"

[server]
addr = "127.0.0.1:7341"

[retry]                      # model-call retries (SPEC §2.3); tests shrink the delays
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
tools = ["shell", "read_file", "write_file", "list_dir", "spawn_agent", "send_message", "wait_agents", "interrupt_agent", "list_agents"]
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
    fn defaults_match_the_spec() {
        let retry = RetryConfig::default();
        assert_eq!(retry.max_attempts, 10);
        assert_eq!(retry.initial_delay(), Duration::from_secs(1));
        assert_eq!(retry.max_delay(), Duration::from_secs(30));
        assert_eq!(retry.chunk_timeout(), Duration::from_secs(120));
        assert_eq!(TurnConfig::default().max_steps, 200);
        assert_eq!(
            ToolsConfig::default().shell_timeout(),
            Duration::from_secs(600)
        );
        assert_eq!(ToolsConfig::default().max_output_bytes, 65536);
    }

    #[test]
    fn sections_override_defaults() {
        let text = r#"
[retry]
max_attempts = 3
initial_delay_ms = 0
max_delay_ms = 5
chunk_timeout_ms = 200

[turn]
max_steps = 7

[tools]
shell_timeout_s = 2
max_output_bytes = 100
"#;
        let config = parse(text).unwrap();
        let retry = RetryConfig {
            max_attempts: 3,
            initial_delay_ms: 0,
            max_delay_ms: 5,
            chunk_timeout_ms: 200,
        };
        assert_eq!(config.retry, retry);
        assert_eq!(config.turn.max_steps, 7);
        assert_eq!(config.tools.shell_timeout_s, 2);
        assert_eq!(config.tools.max_output_bytes, 100);
    }

    #[test]
    fn fallback_agent_uses_the_first_model_in_the_file() {
        // `zeta` sorts after `alpha` but comes first in the file.
        let text = r#"
[providers.p]
protocol = "anthropic_messages"
base_url = "https://api.example.com"

[models.zeta]
provider = "p"
name = "z"
context_window = 1000
max_output_tokens = 100

[models.alpha]
provider = "p"
name = "a"
context_window = 1000
max_output_tokens = 100
"#;
        let config = parse(text).unwrap();
        let agent = config.default_agent();
        assert_eq!(agent.model, "zeta");
        assert_eq!(agent.description, "General coding agent (built-in)");

        let providers_only = "[providers.p]\nprotocol = \"openai_chat\"\nbase_url = \"http://x\"\n";
        assert_eq!(
            parse(providers_only).unwrap().default_agent().model,
            DEMO_MODEL
        );
    }

    #[test]
    fn agents_may_use_the_demo_model_and_a_subset_of_tools() {
        let text = r#"
default_agent = "reader"

[agents.reader]
description = "Reads files"
model = "demo"
tools = ["read_file", "list_dir"]
"#;
        let config = parse(text).unwrap();
        assert_eq!(config.default_agent().tools, ["read_file", "list_dir"]);
        assert!(config.agent(DEFAULT_AGENT).is_none());
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

    #[test]
    fn advertised_addresses_name_a_host_and_a_port() {
        for addr in ["10.0.0.5:7341", "node-1.internal:7341", "[fd00::1]:7341"] {
            assert_eq!(check_advertise_addr(addr), Ok(()), "{addr}");
        }
        for addr in [
            "node-1",
            ":7341",
            "node 1:7341",
            "user@node:7341",
            "[::]:7341",
        ] {
            assert!(check_advertise_addr(addr).is_err(), "{addr}");
        }
    }

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
}
