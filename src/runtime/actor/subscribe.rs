//! A new subscriber of the conversation's events: the events it missed, or a snapshot of every
//! session (its running turn with the text and tool output so far, its last stored `seq`).

use std::collections::BTreeMap;

use crate::api::events::{ConversationEvent, RunningTurnView};

use super::session::RunningTurn;
use super::{ConversationActor, Subscription};
use crate::bus::{EventId, Replay};
use crate::domain::{Item, ItemKind, ItemStatus};

impl ConversationActor {
    pub(super) fn subscribe(&self, after: Option<EventId>) -> Subscription {
        if let Some(after) = after {
            let (receiver, replay) = self.bus.resume(after);
            if let Replay::Events(replay) = replay {
                return Subscription {
                    snapshot: None,
                    replay,
                    receiver,
                    bus: self.bus.clone(),
                };
            }
        }
        // Subscribe first, then snapshot: nothing can fall in between because events of this
        // conversation are only published by this task.
        let (receiver, _) = self.bus.subscribe();
        Subscription {
            snapshot: Some((self.bus.last_id(), self.snapshot())),
            replay: Vec::new(),
            receiver,
            bus: self.bus.clone(),
        }
    }

    fn snapshot(&self) -> ConversationEvent {
        // Root first, then sub-agents in the order they were created.
        let running: Vec<RunningTurnView> = self
            .state
            .sessions
            .iter()
            .filter_map(|session| {
                let run = self.sessions.get(&session.id)?;
                let running = run.running.as_ref()?;
                Some(RunningTurnView {
                    session_id: session.id.clone(),
                    turn_id: running.turn_id.clone(),
                    items: turn_items(&run.history, running)
                        .into_iter()
                        .cloned()
                        .collect(),
                    retry: running.retry.clone(),
                })
            })
            .collect();
        ConversationEvent::Snapshot {
            conversation: self.state.conversation.clone(),
            sessions: self.state.sessions.clone(),
            pending: self.pending_list(),
            usage: self.usage_view(self.root_id()),
            running,
            // A manual compaction in progress (an automatic one runs inside a turn).
            compacting: self.compacting.is_some(),
            approvals: self.approval_list(),
            last_seq: self.stored_last_seq(),
            cost: self.state.cost(),
        }
    }

    /// The last stored item's `seq` per session. Streaming text takes its `seq` when it starts
    /// and is stored only when it ends, so the newest `seq`s given out may not be stored.
    fn stored_last_seq(&self) -> BTreeMap<String, u64> {
        self.sessions
            .values()
            .map(|run| {
                let streaming: std::collections::HashSet<u64> = run
                    .running
                    .iter()
                    .flat_map(|running| &running.items)
                    // Streaming text is stored when it ends; a tool call when it starts.
                    .filter(|item| {
                        item.status == ItemStatus::Running
                            && matches!(
                                item.kind,
                                ItemKind::AgentMessage { .. } | ItemKind::Reasoning { .. }
                            )
                    })
                    .map(|item| item.seq)
                    .collect();
                let mut seq = run.last_seq;
                while seq > 0 && streaming.contains(&seq) {
                    seq -= 1;
                }
                (run.id.clone(), seq)
            })
            .collect()
    }
}

/// A running turn's items as a snapshot shows them: the user messages it answers (stored
/// before it started, or steered into it) and what it has produced so far, in `seq` order.
fn turn_items<'a>(history: &'a [Item], running: &'a RunningTurn) -> Vec<&'a Item> {
    let mut items: Vec<&Item> = history
        .iter()
        .rev()
        .take_while(|item| item.turn_id == running.turn_id)
        .filter(|item| matches!(item.kind, ItemKind::UserMessage { .. }))
        .chain(&running.items)
        .collect();
    items.sort_by_key(|item| item.seq);
    items
}
