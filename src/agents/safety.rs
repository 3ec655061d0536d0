//! What a repository's agent may change: it may tighten the user's safety settings, never
//! loosen them. The model can write the repository, so an agent file is as trusted as the
//! model: one that would turn the sandbox off, turn the network on, allow what the user's
//! config asks about or denies, reach an MCP server, agent or variable of the service's the
//! user did not give, is skipped with the reason, unless `trust_repository_agents` lists the
//! repository. What it leaves out holds as the user set it: the asks and denies, the process
//! limits and the spending limits of the agent it stands in for apply to it too.
//!
//! The agent it stands in for (its baseline) is the config's agent of the same name, else the
//! default agent.

use std::path::Path;

use crate::config::{AgentConfig, Budget, Config, SandboxMode};
use crate::repo::agents::AgentFile;

/// The user's agent a repository's agent named `name` is measured against.
pub(super) fn baseline<'a>(config: &'a Config, name: &str) -> &'a AgentConfig {
    config.agent(name).unwrap_or_else(|| config.default_agent())
}

/// Whether `trust_repository_agents` lists a directory holding `path` (as written, or with
/// its symlinks resolved).
pub(super) fn trusted(config: &Config, path: &Path) -> bool {
    if config.trust_repository_agents.is_empty() {
        return false;
    }
    let real = path.canonicalize().ok();
    config.trust_repository_agents.iter().any(|dir| {
        let real_dir = dir.canonicalize().ok();
        [Some(dir.as_path()), real_dir.as_deref()]
            .into_iter()
            .flatten()
            .any(|dir| path.starts_with(dir) || real.as_deref().is_some_and(|p| p.starts_with(dir)))
    })
}

/// `agent` as it may run: refused (with every setting that would loosen the user's) unless
/// trusted; else tightened by its baseline. `repository_names` are the agents the repository
/// ships, which it may start (they are held to the same rules).
pub(super) fn kept(
    config: &Config,
    file: &AgentFile,
    agent: AgentConfig,
    trusted: bool,
    repository_names: &[String],
) -> Result<AgentConfig, String> {
    if trusted {
        return Ok(agent);
    }
    let base = baseline(config, &file.name);
    let loosened = loosened(base, &agent, repository_names);
    if !loosened.is_empty() {
        let whom = if config.agent(&file.name).is_some() {
            format!("agent `{}`", file.name)
        } else {
            format!("the default agent `{}`", config.default_agent)
        };
        return Err(format!(
            "it would loosen what the config allows {whom}: {}. A repository's agent may only \
             tighten these, unless the config's trust_repository_agents lists the repository",
            loosened.join(", ")
        ));
    }
    Ok(tightened(agent, base))
}

/// Each setting of `agent` looser than `base`'s, as `key = value (the config's: value)`.
fn loosened(base: &AgentConfig, agent: &AgentConfig, repository_names: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    if openness(agent.sandbox) > openness(base.sandbox) {
        found.push(format!(
            "sandbox = {} (the config's: {})",
            agent.sandbox.name(),
            base.sandbox.name()
        ));
    }
    // A tool the user's agent lacks is one the user left out on purpose.
    for tool in agent.tools.iter().filter(|tool| !base.tools.contains(tool)) {
        found.push(format!("tools: {tool} (not among the config's)"));
    }
    if agent.network && !base.network {
        found.push("network = true (the config's: false)".to_owned());
    }
    for (tool, permission) in &agent.permissions.tools {
        let own = base.permissions.tool(tool);
        if *permission < own {
            found.push(format!(
                "permissions.{tool} = {} (the config's: {})",
                permission.name(),
                own.name()
            ));
        }
    }
    // A rule looser than the config's rule for the same pattern, or than a shell that asks.
    // (Under a shell that allows, the config's other rules still hold: they are inherited,
    // and the strictest match wins.)
    let shell = base.permissions.tool("shell");
    for (pattern, permission) in &agent.permissions.shell_rules {
        let own = base
            .permissions
            .shell_rules
            .iter()
            .filter(|(own, _)| own == pattern)
            .map(|(_, permission)| *permission)
            .max();
        let (limit, of) = match own {
            Some(own) => (own, format!("the config's: {}", own.name())),
            None => (shell, format!("the config's shell: {}", shell.name())),
        };
        if *permission < limit {
            found.push(format!(
                "permissions.shell_rules.\"{pattern}\" = {} ({of})",
                permission.name()
            ));
        }
    }
    for server in agent.mcp.iter().filter(|server| !base.mcp.contains(server)) {
        found.push(format!("mcp = [\"{server}\"] (not among the config's)"));
    }
    // Allow < Ask < Deny: a repository's agent may not let servers spend without asking.
    if agent.mcp_sampling < base.mcp_sampling {
        found.push(format!(
            "mcp_sampling = {} (the config's: {})",
            agent.mcp_sampling.name(),
            base.mcp_sampling.name()
        ));
    }
    if agent.client_mcp && !base.client_mcp {
        found.push("client_mcp = true (the config's: false)".to_owned());
    }
    // `${VAR}` is expanded from the service's environment, which holds its keys.
    for (key, value) in &agent.env {
        if value.contains("${") && base.env.get(key) != Some(value) {
            found.push(format!("env.{key} reads the service's environment"));
        }
    }
    for other in &agent.spawnable {
        if !base.spawnable.contains(other) && !repository_names.contains(other) {
            found.push(format!(
                "spawnable = [\"{other}\"] (not among the config's)"
            ));
        }
    }
    found
}

/// How much a sandbox mode lets through.
fn openness(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::ReadOnly => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::Off => 2,
    }
}

/// `agent` with `base`'s asks, denies and limits kept: each the stricter of the two.
fn tightened(mut agent: AgentConfig, base: &AgentConfig) -> AgentConfig {
    agent.permissions.inherit(&base.permissions);
    agent.permissions.approval_timeout = match (
        agent.permissions.approval_timeout,
        base.permissions.approval_timeout,
    ) {
        (Some(own), Some(theirs)) => Some(own.min(theirs)),
        (own, theirs) => own.or(theirs),
    };
    agent.limits = agent.limits.lower(&base.limits);
    agent.budget = stricter_budget(agent.budget, &base.budget);
    agent
}

/// Each spending limit the lower of the two; `base`'s way of stopping unless `own` says.
fn stricter_budget(own: Budget, base: &Budget) -> Budget {
    fn lower<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b < a { b } else { a }),
            (a, b) => a.or(b),
        }
    }
    Budget {
        max_cost: lower(own.max_cost, base.max_cost),
        max_turn_tokens: lower(own.max_turn_tokens, base.max_turn_tokens),
        max_turn_model_calls: lower(own.max_turn_model_calls, base.max_turn_model_calls),
        on_budget: own.on_budget.or(base.on_budget),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config() -> Config {
        Config::from_toml_str(
            "[mcp.github]\ncommand = \"github-mcp\"\n\
             [agents.default]\ndescription = \"d\"\nmodel = \"demo\"\nspawnable = [\"default\"]\n\
             max_turn_model_calls = 5\n[agents.default.limits]\nmemory_mb = 512\n\
             [agents.ops]\ndescription = \"o\"\nmodel = \"demo\"\nsandbox = \"off\"\n",
            Some(Path::new("config.toml")),
        )
        .unwrap()
    }

    fn file(name: &str) -> AgentFile {
        AgentFile {
            name: name.to_owned(),
            path: format!("/repo/.agents/agents/{name}.md").into(),
            table: toml::Table::new(),
        }
    }

    #[test]
    fn servers_agents_and_client_servers_the_user_did_not_give_are_refused() {
        let config = config();
        let mut agent = config.default_agent().clone();
        agent.mcp = vec!["github".to_owned()];
        agent.spawnable = vec!["ops".to_owned(), "helper".to_owned()];
        agent.client_mcp = true;
        agent.mcp_sampling = crate::config::McpSampling::Allow;
        let mut narrow = config.clone();
        narrow.agents.get_mut("default").unwrap().tools = vec!["read_file".to_owned()];
        let tools = kept(&narrow, &file("default"), agent.clone(), false, &[]).unwrap_err();
        assert!(
            tools.contains("tools: shell (not among the config's)"),
            "{tools}"
        );
        let refused = kept(
            &config,
            &file("default"),
            agent,
            false,
            &["helper".to_owned()],
        )
        .unwrap_err();
        assert!(refused.contains("mcp = [\"github\"]"), "{refused}");
        assert!(refused.contains("spawnable = [\"ops\"]"), "{refused}");
        assert!(!refused.contains("\"helper\""), "{refused}");
        assert!(refused.contains("client_mcp = true"), "{refused}");
        assert!(
            refused.contains("mcp_sampling = allow (the config's: ask)"),
            "{refused}"
        );
    }

    #[test]
    fn what_a_file_leaves_out_is_the_users_and_limits_only_go_down() {
        let config = config();
        let mut agent = config.default_agent().clone();
        agent.limits.memory_mb = 4096;
        agent.limits.processes = 10;
        agent.budget.max_turn_model_calls = Some(50);
        agent.budget.max_turn_tokens = Some(1000);
        let kept = kept(&config, &file("helper"), agent, false, &[]).unwrap();
        assert_eq!(kept.limits.memory_mb, 512);
        assert_eq!(kept.limits.processes, 10);
        assert_eq!(kept.budget.max_turn_model_calls, Some(5));
        assert_eq!(kept.budget.max_turn_tokens, Some(1000));
    }

    #[test]
    fn a_trusted_directory_is_matched_as_written_or_resolved() {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path().join("repo");
        std::fs::create_dir_all(repo.join(".agents/agents")).unwrap();
        let link = temp.path().join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();
        let mut config = config();
        config.trust_repository_agents = vec![repo.clone()];
        assert!(trusted(&config, &repo.join(".agents/agents/x.md")));
        assert!(trusted(&config, &link.join(".agents/agents")));
        assert!(!trusted(&config, &temp.path().join("other/x.md")));
        config.trust_repository_agents.clear();
        assert!(!trusted(&config, &repo.join(".agents/agents/x.md")));
    }
}
