//! The Anthropic Messages protocol (`POST {base_url}/messages`). Roles must alternate, so
//! neighbouring same-role content (a tool result and a notice, say) is merged into one message.
//! It maps requests and events only; sending, errors and retries are `wire`'s and the turn loop's.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::client::{
    ModelError, ModelEvent, ModelRequest, ModelStream, NativeTool, ProviderClient, TokenUsage,
    ToolSpec,
};
use super::wire::{self, Decoder, Endpoint, Entry, Event, LenientText};
use crate::config::{CacheTtl, ModelOptions, ProviderConfig, Thinking};
use crate::domain::Image;

/// The API version this module speaks.
const ANTHROPIC_VERSION: &str = "2023-06-01";

pub struct AnthropicMessages {
    endpoint: Endpoint,
}

impl AnthropicMessages {
    pub fn new(provider: &ProviderConfig) -> AnthropicMessages {
        AnthropicMessages {
            endpoint: Endpoint::new(provider),
        }
    }
}

impl ProviderClient for AnthropicMessages {
    fn stream(&self, request: ModelRequest, options: &ModelOptions) -> ModelStream {
        let request = self.endpoint.api_key().map(|key| {
            let mut http = self
                .endpoint
                .post("/messages", &request_body(&request, options))
                .header("anthropic-version", ANTHROPIC_VERSION);
            // The one-hour cache lifetime was first offered behind this beta flag; servers that
            // take it without the flag ignore it.
            if options.prompt_cache && options.cache_ttl == Some(CacheTtl::OneHour) {
                http = http.header("anthropic-beta", EXTENDED_CACHE_TTL);
            }
            match key {
                Some(key) => http.header("x-api-key", key),
                None => http,
            }
        });
        wire::stream(request, MessagesDecoder::default())
    }
}

pub fn request_body(request: &ModelRequest, options: &ModelOptions) -> Value {
    let mut messages = Messages::default();
    // Thinking blocks go back at the start of the assistant message that carried them.
    let mut thinking: Vec<Value> = Vec::new();
    for entry in wire::entries(&request.history) {
        match entry {
            Entry::User { text, images } => {
                thinking.clear();
                messages.push("user", user_blocks(text, images));
            }
            Entry::Reasoning { state } => thinking.extend(thinking_blocks(state)),
            Entry::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                // The API refuses text blocks that are only whitespace.
                if !text.trim().is_empty() {
                    blocks.push(json!({ "type": "text", "text": text }));
                }
                blocks.extend(calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.call_id,
                        "name": call.name,
                        "input": call.arguments,
                    })
                }));
                // Thinking alone is no answer: it goes back only ahead of one.
                let thinking = std::mem::take(&mut thinking);
                if !blocks.is_empty() {
                    blocks.splice(0..0, thinking);
                }
                messages.push("assistant", blocks);
                let results = calls
                    .into_iter()
                    .map(|call| {
                        // Images go in the result as blocks after its text.
                        let content = match call.images {
                            [] => json!(call.output),
                            images => json!(user_blocks(call.output, images)),
                        };
                        json!({
                            "type": "tool_result",
                            "tool_use_id": call.call_id,
                            "content": content,
                        })
                    })
                    .collect();
                messages.push("user", results);
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "stream": true,
        "messages": messages.0,
    });
    if let Some(instructions) = &request.instructions {
        body["system"] = json!(instructions);
    }
    // No `temperature` is sent: with thinking on, Anthropic refuses any but the default.
    match options.thinking {
        Some(Thinking::Budget(budget)) => {
            body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget });
        }
        Some(Thinking::Adaptive) => body["thinking"] = json!({ "type": "adaptive" }),
        None => {}
    }
    if !request.tools.is_empty() {
        body["tools"] = tool_definitions(&request.tools);
    }
    if options.prompt_cache && request.cache_key.is_some() {
        cache_breakpoints(&mut body, &request.model, options.cache_ttl);
    }
    body
}

/// Anthropic caches a prefix only up to a `cache_control` breakpoint (at most 4 a request):
/// one at the end of the stable prefix (the tools, then the instructions), which a call still
/// reads when the history changed under it (a compaction), and one on the newest message, so
/// that each call reads what the previous one wrote. A prefix shorter than the model's
/// minimum is not cached at all, so it gets no breakpoint.
fn cache_breakpoints(body: &mut Value, model: &str, ttl: Option<CacheTtl>) {
    let minimum = min_cacheable_tokens(model);
    let mut control = json!({ "type": "ephemeral" });
    if let Some(ttl) = ttl {
        control["ttl"] = json!(ttl.as_str());
    }
    // About four characters a token: close enough to tell a short prefix from a long one.
    let tokens = |value: &Value| value.to_string().len() as u64 / 4;
    let prefix = tokens(&body["tools"]) + tokens(&body["system"]);
    // The history is measured only when the prefix alone is too short: it is the bulk of a
    // long conversation's request, and is serialized again when the request is sent.
    let whole_long_enough = prefix >= minimum || prefix + tokens(&body["messages"]) >= minimum;
    if prefix >= minimum {
        if let Some(system) = body["system"].as_str() {
            body["system"] = json!([{ "type": "text", "text": system, "cache_control": control }]);
        } else if let Some(last) = body["tools"]
            .as_array_mut()
            .and_then(|tools| tools.last_mut())
        {
            last["cache_control"] = control.clone();
        }
    }
    if whole_long_enough
        && let Some(block) = body["messages"]
            .as_array_mut()
            .and_then(|messages| messages.last_mut())
            .and_then(|message| message["content"].as_array_mut())
            .and_then(|content| content.last_mut())
    {
        block["cache_control"] = control;
    }
}

/// The shortest prefix Anthropic caches for a model, in tokens, as its documentation lists
/// them: 4,096 for Opus 4.5 and Haiku 4.5, 2,048 for the older Haiku models, else 1,024.
fn min_cacheable_tokens(model: &str) -> u64 {
    if ["opus-4-5", "haiku-4-5"]
        .iter()
        .any(|name| model.contains(name))
    {
        4096
    } else if model.contains("haiku") {
        2048
    } else {
        1024
    }
}

/// The `type` of the reasoning state this module keeps: the thinking blocks of one run, as
/// the API sent them (`{"type": THINKING_STATE, "blocks": [...]}`).
const THINKING_STATE: &str = "anthropic_thinking";

/// The blocks of a reasoning state this module wrote; another protocol's state has none.
fn thinking_blocks(state: &Value) -> Vec<Value> {
    if state["type"] != THINKING_STATE {
        return Vec::new();
    }
    state["blocks"].as_array().cloned().unwrap_or_default()
}

/// Messages with strictly alternating roles.
#[derive(Default)]
struct Messages(Vec<Value>);

impl Messages {
    /// Appends content blocks, to the last message when it has the same role.
    fn push(&mut self, role: &str, blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        if let Some(last) = self.0.last_mut()
            && last["role"] == role
            && let Some(content) = last["content"].as_array_mut()
        {
            content.extend(blocks);
            return;
        }
        self.0.push(json!({ "role": role, "content": blocks }));
    }
}

/// Text blocks must not be empty or only whitespace, so an image-only message has none.
fn user_blocks(text: String, images: &[Image]) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !text.trim().is_empty() {
        blocks.push(json!({ "type": "text", "text": text }));
    }
    for image in images {
        let source = match (&image.data, &image.url) {
            (Some(data), _) => {
                json!({ "type": "base64", "media_type": image.media_type, "data": data })
            }
            (None, Some(url)) => json!({ "type": "url", "url": url }),
            (None, None) => continue,
        };
        blocks.push(json!({ "type": "image", "source": source }));
    }
    blocks
}

/// Follows one message's events: content blocks by index, usage across `message_start` and
/// `message_delta`.
#[derive(Default)]
struct MessagesDecoder {
    /// Tool-use blocks being streamed, by block index.
    tool_uses: BTreeMap<u64, ToolUse>,
    /// Thinking and redacted thinking blocks being streamed, by block index, as the API sent
    /// them so far (the deltas appended to their fields).
    thinking: BTreeMap<u64, Value>,
    /// The thinking blocks of the reasoning item their text streams into: those since the last
    /// answer text (after which the turn starts a new reasoning item).
    thinking_run: Vec<Value>,
    /// Whether answer text came since the last thinking block.
    answered: bool,
    usage: TokenUsage,
}

struct ToolUse {
    id: String,
    name: String,
    /// `partial_json` fragments so far.
    json: String,
    /// The input given at block start, used when no fragment follows.
    initial: Value,
}

impl Decoder for MessagesDecoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        // The deltas, nearly every event of a stream, are read without building a tree.
        let peek: DeltaPeek = wire::parse_chunk_as(&event.data)?;
        let kind = wire::kind_or_name(&peek.kind, event);
        let index = peek.index.as_ref().and_then(Value::as_u64).unwrap_or(0);
        if kind == "content_block_delta" {
            let delta = peek.delta.unwrap_or_default();
            let (text, event): (_, fn(String) -> ModelEvent) = match delta.kind.0.as_ref() {
                "text_delta" => (delta.text.0, ModelEvent::TextDelta),
                "thinking_delta" => {
                    self.append_thinking(index, "thinking", &delta.thinking.0);
                    (delta.thinking.0, ModelEvent::ReasoningDelta)
                }
                "signature_delta" => {
                    self.append_thinking(index, "signature", &delta.signature.0);
                    return Ok(Vec::new());
                }
                "input_json_delta" => {
                    if let Some(tool_use) = self.tool_uses.get_mut(&index) {
                        tool_use.json.push_str(&delta.partial_json.0);
                    }
                    return Ok(Vec::new());
                }
                _ => return Ok(Vec::new()),
            };
            if text.is_empty() {
                return Ok(Vec::new());
            }
            let event = event(text.into_owned());
            self.answered |= matches!(event, ModelEvent::TextDelta(_));
            return Ok(vec![event]);
        }
        let data = wire::parse_chunk(&event.data)?;
        let mut events = Vec::new();
        match kind {
            "message_start" => self.read_usage(&data["message"]["usage"]),
            "content_block_start" => {
                let block = &data["content_block"];
                let kind = block["type"].as_str();
                if matches!(kind, Some("thinking" | "redacted_thinking"))
                    && std::mem::take(&mut self.answered)
                {
                    self.thinking_run.clear();
                }
                match kind {
                    Some("tool_use") => {
                        self.tool_uses.insert(
                            index,
                            ToolUse {
                                id: wire::text_of(block, "id").to_owned(),
                                name: wire::text_of(block, "name").to_owned(),
                                json: String::new(),
                                initial: block["input"].clone(),
                            },
                        );
                    }
                    Some("text") => {
                        push_text(&mut events, block, "text", ModelEvent::TextDelta);
                        self.answered |= !events.is_empty();
                    }
                    Some("thinking") => {
                        self.thinking.insert(index, block.clone());
                        push_text(&mut events, block, "thinking", ModelEvent::ReasoningDelta)
                    }
                    Some("redacted_thinking") => {
                        self.thinking.insert(index, block.clone());
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(tool_use) = self.tool_uses.remove(&index) {
                    events.push(tool_use.finish());
                }
                if let Some(block) = self.thinking.remove(&index) {
                    events.push(self.finish_thinking(block));
                }
            }
            "message_delta" => self.read_usage(&data["usage"]),
            "message_stop" => {
                // A block never stopped is still a call the model made, or thinking it did.
                for block in std::mem::take(&mut self.thinking).into_values() {
                    events.push(self.finish_thinking(block));
                }
                events.extend(
                    std::mem::take(&mut self.tool_uses)
                        .into_values()
                        .map(ToolUse::finish),
                );
                events.push(ModelEvent::Usage(self.usage));
                events.push(ModelEvent::Done);
            }
            "error" => {
                let error = &data["error"];
                return Err(wire::stream_error(
                    error["type"].as_str(),
                    error["message"].as_str(),
                ));
            }
            _ => {}
        }
        Ok(events)
    }
}

impl MessagesDecoder {
    /// Appends a delta to a field of the thinking block at `index`.
    fn append_thinking(&mut self, index: u64, field: &str, delta: &str) {
        let Some(block) = self.thinking.get_mut(&index) else {
            return;
        };
        match &mut block[field] {
            Value::String(text) => text.push_str(delta),
            other => *other = Value::String(delta.to_owned()),
        }
    }

    /// A finished thinking block joins its run; the run so far is the state of the reasoning
    /// item it streamed into (each state replaces the one before).
    fn finish_thinking(&mut self, block: Value) -> ModelEvent {
        self.thinking_run.push(block);
        ModelEvent::ReasoningState(json!({ "type": THINKING_STATE, "blocks": self.thinking_run }))
    }

    /// Input counts arrive in `message_start` (sometimes again in `message_delta`); output
    /// counts are cumulative. Cached input is context too, so it is counted.
    fn read_usage(&mut self, usage: &Value) {
        let count = |field: &str| usage[field].as_u64();
        if let Some(input) = count("input_tokens") {
            let written = count("cache_creation_input_tokens").unwrap_or(0);
            let read = count("cache_read_input_tokens").unwrap_or(0);
            self.usage.input_tokens = input + written + read;
            self.usage.cache_read_tokens = read;
            self.usage.cache_write_tokens = written;
        }
        if let Some(output) = count("output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

impl ToolUse {
    fn finish(self) -> ModelEvent {
        let arguments = if self.json.trim().is_empty() && self.initial.is_object() {
            self.initial
        } else {
            wire::parse_arguments(&self.json)
        };
        ModelEvent::ToolCall {
            call_id: self.id,
            name: self.name,
            arguments,
        }
    }
}

/// What the decoder reads of every event first: its type and block index, and enough to
/// handle a `content_block_delta` without reading the event again.
#[derive(Deserialize)]
struct DeltaPeek<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: LenientText<'a>,
    #[serde(default)]
    index: Option<Value>,
    #[serde(default, borrow)]
    delta: Option<BlockDelta<'a>>,
}

#[derive(Deserialize, Default)]
struct BlockDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: LenientText<'a>,
    #[serde(default, borrow)]
    text: LenientText<'a>,
    #[serde(default, borrow)]
    thinking: LenientText<'a>,
    #[serde(default, borrow)]
    signature: LenientText<'a>,
    #[serde(default, borrow)]
    partial_json: LenientText<'a>,
}

fn push_text(
    events: &mut Vec<ModelEvent>,
    value: &Value,
    field: &str,
    event: fn(String) -> ModelEvent,
) {
    let text = wire::text_of(value, field);
    if !text.is_empty() {
        events.push(event(text.to_owned()));
    }
}

/// The tools as a request carries them (also what the usage meter counts for them).
pub fn tool_definitions(tools: &[ToolSpec]) -> Value {
    tools
        .iter()
        .map(|tool| match tool.native {
            // Anthropic's own schema-less definition; its calls are ordinary `tool_use`.
            Some(NativeTool::TextEditor) => {
                json!({ "type": TEXT_EDITOR_TYPE, "name": tool.name })
            }
            _ => json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            }),
        })
        .collect()
}

/// The beta flag of the one-hour cache lifetime.
const EXTENDED_CACHE_TTL: &str = "extended-cache-ttl-2025-04-11";

/// The version of Anthropic's text editor tool offered: the one of the Claude 4 models, whose
/// commands are `view`, `create`, `str_replace` and `insert`.
pub const TEXT_EDITOR_TYPE: &str = "text_editor_20250728";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::testing;

    fn decode(body: &str) -> Vec<Result<ModelEvent, ModelError>> {
        testing::decode(MessagesDecoder::default(), body)
    }

    fn event(data: Value) -> String {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    }

    #[test]
    fn text_thinking_tool_use_and_usage_are_mapped() {
        let body = [
            json!({"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 40, "cache_read_input_tokens": 2, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"command\": "}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"ls\"}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list_agents", "input": {}}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}}),
            json!({"type": "message_stop"}),
        ]
        .map(event)
        .concat();
        assert_eq!(
            decode(&body),
            [
                Ok(ModelEvent::ReasoningDelta("hmm".into())),
                Ok(ModelEvent::ReasoningState(json!({
                    "type": "anthropic_thinking",
                    "blocks": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
                }))),
                Ok(ModelEvent::TextDelta("Hi".into())),
                Ok(ModelEvent::ToolCall {
                    call_id: "toolu_1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }),
                Ok(ModelEvent::ToolCall {
                    call_id: "toolu_2".into(),
                    name: "list_agents".into(),
                    arguments: json!({}),
                }),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 42,
                    output_tokens: 12,
                    reasoning_tokens: 0,
                    cache_read_tokens: 2,
                    ..TokenUsage::default()
                })),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn thinking_blocks_are_kept_whole_and_in_order_with_their_reasoning() {
        let body = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "Let "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "me see."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "OPAQUE"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "So."}}),
            json!({"type": "content_block_stop", "index": 2}),
            // After answer text: a new run, as the turn starts a new reasoning item.
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "thinking_delta", "thinking": "Again."}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "signature_delta", "signature": "SIG2"}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "message_stop"}),
        ]
        .map(event)
        .concat();
        let first = json!({"type": "thinking", "thinking": "Let me see.", "signature": "SIG"});
        let redacted = json!({"type": "redacted_thinking", "data": "OPAQUE"});
        let second = json!({"type": "thinking", "thinking": "Again.", "signature": "SIG2"});
        let state = |blocks: Value| json!({"type": "anthropic_thinking", "blocks": blocks});
        assert_eq!(
            decode(&body),
            [
                Ok(ModelEvent::ReasoningDelta("Let ".into())),
                Ok(ModelEvent::ReasoningDelta("me see.".into())),
                Ok(ModelEvent::ReasoningState(state(json!([first])))),
                Ok(ModelEvent::ReasoningState(state(json!([first, redacted])))),
                Ok(ModelEvent::TextDelta("So.".into())),
                Ok(ModelEvent::ReasoningDelta("Again.".into())),
                Ok(ModelEvent::ReasoningState(state(json!([second])))),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 5,
                    output_tokens: 0,
                    reasoning_tokens: 0,
                    ..TokenUsage::default()
                })),
                Ok(ModelEvent::Done),
            ]
        );
    }

    /// A user message, a reasoning item with `state`, then a tool call of the same step.
    fn thought_call(state: Value) -> Vec<crate::domain::Item> {
        use crate::domain::{ItemKind, ItemStatus, MessageSource};
        let mut items = vec![
            testing::item(
                "t_1",
                ItemKind::UserMessage {
                    hooks: Vec::new(),
                    text: "list".into(),
                    source: MessageSource::User,
                    from_session_id: None,
                    images: vec![],
                    command: None,
                },
                ItemStatus::Completed,
            ),
            testing::item(
                "t_1",
                ItemKind::Reasoning {
                    text: "Let me see.".into(),
                    state: Some(state),
                },
                ItemStatus::Completed,
            ),
            testing::item(
                "t_1",
                ItemKind::ToolCall {
                    hooks: Vec::new(),
                    call_id: "toolu_1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                    output: "a".into(),
                    exit_code: Some(0),
                    files: None,
                    images: Vec::new(),
                    denied: false,
                },
                ItemStatus::Completed,
            ),
        ];
        for item in &mut items[1..] {
            item.step = Some(1);
        }
        items
    }

    #[test]
    fn thinking_goes_back_signed_ahead_of_the_tool_use_it_led_to() {
        let blocks = json!([
            {"type": "thinking", "thinking": "Let me see.", "signature": "SIG"},
            {"type": "redacted_thinking", "data": "OPAQUE"},
        ]);
        let mut request = testing::request("claude-x");
        request.history = thought_call(json!({"type": "anthropic_thinking", "blocks": blocks}));
        let options = ModelOptions {
            thinking: Some(Thinking::Budget(2048)),
            ..ModelOptions::default()
        };
        let body = request_body(&request, &options);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "list"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Let me see.", "signature": "SIG"},
                    {"type": "redacted_thinking", "data": "OPAQUE"},
                    {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "ls"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                ]},
            ])
        );
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(body.get("temperature").is_none());
        let adaptive = ModelOptions {
            thinking: Some(Thinking::Adaptive),
            ..ModelOptions::default()
        };
        assert_eq!(
            request_body(&request, &adaptive)["thinking"],
            json!({"type": "adaptive"})
        );
        assert!(
            request_body(&request, &ModelOptions::default())
                .get("thinking")
                .is_none()
        );
        // Another protocol's reasoning state is not Anthropic's to take back.
        request.history = thought_call(json!({"type": "reasoning", "encrypted_content": "gAAA"}));
        let body = request_body(&request, &options);
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "ls"}}])
        );
    }

    #[test]
    fn an_overload_is_transient_and_a_bad_request_is_not() {
        let overloaded = event(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        assert!(matches!(
            &decode(&overloaded)[..],
            [Err(ModelError::Transient { message, .. })] if message.contains("Overloaded")
        ));
        let invalid = event(
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        );
        assert!(matches!(&decode(&invalid)[..], [Err(ModelError::Fatal(_))]));
    }

    #[test]
    fn whitespace_only_text_is_not_sent() {
        use crate::domain::{ItemKind, ItemStatus};
        let mut request = testing::request("claude-x");
        request.history = vec![
            testing::item(
                "t_1",
                ItemKind::UserMessage {
                    hooks: Vec::new(),
                    text: "hi".into(),
                    source: crate::domain::MessageSource::User,
                    from_session_id: None,
                    images: vec![],
                    command: None,
                },
                ItemStatus::Completed,
            ),
            testing::item(
                "t_1",
                ItemKind::AgentMessage {
                    text: "\n\n".into(),
                },
                ItemStatus::Interrupted,
            ),
        ];
        let body = request_body(&request, &ModelOptions::default());
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        );
    }

    #[test]
    fn the_request_alternates_roles() {
        let request = testing::request("claude-x");
        let body = request_body(&request, &ModelOptions::default());
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 99);
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["tools"],
            json!([{"name": "shell", "description": "run", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "[summary of earlier conversation] earlier"},
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_a", "name": "shell", "input": {"command": "false"}},
                    {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "x"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": "oops\n[exit code 1]"},
                    {"type": "tool_result", "tool_use_id": "call_b", "content": "\n[interrupted]"},
                    {"type": "text", "text": "[runtime notice] the turn was interrupted"},
                    {"type": "text", "text": "again"},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            ])
        );
    }

    #[test]
    fn a_prefix_below_the_models_minimum_gets_no_breakpoint() {
        let options = ModelOptions::default();
        // A short request: nothing the API would cache.
        let body = request_body(&testing::request("claude-sonnet-4-5"), &options);
        assert!(!body.to_string().contains("cache_control"), "{body}");
        // 1,500 tokens or so of instructions: enough for Sonnet, not for Haiku 4.5.
        let mut request = testing::request("claude-sonnet-4-5");
        request.instructions = Some("Keep the tests green. ".repeat(300));
        let body = request_body(&request, &options);
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        request.model = "claude-haiku-4-5".into();
        let body = request_body(&request, &options);
        assert!(!body.to_string().contains("cache_control"), "{body}");
        // No cache key (a compaction summary's one-off request): no breakpoint either.
        request.model = "claude-sonnet-4-5".into();
        request.cache_key = None;
        let body = request_body(&request, &options);
        assert!(body["system"].is_string());
    }
}
