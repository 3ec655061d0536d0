//! The live part of the service: a registry of conversation actors (one task per live
//! conversation, the only writer of its files), the turn loop, and the event buses. HTTP
//! handlers call the functions of `Runtime`; they never touch files themselves.

pub mod actor;
pub mod collab;
pub mod compaction;
pub mod events;
pub mod fork;
pub mod pending;
pub mod title;
pub mod turn;
pub mod usage;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::Config;
use crate::domain::{
    Conversation, Image, Item, Message, MessageMode, MessageSource, MessageStatus, Session, Usage,
    new_id, now, user_item,
};
use crate::index::{Index, IndexError, IndexUpdate, ListPage, ListQuery};
use crate::model::Models;
use crate::store::records::{ConversationCreated, MetaRecord, SessionRecord};
use crate::store::state::{ConversationState, StoredAnswer};
use crate::store::{Store, StoreError, is_valid_id};
pub use actor::ForkOutcome;
use actor::{ActorHandle, Command, CompactOutcome, ConversationView, Subscription};
use events::{EventBus, EventId};

/// Why a runtime operation was refused; the HTTP layer maps each to a status and code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("a turn is running; wait for it to end or interrupt it")]
    TurnRunning,
    #[error("messages are waiting; send or withdraw them first")]
    MessagesWaiting,
    #[error("the message is no longer waiting: the agent has taken it")]
    NotWaiting,
    #[error("a compaction is running; wait for it to end")]
    CompactionRunning,
    #[error("there is nothing to compact: the history is already its summary")]
    NothingToCompact,
    #[error("the compaction failed: {0}")]
    CompactionFailed(String),
    #[error(
        "the working directory {0} does not exist; recreate it or repoint the conversation with PATCH {{\"cwd\": …}}"
    )]
    CwdMissing(String),
    #[error("{0}")]
    ModelUnavailable(String),
    #[error("{0}")]
    AgentUnavailable(String),
    #[error(
        "this Idempotency-Key was used for a request with a different body; use a new key for a new request"
    )]
    IdempotencyKeyReused,
    #[error("the service is stopping")]
    ShuttingDown,
    /// A limit is reached (live conversations, open files), or the outcome of the request
    /// cannot be known: 503 with `Retry-After`. The message says which.
    #[error("{0}")]
    Unavailable(String),
    /// Cluster mode: a conversation's files carry this epoch, and the lease taken is not newer
    /// (its row was rebuilt): the lease must be taken again above it. Handled by the registry.
    #[error("the conversation's lease is older than its files; retry")]
    EpochBehind(u64),
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for RuntimeError {
    fn from(error: StoreError) -> RuntimeError {
        if let StoreError::Io { source, .. } = &error
            && let Some(what) = crate::limits::exhausted(source)
        {
            tracing::warn!(%error, "out of {what}");
            return RuntimeError::out_of(what);
        }
        tracing::error!(%error, "store error");
        RuntimeError::Internal(format!("storage error: {error}"))
    }
}

impl From<IndexError> for RuntimeError {
    fn from(error: IndexError) -> RuntimeError {
        match error {
            IndexError::BadCursor => RuntimeError::Invalid("invalid cursor".to_owned()),
            IndexError::BadSearch(message) => RuntimeError::Invalid(message),
            IndexError::Unreachable(reason) => {
                tracing::warn!(%reason, "the PostgreSQL index does not answer");
                RuntimeError::Unavailable(format!(
                    "PostgreSQL does not answer ({reason}); the cluster's index is unavailable, retry when it is back"
                ))
            }
            IndexError::Store(error) => error.into(),
            error => {
                if let Some(what) = error.exhausted() {
                    tracing::warn!(%error, "index: out of {what}");
                    return RuntimeError::out_of(what);
                }
                tracing::error!(%error, "index error");
                RuntimeError::Internal(format!("index error: {error}"))
            }
        }
    }
}

impl RuntimeError {
    /// 503: a resource of the machine ran out (files, disk, memory).
    fn out_of(what: &str) -> RuntimeError {
        RuntimeError::Unavailable(format!(
            "the service is out of {what} for the moment; retry shortly"
        ))
    }

    /// 503 when a request failed after part of it was stored: the client cannot know what
    /// happened, so it retries, with the same `Idempotency-Key`.
    pub fn outcome_unknown(error: impl std::fmt::Display) -> RuntimeError {
        tracing::error!(%error, "a request failed after part of it was stored");
        RuntimeError::Unavailable(
            "the request failed midway and may have been stored: retry it with the same Idempotency-Key (one was needed to retry safely)"
                .to_owned(),
        )
    }
}

/// A response that may be replayed for an `Idempotency-Key`: its status and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// An `Idempotency-Key` (qualified by what it is used for) with the hash of the request body
/// it came with: a repeat gets the first answer only when it carries the same body.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestKey {
    pub key: String,
    /// SHA-256 (hex) of the request as the service read it: the same for the same JSON,
    /// whatever its spacing or the order of its fields.
    pub body_hash: String,
}

impl RequestKey {
    pub fn new(key: String, request: &impl Serialize) -> RequestKey {
        use sha2::Digest as _;
        let canonical = serde_json::to_vec(request).expect("requests serialize");
        let digest = sha2::Sha256::digest(&canonical);
        let body_hash = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        RequestKey { key, body_hash }
    }

    /// The answer to a repeat of this key: the first one for the same body (or for an answer
    /// stored before bodies were hashed), 422 for another body.
    pub fn replay(&self, stored: &StoredAnswer) -> Result<Answer, RuntimeError> {
        if stored
            .body_hash
            .as_ref()
            .is_some_and(|hash| *hash != self.body_hash)
        {
            return Err(RuntimeError::IdempotencyKeyReused);
        }
        Ok(Answer {
            status: stored.status,
            body: stored.response.clone(),
        })
    }

    /// The answer as kept for this key.
    pub fn stored(&self, answer: &Answer) -> StoredAnswer {
        StoredAnswer {
            status: answer.status,
            response: answer.body.clone(),
            body_hash: Some(self.body_hash.clone()),
        }
    }

    /// The record that stores the answer for this key.
    pub fn answered(&self, answer: &Answer, at: crate::domain::Timestamp) -> MetaRecord {
        MetaRecord::RequestAnswered {
            key: self.key.clone(),
            status: answer.status,
            response: answer.body.clone(),
            at,
            body_hash: Some(self.body_hash.clone()),
        }
    }
}

/// `POST /api/conversations`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    pub text: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub images: Vec<Image>,
}

/// `POST /api/conversations/{id}/messages`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    pub text: String,
    #[serde(default)]
    pub mode: MessageMode,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub images: Vec<Image>,
}

/// `PATCH /api/conversations/{id}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub archived: Option<bool>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// `PATCH /api/conversations/{id}/pending/{message_id}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingPatch {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub mode: Option<MessageMode>,
}

#[derive(Debug, Serialize)]
pub struct ItemsPage {
    pub items: Vec<Item>,
    pub next_after_seq: Option<u64>,
}

/// The items after `after_seq` (at most `limit`) of a history sorted by seq.
pub fn items_page(items: &[Item], after_seq: u64, limit: usize) -> ItemsPage {
    let start = items.partition_point(|item| item.seq <= after_seq);
    let rest = &items[start..];
    let page = rest[..rest.len().min(limit)].to_vec();
    let next_after_seq = if rest.len() > limit {
        page.last().map(|item| item.seq)
    } else {
        None
    };
    ItemsPage {
        items: page,
        next_after_seq,
    }
}

/// Tunables that are not user configuration.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// A conversation with no activity, turn, waiting message or subscriber for this long is
    /// unloaded from memory.
    pub idle_unload: Duration,
    /// The working directory of conversations created without one.
    pub default_cwd: PathBuf,
    /// Where the shell tool records running commands (see `tools::group_records`).
    pub process_records: Option<crate::tools::group_records::GroupRecords>,
    /// Conversations held in memory at most; past it the least recently used idle one
    /// leaves, and when none can, the request is answered 503 (see `limits::caps`).
    pub max_live_conversations: usize,
    /// Cluster mode: this instance's leases and peers (`None`: embedded, one process).
    pub cluster: Option<crate::cluster::Cluster>,
}

impl Default for RuntimeSettings {
    fn default() -> RuntimeSettings {
        RuntimeSettings {
            idle_unload: Duration::from_secs(60),
            default_cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            process_records: None,
            max_live_conversations: 1000,
            cluster: None,
        }
    }
}

/// A cheap `Clone` handle on the runtime.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// What actors and handlers share.
pub struct Shared {
    pub store: Store,
    pub index: Index,
    pub config: Arc<Config>,
    pub models: Models,
    pub settings: RuntimeSettings,
    /// `GET /api/events`: list-level changes for sidebars.
    pub list_events: EventBus,
    /// Live conversations. Loading and unloading happen under this lock, so there is never
    /// more than one actor per conversation. At most `settings.max_live_conversations`, slots
    /// promised to creates in progress (`reserved`) included.
    actors: tokio::sync::Mutex<HashMap<String, ActorHandle>>,
    /// Slots of the registry promised to conversations being created (stored, not yet live).
    reserved: std::sync::atomic::AtomicUsize,
    /// Woken whenever a slot of the registry may have come free (an actor left, a
    /// reservation ended, an asked actor answered).
    pub slot_freed: tokio::sync::Notify,
    /// Idempotency keys of creates in progress, so two concurrent retries create one thing:
    /// the second waits for the first and then answers what it answered.
    creating: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    stopping: std::sync::atomic::AtomicBool,
    /// Answers to create requests whose conversation the index missed (its write failed), by
    /// idempotency key, until a restart reconciles the index.
    unindexed_answers: Mutex<HashMap<String, StoredAnswer>>,
    /// Index work done after the answer (a fork's search rows, a finished message's), one job
    /// at a time in the order given (a fork of a fork copies search rows only after its
    /// source's own copy is done).
    index_jobs: tokio::sync::mpsc::UnboundedSender<IndexJob>,
    /// Jobs queued and not finished yet (shown by `/api/health`).
    index_jobs_pending: Arc<std::sync::atomic::AtomicUsize>,
}

/// Index work that runs in the background, in order.
#[derive(Debug)]
pub enum IndexJob {
    /// A finished message's search row (see `IndexUpdate::SearchText`). Written moments after
    /// the message is stored; a row for a conversation deleted meanwhile is not written.
    SearchText {
        conversation_id: String,
        seq: u64,
        text: String,
    },
    /// A fork's search rows, copied from its source's (see `IndexUpdate::CopySearch`).
    CopySearch {
        from: String,
        to: String,
        /// The first `seq` not copied: the fork's end, fixed when it was made.
        below_seq: u64,
        /// The length of the fork's root session file: once copied, search covers it.
        root_len: u64,
    },
    /// Search covers a conversation's root session file up to here (see
    /// `IndexUpdate::SearchedThrough`); queued behind the rows it vouches for.
    SearchedThrough {
        conversation_id: String,
        root_len: u64,
    },
    /// Answers once every job queued before it is done (at shutdown).
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl Runtime {
    pub fn new(
        store: Store,
        index: Index,
        config: Arc<Config>,
        settings: RuntimeSettings,
    ) -> Runtime {
        let models = Models::new(&config);
        // Provider errors are stored and sent only without these variables' values.
        crate::redact::register_key_variables(
            config
                .providers
                .values()
                .filter_map(|provider| provider.api_key_env.clone()),
        );
        let (index_jobs, jobs) = tokio::sync::mpsc::unbounded_channel();
        let index_jobs_pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        tokio::spawn(run_index_jobs(
            index.clone(),
            jobs,
            index_jobs_pending.clone(),
        ));
        Runtime {
            shared: Arc::new(Shared {
                store,
                index,
                config,
                models,
                settings,
                list_events: EventBus::new(),
                actors: tokio::sync::Mutex::new(HashMap::new()),
                reserved: std::sync::atomic::AtomicUsize::new(0),
                slot_freed: tokio::sync::Notify::new(),
                creating: Mutex::new(HashMap::new()),
                unindexed_answers: Mutex::new(HashMap::new()),
                stopping: std::sync::atomic::AtomicBool::new(false),
                index_jobs,
                index_jobs_pending,
            }),
        }
    }

    /// Background index jobs not finished yet (a fork's search rows being copied).
    pub fn index_jobs_pending(&self) -> usize {
        self.shared
            .index_jobs_pending
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many conversations are loaded in memory now (the rest are only on disk).
    pub async fn live_conversations(&self) -> usize {
        self.shared.actors.lock().await.len()
    }

    /// The most conversations held in memory at once.
    pub fn max_live_conversations(&self) -> usize {
        self.shared.settings.max_live_conversations
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    pub fn index(&self) -> &Index {
        &self.shared.index
    }

    /// Cluster mode: this instance's place in the cluster.
    pub fn cluster(&self) -> Option<&crate::cluster::Cluster> {
        self.shared.cluster()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.shared.store.root()
    }

    pub fn list_events(&self) -> &EventBus {
        &self.shared.list_events
    }

    /// Creates a conversation with its first message and starts its first turn (SPEC §1.2:
    /// nothing is stored before this call succeeds, and nothing stays stored when it fails).
    pub async fn create_conversation(
        &self,
        request: NewConversation,
        idempotency_key: Option<String>,
    ) -> Result<Answer, RuntimeError> {
        self.refuse_when_stopping()?;
        let key = idempotency_key.map(|key| RequestKey::new(format!("create:{key}"), &request));
        let _guard = match &key {
            Some(key) => Some(InFlight::claim(&self.shared, &key.key).await),
            None => None,
        };
        if let Some(key) = &key {
            let unindexed = self.shared.unindexed_answers.lock().expect("answers lock");
            if let Some(stored) = unindexed.get(&key.key) {
                return key.replay(stored);
            }
        }
        if let Some(key) = &key
            && let Some(stored) = self.shared.index.answer(&key.key).await?
        {
            return key.replay(&stored);
        }
        validate_text(&request.text, &request.images)?;
        let config = &self.shared.config;
        let agent_name = request
            .agent
            .unwrap_or_else(|| config.default_agent.clone());
        let agent = config.agent(&agent_name).ok_or_else(|| {
            RuntimeError::AgentUnavailable(format!("agent `{agent_name}` is not configured"))
        })?;
        let model = request.model.unwrap_or_else(|| agent.model.clone());
        self.check_model(&model)?;
        let cwd = match request.cwd {
            Some(cwd) => checked_cwd(&cwd)?,
            None => self
                .shared
                .settings
                .default_cwd
                .to_string_lossy()
                .into_owned(),
        };
        // The new conversation will be live: its place is taken before anything is stored,
        // so that a full registry answers 503 with nothing stored.
        let slot = self.reserve_slot().await?;

        let created_at = now();
        let conversation_id = new_id("c");
        let root_session_id = new_id("s");
        let turn_id = new_id("t");
        let message = Message {
            id: new_id("m"),
            session_id: root_session_id.clone(),
            text: request.text,
            mode: MessageMode::Steer,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Started,
            created_at,
            images: request.images,
        };
        let mut records = MetaRecord::conversation_start(ConversationCreated {
            id: conversation_id.clone(),
            title: title::auto_title(&message.text),
            created_at,
            cwd,
            agent: agent_name.clone(),
            model: model.clone(),
            root_session_id: root_session_id.clone(),
            forked_from: None,
        });
        records.extend([
            MetaRecord::MessageAccepted {
                message: message.clone(),
                idempotency_key: key.as_ref().map(|key| key.key.clone()),
                turn_id: None,
            },
            MetaRecord::TurnStarted {
                session_id: root_session_id.clone(),
                turn_id: turn_id.clone(),
                message_ids: vec![message.id.clone()],
                at: created_at,
            },
        ]);
        let mut state = ConversationState::from_records(&records).expect("starts with creation");
        let answer = Answer {
            status: 201,
            body: json!({
                "conversation": state.conversation,
                "message": message,
                "turn_id": turn_id,
            }),
        };
        if let Some(key) = &key {
            let record = key.answered(&answer, created_at);
            state.apply(&record);
            records.push(record);
        }
        let user_item = user_item(&message, &turn_id, 1);
        let session_records = [SessionRecord::Item {
            item: user_item.clone(),
        }];
        // In cluster mode the new conversation is this instance's from the start: its files are
        // written under its lease.
        let epoch = self.shared.claim(&conversation_id, 0).await?;
        let meta_len = self.shared.store.create_conversation(
            &conversation_id,
            &records,
            &[(&root_session_id, &session_records)],
            epoch,
        )?;

        let loaded = crate::index::rebuild::LoadedConversation {
            state,
            meta_len,
            search_texts: vec![(user_item.seq, message.text.clone())],
            // The first turn runs: a crash before it ends re-indexes the conversation anyway,
            // and its end records how far search goes.
            root_len: 0,
            torn_files: Vec::new(),
            epoch: epoch.unwrap_or(0),
        };
        // The files are the truth from here on: a failed index write must not leave a stored
        // conversation that never runs. The next start reconciles the index; until then this
        // run answers a retry of the request itself.
        let indexed = match self
            .shared
            .index
            .apply(&crate::index::rebuild::updates_for(&loaded))
            .await
        {
            Ok(()) => true,
            Err(error) => {
                index_failed(
                    &self.shared.index,
                    &error,
                    "new conversation",
                    &[&conversation_id],
                )
                .await;
                false
            }
        };
        self.shared.publish_list(
            "conversation.created",
            &json!({ "conversation": loaded.state.conversation }),
        );
        let mut actors = self.shared.actors.lock().await;
        let handle = match actor::spawn(
            self.shared.clone(),
            loaded.state,
            HashMap::from([(root_session_id, vec![user_item])]),
            Some(turn_id),
        ) {
            Ok(handle) => handle,
            Err(error) => {
                drop(actors);
                return Err(self.take_back(&conversation_id, error).await);
            }
        };
        actors.insert(conversation_id, handle);
        drop(slot);
        drop(actors);
        if !indexed && let Some(key) = &key {
            self.shared
                .unindexed_answers
                .lock()
                .expect("answers lock")
                .insert(key.key.clone(), key.stored(&answer));
        }
        Ok(answer)
    }

    /// Removes a conversation that was stored but could not start (its actor could not open
    /// its files), so that the error answer is true: nothing stays stored. When even that
    /// fails, the answer says the outcome is unknown.
    async fn take_back(&self, id: &str, error: RuntimeError) -> RuntimeError {
        tracing::warn!(%error, conversation = %id, "a new conversation could not start; removing it");
        if let Err(removal) = self.shared.store.delete_conversation(id) {
            return RuntimeError::outcome_unknown(format!("{error}; then {removal}"));
        }
        if let Err(index_error) = self.shared.index.remove_conversation(id).await {
            index_failed(&self.shared.index, &index_error, "take back", &[id]).await;
        }
        self.shared
            .publish_list("conversation.deleted", &json!({ "conversation_id": id }));
        match error {
            RuntimeError::Unavailable(_) => error,
            other => RuntimeError::Unavailable(format!(
                "the conversation could not start ({other}); nothing was stored, retry shortly"
            )),
        }
    }

    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, RuntimeError> {
        Ok(self.shared.index.list(query).await?)
    }

    /// A conversation with its sessions, waiting messages and usage: from its actor when it
    /// is live, else from its files (without loading it).
    pub async fn conversation(&self, id: &str) -> Result<ConversationView, RuntimeError> {
        let view = self.view(id).await?;
        check_openable(&self.shared.config, &view.conversation)?;
        Ok(view)
    }

    async fn view(&self, id: &str) -> Result<ConversationView, RuntimeError> {
        if let Some(view) = self.ask_live(id, Command::View).await {
            return view;
        }
        Ok(self.read_stored(id)?.0)
    }

    pub async fn update(
        &self,
        id: &str,
        patch: ConversationPatch,
    ) -> Result<Conversation, RuntimeError> {
        // A conversation that does not exist is the first thing to say, before its patch.
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        let title = patch
            .title
            .as_deref()
            .map(title::user_title)
            .transpose()
            .map_err(RuntimeError::Invalid)?;
        if let Some(model) = &patch.model {
            self.check_model(model)?;
        }
        let patch = ConversationPatch {
            title,
            cwd: patch.cwd.as_deref().map(checked_cwd).transpose()?,
            ..patch
        };
        self.call(id, |reply| Command::Update(patch, reply)).await?
    }

    pub async fn delete(&self, id: &str) -> Result<(), RuntimeError> {
        self.call(id, Command::Delete).await?
    }

    pub async fn sessions(&self, id: &str) -> Result<Vec<Session>, RuntimeError> {
        Ok(self.view(id).await?.sessions)
    }

    /// Stored items of one session (the root by default), in `seq` order.
    pub async fn items(
        &self,
        id: &str,
        session: Option<&str>,
        after_seq: u64,
        limit: usize,
    ) -> Result<ItemsPage, RuntimeError> {
        let conversation = self.stored_conversation(id).await?;
        let session_id = session.unwrap_or(&conversation.root_session_id);
        // Only a session of this conversation is read (`metadata` names a file here, not a
        // session).
        if !is_valid_id(session_id) || !session_id.starts_with("s_") {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        // A live conversation keeps its sessions' histories in memory, the same as the files:
        // paging through a long one then costs a copy of each page, not a read of a file.
        let session = Some(session_id.to_owned());
        if let Some(page) = self
            .ask_live(id, |reply| Command::Items(session, after_seq, limit, reply))
            .await
        {
            return page;
        }
        if !self.shared.store.session_path(id, session_id).is_file() {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        let items = self
            .shared
            .store
            .read_items(id, session_id)
            .map_err(|error| self.gone_or(id, error.into()))?;
        Ok(items_page(&items, after_seq, limit))
    }

    /// The usage meter of one session (the root by default).
    pub async fn usage(&self, id: &str, session: Option<String>) -> Result<Usage, RuntimeError> {
        let asked = session.clone();
        if let Some(usage) = self
            .ask_live(id, |reply| Command::Usage(asked, reply))
            .await
        {
            return usage;
        }
        let (view, mut usages) = self.read_stored(id)?;
        let session_id = session.unwrap_or(view.conversation.root_session_id);
        usages
            .remove(&session_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("session {session_id}")))
    }

    /// The actor of a conversation that is live now (without loading one).
    async fn live_actor(&self, id: &str) -> Option<ActorHandle> {
        let actors = self.shared.actors.lock().await;
        actors.get(id).filter(|handle| !handle.is_closed()).cloned()
    }

    /// Asks a conversation's actor if it is live now, without loading it; `None` when it is
    /// not (or left before answering): the caller reads the files instead.
    async fn ask_live<T>(
        &self,
        id: &str,
        command: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command,
    ) -> Option<T> {
        let handle = self.live_actor(id).await?;
        handle.touch();
        let (reply, answer) = tokio::sync::oneshot::channel();
        handle.send(command(reply)).await.ok()?;
        answer.await.ok()
    }

    /// A conversation read from its files, without loading it (see `actor::read_view`).
    fn read_stored(
        &self,
        id: &str,
    ) -> Result<(ConversationView, HashMap<String, Usage>), RuntimeError> {
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        actor::read_view(&self.shared, id).map_err(|error| self.gone_or(id, error))
    }

    /// A read that failed because the conversation was deleted meanwhile is a 404.
    fn gone_or(&self, id: &str, error: RuntimeError) -> RuntimeError {
        if self.shared.store.exists(id) {
            error
        } else {
            RuntimeError::NotFound(format!("conversation {id}"))
        }
    }

    pub async fn send_message(
        &self,
        id: &str,
        request: NewMessage,
        idempotency_key: Option<String>,
    ) -> Result<Answer, RuntimeError> {
        self.refuse_when_stopping()?;
        validate_text(&request.text, &request.images)?;
        let key = idempotency_key.map(|key| RequestKey::new(format!("{id}:{key}"), &request));
        self.call(id, |reply| Command::Send(request, key, reply))
            .await?
    }

    /// Waiting messages live only in a live conversation's memory (SPEC §3.4): one that is
    /// not live has none, and is not loaded to say so.
    pub async fn pending(&self, id: &str) -> Result<Vec<Message>, RuntimeError> {
        if let Some(view) = self.ask_live(id, Command::View).await {
            return Ok(view?.pending);
        }
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        Ok(Vec::new())
    }

    /// Changes a waiting message's text or mode (SPEC §3.2); 409 once the agent has taken it.
    pub async fn update_pending(
        &self,
        id: &str,
        message_id: &str,
        patch: PendingPatch,
    ) -> Result<Message, RuntimeError> {
        if patch
            .text
            .as_deref()
            .is_some_and(|text| text.trim().is_empty())
        {
            return Err(RuntimeError::Invalid("text must not be empty".to_owned()));
        }
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::UpdatePending(message_id, patch, reply))
            .await?
    }

    /// Withdraws a waiting message and returns it (its text goes back to the input box).
    pub async fn withdraw_pending(
        &self,
        id: &str,
        message_id: &str,
    ) -> Result<Message, RuntimeError> {
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::WithdrawPending(message_id, reply))
            .await?
    }

    /// A copy of the conversation up to its last finished turn (SPEC §6.1).
    pub async fn fork(&self, id: &str) -> Result<Conversation, RuntimeError> {
        let outcome = self.call(id, |reply| Command::Fork(None, reply)).await??;
        outcome
            .conversation
            .ok_or_else(|| RuntimeError::Internal("a fork produced no conversation".to_owned()))
    }

    /// A copy up to just before one of the user's messages, and that message's text
    /// ("restart from here", SPEC §6.2). No conversation when it is the first message.
    pub async fn rewind(&self, id: &str, message_id: &str) -> Result<ForkOutcome, RuntimeError> {
        if !is_valid_id(message_id) {
            return Err(RuntimeError::Invalid(format!(
                "message_id `{message_id}` is not a user message of this conversation's root session"
            )));
        }
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::Fork(Some(message_id), reply))
            .await?
    }

    /// Manual compaction of the root session (SPEC §7.6).
    pub async fn compact(&self, id: &str) -> Result<CompactOutcome, RuntimeError> {
        self.refuse_when_stopping()?;
        self.call(id, Command::Compact).await?
    }

    /// Interrupts the running turn of a session (the root by default). Answers once the turn
    /// has ended; `false` when nothing was running.
    pub async fn interrupt(&self, id: &str, session: Option<String>) -> Result<bool, RuntimeError> {
        self.call(id, |reply| Command::Interrupt(session, reply))
            .await?
    }

    /// A live subscription to one conversation's events: a snapshot or the missed events, then
    /// everything that follows.
    pub async fn subscribe(
        &self,
        id: &str,
        last_event_id: Option<EventId>,
    ) -> Result<Subscription, RuntimeError> {
        self.call(id, |reply| Command::Subscribe(last_event_id, reply))
            .await
    }

    /// Stops every live conversation: running turns end `interrupted`, files are flushed.
    pub async fn shutdown(&self) {
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let ids: Vec<String> = self.shared.actors.lock().await.keys().cloned().collect();
        let mut waits = Vec::new();
        for id in ids {
            // An actor retiring meanwhile either left (nothing to stop) or stayed with a fresh
            // channel in the registry (stop it through that one).
            for _ in 0..CALL_ATTEMPTS {
                let Some(handle) = self.shared.actors.lock().await.get(&id).cloned() else {
                    break;
                };
                let (reply, done) = tokio::sync::oneshot::channel();
                if handle.send(Command::Shutdown(reply)).await.is_ok() {
                    waits.push(done);
                    break;
                }
            }
        }
        for done in waits {
            let _ = done.await;
        }
        let (flushed, done) = tokio::sync::oneshot::channel();
        self.shared.index_later(IndexJob::Flush(flushed));
        let _ = done.await;
        if let Some(cluster) = self.shared.cluster() {
            cluster.leave().await;
        }
    }

    /// Cluster mode: conversations whose lease this instance lost (the database did not answer
    /// in time, or another instance took them). Their actors stop at once: they can write
    /// nothing more, and what they hold in memory (waiting messages) is lost with them.
    pub async fn leases_lost(&self, ids: &[String]) {
        for id in ids {
            let handle = self.shared.actors.lock().await.get(id).cloned();
            if let Some(handle) = handle {
                tracing::warn!(conversation = %id, "lost the lease of a live conversation; it stops here");
                let (reply, _done) = tokio::sync::oneshot::channel();
                let _ = handle.send(Command::Shutdown(reply)).await;
            }
        }
    }

    /// Where a request for conversation `id` is served in cluster mode. A read (`writes`
    /// false) of a conversation nobody owns is served here from its files without taking it;
    /// anything else takes it when it is free. `None` when embedded.
    pub async fn route(
        &self,
        id: &str,
        writes: bool,
    ) -> Option<Result<crate::cluster::Route, crate::cluster::RouteError>> {
        let cluster = self.shared.cluster()?;
        if !is_valid_id(id) || !self.shared.store.exists(id) {
            // Answered here (404) whatever the others hold.
            return None;
        }
        if let Some(fence) = cluster.leases().held(id) {
            return Some(Ok(crate::cluster::Route::Local(fence)));
        }
        if !writes {
            match cluster.current_owner(id).await {
                Ok(Some(addr)) => return Some(Ok(crate::cluster::Route::Remote(addr))),
                Err(error) => return Some(Err(error)),
                Ok(None) => {}
            }
            // Nobody owns it. A turn that still runs in its files was cut with its owner (it
            // died): whoever reads it first takes it, and closes that turn. Otherwise the files
            // are read here as they are.
            let cut = matches!(
                self.shared.index.get(id).await,
                Ok(Some(conversation)) if conversation.status == crate::domain::ConversationStatus::Running
            );
            if !cut {
                return None;
            }
            // Loaded here, so the cut turn is closed before the read answers.
            return match self.actor(id).await {
                Ok(_) => cluster
                    .leases()
                    .held(id)
                    .map(|fence| Ok(crate::cluster::Route::Local(fence))),
                Err(error) => Some(Err(crate::cluster::RouteError::TakeOver(error.to_string()))),
            };
        }
        Some(cluster.route(id, 0).await)
    }

    /// Sends a command to a conversation's actor, loading the conversation if needed.
    async fn call<T>(
        &self,
        id: &str,
        command: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command,
    ) -> Result<T, RuntimeError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let mut command = Some(command(reply));
        // An actor that just unloaded itself refuses the command; load it again.
        for _ in 0..CALL_ATTEMPTS {
            let handle = self.actor(id).await?;
            match handle.send(command.take().expect("command")).await {
                Ok(()) => return answer.await.map_err(|_| self.unanswered(id)),
                Err(returned) => command = Some(returned),
            }
        }
        Err(RuntimeError::Unavailable(
            "the conversation is being loaded and unloaded too often; retry shortly".to_owned(),
        ))
    }

    /// Why an actor stopped without answering a command it was given: the conversation was
    /// deleted by the command before it (404), or the service is stopping.
    fn unanswered(&self, id: &str) -> RuntimeError {
        if self
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            RuntimeError::ShuttingDown
        } else if !self.shared.store.exists(id) {
            RuntimeError::NotFound(format!("conversation {id}"))
        } else {
            RuntimeError::Unavailable("the conversation stopped; retry shortly".to_owned())
        }
    }

    /// The actor of a conversation, loaded if it is not live. A full registry first asks the
    /// least recently used idle conversation to leave memory, and waits (briefly) for it.
    async fn actor(&self, id: &str) -> Result<ActorHandle, RuntimeError> {
        // In cluster mode a conversation is loaded only under its lease.
        if self.shared.cluster().is_some() && self.shared.store.exists(id) {
            self.shared.claim(id, 0).await?;
        }
        match self.load_actor(id).await {
            Err(RuntimeError::EpochBehind(epoch)) => {
                if let Some(cluster) = self.shared.cluster() {
                    cluster.leases().release(id).await;
                }
                self.shared.claim(id, epoch).await?;
                self.load_actor(id).await
            }
            loaded => loaded,
        }
    }

    async fn load_actor(&self, id: &str) -> Result<ActorHandle, RuntimeError> {
        self.in_registry(|shared, actors| {
            if let Some(handle) = actors.get(id)
                && !handle.is_closed()
            {
                handle.touch();
                return Ok(Some(handle.clone()));
            }
            // Only a conversation that is not live costs a look at the disk.
            if !shared.store.exists(id) {
                return Err(RuntimeError::NotFound(format!("conversation {id}")));
            }
            if !shared.make_room(actors)? {
                return Ok(None);
            }
            let handle = actor::load(shared.clone(), id)?;
            actors.insert(id.to_owned(), handle.clone());
            Ok(Some(handle))
        })
        .await
    }

    /// Takes a place in the registry for a conversation about to be created.
    async fn reserve_slot(&self) -> Result<Reservation, RuntimeError> {
        self.in_registry(|shared, actors| {
            if !shared.make_room(actors)? {
                return Ok(None);
            }
            shared
                .reserved
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(Reservation(shared.clone())))
        })
        .await
    }

    /// Runs `attempt` under the registry's lock until it is done (`Some`), waiting for a slot
    /// to come free in between, at most [`ROOM_WAIT`]: then the answer is 503.
    async fn in_registry<T>(
        &self,
        mut attempt: impl FnMut(
            &Arc<Shared>,
            &mut HashMap<String, ActorHandle>,
        ) -> Result<Option<T>, RuntimeError>,
    ) -> Result<T, RuntimeError> {
        let deadline = tokio::time::Instant::now() + ROOM_WAIT;
        loop {
            // Listening before looking: a slot freed in between still wakes this wait.
            let freed = self.shared.slot_freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            {
                let mut actors = self.shared.actors.lock().await;
                if let Some(done) = attempt(&self.shared, &mut actors)? {
                    return Ok(done);
                }
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(self.shared.full());
            }
        }
    }

    async fn stored_conversation(&self, id: &str) -> Result<Conversation, RuntimeError> {
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        match self.shared.index.get(id).await? {
            Some(conversation) => Ok(conversation),
            None => Ok(self.view(id).await?.conversation),
        }
    }

    fn check_model(&self, model: &str) -> Result<(), RuntimeError> {
        let config = &self.shared.config;
        if config.model(model).is_none() {
            return Err(RuntimeError::ModelUnavailable(format!(
                "model `{model}` is not configured; configured models: {}",
                config.models.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(())
    }

    fn refuse_when_stopping(&self) -> Result<(), RuntimeError> {
        if self
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(RuntimeError::ShuttingDown);
        }
        Ok(())
    }
}

/// Runs background index jobs one after another until the runtime is dropped.
async fn run_index_jobs(
    index: Index,
    mut jobs: tokio::sync::mpsc::UnboundedReceiver<IndexJob>,
    pending: Arc<std::sync::atomic::AtomicUsize>,
) {
    while let Some(job) = jobs.recv().await {
        // Counted down when this iteration ends, whatever the job was.
        let _done = PendingJob(&pending);
        let (result, what, conversation_id) = match job {
            IndexJob::CopySearch {
                from,
                to,
                below_seq,
                root_len,
            } => (
                copy_search_rows(&index, &from, &to, below_seq, root_len).await,
                format!("copying the search rows of {from} to its fork {to}"),
                to,
            ),
            IndexJob::SearchedThrough {
                conversation_id,
                root_len,
            } => {
                let note = IndexUpdate::SearchedThrough {
                    conversation_id: &conversation_id,
                    root_len,
                };
                (
                    index.apply(std::slice::from_ref(&note)).await,
                    format!("noting how far search covers {conversation_id}"),
                    conversation_id.clone(),
                )
            }
            IndexJob::SearchText {
                conversation_id,
                seq,
                text,
            } => {
                let row = IndexUpdate::SearchText {
                    conversation_id: &conversation_id,
                    seq,
                    text: &text,
                };
                (
                    index.apply(std::slice::from_ref(&row)).await,
                    format!("the search row of message {seq} of {conversation_id}"),
                    conversation_id.clone(),
                )
            }
            IndexJob::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        if let Err(error) = result {
            index_failed(&index, &error, &what, &[&conversation_id]).await;
        }
    }
}

/// A failed index write is logged, not fatal: the files are already safe, and the index is
/// marked so that the next start reconciles it with them.
async fn index_failed(index: &Index, error: &IndexError, what: &str, conversation_ids: &[&str]) {
    tracing::error!(%error, what, "index update failed; the next start will re-index the conversation");
    index.mark_out_of_date(conversation_ids).await;
}

/// Copies a fork's search rows in slices of a few hundred messages, one transaction each, so
/// the index's single writer is never held for long: turns and other forks go in between.
async fn copy_search_rows(
    index: &Index,
    from: &str,
    to: &str,
    end: u64,
    root_len: u64,
) -> Result<(), IndexError> {
    const SLICE: u64 = 256;
    let mut start = 1;
    while start < end {
        let below = (start + SLICE).min(end);
        let copy = IndexUpdate::CopySearch {
            from_conversation_id: from,
            to_conversation_id: to,
            from_seq: start,
            below_seq: below,
        };
        index.apply(std::slice::from_ref(&copy)).await?;
        start = below;
    }
    let copied = IndexUpdate::SearchedThrough {
        conversation_id: to,
        root_len,
    };
    index.apply(std::slice::from_ref(&copied)).await
}

impl Shared {
    /// Queues index work to run after the current answer.
    pub fn index_later(&self, job: IndexJob) {
        self.index_jobs_pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.index_jobs.send(job).is_err() {
            self.index_jobs_pending
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// After an actor has stopped and its memory is dropped: when no conversation is live any
    /// more, the service hands what it freed back to the system, so a service that was busy
    /// idles as small as one that was not (the allocator and SQLite otherwise keep their
    /// high-water marks). Not done while conversations are live: they would take it again.
    pub async fn after_unload(&self) {
        if !self.actors.lock().await.is_empty() {
            return;
        }
        if let Err(error) = self.index.release_memory().await {
            tracing::debug!(%error, "could not shrink the index's caches");
        }
        let _ = tokio::task::spawn_blocking(return_freed_memory).await;
    }

    /// Forgets an actor that has stopped, unless a newer one already took its place.
    pub async fn forget_actor(&self, id: &str, generation: u64) {
        let mut actors = self.actors.lock().await;
        if actors
            .get(id)
            .is_some_and(|handle| handle.generation == generation)
        {
            actors.remove(id);
            self.slot_freed.notify_waiters();
            // Out of memory, out of this instance's hands: any instance may take it now.
            if let Some(cluster) = self.cluster() {
                cluster.leases().release(id).await;
            }
        }
    }

    /// Cluster mode: this instance's place in the cluster.
    pub fn cluster(&self) -> Option<&crate::cluster::Cluster> {
        self.settings.cluster.as_ref()
    }

    /// Cluster mode: takes (or keeps) the lease of a conversation for this instance, whose
    /// files carry epochs up to `at_least`; its epoch, to stamp records with. Embedded: `None`.
    pub async fn claim(&self, id: &str, at_least: u64) -> Result<Option<u64>, RuntimeError> {
        let Some(cluster) = self.cluster() else {
            return Ok(None);
        };
        match cluster.route(id, at_least).await {
            Ok(crate::cluster::Route::Local(fence)) => Ok(Some(fence.epoch)),
            Ok(crate::cluster::Route::Remote(addr)) => Err(RuntimeError::Unavailable(format!(
                "conversation {id} is owned by the instance at {addr} now; retry"
            ))),
            Err(error) => Err(RuntimeError::Unavailable(error.to_string())),
        }
    }

    /// The write fence of a conversation (cluster mode), or `None` when embedded.
    pub fn fence(
        &self,
        id: &str,
    ) -> Result<Option<Arc<dyn crate::store::WriteFence>>, RuntimeError> {
        let Some(cluster) = self.cluster() else {
            return Ok(None);
        };
        cluster.fence(id).map(Some).ok_or_else(|| {
            RuntimeError::Unavailable(format!(
                "this instance does not own conversation {id} (its lease ended); retry"
            ))
        })
    }

    /// Publishes a list-level event (`/api/events`); in cluster mode every other instance's
    /// sidebars get it too.
    pub fn publish_list(&self, kind: &'static str, data: &Value) {
        self.list_events.publish(kind, data);
        if let Some(cluster) = self.cluster() {
            cluster.notify(kind, data);
        }
    }

    /// Whether the registry has room for one more conversation now. When it is full, the
    /// least recently used conversation that could leave memory is asked to (it answers by
    /// leaving, which frees a slot, or by staying); the caller then waits for a slot. 503
    /// when no conversation can leave: every one is busy or followed.
    fn make_room(&self, actors: &mut HashMap<String, ActorHandle>) -> Result<bool, RuntimeError> {
        // Actors that stopped (deleted, unloaded) and are not forgotten yet hold no place.
        actors.retain(|_, handle| !handle.is_closed());
        let taken = actors.len() + self.reserved.load(std::sync::atomic::Ordering::SeqCst);
        if taken < self.settings.max_live_conversations {
            return Ok(true);
        }
        let mut idle: Vec<(u64, &ActorHandle)> = actors
            .values()
            .filter_map(|handle| Some((handle.idle_since()?, handle)))
            .collect();
        idle.sort_unstable_by_key(|(last_used, _)| *last_used);
        if idle.into_iter().any(|(_, handle)| handle.ask_to_unload()) {
            return Ok(false);
        }
        // Others may have asked already: their answers come.
        if actors.values().any(ActorHandle::unload_asked) {
            return Ok(false);
        }
        Err(self.full())
    }

    /// 503 for a registry whose every place is taken by a conversation that cannot leave.
    fn full(&self) -> RuntimeError {
        RuntimeError::Unavailable(format!(
            "every place for a live conversation is taken ({} at most, all busy or followed); retry shortly",
            self.settings.max_live_conversations
        ))
    }

    /// Applies index updates; a failure is logged, not fatal: the files are already safe and
    /// the next start reconciles the index with them.
    pub async fn index_quietly(&self, updates: &[IndexUpdate<'_>]) {
        if let Err(error) = self.index.apply(updates).await {
            let mut ids: Vec<&str> = updates.iter().map(IndexUpdate::conversation_id).collect();
            ids.dedup();
            index_failed(&self.index, &error, "live update", &ids).await;
        }
    }
}

/// Returns the allocator's free pages to the system. glibc keeps freed memory in its arenas
/// (one per thread that allocated) and gives it back only at the top of the heap; after a busy
/// hour that can be most of the process's memory.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it may be called at any
    // time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many times a command is offered to a conversation's actor: one that unloads itself
/// between being found and being sent to refuses it, and the next attempt loads it again.
const CALL_ATTEMPTS: usize = 5;

/// How long a request waits for a place in a full registry before it is answered 503.
const ROOM_WAIT: Duration = Duration::from_secs(2);

/// A place in the registry taken for a conversation being created; given back when dropped
/// (by then the conversation is in the registry, or nothing was created).
struct Reservation(Arc<Shared>);

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0
            .reserved
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.slot_freed.notify_waiters();
    }
}

/// Counts a background index job as finished when dropped.
struct PendingJob<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for PendingJob<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A claimed idempotency key, released when dropped.
struct InFlight {
    shared: Arc<Shared>,
    key: String,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl InFlight {
    /// Waits until no other request with this key is in progress, then holds the key.
    async fn claim(shared: &Arc<Shared>, key: &str) -> InFlight {
        let lock = shared
            .creating
            .lock()
            .expect("creating lock")
            .entry(key.to_owned())
            .or_default()
            .clone();
        InFlight {
            shared: shared.clone(),
            key: key.to_owned(),
            _turn: lock.lock_owned().await,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut creating = self.shared.creating.lock().expect("creating lock");
        // The map and this guard hold the lock; anyone more is waiting for it.
        if creating
            .get(&self.key)
            .is_some_and(|lock| Arc::strong_count(lock) <= 2)
        {
            creating.remove(&self.key);
        }
    }
}

/// A conversation opens only where its working directory and agent exist (SPEC §9.2–9.3); its
/// model is checked only when a turn would run, so the user can still switch it.
fn check_openable(config: &Config, conversation: &Conversation) -> Result<(), RuntimeError> {
    if !Path::new(&conversation.cwd).is_dir() {
        return Err(RuntimeError::CwdMissing(conversation.cwd.clone()));
    }
    if config.agent(&conversation.agent).is_none() {
        return Err(RuntimeError::AgentUnavailable(format!(
            "this conversation uses agent `{}`, which is not in the config",
            conversation.agent
        )));
    }
    Ok(())
}

/// A message needs text (or at least an image).
fn validate_text(text: &str, images: &[Image]) -> Result<(), RuntimeError> {
    if text.trim().is_empty() && images.is_empty() {
        return Err(RuntimeError::Invalid("text must not be empty".to_owned()));
    }
    for image in images {
        if !image.media_type.starts_with("image/") {
            return Err(RuntimeError::Invalid(format!(
                "images: media_type `{}` is not an image type",
                image.media_type
            )));
        }
        if image.data.is_none() == image.url.is_none() {
            return Err(RuntimeError::Invalid(
                "images: each image needs exactly one of `data` (base64) or `url`".to_owned(),
            ));
        }
        if let Some(data) = &image.data {
            use base64::Engine as _;
            if let Err(error) = base64::engine::general_purpose::STANDARD.decode(data) {
                return Err(RuntimeError::Invalid(format!(
                    "images: `data` is not valid base64 ({error})"
                )));
            }
        }
    }
    Ok(())
}

/// A working directory must be an absolute path to an existing directory.
fn checked_cwd(cwd: &str) -> Result<String, RuntimeError> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(RuntimeError::Invalid(format!(
            "cwd must be an absolute path, got `{cwd}`"
        )));
    }
    if !path.is_dir() {
        return Err(RuntimeError::CwdMissing(cwd.to_owned()));
    }
    Ok(cwd.to_owned())
}
