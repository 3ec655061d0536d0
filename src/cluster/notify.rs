//! List-level events across instances: what one instance publishes on its `/api/events` bus
//! (a conversation created, updated, deleted) goes to the others through PostgreSQL's
//! `LISTEN/NOTIFY`, so every sidebar sees every instance's changes. Each instance republishes
//! what others sent on its own bus; its own notifications come back to it and are skipped.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::bus::EventBus;
use crate::index::postgres::PgIndex;

/// The channel every instance listens on.
const CHANNEL: &str = "openvaala_list";
/// NOTIFY payloads must stay under 8,000 bytes; a bigger event goes as its conversation's id,
/// and receivers read the conversation from the index.
const MAX_PAYLOAD: usize = 7_000;
/// How long to wait before listening again after the connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// Tells the other instances about a list-level event this instance published.
pub async fn notify(pool: &PgPool, instance: &str, kind: &str, data: &Value) {
    let mut payload = json!({ "from": instance, "kind": kind, "data": data }).to_string();
    if payload.len() > MAX_PAYLOAD {
        let conversation_id = data["conversation"]["id"]
            .as_str()
            .or(data["conversation_id"].as_str());
        payload = json!({ "from": instance, "kind": kind, "conversation_id": conversation_id })
            .to_string();
    }
    let sent = sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(&payload)
        .execute(pool)
        .await;
    if let Err(error) = sent {
        // Sidebars of other instances miss this change until their next list.
        tracing::warn!(%error, kind, "cannot tell the other instances about a list event");
    }
}

/// Republishes, on `bus`, what the other instances notify, until the process ends. A lost
/// connection is reopened; what was notified meanwhile is missed (a sidebar lists again when
/// its stream reconnects).
pub async fn listen(pool: PgPool, instance: String, bus: EventBus, index: PgIndex) {
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::debug!(%error, "cannot listen for list events; retrying");
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        if let Err(error) = listener.listen(CHANNEL).await {
            tracing::debug!(%error, "cannot listen for list events; retrying");
            tokio::time::sleep(RECONNECT_DELAY).await;
            continue;
        }
        loop {
            let notification = match listener.try_recv().await {
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
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

async fn republish(bus: &EventBus, index: &PgIndex, payload: &Value) {
    let kind: &'static str = match payload["kind"].as_str() {
        Some("conversation.created") => "conversation.created",
        Some("conversation.updated") => "conversation.updated",
        Some("conversation.deleted") => "conversation.deleted",
        _ => return,
    };
    if !payload["data"].is_null() {
        bus.publish(kind, &payload["data"]);
        return;
    }
    let Some(id) = payload["conversation_id"].as_str() else {
        return;
    };
    if kind == "conversation.deleted" {
        bus.publish(kind, &json!({ "conversation_id": id }));
        return;
    }
    if let Ok(Some(conversation)) = index.get(id).await {
        bus.publish(kind, &json!({ "conversation": conversation }));
    }
}
