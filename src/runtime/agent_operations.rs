//! `Runtime::agents_for` and `Runtime::list_agents`: the agents a working directory sees (the
//! config's, and the repository's agent files merged with them), as a conversation there
//! would.

use std::sync::Arc;

use super::{Runtime, RuntimeError};
use crate::agents::Agents;
use crate::api::responses::{AgentInfo, AgentList};

impl Runtime {
    /// The agents of `cwd`, read on the blocking pool (it walks folders on disk).
    pub(super) async fn agents_for(&self, cwd: &str) -> Result<Arc<Agents>, RuntimeError> {
        let config = self.shared.config.clone();
        let dir = std::path::PathBuf::from(cwd);
        tokio::task::spawn_blocking(move || Arc::new(Agents::discover(config, &dir)))
            .await
            .map_err(|error| RuntimeError::Internal(format!("reading the agents failed: {error}")))
    }

    /// `GET /api/agents`: the agents of `cwd` (default: the service's working directory),
    /// where each came from, and the agent files skipped.
    pub async fn list_agents(&self, cwd: Option<&str>) -> Result<AgentList, RuntimeError> {
        let cwd = self.cwd_or_default(cwd)?;
        let agents = self.agents_for(&cwd).await?;
        Ok(AgentList {
            default: agents.default_name().to_owned(),
            agents: agents
                .list()
                .into_iter()
                .map(|listed| AgentInfo {
                    name: listed.name.to_owned(),
                    description: listed.agent.description.clone(),
                    model: listed.agent.model.clone(),
                    compact_model: listed.agent.compaction_model().to_owned(),
                    source: listed.source,
                    path: listed.path.map(|path| path.display().to_string()),
                })
                .collect(),
            cwd,
            problems: agents.problems.clone(),
        })
    }
}
