//! Server-Sent Events: one conversation's events (`/api/conversations/{id}/events`) and the
//! list-level changes (`/api/events`). A stream starts with a `snapshot` (or, with
//! `Last-Event-ID`, exactly the missed events) and then follows the live bus. Events come from
//! the bus already encoded, so sending one to a thousand subscribers copies nothing.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::events::ListEvent;
use crate::bus::{Event, EventBus, EventId, Replay};
use crate::index::ListQuery;

/// How often an SSE stream sends a comment, so that proxies keep an idle stream open and a
/// client that has gone is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
const KEEP_ALIVE_COMMENT: &[u8] = b":\n\n";

/// The description of `GET /api/conversations/{id}/events`.
pub const CONVERSATION_EVENTS: &str = "\
Everything about one conversation, its sub-agents included, as Server-Sent Events. Each event \
has `id:` (opaque, increasing), `event:` (its type) and `data:` (JSON on one line): a \
`ConversationEvent` (see the schemas), whose `type` is the event's type again. A keep-alive \
comment goes out at least every 15 s. A new connection first gets `snapshot`; a reconnect with \
`Last-Event-ID` gets exactly the events after that id, or a fresh `snapshot` when that id is \
unknown or too old. The stream ends after `conversation.deleted`, and after `conversation.moved` \
(reconnect to follow the conversation where it is now).";

/// The description of `GET /api/events`.
pub const LIST_EVENTS: &str = "\
List-level changes for sidebars, as Server-Sent Events. Each event has `id:` (opaque, \
increasing), `event:` (its type) and `data:` (JSON on one line): a `ListEvent` (see the \
schemas), whose `type` is the event's type again. A keep-alive comment goes out at least every \
15 s. A new connection first gets `snapshot` (the first page of the active list); a reconnect \
with `Last-Event-ID` gets exactly the events after that id, or a fresh `snapshot`.";

/// The `Last-Event-ID` header of the event streams. Documentation only: the handlers read the
/// header from the request's headers (`last_event_id`), because axum has no extractor that
/// reads a header into a struct. Optional headers are `String`s with `required = false`: an
/// `Option` would make them nullable, which a header is not.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct LastEventIdHeader {
    /// The last event id seen: a reconnect gets exactly the events after it, or a fresh
    /// `snapshot` when it is unknown or too old.
    #[param(rename = "Last-Event-ID", required = false)]
    pub last_event_id: String,
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/events",
    tag = "events",
    summary = "Follow one conversation",
    description = CONVERSATION_EVENTS,
    params(("id" = String, Path, description = "Conversation id"), LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = serde_json::Value),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
    ),
)]
pub async fn conversation_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let resume_after = last_event_id(&headers);
    let subscription = state.runtime.subscribe(&id, resume_after).await?;
    let mut first = Vec::new();
    let mut last = resume_after;
    if let Some((id, snapshot)) = subscription.snapshot {
        first.push(Event::of(id, &snapshot));
        last = Some(id);
    }
    for event in subscription.replay {
        last = Some(event.id);
        first.push(event);
    }
    let keep_alive = crate::cluster::forward::keep_alive(&headers, KEEP_ALIVE);
    // A replay that already holds the stream's last event (`conversation.moved` or
    // `.deleted`, published just before this subscription) ends with it: nothing live follows.
    if Ends::AtDeletion.cut(&mut first) {
        return Ok(event_stream(first, futures::stream::empty(), keep_alive));
    }
    let live = follow(
        subscription.bus,
        subscription.receiver,
        last,
        state.streams_done.clone(),
        Ends::AtDeletion,
    );
    Ok(event_stream(first, live, keep_alive))
}

#[utoipa::path(
    get,
    path = "/api/events",
    tag = "events",
    summary = "Follow the conversation list",
    description = LIST_EVENTS,
    params(LastEventIdHeader),
    responses(
        (status = 200, description = "A stream of Server-Sent Events: `snapshot` (or the missed events), then live events", content_type = "text/event-stream", body = serde_json::Value),
    ),
)]
pub async fn list_events(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bus = state.runtime.list_events().clone();
    let resumed = last_event_id(&headers).map(|after| (after, bus.resume(after)));
    let (receiver, first, last) = match resumed {
        Some((after, (receiver, Replay::Events(events)))) => {
            let last = events.last().map_or(after, |event| event.id);
            (receiver, events, last)
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
            let snapshot = ListEvent::Snapshot {
                conversations: page.conversations,
                next_cursor: page.next_cursor,
            };
            (receiver, vec![Event::of(last, &snapshot)], last)
        }
    };
    let live = follow(
        bus,
        receiver,
        Some(last),
        state.streams_done.clone(),
        Ends::Never,
    );
    Ok(event_stream(first, live, KEEP_ALIVE))
}

/// The SSE response: `first` (a snapshot or the missed events), then `live`, with a keep-alive
/// comment every `every`. It ends when `live` does.
fn event_stream(
    first: Vec<Event>,
    live: impl Stream<Item = Vec<Event>> + Send + 'static,
    every: Duration,
) -> Response {
    let frames = async_stream::stream! {
        // Counted while the stream lives (dropped with it when the client goes).
        let _subscriber = crate::telemetry::metrics::Subscriber::open();
        if !first.is_empty() {
            yield concat_frames(&first);
        }
        tokio::pin!(live);
        let start = tokio::time::Instant::now() + every;
        let mut keep_alive = tokio::time::interval_at(start, every);
        loop {
            tokio::select! {
                // Fixed order: no random number per event for every subscriber.
                biased;
                batch = live.next() => match batch {
                    Some(batch) => yield concat_frames(&batch),
                    None => break,
                },
                _ = keep_alive.tick() => yield Bytes::from_static(KEEP_ALIVE_COMMENT),
            }
        }
    };
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames.map(Ok::<_, Infallible>)),
    )
        .into_response()
}

/// The frames of a batch as one chunk: one chunked-encoding frame and one write for the
/// subscriber's connection. hyper writes at most 16 queued body chunks at once, so a catch-up of
/// thousands of events sent event by event would take hundreds of writes, and writes are most
/// of what a fan-out costs.
fn concat_frames(batch: &[Event]) -> Bytes {
    if let [event] = batch {
        return event.frame.clone();
    }
    let len = batch.iter().map(|event| event.frame.len()).sum();
    let mut chunk = BytesMut::with_capacity(len);
    for event in batch {
        chunk.extend_from_slice(&event.frame);
    }
    chunk.freeze()
}

/// The events after which a conversation's stream ends: it was deleted, or this instance no
/// longer serves it (the client reconnects to where it is now).
const LAST_EVENTS: [&str; 2] = ["conversation.deleted", "conversation.moved"];

/// Which events end a stream after they are sent.
#[derive(Clone, Copy)]
enum Ends {
    /// A conversation's stream ends with its `conversation.deleted` or `conversation.moved`:
    /// the actor is gone, but the stream's clone of the bus would keep it open for good.
    AtDeletion,
    /// The list's stream carries every conversation's deletion and goes on.
    Never,
}

impl Ends {
    /// Drops what follows the stream's last event in `batch`; whether the batch holds it.
    fn cut(self, batch: &mut Vec<Event>) -> bool {
        let Ends::AtDeletion = self else {
            return false;
        };
        match batch
            .iter()
            .position(|event| LAST_EVENTS.contains(&event.kind))
        {
            Some(at) => {
                batch.truncate(at + 1);
                true
            }
            None => false,
        }
    }
}

/// How many bytes of events `follow` gathers into one batch at most.
const MAX_BATCH_BYTES: usize = 64 * 1024;

/// The live events of a bus, in batches: each batch is an event and whatever else was already
/// waiting for this subscriber, its consecutive deltas of one item merged (`coalesce`). A
/// subscriber that falls behind the broadcast channel catches up from the bus's replay buffer
/// without slowing anyone; if even that has moved past it, the stream ends and the client
/// reconnects (with `Last-Event-ID`, getting a snapshot).
fn follow(
    bus: EventBus,
    mut receiver: broadcast::Receiver<Event>,
    mut last: Option<EventId>,
    streams_done: CancellationToken,
    ends: Ends,
) -> impl Stream<Item = Vec<Event>> {
    async_stream::stream! {
        // One future for the whole stream, not a new one per event.
        let stopping = streams_done.cancelled_owned();
        tokio::pin!(stopping);
        loop {
            let received = tokio::select! {
                // Fixed order: a stopping service is noticed first, and no random number is
                // drawn per event for every subscriber.
                biased;
                () = &mut stopping => break,
                received = receiver.recv() => received,
            };
            let mut lagged = false;
            match received {
                Ok(event) => {
                    let mut bytes = event.frame.len();
                    let mut batch = vec![event];
                    while bytes < MAX_BATCH_BYTES {
                        match receiver.try_recv() {
                            Ok(event) => {
                                bytes += event.frame.len();
                                batch.push(event);
                            }
                            Err(TryRecvError::Lagged(_)) => {
                                lagged = true;
                                break;
                            }
                            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                        }
                    }
                    last = batch.last().map(|event| event.id);
                    let end = ends.cut(&mut batch);
                    yield super::coalesce::coalesce(batch);
                    if end {
                        break;
                    }
                }
                Err(RecvError::Lagged(_)) => lagged = true,
                Err(RecvError::Closed) => break,
            }
            if lagged {
                let Some(mut missed) = catch_up(&bus, &mut receiver, last) else { break };
                if let Some(newest) = missed.last() {
                    last = Some(newest.id);
                    let end = ends.cut(&mut missed);
                    yield super::coalesce::coalesce(missed);
                    if end {
                        break;
                    }
                }
            }
        }
    }
}

/// A lagging subscriber's way back: a fresh receiver and the events after `last` from the
/// replay buffer, or `None` if they are gone from it too.
fn catch_up(
    bus: &EventBus,
    receiver: &mut broadcast::Receiver<Event>,
    last: Option<EventId>,
) -> Option<Vec<Event>> {
    let (fresh, replay) = bus.resume(last?);
    let Replay::Events(missed) = replay else {
        return None;
    };
    *receiver = fresh;
    Some(missed)
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
        let first = bus.publish_as("item.delta", &json!({ "n": 0 }));
        // Three times the channel's capacity, while the subscriber reads nothing.
        for n in 1..3000 {
            bus.publish_as("item.delta", &json!({ "n": n }));
        }
        let done = CancellationToken::new();
        let mut events: Vec<Event> = Vec::new();
        let batches = follow(
            bus.clone(),
            receiver,
            Some(before),
            done.clone(),
            Ends::Never,
        );
        tokio::pin!(batches);
        while events.len() < 3000 {
            events.extend(batches.next().await.expect("the stream goes on"));
        }
        let numbers: Vec<u64> = events
            .iter()
            .map(|e| {
                serde_json::from_str::<serde_json::Value>(e.data()).unwrap()["n"]
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
    async fn events_already_waiting_go_out_as_one_batch_in_one_chunk() {
        let bus = EventBus::new();
        let (receiver, before) = bus.subscribe();
        let published: Vec<Event> = (0..10)
            .map(|n| bus.publish_as("item.delta", &json!({ "n": n })))
            .collect();
        let done = CancellationToken::new();
        let batches = follow(bus, receiver, before, done, Ends::Never);
        tokio::pin!(batches);
        let batch = batches.next().await.expect("a batch");
        let ids: Vec<EventId> = batch.iter().map(|event| event.id).collect();
        let expected: Vec<EventId> = published.iter().map(|event| event.id).collect();
        assert_eq!(ids, expected);
        let chunk = concat_frames(&batch);
        let frames: Vec<u8> = published.iter().flat_map(|e| e.frame.to_vec()).collect();
        assert_eq!(&chunk[..], &frames[..]);
    }

    #[tokio::test]
    async fn a_conversation_stream_ends_with_its_deletion_though_the_bus_lives_on() {
        let bus = EventBus::new();
        let (receiver, before) = bus.subscribe();
        bus.publish_as("conversation.updated", &json!({ "n": 0 }));
        let deleted = bus.publish(
            &crate::api::events::ConversationEvent::ConversationDeleted {
                conversation_id: "c".to_owned(),
            },
        );
        bus.publish_as("conversation.updated", &json!({ "n": 1 }));
        let done = CancellationToken::new();
        let live = follow(bus.clone(), receiver, before, done, Ends::AtDeletion);
        let events: Vec<Event> = live.concat().await;
        let kinds: Vec<&str> = events.iter().map(|event| event.kind).collect();
        assert_eq!(kinds, ["conversation.updated", "conversation.deleted"]);
        assert_eq!(events[1].id, deleted.id);
    }

    #[tokio::test]
    async fn a_subscriber_too_far_behind_is_cut_loose_to_reconnect() {
        let bus = EventBus::new();
        let (receiver, _) = bus.subscribe();
        let first = bus.publish_as("item.delta", &json!({ "n": 0 }));
        for n in 1..10_000 {
            bus.publish_as("item.delta", &json!({ "n": n }));
        }
        let done = CancellationToken::new();
        let events: Vec<Vec<Event>> = follow(bus, receiver, Some(first.id), done, Ends::Never)
            .collect()
            .await;
        assert!(
            events.is_empty(),
            "the stream ends; a reconnect gets a snapshot"
        );
    }
}
