//! One model call of a turn: the request, its stream read into a partial answer (live text
//! goes to clients as it comes, a burst merged into one delta), transient errors retried, and
//! the finished items handed to the actor. A refusal as longer than the context window is told
//! apart, so that the turn can compact and call again.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::error::TryRecvError;

use super::held_output::{HELD_OUTPUT_WAIT, forward_rest};
use super::spec::TurnSpec;
use crate::api::events::DeltaField;
use crate::domain::{Item, ItemKind, ItemStatus, new_id, now};
use crate::model::reader::{self, ModelEvents};
use crate::model::{ModelError, ModelEvent, ModelRequest, TokenUsage};
use crate::redact::{self, StreamRedactor};
use crate::runtime::link::{ActorLink, TurnMsg, TurnStop};
use crate::runtime::prompt;
use crate::runtime::retry::{BackOff, Retry, back_off, model_failure};
use crate::telemetry::spans;
use tracing::Instrument;

/// What one successful model call produced: its finished items (text, reasoning, tool calls
/// as requested), the tool calls still to run, and the provider's token report.
pub(super) struct Answer {
    pub items: Vec<Item>,
    pub tool_calls: Vec<Item>,
    /// The arguments of the calls whose stored ones were redacted, as the model wrote them, by
    /// item id: a tool runs what the model asked for (a `grep` for part of a secret finds it);
    /// only what is stored, shown or sent is redacted. Kept in memory only.
    pub raw_arguments: std::collections::HashMap<String, Value>,
    pub usage: Option<TokenUsage>,
}

/// Why a model call gave no answer: the turn stops; the provider refused the request as
/// larger than the context window (the turn may compact and call again); or the model is
/// unavailable, its retries used up on a transient error (the turn may go to a fallback).
pub(super) enum CallStop {
    Turn(TurnStop),
    Overflow(ModelError),
    /// Why, as the turn's error would say it.
    Unavailable(String),
}

impl CallStop {
    pub(super) fn into_turn_stop(self) -> TurnStop {
        match self {
            CallStop::Turn(stop) => stop,
            CallStop::Overflow(error) => TurnStop::Failed(model_failure(&error, 1)),
            CallStop::Unavailable(failure) => TurnStop::Failed(failure),
        }
    }
}

impl From<TurnStop> for CallStop {
    fn from(stop: TurnStop) -> CallStop {
        CallStop::Turn(stop)
    }
}

/// Calls the model, retrying transient errors. Output streamed by a failed attempt
/// is stored as `failed` and never reaches the model as if it were complete.
pub(super) async fn call_model(
    spec: &TurnSpec,
    history: &[Item],
    step: u32,
    link: &ActorLink,
) -> Result<Answer, CallStop> {
    let mut attempt = 1;
    loop {
        let model = &spec.model;
        let request = ModelRequest {
            model: model.name.clone(),
            instructions: spec.instructions.clone(),
            history: prompt::model_history(
                history,
                model.reasoning_context,
                &spec.turn_id,
                spec.reasoning_from_step,
            ),
            reasoning_context: model.reasoning_context,
            tools: spec.tools.clone(),
            max_output_tokens: model.max_output_tokens,
            cache_key: Some(spec.session_id.clone()),
            compaction: false,
        };
        let mut partial = Partial::new(spec, step);
        let span = spans::chat(
            &spec.gate.conversation_id,
            model.provider,
            &model.name,
            attempt,
        );
        spans::record_content(&span, "gen_ai.input.messages", || {
            serde_json::to_string(&request.history).unwrap_or_default()
        });
        let started = std::time::Instant::now();
        let outcome = stream_once(spec, request, &mut partial, link)
            .instrument(span.clone())
            .await;
        observe_call(spec, &span, &partial, &outcome, started.elapsed());
        match outcome {
            Ok(()) => {
                // The report covers this call's output, so it goes out after the answer is
                // stored: the meter must not count that output twice.
                let usage = partial.usage.take();
                let mut answer = partial.finish(link).await?;
                link.send(TurnMsg::ModelAnswered {
                    usage,
                    model: spec.model.id.clone(),
                });
                answer.usage = usage;
                return Ok(answer);
            }
            Err(AttemptError::Interrupted) => {
                partial.close(ItemStatus::Interrupted, link).await?;
                return Err(TurnStop::Interrupted.into());
            }
            Err(AttemptError::Model(error @ ModelError::ContextOverflow(_))) => {
                partial.close(ItemStatus::Failed, link).await?;
                return Err(CallStop::Overflow(error));
            }
            Err(AttemptError::Model(error)) => {
                partial.close(ItemStatus::Failed, link).await?;
                let announce = |retry: Retry| link.send(TurnMsg::Retry(retry));
                let waits = (&spec.cancel, Some(spec.retry_now.as_ref()));
                // A model that is down, overloaded or rate limited may have a fallback; a
                // refused request would be refused by any model.
                let transient = matches!(error, ModelError::Transient { .. });
                match back_off(&spec.retry, attempt, &error, waits, announce).await {
                    BackOff::Retry => attempt += 1,
                    BackOff::GiveUp if transient => {
                        return Err(CallStop::Unavailable(model_failure(&error, attempt)));
                    }
                    BackOff::GiveUp => {
                        return Err(TurnStop::Failed(model_failure(&error, attempt)).into());
                    }
                    BackOff::WaitTooLong(message) => return Err(CallStop::Unavailable(message)),
                    BackOff::Interrupted => return Err(TurnStop::Interrupted.into()),
                }
            }
        }
    }
}

enum AttemptError {
    Interrupted,
    Model(ModelError),
}

/// One attempt as traces and metrics see it: its outcome, time to first output and tokens.
fn observe_call(
    spec: &TurnSpec,
    span: &tracing::Span,
    partial: &Partial,
    outcome: &Result<(), AttemptError>,
    took: Duration,
) {
    let model = &spec.model;
    let first = partial
        .first_output
        .map(|at| at.saturating_duration_since(partial.started));
    if let Some(first) = first {
        span.record("openvaala.time_to_first_token_s", first.as_secs_f64());
    }
    if let Some(usage) = &partial.usage {
        span.record("gen_ai.response.model", model.name.as_str());
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            usage.cache_read_tokens,
        );
    }
    let result = match outcome {
        Ok(()) => "ok",
        Err(AttemptError::Interrupted) => "interrupted",
        Err(AttemptError::Model(error)) => {
            spans::failed(span, &error.to_string());
            "error"
        }
    };
    if outcome.is_ok() {
        spans::record_content(span, "gen_ai.output.messages", || {
            partial
                .texts
                .iter()
                .filter(|(kind, ..)| *kind == TextKind::Answer)
                .filter_map(|(_, item, _)| match &item.kind {
                    ItemKind::AgentMessage { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        });
    }
    crate::telemetry::metrics::model_call(&model.id, result, took, first, partial.usage.as_ref());
}

/// One model call: streams its events into `partial`, forwarding live text to clients.
async fn stream_once(
    spec: &TurnSpec,
    request: ModelRequest,
    partial: &mut Partial,
    link: &ActorLink,
) -> Result<(), AttemptError> {
    let mut events = reader::read_ahead(spec.model.client.stream(request));
    let chunk_timeout = Duration::from_millis(spec.retry.chunk_timeout_ms);
    // An event that arrived while text was being merged, and comes next.
    let mut ready: Option<Option<ModelResult>> = None;
    loop {
        if spec.cancel.is_cancelled() {
            return Err(AttemptError::Interrupted);
        }
        let next = match ready.take() {
            Some(event) => Ok(event),
            None => tokio::select! {
                next = tokio::time::timeout(chunk_timeout, events.recv()) => next,
                () = spec.cancel.cancelled() => return Err(AttemptError::Interrupted),
                // A model that pauses shows what it wrote: the few bytes held back for a secret
                // go out after a moment.
                () = tokio::time::sleep(HELD_OUTPUT_WAIT), if partial.holds_back() => {
                    partial.flush(link);
                    continue;
                }
            },
        };
        let event = match next {
            Err(_elapsed) => {
                return Err(AttemptError::Model(ModelError::transient(format!(
                    "no data from the model for {:.1} s",
                    chunk_timeout.as_secs_f64()
                ))));
            }
            Ok(None) => {
                return Err(AttemptError::Model(ModelError::transient(
                    "the model's stream ended before its completion marker",
                )));
            }
            // A provider's error may echo the credentials: they go no further.
            Ok(Some(Err(error))) => {
                return Err(AttemptError::Model(crate::redact::model_error(error)));
            }
            Ok(Some(Ok(event))) => event,
        };
        if partial.first_output.is_none()
            && matches!(
                event,
                ModelEvent::TextDelta(_)
                    | ModelEvent::ReasoningDelta(_)
                    | ModelEvent::ToolCall { .. }
            )
        {
            partial.first_output = Some(std::time::Instant::now());
        }
        match event {
            ModelEvent::TextDelta(mut delta) => {
                ready = merge_ready(&mut events, TextKind::Answer, &mut delta);
                partial.text(TextKind::Answer, delta, link);
            }
            ModelEvent::ReasoningDelta(mut delta) => {
                ready = merge_ready(&mut events, TextKind::Reasoning, &mut delta);
                partial.text(TextKind::Reasoning, delta, link);
            }
            ModelEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => partial.tool_calls.push((call_id, name, arguments)),
            ModelEvent::ReasoningState(state) => partial.reasoning_state(state, link),
            ModelEvent::Usage(usage) => partial.usage = Some(usage),
            // Only restarts the silence timeout, which every event does.
            ModelEvent::Progress => {}
            ModelEvent::Done => return Ok(()),
        }
    }
}

type ModelResult = Result<ModelEvent, ModelError>;

/// The most text one merged delta carries.
pub(super) const MERGED_DELTA_MAX: usize = 64 * 1024;

/// Appends to `delta` the deltas of the same kind that have already been read, so a burst goes
/// out to clients as one `item.delta` instead of thousands, each of which every subscriber
/// would have to be sent. Nothing waits: only what has arrived is merged, so a provider
/// streaming at its own pace still shows every delta as it comes. Returns what it took and
/// could not merge (`Some(None)`: the stream ended), which must be handled next.
fn merge_ready(
    events: &mut ModelEvents,
    kind: TextKind,
    delta: &mut String,
) -> Option<Option<ModelResult>> {
    while delta.len() < MERGED_DELTA_MAX {
        let next = match events.try_recv() {
            Ok(event) => Some(event),
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => None,
        };
        match (kind, next) {
            (TextKind::Answer, Some(Ok(ModelEvent::TextDelta(more))))
            | (TextKind::Reasoning, Some(Ok(ModelEvent::ReasoningDelta(more)))) => {
                delta.push_str(&more);
            }
            (_, other) => return Some(other),
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq)]
enum TextKind {
    Answer,
    Reasoning,
}

/// The items of the model call in progress.
struct Partial {
    /// Which model call of the turn this is (1, 2, …), stamped on its items.
    step: u32,
    session_id: String,
    turn_id: String,
    /// Streaming text items in the order they started: (kind, item, what of its text is still
    /// held back from clients until it is known to hold no secret).
    texts: Vec<(TextKind, Item, StreamRedactor)>,
    tool_calls: Vec<(String, String, Value)>,
    /// The provider's token report for this call, sent once the answer is stored.
    usage: Option<TokenUsage>,
    /// When the call began, and when its first output (text, reasoning or a tool call) came.
    started: std::time::Instant,
    first_output: Option<std::time::Instant>,
}

impl Partial {
    fn new(spec: &TurnSpec, step: u32) -> Partial {
        Partial {
            step,
            session_id: spec.session_id.clone(),
            turn_id: spec.turn_id.clone(),
            texts: Vec::new(),
            tool_calls: Vec::new(),
            started: std::time::Instant::now(),
            first_output: None,
            usage: None,
        }
    }

    fn new_item(&self, kind: ItemKind, status: ItemStatus) -> Item {
        Item {
            id: new_id("m"),
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            seq: 0, // assigned by the actor
            created_at: now(),
            status,
            compacted: false,
            step: Some(self.step),
            kind,
        }
    }

    /// Appends streamed text to the current item of that kind, starting one if needed.
    fn text(&mut self, kind: TextKind, delta: String, link: &ActorLink) {
        if delta.is_empty() {
            return;
        }
        let current = self.texts.last().filter(|(k, _, _)| *k == kind).is_some();
        if !current {
            let item_kind = match kind {
                TextKind::Answer => ItemKind::AgentMessage {
                    text: String::new(),
                },
                TextKind::Reasoning => ItemKind::Reasoning {
                    text: String::new(),
                    state: None,
                },
            };
            let item = self.new_item(item_kind, ItemStatus::Running);
            link.send(TurnMsg::Started { item: item.clone() });
            self.texts.push((kind, item, StreamRedactor::default()));
        }
        let (_, item, redactor) = self.texts.last_mut().expect("a current text item");
        if let ItemKind::AgentMessage { text } | ItemKind::Reasoning { text, .. } = &mut item.kind {
            text.push_str(&delta);
        }
        let delta = redactor.push(&delta);
        if !delta.is_empty() {
            link.send(TurnMsg::Delta {
                item_id: item.id.clone(),
                field: DeltaField::Text,
                delta,
            });
        }
    }

    /// Whether the text being streamed holds some bytes back (they could begin a secret).
    fn holds_back(&self) -> bool {
        self.texts
            .last()
            .is_some_and(|(_, _, redactor)| redactor.holds_back())
    }

    /// Sends what the text being streamed held back: the model paused, and what it wrote shows.
    fn flush(&mut self, link: &ActorLink) {
        if let Some((_, item, redactor)) = self.texts.last_mut() {
            let delta = redactor.flush();
            if !delta.is_empty() {
                link.send(TurnMsg::Delta {
                    item_id: item.id.clone(),
                    field: DeltaField::Text,
                    delta,
                });
            }
        }
    }

    /// Keeps the provider's state of the reasoning just streamed with its item (one is started
    /// if the provider sent no readable reasoning).
    fn reasoning_state(&mut self, state: Value, link: &ActorLink) {
        let current = self
            .texts
            .iter_mut()
            .rev()
            .find(|(kind, _, _)| *kind == TextKind::Reasoning);
        let item = match current {
            Some((_, item, _)) => item,
            None => {
                let item = self.new_item(
                    ItemKind::Reasoning {
                        text: String::new(),
                        state: None,
                    },
                    ItemStatus::Running,
                );
                link.send(TurnMsg::Started { item: item.clone() });
                self.texts
                    .push((TextKind::Reasoning, item, StreamRedactor::default()));
                &mut self.texts.last_mut().expect("just pushed").1
            }
        };
        if let ItemKind::Reasoning { state: kept, .. } = &mut item.kind {
            *kept = Some(state);
        }
    }

    /// Stores the text items with a final status (after a failure or an interrupt).
    async fn close(&mut self, status: ItemStatus, link: &ActorLink) -> Result<(), TurnStop> {
        for (_, mut item, mut redactor) in self.texts.drain(..) {
            item.status = status;
            link.store(finished_text(&mut item, &mut redactor, link))
                .await?;
        }
        Ok(())
    }

    /// Stores the finished answer: its text items, then its tool calls as `running` (before they
    /// run: write-ahead).
    async fn finish(mut self, link: &ActorLink) -> Result<Answer, TurnStop> {
        let mut items: Vec<Item> = std::mem::take(&mut self.texts)
            .into_iter()
            .map(|(_, mut item, mut redactor)| {
                item.status = ItemStatus::Completed;
                finished_text(&mut item, &mut redactor, link)
            })
            .collect();
        let mut raw_arguments = std::collections::HashMap::new();
        let mut tool_calls: Vec<Item> = std::mem::take(&mut self.tool_calls)
            .into_iter()
            .map(|(call_id, name, raw)| {
                // Stored and shown without a configured secret; run as written.
                let mut arguments = raw.clone();
                redact::redact_json(&mut arguments);
                let redacted = arguments != raw;
                let item = self.new_item(
                    ItemKind::ToolCall {
                        hooks: Vec::new(),
                        call_id,
                        name,
                        arguments,
                        output: String::new(),
                        exit_code: None,
                        files: None,
                        images: Vec::new(),
                        denied: false,
                    },
                    ItemStatus::Running,
                );
                if redacted {
                    raw_arguments.insert(item.id.clone(), raw);
                }
                item
            })
            .collect();
        // One append for the whole answer: a step with many tool calls costs one fsync.
        let all: Vec<Item> = items.iter().chain(&tool_calls).cloned().collect();
        let seqs = link.store_all(all).await?;
        for (item, seq) in items.iter_mut().chain(tool_calls.iter_mut()).zip(seqs) {
            item.seq = seq;
        }
        Ok(Answer {
            items,
            tool_calls,
            raw_arguments,
            usage: None,
        })
    }
}

/// A streamed text item at its end: what its redactor still held goes out, and the item is
/// stored with its whole text redacted (a secret the model wrote is never stored).
fn finished_text(item: &mut Item, redactor: &mut StreamRedactor, link: &ActorLink) -> Item {
    forward_rest(redactor, item, DeltaField::Text, link);
    if let ItemKind::AgentMessage { text } | ItemKind::Reasoning { text, .. } = &mut item.kind
        && let std::borrow::Cow::Owned(clean) = redact::redact(text)
    {
        *text = clean;
    }
    item.clone()
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    fn text(text: &str) -> ModelResult {
        Ok(ModelEvent::TextDelta(text.to_owned()))
    }

    #[test]
    fn deltas_that_have_arrived_are_merged_up_to_the_first_other_event() {
        let (sender, mut events) = mpsc::unbounded_channel();
        for event in [
            text("b"),
            text("c"),
            Ok(ModelEvent::ReasoningDelta("r".to_owned())),
            text("d"),
        ] {
            sender.send(event).unwrap();
        }
        let mut delta = "a".to_owned();
        let next = merge_ready(&mut events, TextKind::Answer, &mut delta);
        assert_eq!(delta, "abc");
        assert_eq!(
            next,
            Some(Some(Ok(ModelEvent::ReasoningDelta("r".to_owned()))))
        );
        // Nothing more has arrived: nothing waits, nothing is taken.
        let mut delta = "d".to_owned();
        assert_eq!(events.try_recv(), Ok(text("d")));
        assert_eq!(merge_ready(&mut events, TextKind::Answer, &mut delta), None);
        // The end of the stream is handed back, to be handled next.
        drop(sender);
        assert_eq!(
            merge_ready(&mut events, TextKind::Answer, &mut delta),
            Some(None)
        );
        assert_eq!(delta, "d");
    }

    #[test]
    fn a_merged_delta_stops_growing_at_its_limit() {
        let (sender, mut events) = mpsc::unbounded_channel();
        let piece = "x".repeat(1024);
        for _ in 0..100 {
            sender.send(text(&piece)).unwrap();
        }
        let mut delta = String::new();
        assert_eq!(merge_ready(&mut events, TextKind::Answer, &mut delta), None);
        assert_eq!(delta.len(), MERGED_DELTA_MAX);
        let left = std::iter::from_fn(|| events.try_recv().ok()).count();
        assert_eq!(left, 100 - MERGED_DELTA_MAX / 1024);
    }
}
