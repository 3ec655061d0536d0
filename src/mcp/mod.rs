//! Tools from Model Context Protocol servers, through the official SDK (`rmcp`): the servers
//! of `[mcp.*]`, started when an agent that uses them first runs and shared by every
//! conversation; their tools offered to the model as `mcp__<server>__<tool>`; calls made with
//! progress, cancellation and a timeout. It knows nothing of turns or the API: the tools module
//! calls it, the runtime owns the hub.

mod call;
mod connect;
mod content;
pub mod expand;
mod handler;
pub mod names;
mod server;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::config::{McpServerConfig, McpTransport};
use server::Server;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`, within the providers' limits.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    Completed,
    /// The server reported an error, did not answer in time, or is down.
    Failed,
    Interrupted,
}

/// What a call produced, as text for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    pub text: String,
    pub status: CallStatus,
}

impl CallOutcome {
    fn failed(text: impl Into<String>) -> CallOutcome {
        CallOutcome {
            text: text.into(),
            status: CallStatus::Failed,
        }
    }
}

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

/// One server as `GET /api/mcp` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// Its tools as the model sees them, when last listed.
    pub tools: Vec<String>,
    pub last_error: Option<String>,
    /// How many times it was started again after it first ran.
    pub restarts: u32,
}

/// Kept while a server's child process runs; dropping it removes the record.
pub type ProcessRecord = Box<dyn Send + Sync>;
/// Records a started server's process group (its leader's pid and a description), so that a
/// service restarted after a crash kills it (the runtime passes the shell tool's records).
pub type ProcessRecorder = Arc<dyn Fn(libc::pid_t, &str) -> Option<ProcessRecord> + Send + Sync>;

/// Every configured server, each started on first use.
pub struct McpHub {
    servers: BTreeMap<String, Arc<Server>>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What one turn may use: the hub and the servers its agent names.
#[derive(Debug, Clone)]
pub struct McpAccess {
    pub hub: Arc<McpHub>,
    pub servers: Vec<String>,
}

impl McpHub {
    pub fn new(
        configs: &BTreeMap<String, McpServerConfig>,
        recorder: Option<ProcessRecorder>,
    ) -> McpHub {
        let servers = configs
            .iter()
            .map(|(name, config)| {
                let server = Server::new(name.clone(), config.clone(), recorder.clone());
                (name.clone(), Arc::new(server))
            })
            .collect();
        McpHub { servers }
    }

    /// The tools of the named servers, starting those not running. A server that cannot
    /// start offers nothing this time (its error is in its status); the others are not held up.
    pub async fn tools(&self, servers: &[String]) -> Vec<McpTool> {
        let lists = futures::future::join_all(servers.iter().map(|name| async move {
            let server = self.servers.get(name)?;
            let connection = server.connection().await.ok()?;
            let tools = connection
                .tools
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .map(|entry| entry.tool.clone())
                .collect::<Vec<_>>();
            Some(tools)
        }))
        .await;
        lists.into_iter().flatten().flatten().collect()
    }

    /// Calls the tool the model named `name`, if one of `servers` offers it. Progress lines go
    /// to `live`; `cancel` sends the server a cancellation and ends the call at once.
    pub async fn call(
        &self,
        servers: &[String],
        name: &str,
        arguments: &Value,
        live: &UnboundedSender<String>,
        cancel: &CancellationToken,
    ) -> CallOutcome {
        let Some(server) = names::server_of(name)
            .filter(|server| servers.iter().any(|allowed| allowed == server))
            .and_then(|server| self.servers.get(server))
        else {
            return CallOutcome::failed(format!("unknown tool `{name}`"));
        };
        let connection = tokio::select! {
            connection = server.connection() => connection,
            () = cancel.cancelled() => {
                return CallOutcome {
                    text: format!("interrupted before `{name}` started"),
                    status: CallStatus::Interrupted,
                };
            }
        };
        let connection = match connection {
            Ok(connection) => connection,
            Err(error) => return CallOutcome::failed(error),
        };
        let tool = connection
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|entry| entry.tool.name == name)
            .map(|entry| entry.server_name.clone());
        let Some(tool) = tool else {
            return CallOutcome::failed(format!(
                "the MCP server `{}` no longer offers `{name}`",
                server.name
            ));
        };
        call::call(server, &connection, &tool, arguments, live, cancel).await
    }

    /// Every configured server's state, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .values()
            .map(|server| server.status())
            .collect()
    }

    /// Ends every running server (at the service's shutdown).
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers.values().map(|server| server.stop())).await;
    }
}

/// The header values sent to HTTP servers, expanded as they are now: credentials, whether
/// written in the file or read from a variable (registered as secrets, like the variables).
pub fn secret_header_values(configs: &BTreeMap<String, McpServerConfig>) -> Vec<String> {
    configs
        .values()
        .flat_map(|config| match &config.transport {
            McpTransport::Http { headers, .. } => headers.values().collect::<Vec<_>>(),
            McpTransport::Stdio { .. } => Vec::new(),
        })
        .filter_map(|value| expand::expand(value).ok())
        .collect()
}

/// The environment variables whose values go to servers as credentials (in headers and in a
/// child's environment): registered as secrets, so they are never stored or sent back.
pub fn secret_variables(configs: &BTreeMap<String, McpServerConfig>) -> Vec<String> {
    configs
        .values()
        .flat_map(|config| match &config.transport {
            McpTransport::Stdio { env, .. } => env.values().collect::<Vec<_>>(),
            McpTransport::Http { headers, .. } => headers.values().collect(),
        })
        .flat_map(|text| expand::variables(text))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credentials_of_servers_are_known_as_secrets() {
        let config = crate::config::Config::from_toml_str(
            r#"
[mcp.files]
command = "x"
args = ["${NOT_A_SECRET}"]
env = { TOKEN = "${FILES_TOKEN}", LEVEL = "warn" }

[mcp.search]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer literal-credential", X-Key = "${SEARCH_KEY}" }
"#,
            None,
        )
        .unwrap();
        assert_eq!(secret_variables(&config.mcp), ["FILES_TOKEN", "SEARCH_KEY"]);
        // A header whose variable is unset cannot be expanded: only the written one is known.
        assert_eq!(
            secret_header_values(&config.mcp),
            ["Bearer literal-credential"]
        );
    }
}
