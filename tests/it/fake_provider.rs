//! A fake model provider inside the test process: a small axum app on 127.0.0.1:0 that answers
//! each protocol's streaming endpoint in that protocol's real SSE format, from a queue of
//! scripted replies, and records every request it gets. It is written from the providers'
//! documentation, not from our client code, so it can catch a client that misreads the wire.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions};
use crate::support::{events_until, items};

/// The protocols, as the fake speaks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenaiChat,
    OpenaiResponses,
    AnthropicMessages,
}

/// One scripted answer to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A streamed text answer, a few characters a chunk, with usage and the completion marker.
    Text(String),
    /// One tool call whose JSON arguments arrive split into `fragments` pieces.
    ToolCall {
        name: String,
        arguments: Value,
        fragments: usize,
    },
    /// An HTTP error in the protocol's error shape, with `Retry-After` when given.
    Status {
        status: u16,
        retry_after: Option<String>,
        message: String,
    },
    /// The first `chunks` chunks of a text answer, then the connection is cut.
    CutAfter { text: String, chunks: usize },
    /// The first `chunks` chunks of a text answer, then the body ends cleanly, without the
    /// protocol's completion marker.
    EndAfter { text: String, chunks: usize },
    /// The start of an answer, then a chunk that is not JSON.
    MalformedChunk,
    /// A streamed text answer whose usage report counts 0 tokens everywhere, as some
    /// compatible servers send.
    Unmetered(String),
    /// Responses API only: a reasoning item (summary `Thinking.` and the given encrypted
    /// content), then a text answer.
    Reasoned { encrypted: String, text: String },
    /// Chat Completions only: several tool calls in one answer (each sent whole).
    ToolCalls(Vec<(String, Value)>),
    /// The first `chunks` chunks of a text answer, then silence with the connection open (a
    /// provider that hangs mid-answer).
    StallAfter { text: String, chunks: usize },
    /// A 200 event stream whose body is not server-sent events at all.
    Garbage,
    /// An HTTP error whose message echoes the credentials the request carried (its
    /// `Authorization` and `x-api-key` headers), as a careless provider or gateway does.
    EchoCredentials { status: u16 },
    /// Anthropic only: extended thinking as the API streams it (a thinking block, its text in
    /// pieces and then its signature, and a redacted thinking block), then a call of `name`.
    Thought {
        thinking: String,
        signature: String,
        redacted: String,
        name: String,
        arguments: Value,
    },
    /// Responses API only: a reasoning item (summary `Thinking.` and the given encrypted
    /// content), then a call of `name`.
    ReasonedCall {
        encrypted: String,
        name: String,
        arguments: Value,
    },
    /// The reply, once the gate is opened (`Notify::notify_one`, before or after the request
    /// comes): a model call that takes as long as the test wants.
    After(Arc<tokio::sync::Notify>, Box<Reply>),
    /// Responses API only: calls of the built-in `apply_patch` tool, one `apply_patch_call`
    /// item per operation (`{"type": "update_file", "path": …, "diff": …}`), as the API streams
    /// them.
    ApplyPatch(Vec<Value>),
}

/// Picks the reply to a request from its body, before the queue is looked at; `None` falls
/// back to the queue. For tests where concurrent sessions call the model in no fixed order.
pub type Script = Arc<dyn Fn(&Value) -> Option<Reply> + Send + Sync>;

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// The query of the URL called (empty when none).
    pub query: String,
    pub headers: HeaderMap,
    pub body: Value,
}

/// A running fake provider; it stops when dropped.
pub struct FakeProvider {
    pub wire: Wire,
    /// What the provider's `base_url` is set to.
    pub base_url: String,
    state: Arc<FakeState>,
    server: tokio::task::JoinHandle<()>,
}

struct FakeState {
    wire: Wire,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// The wait between two chunks of a streamed answer.
    pace: Mutex<Duration>,
    script: Mutex<Option<Script>>,
    /// Answers being streamed now, and the most ever streamed at once.
    streaming: std::sync::atomic::AtomicUsize,
    most_streaming: std::sync::atomic::AtomicUsize,
}

/// Characters per streamed text chunk.
pub const CHUNK_CHARS: usize = 5;
/// The token counts every completed answer reports.
pub const INPUT_TOKENS: u64 = 321;
pub const OUTPUT_TOKENS: u64 = 12;
/// Of the output tokens, reasoning (reported by the protocols that count it apart).
pub const REASONING_TOKENS: u64 = 5;
/// Of the input tokens, those every metered answer reports read from the prompt cache.
pub const CACHED_TOKENS: u64 = 300;
/// The provider's name for the model in the generated config.
pub const MODEL_NAME: &str = "fake-model";

impl Wire {
    /// The `protocol` value in config.toml.
    pub fn protocol(self) -> &'static str {
        match self {
            Wire::OpenaiChat => "openai_chat",
            Wire::OpenaiResponses => "openai_responses",
            Wire::AnthropicMessages => "anthropic_messages",
        }
    }

    /// The path the client must post to, under the `/v1` base URL.
    pub fn path(self) -> &'static str {
        match self {
            Wire::OpenaiChat => "/v1/chat/completions",
            Wire::OpenaiResponses => "/v1/responses",
            Wire::AnthropicMessages => "/v1/messages",
        }
    }

    /// The result the request body hands back for a tool call, if any.
    pub fn tool_result(self, body: &Value, call_id: &str) -> Option<String> {
        let found = match self {
            Wire::OpenaiChat => body["messages"]
                .as_array()?
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
                .map(|m| m["content"].clone()),
            Wire::OpenaiResponses => body["input"]
                .as_array()?
                .iter()
                .find(|i| {
                    (i["type"] == "function_call_output" || i["type"] == "apply_patch_call_output")
                        && i["call_id"] == call_id
                })
                .map(|i| i["output"].clone()),
            Wire::AnthropicMessages => body["messages"]
                .as_array()?
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == call_id)
                .map(|b| b["content"].clone()),
        };
        // A result with images is a list of parts: its text is that of the text parts.
        match found? {
            Value::String(text) => Some(text),
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        }
    }

    /// Whether the request body asks for the tool call (as the model made it) before its result.
    pub fn has_tool_call(self, body: &Value, call_id: &str) -> bool {
        let text = body.to_string();
        let (kind, id) = match self {
            Wire::OpenaiChat => ("\"tool_calls\"", format!("\"id\":\"{call_id}\"")),
            Wire::OpenaiResponses => ("\"function_call\"", format!("\"call_id\":\"{call_id}\"")),
            Wire::AnthropicMessages => ("\"tool_use\"", format!("\"id\":\"{call_id}\"")),
        };
        text.contains(kind) && text.contains(&id)
    }
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_owned())
    }

    pub fn tool_call(name: &str, arguments: Value, fragments: usize) -> Reply {
        Reply::ToolCall {
            name: name.to_owned(),
            arguments,
            fragments,
        }
    }

    pub fn status(status: u16) -> Reply {
        Reply::Status {
            status,
            retry_after: None,
            message: format!("fake provider failure {status}"),
        }
    }

    pub fn rate_limited(retry_after: &str) -> Reply {
        Reply::Status {
            status: 429,
            retry_after: Some(retry_after.to_owned()),
            message: "rate limit reached, slow down".to_owned(),
        }
    }

    pub fn rejected(status: u16, message: &str) -> Reply {
        Reply::Status {
            status,
            retry_after: None,
            message: message.to_owned(),
        }
    }

    pub fn cut_after(text: &str, chunks: usize) -> Reply {
        Reply::CutAfter {
            text: text.to_owned(),
            chunks,
        }
    }

    pub fn end_after(text: &str, chunks: usize) -> Reply {
        Reply::EndAfter {
            text: text.to_owned(),
            chunks,
        }
    }
}

impl FakeProvider {
    pub async fn start(wire: Wire) -> FakeProvider {
        let state = Arc::new(FakeState {
            wire,
            replies: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            pace: Mutex::new(Duration::from_millis(2)),
            script: Mutex::new(None),
            streaming: std::sync::atomic::AtomicUsize::new(0),
            most_streaming: std::sync::atomic::AtomicUsize::new(0),
        });
        let app = Router::new().fallback(answer).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeProvider {
            wire,
            base_url: format!("http://{address}/v1"),
            state,
            server,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.state.replies.lock().unwrap().push_back(reply);
    }

    /// Replies chosen from each request's body (see [`Script`]).
    pub fn script(&self, script: impl Fn(&Value) -> Option<Reply> + Send + Sync + 'static) {
        *self.state.script.lock().unwrap() = Some(Arc::new(script));
    }

    /// The most answers that were ever being streamed at the same time.
    pub fn most_streaming_at_once(&self) -> usize {
        self.state
            .most_streaming
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn set_pace(&self, pace: Duration) {
        *self.state.pace.lock().unwrap() = pace;
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Scripted replies not used yet.
    pub fn remaining(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }

    /// A config file using this provider for the default agent's model, with short retry
    /// delays (tests may shrink the delays, never the rule).
    pub fn config(&self) -> String {
        self.config_with("")
    }

    /// The same, with extra lines in the `[providers.fake]` table.
    pub fn config_with(&self, provider_lines: &str) -> String {
        format!(
            r#"
[retry]
max_attempts = 10
initial_delay_ms = 10
max_delay_ms = 50

[providers.fake]
protocol = "{protocol}"
base_url = "{base_url}"
{provider_lines}

[models.m]
provider = "fake"
name = "{MODEL_NAME}"
context_window = 100000
max_output_tokens = 1000

[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
"#,
            protocol = self.wire.protocol(),
            base_url = self.base_url,
        )
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn answer(State(state): State<Arc<FakeState>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let headers = request.headers().clone();
    let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let number = {
        let mut requests = state.requests.lock().unwrap();
        requests.push(Recorded {
            path: path.clone(),
            query,
            headers,
            body,
        });
        requests.len()
    };
    let wire = state.wire;
    if path != wire.path() {
        return error_response(wire, 404, None, &format!("no route for {path}"));
    }
    let scripted = state
        .script
        .lock()
        .unwrap()
        .clone()
        .and_then(|script| script(&state.requests.lock().unwrap()[number - 1].body));
    let Some(mut reply) = scripted.or_else(|| state.replies.lock().unwrap().pop_front()) else {
        return error_response(
            wire,
            400,
            None,
            "the fake provider has no reply scripted for this request",
        );
    };
    while let Reply::After(gate, then) = reply {
        gate.notified().await;
        reply = *then;
    }
    let pace = *state.pace.lock().unwrap();
    let id = format!("fake_{number}");
    let sse = |frames, cut, pace| sse(frames, cut, pace, state.clone());
    match reply {
        Reply::Text(text) => sse(Frames::text(wire, &id, &text).all(), false, pace),
        Reply::Unmetered(text) => sse(
            Frames::text_metered(wire, &id, &text, false).all(),
            false,
            pace,
        ),
        Reply::ToolCalls(calls) => {
            assert_eq!(
                wire,
                Wire::OpenaiChat,
                "parallel calls are scripted for chat only"
            );
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(index, (name, arguments))| {
                    json!({ "index": index, "id": format!("call_{id}_{index}"), "type": "function",
                            "function": { "name": name, "arguments": arguments.to_string() } })
                })
                .collect();
            let first = json!({ "role": "assistant", "content": null, "tool_calls": tool_calls });
            let mut frames = vec![chat(&id, first, None)];
            frames.extend(chat_end(&id, "tool_calls", true));
            sse(frames, false, pace)
        }
        Reply::ToolCall {
            name,
            arguments,
            fragments,
        } => sse(
            Frames::tool_call(wire, &id, &name, &arguments, fragments).all(),
            false,
            pace,
        ),
        Reply::Status {
            status,
            retry_after,
            message,
        } => error_response(wire, status, retry_after.as_deref(), &message),
        Reply::CutAfter { text, chunks } => {
            sse(Frames::text(wire, &id, &text).first(chunks), true, pace)
        }
        Reply::EndAfter { text, chunks } => {
            sse(Frames::text(wire, &id, &text).first(chunks), false, pace)
        }
        Reply::StallAfter { text, chunks } => {
            let frames = Frames::text(wire, &id, &text).first(chunks);
            let stream = async_stream::stream! {
                for frame in frames {
                    yield Ok::<Bytes, std::io::Error>(Bytes::from(frame));
                }
                // Until the client gives up and closes the connection.
                std::future::pending::<()>().await;
            };
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Reply::Garbage => Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from(
                "\u{0}\u{1}<html>502 upstream went away</html>\n\n\u{fffd}\u{fffd}{{{{\n\n",
            ))
            .unwrap(),
        Reply::Reasoned { encrypted, text } => {
            assert_eq!(
                wire,
                Wire::OpenaiResponses,
                "reasoning state is a Responses API thing"
            );
            let reasoning_id = format!("rs_{id}");
            let done = json!({
                "id": reasoning_id, "type": "reasoning", "encrypted_content": encrypted,
                "summary": [{ "type": "summary_text", "text": "Thinking." }],
            });
            let reasoning = [
                responses(
                    json!({ "type": "response.output_item.added", "output_index": 0, "item": { "id": reasoning_id, "type": "reasoning", "summary": [] } }),
                ),
                responses(
                    json!({ "type": "response.reasoning_summary_text.delta", "item_id": reasoning_id, "output_index": 0, "summary_index": 0, "delta": "Thinking." }),
                ),
                responses(
                    json!({ "type": "response.output_item.done", "output_index": 0, "item": done }),
                ),
            ];
            let mut frames = Frames::text(wire, &id, &text);
            frames.start.splice(2..2, reasoning);
            sse(frames.all(), false, pace)
        }
        Reply::EchoCredentials { status } => {
            let requests = state.requests.lock().unwrap();
            let header = |name: &str| {
                requests[number - 1]
                    .headers
                    .get(name)
                    .map(|value| value.to_str().unwrap_or_default().to_owned())
                    .unwrap_or_default()
            };
            let message = format!(
                "invalid credentials: authorization={} x-api-key={}",
                header("authorization"),
                header("x-api-key")
            );
            error_response(wire, status, None, &message)
        }
        Reply::Thought {
            thinking,
            signature,
            redacted,
            name,
            arguments,
        } => {
            assert_eq!(
                wire,
                Wire::AnthropicMessages,
                "thinking blocks are an Anthropic thing"
            );
            let frames =
                anthropic_thought(&id, [&thinking, &signature, &redacted], &name, &arguments);
            sse(frames, false, pace)
        }
        Reply::ApplyPatch(operations) => {
            assert_eq!(
                wire,
                Wire::OpenaiResponses,
                "apply_patch_call items are a Responses API thing"
            );
            let mut frames = vec![responses(
                json!({ "type": "response.created", "response": response_object(&id, "in_progress", json!([]), None) }),
            )];
            let mut output = Vec::new();
            for (index, operation) in operations.into_iter().enumerate() {
                let item_id = format!("apc_{id}_{index}");
                let call_id = format!("call_{id}_{index}");
                let added = json!({ "id": item_id, "type": "apply_patch_call", "call_id": call_id, "status": "in_progress", "operation": operation });
                let done = json!({ "id": item_id, "type": "apply_patch_call", "call_id": call_id, "status": "completed", "operation": operation });
                frames.push(responses(json!({ "type": "response.output_item.added", "output_index": index, "item": added })));
                frames.push(responses(json!({ "type": "response.output_item.done", "output_index": index, "item": done })));
                output.push(done);
            }
            frames.push(responses(json!({ "type": "response.completed", "response": response_object(&id, "completed", json!(output), Some(usage_json(wire, true))) })));
            sse(frames, false, pace)
        }
        Reply::ReasonedCall {
            encrypted,
            name,
            arguments,
        } => {
            assert_eq!(
                wire,
                Wire::OpenaiResponses,
                "reasoning state is a Responses API thing"
            );
            let mut frames = Frames::tool_call(wire, &id, &name, &arguments, 2);
            frames
                .start
                .splice(1..1, responses_reasoning(&id, &encrypted));
            sse(frames.all(), false, pace)
        }
        Reply::After(..) => unreachable!("gates are waited for above"),
        Reply::MalformedChunk => {
            let mut frames = Frames::text(wire, &id, "").start;
            let event = match wire {
                Wire::OpenaiChat => String::new(),
                Wire::OpenaiResponses => "event: response.output_text.delta\n".to_owned(),
                Wire::AnthropicMessages => "event: content_block_delta\n".to_owned(),
            };
            frames.push(format!("{event}data: {{\"type\": \"content_bl\n\n"));
            sse(frames, false, pace)
        }
    }
}

/// Streams SSE frames, pausing between them; `cut` drops the connection instead of ending the
/// body, as a proxy or a crashed server would.
fn sse(frames: Vec<String>, cut: bool, pace: Duration, state: Arc<FakeState>) -> Response {
    use std::sync::atomic::Ordering::SeqCst;
    let now = state.streaming.fetch_add(1, SeqCst) + 1;
    state.most_streaming.fetch_max(now, SeqCst);
    let streaming = Streaming(state);
    let stream = async_stream::stream! {
        let _streaming = streaming;
        for frame in frames {
            yield Ok::<Bytes, std::io::Error>(Bytes::from(frame));
            tokio::time::sleep(pace).await;
        }
        if cut {
            yield Err(std::io::Error::other("the fake provider cut the stream"));
        }
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Counts an answer as no longer streaming when its body is dropped (finished or abandoned).
struct Streaming(Arc<FakeState>);

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0
            .streaming
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An error answer in the protocol's documented shape.
fn error_response(wire: Wire, status: u16, retry_after: Option<&str>, message: &str) -> Response {
    let kind = match status {
        429 => "rate_limit_error",
        500.. => "api_error",
        _ => "invalid_request_error",
    };
    let body = match wire {
        Wire::OpenaiChat | Wire::OpenaiResponses => {
            json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
        }
        Wire::AnthropicMessages => {
            json!({ "type": "error", "error": { "type": kind, "message": message } })
        }
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(retry_after) = retry_after {
        response = response.header(header::RETRY_AFTER, retry_after);
    }
    response.body(Body::from(body.to_string())).unwrap()
}

/// An answer's SSE frames: the opening ones, the content (what a cut keeps a prefix of), and
/// the closing ones (finish, usage, completion marker).
struct Frames {
    start: Vec<String>,
    body: Vec<String>,
    end: Vec<String>,
}

impl Frames {
    fn all(self) -> Vec<String> {
        [self.start, self.body, self.end].concat()
    }

    /// The opening frames and the first `chunks` content frames.
    fn first(self, chunks: usize) -> Vec<String> {
        let mut frames = self.start;
        frames.extend(self.body.into_iter().take(chunks));
        frames
    }

    fn text(wire: Wire, id: &str, text: &str) -> Frames {
        Frames::text_metered(wire, id, text, true)
    }

    /// A text answer; `metered: false` reports 0 tokens.
    fn text_metered(wire: Wire, id: &str, text: &str, metered: bool) -> Frames {
        let pieces = chunks(text);
        match wire {
            Wire::OpenaiChat => Frames {
                start: vec![chat(id, json!({ "role": "assistant", "content": "" }), None)],
                body: pieces
                    .iter()
                    .map(|piece| chat(id, json!({ "content": piece }), None))
                    .collect(),
                end: chat_end(id, "stop", metered),
            },
            Wire::OpenaiResponses => {
                let item_id = format!("msg_{id}");
                let done_item = json!({
                    "id": item_id, "type": "message", "status": "completed", "role": "assistant",
                    "content": [{ "type": "output_text", "text": text, "annotations": [] }],
                });
                Frames {
                    start: vec![
                        responses(json!({ "type": "response.created", "response": response_object(id, "in_progress", json!([]), None) })),
                        responses(json!({ "type": "response.in_progress", "response": response_object(id, "in_progress", json!([]), None) })),
                        responses(json!({ "type": "response.output_item.added", "output_index": 0, "item": { "id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": [] } })),
                        responses(json!({ "type": "response.content_part.added", "item_id": item_id, "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": "", "annotations": [] } })),
                    ],
                    body: pieces
                        .iter()
                        .map(|piece| {
                            responses(json!({ "type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0, "delta": piece, "logprobs": [] }))
                        })
                        .collect(),
                    end: vec![
                        responses(json!({ "type": "response.output_text.done", "item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": [] })),
                        responses(json!({ "type": "response.content_part.done", "item_id": item_id, "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": text, "annotations": [] } })),
                        responses(json!({ "type": "response.output_item.done", "output_index": 0, "item": done_item })),
                        responses(json!({ "type": "response.completed", "response": response_object(id, "completed", json!([done_item]), Some(usage_json(wire, metered))) })),
                    ],
                }
            }
            Wire::AnthropicMessages => Frames {
                start: vec![
                    anthropic_start(id, metered),
                    anthropic(json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } })),
                    anthropic(json!({ "type": "ping" })),
                ],
                body: pieces
                    .iter()
                    .map(|piece| {
                        anthropic(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": piece } }))
                    })
                    .collect(),
                end: anthropic_end(0, "end_turn", metered),
            },
        }
    }

    fn tool_call(wire: Wire, id: &str, name: &str, arguments: &Value, fragments: usize) -> Frames {
        let arguments = arguments.to_string();
        let pieces = split(&arguments, fragments);
        match wire {
            Wire::OpenaiChat => {
                let call_id = format!("call_{id}");
                let first = json!({ "role": "assistant", "content": null, "tool_calls": [
                    { "index": 0, "id": call_id, "type": "function", "function": { "name": name, "arguments": "" } }
                ] });
                Frames {
                    start: vec![chat(id, first, None)],
                    body: pieces
                        .iter()
                        .map(|piece| {
                            chat(id, json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }), None)
                        })
                        .collect(),
                    end: chat_end(id, "tool_calls", true),
                }
            }
            Wire::OpenaiResponses => {
                let item_id = format!("fc_{id}");
                let call_id = format!("call_{id}");
                let item = |status: &str, arguments: &str| {
                    json!({ "id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": arguments })
                };
                Frames {
                    start: vec![
                        responses(json!({ "type": "response.created", "response": response_object(id, "in_progress", json!([]), None) })),
                        responses(json!({ "type": "response.output_item.added", "output_index": 0, "item": item("in_progress", "") })),
                    ],
                    body: pieces
                        .iter()
                        .map(|piece| {
                            responses(json!({ "type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": 0, "delta": piece }))
                        })
                        .collect(),
                    end: vec![
                        responses(json!({ "type": "response.function_call_arguments.done", "item_id": item_id, "output_index": 0, "arguments": arguments })),
                        responses(json!({ "type": "response.output_item.done", "output_index": 0, "item": item("completed", &arguments) })),
                        responses(json!({ "type": "response.completed", "response": response_object(id, "completed", json!([item("completed", &arguments)]), Some(usage_json(wire, true))) })),
                    ],
                }
            }
            Wire::AnthropicMessages => Frames {
                start: vec![
                    anthropic_start(id, true),
                    anthropic(json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {} } })),
                    anthropic(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": "" } })),
                ],
                body: pieces
                    .iter()
                    .map(|piece| {
                        anthropic(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": piece } }))
                    })
                    .collect(),
                end: anthropic_end(0, "tool_use", true),
            },
        }
    }
}

/// Text in chunks of [`CHUNK_CHARS`] characters.
pub fn chunks(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(CHUNK_CHARS)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Text in `parts` pieces of about equal length (some may be empty when the text is short).
fn split(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts.max(1)).max(1);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// The usage report of an answer; `metered: false` counts 0 everywhere.
fn usage_json(wire: Wire, metered: bool) -> Value {
    let report = usage_report(wire);
    if metered {
        return report;
    }
    zeroed(report)
}

/// Every number in a JSON value set to 0.
fn zeroed(value: Value) -> Value {
    match value {
        Value::Number(_) => json!(0),
        Value::Object(map) => map.into_iter().map(|(k, v)| (k, zeroed(v))).collect(),
        other => other,
    }
}

fn usage_report(wire: Wire) -> Value {
    match wire {
        Wire::OpenaiChat => json!({
            "prompt_tokens": INPUT_TOKENS,
            "prompt_tokens_details": { "cached_tokens": CACHED_TOKENS },
            "completion_tokens": OUTPUT_TOKENS,
            "completion_tokens_details": { "reasoning_tokens": REASONING_TOKENS },
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }),
        Wire::OpenaiResponses => json!({
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": { "cached_tokens": CACHED_TOKENS },
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": { "reasoning_tokens": REASONING_TOKENS },
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }),
        Wire::AnthropicMessages => json!({ "output_tokens": OUTPUT_TOKENS }),
    }
}

/// A Chat Completions chunk: `data:` only, no event name.
fn chat(id: &str, delta: Value, finish_reason: Option<&str>) -> String {
    let chunk = json!({
        "id": format!("chatcmpl-{id}"),
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL_NAME,
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
    });
    format!("data: {chunk}\n\n")
}

fn chat_end(id: &str, finish_reason: &str, metered: bool) -> Vec<String> {
    let usage = json!({
        "id": format!("chatcmpl-{id}"),
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL_NAME,
        "choices": [],
        "usage": usage_json(Wire::OpenaiChat, metered),
    });
    vec![
        chat(id, json!({}), Some(finish_reason)),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_owned(),
    ]
}

/// A Responses event: its type both as the SSE event name and in the data.
fn responses(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn response_object(id: &str, status: &str, output: Value, usage: Option<Value>) -> Value {
    json!({
        "id": format!("resp_{id}"),
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": MODEL_NAME,
        "output": output,
        "usage": usage,
    })
}

/// A Messages event: its type both as the SSE event name and in the data.
fn anthropic(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn anthropic_start(id: &str, metered: bool) -> String {
    // Anthropic counts what it read from the cache apart from `input_tokens`.
    let (input_tokens, cached) = if metered {
        (INPUT_TOKENS - CACHED_TOKENS, CACHED_TOKENS)
    } else {
        (0, 0)
    };
    anthropic(json!({
        "type": "message_start",
        "message": {
            "id": format!("msg_{id}"), "type": "message", "role": "assistant", "content": [],
            "model": MODEL_NAME, "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": input_tokens, "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0, "output_tokens": u64::from(metered),
            },
        },
    }))
}

fn anthropic_end(index: u64, stop_reason: &str, metered: bool) -> Vec<String> {
    vec![
        anthropic(json!({ "type": "content_block_stop", "index": index })),
        anthropic(json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": usage_json(Wire::AnthropicMessages, metered),
        })),
        anthropic(json!({ "type": "message_stop" })),
    ]
}

/// A Responses reasoning item, first of the output: its summary `Thinking.` streamed, then the
/// item whole with its encrypted content.
fn responses_reasoning(id: &str, encrypted: &str) -> [String; 3] {
    let reasoning_id = format!("rs_{id}");
    let done = json!({
        "id": reasoning_id, "type": "reasoning", "encrypted_content": encrypted,
        "summary": [{ "type": "summary_text", "text": "Thinking." }],
    });
    [
        responses(
            json!({ "type": "response.output_item.added", "output_index": 0, "item": { "id": reasoning_id, "type": "reasoning", "summary": [] } }),
        ),
        responses(
            json!({ "type": "response.reasoning_summary_text.delta", "item_id": reasoning_id, "output_index": 0, "summary_index": 0, "delta": "Thinking." }),
        ),
        responses(json!({ "type": "response.output_item.done", "output_index": 0, "item": done })),
    ]
}

/// A thinking block (its text, then its signature), a redacted thinking block, then a tool use:
/// the blocks numbered as the API numbers them.
fn anthropic_thought(
    id: &str,
    [thinking, signature, redacted]: [&str; 3],
    name: &str,
    arguments: &Value,
) -> Vec<String> {
    let block = |data: Value| anthropic(data);
    let mut frames = vec![
        anthropic_start(id, true),
        block(
            json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "thinking", "thinking": "" } }),
        ),
    ];
    frames.extend(chunks(thinking).iter().map(|piece| {
        block(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": piece } }))
    }));
    frames.extend([
        block(json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "signature_delta", "signature": signature } })),
        block(json!({ "type": "content_block_stop", "index": 0 })),
        block(json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "redacted_thinking", "data": redacted } })),
        block(json!({ "type": "content_block_stop", "index": 1 })),
        block(json!({ "type": "content_block_start", "index": 2, "content_block": { "type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {} } })),
        block(json!({ "type": "content_block_delta", "index": 2, "delta": { "type": "input_json_delta", "partial_json": arguments.to_string() } })),
    ]);
    frames.extend(anthropic_end(2, "tool_use", true));
    frames
}

/// The real server configured with a fake provider, and a conversation whose first turn has
/// ended, so a test can follow every event of the next turn from its start.
pub struct Setup {
    pub fake: FakeProvider,
    pub server: Server,
    pub id: String,
}

/// What one turn did: its events (from the message to `turn.ended`) and the requests the
/// provider got meanwhile.
pub struct TurnRun {
    pub events: Vec<(String, Value)>,
    pub requests: Vec<Recorded>,
}

impl Setup {
    pub async fn start(wire: Wire) -> Setup {
        let fake = FakeProvider::start(wire).await;
        let config = fake.config();
        Setup::start_with(fake, config, Vec::new()).await
    }

    pub async fn start_with(
        fake: FakeProvider,
        config: String,
        env: Vec<(String, String)>,
    ) -> Setup {
        let server = Server::start_with(ServerOptions {
            config: Some(config),
            env,
            ..ServerOptions::default()
        })
        .await;
        fake.push(Reply::text("Ready."));
        let created = server.create_and_wait("Hello").await;
        let id = created["conversation"]["id"].as_str().unwrap().to_owned();
        Setup { fake, server, id }
    }

    /// Sends a message and follows the turn it starts to its end.
    pub async fn turn(&self, text: &str) -> TurnRun {
        let before = self.fake.requests().len();
        let mut events = self.server.events(&self.id).await;
        let (status, body) = self
            .server
            .post(
                &format!("/api/conversations/{}/messages", self.id),
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        assert_eq!(body["message"]["status"], "started", "{body}");
        let events = events_until(&mut events, "turn.ended").await;
        TurnRun {
            events,
            requests: self.fake.requests().split_off(before),
        }
    }

    /// The stored items of the root session.
    pub async fn items(&self) -> Vec<Value> {
        items(&self.server, &self.id).await
    }
}

impl TurnRun {
    /// The data of every event of one type, in order.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|(event_kind, _)| event_kind == kind)
            .map(|(_, data)| data)
            .collect()
    }

    pub fn ended(&self) -> &Value {
        &self.events.last().expect("turn.ended").1
    }

    /// The completed (final) items of the turn, by kind.
    pub fn completed(&self, kind: &str) -> Vec<&Value> {
        self.all("item.completed")
            .into_iter()
            .map(|data| &data["item"])
            .filter(|item| item["kind"] == kind)
            .collect()
    }

    /// The text deltas streamed for one item, joined.
    pub fn streamed_text(&self, item_id: &str) -> String {
        self.all("item.delta")
            .into_iter()
            .filter(|delta| delta["item_id"] == item_id && delta["field"] == "text")
            .map(|delta| delta["delta"].as_str().unwrap())
            .collect()
    }
}
