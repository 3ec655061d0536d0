//! Waiting messages: messages sent while the agent works, kept in memory only (lost when
//! the service stops).
//! The queue keeps messages from above (the user's, or a parent agent's) before sub-agents'
//! reports, puts an interrupting message first, and decides which messages a steer or
//! the next turn takes. It is plain data,
//! owned by the conversation actor, so every race is settled by the actor's order of commands.

use crate::domain::{Message, MessageMode};

#[derive(Debug, Default)]
pub struct PendingQueue {
    /// Messages from above (the user's, or a parent agent's) first, an interrupting one at the
    /// very front; then sub-agents' reports.
    entries: Vec<Waiting>,
    /// Set when the user interrupts the agent: reports then wait until the user (or, for a
    /// sub-agent, its parent) sends another message.
    hold_reports: bool,
    /// Set when the user stops the agent (`POST …/interrupt`): the messages from above that
    /// wait stay waiting, instead of starting the next turn at once, until another message
    /// from above comes.
    hold_above: bool,
}

/// A waiting message, and whether it is a sub-agent's report (reports come last).
#[derive(Debug, Clone)]
pub struct Waiting {
    pub message: Message,
    pub report: bool,
}

impl PendingQueue {
    pub fn list(&self) -> impl Iterator<Item = &Message> {
        self.entries.iter().map(|entry| &entry.message)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds a waiting message from above (the user, or a parent agent) in its place.
    pub fn push(&mut self, message: Message) {
        self.insert(Waiting {
            message,
            report: false,
        });
    }

    /// Adds a sub-agent's report: after everything else (they come last).
    pub fn push_report(&mut self, message: Message) {
        self.insert(Waiting {
            message,
            report: true,
        });
    }

    fn insert(&mut self, entry: Waiting) {
        let position = match (entry.report, entry.message.mode) {
            (true, _) => self.entries.len(),
            (false, MessageMode::Interrupt) => 0,
            (false, _) => self.first_report(),
        };
        self.entries.insert(position, entry);
    }

    fn first_report(&self) -> usize {
        self.entries
            .iter()
            .position(|entry| entry.report)
            .unwrap_or(self.entries.len())
    }

    /// What joins the running turn before its next model call: the steer messages from above,
    /// then, when nothing else from above still waits and reports are not held, the reports.
    pub fn take_steered(&mut self) -> Vec<Waiting> {
        let (mut steered, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|entry| !entry.report && entry.message.mode == MessageMode::Steer);
        self.entries = rest;
        let above_waits = self.entries.iter().any(|entry| !entry.report);
        if !above_waits && !self.hold_reports {
            steered.append(&mut self.entries);
        }
        steered
    }

    /// The messages that start the next turn: the first message from above (with the steer
    /// messages right after it when it is one: they all meant to join the turn that ended),
    /// else the waiting reports, together, unless they are held. Empty when nothing may start.
    pub fn take_next_turn(&mut self) -> Vec<Waiting> {
        let Some(first) = self.entries.first() else {
            return Vec::new();
        };
        if self.hold_above && !first.report {
            return Vec::new();
        }
        let count = if first.report {
            if self.hold_reports {
                return Vec::new();
            }
            self.entries.len()
        } else if first.message.mode == MessageMode::Steer {
            self.entries
                .iter()
                .take_while(|entry| !entry.report && entry.message.mode == MessageMode::Steer)
                .count()
        } else {
            1
        };
        self.entries.drain(..count).collect()
    }

    /// Puts messages back in their places (a turn could not take them), ahead of the others
    /// of their kind.
    pub fn restore(&mut self, entries: Vec<Waiting>) {
        let (reports, above): (Vec<Waiting>, Vec<Waiting>) =
            entries.into_iter().partition(|entry| entry.report);
        self.entries.splice(0..0, above);
        let first_report = self.first_report();
        self.entries.splice(first_report..first_report, reports);
    }

    /// Changes a waiting message's text and/or mode; a new mode may move it. Returns the
    /// updated message, or `None` when it is not waiting.
    pub fn update(
        &mut self,
        message_id: &str,
        text: Option<String>,
        mode: Option<MessageMode>,
    ) -> Option<Message> {
        let index = self
            .entries
            .iter()
            .position(|entry| entry.message.id == message_id)?;
        let mut entry = self.entries.remove(index);
        if let Some(text) = text {
            // Edited, it is the user's own text, no longer the command's prompt.
            if text != entry.message.text {
                entry.message.command = None;
            }
            entry.message.text = text;
        }
        let moved = mode.is_some_and(|mode| mode != entry.message.mode);
        if let Some(mode) = mode {
            entry.message.mode = mode;
        }
        let message = entry.message.clone();
        if moved {
            self.insert(entry);
        } else {
            self.entries.insert(index, entry);
        }
        Some(message)
    }

    pub fn withdraw(&mut self, message_id: &str) -> Option<Message> {
        let index = self
            .entries
            .iter()
            .position(|entry| entry.message.id == message_id)?;
        Some(self.entries.remove(index).message)
    }

    /// Holds (or releases) the waiting messages from above: see `hold_above`.
    pub fn hold_messages_from_above(&mut self, hold: bool) {
        self.hold_above = hold;
    }

    /// Whether messages from above wait, held since a stop.
    pub fn holds_messages_from_above(&self) -> bool {
        self.hold_above && self.entries.iter().any(|entry| !entry.report)
    }

    pub fn hold_agent_messages(&mut self, hold: bool) {
        self.hold_reports = hold;
    }

    pub fn holds_agent_messages(&self) -> bool {
        self.hold_reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MessageSource, MessageStatus, now};

    fn message(id: &str, mode: MessageMode) -> Message {
        Message {
            hooks: Vec::new(),
            id: id.to_owned(),
            session_id: "s".to_owned(),
            text: id.to_owned(),
            mode,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Waiting,
            created_at: now(),
            images: Vec::new(),
            command: None,
        }
    }

    fn ids<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<&'a str> {
        messages.into_iter().map(|m| m.id.as_str()).collect()
    }

    fn taken(entries: &[Waiting]) -> Vec<&str> {
        ids(entries.iter().map(|entry| &entry.message))
    }

    use MessageMode::{Interrupt, Queue, Steer};

    #[test]
    fn an_edited_command_message_is_the_users_own_text() {
        let mut queue = PendingQueue::default();
        let mut sent = message("m", Queue);
        sent.command = Some(crate::domain::CommandUse {
            name: "review".to_owned(),
            arguments: String::new(),
        });
        queue.push(sent);
        let kept = queue
            .update("m", Some("m".to_owned()), Some(Steer))
            .unwrap();
        assert!(
            kept.command.is_some(),
            "the same text is still the command's"
        );
        let edited = queue.update("m", Some("mine".to_owned()), None).unwrap();
        assert_eq!(edited.command, None);
    }

    #[test]
    fn messages_from_above_come_before_reports_and_an_interrupt_goes_first() {
        let mut queue = PendingQueue::default();
        queue.push_report(message("report1", Steer));
        queue.push(message("user1", Queue));
        queue.push_report(message("report2", Steer));
        queue.push(message("user2", Steer));
        queue.push(message("now", Interrupt));
        assert_eq!(
            ids(queue.list()),
            ["now", "user1", "user2", "report1", "report2"]
        );
    }

    #[test]
    fn a_steer_takes_reports_only_when_nothing_from_above_still_waits() {
        let mut queue = PendingQueue::default();
        queue.push(message("q", Queue));
        queue.push(message("s1", Steer));
        queue.push_report(message("r", Steer));
        queue.push(message("s2", Steer));
        assert_eq!(taken(&queue.take_steered()), ["s1", "s2"]);
        assert_eq!(ids(queue.list()), ["q", "r"]);
        assert_eq!(taken(&queue.take_next_turn()), ["q"]);
        queue.push(message("s3", Steer));
        assert_eq!(taken(&queue.take_steered()), ["s3", "r"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn held_reports_wait_until_released() {
        let mut queue = PendingQueue::default();
        queue.push_report(message("r1", Steer));
        queue.push_report(message("r2", Steer));
        queue.hold_agent_messages(true);
        assert!(queue.take_steered().is_empty());
        assert!(queue.take_next_turn().is_empty());
        queue.hold_agent_messages(false);
        assert_eq!(taken(&queue.take_next_turn()), ["r1", "r2"]);
    }

    #[test]
    fn the_next_turn_takes_one_queued_message_or_a_run_of_steers() {
        let mut queue = PendingQueue::default();
        queue.push(message("s1", Steer));
        queue.push(message("s2", Steer));
        queue.push(message("q1", Queue));
        queue.push(message("q2", Queue));
        queue.push_report(message("a", Queue));
        assert_eq!(taken(&queue.take_next_turn()), ["s1", "s2"]);
        assert_eq!(taken(&queue.take_next_turn()), ["q1"]);
        assert_eq!(taken(&queue.take_next_turn()), ["q2"]);
        queue.hold_agent_messages(true);
        assert!(queue.take_next_turn().is_empty());
        queue.hold_agent_messages(false);
        assert_eq!(taken(&queue.take_next_turn()), ["a"]);
        assert!(queue.take_next_turn().is_empty());
    }

    #[test]
    fn restored_messages_go_back_to_their_places() {
        let mut queue = PendingQueue::default();
        queue.push(message("s", Steer));
        queue.push_report(message("r", Steer));
        let steered = queue.take_steered();
        queue.push(message("q", Queue));
        queue.push_report(message("r2", Steer));
        queue.restore(steered);
        assert_eq!(ids(queue.list()), ["s", "q", "r", "r2"]);
    }

    #[test]
    fn updating_the_mode_moves_a_message_and_withdrawing_removes_it() {
        let mut queue = PendingQueue::default();
        queue.push(message("q1", Queue));
        queue.push(message("q2", Queue));
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
