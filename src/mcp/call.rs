//! One `tools/call`: its progress to the live output, an interrupt or the server's
//! `timeout_s` sent to the server as a cancellation, and its result read as the model gets it.

use std::sync::Arc;

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::content;
use super::server::{Connection, Server};
use super::tool::CallOutcome;
use crate::config::McpTransport;

/// How often a call to an HTTP server checks that the server is still there.
const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Times a call yields to the runtime after its result, before it stops taking progress.
const PROGRESS_YIELDS: usize = 4;

/// A liveness ping in flight: an error means the server is gone.
type Ping = std::pin::Pin<Box<dyn Future<Output = Result<(), ServiceError>> + Send>>;

/// Calls `tool` (the server's own name for it) on a live connection; what the server asks
/// meanwhile goes to `peer_of_call`.
pub async fn call(
    server: &Server,
    connection: &Arc<Connection>,
    tool: &str,
    arguments: &Value,
    live: &UnboundedSender<String>,
    peer_of_call: &Option<Arc<dyn super::asking::CallPeer>>,
    cancel: &CancellationToken,
) -> CallOutcome {
    let arguments = match arguments {
        Value::Null => None,
        Value::Object(map) => Some(map.clone()),
        _ => return CallOutcome::failed("the arguments must be a JSON object"),
    };
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let peer = connection.opened.service.peer();
    let mut handle = match peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(error) => return lost(server, connection, error).await,
    };
    let token = handle.progress_token.clone();
    let waiting = connection
        .handler
        .watch(token.clone(), live.clone(), peer_of_call.clone());
    let timeout = tokio::time::sleep(server.config.timeout);
    tokio::pin!(timeout);
    // An HTTP server that goes away leaves the call's stream retrying, never answering: while
    // the call runs, a ping now and then finds out (a child's exit is seen at once).
    let http = matches!(server.config.transport, McpTransport::Http { .. });
    let mut probe =
        tokio::time::interval_at(tokio::time::Instant::now() + LIVENESS_EVERY, LIVENESS_EVERY);
    let mut ping: Option<Ping> = None;
    let answer = loop {
        tokio::select! {
            answer = &mut handle.rx => break Some(answer),
            () = cancel.cancelled() => break None,
            () = &mut timeout => {
                // The server waits on the user or the model for this call: the time that takes
                // is not the server's.
                if waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                    timeout.as_mut().reset(tokio::time::Instant::now() + server.config.timeout);
                    continue;
                }
                connection.handler.unwatch(&token);
                let limit = server.config.timeout.as_secs();
                let _ = handle.cancel(Some(format!("timed out after {limit} s"))).await;
                return CallOutcome::failed(format!(
                    "`{tool}` of the MCP server `{}` did not answer within {limit} s (its \
                     timeout_s), so it was cancelled",
                    server.name
                ));
            }
            _ = probe.tick(), if http && ping.is_none() => {
                let peer = peer.clone();
                ping = Some(Box::pin(async move {
                    let request = ClientRequest::PingRequest(Default::default());
                    match tokio::time::timeout(LIVENESS_EVERY, peer.send_request(request)).await {
                        Ok(Err(error)) => Err(error),
                        // Answered, or slow (a busy server is not a gone one).
                        Ok(Ok(_)) | Err(_) => Ok(()),
                    }
                }));
            }
            pinged = async { ping.as_mut().expect("polled only when set").await }, if ping.is_some() => {
                ping = None;
                match pinged {
                    Ok(()) | Err(ServiceError::McpError(_)) => {}
                    Err(error) => {
                        connection.handler.unwatch(&token);
                        server.lost(connection, format!("it stopped answering ({error})")).await;
                        return CallOutcome::failed(format!(
                            "the MCP server `{}` went away during the call (a ping failed: \
                             {error}); it is connected to again at its next use",
                            server.name
                        ));
                    }
                }
            }
        }
    };
    if answer.is_some() {
        // The SDK hands each notification to a task of its own, so progress the server sent
        // before its result may not have been handled yet: letting those tasks run first keeps
        // the lines it sent. A fairer order, not a guarantee (another worker may hold one).
        for _ in 0..PROGRESS_YIELDS {
            tokio::task::yield_now().await;
        }
    }
    connection.handler.unwatch(&token);
    let Some(answer) = answer else {
        // The server is told, so it can stop the work; the turn does not wait for it.
        let _ = handle
            .cancel(Some("interrupted by the user".to_owned()))
            .await;
        return CallOutcome::interrupted(format!("`{tool}` was interrupted"));
    };
    match answer {
        // Read as JSON: content types newer than this code still show as what they are.
        Ok(Ok(result)) => content::outcome(&serde_json::to_value(&result).unwrap_or_default()),
        Ok(Err(error)) => lost(server, connection, error).await,
        Err(_closed) => lost(server, connection, ServiceError::TransportClosed).await,
    }
}

/// A call that failed in the protocol or the transport. A closed connection is dropped, so
/// the next use starts the server again.
async fn lost(server: &Server, connection: &Arc<Connection>, error: ServiceError) -> CallOutcome {
    match error {
        ServiceError::McpError(error) => CallOutcome::failed(format!(
            "the MCP server `{}` answered with an error: {}",
            server.name, error.message
        )),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            let reason = format!("the connection closed ({error})");
            server.lost(connection, reason).await;
            // A child that exits is started again by its watcher; an HTTP server is
            // connected to again when a call needs it.
            let again = match server.config.transport {
                McpTransport::Stdio { .. } => "it is started again",
                McpTransport::Http { .. } => "it is connected to again at its next use",
            };
            CallOutcome::failed(format!(
                "the MCP server `{}` exited or closed its connection during the call; {again}",
                server.name
            ))
        }
        other => CallOutcome::failed(format!(
            "the call to the MCP server `{}` failed: {other}",
            server.name
        )),
    }
}
