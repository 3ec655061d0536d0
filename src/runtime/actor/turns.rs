//! Turns inside the actor: accepting messages as a turn (write-ahead), starting its task,
//! storing and publishing what the task sends back, steering messages into it, and ending it.
//! Every session (the root agent and each sub-agent) runs its turns through the same code.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::session::{InterruptCause, RunningTurn, append_delta};
use super::{Answer, ConversationActor};
use crate::config::{Protocol, ReasoningContext};
use crate::domain::{
    Item, ItemKind, ItemStatus, Message, MessageStatus, TurnStatus, new_id, now, user_item,
};
use crate::index::IndexUpdate;
use crate::model::tokens::Tokenizer;
use crate::runtime::compaction::Reason;
use crate::runtime::link::{FromTurn, TurnMsg};
use crate::runtime::pending::Waiting;
use crate::runtime::retry::Retry;
use crate::runtime::turn::{self, TurnSpec};
use crate::runtime::{IndexJob, RequestKey, RuntimeError, usage};
use crate::store::StoreError;
use crate::store::records::{MetaRecord, SessionRecord};
use crate::store::state::StoredAnswer;
use crate::tools::ToolContext;

/// A turn accepted but not begun: its records are being stored (see `prepare_turn`).
pub(super) struct PreparedTurn {
    session_id: String,
    turn_id: String,
    messages: Vec<Message>,
    leading_items: Vec<Item>,
    /// An `Idempotency-Key`'s answer, for the index.
    answer_key: Option<(RequestKey, StoredAnswer)>,
    /// The session is created with this turn (`session.created` goes out first).
    new_session: bool,
}

impl PreparedTurn {
    pub(super) fn session_id(&self) -> &str {
        &self.session_id
    }
}

/// `item.delta`, the most frequent event: serialized straight from borrowed fields.
#[derive(Serialize)]
struct DeltaEvent<'a> {
    session_id: &'a str,
    item_id: &'a str,
    field: &'a str,
    delta: &'a str,
}

impl ConversationActor {
    /// Accepts messages as a new turn of `session_id`: stored write-ahead, then run.
    pub(super) fn start_turn(
        &mut self,
        session_id: &str,
        messages: Vec<Message>,
        key: Option<RequestKey>,
    ) -> Result<Answer, RuntimeError> {
        let (records, turn, answer) =
            self.prepare_turn(session_id, messages, key, Vec::new(), false);
        // The history's file is opened before anything is stored: running out of files then
        // stores nothing, and the error answer is true.
        self.session_writer(session_id)?;
        self.append_meta(records)?;
        // The messages are accepted: a failure now cannot take that back.
        self.begin_turn(turn)
            .map_err(RuntimeError::outcome_unknown)?;
        Ok(answer)
    }

    /// The records that accept `messages` as a new turn of `session_id`, and what is left to
    /// do once they are stored (`begin_turn`). Several turns can be stored in one append (the
    /// sub-agents one answer starts). `leading_items` go in the session's file before the
    /// messages (the history a sub-agent starts with); `new_session` says the session is
    /// being created with it.
    pub(super) fn prepare_turn(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        key: Option<RequestKey>,
        leading_items: Vec<Item>,
        new_session: bool,
    ) -> (Vec<MetaRecord>, PreparedTurn, Answer) {
        let turn_id = new_id("t");
        let messages: Vec<Message> = messages
            .into_iter()
            .map(|message| Message {
                status: MessageStatus::Started,
                ..message
            })
            .collect();
        let mut records: Vec<MetaRecord> = messages
            .iter()
            .map(|message| MetaRecord::MessageAccepted {
                message: message.clone(),
                idempotency_key: key.as_ref().map(|key| key.key.clone()),
                turn_id: None,
            })
            .collect();
        records.push(MetaRecord::TurnStarted {
            session_id: session_id.to_owned(),
            turn_id: turn_id.clone(),
            message_ids: messages.iter().map(|m| m.id.clone()).collect(),
            at: now(),
        });
        // Messages that waited keep the answers their keys were given, from now on durably.
        records.extend(self.pending_answer_records(&messages));
        let answer = Answer {
            status: 202,
            body: json!({ "message": messages[0] }),
        };
        // The key's answer also goes to the index (`index_turn_start`).
        let answer_key = key.as_ref().map(|key| (key.clone(), key.stored(&answer)));
        if let Some(key) = &key {
            records.push(key.answered(&answer, now()));
        }
        let turn = PreparedTurn {
            session_id: session_id.to_owned(),
            turn_id,
            messages,
            leading_items,
            answer_key,
            new_session,
        };
        (records, turn, answer)
    }

    /// A turn whose records are stored: its items go to the session's file, the index and
    /// clients learn of it, and its task starts.
    pub(super) fn begin_turn(&mut self, turn: PreparedTurn) -> Result<(), RuntimeError> {
        let PreparedTurn {
            session_id,
            turn_id,
            messages,
            leading_items,
            answer_key,
            new_session,
        } = turn;
        let session_id = session_id.as_str();
        self.forget_stored_answers();
        if messages.iter().any(|m| !self.is_report(m))
            && let Some(run) = self.run_mut(session_id)
        {
            // The user (or the parent agent) spoke: sub-agents' reports held since an
            // interrupt may come in now.
            run.pending.hold_agent_messages(false);
        }
        let mut items = leading_items;
        for message in &messages {
            let seq = self.next_seq(session_id);
            items.push(user_item(message, &turn_id, seq));
        }
        self.append_items(session_id, &items)?;
        self.index_turn_start(session_id, &turn_id, &items, answer_key);
        self.publish_conversation();
        if new_session && let Some(session) = self.state.session(session_id) {
            self.bus
                .publish("session.created", &json!({ "session": session }));
        }
        self.publish_session(session_id);
        self.bus.publish(
            "turn.started",
            &json!({ "session_id": session_id, "turn_id": turn_id, "message_ids": messages.iter().map(|m| &m.id).collect::<Vec<_>>() }),
        );
        for item in &items {
            self.publish_stored(item);
        }
        self.run_turn(session_id, &turn_id);
        Ok(())
    }

    /// Indexes a turn that just started, in the background of the turn: the files are already
    /// the truth. Only the root session's messages are searchable.
    fn index_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        items: &[Item],
        answer_key: Option<(RequestKey, StoredAnswer)>,
    ) {
        let shared = self.shared.clone();
        let id = self.id.clone();
        let conversation_update = self.conversation_update_owned();
        let turn = self
            .state
            .turns
            .iter()
            .rev()
            .find(|t| t.id == turn_id)
            .cloned();
        let session = self.state.session(session_id).cloned();
        let search: Vec<(u64, String)> = if session_id == self.root_id() {
            items
                .iter()
                .filter_map(|item| Some((item.seq, item.kind.searchable_text()?.to_owned())))
                .collect()
        } else {
            Vec::new()
        };
        tokio::spawn(async move {
            let mut updates = vec![IndexUpdate::Conversation {
                conversation: &conversation_update.0,
                meta_len: conversation_update.1,
            }];
            if let Some(turn) = &turn {
                updates.push(IndexUpdate::Turn {
                    conversation_id: &id,
                    turn,
                });
            }
            if let Some(session) = &session {
                updates.push(IndexUpdate::Session {
                    conversation_id: &id,
                    session,
                });
            }
            for (seq, text) in &search {
                updates.push(IndexUpdate::SearchText {
                    conversation_id: &id,
                    seq: *seq,
                    text,
                });
            }
            if let Some((key, answer)) = &answer_key {
                updates.push(IndexUpdate::Answer {
                    conversation_id: &id,
                    key: &key.key,
                    status: answer.status,
                    response: &answer.response,
                    body_hash: answer.body_hash.as_deref(),
                });
            }
            shared.index_quietly(&updates).await;
        });
    }

    /// Publishes an item that is stored whole at once (a message, a notice) and counts it in
    /// its session's meter.
    pub(super) fn publish_stored(&mut self, item: &Item) {
        self.bus.publish("item.started", &json!({ "item": item }));
        self.bus.publish("item.completed", &json!({ "item": item }));
        if let Some(run) = self.run_mut(&item.session_id) {
            run.usage.add(item);
        }
    }

    /// Starts the task of a turn of `session_id` that is stored as started.
    pub(super) fn run_turn(&mut self, session_id: &str, turn_id: &str) {
        let cancel = CancellationToken::new();
        let Some(run) = self.sessions.get_mut(session_id) else {
            return;
        };
        run.running = Some(RunningTurn {
            turn_id: turn_id.to_owned(),
            cancel: cancel.clone(),
            items: Vec::new(),
        });
        run.turn_reasoning_tokens = 0;
        let history = run.history.clone();
        let usage = run.usage;
        let reasoning_carried = self.reasoning_carried(session_id);
        let sender = self.turn_sender.clone();
        let spec = self.turn_spec(
            session_id,
            turn_id,
            history,
            usage,
            cancel,
            reasoning_carried,
        );
        let session: Arc<str> = Arc::from(session_id);
        match spec {
            Ok(spec) => {
                // The meter counts with this turn's model and request (AGENTS.md may have
                // changed, or the model).
                if let Some(run) = self.run_mut(session_id) {
                    run.usage.adopt(spec.usage);
                }
                tokio::spawn(turn::run(spec, session, sender));
            }
            Err(error) => {
                // Checked before the turn was stored; only a config change could get here.
                let _ = sender.send(FromTurn {
                    session_id: session,
                    msg: TurnMsg::Ended {
                        status: TurnStatus::Failed,
                        error: Some(error),
                    },
                });
            }
        }
    }

    /// Everything a turn of `session_id` needs: its agent's instructions and tools, its model,
    /// the conversation's working directory and limits.
    fn turn_spec(
        &self,
        session_id: &str,
        turn_id: &str,
        history: Vec<Item>,
        usage: usage::UsageTracker,
        cancel: CancellationToken,
        reasoning_carried: bool,
    ) -> Result<TurnSpec, String> {
        let conversation = &self.state.conversation;
        let config = &self.shared.config;
        let missing = || "the session's agent or model is no longer configured".to_owned();
        let session = self.state.session(session_id).ok_or_else(missing)?;
        let agent = config.agent(&session.agent).ok_or_else(missing)?;
        let model = config.model(&session.model).ok_or_else(missing)?;
        let client = self.shared.models.client(config, &session.model)?;
        let compactor = self.compactor(&session.agent)?;
        let (instructions, tools) = self.request_parts(session, agent);
        // What every request of this turn carries besides the history (SPEC §7.2).
        let tokenizer = Tokenizer::for_model(config, &session.model);
        let mut usage = usage;
        usage.adopt(usage::UsageTracker::new(
            tokenizer,
            tokenizer.request_overhead(instructions.as_deref(), &tools),
        ));
        Ok(TurnSpec {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            client,
            model_name: model.name.clone(),
            instructions,
            history,
            tools,
            tool_context: ToolContext {
                cwd: conversation.cwd.clone().into(),
                shell_timeout: config.tools.shell_timeout(),
                max_output_bytes: config.tools.max_output_bytes,
                process_records: self.shared.settings.process_records.clone(),
            },
            max_output_tokens: model.max_output_tokens,
            retry: config.retry.clone(),
            max_steps: config.turn.max_steps,
            cancel,
            context_window: model.context_window,
            usage,
            compactor,
            reasoning_context: model.reasoning_context,
            reasoning_carried,
        })
    }

    /// What every request of a session carries besides its history: its agent's
    /// instructions (with AGENTS.md) and tool schemas.
    fn request_parts(
        &self,
        session: &crate::domain::Session,
        agent: &crate::config::AgentConfig,
    ) -> (Option<String>, Vec<crate::model::ToolSpec>) {
        request_parts(
            &self.shared.config,
            &self.state.conversation.cwd,
            session,
            agent,
        )
    }

    /// Starts a session's meter over from its history, counted with its model's tokenizer and
    /// with the fixed part of its requests (SPEC §7.2): when a session is loaded or created,
    /// and when its model changes. (A turn adopts them again, as AGENTS.md may change.)
    pub(super) fn reset_meter(&mut self, session_id: &str) {
        let basis = meter_basis(&self.shared.config, &self.state, session_id);
        if let (Some(basis), Some(run)) = (basis, self.sessions.get_mut(session_id)) {
            run.usage = basis.restart(&crate::runtime::compaction::model_view(&run.history));
        }
    }

    /// Whether a session's model gets reasoning back (the Responses API with a
    /// `reasoning_context`), so that reasoning takes room in its next request.
    pub(super) fn reasoning_carried(&self, session_id: &str) -> bool {
        let config = &self.shared.config;
        let Some(session) = self.state.session(session_id) else {
            return false;
        };
        config
            .model(&session.model)
            .filter(|model| model.reasoning_context.is_some())
            .and_then(|model| config.providers.get(&model.provider))
            .is_some_and(|provider| provider.protocol == Protocol::OpenaiResponses)
    }

    pub(super) async fn on_turn(&mut self, from: FromTurn) {
        let FromTurn { session_id, msg } = from;
        let session_id: &str = &session_id;
        match msg {
            TurnMsg::Started { mut item } => {
                item.seq = self.next_seq(session_id);
                self.bus.publish("item.started", &json!({ "item": item }));
                if let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) {
                    running.items.push(item);
                }
            }
            TurnMsg::Delta {
                item_id,
                field,
                delta,
            } => {
                let Some(running) = self
                    .sessions
                    .get_mut(session_id)
                    .and_then(|r| r.running.as_mut())
                else {
                    return;
                };
                // The newest item is almost always the one streaming.
                if let Some(item) = running.items.iter_mut().rev().find(|i| i.id == item_id) {
                    append_delta(item, &delta);
                }
                let event = DeltaEvent {
                    session_id,
                    item_id: &item_id,
                    field,
                    delta: &delta,
                };
                self.bus.publish("item.delta", &event);
            }
            TurnMsg::Store { items, ack } => {
                if let Ok(seqs) = self.store_turn_items(session_id, items) {
                    let _ = ack.send(seqs);
                }
            }
            TurnMsg::CompactionStarted => self.publish_compaction_started(session_id, Reason::Auto),
            TurnMsg::Compacted { summary } => self.on_compacted(&summary),
            TurnMsg::CompactionFailed { error } => {
                self.publish_compaction_failed(session_id, &error);
            }
            TurnMsg::ManualCompactionDone { plan, result } => {
                self.finish_compaction(&plan, result);
            }
            TurnMsg::Retry(Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            }) => {
                self.bus.publish(
                    "model.retry",
                    &json!({ "session_id": session_id, "attempt": attempt, "max_attempts": max_attempts, "delay_ms": delay_ms, "error": error }),
                );
            }
            TurnMsg::Usage(usage) => {
                let carried = self.reasoning_carried(session_id);
                if let Some(run) = self.run_mut(session_id)
                    && let Some(tokens) = usage::context_tokens(&usage, carried)
                {
                    run.usage.report(tokens);
                    if carried {
                        run.turn_reasoning_tokens += usage.reasoning_tokens;
                    }
                }
                self.publish_usage(session_id);
            }
            TurnMsg::TakeSteered { reply } => {
                let items = self.take_steered(session_id).await;
                let _ = reply.send(items);
            }
            TurnMsg::Agents { request, reply } => {
                let answer = self.collaborate(session_id, request).await;
                let _ = reply.send(answer);
            }
            TurnMsg::Ended { status, error } => self.end_turn(session_id, status, error).await,
        }
    }

    /// Stores snapshots of items of a running turn with one append (a new item gets its
    /// `seq`), then publishes them. Returns their `seq`s.
    fn store_turn_items(
        &mut self,
        session_id: &str,
        mut items: Vec<Item>,
    ) -> Result<Vec<u64>, StoreError> {
        let mut new = Vec::with_capacity(items.len());
        for item in &mut items {
            let known = self
                .sessions
                .get(session_id)
                .and_then(|run| run.running.as_ref())
                .and_then(|running| running.items.iter().find(|i| i.id == item.id))
                .map(|existing| existing.seq);
            new.push(known.is_none());
            item.seq = match known {
                Some(seq) => seq,
                None => self.next_seq(session_id),
            };
        }
        if let Err(error) = self.append_items(session_id, &items) {
            tracing::error!(%error, conversation = %self.id, "cannot store an item; interrupting the turn");
            if let Some(running) = self
                .sessions
                .get(session_id)
                .and_then(|r| r.running.as_ref())
            {
                running.cancel.cancel();
            }
            return Err(error);
        }
        for (item, is_new) in items.iter().zip(new) {
            if let Some(running) = self
                .sessions
                .get_mut(session_id)
                .and_then(|r| r.running.as_mut())
            {
                match running.items.iter_mut().find(|i| i.id == item.id) {
                    Some(existing) => *existing = item.clone(),
                    None => running.items.push(item.clone()),
                }
            }
            let finished = item.status != ItemStatus::Running;
            if is_new {
                self.bus.publish("item.started", &json!({ "item": item }));
            }
            if finished {
                self.bus.publish("item.completed", &json!({ "item": item }));
                self.on_item_finished(item);
            }
            // A tool call's arguments count when it is first stored, its output when it ends.
            if let Some(run) = self.run_mut(session_id) {
                run.usage.stored(item, is_new);
            }
        }
        Ok(items.iter().map(|item| item.seq).collect())
    }

    /// A finished item: its session's last message (the Agents tab), and for the root
    /// session its search row. The row goes through the index queue rather than being awaited
    /// here: this is on the way to the model's next call or to `turn.ended`, and the files
    /// already hold the item.
    pub(super) fn on_item_finished(&mut self, item: &Item) {
        if let ItemKind::AgentMessage { text } = &item.kind
            && item.status == ItemStatus::Completed
            && let Some(session) = self
                .state
                .sessions
                .iter_mut()
                .find(|s| s.id == item.session_id)
        {
            session.last_message = Some(text.clone());
            self.publish_session(&item.session_id);
        }
        if item.session_id != self.root_id() {
            return;
        }
        if let Some(text) = item.kind.searchable_text() {
            self.shared.index_later(IndexJob::SearchText {
                conversation_id: self.id.clone(),
                seq: item.seq,
                text: text.to_owned(),
            });
        }
    }

    /// Messages steered into a session's running turn before its next model call (SPEC
    /// §3.1): the user's steer messages, then sub-agents' reports (SPEC §3.3).
    async fn take_steered(&mut self, session_id: &str) -> Vec<Item> {
        let Some(run) = self.sessions.get_mut(session_id) else {
            return Vec::new();
        };
        let Some(running) = &run.running else {
            return Vec::new();
        };
        let turn_id = running.turn_id.clone();
        let entries = run.pending.take_steered();
        if entries.is_empty() {
            return Vec::new();
        }
        let from_above = entries.iter().any(|entry| !entry.report);
        let steered: Vec<Message> = entries
            .iter()
            .map(|entry| Message {
                status: MessageStatus::Steered,
                ..entry.message.clone()
            })
            .collect();
        let mut records: Vec<MetaRecord> = steered
            .iter()
            .map(|message| MetaRecord::MessageAccepted {
                message: message.clone(),
                idempotency_key: None,
                turn_id: Some(turn_id.clone()),
            })
            .collect();
        records.extend(self.pending_answer_records(&steered));
        if let Err(error) = self.append_meta(records) {
            tracing::error!(%error, "cannot store steered messages; they stay waiting");
            self.wait_again(session_id, entries);
            return Vec::new();
        }
        self.forget_stored_answers();
        if from_above && let Some(run) = self.run_mut(session_id) {
            run.pending.hold_agent_messages(false);
        }
        let items: Vec<Item> = steered
            .iter()
            .map(|message| {
                let seq = self.next_seq(session_id);
                user_item(message, &turn_id, seq)
            })
            .collect();
        if let Err(error) = self.append_items(session_id, &items) {
            // Told to nobody, given to no model: the messages wait again, for the next turn,
            // and this one stops, as it does when any of its items cannot be stored.
            tracing::error!(%error, conversation = %self.id, "cannot store steered messages; interrupting the turn");
            if let Some(run) = self.run_mut(session_id) {
                run.last_seq -= items.len() as u64;
                if let Some(running) = &run.running {
                    running.cancel.cancel();
                }
            }
            self.wait_again(session_id, entries);
            return Vec::new();
        }
        for item in &items {
            self.publish_stored(item);
            self.on_item_finished(item);
        }
        self.publish_pending();
        items
    }

    /// Puts messages the agent could not take back at the head of their kind of waiting ones.
    fn wait_again(&mut self, session_id: &str, entries: Vec<Waiting>) {
        if let Some(run) = self.run_mut(session_id) {
            run.pending.restore(entries);
        }
    }

    async fn end_turn(&mut self, session_id: &str, status: TurnStatus, error: Option<String>) {
        let keeps_all = self
            .state
            .session(session_id)
            .and_then(|session| self.shared.config.model(&session.model))
            .is_some_and(|model| model.reasoning_context == Some(ReasoningContext::AllTurns));
        let Some(run) = self.sessions.get_mut(session_id) else {
            return;
        };
        let Some(mut running) = run.running.take() else {
            return;
        };
        // Reasoning the model got back during the turn stays behind with it, unless every
        // turn's reasoning is taken back (SPEC §7.8).
        let reasoning = std::mem::take(&mut run.turn_reasoning_tokens);
        let cause = run.interrupt_cause.take();
        let waiters = std::mem::take(&mut run.interrupt_waiters);
        if reasoning > 0 && !keeps_all {
            run.usage.forget(reasoning);
            self.publish_usage(session_id);
        }
        // Items the turn left running (it should not) are closed with the turn's status.
        for mut item in std::mem::take(&mut running.items)
            .into_iter()
            .filter(|i| i.status == ItemStatus::Running)
        {
            item.status = match status {
                TurnStatus::Failed => ItemStatus::Failed,
                _ => ItemStatus::Interrupted,
            };
            if self
                .append_items(session_id, std::slice::from_ref(&item))
                .is_ok()
            {
                self.bus.publish("item.completed", &json!({ "item": item }));
            }
        }
        match status {
            TurnStatus::Interrupted => {
                let text = match cause.unwrap_or(InterruptCause::User) {
                    InterruptCause::User => {
                        "The user interrupted the previous turn before it finished.".to_owned()
                    }
                    InterruptCause::Shutdown => "The previous turn was interrupted: the service \
                        stopped before it finished."
                        .to_owned(),
                };
                self.store_notice(session_id, &running.turn_id, text);
            }
            // The error stays visible in the history (and the model learns of it next turn).
            TurnStatus::Failed => {
                let error = error.as_deref().unwrap_or("unknown error");
                self.store_notice(
                    session_id,
                    &running.turn_id,
                    format!("The previous turn failed: {error}"),
                );
            }
            TurnStatus::Completed | TurnStatus::Running => {}
        }
        let record = MetaRecord::TurnEnded {
            session_id: session_id.to_owned(),
            turn_id: running.turn_id.clone(),
            status,
            error: error.clone(),
            at: now(),
        };
        if session_id == self.root_id() {
            self.note_searched_through();
        }
        if let Err(error) = self.append_meta(vec![record.clone()]) {
            // Clients are told the turn ended, and this actor must agree with them (a turn it
            // thinks still runs would block every later one). On disk the turn stays open, so
            // the next start closes it as interrupted.
            tracing::error!(%error, conversation = %self.id, "cannot store the end of a turn");
            self.state.apply(&record);
            // The index is about to be told how the turn ended; the files will say otherwise.
            self.shared.index.mark_out_of_date(&[&self.id]).await;
        }
        // The end is on disk: followers of the conversation learn it now. The list-level
        // `conversation.updated` follows the index update, so a sidebar that reacts to it by
        // listing sees the same state.
        self.bus.publish(
            "turn.ended",
            &json!({ "session_id": session_id, "turn_id": running.turn_id, "status": status, "error": error }),
        );
        // What comes next (a sub-agent's report to its parent, this session's next waiting
        // message) may start a turn: done before the conversation's new status is indexed and
        // published, so that no client sees it idle in between.
        if !self.stopping {
            self.report_to_parent(session_id, &running.turn_id, status, error.as_deref());
            self.start_next_waiting(session_id);
        }
        let turn = self
            .state
            .turns
            .iter()
            .rev()
            .find(|t| t.id == running.turn_id)
            .cloned();
        let mut updates = vec![self.conversation_update()];
        if let Some(turn) = &turn {
            updates.push(IndexUpdate::Turn {
                conversation_id: &self.id,
                turn,
            });
        }
        if let Some(session) = self.state.session(session_id) {
            updates.push(IndexUpdate::Session {
                conversation_id: &self.id,
                session,
            });
        }
        self.shared.index_quietly(&updates).await;
        self.publish_conversation();
        self.publish_session(session_id);
        for waiter in waiters {
            let _ = waiter.send(Ok(true));
        }
    }

    /// A notice at the end of a turn that did not complete: the model reads it at its next
    /// call (SPEC §4.2) and every client sees it.
    fn store_notice(&mut self, session_id: &str, turn_id: &str, text: String) {
        let notice = Item {
            id: new_id("m"),
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            seq: self.next_seq(session_id),
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: None,
            kind: ItemKind::Notice { text },
        };
        if let Err(error) = self.append_items(session_id, std::slice::from_ref(&notice)) {
            tracing::error!(%error, "cannot store a notice");
            return;
        }
        self.publish_stored(&notice);
    }

    /// When a session is idle: its next waiting message (the user's first, then agents')
    /// starts its next turn.
    pub(super) fn start_next_waiting(&mut self, session_id: &str) {
        if !self.session_is_idle(session_id) {
            return;
        }
        let Some(run) = self.run_mut(session_id) else {
            return;
        };
        let next = run.pending.take_next_turn();
        if next.is_empty() {
            return;
        }
        let messages = next.iter().map(|entry| entry.message.clone()).collect();
        if let Err(error) = self
            .check_can_run(session_id)
            .and_then(|()| self.start_turn(session_id, messages, None))
        {
            tracing::warn!(%error, "waiting messages could not start a turn; they keep waiting");
            if let Some(run) = self.run_mut(session_id) {
                run.pending.restore(next);
            }
        }
        self.publish_pending();
    }

    pub(super) fn interrupt(
        &mut self,
        session: Option<String>,
        reply: oneshot::Sender<Result<bool, RuntimeError>>,
    ) {
        let session_id = session.unwrap_or_else(|| self.root_id().to_owned());
        if !self.sessions.contains_key(&session_id) {
            let _ = reply.send(Err(RuntimeError::NotFound(format!("session {session_id}"))));
            return;
        }
        if let Some(compacting) = &self.compacting
            && session_id == self.root_id()
        {
            // Answered when the compaction ends; its request gets the failure.
            compacting.cancel.cancel();
            let _ = reply.send(Ok(true));
            return;
        }
        let run = self.sessions.get_mut(&session_id).expect("checked above");
        if !run.interrupt(InterruptCause::User) {
            let _ = reply.send(Ok(false));
            return;
        }
        run.interrupt_waiters.push(reply);
    }

    /// Turns a crash left `running` are closed as `interrupted` before anything else happens,
    /// in every session.
    pub(super) fn close_stale_turns(&mut self, except: Option<&str>) -> Result<(), RuntimeError> {
        let stale: Vec<(String, String)> = self
            .state
            .running_turns()
            .filter(|t| Some(t.id.as_str()) != except)
            .map(|t| (t.session_id.clone(), t.id.clone()))
            .collect();
        for (session_id, turn_id) in stale {
            let mut items = self.shared.store.read_items(&self.id, &session_id)?;
            let closing: Vec<Item> = crate::index::rebuild::close_cut_turn(
                &self.state,
                &mut items,
                &session_id,
                &turn_id,
            )
            .into_iter()
            .map(|SessionRecord::Item { item }| item)
            .collect();
            self.append_items(&session_id, &closing)?;
            // The model sees what the files now hold: restored messages and the notice.
            if let Some(run) = self.sessions.get_mut(&session_id) {
                *run = super::session::SessionRun::new(session_id.clone(), items);
            }
            self.reset_meter(&session_id);
            self.append_meta(vec![MetaRecord::TurnEnded {
                session_id,
                turn_id,
                status: TurnStatus::Interrupted,
                error: Some("the service stopped during the turn".to_owned()),
                at: now(),
            }])?;
        }
        Ok(())
    }
}

/// What every request of a session carries besides its history (see
/// `ConversationActor::request_parts`).
fn request_parts(
    config: &crate::config::Config,
    cwd: &str,
    session: &crate::domain::Session,
    agent: &crate::config::AgentConfig,
) -> (Option<String>, Vec<crate::model::ToolSpec>) {
    let tools = crate::tools::specs(&agent.tools)
        .into_iter()
        .map(|spec| super::subagents::described(spec, config))
        .collect();
    let instructions = instructions(
        agent.instructions.as_deref(),
        cwd,
        session.parent_id.is_some(),
    );
    (instructions, tools)
}

/// The meter a session starts from: its model's tokenizer and the fixed part of its requests
/// (see `ConversationActor::reset_meter`; also used for a conversation read from its files).
pub(super) fn meter_basis(
    config: &crate::config::Config,
    state: &crate::store::state::ConversationState,
    session_id: &str,
) -> Option<usage::UsageTracker> {
    let session = state.session(session_id)?;
    let agent = config.agent(&session.agent)?;
    let (instructions, tools) = request_parts(config, &state.conversation.cwd, session, agent);
    let tokenizer = Tokenizer::for_model(config, &session.model);
    let overhead = tokenizer.request_overhead(instructions.as_deref(), &tools);
    Some(usage::UsageTracker::new(tokenizer, overhead))
}

/// The agent's instructions, with the working directory's AGENTS.md after them (SPEC §7.5). A
/// sub-agent is also told how its work reaches its parent.
fn instructions(agent: Option<&str>, cwd: &str, sub_agent: bool) -> Option<String> {
    let agents_md = std::fs::read_to_string(std::path::Path::new(cwd).join("AGENTS.md")).ok();
    let mut parts: Vec<String> = Vec::new();
    if let Some(agent) = agent {
        parts.push(agent.to_owned());
    }
    if sub_agent {
        parts.push(SUB_AGENT_NOTE.to_owned());
    }
    if let Some(file) = agents_md {
        parts.push(format!("Instructions from AGENTS.md:\n{file}"));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// What a sub-agent is told about its place (SPEC §5.1).
const SUB_AGENT_NOTE: &str = "You are a sub-agent: another agent gave you the task in the \
first message. Work on it on your own; your final message of each turn is reported to that \
agent automatically, so end with what it needs to know.";
