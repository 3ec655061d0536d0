//! Turns inside the actor: accepting messages as a turn (write-ahead), starting its task,
//! storing and publishing what the task sends back, steering messages into it, and ending it.
//! Every session (the root agent and each sub-agent) runs its turns through the same code.

use crate::agents::Agents;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::session::RunningTurn;
use super::{Answer, ConversationActor};
use crate::api::events::ConversationEvent;
use crate::api::responses::MessageAccepted;
use crate::domain::{Item, Message, MessageStatus, TurnStatus, TurnUsage, new_id, now, user_item};
use crate::index::IndexUpdate;
use crate::model::tokens::Tokenizer;
use crate::runtime::instructions::{Facts, Prompt};
use crate::runtime::link::{FromTurn, TurnMsg};
use crate::runtime::turn::{self, ModelSetup, TurnSpec};
use crate::runtime::{RequestKey, RuntimeError, usage};
use crate::store::StoreError;
use crate::store::records::MetaRecord;
use crate::store::state::StoredAnswer;
use crate::tools::ToolContext;

/// A turn accepted but not begun: its records are being stored (see `prepare_turn`).
pub(super) struct PreparedTurn {
    session_id: String,
    turn_id: String,
    messages: Vec<Message>,
    leading_items: Vec<Item>,
    /// An `Idempotency-Key`'s answer, for the index.
    answer_key: Option<(RequestKey, StoredAnswer)>,
    /// The session is created with this turn (`session.created` goes out first).
    new_session: bool,
}

impl PreparedTurn {
    pub(super) fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl ConversationActor {
    /// Accepts messages as a new turn of `session_id`: stored write-ahead, then run.
    pub(super) fn start_turn(
        &mut self,
        session_id: &str,
        messages: Vec<Message>,
        key: Option<RequestKey>,
    ) -> Result<Answer, RuntimeError> {
        let (records, turn, answer) =
            self.prepare_turn(session_id, messages, key, Vec::new(), false);
        // The history's file is opened before anything is stored: running out of files then
        // stores nothing, and the error answer is true.
        self.session_writer(session_id)?;
        self.append_meta(records)?;
        // The messages are accepted: a failure now cannot take that back.
        self.begin_turn(turn)
            .map_err(RuntimeError::outcome_unknown)?;
        Ok(answer)
    }

    /// Runs the session's latest turn again when it failed: a new turn with no new message,
    /// whose model call sees the same history (a failed attempt's partial text is never sent
    /// to the model). Nothing is posted twice.
    /// Cuts short the wait before the running turn's next model attempt; `false` when the
    /// session is not waiting to retry its model call.
    pub(super) fn retry_now(&mut self, session: Option<String>) -> Result<bool, RuntimeError> {
        let session_id = session.unwrap_or_else(|| self.root_id().to_owned());
        let Some(run) = self.sessions.get(&session_id) else {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        };
        let Some(running) = run
            .running
            .as_ref()
            .filter(|running| running.retry.is_some())
        else {
            return Ok(false);
        };
        running.retry_now.notify_waiters();
        Ok(true)
    }

    pub(super) fn retry(
        &mut self,
        session: Option<String>,
    ) -> Result<crate::api::responses::RetryStarted, RuntimeError> {
        let session_id = session.unwrap_or_else(|| self.root_id().to_owned());
        let Some(run) = self.sessions.get(&session_id) else {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        };
        if !self.session_is_idle(&session_id) {
            return Err(RuntimeError::TurnRunning);
        }
        if !run.pending.is_empty() {
            return Err(RuntimeError::MessagesWaiting);
        }
        let failed = match self
            .state
            .turns
            .iter()
            .rev()
            .find(|turn| turn.session_id == session_id)
        {
            Some(turn) if turn.status == TurnStatus::Failed => turn.id.clone(),
            Some(turn) => {
                return Err(RuntimeError::NothingToRetry(format!(
                    "the latest turn {} is {}; only a failed turn can be retried",
                    turn.id,
                    turn.status.as_str()
                )));
            }
            None => {
                return Err(RuntimeError::NothingToRetry(
                    "the session has no turn to retry".to_owned(),
                ));
            }
        };
        self.check_can_run(&session_id)?;
        let turn_id = new_id("t");
        self.session_writer(&session_id)?;
        self.append_meta(vec![MetaRecord::TurnStarted {
            session_id: session_id.clone(),
            turn_id: turn_id.clone(),
            message_ids: Vec::new(),
            at: now(),
            retry_of: Some(failed.clone()),
        }])?;
        self.begin_turn(PreparedTurn {
            session_id,
            turn_id: turn_id.clone(),
            messages: Vec::new(),
            leading_items: Vec::new(),
            answer_key: None,
            new_session: false,
        })
        .map_err(RuntimeError::outcome_unknown)?;
        Ok(crate::api::responses::RetryStarted {
            turn_id,
            retry_of: failed,
        })
    }

    /// The records that accept `messages` as a new turn of `session_id`, and what is left to
    /// do once they are stored (`begin_turn`). Several turns can be stored in one append (the
    /// sub-agents one answer starts). `leading_items` go in the session's file before the
    /// messages (the history a sub-agent starts with); `new_session` says the session is
    /// being created with it.
    pub(super) fn prepare_turn(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        key: Option<RequestKey>,
        leading_items: Vec<Item>,
        new_session: bool,
    ) -> (Vec<MetaRecord>, PreparedTurn, Answer) {
        let turn_id = new_id("t");
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
                idempotency_key: key.as_ref().map(|key| key.key.clone()),
                turn_id: None,
            })
            .collect();
        records.push(MetaRecord::TurnStarted {
            session_id: session_id.to_owned(),
            turn_id: turn_id.clone(),
            message_ids: messages.iter().map(|m| m.id.clone()).collect(),
            at: now(),
            retry_of: None,
        });
        // Messages that waited keep the answers their keys were given, from now on durably.
        records.extend(self.pending_answer_records(&messages));
        let answer = Answer::Accepted(MessageAccepted {
            message: messages[0].clone(),
        });
        // The key's answer also goes to the index (`index_turn_start`).
        let answer_key = key.as_ref().map(|key| (key.clone(), key.stored(&answer)));
        if let Some(key) = &key {
            records.push(key.answered(&answer, now()));
        }
        let turn = PreparedTurn {
            session_id: session_id.to_owned(),
            turn_id,
            messages,
            leading_items,
            answer_key,
            new_session,
        };
        (records, turn, answer)
    }

    /// A turn whose records are stored: its items go to the session's file, the index and
    /// clients learn of it, and its task starts.
    pub(super) fn begin_turn(&mut self, turn: PreparedTurn) -> Result<(), RuntimeError> {
        let PreparedTurn {
            session_id,
            turn_id,
            messages,
            leading_items,
            answer_key,
            new_session,
        } = turn;
        let session_id = session_id.as_str();
        self.forget_stored_answers();
        if messages.iter().any(|m| !self.is_report(m))
            && let Some(run) = self.run_mut(session_id)
        {
            // The user (or the parent agent) spoke: sub-agents' reports held since an
            // interrupt may come in now.
            run.pending.hold_agent_messages(false);
        }
        let mut items = leading_items;
        for message in &messages {
            let seq = self.next_seq(session_id);
            items.push(user_item(message, &turn_id, seq));
        }
        // A retry brings no item.
        if !items.is_empty()
            && let Err(error) = self.append_items(session_id, &items)
        {
            self.end_unbegun_turn(session_id, &turn_id, &error);
            return Err(error.into());
        }
        self.index_turn_start(session_id, &turn_id, &items, answer_key);
        self.publish_conversation();
        if new_session && let Some(session) = self.state.session(session_id) {
            self.bus.publish(&ConversationEvent::SessionCreated {
                session: session.clone(),
            });
        }
        self.publish_turn_started(
            session_id,
            &turn_id,
            messages.iter().map(|m| m.id.clone()).collect(),
        );
        for item in &items {
            self.publish_stored(item);
        }
        self.run_turn(session_id, &turn_id);
        Ok(())
    }

    /// Ends, failed, a turn stored as started whose messages could not be stored (a full
    /// disk): otherwise this actor, its clients and the index would see it running until the
    /// conversation is next loaded. When even its end cannot be stored, it ends here and goes
    /// to the files with the next record stored, and the index is marked for a re-index from
    /// the files.
    fn end_unbegun_turn(&mut self, session_id: &str, turn_id: &str, error: &StoreError) {
        let record = MetaRecord::TurnEnded {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            status: TurnStatus::Failed,
            error: Some(format!("its message could not be stored: {error}")),
            error_code: None,
            at: now(),
            usage: None,
        };
        if let Err(error) = self.append_meta(vec![record.clone()]) {
            tracing::error!(%error, conversation = %self.id, "cannot store the end of a turn that never began");
            if error.is_fence() {
                self.state.apply(&record);
            } else {
                self.end_unstored(record);
                self.mark_index_out_of_date();
            }
        }
        self.index_turn_start(session_id, turn_id, &[], None);
        self.publish_conversation();
        self.publish_session(session_id);
    }

    /// The session's new state, then `turn.started`.
    fn publish_turn_started(&self, session_id: &str, turn_id: &str, message_ids: Vec<String>) {
        self.publish_session(session_id);
        self.bus.publish(&ConversationEvent::TurnStarted {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            message_ids,
        });
    }

    /// The events a later turn's start publishes, for the turn a conversation was created
    /// with: its stream begins with them, so a client that replays it from the first event
    /// (subscribed right after the create) misses nothing.
    pub(super) fn publish_first_turn(&mut self, session_id: &str, turn_id: &str) {
        let message_ids = self
            .state
            .turns
            .iter()
            .find(|turn| turn.id == turn_id)
            .map(|turn| turn.message_ids.clone())
            .unwrap_or_default();
        self.publish_turn_started(session_id, turn_id, message_ids);
        let items: Vec<Item> = self
            .sessions
            .get(session_id)
            .map(|run| {
                run.history
                    .iter()
                    .filter(|item| item.turn_id == turn_id)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for item in &items {
            self.publish_item_started(item);
            self.publish_item_completed(item);
        }
    }

    /// Indexes a turn that just started, in the background of the turn: the files are already
    /// the truth. Only the root session's messages are searchable.
    fn index_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        items: &[Item],
        answer_key: Option<(RequestKey, StoredAnswer)>,
    ) {
        let shared = self.shared.clone();
        let id = self.id.clone();
        let conversation_update = self.conversation_update_owned();
        let turn = self
            .state
            .turns
            .iter()
            .rev()
            .find(|t| t.id == turn_id)
            .cloned();
        let session = self.state.session(session_id).cloned();
        let search: Vec<(u64, String)> = if session_id == self.root_id() {
            items
                .iter()
                .filter_map(|item| Some((item.seq, item.kind.searchable_text()?.to_owned())))
                .collect()
        } else {
            Vec::new()
        };
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
            if let Some(session) = &session {
                updates.push(IndexUpdate::Session {
                    conversation_id: &id,
                    session,
                });
            }
            for (seq, text) in &search {
                updates.push(IndexUpdate::SearchText {
                    conversation_id: &id,
                    seq: *seq,
                    text,
                });
            }
            if let Some((key, answer)) = &answer_key {
                updates.push(IndexUpdate::Answer {
                    conversation_id: &id,
                    key: &key.key,
                    status: answer.status,
                    response: &answer.response,
                    body_hash: answer.body_hash.as_deref(),
                });
            }
            shared.index_quietly(&updates).await;
        });
    }

    /// Publishes an item that is stored whole at once (a message, a notice) and counts it in
    /// its session's meter.
    pub(super) fn publish_stored(&mut self, item: &Item) {
        self.publish_item_started(item);
        self.publish_item_completed(item);
        if let Some(run) = self.run_mut(&item.session_id) {
            run.usage.add(item);
        }
    }

    /// Starts the task of a turn of `session_id` that is stored as started.
    pub(super) fn run_turn(&mut self, session_id: &str, turn_id: &str) {
        let cancel = CancellationToken::new();
        let retry_now = Arc::new(tokio::sync::Notify::new());
        let Some(run) = self.sessions.get_mut(session_id) else {
            return;
        };
        run.running = Some(RunningTurn {
            turn_id: turn_id.to_owned(),
            cancel: cancel.clone(),
            retry_now: retry_now.clone(),
            items: Vec::new(),
            retry: None,
            usage: TurnUsage::default(),
            sub_agents: (0, 0),
        });
        run.turn_reasoning_tokens = 0;
        let history = run.history.clone();
        let usage = run.usage;
        // An agent file edited since counts from this turn on (a few small reads).
        self.agents = Arc::new(Agents::discover(
            self.shared.config.clone(),
            std::path::Path::new(&self.state.conversation.cwd),
        ));
        let reasoning_carried = self.reasoning_carried(session_id);
        let sender = self.turn_sender.clone();
        let spec = self.turn_spec(
            session_id,
            turn_id,
            history,
            usage,
            (cancel, retry_now),
            reasoning_carried,
        );
        let session: Arc<str> = Arc::from(session_id);
        match spec {
            Ok(mut spec) => {
                spec.trace_parent = self.trace_parent.clone();
                // The meter counts with this turn's model and request (AGENTS.md may have
                // changed, or the model).
                if let Some(run) = self.run_mut(session_id) {
                    run.usage.adopt(spec.usage);
                }
                tokio::spawn(turn::run(spec, session, sender));
            }
            Err(error) => {
                // Checked before the turn was stored; only a config change could get here.
                let _ = sender.send(FromTurn {
                    session_id: session,
                    msg: TurnMsg::Ended {
                        status: TurnStatus::Failed,
                        error: Some(error),
                        error_code: None,
                    },
                });
            }
        }
    }

    /// Everything a turn of `session_id` needs: its agent's instructions and tools, its model,
    /// the conversation's working directory and limits.
    fn turn_spec(
        &self,
        session_id: &str,
        turn_id: &str,
        history: Vec<Item>,
        usage: usage::UsageTracker,
        (cancel, retry_now): (CancellationToken, Arc<tokio::sync::Notify>),
        reasoning_carried: bool,
    ) -> Result<TurnSpec, String> {
        let conversation = &self.state.conversation;
        let config = &self.shared.config;
        let missing = || "the session's agent or model is no longer configured".to_owned();
        let session = self.state.session(session_id).ok_or_else(missing)?;
        let agents = self.agents.clone();
        let agent = agents.get(&session.agent).ok_or_else(missing)?;
        let compactor = self.compactor(&session.agent)?;
        let (prompt, tools) = self.request_parts(session, agent);
        // Never looser than any agent above it.
        let (sandbox, permissions) = crate::runtime::sandboxing::session_rules(
            &agents,
            &self.state,
            session_id,
            &self.shared.protected,
        )
        .ok_or_else(missing)?;
        let environment = self
            .sessions
            .get(session_id)
            .map(|run| run.environment.clone());
        // The session's model, then its fallbacks, each with its own tools and facts.
        let mut models = std::collections::VecDeque::new();
        for model_id in config.model_chain(&session.model) {
            let fallback = model_id != session.model;
            let client = match self.shared.models.client(config, model_id) {
                Ok(client) => client,
                // A fallback that cannot be called (its key is missing, say) is left out: it
                // must not stop the session's own model from answering.
                Err(error) if fallback => {
                    tracing::warn!(conversation = %self.id, model = %model_id, %error, "a fallback model is left out");
                    continue;
                }
                Err(error) => return Err(error),
            };
            let model = config.model(model_id).ok_or_else(missing)?;
            let builtin_tools = if !fallback {
                tools.clone()
            } else {
                offered_tools(config, &agents, model_id, agent)
            };
            let facts = environment.as_ref().map(|_| {
                environment_facts(
                    &conversation.cwd,
                    &model.name,
                    &sandbox,
                    &permissions,
                    &builtin_tools,
                )
            });
            models.push_back(ModelSetup {
                id: model_id.to_owned(),
                provider: config
                    .providers
                    .get(&model.provider)
                    .map_or("openvaala", |provider| provider.protocol.provider_name()),
                client,
                name: model.name.clone(),
                builtin_tools,
                facts,
                max_output_tokens: model.max_output_tokens,
                context_window: model.context_window,
                reasoning_context: model.reasoning_context,
                reasoning_carried: if !fallback {
                    reasoning_carried
                } else {
                    crate::model::reasoning_carried(config, model_id)
                },
            });
        }
        let model = models.pop_front().ok_or_else(missing)?;
        // What every request of this turn carries besides the history (the environment
        // block as last worked out: the turn works it out anew at most daily).
        let tokenizer = Tokenizer::for_model(config, &session.model);
        let kept = environment.as_ref().and_then(|cell| cell.current());
        let mut usage = usage;
        usage.adopt(usage::UsageTracker::new(
            tokenizer,
            tokenizer.request_overhead(
                Tokenizer::protocol(config, &session.model),
                prompt.text(kept.as_deref()).as_deref(),
                &tools,
            ),
        ));
        Ok(TurnSpec {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            model,
            fallbacks: models,
            reasoning_from_step: None,
            prompt,
            environment,
            instructions: None,
            history,
            tools,
            tool_context: ToolContext {
                background: Some(crate::tools::background::tool::BackgroundScope {
                    processes: self.shared.processes.clone(),
                    conversation_id: conversation.id.clone(),
                    session_id: session_id.to_owned(),
                    call_id: String::new(),
                    max_per_conversation: config.tools.max_background,
                    max_run: std::time::Duration::from_secs(sandbox.limits.background_max_s),
                    first_wait: std::time::Duration::from_millis(config.tools.background_wait_ms),
                }),
                cwd: conversation.cwd.clone().into(),
                shell_timeout: config.tools.shell_timeout(),
                max_output_bytes: config.tools.max_output_bytes,
                process_records: self.shared.settings.process_records.clone(),
                mcp: self.mcp_access(agent, &sandbox),
                sandbox,
            },
            gate: std::sync::Arc::new(crate::runtime::approvals::CallGate {
                permissions,
                rules: self.shared.rules.clone(),
                conversation_id: conversation.id.clone(),
                agent: session.agent.clone(),
                cwd: conversation.cwd.clone(),
            }),
            hooks: self.shared.hooks.clone(),
            hook_subject: crate::hooks::Subject {
                conversation_id: conversation.id.clone(),
                session_id: session_id.to_owned(),
                agent: session.agent.clone(),
                turn_id: Some(turn_id.to_owned()),
                cwd: conversation.cwd.clone().into(),
            },
            retry: config.retry.clone(),
            max_steps: config.turn.max_steps,
            cancel,
            retry_now,
            usage,
            compactor,
            user_dir: config.directory(),
            skills: Default::default(),
            trace_parent: None,
            files: self.shared.checkpoints.clone().map(|checkpoints| {
                crate::runtime::checkpointing::TurnFiles::new(
                    checkpoints,
                    conversation.cwd.clone().into(),
                )
            }),
        })
    }

    /// The MCP servers a turn of `agent` may use: those it names in the config, and the
    /// conversation's own (a child server of those runs in the conversation's directory as it
    /// is now, unless it names its own).
    fn mcp_access(
        &self,
        agent: &crate::config::AgentConfig,
        sandbox: &crate::sandbox::SandboxPolicy,
    ) -> Option<crate::mcp::McpAccess> {
        let own = match crate::config::conversation_servers(
            &self.state.mcp,
            &self.state.conversation.cwd,
        ) {
            Ok(own) => own,
            Err(error) => {
                // Checked when the conversation was created: only a hand-edited file gets here.
                tracing::warn!(conversation = %self.id, %error, "the conversation's MCP servers are not used");
                Default::default()
            }
        };
        let access = crate::mcp::McpAccess {
            hub: self.shared.mcp.clone(),
            holder: self.mcp_holder(),
            servers: agent.mcp.clone(),
            own: std::sync::Arc::new(own),
            sandbox: sandbox.clone(),
            cwd: self.state.conversation.cwd.clone().into(),
            sampling: agent.mcp_sampling,
            start_wait: std::time::Duration::from_millis(
                self.shared.config.tools.mcp_start_wait_ms,
            ),
            peer: None,
        };
        (!access.is_empty()).then_some(access)
    }

    /// What every request of a session carries besides its history: its agent's
    /// instructions (with AGENTS.md; the environment block joins when the turn starts) and
    /// tool schemas.
    fn request_parts(
        &self,
        session: &crate::domain::Session,
        agent: &crate::config::AgentConfig,
    ) -> (Prompt, Vec<crate::model::ToolSpec>) {
        request_parts(
            &self.shared.config,
            &self.agents,
            &self.state.conversation.cwd,
            session,
            agent,
        )
    }

    /// Starts a session's meter over from its history, counted with its model's tokenizer and
    /// with the fixed part of its requests: when a session is loaded or created,
    /// and when its model changes. (A turn adopts them again, as AGENTS.md may change.)
    pub(super) fn reset_meter(&mut self, session_id: &str) {
        let basis = meter_basis(&self.shared.config, &self.agents, &self.state, session_id);
        if let (Some(basis), Some(run)) = (basis, self.sessions.get_mut(session_id)) {
            run.usage = basis.restart(&crate::runtime::compaction::model_view(&run.history));
        }
    }

    /// Whether a session's model gets reasoning back (see `model::reasoning_carried`), so
    /// that reasoning takes room in its next request.
    pub(super) fn reasoning_carried(&self, session_id: &str) -> bool {
        self.state.session(session_id).is_some_and(|session| {
            crate::model::reasoning_carried(&self.shared.config, &session.model)
        })
    }
}

/// What every request of a session carries besides its history (see
/// `ConversationActor::request_parts`).
fn request_parts(
    config: &crate::config::Config,
    agents: &Agents,
    cwd: &str,
    session: &crate::domain::Session,
    agent: &crate::config::AgentConfig,
) -> (Prompt, Vec<crate::model::ToolSpec>) {
    let tools = offered_tools(config, agents, &session.model, agent);
    let prompt = Prompt::new(
        config,
        agent,
        std::path::Path::new(cwd),
        session.parent_id.is_some(),
    );
    (prompt, tools)
}

/// The built-in tools `agent` offers to `model_id`: its edit tool in the shape that model
/// takes.
fn offered_tools(
    config: &crate::config::Config,
    agents: &Agents,
    model_id: &str,
    agent: &crate::config::AgentConfig,
) -> Vec<crate::model::ToolSpec> {
    let edit = match config.model(model_id) {
        Some(model) => crate::tools::EditShape::for_model(
            Tokenizer::protocol(config, model_id),
            model.edit_tool,
        ),
        None => crate::tools::EditShape::EditFile,
    };
    crate::tools::offered(&agent.tools, edit)
        .into_iter()
        .map(|spec| super::subagents::described(spec, agents, agent))
        .collect()
}

/// What the environment block says of a session: its directory, model, sandbox, and which of
/// its tools ask first or are refused.
fn environment_facts(
    cwd: &str,
    model: &str,
    sandbox: &crate::sandbox::SandboxPolicy,
    permissions: &crate::permissions::Permissions,
    tools: &[crate::model::ToolSpec],
) -> Facts {
    use crate::permissions::Permission;
    let with = |wanted: Permission| -> Vec<String> {
        tools
            .iter()
            .filter(|tool| {
                permissions.tool(crate::permissions::policy::setting_of(&tool.name)) == wanted
            })
            .map(|tool| tool.name.to_string())
            .collect()
    };
    Facts {
        cwd: cwd.into(),
        model: model.to_owned(),
        sandbox: sandbox.clone(),
        asking: with(Permission::Ask),
        denied: with(Permission::Deny),
        shell_rules: permissions
            .shell_rules
            .iter()
            .filter(|(_, permission)| *permission != Permission::Allow)
            .map(|(pattern, permission)| (pattern.clone(), permission.name()))
            .collect(),
    }
}

/// The meter a session starts from: its model's tokenizer and the fixed part of its requests
/// (see `ConversationActor::reset_meter`; also used for a conversation read from its files).
pub(super) fn meter_basis(
    config: &crate::config::Config,
    agents: &Agents,
    state: &crate::store::state::ConversationState,
    session_id: &str,
) -> Option<usage::UsageTracker> {
    let session = state.session(session_id)?;
    let agent = agents.get(&session.agent)?;
    let (prompt, tools) = request_parts(config, agents, &state.conversation.cwd, session, agent);
    let tokenizer = Tokenizer::for_model(config, &session.model);
    let protocol = Tokenizer::protocol(config, &session.model);
    let overhead = tokenizer.request_overhead(protocol, prompt.text(None).as_deref(), &tools);
    Some(usage::UsageTracker::new(tokenizer, overhead))
}
