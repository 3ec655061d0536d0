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
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::approvals;
use super::ledger::{Ledger, Routed};
use super::updates;
use crate::client::api::Api;
use crate::client::events::ServerEvent;

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
    /// The root session's running turns.
    pub running: HashSet<String>,
    /// Messages waiting for a turn.
    pub pending: HashSet<String>,
    /// Streams begun with a `snapshot`: a second one means the service started again.
    pub snapshots: u64,
    /// Turns running when the service went away and came back: they were cut by it.
    pub cut_by_restart: HashSet<String>,
    /// Messages that were waiting when the service went away (waiting messages are not kept).
    pub lost_messages: HashSet<String>,
    /// Why the service cannot be followed now (it is out of reach, the conversation is gone).
    pub broken: Option<String>,
    /// The conversation as the service last described it.
    pub conversation: Value,
    /// Approvals asked in the editor, each with how to withdraw the question.
    asked: HashMap<String, oneshot::Sender<()>>,
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

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
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
                Err(error) if error.code() == Some("not_found") => {
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
    async fn file_diffs(&self, item: &Value) -> Option<Routed> {
        let changed = ["added", "modified", "deleted"].iter().any(|key| {
            item["files"][key]
                .as_array()
                .is_some_and(|paths| !paths.is_empty())
        });
        if item["kind"] != "tool_call" || !changed {
            return None;
        }
        let path = format!(
            "/api/conversations/{}/turns/{}/changes?item_id={}&contents=true",
            self.conversation,
            text(&item["turn_id"]),
            text(&item["id"]),
        );
        // Without them (checkpoints off, the service out of reach) the call keeps what it
        // showed: its output, or a written file's new text.
        let changes = self.api.get(&path).await.ok()?;
        let shared = self.shared.lock().expect("follower state");
        let session = shared
            .ledger
            .followed(text(&item["session_id"]))
            .then(|| text(&item["session_id"]).to_owned());
        Some((
            session,
            updates::tool_diffs(item, &shared.ledger.cwd, &changes["files"])?,
        ))
    }

    /// Handles one event; `false` ends the stream for good.
    async fn handle(&self, event: ServerEvent) -> bool {
        let data = &event.data;
        match event.kind.as_str() {
            "snapshot" => self.snapshot(data).await,
            "item.started" | "item.completed" => {
                let item = &data["item"];
                let _posting = self.posting.lock().await;
                let updates = {
                    let mut shared = self.shared.lock().expect("follower state");
                    note_message(&mut shared, item);
                    shared.ledger.item(item)
                };
                let ended = !updates.is_empty()
                    && !matches!(text(&item["status"]), "running" | "waiting_approval");
                self.send(updates);
                if ended && let Some(diffs) = self.file_diffs(item).await {
                    self.send(vec![diffs]);
                }
            }
            "item.delta" => {
                let updates = self.shared.lock().expect("follower state").ledger.delta(
                    text(&data["item_id"]),
                    text(&data["field"]),
                    text(&data["delta"]),
                );
                self.send(updates);
            }
            "turn.started" => {
                let mut shared = self.shared.lock().expect("follower state");
                let updates = shared.ledger.session_turn(text(&data["session_id"]), None);
                self.send(updates);
                if data["session_id"] == shared.ledger.root_session_id.as_str() {
                    let turn = text(&data["turn_id"]).to_owned();
                    for id in data["message_ids"].as_array().into_iter().flatten() {
                        shared
                            .message_turns
                            .insert(text(id).to_owned(), turn.clone());
                    }
                    shared.running.insert(turn);
                }
            }
            "turn.ended" => {
                let mut shared = self.shared.lock().expect("follower state");
                let updates = shared
                    .ledger
                    .session_turn(text(&data["session_id"]), Some(data));
                self.send(updates);
                if data["session_id"] == shared.ledger.root_session_id.as_str() {
                    let turn = text(&data["turn_id"]).to_owned();
                    shared.running.remove(&turn);
                    shared.ended.insert(turn, turn_end(data));
                }
            }
            "usage.updated" => self.send(
                updates::usage(&data["usage"])
                    .map(|update| (None, update))
                    .into_iter()
                    .collect(),
            ),
            "session.created" | "session.updated" => {
                let updates = self
                    .shared
                    .lock()
                    .expect("follower state")
                    .ledger
                    .session(&data["session"]);
                self.send(updates);
            }
            "pending.updated" => {
                self.shared.lock().expect("follower state").pending = ids(&data["pending"]);
            }
            "conversation.updated" => {
                self.shared.lock().expect("follower state").conversation =
                    data["conversation"].clone();
            }
            "approval.requested" => self.ask(&data["approval"]),
            "approval.resolved" => {
                let id = text(&data["approval"]["id"]);
                let asked = self.shared.lock().expect("follower state").asked.remove(id);
                if let Some(withdraw) = asked {
                    let _ = withdraw.send(());
                }
            }
            "conversation.deleted" => {
                self.break_with(format!("conversation {} was deleted", self.conversation));
                return false;
            }
            _ => {}
        }
        self.changed.notify_waiters();
        true
    }

    /// A stream's first event, or a fresh start after the service restarted.
    async fn snapshot(&self, data: &Value) {
        let _posting = self.posting.lock().await;
        let after_seq = {
            let mut shared = self.shared.lock().expect("follower state");
            shared.snapshots += 1;
            shared.broken = None;
            shared.conversation = data["conversation"].clone();
            shared.ledger.root_session_id = text(&data["conversation"]["root_session_id"]).into();
            shared.ledger.cwd = text(&data["conversation"]["cwd"]).to_owned();
            let announced: Vec<Routed> = data["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|session| shared.ledger.session(session))
                .collect();
            self.send(announced);
            let running: HashSet<String> = data["running"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|turn| turn["session_id"] == data["conversation"]["root_session_id"])
                .map(|turn| text(&turn["turn_id"]).to_owned())
                .collect();
            if shared.snapshots > 1 {
                // The service lost what it kept in memory: turns it ran then were cut, and
                // messages that waited are gone.
                let cut: Vec<String> = shared
                    .running
                    .difference(&running)
                    .filter(|turn| !shared.ended.contains_key(*turn))
                    .cloned()
                    .collect();
                shared.cut_by_restart.extend(cut);
                let pending_now = ids(&data["pending"]);
                let lost: Vec<String> = shared.pending.difference(&pending_now).cloned().collect();
                shared.lost_messages.extend(lost);
            }
            // A turn that ended while the stream was down: the conversation's last turn.
            let last = &data["conversation"]["last_turn"];
            let unended: Vec<String> = shared
                .running
                .iter()
                .filter(|turn| !running.contains(*turn) && !shared.ended.contains_key(*turn))
                .cloned()
                .collect();
            for turn in unended {
                shared.ended.insert(turn, turn_end(last));
            }
            shared.running = running;
            shared.pending = ids(&data["pending"]);
            shared.ledger.newest_seq
        };
        // First what is stored and was not seen finished, then the running turns' items.
        let history = self.history_after(after_seq).await;
        let running_items = data["running"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|turn| turn["items"].as_array().into_iter().flatten());
        let mut updates = Vec::new();
        // The finished calls this catch-up shows for the first time: they get their diffs.
        let mut shown_ended = Vec::new();
        {
            let mut shared = self.shared.lock().expect("follower state");
            for item in history.iter().chain(running_items) {
                note_message(&mut shared, item);
                let fresh = shared.ledger.item(item);
                if !fresh.is_empty()
                    && !matches!(text(&item["status"]), "running" | "waiting_approval")
                {
                    shown_ended.push(item);
                }
                updates.extend(fresh);
            }
        }
        updates.extend(updates::usage(&data["usage"]).map(|update| (None, update)));
        self.send(updates);
        for item in shown_ended {
            if let Some(diffs) = self.file_diffs(item).await {
                self.send(vec![diffs]);
            }
        }
        for approval in data["approvals"].as_array().into_iter().flatten() {
            self.ask(approval);
        }
    }

    /// The root session's stored items after `seq`, every page.
    async fn history_after(&self, mut seq: u64) -> Vec<Value> {
        let mut items = Vec::new();
        loop {
            let path = format!(
                "/api/conversations/{}/items?after_seq={seq}&limit=2000",
                self.conversation
            );
            let Ok(page) = self.api.get(&path).await else {
                // Out of reach again: the reconnect that follows reads it.
                return items;
            };
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["next_after_seq"].as_u64() {
                Some(next) => seq = next,
                None => return items,
            }
        }
    }

    /// Asks the editor about an approval, once; the first answer from anywhere wins.
    fn ask(&self, approval: &Value) {
        let id = text(&approval["id"]).to_owned();
        if approval["status"] != "pending" {
            return;
        }
        let (withdraw, withdrawn) = oneshot::channel();
        {
            let mut shared = self.shared.lock().expect("follower state");
            if shared.asked.contains_key(&id) {
                return;
            }
            shared.asked.insert(id, withdraw);
        }
        tokio::spawn(approvals::ask(
            self.api.clone(),
            self.cx.clone(),
            self.acp_session.clone(),
            crate::client::typed(approval),
            withdrawn,
        ));
    }
}

/// Which turn took a message, as its item says.
fn note_message(shared: &mut Shared, item: &Value) {
    if item["kind"] == "user_message"
        && item["session_id"] == shared.ledger.root_session_id.as_str()
    {
        shared.message_turns.insert(
            text(&item["id"]).to_owned(),
            text(&item["turn_id"]).to_owned(),
        );
    }
}

fn ids(messages: &Value) -> HashSet<String> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .map(|message| text(&message["id"]).to_owned())
        .collect()
}

/// `turn.ended`'s or `last_turn`'s status.
fn turn_end(data: &Value) -> TurnEnd {
    match text(&data["status"]) {
        "completed" => TurnEnd::Completed,
        "interrupted" => TurnEnd::Interrupted,
        _ => TurnEnd::Failed(
            data["error"]
                .as_str()
                .unwrap_or("the turn failed")
                .to_owned(),
        ),
    }
}
