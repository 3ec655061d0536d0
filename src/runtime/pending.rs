//! Waiting messages (SPEC §3): messages sent while the agent works, kept in memory only (§3.4).
//! The queue keeps the user's messages before sub-agents' reports (§3.3), puts an interrupting
//! message first, and decides which messages a steer or the next turn takes. It is plain data,
//! owned by the conversation actor, so every race is settled by the actor's order of commands.

use crate::domain::{Message, MessageMode, MessageSource};

#[derive(Debug, Default)]
pub struct PendingQueue {
    /// User messages first (an interrupting one at the very front), then agents' messages.
    messages: Vec<Message>,
    /// Set when the user interrupts the root agent: agents' messages then wait until the user
    /// sends another message (SPEC §4.3).
    hold_agent_messages: bool,
}

impl PendingQueue {
    pub fn list(&self) -> &[Message] {
        &self.messages
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Adds a waiting message in its place.
    pub fn push(&mut self, message: Message) {
        let position = self.position_for(&message);
        self.messages.insert(position, message);
    }

    fn position_for(&self, message: &Message) -> usize {
        let first_agent = self
            .messages
            .iter()
            .position(|m| m.source == MessageSource::Agent)
            .unwrap_or(self.messages.len());
        match (message.source, message.mode) {
            (MessageSource::User, MessageMode::Interrupt) => 0,
            (MessageSource::User, _) => first_agent,
            (MessageSource::Agent, _) => self.messages.len(),
        }
    }

    /// The user's steer messages, which join the running turn before its next model call.
    pub fn take_steered(&mut self) -> Vec<Message> {
        let (steered, rest) = std::mem::take(&mut self.messages)
            .into_iter()
            .partition(|m| m.source == MessageSource::User && m.mode == MessageMode::Steer);
        self.messages = rest;
        steered
    }

    /// The messages that start the next turn: the first user message (with the steer messages
    /// right after it when it is one: they all meant to join the turn that ended), else the
    /// first agent message unless those are held. Empty when nothing may start.
    pub fn take_next_turn(&mut self) -> Vec<Message> {
        let Some(first) = self.messages.first() else {
            return Vec::new();
        };
        if first.source == MessageSource::Agent && self.hold_agent_messages {
            return Vec::new();
        }
        let mut count = 1;
        if first.source == MessageSource::User && first.mode == MessageMode::Steer {
            count = self
                .messages
                .iter()
                .take_while(|m| m.source == MessageSource::User && m.mode == MessageMode::Steer)
                .count();
        }
        self.messages.drain(..count).collect()
    }

    /// Puts messages back at the front (a turn could not start with them).
    pub fn restore(&mut self, messages: Vec<Message>) {
        self.messages.splice(0..0, messages);
    }

    /// Changes a waiting message's text and/or mode; a new mode may move it. Returns the
    /// updated message, or `None` when it is not waiting.
    pub fn update(
        &mut self,
        message_id: &str,
        text: Option<String>,
        mode: Option<MessageMode>,
    ) -> Option<Message> {
        let index = self.messages.iter().position(|m| m.id == message_id)?;
        let mut message = self.messages.remove(index);
        if let Some(text) = text {
            message.text = text;
        }
        let moved = mode.is_some_and(|mode| mode != message.mode);
        if let Some(mode) = mode {
            message.mode = mode;
        }
        if moved {
            self.push(message.clone());
        } else {
            self.messages.insert(index, message.clone());
        }
        Some(message)
    }

    pub fn withdraw(&mut self, message_id: &str) -> Option<Message> {
        let index = self.messages.iter().position(|m| m.id == message_id)?;
        Some(self.messages.remove(index))
    }

    pub fn hold_agent_messages(&mut self, hold: bool) {
        self.hold_agent_messages = hold;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MessageStatus, now};

    fn message(id: &str, source: MessageSource, mode: MessageMode) -> Message {
        Message {
            id: id.to_owned(),
            session_id: "s".to_owned(),
            text: id.to_owned(),
            mode,
            source,
            from_session_id: None,
            status: MessageStatus::Waiting,
            created_at: now(),
            images: Vec::new(),
        }
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id.as_str()).collect()
    }

    use MessageMode::{Interrupt, Queue, Steer};
    use MessageSource::{Agent, User};

    #[test]
    fn user_messages_come_before_agents_and_an_interrupt_goes_first() {
        let mut queue = PendingQueue::default();
        queue.push(message("agent1", Agent, Queue));
        queue.push(message("user1", User, Queue));
        queue.push(message("agent2", Agent, Queue));
        queue.push(message("user2", User, Steer));
        queue.push(message("now", User, Interrupt));
        assert_eq!(
            ids(queue.list()),
            ["now", "user1", "user2", "agent1", "agent2"]
        );
    }

    #[test]
    fn a_steer_takes_only_the_users_steer_messages() {
        let mut queue = PendingQueue::default();
        queue.push(message("q", User, Queue));
        queue.push(message("s1", User, Steer));
        queue.push(message("a", Agent, Steer));
        queue.push(message("s2", User, Steer));
        assert_eq!(ids(&queue.take_steered()), ["s1", "s2"]);
        assert_eq!(ids(queue.list()), ["q", "a"]);
    }

    #[test]
    fn the_next_turn_takes_one_queued_message_or_a_run_of_steers() {
        let mut queue = PendingQueue::default();
        queue.push(message("s1", User, Steer));
        queue.push(message("s2", User, Steer));
        queue.push(message("q1", User, Queue));
        queue.push(message("q2", User, Queue));
        queue.push(message("a", Agent, Queue));
        assert_eq!(ids(&queue.take_next_turn()), ["s1", "s2"]);
        assert_eq!(ids(&queue.take_next_turn()), ["q1"]);
        assert_eq!(ids(&queue.take_next_turn()), ["q2"]);
        queue.hold_agent_messages(true);
        assert!(queue.take_next_turn().is_empty());
        queue.hold_agent_messages(false);
        assert_eq!(ids(&queue.take_next_turn()), ["a"]);
        assert!(queue.take_next_turn().is_empty());
    }

    #[test]
    fn updating_the_mode_moves_a_message_and_withdrawing_removes_it() {
        let mut queue = PendingQueue::default();
        queue.push(message("q1", User, Queue));
        queue.push(message("q2", User, Queue));
        let updated = queue
            .update("q2", Some("new text".into()), Some(Interrupt))
            .unwrap();
        assert_eq!(updated.text, "new text");
        assert_eq!(ids(queue.list()), ["q2", "q1"]);
        assert!(queue.update("missing", None, None).is_none());
        assert_eq!(queue.withdraw("q1").unwrap().id, "q1");
        assert!(queue.withdraw("q1").is_none());
        assert_eq!(ids(queue.list()), ["q2"]);
    }
}
