//! What a tool call needs to start and follow background processes.

use std::sync::Arc;
use std::time::Duration;

use super::Processes;

/// Who starts and reads background processes: one conversation's agent, in one call.
#[derive(Debug, Clone)]
pub struct BackgroundScope {
    pub processes: Arc<Processes>,
    pub conversation_id: String,
    pub session_id: String,
    /// The call being run (set per call).
    pub call_id: String,
    pub max_per_conversation: usize,
    pub max_run: Duration,
    /// How long a start waits for the first output before it answers.
    pub first_wait: Duration,
}
