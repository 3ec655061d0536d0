//! Reads of a live conversation answered from memory: its view, waiting messages, history
//! pages, turns and meters.

use super::{ConversationActor, usage_of};
use crate::api::responses::{ConversationView, ItemsPage, TurnsPage};
use crate::domain::{Message, MessageSource, Usage};
use crate::runtime::{RuntimeError, items_page, turns_page};

impl ConversationActor {
    pub(super) fn view(&self) -> ConversationView {
        ConversationView {
            conversation: self.state.conversation.clone(),
            sessions: self.state.sessions.clone(),
            pending: self.pending_list(),
            usage: self.usage_view(self.root_id()),
            approvals: self.approval_list(),
            cost: self.state.cost(),
        }
    }

    /// Every waiting message of the conversation: the user's first, then sub-agents' reports;
    /// each names the session it waits for.
    pub(super) fn pending_list(&self) -> Vec<Message> {
        let mut pending: Vec<Message> = self
            .state
            .sessions
            .iter()
            .filter_map(|session| self.sessions.get(&session.id))
            .flat_map(|run| run.pending.list().cloned())
            .collect();
        pending.sort_by_key(|message| message.source != MessageSource::User);
        pending
    }

    /// A session's usage meter, against its own model's window.
    pub(super) fn usage_view(&self, session_id: &str) -> Usage {
        let tracker = self
            .sessions
            .get(session_id)
            .map(|run| run.usage)
            .unwrap_or_default();
        usage_of(&self.shared.config, &self.state, session_id, tracker)
    }

    /// A page of a session's history (the root's when none is named).
    pub(super) fn items_page(
        &self,
        session: Option<&str>,
        after_seq: u64,
        limit: usize,
    ) -> Result<ItemsPage, RuntimeError> {
        self.session_run(session)
            .map(|run| items_page(&run.history, after_seq, limit))
    }

    /// A page of a session's turns, the running one with its figures so far.
    pub(super) fn turns_page(
        &self,
        session: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<TurnsPage, RuntimeError> {
        let run = self.session_run(session)?;
        let running = run.running.as_ref().map(|r| (r.turn_id.as_str(), &r.usage));
        turns_page(&self.state.turns, &run.id, running, after, limit)
    }

    /// A session's usage meter.
    pub(super) fn session_usage(&self, session: Option<&str>) -> Result<Usage, RuntimeError> {
        let session_id = self.session_run(session)?.id.clone();
        Ok(self.usage_view(&session_id))
    }
}
