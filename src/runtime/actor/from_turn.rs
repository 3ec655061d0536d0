//! What a turn task sends its actor, handled in the actor: streaming items and deltas
//! published, finished items stored write-ahead then published, retries and usage reports
//! announced, steered messages handed over before each model call.

use super::ConversationActor;
use super::session::append_delta;
use crate::api::events::{CompactionReason, ConversationEvent, RetryState};
use crate::domain::{
    Item, ItemKind, ItemStatus, Message, MessageStatus, TurnStatus, now, user_item,
};
use crate::runtime::link::{FromTurn, TurnMsg};
use crate::runtime::pending::Waiting;
use crate::runtime::retry::Retry;
use crate::runtime::{IndexJob, usage};
use crate::store::StoreError;
use crate::store::records::{MetaRecord, SessionRecord};

impl ConversationActor {
    pub(super) async fn on_turn(&mut self, from: FromTurn) {
        let FromTurn { session_id, msg } = from;
        let session_id: &str = &session_id;
        match msg {
            TurnMsg::Started { mut item } => {
                item.seq = self.next_seq(session_id);
                self.publish_item_started(&item);
                if let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) {
                    // The model answers again: a retry it was waiting for is over.
                    running.retry = None;
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
                let mut kept = None;
                if let Some(item) = running.items.iter_mut().rev().find(|i| i.id == item_id) {
                    kept = streamed_output_to_keep(
                        item,
                        &delta,
                        self.shared.config.tools.max_output_bytes,
                    );
                    append_delta(item, &delta);
                }
                if let Some(output) = kept {
                    self.keep_streamed_output(session_id, &item_id, output);
                }
                self.bus.publish(&ConversationEvent::ItemDelta {
                    session_id: session_id.to_owned(),
                    item_id,
                    field,
                    delta,
                });
            }
            TurnMsg::Store { items, ack } => {
                // A failed attempt's output is stored before its retry is announced; anything
                // stored after that comes from the next attempt.
                if let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) {
                    running.retry = None;
                }
                if let Ok(seqs) = self.store_turn_items(session_id, items) {
                    let _ = ack.send(seqs);
                }
            }
            TurnMsg::AskApproval { request, reply } => {
                self.ask_approval(session_id, request, reply);
            }
            TurnMsg::ApprovalExpired { approval_id } => self.expire_approval(&approval_id),
            TurnMsg::CompactionStarted => {
                self.publish_compaction_started(session_id, CompactionReason::Auto)
            }
            TurnMsg::Compacted { summary, usage } => {
                // The summary's call is one of the turn's; its report is not the context's.
                let model = self
                    .state
                    .session(session_id)
                    .and_then(|session| self.agents.get(&session.agent))
                    .map(|agent| agent.compaction_model().to_owned())
                    .unwrap_or_default();
                self.count_call(session_id, usage.as_ref(), &model);
                self.on_compacted(&summary);
            }
            TurnMsg::CompactionFailed { error } => {
                self.publish_compaction_failed(session_id, &error);
            }
            TurnMsg::TitleWritten { title } => self.take_written_title(title).await,
            TurnMsg::ManualCompactionDone { plan, result } => {
                self.finish_compaction(&plan, result);
            }
            TurnMsg::Retry(Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            }) => {
                let next_at = now() + chrono::Duration::milliseconds(delay_ms as i64);
                if let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) {
                    running.retry = Some(RetryState {
                        attempt,
                        max_attempts,
                        next_at,
                        error: error.clone(),
                    });
                }
                self.bus.publish(&ConversationEvent::ModelRetry {
                    session_id: session_id.to_owned(),
                    attempt,
                    max_attempts,
                    delay_ms,
                    next_at,
                    error,
                });
            }
            TurnMsg::ModelAnswered { usage, model } => {
                let carried = crate::model::reasoning_carried(&self.shared.config, &model);
                self.count_call(session_id, usage.as_ref(), &model);
                let Some(run) = self.run_mut(session_id) else {
                    return;
                };
                let Some(usage) = usage else {
                    return;
                };
                if let Some(tokens) = usage::context_tokens(&usage, carried) {
                    run.usage.report(tokens);
                    if carried {
                        run.turn_reasoning_tokens += usage.reasoning_tokens;
                    }
                }
                self.publish_usage(session_id);
            }
            TurnMsg::Fallback { from, to, reason } => {
                let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut())
                else {
                    return;
                };
                running.retry = None;
                let turn_id = running.turn_id.clone();
                tracing::warn!(conversation = %self.id, %from, %to, %reason, "a model call goes to a fallback model");
                self.bus.publish(&ConversationEvent::ModelFallback {
                    session_id: session_id.to_owned(),
                    turn_id,
                    from,
                    to,
                    reason,
                });
            }
            TurnMsg::CheckBudget { passed, reply } => {
                let _ = reply.send(self.budget_reached(session_id, &passed));
            }
            TurnMsg::TakeSteered { reply } => {
                let items = self.take_steered(session_id).await;
                let _ = reply.send(items);
            }
            TurnMsg::Agents {
                request,
                reply,
                trace,
            } => {
                self.trace_parent = Some(trace);
                let answer = self.collaborate(session_id, request).await;
                self.trace_parent = None;
                let _ = reply.send(answer);
            }
            TurnMsg::Ended {
                status,
                error,
                error_code,
            } => {
                let (status, error) = self.stopped_while_retrying(session_id, status, error);
                self.end_turn(session_id, status, error, error_code).await;
            }
        }
    }

    /// A turn the user stopped while it waited to try a failed model call again ends
    /// `failed`, with that call's error: it failed, and it can be retried like any failed
    /// turn. (One stopped by the service's shutdown stays `interrupted`.)
    fn stopped_while_retrying(
        &self,
        session_id: &str,
        status: TurnStatus,
        error: Option<String>,
    ) -> (TurnStatus, Option<String>) {
        let Some(run) = self.sessions.get(session_id) else {
            return (status, error);
        };
        let waiting = run
            .running
            .as_ref()
            .and_then(|running| running.retry.as_ref());
        match waiting {
            Some(retry)
                if status == TurnStatus::Interrupted
                    && run.interrupt_cause != Some(super::session::InterruptCause::Shutdown) =>
            {
                (
                    TurnStatus::Failed,
                    Some(format!(
                        "{} (stopped while waiting to try again)",
                        retry.error
                    )),
                )
            }
            _ => (status, error),
        }
    }

    /// Writes a tool call's streamed output to the session's file (see
    /// `SessionRecord::Output`). A failure costs only what a crash would show afterwards.
    fn keep_streamed_output(&mut self, session_id: &str, item_id: &str, output: String) {
        let record = SessionRecord::Output {
            item_id: item_id.to_owned(),
            output,
        };
        let written = self
            .session_writer(session_id)
            .and_then(|writer| writer.append_unsynced(std::slice::from_ref(&record)));
        if let Err(error) = written {
            tracing::warn!(%error, conversation = %self.id, "cannot keep a tool's streamed output");
        }
    }

    /// Stores snapshots of items of a running turn with one append (a new item gets its
    /// `seq`), then publishes them. Returns their `seq`s.
    pub(super) fn store_turn_items(
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
                self.publish_item_started(item);
            }
            if finished {
                self.publish_item_completed(item);
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

    /// Messages steered into a session's running turn before its next model call: the user's
    /// steer messages, then sub-agents' reports.
    pub(super) async fn take_steered(&mut self, session_id: &str) -> Vec<Item> {
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
    pub(super) fn wait_again(&mut self, session_id: &str, entries: Vec<Waiting>) {
        if let Some(run) = self.run_mut(session_id) {
            run.pending.restore(entries);
        }
    }
}

/// The part of a tool call's output delta worth writing down as it streams: a tool call's,
/// up to `cap` bytes of output in all (the stored result keeps at most that much too).
fn streamed_output_to_keep(item: &Item, delta: &str, cap: usize) -> Option<String> {
    let ItemKind::ToolCall { output, .. } = &item.kind else {
        return None;
    };
    let room = cap.saturating_sub(output.len());
    if room == 0 || delta.is_empty() {
        return None;
    }
    let mut end = room.min(delta.len());
    while !delta.is_char_boundary(end) {
        end -= 1;
    }
    (end > 0).then(|| delta[..end].to_owned())
}
