//! The event bus of one conversation (or of the conversation list): events get an increasing id,
//! are encoded once as the SSE frame every subscriber is sent, kept in a short replay buffer for
//! `Last-Event-ID`, and fanned out on a broadcast channel. A subscriber that falls behind loses
//! its place rather than slowing anyone (invariant 5, the same view for every client): it is
//! told so and gets a fresh snapshot. The bus knows events only as `BusEvent`s: something with
//! an SSE `event:` name that serializes as its `data:` (the typed events are in `api::events`).

use std::collections::VecDeque;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

/// What a bus carries: an event that names its SSE `event:` and serializes as its `data:`.
pub trait BusEvent: Serialize {
    fn kind(&self) -> &'static str;
}

/// One event, encoded once as it goes out on SSE (`id:`, `event:`, `data:` with JSON on one
/// line, a blank line); every subscriber is sent the same bytes.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: EventId,
    pub kind: &'static str,
    pub frame: Bytes,
    /// Where the JSON starts in `frame` (it ends before the closing blank line).
    data_start: usize,
}

impl Event {
    /// Encodes an event. serde_json writes no raw newline, so `data:` needs no splitting.
    pub fn encode(id: EventId, kind: &'static str, data: &impl Serialize) -> Event {
        let mut frame = Vec::with_capacity(128);
        // Writing to a Vec cannot fail; serializing an event's own types cannot either.
        let _ = write!(frame, "id: {id}\nevent: {kind}\ndata: ");
        let data_start = frame.len();
        serde_json::to_writer(&mut frame, data).expect("events serialize");
        frame.extend_from_slice(b"\n\n");
        Event {
            id,
            kind,
            frame: frame.into(),
            data_start,
        }
    }

    /// Encodes a typed event under its own name.
    pub fn of(id: EventId, event: &impl BusEvent) -> Event {
        Event::encode(id, event.kind(), event)
    }

    /// The event's JSON.
    pub fn data(&self) -> &str {
        std::str::from_utf8(&self.frame[self.data_start..self.frame.len() - 2])
            .expect("events are encoded from JSON")
    }
}

/// Event ids are `<epoch>-<n>`: `n` increases per bus; `epoch` changes at every start of the
/// service (and of a conversation's actor), so an id from before a restart is recognised as
/// unknown and answered with a fresh snapshot instead of a wrong replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId {
    pub epoch: u64,
    pub n: u64,
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.epoch, self.n)
    }
}

impl std::str::FromStr for EventId {
    type Err = ();
    fn from_str(s: &str) -> Result<EventId, ()> {
        let (epoch, n) = s.split_once('-').ok_or(())?;
        Ok(EventId {
            epoch: epoch.parse().map_err(|_| ())?,
            n: n.parse().map_err(|_| ())?,
        })
    }
}

/// How many recent events a bus keeps for reconnecting clients, and how many bytes of them at
/// most: the list's bus lives as long as the service, and a conversation's as long as it is
/// loaded, so neither may hold more than a reconnect needs. A client that was away longer gets
/// a fresh snapshot.
const REPLAY_CAPACITY: usize = 4096;
const REPLAY_BYTES: usize = 512 * 1024;
/// How far a live subscriber may fall behind the broadcast channel before it has to catch up
/// from the replay buffer. The channel allocates every slot up front, per live conversation,
/// so it is kept small; the replay buffer only grows as events happen.
const CHANNEL_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub struct EventBus {
    inner: Arc<BusInner>,
}

#[derive(Debug)]
struct BusInner {
    epoch: u64,
    sender: broadcast::Sender<Event>,
    /// Recent events and the next sequence number. Only the owner (an actor) publishes, so the
    /// lock is never contended by writers; readers take it briefly to replay.
    recent: Mutex<Recent>,
}

#[derive(Debug)]
struct Recent {
    next: u64,
    events: VecDeque<Event>,
    /// The frames' bytes in `events`.
    bytes: usize,
}

/// What a reconnecting client gets.
pub enum Replay {
    /// Exactly the events after the id it gave.
    Events(Vec<Event>),
    /// The id is unknown or too old: it needs a snapshot.
    Snapshot,
}

impl EventBus {
    pub fn new() -> EventBus {
        let (sender, _) = broadcast::channel(CHANNEL_CAPACITY);
        EventBus {
            inner: Arc::new(BusInner {
                epoch: fresh_epoch(),
                sender,
                recent: Mutex::new(Recent {
                    next: 1,
                    events: VecDeque::new(),
                    bytes: 0,
                }),
            }),
        }
    }

    /// Publishes an event to every subscriber. Never waits.
    pub fn publish(&self, event: &impl BusEvent) -> Event {
        self.publish_encoded(event.kind(), event)
    }

    /// Publishes any JSON under any name: for the bus's own tests and those of the SSE writer,
    /// which need many cheap events; the service publishes only `BusEvent`s.
    #[cfg(test)]
    pub(crate) fn publish_as(&self, kind: &'static str, data: &impl Serialize) -> Event {
        self.publish_encoded(kind, data)
    }

    fn publish_encoded(&self, kind: &'static str, data: &impl Serialize) -> Event {
        let mut recent = self.inner.recent.lock().expect("event bus lock");
        let id = EventId {
            epoch: self.inner.epoch,
            n: recent.next,
        };
        let event = Event::encode(id, kind, data);
        recent.next += 1;
        recent.bytes += event.frame.len();
        recent.events.push_back(event.clone());
        // The newest event always stays, however big.
        while recent.events.len() > 1
            && (recent.events.len() > REPLAY_CAPACITY || recent.bytes > REPLAY_BYTES)
        {
            let oldest = recent.events.pop_front().expect("more than one event");
            recent.bytes -= oldest.frame.len();
        }
        // Sent under the lock so that replay + subscribe never misses or repeats an event.
        let _ = self.inner.sender.send(event.clone());
        event
    }

    /// A live subscription plus the id of the last event published before it began.
    pub fn subscribe(&self) -> (broadcast::Receiver<Event>, Option<EventId>) {
        let recent = self.inner.recent.lock().expect("event bus lock");
        let receiver = self.inner.sender.subscribe();
        let last = recent.events.back().map(|event| event.id);
        (receiver, last)
    }

    /// A live subscription and the events after `after`, with nothing missed or repeated.
    pub fn resume(&self, after: EventId) -> (broadcast::Receiver<Event>, Replay) {
        let recent = self.inner.recent.lock().expect("event bus lock");
        let receiver = self.inner.sender.subscribe();
        if after.epoch != self.inner.epoch || after.n >= recent.next {
            return (receiver, Replay::Snapshot);
        }
        let oldest = recent
            .events
            .front()
            .map_or(recent.next, |event| event.id.n);
        if after.n + 1 < oldest {
            return (receiver, Replay::Snapshot);
        }
        let missed = recent
            .events
            .iter()
            .filter(|event| event.id.n > after.n)
            .cloned()
            .collect();
        (receiver, Replay::Events(missed))
    }

    pub fn subscriber_count(&self) -> usize {
        self.inner.sender.receiver_count()
    }

    /// The id the next snapshot should carry: the last event published so far.
    pub fn last_id(&self) -> EventId {
        let recent = self.inner.recent.lock().expect("event bus lock");
        EventId {
            epoch: self.inner.epoch,
            n: recent.next - 1,
        }
    }
}

impl Default for EventBus {
    fn default() -> EventBus {
        EventBus::new()
    }
}

/// A number that differs between buses created at different times in this process and across
/// restarts: microseconds since the epoch, made strictly increasing.
fn fresh_epoch() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = chrono::Utc::now().timestamp_micros() as u64;
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(actual) => last = actual,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_replay_buffer_keeps_recent_events_within_its_count_and_size() {
        let bus = EventBus::new();
        let first = bus.publish_as("item.delta", &json!({ "n": 0 }));
        for n in 1..REPLAY_CAPACITY + 10 {
            bus.publish_as("item.delta", &json!({ "n": n }));
        }
        let (_, replay) = bus.resume(first.id);
        assert!(
            matches!(replay, Replay::Snapshot),
            "the first event is gone"
        );
        let recent = bus.inner.recent.lock().unwrap();
        assert_eq!(recent.events.len(), REPLAY_CAPACITY);
        drop(recent);

        // Big events: bounded by bytes; a client just behind still gets exactly what it missed.
        let text = "x".repeat(100 * 1024);
        let mut ids = Vec::new();
        for n in 0..20 {
            ids.push(
                bus.publish_as("item.delta", &json!({ "n": n, "text": text }))
                    .id,
            );
        }
        let recent = bus.inner.recent.lock().unwrap();
        assert!(recent.bytes <= REPLAY_BYTES);
        assert_eq!(
            recent.bytes,
            recent
                .events
                .iter()
                .map(|event| event.frame.len())
                .sum::<usize>()
        );
        drop(recent);
        let (_, replay) = bus.resume(ids[17]);
        let Replay::Events(missed) = replay else {
            panic!("two events back is still in the buffer");
        };
        assert_eq!(
            missed.iter().map(|event| event.id).collect::<Vec<_>>(),
            ids[18..]
        );
        assert!(matches!(bus.resume(ids[0]).1, Replay::Snapshot));

        // One event bigger than the whole budget is still kept, alone.
        let huge = "y".repeat(REPLAY_BYTES + 1);
        let last = bus.publish_as("item.delta", &json!({ "text": huge })).id;
        let recent = bus.inner.recent.lock().unwrap();
        assert_eq!(recent.events.len(), 1);
        assert_eq!(recent.events[0].id, last);
    }
}
