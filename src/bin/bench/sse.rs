//! A light SSE subscriber of one conversation's events, as many of them run at once: a line
//! parser over reqwest chunks that looks only at what the bench counts (turn boundaries and the
//! deltas of the answer), and reconnects with `Last-Event-ID` like a browser would. It must stay
//! cheap, since it shares the cores with the server it measures.

use std::time::Duration;

use memchr::memmem;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_provider::{monotonic_ns, parse_stamp};

/// How often one subscriber may lose its stream and reconnect before it gives up.
const MAX_RECONNECTS: usize = 5;
/// A stream that sends nothing (not even a keep-alive, every 15 s) for this long is dead.
const SILENCE_LIMIT: Duration = Duration::from_secs(60);

/// What a subscriber reports.
#[derive(Debug)]
pub enum Report {
    /// The first `snapshot` arrived: the subscriber is connected and idle.
    Connected,
    /// A turn ended.
    TurnEnded(TurnReport),
    /// The subscriber gave up: too many reconnects, or an error.
    Gone { subscriber: usize, reason: String },
}

/// One subscriber's view of one turn.
#[derive(Debug)]
pub struct TurnReport {
    pub subscriber: usize,
    pub turn_id: String,
    pub status: String,
    /// `item.delta` events of the answer (field `text`).
    pub deltas: usize,
    /// Stamped deltas whose index was not the one after the previous stamped delta (a missed,
    /// repeated or reordered delta).
    pub out_of_order: usize,
    /// Receive time − send time of every stamped delta, in microseconds.
    pub latencies_us: Vec<u32>,
    /// When the last delta of the turn arrived (`monotonic_ns`), if any did.
    pub last_delta_ns: Option<u64>,
    /// When `turn.ended` arrived (`monotonic_ns`).
    pub ended_ns: u64,
    /// Streams that ended during this turn and were reopened, and how many of the reopened
    /// streams began with a fresh snapshot instead of the missed events.
    pub reconnects: usize,
    pub snapshots: usize,
}

/// Follows `GET {base}/api/conversations/{id}/events` until `stop` is cancelled, sending a
/// `Report` when connected and at the end of every turn.
pub async fn subscribe(
    subscriber: usize,
    client: reqwest::Client,
    url: String,
    reports: mpsc::UnboundedSender<Report>,
    stop: CancellationToken,
) {
    let mut follower = Follower::new(subscriber, reports.clone());
    let mut attempts = 0;
    let reason = loop {
        let mut request = client.get(&url).header("accept", "text/event-stream");
        if let Some(id) = &follower.last_event_id {
            request = request.header("last-event-id", id.as_str());
        }
        let outcome = tokio::select! {
            outcome = follow(request, &mut follower) => outcome,
            () = stop.cancelled() => return,
        };
        if stop.is_cancelled() {
            return;
        }
        attempts += 1;
        if attempts > MAX_RECONNECTS {
            break format!("lost its stream {attempts} times; last: {outcome}");
        }
        follower.reconnects += 1;
        follower.reconnecting = true;
    };
    let _ = reports.send(Report::Gone { subscriber, reason });
}

/// Reads one connection until it ends; returns why it ended.
async fn follow(request: reqwest::RequestBuilder, follower: &mut Follower) -> String {
    let mut response = match request.send().await {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => return format!("answered {}", response.status()),
        Err(error) => return format!("cannot connect: {error}"),
    };
    let mut parser = Parser::default();
    loop {
        let chunk = match tokio::time::timeout(SILENCE_LIMIT, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => return "the server ended the stream".to_owned(),
            Ok(Err(error)) => return format!("read error: {error}"),
            Err(_) => return format!("silent for {SILENCE_LIMIT:?}"),
        };
        // One clock reading per chunk: every event in it arrived at the same time.
        let received_ns = monotonic_ns();
        parser.feed(&chunk, |event| follower.on_event(event, received_ns));
    }
}

/// One parsed SSE event (only the fields the bench reads).
pub struct SseEvent<'a> {
    pub id: Option<&'a str>,
    pub kind: &'a str,
    pub data: &'a [u8],
}

/// Splits a byte stream into SSE events. Only single-line `data:` fields are expected (the
/// server writes JSON on one line); comments (keep-alives) are skipped.
#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    id: String,
    kind: String,
    data: Vec<u8>,
}

impl Parser {
    pub fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(SseEvent<'_>)) {
        let mut rest = bytes;
        while let Some(newline) = memchr::memchr(b'\n', rest) {
            if self.line.is_empty() {
                self.take_line(&rest[..newline], &mut on_event);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..newline]);
                self.take_line(&line, &mut on_event);
                line.clear();
                self.line = line;
            }
            rest = &rest[newline + 1..];
        }
        self.line.extend_from_slice(rest);
    }

    fn take_line(&mut self, line: &[u8], on_event: &mut impl FnMut(SseEvent<'_>)) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if !self.kind.is_empty() || !self.data.is_empty() {
                on_event(SseEvent {
                    id: (!self.id.is_empty()).then_some(self.id.as_str()),
                    kind: &self.kind,
                    data: &self.data,
                });
            }
            self.id.clear();
            self.kind.clear();
            self.data.clear();
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(0) => return,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => self.kind = String::from_utf8_lossy(value).into_owned(),
            b"id" => self.id = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
            }
            _ => {}
        }
    }
}

/// The state of one subscriber across its connections.
struct Follower {
    subscriber: usize,
    reports: mpsc::UnboundedSender<Report>,
    connected: bool,
    last_event_id: Option<String>,
    reconnecting: bool,
    reconnects: usize,
    snapshots: usize,
    turn: Option<TurnReport>,
    next_index: u64,
}

impl Follower {
    fn new(subscriber: usize, reports: mpsc::UnboundedSender<Report>) -> Follower {
        Follower {
            subscriber,
            reports,
            connected: false,
            last_event_id: None,
            reconnecting: false,
            reconnects: 0,
            snapshots: 0,
            turn: None,
            next_index: 0,
        }
    }

    fn on_event(&mut self, event: SseEvent<'_>, received_ns: u64) {
        if let Some(id) = event.id {
            self.last_event_id = Some(id.to_owned());
        }
        // The first event on a reopened stream tells whether the server could replay what
        // was missed or had to start over with a snapshot.
        if std::mem::take(&mut self.reconnecting) && event.kind == "snapshot" {
            self.snapshots += 1;
        }
        match event.kind {
            "item.delta" => self.on_delta(event.data, received_ns),
            "snapshot" if !self.connected => {
                self.connected = true;
                let _ = self.reports.send(Report::Connected);
            }
            "turn.started" => {
                self.next_index = 0;
                self.turn = Some(self.new_turn(json_field(event.data, "turn_id")));
            }
            "turn.ended" => {
                let turn_id = json_field(event.data, "turn_id");
                // A turn whose start this subscriber did not see (it reconnected into a
                // snapshot) is still reported, with what arrived.
                let mut turn = match self.turn.take() {
                    Some(turn) => turn,
                    None => self.new_turn(turn_id.clone()),
                };
                turn.turn_id = turn_id;
                turn.status = json_field(event.data, "status");
                turn.ended_ns = received_ns;
                turn.reconnects = std::mem::take(&mut self.reconnects);
                turn.snapshots = std::mem::take(&mut self.snapshots);
                let _ = self.reports.send(Report::TurnEnded(turn));
            }
            _ => {}
        }
    }

    fn new_turn(&self, turn_id: String) -> TurnReport {
        TurnReport {
            subscriber: self.subscriber,
            turn_id,
            status: String::new(),
            deltas: 0,
            out_of_order: 0,
            latencies_us: Vec::new(),
            last_delta_ns: None,
            ended_ns: 0,
            reconnects: 0,
            snapshots: 0,
        }
    }

    fn on_delta(&mut self, data: &[u8], received_ns: u64) {
        let Some(turn) = &mut self.turn else {
            return;
        };
        if memmem::find(data, br#""field":"text""#).is_none() {
            return;
        }
        turn.deltas += 1;
        turn.last_delta_ns = Some(received_ns);
        let Some(at) = memmem::find(data, br#""delta":""#) else {
            return;
        };
        if let Some((index, sent_ns)) = parse_stamp(&data[at + br#""delta":""#.len()..]) {
            if index != self.next_index {
                turn.out_of_order += 1;
            }
            self.next_index = index + 1;
            let micros = received_ns.saturating_sub(sent_ns) / 1_000;
            turn.latencies_us
                .push(u32::try_from(micros).unwrap_or(u32::MAX));
        }
    }
}

/// A string field of a small JSON event, or "" (these events are rare, so serde is fine).
fn json_field(data: &[u8], field: &str) -> String {
    serde_json::from_slice::<Value>(data)
        .ok()
        .and_then(|value| value[field].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_put_back_together() {
        let stream = b": keep-alive\n\nid: 1-1\nevent: snapshot\ndata: {}\n\nid: 1-2\nevent: item.delta\ndata: {\"field\":\"text\",\"delta\":\"t=5;n=0;\"}\n\n";
        for split in 0..stream.len() {
            let mut parser = Parser::default();
            let mut seen = Vec::new();
            let mut collect = |event: SseEvent<'_>| {
                seen.push((
                    event.id.map(str::to_owned),
                    event.kind.to_owned(),
                    event.data.to_vec(),
                ));
            };
            parser.feed(&stream[..split], &mut collect);
            parser.feed(&stream[split..], &mut collect);
            assert_eq!(seen.len(), 2, "split at {split}");
            assert_eq!(seen[0].1, "snapshot");
            assert_eq!(seen[1].0.as_deref(), Some("1-2"));
            assert_eq!(seen[1].2, br#"{"field":"text","delta":"t=5;n=0;"}"#);
        }
    }
}
