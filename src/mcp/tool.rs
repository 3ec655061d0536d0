//! A tool of a server as the model sees it, and what a call of it produced: the values the hub
//! hands out and its children (`call`, `content`, `server`) build.

use serde_json::Value;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`, within the providers' limits.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    Completed,
    /// The server reported an error, did not answer in time, or is down.
    Failed,
    Interrupted,
}

/// What a call produced, as text for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub text: String,
    pub status: CallStatus,
    /// The result's images (the text notes each one).
    pub images: Vec<crate::domain::Image>,
}

impl CallOutcome {
    pub(super) fn failed(text: impl Into<String>) -> CallOutcome {
        CallOutcome {
            text: text.into(),
            status: CallStatus::Failed,
            images: Vec::new(),
        }
    }

    pub(super) fn interrupted(text: impl Into<String>) -> CallOutcome {
        CallOutcome {
            text: text.into(),
            status: CallStatus::Interrupted,
            images: Vec::new(),
        }
    }
}
