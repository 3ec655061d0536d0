//! A conversation's events as terminal text: the root agent's answers and tool output as they
//! stream, then short bracketed lines for everything else (the tokens and cost of each of its
//! turns when it ends; a sub-agent shows as a line when it starts and when each of its turns
//! ends; `/agents` lists them). Pure, so it is tested without
//! a terminal: every method returns the text to print.

use std::collections::HashMap;

use serde_json::Value;

use super::events::session_of;
use crate::api::events::ConversationEvent;
use crate::domain::{
    Item, ItemKind, ItemStatus, MessageSource, PlanStep, PlanStepStatus, SessionStatus, TurnStatus,
    Usage, UsageSource,
};
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
    kind: Kind,
    bytes: usize,
    done: bool,
}

/// What a delta extends, as far as printing goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Answer,
    Reasoning,
    Other,
}

impl Kind {
    fn of(item: &Item) -> Kind {
        match item.kind {
            ItemKind::AgentMessage { .. } => Kind::Answer,
            ItemKind::Reasoning { .. } => Kind::Reasoning,
            _ => Kind::Other,
        }
    }
}

impl Renderer {
    /// The text to print for one event of the conversation's stream, with anything a terminal
    /// would interpret written out (a model's or a command's escape sequences included).
    pub fn event(&mut self, event: &ConversationEvent) -> String {
        let out = self.event_text(event);
        crate::text::visible(&out).into_owned()
    }

    fn event_text(&mut self, event: &ConversationEvent) -> String {
        if let Some(session) = session_of(event)
            && !self.is_root(session)
        {
            return self.sub_agent_event(event, session);
        }
        match event {
            ConversationEvent::Snapshot {
                conversation,
                sessions,
                running,
                compacting,
                ..
            } => {
                let root = &conversation.root_session_id;
                self.root_session = Some(root.clone());
                let mut out = String::new();
                for session in sessions.iter().filter(|session| session.id != *root) {
                    let (id, agent) = (&session.id, &session.agent);
                    let new = self.sub_agents.insert(id.clone(), agent.clone()).is_none();
                    // One this terminal has not seen start, and that works now.
                    if new && session.status == SessionStatus::Running {
                        out += &self.line(&format!(
                            "[sub-agent `{agent}` ({id}) is working on: {}]",
                            first_line(session.task.as_deref().unwrap_or_default())
                        ));
                    }
                }
                if *compacting {
                    out += &self.line("[compressing the context…]");
                }
                for turn in running {
                    if !self.is_root(&turn.session_id) {
                        continue;
                    }
                    for item in &turn.items {
                        out += &self.item_progress(item);
                    }
                }
                out
            }
            ConversationEvent::SessionCreated { session } => {
                self.sub_agents
                    .insert(session.id.clone(), session.agent.clone());
                self.line(&format!(
                    "[sub-agent `{}` ({}) started: {}]",
                    session.agent,
                    session.id,
                    first_line(session.task.as_deref().unwrap_or_default())
                ))
            }
            ConversationEvent::ItemStarted { item } => self.item_started(item),
            ConversationEvent::ItemDelta { item_id, delta, .. } => self.delta(item_id, delta),
            ConversationEvent::ItemCompleted { item } => {
                self.item_progress(item) + &self.item_done(item)
            }
            ConversationEvent::TurnEnded {
                status,
                error,
                files_changed,
                usage,
                ..
            } => {
                let mut out = match status {
                    TurnStatus::Failed => self.line(&format!(
                        "[turn failed: {}]",
                        error.as_deref().unwrap_or("no error given")
                    )),
                    TurnStatus::Interrupted => self.line("[turn interrupted]"),
                    _ => match super::files::changed_note(*files_changed) {
                        Some(note) => self.line(&note),
                        None => self.end_line(),
                    },
                };
                if let Some(figures) = super::figures::turn_usage(usage) {
                    out += &self.line(&format!("[{figures}]"));
                }
                out
            }
            ConversationEvent::ModelRetry {
                attempt,
                max_attempts,
                delay_ms,
                error,
                ..
            } => self.line(&format!(
                "[the model call failed (attempt {attempt} of {max_attempts}), retrying in \
                 {delay_ms} ms: {error}]"
            )),
            ConversationEvent::ModelFallback {
                from, to, reason, ..
            } => self.line(&format!("[{}]", fallback_text(from, to, reason))),
            ConversationEvent::CompactionStarted { .. } => self.line("[compressing the context…]"),
            ConversationEvent::CompactionCompleted { usage, .. } => {
                self.line(&format!("[context compressed: {}]", usage_line(usage)))
            }
            ConversationEvent::CompactionFailed { error, .. } => {
                self.line(&format!("[compressing the context failed: {error}]"))
            }
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
    fn sub_agent_event(&mut self, event: &ConversationEvent, session: &str) -> String {
        let ConversationEvent::TurnEnded { status, error, .. } = event else {
            return String::new();
        };
        let agent = self
            .sub_agents
            .get(session)
            .cloned()
            .unwrap_or_else(|| "sub-agent".to_owned());
        let how = match status {
            TurnStatus::Failed => {
                format!("failed: {}", error.as_deref().unwrap_or("no error given"))
            }
            TurnStatus::Interrupted => "was interrupted".to_owned(),
            _ => "finished its turn".to_owned(),
        };
        self.line(&format!("[sub-agent `{agent}` ({session}) {how}]"))
    }

    /// A stored item in full (history on resume, or a turn that ended before this terminal
    /// followed it). Items already shown print nothing.
    pub fn stored_item(&mut self, item: &Item) -> String {
        let out = self.stored_item_text(item);
        crate::text::visible(&out).into_owned()
    }

    fn stored_item_text(&mut self, item: &Item) -> String {
        if let ItemKind::UserMessage {
            text,
            source,
            command,
            hooks,
            ..
        } = &item.kind
            && *source != MessageSource::Agent
            && !self.shown.contains_key(&item.id)
        {
            self.shown.insert(
                item.id.clone(),
                Shown {
                    kind: Kind::Other,
                    bytes: 0,
                    done: true,
                },
            );
            // A command's expanded prompt, named as it was typed.
            let mut out = match command {
                Some(command) => self.line(&format!("you (/{}): {text}", command.name)),
                None => self.line(&format!("you: {text}")),
            };
            for run in hooks {
                out += &self.line(&hook_line(run));
            }
            return out;
        }
        // A stored snapshot of a running item goes on streaming: it is not done yet.
        if item.status == ItemStatus::Running {
            return self.item_progress(item);
        }
        self.item_progress(item) + &self.item_done(item)
    }

    fn item_started(&mut self, item: &Item) -> String {
        if self.shown.contains_key(&item.id) {
            return String::new();
        }
        self.shown.insert(
            item.id.clone(),
            Shown {
                kind: Kind::of(item),
                bytes: 0,
                done: false,
            },
        );
        match &item.kind {
            ItemKind::ToolCall {
                name, arguments, ..
            } => self.line(&format!(
                "[{}] {}",
                tool_label(name),
                call_summary(name, arguments)
            )),
            _ => String::new(),
        }
    }

    fn delta(&mut self, item_id: &str, delta: &str) -> String {
        let Some(shown) = self.shown.get_mut(item_id) else {
            return String::new();
        };
        if shown.kind == Kind::Reasoning || delta.is_empty() {
            return String::new();
        }
        let first = shown.bytes == 0 && shown.kind == Kind::Answer;
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
    fn item_progress(&mut self, item: &Item) -> String {
        let mut out = self.item_started(item);
        let (text, limit, tool) = match &item.kind {
            ItemKind::AgentMessage { text } => (text.as_str(), usize::MAX, false),
            ItemKind::ToolCall { output, .. } => (output.as_str(), STORED_OUTPUT_SHOWN, true),
            _ => return out,
        };
        let shown = self.shown.get_mut(&item.id).expect("started above");
        // A tool's stored output is capped (head, a note, tail), so it is not a continuation
        // of what streamed: only output that never streamed here is printed from it.
        let streamed_tool = tool && shown.bytes > 0;
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
        if first && !tool {
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

    fn item_done(&mut self, item: &Item) -> String {
        if let Some(shown) = self.shown.get_mut(&item.id) {
            if shown.done {
                return String::new();
            }
            shown.done = true;
        } else {
            self.shown.insert(
                item.id.clone(),
                Shown {
                    kind: Kind::of(item),
                    bytes: 0,
                    done: true,
                },
            );
        }
        match &item.kind {
            ItemKind::AgentMessage { .. } => self.end_line(),
            ItemKind::ToolCall {
                exit_code,
                name,
                arguments,
                hooks,
                ..
            } => {
                let exit = match exit_code {
                    Some(code) => format!("exit {code}"),
                    None => super::wire_text(&item.status),
                };
                let mut end = self.end_line();
                for run in hooks {
                    end.push_str(&self.line(&hook_line(run)));
                }
                // An edit that went through shows what it changed.
                if item.status == ItemStatus::Completed
                    && let Some(diff) = edit_diff(name, arguments)
                {
                    end.push_str(&self.line(&diff));
                }
                end + &self.line(&format!("[{exit}]"))
            }
            ItemKind::Notice { text } => self.line(&format!("[notice] {text}")),
            // A sub-agent's report to the root agent (the user's own messages are not echoed).
            ItemKind::UserMessage {
                text,
                source: MessageSource::Agent,
                ..
            } => self.line(&format!("[report] {text}")),
            ItemKind::Summary { text, .. } => {
                self.line(&format!("[summary of the earlier history] {text}"))
            }
            ItemKind::Plan { explanation, steps } => {
                let mut out = self.line("[plan]");
                for line in plan_lines(explanation.as_deref(), steps) {
                    out += &self.line(&format!("  {line}"));
                }
                out
            }
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
/// What a client says when a turn's model fails for good and a fallback takes over.
/// A hook that ran for an item, on a line of its own.
pub(super) fn hook_line(run: &crate::domain::HookRun) -> String {
    format!("[hook {}]", run.summary())
}

pub fn fallback_text(from: &str, to: &str, reason: &str) -> String {
    format!("model `{from}` is unavailable ({reason}): `{to}` answers the rest of this turn")
}

pub fn usage_line(usage: &Usage) -> String {
    let source = match usage.source {
        UsageSource::Reported => "reported",
        UsageSource::Estimated => "estimated",
    };
    format!(
        "{} of {} tokens ({:.1} %), {source}; compaction at {}",
        usage.used_tokens, usage.context_window, usage.percent, usage.threshold_tokens
    )
}

/// A text's first line.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A tool call on one line: a shell command as `$ command`, an edit as the files it changes,
/// else its arguments as compact JSON; anything a terminal would interpret written out. (The
/// arguments are the tool's own JSON.)
pub(super) fn call_summary(name: &str, arguments: &Value) -> String {
    if let (Some(command), "shell") = (arguments["command"].as_str(), name) {
        return format!("$ {}", crate::text::visible(command));
    }
    let edited = crate::api::edits::edited_files(name, arguments);
    if !edited.is_empty() {
        let files: Vec<String> = edited
            .iter()
            .map(|file| format!("{} ({})", file.path, file.action))
            .collect();
        return crate::text::visible(&files.join(", ")).into_owned();
    }
    crate::text::visible(&arguments.to_string()).into_owned()
}

/// What an edit call changed, as diff lines under a `--- path` line per file (at most
/// `EDIT_DIFF_LINES` in all); `None` for a call that is not an edit.
pub(super) fn edit_diff(name: &str, arguments: &Value) -> Option<String> {
    let edited = crate::api::edits::edited_files(name, arguments);
    if edited.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    for file in &edited {
        lines.push(format!("--- {} ({})", file.path, file.action));
        lines.extend(file.diff.iter().cloned());
    }
    let total = lines.len();
    if total > EDIT_DIFF_LINES {
        lines.truncate(EDIT_DIFF_LINES);
        lines.push(format!("[... {} more lines]", total - EDIT_DIFF_LINES));
    }
    Some(crate::text::visible(&lines.join("\n")).into_owned())
}

/// The most diff lines a terminal shows of one edit.
const EDIT_DIFF_LINES: usize = 60;

/// A plan as a checklist, a line each: its explanation, then each step marked `[x]` (completed),
/// `[>]` (in progress) or `[ ]` (pending).
pub(super) fn plan_lines(explanation: Option<&str>, steps: &[PlanStep]) -> Vec<String> {
    let explanation = explanation.map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "));
    explanation
        .into_iter()
        .chain(
            steps
                .iter()
                .map(|step| format!("{} {}", plan_mark(step.status), step.step)),
        )
        .collect()
}

/// A plan step's checkbox on a terminal.
pub(super) fn plan_mark(status: PlanStepStatus) -> &'static str {
    match status {
        PlanStepStatus::Completed => "[x]",
        PlanStepStatus::InProgress => "[>]",
        PlanStepStatus::Pending => "[ ]",
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
    use serde_json::json;

    use super::*;
    use crate::api::events::DeltaField;
    use crate::client::fixtures::{self, ROOT, agent, running, session, snapshot, tool, user};
    use crate::domain::{ItemStatus::*, TurnUsage};

    fn started(item: Item) -> ConversationEvent {
        ConversationEvent::ItemStarted { item }
    }

    fn completed(item: Item) -> ConversationEvent {
        ConversationEvent::ItemCompleted { item }
    }

    fn delta(session: &str, item: &str, field: DeltaField, delta: &str) -> ConversationEvent {
        ConversationEvent::ItemDelta {
            session_id: session.to_owned(),
            item_id: item.to_owned(),
            field,
            delta: delta.to_owned(),
        }
    }

    fn text(item: &str, text: &str) -> ConversationEvent {
        delta(ROOT, item, DeltaField::Text, text)
    }

    fn output(item: &str, output: &str) -> ConversationEvent {
        delta(ROOT, item, DeltaField::Output, output)
    }

    fn ended(session: &str, status: TurnStatus, error: Option<&str>) -> ConversationEvent {
        ConversationEvent::TurnEnded {
            session_id: session.to_owned(),
            turn_id: "t_1".to_owned(),
            status,
            error: error.map(str::to_owned),
            error_code: None,
            files_changed: 0,
            usage: TurnUsage::default(),
        }
    }

    fn shell(id: &str, command: &str, output: &str, status: ItemStatus, exit: Option<i32>) -> Item {
        let mut call = tool(id, "shell", json!({ "command": command }), output, status);
        if let ItemKind::ToolCall { exit_code, .. } = &mut call.kind {
            *exit_code = exit;
        }
        call
    }

    #[test]
    fn streamed_text_is_printed_once_even_when_completion_repeats_it() {
        let mut r = Renderer::default();
        let mut out = r.event(&started(agent("m1", "", Running)));
        out += &r.event(&text("m1", "Hel"));
        out += &r.event(&text("m1", "lo"));
        out += &r.event(&completed(agent("m1", "Hello", Completed)));
        out += &r.event(&ended(ROOT, TurnStatus::Completed, None));
        assert_eq!(out, "agent: Hello\n");
    }

    #[test]
    fn a_turns_end_shows_its_tokens_and_cost_on_a_line_of_its_own() {
        let mut r = Renderer::default();
        let mut out = r.event(&started(agent("m1", "", Running)));
        out += &r.event(&text("m1", "Done"));
        let usage = TurnUsage {
            model_calls: 1,
            input_tokens: 688,
            cached_input_tokens: 612,
            output_tokens: 61,
            cost: Some(0.0012),
            ..TurnUsage::default()
        };
        let mut end = ended(ROOT, TurnStatus::Interrupted, None);
        if let ConversationEvent::TurnEnded { usage: u, .. } = &mut end {
            *u = usage;
        }
        out += &r.event(&end);
        assert_eq!(
            out,
            "agent: Done\n[turn interrupted]\n[688 in (612 cached) · 61 out · cost 0.0012]\n"
        );
    }

    #[test]
    fn a_fallback_taking_over_is_a_line_naming_both_models_and_why() {
        let mut r = Renderer::default();
        let out = r.event(&ConversationEvent::ModelFallback {
            session_id: ROOT.to_owned(),
            turn_id: "t_1".to_owned(),
            from: "main".to_owned(),
            to: "backup".to_owned(),
            reason: "provider answered 529 Overloaded".to_owned(),
        });
        assert_eq!(
            out,
            "[model `main` is unavailable (provider answered 529 Overloaded): `backup` answers \
             the rest of this turn]\n"
        );
    }

    #[test]
    fn sub_agents_show_as_a_line_when_they_start_and_end_and_their_reports_as_lines() {
        let mut r = Renderer::default();
        let root = session(ROOT, None, "default", SessionStatus::Idle);
        let mut out = r.event(&snapshot(vec![root], Vec::new()));
        let mut sub = session("s_sub", Some(ROOT), "reviewer", SessionStatus::Running);
        sub.task = Some("check it\nwell".to_owned());
        out += &r.event(&ConversationEvent::SessionCreated { session: sub });
        let mut sub_item = agent("m9", "", Running);
        sub_item.session_id = "s_sub".to_owned();
        out += &r.event(&started(sub_item));
        out += &r.event(&delta("s_sub", "m9", DeltaField::Text, "hidden"));
        out += &r.event(&ended("s_sub", TurnStatus::Completed, None));
        let report = user("m10", "Report: fine", MessageSource::Agent);
        out += &r.event(&completed(report));
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
        let mut a = session("s_a", Some(ROOT), "reviewer", SessionStatus::Running);
        a.task = Some("check it".to_owned());
        let mut b = session("s_b", Some(ROOT), "default", SessionStatus::Idle);
        b.task = Some("done already".to_owned());
        let root = session(ROOT, None, "default", SessionStatus::Running);
        let snapshot = snapshot(vec![root, a, b], Vec::new());
        assert_eq!(
            r.event(&snapshot),
            "[sub-agent `reviewer` (s_a) is working on: check it]\n"
        );
        // A later snapshot (a reconnect) does not repeat it.
        assert_eq!(r.event(&snapshot), "");
    }

    #[test]
    fn text_streamed_before_this_terminal_followed_is_caught_up() {
        let mut r = Renderer::default();
        let turn = running(ROOT, "t_1", vec![agent("m1", "Hal", Running)]);
        let mut out = r.event(&snapshot(Vec::new(), vec![turn]));
        out += &r.event(&text("m1", "f"));
        out += &r.event(&completed(agent("m1", "Half and more", Completed)));
        assert_eq!(out, "agent: Half and more\n");
    }

    #[test]
    fn an_mcp_call_shows_its_tool_and_server() {
        let mut render = Renderer::default();
        let arguments = json!({ "path": "/n.txt" });
        let call = tool("t1", "mcp__files__read_text_file", arguments, "", Running);
        assert_eq!(
            render.event(&started(call)),
            "[read_text_file (MCP files)] {\"path\":\"/n.txt\"}\n"
        );
    }

    #[test]
    fn tool_calls_show_their_command_output_and_exit_code() {
        let mut r = Renderer::default();
        let mut out = r.event(&started(shell("t1", "echo hi", "", Running, None)));
        out += &r.event(&output("t1", "hi\n"));
        out += &r.event(&completed(shell(
            "t1",
            "echo hi",
            "hi\n",
            Completed,
            Some(0),
        )));
        assert_eq!(out, "[shell] $ echo hi\nhi\n[exit 0]\n");
    }

    #[test]
    fn the_hooks_that_ran_for_a_call_show_before_its_end() {
        let mut r = Renderer::default();
        let mut call = shell("t1", "echo new", "new\n", Completed, Some(0));
        if let ItemKind::ToolCall { hooks, .. } = &mut call.kind {
            hooks.push(crate::domain::HookRun {
                hook: "hooks.pre_tool_use[0]".to_owned(),
                outcome: crate::domain::HookOutcome::Changed,
                ms: 7,
                detail: Some("newer is better".to_owned()),
                arguments_before: Some(json!({"command": "echo old"})),
            });
        }
        let out = r.event(&completed(call));
        assert_eq!(
            out,
            "[shell] $ echo new\nnew\n[hook hooks.pre_tool_use[0] · changed the call · 7 ms — \
             newer is better (the model asked for: echo old)]\n[exit 0]\n"
        );
    }

    #[test]
    fn an_edit_shows_its_file_and_then_its_diff() {
        let mut r = Renderer::default();
        let arguments = json!({"command": "str_replace", "path": "a.rs", "old_str": "x = 1\n", "new_str": "x = 2\n"});
        let call = |status| {
            tool(
                "e1",
                "str_replace_based_edit_tool",
                arguments.clone(),
                "",
                status,
            )
        };
        let mut out = r.event(&started(call(Running)));
        out += &r.event(&completed(call(Completed)));
        assert_eq!(
            out,
            "[str_replace_based_edit_tool] a.rs (edited)\n--- a.rs (edited)\n-x = 1\n+x = 2\n[completed]\n"
        );
    }

    #[test]
    fn a_plan_prints_as_a_checklist() {
        use crate::domain::PlanStepStatus::*;
        let mut r = Renderer::default();
        let steps = [
            ("Read it", Completed),
            ("Fix it", InProgress),
            ("Test it", Pending),
        ];
        let plan = fixtures::plan("p1", Some("Small\nsteps."), &steps);
        let mut out = r.event(&started(plan.clone()));
        out += &r.event(&completed(plan.clone()));
        // Seen again in the history: printed once.
        out += &r.stored_item(&plan);
        assert_eq!(
            out,
            "[plan]\n  Small steps.\n  [x] Read it\n  [>] Fix it\n  [ ] Test it\n"
        );
    }

    #[test]
    fn a_capped_tool_output_is_not_printed_again_at_completion() {
        let mut r = Renderer::default();
        let mut out = r.event(&started(shell("t1", "yes", "", Running, None)));
        out += &r.event(&output("t1", "aaaa-END\n"));
        let capped = "aa\n[… 2 bytes cut …]\na-END\n";
        out += &r.event(&completed(shell("t1", "yes", capped, Completed, Some(0))));
        assert_eq!(out, "[shell] $ yes\naaaa-END\n[exit 0]\n");
    }

    #[test]
    fn a_running_item_from_the_history_keeps_streaming() {
        let mut r = Renderer::default();
        let mut out = r.stored_item(&shell("t1", "sleep 1", "start\n", Running, None));
        out += &r.event(&output("t1", "more\n"));
        let done = shell("t1", "sleep 1", "start\nmore\n", Completed, Some(0));
        out += &r.event(&completed(done));
        assert_eq!(out, "[shell] $ sleep 1\nstart\nmore\n[exit 0]\n");
    }

    #[test]
    fn failures_and_stored_history_read_as_lines() {
        let mut r = Renderer::default();
        let mut out = r.stored_item(&user("u1", "Hi", MessageSource::User));
        out += &r.stored_item(&agent("m1", "Hello", Completed));
        out += &r.stored_item(&agent("m1", "Hello", Completed));
        out += &r.event(&ended(ROOT, TurnStatus::Failed, Some("boom")));
        assert_eq!(out, "you: Hi\nagent: Hello\n[turn failed: boom]\n");
        let call = shell("t2", "false", "", Failed, None);
        assert_eq!(r.stored_item(&call), "[shell] $ false\n[failed]\n");
        assert_eq!(
            usage_line(&fixtures::usage()),
            "100 of 1000 tokens (10.0 %), estimated; compaction at 800"
        );
    }
}
