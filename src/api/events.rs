//! The events of the two SSE streams, one enum each: `ConversationEvent` for
//! `/api/conversations/{id}/events` and `ListEvent` for `/api/events`. Each serializes as its
//! `data:` JSON with its own `type` (the SSE `event:` name) inside, so a client can decode an
//! event with no SSE library. The actor publishes these and nothing else, the bus encodes them,
//! and the OpenAPI document shows them (`ConversationEvent`, `ListEvent`: a `oneOf` with a
//! `type` discriminator), so what is sent and what is documented are one type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::approvals::Approval;
use crate::bus::BusEvent;
use crate::domain::{
    Conversation, Item, Message, Session, Timestamp, TurnStatus, TurnUsage, Usage,
};

/// An event of one conversation's stream.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type")]
pub enum ConversationEvent {
    /// The first event of a stream (and of a reconnect whose `Last-Event-ID` is unknown or too
    /// old): the whole conversation as it is now.
    #[serde(rename = "snapshot")]
    Snapshot {
        conversation: Conversation,
        /// The root session first, then sub-agents in the order they were created.
        sessions: Vec<Session>,
        /// Messages waiting while the agent works (every session's).
        pending: Vec<Message>,
        /// The root session's context meter.
        usage: Usage,
        /// Each running turn with its items so far: the user messages it answers, then what
        /// it has produced (streaming text as far as it has come).
        running: Vec<RunningTurnView>,
        /// Whether a manual compaction is in progress (an automatic one runs inside a turn).
        compacting: bool,
        /// Tool calls waiting for a user's answer, oldest first.
        approvals: Vec<Approval>,
        /// The last stored item's `seq` per session id: `GET …/items?after_seq=` from here
        /// reads what is stored later.
        last_seq: BTreeMap<String, u64>,
        /// What the conversation's ended turns cost (as `ConversationView.cost`); each
        /// `turn.ended` with a `usage.cost` adds to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<f64>,
    },
    /// The conversation's title, status, model, working directory or archive flag changed.
    #[serde(rename = "conversation.updated")]
    ConversationUpdated { conversation: Conversation },
    /// The conversation was deleted; the stream ends after this event.
    #[serde(rename = "conversation.deleted")]
    ConversationDeleted { conversation_id: String },
    /// This instance no longer serves the conversation (cluster mode: its lease ended and
    /// another instance may own it now; what ran here was cut). The stream ends after this
    /// event: reconnect, with `Last-Event-ID`, to follow the conversation where it is now.
    #[serde(rename = "conversation.moved")]
    ConversationMoved { conversation_id: String },
    /// A sub-agent's session was created.
    #[serde(rename = "session.created")]
    SessionCreated { session: Session },
    /// A session's status or last message changed.
    #[serde(rename = "session.updated")]
    SessionUpdated { session: Session },
    /// The waiting messages changed (sent, edited, withdrawn, taken by the agent).
    #[serde(rename = "pending.updated")]
    PendingUpdated { pending: Vec<Message> },
    /// The root session's context meter changed.
    #[serde(rename = "usage.updated")]
    UsageUpdated { session_id: String, usage: Usage },
    /// A turn started with these messages.
    #[serde(rename = "turn.started")]
    TurnStarted {
        session_id: String,
        turn_id: String,
        message_ids: Vec<String>,
    },
    /// A turn ended: `completed`, `failed` (with the error) or `interrupted`. `files_changed`
    /// counts the paths its tool calls changed in the working directory
    /// (`GET …/turns/{turn_id}/changes` shows them). `usage`: the tokens its model calls
    /// used (`GET …/turns` lists them for every turn).
    #[serde(rename = "turn.ended")]
    TurnEnded {
        session_id: String,
        turn_id: String,
        status: TurnStatus,
        error: Option<String>,
        /// What kind of failure `error` is, where a client may act on it (`budget_exceeded`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<crate::domain::TurnErrorCode>,
        files_changed: u32,
        /// The tokens the turn's model calls used.
        usage: TurnUsage,
    },
    /// An item appeared: streaming text or reasoning (`running`), a tool call, a message.
    #[serde(rename = "item.started")]
    ItemStarted { item: Item },
    /// Live text of a started item: `field` is `text` (an answer or reasoning) or `output` (a
    /// tool's output); `delta` is appended to it.
    #[serde(rename = "item.delta")]
    ItemDelta {
        session_id: String,
        item_id: String,
        field: DeltaField,
        delta: String,
    },
    /// An item is stored in its final form.
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    /// A model call failed with a transient error and is tried again after `delay_ms`, at
    /// `next_at`.
    #[serde(rename = "model.retry")]
    ModelRetry {
        session_id: String,
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        #[schema(value_type = chrono::DateTime<chrono::Utc>)]
        next_at: Timestamp,
        error: String,
    },
    /// The turn's model failed for good (its retries used up on an overload, a rate limit or
    /// a server error): its calls go to `to`, the next of the model's `fallback`s, for the
    /// rest of the turn. `from` and `to` are configured model names.
    #[serde(rename = "model.fallback")]
    ModelFallback {
        session_id: String,
        turn_id: String,
        from: String,
        to: String,
        /// Why `from` failed.
        reason: String,
    },
    /// Older history is being summarised.
    #[serde(rename = "compaction.started")]
    CompactionStarted {
        session_id: String,
        reason: CompactionReason,
    },
    /// The summary is stored (it also arrives as an item) and the meter starts again from it.
    #[serde(rename = "compaction.completed")]
    CompactionCompleted {
        session_id: String,
        summary: Item,
        usage: Usage,
    },
    /// The summary could not be made; nothing changed.
    #[serde(rename = "compaction.failed")]
    CompactionFailed { session_id: String, error: String },
    /// A tool call waits for a user's answer (`POST /api/approvals/{id}`); its item's status
    /// is `waiting_approval` meanwhile.
    #[serde(rename = "approval.requested")]
    ApprovalRequested { approval: Approval },
    /// An approval was settled: answered (the first answer wins), expired, or cancelled by an
    /// interrupt or a stop. Every client closes its prompt.
    #[serde(rename = "approval.resolved")]
    ApprovalResolved { approval: Approval },
}

/// An event of the conversation list's stream.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type")]
pub enum ListEvent {
    /// The first event of a stream: the first page of the list, newest first.
    #[serde(rename = "snapshot")]
    Snapshot {
        conversations: Vec<Conversation>,
        /// Where `GET /api/conversations?cursor=` continues, if there is more.
        next_cursor: Option<String>,
    },
    /// A conversation was created (also by a fork or a rewind).
    #[serde(rename = "conversation.created")]
    ConversationCreated { conversation: Conversation },
    /// A conversation's title, status, archive flag or `updated_at` changed.
    #[serde(rename = "conversation.updated")]
    ConversationUpdated { conversation: Conversation },
    /// A conversation was deleted.
    #[serde(rename = "conversation.deleted")]
    ConversationDeleted { conversation_id: String },
    /// A tool call of any conversation waits for a user's answer.
    #[serde(rename = "approval.requested")]
    ApprovalRequested { approval: Approval },
    /// An approval of any conversation was settled.
    #[serde(rename = "approval.resolved")]
    ApprovalResolved { approval: Approval },
    /// A background process of any conversation started.
    #[serde(rename = "process.started")]
    ProcessStarted { process: crate::domain::ProcessInfo },
    /// A background process of any conversation ended (on its own, stopped, or with its
    /// conversation).
    #[serde(rename = "process.ended")]
    ProcessEnded { process: crate::domain::ProcessInfo },
}

/// A running turn as a snapshot shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunningTurnView {
    pub session_id: String,
    pub turn_id: String,
    pub items: Vec<Item>,
    /// The model call is being retried: waiting until `next_at` (a client that joins during a
    /// back-off sees why nothing happens). `null` once the next attempt has produced output.
    pub retry: Option<RetryState>,
}

/// A model call waiting to be tried again after a transient error.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RetryState {
    /// The attempt that failed (the next one is `attempt + 1`).
    pub attempt: u32,
    pub max_attempts: u32,
    /// When the next attempt is sent.
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub next_at: Timestamp,
    pub error: String,
}

/// Which text of an item a delta extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeltaField {
    /// An answer's or a reasoning's text.
    Text,
    /// A tool call's output.
    Output,
}

/// Why a compaction runs: before a model call that would reach the threshold (`auto`), or
/// asked for (`manual`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    Auto,
    Manual,
}

impl BusEvent for ConversationEvent {
    fn kind(&self) -> &'static str {
        match self {
            ConversationEvent::Snapshot { .. } => "snapshot",
            ConversationEvent::ConversationUpdated { .. } => "conversation.updated",
            ConversationEvent::ConversationDeleted { .. } => "conversation.deleted",
            ConversationEvent::ConversationMoved { .. } => "conversation.moved",
            ConversationEvent::SessionCreated { .. } => "session.created",
            ConversationEvent::SessionUpdated { .. } => "session.updated",
            ConversationEvent::PendingUpdated { .. } => "pending.updated",
            ConversationEvent::UsageUpdated { .. } => "usage.updated",
            ConversationEvent::TurnStarted { .. } => "turn.started",
            ConversationEvent::TurnEnded { .. } => "turn.ended",
            ConversationEvent::ItemStarted { .. } => "item.started",
            ConversationEvent::ItemDelta { .. } => "item.delta",
            ConversationEvent::ItemCompleted { .. } => "item.completed",
            ConversationEvent::ModelRetry { .. } => "model.retry",
            ConversationEvent::ModelFallback { .. } => "model.fallback",
            ConversationEvent::CompactionStarted { .. } => "compaction.started",
            ConversationEvent::CompactionCompleted { .. } => "compaction.completed",
            ConversationEvent::CompactionFailed { .. } => "compaction.failed",
            ConversationEvent::ApprovalRequested { .. } => "approval.requested",
            ConversationEvent::ApprovalResolved { .. } => "approval.resolved",
        }
    }
}

impl ListEvent {
    /// The conversation the event is about (none for a snapshot).
    pub fn conversation_id(&self) -> Option<&str> {
        match self {
            ListEvent::Snapshot { .. } => None,
            ListEvent::ConversationCreated { conversation }
            | ListEvent::ConversationUpdated { conversation } => Some(&conversation.id),
            ListEvent::ConversationDeleted { conversation_id } => Some(conversation_id),
            ListEvent::ApprovalRequested { approval }
            | ListEvent::ApprovalResolved { approval } => Some(&approval.conversation_id),
            ListEvent::ProcessStarted { process } | ListEvent::ProcessEnded { process } => {
                Some(&process.conversation_id)
            }
        }
    }
}

impl BusEvent for ListEvent {
    fn kind(&self) -> &'static str {
        match self {
            ListEvent::Snapshot { .. } => "snapshot",
            ListEvent::ConversationCreated { .. } => "conversation.created",
            ListEvent::ConversationUpdated { .. } => "conversation.updated",
            ListEvent::ConversationDeleted { .. } => "conversation.deleted",
            ListEvent::ApprovalRequested { .. } => "approval.requested",
            ListEvent::ApprovalResolved { .. } => "approval.resolved",
            ListEvent::ProcessStarted { .. } => "process.started",
            ListEvent::ProcessEnded { .. } => "process.ended",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SSE `event:` name and the `type` inside `data` are one name.
    #[test]
    fn the_event_name_is_the_type_in_the_data() {
        let events = [
            ConversationEvent::ConversationDeleted {
                conversation_id: "c_1".into(),
            },
            ConversationEvent::ItemDelta {
                session_id: "s".into(),
                item_id: "i".into(),
                field: DeltaField::Output,
                delta: "x".into(),
            },
            ConversationEvent::CompactionStarted {
                session_id: "s".into(),
                reason: CompactionReason::Manual,
            },
        ];
        for event in events {
            let data = serde_json::to_value(&event).unwrap();
            assert_eq!(data["type"], event.kind());
        }
        let deleted = ListEvent::ConversationDeleted {
            conversation_id: "c_1".into(),
        };
        assert_eq!(
            serde_json::to_value(&deleted).unwrap(),
            serde_json::json!({"type": "conversation.deleted", "conversation_id": "c_1"})
        );
    }
}
