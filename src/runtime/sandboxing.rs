//! What an agent's tools may do in a conversation: the sandbox policy built from its config,
//! and for a sub-agent never more than any agent above it allows. A child gets the stricter of
//! the two sandboxes, the network only if both allow it, the lower limits, and its ancestors'
//! `deny` and `ask` settings added to its own.

use std::sync::Arc;

use crate::config::AgentConfig;
use crate::permissions::Permissions;
use crate::sandbox::{Protected, SandboxPolicy};
use crate::store::state::ConversationState;

/// `agent`'s own policy: its sandbox, network, limits and `env` (`${VAR}` expanded from the
/// service's environment now; a variable that is not set is left out, with a warning).
pub fn agent_policy(agent: &AgentConfig, protected: &Arc<Protected>) -> SandboxPolicy {
    let env: Vec<(String, String)> = agent
        .env
        .iter()
        .filter_map(|(name, value)| match crate::mcp::expand::expand(value) {
            Ok(value) => Some((name.clone(), value)),
            Err(error) => {
                tracing::warn!(agent = %agent.permissions.agent, variable = %name, %error, "an agent's env value is left out");
                None
            }
        })
        .collect();
    SandboxPolicy {
        mode: agent.sandbox,
        network: agent.network,
        escalated: false,
        limits: agent.limits,
        env: env.into(),
        protected: protected.clone(),
    }
}

/// The policy and permissions of `session_id`'s tools: its agent's, tightened by every agent
/// above it in the session tree. `None` when the session or an agent is missing.
pub fn session_rules(
    agents: &crate::agents::Agents,
    state: &ConversationState,
    session_id: &str,
    protected: &Arc<Protected>,
) -> Option<(SandboxPolicy, Permissions)> {
    let session = state.session(session_id)?;
    let agent = agents.get(&session.agent)?;
    let mut policy = agent_policy(agent, protected);
    let mut permissions = agent.permissions.clone();
    let mut parent_id = session.parent_id.clone();
    // The tree is as deep as `subagents.max_depth`; the bound only guards a corrupt file.
    for _ in 0..64 {
        let Some(id) = parent_id else { break };
        let parent = state.session(&id)?;
        let parent_agent = agents.get(&parent.agent)?;
        policy = agent_policy(parent_agent, protected).stricter(&policy);
        permissions.inherit(&parent_agent.permissions);
        parent_id = parent.parent_id.clone();
    }
    Some((policy, permissions))
}
