//! The conversation actor (invariant 2, one writer per conversation): one task owns a
//! conversation's files, its state
//! and the running turns of all its agents (the root agent and its sub-agents). Commands arrive
//! on a channel and are handled one at a time, so every race (a message arriving as a turn
//! ends, a delete during a send, a sub-agent's report as its parent is interrupted) is settled
//! by their order here. Every change is appended and fsynced, then indexed, then published.
//!
//! The actor's work is split by concern: `session.rs` (one agent's live state), `turns.rs`
//! (starting, feeding and ending turns), `messages.rs` (sending and waiting messages),
//! `subagents.rs` (spawning sub-agents, their reports, the collaboration tools), `history.rs`
//! (fork and rewind), `compacting.rs` (manual compaction), `subscribe.rs` (snapshots) and
//! `checkpoints.rs` (the file changes of its tool calls, restoring them).

mod approvals;
mod checkpoints;
mod compacting;
mod from_turn;
mod handle;
mod history;
mod leaving;
mod membership;
mod messages;
mod reads;
mod session;
mod spending;
mod stored;
mod subagents;
mod subscribe;
mod titling;
mod turn_end;
mod turns;
mod waiting;

use crate::agents::Agents;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::link::FromTurn;
use super::{Answer, ConversationPatch, RequestKey, RuntimeError, Shared};
use crate::api::events::{ConversationEvent, ListEvent};
use crate::bus::EventBus;
use crate::domain::{Conversation, Item, Usage};
use crate::index::IndexUpdate;
use crate::store::records::{ConversationChanges, MetaRecord, SessionRecord};
use crate::store::state::ConversationState;
use crate::store::{JsonlWriter, StoreError};
use session::{InterruptCause, SessionRun};

use crate::runtime::index_jobs::index_failed;
use crate::runtime::validate::check_openable;
pub use handle::{ActorHandle, Command, ForkOutcome, Subscription, TurnFileCalls};
use handle::{ActorStatus, USE_CLOCK};
pub use membership::{Boxed, LockedRegistry, Membership};
pub use stored::{read_state, read_view};

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Commands queued for one actor before senders wait.
pub(super) const COMMAND_CAPACITY: usize = 64;

/// Loads a stored conversation and starts its actor.
pub fn load(
    shared: Arc<Shared>,
    membership: Arc<dyn Membership>,
    id: &str,
) -> Result<ActorHandle, RuntimeError> {
    let fence = shared.fence(id)?;
    // Cluster mode: only the lines whose writes were accepted count.
    let acceptance = fence
        .as_ref()
        .map(|fence| fence.acceptance())
        .unwrap_or_default();
    let log = shared.store.read_metadata(id, &acceptance)?;
    // Cluster mode: the lease must be newer than anything in the files (a rebuilt database
    // may have forgotten how far epochs went).
    if let Some(fence) = &fence
        && log.epoch >= fence.epoch()
    {
        return Err(RuntimeError::EpochBehind(log.epoch));
    }
    let state = ConversationState::from_records(&log.records).map_err(|error| {
        RuntimeError::Damaged(format!("conversation {id} cannot be read: {error}"))
    })?;
    let mut histories = HashMap::new();
    for session in &state.sessions {
        histories.insert(
            session.id.clone(),
            shared.store.read_items(id, &session.id, &acceptance)?,
        );
    }
    spawn(shared, membership, state, histories, None)
}

/// Starts the actor of a conversation whose state is known, with each session's stored items.
/// `start_turn` names a root turn that is already stored as started (the first message of a
/// new conversation) and must now run.
pub fn spawn(
    shared: Arc<Shared>,
    membership: Arc<dyn Membership>,
    state: ConversationState,
    mut histories: HashMap<String, Vec<Item>>,
    start_turn: Option<String>,
) -> Result<ActorHandle, RuntimeError> {
    let id = state.conversation.id.clone();
    let fence = shared.fence(&id)?;
    // What its MCP servers are given is never shown, whatever prints it.
    crate::mcp::register_secrets(state.mcp.values());
    let mut meta = shared.store.open_metadata_writer(&id)?;
    meta.set_fence(fence.clone());
    let (sender, commands) = mpsc::channel(COMMAND_CAPACITY);
    let (turn_sender, turn_messages) = mpsc::unbounded_channel();
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    let bus = EventBus::new();
    let status = Arc::new(ActorStatus {
        last_used: AtomicU64::new(USE_CLOCK.fetch_add(1, Ordering::Relaxed)),
        quiet: AtomicBool::new(false),
        unload_asked: AtomicBool::new(false),
        bus: bus.clone(),
    });
    let sessions = state
        .sessions
        .iter()
        .map(|session| {
            let history = histories.remove(&session.id).unwrap_or_default();
            (
                session.id.clone(),
                SessionRun::new(session.id.clone(), history),
            )
        })
        .collect();
    let agents = Arc::new(Agents::discover(
        shared.config.clone(),
        std::path::Path::new(&state.conversation.cwd),
    ));
    let mut actor = ConversationActor {
        agents,
        compacting: None,
        shared,
        membership,
        id,
        generation,
        state,
        meta,
        fence,
        session_writers: HashMap::new(),
        sessions,
        bus,
        status: status.clone(),
        searched_through: 0,
        pending_answers: HashMap::new(),
        turn_sender,
        trace_parent: None,
        turn_messages,
        shutdown_waiters: Vec::new(),
        stopping: false,
        session_changes: watch::Sender::new(0),
        subagents_counted: 0,
        approvals: Vec::new(),
        closed_on_load: Vec::new(),
        unstored_ends: Vec::new(),
    };
    for session in &mut actor.state.sessions {
        session.last_message = actor
            .sessions
            .get(&session.id)
            .and_then(SessionRun::last_message);
    }
    let session_ids: Vec<String> = actor.sessions.keys().cloned().collect();
    for session_id in &session_ids {
        actor.reset_meter(session_id);
    }
    actor.closed_on_load = actor.close_stale_turns(start_turn.as_deref())?;
    if let Some(turn_id) = start_turn {
        let root = actor.root_id().to_owned();
        actor.publish_first_turn(&root, &turn_id);
        actor.run_turn(&root, &turn_id);
    }
    actor.note_quiet();
    let membership = actor.membership.clone();
    tokio::spawn(async move {
        actor.run(commands).await;
        membership.after_unload().await;
    });
    Ok(ActorHandle {
        sender,
        generation,
        status,
    })
}

struct ConversationActor {
    shared: Arc<Shared>,
    /// The registry that started it, which it leaves when it stops.
    membership: Arc<dyn Membership>,
    id: String,
    generation: u64,
    state: ConversationState,
    meta: JsonlWriter,
    /// Cluster mode: the lease every write goes under (see `store::WriteFence`).
    fence: Option<Arc<dyn crate::store::WriteFence>>,
    session_writers: HashMap<String, JsonlWriter>,
    /// The live part of every session (root and sub-agents), by session id.
    sessions: HashMap<String, SessionRun>,
    bus: EventBus,
    /// What the registry reads of this actor (see `ActorStatus`).
    status: Arc<ActorStatus>,
    /// How far in the root session's file search was last noted to reach.
    searched_through: u64,
    /// Answers to `Idempotency-Key`s of messages that went to wait (in memory, like them),
    /// by key, with the hash of the body they came with.
    pending_answers: HashMap<String, (Answer, RequestKey)>,
    compacting: Option<waiting::Compacting>,
    turn_sender: mpsc::UnboundedSender<FromTurn>,
    /// While a turn's collaboration call is handled: its trace, so a sub-agent's turn it
    /// starts is traced as its child.
    trace_parent: Option<opentelemetry::Context>,
    turn_messages: mpsc::UnboundedReceiver<FromTurn>,
    shutdown_waiters: Vec<oneshot::Sender<()>>,
    stopping: bool,
    /// Bumped whenever a session's status changes: `wait_agents` calls watch it.
    session_changes: watch::Sender<u64>,
    /// Sub-agents of this conversation counted in `Shared::running_subagents` (see
    /// `count_running_subagents`).
    subagents_counted: usize,
    /// Tool calls waiting for a user's answer, oldest first.
    approvals: Vec<waiting::WaitingApproval>,
    /// Turns a crash (or a lost owner) left running, closed as this actor loaded: the index
    /// and the list learn of it when the actor starts.
    closed_on_load: Vec<String>,
    /// Turn ends this actor took but could not store (a full disk): stored ahead of the next
    /// record it stores, so the files do not keep those turns open.
    unstored_ends: Vec<MetaRecord>,
    /// The agents its working directory sees (the config's and the repository's files):
    /// read when it loads, when a turn starts and when its `cwd` changes.
    agents: Arc<Agents>,
}

/// How often an actor tries again to store turn ends it could not store.
const STORE_ENDS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl ConversationActor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let closed = std::mem::take(&mut self.closed_on_load);
        // Cluster mode: the shared index may lag the files (a stale owner's updates are not
        // written, a new owner's may have failed): a conversation taken here is indexed as
        // its files say.
        if !closed.is_empty() || self.shared.cluster().is_some() {
            self.index_closed_turns(&closed).await;
        }
        if !closed.is_empty() && self.shared.cluster().is_some() {
            // A cut owner's last writes may count (a commit whose answer it never heard)
            // without their search rows: the conversation is re-indexed from its files.
            self.mark_index_out_of_date();
        }
        let idle = self.shared.settings.idle_unload;
        let mut idle_deadline = Instant::now() + idle;
        let mut store_ends_at = Instant::now();
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { break };
                    if let Command::Unload = command {
                        // Asked by a full registry: leave if nothing keeps the conversation
                        // here; either way the registry may look again.
                        self.status.unload_asked.store(false, Ordering::Relaxed);
                        let leaving = self.may_leave()
                            && self.retire(&mut commands).await;
                        self.membership.slot_may_be_free();
                        if leaving {
                            break;
                        }
                        continue;
                    }
                    idle_deadline = Instant::now() + idle;
                    if self.handle(command).await == Flow::Stop {
                        break;
                    }
                }
                Some(message) = self.turn_messages.recv() => {
                    idle_deadline = Instant::now() + idle;
                    self.on_turn(message).await;
                    if self.stopping && !self.any_running() {
                        break;
                    }
                }
                () = tokio::time::sleep_until(store_ends_at), if !self.unstored_ends.is_empty() => {
                    store_ends_at = Instant::now() + STORE_ENDS_EVERY;
                    self.store_unstored_ends();
                }
                () = tokio::time::sleep_until(idle_deadline) => {
                    idle_deadline = Instant::now() + idle;
                    if self.may_leave() && self.retire(&mut commands).await
                    {
                        break;
                    }
                }
            }
            self.note_quiet();
            self.count_running_subagents();
            if self.lease_ran_out() {
                break;
            }
        }
        // Stop taking commands before leaving the registry, so none is lost in between.
        commands.close();
        // Commands sent before the close are dropped here, so their callers hear at once that
        // the actor left. Dropping the receiver is not enough: a sender that took its place
        // before the close may put its command in just after the receiver emptied the
        // channel, and the command then stays there, kept alive by that caller's own handle,
        // with nobody to answer it. `recv` waits for such a sender; it ends once none is left.
        while let Some(command) = commands.recv().await {
            drop(command);
        }
        // The servers of its own no other live conversation uses stop with it.
        self.shared.mcp.release(&self.mcp_holder()).await;
        for waiter in self.shutdown_waiters.drain(..) {
            let _ = waiter.send(());
        }
        self.membership.forget(&self.id, self.generation).await;
    }

    /// This actor as a user of the MCP servers its conversation named: held until it stops.
    fn mcp_holder(&self) -> crate::mcp::Holder {
        crate::mcp::Holder {
            conversation_id: self.id.clone(),
            generation: self.generation,
        }
    }

    /// Cluster mode: the lease ran out without this instance hearing that it was lost (the
    /// database was away past it), so every write here is refused. An idle actor leaves, its
    /// followers told the conversation moved: the next request takes the conversation again
    /// (with a new epoch if another instance had it meanwhile) instead of being refused until
    /// the conversation unloads.
    fn lease_ran_out(&self) -> bool {
        // With a background process running, the lease's loss is heard and handled where
        // the processes are ended with it (`Live::leases_lost`): the actor waits for that.
        let ran_out = self.fence.as_ref().is_some_and(|fence| !fence.holds())
            && self.is_quiet()
            && !self.shared.processes.any_running(&self.id);
        if ran_out {
            tracing::warn!(conversation = %self.id, "the lease ran out while the conversation was idle; it leaves memory here");
            self.bus.publish(&ConversationEvent::ConversationMoved {
                conversation_id: self.id.clone(),
            });
        }
        ran_out
    }

    /// Tells the registry whether the conversation could leave memory now.
    fn note_quiet(&self) {
        self.status.quiet.store(self.is_quiet(), Ordering::Relaxed);
    }

    pub(super) async fn handle(&mut self, command: Command) -> Flow {
        match command {
            Command::View { reply } => {
                let _ = reply.send(Ok(self.view()));
            }
            Command::RulesChanged { resolution, reply } => {
                self.settle_answered_by_rules(&resolution);
                let _ = reply.send(());
            }
            Command::Decide {
                approval_id,
                answer,
                by,
                reply,
            } => {
                let _ = reply.send(self.decide(&approval_id, answer, by));
            }
            Command::Update { patch, reply } => {
                let _ = reply.send(self.update(patch).await);
            }
            Command::Delete { reply } => {
                let result = self.delete().await;
                let deleted = result.is_ok();
                let _ = reply.send(result);
                if deleted {
                    return Flow::Stop;
                }
            }
            Command::Send {
                request,
                key,
                hooks,
                reply,
            } => {
                let _ = reply.send(self.send(request, key, hooks).await);
            }
            Command::Answered { key, reply } => {
                let _ = reply.send(self.answered(&key));
            }
            Command::MessageHookSubject { session, reply } => {
                let _ = reply.send(self.message_hook_subject(session));
            }
            Command::Interrupt { session, reply } => self.interrupt(session, reply),
            Command::Retry { session, reply } => {
                let _ = reply.send(self.retry(session));
            }
            Command::RetryNow { session, reply } => {
                let _ = reply.send(self.retry_now(session));
            }
            Command::UpdatePending {
                message_id,
                patch,
                reply,
            } => {
                let _ = reply.send(self.update_pending(&message_id, patch));
            }
            Command::WithdrawPending { message_id, reply } => {
                let _ = reply.send(self.withdraw_pending(&message_id));
            }
            Command::SendPendingNow { message_id, reply } => {
                let _ = reply.send(self.send_pending_now(&message_id));
            }
            Command::Fork {
                rewind_to,
                restore,
                worktree,
                reply,
            } => {
                let _ = reply.send(self.fork(rewind_to, restore, worktree).await);
            }
            Command::TurnFileCalls {
                turn_id,
                item_id,
                reply,
            } => {
                let _ = reply.send(self.turn_file_calls(&turn_id, item_id.as_deref()));
            }
            Command::Subscribe { after, reply } => {
                let _ = reply.send(self.subscribe(after));
            }
            Command::Items {
                session,
                after_seq,
                limit,
                reply,
            } => {
                let _ = reply.send(self.items_page(session.as_deref(), after_seq, limit));
            }
            Command::Turns {
                session,
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(self.turns_page(session.as_deref(), after.as_deref(), limit));
            }
            Command::Usage { session, reply } => {
                let _ = reply.send(self.session_usage(session.as_deref()));
            }
            Command::Compact { reply } => self.start_compaction(reply),
            // Handled by `run` when it arrives; one that was queued behind a retirement's
            // fresh channel finds the actor used again, which then stays.
            Command::Unload => self.status.unload_asked.store(false, Ordering::Relaxed),
            Command::LeaseLost => {
                self.bus.publish(&ConversationEvent::ConversationMoved {
                    conversation_id: self.id.clone(),
                });
                return self.stop();
            }
            Command::Shutdown { reply } => {
                self.shutdown_waiters.push(reply);
                return self.stop();
            }
        }
        Flow::Continue
    }

    /// Stops the actor: at once when nothing runs, else once every running turn has ended.
    fn stop(&mut self) -> Flow {
        if let Some(compacting) = &self.compacting {
            compacting.cancel.cancel();
        }
        self.stopping = true;
        for run in self.sessions.values_mut() {
            run.interrupt(InterruptCause::Shutdown);
        }
        if self.any_running() {
            Flow::Continue
        } else {
            Flow::Stop
        }
    }

    fn root_id(&self) -> &str {
        &self.state.conversation.root_session_id
    }

    fn root(&self) -> &SessionRun {
        self.sessions
            .get(&self.state.conversation.root_session_id)
            .expect("the root session is always live")
    }

    /// The live part of a session (the root's for `None`), or `NotFound`.
    fn session_run(&self, session_id: Option<&str>) -> Result<&SessionRun, RuntimeError> {
        let session_id = session_id.unwrap_or(self.root_id());
        self.sessions
            .get(session_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("session {session_id}")))
    }

    fn run_mut(&mut self, session_id: &str) -> Option<&mut SessionRun> {
        self.sessions.get_mut(session_id)
    }

    /// Whether any session (root or sub-agent) has a turn running.
    fn any_running(&self) -> bool {
        self.sessions.values().any(|run| run.running.is_some())
    }

    /// A session can start a turn now: none runs in it, and (for the root) no manual
    /// compaction either.
    fn session_is_idle(&self, session_id: &str) -> bool {
        let root_compacting = self.compacting.is_some() && session_id == self.root_id();
        !root_compacting
            && self
                .sessions
                .get(session_id)
                .is_some_and(|run| run.running.is_none())
    }

    /// Whether the conversation may leave memory now: nothing runs or waits in it, nobody
    /// follows it, and (cluster mode) no background process of it runs here. Its lease goes
    /// when it leaves, and another instance could take it without its processes: the instance
    /// that runs them keeps it until they end.
    fn may_leave(&self) -> bool {
        self.is_quiet()
            && self.bus.subscriber_count() == 0
            // Ends it could not store yet would be lost with it.
            && self.unstored_ends.is_empty()
            && !(self.shared.cluster().is_some() && self.shared.processes.any_running(&self.id))
    }

    /// Nothing runs or waits anywhere in the conversation.
    fn is_quiet(&self) -> bool {
        self.compacting.is_none()
            && self
                .sessions
                .values()
                .all(|run| run.running.is_none() && run.pending.is_empty())
    }

    async fn update(&mut self, patch: ConversationPatch) -> Result<Conversation, RuntimeError> {
        let current = &self.state.conversation;
        // The agents the working directory after the change sees (a repository's agent file
        // counts): the conversation's agent must be one of them.
        let config = &self.shared.config;
        let new_cwd = patch.cwd.as_ref().filter(|cwd| **cwd != current.cwd);
        let agents = match new_cwd {
            Some(cwd) => Arc::new(Agents::discover(config.clone(), std::path::Path::new(cwd))),
            None => self.agents.clone(),
        };
        let agent = patch.agent.clone().unwrap_or_else(|| current.agent.clone());
        if (patch.agent.is_some() || new_cwd.is_some()) && agents.get(&agent).is_none() {
            return Err(RuntimeError::AgentUnavailable(agents.unavailable(&agent)));
        }
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
        if let Some(agent) = patch.agent.filter(|a| *a != current.agent) {
            // The running turn has its agent's tools and rules: a switch waits for it to end.
            if self
                .sessions
                .get(self.root_id())
                .is_some_and(|run| run.running.is_some())
            {
                return Err(RuntimeError::TurnRunning);
            }
            changes.agent = Some(agent);
        }
        if let Some(cwd) = patch.cwd.filter(|c| *c != current.cwd) {
            changes.cwd = Some(cwd);
        }
        if let Some(budget) = patch.budget.filter(|b| *b != current.budget) {
            changes.budget = Some(budget);
        }
        // The limits must hold on the model and agent the conversation has after the change.
        let model = changes.model.as_ref().unwrap_or(&current.model);
        if (changes.budget.is_some() || changes.model.is_some() || changes.agent.is_some())
            && let Some(agent) = agents.get(&agent)
            && let Some(refusal) = crate::runtime::budget::refusal(
                config,
                changes.budget.as_ref().unwrap_or(&current.budget),
                agent,
                model,
            )
        {
            return Err(refusal);
        }
        if changes.is_empty() {
            return Ok(self.state.conversation.clone());
        }
        let title_changed = changes.title.is_some();
        let model_changed = changes.model.is_some();
        let cwd_changed = changes.cwd.is_some();
        self.append_meta(vec![MetaRecord::ConversationUpdated {
            at: crate::domain::now(),
            changes,
        }])?;
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
        if cwd_changed {
            self.agents = agents;
        }
        if model_changed {
            // Another model, another tokenizer and context window: the meter starts over.
            let root = self.root_id().to_owned();
            self.reset_meter(&root);
            self.publish_usage(&root);
        }
        Ok(self.state.conversation.clone())
    }

    async fn delete(&mut self) -> Result<(), RuntimeError> {
        // Refused while any agent works, sub-agents included: their turns own files here.
        if self.any_running() {
            return Err(RuntimeError::TurnRunning);
        }
        if self.compacting.is_some() {
            return Err(RuntimeError::CompactionRunning);
        }
        // Cluster mode: the delete is accepted against the lease's epoch before any file goes,
        // so an owner that was paused past its lease cannot delete what another now owns.
        if let Some(fence) = &self.fence {
            crate::testhooks::stop_at("delete", self.id.as_bytes());
            fence.commit_delete().map_err(|error| {
                RuntimeError::Unavailable(format!("the conversation was not deleted: {error}"))
            })?;
            crate::testhooks::stop_at("delete_accepted", self.id.as_bytes());
        }
        // Its background processes end with it, before their logs go with its files.
        self.shared
            .processes
            .end_conversation(&self.id, "its conversation was deleted")
            .await;
        self.shared.store.delete_conversation(&self.id)?;
        if let Err(error) = self.shared.rules.drop_conversation(&self.id) {
            // Rules of a deleted conversation match nothing: only the list shows them.
            tracing::warn!(%error, conversation = %self.id, "cannot drop a deleted conversation's rules");
        }
        if let Err(error) = self.shared.index.remove_conversation(&self.id).await {
            index_failed(&self.shared.index, &error, "delete", &[&self.id]).await;
        }
        self.shared.publish_list(&ListEvent::ConversationDeleted {
            conversation_id: self.id.clone(),
        });
        self.notify_hooks(
            crate::config::HookEvent::ConversationDeleted,
            self.root_id(),
            None,
            serde_json::json!({ "title": self.state.conversation.title }),
        );
        self.bus.publish(&ConversationEvent::ConversationDeleted {
            conversation_id: self.id.clone(),
        });
        Ok(())
    }

    /// A conversation whose working directory, agent or model is gone cannot run a turn in
    /// `session_id`.
    fn check_can_run(&self, session_id: &str) -> Result<(), RuntimeError> {
        let conversation = &self.state.conversation;
        check_openable(&self.agents, conversation)?;
        let model = self
            .state
            .session(session_id)
            .map_or(&conversation.model, |session| &session.model);
        if let Err(reason) = self.shared.models.client(&self.shared.config, model) {
            return Err(RuntimeError::ModelUnavailable(format!(
                "{reason}; switch the conversation's model with PATCH {{\"model\": …}}"
            )));
        }
        Ok(())
    }

    /// Which stamped lines of the files count (cluster mode; everything when embedded).
    fn acceptance(&self) -> crate::store::Acceptance {
        self.fence
            .as_ref()
            .map(|fence| fence.acceptance())
            .unwrap_or_default()
    }

    fn append_meta(&mut self, records: Vec<MetaRecord>) -> Result<(), StoreError> {
        if self.unstored_ends.is_empty() {
            self.meta.append(&records)?;
        } else {
            let mut all = self.unstored_ends.clone();
            all.extend(records.iter().cloned());
            self.meta.append(&all)?;
            self.unstored_ends.clear();
            // The index was told those turns ended when the files did not say so yet: it is
            // brought up to the files again, now that they do.
            self.mark_index_out_of_date();
        }
        for record in &records {
            self.state.apply(record);
        }
        Ok(())
    }

    /// Notes, without waiting, that this conversation is to be re-indexed from its files.
    fn mark_index_out_of_date(&self) {
        let index = self.shared.index.clone();
        let id = self.id.clone();
        tokio::spawn(async move { index.mark_out_of_date(&[&id]).await });
    }

    /// Tries again to store the turn ends that could not be stored (the disk may have room
    /// again). A lost lease drops them: the new owner closes those turns from the files.
    fn store_unstored_ends(&mut self) {
        match self.append_meta(Vec::new()) {
            Ok(()) => {
                tracing::info!(conversation = %self.id, "stored the turn ends that could not be stored before");
            }
            Err(error) if error.is_fence() => self.unstored_ends.clear(),
            Err(error) => tracing::debug!(%error, "turn ends still cannot be stored"),
        }
    }

    /// A turn's end that could not be stored: this actor takes it now (a turn it thinks still
    /// runs would block every later one) and stores it ahead of the next record it stores.
    fn end_unstored(&mut self, record: MetaRecord) {
        self.state.apply(&record);
        self.unstored_ends.push(record);
    }

    /// The writer of a session's file, opened the first time it is needed.
    fn session_writer(&mut self, session_id: &str) -> Result<&mut JsonlWriter, StoreError> {
        Ok(match self.session_writers.entry(session_id.to_owned()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let mut writer = self
                    .shared
                    .store
                    .open_session_writer(&self.id, session_id)?;
                writer.set_fence(self.fence.clone());
                entry.insert(writer)
            }
        })
    }

    fn append_items(&mut self, session_id: &str, items: &[Item]) -> Result<(), StoreError> {
        let records: Vec<SessionRecord> = items
            .iter()
            .map(|item| SessionRecord::Item { item: item.clone() })
            .collect();
        self.session_writer(session_id)?.append(&records)?;
        if let Some(run) = self.sessions.get_mut(session_id) {
            for item in items {
                session::remember(&mut run.history, item);
            }
        }
        Ok(())
    }

    /// Queues, behind the search rows of the root session's finished messages, the note that
    /// search now covers its file up to here (`IndexUpdate::SearchedThrough`): a crash before
    /// the queue gets there leaves the note behind the file, and the next start re-indexes.
    fn note_searched_through(&mut self) {
        let root = self.state.conversation.root_session_id.clone();
        let Some(root_len) = self.session_writers.get(&root).map(JsonlWriter::len) else {
            return;
        };
        if root_len > self.searched_through {
            self.searched_through = root_len;
            self.shared.index_later(super::IndexJob::SearchedThrough {
                conversation_id: self.id.clone(),
                root_len,
            });
        }
    }

    fn next_seq(&mut self, session_id: &str) -> u64 {
        self.sessions
            .get_mut(session_id)
            .map_or(0, SessionRun::next_seq)
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
        let conversation = &self.state.conversation;
        self.bus.publish(&ConversationEvent::ConversationUpdated {
            conversation: conversation.clone(),
        });
        self.shared.publish_list(&ListEvent::ConversationUpdated {
            conversation: conversation.clone(),
        });
    }

    fn publish_item_started(&self, item: &Item) {
        self.bus
            .publish(&ConversationEvent::ItemStarted { item: item.clone() });
    }

    fn publish_item_completed(&self, item: &Item) {
        self.bus
            .publish(&ConversationEvent::ItemCompleted { item: item.clone() });
    }

    /// A session's status or last message changed (the Agents tab shows both); `wait_agents`
    /// calls look again.
    fn publish_session(&self, session_id: &str) {
        if let Some(session) = self.state.session(session_id) {
            self.bus.publish(&ConversationEvent::SessionUpdated {
                session: session.clone(),
            });
        }
        self.session_changes.send_modify(|n| *n += 1);
    }

    fn publish_pending(&self) {
        self.bus.publish(&ConversationEvent::PendingUpdated {
            pending: self.pending_list(),
        });
    }

    /// `usage.updated` is the root session's meter (the one the UI shows); a sub-agent's is
    /// read with `GET …/usage?session=`.
    fn publish_usage(&self, session_id: &str) {
        if session_id == self.root_id() {
            self.bus.publish(&ConversationEvent::UsageUpdated {
                session_id: session_id.to_owned(),
                usage: self.usage_view(session_id),
            });
        }
    }
}

/// The meter of one session (`tracker` is its count), against that session's model's window.
fn usage_of(
    config: &crate::config::Config,
    state: &ConversationState,
    session_id: &str,
    tracker: super::usage::UsageTracker,
) -> Usage {
    let model = state
        .session(session_id)
        .map_or(&state.conversation.model, |session| &session.model);
    let (window, max_output) = config.model(model).map_or((0, 0), |model| {
        (model.context_window, model.max_output_tokens)
    });
    tracker.view(window, max_output)
}

#[derive(PartialEq)]
pub(super) enum Flow {
    Continue,
    Stop,
}

#[cfg(test)]
mod tests {
    use super::session::remember;
    use crate::domain::{Item, ItemKind, ItemStatus, now};

    fn item(id: &str, seq: u64, text: &str) -> Item {
        Item {
            id: id.into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            seq,
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: None,
            kind: ItemKind::AgentMessage { text: text.into() },
        }
    }

    #[test]
    fn a_history_keeps_the_last_snapshot_of_each_item_in_seq_order() {
        let mut history = vec![item("a", 1, "a"), item("c", 3, "c")];
        remember(&mut history, &item("b", 2, "b"));
        remember(&mut history, &item("a", 1, "a2"));
        let seen: Vec<(&str, u64)> = history.iter().map(|i| (i.id.as_str(), i.seq)).collect();
        assert_eq!(seen, [("a", 1), ("b", 2), ("c", 3)]);
        assert!(matches!(&history[0].kind, ItemKind::AgentMessage { text } if text == "a2"));
    }
}
