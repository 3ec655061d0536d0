//! The conversation actor (DESIGN invariant 2): one task owns a conversation's files, its state
//! and its running turn. Commands arrive on a channel and are handled one at a time, so every
//! race (a message arriving as a turn ends, a delete during a send) is settled by their order
//! here. Every change is appended and fsynced, then indexed, then published.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::compaction::{self, Compactor, Reason};
use super::events::{Event, EventBus, EventId, Replay};
use super::fork;
use super::pending::PendingQueue;
use super::turn::{self, TurnMsg, TurnSpec};
use super::usage::{self, UsageTracker};
use super::{Answer, ConversationPatch, IndexJob, NewMessage, PendingPatch, RuntimeError, Shared};
use crate::config::{Protocol, ReasoningContext};
use crate::domain::{
    Conversation, ForkedFrom, Item, ItemKind, ItemStatus, Message, MessageMode, MessageSource,
    MessageStatus, Session, TurnStatus, Usage, new_id, now, user_item,
};
use crate::index::IndexUpdate;
use crate::index::rebuild::{self, LoadedConversation};
use crate::store::records::{ConversationChanges, ConversationCreated, MetaRecord, SessionRecord};
use crate::store::state::ConversationState;
use crate::store::{JsonlWriter, StoreError};
use crate::tools::ToolContext;

/// The commands handlers send. Each carries the channel its answer goes back on.
pub enum Command {
    View(oneshot::Sender<Result<ConversationView, RuntimeError>>),
    Update(
        ConversationPatch,
        oneshot::Sender<Result<Conversation, RuntimeError>>,
    ),
    Delete(oneshot::Sender<Result<(), RuntimeError>>),
    Send(
        NewMessage,
        Option<String>,
        oneshot::Sender<Result<Answer, RuntimeError>>,
    ),
    Interrupt(Option<String>, oneshot::Sender<Result<bool, RuntimeError>>),
    UpdatePending(
        String,
        PendingPatch,
        oneshot::Sender<Result<Message, RuntimeError>>,
    ),
    WithdrawPending(String, oneshot::Sender<Result<Message, RuntimeError>>),
    /// Fork (no message id) or rewind to just before a user message of the root session.
    Fork(
        Option<String>,
        oneshot::Sender<Result<ForkOutcome, RuntimeError>>,
    ),
    Subscribe(Option<EventId>, oneshot::Sender<Subscription>),
    /// A page of the root session's stored history: items after a seq, at most a count.
    Items(u64, usize, oneshot::Sender<super::ItemsPage>),
    /// Manual compaction of the root session (SPEC §7.6).
    Compact(oneshot::Sender<Result<CompactOutcome, RuntimeError>>),
    Shutdown(oneshot::Sender<()>),
}

/// `POST /api/conversations/{id}/compact`: the stored summary and the usage it leaves.
#[derive(Debug, Clone, Serialize)]
pub struct CompactOutcome {
    pub summary: Item,
    pub usage: Usage,
}

/// A manual compaction in progress: its model call runs in a task of its own, so the
/// conversation keeps answering; messages sent meanwhile wait, as they would behind a turn.
struct Compacting {
    cancel: CancellationToken,
    reply: oneshot::Sender<Result<CompactOutcome, RuntimeError>>,
}

/// `GET /api/conversations/{id}`: the conversation with its sessions, waiting messages and usage.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationView {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub sessions: Vec<Session>,
    pub pending: Vec<Message>,
    pub usage: Usage,
}

/// The result of a fork or rewind: the new conversation (none when a rewind to the first
/// message leaves nothing to copy) and, for a rewind, the message's text for the input box.
#[derive(Debug, Clone)]
pub struct ForkOutcome {
    pub conversation: Option<Conversation>,
    pub text: Option<String>,
}

/// What a new SSE client gets: a snapshot or the events it missed, then live events.
pub struct Subscription {
    pub snapshot: Option<(EventId, Value)>,
    pub replay: Vec<Event>,
    pub receiver: broadcast::Receiver<Event>,
    /// The bus itself, so a subscriber that falls behind can catch up from its replay buffer.
    pub bus: EventBus,
}

#[derive(Clone)]
pub struct ActorHandle {
    sender: mpsc::Sender<Command>,
    pub generation: u64,
}

impl ActorHandle {
    /// Sends a command; gives it back if the actor has stopped.
    pub async fn send(&self, command: Command) -> Result<(), Command> {
        self.sender.send(command).await.map_err(|error| error.0)
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Commands queued for one actor before senders wait.
const COMMAND_CAPACITY: usize = 64;

/// Loads a stored conversation and starts its actor.
pub fn load(shared: Arc<Shared>, id: &str) -> Result<ActorHandle, RuntimeError> {
    let log = shared.store.read_metadata(id)?;
    let state = ConversationState::from_records(&log.records).map_err(|error| {
        RuntimeError::Internal(format!("conversation {id} cannot be read: {error}"))
    })?;
    let root_items = shared
        .store
        .read_items(id, &state.conversation.root_session_id)?;
    spawn(shared, state, root_items, None)
}

/// Starts the actor of a conversation whose state is known. `start_turn` names a turn that is
/// already stored as started (the first message of a new conversation) and must now run.
pub fn spawn(
    shared: Arc<Shared>,
    state: ConversationState,
    root_items: Vec<Item>,
    start_turn: Option<String>,
) -> Result<ActorHandle, RuntimeError> {
    let id = state.conversation.id.clone();
    let meta = shared.store.open_metadata_writer(&id)?;
    let (sender, commands) = mpsc::channel(COMMAND_CAPACITY);
    let (turn_sender, turn_messages) = mpsc::unbounded_channel();
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    let mut last_seq = HashMap::new();
    last_seq.insert(
        state.conversation.root_session_id.clone(),
        root_items.last().map_or(0, |item| item.seq),
    );
    let mut actor = ConversationActor {
        usage: UsageTracker::estimated(&compaction::model_view(&root_items)),
        compacting: None,
        turn_reasoning_tokens: 0,
        root_history: root_items.clone(),
        shared,
        id,
        generation,
        state,
        meta,
        session_writers: HashMap::new(),
        last_seq,
        bus: EventBus::new(),
        running: None,
        pending: PendingQueue::default(),
        pending_answers: HashMap::new(),
        interrupt_cause: None,
        turn_sender,
        turn_messages,
        interrupt_waiters: Vec::new(),
        shutdown_waiters: Vec::new(),
        stopping: false,
    };
    if let Some(last) = root_items.iter().rev().find_map(|item| match &item.kind {
        ItemKind::AgentMessage { text } => Some(text.clone()),
        _ => None,
    }) && let Some(root) = actor.state.sessions.first_mut()
    {
        root.last_message = Some(last);
    }
    actor.close_stale_turns(start_turn.as_deref())?;
    if let Some(turn_id) = start_turn {
        actor.run_turn(&turn_id, root_items);
    }
    let shared = actor.shared.clone();
    tokio::spawn(async move {
        actor.run(commands).await;
        shared.after_unload().await;
    });
    Ok(ActorHandle { sender, generation })
}

struct ConversationActor {
    shared: Arc<Shared>,
    id: String,
    generation: u64,
    state: ConversationState,
    meta: JsonlWriter,
    session_writers: HashMap<String, JsonlWriter>,
    /// The last `seq` given out per session (see `stored_last_seq` for the last stored one).
    last_seq: HashMap<String, u64>,
    /// The root session's stored items (last snapshot of each, in `seq` order), kept in step
    /// with the file by `append_items` so a turn does not re-read the whole history.
    root_history: Vec<Item>,
    bus: EventBus,
    running: Option<RunningTurn>,
    /// Waiting messages, in memory only (SPEC §3.4): user messages first, then agents'.
    pending: PendingQueue,
    /// Answers to `Idempotency-Key`s of messages that went to wait (in memory, like them).
    pending_answers: HashMap<String, Answer>,
    /// Why the running turn is being interrupted, for the notice the model gets next.
    interrupt_cause: Option<InterruptCause>,
    usage: UsageTracker,
    /// Reasoning tokens the running turn's model calls reported, while it gets them back.
    turn_reasoning_tokens: u64,
    compacting: Option<Compacting>,
    turn_sender: mpsc::UnboundedSender<TurnMsg>,
    turn_messages: mpsc::UnboundedReceiver<TurnMsg>,
    interrupt_waiters: Vec<oneshot::Sender<Result<bool, RuntimeError>>>,
    shutdown_waiters: Vec<oneshot::Sender<()>>,
    stopping: bool,
}

/// The turn in progress and the items it has produced so far (with their live text).
struct RunningTurn {
    session_id: String,
    turn_id: String,
    cancel: CancellationToken,
    items: Vec<Item>,
}

impl ConversationActor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let idle = self.shared.settings.idle_unload;
        let mut idle_deadline = Instant::now() + idle;
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { break };
                    idle_deadline = Instant::now() + idle;
                    if self.handle(command).await == Flow::Stop {
                        break;
                    }
                }
                Some(message) = self.turn_messages.recv() => {
                    idle_deadline = Instant::now() + idle;
                    self.on_turn(message).await;
                    if self.stopping && self.running.is_none() {
                        break;
                    }
                }
                () = tokio::time::sleep_until(idle_deadline) => {
                    idle_deadline = Instant::now() + idle;
                    if self.is_idle()
                        && self.pending.is_empty()
                        && self.bus.subscriber_count() == 0
                        && self.retire(&mut commands).await
                    {
                        break;
                    }
                }
            }
        }
        // Stop taking commands before leaving the registry, so none is lost in between.
        commands.close();
        for waiter in self.shutdown_waiters.drain(..) {
            let _ = waiter.send(());
        }
        self.shared.forget_actor(&self.id, self.generation).await;
    }

    /// Leaves the registry of live conversations, unless commands came in meanwhile. Done
    /// under the registry's lock, which callers take to find an actor: the channel is closed
    /// first, and commands sent before that are handled here rather than dropped (their
    /// callers would get a 503). If any came, the actor stays, with a fresh channel put in the
    /// registry before the lock is released, so there is never a second actor for one
    /// conversation. Returns whether the actor left (it must stop).
    async fn retire(&mut self, commands: &mut mpsc::Receiver<Command>) -> bool {
        let shared = self.shared.clone();
        let mut actors = shared.actors.lock().await;
        commands.close();
        // `recv` (unlike `try_recv`) also waits for a sender that reserved its slot before the
        // close and has not put its command in yet; it ends once the channel is empty.
        let mut late = Vec::new();
        while let Some(command) = commands.recv().await {
            late.push(command);
        }
        let ours = actors
            .get(&self.id)
            .is_some_and(|handle| handle.generation == self.generation);
        if late.is_empty() {
            if ours {
                actors.remove(&self.id);
            }
            return true;
        }
        let (sender, receiver) = mpsc::channel(COMMAND_CAPACITY);
        *commands = receiver;
        if let Some(handle) = actors.get_mut(&self.id).filter(|_| ours) {
            handle.sender = sender;
        }
        drop(actors);
        for command in late {
            if self.handle(command).await == Flow::Stop {
                return true;
            }
        }
        false
    }

    async fn handle(&mut self, command: Command) -> Flow {
        match command {
            Command::View(reply) => {
                let _ = reply.send(Ok(self.view()));
            }
            Command::Update(patch, reply) => {
                let _ = reply.send(self.update(patch).await);
            }
            Command::Delete(reply) => {
                let result = self.delete().await;
                let deleted = result.is_ok();
                let _ = reply.send(result);
                if deleted {
                    return Flow::Stop;
                }
            }
            Command::Send(request, key, reply) => {
                let _ = reply.send(self.send(request, key).await);
            }
            Command::Interrupt(session, reply) => self.interrupt(session, reply),
            Command::UpdatePending(message_id, patch, reply) => {
                let _ = reply.send(self.update_pending(&message_id, patch));
            }
            Command::WithdrawPending(message_id, reply) => {
                let _ = reply.send(self.withdraw_pending(&message_id));
            }
            Command::Fork(rewind_to, reply) => {
                let _ = reply.send(self.fork(rewind_to).await);
            }
            Command::Subscribe(after, reply) => {
                let _ = reply.send(self.subscribe(after));
            }
            Command::Items(after_seq, limit, reply) => {
                let _ = reply.send(super::items_page(&self.root_history, after_seq, limit));
            }
            Command::Compact(reply) => self.start_compaction(reply),
            Command::Shutdown(reply) => {
                if let Some(compacting) = &self.compacting {
                    compacting.cancel.cancel();
                }
                self.stopping = true;
                self.shutdown_waiters.push(reply);
                self.interrupt_cause.get_or_insert(InterruptCause::Shutdown);
                match &self.running {
                    Some(running) => running.cancel.cancel(),
                    None => return Flow::Stop,
                }
            }
        }
        Flow::Continue
    }

    /// Neither a turn nor a manual compaction is running: a message can start a turn.
    fn is_idle(&self) -> bool {
        self.running.is_none() && self.compacting.is_none()
    }

    fn view(&self) -> ConversationView {
        ConversationView {
            conversation: self.state.conversation.clone(),
            sessions: self.state.sessions.clone(),
            pending: self.pending.list().to_vec(),
            usage: self.usage_view(),
        }
    }

    fn usage_view(&self) -> Usage {
        let (window, max_output) = self
            .shared
            .config
            .model(&self.state.conversation.model)
            .map_or((0, 0), |model| {
                (model.context_window, model.max_output_tokens)
            });
        self.usage.view(window, max_output)
    }

    async fn update(&mut self, patch: ConversationPatch) -> Result<Conversation, RuntimeError> {
        let current = &self.state.conversation;
        let mut changes = ConversationChanges::default();
        if let Some(title) = patch.title
            && (title != current.title || !current.title_custom)
        {
            changes.title = Some(title);
            changes.title_custom = Some(true);
        }
        if let Some(archived) = patch.archived.filter(|a| *a != current.archived) {
            changes.archived = Some(archived);
        }
        if let Some(model) = patch.model.filter(|m| *m != current.model) {
            changes.model = Some(model);
        }
        if let Some(cwd) = patch.cwd.filter(|c| *c != current.cwd) {
            changes.cwd = Some(cwd);
        }
        if changes.is_empty() {
            return Ok(self.state.conversation.clone());
        }
        let title_changed = changes.title.is_some();
        let model_changed = changes.model.is_some();
        self.append_meta(vec![MetaRecord::ConversationUpdated { at: now(), changes }])?;
        let conversation = &self.state.conversation;
        let mut updates = vec![self.conversation_update()];
        if title_changed {
            updates.push(IndexUpdate::Title {
                conversation_id: &conversation.id,
                title: &conversation.title,
            });
        }
        self.shared.index_quietly(&updates).await;
        self.publish_conversation();
        if model_changed {
            // Another model, another context window: the meter changes scale.
            self.bus
                .publish("usage.updated", &json!({ "usage": self.usage_view() }));
        }
        Ok(self.state.conversation.clone())
    }

    async fn delete(&mut self) -> Result<(), RuntimeError> {
        if self.running.is_some() {
            return Err(RuntimeError::TurnRunning);
        }
        if self.compacting.is_some() {
            return Err(RuntimeError::CompactionRunning);
        }
        self.shared.store.delete_conversation(&self.id)?;
        if let Err(error) = self.shared.index.remove_conversation(&self.id).await {
            super::index_failed(&self.shared.index, &error, "delete", &[&self.id]).await;
        }
        self.shared.list_events.publish(
            "conversation.deleted",
            &json!({ "conversation_id": self.id }),
        );
        self.bus.publish(
            "conversation.deleted",
            &json!({ "conversation_id": self.id }),
        );
        Ok(())
    }

    async fn send(
        &mut self,
        request: NewMessage,
        key: Option<String>,
    ) -> Result<Answer, RuntimeError> {
        if let Some((status, body)) = key.as_ref().and_then(|key| self.state.answers.get(key)) {
            return Ok(Answer {
                status: *status,
                body: body.clone(),
            });
        }
        if let Some(answer) = key.as_ref().and_then(|key| self.pending_answers.get(key)) {
            return Ok(answer.clone());
        }
        let root = self.state.conversation.root_session_id.clone();
        let session_id = request.session_id.unwrap_or_else(|| root.clone());
        if session_id != root {
            return Err(match self.state.session(&session_id) {
                Some(_) => {
                    RuntimeError::Invalid("messages to sub-agents are not supported yet".to_owned())
                }
                None => RuntimeError::NotFound(format!("session {session_id}")),
            });
        }
        self.check_can_run()?;
        let message = Message {
            id: new_id("m"),
            session_id,
            text: request.text,
            mode: request.mode,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Waiting,
            created_at: now(),
            images: request.images,
        };
        if self.is_idle() {
            self.pending.hold_agent_messages(false);
            return self.start_turn(vec![message], key);
        }
        // The agent is busy (a turn, or a compaction): the message waits (steer, queue) or
        // cuts in (interrupt).
        if message.mode == MessageMode::Interrupt {
            self.interrupt_running(InterruptCause::User);
        }
        let answer = Answer {
            status: 202,
            body: json!({ "message": message }),
        };
        if let Some(key) = key {
            self.pending_answers.insert(key, answer.clone());
        }
        self.pending.push(message);
        self.publish_pending();
        Ok(answer)
    }

    /// The answers given to the idempotency keys of `messages` while they waited, as records
    /// to store with their acceptance: a retry of such a request, even after the conversation
    /// was unloaded or the service restarted, gets the same answer instead of a second message.
    /// Once stored they are in `state.answers`, and `forget_stored_answers` drops them here.
    fn pending_answer_records(&self, messages: &[Message]) -> Vec<MetaRecord> {
        let ids: std::collections::HashSet<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        self.pending_answers
            .iter()
            .filter(|(_, answer)| {
                answer.body["message"]["id"]
                    .as_str()
                    .is_some_and(|id| ids.contains(id))
            })
            .map(|(key, answer)| MetaRecord::RequestAnswered {
                key: key.clone(),
                status: answer.status,
                response: answer.body.clone(),
                at: now(),
            })
            .collect()
    }

    /// Drops the waiting messages' answers that are now stored (`state.answers` has them).
    fn forget_stored_answers(&mut self) {
        let stored = &self.state.answers;
        self.pending_answers
            .retain(|key, _| !stored.contains_key(key));
    }

    /// Changes a waiting message (SPEC §3.2). A mode of `steer` lets the running turn take it
    /// at its next model call; `interrupt` cuts in at once.
    fn update_pending(
        &mut self,
        message_id: &str,
        patch: PendingPatch,
    ) -> Result<Message, RuntimeError> {
        let Some(message) = self.pending.update(message_id, patch.text, patch.mode) else {
            return Err(self.not_pending(message_id));
        };
        if message.mode == MessageMode::Interrupt {
            self.interrupt_running(InterruptCause::User);
        }
        self.publish_pending();
        if self.is_idle() {
            self.start_next_waiting();
        }
        Ok(message)
    }

    /// Withdraws a waiting message and gives it back (for editing).
    fn withdraw_pending(&mut self, message_id: &str) -> Result<Message, RuntimeError> {
        let Some(message) = self.pending.withdraw(message_id) else {
            return Err(self.not_pending(message_id));
        };
        self.publish_pending();
        Ok(message)
    }

    /// 409 for a message the agent has already taken, 404 for one never seen.
    fn not_pending(&self, message_id: &str) -> RuntimeError {
        if self.state.accepted.contains_key(message_id) {
            RuntimeError::NotWaiting
        } else {
            RuntimeError::NotFound(format!("waiting message {message_id}"))
        }
    }

    /// Cancels the running turn; it ends `interrupted` once its task has stored what it had.
    fn interrupt_running(&mut self, cause: InterruptCause) {
        if let Some(running) = &self.running {
            running.cancel.cancel();
            self.interrupt_cause.get_or_insert(cause);
            if cause == InterruptCause::User {
                self.pending.hold_agent_messages(true);
            }
        }
    }

    /// Copies the root session's history into a new conversation (SPEC §6.1–6.2): up to the
    /// last finished turn, or up to just before `rewind_to`. The source is only read.
    async fn fork(&mut self, rewind_to: Option<String>) -> Result<ForkOutcome, RuntimeError> {
        let root = self.state.conversation.root_session_id.clone();
        let path = self.shared.store.session_path(&self.id, &root);
        let content = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        let mut end = match &self.running {
            Some(running) => fork::cut_offset(&content, &fork::Cut::BeforeTurn(&running.turn_id)),
            None => content.len(),
        };
        let mut text = None;
        if let Some(message_id) = &rewind_to {
            let at = fork::cut_offset(&content, &fork::Cut::BeforeItem(message_id));
            if at == content.len() {
                return Err(RuntimeError::NotFound(format!(
                    "message {message_id} in this conversation's root session"
                )));
            }
            let target = fork::item_at(&content, at)
                .filter(fork::is_user_message)
                .ok_or_else(|| {
                    RuntimeError::Invalid(format!(
                        "message_id `{message_id}` is not a user message of this conversation's root session"
                    ))
                })?;
            if let ItemKind::UserMessage { text: message, .. } = target.kind {
                text = Some(message);
            }
            end = end.min(at);
        }
        let Some(last) = fork::last_item(&content[..end]) else {
            if rewind_to.is_some() {
                // Rewinding to the first message leaves nothing to store (SPEC §1.2).
                return Ok(ForkOutcome {
                    conversation: None,
                    text,
                });
            }
            return Err(RuntimeError::TurnRunning);
        };

        let source = &self.state.conversation;
        let conversation_id = new_id("c");
        let session_id = new_id("s");
        let created_at = now();
        let mut history = content[..end].to_vec();
        fork::rewrite_session_id(&mut history, &root, &session_id);
        let records = MetaRecord::conversation_start(ConversationCreated {
            id: conversation_id.clone(),
            title: super::title::fork_title(&source.title),
            created_at,
            cwd: source.cwd.clone(),
            agent: source.agent.clone(),
            model: source.model.clone(),
            root_session_id: session_id.clone(),
            forked_from: Some(ForkedFrom {
                conversation_id: self.id.clone(),
                item_id: last.id,
            }),
        });
        let meta_len = self.shared.store.create_conversation_raw(
            &conversation_id,
            &records,
            &[(&session_id, &history)],
        )?;
        let state = ConversationState::from_records(&records).expect("starts with creation");
        let loaded = LoadedConversation {
            state,
            meta_len,
            search_texts: Vec::new(),
            torn_files: Vec::new(),
        };
        self.shared
            .index_quietly(&rebuild::updates_for(&loaded))
            .await;
        // The copied messages' search rows are copied inside the index (same seqs, nothing
        // re-parsed), after the answer: indexing a long history is CPU work the fork's caller
        // should not wait for, and the index is derived data.
        // The rows to copy end where the copy ends, fixed now: by the time the job runs, the
        // source may have gone on (its new messages are not the fork's).
        let below_seq = if end < content.len() {
            fork::item_at(&content, end).map_or(last.seq + 1, |item| item.seq)
        } else {
            self.root_history.last().map_or(last.seq, |item| item.seq) + 1
        };
        self.shared.index_later(IndexJob::CopySearch {
            from: self.id.clone(),
            to: conversation_id.clone(),
            below_seq,
        });
        let conversation = loaded.state.conversation;
        self.shared.list_events.publish(
            "conversation.created",
            &json!({ "conversation": conversation }),
        );
        Ok(ForkOutcome {
            conversation: Some(conversation),
            text,
        })
    }

    /// A conversation whose working directory, agent or model is gone cannot run a turn.
    fn check_can_run(&self) -> Result<(), RuntimeError> {
        let conversation = &self.state.conversation;
        super::check_openable(&self.shared.config, conversation)?;
        if let Err(reason) = self
            .shared
            .models
            .client(&self.shared.config, &conversation.model)
        {
            return Err(RuntimeError::ModelUnavailable(format!(
                "{reason}; switch the conversation's model with PATCH {{\"model\": …}}"
            )));
        }
        Ok(())
    }

    /// Accepts messages as a new turn of the root session: stored write-ahead, then run.
    fn start_turn(
        &mut self,
        messages: Vec<Message>,
        key: Option<String>,
    ) -> Result<Answer, RuntimeError> {
        let turn_id = new_id("t");
        let session_id = self.state.conversation.root_session_id.clone();
        let messages: Vec<Message> = messages
            .into_iter()
            .map(|message| Message {
                status: MessageStatus::Started,
                ..message
            })
            .collect();
        let mut records: Vec<MetaRecord> = messages
            .iter()
            .map(|message| MetaRecord::MessageAccepted {
                message: message.clone(),
                idempotency_key: key.clone(),
                turn_id: None,
            })
            .collect();
        records.push(MetaRecord::TurnStarted {
            session_id: session_id.clone(),
            turn_id: turn_id.clone(),
            message_ids: messages.iter().map(|m| m.id.clone()).collect(),
            at: now(),
        });
        // Messages that waited keep the answers their keys were given, from now on durably.
        records.extend(self.pending_answer_records(&messages));
        let answer = Answer {
            status: 202,
            body: json!({ "message": messages[0] }),
        };
        // The key's answer also goes to the index, below.
        let answer_key = key
            .clone()
            .map(|key| (key, answer.status, answer.body.clone()));
        if let Some(key) = key {
            records.push(MetaRecord::RequestAnswered {
                key,
                status: answer.status,
                response: answer.body.clone(),
                at: now(),
            });
        }
        self.append_meta(records)?;
        self.forget_stored_answers();
        let items: Vec<Item> = messages
            .iter()
            .map(|message| {
                let seq = self.next_seq(&session_id);
                user_item(message, &turn_id, seq)
            })
            .collect();
        self.append_items(&session_id, &items)?;

        let history = self.root_history.clone();
        let shared = self.shared.clone();
        let id = self.id.clone();
        let conversation_update = self.conversation_update_owned();
        let turn = self.state.turns.last().cloned();
        let search: Vec<(u64, String)> = items
            .iter()
            .filter_map(|item| Some((item.seq, item.kind.searchable_text()?.to_owned())))
            .collect();
        // Index in the background of the turn: the files are already the truth.
        tokio::spawn(async move {
            let mut updates = vec![IndexUpdate::Conversation {
                conversation: &conversation_update.0,
                meta_len: conversation_update.1,
            }];
            if let Some(turn) = &turn {
                updates.push(IndexUpdate::Turn {
                    conversation_id: &id,
                    turn,
                });
            }
            for (seq, text) in &search {
                updates.push(IndexUpdate::SearchText {
                    conversation_id: &id,
                    seq: *seq,
                    text,
                });
            }
            if let Some((key, status, response)) = &answer_key {
                updates.push(IndexUpdate::Answer {
                    conversation_id: &id,
                    key,
                    status: *status,
                    response,
                });
            }
            shared.index_quietly(&updates).await;
        });
        self.publish_conversation();
        self.publish_session(&session_id);
        self.bus.publish(
            "turn.started",
            &json!({ "session_id": session_id, "turn_id": turn_id, "message_ids": messages.iter().map(|m| &m.id).collect::<Vec<_>>() }),
        );
        for item in &items {
            self.bus.publish("item.started", &json!({ "item": item }));
            self.bus.publish("item.completed", &json!({ "item": item }));
            self.usage.add(item);
        }
        self.run_turn(&turn_id, history);
        Ok(answer)
    }

    /// Starts the task of a turn that is stored as started.
    fn run_turn(&mut self, turn_id: &str, history: Vec<Item>) {
        let conversation = &self.state.conversation;
        let config = &self.shared.config;
        let session_id = conversation.root_session_id.clone();
        let cancel = CancellationToken::new();
        self.running = Some(RunningTurn {
            session_id: session_id.clone(),
            turn_id: turn_id.to_owned(),
            cancel: cancel.clone(),
            items: Vec::new(),
        });
        let agent = config.agent(&conversation.agent);
        let model = config.model(&conversation.model);
        let client = self.shared.models.client(config, &conversation.model);
        let compactor = self.compactor();
        let (Some(agent), Some(model), Ok(client), Ok(compactor)) =
            (agent, model, client, compactor)
        else {
            // Checked before the turn was stored; only a config change could get here.
            let _ = self.turn_sender.send(TurnMsg::Ended {
                status: TurnStatus::Failed,
                error: Some("the conversation's agent or model is no longer configured".to_owned()),
            });
            return;
        };
        let spec = TurnSpec {
            session_id,
            turn_id: turn_id.to_owned(),
            client,
            model_name: model.name.clone(),
            instructions: instructions(agent.instructions.as_deref(), &conversation.cwd),
            history,
            tools: crate::tools::specs(&agent.tools),
            tool_context: ToolContext {
                cwd: conversation.cwd.clone().into(),
                shell_timeout: config.tools.shell_timeout(),
                max_output_bytes: config.tools.max_output_bytes,
                process_records: self.shared.settings.process_records.clone(),
            },
            max_output_tokens: model.max_output_tokens,
            retry: config.retry.clone(),
            max_steps: config.turn.max_steps,
            cancel,
            context_window: model.context_window,
            usage: self.usage,
            compactor,
            reasoning_context: model.reasoning_context,
            reasoning_carried: self.reasoning_carried(),
        };
        self.turn_reasoning_tokens = 0;
        tokio::spawn(turn::run(spec, self.turn_sender.clone()));
    }

    /// Whether the conversation's model gets reasoning back (the Responses API with a
    /// `reasoning_context`), so that reasoning takes room in its next request.
    fn reasoning_carried(&self) -> bool {
        let config = &self.shared.config;
        config
            .model(&self.state.conversation.model)
            .filter(|model| model.reasoning_context.is_some())
            .and_then(|model| config.providers.get(&model.provider))
            .is_some_and(|provider| provider.protocol == Protocol::OpenaiResponses)
    }

    /// The model that writes this conversation's summaries: its agent's `compact_model`.
    fn compactor(&self) -> Result<Compactor, String> {
        let config = &self.shared.config;
        let agent = config
            .agent(&self.state.conversation.agent)
            .ok_or_else(|| {
                format!(
                    "agent `{}` is not configured",
                    self.state.conversation.agent
                )
            })?;
        let model_id = agent.compaction_model();
        let model = config
            .model(model_id)
            .ok_or_else(|| format!("model `{model_id}` is not configured"))?;
        Ok(Compactor {
            client: self.shared.models.client(config, model_id)?,
            model_name: model.name.clone(),
            max_output_tokens: model.max_output_tokens,
            retry: config.retry.clone(),
        })
    }

    async fn on_turn(&mut self, message: TurnMsg) {
        match message {
            TurnMsg::Started { mut item } => {
                item.seq = self.next_seq(&item.session_id);
                self.bus.publish("item.started", &json!({ "item": item }));
                if let Some(running) = &mut self.running {
                    running.items.push(item);
                }
            }
            TurnMsg::Delta {
                item_id,
                field,
                delta,
            } => {
                let Some(running) = &mut self.running else {
                    return;
                };
                // The newest item is almost always the one streaming.
                if let Some(item) = running.items.iter_mut().rev().find(|i| i.id == item_id) {
                    append_delta(item, &delta);
                }
                let event = DeltaEvent {
                    session_id: &running.session_id,
                    item_id: &item_id,
                    field,
                    delta: &delta,
                };
                self.bus.publish("item.delta", &event);
            }
            TurnMsg::Store { item, ack } => {
                if let Ok(seq) = self.store_turn_item(item).await {
                    let _ = ack.send(seq);
                }
            }
            TurnMsg::CompactionStarted => self.publish_compaction_started(Reason::Auto),
            TurnMsg::Compacted { summary } => self.on_compacted(&summary),
            TurnMsg::CompactionFailed { error } => self.publish_compaction_failed(&error),
            TurnMsg::ManualCompactionDone { plan, result } => {
                self.finish_compaction(&plan, result);
            }
            TurnMsg::Retry(turn::Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            }) => {
                // A manual compaction's retries belong to the root session.
                let session_id = self.running.as_ref().map_or_else(
                    || self.state.conversation.root_session_id.clone(),
                    |running| running.session_id.clone(),
                );
                self.bus.publish(
                    "model.retry",
                    &json!({ "session_id": session_id, "attempt": attempt, "max_attempts": max_attempts, "delay_ms": delay_ms, "error": error }),
                );
            }
            TurnMsg::Usage(usage) => {
                let carried = self.reasoning_carried();
                self.usage.report(usage::context_tokens(&usage, carried));
                if carried {
                    self.turn_reasoning_tokens += usage.reasoning_tokens;
                }
                self.bus
                    .publish("usage.updated", &json!({ "usage": self.usage_view() }));
            }
            TurnMsg::TakeSteered { reply } => {
                let items = self.take_steered().await;
                let _ = reply.send(items);
            }
            TurnMsg::Ended { status, error } => self.end_turn(status, error).await,
        }
    }

    /// Stores an item of the running turn (a new one gets its `seq`), then publishes it.
    /// Returns the item's `seq`.
    async fn store_turn_item(&mut self, mut item: Item) -> Result<u64, StoreError> {
        let known = self
            .running
            .as_ref()
            .and_then(|running| running.items.iter().find(|i| i.id == item.id))
            .map(|existing| existing.seq);
        let is_new = known.is_none();
        item.seq = match known {
            Some(seq) => seq,
            None => self.next_seq(&item.session_id),
        };
        if let Err(error) = self.append_items(&item.session_id.clone(), std::slice::from_ref(&item))
        {
            tracing::error!(%error, conversation = %self.id, "cannot store an item; interrupting the turn");
            if let Some(running) = &self.running {
                running.cancel.cancel();
            }
            return Err(error);
        }
        if let Some(running) = &mut self.running {
            match running.items.iter_mut().find(|i| i.id == item.id) {
                Some(existing) => *existing = item.clone(),
                None => running.items.push(item.clone()),
            }
        }
        let finished = item.status != ItemStatus::Running;
        if is_new && !finished {
            self.bus.publish("item.started", &json!({ "item": item }));
        }
        if finished {
            if is_new {
                self.bus.publish("item.started", &json!({ "item": item }));
            }
            self.bus.publish("item.completed", &json!({ "item": item }));
            self.usage.add(&item);
            self.on_item_finished(&item);
        }
        Ok(item.seq)
    }

    /// Starts a manual compaction (SPEC §7.6): only when no turn runs and no message waits.
    fn start_compaction(&mut self, reply: oneshot::Sender<Result<CompactOutcome, RuntimeError>>) {
        let refused = if self.running.is_some() {
            Some(RuntimeError::TurnRunning)
        } else if self.compacting.is_some() {
            Some(RuntimeError::CompactionRunning)
        } else if !self.pending.is_empty() {
            Some(RuntimeError::MessagesWaiting)
        } else {
            None
        };
        if let Some(error) = refused.or_else(|| self.check_can_run().err()) {
            let _ = reply.send(Err(error));
            return;
        }
        let compactor = match self.compactor() {
            Ok(compactor) => compactor,
            Err(error) => {
                let _ = reply.send(Err(RuntimeError::ModelUnavailable(error)));
                return;
            }
        };
        let window = self
            .shared
            .config
            .model(&self.state.conversation.model)
            .map_or(0, |model| model.context_window);
        let view = compaction::model_view(&self.root_history);
        let Some(plan) = compaction::plan(&view, window, Reason::Manual) else {
            let _ = reply.send(Err(RuntimeError::NothingToCompact));
            return;
        };
        self.publish_compaction_started(Reason::Manual);
        let cancel = CancellationToken::new();
        self.compacting = Some(Compacting {
            cancel: cancel.clone(),
            reply,
        });
        let done = self.turn_sender.clone();
        tokio::spawn(async move {
            let on_retry = |retry| {
                let _ = done.send(TurnMsg::Retry(retry));
            };
            let result = compactor.summarize(&plan, &cancel, on_retry).await;
            let _ = done.send(TurnMsg::ManualCompactionDone { plan, result });
        });
    }

    /// Stores a manual compaction's summary (or reports its failure), answers the request, and
    /// lets a message that arrived meanwhile start its turn.
    fn finish_compaction(
        &mut self,
        plan: &compaction::Plan,
        result: Result<(String, Option<crate::model::TokenUsage>), compaction::Failure>,
    ) {
        let Some(compacting) = self.compacting.take() else {
            return;
        };
        let outcome = match result {
            Ok((text, _report)) => {
                let root = self.state.conversation.root_session_id.clone();
                let turn_id = self
                    .state
                    .turns
                    .last()
                    .map(|turn| turn.id.clone())
                    .unwrap_or_default();
                let mut summary = compaction::summary_item(&root, &turn_id, text, plan);
                summary.seq = self.next_seq(&root);
                match self.append_items(&root, std::slice::from_ref(&summary)) {
                    Ok(()) => {
                        self.bus
                            .publish("item.started", &json!({ "item": summary }));
                        self.bus
                            .publish("item.completed", &json!({ "item": summary }));
                        self.on_compacted(&summary);
                        Ok(CompactOutcome {
                            summary,
                            usage: self.usage_view(),
                        })
                    }
                    Err(error) => {
                        self.publish_compaction_failed("the summary could not be stored");
                        Err(RuntimeError::from(error))
                    }
                }
            }
            Err(compaction::Failure::Interrupted) => {
                let error = "interrupted".to_owned();
                self.publish_compaction_failed(&error);
                Err(RuntimeError::CompactionFailed(error))
            }
            Err(compaction::Failure::Failed(error)) => {
                self.publish_compaction_failed(&error);
                Err(RuntimeError::CompactionFailed(error))
            }
        };
        let _ = compacting.reply.send(outcome);
        if !self.stopping {
            self.start_next_waiting();
        }
    }

    fn publish_compaction_started(&self, reason: Reason) {
        self.bus.publish(
            "compaction.started",
            &json!({ "session_id": self.state.conversation.root_session_id, "reason": reason.as_str() }),
        );
    }

    fn publish_compaction_failed(&self, error: &str) {
        self.bus.publish(
            "compaction.failed",
            &json!({ "session_id": self.state.conversation.root_session_id, "error": error }),
        );
    }

    /// A stored summary now stands for what it covers: the history the next turn reads and
    /// the usage meter start from it.
    fn on_compacted(&mut self, summary: &Item) {
        compaction::mark_compacted(&mut self.root_history);
        self.usage = UsageTracker::estimated(&compaction::model_view(&self.root_history));
        let usage = self.usage_view();
        self.bus.publish(
            "compaction.completed",
            &json!({ "session_id": summary.session_id, "summary": summary, "usage": usage }),
        );
        self.bus
            .publish("usage.updated", &json!({ "usage": usage }));
    }

    /// A finished item of the root session: the sidebar's last message, and its search row.
    /// The row goes through the index queue rather than being awaited here: this is on the
    /// way to the model's next call or to `turn.ended`, and the files already hold the item.
    fn on_item_finished(&mut self, item: &Item) {
        if item.session_id != self.state.conversation.root_session_id {
            return;
        }
        if let ItemKind::AgentMessage { text } = &item.kind
            && let Some(root) = self.state.sessions.first_mut()
        {
            root.last_message = Some(text.clone());
            let root = root.id.clone();
            self.publish_session(&root);
        }
        if let Some(text) = item.kind.searchable_text() {
            self.shared.index_later(IndexJob::SearchText {
                conversation_id: self.id.clone(),
                seq: item.seq,
                text: text.to_owned(),
            });
        }
    }

    /// Steered messages join the running turn before its next model call (SPEC §3.1).
    async fn take_steered(&mut self) -> Vec<Item> {
        let Some(running) = &self.running else {
            return Vec::new();
        };
        let turn_id = running.turn_id.clone();
        let session_id = running.session_id.clone();
        let steered: Vec<Message> = self
            .pending
            .take_steered()
            .into_iter()
            .map(|m| Message {
                status: MessageStatus::Steered,
                ..m
            })
            .collect();
        if steered.is_empty() {
            return Vec::new();
        }
        let mut records: Vec<MetaRecord> = steered
            .iter()
            .map(|message| MetaRecord::MessageAccepted {
                message: message.clone(),
                idempotency_key: None,
                turn_id: Some(turn_id.clone()),
            })
            .collect();
        records.extend(self.pending_answer_records(&steered));
        if let Err(error) = self.append_meta(records) {
            tracing::error!(%error, "cannot store steered messages; they stay waiting");
            self.wait_again(steered);
            return Vec::new();
        }
        self.forget_stored_answers();
        let items: Vec<Item> = steered
            .iter()
            .map(|message| {
                let seq = self.next_seq(&session_id);
                user_item(message, &turn_id, seq)
            })
            .collect();
        if let Err(error) = self.append_items(&session_id, &items) {
            // Told to nobody, given to no model: the messages wait again, for the next turn,
            // and this one stops, as it does when any of its items cannot be stored.
            tracing::error!(%error, conversation = %self.id, "cannot store steered messages; interrupting the turn");
            if let Some(last) = self.last_seq.get_mut(&session_id) {
                *last -= items.len() as u64;
            }
            if let Some(running) = &self.running {
                running.cancel.cancel();
            }
            self.wait_again(steered);
            return Vec::new();
        }
        for item in &items {
            self.bus.publish("item.started", &json!({ "item": item }));
            self.bus.publish("item.completed", &json!({ "item": item }));
            self.usage.add(item);
            self.on_item_finished(item);
        }
        self.publish_pending();
        items
    }

    /// Puts messages the agent could not take back at the head of the waiting ones.
    fn wait_again(&mut self, messages: Vec<Message>) {
        self.pending.restore(
            messages
                .into_iter()
                .map(|message| Message {
                    status: MessageStatus::Waiting,
                    ..message
                })
                .collect(),
        );
    }

    async fn end_turn(&mut self, status: TurnStatus, error: Option<String>) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        // Reasoning the model got back during the turn stays behind with it, unless every
        // turn's reasoning is taken back (SPEC §7.8).
        let reasoning = std::mem::take(&mut self.turn_reasoning_tokens);
        let keeps_all = self
            .shared
            .config
            .model(&self.state.conversation.model)
            .is_some_and(|model| model.reasoning_context == Some(ReasoningContext::AllTurns));
        if reasoning > 0 && !keeps_all {
            self.usage.forget(reasoning);
            self.bus
                .publish("usage.updated", &json!({ "usage": self.usage_view() }));
        }
        // Items the turn left running (it should not) are closed with the turn's status.
        for mut item in std::mem::take(&mut running.items)
            .into_iter()
            .filter(|i| i.status == ItemStatus::Running)
        {
            item.status = match status {
                TurnStatus::Failed => ItemStatus::Failed,
                _ => ItemStatus::Interrupted,
            };
            if self
                .append_items(&item.session_id.clone(), std::slice::from_ref(&item))
                .is_ok()
            {
                self.bus.publish("item.completed", &json!({ "item": item }));
            }
        }
        let cause = self.interrupt_cause.take();
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
                self.store_notice(&running, text);
            }
            // The error stays visible in the history (and the model learns of it next turn).
            TurnStatus::Failed => {
                let error = error.as_deref().unwrap_or("unknown error");
                self.store_notice(&running, format!("The previous turn failed: {error}"));
            }
            TurnStatus::Completed | TurnStatus::Running => {}
        }
        let record = MetaRecord::TurnEnded {
            session_id: running.session_id.clone(),
            turn_id: running.turn_id.clone(),
            status,
            error: error.clone(),
            at: now(),
        };
        if let Err(error) = self.append_meta(vec![record.clone()]) {
            // Clients are told the turn ended, and this actor must agree with them (a turn it
            // thinks still runs would block every later one). On disk the turn stays open, so
            // the next start closes it as interrupted.
            tracing::error!(%error, conversation = %self.id, "cannot store the end of a turn");
            self.state.apply(&record);
            // The index is about to be told how the turn ended; the files will say otherwise.
            self.shared.index.mark_out_of_date(&[&self.id]).await;
        }
        // The end is on disk: followers of the conversation learn it now. The list-level
        // `conversation.updated` follows the index update, so a sidebar that reacts to it by
        // listing sees the same state.
        self.bus.publish(
            "turn.ended",
            &json!({ "session_id": running.session_id, "turn_id": running.turn_id, "status": status, "error": error }),
        );
        let turn = self
            .state
            .turns
            .iter()
            .rev()
            .find(|t| t.id == running.turn_id)
            .cloned();
        let conversation_update = self.conversation_update();
        let mut updates = vec![conversation_update];
        if let Some(turn) = &turn {
            updates.push(IndexUpdate::Turn {
                conversation_id: &self.id,
                turn,
            });
        }
        self.shared.index_quietly(&updates).await;
        self.publish_conversation();
        self.publish_session(&running.session_id);
        for waiter in self.interrupt_waiters.drain(..) {
            let _ = waiter.send(Ok(true));
        }
        if self.stopping {
            return;
        }
        self.start_next_waiting();
    }

    /// A notice at the end of a turn that did not complete: the model reads it at its next
    /// call (SPEC §4.2) and every client sees it.
    fn store_notice(&mut self, running: &RunningTurn, text: String) {
        let notice = Item {
            id: new_id("m"),
            session_id: running.session_id.clone(),
            turn_id: running.turn_id.clone(),
            seq: self.next_seq(&running.session_id),
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: None,
            kind: ItemKind::Notice { text },
        };
        if let Err(error) = self.append_items(&running.session_id, std::slice::from_ref(&notice)) {
            tracing::error!(%error, "cannot store a notice");
            return;
        }
        self.bus.publish("item.started", &json!({ "item": notice }));
        self.bus
            .publish("item.completed", &json!({ "item": notice }));
        self.usage.add(&notice);
    }

    /// After a turn, the next waiting user message (then agents') starts the next turn.
    fn start_next_waiting(&mut self) {
        let next = self.pending.take_next_turn();
        if next.is_empty() {
            return;
        }
        if next[0].source == MessageSource::User {
            self.pending.hold_agent_messages(false);
        }
        if let Err(error) = self
            .check_can_run()
            .and_then(|()| self.start_turn(next.clone(), None))
        {
            tracing::warn!(%error, "waiting messages could not start a turn; they keep waiting");
            self.pending.restore(next);
        }
        self.publish_pending();
    }

    fn interrupt(
        &mut self,
        session: Option<String>,
        reply: oneshot::Sender<Result<bool, RuntimeError>>,
    ) {
        if let Some(session) = &session
            && self.state.session(session).is_none()
        {
            let _ = reply.send(Err(RuntimeError::NotFound(format!("session {session}"))));
            return;
        }
        let root = &self.state.conversation.root_session_id;
        if let Some(compacting) = &self.compacting
            && session.as_ref().is_none_or(|s| s == root)
        {
            // Answered when the compaction ends; its request gets the failure.
            compacting.cancel.cancel();
            let _ = reply.send(Ok(true));
            return;
        }
        let runs = self
            .running
            .as_ref()
            .is_some_and(|running| session.as_ref().is_none_or(|s| *s == running.session_id));
        if !runs {
            let _ = reply.send(Ok(false));
            return;
        }
        self.interrupt_running(InterruptCause::User);
        self.interrupt_waiters.push(reply);
    }

    fn subscribe(&self, after: Option<EventId>) -> Subscription {
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

    fn snapshot(&self) -> Value {
        let running: Vec<Value> = self
            .running
            .iter()
            .map(|r| json!({ "session_id": r.session_id, "turn_id": r.turn_id, "items": r.items }))
            .collect();
        json!({
            "conversation": self.state.conversation,
            "sessions": self.state.sessions,
            "pending": self.pending.list(),
            "usage": self.usage_view(),
            "running": running,
            // A manual compaction in progress (an automatic one runs inside a turn).
            "compacting": self.compacting.is_some(),
            "last_seq": self.stored_last_seq(),
        })
    }

    /// The last stored item's `seq` per session. Streaming text takes its `seq` when it starts
    /// and is stored only when it ends, so the newest `seq`s given out may not be stored.
    fn stored_last_seq(&self) -> HashMap<&str, u64> {
        let streaming: std::collections::HashSet<(&str, u64)> = self
            .running
            .iter()
            .flat_map(|running| &running.items)
            // Streaming text is stored when it ends; a tool call is stored when it starts.
            .filter(|item| {
                item.status == ItemStatus::Running
                    && matches!(
                        item.kind,
                        ItemKind::AgentMessage { .. } | ItemKind::Reasoning { .. }
                    )
            })
            .map(|item| (item.session_id.as_str(), item.seq))
            .collect();
        self.last_seq
            .iter()
            .map(|(session_id, &given)| {
                let mut seq = given;
                while seq > 0 && streaming.contains(&(session_id.as_str(), seq)) {
                    seq -= 1;
                }
                (session_id.as_str(), seq)
            })
            .collect()
    }

    /// Turns a crash left `running` are closed as `interrupted` before anything else happens.
    fn close_stale_turns(&mut self, except: Option<&str>) -> Result<(), RuntimeError> {
        let stale: Vec<(String, String)> = self
            .state
            .running_turns()
            .filter(|t| Some(t.id.as_str()) != except)
            .map(|t| (t.session_id.clone(), t.id.clone()))
            .collect();
        for (session_id, turn_id) in stale {
            let mut items = self.shared.store.read_items(&self.id, &session_id)?;
            let closing: Vec<Item> = crate::index::rebuild::close_cut_turn(
                &self.state,
                &mut items,
                &session_id,
                &turn_id,
            )
            .into_iter()
            .map(|SessionRecord::Item { item }| item)
            .collect();
            self.append_items(&session_id, &closing)?;
            if let Some(last) = closing.last() {
                self.last_seq.insert(session_id.clone(), last.seq);
            }
            // The model sees what the files now hold: restored messages and the notice.
            if session_id == self.state.conversation.root_session_id {
                self.usage = UsageTracker::estimated(&compaction::model_view(&items));
                self.root_history = items;
            }
            self.append_meta(vec![MetaRecord::TurnEnded {
                session_id,
                turn_id,
                status: TurnStatus::Interrupted,
                error: Some("the service stopped during the turn".to_owned()),
                at: now(),
            }])?;
        }
        Ok(())
    }

    fn append_meta(&mut self, records: Vec<MetaRecord>) -> Result<(), StoreError> {
        self.meta.append(&records)?;
        for record in &records {
            self.state.apply(record);
        }
        Ok(())
    }

    fn append_items(&mut self, session_id: &str, items: &[Item]) -> Result<(), StoreError> {
        let writer = match self.session_writers.entry(session_id.to_owned()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => entry.insert(
                self.shared
                    .store
                    .open_session_writer(&self.id, session_id)?,
            ),
        };
        let records: Vec<SessionRecord> = items
            .iter()
            .map(|item| SessionRecord::Item { item: item.clone() })
            .collect();
        writer.append(&records)?;
        if session_id == self.state.conversation.root_session_id {
            for item in items {
                remember(&mut self.root_history, item);
            }
        }
        Ok(())
    }

    fn next_seq(&mut self, session_id: &str) -> u64 {
        let last = self.last_seq.entry(session_id.to_owned()).or_insert(0);
        *last += 1;
        *last
    }

    fn conversation_update(&self) -> IndexUpdate<'_> {
        IndexUpdate::Conversation {
            conversation: &self.state.conversation,
            meta_len: self.meta.len(),
        }
    }

    fn conversation_update_owned(&self) -> (Conversation, u64) {
        (self.state.conversation.clone(), self.meta.len())
    }

    fn publish_conversation(&self) {
        let data = json!({ "conversation": self.state.conversation });
        self.bus.publish("conversation.updated", &data);
        self.shared
            .list_events
            .publish("conversation.updated", &data);
    }

    /// A session's status or last message changed (the Agents tab shows both).
    fn publish_session(&self, session_id: &str) {
        if let Some(session) = self.state.session(session_id) {
            self.bus
                .publish("session.updated", &json!({ "session": session }));
        }
    }

    fn publish_pending(&self) {
        self.bus.publish(
            "pending.updated",
            &json!({ "pending": self.pending.list() }),
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InterruptCause {
    User,
    Shutdown,
}

#[derive(PartialEq)]
enum Flow {
    Continue,
    Stop,
}

/// `item.delta`, the most frequent event: serialized straight from borrowed fields.
#[derive(Serialize)]
struct DeltaEvent<'a> {
    session_id: &'a str,
    item_id: &'a str,
    field: &'a str,
    delta: &'a str,
}

/// Folds a stored item snapshot into a history, as `store::fold_items` does for a file.
fn remember(history: &mut Vec<Item>, item: &Item) {
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

fn append_delta(item: &mut Item, delta: &str) {
    match &mut item.kind {
        ItemKind::AgentMessage { text } | ItemKind::Reasoning { text, .. } => text.push_str(delta),
        ItemKind::ToolCall { output, .. } => output.push_str(delta),
        _ => {}
    }
}

/// The agent's instructions, with the working directory's AGENTS.md after them (SPEC §7.5).
fn instructions(agent: Option<&str>, cwd: &str) -> Option<String> {
    let agents_md = std::fs::read_to_string(std::path::Path::new(cwd).join("AGENTS.md")).ok();
    match (agent, agents_md) {
        (None, None) => None,
        (Some(agent), None) => Some(agent.to_owned()),
        (None, Some(file)) => Some(format!("Instructions from AGENTS.md:\n{file}")),
        (Some(agent), Some(file)) => {
            Some(format!("{agent}\n\nInstructions from AGENTS.md:\n{file}"))
        }
    }
}
