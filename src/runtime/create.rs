//! Creating a conversation with its first message: validated, stored in one piece, indexed,
//! announced, and its first turn started.

use std::collections::HashMap;

use crate::api::events::ListEvent;

use super::*;
use crate::api;
use crate::domain::{Message, MessageMode, MessageSource, MessageStatus, new_id, now, user_item};
use crate::model::tokens::Tokenizer;
use crate::runtime::commands::named_command;
use crate::runtime::idempotency::InFlight;
use crate::runtime::index_jobs::index_failed;
use crate::runtime::key_claims::Claimed;
use crate::runtime::key_claims::claim_key;
use crate::runtime::validate::validate_text;
use crate::store::records::{ConversationCreated, MetaRecord, SessionRecord};
use crate::store::state::ConversationState;

impl Runtime {
    /// Creates a conversation with its first message and starts its first turn: nothing is
    /// stored before this call succeeds, and nothing stays stored when it fails.
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
                return key.replay_created(stored);
            }
        }
        if let Some(key) = &key
            && let Some(stored) = self.shared.index.answer(&key.key).await?
        {
            return key.replay_created(&stored);
        }
        // In cluster mode the key is claimed across instances too: the same request sent to
        // another instance at the same time waits for this one's answer.
        let claim = match (&key, self.shared.cluster()) {
            (Some(key), Some(cluster)) => {
                match claim_key(cluster, &self.shared.index, &key.key).await? {
                    Claimed::Answered(stored) => return key.replay_created(&stored),
                    Claimed::Mine(claim) => Some(claim),
                }
            }
            _ => None,
        };
        let cwd = self.cwd_or_default(request.cwd.as_deref())?;
        // Its tools could otherwise reach the service's own state.
        if let Some(reason) = self
            .shared
            .protected
            .refuses_cwd(std::path::Path::new(&cwd))
        {
            return Err(RuntimeError::CwdRefused(reason));
        }
        let mut request = request;
        let mut command = None;
        if let Some(used) = named_command(&request.text, &request.command, &request.arguments)? {
            let expanded = self.expand_command(&cwd, used).await?;
            request.text = expanded.text;
            // The request's own choice wins over the command's.
            request.agent = request.agent.or(expanded.command.agent);
            request.model = request.model.or(expanded.command.model);
            command = Some(expanded.used);
        }
        validate_text(&request.text, &request.images)?;
        let config = &self.shared.config;
        let agents = self.agents_for(&cwd).await?;
        let agent_name = request
            .agent
            .unwrap_or_else(|| config.default_agent.clone());
        let agent = agents
            .get(&agent_name)
            .ok_or_else(|| RuntimeError::AgentUnavailable(agents.unavailable(&agent_name)))?;
        let model = request.model.unwrap_or_else(|| agent.model.clone());
        self.check_model(&model)?;
        if let Some(refusal) = super::budget::refusal(config, &request.budget, agent, &model) {
            return Err(refusal);
        }
        // The meter counts the message on the conversation's path; a long one is counted
        // first on the blocking pool, so that count is remembered.
        Tokenizer::prepare(&self.shared.tokenizers, &request.text).await;
        conversation_servers(agent, &request.mcp, &cwd)?;
        let conversation_id = new_id("c");
        let root_session_id = new_id("s");
        let turn_id = new_id("t");
        let whom = async {
            let subject = crate::hooks::Subject {
                conversation_id: conversation_id.clone(),
                session_id: root_session_id.clone(),
                agent: agent_name.clone(),
                turn_id: Some(turn_id.clone()),
                cwd: cwd.clone().into(),
            };
            let sandbox = super::sandboxing::agent_policy(agent, &self.shared.protected);
            Ok((subject, sandbox))
        };
        let command_name = command
            .as_ref()
            .map(|used: &crate::domain::CommandUse| used.name.as_str());
        let hooks = self
            .user_message_hooks(whom, &request.text, request.images.len(), command_name)
            .await?;
        // The new conversation will be live: its place is taken before anything is stored,
        // so that a full registry refuses it (`Unavailable`) with nothing stored.
        let slot = self.reserve_slot().await?;

        let created_at = now();
        let message = Message {
            hooks,
            id: new_id("m"),
            session_id: root_session_id.clone(),
            text: request.text,
            mode: MessageMode::Steer,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Started,
            created_at,
            images: request.images,
            command,
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
            mcp: request.mcp,
            budget: request.budget,
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
                retry_of: None,
            },
        ]);
        let mut state = ConversationState::from_records(&records).expect("starts with creation");
        let answer = Answer::Created(Box::new(api::responses::ConversationCreated {
            conversation: state.conversation.clone(),
            message: message.clone(),
            turn_id: turn_id.clone(),
        }));
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
            damaged_files: Vec::new(),
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
        self.shared.publish_list(&ListEvent::ConversationCreated {
            conversation: loaded.state.conversation.clone(),
        });
        self.shared
            .notify_created(&agents, &loaded.state.conversation);
        let mut actors = self.registry.actors.lock().await;
        let handle = match actor::spawn(
            self.shared.clone(),
            self.registry.clone(),
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
        let unindexed = match &key {
            Some(key) if !indexed => Some(key.stored(&answer)),
            _ => None,
        };
        if let Some(claim) = claim {
            claim.answered(unindexed.as_ref()).await;
        }
        if let (Some(key), Some(stored)) = (&key, unindexed) {
            self.shared
                .unindexed_answers
                .lock()
                .expect("answers lock")
                .insert(key.key.clone(), stored);
        }
        Ok(answer)
    }

    /// Removes a conversation that was stored but could not start (its actor could not open
    /// its files), so that the error answer is true: nothing stays stored. When even that
    /// fails, the answer says the outcome is unknown.
    pub(super) async fn take_back(&self, id: &str, error: RuntimeError) -> RuntimeError {
        tracing::warn!(%error, conversation = %id, "a new conversation could not start; removing it");
        if let Err(removal) = self.shared.store.delete_conversation(id) {
            return RuntimeError::outcome_unknown(format!("{error}; then {removal}"));
        }
        if let Err(index_error) = self.shared.index.remove_conversation(id).await {
            index_failed(&self.shared.index, &index_error, "take back", &[id]).await;
        }
        self.shared.publish_list(&ListEvent::ConversationDeleted {
            conversation_id: id.to_owned(),
        });
        match error {
            RuntimeError::Unavailable(_) => error,
            other => RuntimeError::Unavailable(format!(
                "the conversation could not start ({other}); nothing was stored, retry shortly"
            )),
        }
    }
}

/// Checks the MCP servers a create body names: valid like the config file's, and a server
/// started as a command only for an agent that may run commands. Their credentials are
/// registered as secrets from here on.
fn conversation_servers(
    agent: &crate::config::AgentConfig,
    specs: &std::collections::BTreeMap<String, crate::config::McpServerSpec>,
    cwd: &str,
) -> Result<(), RuntimeError> {
    let servers = crate::config::conversation_servers(specs, cwd)
        .map_err(|error| RuntimeError::InvalidMcpServer(error.to_string()))?;
    let mut commands = servers.iter().filter(|(_, server)| {
        matches!(server.transport, crate::config::McpTransport::Stdio { .. })
    });
    if let Some((name, _)) = commands.next()
        && !agent.client_mcp
    {
        return Err(RuntimeError::InvalidMcpServer(format!(
            "mcp.{name}: agent `{}` does not let clients start MCP servers as commands \
             (`client_mcp = true` in its config allows it; they then run in its sandbox); name \
             a `url` server or choose another agent",
            agent.permissions.agent
        )));
    }
    crate::mcp::register_secrets(specs.values());
    Ok(())
}
