//! The tools' side of background processes: `shell` with `background: true` starts one and
//! answers with its id and first output; `process_output` reads on from a cursor (waiting a
//! while for more if asked), `process_list` lists the conversation's, and `process_kill` stops
//! one with its whole group.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Start;
pub use super::scope::BackgroundScope;
use crate::domain::ProcessInfo;
use crate::tools::call::{ToolContext, ToolResult, optional_number, required_string};

/// The longest `process_output` waits for more output.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// The names of the tools that follow background processes, offered with `shell`.
pub const FOLLOW_TOOLS: [&str; 3] = ["process_output", "process_list", "process_kill"];

/// Why a call may not start a background process, checked before anyone is asked: one that
/// asks to run outside the sandbox (`escalate`). Allowing one command outside the sandbox
/// must not leave a process running there for hours after the answer.
pub fn refusal(name: &str, arguments: &Value) -> Option<String> {
    let background = arguments.get("background") == Some(&Value::Bool(true));
    (name == "shell" && background && arguments.get("escalate").is_some()).then(|| {
        "Not run: a background process always runs in the sandbox; leave out `escalate`, or run \
         the command in the foreground"
            .to_owned()
    })
}

/// `shell` with `background: true`.
pub async fn start(command: &str, ctx: &ToolContext, cancel: &CancellationToken) -> ToolResult {
    let Some(scope) = &ctx.background else {
        return ToolResult::failed("background processes are not available here".to_owned());
    };
    let started = scope.processes.start(Start {
        conversation_id: &scope.conversation_id,
        session_id: &scope.session_id,
        call_id: &scope.call_id,
        command,
        cwd: &ctx.cwd,
        sandbox: &ctx.sandbox,
        max_per_conversation: scope.max_per_conversation,
        max_run: scope.max_run,
    });
    let process = match started {
        Ok(process) => process,
        Err(message) => return ToolResult::failed(message),
    };
    // A first look at what it prints (or that it ended at once): an interrupt cuts only
    // the wait, never the process.
    tokio::select! {
        () = process.wait_past(0, scope.first_wait) => {}
        () = cancel.cancelled() => {}
    }
    // More may come within the wait: the first output seen up to its end.
    if process.is_running() {
        tokio::select! {
            () = tokio::time::sleep(scope.first_wait / 4) => {}
            () = cancel.cancelled() => {}
        }
    }
    let read = process.read(0, ctx.max_output_bytes);
    let info = process.info();
    let mut output = format!(
        "Started background process {} (`{}`).\n",
        info.id, info.command
    );
    if read.text.is_empty() {
        output.push_str(&format!(
            "No output within {:.0} s.\n",
            scope.first_wait.as_secs_f64()
        ));
    } else {
        output.push_str("First output:\n");
        output.push_str(&read.text);
        if !read.text.ends_with('\n') {
            output.push('\n');
        }
    }
    output.push_str(&status_line(&info));
    output.push_str(&format!(
        "\nRead more with process_output {{\"id\": \"{}\", \"since\": {}}}; stop it with \
         process_kill {{\"id\": \"{}\"}}. It ends when this conversation is deleted, at the \
         latest.",
        info.id, read.next, info.id
    ));
    ToolResult::completed(output)
}

/// `process_output`, `process_list` and `process_kill`.
pub async fn run(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    let Some(scope) = &ctx.background else {
        return ToolResult::failed("background processes are not available here".to_owned());
    };
    let result = match name {
        "process_output" => output(scope, arguments, ctx.max_output_bytes, cancel).await,
        "process_list" => Ok(list(scope)),
        "process_kill" => kill(scope, arguments).await,
        _ => Err(format!("unknown tool `{name}`")),
    };
    match result {
        Ok(text) => ToolResult::completed(text),
        Err(message) => ToolResult::failed(message),
    }
}

async fn output(
    scope: &BackgroundScope,
    arguments: &Value,
    max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let id = required_string(arguments, "id")?;
    let since = match optional_number(arguments, "since")? {
        Some(since) if since < 0.0 => {
            return Err(format!("parameter `since` must be 0 or more, not {since}"));
        }
        Some(since) => since as u64,
        None => 0,
    };
    let wait = match optional_number(arguments, "wait_s")? {
        Some(wait) if wait < 0.0 => {
            return Err(format!("parameter `wait_s` must be 0 or more, not {wait}"));
        }
        Some(wait) => Duration::from_secs_f64(wait.min(MAX_WAIT.as_secs_f64())),
        None => Duration::ZERO,
    };
    if let Some(process) = scope.processes.get(&scope.conversation_id, id)
        && !wait.is_zero()
    {
        tokio::select! {
            () = process.wait_past(since, wait) => {}
            () = cancel.cancelled() => {}
        }
    }
    let Some((info, read)) = scope
        .processes
        .read(&scope.conversation_id, id, since, max_bytes)
    else {
        return Err(unknown(scope, id));
    };
    let mut text = String::new();
    if read.dropped > 0 {
        text.push_str(&format!(
            "[{} bytes written after byte {since} were dropped before this read: only the recent \
             output is kept in memory]\n",
            read.dropped
        ));
    }
    if read.text.is_empty() {
        text.push_str("[no new output]\n");
    } else {
        text.push_str(&read.text);
        if !read.text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(&status_line(&info));
    text.push_str(&format!("\n[next: \"since\": {}]", read.next));
    Ok(text)
}

fn list(scope: &BackgroundScope) -> String {
    let processes = scope.processes.list(&scope.conversation_id);
    if processes.is_empty() {
        return "No background processes in this conversation.".to_owned();
    }
    processes
        .iter()
        .map(|info| format!("{} `{}`: {}", info.id, info.command, status_line(info)))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn kill(scope: &BackgroundScope, arguments: &Value) -> Result<String, String> {
    let id = required_string(arguments, "id")?;
    let (signal, name) = match arguments.get("signal").and_then(Value::as_str) {
        None | Some("TERM" | "SIGTERM") => (libc::SIGTERM, "SIGTERM"),
        Some("KILL" | "SIGKILL") => (libc::SIGKILL, "SIGKILL"),
        Some("INT" | "SIGINT") => (libc::SIGINT, "SIGINT"),
        Some("HUP" | "SIGHUP") => (libc::SIGHUP, "SIGHUP"),
        Some(other) => {
            return Err(format!(
                "parameter `signal` must be one of TERM, KILL, INT, HUP, not `{other}`"
            ));
        }
    };
    let Some(process) = scope.processes.get(&scope.conversation_id, id) else {
        return match scope
            .processes
            .list(&scope.conversation_id)
            .into_iter()
            .find(|info| info.id == id)
        {
            Some(info) => Ok(format!("{id} is not running: {}", status_line(&info))),
            None => Err(unknown(scope, id)),
        };
    };
    if !process.stop(&format!("process_kill sent {name}"), signal) {
        return Ok(format!(
            "{id} is not running: {}",
            status_line(&process.info())
        ));
    }
    let _ = tokio::time::timeout(super::STOP_GRACE + Duration::from_secs(1), process.ended()).await;
    Ok(format!(
        "Sent {name} to {id} and its process group. {}",
        status_line(&process.info())
    ))
}

fn unknown(scope: &BackgroundScope, id: &str) -> String {
    let known: Vec<String> = scope
        .processes
        .list(&scope.conversation_id)
        .into_iter()
        .map(|info| info.id)
        .collect();
    if known.is_empty() {
        format!("no background process `{id}`: this conversation has none")
    } else {
        format!(
            "no background process `{id}` in this conversation (its processes: {})",
            known.join(", ")
        )
    }
}

/// `[running; 1234 bytes of output; listening on port 8000]`, or how it ended.
fn status_line(info: &ProcessInfo) -> String {
    let mut parts = vec![info.status_text()];
    parts.push(format!("{} bytes of output", info.output_bytes));
    if !info.ports.is_empty() {
        let ports: Vec<String> = info.ports.iter().map(u16::to_string).collect();
        parts.push(format!("listening on port {}", ports.join(", ")));
    }
    format!("[{}]", parts.join("; "))
}
