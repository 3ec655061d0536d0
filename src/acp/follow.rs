//! Following one conversation's event stream for one ACP session: every event becomes the
//! `session/update`s it stands for, in order, and what prompts wait on (which turn took a
//! message, how a turn ended) is kept for them. A dropped stream is resumed with
//! `Last-Event-ID`; when the service answers with a fresh `snapshot` instead (it restarted),
//! the stored history after the last item seen is read, so nothing is lost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionNotification;
use futures::StreamExt;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::ledger::{Ledger, Routed};
use super::updates::{self, Call};
use super::{approvals, processes};
use crate::api::approvals::{Approval, ApprovalStatus};
use crate::api::errors::ErrorCode;
use crate::api::events::ConversationEvent;
use crate::client::api::Api;
use crate::client::events::ServerEvent;
use crate::domain::{Conversation, Item, ItemKind, Message, TurnStatus, Usage};

/// How long the service may be out of reach before waiting prompts are answered with an error
/// (the bridge goes on trying to reconnect after that).
const RECONNECT_LIMIT: Duration = Duration::from_secs(20);

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Completed,
    Interrupted,
    Failed(String),
}

/// What prompts wait on, kept up to date by the follower.
#[derive(Default)]
pub struct Shared {
    pub ledger: Ledger,
    /// The turn that took each message.
    pub message_turns: HashMap<String, String>,
    pub ended: HashMap<String, TurnEnd>,
    /// The tokens each ended root turn used, for the prompt's answer.
    pub usage: HashMap<String, crate::domain::TurnUsage>,
    /// The context meter as the service last told it.
    context: Option<Usage>,
    /// What the conversation's ended turns cost (every session's), once one had a cost: the
    /// snapshot's, then each `turn.ended` with a cost adds to it.
    cost: Option<f64>,
    /// The root session's running turns.
    pub running: HashSet<String>,
    /// Messages waiting for a turn.
    pub pending: HashSet<String>,
    /// Streams begun with a `snapshot`: a second one means the service started again.
    pub snapshots: u64,
    /// Snapshots whose catch-up (the history not seen, the running turns' items) the editor
    /// has been sent: `session/load` answers only after the first.
    pub caught_up: u64,
    /// Turns running when the service went away and came back: they were cut by it.
    pub cut_by_restart: HashSet<String>,
    /// Messages that were waiting when the service went away (waiting messages are not kept).
    pub lost_messages: HashSet<String>,
    /// Why the service cannot be followed now (it is out of reach, the conversation is gone).
    pub broken: Option<String>,
    /// The conversation as the service last described it.
    pub conversation: Option<Conversation>,
    /// Approvals asked in the editor, each with how to withdraw the question.
    asked: HashMap<String, oneshot::Sender<()>>,
    /// Whether the editor shows agent terminals (background processes' output goes there).
    pub terminals: bool,
    /// Whether the editor fills in forms: an MCP server's questions are asked as forms.
    pub forms: bool,
    /// The background processes followed, by the `shell` call that started each.
    watches: HashMap<String, JoinHandle<()>>,
}

pub struct Follower {
    pub shared: Arc<Mutex<Shared>>,
    /// Woken at every change of `shared`.
    pub changed: Arc<Notify>,
    /// Held while a message is sent, so that its item is not shown before it is known to be
    /// this editor's own.
    pub posting: Arc<tokio::sync::Mutex<()>>,
    task: JoinHandle<()>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
        if let Ok(shared) = self.shared.lock() {
            for watch in shared.watches.values() {
                watch.abort();
            }
        }
    }
}

struct Stream {
    api: Api,
    conversation: String,
    acp_session: String,
    cx: ConnectionTo<Client>,
    shared: Arc<Mutex<Shared>>,
    changed: Arc<Notify>,
    posting: Arc<tokio::sync::Mutex<()>>,
}

impl Follower {
    /// Follows `conversation` for the editor's session `acp_session`. `ledger` says what the
    /// editor has already been sent (its own message, say).
    pub fn start(
        api: Api,
        conversation: String,
        acp_session: String,
        cx: ConnectionTo<Client>,
        shared: Shared,
    ) -> Follower {
        let shared = Arc::new(Mutex::new(shared));
        let changed = Arc::new(Notify::new());
        let posting = Arc::new(tokio::sync::Mutex::new(()));
        let stream = Stream {
            api,
            conversation,
            acp_session,
            cx,
            shared: shared.clone(),
            changed: changed.clone(),
            posting: posting.clone(),
        };
        Follower {
            shared,
            changed,
            posting,
            task: tokio::spawn(stream.run()),
        }
    }

    /// Waits until `check` answers, re-checking at every change.
    pub async fn wait<T>(&self, mut check: impl FnMut(&Shared) -> Option<T>) -> T {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(answer) = check(&self.shared.lock().expect("follower state")) {
                return answer;
            }
            changed.await;
        }
    }
}

impl Stream {
    async fn run(self) {
        let mut last_event_id: Option<String> = None;
        let mut out_of_reach_since: Option<Instant> = None;
        loop {
            match self
                .api
                .events(&self.conversation, last_event_id.as_deref())
                .await
            {
                Ok(events) => {
                    out_of_reach_since = None;
                    tokio::pin!(events);
                    while let Some(event) = events.next().await {
                        if event.id.is_some() {
                            last_event_id.clone_from(&event.id);
                        }
                        if !self.handle(event).await {
                            return;
                        }
                    }
                }
                Err(error) if error.is(ErrorCode::NotFound) => {
                    self.break_with(format!("conversation {} is gone", self.conversation));
                    return;
                }
                Err(error) => {
                    let since = *out_of_reach_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > RECONNECT_LIMIT {
                        self.break_with(format!(
                            "lost the service at {} (no answer for {} s): {error}",
                            self.api.base,
                            RECONNECT_LIMIT.as_secs()
                        ));
                    }
                }
            }
            // The stream ended or could not start: the service is stopping, restarting or out
            // of reach. Try again soon (a restart takes well under a second).
            out_of_reach_since.get_or_insert_with(Instant::now);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn break_with(&self, why: String) {
        self.shared.lock().expect("follower state").broken = Some(why);
        self.changed.notify_waiters();
    }

    fn send(&self, updates: Vec<Routed>) {
        for (session, update) in updates {
            let session = session.unwrap_or_else(|| self.acp_session.clone());
            // The editor went away: nothing to do but stop sending (stdin closing ends all).
            let _ = self
                .cx
                .send_notification(SessionNotification::new(session, update));
        }
    }

    /// A finished tool call that changed files: the changes as diffs with the text before and
    /// after, read from the service's checkpoints, replacing what the call showed.
    async fn file_diffs(&self, item: &Item) -> Option<Routed> {
        let ItemKind::ToolCall {
            files: Some(files), ..
        } = &item.kind
        else {
            return None;
        };
        // Only a call that changed something has changes to show.
        files.paths().next()?;
        let call = Call::of(item)?;
        // Without them (checkpoints off, the service out of reach) the call keeps what it
        // showed: its output, or a written file's new text.
        let changes = self
            .api
            .turn_changes(&self.conversation, &item.turn_id, Some(&item.id), true)
            .await
            .ok()?;
        let shared = self.shared.lock().expect("follower state");
        let session = shared
            .ledger
            .followed(&item.session_id)
            .then(|| item.session_id.clone());
        Some((
            session,
            updates::tool_diffs(&call, &shared.ledger.cwd, &changes.files)?,
        ))
    }

    /// Handles one event; `false` ends the stream for good.
    async fn handle(&self, event: ServerEvent) -> bool {
        match event.event {
            snapshot @ ConversationEvent::Snapshot { .. } => self.snapshot(snapshot).await,
            ConversationEvent::ItemStarted { item } | ConversationEvent::ItemCompleted { item } => {
                let _posting = self.posting.lock().await;
                let updates = {
                    let mut shared = self.shared.lock().expect("follower state");
                    note_message(&mut shared, &item);
                    shared.ledger.item(&item)
                };
                let ended = !updates.is_empty() && !item.status.is_open();
                self.send(updates);
                if ended && let Some(diffs) = self.file_diffs(&item).await {
                    self.send(vec![diffs]);
                }
                if ended {
                    self.watch_process(&item);
                }
            }
            ConversationEvent::ItemDelta {
                item_id,
                field,
                delta,
                ..
            } => {
                let updates = self
                    .shared
                    .lock()
                    .expect("follower state")
                    .ledger
                    .delta(&item_id, field, &delta);
                self.send(updates);
            }
            ConversationEvent::TurnStarted {
                session_id,
                turn_id,
                message_ids,
            } => {
                let mut shared = self.shared.lock().expect("follower state");
                let updates = shared.ledger.session_turn(&session_id, None);
                self.send(updates);
                if session_id == shared.ledger.root_session_id {
                    for id in message_ids {
                        shared.message_turns.insert(id, turn_id.clone());
                    }
                    shared.running.insert(turn_id);
                }
            }
            ConversationEvent::TurnEnded {
                session_id,
                turn_id,
                status,
                error,
                usage,
                ..
            } => {
                let mut shared = self.shared.lock().expect("follower state");
                let mut updates = shared.ledger.session_turn(&session_id, Some(status));
                // The editor's meter shows the new total cost at once.
                if let Some(cost) = usage.cost {
                    shared.cost = Some(shared.cost.unwrap_or(0.0) + cost);
                    if let Some(context) = &shared.context {
                        updates.push((None, updates::usage(context, shared.cost)));
                    }
                }
                self.send(updates);
                if session_id == shared.ledger.root_session_id {
                    shared.usage.insert(turn_id.clone(), usage);
                    shared.running.remove(&turn_id);
                    shared
                        .ended
                        .insert(turn_id, turn_end(status, error.as_deref()));
                }
            }
            ConversationEvent::UsageUpdated { usage, .. } => {
                let mut shared = self.shared.lock().expect("follower state");
                self.send(vec![(None, updates::usage(&usage, shared.cost))]);
                shared.context = Some(usage);
            }
            ConversationEvent::SessionCreated { session }
            | ConversationEvent::SessionUpdated { session } => {
                let updates = self
                    .shared
                    .lock()
                    .expect("follower state")
                    .ledger
                    .session(&session);
                self.send(updates);
            }
            ConversationEvent::PendingUpdated { pending } => {
                self.shared.lock().expect("follower state").pending = ids(&pending);
            }
            ConversationEvent::ConversationUpdated { conversation } => {
                self.shared.lock().expect("follower state").conversation = Some(conversation);
            }
            ConversationEvent::ApprovalRequested { approval } => self.ask(approval),
            ConversationEvent::ApprovalResolved { approval } => {
                let asked = self
                    .shared
                    .lock()
                    .expect("follower state")
                    .asked
                    .remove(&approval.id);
                if let Some(withdraw) = asked {
                    let _ = withdraw.send(());
                }
            }
            ConversationEvent::ConversationDeleted { .. } => {
                self.break_with(format!("conversation {} was deleted", self.conversation));
                return false;
            }
            _ => {}
        }
        self.changed.notify_waiters();
        true
    }

    /// A stream's first event, or a fresh start after the service restarted.
    async fn snapshot(&self, snapshot: ConversationEvent) {
        let ConversationEvent::Snapshot {
            conversation,
            sessions,
            pending,
            usage,
            running,
            approvals,
            cost,
            ..
        } = snapshot
        else {
            return;
        };
        let _posting = self.posting.lock().await;
        let after_seq = {
            let mut shared = self.shared.lock().expect("follower state");
            shared.snapshots += 1;
            shared.cost = cost;
            shared.context = Some(usage.clone());
            shared.broken = None;
            shared.ledger.root_session_id = conversation.root_session_id.clone();
            shared.ledger.cwd = conversation.cwd.clone();
            let announced: Vec<Routed> = sessions
                .iter()
                .flat_map(|session| shared.ledger.session(session))
                .collect();
            self.send(announced);
            let root_running: HashSet<String> = running
                .iter()
                .filter(|turn| turn.session_id == conversation.root_session_id)
                .map(|turn| turn.turn_id.clone())
                .collect();
            let pending_now = ids(&pending);
            if shared.snapshots > 1 {
                // The service lost what it kept in memory: turns it ran then were cut, and
                // messages that waited are gone.
                let cut: Vec<String> = shared
                    .running
                    .difference(&root_running)
                    .filter(|turn| !shared.ended.contains_key(*turn))
                    .cloned()
                    .collect();
                shared.cut_by_restart.extend(cut);
                let lost: Vec<String> = shared.pending.difference(&pending_now).cloned().collect();
                shared.lost_messages.extend(lost);
            }
            // A turn that ended while the stream was down: the conversation's last turn.
            let last = match &conversation.last_turn {
                Some(last) => turn_end(last.status, last.error.as_deref()),
                None => TurnEnd::Failed("the turn failed".to_owned()),
            };
            let unended: Vec<String> = shared
                .running
                .iter()
                .filter(|turn| !root_running.contains(*turn) && !shared.ended.contains_key(*turn))
                .cloned()
                .collect();
            for turn in unended {
                shared.ended.insert(turn, last.clone());
            }
            shared.running = root_running;
            shared.pending = pending_now;
            shared.conversation = Some(conversation);
            shared.ledger.newest_seq
        };
        // First what is stored and was not seen finished, then the running turns' items.
        // (Out of reach again, the history is empty: the reconnect that follows reads it.)
        let history = self
            .api
            .items(&self.conversation, None, Some(after_seq))
            .await
            .unwrap_or_default();
        let running_items = running.iter().flat_map(|turn| &turn.items);
        let mut updates = Vec::new();
        // The finished calls this catch-up shows for the first time: they get their diffs.
        let mut shown_ended = Vec::new();
        {
            let mut shared = self.shared.lock().expect("follower state");
            for item in history.iter().chain(running_items) {
                note_message(&mut shared, item);
                let fresh = shared.ledger.item(item);
                if !fresh.is_empty() && !item.status.is_open() {
                    shown_ended.push(item);
                }
                updates.extend(fresh);
            }
        }
        updates.push((None, updates::usage(&usage, cost)));
        self.send(updates);
        for item in shown_ended {
            if let Some(diffs) = self.file_diffs(item).await {
                self.send(vec![diffs]);
            }
            self.watch_process(item);
        }
        for approval in approvals {
            self.ask(approval);
        }
        self.shared.lock().expect("follower state").caught_up += 1;
        self.changed.notify_waiters();
    }

    /// A call shown ended that started a background process: its output goes on showing
    /// until the process ends (once per call).
    fn watch_process(&self, item: &Item) {
        if !processes::started_by(item) {
            return;
        }
        let mut shared = self.shared.lock().expect("follower state");
        if shared.watches.contains_key(&item.id) {
            return;
        }
        let acp_session = if shared.ledger.followed(&item.session_id) {
            item.session_id.clone()
        } else {
            self.acp_session.clone()
        };
        let watch = processes::Watch {
            api: self.api.clone(),
            conversation: self.conversation.clone(),
            call_id: item.id.clone(),
            acp_session,
            cx: self.cx.clone(),
            terminals: shared.terminals,
            cwd: shared.ledger.cwd.clone(),
        };
        shared
            .watches
            .insert(item.id.clone(), tokio::spawn(watch.run()));
    }

    /// Asks the editor about an approval, once; the first answer from anywhere wins.
    fn ask(&self, approval: Approval) {
        if approval.status != ApprovalStatus::Pending {
            return;
        }
        let (withdraw, withdrawn) = oneshot::channel();
        let forms = {
            let mut shared = self.shared.lock().expect("follower state");
            if shared.asked.contains_key(&approval.id) {
                return;
            }
            shared.asked.insert(approval.id.clone(), withdraw);
            shared.forms
        };
        let asking = approvals::Asking {
            api: self.api.clone(),
            cx: self.cx.clone(),
            acp_session: self.acp_session.clone(),
            forms,
        };
        tokio::spawn(asking.ask(approval, withdrawn));
    }
}

/// Which turn took a message, as its item says.
fn note_message(shared: &mut Shared, item: &Item) {
    if matches!(item.kind, ItemKind::UserMessage { .. })
        && item.session_id == shared.ledger.root_session_id
    {
        shared
            .message_turns
            .insert(item.id.clone(), item.turn_id.clone());
    }
}

fn ids(messages: &[Message]) -> HashSet<String> {
    messages.iter().map(|message| message.id.clone()).collect()
}

/// How a turn ended, from `turn.ended` or the conversation's `last_turn`.
fn turn_end(status: TurnStatus, error: Option<&str>) -> TurnEnd {
    match status {
        TurnStatus::Completed => TurnEnd::Completed,
        TurnStatus::Interrupted => TurnEnd::Interrupted,
        _ => TurnEnd::Failed(error.unwrap_or("the turn failed").to_owned()),
    }
}
