//! The limits on what the runtime does: model-call retries (`[retry]`), model calls per turn
//! (`[turn]`), tool timeouts and output size (`[tools]`) and sub-agent nesting (`[subagents]`).

use std::time::Duration;

use serde::Deserialize;

use super::validator::{ConfigError, Validator};

/// Retries of transient model-call errors (a cut stream, a reset connection, a timeout, HTTP
/// 429/5xx): 10 attempts, waits growing from 1 s to 30 s. Tests shrink the delays, never the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryConfig {
    /// At least 1.
    pub max_attempts: u32,
    /// At most `max_delay_ms`.
    pub initial_delay_ms: u64,
    pub max_delay_ms: u64,
    /// A provider stream silent this long counts as a transient error.
    pub chunk_timeout_ms: u64,
    /// The longest a provider's `Retry-After` is waited for; a longer one fails the turn with
    /// the provider's message rather than sending the request before the provider asked.
    pub max_retry_after_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnConfig {
    /// The most model calls one turn may make; at least 1.
    pub max_steps: u32,
}

/// Limits on sub-agents (agents spawned with `spawn_agent`); reaching one is a tool error for the
/// model, never a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentsConfig {
    /// How deep sub-agents may nest: the root agent is at depth 0, its sub-agents at 1.
    pub max_depth: u32,
    /// How many sub-agents of one conversation may run (have a turn in progress) at once.
    pub max_live: u32,
    /// How many sub-agents may run at once across the whole service (every conversation):
    /// each runs a model call and tools, so many conversations at their own limit could
    /// otherwise swamp the machine. Defaults to [`default_max_running_total`].
    pub max_running_total: u32,
}

impl Default for SubagentsConfig {
    fn default() -> SubagentsConfig {
        SubagentsConfig {
            max_depth: 3,
            max_live: 8,
            max_running_total: default_max_running_total(),
        }
    }
}

/// Sub-agents running at once across the service unless configured: 4 per core the process
/// may use, at least 16 (sub-agents mostly wait on the model, so a few per core keep it busy).
pub fn default_max_running_total() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    u32::try_from(cores.saturating_mul(4))
        .unwrap_or(u32::MAX)
        .max(16)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsConfig {
    /// Default timeout of a `shell` call when the model gives none.
    pub shell_timeout_s: u64,
    /// Tool output beyond this many bytes is cut before it goes back to the model.
    pub max_output_bytes: usize,
    /// Whether the working directory is snapshotted around tool calls that may change files
    /// (`src/checkpoints/`), for a turn's diff and for restoring files on rewind.
    pub checkpoints: bool,
    /// A file bigger than this is left out of snapshots (and listed as skipped).
    pub checkpoint_max_file_bytes: u64,
    /// A snapshot keeps at most this many bytes of files; the rest are skipped.
    pub checkpoint_max_snapshot_bytes: u64,
    /// A working tree with more files than this (not ignored) is not snapshotted: walking a
    /// home directory after every shell call would cost more than the turn.
    pub checkpoint_max_files: usize,
    /// How often the checkpoint store drops what no conversation needs any more (the first
    /// time ten minutes after start at most); 0: never (then `openvaala gc` does it).
    pub checkpoint_gc_interval_s: u64,
    /// Background processes (`shell` with `background`) running at once in one conversation,
    /// its sub-agents' included.
    pub max_background: usize,
    /// Background processes running at once in the whole service.
    pub max_background_total: usize,
    /// How long starting a background process waits for its first output before answering.
    pub background_wait_ms: u64,
    /// How long a turn waits for its MCP servers to start before its first model call; one
    /// not ready by then joins a later call.
    pub mcp_start_wait_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 10,
            initial_delay_ms: 1_000,
            max_delay_ms: 30_000,
            chunk_timeout_ms: 120_000,
            max_retry_after_ms: 300_000,
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
            checkpoints: true,
            checkpoint_max_file_bytes: 10 * 1024 * 1024,
            checkpoint_max_snapshot_bytes: 200 * 1024 * 1024,
            checkpoint_max_files: 50_000,
            checkpoint_gc_interval_s: 24 * 60 * 60,
            max_background: 4,
            max_background_total: 32,
            background_wait_ms: 2_000,
            mcp_start_wait_ms: 3_000,
        }
    }
}

impl ToolsConfig {
    pub fn shell_timeout(&self) -> Duration {
        Duration::from_secs(self.shell_timeout_s)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    max_attempts: Option<u32>,
    initial_delay_ms: Option<u64>,
    max_delay_ms: Option<u64>,
    chunk_timeout_ms: Option<u64>,
    max_retry_after_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTurn {
    max_steps: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSubagents {
    max_depth: Option<u32>,
    max_live: Option<u32>,
    max_running_total: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTools {
    shell_timeout_s: Option<u64>,
    max_output_bytes: Option<usize>,
    checkpoints: Option<bool>,
    checkpoint_max_file_bytes: Option<u64>,
    checkpoint_max_snapshot_bytes: Option<u64>,
    checkpoint_max_files: Option<usize>,
    checkpoint_gc_interval_s: Option<u64>,
    max_background: Option<usize>,
    max_background_total: Option<usize>,
    background_wait_ms: Option<u64>,
    mcp_start_wait_ms: Option<u64>,
}

impl Validator<'_> {
    pub(super) fn retry(&self, raw: RawRetry) -> Result<RetryConfig, ConfigError> {
        let defaults = RetryConfig::default();
        let retry = RetryConfig {
            max_attempts: raw.max_attempts.unwrap_or(defaults.max_attempts),
            initial_delay_ms: raw.initial_delay_ms.unwrap_or(defaults.initial_delay_ms),
            max_delay_ms: raw.max_delay_ms.unwrap_or(defaults.max_delay_ms),
            chunk_timeout_ms: raw.chunk_timeout_ms.unwrap_or(defaults.chunk_timeout_ms),
            max_retry_after_ms: raw
                .max_retry_after_ms
                .unwrap_or(defaults.max_retry_after_ms),
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

    pub(super) fn turn(&self, raw: RawTurn) -> Result<TurnConfig, ConfigError> {
        let turn = TurnConfig {
            max_steps: raw.max_steps.unwrap_or(TurnConfig::default().max_steps),
        };
        if turn.max_steps == 0 {
            return Err(self.invalid("turn.max_steps", "must be at least 1"));
        }
        Ok(turn)
    }

    pub(super) fn subagents(&self, raw: RawSubagents) -> Result<SubagentsConfig, ConfigError> {
        let defaults = SubagentsConfig::default();
        let subagents = SubagentsConfig {
            max_depth: raw.max_depth.unwrap_or(defaults.max_depth),
            max_live: raw.max_live.unwrap_or(defaults.max_live),
            max_running_total: raw.max_running_total.unwrap_or(defaults.max_running_total),
        };
        if subagents.max_depth > 16 {
            return Err(self.invalid("subagents.max_depth", "must be at most 16"));
        }
        if subagents.max_live > 256 {
            return Err(self.invalid("subagents.max_live", "must be at most 256"));
        }
        if subagents.max_running_total == 0 {
            return Err(self.invalid("subagents.max_running_total", "must be at least 1"));
        }
        Ok(subagents)
    }

    pub(super) fn tools(&self, raw: RawTools) -> Result<ToolsConfig, ConfigError> {
        let defaults = ToolsConfig::default();
        let tools = ToolsConfig {
            shell_timeout_s: raw.shell_timeout_s.unwrap_or(defaults.shell_timeout_s),
            max_output_bytes: raw.max_output_bytes.unwrap_or(defaults.max_output_bytes),
            checkpoints: raw.checkpoints.unwrap_or(defaults.checkpoints),
            checkpoint_max_file_bytes: raw
                .checkpoint_max_file_bytes
                .unwrap_or(defaults.checkpoint_max_file_bytes),
            checkpoint_max_snapshot_bytes: raw
                .checkpoint_max_snapshot_bytes
                .unwrap_or(defaults.checkpoint_max_snapshot_bytes),
            checkpoint_max_files: raw
                .checkpoint_max_files
                .unwrap_or(defaults.checkpoint_max_files),
            checkpoint_gc_interval_s: raw
                .checkpoint_gc_interval_s
                .unwrap_or(defaults.checkpoint_gc_interval_s),
            max_background: raw.max_background.unwrap_or(defaults.max_background),
            max_background_total: raw
                .max_background_total
                .unwrap_or(defaults.max_background_total),
            background_wait_ms: raw
                .background_wait_ms
                .unwrap_or(defaults.background_wait_ms),
            mcp_start_wait_ms: raw.mcp_start_wait_ms.unwrap_or(defaults.mcp_start_wait_ms),
        };
        if tools.mcp_start_wait_ms > 60_000 {
            return Err(self.invalid("tools.mcp_start_wait_ms", "must be at most 60000"));
        }
        if tools.background_wait_ms > 60_000 {
            return Err(self.invalid("tools.background_wait_ms", "must be at most 60000"));
        }
        if tools.shell_timeout_s == 0 {
            return Err(self.invalid("tools.shell_timeout_s", "must be at least 1"));
        }
        if tools.max_output_bytes == 0 {
            return Err(self.invalid("tools.max_output_bytes", "must be at least 1"));
        }
        Ok(tools)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Config, ConfigError};

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Some(Path::new("config.toml")))
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
        let cores = std::thread::available_parallelism().unwrap().get() as u32;
        assert_eq!(
            SubagentsConfig::default().max_running_total,
            (4 * cores).max(16)
        );
    }

    #[test]
    fn the_service_wide_sub_agent_limit_is_configurable_and_at_least_1() {
        let config = parse("[subagents]\nmax_running_total = 5\n").unwrap();
        assert_eq!(config.subagents.max_running_total, 5);
        let error = parse("[subagents]\nmax_running_total = 0\n").unwrap_err();
        assert!(
            error.to_string().contains("subagents.max_running_total"),
            "{error}"
        );
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
            max_retry_after_ms: 300_000,
        };
        assert_eq!(config.retry, retry);
        assert_eq!(config.turn.max_steps, 7);
        assert_eq!(config.tools.shell_timeout_s, 2);
        assert_eq!(config.tools.max_output_bytes, 100);
    }
}
