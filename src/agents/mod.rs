//! The agents a working directory sees: the config file's `[agents.*]` tables, and the
//! repository's agent files (`.agents/agents/NAME.md`, read by `repo::agents`).
//!
//! A file and a config table of the same name merge key by key, the config's winning, so a
//! user can tighten what a repository ships. A repository's agent never loosens the user's
//! safety settings (`safety.rs`): unless `trust_repository_agents` lists the repository, one
//! that would is skipped with the reason, and the rest of what the user set (asks, denies,
//! limits, spending) holds on it as on a sub-agent.
//!
//! Read when a conversation is created, when it loads and when each turn starts, so an edited
//! file counts from the next turn.

mod merge;
mod safety;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{AgentConfig, Config};
use crate::repo::Problem;

/// Where an agent came from, as clients are shown it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The agent the service adds when the config file defines none.
    Builtin,
    /// A table of the config file.
    Config,
    /// A repository's agent file.
    Repository,
    /// A repository's agent file with the config's table of the same name over it.
    RepositoryAndConfig,
}

/// A repository's agent, merged and checked.
#[derive(Debug, Clone)]
struct FileAgent {
    agent: AgentConfig,
    path: PathBuf,
    source: Source,
}

/// The agents one working directory sees, by name.
#[derive(Debug, Clone)]
pub struct Agents {
    config: Arc<Config>,
    files: BTreeMap<String, FileAgent>,
    /// Agent files skipped, with the rule each breaks.
    pub problems: Vec<Problem>,
}

/// One agent as listed.
pub struct Listed<'a> {
    pub name: &'a str,
    pub agent: &'a AgentConfig,
    pub source: Source,
    /// Its file, for one a repository ships.
    pub path: Option<&'a Path>,
}

impl Agents {
    /// The config's agents alone.
    pub fn configured(config: Arc<Config>) -> Agents {
        Agents {
            config,
            files: BTreeMap::new(),
            problems: Vec::new(),
        }
    }

    /// The config's agents and the agent files `cwd` sees. Reads files: call it off the
    /// async threads, or where a few small reads do not matter.
    pub fn discover(config: Arc<Config>, cwd: &Path) -> Agents {
        let (found, mut problems) = crate::repo::agents::discover(cwd);
        let mut names: Vec<String> = config.agents.keys().cloned().collect();
        names.extend(found.iter().map(|file| file.name.clone()));
        names.sort_unstable();
        names.dedup();
        let repository_names: Vec<String> = found.iter().map(|file| file.name.clone()).collect();
        let mut files = BTreeMap::new();
        for file in found {
            let trusted = safety::trusted(&config, &file.path);
            match merge::agent(&config, &file, &names)
                .and_then(|agent| safety::kept(&config, &file, agent, trusted, &repository_names))
            {
                Ok(agent) => {
                    let source = if config.agent_tables.contains_key(&file.name) {
                        Source::RepositoryAndConfig
                    } else {
                        Source::Repository
                    };
                    files.insert(
                        file.name,
                        FileAgent {
                            agent,
                            path: file.path,
                            source,
                        },
                    );
                }
                Err(problem) => {
                    tracing::warn!(path = %file.path.display(), %problem, "an agent file is skipped");
                    problems.push(Problem {
                        path: file.path,
                        problem,
                    });
                }
            }
        }
        Agents {
            config,
            files,
            problems,
        }
    }

    pub fn get(&self, name: &str) -> Option<&AgentConfig> {
        match self.files.get(name) {
            Some(file) => Some(&file.agent),
            None => self.config.agent(name),
        }
    }

    /// Why there is no agent `name` here, in words: the reason its file was skipped, if one
    /// was.
    pub fn unavailable(&self, name: &str) -> String {
        let file = format!("{name}.md");
        let skipped = self.problems.iter().find(|problem| {
            problem
                .path
                .file_name()
                .is_some_and(|found| *found == *file)
        });
        match skipped {
            Some(skipped) => format!(
                "agent `{name}` is not available: its file {} was skipped: {}",
                skipped.path.display(),
                skipped.problem
            ),
            None => format!(
                "agent `{name}` is neither in the config nor an agent file of the repository \
                 (agents: {})",
                self.list()
                    .iter()
                    .map(|listed| listed.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The agent new conversations use when none is named.
    pub fn default_name(&self) -> &str {
        &self.config.default_agent
    }

    /// Every agent, by name.
    pub fn list(&self) -> Vec<Listed<'_>> {
        let mut listed: BTreeMap<&str, Listed<'_>> = self
            .config
            .agents
            .iter()
            .map(|(name, agent)| {
                let source = if self.config.agent_tables.contains_key(name) {
                    Source::Config
                } else {
                    Source::Builtin
                };
                let listed = Listed {
                    name,
                    agent,
                    source,
                    path: None,
                };
                (name.as_str(), listed)
            })
            .collect();
        for (name, file) in &self.files {
            listed.insert(
                name,
                Listed {
                    name,
                    agent: &file.agent,
                    source: file.source,
                    path: Some(&file.path),
                },
            );
        }
        listed.into_values().collect()
    }
}
