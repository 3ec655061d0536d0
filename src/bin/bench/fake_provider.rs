//! A fake model provider inside the bench process, speaking OpenAI Chat Completions streaming
//! (`data: {"choices":[{"delta":{"content":…}}]}` chunks, a usage chunk, `data: [DONE]`). It
//! answers at once, records when it began and finished each answer, and can stamp every delta
//! with its send time so subscribers can measure delivery latency. It must never be slow itself:
//! it runs on its own thread so the bench's client tasks cannot delay it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
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
#[derive(Debug, Clone)]
pub enum Script {
    /// `deltas` deltas of one vocabulary word each (about one token each).
    Words { deltas: usize },
    /// `deltas` deltas of the form `<index>;`, with `interval` between two deltas (zero: as fast
    /// as the connection takes them), each one's send time recorded in `sent`.
    Stamped {
        deltas: usize,
        interval: Duration,
        sent: SendTimes,
    },
    /// A root agent's request that carries no tool result yet is answered with `children`
    /// `spawn_agent` calls in one answer; every other request (a sub-agent's, or the root's
    /// later ones) with `deltas` words.
    Spawner { children: usize, deltas: usize },
    /// A request that carries no tool result yet is answered with one call of `tool` with
    /// `arguments` (a JSON object's text); every later one with `deltas` words.
    Caller {
        tool: &'static str,
        arguments: String,
        deltas: usize,
    },
}

impl Script {
    fn deltas(&self) -> usize {
        match self {
            Script::Words { deltas }
            | Script::Stamped { deltas, .. }
            | Script::Spawner { deltas, .. }
            | Script::Caller { deltas, .. } => *deltas,
        }
    }

    /// Delta `index` of the reply.
    fn delta(&self, index: usize) -> String {
        match self {
            Script::Words { .. } | Script::Spawner { .. } | Script::Caller { .. } => {
                let word = WORDS[index % WORDS.len()];
                if index == 0 {
                    word.to_owned()
                } else {
                    format!(" {word}")
                }
            }
            Script::Stamped { .. } => format!("{index};"),
        }
    }

    /// What a subscriber should receive of this script's replies.
    pub fn expected(&self) -> ExpectedReply {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(self.deltas());
        for index in 0..self.deltas() {
            text.push_str(&self.delta(index));
            ends.push(text.len());
        }
        ExpectedReply {
            text: text.into(),
            ends: ends.into(),
        }
    }
}

/// A reply as a subscriber should see it: its whole text and where each delta ends in it. The
/// server may merge deltas that reach it together,
/// so a subscriber matches what arrives against the text rather than counting events. None of
/// the scripts' texts needs escaping in JSON.
#[derive(Debug, Clone)]
pub struct ExpectedReply {
    pub text: Arc<str>,
    /// The end offset in `text` of each delta.
    pub ends: Arc<[usize]>,
}

/// When the provider sent each delta of a stamped reply (`monotonic_ns`). The subscribers run
/// in the same process and look the times up by index, so the deltas stay as short as tokens
/// (about 5 bytes) instead of carrying their times.
#[derive(Debug, Clone)]
pub struct SendTimes(Arc<[AtomicU64]>);

impl SendTimes {
    pub fn new(deltas: usize) -> SendTimes {
        SendTimes((0..deltas).map(|_| AtomicU64::new(0)).collect())
    }

    /// Stores delta `index`'s send time; called before the delta is handed to the connection,
    /// so it is there before any subscriber can see the delta.
    fn record(&self, index: usize, sent_ns: u64) {
        self.0[index].store(sent_ns, Ordering::Release);
    }

    /// How many deltas the replies have.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Delta `index`'s send time in its latest reply.
    pub fn get(&self, index: usize) -> Option<u64> {
        let sent = self.0.get(index)?.load(Ordering::Acquire);
        (sent != 0).then_some(sent)
    }
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
    /// The request came from a sub-agent (its system prompt says so).
    pub sub_agent: bool,
    /// The answer was `spawn_agent` calls (`Script::Spawner`).
    pub spawned: bool,
    /// The answer was a tool call (`Script::Caller`).
    pub called: bool,
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

impl FakeProvider {
    /// Binds 127.0.0.1:0 and serves on a thread of its own with a single-threaded runtime.
    pub fn start(script: Script) -> anyhow::Result<FakeProvider> {
        let state = Arc::new(FakeState {
            script: Mutex::new(script),
            answered: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(answer).with_state(state.clone());
        let (address, shutdown) = serve_on_own_thread(app, "fake-provider")?;
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

/// Serves `app` on 127.0.0.1:0 from a thread of its own with a single-threaded runtime, so the
/// bench's client tasks cannot delay it; returns its address and the sender that stops it.
pub fn serve_on_own_thread(
    app: Router,
    name: &str,
) -> anyhow::Result<(SocketAddr, oneshot::Sender<()>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    let (shutdown, stop) = oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_owned())
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
    Ok((address, shutdown))
}

/// The one route: `POST /v1/chat/completions`, answered by the current script.
async fn answer(State(state): State<Arc<FakeState>>, request: Request) -> Response {
    let started_ns = monotonic_ns();
    if request.uri().path() != "/v1/chat/completions" {
        return (StatusCode::NOT_FOUND, "only /v1/chat/completions").into_response();
    }
    // Read the whole request as a real provider would, so its transfer counts as the
    // provider's time rather than the runtime's.
    let body = match axum::body::to_bytes(request.into_body(), usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let request_bytes = body.len();
    let sub_agent = memchr::memmem::find(&body, b"You are a sub-agent").is_some();
    let script = state.script.lock().expect("script lock").clone();
    if let Script::Spawner { children, .. } = script
        && !sub_agent
        && memchr::memmem::find(&body, b"tool_call_id").is_none()
    {
        state.answered.lock().expect("answers lock").push(Answered {
            started_ns,
            first_delta_ns: 0,
            finished_ns: monotonic_ns(),
            request_bytes,
            sub_agent,
            spawned: true,
            called: false,
        });
        return spawn_answer(children);
    }
    if let Script::Caller {
        tool, arguments, ..
    } = &script
        && memchr::memmem::find(&body, b"tool_call_id").is_none()
    {
        let answer = calls_answer(&[("call_bench_0".to_owned(), tool, arguments.clone())]);
        state.answered.lock().expect("answers lock").push(Answered {
            started_ns,
            first_delta_ns: 0,
            finished_ns: monotonic_ns(),
            request_bytes,
            sub_agent,
            spawned: false,
            called: true,
        });
        return answer;
    }
    let output_tokens = script.deltas();
    let stream = async_stream::stream! {
        yield Ok::<Bytes, std::io::Error>(chunk(r#"{"role":"assistant","content":""}"#, "null"));
        let mut first_delta_ns = 0;
        let (interval, sent) = match &script {
            Script::Words { .. } | Script::Spawner { .. } | Script::Caller { .. } => {
                (Duration::ZERO, None)
            }
            Script::Stamped { interval, sent, .. } => (*interval, Some(sent)),
        };
        let mut ticks = (!interval.is_zero()).then(|| {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            ticks
        });
        for index in 0..output_tokens {
            if let Some(ticks) = &mut ticks {
                ticks.tick().await;
            }
            let sent_ns = monotonic_ns();
            if index == 0 {
                first_delta_ns = sent_ns;
            }
            if let Some(sent) = sent {
                sent.record(index, sent_ns);
            }
            yield Ok(content_chunk(&script.delta(index)));
        }
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
            sub_agent,
            spawned: false,
            called: false,
        });
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("a valid response")
}

/// `children` `spawn_agent` calls in one answer.
fn spawn_answer(children: usize) -> Response {
    let calls: Vec<(String, &str, String)> = (0..children)
        .map(|index| {
            let arguments =
                format!(r#"{{"agent":"default","task":"Sub-task {index}: answer it."}}"#);
            (format!("call_spawn_{index}"), "spawn_agent", arguments)
        })
        .collect();
    calls_answer(&calls)
}

/// Tool calls (id, tool, arguments as a JSON object's text) in one answer, each whole in the
/// first chunk. (Recorded as answered when built: the body is one short write.)
fn calls_answer(calls: &[(String, &str, String)]) -> Response {
    let calls: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, tool, arguments))| {
            let arguments = serde_json::to_string(arguments).expect("a string serializes");
            format!(
                r#"{{"index":{index},"id":"{id}","type":"function","function":{{"name":"{tool}","arguments":{arguments}}}}}"#
            )
        })
        .collect();
    let delta = format!(
        r#"{{"role":"assistant","content":null,"tool_calls":[{}]}}"#,
        calls.join(",")
    );
    let mut body = Vec::new();
    body.extend_from_slice(&chunk(&delta, "null"));
    body.extend_from_slice(&chunk("{}", r#""tool_calls""#));
    body.extend_from_slice(b"data: [DONE]\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(body))
        .expect("a valid response")
}

pub fn content_chunk(content: &str) -> Bytes {
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
    fn expected_replies_are_the_deltas_end_to_end() {
        let stamped = Script::Stamped {
            deltas: 12,
            interval: Duration::ZERO,
            sent: SendTimes::new(12),
        }
        .expected();
        assert_eq!(&*stamped.text, "0;1;2;3;4;5;6;7;8;9;10;11;");
        assert_eq!(stamped.ends[0], 2);
        assert_eq!(stamped.ends[11], stamped.text.len());
        let words = Script::Words { deltas: 3 }.expected();
        assert_eq!(words.ends.len(), 3);
        assert_eq!(
            words.text.split(' ').count(),
            3,
            "words are separated by spaces: {}",
            words.text
        );
    }
}
