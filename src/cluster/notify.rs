//! List-level events across instances: what one instance publishes on its `/api/events` bus
//! (a conversation created, updated, deleted) goes to the others through PostgreSQL's
//! `LISTEN/NOTIFY`, so every sidebar sees every instance's changes. Each instance republishes
//! what others sent on its own bus; its own notifications come back to it and are skipped.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use serde::Deserialize;

use crate::api::events::ListEvent;
use crate::bus::{BusEvent, EventBus};
use crate::index::postgres::PgIndex;

/// The channel every instance listens on.
const CHANNEL: &str = "openvaala_list";
/// NOTIFY payloads must stay under 8,000 bytes; a bigger event goes as its conversation's id,
/// and receivers read the conversation from the index.
const MAX_PAYLOAD: usize = 7_000;
/// How long to wait before listening again after the connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// Tells the other instances about a list-level event this instance published.
pub async fn notify(pool: &PgPool, instance: &str, event: &ListEvent) {
    let mut payload = json!({ "from": instance, "event": event }).to_string();
    if payload.len() > MAX_PAYLOAD {
        let conversation_id = match event {
            ListEvent::ConversationCreated { conversation }
            | ListEvent::ConversationUpdated { conversation } => Some(conversation.id.as_str()),
            ListEvent::ConversationDeleted { conversation_id } => Some(conversation_id.as_str()),
            // Too big to pass on (a tool's long arguments): other instances miss it, and
            // their clients see it in `GET /api/approvals` of this instance.
            ListEvent::ApprovalRequested { .. }
            | ListEvent::ApprovalResolved { .. }
            | ListEvent::ProcessStarted { .. }
            | ListEvent::ProcessEnded { .. } => None,
            ListEvent::Snapshot { .. } => None,
        };
        payload =
            json!({ "from": instance, "kind": event.kind(), "conversation_id": conversation_id })
                .to_string();
    }
    let sent = sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(&payload)
        .execute(pool)
        .await;
    if let Err(error) = sent {
        // Sidebars of other instances miss this change until their next list.
        tracing::warn!(%error, kind = event.kind(), "cannot tell the other instances about a list event");
    }
}

/// Republishes, on `bus`, what the other instances notify, until `stop` is cancelled. A lost
/// connection is reopened; what was notified meanwhile is missed (a sidebar lists again when
/// its stream reconnects).
pub async fn listen(
    pool: PgPool,
    instance: String,
    bus: EventBus,
    index: PgIndex,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        let connected = tokio::select! {
            _ = stop.cancelled() => return,
            connected = PgListener::connect_with(&pool) => connected,
        };
        let mut listener = match connected {
            Ok(listener) => listener,
            Err(error) => {
                tracing::debug!(%error, "cannot listen for list events; retrying");
                pause(&stop).await;
                continue;
            }
        };
        let listening = tokio::select! {
            _ = stop.cancelled() => return,
            listening = listener.listen(CHANNEL) => listening,
        };
        if let Err(error) = listening {
            tracing::debug!(%error, "cannot listen for list events; retrying");
            pause(&stop).await;
            continue;
        }
        loop {
            let received = tokio::select! {
                _ = stop.cancelled() => return,
                received = listener.try_recv() => received,
            };
            let notification = match received {
                Ok(Some(notification)) => notification,
                // The connection was lost: listen again on a new one.
                Ok(None) | Err(_) => break,
            };
            let Ok(payload) = serde_json::from_str::<Value>(notification.payload()) else {
                continue;
            };
            if payload["from"] == instance.as_str() {
                continue;
            }
            republish(&bus, &index, &payload).await;
        }
        pause(&stop).await;
    }
}

/// Waits before listening again, or until `stop` is cancelled.
async fn pause(stop: &CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(RECONNECT_DELAY) => {}
    }
}

/// Publishes on this instance's bus what another instance notified: the event itself, or, for
/// one too big for a notification, the conversation as the index has it now.
async fn republish(bus: &EventBus, index: &PgIndex, payload: &Value) {
    if let Ok(event) = ListEvent::deserialize(&payload["event"]) {
        if !matches!(event, ListEvent::Snapshot { .. }) {
            bus.publish(&event);
        }
        return;
    }
    let Some(id) = payload["conversation_id"].as_str() else {
        return;
    };
    let event = match payload["kind"].as_str() {
        Some("conversation.deleted") => ListEvent::ConversationDeleted {
            conversation_id: id.to_owned(),
        },
        Some(kind @ ("conversation.created" | "conversation.updated")) => {
            let Ok(Some(conversation)) = index.get(id).await else {
                return;
            };
            if kind == "conversation.created" {
                ListEvent::ConversationCreated { conversation }
            } else {
                ListEvent::ConversationUpdated { conversation }
            }
        }
        _ => return,
    };
    bus.publish(&event);
}
