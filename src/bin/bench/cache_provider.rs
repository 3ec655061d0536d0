//! The `cache` bench's fake provider: Anthropic Messages (`POST /v1/messages`), OpenAI Chat
//! Completions (`/v1/chat/completions`) and Responses (`/v1/responses`), each streaming as the
//! real one does and reporting the input it read from and wrote to its prompt cache as the real
//! one would (the arithmetic is `prompt_cache`'s). Its answers run tools: a request whose
//! newest message is the user's gets one or two tool calls (`read_file`, `shell`,
//! `update_plan`, in turn), one that ends with tool results gets a text answer.
//!
//! It also notes every request whose parts do not start with the previous request's parts (a
//! prefix the service changed between two calls of one conversation), which is what makes a
//! cache miss where none should be.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::fake_provider::serve_on_own_thread;
use super::prompt_cache::{
    AnthropicCache, Block, FIVE_MINUTES, ONE_HOUR, OPENAI_EXTENDED, OPENAI_IN_MEMORY, OpenaiCache,
    anthropic_minimum, tokens,
};
use super::text::WORDS;

/// The file the scripted `read_file` and `shell` calls look at, in the conversation's
/// working directory.
pub const NOTES_FILE: &str = "notes.md";

/// One model call as the provider accounted for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Call {
    /// All of its input, cached or not.
    pub input_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
}

/// A request that did not start with the previous request's parts.
#[derive(Debug, Clone)]
pub struct PrefixChange {
    /// The request's index in the conversation (0: its first).
    pub request: usize,
    /// The first part that differs, and the text around the first differing byte in each.
    pub part: usize,
    pub before: String,
    pub after: String,
}

/// A running provider; it stops when dropped.
pub struct CacheProvider {
    /// What the providers' `base_url` is set to.
    pub base_url: String,
    state: Arc<Mutex<Caches>>,
    shutdown: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Caches {
    anthropic: AnthropicCache,
    openai: OpenaiCache,
    /// The current conversation's calls and prefix changes, and its last request's parts.
    calls: Vec<Call>,
    changes: Vec<PrefixChange>,
    previous: Option<Vec<String>>,
    /// The conversation's tool-call answers so far, choosing the next one; and call ids given.
    tool_answers: usize,
    call_ids: usize,
}

impl CacheProvider {
    pub fn start() -> anyhow::Result<CacheProvider> {
        let state = Arc::new(Mutex::new(Caches::default()));
        let app = Router::new().fallback(answer).with_state(state.clone());
        let (address, shutdown) = serve_on_own_thread(app, "cache-provider")?;
        Ok(CacheProvider {
            base_url: format!("http://{address}/v1"),
            state,
            shutdown: Some(shutdown),
        })
    }

    /// Starts a new conversation: its calls and prefix changes counted afresh, its script from
    /// the start, so every conversation gets the same answers. The caches stay, as a
    /// provider's do.
    pub fn new_conversation(&self) {
        let mut caches = self.state.lock().expect("cache lock");
        caches.calls.clear();
        caches.changes.clear();
        caches.previous = None;
        caches.tool_answers = 0;
        caches.call_ids = 0;
    }

    /// The current conversation's calls and prefix changes.
    pub fn conversation(&self) -> (Vec<Call>, Vec<PrefixChange>) {
        let caches = self.state.lock().expect("cache lock");
        (caches.calls.clone(), caches.changes.clone())
    }
}

impl Drop for CacheProvider {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Anthropic,
    Chat,
    Responses,
}

async fn answer(State(state): State<Arc<Mutex<Caches>>>, request: Request) -> Response {
    let protocol = match request.uri().path() {
        "/v1/messages" => Protocol::Anthropic,
        "/v1/chat/completions" => Protocol::Chat,
        "/v1/responses" => Protocol::Responses,
        other => return (StatusCode::NOT_FOUND, format!("no route {other}")).into_response(),
    };
    let body = match axum::body::to_bytes(request.into_body(), usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let mut caches = state.lock().expect("cache lock");
    let now = Instant::now();
    let model = body["model"].as_str().unwrap_or_default();
    let (parts, mut call) = match protocol {
        Protocol::Anthropic => {
            let blocks = anthropic_blocks(&body);
            let usage = match caches.anthropic.request(
                model,
                &blocks,
                anthropic_minimum(model),
                now,
            ) {
                Ok(usage) => usage,
                Err(too_many) => {
                    let message = format!(
                        "A maximum of 4 blocks with cache_control may be provided. Found {}.",
                        too_many.0
                    );
                    let error = json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
                    return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
                }
            };
            let call = Call {
                input_tokens: usage.input_tokens
                    + usage.cache_creation_input_tokens
                    + usage.cache_read_input_tokens,
                cache_read_tokens: usage.cache_read_input_tokens,
                cache_write_tokens: usage.cache_creation_input_tokens,
                output_tokens: 0,
            };
            (
                blocks.into_iter().map(|block| block.canonical).collect(),
                call,
            )
        }
        Protocol::Chat | Protocol::Responses => {
            let parts = openai_parts(&body, protocol);
            let lifetime = if body["prompt_cache_retention"] == "24h" {
                OPENAI_EXTENDED
            } else {
                OPENAI_IN_MEMORY
            };
            let key = body["prompt_cache_key"].as_str();
            let usage = caches.openai.request(model, &parts, key, lifetime, now);
            let call = Call {
                input_tokens: usage.prompt_tokens,
                cache_read_tokens: usage.cached_tokens,
                cache_write_tokens: 0,
                output_tokens: 0,
            };
            (parts, call)
        }
    };
    note_prefix_change(&mut caches, &parts);
    let reply = if ends_with_tool_results(&body, protocol) {
        Reply::Text(answer_text(caches.calls.len()))
    } else {
        let calls = next_tool_calls(caches.tool_answers);
        caches.tool_answers += 1;
        Reply::Tools(
            calls
                .into_iter()
                .map(|(name, arguments)| {
                    caches.call_ids += 1;
                    (format!("call_bench_{}", caches.call_ids), name, arguments)
                })
                .collect(),
        )
    };
    call.output_tokens = reply.output_tokens();
    caches.calls.push(call);
    drop(caches);
    let stream = match protocol {
        Protocol::Anthropic => anthropic_stream(model, &call, &reply),
        Protocol::Chat => {
            let usage = body["stream_options"]["include_usage"] == true;
            chat_stream(model, &call, &reply, usage)
        }
        Protocol::Responses => responses_stream(model, &call, &reply),
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(stream))
        .expect("a valid response")
}

/// Records where `parts` stop starting with the previous request's parts, if they do.
fn note_prefix_change(caches: &mut Caches, parts: &[String]) {
    let request = caches.calls.len();
    if let Some(previous) = caches.previous.take()
        && let Some(part) =
            (0..previous.len()).find(|&index| parts.get(index) != Some(&previous[index]))
    {
        let after = parts.get(part).map_or("", String::as_str);
        let before = previous[part].as_str();
        let at = before
            .bytes()
            .zip(after.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(before.len().min(after.len()));
        caches.changes.push(PrefixChange {
            request,
            part,
            before: around(before, at),
            after: around(after, at),
        });
    }
    caches.previous = Some(parts.to_vec());
}

/// Up to 60 bytes of `text` from a little before byte `at`, on character boundaries.
fn around(text: &str, at: usize) -> String {
    let start = (0..=at.saturating_sub(20))
        .rev()
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(0);
    let end = (start + 60).min(text.len());
    let end = (end..=text.len())
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(text.len());
    text[start..end].to_owned()
}

/// An Anthropic request's blocks in the order its cache sees them: each tool, the system
/// blocks, each message's content blocks (with the message's role). `cache_control` is taken
/// out, so moving a breakpoint does not change the prefix.
fn anthropic_blocks(body: &Value) -> Vec<Block> {
    let mut blocks = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        blocks.push(block(tool.clone()));
    }
    match &body["system"] {
        Value::Array(system) => blocks.extend(system.iter().cloned().map(block)),
        Value::Null => {}
        // A system string is one text block: the same prefix as when it comes as a block.
        text => blocks.push(block(json!({ "type": "text", "text": text }))),
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = &message["role"];
        match &message["content"] {
            Value::Array(content) => {
                for part in content {
                    let mut marked = block(part.clone());
                    marked.canonical =
                        json!({ "role": role, "block": part_without_mark(part) }).to_string();
                    blocks.push(marked);
                }
            }
            text => blocks.push(block(json!({ "role": role, "content": text }))),
        }
    }
    blocks
}

fn part_without_mark(part: &Value) -> Value {
    let mut part = part.clone();
    if let Some(object) = part.as_object_mut() {
        object.remove("cache_control");
    }
    part
}

fn block(value: Value) -> Block {
    let breakpoint = value.get("cache_control").map(|control| {
        if control["ttl"] == "1h" {
            ONE_HOUR
        } else {
            FIVE_MINUTES
        }
    });
    Block {
        canonical: part_without_mark(&value).to_string(),
        breakpoint,
    }
}

/// An OpenAI request's prompt in order: the tools, then the instructions and each message
/// (Chat) or input item (Responses).
fn openai_parts(body: &Value, protocol: Protocol) -> Vec<String> {
    let mut parts: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect();
    let items = match protocol {
        Protocol::Responses => {
            if let Some(instructions) = body.get("instructions") {
                parts.push(instructions.to_string());
            }
            &body["input"]
        }
        _ => &body["messages"],
    };
    parts.extend(items.as_array().into_iter().flatten().map(Value::to_string));
    parts
}

/// Whether the request's newest message carries tool results (so the model answers now).
fn ends_with_tool_results(body: &Value, protocol: Protocol) -> bool {
    match protocol {
        Protocol::Anthropic => body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .and_then(|last| last["content"].as_array())
            .is_some_and(|content| content.iter().any(|part| part["type"] == "tool_result")),
        Protocol::Chat => body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .is_some_and(|last| last["role"] == "tool"),
        Protocol::Responses => body["input"]
            .as_array()
            .and_then(|input| input.last())
            .is_some_and(|last| last["type"] == "function_call_output"),
    }
}

/// The tool calls of the `index`th tool-call answer: a file read and a listing, a line count,
/// or a plan, in turn.
fn next_tool_calls(index: usize) -> Vec<(&'static str, Value)> {
    match index % 3 {
        0 => vec![
            ("read_file", json!({ "path": NOTES_FILE })),
            ("shell", json!({ "command": "ls" })),
        ],
        1 => vec![("shell", json!({ "command": format!("wc -w {NOTES_FILE}") }))],
        _ => vec![(
            "update_plan",
            json!({
                "steps": [
                    { "step": "Read the notes", "status": "completed" },
                    { "step": format!("Answer request {index}"), "status": "in_progress" },
                ],
            }),
        )],
    }
}

/// About 60 words, different from one answer to the next.
fn answer_text(seed: usize) -> String {
    let words: Vec<&str> = (0..60)
        .map(|index| WORDS[(seed * 7 + index) % WORDS.len()])
        .collect();
    format!("{}.", words.join(" "))
}

enum Reply {
    Text(String),
    /// (call id, tool name, arguments).
    Tools(Vec<(String, &'static str, Value)>),
}

impl Reply {
    fn output_tokens(&self) -> u64 {
        let bytes = match self {
            Reply::Text(text) => text.len(),
            Reply::Tools(calls) => calls
                .iter()
                .map(|(_, name, arguments)| name.len() + arguments.to_string().len())
                .sum(),
        };
        tokens(bytes).max(1)
    }
}

fn anthropic_stream(model: &str, call: &Call, reply: &Reply) -> String {
    let event = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        )
    };
    let mut out = event(json!({
        "type": "message_start",
        "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": call.input_tokens - call.cache_read_tokens - call.cache_write_tokens,
                "cache_creation_input_tokens": call.cache_write_tokens,
                "cache_read_input_tokens": call.cache_read_tokens,
                "output_tokens": 1,
            },
        },
    }));
    let stop_reason = match reply {
        Reply::Text(text) => {
            out += &event(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            for piece in pieces(text) {
                out += &event(
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                );
            }
            out += &event(json!({"type": "content_block_stop", "index": 0}));
            "end_turn"
        }
        Reply::Tools(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                out += &event(
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                );
                out += &event(
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments.to_string()}}),
                );
                out += &event(json!({"type": "content_block_stop", "index": index}));
            }
            "tool_use"
        }
    };
    out += &event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": call.output_tokens}}),
    );
    out += &event(json!({"type": "message_stop"}));
    out
}

fn chat_stream(model: &str, call: &Call, reply: &Reply, usage: bool) -> String {
    let chunk = |choices: Value, usage: Value| {
        let data = json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "choices": choices, "usage": usage,
        });
        format!("data: {data}\n\n")
    };
    let delta = |delta: Value, finish: Value| {
        chunk(
            json!([{ "index": 0, "delta": delta, "finish_reason": finish }]),
            Value::Null,
        )
    };
    let mut out = delta(json!({ "role": "assistant", "content": "" }), Value::Null);
    let finish = match reply {
        Reply::Text(text) => {
            for piece in pieces(text) {
                out += &delta(json!({ "content": piece }), Value::Null);
            }
            "stop"
        }
        Reply::Tools(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(index, (id, name, arguments))| {
                    json!({
                        "index": index, "id": id, "type": "function",
                        "function": { "name": name, "arguments": arguments.to_string() },
                    })
                })
                .collect();
            out += &delta(json!({ "tool_calls": calls }), Value::Null);
            "tool_calls"
        }
    };
    out += &delta(json!({}), json!(finish));
    if usage {
        out += &chunk(
            json!([]),
            json!({
                "prompt_tokens": call.input_tokens,
                "completion_tokens": call.output_tokens,
                "total_tokens": call.input_tokens + call.output_tokens,
                "prompt_tokens_details": { "cached_tokens": call.cache_read_tokens },
            }),
        );
    }
    out += "data: [DONE]\n\n";
    out
}

fn responses_stream(model: &str, call: &Call, reply: &Reply) -> String {
    let event = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        )
    };
    let mut out = event(json!({
        "type": "response.created",
        "response": { "id": "resp_bench", "status": "in_progress", "model": model },
    }));
    match reply {
        Reply::Text(text) => {
            let item =
                json!({ "type": "message", "id": "msg_bench", "role": "assistant", "content": [] });
            out += &event(
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            );
            for piece in pieces(text) {
                out += &event(
                    json!({"type": "response.output_text.delta", "item_id": "msg_bench", "output_index": 0, "content_index": 0, "delta": piece}),
                );
            }
            let done = json!({ "type": "message", "id": "msg_bench", "role": "assistant", "status": "completed",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }] });
            out += &event(
                json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            );
        }
        Reply::Tools(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                let item_id = format!("fc_{id}");
                let arguments = arguments.to_string();
                let mut item = json!({ "type": "function_call", "id": item_id, "call_id": id, "name": name, "arguments": "" });
                out += &event(
                    json!({"type": "response.output_item.added", "output_index": index, "item": item}),
                );
                out += &event(
                    json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": arguments}),
                );
                item["arguments"] = json!(arguments);
                item["status"] = json!("completed");
                out += &event(
                    json!({"type": "response.output_item.done", "output_index": index, "item": item}),
                );
            }
        }
    }
    out += &event(json!({
        "type": "response.completed",
        "response": {
            "id": "resp_bench", "status": "completed", "model": model,
            "usage": {
                "input_tokens": call.input_tokens,
                "input_tokens_details": { "cached_tokens": call.cache_read_tokens },
                "output_tokens": call.output_tokens,
                "output_tokens_details": { "reasoning_tokens": 0 },
                "total_tokens": call.input_tokens + call.output_tokens,
            },
        },
    }));
    out
}

/// A text in deltas of about four words, as a stream brings it.
fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words.chunks(4).map(|chunk| chunk.concat()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_blocks_follow_the_cache_order_without_their_marks() {
        let body = json!({
            "tools": [{ "name": "shell" }, { "name": "read_file", "cache_control": { "type": "ephemeral" } }],
            "system": [{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral", "ttl": "1h" } }],
            "messages": [
                { "role": "user", "content": [{ "type": "text", "text": "hi", "cache_control": { "type": "ephemeral" } }] },
            ],
        });
        let blocks = anthropic_blocks(&body);
        assert_eq!(blocks.len(), 4);
        let marks: Vec<_> = blocks.iter().map(|block| block.breakpoint).collect();
        assert_eq!(
            marks,
            [None, Some(FIVE_MINUTES), Some(ONE_HOUR), Some(FIVE_MINUTES)]
        );
        assert!(
            blocks
                .iter()
                .all(|block| !block.canonical.contains("cache_control"))
        );
        assert!(blocks[3].canonical.contains("\"user\""));
    }

    #[test]
    fn a_request_that_drops_part_of_the_previous_one_is_noted() {
        let mut caches = Caches::default();
        let parts = |texts: &[&str]| {
            texts
                .iter()
                .map(|text| text.to_string())
                .collect::<Vec<_>>()
        };
        note_prefix_change(&mut caches, &parts(&["tools", "system at 10:00", "hello"]));
        caches.calls.push(Call::default());
        note_prefix_change(
            &mut caches,
            &parts(&["tools", "system at 10:00", "hello", "more"]),
        );
        assert!(caches.changes.is_empty());
        caches.calls.push(Call::default());
        note_prefix_change(
            &mut caches,
            &parts(&["tools", "system at 10:01", "hello", "more"]),
        );
        assert_eq!(caches.changes.len(), 1);
        let change = &caches.changes[0];
        assert_eq!((change.request, change.part), (2, 1));
        assert_eq!(change.before, "system at 10:00");
        assert_eq!(change.after, "system at 10:01");
    }

    #[test]
    fn the_answer_follows_the_newest_message() {
        let asked = json!({ "messages": [{ "role": "user", "content": "go" }] });
        let answered = json!({ "messages": [
            { "role": "user", "content": "go" },
            { "role": "assistant", "content": null, "tool_calls": [] },
            { "role": "tool", "tool_call_id": "c", "content": "ok" },
        ] });
        assert!(!ends_with_tool_results(&asked, Protocol::Chat));
        assert!(ends_with_tool_results(&answered, Protocol::Chat));
        let anthropic = json!({ "messages": [
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "c", "content": "ok" }] },
        ] });
        assert!(ends_with_tool_results(&anthropic, Protocol::Anthropic));
        let responses = json!({ "input": [{ "type": "function_call_output", "call_id": "c", "output": "ok" }] });
        assert!(ends_with_tool_results(&responses, Protocol::Responses));
    }
}
