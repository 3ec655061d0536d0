//! A fake model provider inside the bench process, speaking OpenAI Chat Completions streaming
//! (`data: {"choices":[{"delta":{"content":…}}]}` chunks, a usage chunk, `data: [DONE]`). It
//! answers at once, records when it began and finished each answer, and can stamp every delta
//! with its send time so subscribers can measure delivery latency. It must never be slow itself:
//! it runs on its own thread so the bench's client tasks cannot delay it.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use tokio::sync::oneshot;

use super::text::WORDS;

/// The provider's name for the model, as the generated config names it.
pub const MODEL_NAME: &str = "bench-model";

/// What the next answers look like.
#[derive(Debug, Clone, Copy)]
pub enum Script {
    /// `deltas` deltas of one vocabulary word each (about one token each).
    Words { deltas: usize },
    /// `deltas` deltas of the form `t=<send time in ns>;n=<index>;`, with `interval` between two
    /// deltas (zero: as fast as the connection takes them).
    Stamped { deltas: usize, interval: Duration },
}

/// One answer the provider gave, on the shared monotonic clock (`monotonic_ns`).
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    /// When the handler got the request (its headers parsed), before reading the body.
    pub started_ns: u64,
    /// When the first content delta was handed to the connection.
    pub first_delta_ns: u64,
    /// When the last byte (`data: [DONE]`) was handed to the connection.
    pub finished_ns: u64,
    pub request_bytes: usize,
}

impl Answered {
    /// The provider's own time: request received to last byte sent.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.finished_ns.saturating_sub(self.started_ns))
    }
}

/// A running fake provider; it stops when dropped.
pub struct FakeProvider {
    /// What the provider's `base_url` is set to.
    pub base_url: String,
    state: Arc<FakeState>,
    shutdown: Option<oneshot::Sender<()>>,
}

struct FakeState {
    script: Mutex<Script>,
    answered: Mutex<Vec<Answered>>,
}

/// Nanoseconds since the first use in this process: the clock both the provider's stamps and
/// the subscribers' receive times are read from.
pub fn monotonic_ns() -> u64 {
    static START: LazyLock<Instant> = LazyLock::new(Instant::now);
    START.elapsed().as_nanos() as u64
}

/// The index and send time in a stamped delta (`t=<ns>;n=<index>;`).
pub fn parse_stamp(delta: &[u8]) -> Option<(u64, u64)> {
    let rest = delta.strip_prefix(b"t=")?;
    let (sent, rest) = leading_number(rest)?;
    let rest = rest.strip_prefix(b";n=")?;
    let (index, _) = leading_number(rest)?;
    Some((index, sent))
}

fn leading_number(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let number = std::str::from_utf8(&bytes[..digits]).ok()?.parse().ok()?;
    Some((number, &bytes[digits..]))
}

impl FakeProvider {
    /// Binds 127.0.0.1:0 and serves on a thread of its own with a single-threaded runtime.
    pub fn start(script: Script) -> anyhow::Result<FakeProvider> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let state = Arc::new(FakeState {
            script: Mutex::new(script),
            answered: Mutex::new(Vec::new()),
        });
        let (shutdown, stop) = oneshot::channel::<()>();
        let app = Router::new().fallback(answer).with_state(state.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("fake-provider".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(error) => {
                            eprintln!("fake provider: cannot listen: {error}");
                            return;
                        }
                    };
                    // Real providers send each chunk at once; without this, Nagle's algorithm
                    // would hold small chunks back until the server acknowledged earlier ones.
                    let listener = listener.tap_io(|stream| {
                        let _ = stream.set_nodelay(true);
                    });
                    let serve = axum::serve(listener, app);
                    // Dropping the serve future on shutdown closes every connection at once;
                    // a graceful shutdown would wait for the server's kept-alive connections.
                    tokio::select! {
                        result = serve => {
                            if let Err(error) = result {
                                eprintln!("fake provider stopped: {error}");
                            }
                        }
                        _ = stop => {}
                    }
                });
            })
            .context("cannot start the fake provider's thread")?;
        Ok(FakeProvider {
            base_url: format!("http://{address}/v1"),
            state,
            shutdown: Some(shutdown),
        })
    }

    pub fn set_script(&self, script: Script) {
        *self.state.script.lock().expect("script lock") = script;
    }

    /// Every answer so far, oldest first.
    pub fn answered(&self) -> Vec<Answered> {
        self.state.answered.lock().expect("answers lock").clone()
    }

    pub fn answered_count(&self) -> usize {
        self.state.answered.lock().expect("answers lock").len()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The one route: `POST /v1/chat/completions`, answered by the current script.
async fn answer(State(state): State<Arc<FakeState>>, request: Request) -> Response {
    let started_ns = monotonic_ns();
    if request.uri().path() != "/v1/chat/completions" {
        return (StatusCode::NOT_FOUND, "only /v1/chat/completions").into_response();
    }
    // Read the whole request as a real provider would, so its transfer counts as the
    // provider's time rather than the runtime's.
    let request_bytes = match axum::body::to_bytes(request.into_body(), usize::MAX).await {
        Ok(bytes) => bytes.len(),
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let script = *state.script.lock().expect("script lock");
    let stream = async_stream::stream! {
        yield Ok::<Bytes, std::io::Error>(chunk(r#"{"role":"assistant","content":""}"#, "null"));
        let mut first_delta_ns = 0;
        match script {
            Script::Words { deltas } => {
                for index in 0..deltas {
                    let word = WORDS[index % WORDS.len()];
                    let content = if index == 0 { word.to_owned() } else { format!(" {word}") };
                    if index == 0 {
                        first_delta_ns = monotonic_ns();
                    }
                    yield Ok(content_chunk(&content));
                }
            }
            Script::Stamped { deltas, interval } => {
                let mut ticks = (!interval.is_zero()).then(|| {
                    let mut ticks = tokio::time::interval(interval);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                    ticks
                });
                for index in 0..deltas {
                    if let Some(ticks) = &mut ticks {
                        ticks.tick().await;
                    }
                    let sent = monotonic_ns();
                    if index == 0 {
                        first_delta_ns = sent;
                    }
                    yield Ok(content_chunk(&format!("t={sent};n={index};")));
                }
            }
        }
        let output_tokens = match script {
            Script::Words { deltas } | Script::Stamped { deltas, .. } => deltas,
        };
        yield Ok(chunk("{}", r#""stop""#));
        yield Ok(Bytes::from(format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"{MODEL_NAME}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":1000,\"completion_tokens\":{output_tokens},\"total_tokens\":{}}}}}\n\n",
            1000 + output_tokens
        )));
        yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
        // Runs when the connection asks for more after taking the last chunk.
        state.answered.lock().expect("answers lock").push(Answered {
            started_ns,
            first_delta_ns,
            finished_ns: monotonic_ns(),
            request_bytes,
        });
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("a valid response")
}

fn content_chunk(content: &str) -> Bytes {
    let delta = format!(
        "{{\"content\":{}}}",
        serde_json::to_string(content).expect("a string serializes")
    );
    chunk(&delta, "null")
}

/// One Chat Completions chunk with this `delta` object and `finish_reason` (JSON).
fn chunk(delta: &str, finish_reason: &str) -> Bytes {
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"{MODEL_NAME}\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish_reason}}}]}}\n\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip() {
        assert_eq!(parse_stamp(b"t=123456;n=42;"), Some((42, 123456)));
        assert_eq!(parse_stamp(b"t=;n=1;"), None);
        assert_eq!(parse_stamp(b"hello"), None);
    }
}
