//! The tools an agent calls: one entry point (`run_tool`) and the specs the model sees.
//! A tool's failure is a result text for the model (status `Failed`), never an error of the turn.

mod files;
pub mod group_records;
mod mcp;
mod shell;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::model::ToolSpec;
pub use crate::sandbox::SandboxPolicy;
use crate::text::{ceil_char_boundary, floor_char_boundary};

/// Where and within which limits a tool call runs; the turn loop builds it from the conversation.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The conversation's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// The longest a shell command may run. A model's `timeout_s` can shorten it, never extend it.
    pub shell_timeout: Duration,
    /// Cap on the text a tool returns, so one command cannot flood the model's context.
    pub max_output_bytes: usize,
    /// Where running shell commands are recorded, so a restart after a crash can kill them
    /// (`group_records`); `None` records nothing.
    pub process_records: Option<group_records::GroupRecords>,
    /// What the tools may write and reach, and the variables their processes never see.
    pub sandbox: SandboxPolicy,
    /// The MCP servers the agent uses (`None`: none).
    pub mcp: Option<crate::mcp::McpAccess>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// The tool did its work; for `shell` this includes a non-zero exit code.
    Completed,
    /// The tool could not do its work (bad arguments, missing file, timeout); the output says why.
    Failed,
    /// The turn was interrupted while the tool ran; the output so far is kept.
    Interrupted,
    /// Not run: the permissions refused it, or a user denied it; the output says why.
    Denied,
}

#[derive(Debug, Clone)]
pub struct ToolResult {
    pub output: String,
    /// Only `shell` sets it, and only when the command exited on its own (not by a signal).
    pub exit_code: Option<i32>,
    pub status: ToolStatus,
    /// Images for the model with the result (only MCP tools return some).
    pub images: Vec<crate::domain::Image>,
}

impl ToolResult {
    pub fn completed(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Completed,
            images: Vec::new(),
        }
    }

    pub fn failed(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Failed,
            images: Vec::new(),
        }
    }

    pub fn denied(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Denied,
            images: Vec::new(),
        }
    }

    pub fn interrupted(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            exit_code: None,
            status: ToolStatus::Interrupted,
            images: Vec::new(),
        }
    }
}

/// Runs one tool call. Live output chunks (shell stdout/stderr as they arrive) go to `live`.
/// Never panics and never returns Err: a tool's error is a result text for the model (status Failed).
/// The collaboration tools (`spawn_agent`, …) are not run here but by `runtime::collab`, since
/// they act on the conversation's sessions.
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
                result = files::run(name, arguments, ctx) => result,
            }
        }
        _ if name.starts_with(crate::mcp::names::PREFIX) => {
            mcp::run(name, arguments, ctx, live, cancel).await
        }
        _ => ToolResult::failed(format!("unknown tool `{name}`")),
    }
}

pub use mcp::specs as mcp_specs;

/// The specs the model sees for the named tools (unknown names skipped), in the given order.
pub fn specs(names: &[String]) -> Vec<ToolSpec> {
    names.iter().filter_map(|name| spec(name)).collect()
}

fn spec(name: &str) -> Option<ToolSpec> {
    let (name, description, parameters) = match name {
        "shell" => (
            "shell",
            "Run a shell command with `sh -c` in the conversation's working directory (stdin is \
             empty). Returns stdout and stderr interleaved as they were written; long output keeps \
             its head and tail. The exit code is reported separately. When the command ends, times \
             out or is interrupted, every process it started is killed, so background servers do \
             not outlive the call.",
            json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line, run with `sh -c`."
                    },
                    "timeout_s": {
                        "type": "number",
                        "description": "Seconds before the command is killed. Optional: defaults \
                                        to the configured limit, and cannot exceed it."
                    },
                    "escalate": {
                        "type": "string",
                        "description": "Optional: why this one command must run outside the \
                                        sandbox (to write outside the working directory, or to \
                                        use the network). A user is asked first; use it only \
                                        after the sandbox blocked the command."
                    }
                },
                "required": ["command"]
            }),
        ),
        "read_file" => (
            "read_file",
            "Read a text file. Long files are cut at the output limit with a note.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute."
                    }
                },
                "required": ["path"]
            }),
        ),
        "write_file" => (
            "write_file",
            "Write a text file, replacing it if it exists and creating missing parent directories.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute."
                    },
                    "content": {
                        "type": "string",
                        "description": "The whole new content of the file."
                    }
                },
                "required": ["path", "content"]
            }),
        ),
        "list_dir" => (
            "list_dir",
            "List a directory: one entry per line, sorted, directories ending with `/`.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute. \
                                        Optional: the working directory."
                    }
                }
            }),
        ),
        "spawn_agent" => (
            "spawn_agent",
            "Start a sub-agent on a task. It works in its own context, shares the working \
             directory, and reports back to you after each of its turns. Returns its session id.",
            json!({
                "type": "object",
                "properties": {
                    "agent": {
                        "type": "string",
                        "description": "The name of a configured agent."
                    },
                    "task": {
                        "type": "string",
                        "description": "The task, written so the sub-agent can work without asking."
                    },
                    "model": {
                        "type": "string",
                        "description": "Optional: the model to use instead of the default."
                    },
                    "include_history": {
                        "type": "string",
                        "enum": ["none", "last_turn", "all"],
                        "description": "Optional: how much of your completed history the \
                                        sub-agent starts with (default none)."
                    }
                },
                "required": ["agent", "task"]
            }),
        ),
        "send_message" => (
            "send_message",
            "Send a message to one of your sub-agents.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {
                        "type": "string",
                        "description": "The sub-agent's session id."
                    },
                    "text": {
                        "type": "string",
                        "description": "The message."
                    },
                    "mode": {
                        "type": "string",
                        "enum": ["steer", "queue"],
                        "description": "Optional: `steer` joins its running turn, `queue` waits \
                                        for the next one."
                    }
                },
                "required": ["session_id", "text"]
            }),
        ),
        "wait_agents" => (
            "wait_agents",
            "Wait until the given sub-agents finish their current turn, or until the timeout.",
            json!({
                "type": "object",
                "properties": {
                    "session_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The sub-agents' session ids."
                    },
                    "timeout_s": {
                        "type": "number",
                        "maximum": 3600,
                        "description": "Optional: the longest to wait, in seconds (at most 3600)."
                    }
                },
                "required": ["session_ids"]
            }),
        ),
        "interrupt_agent" => (
            "interrupt_agent",
            "Interrupt a sub-agent's running turn.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {
                        "type": "string",
                        "description": "The sub-agent's session id."
                    }
                },
                "required": ["session_id"]
            }),
        ),
        "list_agents" => (
            "list_agents",
            "List your sub-agents with their status and last message.",
            json!({"type": "object", "properties": {}}),
        ),
        _ => return None,
    };
    Some(ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
    })
}

/// A required string parameter; the error names the parameter so the model can fix its call.
pub(crate) fn required_string<'a>(arguments: &'a Value, name: &str) -> Result<&'a str, String> {
    optional_string(arguments, name)?
        .ok_or_else(|| format!("missing required parameter `{name}` (a string)"))
}

/// An optional string parameter; `null` counts as absent.
pub(crate) fn optional_string<'a>(
    arguments: &'a Value,
    name: &str,
) -> Result<Option<&'a str>, String> {
    match parameter(arguments, name)? {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!(
            "parameter `{name}` must be a string, not {}",
            json_kind(other)
        )),
    }
}

/// An optional number parameter; `null` counts as absent.
pub(crate) fn optional_number(arguments: &Value, name: &str) -> Result<Option<f64>, String> {
    match parameter(arguments, name)? {
        None => Ok(None),
        Some(Value::Number(number)) => Ok(number.as_f64()),
        Some(other) => Err(format!(
            "parameter `{name}` must be a number, not {}",
            json_kind(other)
        )),
    }
}

fn parameter<'a>(arguments: &'a Value, name: &str) -> Result<Option<&'a Value>, String> {
    match arguments {
        // A model that calls a tool without arguments may send nothing at all.
        Value::Null => Ok(None),
        Value::Object(map) => Ok(map.get(name).filter(|value| !value.is_null())),
        other => Err(format!(
            "the arguments must be a JSON object, not {}",
            json_kind(other)
        )),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` as a tool's output would be stored: past `max_bytes`, its head and tail and a note
/// of how much was cut in between.
pub fn cap_head_and_tail(text: &str, max_bytes: usize) -> String {
    let mut capped = CappedOutput::new(max_bytes);
    capped.push(text);
    capped.finish()
}

/// Collects a tool's output in arrival order. Past the cap it keeps only the head and the tail
/// (half each) and says how much was cut, so memory stays bounded however much a command prints.
struct CappedOutput {
    max_bytes: usize,
    head: String,
    /// Set once something went to the tail: from then on the head must not grow, or the order
    /// of the output would change.
    head_closed: bool,
    /// The latest output; trimmed to its last `max_bytes / 2` bytes now and then, and at the end.
    tail: String,
    total_bytes: usize,
}

impl CappedOutput {
    fn new(max_bytes: usize) -> CappedOutput {
        CappedOutput {
            max_bytes,
            head: String::new(),
            head_closed: false,
            tail: String::new(),
            total_bytes: 0,
        }
    }

    fn push(&mut self, text: &str) {
        self.total_bytes += text.len();
        let mut rest = text;
        if !self.head_closed {
            // The head gets the odd byte of an odd cap.
            let head_cap = self.max_bytes - self.max_bytes / 2;
            let room = head_cap - self.head.len();
            let taken = floor_char_boundary(rest, room);
            self.head.push_str(&rest[..taken]);
            rest = &rest[taken..];
            if rest.is_empty() {
                return;
            }
            self.head_closed = true;
        }
        self.tail.push_str(rest);
        // Trimming only past twice the cap keeps the copying amortised, and never trims output
        // that fits under the cap as a whole.
        if self.tail.len() > 2 * self.max_bytes.max(4096) {
            self.trim_tail();
        }
    }

    fn finish(mut self) -> String {
        if self.total_bytes <= self.max_bytes {
            return self.head + &self.tail;
        }
        self.trim_tail();
        let cut = self.total_bytes - self.head.len() - self.tail.len();
        format!(
            "{}\n[... {cut} bytes of output cut ...]\n{}",
            self.head, self.tail
        )
    }

    fn trim_tail(&mut self) {
        let tail_cap = self.max_bytes / 2;
        if self.tail.len() > tail_cap {
            let start = ceil_char_boundary(&self.tail, self.tail.len() - tail_cap);
            self.tail.drain(..start);
        }
    }
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 character which
/// more bytes could still complete. Decoding only that prefix keeps a character whole when a read
/// or a cap falls in its middle; invalid bytes are left for the lossy decoder.
fn complete_utf8_prefix_len(bytes: &[u8]) -> usize {
    // A character is at most 4 bytes long, so only the last 3 bytes can start an incomplete one.
    for back in 1..=bytes.len().min(3) {
        let index = bytes.len() - back;
        let width = match bytes[index] {
            0x80..=0xBF => continue, // a continuation byte: the start is further back
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 1,
        };
        return if width > back { index } else { bytes.len() };
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn context(cwd: &std::path::Path) -> ToolContext {
        ToolContext {
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

    #[test]
    fn specs_follow_the_given_order_and_skip_unknown_names() {
        let names: Vec<String> = ["list_agents", "nope", "shell", "read_file"]
            .map(String::from)
            .to_vec();
        let specs = specs(&names);
        let spec_names: Vec<&str> = specs.iter().map(|spec| &*spec.name).collect();
        assert_eq!(spec_names, ["list_agents", "shell", "read_file"]);
    }

    #[test]
    fn every_tool_of_the_api_has_an_object_schema() {
        let names: Vec<String> = [
            "shell",
            "read_file",
            "write_file",
            "list_dir",
            "spawn_agent",
            "send_message",
            "wait_agents",
            "interrupt_agent",
            "list_agents",
        ]
        .map(String::from)
        .to_vec();
        let specs = specs(&names);
        assert_eq!(specs.len(), names.len());
        for spec in specs {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.parameters["properties"].is_object(), "{}", spec.name);
            assert!(!spec.description.is_empty(), "{}", spec.name);
        }
    }

    #[test]
    fn parameters_are_checked_by_name_and_type() {
        let arguments = json!({"command": 3, "path": null, "timeout_s": "soon"});
        assert_eq!(
            required_string(&arguments, "command").unwrap_err(),
            "parameter `command` must be a string, not a number"
        );
        assert_eq!(
            required_string(&arguments, "path").unwrap_err(),
            "missing required parameter `path` (a string)"
        );
        assert_eq!(
            optional_number(&arguments, "timeout_s").unwrap_err(),
            "parameter `timeout_s` must be a number, not a string"
        );
        assert_eq!(optional_string(&Value::Null, "path"), Ok(None));
    }

    #[test]
    fn capped_output() {
        #[track_caller]
        fn check(max_bytes: usize, pushes: &[&str], expected: &str) {
            let mut output = CappedOutput::new(max_bytes);
            for text in pushes {
                output.push(text);
            }
            assert_eq!(output.finish(), expected);
        }
        check(10, &["hello", "world"], "helloworld");
        check(
            10,
            &["hello world"],
            "hello\n[... 1 bytes of output cut ...]\nworld",
        );
        check(
            4,
            &["ab", "cd", "ef", "gh"],
            "ab\n[... 4 bytes of output cut ...]\ngh",
        );
        check(5, &["abcdefgh"], "abc\n[... 3 bytes of output cut ...]\ngh");
        // A character is never split: the head and the tail get a little less instead.
        check(4, &["aé", "xyzé"], "a\n[... 5 bytes of output cut ...]\né");
        check(0, &["abc"], "\n[... 3 bytes of output cut ...]\n");
    }

    #[test]
    fn capped_output_keeps_memory_bounded() {
        let mut output = CappedOutput::new(100);
        let line = "0123456789".repeat(10);
        for _ in 0..10_000 {
            output.push(&line);
        }
        assert!(output.tail.len() <= 2 * 4096 + line.len());
        let text = output.finish();
        assert!(text.contains("[... 999900 bytes of output cut ...]"));
    }

    #[test]
    fn complete_utf8_prefix() {
        #[track_caller]
        fn check(bytes: &[u8], expected: usize) {
            assert_eq!(complete_utf8_prefix_len(bytes), expected);
        }
        let euro = "€".as_bytes(); // 3 bytes
        check(b"", 0);
        check(b"abc", 3);
        check(euro, 3);
        check(&euro[..1], 0);
        check(&euro[..2], 0);
        check(&[b'a', euro[0], euro[1]], 1);
        check(&[b'a', 0xF0, 0x9F, 0x98], 1);
        check("a😀".as_bytes(), 5);
        // Invalid bytes are not held back: waiting cannot make them valid.
        check(&[b'a', 0xFF], 2);
        check(&[b'a', 0x80], 2);
    }
}
