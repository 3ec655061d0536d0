//! The end of a turn in the actor: its running items closed, a notice for an interrupt or a
//! failure, the end stored, then what follows (a sub-agent's report to its parent, the next
//! waiting message); interrupts and turns left open by a crash.

use crate::config::HookEvent;
use serde_json::Value;
use tokio::sync::oneshot;

use super::ConversationActor;
use super::session::InterruptCause;
use crate::api::events::ConversationEvent;
use crate::config::ReasoningContext;
use crate::domain::{Item, ItemStatus, TurnStatus, now};
use crate::index::IndexUpdate;
use crate::runtime::RuntimeError;
use crate::store::records::{MetaRecord, SessionRecord};

impl ConversationActor {
    pub(super) async fn end_turn(
        &mut self,
        session_id: &str,
        status: TurnStatus,
        error: Option<String>,
        error_code: Option<crate::domain::TurnErrorCode>,
    ) {
        // An approval still waiting (the turn was interrupted or stopped): its call never runs.
        self.cancel_approvals(session_id);
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
        // turn's reasoning is taken back.
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
            .filter(|i| i.status.is_open())
        {
            item.status = match status {
                TurnStatus::Failed => ItemStatus::Failed,
                _ => ItemStatus::Interrupted,
            };
            if self
                .append_items(session_id, std::slice::from_ref(&item))
                .is_ok()
            {
                self.publish_item_completed(&item);
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
            error_code,
            at: now(),
            usage: Some(running.usage.clone()),
        };
        if session_id == self.root_id() {
            self.note_searched_through();
        }
        if let Err(error) = self.append_meta(vec![record.clone()]) {
            if error.is_fence() {
                // Cluster mode: the end was not accepted, and the conversation is (or may be)
                // another instance's, which closes the turn as it finds it. Followers are told
                // it moved (the lease's loss stops this actor), never an end that does not
                // count; nothing more is indexed from here.
                tracing::warn!(%error, conversation = %self.id, "the end of a turn was not accepted; the conversation moved");
                self.state.apply(&record);
                for waiter in waiters {
                    let _ = waiter.send(Ok(true));
                }
                return;
            }
            // Clients are told the turn ended, and this actor must agree with them. On disk the
            // turn stays open until the actor's next stored record carries the end along (or,
            // after a crash, the next start closes it as interrupted).
            tracing::error!(%error, conversation = %self.id, "cannot store the end of a turn");
            self.end_unstored(record.clone());
            // The index is about to be told how the turn ended; the files will say otherwise.
            self.shared.index.mark_out_of_date(&[&self.id]).await;
        }
        // The end is on disk: followers of the conversation learn it now. The list-level
        // `conversation.updated` follows the index update, so a sidebar that reacts to it by
        // listing sees the same state.
        let files_changed = self.sessions.get(session_id).map_or(0, |run| {
            crate::runtime::checkpointing::count_changed(
                run.history
                    .iter()
                    .filter(|item| item.turn_id == running.turn_id),
            )
        });
        let mut fields = serde_json::json!({
            "status": status,
            "error": error,
            "error_code": error_code,
            "usage": running.usage,
            "files_changed": files_changed,
        });
        let parent = self
            .state
            .session(session_id)
            .and_then(|session| session.parent_id.clone());
        let event = match parent {
            None => HookEvent::TurnEnded,
            Some(parent) => {
                fields["parent_session_id"] = parent.into();
                HookEvent::SubagentEnded
            }
        };
        self.notify_hooks(event, session_id, Some(&running.turn_id), fields);
        self.write_title_after(session_id, &running.turn_id, status);
        self.bus.publish(&ConversationEvent::TurnEnded {
            session_id: session_id.to_owned(),
            turn_id: running.turn_id.clone(),
            status,
            error: error.clone(),
            error_code,
            files_changed,
            usage: running.usage,
        });
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

    /// Tells the hooks of `event` (a notification) about `turn_id` of `session_id`; a command
    /// hook runs under that session's sandbox.
    pub(super) fn notify_hooks(
        &self,
        event: HookEvent,
        session_id: &str,
        turn_id: Option<&str>,
        fields: Value,
    ) {
        if !self.shared.hooks.any(event) {
            return;
        }
        let Some((subject, sandbox)) = self.hook_subject(session_id, turn_id.map(str::to_owned))
        else {
            return;
        };
        self.shared.hooks.notify(event, subject, sandbox, fields);
    }

    /// Who a hook about `session_id` is asked about, and the sandbox its command runs in:
    /// that session's. `None` for a session this conversation does not have.
    pub(super) fn hook_subject(
        &self,
        session_id: &str,
        turn_id: Option<String>,
    ) -> Option<(crate::hooks::Subject, crate::sandbox::SandboxPolicy)> {
        let session = self.state.session(session_id)?;
        let (sandbox, _) = crate::runtime::sandboxing::session_rules(
            &self.agents,
            &self.state,
            session_id,
            &self.shared.protected,
        )?;
        let conversation = &self.state.conversation;
        let subject = crate::hooks::Subject {
            conversation_id: conversation.id.clone(),
            session_id: session_id.to_owned(),
            agent: session.agent.clone(),
            turn_id,
            cwd: conversation.cwd.clone().into(),
        };
        Some((subject, sandbox))
    }

    /// Who a `user_message` hook about a message to `session` (the root's when none) is asked
    /// about: the turn it would join is the running one, if any.
    pub(super) fn message_hook_subject(
        &self,
        session: Option<String>,
    ) -> Result<(crate::hooks::Subject, crate::sandbox::SandboxPolicy), RuntimeError> {
        let session_id = session.unwrap_or_else(|| self.root_id().to_owned());
        let running = self
            .sessions
            .get(&session_id)
            .and_then(|run| run.running.as_ref())
            .map(|turn| turn.turn_id.clone());
        self.hook_subject(&session_id, running)
            .ok_or_else(|| RuntimeError::NotFound(format!("session {session_id}")))
    }

    /// A notice at the end of a turn that did not complete: the model reads it at its next
    /// call and every client sees it.
    pub(super) fn store_notice(&mut self, session_id: &str, turn_id: &str, text: String) {
        let notice = Item {
            seq: self.next_seq(session_id),
            ..crate::domain::notice_item(session_id.to_owned(), turn_id.to_owned(), None, text)
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
        // A stop stops: the messages that wait do not start the next turn by themselves.
        run.pending.hold_messages_from_above(true);
        run.interrupt_waiters.push(reply);
    }

    /// Turns a crash left `running` are closed as `interrupted` before anything else happens,
    /// in every session.
    /// Returns the turns closed.
    pub(super) fn close_stale_turns(
        &mut self,
        except: Option<&str>,
    ) -> Result<Vec<String>, RuntimeError> {
        let stale: Vec<(String, String)> = self
            .state
            .running_turns()
            .filter(|t| Some(t.id.as_str()) != except)
            .map(|t| (t.session_id.clone(), t.id.clone()))
            .collect();
        let mut closed = Vec::new();
        for (session_id, turn_id) in stale {
            closed.push(turn_id.clone());
            let mut items =
                self.shared
                    .store
                    .read_items(&self.id, &session_id, &self.acceptance())?;
            let closing: Vec<Item> = crate::index::rebuild::close_cut_turn(
                &self.state,
                &mut items,
                &session_id,
                &turn_id,
            )
            .into_iter()
            .filter_map(|record| match record {
                SessionRecord::Item { item } => Some(item),
                SessionRecord::Output { .. } => None,
            })
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
                error_code: None,
                at: now(),
                usage: None,
            }])?;
        }
        Ok(closed)
    }

    /// Tells the index and the list about turns closed at load: in cluster mode the
    /// conversation was listed `running` by the owner that died, and only its new owner can
    /// correct that.
    pub(super) async fn index_closed_turns(&self, closed: &[String]) {
        let mut updates = vec![self.conversation_update()];
        let turns = self
            .state
            .turns
            .iter()
            .filter(|turn| closed.contains(&turn.id));
        updates.extend(turns.map(|turn| IndexUpdate::Turn {
            conversation_id: &self.id,
            turn,
        }));
        updates.extend(
            self.state
                .sessions
                .iter()
                .map(|session| IndexUpdate::Session {
                    conversation_id: &self.id,
                    session,
                }),
        );
        self.shared.index_quietly(&updates).await;
        self.publish_conversation();
    }
}
