//! The request bodies of the API, as the service reads them (unknown fields are refused).

use serde::{Deserialize, Serialize};

use crate::domain::{Image, MessageMode};

/// `POST /api/conversations`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    pub text: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub images: Vec<Image>,
}

/// `POST /api/conversations/{id}/messages`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    pub text: String,
    #[serde(default)]
    pub mode: MessageMode,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub images: Vec<Image>,
}

/// `PATCH /api/conversations/{id}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationPatch {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub archived: Option<bool>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// `PATCH /api/conversations/{id}/pending/{message_id}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingPatch {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub mode: Option<MessageMode>,
}
