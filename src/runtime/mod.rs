//! The live part of the service: a registry of conversation actors (one task per live
//! conversation, the only writer of its files), the turn loop, and the event buses. HTTP
//! handlers call the functions of `Runtime`; they never touch files themselves.

pub mod actor;
pub mod agent_requests;
pub mod checkpointing;
pub mod collab;
pub mod compaction;
pub mod fork;
pub mod link;
pub mod pending;
pub mod prompt;
pub mod retry;
pub mod rules;
pub mod sandboxing;
pub mod title;
pub mod turn;
pub mod usage;

mod approval_operations;
pub mod approvals;
pub mod checkpoint_gc;
mod checkpoint_operations;
mod create;
mod error;
mod idempotency;
mod index_jobs;
mod key_claims;
mod leases;
mod operations;
mod registry;
mod validate;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::api::events::ListEvent;
pub use crate::api::requests::{ConversationPatch, NewConversation, NewMessage, PendingPatch};
pub use crate::api::responses::{CompactOutcome, ConversationView, ItemsPage};
use crate::bus::EventBus;
use crate::config::Config;
use crate::index::Index;
use crate::model::Models;
use crate::store::Store;
use crate::store::state::StoredAnswer;
use actor::ActorHandle;
pub use actor::{ForkOutcome, Subscription};
pub use error::RuntimeError;
use idempotency::InFlight;
pub use idempotency::{Answer, RequestKey};
pub use index_jobs::IndexJob;
use index_jobs::{JobQueue, index_failed, run_index_jobs};
use key_claims::{Claimed, claim_key};
pub use operations::{items_page, turns_page};
use validate::{check_openable, checked_cwd, validate_text};

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
    /// leaves, and when none can, the request is refused, to be retried (see `limits::caps`).
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
    /// The encodings the configured models count with (`Tokenizer::configured`), worked out
    /// once: every create, message and load makes sure they are built.
    pub tokenizers: Vec<crate::model::tokens::Tokenizer>,
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
    /// Index work done after the answer (a fork's search rows, a finished message's), in the
    /// order given (a fork of a fork copies search rows only after its source's own copy is
    /// done); bounded, see `index_later`.
    index_jobs: tokio::sync::mpsc::Sender<IndexJob>,
    /// Jobs queued and not finished yet, with when each was queued (shown by `/api/health`).
    index_queue: Arc<JobQueue>,
    /// Conversations whose index job was dropped on a full queue, already marked for repair.
    index_overflowed: Mutex<std::collections::HashSet<String>>,
    /// Sub-agents running now across every conversation, held under
    /// `subagents.max_running_total` (kept by the actors, see `count_running_subagents`).
    running_subagents: std::sync::atomic::AtomicUsize,
    /// Every pending and recently settled approval, by id (`GET /api/approvals`).
    pub approvals: approvals::ApprovalBook,
    /// The rules users remembered (`rules.jsonl` in the data directory).
    pub rules: Arc<rules::RuleStore>,
    /// The configured MCP servers, each started when an agent using it first runs.
    pub mcp: Arc<crate::mcp::McpHub>,
    /// Snapshots of working trees around tool calls (`None`: `tools.checkpoints = false`).
    pub checkpoints: Option<Arc<crate::checkpoints::Checkpoints>>,
    /// The service's own state (the data directory, the config), out of every tool's reach.
    pub protected: Arc<crate::sandbox::Protected>,
}

impl Runtime {
    pub fn new(
        store: Store,
        index: Index,
        config: Arc<Config>,
        settings: RuntimeSettings,
    ) -> Runtime {
        let models = Models::new(&config);
        // Nothing is stored or sent with a configured secret in it: the keys (by their
        // variables' values) and the credentials in a provider's URL.
        crate::redact::register_key_variables(
            config
                .providers
                .values()
                .filter_map(|provider| provider.api_key_env.clone()),
        );
        crate::redact::register_secrets(
            config
                .providers
                .values()
                .flat_map(|provider| crate::redact::url_secrets(&provider.base_url)),
        );
        // Credentials that go to MCP servers (headers, a child's environment) likewise.
        crate::redact::register_key_variables(crate::mcp::secret_variables(&config.mcp));
        crate::redact::register_secrets(crate::mcp::secret_header_values(&config.mcp));
        let mcp = Arc::new(crate::mcp::McpHub::new(
            &config.mcp,
            settings.process_records.clone().map(|records| {
                let recorder: crate::mcp::ProcessRecorder = Arc::new(move |pgid, what: &str| {
                    records
                        .record_running(pgid, what)
                        .map(|file| Box::new(file) as crate::mcp::ProcessRecord)
                });
                recorder
            }),
        ));
        let rules = Arc::new(rules::RuleStore::open(store.root()));
        let checkpoints = config.tools.checkpoints.then(|| {
            let checkpoints = crate::checkpoints::Checkpoints::open(
                store.root(),
                crate::checkpoints::Limits {
                    max_file_bytes: config.tools.checkpoint_max_file_bytes,
                    max_snapshot_bytes: config.tools.checkpoint_max_snapshot_bytes,
                    max_files: config.tools.checkpoint_max_files,
                },
            );
            // Before any turn can run: a restore a crash cut short is finished first.
            checkpoints.recover(&|id| store.exists(id), &|| {
                checkpoint_gc::known_cwds(&store)
            });
            Arc::new(checkpoints)
        });
        // Several instances share one data directory in cluster mode, and one cannot tell
        // which snapshots another's running calls still need: `openvaala gc` there.
        if let Some(checkpoints) = &checkpoints
            && config.tools.checkpoint_gc_interval_s > 0
            && settings.cluster.is_none()
        {
            checkpoint_gc::spawn_periodic(
                store.clone(),
                Arc::downgrade(checkpoints),
                Duration::from_secs(config.tools.checkpoint_gc_interval_s),
            );
        }
        let protected = Arc::new(crate::sandbox::Protected::new(
            store.root(),
            config.source.as_deref(),
        ));
        let (index_jobs, jobs) = tokio::sync::mpsc::channel(index_jobs::QUEUE_CAPACITY);
        let index_queue = Arc::new(JobQueue::default());
        tokio::spawn(run_index_jobs(index.clone(), jobs, index_queue.clone()));
        Runtime {
            shared: Arc::new(Shared {
                store,
                index,
                tokenizers: crate::model::tokens::Tokenizer::configured(&config),
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
                index_queue,
                index_overflowed: Mutex::new(std::collections::HashSet::new()),
                running_subagents: std::sync::atomic::AtomicUsize::new(0),
                approvals: approvals::ApprovalBook::default(),
                rules,
                mcp,
                checkpoints,
                protected,
            }),
        }
    }

    /// Background index jobs not finished yet (a fork's search rows being copied).
    pub fn index_jobs_pending(&self) -> usize {
        self.shared.index_queue.pending()
    }

    /// How long the oldest background index job not finished yet has waited (zero when none
    /// waits): how far search lags behind what was answered.
    pub fn index_oldest_job_age(&self) -> Duration {
        self.shared.index_queue.oldest_age()
    }

    /// Sub-agents running now across every conversation.
    pub fn running_subagents(&self) -> usize {
        self.shared
            .running_subagents
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

    /// Every configured MCP server's state (`GET /api/mcp`).
    pub fn mcp_status(&self) -> Vec<crate::mcp::ServerStatus> {
        self.shared.mcp.status()
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
}

impl Shared {
    /// Publishes a list-level event (`/api/events`); in cluster mode every other instance's
    /// sidebars get it too.
    pub fn publish_list(&self, event: &ListEvent) {
        if event.conversation_id().is_some_and(|id| self.forfeited(id)) {
            // This instance lost the conversation: its new owner tells the list.
            return;
        }
        self.list_events.publish(event);
        if let Some(cluster) = self.cluster() {
            cluster.notify(event);
        }
    }
}
