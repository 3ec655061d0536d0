//! The runtime's tunables that are not user configuration.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Tunables that are not user configuration.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// A conversation with no activity, turn, waiting message or subscriber for this long is
    /// unloaded from memory.
    pub idle_unload: Duration,
    /// The working directory of conversations created without one.
    pub default_cwd: PathBuf,
    /// Where the shell tool records running commands (see `tools::group_records`).
    pub process_records: Option<crate::tools::group_records::GroupRecords>,
    /// Conversations held in memory at most; past it the least recently used idle one
    /// leaves, and when none can, the request is refused, to be retried (see `limits::caps`).
    pub max_live_conversations: usize,
    /// Cluster mode: this instance's leases and peers (`None`: embedded, one process).
    pub cluster: Option<crate::cluster::Cluster>,
    /// The notification webhooks' outbox, opened by the service at start from the data
    /// directory (`None`: one kept in memory only).
    pub outbox: Option<Arc<crate::hooks::Outbox>>,
}

impl Default for RuntimeSettings {
    fn default() -> RuntimeSettings {
        RuntimeSettings {
            idle_unload: Duration::from_secs(60),
            default_cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            process_records: None,
            max_live_conversations: 1000,
            cluster: None,
            outbox: None,
        }
    }
}
