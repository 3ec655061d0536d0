//! Tools from Model Context Protocol servers, through the official SDK (`rmcp`): the servers
//! of `[mcp.*]` and those a client names when it creates a conversation, started when an agent
//! that uses them first runs and shared by every conversation that uses the same config; their tools offered to the model as `mcp__<server>__<tool>`; calls made with
//! progress, cancellation and a timeout. A server conversations named runs while one of them
//! is live: the last one's actor, leaving memory, stops it (`McpHub::release`). It knows
//! nothing of turns or the API: the tools module calls it, the runtime owns the hub.

mod asking;
mod call;
mod connect;
mod content;
pub mod expand;
mod handler;
pub mod names;
mod server;
mod status;
mod tool;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::config::{McpServerConfig, McpTransport};
pub use asking::{Answer, CallPeer, Question, SampleRequest, Sampled, check_answer};
pub use connect::{ProcessRecord, ProcessRecorder};
use server::Server;
pub use status::{ServerSource, ServerState, ServerStatus};
pub use tool::{CallOutcome, CallStatus, McpTool};

/// Every server: the configured ones, and those conversations named, each started on first use.
pub struct McpHub {
    configured: BTreeMap<String, McpServerConfig>,
    /// Running (or started once) servers, one per name, config, sandbox and working directory:
    /// turns whose agents have the same sandbox share one. Each is held by the live
    /// conversations that used it.
    instances: std::sync::Mutex<HashMap<InstanceKey, Named>>,
    recorder: Option<ProcessRecorder>,
    /// Cancelled at the service's shutdown: every server ends, and none starts after it.
    stopping: CancellationToken,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("configured", &self.configured.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What makes two uses of a server the same process.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InstanceKey {
    name: String,
    config: McpServerConfig,
    source: ServerSource,
    /// The sandbox it runs in (`None`: unsandboxed, as the config file allows, or HTTP).
    sandbox: Option<SandboxKey>,
    /// Where a command server runs.
    cwd: Option<std::path::PathBuf>,
}

/// A sandbox policy as far as it decides a server's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct SandboxKey {
    mode: crate::config::SandboxMode,
    network: bool,
    limits: crate::config::ProcessLimits,
}

/// A server instance, and the live conversations that used it: when the last of them leaves
/// memory, the server stops (a child process per conversation would otherwise outlive every
/// conversation that needed it).
struct Named {
    server: Arc<Server>,
    users: HashSet<Holder>,
}

/// A live conversation as a user of servers: its actor, by the conversation's id and the
/// actor's generation (an actor that left memory releases its own holds, never those of the
/// one loaded after it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    pub conversation_id: String,
    pub generation: u64,
}

/// What one turn may use: the configured servers its agent names, and the conversation's own.
#[derive(Debug, Clone)]
pub struct McpAccess {
    pub hub: Arc<McpHub>,
    /// The conversation the turn is in: it holds the servers it uses until it leaves memory
    /// (`McpHub::release`).
    pub holder: Holder,
    pub servers: Vec<String>,
    /// The servers the conversation was created with; one of them shadows a configured server
    /// of the same name.
    pub own: Arc<BTreeMap<String, McpServerConfig>>,
    /// The sandbox of the agent's tool processes: command servers run in it too (with their
    /// own environment), unless the config file sets `sandbox = "off"` for the server.
    pub sandbox: crate::sandbox::SandboxPolicy,
    /// The conversation's working directory: where a command server without a `cwd` runs.
    pub cwd: std::path::PathBuf,
    /// Whether a server may have the agent's model write for it (`sampling/createMessage`).
    pub sampling: crate::config::McpSampling,
    /// How long a turn waits for its servers to start (`tools.mcp_start_wait_ms`).
    pub start_wait: std::time::Duration,
    /// Answers what a server asks during the call this access is for (set per call).
    pub peer: Option<Arc<dyn CallPeer>>,
}

impl std::fmt::Debug for dyn CallPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallPeer")
    }
}

impl McpAccess {
    /// Whether the turn has any server to use.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.own.is_empty()
    }

    /// How `config` starts for this turn. Here rather than in `connect`, which knows nothing
    /// of the hub an access holds.
    fn launch(&self, config: &McpServerConfig) -> connect::Launch {
        let crate::config::McpTransport::Stdio { cwd, .. } = &config.transport else {
            return connect::Launch::default();
        };
        connect::Launch {
            sandbox: (!config.unsandboxed).then(|| crate::sandbox::SandboxPolicy {
                escalated: false,
                env: std::sync::Arc::from([]),
                ..self.sandbox.clone()
            }),
            cwd: cwd.is_none().then(|| self.cwd.clone()),
        }
    }
}

impl McpHub {
    pub fn new(
        configs: &BTreeMap<String, McpServerConfig>,
        recorder: Option<ProcessRecorder>,
    ) -> McpHub {
        McpHub {
            configured: configs.clone(),
            instances: std::sync::Mutex::new(HashMap::new()),
            recorder,
            stopping: CancellationToken::new(),
        }
    }

    /// The server a turn reaches by `name`: the conversation's own, else a configured one its
    /// agent names; started (or shared) for the turn's sandbox and working directory.
    fn server(&self, access: &McpAccess, name: &str) -> Option<Arc<Server>> {
        let (config, source) = match access.own.get(name) {
            Some(config) => (config, ServerSource::Conversation),
            None if access.servers.iter().any(|allowed| allowed == name) => {
                (self.configured.get(name)?, ServerSource::Config)
            }
            None => return None,
        };
        let launch = access.launch(config);
        let key = InstanceKey {
            name: name.to_owned(),
            config: config.clone(),
            source,
            sandbox: launch.sandbox.as_ref().map(|policy| SandboxKey {
                mode: policy.mode,
                network: policy.network,
                limits: policy.limits,
            }),
            cwd: launch.cwd.clone(),
        };
        let mut instances = self
            .instances
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = instances.entry(key).or_insert_with(|| Named {
            server: Arc::new(Server::new(
                name.to_owned(),
                config.clone(),
                launch,
                self.recorder.clone(),
                &self.stopping,
            )),
            users: HashSet::new(),
        });
        if !entry.users.contains(&access.holder) {
            entry.users.insert(access.holder.clone());
        }
        Some(entry.server.clone())
    }

    /// Every server a turn may use, by name.
    fn servers_of(&self, access: &McpAccess) -> Vec<Arc<Server>> {
        let mut names: Vec<&String> = access.servers.iter().chain(access.own.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| self.server(access, name))
            .collect()
    }

    /// The tools of a turn's servers, starting those not running, waiting at most `wait` for
    /// them: a server still starting then is left out (it goes on starting, and
    /// [`McpHub::ready_now`] finds it later), and one that cannot start offers nothing (its
    /// error is in its status and in `failed`). No server holds up the others.
    pub async fn tools(&self, access: &McpAccess, wait: std::time::Duration) -> TurnTools {
        let deadline = tokio::time::Instant::now() + wait;
        let servers = self.servers_of(access);
        let found = futures::future::join_all(servers.into_iter().map(|server| async move {
            // Started on a task of its own, so the start goes on past the wait.
            let start = tokio::spawn({
                let server = server.clone();
                async move { server.connection().await }
            });
            match tokio::time::timeout_at(deadline, start).await {
                Ok(Ok(Ok(connection))) => Found::Ready(listed(&connection)),
                Ok(Ok(Err(error))) => Found::Failed(server.name.clone(), error),
                Ok(Err(panicked)) => Found::Failed(server.name.clone(), panicked.to_string()),
                Err(_) => Found::Starting(server.name.clone()),
            }
        }))
        .await;
        TurnTools::from(found)
    }

    /// Which of the servers `names` (still starting when last asked) are ready now, with their
    /// tools; none is waited for.
    pub async fn ready_now(&self, access: &McpAccess, names: &[String]) -> TurnTools {
        let mut found = Vec::new();
        for name in names {
            let Some(server) = self.server(access, name) else {
                continue;
            };
            found.push(match server.state() {
                ServerState::Running => match server.connection().await {
                    Ok(connection) => Found::Ready(listed(&connection)),
                    Err(error) => Found::Failed(name.clone(), error),
                },
                ServerState::Failed | ServerState::Stopped => Found::Failed(
                    name.clone(),
                    server
                        .last_error()
                        .unwrap_or_else(|| "it stopped".to_owned()),
                ),
                ServerState::NotStarted | ServerState::Starting => Found::Starting(name.clone()),
            });
        }
        TurnTools::from(found)
    }

    /// Calls the tool the model named `name`, if one of the turn's servers offers it. Progress
    /// lines go to `live`; `cancel` sends the server a cancellation and ends the call at once.
    pub async fn call(
        &self,
        access: &McpAccess,
        name: &str,
        arguments: &Value,
        live: &UnboundedSender<String>,
        cancel: &CancellationToken,
    ) -> CallOutcome {
        let Some(server) = names::server_of(name).and_then(|server| self.server(access, server))
        else {
            return CallOutcome::failed(format!("unknown tool `{name}`"));
        };
        let connection = tokio::select! {
            connection = server.connection() => connection,
            () = cancel.cancelled() => {
                return CallOutcome::interrupted(format!("interrupted before `{name}` started"));
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
        let span = crate::telemetry::spans::mcp_call(&server.name, &tool);
        tracing::Instrument::instrument(
            call::call(
                &server,
                &connection,
                &tool,
                arguments,
                live,
                &access.peer,
                cancel,
            ),
            span,
        )
        .await
    }

    /// Every server instance, with where it was named, as they are now.
    fn instances(&self) -> Vec<(ServerSource, Arc<Server>)> {
        self.instances
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(key, named)| (key.source, named.server.clone()))
            .collect()
    }

    /// A conversation left memory (unloaded, deleted, the service stopping): the servers it
    /// named that no other live conversation uses stop. The next turn that names one starts
    /// it again.
    pub async fn release(&self, holder: &Holder) {
        let unused: Vec<Arc<Server>> = {
            let mut instances = self
                .instances
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut unused = Vec::new();
            instances.retain(|_, entry| {
                if !entry.users.remove(holder) || !entry.users.is_empty() {
                    return true;
                }
                unused.push(entry.server.clone());
                false
            });
            unused
        };
        for server in unused {
            tracing::debug!(server = %server.name, conversation = %holder.conversation_id, "stopping an MCP server no live conversation uses");
            server.stop().await;
        }
    }

    /// Every server's state: the configured ones by name (each instance of one, or its
    /// configuration when it has not run), then those conversations named.
    pub fn status(&self) -> Vec<ServerStatus> {
        let running: Vec<ServerStatus> = self
            .instances()
            .iter()
            .map(|(source, server)| server.status(*source))
            .collect();
        let idle = self
            .configured
            .iter()
            .filter(|(name, _)| {
                !running
                    .iter()
                    .any(|status| status.source == ServerSource::Config && &status.name == *name)
            })
            .map(|(name, config)| ServerStatus {
                name: name.clone(),
                source: ServerSource::Config,
                http: matches!(config.transport, McpTransport::Http { .. }),
                state: ServerState::NotStarted,
                tools: Vec::new(),
                last_error: None,
                restarts: 0,
            });
        let mut statuses: Vec<ServerStatus> = idle.collect();
        statuses.extend(running);
        statuses.sort_by(|a, b| {
            (a.source != ServerSource::Config, &a.name)
                .cmp(&(b.source != ServerSource::Config, &b.name))
        });
        statuses
    }

    /// Ends every running server (at the service's shutdown); none starts after it.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        let instances = self.instances();
        futures::future::join_all(instances.iter().map(|(_, server)| server.stop())).await;
    }
}

/// A turn's servers as it found them: the tools of those ready, and those not.
#[derive(Debug, Default)]
pub struct TurnTools {
    pub tools: Vec<McpTool>,
    /// Still starting: left out of this model call.
    pub starting: Vec<String>,
    /// Could not start, each with why.
    pub failed: Vec<(String, String)>,
}

/// One server as a turn found it.
enum Found {
    Ready(Vec<McpTool>),
    Starting(String),
    Failed(String, String),
}

impl From<Vec<Found>> for TurnTools {
    fn from(found: Vec<Found>) -> TurnTools {
        let mut tools = TurnTools::default();
        for one in found {
            match one {
                Found::Ready(listed) => tools.tools.extend(listed),
                Found::Starting(name) => tools.starting.push(name),
                Found::Failed(name, error) => tools.failed.push((name, error)),
            }
        }
        tools
    }
}

/// A live connection's tools as the model sees them.
fn listed(connection: &server::Connection) -> Vec<McpTool> {
    connection
        .tools
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|entry| entry.tool.clone())
        .collect()
}

/// Registers the credentials of servers a client named (their `env` and `headers` values) as
/// secrets: no tool output or model text shows them from here on.
pub fn register_secrets<'a>(specs: impl IntoIterator<Item = &'a crate::config::McpServerSpec>) {
    let values: Vec<String> = specs
        .into_iter()
        .flat_map(crate::config::McpServerSpec::secret_values)
        .collect();
    if !values.is_empty() {
        crate::redact::register_secrets(values);
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
