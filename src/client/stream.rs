//! A conversation's event stream that outlives a dropped connection: when the service ends it
//! (a restart, a network cut), it is opened again with the last event's id (`Last-Event-ID`),
//! so the service replays what was missed, or answers with a fresh `snapshot` when it cannot
//! (it restarted). Used by `send` and the full-screen `chat`.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::{BoxStream, Fuse};
use futures::{Stream, StreamExt};

use super::api::{Api, ApiError};
use super::events::ServerEvent;
use crate::bus::EventId;

/// How long a lost stream is tried again before the client gives up.
pub const RECONNECT_FOR: Duration = Duration::from_secs(30);
/// The pause between two tries.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// What the stream gives next.
pub enum Next {
    /// Boxed: an event (a snapshot) is large, the other answers small.
    Event(Box<ServerEvent>),
    /// The connection dropped and a new one is open; its first event follows (a replay of what
    /// was missed, or a `snapshot` when the service could not replay it).
    Reconnected,
    /// The connection dropped and could not be opened again: why.
    Lost(String),
}

pub struct Events {
    api: Api,
    conversation: String,
    stream: Fuse<BoxStream<'static, ServerEvent>>,
    /// Events read already (while a question waited for its answer), in order, to come first.
    pub put_aside: VecDeque<ServerEvent>,
    last_event_id: Option<String>,
}

impl Events {
    /// `first`: events read from `stream` already, to be given first.
    pub fn new(
        api: &Api,
        conversation: &str,
        first: Vec<ServerEvent>,
        stream: impl Stream<Item = ServerEvent> + Send + 'static,
    ) -> Events {
        let last_event_id = first.iter().rev().find_map(|event| event.id.clone());
        Events {
            api: api.clone(),
            conversation: conversation.to_owned(),
            stream: stream.boxed().fuse(),
            put_aside: first.into(),
            last_event_id,
        }
    }

    /// The next event from the connection itself (not what was put aside); `None` once the
    /// connection has ended.
    pub async fn pull(&mut self) -> Option<ServerEvent> {
        let event = self.stream.next().await?;
        if event.id.is_some() {
            self.last_event_id.clone_from(&event.id);
        }
        Some(event)
    }

    pub async fn next(&mut self) -> Next {
        if let Some(event) = self.put_aside.pop_front() {
            return Next::Event(Box::new(event));
        }
        if let Some(event) = self.pull().await {
            return Next::Event(Box::new(event));
        }
        match reconnect(&self.api, &self.conversation, self.last_event_id.as_deref()).await {
            Ok(stream) => {
                self.stream = stream.boxed().fuse();
                Next::Reconnected
            }
            Err(why) => Next::Lost(why),
        }
    }
}

/// A new conversation's events from its very first one, so that nothing its first turn did
/// before a stream could be opened is missed (the first `model.retry`, say): the first
/// connection's `snapshot` names the stream's epoch, and a second asks for everything after
/// event 0 of it. Should the service no longer hold them, it answers with a fresh `snapshot`.
pub async fn from_first_event(api: &Api, id: &str) -> Result<Events, ApiError> {
    let mut stream = api.events(id, None).await?.boxed();
    let Some(snapshot) = stream.next().await else {
        // Ended at once: reading it again reconnects.
        return Ok(Events::new(api, id, Vec::new(), stream));
    };
    let from_start = snapshot
        .id
        .as_deref()
        .and_then(|last| last.parse::<EventId>().ok())
        .map(|last| EventId { n: 0, ..last }.to_string());
    let Some(from_start) = from_start else {
        return Ok(Events::new(api, id, vec![snapshot], stream));
    };
    drop(stream);
    let replay = api.events(id, Some(&from_start)).await?;
    Ok(Events::new(api, id, Vec::new(), replay))
}

/// Opens the conversation's stream again after `last_event_id`, trying for `RECONNECT_FOR`;
/// a conversation that no longer exists is not tried again.
pub async fn reconnect(
    api: &Api,
    conversation: &str,
    last_event_id: Option<&str>,
) -> Result<impl Stream<Item = ServerEvent> + Send + use<>, String> {
    let deadline = tokio::time::Instant::now() + RECONNECT_FOR;
    loop {
        tokio::time::sleep(RETRY_EVERY).await;
        match api.events(conversation, last_event_id).await {
            Ok(events) => return Ok(events),
            Err(error) if error.code() == Some("not_found") => {
                return Err(format!("the conversation is gone: {error}"));
            }
            Err(error) if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "the event stream was lost and could not be opened again within {} s: {error}",
                    RECONNECT_FOR.as_secs()
                ));
            }
            Err(_) => {}
        }
    }
}
