//! What many tests share beyond the harness: waits on an event stream (each bounded by
//! [`TIMEOUT`], so a missing event fails the test instead of hanging it) and readers of stored
//! history. Streams come in two shapes, `(type, data)` from [`Server::events`] and
//! `(id, type, data)` from [`Server::raw_events`]; every wait takes either.

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::harness::{Server, TIMEOUT};

/// One event of a stream, whichever shape the stream has.
pub trait Event: Debug {
    /// The SSE `event:` name.
    fn kind(&self) -> &str;
    /// The event's JSON data.
    fn data(&self) -> &Value;
}

impl Event for (String, Value) {
    fn kind(&self) -> &str {
        &self.0
    }
    fn data(&self) -> &Value {
        &self.1
    }
}

impl Event for (String, String, Value) {
    fn kind(&self) -> &str {
        &self.1
    }
    fn data(&self) -> &Value {
        &self.2
    }
}

/// Reads events until one satisfies `done`, returning every event read, that one included.
/// Panics, listing what it saw, if the stream ends first or nothing matches in time.
pub async fn until<E: Event>(
    events: &mut (impl Stream<Item = E> + Unpin),
    mut done: impl FnMut(&str, &Value) -> bool,
) -> Vec<E> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(TIMEOUT, async {
        while let Some(event) = events.next().await {
            let last = done(event.kind(), event.data());
            seen.push(event);
            if last {
                return true;
            }
        }
        false
    })
    .await;
    match found {
        Ok(true) => seen,
        Ok(false) => panic!("the event stream ended; saw {seen:?}"),
        Err(_) => panic!("the awaited event did not come in time; saw {seen:?}"),
    }
}

/// Reads events until one of type `kind` arrives (included).
pub async fn events_until<E: Event>(
    events: &mut (impl Stream<Item = E> + Unpin),
    kind: &str,
) -> Vec<E> {
    until(events, |event_kind, _| event_kind == kind).await
}

/// Reads events until `count` turns have ended (the last `turn.ended` included).
pub async fn until_turns_ended<E: Event>(
    events: &mut (impl Stream<Item = E> + Unpin),
    count: usize,
) -> Vec<E> {
    let mut ended = 0;
    until(events, |kind, _| {
        if kind == "turn.ended" {
            ended += 1;
        }
        ended == count
    })
    .await
}

/// Reads events until the first `turn.ended` (included).
pub async fn until_turn_end<E: Event>(events: &mut (impl Stream<Item = E> + Unpin)) -> Vec<E> {
    until_turns_ended(events, 1).await
}

/// The stored items of a conversation's root session, all of them (up to the largest page).
pub async fn items(server: &Server, id: &str) -> Vec<Value> {
    read_items(server, &format!("/api/conversations/{id}/items?limit=2000")).await
}

/// The stored items of one session of a conversation (a sub-agent's, or the root's).
pub async fn session_items(server: &Server, id: &str, session: &str) -> Vec<Value> {
    read_items(
        server,
        &format!("/api/conversations/{id}/items?session={session}&limit=2000"),
    )
    .await
}

async fn read_items(server: &Server, path: &str) -> Vec<Value> {
    let (status, body) = server.get(path).await;
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().unwrap().clone()
}

/// A price for the fake provider's model `m` (currency units per million tokens).
const PRICE: [f64; 3] = [3.0, 0.3, 15.0];

/// The fake provider's generated `config` with `PRICE` on its model.
pub fn priced(config: &str) -> String {
    let [input, cached_input, output] = PRICE;
    let price =
        format!("price = {{ input = {input}, cached_input = {cached_input}, output = {output} }}");
    let priced = config.replace(
        "max_output_tokens = 1000",
        &format!("max_output_tokens = 1000\n{price}"),
    );
    assert_ne!(priced, config, "the model's table has moved");
    priced
}

/// What one metered answer of the fake provider costs at `PRICE`: the fresh input, the input
/// read from the cache and the output, each at its price.
pub fn answer_cost() -> f64 {
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS};
    let [input, cached_input, output] = PRICE;
    ((INPUT_TOKENS - CACHED_TOKENS) as f64 * input
        + CACHED_TOKENS as f64 * cached_input
        + OUTPUT_TOKENS as f64 * output)
        / 1_000_000.0
}

/// How the terminal clients write the tokens and cost of a turn of one metered answer (its
/// counts are below a thousand, so they show whole; its cost below a cent, so with 4 digits).
pub fn answer_figures() -> String {
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS};
    let cost = answer_cost();
    assert!(INPUT_TOKENS < 1000 && OUTPUT_TOKENS < 1000 && cost < 0.01);
    format!("{INPUT_TOKENS} in ({CACHED_TOKENS} cached) · {OUTPUT_TOKENS} out · cost {cost:.4}")
}

/// The fake provider (OpenAI Chat) and a server whose model has `PRICE`.
pub async fn priced_server() -> (crate::fake_provider::FakeProvider, Server) {
    use crate::fake_provider::{FakeProvider, Wire};
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some(priced(&fake.config())),
        ..crate::harness::ServerOptions::default()
    })
    .await;
    (fake, server)
}
