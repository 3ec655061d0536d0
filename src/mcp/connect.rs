//! Opening a connection to one server with the SDK: a child process on stdio (in the agent's
//! sandbox unless the config file says otherwise, with an allow-listed environment, in a
//! process group of its own recorded so a crash of the service cannot leave it running) or a
//! streamable HTTP endpoint. `${VAR}` references are expanded here (in the config file's
//! servers; a client's are taken as written).

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::handler::Handler;
use crate::config::{McpServerConfig, McpTransport};

/// How a command server's process starts: in which sandbox and where.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// The agent's sandbox, with the server's own environment; `None`: unsandboxed (the config
    /// file's `sandbox = "off"`), or an HTTP server.
    pub sandbox: Option<crate::sandbox::SandboxPolicy>,
    /// The working directory when the config gives none: the conversation's.
    pub cwd: Option<std::path::PathBuf>,
}

/// How many of a server's last stderr lines are kept for the error of a failed start.
const KEPT_STDERR_LINES: usize = 3;
/// How long a failed start waits for the server's stderr to close (it has usually exited).
const STDERR_WAIT: Duration = Duration::from_secs(1);

/// A live connection's parts that end it: the SDK's service and, for a child process, its group.
pub struct Opened {
    pub service: RunningService<RoleClient, Handler>,
    /// Cancelled when a child server exits (its stderr closes), so it is started again without
    /// waiting for a call to find it gone; never for an HTTP server.
    pub exited: tokio_util::sync::CancellationToken,
    /// Held, not read: dropping it kills the group.
    pub _group: Option<ChildGroup>,
}

/// Kept while a server's child process runs; dropping it removes the record.
pub type ProcessRecord = Box<dyn Send + Sync>;
/// Records a started server's process group (its leader's pid and a description), so that a
/// service restarted after a crash kills it (the runtime passes the shell tool's records).
pub type ProcessRecorder = Arc<dyn Fn(libc::pid_t, &str) -> Option<ProcessRecord> + Send + Sync>;

/// A server's process group: killed whole when dropped (a launcher like `npx` leaves its
/// real server as a grandchild), and its crash record removed.
pub struct ChildGroup {
    pgid: libc::pid_t,
    _record: Option<ProcessRecord>,
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        // SAFETY: killpg only sends a signal; the group is ours (its leader is our child,
        // not yet reaped while the SDK's transport holds it).
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
    }
}

/// Starts the server `name` and completes the MCP handshake.
pub async fn open(
    name: &str,
    config: &McpServerConfig,
    launch: &Launch,
    handler: Handler,
    recorder: Option<&ProcessRecorder>,
) -> Result<Opened, String> {
    let expand = |text: &str| match config.expand_variables {
        true => super::expand::expand(text),
        false => Ok(text.to_owned()),
    };
    match &config.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let program = expand(command)?;
            let arguments = args
                .iter()
                .map(|arg| expand(arg))
                .collect::<Result<Vec<_>, _>>()?;
            let mut environment = Vec::new();
            for (key, value) in env {
                environment.push((key.clone(), expand(value)?));
            }
            let cwd = match (cwd, &launch.cwd) {
                (Some(cwd), _) => std::path::PathBuf::from(expand(cwd)?),
                (None, Some(cwd)) => cwd.clone(),
                (None, None) => std::env::current_dir().unwrap_or_else(|_| "/".into()),
            };
            let policy = match &launch.sandbox {
                Some(sandbox) => crate::sandbox::SandboxPolicy {
                    env: environment.into(),
                    ..sandbox.clone()
                },
                // The config file's `sandbox = "off"`: the allow-listed environment all the same.
                None => crate::sandbox::SandboxPolicy {
                    mode: crate::config::SandboxMode::Off,
                    env: environment.into(),
                    ..crate::sandbox::SandboxPolicy::default()
                },
            };
            let program_line = crate::sandbox::Program::Exec {
                program: &program,
                args: &arguments,
            };
            let mut child = crate::sandbox::command(&policy, &cwd, program_line)?;
            // Its own group, so the whole server (and what it started) ends with it.
            child.process_group(0);
            let (transport, stderr) = TokioChildProcess::builder(child)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| format!("cannot start `{program}`: {error}"))?;
            let group = transport.id().map(|pid| {
                let pgid = pid as libc::pid_t;
                let preview = format!("mcp server {name}: {program} {}", args.join(" "));
                ChildGroup {
                    pgid,
                    _record: recorder.and_then(|record| record(pgid, &preview)),
                }
            });
            let exited = tokio_util::sync::CancellationToken::new();
            // Its last lines on stderr say why a server that ends at once did (a program not
            // found, the sandbox refusing it): they go with a failed handshake's error.
            let last_lines = Arc::new(Mutex::new(VecDeque::new()));
            if let Some(stderr) = stderr {
                let server = name.to_owned();
                let (exited, last_lines) = (exited.clone(), last_lines.clone());
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(mcp_server = %server, "{line}");
                        let mut kept = last_lines.lock().unwrap_or_else(PoisonError::into_inner);
                        if kept.len() == KEPT_STDERR_LINES {
                            kept.pop_front();
                        }
                        kept.push_back(
                            line[..crate::text::floor_char_boundary(&line, 300)].to_owned(),
                        );
                    }
                    exited.cancel();
                });
            }
            let service = match handshake(handler, transport).await {
                Ok(service) => service,
                Err(error) => {
                    let _ = tokio::time::timeout(STDERR_WAIT, exited.cancelled()).await;
                    let kept = last_lines.lock().unwrap_or_else(PoisonError::into_inner);
                    if kept.is_empty() {
                        return Err(error);
                    }
                    let printed: Vec<&str> = kept.iter().map(String::as_str).collect();
                    return Err(format!("{error}; it printed: {}", printed.join(" / ")));
                }
            };
            Ok(Opened {
                service,
                exited,
                _group: group,
            })
        }
        McpTransport::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (key, value) in headers {
                let header = HeaderName::try_from(key.as_str())
                    .map_err(|_| format!("`{key}` is not a valid header name"))?;
                let value = HeaderValue::try_from(expand(value)?)
                    .map_err(|_| format!("the value of header `{key}` is not valid"))?;
                custom.insert(header, value);
            }
            let url = expand(url)?;
            crate::tls::install_crypto_provider();
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom),
            );
            Ok(Opened {
                service: handshake(handler, transport).await?,
                exited: tokio_util::sync::CancellationToken::new(),
                _group: None,
            })
        }
    }
}

async fn handshake<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<RunningService<RoleClient, Handler>, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handler
        .serve(transport)
        .await
        .map_err(|error| format!("the MCP handshake failed: {error}"))
}
