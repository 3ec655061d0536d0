//! When to push, and to whom: this instance's list events become notifications for every
//! subscribed device that is not following the service right now (no event stream open).
//!
//! - An approval waits: urgency high, kept by the push service for an hour.
//! - A turn ended (completed or failed) after running: urgency normal. An interrupted turn was
//!   stopped by someone who is looking, and a conversation seen idle without having been seen
//!   running here (a rename, a restart) is not news.
//!
//! A payload carries a title, a line of text, where to open the app and a tag; never a command
//! line or a tool's arguments (they could hold secrets), only names and titles, redacted.
//! A subscription whose device was revoked, or that its push service says is gone, is dropped;
//! a retryable failure is tried once more after the wait the push service asked for.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::send::{SendOutcome, Urgency, send};
use super::store::{Stored, SubscriptionStore};
use super::vapid::VapidKey;
use crate::api::events::ListEvent;
use crate::auth::TokenStore;
use crate::domain::{ConversationStatus, TurnStatus};

/// Who the push services may contact about this sender (RFC 8292's `sub`).
pub const CONTACT: &str = "mailto:openvaala@localhost";
/// How long a push service keeps an approval's message for a browser it cannot reach.
const APPROVAL_TTL_S: u32 = 60 * 60;
/// And a finished turn's.
const TURN_TTL_S: u32 = 6 * 60 * 60;
/// The longest wait before the one retry of a retryable failure.
const MOST_RETRY_WAIT: Duration = Duration::from_secs(60);
/// Conversations seen running are remembered up to this many (an instance runs far fewer).
const MOST_RUNNING: usize = 10_000;

/// What one notification says.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub title: String,
    pub body: String,
    /// Where the app opens: `/#/c/<conversation id>`.
    pub url: String,
    /// A newer notice with the same tag replaces the older on the device.
    pub tag: String,
    pub urgency: Urgency,
    pub ttl_s: u32,
}

impl Notice {
    fn payload(&self) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "title": self.title,
            "body": self.body,
            "url": self.url,
            "tag": self.tag,
        }))
        .expect("a notice is plain JSON")
    }
}

/// Turns list events into notices, remembering which conversations it saw running.
#[derive(Debug, Default)]
pub struct Notices {
    running: HashSet<String>,
}

impl Notices {
    pub fn of(&mut self, event: &ListEvent) -> Option<Notice> {
        match event {
            ListEvent::ApprovalRequested { approval } => Some(Notice {
                title: "Approval needed".to_owned(),
                body: format!("`{}` waits for your answer", approval.tool),
                url: format!("/#/c/{}", approval.conversation_id),
                tag: format!("approval-{}", approval.id),
                urgency: Urgency::High,
                ttl_s: APPROVAL_TTL_S,
            }),
            ListEvent::ConversationCreated { conversation }
            | ListEvent::ConversationUpdated { conversation } => {
                if conversation.status == ConversationStatus::Running {
                    if self.running.len() >= MOST_RUNNING {
                        self.running.clear();
                    }
                    self.running.insert(conversation.id.clone());
                    return None;
                }
                if !self.running.remove(&conversation.id) {
                    return None;
                }
                let last = conversation.last_turn.as_ref()?;
                let title = match conversation.title.trim() {
                    "" => "A conversation".to_owned(),
                    title => crate::redact::redact(title).into_owned(),
                };
                let (headline, body) = match last.status {
                    TurnStatus::Completed => ("Turn finished", format!("“{title}” has an answer")),
                    TurnStatus::Failed => {
                        ("Turn failed", format!("“{title}” stopped with an error"))
                    }
                    TurnStatus::Interrupted | TurnStatus::Running => return None,
                };
                Some(Notice {
                    title: headline.to_owned(),
                    body,
                    url: format!("/#/c/{}", conversation.id),
                    tag: format!("turn-{}", conversation.id),
                    urgency: Urgency::Normal,
                    ttl_s: TURN_TTL_S,
                })
            }
            _ => None,
        }
    }
}

/// Pushes notices of `events` until the channel closes.
pub async fn run(
    mut events: tokio::sync::mpsc::Receiver<ListEvent>,
    key: Arc<VapidKey>,
    subscriptions: SubscriptionStore,
    tokens: TokenStore,
) {
    let client = match super::send::client() {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "push notifications are off: no HTTP client");
            return;
        }
    };
    let mut notices = Notices::default();
    while let Some(event) = events.recv().await {
        let Some(notice) = notices.of(&event) else {
            continue;
        };

        let subscriptions = subscriptions.clone();
        let tokens = tokens.clone();
        let key = key.clone();
        let client = client.clone();
        let listed = tokio::task::spawn_blocking({
            let subscriptions = subscriptions.clone();
            move || subscriptions.list()
        })
        .await;
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot read the push subscriptions");
                continue;
            }
            Err(_) => continue,
        };
        for stored in listed {
            if stored.device.starts_with("tok_") && !tokens.is_live(&stored.device) {
                forget(&subscriptions, &stored.id, "its device was signed out").await;
                continue;
            }
            if tokens.is_looking(&stored.device) {
                crate::telemetry::metrics::push_sent("skipped");
                continue;
            }
            let notice = notice.clone();
            let (client, key, subscriptions) = (client.clone(), key.clone(), subscriptions.clone());
            tokio::spawn(async move {
                deliver(&client, &key, &subscriptions, &stored, &notice).await;
            });
        }
    }
}

async fn deliver(
    client: &reqwest::Client,
    key: &VapidKey,
    subscriptions: &SubscriptionStore,
    stored: &Stored,
    notice: &Notice,
) {
    let payload = notice.payload();
    for attempt in 0..2 {
        let outcome = send(
            client,
            key,
            CONTACT,
            &stored.subscription,
            &payload,
            notice.ttl_s,
            notice.urgency,
        )
        .await;
        crate::telemetry::metrics::push_sent(outcome_name(&outcome));
        match outcome {
            SendOutcome::Sent => return,
            SendOutcome::Gone => {
                forget(
                    subscriptions,
                    &stored.id,
                    "its push service says it is gone",
                )
                .await;
                return;
            }
            SendOutcome::Failed {
                error,
                retryable,
                retry_after,
            } => {
                tracing::warn!(subscription = %stored.id, %error, retryable, "a push notification was not sent");
                if !retryable || attempt == 1 {
                    return;
                }
                let wait = retry_after
                    .unwrap_or(Duration::from_secs(5))
                    .min(MOST_RETRY_WAIT);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

fn outcome_name(outcome: &SendOutcome) -> &'static str {
    match outcome {
        SendOutcome::Sent => "sent",
        SendOutcome::Gone => "gone",
        SendOutcome::Failed { .. } => "failed",
    }
}

async fn forget(subscriptions: &SubscriptionStore, id: &str, why: &'static str) {
    let subscriptions = subscriptions.clone();
    let id = id.to_owned();
    let removed = tokio::task::spawn_blocking(move || {
        let removed = subscriptions.remove_where(|stored| stored.id == id);
        (id, removed)
    })
    .await;
    match removed {
        Ok((id, Ok(_))) => tracing::info!(subscription = %id, why, "push subscription dropped"),
        Ok((id, Err(error))) => {
            tracing::warn!(subscription = %id, %error, "cannot drop a push subscription")
        }
        Err(_) => {}
    }
}
