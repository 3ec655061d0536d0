//! Server-Sent Events: one conversation's events (`/api/conversations/{id}/events`) and the
//! list-level changes (`/api/events`). A stream starts with a `snapshot` (or, with
//! `Last-Event-ID`, exactly the missed events) and then follows the live bus.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::{ApiError, AppState};
use crate::index::ListQuery;
use crate::runtime::events::{Event, EventId, Replay};

const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/events",
    tag = "events",
    summary = "Follow one conversation",
    description = crate::openapi::CONVERSATION_EVENTS,
    params(("id" = String, Path, description = "Conversation id"), crate::openapi::LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = String),
        (status = 404, description = "`not_found`: no such conversation", body = crate::openapi::ErrorBody),
    ),
)]
pub async fn conversation_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let subscription = state
        .runtime
        .subscribe(&id, last_event_id(&headers))
        .await?;
    let streams_done = state.streams_done.clone();
    let stream = async_stream::stream! {
        if let Some((id, snapshot)) = subscription.snapshot {
            yield Ok(SseEvent::default().id(id.to_string()).event("snapshot").data(snapshot.to_string()));
        }
        for event in subscription.replay {
            yield Ok(to_sse(&event));
        }
        let mut receiver = subscription.receiver;
        loop {
            let received = tokio::select! {
                received = receiver.recv() => received,
                () = streams_done.cancelled() => break,
            };
            match received {
                Ok(event) => yield Ok(to_sse(&event)),
                // Too slow to keep up: end the stream; the client reconnects with
                // Last-Event-ID and gets the missed events or a fresh snapshot.
                Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

#[utoipa::path(
    get,
    path = "/api/events",
    tag = "events",
    summary = "Follow the conversation list",
    description = crate::openapi::LIST_EVENTS,
    params(crate::openapi::LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = String),
    ),
)]
pub async fn list_events(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let bus = state.runtime.list_events().clone();
    let streams_done = state.streams_done.clone();
    let (receiver, replay) = match last_event_id(&headers) {
        Some(after) => match bus.resume(after) {
            (receiver, Replay::Events(events)) => (receiver, Some(events)),
            (receiver, Replay::Snapshot) => (receiver, None),
        },
        None => (bus.subscribe().0, None),
    };
    let snapshot = match &replay {
        Some(_) => None,
        None => {
            let page = state
                .runtime
                .list(&ListQuery {
                    limit: 50,
                    ..ListQuery::default()
                })
                .await?;
            Some(json!({ "conversations": page.conversations, "next_cursor": page.next_cursor }))
        }
    };
    let snapshot_id = bus.last_id();
    let stream = async_stream::stream! {
        if let Some(snapshot) = snapshot {
            yield Ok(SseEvent::default().id(snapshot_id.to_string()).event("snapshot").data(snapshot.to_string()));
        }
        for event in replay.unwrap_or_default() {
            yield Ok(to_sse(&event));
        }
        let mut receiver = receiver;
        loop {
            let received = tokio::select! {
                received = receiver.recv() => received,
                () = streams_done.cancelled() => break,
            };
            match received {
                Ok(event) => yield Ok(to_sse(&event)),
                Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

fn to_sse(event: &Event) -> SseEvent {
    SseEvent::default()
        .id(event.id.to_string())
        .event(event.kind)
        .data(&*event.data)
}

fn last_event_id(headers: &HeaderMap) -> Option<EventId> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}
