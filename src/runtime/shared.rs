//! What conversation actors and the runtime's operations share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::approvals;
use super::index_queue::{IndexJob, JobQueue};
use super::rules;
use super::settings::RuntimeSettings;
use crate::api::events::ListEvent;
use crate::bus::EventBus;
use crate::config::Config;
use crate::index::Index;
use crate::model::Models;
use crate::store::Store;
use crate::store::state::StoredAnswer;

/// What conversation actors and the runtime's operations share: storage, configuration,
/// models, tools, queues and counters. The registry that owns the actors is not in it
/// (`registry::Registry`): an actor reaches that only through `actor::Membership`.
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
    /// Idempotency keys of creates in progress, so two concurrent retries create one thing:
    /// the second waits for the first and then answers what it answered.
    pub(super) creating: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) stopping: std::sync::atomic::AtomicBool,
    /// Answers to create requests whose conversation the index missed (its write failed), by
    /// idempotency key, until a restart reconciles the index.
    pub(super) unindexed_answers: Mutex<HashMap<String, StoredAnswer>>,
    /// Index work done after the answer (a fork's search rows, a finished message's), in the
    /// order given (a fork of a fork copies search rows only after its source's own copy is
    /// done); bounded, see `index_later`.
    pub(super) index_jobs: tokio::sync::mpsc::Sender<IndexJob>,
    /// Jobs queued and not finished yet, with when each was queued (shown by `/api/health`).
    pub(super) index_queue: Arc<JobQueue>,
    /// Conversations whose index job was dropped on a full queue, already marked for repair.
    pub(super) index_overflowed: Mutex<std::collections::HashSet<String>>,
    /// Sub-agents running now across every conversation, held under
    /// `subagents.max_running_total` (kept by the actors, see `count_running_subagents`).
    pub(super) running_subagents: std::sync::atomic::AtomicUsize,
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
    /// The config's hooks, and the last failure of each (`GET /api/hooks`).
    pub hooks: Arc<crate::hooks::Hooks>,
    /// The background processes of every conversation (`shell` with `background`).
    pub processes: Arc<crate::tools::background::Processes>,
    /// Where this instance's own list events that may call for a push notification go (an
    /// approval waits, a conversation's status changed), once the service watches them.
    pub(super) list_watch: std::sync::OnceLock<tokio::sync::mpsc::Sender<ListEvent>>,
}

impl Shared {
    /// Tells the `conversation_created` hooks of a new conversation (or fork); a command hook
    /// runs under its agent's sandbox.
    pub fn notify_created(
        &self,
        agents: &crate::agents::Agents,
        conversation: &crate::domain::Conversation,
    ) {
        let event = crate::config::HookEvent::ConversationCreated;
        if !self.hooks.any(event) {
            return;
        }
        let Some(agent) = agents.get(&conversation.agent) else {
            return;
        };
        let sandbox = super::sandboxing::agent_policy(agent, &self.protected);
        let subject = crate::hooks::Subject {
            conversation_id: conversation.id.clone(),
            session_id: conversation.root_session_id.clone(),
            agent: conversation.agent.clone(),
            turn_id: None,
            cwd: conversation.cwd.clone().into(),
        };
        let fields = serde_json::json!({
            "title": conversation.title,
            "model": conversation.model,
            "forked_from": conversation.forked_from,
        });
        self.hooks.notify(event, subject, sandbox, fields);
    }

    /// Publishes a list-level event (`/api/events`); in cluster mode every other instance's
    /// sidebars get it too.
    pub fn publish_list(&self, event: &ListEvent) {
        if event.conversation_id().is_some_and(|id| self.forfeited(id)) {
            // This instance lost the conversation: its new owner tells the list.
            return;
        }
        self.list_events.publish(event);
        // Only the instance an event happens on sees it here: a cluster pushes it once.
        if let Some(watch) = self.list_watch.get()
            && matches!(
                event,
                ListEvent::ApprovalRequested { .. }
                    | ListEvent::ConversationCreated { .. }
                    | ListEvent::ConversationUpdated { .. }
            )
        {
            // Full: the push notifications lag far behind; this one is dropped.
            let _ = watch.try_send(event.clone());
        }
        if let Some(cluster) = self.cluster() {
            cluster.notify(event);
        }
    }
}
