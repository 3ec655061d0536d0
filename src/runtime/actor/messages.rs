//! Messages sent to an agent: a new turn when the agent is idle, else a waiting
//! message (steer, queue, interrupt) that can still be edited, withdrawn or promoted. A message
//! can go to the root agent or, with `session_id`, straight to a sub-agent.

use super::session::InterruptCause;
use super::{Answer, ConversationActor};
use crate::api::responses::MessageAccepted;
use crate::domain::{CommandUse, Message, MessageMode, MessageSource, MessageStatus, new_id, now};
use crate::runtime::{NewMessage, PendingPatch, RequestKey, RuntimeError};
use crate::store::records::MetaRecord;

impl ConversationActor {
    pub(super) async fn send(
        &mut self,
        request: NewMessage,
        key: Option<RequestKey>,
        hooks: Vec<crate::domain::HookRun>,
    ) -> Result<Answer, RuntimeError> {
        if let Some(answer) = key.as_ref().and_then(|key| self.answered(key)) {
            return answer;
        }
        let session_id = request
            .session_id
            .unwrap_or_else(|| self.root_id().to_owned());
        if !self.sessions.contains_key(&session_id) {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        self.check_can_run(&session_id)?;
        let message = Message {
            hooks,
            id: new_id("m"),
            session_id,
            text: request.text,
            mode: request.mode,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Waiting,
            created_at: now(),
            images: request.images,
            // The runtime filled `text` in from the command it names (`Runtime::send_message`).
            command: request.command.map(|name| CommandUse {
                name,
                arguments: request.arguments.unwrap_or_default(),
            }),
        };
        self.deliver(message, key)
    }

    /// The answer the message sent with `key` got, when one was: the stored one, or a
    /// waiting message's.
    pub(super) fn answered(&self, key: &RequestKey) -> Option<Result<Answer, RuntimeError>> {
        if let Some(stored) = self.state.answers.get(&key.key) {
            return Some(key.replay_accepted(stored));
        }
        let (answer, first) = self.pending_answers.get(&key.key)?;
        Some(key.repeat(first, answer))
    }

    /// Gives a message to its session: a new turn when the session is idle, else it waits
    /// (steer, queue) or cuts in (interrupt). A user message's `Idempotency-Key` keeps the
    /// answer it got.
    pub(super) fn deliver(
        &mut self,
        message: Message,
        key: Option<RequestKey>,
    ) -> Result<Answer, RuntimeError> {
        let session_id = message.session_id.clone();
        let report = self.is_report(&message);
        let held = report
            && self
                .sessions
                .get(&session_id)
                .is_some_and(|run| run.pending.holds_agent_messages());
        // Messages held since a stop go first, in the order they were sent: the new one joins
        // them in the queue, and the queue starts the next turn.
        let after_held = !report
            && self.sessions.get_mut(&session_id).is_some_and(|run| {
                let held = run.pending.holds_messages_from_above();
                run.pending.hold_messages_from_above(false);
                held
            });
        if self.session_is_idle(&session_id)
            && !held
            && !after_held
            && self.check_can_run(&session_id).is_ok()
        {
            return self.start_turn(&session_id, vec![message], key);
        }
        // The agent is busy (a turn, or a compaction): the message waits (steer, queue) or
        // cuts in (interrupt).
        let run = self
            .sessions
            .get_mut(&session_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("session {session_id}")))?;
        if message.mode == MessageMode::Interrupt {
            run.interrupt(InterruptCause::User);
        }
        let answer = Answer::Accepted(MessageAccepted {
            message: message.clone(),
        });
        if report {
            run.pending.push_report(message);
        } else {
            run.pending.push(message);
        }
        if let Some(key) = key {
            self.pending_answers
                .insert(key.key.clone(), (answer.clone(), key));
        }
        self.publish_pending();
        if after_held {
            self.start_next_waiting(&session_id);
        }
        Ok(answer)
    }

    /// The answers given to the idempotency keys of `messages` while they waited, as records
    /// to store with their acceptance: a retry of such a request, even after the conversation
    /// was unloaded or the service restarted, gets the same answer instead of a second message.
    /// Once stored they are in `state.answers`, and `forget_stored_answers` drops them here.
    pub(super) fn pending_answer_records(&self, messages: &[Message]) -> Vec<MetaRecord> {
        let ids: std::collections::HashSet<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        self.pending_answers
            .iter()
            .filter(|(_, (answer, _))| ids.contains(answer.message().id.as_str()))
            .map(|(_, (answer, key))| key.answered(answer, now()))
            .collect()
    }

    /// Drops the waiting messages' answers that are now stored (`state.answers` has them).
    pub(super) fn forget_stored_answers(&mut self) {
        let stored = &self.state.answers;
        self.pending_answers
            .retain(|key, _| !stored.contains_key(key));
    }

    /// Changes a waiting message. A mode of `steer` lets the running turn take it
    /// at its next model call; `interrupt` cuts in at once.
    pub(super) fn update_pending(
        &mut self,
        message_id: &str,
        patch: PendingPatch,
    ) -> Result<Message, RuntimeError> {
        let Some(session_id) = self.waiting_in(message_id) else {
            return Err(self.not_pending(message_id));
        };
        let run = self.sessions.get_mut(&session_id).expect("found above");
        let Some(message) = run.pending.update(message_id, patch.text, patch.mode) else {
            return Err(self.not_pending(message_id));
        };
        if message.mode == MessageMode::Interrupt {
            run.interrupt(InterruptCause::User);
        }
        self.publish_pending();
        self.start_next_waiting(&session_id);
        Ok(message)
    }

    /// Withdraws a waiting message and gives it back (for editing).
    pub(super) fn withdraw_pending(&mut self, message_id: &str) -> Result<Message, RuntimeError> {
        let withdrawn = self
            .waiting_in(message_id)
            .and_then(|session_id| self.sessions.get_mut(&session_id))
            .and_then(|run| run.pending.withdraw(message_id));
        let Some(message) = withdrawn else {
            return Err(self.not_pending(message_id));
        };
        self.publish_pending();
        Ok(message)
    }

    /// Sends a waiting message now. With its agent idle (the messages held since a stop), it
    /// starts a turn on its own and the others keep waiting; with a turn running, it joins
    /// that turn at its next model call (steer).
    pub(super) fn send_pending_now(&mut self, message_id: &str) -> Result<Message, RuntimeError> {
        let Some(session_id) = self.waiting_in(message_id) else {
            return Err(self.not_pending(message_id));
        };
        if !self.session_is_idle(&session_id) {
            let patch = PendingPatch {
                text: None,
                mode: Some(MessageMode::Steer),
            };
            return self.update_pending(message_id, patch);
        }
        self.check_can_run(&session_id)?;
        let run = self.sessions.get_mut(&session_id).expect("found above");
        let Some(message) = run.pending.withdraw(message_id) else {
            return Err(self.not_pending(message_id));
        };
        let report = self.is_report(&message);
        match self.start_turn(&session_id, vec![message.clone()], None) {
            Ok(answer) => {
                self.publish_pending();
                Ok(answer.message().clone())
            }
            Err(error) => {
                if let Some(run) = self.sessions.get_mut(&session_id) {
                    run.pending
                        .restore(vec![crate::runtime::pending::Waiting { message, report }]);
                }
                Err(error)
            }
        }
    }

    /// The session whose waiting messages hold `message_id`.
    fn waiting_in(&self, message_id: &str) -> Option<String> {
        self.sessions
            .values()
            .find(|run| run.pending.list().any(|m| m.id == message_id))
            .map(|run| run.id.clone())
    }

    /// `NotWaiting` for a message the agent has already taken, `NotFound` for one never seen.
    fn not_pending(&self, message_id: &str) -> RuntimeError {
        if self.state.accepted.contains_key(message_id) {
            RuntimeError::NotWaiting
        } else {
            RuntimeError::NotFound(format!("waiting message {message_id}"))
        }
    }
}
