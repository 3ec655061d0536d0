//! One delivery of a notification to one URL hook, and the lines the outbox file holds: a
//! delivery when it is queued (whole), then each change of its state (small), or its removal.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not delivered yet: its next try is `next_attempt_at`.
    Pending,
    /// A try was answered with a 2xx.
    Delivered,
    /// Given up: the last try failed, the receiver answered 410 Gone, or its hook is no longer
    /// configured as it was.
    Failed,
}

impl Status {
    pub const ALL: [Status; 3] = [Status::Pending, Status::Delivered, Status::Failed];

    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Delivered => "delivered",
            Status::Failed => "failed",
        }
    }
}

/// What changes with each try.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub status: Status,
    /// Tries made (POSTs sent, answered or not).
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When a pending delivery is tried next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Why the last try failed, or why it was given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl State {
    /// A new delivery's: pending, first try now.
    pub fn new_at(now: DateTime<Utc>) -> State {
        State {
            status: Status::Pending,
            attempts: 0,
            last_attempt_at: None,
            next_attempt_at: Some(now),
            last_error: None,
        }
    }
}

/// One notification for one URL hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Its `webhook-id` (`msg_…`), fixed when it is first written: the same on every try and
    /// across restarts, so a receiver can tell a repeat from a new message.
    pub id: String,
    /// The hook's key (`hooks.turn_ended[0]`), looked up in the config at each try.
    pub hook: String,
    pub event: String,
    pub conversation_id: String,
    /// The SHA-256 (hex) of the hook's URL when it was queued: it is sent only while the hook
    /// still has that URL. (Not the URL itself, which may hold a credential.)
    pub url_sha256: String,
    /// The payload, redacted as every payload is.
    pub body: String,
    pub created_at: DateTime<Utc>,
    #[serde(flatten)]
    pub state: State,
}

impl Delivery {
    /// A new pending delivery of `body` to the hook `hook` at `url`.
    pub fn new(hook: String, url: &str, event: &str, conversation_id: &str, body: &str) -> Self {
        let now = Utc::now();
        Delivery {
            id: crate::domain::new_id("msg"),
            hook,
            event: event.to_owned(),
            conversation_id: conversation_id.to_owned(),
            url_sha256: url_fingerprint(url),
            body: body.to_owned(),
            created_at: now,
            state: State::new_at(now),
        }
    }
}

/// The SHA-256 of `url`, in hex.
pub fn url_fingerprint(url: &str) -> String {
    Sha256::digest(url.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A delivery's new state, by its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub id: String,
    #[serde(flatten)]
    pub state: State,
}

/// One line of the outbox file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// A delivery, whole: when it is queued, and each one kept when the file is compacted.
    Queued(Delivery),
    /// A delivery's state after a try.
    Changed(Change),
    /// A delivery let go to keep the outbox within its bound.
    Dropped { id: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_written() {
        let delivery = Delivery::new(
            "hooks.turn_ended[0]".to_owned(),
            "http://127.0.0.1:9/hook?token=s3cret",
            "turn_ended",
            "c_1",
            r#"{"event":"turn_ended"}"#,
        );
        assert!(delivery.id.starts_with("msg_"), "{}", delivery.id);
        let text = serde_json::to_string(&Line::Queued(delivery.clone())).unwrap();
        assert!(!text.contains("s3cret"), "the URL is not stored: {text}");
        assert!(text.contains(r#""status":"pending""#), "{text}");
        let back: Line = serde_json::from_str(&text).unwrap();
        assert_eq!(back, Line::Queued(delivery));
        let change = Line::Changed(Change {
            id: "msg_1".to_owned(),
            state: State {
                status: Status::Delivered,
                attempts: 2,
                last_attempt_at: Some(Utc::now()),
                next_attempt_at: None,
                last_error: None,
            },
        });
        let text = serde_json::to_string(&change).unwrap();
        assert!(text.len() < 160, "a change is a small line: {text}");
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), change);
    }
}
