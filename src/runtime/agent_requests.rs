//! What a turn asks of its actor when the model calls a collaboration tool, and the actor's
//! answers. The session tree belongs to the actor (`actor/subagents.rs`); the tools' arguments
//! are checked by the turn (`collab.rs`) before they become one of these requests.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::domain::MessageMode;

/// The longest `wait_agents` waits, and how long it waits when no timeout is given.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// How much of the parent's completed history a new sub-agent starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeHistory {
    None,
    LastTurn,
    All,
}

/// One `spawn_agent` call, with its arguments checked.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub agent: String,
    pub task: String,
    pub model: Option<String>,
    pub include_history: IncludeHistory,
}

/// A collaboration tool call, with its arguments checked.
#[derive(Debug)]
pub enum AgentsRequest {
    /// One or more `spawn_agent` calls of one answer, started together.
    Spawn(Vec<SpawnRequest>),
    Send {
        session_id: String,
        text: String,
        mode: MessageMode,
    },
    Interrupt {
        session_id: String,
    },
    List,
    /// The status of the named sub-agents (for `wait_agents`).
    Status {
        session_ids: Vec<String>,
    },
}

/// The actor's answer to an `AgentsRequest`.
#[derive(Debug)]
pub enum AgentsReply {
    /// The tool's result, as JSON for the model.
    Done(Value),
    /// Each `spawn_agent` call's result, in order.
    Spawned(Vec<Result<Value, String>>),
    /// The named sub-agents as they are now, whether none of them runs, and a watch that
    /// changes whenever any session's status does.
    Status {
        agents: Vec<Value>,
        all_idle: bool,
        changes: watch::Receiver<u64>,
    },
}
