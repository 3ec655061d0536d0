//! A light SSE subscriber of one conversation's events, as many of them run at once: a line
//! parser over reqwest chunks that looks only at what the bench counts (turn boundaries and the
//! deltas of the answer), and reconnects with `Last-Event-ID` like a browser would. It must stay
//! cheap, since it shares the cores with the server it measures.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use memchr::memmem;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_provider::{ExpectedReply, monotonic_ns};

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
    /// The session (root agent or sub-agent) whose turn it was.
    pub session_id: String,
    pub status: String,
    /// `item.delta` events of the answer (field `text`). The server merges deltas that reach it
    /// together, so this can be fewer than the provider sent.
    pub deltas: usize,
    /// Every event of the turn, and the reads they came in (after `turn.started`).
    pub events: usize,
    pub reads: usize,
    /// How much of the expected reply arrived, in bytes, in order.
    pub text_bytes: usize,
    /// Deltas whose text was not the expected reply's continuation (something missed, repeated
    /// or reordered).
    pub mismatches: usize,
    /// When each part of the reply arrived: (receive time, the deltas it completed). The
    /// latencies are worked out after the turn, so receiving stays cheap.
    pub arrivals: Vec<Arrival>,
    /// When the last delta of the turn arrived (`monotonic_ns`), if any did.
    pub last_delta_ns: Option<u64>,
    /// When `turn.ended` arrived (`monotonic_ns`).
    pub ended_ns: u64,
    /// Streams that ended during this turn and were reopened, and how many of the reopened
    /// streams began with a fresh snapshot instead of the missed events.
    pub reconnects: usize,
    pub snapshots: usize,
}

/// A delta event that completed deltas `deltas` of the expected reply, received at
/// `received_ns` (`monotonic_ns`).
#[derive(Debug, Clone)]
pub struct Arrival {
    pub received_ns: u64,
    pub deltas: std::ops::Range<usize>,
}

/// Follows `GET {url}` (a conversation's events) until `stop` is cancelled, sending a `Report`
/// when connected and at the end of every turn. Every turn's answer is checked against
/// `expected`; the latency of a stamped reply's deltas is measured.
pub async fn subscribe(
    subscriber: usize,
    url: String,
    reports: mpsc::UnboundedSender<Report>,
    expected: ExpectedReply,
    stop: CancellationToken,
) {
    let mut follower = Follower::new(subscriber, reports.clone(), expected);
    let mut attempts = 0;
    let reason = loop {
        let outcome = tokio::select! {
            outcome = follow(&url, &mut follower) => outcome,
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
///
/// A plain HTTP/1.1 client on a TCP stream, as lean as a subscriber can be: each one reads its
/// own socket in its own task. (reqwest hands a body over from a connection task, a hop between
/// tasks for every chunk; with a thousand subscribers that doubled the bench's CPU time, which
/// it takes from the server it measures.)
async fn follow(url: &str, follower: &mut Follower) -> String {
    let Some((address, path)) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return format!("not an http:// URL: {url}");
    };
    let mut stream = match TcpStream::connect(address).await {
        Ok(stream) => stream,
        Err(error) => return format!("cannot connect: {error}"),
    };
    let _ = stream.set_nodelay(true);
    let mut request = format!(
        "GET /{path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {}\r\n",
        super::server::bench_token()
    );
    if let Some(id) = &follower.last_event_id {
        request.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    request.push_str("\r\n");
    if let Err(error) = stream.write_all(request.as_bytes()).await {
        return format!("cannot send the request: {error}");
    }

    let mut buffer = BytesMut::with_capacity(READ_SIZE);
    let mut head_done = false;
    let mut body = Chunked::Size;
    let mut parser = Parser::default();
    // One timer for the whole stream, pushed back at every read (cheaper than a timeout each).
    let silence = tokio::time::sleep(SILENCE_LIMIT);
    tokio::pin!(silence);
    loop {
        buffer.reserve(READ_SIZE);
        let read = tokio::select! {
            read = stream.read_buf(&mut buffer) => read,
            () = &mut silence => return format!("silent for {SILENCE_LIMIT:?}"),
        };
        match read {
            Ok(0) => return "the server ended the stream".to_owned(),
            Ok(_) => {}
            Err(error) => return format!("read error: {error}"),
        }
        // One clock reading per read: every event in it arrived at the same time.
        let received_ns = monotonic_ns();
        silence
            .as_mut()
            .reset(tokio::time::Instant::now() + SILENCE_LIMIT);
        if !head_done {
            match response_head(&buffer) {
                Ok(Some(length)) => {
                    buffer.advance(length);
                    head_done = true;
                }
                Ok(None) => continue,
                Err(problem) => return problem,
            }
        }
        if let Some(turn) = &mut follower.turn {
            turn.reads += 1;
        }
        let decoded = body.decode(&mut buffer, |data| {
            parser.feed(data, |event| follower.on_event(event, received_ns));
        });
        if let Err(problem) = decoded {
            return problem;
        }
    }
}

/// How much a subscriber asks its socket for at once.
const READ_SIZE: usize = 64 * 1024;

/// The length of the response head if all of it is in `buffer`: it must be a 200 with a
/// chunked body (the server streams SSE so).
fn response_head(buffer: &[u8]) -> Result<Option<usize>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let length = match response.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(format!("unreadable response: {error}")),
    };
    if response.code != Some(200) {
        return Err(format!("answered {:?}", response.code));
    }
    let chunked = response.headers.iter().any(|header| {
        header.name.eq_ignore_ascii_case("transfer-encoding")
            && header.value.eq_ignore_ascii_case(b"chunked")
    });
    if !chunked {
        return Err("the stream is not chunked".to_owned());
    }
    Ok(Some(length))
}

/// Where a chunked body's decoder is (RFC 9112 §7.1).
enum Chunked {
    /// Expecting a size line.
    Size,
    /// Inside a chunk's data, with this much left.
    Data(usize),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
}

impl Chunked {
    /// Passes every whole or partial chunk data in `buffer` to `on_data`, consuming it.
    fn decode(
        &mut self,
        buffer: &mut BytesMut,
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<(), String> {
        loop {
            match *self {
                Chunked::Size => {
                    let Some(line_end) = memmem::find(buffer, b"\r\n") else {
                        return Ok(());
                    };
                    let line = &buffer[..line_end];
                    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
                    let size = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|digits| usize::from_str_radix(digits.trim(), 16).ok())
                        .ok_or_else(|| {
                            format!("bad chunk size line: {:?}", String::from_utf8_lossy(line))
                        })?;
                    buffer.advance(line_end + 2);
                    if size == 0 {
                        return Err("the server ended the stream".to_owned());
                    }
                    *self = Chunked::Data(size);
                }
                Chunked::Data(left) => {
                    if buffer.is_empty() {
                        return Ok(());
                    }
                    let take = left.min(buffer.len());
                    on_data(&buffer[..take]);
                    buffer.advance(take);
                    *self = if take == left {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left - take)
                    };
                }
                Chunked::DataEnd => {
                    if buffer.len() < 2 {
                        return Ok(());
                    }
                    if &buffer[..2] != b"\r\n" {
                        return Err("a chunk does not end with CRLF".to_owned());
                    }
                    buffer.advance(2);
                    *self = Chunked::Size;
                }
            }
        }
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
    /// The next delta of the expected reply.
    next_delta: usize,
    expected: ExpectedReply,
}

impl Follower {
    fn new(
        subscriber: usize,
        reports: mpsc::UnboundedSender<Report>,
        expected: ExpectedReply,
    ) -> Follower {
        Follower {
            subscriber,
            reports,
            connected: false,
            last_event_id: None,
            reconnecting: false,
            reconnects: 0,
            snapshots: 0,
            turn: None,
            next_delta: 0,
            expected,
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
        if let Some(turn) = &mut self.turn {
            turn.events += 1;
        }
        match event.kind {
            "item.delta" => self.on_delta(event.data, received_ns),
            "snapshot" if !self.connected => {
                self.connected = true;
                let _ = self.reports.send(Report::Connected);
            }
            "turn.started" => {
                self.next_delta = 0;
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
                turn.session_id = json_field(event.data, "session_id");
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
            session_id: String::new(),
            status: String::new(),
            deltas: 0,
            events: 0,
            reads: 0,
            text_bytes: 0,
            mismatches: 0,
            arrivals: Vec::new(),
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
        let delta = &data[at + br#""delta":""#.len()..];
        let delta = &delta[..memchr::memchr(b'"', delta).unwrap_or(delta.len())];
        // The server merges deltas that reach it together: compare the text, not the count.
        let text = self.expected.text.as_bytes();
        let start = turn.text_bytes;
        if text.get(start..start + delta.len()) != Some(delta) {
            turn.mismatches += 1;
            return;
        }
        turn.text_bytes += delta.len();
        let completed = self
            .expected
            .ends
            .partition_point(|&end| end <= turn.text_bytes);
        if completed > self.next_delta {
            turn.arrivals.push(Arrival {
                received_ns,
                deltas: self.next_delta..completed,
            });
            self.next_delta = completed;
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
    fn chunked_bodies_are_decoded_whatever_the_reads() {
        let body = b"5\r\nhello\r\nB;ext=1\r\n, world!!!!\r\n0\r\n\r\n";
        for split in 0..body.len() {
            let mut decoder = Chunked::Size;
            let mut buffer = BytesMut::new();
            let mut data = Vec::new();
            buffer.extend_from_slice(&body[..split]);
            let mut end = decoder.decode(&mut buffer, |piece| data.extend_from_slice(piece));
            if end.is_ok() {
                buffer.extend_from_slice(&body[split..]);
                end = decoder.decode(&mut buffer, |piece| data.extend_from_slice(piece));
            }
            assert_eq!(
                end,
                Err("the server ended the stream".to_owned()),
                "split at {split}"
            );
            assert_eq!(data, b"hello, world!!!!", "split at {split}");
        }
    }

    #[test]
    fn events_split_across_chunks_are_put_back_together() {
        let stream = b": keep-alive\n\nid: 1-1\nevent: snapshot\ndata: {}\n\nid: 1-2\nevent: item.delta\ndata: {\"field\":\"text\",\"delta\":\"0;\"}\n\n";
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
            assert_eq!(seen[1].2, br#"{"field":"text","delta":"0;"}"#);
        }
    }
}
