//! The `[agents.*]` tables: each agent's model, compaction model, instructions, tools and
//! sandbox, and the agent added when a file defines none.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::mcp::McpServerConfig;
use super::providers::ModelConfig;
use super::validator::{ConfigError, Validator, join_names};
use crate::permissions::{Permission, Permissions};

/// The agent used when neither the file nor the client names one.
pub const DEFAULT_AGENT: &str = "default";

/// Every tool the runtime offers; an agent without a `tools` list gets all of them.
pub const ALL_TOOLS: &[&str] = &[
    "shell",
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "grep",
    "glob",
    "spawn_agent",
    "send_message",
    "wait_agents",
    "interrupt_agent",
    "list_agents",
    "update_plan",
    "skill",
];

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Shown to models choosing an agent for `spawn_agent`, and to users.
    pub description: String,
    pub model: String,
    /// Writes compaction summaries; `None` means `model`. Its context window is at least the
    /// model's, so a summary of what the model saw always fits.
    pub compact_model: Option<String>,
    /// Writes a short title for a conversation after its first turn (`title_model`); `None`
    /// keeps the title taken from the first message.
    pub title_model: Option<String>,
    /// Added to the base prompt (`instructions`); the environment block and the AGENTS.md
    /// files come after both.
    pub instructions: Option<String>,
    /// The prompt every request starts with (`base_instructions`): the built-in one, none, or
    /// a file's text in its place.
    pub base_instructions: BaseInstructions,
    /// Names from [`ALL_TOOLS`].
    pub tools: Vec<String>,
    /// What the agent's tool commands may write (`sandbox`); secure by default.
    pub sandbox: SandboxMode,
    /// Whether tool commands may open TCP connections and bind ports (`network`).
    pub network: bool,
    /// Which tool calls run, ask first or are refused (`permissions`, `approval_timeout_s`).
    pub permissions: Permissions,
    /// The MCP servers whose tools it gets (`mcp`, names from `[mcp.*]`); none by default.
    pub mcp: Vec<String>,
    /// Whether those servers may have its model write for them (`mcp_sampling`).
    pub mcp_sampling: super::mcp::McpSampling,
    /// What one tool call may take (`[agents.NAME.limits]`).
    pub limits: ProcessLimits,
    /// Added to the allow-listed environment of its tool processes (`env`); `${VAR}` is
    /// expanded from the service's environment when a call starts.
    pub env: BTreeMap<String, String>,
    /// The agents it may start with `spawn_agent` (`spawnable`); by default its own kind only.
    pub spawnable: Vec<String>,
    /// Whether a client may name command MCP servers for its conversations (`client_mcp`);
    /// they always run in its sandbox.
    pub client_mcp: bool,
    /// Its spending limits (`max_cost`, `max_turn_tokens`, `max_turn_model_calls`,
    /// `on_budget`); a conversation's own take their place.
    pub budget: super::budget::Budget,
}

/// The prompt an agent's requests start with (`base_instructions`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BaseInstructions {
    /// The runtime's own (`true`, the default).
    #[default]
    Builtin,
    /// None (`false`): only the agent's `instructions`, the environment and AGENTS.md.
    Off,
    /// A file's text in place of the built-in prompt (a path, relative to the config file's
    /// directory), read when the configuration is loaded.
    Replaced(std::sync::Arc<str>),
}

/// The largest `base_instructions` file read.
const BASE_INSTRUCTIONS_MAX_BYTES: u64 = 256 * 1024;

/// What one tool call, and everything it starts, may take. Enforced by the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ProcessLimits {
    /// Processes (threads included) running at once.
    pub processes: u32,
    /// Memory each process may allocate, in MiB.
    pub memory_mb: u64,
    /// The largest file a process may write, in MiB.
    pub file_size_mb: u64,
    /// CPU seconds each process may use.
    pub cpu_s: u64,
    /// How long a background process (`shell` with `background`) may run before it is
    /// stopped.
    pub background_max_s: u64,
}

impl Default for ProcessLimits {
    /// Generous but finite: a big build fits; a fork bomb, a memory bomb or a disk filler does
    /// not take the machine.
    fn default() -> ProcessLimits {
        ProcessLimits {
            processes: 1024,
            memory_mb: 8192,
            file_size_mb: 8192,
            cpu_s: 3600,
            background_max_s: 24 * 60 * 60,
        }
    }
}

impl ProcessLimits {
    /// The lower of each limit.
    pub fn lower(&self, other: &ProcessLimits) -> ProcessLimits {
        ProcessLimits {
            processes: self.processes.min(other.processes),
            memory_mb: self.memory_mb.min(other.memory_mb),
            file_size_mb: self.file_size_mb.min(other.file_size_mb),
            cpu_s: self.cpu_s.min(other.cpu_s),
            background_max_s: self.background_max_s.min(other.background_max_s),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    processes: Option<u32>,
    memory_mb: Option<u64>,
    file_size_mb: Option<u64>,
    cpu_s: Option<u64>,
    background_max_s: Option<u64>,
}

/// How far an agent's tools may write, enforced by the kernel for shell commands and in-process
/// for the file tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SandboxMode {
    /// No writes, except to devices like `/dev/null`.
    ReadOnly,
    /// Writes only under the conversation's working directory and the temp directory.
    #[default]
    WorkspaceWrite,
    /// No sandbox: tool commands have the service's rights.
    Off,
}

impl SandboxMode {
    /// Every mode by its name in the file.
    const NAMES: [(&str, SandboxMode); 3] = [
        ("read_only", SandboxMode::ReadOnly),
        ("workspace_write", SandboxMode::WorkspaceWrite),
        ("off", SandboxMode::Off),
    ];

    /// The name in the file: `read_only`, `workspace_write` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read_only",
            SandboxMode::WorkspaceWrite => "workspace_write",
            SandboxMode::Off => "off",
        }
    }

    /// The mode named `name` in the file.
    pub fn from_name(name: &str) -> Option<SandboxMode> {
        SandboxMode::NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, mode)| *mode)
    }
}

impl AgentConfig {
    /// The model that writes this agent's compaction summaries.
    pub fn compaction_model(&self) -> &str {
        self.compact_model.as_deref().unwrap_or(&self.model)
    }
}

/// The agent added when a file defines none.
pub(super) fn fallback_agent(model: &str) -> AgentConfig {
    AgentConfig {
        description: "General coding agent (built-in)".to_string(),
        model: model.to_string(),
        compact_model: None,
        title_model: None,
        instructions: None,
        base_instructions: BaseInstructions::Builtin,
        tools: all_tools(),
        sandbox: SandboxMode::default(),
        network: false,
        permissions: Permissions {
            agent: DEFAULT_AGENT.to_owned(),
            ..Permissions::default()
        },
        mcp: Vec::new(),
        mcp_sampling: super::mcp::McpSampling::default(),
        limits: ProcessLimits::default(),
        env: BTreeMap::new(),
        spawnable: vec![DEFAULT_AGENT.to_owned()],
        client_mcp: false,
        budget: super::budget::Budget::default(),
    }
}

pub(super) fn all_tools() -> Vec<String> {
    ALL_TOOLS.iter().map(ToString::to_string).collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    description: String,
    model: String,
    compact_model: Option<String>,
    title_model: Option<String>,
    instructions: Option<String>,
    /// `true`, `false` or a path; read by [`Validator::base_instructions`].
    base_instructions: Option<toml::Value>,
    tools: Option<Vec<String>>,
    /// Read as text so that a bad value is an error naming the key.
    sandbox: Option<String>,
    network: Option<bool>,
    /// Tool names (and `shell_rules`) to `allow`, `ask` or `deny`; read as a table so that a
    /// bad value is an error naming its key.
    permissions: Option<toml::Table>,
    approval_timeout_s: Option<u64>,
    mcp: Option<Vec<String>>,
    mcp_sampling: Option<super::mcp::McpSampling>,
    limits: Option<RawLimits>,
    env: Option<BTreeMap<String, String>>,
    spawnable: Option<Vec<String>>,
    client_mcp: Option<bool>,
    max_cost: Option<f64>,
    max_turn_tokens: Option<u64>,
    max_turn_model_calls: Option<u32>,
    on_budget: Option<super::budget::OnBudget>,
}

impl Validator<'_> {
    /// `trust_repository_agents`: absolute directories.
    pub(super) fn trusted_repositories(
        &self,
        raw: Vec<String>,
    ) -> Result<Vec<std::path::PathBuf>, ConfigError> {
        raw.into_iter()
            .map(|path| {
                if Path::new(&path).is_absolute() {
                    Ok(std::path::PathBuf::from(path))
                } else {
                    Err(self.invalid(
                        "trust_repository_agents",
                        format!("`{path}` is not an absolute path"),
                    ))
                }
            })
            .collect()
    }

    pub(super) fn agents(
        &self,
        raw: BTreeMap<String, RawAgent>,
        models: &BTreeMap<String, ModelConfig>,
        mcp: &BTreeMap<String, McpServerConfig>,
    ) -> Result<BTreeMap<String, AgentConfig>, ConfigError> {
        let names: Vec<String> = raw.keys().cloned().collect();
        let mut agents = BTreeMap::new();
        for (name, agent) in raw {
            let checked = self.agent(&name, agent, &names, models, mcp)?;
            agents.insert(name, checked);
        }
        Ok(agents)
    }

    /// One `[agents.<name>]` table; `names` are the agents it may name in `spawnable`.
    pub(super) fn agent(
        &self,
        name: &str,
        agent: RawAgent,
        names: &[String],
        models: &BTreeMap<String, ModelConfig>,
        mcp: &BTreeMap<String, McpServerConfig>,
    ) -> Result<AgentConfig, ConfigError> {
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
        if let Some(title_id) = &agent.title_model
            && !models.contains_key(title_id)
        {
            return Err(unknown_model("title_model", title_id));
        }
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
        let sandbox = match agent.sandbox.as_deref() {
            None => SandboxMode::default(),
            Some(text) => SandboxMode::from_name(text).ok_or_else(|| {
                self.invalid(
                    format!("agents.{name}.sandbox"),
                    format!(
                        "unknown sandbox `{text}` (sandboxes: {})",
                        join_names(SandboxMode::NAMES.iter().map(|(name, _)| name))
                    ),
                )
            })?,
        };
        let servers = agent.mcp.unwrap_or_default();
        if let Some(unknown) = servers.iter().find(|server| !mcp.contains_key(*server)) {
            return Err(self.invalid(
                format!("agents.{name}.mcp"),
                format!(
                    "unknown MCP server `{unknown}` (servers: {})",
                    join_names(mcp.keys())
                ),
            ));
        }
        let mut permissions = self.permissions(name, agent.permissions)?;
        if let Some(seconds) = agent.approval_timeout_s {
            if seconds == 0 {
                return Err(self.invalid(
                    format!("agents.{name}.approval_timeout_s"),
                    "must be at least 1 (leave it out to wait until the turn ends)",
                ));
            }
            permissions.approval_timeout = Some(std::time::Duration::from_secs(seconds));
        }
        let limits = self.limits(name, agent.limits.unwrap_or_default())?;
        let env = agent.env.unwrap_or_default();
        if let Some(bad) = env
            .keys()
            .find(|key| key.is_empty() || key.contains(['=', '\0']))
        {
            return Err(self.invalid(
                format!("agents.{name}.env"),
                format!("`{bad}` is not a variable name"),
            ));
        }
        let spawnable = agent.spawnable.unwrap_or_else(|| vec![name.to_owned()]);
        if let Some(unknown) = spawnable.iter().find(|agent| !names.contains(agent)) {
            return Err(self.invalid(
                format!("agents.{name}.spawnable"),
                format!(
                    "unknown agent `{unknown}` (agents: {})",
                    join_names(names.iter())
                ),
            ));
        }
        let base_instructions = self.base_instructions(name, agent.base_instructions.as_ref())?;
        let budget = super::budget::Budget {
            max_cost: agent.max_cost,
            max_turn_tokens: agent.max_turn_tokens,
            max_turn_model_calls: agent.max_turn_model_calls,
            on_budget: agent.on_budget,
        };
        if let Some(problem) = budget.invalid() {
            let key = problem.split(' ').next().unwrap_or_default();
            return Err(self.invalid(format!("agents.{name}.{key}"), problem));
        }
        if budget.max_cost.is_some()
            && let Some(unpriced) = super::providers::unpriced_model(models, &agent.model)
        {
            return Err(self.invalid(
                format!("agents.{name}.max_cost"),
                format!(
                    "needs prices, and model `{unpriced}` has none (set models.{unpriced}.price)"
                ),
            ));
        }
        Ok(AgentConfig {
            description: agent.description,
            model: agent.model,
            compact_model: agent.compact_model,
            title_model: agent.title_model,
            instructions: agent.instructions,
            base_instructions,
            tools,
            sandbox,
            network: agent.network.unwrap_or(false),
            permissions,
            mcp: servers,
            mcp_sampling: agent.mcp_sampling.unwrap_or_default(),
            limits,
            env,
            spawnable,
            client_mcp: agent.client_mcp.unwrap_or(false),
            budget,
        })
    }

    /// `base_instructions`: `true` (the built-in prompt), `false` (none), or the path of a
    /// UTF-8 file, relative to the config file's directory, whose text replaces it.
    fn base_instructions(
        &self,
        agent: &str,
        raw: Option<&toml::Value>,
    ) -> Result<BaseInstructions, ConfigError> {
        let key = format!("agents.{agent}.base_instructions");
        let path = match raw {
            None | Some(toml::Value::Boolean(true)) => return Ok(BaseInstructions::Builtin),
            Some(toml::Value::Boolean(false)) => return Ok(BaseInstructions::Off),
            Some(toml::Value::String(path)) if !path.trim().is_empty() => path,
            Some(_) => {
                return Err(self.invalid(
                    key,
                    "must be true, false or the path of a file holding the base prompt",
                ));
            }
        };
        let full = match self.source.and_then(std::path::Path::parent) {
            Some(dir) => dir.join(path),
            None => std::path::PathBuf::from(path),
        };
        let read = std::fs::metadata(&full).and_then(|metadata| {
            if metadata.len() > BASE_INSTRUCTIONS_MAX_BYTES {
                return Err(std::io::Error::other(format!(
                    "it has {} bytes, more than the {BASE_INSTRUCTIONS_MAX_BYTES} allowed",
                    metadata.len()
                )));
            }
            std::fs::read_to_string(&full)
        });
        match read {
            Ok(text) => Ok(BaseInstructions::Replaced(text.into())),
            Err(error) => {
                Err(self.invalid(key, format!("cannot read {}: {error}", full.display())))
            }
        }
    }

    /// `[agents.<name>.limits]`: each limit at least 1 (memory at least 16 MiB), the defaults
    /// for those left out.
    fn limits(&self, agent: &str, raw: RawLimits) -> Result<ProcessLimits, ConfigError> {
        let defaults = ProcessLimits::default();
        let limits = ProcessLimits {
            processes: raw.processes.unwrap_or(defaults.processes),
            memory_mb: raw.memory_mb.unwrap_or(defaults.memory_mb),
            file_size_mb: raw.file_size_mb.unwrap_or(defaults.file_size_mb),
            cpu_s: raw.cpu_s.unwrap_or(defaults.cpu_s),
            background_max_s: raw.background_max_s.unwrap_or(defaults.background_max_s),
        };
        let low = [
            ("processes", u64::from(limits.processes), 1),
            ("memory_mb", limits.memory_mb, 16),
            ("file_size_mb", limits.file_size_mb, 1),
            ("cpu_s", limits.cpu_s, 1),
            ("background_max_s", limits.background_max_s, 1),
        ];
        if let Some((key, _, least)) = low.iter().find(|(_, value, least)| value < least) {
            return Err(self.invalid(
                format!("agents.{agent}.limits.{key}"),
                format!("must be at least {least}"),
            ));
        }
        Ok(limits)
    }

    /// `[agents.<name>.permissions]`: tool names to `allow`, `ask` or `deny`, and
    /// `shell_rules`, command patterns to the same.
    fn permissions(
        &self,
        agent: &str,
        table: Option<toml::Table>,
    ) -> Result<Permissions, ConfigError> {
        let mut permissions = Permissions {
            agent: agent.to_owned(),
            ..Permissions::default()
        };
        let permission = |key: String, value: &toml::Value| {
            value
                .as_str()
                .and_then(Permission::from_name)
                .ok_or_else(|| {
                    self.invalid(key, format!("`{value}` is not one of: allow, ask, deny"))
                })
        };
        for (key, value) in table.unwrap_or_default() {
            let path = format!("agents.{agent}.permissions.{key}");
            if key == "shell_rules" {
                let Some(rules) = value.as_table() else {
                    return Err(self.invalid(path, "must be a table of patterns"));
                };
                for (pattern, value) in rules {
                    if pattern.trim().is_empty() {
                        return Err(self.invalid(path, "a pattern is empty"));
                    }
                    let permission = permission(format!("{path}.\"{pattern}\""), value)?;
                    permissions.shell_rules.push((pattern.clone(), permission));
                }
            } else if ALL_TOOLS.contains(&key.as_str())
                || key == "mcp"
                || key.starts_with(crate::permissions::MCP_PREFIX)
            {
                let permission = permission(path, &value)?;
                permissions.tools.insert(key, permission);
            } else {
                return Err(self.invalid(
                    path,
                    format!(
                        "unknown tool `{key}` (tools: {}, mcp, mcp__<server>__<tool> \
                         patterns; and shell_rules)",
                        join_names(ALL_TOOLS.iter())
                    ),
                ));
            }
        }
        Ok(permissions)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::SandboxMode;
    use crate::config::{Config, ConfigError, DEFAULT_AGENT, DEMO_MODEL};
    use crate::permissions::Permission;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Some(Path::new("config.toml")))
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
    fn the_sandbox_defaults_to_workspace_writes_without_network() {
        let builtin = Config::builtin();
        let agent = builtin.default_agent();
        assert_eq!(
            (agent.sandbox, agent.network),
            (SandboxMode::WorkspaceWrite, false)
        );
        let text = "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n";
        let agent = parse(text).unwrap().agents["default"].clone();
        assert_eq!(
            (agent.sandbox, agent.network),
            (SandboxMode::WorkspaceWrite, false)
        );
    }

    #[test]
    fn the_sandbox_and_network_are_set_per_agent() {
        for (name, mode) in SandboxMode::NAMES {
            let text = format!(
                "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nsandbox = \"{name}\"\nnetwork = true\n"
            );
            let agent = parse(&text).unwrap().agents["default"].clone();
            assert_eq!((agent.sandbox, agent.network), (mode, true));
            assert_eq!(mode.name(), name);
        }
    }

    #[test]
    fn permissions_are_read_per_tool_and_per_pattern() {
        let text = r#"
[agents.default]
description = "d"
model = "demo"
approval_timeout_s = 30
[agents.default.permissions]
shell = "ask"
write_file = "deny"
mcp = "allow"
[agents.default.permissions.shell_rules]
"git status*" = "allow"
"git push*" = "ask"
"rm -rf /*" = "deny"
"#;
        let agent = parse(text).unwrap().agents["default"].clone();
        let permissions = agent.permissions;
        assert_eq!(permissions.agent, "default");
        assert_eq!(permissions.tool("shell"), Permission::Ask);
        assert_eq!(permissions.tool("write_file"), Permission::Deny);
        assert_eq!(permissions.tool("mcp"), Permission::Allow);
        assert_eq!(permissions.tool("read_file"), Permission::Allow);
        assert_eq!(permissions.shell_rules.len(), 3);
        assert!(
            permissions
                .shell_rules
                .contains(&("rm -rf /*".to_owned(), Permission::Deny))
        );
        assert_eq!(
            permissions.approval_timeout,
            Some(std::time::Duration::from_secs(30))
        );
        // The defaults keep the first run working: everything allowed inside the sandbox.
        let builtin = Config::builtin();
        let defaults = &builtin.default_agent().permissions;
        assert!(defaults.tools.is_empty() && defaults.shell_rules.is_empty());
        assert_eq!(defaults.approval_timeout, None);
    }

    #[test]
    fn a_bad_permission_names_its_key() {
        let cases = [
            (
                "shell = \"maybe\"",
                "agents.default.permissions.shell",
                "`\"maybe\"` is not one of: allow, ask, deny",
            ),
            (
                "browser = \"ask\"",
                "agents.default.permissions.browser",
                "unknown tool `browser`",
            ),
            (
                "shell_rules = \"x\"",
                "agents.default.permissions.shell_rules",
                "must be a table of patterns",
            ),
            (
                "shell_rules = { \"git *\" = 1 }",
                "agents.default.permissions.shell_rules.\"git *\"",
                "is not one of",
            ),
        ];
        for (line, key, message) in cases {
            let text = format!(
                "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n[agents.default.permissions]\n{line}\n"
            );
            let error = parse(&text).unwrap_err();
            assert_eq!(error.key(), Some(key), "{line}: {error}");
            assert!(error.to_string().contains(message), "{line}: {error}");
        }
        let text =
            "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\napproval_timeout_s = 0\n";
        assert_eq!(
            parse(text).unwrap_err().key(),
            Some("agents.default.approval_timeout_s")
        );
    }

    #[test]
    fn a_bad_sandbox_names_its_key() {
        let text =
            "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nsandbox = \"strict\"\n";
        let error = parse(text).unwrap_err();
        assert_eq!(error.key(), Some("agents.default.sandbox"));
        assert!(
            error
                .to_string()
                .contains("unknown sandbox `strict` (sandboxes: read_only, workspace_write, off)"),
            "{error}"
        );
        let text = "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nnetwork = \"yes\"\n";
        let shown = parse(text).unwrap_err().to_string();
        assert!(shown.contains("network"), "{shown}");
    }
}
