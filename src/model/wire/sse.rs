//! Reading a provider's SSE body: the events in order, parsed by eventsource-stream from pieces of
//! whole lines so that a large burst costs no more per event than a trickle.

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::errors::error_chain;
use crate::model::ModelError;

/// One SSE event: its `event:` name (`message` when it has none), its data, and the last
/// event id seen.
pub use eventsource_stream::Event;

/// The most bytes of a body handed to eventsource-stream at once (see [`sse_events`]).
pub const PIECE_BYTES: usize = 4 * 1024;

/// The SSE events of a body, in order, parsed by eventsource-stream from pieces of at most
/// [`PIECE_BYTES`] whole lines. Blocks without data (only an id, a retry or comments) are not
/// events.
///
/// Why pieces: eventsource-stream moves the rest of its buffer into a new string after every
/// line it parses, which is quadratic in the size of what it is handed at once. A provider's
/// burst can arrive as one read of hundreds of kilobytes (many events per HTTP chunk, or an
/// HTTP/2 frame), and the service's own event streams send what piled up for a subscriber as
/// one chunk. Cut into pieces of a few KB (zero-copy, after a line feed, which is never inside
/// a multi-byte UTF-8 character), its buffer never holds much more than one piece: a 5,000-event
/// read costs the same per event as 5,000 small reads (BENCHMARKS.md, "Decoding").
pub fn sse_events<E>(
    body: impl Stream<Item = Result<bytes::Bytes, E>>,
) -> eventsource_stream::EventStream<impl Stream<Item = Result<bytes::Bytes, E>>> {
    body.flat_map(|chunk| futures::stream::iter(Pieces::of(chunk)))
        .eventsource()
}

/// A provider's SSE events; a broken body or invalid SSE ends the stream with one transient
/// error.
pub fn events<E>(
    body: impl Stream<Item = Result<bytes::Bytes, E>>,
) -> impl Stream<Item = Result<Event, ModelError>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    sse_events(body).map(|event| event.map_err(event_stream_error))
}

/// One chunk of a body as pieces of at most [`PIECE_BYTES`], each ending after a line feed
/// (a line longer than that is a piece of its own; the chunk's end may cut a line, as the
/// network may).
enum Pieces<E> {
    Chunk(bytes::Bytes),
    Error(Option<E>),
}

impl<E> Pieces<E> {
    fn of(chunk: Result<bytes::Bytes, E>) -> Pieces<E> {
        match chunk {
            Ok(chunk) => Pieces::Chunk(chunk),
            Err(error) => Pieces::Error(Some(error)),
        }
    }
}

impl<E> Iterator for Pieces<E> {
    type Item = Result<bytes::Bytes, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = match self {
            Pieces::Error(error) => return error.take().map(Err),
            Pieces::Chunk(rest) => rest,
        };
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= PIECE_BYTES {
            return Some(Ok(std::mem::take(rest)));
        }
        let end = match memchr::memrchr(b'\n', &rest[..PIECE_BYTES]) {
            Some(line_feed) => line_feed + 1,
            None => memchr::memchr(b'\n', &rest[PIECE_BYTES..])
                .map_or(rest.len(), |line_feed| PIECE_BYTES + line_feed + 1),
        };
        Some(Ok(rest.split_to(end)))
    }
}

fn event_stream_error<E: std::error::Error>(error: EventStreamError<E>) -> ModelError {
    match error {
        EventStreamError::Transport(error) => ModelError::transient(format!(
            "the provider's stream broke: {}",
            error_chain(&error)
        )),
        other => ModelError::transient(format!("malformed event stream from provider: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The (name, data) of the events of a body that arrives in these reads.
    fn parse(reads: Vec<&[u8]>) -> Vec<(String, String)> {
        let body = futures::stream::iter(
            reads
                .into_iter()
                .map(|read| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(read))),
        );
        futures::executor::block_on(events(body).collect::<Vec<_>>())
            .into_iter()
            .map(|event| {
                let event = event.expect("a valid event");
                (event.event, event.data)
            })
            .collect()
    }

    #[test]
    fn a_body_cut_anywhere_or_sent_whole_gives_the_same_events() {
        // A data line longer than a piece, with two-, three- and four-byte characters in it.
        let long = "h\u{e9}llo \u{4e16}\u{754c} \u{1f600} ".repeat(PIECE_BYTES / 8);
        let body = format!(
            "event: a\ndata: {{\"t\":\"h\u{e9}llo\"}}\n\ndata: x\r\n\r\n: note\n\nid: 7\n\ndata: line 1\ndata: line 2\n\ndata:\n\ndata: {long}\n\n"
        );
        let whole = parse(vec![body.as_bytes()]);
        let message = || "message".to_owned();
        assert_eq!(
            whole,
            [
                ("a".to_owned(), "{\"t\":\"h\u{e9}llo\"}".to_owned()),
                (message(), "x".to_owned()),
                (message(), "line 1\nline 2".to_owned()),
                (message(), String::new()),
                (message(), long.clone()),
            ]
        );
        // A byte per read: every cut, inside each multi-byte character too.
        let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        assert_eq!(parse(bytes), whole);
        // Every cut into two reads.
        for cut in 1..body.len() {
            let (head, tail) = body.as_bytes().split_at(cut);
            assert_eq!(parse(vec![head, tail]), whole, "cut at {cut}");
        }
        // The body many times over in one giant read, as a burst can arrive.
        let many = parse(vec![body.repeat(200).as_bytes()]);
        assert_eq!(many.len(), whole.len() * 200);
        assert!(many.chunks(whole.len()).all(|events| events == whole));
    }

    #[test]
    fn a_read_is_cut_into_pieces_of_whole_lines() {
        let line = |n: usize| format!("data: {}\n", "x".repeat(n));
        let read = [line(100).repeat(100), line(3 * PIECE_BYTES), line(10)].concat();
        let pieces: Vec<bytes::Bytes> =
            Pieces::<std::io::Error>::of(Ok(bytes::Bytes::from(read.clone())))
                .map(|piece| piece.expect("no error"))
                .collect();
        assert_eq!(pieces.concat(), read.as_bytes());
        for piece in &pieces {
            assert!(piece.ends_with(b"\n"), "a piece ends after a line feed");
            let lines = piece.iter().filter(|&&byte| byte == b'\n').count();
            assert!(piece.len() <= PIECE_BYTES || lines == 1, "{}", piece.len());
        }
        assert!(pieces.len() > 3, "{} pieces", pieces.len());
        // A read no longer than a piece is handed on whole, line ends or not.
        let short = Pieces::<std::io::Error>::of(Ok(bytes::Bytes::from_static(b"data: a\ndat")));
        assert_eq!(short.count(), 1);
    }
}
