//! One `tools/call`: its progress to the live output, an interrupt or the server's
//! `timeout_s` sent to the server as a cancellation, and its result read as the model gets it.

use std::sync::Arc;

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::server::{Connection, Server};
use super::{CallOutcome, content};

/// Calls `tool` (the server's own name for it) on a live connection.
pub async fn call(
    server: &Server,
    connection: &Arc<Connection>,
    tool: &str,
    arguments: &Value,
    live: &UnboundedSender<String>,
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
    connection.handler.watch(token.clone(), live.clone());
    let timeout = server.config.timeout;
    let answer = tokio::select! {
        answer = &mut handle.rx => Some(answer),
        () = cancel.cancelled() => None,
        () = tokio::time::sleep(timeout) => {
            connection.handler.unwatch(&token);
            let _ = handle.cancel(Some(format!("timed out after {} s", timeout.as_secs()))).await;
            return CallOutcome::failed(format!(
                "`{tool}` of the MCP server `{}` did not answer within {} s (its timeout_s), \
                 so it was cancelled",
                server.name,
                timeout.as_secs()
            ));
        }
    };
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
            CallOutcome::failed(format!(
                "the MCP server `{}` exited or closed its connection during the call; it is \
                 started again",
                server.name
            ))
        }
        other => CallOutcome::failed(format!(
            "the call to the MCP server `{}` failed: {other}",
            server.name
        )),
    }
}
