//! `Runtime`, the handle HTTP handlers call: how it is put together, and what it tells about
//! itself. Its operations live in the files named after them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::index_jobs::run_index_jobs;
use super::index_queue::{JobQueue, QUEUE_CAPACITY};
use super::registry::Registry;
use super::settings::RuntimeSettings;
use super::shared::Shared;
use super::{approvals, checkpoint_gc, rules};
use crate::bus::EventBus;
use crate::config::Config;
use crate::index::Index;
use crate::model::Models;
use crate::store::Store;

/// A cheap `Clone` handle on the runtime.
#[derive(Clone)]
pub struct Runtime {
    pub(super) shared: Arc<Shared>,
    /// The live conversations' actors.
    pub(super) registry: Arc<Registry>,
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
        let (index_jobs, jobs) = tokio::sync::mpsc::channel(QUEUE_CAPACITY);
        let index_queue = Arc::new(JobQueue::default());
        tokio::spawn(run_index_jobs(index.clone(), jobs, index_queue.clone()));
        let outbox = settings
            .outbox
            .clone()
            .unwrap_or_else(|| Arc::new(crate::hooks::Outbox::in_memory()));
        let hooks = Arc::new(crate::hooks::Hooks::new(&config.hooks, outbox));
        let list_events = EventBus::new();
        let processes = {
            let events = list_events.clone();
            let announce: crate::tools::background::Announcer =
                Arc::new(move |process, started| {
                    let process = process.clone();
                    events.publish(&if started {
                        crate::api::events::ListEvent::ProcessStarted { process }
                    } else {
                        crate::api::events::ListEvent::ProcessEnded { process }
                    });
                });
            Arc::new(crate::tools::background::Processes::new(
                settings.process_records.clone(),
                store.conversations_dir(),
                config.tools.max_background_total,
                Some(announce),
            ))
        };
        let shared = Arc::new(Shared {
            hooks,
            processes,
            list_watch: std::sync::OnceLock::new(),
            store,
            index,
            tokenizers: crate::model::tokens::Tokenizer::configured(&config),
            config,
            models,
            settings,
            list_events,
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
        });
        Runtime {
            registry: Arc::new(Registry::new(shared.clone())),
            shared,
        }
    }

    /// Background index jobs not finished yet (a fork's search rows being copied).
    pub fn index_jobs_pending(&self) -> usize {
        self.shared.index_queue.pending()
    }

    /// Conversations whose index updates failed and that wait to be re-indexed from their
    /// files (or are being re-indexed now).
    pub fn index_repairs_pending(&self) -> usize {
        self.shared.index.repairs_pending()
    }

    /// How long the oldest background index job not finished yet has waited (zero when none
    /// waits): how far search lags behind what was answered.
    pub fn index_oldest_job_age(&self) -> Duration {
        self.shared.index_queue.oldest_age()
    }

    /// The service's state for the metrics' gauges.
    pub async fn gauges(&self) -> crate::telemetry::metrics::Gauges {
        use crate::mcp::ServerState;
        let mcp = self.mcp_status();
        let states = [
            (ServerState::NotStarted, "not_started"),
            (ServerState::Starting, "starting"),
            (ServerState::Running, "running"),
            (ServerState::Failed, "failed"),
            (ServerState::Stopped, "stopped"),
        ];
        crate::telemetry::metrics::Gauges {
            approvals_pending: self.shared.approvals.pending(),
            live_conversations: self.live_conversations().await,
            index_queue_depth: self.index_jobs_pending(),
            index_queue_oldest: self.index_oldest_job_age(),
            mcp_servers: states
                .iter()
                .map(|(state, name)| (*name, mcp.iter().filter(|s| s.state == *state).count()))
                .collect(),
            background_processes: self.shared.processes.running(),
        }
    }

    /// Sub-agents running now across every conversation.
    pub fn running_subagents(&self) -> usize {
        self.shared
            .running_subagents
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many conversations are loaded in memory now (the rest are only on disk).
    pub async fn live_conversations(&self) -> usize {
        self.registry.live().await
    }

    /// The most conversations held in memory at once.
    pub fn max_live_conversations(&self) -> usize {
        self.shared.settings.max_live_conversations
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// `GET /api/hooks`: the config's hooks, and the last failure of each.
    pub fn hooks(&self) -> crate::api::responses::HookList {
        use crate::api::responses::{HookFailure, HookInfo};
        use crate::config::HookAction;
        let hooks = &self.shared.hooks;
        let listed = hooks
            .list()
            .iter()
            .map(|hook| {
                let key = hook.key();
                let (command, url, signed) = match &hook.action {
                    HookAction::Command(command) => (Some(command.clone()), None, false),
                    HookAction::Url { url, secret, .. } => {
                        (None, Some(url.clone()), secret.is_some())
                    }
                };
                HookInfo {
                    event: hook.event.name().to_owned(),
                    matcher: hook.matcher.as_ref().map(|matcher| match &matcher.command {
                        Some(command) => format!("{}({command})", matcher.tool),
                        None => matcher.tool.clone(),
                    }),
                    command,
                    url,
                    signed,
                    timeout_s: hook.timeout.as_secs(),
                    on_error: hook.on_error.name().to_owned(),
                    last_error: hooks
                        .status
                        .last_error(&key)
                        .map(|(at, message)| HookFailure { at, message }),
                    key,
                }
            })
            .collect();
        crate::api::responses::HookList { hooks: listed }
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

    /// The list events this instance publishes that may call for a push notification (an
    /// approval waits, a conversation's status changed), from now on; `None` if already taken.
    pub fn watch_list_events(
        &self,
    ) -> Option<tokio::sync::mpsc::Receiver<crate::api::events::ListEvent>> {
        let (sender, receiver) = tokio::sync::mpsc::channel(256);
        self.shared.list_watch.set(sender).ok()?;
        Some(receiver)
    }
}
