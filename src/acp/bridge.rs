//! The editor's requests, answered through the service's API. An ACP session is a
//! conversation; one opened with `session/new` has none until its first prompt (the service
//! stores a conversation with its first message), so until then it is a draft that keeps the
//! agent, model and MCP servers chosen for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, ClientRequest, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, SessionCapabilities, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionInfo, SessionListCapabilities,
    SessionMode, SessionModeState, SessionNotification, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Client, Error, ErrorCode};
use serde_json::Value;

use super::commands;
use super::follow::{Follower, Shared, TurnEnd};
use super::prompt;
use super::updates;
use crate::api::requests::{ConversationPatch, NewConversation, NewMessage};
use crate::api::responses::CommandInfo;
use crate::client::api::{Api, ApiError};
use crate::client::repo_commands::{self, Outgoing};
use crate::config::McpServerSpec;
use crate::domain::{Conversation, Image, MessageMode, MessageStatus};

fn failure(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, message)
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message)
}

fn service(error: ApiError) -> Error {
    if error.is(crate::api::errors::ErrorCode::NotFound) {
        return Error::new(ErrorCode::RESOURCE_NOT_FOUND, error.to_string());
    }
    failure(error.to_string())
}

/// An answer as the protocol's JSON, plus the session to greet after it
/// (`available_commands_update`).
type Answer = Result<(Value, Option<String>), Error>;

fn to_json(value: impl serde::Serialize) -> Result<Value, Error> {
    serde_json::to_value(value).map_err(|error| failure(error.to_string()))
}

fn answer(value: impl serde::Serialize) -> Answer {
    Ok((to_json(value)?, None))
}

/// What a session will be created with, until its first prompt creates its conversation.
#[derive(Default, Clone)]
struct Draft {
    agent: Option<String>,
    model: Option<String>,
    mcp: BTreeMap<String, McpServerSpec>,
}

struct Session {
    id: String,
    cwd: String,
    draft: Mutex<Draft>,
    conversation: tokio::sync::Mutex<Option<(String, Arc<Follower>)>>,
    /// Counts `session/cancel`s: a prompt that sees it move was cancelled.
    cancels: AtomicU64,
    /// The repository's commands last offered to the editor: a prompt re-reads them, and a
    /// change is sent as a new `available_commands_update`.
    repository_commands: Mutex<Option<Vec<CommandInfo>>>,
}

impl Session {
    /// Its conversation's id, once its first prompt created it.
    async fn conversation_id(&self) -> Option<String> {
        self.conversation
            .lock()
            .await
            .as_ref()
            .map(|(id, _)| id.clone())
    }
}

pub struct Bridge {
    api: Api,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    cx: Mutex<Option<ConnectionTo<Client>>>,
    /// The editor said it follows sub-agents as sessions of their own (`initialize`).
    subagents: AtomicBool,
    /// Whether the editor shows agent terminals (`_meta.terminal_output`).
    terminals: AtomicBool,
    /// Whether the editor fills in forms (`elicitation.form`): an MCP server's questions go
    /// there.
    forms: AtomicBool,
}

impl Bridge {
    pub fn new(api: Api) -> Bridge {
        Bridge {
            api,
            sessions: Mutex::default(),
            cx: Mutex::default(),
            subagents: AtomicBool::new(false),
            terminals: AtomicBool::new(false),
            forms: AtomicBool::new(false),
        }
    }

    /// Every session's conversation (once its first prompt created it) and its follower.
    async fn opened_conversations(&self) -> Vec<(String, Arc<Follower>)> {
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .expect("sessions")
            .values()
            .cloned()
            .collect();
        let mut opened = Vec::new();
        for session in sessions {
            if let Some(conversation) = session.conversation.lock().await.clone() {
                opened.push(conversation);
            }
        }
        opened
    }

    /// The editor went away: the prompts it sent that still wait for a turn are withdrawn, so
    /// they do not run later with nobody to see them.
    pub async fn withdraw_waiting_prompts(&self) {
        for (id, follower) in self.opened_conversations().await {
            let waiting: Vec<String> = {
                let shared = follower.shared.lock().expect("follower state");
                shared
                    .pending
                    .iter()
                    .filter(|message| shared.ledger.owns(message))
                    .cloned()
                    .collect()
            };
            for message in waiting {
                // Taken meanwhile (`not_waiting`): its turn runs, as any other.
                if let Err(error) = self.api.withdraw(&id, &message).await {
                    tracing::debug!(%error, "a waiting prompt could not be withdrawn");
                }
            }
        }
    }

    /// A new follower's state, as this editor wants sub-agents shown.
    fn new_shared(&self) -> Shared {
        let mut shared = Shared::default();
        shared.ledger.subagents = self.subagents.load(Ordering::SeqCst);
        shared.terminals = self.terminals.load(Ordering::SeqCst);
        shared.forms = self.forms.load(Ordering::SeqCst);
        shared
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, Error> {
        self.sessions
            .lock()
            .expect("sessions")
            .get(id)
            .cloned()
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::RESOURCE_NOT_FOUND,
                    format!("no session {id}: open it with session/load"),
                )
            })
    }

    pub async fn handle(&self, request: ClientRequest, cx: &ConnectionTo<Client>) -> Answer {
        *self.cx.lock().expect("connection") = Some(cx.clone());
        match request {
            ClientRequest::InitializeRequest(request) => {
                let subagents = request.client_capabilities.subagents.is_some();
                self.subagents.store(subagents, Ordering::SeqCst);
                let terminals =
                    super::processes::shows_terminals(request.client_capabilities.meta.as_ref());
                self.terminals.store(terminals, Ordering::SeqCst);
                let forms = request
                    .client_capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|elicitation| elicitation.form.is_some());
                self.forms.store(forms, Ordering::SeqCst);
                answer(initialize(request))
            }
            ClientRequest::NewSessionRequest(request) => self.new_session(request).await,
            ClientRequest::LoadSessionRequest(request) => self.load_session(request, cx).await,
            ClientRequest::ListSessionsRequest(request) => self.list(request).await,
            ClientRequest::PromptRequest(request) => answer(self.prompt(request, cx).await?),
            ClientRequest::SetSessionModeRequest(request) => self.set_mode(request).await,
            ClientRequest::SetSessionConfigOptionRequest(request) => self.set_config(request).await,
            ClientRequest::AuthenticateRequest(_) => Err(invalid("no authentication is needed")),
            _ => Err(Error::method_not_found()),
        }
    }

    /// After `session/new` or `session/load` was answered: the commands the editor can offer.
    pub async fn after_session_opened(&self, session: &str, cx: &ConnectionTo<Client>) {
        let Ok(session) = self.session(session) else {
            return;
        };
        self.offer_commands(&session, cx).await;
    }

    /// Reads the repository's commands of the session's directory and, the first time or
    /// when they changed, sends the editor the whole list. Answers what was read: a service
    /// that cannot list them leaves the bridge's own commands offered.
    async fn offer_commands(
        &self,
        session: &Session,
        cx: &ConnectionTo<Client>,
    ) -> Vec<CommandInfo> {
        let read = repo_commands::list(&self.api, &session.cwd).await;
        let current = read.unwrap_or_default();
        let changed = {
            let mut offered = session.repository_commands.lock().expect("commands");
            let changed = offered.as_ref() != Some(&current);
            *offered = Some(current.clone());
            changed
        };
        if changed {
            let _ = cx.send_notification(SessionNotification::new(
                session.id.clone(),
                updates::commands(&current),
            ));
        }
        current
    }

    async fn new_session(&self, request: NewSessionRequest) -> Answer {
        let cwd = request.cwd.display().to_string();
        if !request.cwd.is_absolute() {
            return Err(invalid(format!("cwd must be an absolute path, not {cwd}")));
        }
        let draft = Draft {
            mcp: mcp_servers(&request.mcp_servers),
            ..Draft::default()
        };
        let id = format!("acp_{}", uuid::Uuid::now_v7().simple());
        let (modes, options) = self.choices(&cwd, &draft, None).await?;
        self.sessions.lock().expect("sessions").insert(
            id.clone(),
            Arc::new(Session {
                id: id.clone(),
                cwd,
                draft: Mutex::new(draft),
                conversation: tokio::sync::Mutex::new(None),
                cancels: AtomicU64::new(0),
                repository_commands: Mutex::new(None),
            }),
        );
        let response = NewSessionResponse::new(id.clone())
            .modes(modes)
            .config_options(options);
        Ok((to_json(response)?, Some(id)))
    }

    /// The agents `cwd` sees as modes and the models as a config option, with the current
    /// ones.
    async fn choices(
        &self,
        cwd: &str,
        draft: &Draft,
        conversation: Option<&Conversation>,
    ) -> Result<(SessionModeState, Vec<SessionConfigOption>), Error> {
        let agents = self.api.agents(cwd).await.map_err(service)?;
        let models = self.api.models().await.map_err(service)?;
        let agent = conversation
            .map(|c| c.agent.clone())
            .or_else(|| draft.agent.clone())
            .unwrap_or_else(|| agents.default.clone());
        let agent_model = agents
            .agents
            .iter()
            .find(|a| a.name == agent)
            .map(|a| a.model.clone())
            .unwrap_or_default();
        let model = conversation
            .map(|c| c.model.clone())
            .or_else(|| draft.model.clone())
            .unwrap_or(agent_model);
        let modes = agents
            .agents
            .into_iter()
            .map(|a| SessionMode::new(a.name.clone(), a.name).description(Some(a.description)))
            .collect();
        let options: Vec<SessionConfigSelectOption> = models
            .models
            .into_iter()
            .map(|m| SessionConfigSelectOption::new(m.id.clone(), m.id))
            .collect();
        let model_option = SessionConfigOption::select("model", "Model", model, options)
            .category(SessionConfigOptionCategory::Model);
        Ok((SessionModeState::new(agent, modes), vec![model_option]))
    }

    async fn load_session(&self, request: LoadSessionRequest, cx: &ConnectionTo<Client>) -> Answer {
        let id = request.session_id.0.to_string();
        let known = self.sessions.lock().expect("sessions").get(&id).cloned();
        let conversation_id = match &known {
            // A draft of this bridge that has a conversation by now.
            Some(session) => match &*session.conversation.lock().await {
                Some((conversation, _)) => conversation.clone(),
                None => {
                    let draft = session.draft.lock().expect("draft").clone();
                    let (modes, options) = self.choices(&session.cwd, &draft, None).await?;
                    let response = LoadSessionResponse::new()
                        .modes(modes)
                        .config_options(options);
                    return Ok((to_json(response)?, Some(id)));
                }
            },
            None => id.clone(),
        };
        let view = self
            .api
            .conversation(&conversation_id)
            .await
            .map_err(service)?;
        let session = Arc::new(Session {
            id: id.clone(),
            cwd: view.conversation.cwd.clone(),
            draft: Mutex::new(Draft::default()),
            conversation: tokio::sync::Mutex::new(None),
            cancels: AtomicU64::new(0),
            repository_commands: Mutex::new(None),
        });
        // The history is replayed by the follower's first snapshot (everything stored, then
        // what runs): it is sent before the answer, as the protocol asks, so the answer waits
        // for the catch-up to be sent, not only for the snapshot to arrive.
        let follower = Arc::new(Follower::start(
            self.api.clone(),
            conversation_id.clone(),
            id.clone(),
            cx.clone(),
            self.new_shared(),
        ));
        follower
            .wait(|shared| (shared.caught_up > 0).then_some(()))
            .await;
        *session.conversation.lock().await = Some((conversation_id, follower));
        self.sessions
            .lock()
            .expect("sessions")
            .insert(id.clone(), session);
        let (modes, options) = self
            .choices(
                &view.conversation.cwd,
                &Draft::default(),
                Some(&view.conversation),
            )
            .await?;
        let response = LoadSessionResponse::new()
            .modes(modes)
            .config_options(options);
        Ok((to_json(response)?, Some(id)))
    }

    async fn list(&self, request: ListSessionsRequest) -> Answer {
        let page = self
            .api
            .conversations(100, None, request.cursor.as_deref())
            .await
            .map_err(service)?;
        let cwd = request.cwd.as_ref().map(|cwd| cwd.display().to_string());
        let sessions = page
            .conversations
            .into_iter()
            .filter(|c| cwd.as_deref().is_none_or(|cwd| c.cwd == cwd))
            .map(|c| {
                // The time as the service wrote it (RFC 3339).
                let updated_at = crate::client::wire_text(&c.updated_at);
                SessionInfo::new(c.id, c.cwd)
                    .title(Some(c.title))
                    .updated_at(Some(updated_at))
            })
            .collect();
        answer(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
    }

    async fn set_mode(&self, request: SetSessionModeRequest) -> Answer {
        let session = self.session(&request.session_id.0)?;
        let agent = request.mode_id.0.to_string();
        let conversation = session.conversation_id().await;
        match conversation {
            // From the conversation's next turn (refused while its agent works).
            Some(id) => {
                let patch = ConversationPatch {
                    agent: Some(agent),
                    ..ConversationPatch::default()
                };
                self.api
                    .update_conversation(&id, &patch)
                    .await
                    .map_err(service)?;
            }
            None => session.draft.lock().expect("draft").agent = Some(agent),
        }
        answer(SetSessionModeResponse::new())
    }

    async fn set_config(&self, request: SetSessionConfigOptionRequest) -> Answer {
        let session = self.session(&request.session_id.0)?;
        if request.config_id.0.as_ref() != "model" {
            return Err(invalid(format!("no option {}", request.config_id.0)));
        }
        let model = request
            .value
            .as_value_id()
            .ok_or_else(|| invalid("the model is one of the listed values"))?
            .0
            .to_string();
        let conversation = session.conversation_id().await;
        let view = match &conversation {
            Some(id) => {
                let patch = ConversationPatch {
                    model: Some(model),
                    ..ConversationPatch::default()
                };
                let updated = self.api.update_conversation(id, &patch).await;
                Some(updated.map_err(service)?)
            }
            None => {
                session.draft.lock().expect("draft").model = Some(model);
                None
            }
        };
        let draft = session.draft.lock().expect("draft").clone();
        let (_, options) = self.choices(&session.cwd, &draft, view.as_ref()).await?;
        answer(SetSessionConfigOptionResponse::new(options))
    }

    /// `session/cancel`: interrupts the running turn; a prompt still waiting is withdrawn by
    /// its own task, which sees the count move.
    pub async fn cancel(&self, session_id: &str) {
        let Ok(session) = self.session(session_id) else {
            self.cancel_subagent(session_id).await;
            return;
        };
        session.cancels.fetch_add(1, Ordering::SeqCst);
        let conversation = session.conversation.lock().await.clone();
        if let Some((id, follower)) = conversation {
            follower.changed.notify_waiters();
            if let Err(error) = self.api.interrupt(&id, None).await {
                tracing::warn!("could not interrupt {id}: {error}");
            }
        }
    }

    /// `session/cancel` of a sub-agent the editor follows as a session: interrupts its turn
    /// (the parent goes on, as when its own `interrupt_agent` does it).
    async fn cancel_subagent(&self, session_id: &str) {
        for (id, follower) in self.opened_conversations().await {
            if !follower
                .shared
                .lock()
                .expect("follower state")
                .ledger
                .followed(session_id)
            {
                continue;
            }
            if let Err(error) = self.api.interrupt_session(&id, session_id).await {
                tracing::warn!("could not interrupt sub-agent {session_id}: {error}");
            }
            return;
        }
    }

    /// `/retry`: runs the failed (or interrupted) last turn again through the service, and
    /// answers as its prompt would.
    async fn retry(&self, session: &Session, cancels: u64) -> Result<PromptResponse, Error> {
        let Some((id, follower)) = session.conversation.lock().await.clone() else {
            return Err(invalid("/retry needs a conversation: send a message first"));
        };
        let answer = self
            .api
            .retry(&id)
            .await
            .map_err(|error| failure(error.to_string()))?;
        let turn = answer.turn_id;
        let ended = follower
            .wait(|shared| {
                if shared.ended.contains_key(&turn) {
                    Some(Ok(()))
                } else {
                    shared.broken.clone().map(Err)
                }
            })
            .await;
        ended.map_err(failure)?;
        self.stop_reason(session, &follower, &turn, cancels)
    }

    /// How the prompt that waited on `turn` ends, once the turn has ended.
    fn stop_reason(
        &self,
        session: &Session,
        follower: &Follower,
        turn: &str,
        cancels: u64,
    ) -> Result<PromptResponse, Error> {
        if session.cancels.load(Ordering::SeqCst) != cancels {
            // The protocol wants `cancelled` after `session/cancel`, whichever way the turn
            // ended in the race with the interrupt.
            return Ok(PromptResponse::new(StopReason::Cancelled));
        }
        let shared = follower.shared.lock().expect("state");
        match shared
            .ended
            .get(turn)
            .cloned()
            .unwrap_or(TurnEnd::Completed)
        {
            TurnEnd::Completed => {
                let mut response = PromptResponse::new(StopReason::EndTurn);
                // What the turn's model calls used, cached input included, when reported.
                if let Some(usage) = shared.usage.get(turn) {
                    let total = usage.input_tokens + usage.output_tokens;
                    response = response.usage(
                        agent_client_protocol::v1::schema::Usage::new(
                            total,
                            usage.input_tokens,
                            usage.output_tokens,
                        )
                        .thought_tokens(usage.reasoning_tokens)
                        .cached_read_tokens(usage.cached_input_tokens)
                        .cached_write_tokens(usage.cache_write_tokens),
                    );
                }
                Ok(response)
            }
            TurnEnd::Interrupted if shared.cut_by_restart.contains(turn) => Err(failure(format!(
                "the service at {} stopped during the turn, which was interrupted",
                self.api.base
            ))),
            TurnEnd::Interrupted => Ok(PromptResponse::new(StopReason::Cancelled)),
            TurnEnd::Failed(error) => Err(failure(format!("the turn failed: {error}"))),
        }
    }

    async fn prompt(
        &self,
        request: PromptRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse, Error> {
        let session = self.session(&request.session_id.0)?;
        let (message, images) = prompt::message(&request.prompt).map_err(invalid)?;
        let cancels = session.cancels.load(Ordering::SeqCst);
        let repository = self.offer_commands(&session, cx).await;
        if let Some((name, argument)) = commands::parse(&message) {
            if name == "retry" {
                return self.retry(&session, cancels).await;
            }
            let conversation = session.conversation_id().await;
            let reply = commands::run(&self.api, conversation.as_deref(), name, argument)
                .await
                .map_err(failure)?;
            let _ = cx.send_notification(SessionNotification::new(
                session.id.clone(),
                updates::agent_text(reply),
            ));
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        // A repository's command: the service expands it, and keeps its name on the message.
        let typed = message.trim().strip_prefix('/').map(repo_commands::split);
        let outgoing = match typed {
            Some((name, arguments)) if repo_commands::find(&repository, name).is_some() => {
                Outgoing::Command(name, arguments)
            }
            _ => Outgoing::Text(&message),
        };
        let (follower, message_id) = self.send(&session, outgoing, images, cx).await?;
        let conversation = session.conversation_id().await.unwrap_or_default();
        if session.cancels.load(Ordering::SeqCst) != cancels {
            // Cancelled while the conversation was being created: nothing could be
            // interrupted yet.
            let _ = self.api.interrupt(&conversation, None).await;
        }
        enum Outcome {
            Ended(String),
            Cancelled,
            Broken(String),
            Lost,
        }
        let outcome = follower
            .wait(|shared| {
                if let Some(turn) = shared.message_turns.get(&message_id) {
                    if shared.ended.contains_key(turn) {
                        return Some(Outcome::Ended(turn.clone()));
                    }
                } else if session.cancels.load(Ordering::SeqCst) != cancels {
                    return Some(Outcome::Cancelled);
                } else if shared.lost_messages.contains(&message_id) {
                    return Some(Outcome::Lost);
                }
                shared.broken.clone().map(Outcome::Broken)
            })
            .await;
        let turn = match outcome {
            Outcome::Ended(turn) => turn,
            Outcome::Cancelled => {
                // Still waiting for its turn: withdraw it. If it was taken meanwhile
                // (`not_waiting`), its turn is interrupted like any other.
                if self.api.withdraw(&conversation, &message_id).await.is_ok() {
                    return Ok(PromptResponse::new(StopReason::Cancelled));
                }
                follower
                    .wait(|shared| {
                        let turn = shared.message_turns.get(&message_id)?;
                        shared.ended.contains_key(turn).then(|| turn.clone())
                    })
                    .await
            }
            Outcome::Broken(why) => return Err(failure(why)),
            Outcome::Lost => {
                return Err(failure(format!(
                    "the service at {} restarted before the message's turn began: waiting messages are not kept, send it again",
                    self.api.base
                )));
            }
        };
        self.stop_reason(&session, &follower, &turn, cancels)
    }

    /// Sends the prompt as a message: the first one creates the conversation. Answers the
    /// follower and the message's id.
    async fn send(
        &self,
        session: &Session,
        outgoing: Outgoing<'_>,
        images: Vec<Image>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(Arc<Follower>, String), Error> {
        let mut conversation = session.conversation.lock().await;
        if let Some((id, follower)) = conversation.clone() {
            drop(conversation);
            // Subscribed before sending, so nothing of its turn is missed; `queue`: a prompt
            // sent while a turn runs waits for its own turn.
            let ready = follower
                .wait(|shared| match &shared.broken {
                    Some(why) if shared.snapshots == 0 => Some(Err(why.clone())),
                    _ => (shared.snapshots > 0).then_some(Ok(())),
                })
                .await;
            ready.map_err(failure)?;
            let posting = follower.posting.lock().await;
            let body = NewMessage {
                mode: MessageMode::Queue,
                images,
                ..outgoing.message()
            };
            let message = self
                .api
                .send_message(&id, &body)
                .await
                .map_err(service)?
                .message;
            let message_id = message.id;
            let mut shared = follower.shared.lock().expect("state");
            shared.ledger.own_message(&message_id);
            if message.status == MessageStatus::Waiting {
                shared.pending.insert(message_id.clone());
            }
            drop(shared);
            drop(posting);
            return Ok((follower, message_id));
        }
        let draft = session.draft.lock().expect("draft").clone();
        let body = NewConversation {
            agent: draft.agent,
            model: draft.model,
            images,
            mcp: draft.mcp,
            ..outgoing.conversation(&session.cwd)
        };
        let created = self.api.create_conversation(&body).await.map_err(service)?;
        let id = created.conversation.id;
        let message_id = created.message.id;
        let mut shared = self.new_shared();
        shared.ledger.own_message(&message_id);
        shared
            .message_turns
            .insert(message_id.clone(), created.turn_id.clone());
        shared.running.insert(created.turn_id);
        let follower = Arc::new(Follower::start(
            self.api.clone(),
            id.clone(),
            session.id.clone(),
            cx.clone(),
            shared,
        ));
        *conversation = Some((id, follower.clone()));
        Ok((follower, message_id))
    }
}

fn initialize(request: InitializeRequest) -> InitializeResponse {
    InitializeResponse::new(request.protocol_version)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true))
                .session_capabilities(
                    SessionCapabilities::new().list(SessionListCapabilities::new()),
                ),
        )
        .agent_info(Implementation::new("openvaala", env!("CARGO_PKG_VERSION")).title("OpenVaala"))
}

/// The editor's MCP servers as the create body's `mcp` map (a config `[mcp.<name>]` table
/// each): a child process on stdio, or a streamable HTTP endpoint.
fn mcp_servers(servers: &[McpServer]) -> BTreeMap<String, McpServerSpec> {
    let mut map = BTreeMap::new();
    for server in servers {
        let (name, table) = match server {
            McpServer::Stdio(stdio) => (
                stdio.name.clone(),
                McpServerSpec {
                    command: Some(stdio.command.display().to_string()),
                    args: Some(stdio.args.clone()),
                    env: Some(
                        stdio
                            .env
                            .iter()
                            .map(|v| (v.name.clone(), v.value.clone()))
                            .collect(),
                    ),
                    ..McpServerSpec::default()
                },
            ),
            McpServer::Http(http) => (
                http.name.clone(),
                McpServerSpec {
                    url: Some(http.url.clone()),
                    headers: Some(
                        http.headers
                            .iter()
                            .map(|h| (h.name.clone(), h.value.clone()))
                            .collect(),
                    ),
                    ..McpServerSpec::default()
                },
            ),
            // SSE servers are not advertised: the service speaks streamable HTTP only.
            _ => continue,
        };
        map.insert(name, table);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EnvVariable, HttpHeader, McpServerHttp, McpServerStdio,
    };
    use serde_json::json;

    #[test]
    fn the_editors_mcp_servers_become_config_tables() {
        let servers = vec![
            McpServer::Stdio(
                McpServerStdio::new("files", "npx")
                    .args(vec!["-y".into(), "server-filesystem".into()])
                    .env(vec![EnvVariable::new("K", "V")]),
            ),
            McpServer::Http(
                McpServerHttp::new("search", "https://mcp.example.com/mcp")
                    .headers(vec![HttpHeader::new("Authorization", "Bearer t")]),
            ),
        ];
        assert_eq!(
            serde_json::to_value(mcp_servers(&servers)).unwrap(),
            json!({
                "files": {"command": "npx", "args": ["-y", "server-filesystem"], "env": {"K": "V"}},
                "search": {"url": "https://mcp.example.com/mcp",
                           "headers": {"Authorization": "Bearer t"}},
            })
        );
    }
}
