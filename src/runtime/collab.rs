//! The collaboration tools as a turn runs them: `spawn_agent`, `send_message`,
//! `wait_agents`, `interrupt_agent` and `list_agents`. Their arguments are checked here; the
//! session tree belongs to the conversation actor, which carries each request out
//! (`actor/subagents.rs`). Like every tool, a mistake is a result text for the model, never a
//! failed turn.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::agent_requests::{AgentsReply, AgentsRequest, IncludeHistory, MAX_WAIT, SpawnRequest};
use super::link::ActorLink;
use crate::domain::MessageMode;
use crate::tools::{ToolResult, optional_number, optional_string, required_string};

pub fn is_collaboration_tool(name: &str) -> bool {
    matches!(
        name,
        "spawn_agent" | "send_message" | "wait_agents" | "interrupt_agent" | "list_agents"
    )
}

/// Runs one collaboration tool call.
pub(crate) async fn run(
    name: &str,
    arguments: &Value,
    link: &ActorLink,
    cancel: &CancellationToken,
) -> ToolResult {
    if cancel.is_cancelled() {
        return ToolResult::interrupted(format!("interrupted before `{name}` started"));
    }
    if name == "spawn_agent" {
        return spawn_all(&[arguments], link, cancel).await.remove(0);
    }
    let request = match parse(name, arguments) {
        Ok(request) => request,
        Err(error) => return ToolResult::failed(error),
    };
    if let AgentsRequest::Status { session_ids } = request {
        let timeout = match wait_timeout(arguments) {
            Ok(timeout) => timeout,
            Err(error) => return ToolResult::failed(error),
        };
        return wait(session_ids, timeout, link, cancel).await;
    }
    match link.agents(request).await {
        Ok(AgentsReply::Done(output)) => ToolResult::completed(pretty(&output)),
        Ok(AgentsReply::Status { agents, .. }) => {
            ToolResult::completed(pretty(&json!({ "agents": agents })))
        }
        Ok(AgentsReply::Spawned(_)) => ToolResult::failed("unexpected answer from the actor"),
        Err(error) => ToolResult::failed(error),
    }
}

/// Runs `spawn_agent` calls (one, or several of one answer) as one request to the actor, so
/// the sub-agents start together; one result per call, in order.
pub(crate) async fn spawn_all(
    arguments: &[&Value],
    link: &ActorLink,
    cancel: &CancellationToken,
) -> Vec<ToolResult> {
    if cancel.is_cancelled() {
        return arguments
            .iter()
            .map(|_| ToolResult::interrupted("interrupted before `spawn_agent` started"))
            .collect();
    }
    let parsed: Vec<Result<SpawnRequest, String>> =
        arguments.iter().map(|args| parse_spawn(args)).collect();
    let requests: Vec<SpawnRequest> = parsed
        .iter()
        .filter_map(|request| request.as_ref().ok())
        .cloned()
        .collect();
    let mut answers = match link.agents(AgentsRequest::Spawn(requests)).await {
        Ok(AgentsReply::Spawned(answers)) => answers.into_iter(),
        Ok(_) => Vec::new().into_iter(),
        Err(error) => {
            return arguments
                .iter()
                .map(|_| ToolResult::failed(error.clone()))
                .collect();
        }
    };
    parsed
        .into_iter()
        .map(|request| match request {
            Err(error) => ToolResult::failed(error),
            Ok(_) => match answers.next() {
                Some(Ok(output)) => ToolResult::completed(pretty(&output)),
                Some(Err(error)) => ToolResult::failed(error),
                None => ToolResult::failed("the sub-agent could not be started"),
            },
        })
        .collect()
}

fn parse_spawn(arguments: &Value) -> Result<SpawnRequest, String> {
    let task = required_string(arguments, "task")?;
    if task.trim().is_empty() {
        return Err("parameter `task` must not be empty".to_owned());
    }
    let include_history = match optional_string(arguments, "include_history")? {
        None | Some("none") => IncludeHistory::None,
        Some("last_turn") => IncludeHistory::LastTurn,
        Some("all") => IncludeHistory::All,
        Some(other) => {
            return Err(format!(
                "parameter `include_history` must be `none`, `last_turn` or `all`, not `{other}`"
            ));
        }
    };
    Ok(SpawnRequest {
        agent: required_string(arguments, "agent")?.to_owned(),
        task: task.to_owned(),
        model: optional_string(arguments, "model")?.map(str::to_owned),
        include_history,
    })
}

fn parse(name: &str, arguments: &Value) -> Result<AgentsRequest, String> {
    Ok(match name {
        "send_message" => {
            let text = required_string(arguments, "text")?;
            if text.trim().is_empty() {
                return Err("parameter `text` must not be empty".to_owned());
            }
            let mode = match optional_string(arguments, "mode")? {
                None | Some("steer") => MessageMode::Steer,
                Some("queue") => MessageMode::Queue,
                Some(other) => {
                    return Err(format!(
                        "parameter `mode` must be `steer` or `queue`, not `{other}`"
                    ));
                }
            };
            AgentsRequest::Send {
                session_id: required_string(arguments, "session_id")?.to_owned(),
                text: text.to_owned(),
                mode,
            }
        }
        "interrupt_agent" => AgentsRequest::Interrupt {
            session_id: required_string(arguments, "session_id")?.to_owned(),
        },
        "list_agents" => AgentsRequest::List,
        "wait_agents" => AgentsRequest::Status {
            session_ids: session_ids(arguments)?,
        },
        other => return Err(format!("unknown tool `{other}`")),
    })
}

/// `wait_agents`' `session_ids`: a non-empty array of strings.
fn session_ids(arguments: &Value) -> Result<Vec<String>, String> {
    let Some(Value::Array(values)) = arguments.get("session_ids") else {
        return Err("missing required parameter `session_ids` (an array of strings)".to_owned());
    };
    if values.is_empty() {
        return Err("parameter `session_ids` must name at least one sub-agent".to_owned());
    }
    values
        .iter()
        .map(|value| {
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| "parameter `session_ids` must hold only strings".to_owned())
        })
        .collect()
}

/// `wait_agents`' `timeout_s`: positive, at most an hour (the default).
fn wait_timeout(arguments: &Value) -> Result<Duration, String> {
    match optional_number(arguments, "timeout_s")? {
        None => Ok(MAX_WAIT),
        Some(seconds) if !seconds.is_finite() || seconds <= 0.0 => Err(format!(
            "parameter `timeout_s` must be a positive number of seconds, not {seconds}"
        )),
        Some(seconds) => Ok(Duration::from_secs_f64(seconds).min(MAX_WAIT)),
    }
}

/// Waits until none of the named sub-agents runs, the timeout passes, or this turn is
/// interrupted (which ends the wait at once).
async fn wait(
    session_ids: Vec<String>,
    timeout: Duration,
    link: &ActorLink,
    cancel: &CancellationToken,
) -> ToolResult {
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    loop {
        let request = AgentsRequest::Status {
            session_ids: session_ids.clone(),
        };
        let (agents, all_idle, mut changes) = match link.agents(request).await {
            Ok(AgentsReply::Status {
                agents,
                all_idle,
                changes,
            }) => (agents, all_idle, changes),
            Ok(_) => return ToolResult::failed("unexpected answer from the actor"),
            Err(error) => return ToolResult::failed(error),
        };
        let outcome = |timed_out: bool| {
            pretty(&json!({
                "timed_out": timed_out,
                "waited_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
                "agents": agents,
            }))
        };
        if all_idle {
            return ToolResult::completed(outcome(false));
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return ToolResult::failed("the conversation is stopping");
                }
            }
            () = tokio::time::sleep_until(deadline) => return ToolResult::completed(outcome(true)),
            () = cancel.cancelled() => {
                return ToolResult::interrupted(format!("the wait was interrupted\n{}", outcome(false)));
            }
        }
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
