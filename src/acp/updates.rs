//! The `session/update`s the editor is sent, built from the service's items and events (the
//! API's own types: the bridge relies only on the documented API). A tool's arguments are the
//! tool's own JSON, read as such.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    Cost, Diff, ImageContent, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, UnstructuredCommandInput, UsageUpdate,
};
use agent_client_protocol::v1::schema::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, RunningStateUpdate,
    SessionCancelCapabilities, SessionId, SessionMessage, StateUpdate, SubagentSessionCapabilities,
    SubagentUpdate,
};
use serde_json::Value;

use crate::api::responses::{ChangedFile, CommandInfo};
use crate::domain::{
    Image, Item, ItemKind, ItemStatus, PlanStep, PlanStepStatus, Session, SessionStatus,
    TurnStatus, Usage,
};

/// A tool call as the editor is shown it: a `tool_call` item's, or what a delta of its output
/// knows of it.
pub struct Call<'a> {
    pub id: &'a str,
    pub status: ItemStatus,
    pub name: &'a str,
    pub arguments: &'a Value,
    pub output: &'a str,
    pub exit_code: Option<i32>,
}

impl<'a> Call<'a> {
    /// The call an item is, if it is one.
    pub fn of(item: &'a Item) -> Option<Call<'a>> {
        match &item.kind {
            ItemKind::ToolCall {
                name,
                arguments,
                output,
                exit_code,
                ..
            } => Some(Call {
                id: &item.id,
                status: item.status,
                name,
                arguments,
                output,
                exit_code: *exit_code,
            }),
            _ => None,
        }
    }

    /// A running call known only by its id (a delta of its output).
    pub fn running(id: &'a str) -> Call<'a> {
        Call {
            id,
            status: ItemStatus::Running,
            name: "",
            arguments: &Value::Null,
            output: "",
            exit_code: None,
        }
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

pub fn text_block(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

pub fn agent_text(text: impl Into<String>) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text)))
}

pub fn thought(text: impl Into<String>) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text)))
}

/// A user message of the history: its text, then its images.
pub fn user_message(text: &str, images: &[Image]) -> Vec<SessionUpdate> {
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(text_block(text));
    }
    for image in images {
        let media_type = image.media_type.as_str();
        let block = match &image.data {
            Some(data) => ImageContent::new(data.as_str(), media_type),
            None => ImageContent::new("", media_type).uri(image.url.clone().unwrap_or_default()),
        };
        blocks.push(ContentBlock::Image(block));
    }
    blocks
        .into_iter()
        .map(|block| SessionUpdate::UserMessageChunk(ContentChunk::new(block)))
        .collect()
}

/// A tool's path argument made absolute against the conversation's working directory.
fn absolute(cwd: &str, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        Path::new(cwd).join(path)
    }
}

fn kind(name: &str) -> ToolKind {
    match name {
        "shell" => ToolKind::Execute,
        "read_file" | "list_dir" => ToolKind::Read,
        "grep" | "glob" => ToolKind::Search,
        "write_file" | "edit_file" | "apply_patch" | "str_replace_based_edit_tool" => {
            ToolKind::Edit
        }
        "spawn_agent" | "send_message" | "wait_agents" | "interrupt_agent" | "list_agents"
        | "update_plan" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// What the editor shows as the call's title: the command, the file, the sub-agent's task.
pub fn title(name: &str, arguments: &Value) -> String {
    let arg = |key: &str| text(&arguments[key]).to_owned();
    match name {
        "shell" => arg("command"),
        "read_file" => format!("Read {}", arg("path")),
        "write_file" => format!("Write {}", arg("path")),
        "edit_file" => format!("Edit {}", arg("path")),
        "str_replace_based_edit_tool" if arg("command") == "view" => {
            format!("Read {}", arg("path"))
        }
        "str_replace_based_edit_tool" => format!("Edit {}", arg("path")),
        "apply_patch" => {
            let paths: Vec<String> = crate::api::edits::edited_files(name, arguments)
                .into_iter()
                .map(|file| file.path)
                .collect();
            format!("Patch {}", paths.join(", "))
        }
        "grep" => format!("Search for {}", arg("pattern")),
        "glob" => format!("Find {}", arg("pattern")),
        "list_dir" if arg("path").is_empty() => "List the working directory".to_owned(),
        "list_dir" => format!("List {}", arg("path")),
        "spawn_agent" => {
            let task = arg("task");
            let first = task.lines().next().unwrap_or_default();
            format!("Sub-agent {}: {first}", arg("agent"))
        }
        "update_plan" => "Update the plan".to_owned(),
        _ => match name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
        {
            Some((server, tool)) => format!("{server}: {tool}"),
            None => name.to_owned(),
        },
    }
}

fn locations(name: &str, arguments: &Value, cwd: &str) -> Vec<ToolCallLocation> {
    let edited = crate::api::edits::edited_files(name, arguments);
    if !edited.is_empty() {
        return edited
            .into_iter()
            .map(|file| ToolCallLocation::new(absolute(cwd, &file.path)))
            .collect();
    }
    match (name, arguments["path"].as_str()) {
        (
            "read_file"
            | "write_file"
            | "list_dir"
            | "grep"
            | "glob"
            | "str_replace_based_edit_tool",
            Some(path),
        ) => {
            vec![ToolCallLocation::new(absolute(cwd, path))]
        }
        _ => Vec::new(),
    }
}

fn status(call: &Call) -> ToolCallStatus {
    match call.status {
        ItemStatus::Completed => ToolCallStatus::Completed,
        ItemStatus::Failed | ItemStatus::Interrupted => ToolCallStatus::Failed,
        ItemStatus::WaitingApproval => ToolCallStatus::Pending,
        ItemStatus::Running => ToolCallStatus::InProgress,
    }
}

/// What a call shows: a file write as its diff, anything else as its output so far.
fn content(call: &Call, cwd: &str, output: &str) -> Vec<ToolCallContent> {
    let arguments = call.arguments;
    if call.name == "write_file"
        && let (Some(path), Some(new_text)) =
            (arguments["path"].as_str(), arguments["content"].as_str())
    {
        // The service does not keep the file as it was before: the diff is the new text.
        let mut content = vec![ToolCallContent::Diff(Diff::new(
            absolute(cwd, path),
            new_text,
        ))];
        if call.status == ItemStatus::Failed && !output.is_empty() {
            content.push(ToolCallContent::from(text_block(output)));
        }
        return content;
    }
    let edited = crate::api::edits::edited_files(call.name, arguments);
    if !edited.is_empty() && call.status != ItemStatus::Failed {
        // An edit as its diffs: the text it replaced and what it wrote, per file.
        return edited
            .into_iter()
            .map(|file| {
                let diff = Diff::new(absolute(cwd, &file.path), file.new_text);
                ToolCallContent::Diff(diff.old_text(file.old_text))
            })
            .collect();
    }
    if output.is_empty() {
        return Vec::new();
    }
    vec![ToolCallContent::from(text_block(output))]
}

/// A tool call as it appears; `agent` names the sub-agent that makes it.
pub fn tool_call(call: &Call, cwd: &str, agent: Option<&str>) -> SessionUpdate {
    let (name, arguments) = (call.name, call.arguments);
    let mut title = title(name, arguments);
    if let Some(agent) = agent {
        title = format!("[{agent}] {title}");
    }
    SessionUpdate::ToolCall(
        ToolCall::new(call.id.to_owned(), title)
            .kind(kind(name))
            .status(status(call))
            .content(content(call, cwd, call.output))
            .locations(locations(name, arguments, cwd))
            .raw_input(arguments.clone()),
    )
}

/// Live output of a running call (the whole output so far: an update replaces the content).
pub fn tool_output(call: &Call, cwd: &str, output: &str) -> SessionUpdate {
    let content = content(call, cwd, output);
    let mut fields = ToolCallUpdateFields::new().status(status(call));
    if !content.is_empty() {
        fields = fields.content(content);
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call.id.to_owned(), fields))
}

/// A call's end: its status, its final output or diff, and the raw result.
pub fn tool_end(call: &Call, cwd: &str) -> SessionUpdate {
    let output = call.output;
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call.id.to_owned(),
        ToolCallUpdateFields::new()
            .status(status(call))
            .content(content(call, cwd, output))
            .raw_output(serde_json::json!({
                "output": output,
                "exit_code": call.exit_code,
            })),
    ))
}

/// A sub-agent announced as a session of its own (the protocol's sub-agent extension): its
/// agent as the title, its task as the description, and whether it works now. The editor may
/// cancel its work.
pub fn subagent(session: &Session, cwd: &str) -> SessionUpdate {
    let state = if session.status == SessionStatus::Running {
        StateUpdate::Running(RunningStateUpdate::new())
    } else {
        StateUpdate::Idle(IdleStateUpdate::new())
    };
    let mut update = SubagentUpdate::new(session.id.clone())
        .title(session.agent.clone())
        .capabilities(SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()))
        .state(state);
    if let Some(task) = &session.task {
        update = update.description(task.clone());
    }
    if !cwd.is_empty() {
        update = update.cwd(PathBuf::from(cwd));
    }
    SessionUpdate::SubagentUpdate(update)
}

/// A sub-agent's state after one of its turns started (`ended` is `None`) or ended with the
/// given status.
pub fn subagent_state(session_id: &str, ended: Option<TurnStatus>) -> SessionUpdate {
    let state = match ended {
        None => StateUpdate::Running(RunningStateUpdate::new()),
        Some(status) => StateUpdate::Idle(IdleStateUpdate::new().stop_reason(match status {
            TurnStatus::Completed => IdleStopReason::EndTurn,
            TurnStatus::Interrupted => IdleStopReason::Cancelled,
            _ => IdleStopReason::Error(ErrorStopReason::new()),
        })),
    };
    SessionUpdate::SubagentUpdate(SubagentUpdate::new(session_id.to_owned()).state(state))
}

/// A message one session sent another (a sub-agent's report, a task or a message to a
/// sub-agent), as the extension's session message; `sender` is the sending session when the
/// editor knows it as one.
pub fn session_message(id: &str, text: &str, sender: Option<&str>) -> SessionUpdate {
    let mut message = SessionMessage::new(id.to_owned()).content(vec![text_block(text)]);
    if let Some(sender) = sender {
        message = message.sender_session_id(SessionId::new(sender.to_owned()));
    }
    SessionUpdate::SessionMessage(message)
}

/// What a finished call changed in the working directory, as diffs with the text before and
/// after (`files` as `GET …/turns/{turn_id}/changes?contents=true` gives them), then its
/// output. `None` when no file came with its texts (binary, over the cap).
pub fn tool_diffs(call: &Call, cwd: &str, files: &[ChangedFile]) -> Option<SessionUpdate> {
    let mut content: Vec<ToolCallContent> = files
        .iter()
        .filter(|file| file.old_text.is_some() || file.new_text.is_some())
        .map(|file| {
            let new_text = file.new_text.clone().unwrap_or_default();
            let diff = Diff::new(absolute(cwd, &file.path), new_text);
            ToolCallContent::Diff(diff.old_text(file.old_text.clone()))
        })
        .collect();
    if content.is_empty() {
        return None;
    }
    let output = call.output;
    if !output.is_empty() && call.name != "write_file" {
        content.push(ToolCallContent::from(text_block(output)));
    }
    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call.id.to_owned(),
        ToolCallUpdateFields::new()
            .status(status(call))
            .content(content),
    )))
}

/// The context meter: tokens used of the model's window.
/// The agent's plan, whole: the editor replaces the one it showed. The service's steps have no
/// priority, so all are medium; the explanation has no place in the protocol's plan.
pub fn plan(steps: &[PlanStep]) -> SessionUpdate {
    let entries = steps
        .iter()
        .map(|step| {
            let status = match step.status {
                PlanStepStatus::Pending => PlanEntryStatus::Pending,
                PlanStepStatus::InProgress => PlanEntryStatus::InProgress,
                PlanStepStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(step.step.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// The context meter, with what the conversation's turns have cost so far when a model has a
/// price. The service knows prices only as numbers (`price` names no currency), so the cost's
/// unit is ISO 4217's code for "no currency": naming a real one would make it up.
pub fn usage(usage: &Usage, cost: Option<f64>) -> SessionUpdate {
    let update = UsageUpdate::new(usage.used_tokens, usage.context_window);
    SessionUpdate::UsageUpdate(update.cost(cost.map(|amount| Cost::new(amount, NO_CURRENCY))))
}

/// ISO 4217's code for a transaction in no currency.
const NO_CURRENCY: &str = "XXX";

/// The slash commands the bridge runs through the service's API (`commands.rs`), then the
/// repository's own (`.agents/commands/`) whose names those do not take.
pub fn commands(repository: &[CommandInfo]) -> SessionUpdate {
    let command = |name: &str, description: &str, hint: Option<&str>| {
        let command = AvailableCommand::new(name, description);
        match hint {
            Some(hint) => command.input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(hint),
            )),
            None => command,
        }
    };
    let mut commands = vec![
        command(
            "compact",
            "Summarize the older history now (compress the context)",
            None,
        ),
        command(
            "fork",
            "Copy this conversation up to its last finished turn into a new one",
            None,
        ),
        command(
            "rewind",
            "List your messages, or copy the conversation up to before message N",
            Some("N"),
        ),
        command(
            "context",
            "How much of the model's context window is used",
            None,
        ),
        command(
            "agents",
            "The agents of this conversation and what they wait for",
            None,
        ),
        command(
            "retry",
            "Run the last turn again (after it failed or was stopped)",
            None,
        ),
    ];
    for theirs in repository {
        if super::commands::is_builtin(&theirs.name) {
            continue;
        }
        let description = theirs
            .description
            .clone()
            .unwrap_or_else(|| format!("The repository's command /{}", theirs.name));
        commands.push(command(
            &theirs.name,
            &description,
            theirs.argument_hint.as_deref(),
        ));
    }
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_write_shows_as_a_diff_at_an_absolute_path() {
        let arguments = json!({"path": "src/a.txt", "content": "hello"});
        let call = Call {
            id: "m_1",
            status: ItemStatus::Completed,
            name: "write_file",
            arguments: &arguments,
            output: "wrote 5 bytes",
            exit_code: None,
        };
        let SessionUpdate::ToolCallUpdate(update) = tool_end(&call, "/work") else {
            panic!("an update");
        };
        let content = update.fields.content.expect("content");
        let ToolCallContent::Diff(diff) = &content[0] else {
            panic!("a diff, got {content:?}");
        };
        assert_eq!(diff.path, Path::new("/work/src/a.txt"));
        assert_eq!(diff.new_text, "hello");
        assert_eq!(update.fields.status, Some(ToolCallStatus::Completed));
    }

    #[test]
    fn titles_say_what_a_call_does() {
        assert_eq!(title("shell", &json!({"command": "ls -l"})), "ls -l");
        assert_eq!(
            title(
                "spawn_agent",
                &json!({"agent": "coder", "task": "fix it\nand more"})
            ),
            "Sub-agent coder: fix it"
        );
        assert_eq!(title("mcp__files__read", &json!({})), "files: read");
    }
}
