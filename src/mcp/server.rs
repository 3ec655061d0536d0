//! One configured server: started on first use, shared by every turn that uses it, started
//! again with growing back-off after it exits or fails. While it is down its tools answer an
//! error at once, so no turn waits on it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::Tool;

use super::connect::ProcessRecorder;
use super::connect::{Launch, Opened, open};
use super::handler::Handler;
use super::names;
use super::status::{ServerSource, ServerState, ServerStatus};
use super::tool::McpTool;
use crate::config::McpServerConfig;

/// The first wait before a failed server is started again; it doubles up to [`MAX_BACK_OFF`].
const FIRST_BACK_OFF: Duration = Duration::from_secs(1);
const MAX_BACK_OFF: Duration = Duration::from_secs(60);
/// The longest a start (spawn or connect, handshake, first tool list) may take. Not the
/// server's `timeout_s`, which bounds calls: a short call limit must not fail a slow start
/// (`npx` fetching a package, a busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// A server that ran at least this long before it ended starts again at once; one that ended
/// sooner counts as failing, so a server that crashes as it starts is not started in a loop.
const STABLE_RUN: Duration = Duration::from_secs(30);

/// A tool as the server names it and as the model sees it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub server_name: String,
    pub tool: McpTool,
}

/// A live connection and the tools it offers.
pub struct Connection {
    pub opened: Opened,
    pub handler: Handler,
    pub tools: std::sync::Mutex<Vec<ToolEntry>>,
    started: Instant,
}

impl Connection {
    pub fn is_closed(&self) -> bool {
        self.opened.service.is_closed()
    }
}

pub struct Server {
    pub name: String,
    pub config: McpServerConfig,
    launch: Launch,
    recorder: Option<ProcessRecorder>,
    /// Held while the server starts, so concurrent first uses start it once.
    slot: tokio::sync::Mutex<Option<Arc<Connection>>>,
    status: std::sync::Mutex<Tracked>,
    /// Cancelled at the service's shutdown: no server is started again after it.
    stopping: tokio_util::sync::CancellationToken,
}

struct Tracked {
    state: ServerState,
    last_error: Option<String>,
    restarts: u32,
    /// Failures in a row: the back-off grows with them.
    failures: u32,
    retry_at: Option<Instant>,
    started_once: bool,
    tools: Vec<String>,
    /// A watcher starts it again by itself once its back-off is over (a child that exited);
    /// otherwise the next use does.
    restarting: bool,
}

impl Server {
    /// `stopping` is the hub's: cancelled at the service's shutdown.
    pub fn new(
        name: String,
        config: McpServerConfig,
        launch: Launch,
        recorder: Option<ProcessRecorder>,
        stopping: &tokio_util::sync::CancellationToken,
    ) -> Server {
        Server {
            name,
            config,
            launch,
            recorder,
            slot: tokio::sync::Mutex::new(None),
            stopping: stopping.child_token(),
            status: std::sync::Mutex::new(Tracked {
                state: ServerState::NotStarted,
                last_error: None,
                restarts: 0,
                failures: 0,
                retry_at: None,
                started_once: false,
                tools: Vec::new(),
                restarting: false,
            }),
        }
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn status(&self, source: ServerSource) -> ServerStatus {
        let tracked = self.tracked();
        ServerStatus {
            name: self.name.clone(),
            source,
            http: matches!(
                self.config.transport,
                crate::config::McpTransport::Http { .. }
            ),
            state: tracked.state,
            tools: tracked.tools.clone(),
            last_error: tracked.last_error.clone(),
            restarts: tracked.restarts,
        }
    }

    pub fn state(&self) -> ServerState {
        self.tracked().state
    }

    pub fn last_error(&self) -> Option<String> {
        self.tracked().last_error.clone()
    }

    /// The live connection, starting the server if it is not running and its back-off is
    /// over. The error says why there is none.
    pub async fn connection(self: &Arc<Self>) -> Result<Arc<Connection>, String> {
        if self.stopping.is_cancelled() {
            return Err(format!("the MCP server `{}` was stopped", self.name));
        }
        let mut slot = self.slot.lock().await;
        // Stopped while this call waited for the slot: no start after a stop.
        if self.stopping.is_cancelled() {
            return Err(format!("the MCP server `{}` was stopped", self.name));
        }
        if let Some(connection) = slot.as_ref() {
            if !connection.is_closed() {
                let connection = connection.clone();
                drop(slot);
                self.refresh_tools(&connection).await;
                return Ok(connection);
            }
            let ended = slot.take().expect("checked above");
            self.ended(&ended, "the server exited".to_owned());
        }
        {
            let tracked = self.tracked();
            if let Some(at) = tracked.retry_at
                && at > Instant::now()
            {
                let wait = at.saturating_duration_since(Instant::now()).as_secs() + 1;
                let again = match tracked.restarting {
                    true => format!("it is started again in {wait} s"),
                    false => format!("its next use after {wait} s starts it again"),
                };
                return Err(format!(
                    "the MCP server `{}` is not running ({}); {again}",
                    self.name,
                    tracked.last_error.as_deref().unwrap_or("it failed"),
                ));
            }
        }
        self.set_state(ServerState::Starting);
        // A stop does not wait out a start (up to `START_TIMEOUT`): the start is dropped, and
        // with it the child's process group.
        let started = tokio::select! {
            started = self.start() => started,
            () = self.stopping.cancelled() => Err("it was stopped while starting".to_owned()),
        };
        match started {
            Ok(connection) => {
                let mut tracked = self.tracked();
                if tracked.started_once {
                    tracked.restarts += 1;
                }
                tracked.started_once = true;
                tracked.state = ServerState::Running;
                tracked.retry_at = None;
                tracked.tools = tool_names(&lock(&connection.tools));
                drop(tracked);
                *slot = Some(connection.clone());
                self.watch_exit(&connection);
                Ok(connection)
            }
            Err(error) => {
                self.failed(error.clone());
                Err(format!(
                    "the MCP server `{}` could not be started: {error}",
                    self.name
                ))
            }
        }
    }

    /// Marks a running server's end: a failure, forgiven if it had run long enough.
    fn ended(&self, connection: &Connection, error: String) {
        if connection.started.elapsed() >= STABLE_RUN {
            self.tracked().failures = 0;
        }
        self.failed(error);
    }

    /// Marks the server failed (it exited or could not start), with its next start time.
    pub fn failed(&self, error: String) {
        tracing::warn!(mcp_server = %self.name, %error, "MCP server failed");
        let mut tracked = self.tracked();
        // The first failure is started again at once; one that keeps failing (or ending
        // soon after its start) waits longer each time.
        let back_off = match tracked.failures {
            0 => Duration::ZERO,
            failures => FIRST_BACK_OFF
                .saturating_mul(1 << (failures - 1).min(6))
                .min(MAX_BACK_OFF),
        };
        tracked.failures += 1;
        tracked.state = ServerState::Failed;
        tracked.last_error = Some(error);
        tracked.retry_at = Some(Instant::now() + back_off);
    }

    /// Drops a connection found dead (by a call, or its exit), so it is started again.
    pub async fn lost(&self, connection: &Arc<Connection>, error: String) {
        let mut slot = self.slot.lock().await;
        if slot
            .as_ref()
            .is_some_and(|live| Arc::ptr_eq(live, connection))
        {
            *slot = None;
            self.ended(connection, error);
        }
    }

    /// When a child server exits by itself, it is started again after its back-off (and again
    /// while starting fails), so it is back before the next call needs it.
    fn watch_exit(self: &Arc<Self>, connection: &Arc<Connection>) {
        let server = self.clone();
        let exited = connection.opened.exited.clone();
        let watched = Arc::downgrade(connection);
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = server.stopping.cancelled() => return,
                () = exited.cancelled() => {}
            }
            if let Some(connection) = watched.upgrade() {
                server
                    .lost(&connection, "the server exited".to_owned())
                    .await;
            }
            server.tracked().restarting = true;
            let _restarting = Restarting(&server);
            loop {
                let wait = server.tracked().retry_at.map_or(Duration::ZERO, |at| {
                    at.saturating_duration_since(Instant::now())
                });
                tokio::select! {
                    biased;
                    () = server.stopping.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                let running = server.slot.lock().await.is_some();
                // Started by a call meanwhile, or now: either way it has its own watcher.
                if running || server.connection().await.is_ok() {
                    return;
                }
            }
        });
    }

    fn set_state(&self, state: ServerState) {
        self.tracked().state = state;
    }

    async fn start(&self) -> Result<Arc<Connection>, String> {
        let handler = Handler::new(&self.name);
        let opened = tokio::time::timeout(
            START_TIMEOUT,
            open(
                &self.name,
                &self.config,
                &self.launch,
                handler.clone(),
                self.recorder.as_ref(),
            ),
        )
        .await
        .map_err(|_| {
            format!(
                "no answer to the handshake within {} s",
                START_TIMEOUT.as_secs()
            )
        })??;
        let tools = tokio::time::timeout(START_TIMEOUT, opened.service.list_all_tools())
            .await
            .map_err(|_| "no answer to tools/list".to_owned())?
            .map_err(|error| format!("tools/list failed: {error}"))?;
        tracing::info!(mcp_server = %self.name, tools = tools.len(), "MCP server started");
        Ok(Arc::new(Connection {
            tools: std::sync::Mutex::new(self.entries(tools)),
            opened,
            handler,
            started: Instant::now(),
        }))
    }

    /// Lists the tools again after the server said they changed.
    async fn refresh_tools(&self, connection: &Connection) {
        if !connection
            .handler
            .tools_changed
            .swap(false, Ordering::SeqCst)
        {
            return;
        }
        match tokio::time::timeout(
            self.config.timeout,
            connection.opened.service.list_all_tools(),
        )
        .await
        {
            Ok(Ok(tools)) => {
                let entries = self.entries(tools);
                self.tracked().tools = tool_names(&entries);
                *lock(&connection.tools) = entries;
            }
            Ok(Err(error)) => {
                tracing::warn!(mcp_server = %self.name, %error, "listing the changed tools failed");
            }
            Err(_) => {
                tracing::warn!(mcp_server = %self.name, "listing the changed tools timed out")
            }
        }
    }

    /// The server's tools as the model sees them; each change to fit the providers is logged.
    fn entries(&self, tools: Vec<Tool>) -> Vec<ToolEntry> {
        tools
            .into_iter()
            .map(|tool| {
                let name = names::model_name(&self.name, &tool.name);
                if name != format!("{}{}__{}", names::PREFIX, self.name, tool.name) {
                    tracing::info!(mcp_server = %self.name, tool = %tool.name, model_name = %name, "MCP tool renamed to fit the providers' rules for tool names (64 characters of a-z, A-Z, 0-9, _ and -)");
                }
                let (description, cut) =
                    names::description(&self.name, tool.description.as_deref());
                if cut {
                    tracing::info!(mcp_server = %self.name, tool = %tool.name, "MCP tool description cut to {} characters", names::MAX_DESCRIPTION);
                }
                let (schema, replaced) = names::schema(&tool.input_schema);
                if replaced {
                    tracing::info!(mcp_server = %self.name, tool = %tool.name, "MCP tool input schema over {} bytes: the model gets an open object schema (the server still checks the arguments)", names::MAX_SCHEMA_BYTES);
                }
                ToolEntry {
                    server_name: tool.name.to_string(),
                    tool: McpTool {
                        name,
                        description,
                        parameters: schema,
                    },
                }
            })
            .collect()
    }

    /// Ends the server (its process group is killed with it).
    pub async fn stop(&self) {
        self.stopping.cancel();
        let taken = self.slot.lock().await.take();
        if let Some(connection) = taken {
            connection.opened.service.cancellation_token().cancel();
            self.set_state(ServerState::Stopped);
        }
    }
}

/// Clears `restarting` when the watcher that starts a server again ends, however it ends.
struct Restarting<'a>(&'a Server);

impl Drop for Restarting<'_> {
    fn drop(&mut self) {
        self.0.tracked().restarting = false;
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tool_names(entries: &[ToolEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| entry.tool.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::McpTransport;

    #[tokio::test]
    async fn a_server_that_keeps_failing_waits_longer_before_each_start() {
        let server = Arc::new(Server::new(
            "broken".to_owned(),
            McpServerConfig {
                transport: McpTransport::Stdio {
                    command: "/nonexistent/mcp-server".to_owned(),
                    args: Vec::new(),
                    env: BTreeMap::new(),
                    cwd: None,
                },
                timeout: Duration::from_secs(5),
                expand_variables: true,
                unsandboxed: true,
            },
            Launch::default(),
            None,
            &tokio_util::sync::CancellationToken::new(),
        ));
        assert_eq!(
            server.status(ServerSource::Config).state,
            ServerState::NotStarted
        );
        // The first failure is tried again at once; the second waits a second.
        for _ in 0..2 {
            let error = server.connection().await.err().unwrap();
            assert!(
                error.starts_with("the MCP server `broken` could not be started: cannot start"),
                "{error}"
            );
        }
        let error = server.connection().await.err().unwrap();
        // Nothing starts it by itself: the next use after the back-off does.
        assert!(
            error.ends_with("its next use after 1 s starts it again"),
            "{error}"
        );
        let status = server.status(ServerSource::Config);
        assert_eq!(status.state, ServerState::Failed);
        assert_eq!(status.restarts, 0);
        assert!(
            status
                .last_error
                .is_some_and(|error| error.contains("/nonexistent/mcp-server")),
        );
    }
}
