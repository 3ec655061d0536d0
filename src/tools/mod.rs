//! The tools an agent calls: one entry point (`run_tool`) and the specs the model sees.
//! A tool's failure is a result text for the model (status `Failed`), never an error of the turn.
//!
//! - `call.rs`: what a call gets and gives (context, arguments by name and type, result).
//! - `shell.rs`: `shell`, with live output; `group_records.rs`: its process groups recorded.
//! - `files.rs`: `read_file`, `write_file`, `list_dir`; `read_file` shows text as numbered
//!   lines (`numbered.rs`, one line cut by `lines.rs`) and an image as one (`image_file.rs`).
//! - `search/`: `grep` and `glob`.
//! - `edit/`: `edit_file`, `apply_patch` and Anthropic's text editor, one edit engine;
//!   `disk.rs`: how every file tool reads and writes under the sandbox.
//! - `specs.rs`: each built-in tool as the model sees it; `offer.rs`: the list one model is
//!   offered; `touched.rs`: the paths a call touches, for the permissions.
//! - `mcp.rs`: the tools of MCP servers.
//! - `output.rs`: output capped to its head and tail.

pub mod background;
mod call;
mod disk;
mod edit;
mod files;
pub mod group_records;
mod image_file;
mod lines;
mod mcp;
mod numbered;
mod offer;
mod output;
mod pipe;
mod search;
mod shell;
mod specs;
mod touched;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

pub use call::{ToolContext, ToolResult, ToolStatus};
pub(crate) use call::{optional_number, optional_string, required_string};
pub use edit::edited_paths;
pub use offer::{EDIT_TOOL, EditShape, offered};
pub use output::cap_head_and_tail;
pub use touched::touched_paths;

pub use crate::sandbox::SandboxPolicy;

/// Runs one tool call. Live output chunks (shell stdout/stderr as they arrive) go to `live`.
/// Never panics and never returns Err: a tool's error is a result text for the model (status Failed).
/// The collaboration tools (`spawn_agent`, …) are not run here but by `runtime::collab`, since
/// they act on the conversation's sessions, nor is `update_plan`, which the turn stores.
pub async fn run_tool(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    live: &UnboundedSender<String>,
    cancel: &CancellationToken,
) -> ToolResult {
    // An interrupt that came first means the tool must not start at all.
    if cancel.is_cancelled() {
        return ToolResult::interrupted(format!("interrupted before `{name}` started"));
    }
    match name {
        "shell" => shell::run(arguments, ctx, live, cancel).await,
        "read_file" | "write_file" | "list_dir" => {
            // File tools are quick, but a path can be a FIFO or a hung network mount: an interrupt
            // must still end the call. An abandoned operation may finish on its blocking thread.
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    ToolResult::interrupted(format!("`{name}` was interrupted"))
                }
                result = files::run(name, arguments, ctx, cancel) => result,
            }
        }
        "edit_file" | "apply_patch" | "str_replace_based_edit_tool" => {
            // The same as the file tools; an edit already writing when the interrupt comes
            // finishes (or rolls back) whole on its blocking thread, so no file is half done.
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    ToolResult::interrupted(format!(
                        "`{name}` was interrupted: its files were left as they were, or, if it \
                         had started writing, changed whole"
                    ))
                }
                result = edit::run(name, arguments, ctx, cancel) => result,
            }
        }
        "grep" | "glob" => search::run(name, arguments, ctx, cancel).await,
        "process_output" | "process_list" | "process_kill" => {
            background::tool::run(name, arguments, ctx, cancel).await
        }
        _ if name.starts_with(crate::mcp::names::PREFIX) => {
            mcp::run(name, arguments, ctx, live, cancel).await
        }
        _ => ToolResult::failed(format!("unknown tool `{name}`")),
    }
}

pub use mcp::{McpSpecs, ready_specs as mcp_ready_specs, specs as mcp_specs};
pub use specs::specs;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use serde_json::json;

    pub(super) fn context(cwd: &std::path::Path) -> ToolContext {
        ToolContext {
            background: None,
            cwd: cwd.to_path_buf(),
            shell_timeout: Duration::from_secs(30),
            max_output_bytes: 64 * 1024,
            process_records: None,
            sandbox: SandboxPolicy::default(),
            mcp: None,
        }
    }

    async fn run(name: &str, arguments: Value) -> ToolResult {
        let dir = tempfile::tempdir().unwrap();
        let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
        run_tool(
            name,
            &arguments,
            &context(dir.path()),
            &live,
            &CancellationToken::new(),
        )
        .await
    }

    #[tokio::test]
    async fn unknown_tool_fails_with_its_name() {
        let result = run("frobnicate", json!({})).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(result.output, "unknown tool `frobnicate`");
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_fail() {
        let result = run("read_file", json!("notes.txt")).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(
            result.output,
            "the arguments must be a JSON object, not a string"
        );
    }

    #[tokio::test]
    async fn an_interrupted_turn_starts_no_tool() {
        let dir = tempfile::tempdir().unwrap();
        let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        cancel.cancel();
        for (name, arguments) in [
            ("write_file", json!({"path": "x.txt", "content": "x"})),
            ("shell", json!({"command": "touch y.txt"})),
        ] {
            let result = run_tool(name, &arguments, &context(dir.path()), &live, &cancel).await;
            assert_eq!(result.status, ToolStatus::Interrupted);
            assert_eq!(
                result.output,
                format!("interrupted before `{name}` started")
            );
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
