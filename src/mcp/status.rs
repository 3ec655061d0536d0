//! Where a server was named and how it is doing, as `GET /api/mcp` shows it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Configured, not used yet (servers start lazily).
    NotStarted,
    Starting,
    Running,
    /// It exited or could not start; it is started again (after a back-off if it keeps failing).
    Failed,
    /// Ended by the service's shutdown.
    Stopped,
}

/// Where a server was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerSource {
    /// `[mcp.<name>]` in the config file.
    Config,
    /// A client's create body (shared by the conversations that name the same server).
    Conversation,
}

/// One server as `GET /api/mcp` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub source: ServerSource,
    pub http: bool,
    pub state: ServerState,
    /// Its tools as the model sees them, when last listed.
    pub tools: Vec<String>,
    pub last_error: Option<String>,
    /// How many times it was started again after it first ran.
    pub restarts: u32,
}
