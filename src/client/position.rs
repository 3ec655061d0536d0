//! Where `chat` is in a conversation's stream, so that a reconnect that cannot be replayed
//! reads from the history exactly what was not seen finished.

use crate::api::events::ConversationEvent;
use crate::domain::{Item, ItemStatus};

/// Where a terminal is in a conversation's stream, so that a reconnect misses nothing: the
/// last event's id, and the root session's items it has seen start and finish.
#[derive(Default)]
pub struct Position {
    pub last_event_id: Option<String>,
    pub root_session_id: String,
    /// The newest item seen.
    newest_seq: u64,
    /// Items seen start and not yet finish.
    open: std::collections::BTreeSet<u64>,
}

impl Position {
    pub fn observe(&mut self, event: &ConversationEvent) {
        match event {
            ConversationEvent::Snapshot {
                conversation,
                running,
                last_seq,
                ..
            } => {
                self.root_session_id
                    .clone_from(&conversation.root_session_id);
                self.newest_seq = last_seq.get(&self.root_session_id).copied().unwrap_or(0);
                self.open = running
                    .iter()
                    .flat_map(|turn| &turn.items)
                    .filter(|item| self.is_root(item) && item.status == ItemStatus::Running)
                    .map(|item| item.seq)
                    .collect();
            }
            ConversationEvent::ItemStarted { item } | ConversationEvent::ItemCompleted { item } => {
                if !self.is_root(item) {
                    return;
                }
                self.newest_seq = self.newest_seq.max(item.seq);
                if matches!(event, ConversationEvent::ItemStarted { .. }) {
                    self.open.insert(item.seq);
                } else {
                    self.open.remove(&item.seq);
                }
            }
            _ => {}
        }
    }

    fn is_root(&self, item: &Item) -> bool {
        item.session_id == self.root_session_id
    }

    /// The history after this `seq` holds everything not seen finished.
    pub fn resume_after(&self) -> u64 {
        self.open
            .first()
            .map_or(self.newest_seq, |&first| first.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fixtures::{ROOT, agent, running, snapshot};

    fn item(session: &str, seq: u64, status: ItemStatus) -> Item {
        let mut item = agent(&format!("m{seq}"), "", status);
        item.session_id = session.to_owned();
        item.seq = seq;
        item
    }

    fn started(session: &str, seq: u64) -> ConversationEvent {
        let item = item(session, seq, ItemStatus::Running);
        ConversationEvent::ItemStarted { item }
    }

    fn completed(session: &str, seq: u64) -> ConversationEvent {
        let item = item(session, seq, ItemStatus::Completed);
        ConversationEvent::ItemCompleted { item }
    }

    #[test]
    fn a_reconnect_asks_the_history_for_everything_not_seen_finished() {
        let mut position = Position::default();
        let items = vec![
            item(ROOT, 5, ItemStatus::Running),
            item("s_sub", 9, ItemStatus::Running),
        ];
        let mut first = snapshot(Vec::new(), vec![running(ROOT, "t_1", items)]);
        if let ConversationEvent::Snapshot { last_seq, .. } = &mut first {
            last_seq.extend([(ROOT.to_owned(), 5), ("s_sub".to_owned(), 9)]);
        }
        position.observe(&first);
        // Item 5 is still streaming: the history after 4 holds its end.
        assert_eq!(position.resume_after(), 4);
        position.observe(&completed(ROOT, 5));
        assert_eq!(position.resume_after(), 5);
        position.observe(&started(ROOT, 6));
        position.observe(&started(ROOT, 7));
        position.observe(&completed(ROOT, 7));
        // A sub-agent's items have seqs of their own session: they do not count.
        position.observe(&completed("s_sub", 12));
        assert_eq!(position.resume_after(), 5);
        position.observe(&completed(ROOT, 6));
        assert_eq!(position.resume_after(), 7);
    }
}
