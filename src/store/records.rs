//! The records of the two JSONL files of a conversation. They are a public file format: every
//! line carries `"v"` (the schema version) and `"type"`; fields are added as optional and never
//! reused with a new meaning. The directory as a whole has a format version too (`format.rs`:
//! what changes need a new one).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::McpServerSpec;
use crate::domain::{ForkedFrom, Item, Message, SessionStatus, Timestamp, TurnStatus, TurnUsage};

/// The schema version this build writes and the newest it can read.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of `metadata.jsonl`: the conversation, its sessions and turns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type")]
pub enum MetaRecord {
    #[serde(rename = "conversation.created")]
    ConversationCreated { conversation: ConversationCreated },
    #[serde(rename = "conversation.updated")]
    ConversationUpdated {
        at: Timestamp,
        #[serde(flatten)]
        changes: ConversationChanges,
    },
    #[serde(rename = "session.created")]
    SessionCreated { session: SessionCreated },
    #[serde(rename = "session.updated")]
    SessionUpdated {
        session_id: String,
        status: SessionStatus,
        at: Timestamp,
    },
    /// A message the agent accepted (it started a turn or joined one). Waiting messages are
    /// never stored (they live only in memory); this record is what makes the acceptance durable.
    #[serde(rename = "message.accepted")]
    MessageAccepted {
        message: Message,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        /// The running turn a steered message joined. (A message that starts a turn is named
        /// by that turn's `turn.started`.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    #[serde(rename = "turn.started")]
    TurnStarted {
        session_id: String,
        turn_id: String,
        /// The messages that start it; none for a retry.
        message_ids: Vec<String>,
        at: Timestamp,
        /// The failed turn a retry runs again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_of: Option<String>,
    },
    #[serde(rename = "turn.ended")]
    TurnEnded {
        session_id: String,
        turn_id: String,
        status: TurnStatus,
        #[serde(default)]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<crate::domain::TurnErrorCode>,
        at: Timestamp,
        /// The tokens its model calls used (absent in records stored before it was kept, and
        /// for a turn closed after a crash).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TurnUsage>,
    },
    /// The answer given to a request that carried an `Idempotency-Key`, so that a retry (even
    /// after a restart or a reindex) gets the same answer and changes nothing.
    #[serde(rename = "request.answered")]
    RequestAnswered {
        key: String,
        status: u16,
        response: Value,
        at: Timestamp,
        /// SHA-256 of the request's body (hex): the same key with another body is refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_hash: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConversationCreated {
    pub id: String,
    pub title: String,
    pub created_at: Timestamp,
    pub cwd: String,
    pub agent: String,
    pub model: String,
    pub root_session_id: String,
    #[serde(default)]
    pub forked_from: Option<ForkedFrom>,
    /// The MCP servers the client named for this conversation, as given (with their
    /// credentials: this file is the only place they are kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp: BTreeMap<String, McpServerSpec>,
    /// The conversation's own spending limits (an older binary ignores them).
    #[serde(default, skip_serializing_if = "crate::domain::Budget::is_empty")]
    pub budget: crate::domain::Budget,
}

/// The fields a `conversation.updated` record changes; absent fields are unchanged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConversationChanges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_custom: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The root agent's new agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The conversation's new spending limits, in place of the old ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::domain::Budget>,
}

impl MetaRecord {
    /// The records every conversation starts with: the conversation, then its root session
    /// (the root agent, on the conversation's agent and model).
    pub fn conversation_start(conversation: ConversationCreated) -> Vec<MetaRecord> {
        let session = SessionCreated {
            id: conversation.root_session_id.clone(),
            parent_id: None,
            agent: conversation.agent.clone(),
            model: conversation.model.clone(),
            task: None,
            created_at: conversation.created_at,
        };
        vec![
            MetaRecord::ConversationCreated { conversation },
            MetaRecord::SessionCreated { session },
        ]
    }
}

impl ConversationChanges {
    pub fn is_empty(&self) -> bool {
        *self == ConversationChanges::default()
    }

    /// Whether this changes the conversation itself, which moves it to the top of the list.
    /// Archiving or unarchiving does not (it hides the conversation from the main list without
    /// changing it), so it comes back where it was; nor does a rename (the user is tidying the
    /// list, and the renamed conversation jumping to the top loses their place), nor new
    /// spending limits.
    pub fn changes_the_conversation(&self) -> bool {
        ConversationChanges {
            archived: None,
            title: None,
            title_custom: None,
            budget: None,
            ..self.clone()
        } != ConversationChanges::default()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionCreated {
    pub id: String,
    pub parent_id: Option<String>,
    pub agent: String,
    pub model: String,
    pub task: Option<String>,
    pub created_at: Timestamp,
}

/// One line of `<session-id>.jsonl`: a snapshot of one item (the last snapshot of an id wins),
/// or output a running tool call streamed, appended to its item's output when read. The output
/// lines are written as it streams, without an fsync of their own (nothing about them was
/// acknowledged): they survive a crash of the service, so the output a user watched is still
/// there after a restart, cut where the crash cut it. The call's final snapshot supersedes them.
// Nearly every record is an item: boxing it would cost an allocation per stored item for the
// sake of the rarer, smaller output lines.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionRecord {
    Item { item: Item },
    Output { item_id: String, output: String },
}

/// What every line looks like: the version beside the record's own fields, and in cluster
/// mode the stamp it was written with: the epoch of the lease, and the commit number the
/// coordinator must accept for the line to count (see `store::fence`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope<R> {
    pub v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<u64>,
    #[serde(flatten)]
    pub record: R,
}

/// Only the version, to tell "unknown schema version" apart from "malformed line".
#[derive(Deserialize)]
pub struct VersionOnly {
    pub v: u32,
}
