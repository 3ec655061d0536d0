//! The response bodies of the API that are not domain objects themselves.

use serde::Serialize;

use crate::domain::{Conversation, Item, Message, Session, Usage};

/// `GET /api/conversations/{id}`: the conversation with its sessions, waiting messages and usage.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationView {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub sessions: Vec<Session>,
    pub pending: Vec<Message>,
    pub usage: Usage,
}

/// `POST /api/conversations/{id}/compact`: the stored summary and the usage it leaves.
#[derive(Debug, Clone, Serialize)]
pub struct CompactOutcome {
    pub summary: Item,
    pub usage: Usage,
}

/// `GET /api/conversations/{id}/items`: a page of a session's history.
#[derive(Debug, Serialize)]
pub struct ItemsPage {
    pub items: Vec<Item>,
    pub next_after_seq: Option<u64>,
}
