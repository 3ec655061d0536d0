//! The service's event streams as the clients read them: each SSE event's `data` decoded as
//! the service's own event types (`api::events`), `ConversationEvent` for a conversation's
//! stream and `ListEvent` for the list's, so clients match on variants.
//!
//! An event this client cannot decode (a kind a newer service added, or a field value it does
//! not know) is skipped, with a debug log: a client keeps working against a newer service and
//! shows what it understands. Skipping never repeats anything on a reconnect: the stream
//! resumes after the last event given, and only skipped events can follow it.

use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::api::{Api, ApiError, service_error};
use crate::api::events::{ConversationEvent, ListEvent};
use crate::domain::ProcessInfo;
use crate::model::wire::sse_events;

/// One decoded event of a stream.
pub struct Received<E> {
    /// Every event the service sends has one; a stream could only lack it if something else
    /// answered.
    pub id: Option<String>,
    pub event: E,
    /// The SSE `event:` name and `data:` JSON as sent: `send --json` passes each event on
    /// unchanged (with any field a newer service added).
    pub name: String,
    pub raw: String,
}

/// One event of a conversation's stream.
pub type ServerEvent = Received<ConversationEvent>;

/// One event of a background process's output stream (`output`, then `ended`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ProcessEvent {
    Ended {
        process: ProcessInfo,
    },
    Output {
        output: String,
        /// The cursor to read on from.
        next: u64,
        /// Bytes written before `output` that were no longer kept.
        dropped: u64,
    },
}

/// An SSE event's data as `E`; `None` (logged) when this client cannot read it.
pub fn decode<E: DeserializeOwned>(id: String, name: String, data: String) -> Option<Received<E>> {
    match serde_json::from_str::<E>(&data) {
        Ok(event) => Some(Received {
            id: Some(id).filter(|id| !id.is_empty()),
            event,
            name,
            raw: data,
        }),
        Err(error) => {
            tracing::debug!(event = %name, %error, "skipped an event this client cannot read");
            None
        }
    }
}

impl Api {
    /// A conversation's events from its `snapshot` on, or, given the id of the last event
    /// seen, from the first one after it (or a fresh `snapshot` if the service cannot replay
    /// them). Ends when the service ends the stream.
    pub async fn events(
        &self,
        conversation_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<impl Stream<Item = ServerEvent> + use<>, ApiError> {
        let path = format!("/api/conversations/{conversation_id}/events");
        self.stream(&path, last_event_id).await
    }

    /// The conversation list's events, from its `snapshot` on.
    pub async fn list_events(
        &self,
    ) -> Result<impl Stream<Item = Received<ListEvent>> + use<>, ApiError> {
        self.stream("/api/events", None).await
    }

    /// A background process's output followed live from the cursor `since`: `Output`
    /// events as it writes, then one `Ended`.
    pub async fn process_output_events(
        &self,
        conversation_id: &str,
        process_id: &str,
        since: u64,
    ) -> Result<impl Stream<Item = Received<ProcessEvent>> + use<>, ApiError> {
        let path = format!(
            "/api/conversations/{conversation_id}/processes/{}/output?since={since}",
            super::endpoints::escaped(process_id)
        );
        self.stream(&path, None).await
    }

    async fn stream<E: DeserializeOwned>(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Result<impl Stream<Item = Received<E>> + use<E>, ApiError> {
        let mut request = self
            .request(reqwest::Method::GET, path)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request
            .send()
            .await
            .map_err(|error| self.unreachable(error))?;
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.bytes().await.unwrap_or_default();
            return Err(service_error(status, &body));
        }
        // A replay of what was missed comes as one large chunk: parsed in pieces (`sse_events`).
        Ok(sse_events(response.bytes_stream())
            .take_while(|event| std::future::ready(event.is_ok()))
            .filter_map(|event| async move {
                let event = event.ok()?;
                decode(event.id, event.event, event.data)
            }))
    }
}

/// The session an event is about, where it names one at its top (an item's, a turn's, a
/// delta's): what a client that shows one agent filters on.
pub fn session_of(event: &ConversationEvent) -> Option<&str> {
    use ConversationEvent as E;
    match event {
        E::ItemStarted { item } | E::ItemCompleted { item } => Some(&item.session_id),
        E::UsageUpdated { session_id, .. }
        | E::TurnStarted { session_id, .. }
        | E::TurnEnded { session_id, .. }
        | E::ItemDelta { session_id, .. }
        | E::ModelRetry { session_id, .. }
        | E::ModelFallback { session_id, .. }
        | E::CompactionStarted { session_id, .. }
        | E::CompactionCompleted { session_id, .. }
        | E::CompactionFailed { session_id, .. } => Some(session_id),
        _ => None,
    }
}

/// The turn an event is about, where it names one at its top (a turn's start or end, an
/// item's).
pub fn turn_of(event: &ConversationEvent) -> Option<&str> {
    use ConversationEvent as E;
    match event {
        E::ItemStarted { item } | E::ItemCompleted { item } => Some(&item.turn_id),
        E::TurnStarted { turn_id, .. }
        | E::TurnEnded { turn_id, .. }
        | E::ModelFallback { turn_id, .. } => Some(turn_id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_decode_as_the_service_types_and_unknown_ones_are_skipped() {
        let data = r#"{"type":"conversation.deleted","conversation_id":"c_1"}"#;
        let event =
            decode::<ConversationEvent>("e1".into(), "conversation.deleted".into(), data.into())
                .expect("it decodes");
        assert!(matches!(
            &event.event,
            ConversationEvent::ConversationDeleted { conversation_id } if conversation_id == "c_1"
        ));
        assert_eq!(
            (event.id.as_deref(), event.raw.as_str()),
            (Some("e1"), data)
        );
        let listed = decode::<ListEvent>(String::new(), "conversation.deleted".into(), data.into())
            .expect("the list's too");
        assert_eq!(listed.id, None);
        assert_eq!(listed.event.conversation_id(), Some("c_1"));
        let newer = r#"{"type":"thing.happened","what":1}"#;
        assert!(
            decode::<ConversationEvent>("e2".into(), "thing.happened".into(), newer.into())
                .is_none()
        );
    }
}
