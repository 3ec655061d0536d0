//! A conversation's events as terminal text: the root agent's answers and tool output as they
//! stream, then short bracketed lines for everything else (a sub-agent shows as a line when it
//! starts and when each of its turns ends; `/agents` lists them). Pure, so it is tested without
//! a terminal: every method returns the text to print.

use std::collections::HashMap;

use serde_json::Value;

use crate::text::floor_char_boundary;

/// Most of a tool's output shown when it did not stream here (printed from a stored item).
const STORED_OUTPUT_SHOWN: usize = 2_000;

#[derive(Default)]
pub struct Renderer {
    /// Items this terminal has started printing: their kind and how much of their text (or
    /// output) is already on screen.
    shown: HashMap<String, Shown>,
    /// Whether the cursor is in the middle of a line.
    mid_line: bool,
    /// The root agent's session, from the snapshot; other sessions are sub-agents.
    root_session: Option<String>,
    /// Sub-agents' agent names, by session id.
    sub_agents: HashMap<String, String>,
}

struct Shown {
    kind: String,
    bytes: usize,
    done: bool,
}

impl Renderer {
    /// The text to print for one event of the conversation's stream, with anything a terminal
    /// would interpret written out (a model's or a command's escape sequences included).
    pub fn event(&mut self, kind: &str, data: &Value) -> String {
        let out = self.event_text(kind, data);
        crate::text::visible(&out).into_owned()
    }

    fn event_text(&mut self, kind: &str, data: &Value) -> String {
        let session = data["session_id"]
            .as_str()
            .or(data["item"]["session_id"].as_str());
        if let Some(session) = session
            && !self.is_root(session)
        {
            return self.sub_agent_event(kind, session, data);
        }
        match kind {
            "snapshot" => {
                let root = &data["conversation"]["root_session_id"];
                self.root_session = root.as_str().map(str::to_owned);
                let mut out = String::new();
                for session in data["sessions"].as_array().into_iter().flatten() {
                    if session["id"] == *root {
                        continue;
                    }
                    let (id, agent) = (text(&session["id"]), text(&session["agent"]));
                    let new = self.sub_agents.insert(id.clone(), agent.clone()).is_none();
                    // One this terminal has not seen start, and that works now.
                    if new && session["status"] == "running" {
                        out += &self.line(&format!(
                            "[sub-agent `{agent}` ({id}) is working on: {}]",
                            first_line(session["task"].as_str().unwrap_or_default())
                        ));
                    }
                }
                if data["compacting"] == true {
                    out += &self.line("[compressing the context…]");
                }
                for turn in data["running"].as_array().into_iter().flatten() {
                    if !self.is_root(turn["session_id"].as_str().unwrap_or_default()) {
                        continue;
                    }
                    for item in turn["items"].as_array().into_iter().flatten() {
                        out += &self.item_progress(item);
                    }
                }
                out
            }
            "session.created" => {
                let session = &data["session"];
                self.sub_agents
                    .insert(text(&session["id"]), text(&session["agent"]));
                self.line(&format!(
                    "[sub-agent `{}` ({}) started: {}]",
                    text(&session["agent"]),
                    text(&session["id"]),
                    first_line(session["task"].as_str().unwrap_or_default())
                ))
            }
            "item.started" => self.item_started(&data["item"]),
            "item.delta" => self.delta(data),
            "item.completed" => self.item_progress(&data["item"]) + &self.item_done(&data["item"]),
            "turn.ended" => match data["status"].as_str() {
                Some("failed") => self.line(&format!(
                    "[turn failed: {}]",
                    data["error"].as_str().unwrap_or("no error given")
                )),
                Some("interrupted") => self.line("[turn interrupted]"),
                _ => match super::files::changed_note(data) {
                    Some(note) => self.line(&note),
                    None => self.end_line(),
                },
            },
            "model.retry" => self.line(&format!(
                "[the model call failed (attempt {} of {}), retrying in {} ms: {}]",
                data["attempt"],
                data["max_attempts"],
                data["delay_ms"],
                data["error"].as_str().unwrap_or_default()
            )),
            "compaction.started" => self.line("[compressing the context…]"),
            "compaction.completed" => self.line(&format!(
                "[context compressed: {}]",
                usage_line(&data["usage"])
            )),
            "compaction.failed" => self.line(&format!(
                "[compressing the context failed: {}]",
                data["error"].as_str().unwrap_or_default()
            )),
            _ => String::new(),
        }
    }

    /// Whether events of `session` are the root agent's (before the snapshot, all are).
    fn is_root(&self, session: &str) -> bool {
        self.root_session
            .as_deref()
            .is_none_or(|root| root == session)
    }

    /// A sub-agent's events show only as the end of each of its turns.
    fn sub_agent_event(&mut self, kind: &str, session: &str, data: &Value) -> String {
        if kind != "turn.ended" {
            return String::new();
        }
        let agent = self
            .sub_agents
            .get(session)
            .cloned()
            .unwrap_or_else(|| "sub-agent".to_owned());
        let how = match data["status"].as_str() {
            Some("failed") => format!(
                "failed: {}",
                data["error"].as_str().unwrap_or("no error given")
            ),
            Some("interrupted") => "was interrupted".to_owned(),
            _ => "finished its turn".to_owned(),
        };
        self.line(&format!("[sub-agent `{agent}` ({session}) {how}]"))
    }

    /// A stored item in full (history on resume, or a turn that ended before this terminal
    /// followed it). Items already shown print nothing.
    pub fn stored_item(&mut self, item: &Value) -> String {
        let out = self.stored_item_text(item);
        crate::text::visible(&out).into_owned()
    }

    fn stored_item_text(&mut self, item: &Value) -> String {
        if item["kind"] == "user_message"
            && item["source"] != "agent"
            && !self.shown.contains_key(id_of(item))
        {
            self.shown.insert(
                id_of(item).to_owned(),
                Shown {
                    kind: "user_message".to_owned(),
                    bytes: 0,
                    done: true,
                },
            );
            return self.line(&format!(
                "you: {}",
                item["text"].as_str().unwrap_or_default()
            ));
        }
        // A stored snapshot of a running item goes on streaming: it is not done yet.
        if item["status"] == "running" {
            return self.item_progress(item);
        }
        self.item_progress(item) + &self.item_done(item)
    }

    fn item_started(&mut self, item: &Value) -> String {
        let id = id_of(item);
        if self.shown.contains_key(id) {
            return String::new();
        }
        let kind = item["kind"].as_str().unwrap_or_default().to_owned();
        self.shown.insert(
            id.to_owned(),
            Shown {
                kind: kind.clone(),
                bytes: 0,
                done: false,
            },
        );
        match kind.as_str() {
            "tool_call" => self.line(&format!(
                "[{}] {}",
                tool_label(item["name"].as_str().unwrap_or("tool")),
                arguments_line(&item["arguments"])
            )),
            _ => String::new(),
        }
    }

    fn delta(&mut self, data: &Value) -> String {
        let Some(shown) = self
            .shown
            .get_mut(data["item_id"].as_str().unwrap_or_default())
        else {
            return String::new();
        };
        let delta = data["delta"].as_str().unwrap_or_default();
        if shown.kind == "reasoning" || delta.is_empty() {
            return String::new();
        }
        let first = shown.bytes == 0 && shown.kind == "agent_message";
        shown.bytes += delta.len();
        let mut out = String::new();
        if first {
            out += &self.end_line();
            out.push_str("agent: ");
        }
        out.push_str(delta);
        self.mid_line = !out.ends_with('\n');
        out
    }

    /// Whatever of an item's text or output is not on screen yet.
    fn item_progress(&mut self, item: &Value) -> String {
        let kind = item["kind"].as_str().unwrap_or_default();
        let mut out = self.item_started(item);
        let (text, limit) = match kind {
            "agent_message" => (item["text"].as_str().unwrap_or_default(), usize::MAX),
            "tool_call" => (
                item["output"].as_str().unwrap_or_default(),
                STORED_OUTPUT_SHOWN,
            ),
            _ => return out,
        };
        let shown = self.shown.get_mut(id_of(item)).expect("started above");
        // A tool's stored output is capped (head, a note, tail), so it is not a continuation
        // of what streamed: only output that never streamed here is printed from it.
        let streamed_tool = kind == "tool_call" && shown.bytes > 0;
        if shown.done || streamed_tool || text.len() <= shown.bytes {
            return out;
        }
        let first = shown.bytes == 0;
        let mut rest = &text[floor_char_boundary(text, shown.bytes)..];
        shown.bytes = text.len();
        let mut cut = 0;
        if first && rest.len() > limit {
            cut = rest.len() - limit;
            rest = &rest[floor_char_boundary(rest, cut)..];
        }
        if first && kind == "agent_message" {
            out += &self.end_line();
            out.push_str("agent: ");
        }
        if cut > 0 {
            out += &self.end_line();
            out += &format!("[… {cut} bytes of output not shown]\n");
        }
        out.push_str(rest);
        self.mid_line = !out.ends_with('\n');
        out
    }

    fn item_done(&mut self, item: &Value) -> String {
        let id = id_of(item);
        let kind = item["kind"].as_str().unwrap_or_default().to_owned();
        if let Some(shown) = self.shown.get_mut(id) {
            if shown.done {
                return String::new();
            }
            shown.done = true;
        } else {
            self.shown.insert(
                id.to_owned(),
                Shown {
                    kind: kind.clone(),
                    bytes: 0,
                    done: true,
                },
            );
        }
        let status = item["status"].as_str().unwrap_or_default();
        match kind.as_str() {
            "agent_message" => self.end_line(),
            "tool_call" => {
                let exit = match item["exit_code"].as_i64() {
                    Some(code) => format!("exit {code}"),
                    None => status.to_owned(),
                };
                let end = self.end_line();
                end + &self.line(&format!("[{exit}]"))
            }
            "notice" => self.line(&format!(
                "[notice] {}",
                item["text"].as_str().unwrap_or_default()
            )),
            // A sub-agent's report to the root agent (the user's own messages are not echoed).
            "user_message" if item["source"] == "agent" => self.line(&format!(
                "[report] {}",
                item["text"].as_str().unwrap_or_default()
            )),
            "summary" => self.line(&format!(
                "[summary of the earlier history] {}",
                item["text"].as_str().unwrap_or_default()
            )),
            _ => String::new(),
        }
    }

    /// A line of its own, after whatever is mid-line.
    fn line(&mut self, text: &str) -> String {
        let mut out = self.end_line();
        out.push_str(text);
        out.push('\n');
        out
    }

    fn end_line(&mut self) -> String {
        if std::mem::take(&mut self.mid_line) {
            "\n".to_owned()
        } else {
            String::new()
        }
    }
}

/// `used / window tokens (percent), reported|estimated; compaction at threshold`.
pub fn usage_line(usage: &Value) -> String {
    format!(
        "{} of {} tokens ({:.1} %), {}; compaction at {}",
        usage["used_tokens"],
        usage["context_window"],
        usage["percent"].as_f64().unwrap_or(0.0),
        usage["source"].as_str().unwrap_or("estimated"),
        usage["threshold_tokens"]
    )
}

fn id_of(item: &Value) -> &str {
    item["id"].as_str().unwrap_or_default()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A tool call's arguments on one line: a shell command as `$ command`, else compact JSON, with
/// anything a terminal would interpret written out.
fn arguments_line(arguments: &Value) -> String {
    match arguments["command"].as_str() {
        Some(command) => format!("$ {}", crate::text::visible(command)),
        None => crate::text::visible(&arguments.to_string()).into_owned(),
    }
}

/// How a tool call is named on screen: an MCP server's tool by its own name and its server's.
pub(super) fn tool_label(name: &str) -> String {
    match crate::mcp::names::split(name) {
        Some((server, tool)) => format!("{tool} (MCP {server})"),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent(id: &str, text: &str, status: &str) -> Value {
        json!({ "id": id, "kind": "agent_message", "text": text, "status": status })
    }

    #[test]
    fn streamed_text_is_printed_once_even_when_completion_repeats_it() {
        let mut r = Renderer::default();
        let mut out = r.event(
            "item.started",
            &json!({ "item": agent("m1", "", "running") }),
        );
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "m1", "field": "text", "delta": "Hel" }),
        );
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "m1", "field": "text", "delta": "lo" }),
        );
        out += &r.event(
            "item.completed",
            &json!({ "item": agent("m1", "Hello", "completed") }),
        );
        out += &r.event("turn.ended", &json!({ "status": "completed" }));
        assert_eq!(out, "agent: Hello\n");
    }

    #[test]
    fn sub_agents_show_as_a_line_when_they_start_and_end_and_their_reports_as_lines() {
        let mut r = Renderer::default();
        let snapshot = json!({
            "conversation": { "root_session_id": "s_root" },
            "sessions": [{ "id": "s_root", "agent": "default" }],
            "running": [],
        });
        let mut out = r.event("snapshot", &snapshot);
        out += &r.event(
            "session.created",
            &json!({ "session": { "id": "s_sub", "agent": "reviewer", "task": "check it\nwell" } }),
        );
        let sub_item = json!({ "id": "m9", "session_id": "s_sub", "kind": "agent_message", "text": "", "status": "running" });
        out += &r.event("item.started", &json!({ "item": sub_item }));
        out += &r.event(
            "item.delta",
            &json!({ "session_id": "s_sub", "item_id": "m9", "field": "text", "delta": "hidden" }),
        );
        out += &r.event(
            "turn.ended",
            &json!({ "session_id": "s_sub", "status": "completed" }),
        );
        let report = json!({ "id": "m10", "session_id": "s_root", "kind": "user_message", "source": "agent", "text": "Report: fine", "status": "completed" });
        out += &r.event("item.completed", &json!({ "item": report }));
        assert_eq!(
            out,
            "[sub-agent `reviewer` (s_sub) started: check it]\n\
             [sub-agent `reviewer` (s_sub) finished its turn]\n\
             [report] Report: fine\n"
        );
    }

    #[test]
    fn a_snapshot_shows_the_sub_agents_at_work() {
        let mut r = Renderer::default();
        let snapshot = json!({
            "conversation": { "root_session_id": "s_root" },
            "sessions": [
                { "id": "s_root", "agent": "default", "status": "running" },
                { "id": "s_a", "agent": "reviewer", "status": "running", "task": "check it" },
                { "id": "s_b", "agent": "default", "status": "idle", "task": "done already" },
            ],
            "running": [],
        });
        assert_eq!(
            r.event("snapshot", &snapshot),
            "[sub-agent `reviewer` (s_a) is working on: check it]\n"
        );
        // A later snapshot (a reconnect) does not repeat it.
        assert_eq!(r.event("snapshot", &snapshot), "");
    }

    #[test]
    fn text_streamed_before_this_terminal_followed_is_caught_up() {
        let mut r = Renderer::default();
        let snapshot = json!({ "running": [{ "items": [agent("m1", "Hal", "running")] }] });
        let mut out = r.event("snapshot", &snapshot);
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "m1", "field": "text", "delta": "f" }),
        );
        out += &r.event(
            "item.completed",
            &json!({ "item": agent("m1", "Half and more", "completed") }),
        );
        assert_eq!(out, "agent: Half and more\n");
    }

    #[test]
    fn an_mcp_call_shows_its_tool_and_server() {
        let mut render = Renderer::default();
        let call = json!({ "id": "t1", "kind": "tool_call", "name": "mcp__files__read_text_file", "arguments": { "path": "/n.txt" }, "output": "", "status": "running" });
        let started = render.event("item.started", &json!({ "item": call }));
        assert_eq!(
            started,
            "[read_text_file (MCP files)] {\"path\":\"/n.txt\"}\n"
        );
    }

    #[test]
    fn tool_calls_show_their_command_output_and_exit_code() {
        let mut r = Renderer::default();
        let call = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "echo hi" }, "output": "", "status": "running" });
        let mut out = r.event("item.started", &json!({ "item": call }));
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "t1", "field": "output", "delta": "hi\n" }),
        );
        let done = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "echo hi" }, "output": "hi\n", "exit_code": 0, "status": "completed" });
        out += &r.event("item.completed", &json!({ "item": done }));
        assert_eq!(out, "[shell] $ echo hi\nhi\n[exit 0]\n");
    }

    #[test]
    fn a_capped_tool_output_is_not_printed_again_at_completion() {
        let mut r = Renderer::default();
        let call = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "yes" }, "output": "", "status": "running" });
        let mut out = r.event("item.started", &json!({ "item": call }));
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "t1", "field": "output", "delta": "aaaa-END\n" }),
        );
        let done = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "yes" }, "output": "aa\n[… 2 bytes cut …]\na-END\n", "exit_code": 0, "status": "completed" });
        out += &r.event("item.completed", &json!({ "item": done }));
        assert_eq!(out, "[shell] $ yes\naaaa-END\n[exit 0]\n");
    }

    #[test]
    fn a_running_item_from_the_history_keeps_streaming() {
        let mut r = Renderer::default();
        let running = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "sleep 1" }, "output": "start\n", "status": "running" });
        let mut out = r.stored_item(&running);
        out += &r.event(
            "item.delta",
            &json!({ "item_id": "t1", "field": "output", "delta": "more\n" }),
        );
        let done = json!({ "id": "t1", "kind": "tool_call", "name": "shell", "arguments": { "command": "sleep 1" }, "output": "start\nmore\n", "exit_code": 0, "status": "completed" });
        out += &r.event("item.completed", &json!({ "item": done }));
        assert_eq!(out, "[shell] $ sleep 1\nstart\nmore\n[exit 0]\n");
    }

    #[test]
    fn failures_and_stored_history_read_as_lines() {
        let mut r = Renderer::default();
        let user =
            json!({ "id": "u1", "kind": "user_message", "text": "Hi", "status": "completed" });
        let mut out = r.stored_item(&user);
        out += &r.stored_item(&agent("m1", "Hello", "completed"));
        out += &r.stored_item(&agent("m1", "Hello", "completed"));
        out += &r.event(
            "turn.ended",
            &json!({ "status": "failed", "error": "boom" }),
        );
        assert_eq!(out, "you: Hi\nagent: Hello\n[turn failed: boom]\n");
    }
}
