//! The turn loop: model call → the tools it asks for → results back to the model → …
//! until it answers without tool calls. The loop runs in its own task and owns no files: every
//! item it produces goes to the conversation actor (`TurnMsg`), which stores it write-ahead and
//! publishes it, so there is still exactly one writer per conversation.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio_util::sync::CancellationToken;

use super::approvals::{ApprovalOutcome, ApprovalRequest, CallGate};
use super::collab;
use super::compaction::{self, Compactor, Failure};
use super::link::{ActorLink, FromTurn, TurnMsg, TurnStop};
use super::prompt;
use super::retry::{BackOff, Retry, back_off, model_failure};
use super::usage::{UsageTracker, context_tokens};
use crate::api::events::CompactionReason;
use crate::api::events::DeltaField;
use crate::config::{ReasoningContext, RetryConfig};
use crate::domain::{FileChanges, Item, ItemKind, ItemStatus, TurnStatus, new_id, now};
use crate::model::reader::{self, ModelEvents};
use crate::model::{ModelClient, ModelError, ModelEvent, ModelRequest, TokenUsage, ToolSpec};
use crate::permissions::policy::escalation;
use crate::permissions::{Permission, Verdict};
use crate::redact::{self, StreamRedactor};
use crate::tools::{self, ToolContext, ToolResult, ToolStatus};

/// Everything a turn needs, handed over by the actor when the turn starts.
pub struct TurnSpec {
    pub session_id: String,
    pub turn_id: String,
    pub client: Arc<dyn ModelClient>,
    pub model_name: String,
    pub instructions: Option<String>,
    /// The session's history so far, the messages of this turn included.
    pub history: Vec<Item>,
    pub tools: Vec<ToolSpec>,
    pub tool_context: ToolContext,
    /// Which calls run, ask a user first, or are refused.
    pub gate: Arc<CallGate>,
    pub max_output_tokens: u64,
    pub retry: RetryConfig,
    pub max_steps: u32,
    pub cancel: CancellationToken,
    /// Cuts short a wait before the model call's next attempt.
    pub retry_now: Arc<tokio::sync::Notify>,
    /// The model's window, and the usage at the start of the turn (its messages included): the
    /// turn keeps counting, and compacts before a model call that would reach the threshold.
    pub context_window: u64,
    pub usage: UsageTracker,
    pub compactor: Compactor,
    /// Which earlier reasoning the model takes back; unset: that of this turn.
    pub reasoning_context: Option<ReasoningContext>,
    /// Whether the provider takes reasoning back at all (`model::reasoning_carried`): if not,
    /// reasoning tokens take no room in the next request.
    pub reasoning_carried: bool,
    /// Snapshots of the working directory around calls that may change files.
    pub files: Option<super::checkpointing::TurnFiles>,
}

/// Runs a turn of `session_id` to its end. Always sends exactly one `Ended`, last.
pub async fn run(spec: TurnSpec, session_id: Arc<str>, actor: mpsc::UnboundedSender<FromTurn>) {
    let link = ActorLink::new(actor, session_id);
    let (status, error) = match drive(spec, &link).await {
        Ok(()) => (TurnStatus::Completed, None),
        Err(TurnStop::Interrupted) => (TurnStatus::Interrupted, None),
        Err(TurnStop::Failed(error)) => (TurnStatus::Failed, Some(error)),
    };
    link.send(TurnMsg::Ended { status, error });
}

async fn drive(mut spec: TurnSpec, link: &ActorLink) -> Result<(), TurnStop> {
    // The agent's MCP servers start on its first turn; their tools come after the built-ins.
    // A slow start must not keep an interrupt waiting.
    let mcp_tools = tokio::select! {
        tools = tools::mcp_specs(&spec.tool_context) => tools,
        () = spec.cancel.cancelled() => return Err(TurnStop::Interrupted),
    };
    spec.tools.extend(mcp_tools);
    let mut history = spec.history.clone();
    let mut usage = spec.usage;
    let mut step = 0;
    loop {
        if spec.cancel.is_cancelled() {
            return Err(TurnStop::Interrupted);
        }
        if step >= spec.max_steps {
            return Err(TurnStop::Failed(format!(
                "the turn reached its limit of {} model calls (turn.max_steps)",
                spec.max_steps
            )));
        }
        step += 1;
        for steered in link.take_steered().await {
            usage.add(&steered);
            history.push(steered);
        }
        if compaction::needed(&usage, spec.context_window, spec.max_output_tokens) {
            compact(&spec, &mut history, &mut usage, link, false).await?;
        }

        let answer = match call_model(&spec, &history, step, link).await {
            Ok(answer) => answer,
            Err(CallStop::Turn(stop)) => return Err(stop),
            // The provider counted more than the meter estimated (images, a tokenizer that
            // is only approximated): compact what came before this turn and call once more.
            Err(CallStop::Overflow(error)) => {
                if !compact(&spec, &mut history, &mut usage, link, true).await? {
                    return Err(TurnStop::Failed(format!(
                        "the model call failed: {error}; nothing older is left to compact"
                    )));
                }
                call_model(&spec, &history, step, link)
                    .await
                    .map_err(CallStop::into_turn_stop)?
            }
        };
        for item in answer.items.iter().chain(&answer.tool_calls) {
            usage.stored(item, true);
        }
        if let Some(tokens) = answer
            .usage
            .and_then(|reported| context_tokens(&reported, spec.reasoning_carried))
        {
            usage.report(tokens);
        }
        history.extend(answer.items);
        if answer.tool_calls.is_empty() {
            return Ok(());
        }
        let mut calls = answer.tool_calls.into_iter().peekable();
        while let Some(call) = calls.next() {
            // Sub-agents asked for in one answer start together, in one request to the actor.
            let mut batch = vec![call];
            let spawns_freely = spec.gate.permissions.tool("spawn_agent") == Permission::Allow;
            while tool_name(&batch[0]) == "spawn_agent"
                && spawns_freely
                && calls
                    .peek()
                    .is_some_and(|next| tool_name(next) == "spawn_agent")
            {
                batch.extend(calls.next());
            }
            let results = if batch.len() > 1 {
                let arguments: Vec<&Value> = batch.iter().map(tool_arguments).collect();
                let results = collab::spawn_all(&arguments, link, &spec.cancel).await;
                results.into_iter().map(|result| (result, None)).collect()
            } else {
                vec![run_tool(&spec, &batch[0], link).await]
            };
            for (call, result) in batch.into_iter().zip(results) {
                match finish_tool_call(call, result, link).await {
                    Ok(item) => {
                        // Its call was counted with the answer (and is in the report).
                        usage.stored(&item, false);
                        history.push(item);
                    }
                    Err(stop) => {
                        // Calls the model asked for but that never ran are closed too.
                        for mut unrun in calls {
                            unrun.status = ItemStatus::Interrupted;
                            link.store(unrun).await?;
                        }
                        return Err(stop);
                    }
                }
            }
        }
    }
}

/// Compacts the history before a model call that would reach the threshold, or after the
/// provider refused one as too large (`overflowed`: then everything before this turn is
/// summarized if the usual cut keeps it all): the summary is stored, and the rest of the turn
/// reads from it. False when there was nothing older to summarize. A failed compaction fails
/// the turn.
async fn compact(
    spec: &TurnSpec,
    history: &mut Vec<Item>,
    usage: &mut UsageTracker,
    link: &ActorLink,
    overflowed: bool,
) -> Result<bool, TurnStop> {
    let view = compaction::model_view(history);
    let plan = compaction::plan(&view, spec.context_window, CompactionReason::Auto).or_else(|| {
        overflowed
            .then(|| compaction::plan_before_turn(&view, &spec.turn_id))
            .flatten()
    });
    let Some(plan) = plan else {
        // Everything is recent: there is nothing older to summarize.
        return Ok(false);
    };
    link.send(TurnMsg::CompactionStarted);
    let on_retry = |retry: Retry| link.send(TurnMsg::Retry(retry));
    match spec
        .compactor
        .summarize(&plan, &spec.cancel, on_retry)
        .await
    {
        Ok((text, report)) => {
            let mut summary =
                compaction::summary_item(&spec.session_id, &spec.turn_id, text, &plan);
            summary.seq = link.store(summary.clone()).await?;
            history.push(summary.clone());
            compaction::mark_compacted(history);
            *usage = usage.restart(&compaction::model_view(history));
            link.send(TurnMsg::Compacted {
                summary,
                usage: report,
            });
            Ok(true)
        }
        Err(Failure::Interrupted) => {
            link.send(TurnMsg::CompactionFailed {
                error: "interrupted".to_owned(),
            });
            Err(TurnStop::Interrupted)
        }
        Err(Failure::Failed(error)) => {
            link.send(TurnMsg::CompactionFailed {
                error: error.clone(),
            });
            Err(TurnStop::Failed(format!("compaction failed: {error}")))
        }
    }
}

/// What one successful model call produced: its finished items (text, reasoning, tool calls
/// as requested), the tool calls still to run, and the provider's token report.
struct Answer {
    items: Vec<Item>,
    tool_calls: Vec<Item>,
    usage: Option<TokenUsage>,
}

/// Why a model call gave no answer: the turn stops, or the provider refused the request as
/// larger than the context window (the turn may compact and call again).
enum CallStop {
    Turn(TurnStop),
    Overflow(ModelError),
}

impl CallStop {
    fn into_turn_stop(self) -> TurnStop {
        match self {
            CallStop::Turn(stop) => stop,
            CallStop::Overflow(error) => TurnStop::Failed(model_failure(&error, 1)),
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
async fn call_model(
    spec: &TurnSpec,
    history: &[Item],
    step: u32,
    link: &ActorLink,
) -> Result<Answer, CallStop> {
    let mut attempt = 1;
    loop {
        let request = ModelRequest {
            model: spec.model_name.clone(),
            instructions: spec.instructions.clone(),
            history: prompt::model_history(history, spec.reasoning_context, &spec.turn_id),
            reasoning_context: spec.reasoning_context,
            tools: spec.tools.clone(),
            max_output_tokens: spec.max_output_tokens,
            compaction: false,
        };
        let mut partial = Partial::new(spec, step);
        let outcome = stream_once(spec, request, &mut partial, link).await;
        match outcome {
            Ok(()) => {
                // The report covers this call's output, so it goes out after the answer is
                // stored: the meter must not count that output twice.
                let usage = partial.usage.take();
                let mut answer = partial.finish(link).await?;
                link.send(TurnMsg::ModelAnswered { usage });
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
                match back_off(&spec.retry, attempt, &error, waits, announce).await {
                    BackOff::Retry => attempt += 1,
                    BackOff::GiveUp => {
                        return Err(TurnStop::Failed(model_failure(&error, attempt)).into());
                    }
                    BackOff::WaitTooLong(message) => return Err(TurnStop::Failed(message).into()),
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

/// One model call: streams its events into `partial`, forwarding live text to clients.
async fn stream_once(
    spec: &TurnSpec,
    request: ModelRequest,
    partial: &mut Partial,
    link: &ActorLink,
) -> Result<(), AttemptError> {
    let mut events = reader::read_ahead(spec.client.stream(request));
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
const MERGED_DELTA_MAX: usize = 64 * 1024;

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
}

impl Partial {
    fn new(spec: &TurnSpec, step: u32) -> Partial {
        Partial {
            step,
            session_id: spec.session_id.clone(),
            turn_id: spec.turn_id.clone(),
            texts: Vec::new(),
            tool_calls: Vec::new(),
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
        let mut tool_calls: Vec<Item> = std::mem::take(&mut self.tool_calls)
            .into_iter()
            .map(|(call_id, name, mut arguments)| {
                // Stored, shown and run without a configured secret.
                redact::redact_json(&mut arguments);
                self.new_item(
                    ItemKind::ToolCall {
                        call_id,
                        name,
                        arguments,
                        output: String::new(),
                        exit_code: None,
                        files: None,
                        images: Vec::new(),
                    },
                    ItemStatus::Running,
                )
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
            usage: None,
        })
    }
}

/// A streamed text item at its end: what its redactor still held goes out, and the item is
/// stored with its whole text redacted (a secret the model wrote is never stored).
fn finished_text(item: &mut Item, redactor: &mut StreamRedactor, link: &ActorLink) -> Item {
    let rest = redactor.finish();
    if !rest.is_empty() {
        link.send(TurnMsg::Delta {
            item_id: item.id.clone(),
            field: DeltaField::Text,
            delta: rest,
        });
    }
    if let ItemKind::AgentMessage { text } | ItemKind::Reasoning { text, .. } = &mut item.kind
        && let std::borrow::Cow::Owned(clean) = redact::redact(text)
    {
        *text = clean;
    }
    item.clone()
}

/// Checks a call against the permissions. A shell command is parsed on the blocking pool: a
/// hostile one may take the parser a while (it is bounded), and the turn's worker must not wait.
async fn check(spec: &TurnSpec, name: &str, arguments: &Value) -> Verdict {
    if name != "shell" {
        return spec.gate.check(name, arguments);
    }
    let (gate, arguments) = (spec.gate.clone(), arguments.clone());
    tokio::task::spawn_blocking(move || gate.check("shell", &arguments))
        .await
        .unwrap_or_else(|_| Verdict::Ask {
            reason: "the command could not be checked against the rules".to_owned(),
            suggested_rule: None,
        })
}

/// Whether a call may run: `Ok(escalated)` to run it (outside the sandbox if escalated), or
/// the result the model gets instead.
async fn gate(spec: &TurnSpec, item: &Item, link: &ActorLink) -> Result<bool, ToolResult> {
    let (name, arguments) = (tool_name(item), tool_arguments(item));
    let (reason, suggested_rule) = match check(spec, name, arguments).await {
        Verdict::Allow => return Ok(false),
        Verdict::Deny { reason } => {
            return Err(ToolResult::failed(format!(
                "Not run: the agent's permissions deny it: {reason}."
            )));
        }
        Verdict::Ask {
            reason,
            suggested_rule,
        } => (reason, suggested_rule),
    };
    let escalate = escalation(arguments).map(str::to_owned);
    let escalated = escalate.is_some();
    let request = ApprovalRequest {
        item_id: item.id.clone(),
        tool: name.to_owned(),
        arguments: arguments.clone(),
        reason,
        suggested_rule,
        escalate,
        timeout: spec.gate.permissions.approval_timeout,
    };
    let outcome = tokio::select! {
        outcome = link.ask_approval(request) => outcome,
        () = spec.cancel.cancelled() => ApprovalOutcome::Cancelled,
    };
    match outcome {
        ApprovalOutcome::Allowed => Ok(escalated),
        ApprovalOutcome::Denied { message } => Err(ToolResult::failed(match message {
            Some(message) if !message.trim().is_empty() => {
                format!("Not run: the user denied this call: {message}")
            }
            _ => "Not run: the user denied this call.".to_owned(),
        })),
        ApprovalOutcome::Expired { after } => Err(ToolResult::failed(format!(
            "Not run: nobody answered its approval within {} s, so it was denied.",
            after.as_secs()
        ))),
        ApprovalOutcome::Cancelled => Err(ToolResult::interrupted(
            "Not run: interrupted while waiting for approval.",
        )),
    }
}

/// Runs one stored tool call, streaming its output to clients; with what it changed in the
/// working directory.
async fn run_tool(
    spec: &TurnSpec,
    item: &Item,
    link: &ActorLink,
) -> (ToolResult, Option<FileChanges>) {
    let (name, arguments) = (tool_name(item), tool_arguments(item));
    let escalated = match gate(spec, item, link).await {
        Ok(escalated) => escalated,
        Err(result) => return (result, None),
    };
    if let Some(files) = &spec.files {
        files.before(name).await;
    }
    // A command's output can print a secret: it goes out redacted, piece by piece.
    let mut redactor = StreamRedactor::default();
    let mut forward = |chunk: String| {
        let chunk = redactor.push(&chunk);
        if !chunk.is_empty() {
            link.send(TurnMsg::Delta {
                item_id: item.id.clone(),
                field: DeltaField::Output,
                delta: chunk,
            })
        }
    };
    let mut result = if collab::is_collaboration_tool(name) {
        collab::run(name, arguments, link, &spec.cancel).await
    } else {
        let (live, mut chunks) = mpsc::unbounded_channel::<String>();
        let escalated_context;
        let context = if escalated {
            // This one call runs outside the sandbox, as the user allowed.
            escalated_context = ToolContext {
                sandbox: crate::tools::SandboxPolicy {
                    escalated: true,
                    ..spec.tool_context.sandbox.clone()
                },
                ..spec.tool_context.clone()
            };
            &escalated_context
        } else {
            &spec.tool_context
        };
        let run = tools::run_tool(name, arguments, context, &live, &spec.cancel);
        tokio::pin!(run);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                Some(mut chunk) = chunks.recv() => {
                    // Output that piled up meanwhile goes out as one delta.
                    while chunk.len() < MERGED_DELTA_MAX {
                        match chunks.try_recv() {
                            Ok(more) => chunk.push_str(&more),
                            Err(_) => break,
                        }
                    }
                    forward(chunk)
                }
            }
        };
        while let Ok(chunk) = chunks.try_recv() {
            forward(chunk);
        }
        result
    };
    forward_rest(&mut redactor, item, link);
    if let std::borrow::Cow::Owned(clean) = redact::redact(&result.output) {
        result.output = clean;
    }
    let changes = match &spec.files {
        Some(files) => files.after(name).await,
        None => None,
    };
    (result, changes)
}

/// What a tool's output redactor still held, sent at the end of the output.
fn forward_rest(redactor: &mut StreamRedactor, item: &Item, link: &ActorLink) {
    let rest = redactor.finish();
    if !rest.is_empty() {
        link.send(TurnMsg::Delta {
            item_id: item.id.clone(),
            field: DeltaField::Output,
            delta: rest,
        });
    }
}

/// Stores a tool call's result (its output, exit code and status); an interrupted tool stops
/// the turn.
async fn finish_tool_call(
    mut item: Item,
    (result, changes): (ToolResult, Option<FileChanges>),
    link: &ActorLink,
) -> Result<Item, TurnStop> {
    if let ItemKind::ToolCall {
        output,
        exit_code,
        files,
        images,
        ..
    } = &mut item.kind
    {
        *output = result.output;
        *exit_code = result.exit_code;
        *files = changes.map(Box::new);
        *images = result.images;
    }
    item.status = match result.status {
        ToolStatus::Completed => ItemStatus::Completed,
        ToolStatus::Failed => ItemStatus::Failed,
        ToolStatus::Interrupted => ItemStatus::Interrupted,
    };
    link.store(item.clone()).await?;
    if result.status == ToolStatus::Interrupted {
        return Err(TurnStop::Interrupted);
    }
    Ok(item)
}

fn tool_name(item: &Item) -> &str {
    match &item.kind {
        ItemKind::ToolCall { name, .. } => name,
        _ => "",
    }
}

fn tool_arguments(item: &Item) -> &Value {
    match &item.kind {
        ItemKind::ToolCall { arguments, .. } => arguments,
        _ => &Value::Null,
    }
}

#[cfg(test)]
mod tests {
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
