//! What a conversation is, derived from its `metadata.jsonl`: a fold over the records. The
//! conversation actor keeps one up to date as it appends; `reindex` builds one per directory.
//! Both feed the index through the same `ConversationState`, so the two paths cannot disagree.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::records::MetaRecord;
use crate::config::McpServerSpec;
use crate::domain::{
    Conversation, ConversationStatus, LastTurn, Message, Session, SessionStatus, Timestamp, Turn,
    TurnStatus,
};

#[derive(Debug, Clone)]
pub struct ConversationState {
    pub conversation: Conversation,
    /// Root session first, then sub-agents in creation order.
    pub sessions: Vec<Session>,
    pub turns: Vec<Turn>,
    /// Messages the agents accepted, by id (for rewind and for turn records).
    pub accepted: HashMap<String, Message>,
    /// Answers to requests that carried an `Idempotency-Key`, by key.
    pub answers: HashMap<String, StoredAnswer>,
    /// The MCP servers the client named, with their credentials (the view hides them).
    pub mcp: BTreeMap<String, McpServerSpec>,
}

/// The answer given to a request with an `Idempotency-Key`, as its record keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    /// The HTTP status the answer first went out with: [`AnswerKind::recorded_status`].
    pub status: u16,
    pub response: Value,
    /// The hash of the request's body (absent in records older than it): a repeat of the key
    /// with another body is refused instead of answered.
    pub body_hash: Option<String>,
}

/// What a kept answer answered. The record format names it by the HTTP status the answer
/// went out with (`request.answered`'s `status`), the only place below the API that does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// A conversation was created.
    Created,
    /// A message was taken.
    Accepted,
}

impl AnswerKind {
    pub const fn recorded_status(self) -> u16 {
        match self {
            AnswerKind::Created => 201,
            AnswerKind::Accepted => 202,
        }
    }
}

/// A `metadata.jsonl` that does not start with `conversation.created` cannot be folded.
#[derive(Debug, thiserror::Error)]
#[error("metadata.jsonl does not start with a conversation.created record")]
pub struct MissingCreation;

impl ConversationState {
    /// What the conversation's ended turns cost at their models' prices, sub-agents' turns
    /// included; `None` when no turn has a cost.
    pub fn cost(&self) -> Option<f64> {
        self.turns
            .iter()
            .filter_map(|turn| turn.usage.as_ref().and_then(|usage| usage.cost))
            .reduce(|total, cost| total + cost)
    }

    pub fn from_records<'a>(
        records: impl IntoIterator<Item = &'a MetaRecord>,
    ) -> Result<ConversationState, MissingCreation> {
        let mut records = records.into_iter();
        let Some(MetaRecord::ConversationCreated { conversation }) = records.next() else {
            return Err(MissingCreation);
        };
        let mut state = ConversationState {
            conversation: Conversation {
                id: conversation.id.clone(),
                title: conversation.title.clone(),
                title_custom: false,
                created_at: conversation.created_at,
                updated_at: conversation.created_at,
                archived: false,
                status: ConversationStatus::Idle,
                cwd: conversation.cwd.clone(),
                agent: conversation.agent.clone(),
                model: conversation.model.clone(),
                root_session_id: conversation.root_session_id.clone(),
                forked_from: conversation.forked_from.clone(),
                last_turn: None,
                mcp: conversation
                    .mcp
                    .iter()
                    .map(|(name, spec)| (name.clone(), spec.shown()))
                    .collect(),
                budget: conversation.budget,
            },
            sessions: Vec::new(),
            turns: Vec::new(),
            accepted: HashMap::new(),
            answers: HashMap::new(),
            mcp: conversation.mcp.clone(),
        };
        for record in records {
            state.apply(record);
        }
        Ok(state)
    }

    /// Applies one record. Records are facts already on disk, so this never fails: a record
    /// naming an unknown session or turn is ignored rather than trusted.
    pub fn apply(&mut self, record: &MetaRecord) {
        match record {
            MetaRecord::ConversationCreated { .. } => {}
            MetaRecord::ConversationUpdated { at, changes } => {
                let conversation = &mut self.conversation;
                if let Some(title) = &changes.title {
                    conversation.title = title.clone();
                }
                if let Some(title_custom) = changes.title_custom {
                    conversation.title_custom = title_custom;
                }
                if let Some(archived) = changes.archived {
                    conversation.archived = archived;
                }
                if let Some(model) = &changes.model {
                    conversation.model = model.clone();
                    if let Some(root) = self.sessions.first_mut() {
                        root.model = model.clone();
                    }
                }
                if let Some(agent) = &changes.agent {
                    conversation.agent = agent.clone();
                    if let Some(root) = self.sessions.first_mut() {
                        root.agent = agent.clone();
                    }
                }
                if let Some(cwd) = &changes.cwd {
                    conversation.cwd = cwd.clone();
                }
                if let Some(budget) = changes.budget {
                    conversation.budget = budget;
                }
                if changes.changes_the_conversation() {
                    self.touch(*at);
                }
            }
            MetaRecord::SessionCreated { session } => {
                self.sessions.push(Session {
                    id: session.id.clone(),
                    parent_id: session.parent_id.clone(),
                    agent: session.agent.clone(),
                    model: session.model.clone(),
                    task: session.task.clone(),
                    status: SessionStatus::Idle,
                    created_at: session.created_at,
                    last_message: None,
                });
                self.touch(session.created_at);
            }
            MetaRecord::SessionUpdated {
                session_id,
                status,
                at,
            } => {
                if let Some(session) = self.session_mut(session_id) {
                    session.status = *status;
                }
                self.touch(*at);
            }
            MetaRecord::MessageAccepted {
                message, turn_id, ..
            } => {
                self.accepted.insert(message.id.clone(), message.clone());
                // A steered message is one of the messages its turn answers.
                if let Some(turn) = turn_id
                    .as_ref()
                    .and_then(|turn_id| self.turns.iter_mut().rev().find(|t| t.id == *turn_id))
                    && !turn.message_ids.contains(&message.id)
                {
                    turn.message_ids.push(message.id.clone());
                }
                self.touch(message.created_at);
            }
            MetaRecord::TurnStarted {
                session_id,
                turn_id,
                message_ids,
                at,
                ..
            } => {
                self.turns.push(Turn {
                    id: turn_id.clone(),
                    session_id: session_id.clone(),
                    message_ids: message_ids.clone(),
                    status: TurnStatus::Running,
                    started_at: *at,
                    ended_at: None,
                    error: None,
                    error_code: None,
                    usage: None,
                });
                if let Some(session) = self.session_mut(session_id) {
                    session.status = SessionStatus::Running;
                }
                self.touch(*at);
            }
            MetaRecord::TurnEnded {
                session_id,
                turn_id,
                status,
                error,
                error_code,
                at,
                usage,
            } => {
                if let Some(turn) = self.turns.iter_mut().rev().find(|t| t.id == *turn_id) {
                    turn.status = *status;
                    turn.ended_at = Some(*at);
                    turn.error = error.clone();
                    turn.error_code = *error_code;
                    turn.usage = usage.clone();
                }
                let session_status = match status {
                    TurnStatus::Interrupted => SessionStatus::Interrupted,
                    _ => SessionStatus::Idle,
                };
                if let Some(session) = self.session_mut(session_id) {
                    session.status = session_status;
                }
                if *session_id == self.conversation.root_session_id {
                    self.conversation.last_turn = Some(LastTurn {
                        turn_id: turn_id.clone(),
                        status: *status,
                        error: error.clone(),
                    });
                }
                self.touch(*at);
            }
            MetaRecord::RequestAnswered {
                key,
                status,
                response,
                body_hash,
                ..
            } => {
                self.answers.insert(
                    key.clone(),
                    StoredAnswer {
                        status: *status,
                        response: response.clone(),
                        body_hash: body_hash.clone(),
                    },
                );
            }
        }
        self.conversation.status = if self.running_turns().next().is_some() {
            ConversationStatus::Running
        } else {
            ConversationStatus::Idle
        };
    }

    /// Turns that started and have not ended, oldest first.
    pub fn running_turns(&self) -> impl Iterator<Item = &Turn> {
        self.turns
            .iter()
            .filter(|turn| turn.status == TurnStatus::Running)
    }

    pub fn session(&self, session_id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == session_id)
    }

    fn session_mut(&mut self, session_id: &str) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.id == session_id)
    }

    fn touch(&mut self, at: Timestamp) {
        if at > self.conversation.updated_at {
            self.conversation.updated_at = at;
        }
    }
}
