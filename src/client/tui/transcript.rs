//! What the full-screen chat shows of a conversation: one entry per item of the root session
//! (messages, answers, reasoning, tool calls), the ends of turns that did not complete, retries
//! with their countdown, and notices. Entries are updated in place as their items stream, and
//! drawn as lines: answers as Markdown, tool output and reasoning folded unless expanded (all
//! of them, or the one selected).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::markdown;
use crate::client::render::{first_line, plan_mark};
use crate::domain::{Item, ItemKind, ItemStatus, MessageSource, PlanStepStatus, TurnStatus};

/// Lines of a tool's output shown while folded (its last ones).
const FOLDED_OUTPUT: usize = 4;

pub enum Entry {
    User(String),
    Agent {
        text: String,
        status: Progress,
    },
    Reasoning {
        text: String,
    },
    Tool {
        call: String,
        /// The hooks that ran for it, a line each.
        hooks: Vec<String>,
        output: String,
        exit: Option<i32>,
        status: Progress,
    },
    /// A turn that did not complete: failed (with its error) or interrupted.
    TurnEnded {
        status: TurnStatus,
        error: String,
    },
    Retry {
        attempt: u64,
        max: u64,
        at: Instant,
        error: String,
    },
    Notice(String),
    /// The agent's plan (`update_plan`) as a checklist.
    Plan {
        explanation: Option<String>,
        steps: Vec<(PlanStepStatus, String)>,
    },
}

/// How far an answer or a tool call got: its item's status, or cut off by a restart of the
/// service before its end was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Item(ItemStatus),
    Lost,
}

#[derive(Default)]
pub struct Transcript {
    pub entries: Vec<Entry>,
    by_item: HashMap<String, usize>,
    /// Items whose final view (stored, no longer running) is shown. The stream is opened
    /// before the history is read, so its earlier views of such an item (its start, its
    /// deltas) can arrive after it: they are older, and ignored.
    settled: HashSet<String>,
    /// Tool output and reasoning in full (Ctrl-O with nothing selected).
    pub expanded: bool,
    /// The tool call or reasoning selected (Alt-↑/↓), by its place in `entries`. Such an entry
    /// stays in place: the only entries ever removed are retries, and they are always after
    /// every item's entry (the next item removes them).
    pub selected: Option<usize>,
    /// Entries shown the other way from `expanded` (Ctrl-O on the selected one).
    flipped: HashSet<usize>,
}

impl Transcript {
    pub fn notice(&mut self, text: impl Into<String>) {
        self.entries.push(Entry::Notice(shown(&text.into())));
    }

    pub fn knows(&self, item_id: &str) -> bool {
        self.by_item.contains_key(item_id)
    }

    /// An item as it starts, completes, or is read from the history.
    pub fn item(&mut self, item: &Item) {
        let id = item.id.clone();
        let running = item.status == ItemStatus::Running;
        if running && self.settled.contains(&id) {
            return;
        }
        if !running {
            self.settled.insert(id.clone());
        }
        let status = Progress::Item(item.status);
        // What the terminal draws is never an escape sequence of a model's or a command's.
        let entry = match &item.kind {
            ItemKind::UserMessage {
                text,
                source: MessageSource::Agent,
                ..
            } => Entry::Notice(format!(
                "report from a sub-agent: {}",
                first_line(&shown(text))
            )),
            // A command's expanded prompt, under the name it was sent by.
            ItemKind::UserMessage {
                text,
                command: Some(command),
                hooks,
                ..
            } => Entry::User(shown(&with_hooks(
                &format!("/{}\n{text}", command.name),
                hooks,
            ))),
            ItemKind::UserMessage { text, hooks, .. } => {
                Entry::User(shown(&with_hooks(text, hooks)))
            }
            ItemKind::AgentMessage { text } => Entry::Agent {
                text: shown(text),
                status,
            },
            ItemKind::Reasoning { text, .. } => Entry::Reasoning { text: shown(text) },
            ItemKind::ToolCall {
                name,
                arguments,
                output,
                exit_code,
                hooks,
                ..
            } => Entry::Tool {
                call: format!(
                    "{name} {}",
                    super::super::render::call_summary(name, arguments)
                ),
                hooks: hooks
                    .iter()
                    .map(|run| shown(&super::super::render::hook_line(run)))
                    .collect(),
                // An edit that went through shows what it changed, then its result.
                output: match super::super::render::edit_diff(name, arguments) {
                    Some(diff) if item.status == ItemStatus::Completed => {
                        format!("{diff}\n{}", shown(output))
                    }
                    _ => shown(output),
                },
                exit: *exit_code,
                status,
            },
            ItemKind::Summary { .. } => {
                Entry::Notice("the older history was summarised".to_owned())
            }
            ItemKind::Notice { text } => Entry::Notice(shown(text)),
            ItemKind::Plan { explanation, steps } => Entry::Plan {
                explanation: explanation.as_deref().map(shown),
                steps: steps
                    .iter()
                    .map(|step| (step.status, shown(&step.step)))
                    .collect(),
            },
        };
        // Retries are done once the model answers.
        self.entries
            .retain(|entry| !matches!(entry, Entry::Retry { .. }));
        match self.by_item.get(&id) {
            Some(&at) => {
                // A stored tool output is capped: what streamed stays if it is longer.
                if let (Entry::Tool { output: old, .. }, Entry::Tool { output: new, .. }) =
                    (&self.entries[at], &entry)
                    && old.len() > new.len()
                {
                    let old = old.clone();
                    self.entries[at] = entry;
                    if let Entry::Tool { output, .. } = &mut self.entries[at] {
                        *output = old;
                    }
                    return;
                }
                self.entries[at] = entry;
            }
            None => {
                self.by_item.insert(id, self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    pub fn delta(&mut self, item_id: &str, delta: &str) {
        if self.settled.contains(item_id) {
            return;
        }
        let Some(&at) = self.by_item.get(item_id) else {
            return;
        };
        let delta = shown(delta);
        match &mut self.entries[at] {
            Entry::Agent { text, .. } | Entry::Reasoning { text } => text.push_str(&delta),
            Entry::Tool { output, .. } => output.push_str(&delta),
            _ => {}
        }
    }

    /// Entries still streaming when the connection dropped and whose end was never stored.
    pub fn mark_cut(&mut self) -> usize {
        let mut cut = 0;
        for entry in &mut self.entries {
            if let Entry::Agent { status, .. } | Entry::Tool { status, .. } = entry
                && *status == Progress::Item(ItemStatus::Running)
            {
                *status = Progress::Lost;
                cut += 1;
            }
        }
        cut
    }

    /// Selects the tool call or reasoning before the selected one (the newest, if none is).
    pub fn select_previous(&mut self) {
        let before = self.selected.unwrap_or(self.entries.len());
        if let Some(at) = (0..before).rev().find(|&at| foldable(&self.entries[at])) {
            self.selected = Some(at);
        }
    }

    /// Selects the tool call or reasoning after the selected one; past the newest, none.
    pub fn select_next(&mut self) {
        if let Some(from) = self.selected {
            self.selected = (from + 1..self.entries.len()).find(|&at| foldable(&self.entries[at]));
        }
    }

    /// Ctrl-O: the selected entry unfolds or folds again; with none selected, all of them.
    pub fn toggle(&mut self) {
        match self.selected {
            Some(at) => {
                if !self.flipped.remove(&at) {
                    self.flipped.insert(at);
                }
            }
            None => {
                self.expanded = !self.expanded;
                self.flipped.clear();
            }
        }
    }

    fn is_expanded(&self, at: usize) -> bool {
        self.expanded != self.flipped.contains(&at)
    }

    pub fn lines(&self, now: Instant) -> Vec<Line<'static>> {
        self.lines_and_selection(now).0
    }

    /// The lines, and the first line of the selected entry.
    pub fn lines_and_selection(&self, now: Instant) -> (Vec<Line<'static>>, Option<usize>) {
        let mut lines = Vec::new();
        let mut selected_line = None;
        for (at, entry) in self.entries.iter().enumerate() {
            if self.selected == Some(at) {
                selected_line = Some(lines.len());
            }
            self.entry_lines(at, entry, now, &mut lines);
        }
        (lines, selected_line)
    }

    fn entry_lines(&self, at: usize, entry: &Entry, now: Instant, lines: &mut Vec<Line<'static>>) {
        let dim = Style::default().fg(Color::DarkGray);
        let expanded = self.is_expanded(at);
        // The selected entry's first line stands out.
        let selected = |style: Style| {
            if self.selected == Some(at) {
                style.add_modifier(Modifier::REVERSED)
            } else {
                style
            }
        };
        match entry {
            Entry::User(body) => {
                lines.push(Line::default());
                for (at, line) in body.split('\n').enumerate() {
                    let mark = if at == 0 { "› " } else { "  " };
                    lines.push(Line::from(vec![
                        Span::styled(mark, Style::default().fg(Color::Blue)),
                        Span::styled(
                            line.to_owned(),
                            Style::default().add_modifier(Modifier::BOLD),
                        ),
                    ]));
                }
                lines.push(Line::default());
            }
            Entry::Agent { text, status } => {
                lines.extend(markdown::render(text));
                if *status == Progress::Lost {
                    lines.push(Line::styled(
                        "[cut off: this part of the answer was never stored]",
                        Style::default().fg(Color::Yellow),
                    ));
                }
            }
            Entry::Reasoning { text } => {
                if expanded {
                    lines.push(Line::styled("▾ thinking", selected(dim)));
                    for line in text.lines() {
                        lines.push(Line::styled(
                            format!("  {line}"),
                            dim.add_modifier(Modifier::ITALIC),
                        ));
                    }
                } else {
                    let words = text.split_whitespace().count();
                    lines.push(Line::styled(
                        format!("▸ thinking ({words} words; Ctrl-O shows)"),
                        selected(dim),
                    ));
                }
            }
            Entry::Tool {
                call,
                hooks,
                output,
                exit,
                status,
            } => {
                let (mark, color) = match (status, exit) {
                    (Progress::Item(ItemStatus::Running | ItemStatus::WaitingApproval), _) => {
                        ("⋯", Color::Yellow)
                    }
                    (Progress::Item(ItemStatus::Completed), Some(0) | None) => ("✓", Color::Green),
                    _ => ("✗", Color::Red),
                };
                lines.push(Line::from(vec![
                    Span::styled(format!("{mark} "), Style::default().fg(color)),
                    Span::styled(call.clone(), selected(Style::default().fg(Color::Cyan))),
                ]));
                for hook in hooks {
                    lines.push(Line::styled(format!("  {hook}"), dim));
                }
                let out: Vec<&str> = output.lines().collect();
                let shown = if expanded {
                    out.len()
                } else {
                    FOLDED_OUTPUT.min(out.len())
                };
                if out.len() > shown {
                    lines.push(Line::styled(
                        format!("  ⋮ {} more lines (Ctrl-O shows)", out.len() - shown),
                        dim,
                    ));
                }
                for line in &out[out.len() - shown..] {
                    lines.push(Line::styled(format!("  {line}"), dim));
                }
                if let Some(code) = exit.filter(|code| *code != 0) {
                    lines.push(Line::styled(
                        format!("  exit {code}"),
                        Style::default().fg(Color::Red),
                    ));
                }
            }
            Entry::TurnEnded { status, error } => {
                let text = match status {
                    TurnStatus::Interrupted => "■ interrupted".to_owned(),
                    _ => format!("✗ the turn failed: {error}"),
                };
                lines.push(Line::styled(text, Style::default().fg(Color::Red)));
            }
            Entry::Retry {
                attempt,
                max,
                at,
                error,
            } => {
                let left = at.saturating_duration_since(now).as_secs_f64().ceil();
                lines.push(Line::styled(
                    format!("↻ {error}: attempt {} of {max} in {left:.0} s", attempt + 1),
                    Style::default().fg(Color::Yellow),
                ));
            }
            Entry::Plan { explanation, steps } => {
                lines.push(Line::styled(
                    "Plan",
                    Style::default().add_modifier(Modifier::BOLD),
                ));
                if let Some(explanation) = explanation {
                    for line in explanation.lines() {
                        lines.push(Line::styled(format!("  {line}"), dim));
                    }
                }
                for (status, step) in steps {
                    let style = match status {
                        PlanStepStatus::Completed => Style::default().fg(Color::Green),
                        PlanStepStatus::InProgress => Style::default()
                            .fg(Color::Yellow)
                            .add_modifier(Modifier::BOLD),
                        PlanStepStatus::Pending => Style::default(),
                    };
                    lines.push(Line::from(vec![
                        Span::styled(format!("  {} ", plan_mark(*status)), style),
                        Span::raw(step.clone()),
                    ]));
                }
            }
            Entry::Notice(text) => {
                for line in text.lines() {
                    lines.push(Line::styled(
                        line.to_owned(),
                        Style::default().fg(Color::Magenta),
                    ));
                }
            }
        }
    }
}

/// A user's message with the hooks that ran for it, a line each after its text.
fn with_hooks(text: &str, hooks: &[crate::domain::HookRun]) -> String {
    let mut text = text.to_owned();
    for run in hooks {
        text.push('\n');
        text.push_str(&super::super::render::hook_line(run));
    }
    text
}

/// What Alt-↑/↓ select and Ctrl-O folds.
/// `text` with anything a terminal would interpret written out (`crate::text::visible`).
fn shown(text: &str) -> String {
    crate::text::visible(text).into_owned()
}

fn foldable(entry: &Entry) -> bool {
    matches!(entry, Entry::Tool { .. } | Entry::Reasoning { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fixtures::{item, tool};
    use serde_json::json;

    fn shown(transcript: &Transcript) -> Vec<String> {
        transcript
            .lines(Instant::now())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn ctrl_o_unfolds_the_selected_reasoning_alone() {
        let mut transcript = Transcript::default();
        for (id, thought) in [("i1", "first thought"), ("i2", "second thought")] {
            let text = thought.to_owned();
            let kind = ItemKind::Reasoning { text, state: None };
            transcript.item(&item(id, ItemStatus::Completed, kind));
            transcript.notice("between");
        }
        assert!(!shown(&transcript).iter().any(|l| l.contains("thought")));
        transcript.select_previous();
        transcript.select_previous();
        transcript.toggle();
        let lines = shown(&transcript);
        assert!(lines.contains(&"  first thought".to_owned()), "{lines:?}");
        assert!(
            !lines.iter().any(|l| l.contains("second thought")),
            "{lines:?}"
        );
        // Selecting stops at the oldest; past the newest there is no selection.
        transcript.select_previous();
        assert_eq!(transcript.selected, Some(0));
        transcript.select_next();
        transcript.select_next();
        assert_eq!(transcript.selected, None);
    }

    #[test]
    fn a_plan_is_drawn_as_a_checklist() {
        use PlanStepStatus::*;
        let mut transcript = Transcript::default();
        let steps = [
            ("Read it", Completed),
            ("Fix it", InProgress),
            ("Test it", Pending),
        ];
        transcript.item(&crate::client::fixtures::plan("p1", Some("Why"), &steps));
        assert_eq!(
            shown(&transcript),
            [
                "Plan",
                "  Why",
                "  [x] Read it",
                "  [>] Fix it",
                "  [ ] Test it"
            ]
        );
    }

    /// The history is read after the stream is opened, so the stream may replay the start and
    /// the output of a call the history already shows finished: the output is not doubled.
    #[test]
    fn a_finished_item_ignores_the_older_views_the_stream_replays() {
        let call = |status: ItemStatus, output: &str| {
            tool("c1", "shell", json!({"command": "seq 1 3"}), output, status)
        };
        let mut transcript = Transcript::default();
        transcript.item(&call(ItemStatus::Completed, "1\n2\n3\n"));
        transcript.item(&call(ItemStatus::Running, ""));
        transcript.delta("c1", "1\n2\n3\n");
        transcript.item(&call(ItemStatus::Completed, "1\n2\n3\n"));
        let Entry::Tool { output, status, .. } = &transcript.entries[0] else {
            panic!("a tool entry");
        };
        assert_eq!(
            (output.as_str(), *status),
            ("1\n2\n3\n", Progress::Item(ItemStatus::Completed))
        );

        // Live, the streamed output stays when the stored one is cut shorter.
        let mut live = Transcript::default();
        let call = |status: ItemStatus, output: &str| tool("c2", "", json!({}), output, status);
        live.item(&call(ItemStatus::Running, ""));
        live.delta("c2", "a long streamed output");
        live.item(&call(ItemStatus::Completed, "a long"));
        let Entry::Tool { output, .. } = &live.entries[0] else {
            panic!("a tool entry");
        };
        assert_eq!(output, "a long streamed output");
    }
}
