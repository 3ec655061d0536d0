//! Compaction: when a conversation's history nears the model's context window, one call
//! to the compaction model writes a cumulative summary of the older part; from then on the model
//! reads the summary plus the recent part. Nothing is deleted: the summary is one more item, and
//! the items it stands for are marked `compacted` when a history is read.
//!
//! This module is pure history arithmetic plus the one model call; the actor stores the summary
//! and the turn loop decides when to compact.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::retry::{self, BackOff, Retry};
use super::usage::{UsageTracker, estimate_item_tokens};
use crate::api::events::CompactionReason;
use crate::config::RetryConfig;
pub use crate::domain::mark_compacted;
use crate::domain::{
    Item, ItemKind, ItemStatus, MessageSource, latest_summary, new_id, now, request_item,
};
use crate::model::reader;
use crate::model::tokens::Tokenizer;
use crate::model::{ModelClient, ModelError, ModelEvent, ModelRequest, TokenUsage};

/// The recent part the model keeps seeing after a compaction: at least this share of the window.
const KEEP_SHARE: f64 = 0.2;

/// What the compaction model is asked to do.
const INSTRUCTIONS: &str = "You are compacting a conversation between a user and a coding agent \
so that the agent can continue it with less context. Write a summary that stands for the \
conversation above: the user's goals and requests, decisions made, files and commands \
involved, results and errors, and what remains to do. If the conversation starts with an \
earlier summary, fold it in: your summary replaces it. Write only the summary.";

const REQUEST: &str = "Summarize the conversation above now, as instructed.";

/// The history as the model reads it: the latest summary first, then what it does not cover.
/// (The summary is stored after the items it covers, and after some it does not.)
pub fn model_view(history: &[Item]) -> Vec<Item> {
    let mut view: Vec<Item> = Vec::with_capacity(history.len());
    if let Some(latest) = latest_summary(history) {
        view.push(history[latest].clone());
    }
    view.extend(
        history
            .iter()
            .filter(|item| !item.compacted && !matches!(item.kind, ItemKind::Summary { .. }))
            .cloned(),
    );
    view
}

/// Whether a request of `used` tokens has reached the compaction threshold:
/// `min(0.8 × context_window, context_window − max_output_tokens)`.
pub fn needed(usage: &UsageTracker, context_window: u64, max_output_tokens: u64) -> bool {
    let view = usage.view(context_window, max_output_tokens);
    view.used_tokens >= view.threshold_tokens
}

/// The older part of a model view that a compaction summarizes.
#[derive(Debug)]
pub struct Plan {
    /// What the compaction model reads: the previous summary (if any) and the older items.
    pub to_summarize: Vec<Item>,
    /// The seq of the last item the summary stands for.
    pub covers_through_seq: u64,
}

/// Where to cut `view` (the model view, summary first): the recent part kept is the shortest
/// that holds at least `KEEP_SHARE` of the window and starts at a complete step: never inside
/// one model call's answer (a tool call and its result are one item, so they never part).
///
/// When the whole view is shorter than that, an automatic compaction has nothing to gain
/// (`None`); a manual one keeps only the last turn and summarizes what came before it. With
/// nothing before the last turn but a summary (a single turn, or a press right after a
/// compaction) there is nothing older to compact (`None`): the latest turn is never summarized
/// by a press of the button.
pub fn plan(view: &[Item], context_window: u64, reason: CompactionReason) -> Option<Plan> {
    let keep_tokens = (context_window as f64 * KEEP_SHARE) as u64;
    let starts_step = |index: usize| -> bool {
        let item = &view[index];
        match &item.kind {
            ItemKind::UserMessage { .. } | ItemKind::Notice { .. } => true,
            ItemKind::Summary { .. } => false,
            _ => {
                index == 0 || {
                    let before = &view[index - 1];
                    (before.turn_id.as_str(), before.step) != (item.turn_id.as_str(), item.step)
                }
            }
        }
    };
    let mut kept_tokens = 0;
    let mut cut = None;
    for index in (0..view.len()).rev() {
        // The cut needs sizes, not the model's exact count: the default encoding does.
        kept_tokens += estimate_item_tokens(Tokenizer::default(), &view[index]);
        if kept_tokens >= keep_tokens && starts_step(index) {
            cut = Some(index);
            break;
        }
    }
    let cut = match (cut, reason) {
        (Some(cut), _) => cut,
        (None, CompactionReason::Auto) => return None,
        (None, CompactionReason::Manual) => view
            .iter()
            .rposition(|item| {
                matches!(
                    item.kind,
                    ItemKind::UserMessage {
                        source: MessageSource::User,
                        ..
                    }
                )
            })
            .filter(|&last_turn| {
                view[..last_turn]
                    .iter()
                    .any(|item| !matches!(item.kind, ItemKind::Summary { .. }))
            })?,
    };
    plan_up_to(view, cut)
}

/// Everything before the turn `turn_id` (after a provider refused one of its calls as longer
/// than the window, when `plan`'s cut would keep it all): `None` when only a summary, or
/// nothing, came before it.
pub fn plan_before_turn(view: &[Item], turn_id: &str) -> Option<Plan> {
    let cut = view.iter().position(|item| item.turn_id == turn_id)?;
    plan_up_to(view, cut)
}

/// The plan that summarizes `view[..cut]`, if it holds more than a summary.
fn plan_up_to(view: &[Item], cut: usize) -> Option<Plan> {
    let to_summarize = view[..cut].to_vec();
    let covers_through_seq = to_summarize
        .iter()
        .filter(|item| !matches!(item.kind, ItemKind::Summary { .. }))
        .map(|item| item.seq)
        .max()?;
    Some(Plan {
        to_summarize,
        covers_through_seq,
    })
}

/// The model a compaction calls: the agent's `compact_model`.
pub struct Compactor {
    pub client: Arc<dyn ModelClient>,
    pub model_name: String,
    pub max_output_tokens: u64,
    pub retry: RetryConfig,
}

/// Why a compaction did not produce a summary.
#[derive(Debug)]
pub enum Failure {
    Interrupted,
    Failed(String),
}

impl Compactor {
    /// One call to the compaction model (retried like any model call when the error is
    /// transient). Returns the summary's text and the provider's token report.
    pub async fn summarize(
        &self,
        plan: &Plan,
        cancel: &CancellationToken,
        on_retry: impl Fn(Retry),
    ) -> Result<(String, Option<TokenUsage>), Failure> {
        // Tool calls go as text: no tools are offered to a summary, and some protocols refuse
        // tool blocks in a request without tools. Failed attempts' partial answers never reach
        // a model, here as in a turn.
        let mut history: Vec<Item> = plan
            .to_summarize
            .iter()
            .filter(|item| item.sent_to_model())
            .map(as_compaction_reads_it)
            .collect();
        let last = history.last().cloned();
        history.push(request_item(
            REQUEST.to_owned(),
            last.as_ref()
                .map(|i| i.session_id.clone())
                .unwrap_or_default(),
            last.map(|i| i.turn_id).unwrap_or_default(),
        ));
        let request = ModelRequest {
            model: self.model_name.clone(),
            instructions: Some(INSTRUCTIONS.to_owned()),
            history,
            tools: Vec::new(),
            max_output_tokens: self.max_output_tokens,
            reasoning_context: None,
            cache_key: None,
            compaction: true,
        };
        let mut attempt = 1;
        loop {
            let error = match self.once(request.clone(), cancel).await? {
                Ok(done) => return Ok(done),
                Err(error) => error,
            };
            match retry::back_off(&self.retry, attempt, &error, (cancel, None), &on_retry).await {
                BackOff::Retry => attempt += 1,
                BackOff::GiveUp => {
                    return Err(Failure::Failed(format!(
                        "the compaction model failed: {error}"
                    )));
                }
                BackOff::WaitTooLong(message) => {
                    return Err(Failure::Failed(format!(
                        "the compaction model failed: {message}"
                    )));
                }
                BackOff::Interrupted => return Err(Failure::Interrupted),
            }
        }
    }

    /// One attempt: the whole answer's text, or the model's error.
    async fn once(
        &self,
        request: ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<Result<(String, Option<TokenUsage>), ModelError>, Failure> {
        let mut events = reader::read_ahead(self.client.stream(request));
        let mut text = String::new();
        let mut usage = None;
        let chunk_timeout = Duration::from_millis(self.retry.chunk_timeout_ms);
        loop {
            let event = tokio::select! {
                event = tokio::time::timeout(chunk_timeout, events.recv()) => event,
                () = cancel.cancelled() => return Err(Failure::Interrupted),
            };
            let Ok(event) = event else {
                return Ok(Err(ModelError::transient(format!(
                    "no data from the model for {:.1} s",
                    chunk_timeout.as_secs_f64()
                ))));
            };
            match event {
                None => {
                    return Ok(Err(ModelError::transient(
                        "the model's stream ended before its completion marker",
                    )));
                }
                // A provider's error may echo the credentials: they go no further.
                Some(Err(error)) => return Ok(Err(crate::redact::model_error(error))),
                Some(Ok(ModelEvent::TextDelta(delta))) => text.push_str(&delta),
                Some(Ok(ModelEvent::Usage(reported))) => usage = Some(reported),
                Some(Ok(ModelEvent::Done)) => {
                    let text = text.trim().to_owned();
                    if text.is_empty() {
                        return Err(Failure::Failed(
                            "the compaction model wrote an empty summary".to_owned(),
                        ));
                    }
                    return Ok(Ok((text, usage)));
                }
                // Reasoning is not part of the summary; tools were not offered; progress only
                // restarts the silence timeout.
                Some(Ok(
                    ModelEvent::ReasoningDelta(_)
                    | ModelEvent::ReasoningState(_)
                    | ModelEvent::ToolCall { .. }
                    | ModelEvent::Progress,
                )) => {}
            }
        }
    }
}

/// Most of a tool's output the compaction model reads: its head and its tail.
const TOOL_OUTPUT_READ: usize = 4_000;

/// An item as the compaction model reads it: a tool call becomes text of the answer it belongs
/// to, and reasoning goes without the provider state meant for the model that wrote it.
fn as_compaction_reads_it(item: &Item) -> Item {
    if let ItemKind::Reasoning { text, .. } = &item.kind {
        let mut plain = item.clone();
        plain.kind = ItemKind::Reasoning {
            text: text.clone(),
            state: None,
        };
        return plain;
    }
    let ItemKind::ToolCall {
        name,
        arguments,
        output,
        exit_code,
        ..
    } = &item.kind
    else {
        return item.clone();
    };
    let output = crate::tools::cap_head_and_tail(output, TOOL_OUTPUT_READ);
    let exit = exit_code.map_or(String::new(), |code| format!(", exit code {code}"));
    let mut flat = item.clone();
    flat.kind = ItemKind::AgentMessage {
        text: format!("[called the {name} tool with {arguments}{exit}; it returned:]\n{output}"),
    };
    flat
}

/// The summary item of a finished compaction (its seq is given when it is stored).
pub fn summary_item(session_id: &str, turn_id: &str, text: String, plan: &Plan) -> Item {
    Item {
        id: new_id("m"),
        session_id: session_id.to_owned(),
        turn_id: turn_id.to_owned(),
        seq: 0,
        created_at: now(),
        status: ItemStatus::Completed,
        compacted: false,
        step: None,
        kind: ItemKind::Summary {
            text,
            covers_through_seq: plan.covers_through_seq,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(seq: u64, turn: &str, step: Option<u32>, kind: ItemKind) -> Item {
        Item {
            id: format!("m_{seq}"),
            session_id: "s_1".to_owned(),
            turn_id: turn.to_owned(),
            seq,
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step,
            kind,
        }
    }

    fn user(seq: u64, turn: &str, text: &str) -> Item {
        item(
            seq,
            turn,
            None,
            ItemKind::UserMessage {
                hooks: Vec::new(),
                text: text.to_owned(),
                source: MessageSource::User,
                from_session_id: None,
                images: Vec::new(),
                command: None,
            },
        )
    }

    fn answer(seq: u64, turn: &str, step: u32, text: &str) -> Item {
        item(
            seq,
            turn,
            Some(step),
            ItemKind::AgentMessage {
                text: text.to_owned(),
            },
        )
    }

    fn call(seq: u64, turn: &str, step: u32) -> Item {
        item(
            seq,
            turn,
            Some(step),
            ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: format!("call_{seq}"),
                name: "shell".to_owned(),
                arguments: json!({ "command": "ls" }),
                output: "x".repeat(400),
                exit_code: Some(0),
                files: None,
                images: Vec::new(),
                denied: false,
            },
        )
    }

    fn summary(seq: u64, covers: u64) -> Item {
        item(
            seq,
            "t_2",
            None,
            ItemKind::Summary {
                text: format!("summary through {covers}"),
                covers_through_seq: covers,
            },
        )
    }

    /// Three turns; the second has a step with text and a tool call, then a final answer.
    fn history() -> Vec<Item> {
        vec![
            user(1, "t_1", &"first ".repeat(100)),
            answer(2, "t_1", 1, &"reply ".repeat(100)),
            user(3, "t_2", "second"),
            answer(4, "t_2", 1, "let me look"),
            call(5, "t_2", 1),
            answer(6, "t_2", 2, &"found ".repeat(100)),
            user(7, "t_3", "third"),
            answer(8, "t_3", 1, &"done ".repeat(100)),
        ]
    }

    #[test]
    fn the_cut_keeps_a_fifth_of_the_window_and_never_splits_a_step() {
        let history = history();
        // A window whose fifth is about the last turn plus part of the second.
        let plan = plan(&history, 1_000, CompactionReason::Auto).expect("something to compact");
        let last = plan.to_summarize.last().unwrap();
        // Items 4 and 5 are one model call: the cut is before 4 or after 5, never between.
        assert_ne!(last.seq, 4, "a step was split");
        let kept: u64 = history[plan.to_summarize.len()..]
            .iter()
            .map(|item| estimate_item_tokens(Tokenizer::default(), item))
            .sum();
        assert!(
            kept >= 200,
            "kept {kept} tokens, less than a fifth of 1,000"
        );
        assert_eq!(plan.covers_through_seq, last.seq);
    }

    #[test]
    fn nothing_is_compacted_automatically_while_all_of_it_fits_in_a_fifth() {
        assert!(plan(&history(), 1_000_000, CompactionReason::Auto).is_none());
        // A manual compaction still summarizes all but the last turn.
        let manual = plan(&history(), 1_000_000, CompactionReason::Manual).expect("a manual plan");
        assert_eq!(manual.covers_through_seq, 6);
        assert_eq!(manual.to_summarize.len(), 6);
    }

    /// After a refusal as too long: everything before the running turn, whoever started it
    /// (a sub-agent's session has no user's message to cut at).
    #[test]
    fn a_refused_turn_keeps_itself_and_summarizes_all_before_it() {
        let mut agents_turns = history();
        for item in &mut agents_turns {
            if let ItemKind::UserMessage { source, .. } = &mut item.kind {
                *source = MessageSource::Agent;
            }
        }
        assert!(plan(&agents_turns, 1_000_000, CompactionReason::Manual).is_none());
        let plan = plan_before_turn(&agents_turns, "t_3").expect("a plan");
        assert_eq!(plan.covers_through_seq, 6);
        assert_eq!(plan.to_summarize.len(), 6);
        let plan = plan_before_turn(&agents_turns, "t_2").expect("a plan");
        assert_eq!(plan.covers_through_seq, 2);
        // The first turn has nothing before it.
        assert!(plan_before_turn(&agents_turns, "t_1").is_none());
    }

    #[test]
    fn a_manual_compaction_never_summarizes_the_latest_turn() {
        // A single turn: nothing older than it.
        let one_turn = history()[..2].to_vec();
        assert!(plan(&one_turn, 1_000_000, CompactionReason::Manual).is_none());
        // Right after a compaction: only the summary is older than the last turn.
        let mut items = history();
        items.push(summary(9, 6));
        mark_compacted(&mut items);
        let view = model_view(&items);
        assert!(plan(&view, 1_000_000, CompactionReason::Manual).is_none());
    }

    #[test]
    fn the_latest_summary_stands_for_what_it_covers_and_for_older_summaries() {
        let mut items = history();
        items.push(summary(9, 3));
        items.push(user(10, "t_4", "fourth"));
        items.push(summary(11, 6));
        mark_compacted(&mut items);
        let compacted: Vec<u64> = items
            .iter()
            .filter(|i| i.compacted)
            .map(|i| i.seq)
            .collect();
        assert_eq!(compacted, vec![1, 2, 3, 4, 5, 6, 9]);
        let view = model_view(&items);
        let seqs: Vec<u64> = view.iter().map(|i| i.seq).collect();
        assert_eq!(
            seqs,
            vec![11, 7, 8, 10],
            "the summary first, then what it does not cover"
        );
    }

    #[test]
    fn a_view_with_a_summary_is_cut_after_it() {
        let mut items = history();
        items.push(summary(9, 3));
        mark_compacted(&mut items);
        let view = model_view(&items);
        let plan = plan(&view, 1_000_000, CompactionReason::Manual).expect("a manual plan");
        // The old summary is read again and folded in; the new one covers through seq 6.
        assert!(matches!(
            plan.to_summarize[0].kind,
            ItemKind::Summary { .. }
        ));
        assert_eq!(plan.covers_through_seq, 6);
    }

    #[test]
    fn the_threshold_is_the_smaller_of_four_fifths_and_the_window_minus_the_output() {
        let mut usage = UsageTracker::default();
        usage.report(7_000);
        assert!(!needed(&usage, 10_000, 2_000));
        usage.report(7_999);
        assert!(!needed(&usage, 10_000, 2_000));
        usage.report(8_000);
        assert!(needed(&usage, 10_000, 2_000));
        usage.report(6_000);
        assert!(
            needed(&usage, 10_000, 4_000),
            "10,000 − 4,000 is below 8,000"
        );
    }
}
