//! The terminal client (`openvaala chat`): a plain client of the public API, like the web UI,
//! reading it through the service's own types (`crate::api`, `crate::domain`). `api.rs` speaks
//! HTTP and decodes answers and errors, `endpoints.rs` names each route the clients call with
//! its typed answer, `events.rs` decodes the event streams into `ConversationEvent`s (the ACP
//! bridge uses these three too). `tui/` is the full-screen chat used at a terminal;
//! `render.rs` turns events into terminal text for the plain mode, where `chat/` is the
//! read–send–follow loop and its slash commands (`position.rs` keeps its place in the stream,
//! `agents.rs` draws `/agents`); `send.rs` is `openvaala send`, one message from a script or an
//! editor (`stream.rs` keeps its event stream across dropped connections, for `tui/` too);
//! `approval_prompt.rs` asks the user about a tool call that waits for approval, for the plain
//! chat and `send`; `calls.rs` and `files.rs` serve both chats (`/fork`, `/retry`, `/rewind`,
//! `/diff`), `processes.rs` writes `/ps` (the background processes) for both, and
//! `repo_commands.rs` the repository's own `/name args` commands (for the ACP bridge too); `figures.rs` writes a turn's tokens and cost for all of them. `fixtures.rs`
//! builds the API's values for the unit tests.

pub mod agents;
pub mod api;
pub mod approval_prompt;
pub mod calls;
pub mod chat;
pub mod endpoints;
pub mod events;
pub mod figures;
pub mod files;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod position;
pub mod processes;
pub mod question_form;
pub mod render;
pub mod repo_commands;
pub mod send;
pub mod stream;
pub mod tui;
pub mod waiting;

/// How a value of the API is written on the wire (a status's `completed`, a time's RFC 3339
/// text), where a client shows it as the service wrote it.
pub fn wire_text<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
