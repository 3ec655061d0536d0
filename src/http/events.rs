//! Server-Sent Events: one conversation's events (`/api/conversations/{id}/events`) and the
//! list-level changes (`/api/events`). A stream starts with a `snapshot` (or, with
//! `Last-Event-ID`, exactly the missed events) and then follows the live bus.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::{ApiError, AppState};
use crate::index::ListQuery;
use crate::runtime::events::{Event, EventBus, EventId, Replay};

const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/events",
    tag = "events",
    summary = "Follow one conversation",
    description = crate::openapi::CONVERSATION_EVENTS,
    params(("id" = String, Path, description = "Conversation id"), crate::openapi::LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = serde_json::Value),
        (status = 404, description = "`not_found`: no such conversation", body = crate::openapi::ErrorBody),
    ),
)]
pub async fn conversation_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let resume_after = last_event_id(&headers);
    let subscription = state.runtime.subscribe(&id, resume_after).await?;
    let mut first = Vec::new();
    let mut last = resume_after;
    if let Some((id, snapshot)) = subscription.snapshot {
        first.push(snapshot_event(id, snapshot.to_string()));
        last = Some(id);
    }
    for event in &subscription.replay {
        first.push(to_sse(event));
        last = Some(event.id);
    }
    let live = follow(
        subscription.bus,
        subscription.receiver,
        last,
        state.streams_done.clone(),
    );
    let stream = futures::stream::iter(first).chain(live.map(|event| to_sse(&event)));
    Ok(Sse::new(stream.map(Ok)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

#[utoipa::path(
    get,
    path = "/api/events",
    tag = "events",
    summary = "Follow the conversation list",
    description = crate::openapi::LIST_EVENTS,
    params(crate::openapi::LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = serde_json::Value),
    ),
)]
pub async fn list_events(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let bus = state.runtime.list_events().clone();
    let resumed = last_event_id(&headers).map(|after| (after, bus.resume(after)));
    let (receiver, first, last) = match resumed {
        Some((after, (receiver, Replay::Events(events)))) => {
            let last = events.last().map_or(after, |event| event.id);
            (receiver, events.iter().map(to_sse).collect(), last)
        }
        _ => {
            // Subscribe before reading the page, so no change falls in between.
            let (receiver, _) = bus.subscribe();
            let last = bus.last_id();
            let query = ListQuery {
                limit: 50,
                ..ListQuery::default()
            };
            let page = state.runtime.list(&query).await?;
            let snapshot =
                json!({ "conversations": page.conversations, "next_cursor": page.next_cursor });
            (
                receiver,
                vec![snapshot_event(last, snapshot.to_string())],
                last,
            )
        }
    };
    let live = follow(bus, receiver, Some(last), state.streams_done.clone());
    let stream = futures::stream::iter(first).chain(live.map(|event| to_sse(&event)));
    Ok(Sse::new(stream.map(Ok)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The live events of a bus. A subscriber that falls behind the broadcast channel catches up
/// from the bus's replay buffer without slowing anyone; if even that has moved past it, the
/// stream ends and the client reconnects (with `Last-Event-ID`, getting a snapshot).
fn follow(
    bus: EventBus,
    mut receiver: broadcast::Receiver<Event>,
    mut last: Option<EventId>,
    streams_done: CancellationToken,
) -> impl Stream<Item = Event> {
    async_stream::stream! {
        // One future for the whole stream, not a new one per event.
        let stopping = streams_done.cancelled_owned();
        tokio::pin!(stopping);
        loop {
            let received = tokio::select! {
                received = receiver.recv() => received,
                () = &mut stopping => break,
            };
            match received {
                Ok(event) => {
                    last = Some(event.id);
                    yield event;
                }
                Err(RecvError::Lagged(_)) => {
                    let Some(after) = last else { break };
                    let (fresh, replay) = bus.resume(after);
                    let Replay::Events(missed) = replay else { break };
                    receiver = fresh;
                    for event in missed {
                        last = Some(event.id);
                        yield event;
                    }
                }
                Err(RecvError::Closed) => break,
            }
        }
    }
}

fn snapshot_event(id: EventId, data: String) -> SseEvent {
    SseEvent::default()
        .id(id.to_string())
        .event("snapshot")
        .data(data)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_catches_up_from_the_replay_buffer() {
        let bus = EventBus::new();
        let (receiver, _) = bus.subscribe();
        let before = bus.last_id();
        let first = bus.publish("item.delta", &json!({ "n": 0 }));
        // Three times the channel's capacity, while the subscriber reads nothing.
        for n in 1..3000 {
            bus.publish("item.delta", &json!({ "n": n }));
        }
        let done = CancellationToken::new();
        let events: Vec<Event> = follow(bus.clone(), receiver, Some(before), done.clone())
            .take(3000)
            .collect()
            .await;
        let numbers: Vec<u64> = events
            .iter()
            .map(|e| {
                serde_json::from_str::<serde_json::Value>(&e.data).unwrap()["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        // The first event was delivered before the lag was noticed, or replayed: either way
        // every event arrives exactly once, in order.
        assert!(
            numbers == (0..3000).collect::<Vec<u64>>(),
            "{} events, not 0..3000 in order",
            numbers.len()
        );
        assert_eq!(events[0].id, first.id);
    }

    #[tokio::test]
    async fn a_subscriber_too_far_behind_is_cut_loose_to_reconnect() {
        let bus = EventBus::new();
        let (receiver, _) = bus.subscribe();
        let first = bus.publish("item.delta", &json!({ "n": 0 }));
        for n in 1..10_000 {
            bus.publish("item.delta", &json!({ "n": n }));
        }
        let done = CancellationToken::new();
        let events: Vec<Event> = follow(bus, receiver, Some(first.id), done).collect().await;
        assert!(
            events.is_empty(),
            "the stream ends; a reconnect gets a snapshot"
        );
    }
}
