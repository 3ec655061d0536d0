//! The live part of one agent inside a conversation actor: the root agent or a sub-agent.
//! Each has its own stored history, its running turn, its waiting messages and its
//! usage meter; the actor holds one `SessionRun` per session and is still the only writer.

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::super::RuntimeError;
use super::super::compaction;
use super::super::pending::PendingQueue;
use super::super::usage::UsageTracker;
use crate::api::events::RetryState;
use crate::domain::{Item, ItemKind, ItemStatus, TurnUsage};

pub(super) struct SessionRun {
    pub id: String,
    /// Stored items (the last snapshot of each, in `seq` order), kept in step with the file by
    /// `ConversationActor::append_items`, so a turn does not re-read the whole history.
    pub history: Vec<Item>,
    /// The last `seq` given out (see `stored_last_seq` for the last stored one).
    pub last_seq: u64,
    pub running: Option<RunningTurn>,
    /// Waiting messages, in memory only: user messages first, then agents'.
    pub pending: PendingQueue,
    pub usage: UsageTracker,
    /// Reasoning tokens the running turn's model calls reported, while it gets them back.
    pub turn_reasoning_tokens: u64,
    /// Why the running turn is being interrupted, for the notice the model gets next.
    pub interrupt_cause: Option<InterruptCause>,
    /// Interrupt requests answered when the running turn has ended.
    pub interrupt_waiters: Vec<oneshot::Sender<Result<bool, RuntimeError>>>,
    /// The session's environment block, kept while the conversation is loaded so that its
    /// requests start with the same bytes.
    pub environment: std::sync::Arc<crate::runtime::instructions::EnvironmentCell>,
}

/// The turn in progress and the items it has produced so far (with their live text).
pub(super) struct RunningTurn {
    pub turn_id: String,
    pub cancel: CancellationToken,
    /// Cuts short the wait before the model call's next attempt ("retry now").
    pub retry_now: std::sync::Arc<tokio::sync::Notify>,
    pub items: Vec<Item>,
    /// The model call waits to be tried again (shown in snapshots until the next attempt
    /// produces output).
    pub retry: Option<RetryState>,
    /// The tokens of the model calls answered so far, stored with the turn's end.
    pub usage: TurnUsage,
    /// A root agent's turn: the tokens and model calls of its sub-agents' calls while it runs,
    /// which count toward its limits.
    pub sub_agents: (u64, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InterruptCause {
    /// The user (through the API), or a parent agent's `interrupt_agent`.
    User,
    Shutdown,
}

impl SessionRun {
    pub fn new(id: String, history: Vec<Item>) -> SessionRun {
        SessionRun {
            id,
            last_seq: history.last().map_or(0, |item| item.seq),
            // The actor sets the model's tokenizer and the request overhead right after
            // (`ConversationActor::reset_meter`); a turn's spec adopts them again.
            usage: UsageTracker::default().restart(&compaction::model_view(&history)),
            history,
            running: None,
            pending: PendingQueue::default(),
            turn_reasoning_tokens: 0,
            interrupt_cause: None,
            interrupt_waiters: Vec::new(),
            environment: Default::default(),
        }
    }

    /// The text of the last finished answer, for the Agents tab and `list_agents`.
    pub fn last_message(&self) -> Option<String> {
        self.history.iter().rev().find_map(|item| match &item.kind {
            ItemKind::AgentMessage { text } if item.status == ItemStatus::Completed => {
                Some(text.clone())
            }
            _ => None,
        })
    }

    pub fn next_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    /// Cancels the running turn; it ends `interrupted` once its task has stored what it had.
    /// A user's interrupt holds sub-agents' reports until the user speaks again.
    pub fn interrupt(&mut self, cause: InterruptCause) -> bool {
        let Some(running) = &self.running else {
            return false;
        };
        running.cancel.cancel();
        self.interrupt_cause.get_or_insert(cause);
        if cause == InterruptCause::User {
            self.pending.hold_agent_messages(true);
        }
        true
    }
}

/// Folds a stored item snapshot into a history, as `store::fold_items` does for a file.
pub(super) fn remember(history: &mut Vec<Item>, item: &Item) {
    // A snapshot of a recent item is the usual case: look from the end.
    if let Some(existing) = history.iter_mut().rev().find(|known| known.id == item.id) {
        *existing = item.clone();
        return;
    }
    history.push(item.clone());
    if history.len() > 1 && history[history.len() - 2].seq > item.seq {
        history.sort_by_key(|known| known.seq);
    }
}

pub(super) fn append_delta(item: &mut Item, delta: &str) {
    match &mut item.kind {
        ItemKind::AgentMessage { text } | ItemKind::Reasoning { text, .. } => text.push_str(delta),
        ItemKind::ToolCall { output, .. } => output.push_str(delta),
        _ => {}
    }
}
