//! The OpenAI Chat Completions protocol (`POST {base_url}/chat/completions`), also spoken by most
//! local servers (Ollama, llama.cpp, vLLM, LM Studio). It maps requests and chunks only; sending,
//! errors and retries are `wire`'s and the turn loop's.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::client::{
    ModelError, ModelEvent, ModelRequest, ModelStream, ProviderClient, TokenUsage,
};
use super::wire::{self, Decoder, Endpoint, Entry, Event, LenientText};
use crate::config::{ModelOptions, ProviderConfig};
use crate::domain::Image;

pub struct OpenaiChat {
    endpoint: Endpoint,
}

impl OpenaiChat {
    pub fn new(provider: &ProviderConfig) -> OpenaiChat {
        OpenaiChat {
            endpoint: Endpoint::new(provider),
        }
    }
}

impl ProviderClient for OpenaiChat {
    fn stream(&self, request: ModelRequest, options: &ModelOptions) -> ModelStream {
        let request = self.endpoint.api_key().map(|key| {
            let http = self
                .endpoint
                .post("/chat/completions", &request_body(&request, options));
            match key {
                Some(key) => http.bearer_auth(key),
                None => http,
            }
        });
        wire::stream(request, ChatDecoder::default())
    }
}

pub fn request_body(request: &ModelRequest, options: &ModelOptions) -> Value {
    let mut messages = Vec::new();
    if let Some(instructions) = &request.instructions {
        messages.push(json!({ "role": "system", "content": instructions }));
    }
    for entry in wire::entries(&request.history) {
        match entry {
            Entry::User { text, images } => messages.push(user_message(text, images)),
            // The protocol has no way to take reasoning back.
            Entry::Reasoning { .. } => {}
            Entry::Assistant { text, calls } => {
                let mut message = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::String(text) },
                });
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.call_id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": call.arguments.to_string(),
                                },
                            })
                        })
                        .collect();
                }
                messages.push(message);
                // A tool message holds text only: a call's images follow every result, in a
                // user message of their own that says where they came from.
                let mut with_images = Vec::new();
                for call in calls {
                    messages.push(json!({
                        "role": "tool",
                        "tool_call_id": call.call_id,
                        "content": call.output,
                    }));
                    if !call.images.is_empty() {
                        with_images.push((call.call_id, call.name, call.images));
                    }
                }
                for (call_id, name, images) in with_images {
                    let text = format!("[images returned by tool call {call_id} ({name})]");
                    messages.push(user_message(text, images));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    body[options.max_tokens_field.as_str()] = json!(request.max_output_tokens);
    ask_to_cache(&mut body, request, options);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            // Chat Completions has no native tools: the runtime offers it functions only.
            .filter(|tool| tool.native.is_none())
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
    }
    body
}

/// OpenAI caches a repeated prefix on its own; `prompt_cache_key` (the session's id) routes a
/// session's calls to the same cache, and `prompt_cache_retention` keeps it longer. Both
/// protocols take the same fields; `prompt_cache = "off"` sends neither, for compatible servers
/// that refuse fields they do not know.
pub(super) fn ask_to_cache(body: &mut Value, request: &ModelRequest, options: &ModelOptions) {
    let Some(key) = request.cache_key.as_ref().filter(|_| options.prompt_cache) else {
        return;
    };
    body["prompt_cache_key"] = json!(key);
    if let Some(retention) = options.prompt_cache_retention {
        body["prompt_cache_retention"] = json!(retention.as_str());
    }
}

/// Plain text when there are no images, which every server accepts; content parts otherwise.
fn user_message(text: String, images: &[Image]) -> Value {
    if images.is_empty() {
        return json!({ "role": "user", "content": text });
    }
    let mut parts = vec![json!({ "type": "text", "text": text })];
    parts.extend(
        images
            .iter()
            .filter_map(wire::image_url)
            .map(|url| json!({ "type": "image_url", "image_url": { "url": url } })),
    );
    json!({ "role": "user", "content": parts })
}

/// Assembles the chunks of one answer. Tool calls arrive in fragments keyed by their index:
/// the id and name in the first, the arguments as string pieces across the rest.
#[derive(Default)]
pub struct ChatDecoder {
    /// The calls in the order they began.
    calls: Vec<PendingCall>,
    /// The call each index is filling now.
    by_index: BTreeMap<u64, usize>,
}

#[derive(Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

impl Decoder for ChatDecoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            let mut events = self.finish_calls();
            events.push(ModelEvent::Done);
            return Ok(events);
        }
        let chunk: Chunk = wire::parse_chunk_as(data)?;
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            let code = match (&error["code"], &error["type"]) {
                (Value::Number(code), _) => Some(code.to_string()),
                (Value::String(code), _) | (_, Value::String(code)) => Some(code.clone()),
                _ => None,
            };
            return Err(wire::stream_error(
                code.as_deref(),
                error["message"].as_str().or(error.as_str()),
            ));
        }
        let mut events = Vec::new();
        if let Some(choice) = chunk.choices.unwrap_or_default().into_iter().next() {
            let delta = choice.delta.unwrap_or_default();
            // Servers that show their reasoning use either name.
            for reasoning in [delta.reasoning_content, delta.reasoning] {
                if !reasoning.0.is_empty() {
                    events.push(ModelEvent::ReasoningDelta(reasoning.0.into_owned()));
                }
            }
            if !delta.content.0.is_empty() {
                events.push(ModelEvent::TextDelta(delta.content.0.into_owned()));
            }
            if let Some(Value::Array(calls)) = &delta.tool_calls {
                for (position, fragment) in calls.iter().enumerate() {
                    self.add_fragment(position, fragment);
                }
            }
            if choice
                .finish_reason
                .is_some_and(|reason| reason.is_string())
            {
                events.extend(self.finish_calls());
            }
        }
        if let Some(usage) = chunk.usage.filter(Value::is_object) {
            events.push(ModelEvent::Usage(TokenUsage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
                reasoning_tokens: usage["completion_tokens_details"]["reasoning_tokens"]
                    .as_u64()
                    .unwrap_or(0),
                cache_read_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0),
                cache_write_tokens: 0,
            }));
        }
        Ok(events)
    }
}

/// One streamed chunk. Only the text of a delta is read as it comes (it is in almost every
/// chunk, so no tree of the chunk is built for it); the rarer parts stay JSON values.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: LenientText<'a>,
    #[serde(default, borrow)]
    reasoning_content: LenientText<'a>,
    #[serde(default, borrow)]
    reasoning: LenientText<'a>,
    #[serde(default)]
    tool_calls: Option<Value>,
}

impl ChatDecoder {
    fn add_fragment(&mut self, position: usize, fragment: &Value) {
        let index = fragment["index"].as_u64().unwrap_or(position as u64);
        let id = wire::text_of(fragment, "id");
        // A fragment with another id at an index in use is a new call: some compatible
        // servers send parallel calls whole, every one at index 0.
        let at = match self.by_index.get(&index) {
            Some(&at)
                if id.is_empty() || self.calls[at].id.is_empty() || self.calls[at].id == id =>
            {
                at
            }
            _ => {
                self.calls.push(PendingCall::default());
                self.by_index.insert(index, self.calls.len() - 1);
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        let function = &fragment["function"];
        if call.id.is_empty() {
            call.id = wire::text_of(fragment, "id").to_owned();
        }
        if call.name.is_empty() {
            call.name = wire::text_of(function, "name").to_owned();
        }
        match &function["arguments"] {
            Value::String(piece) => call.arguments.push_str(piece),
            // A few servers send the arguments whole, as an object.
            Value::Object(_) => call.arguments = function["arguments"].to_string(),
            _ => {}
        }
    }

    /// The assembled calls, once the answer says it is finished.
    fn finish_calls(&mut self) -> Vec<ModelEvent> {
        self.by_index.clear();
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|call| ModelEvent::ToolCall {
                // Some local servers give no id; the history still needs one to pair results.
                call_id: if call.id.is_empty() {
                    crate::domain::new_id("call")
                } else {
                    call.id
                },
                name: call.name,
                arguments: wire::parse_arguments(&call.arguments),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::testing;

    fn decode(body: &str) -> Vec<Result<ModelEvent, ModelError>> {
        testing::decode(ChatDecoder::default(), body)
    }

    #[test]
    fn text_reasoning_and_usage_are_mapped() {
        let events = decode(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(
            events,
            [
                Ok(ModelEvent::ReasoningDelta("think".into())),
                Ok(ModelEvent::TextDelta("Hel".into())),
                Ok(ModelEvent::TextDelta("lo".into())),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 10,
                    output_tokens: 3,
                    reasoning_tokens: 0,
                    ..TokenUsage::default()
                })),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn tool_calls_are_assembled_from_fragments() {
        let events = decode(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"shell\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"comm\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{oops\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"and\\\": \\\"ls\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(
            events,
            [
                Ok(ModelEvent::ToolCall {
                    call_id: "call_1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }),
                Ok(ModelEvent::ToolCall {
                    call_id: "call_2".into(),
                    name: "read_file".into(),
                    arguments: json!({"_raw": "{oops"}),
                }),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn parallel_calls_sent_whole_at_one_index_stay_apart() {
        let events = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"function\":{\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_b\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"x\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(
            events,
            [
                Ok(ModelEvent::ToolCall {
                    call_id: "call_a".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }),
                Ok(ModelEvent::ToolCall {
                    call_id: "call_b".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "x"}),
                }),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn a_malformed_chunk_is_transient() {
        let events = decode(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
            "data: {\"choices\":[{\"ind\n\n",
        ));
        assert_eq!(events[0], Ok(ModelEvent::TextDelta("a".into())));
        let Err(ModelError::Transient { message, .. }) = &events[1] else {
            panic!("{events:?}");
        };
        assert!(
            message.starts_with("malformed chunk from provider"),
            "{message}"
        );
    }

    #[test]
    fn text_with_escapes_is_unescaped_and_fields_of_other_types_are_skipped() {
        let events = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"say \\\"hi\\\"\\n\\u00e9\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":[1,{\"a\":2}],\"reasoning\":7}}]}\n\n",
            "data: {\"choices\":[{\"delta\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(
            events,
            [
                Ok(ModelEvent::TextDelta("say \"hi\"\n\u{e9}".into())),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 4,
                    output_tokens: 2,
                    reasoning_tokens: 0,
                    ..TokenUsage::default()
                })),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn an_error_chunk_ends_the_stream() {
        let events =
            decode("data: {\"error\":{\"message\":\"upstream overloaded\",\"code\":502}}\n\n");
        assert!(
            matches!(&events[..], [Err(ModelError::Transient { message, .. })] if message.contains("upstream overloaded")),
            "{events:?}"
        );
    }

    #[test]
    fn a_stream_without_done_just_ends() {
        let events =
            decode("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n");
        assert_eq!(events, [Ok(ModelEvent::TextDelta("a".into()))]);
    }

    #[test]
    fn the_limit_goes_as_max_completion_tokens_unless_configured() {
        use crate::config::MaxTokensField;
        let request = ModelRequest {
            model: "gpt-x".into(),
            instructions: None,
            history: Vec::new(),
            tools: Vec::new(),
            max_output_tokens: 7,
            reasoning_context: None,
            cache_key: None,
            compaction: false,
        };
        let body = request_body(&request, &ModelOptions::default());
        assert_eq!(body["max_completion_tokens"], 7);
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("tools").is_none());
        let old_name = ModelOptions {
            max_tokens_field: MaxTokensField::MaxTokens,
            ..ModelOptions::default()
        };
        let body = request_body(&request, &old_name);
        assert_eq!(body["max_tokens"], 7);
        assert!(body.get("max_completion_tokens").is_none());
    }

    #[test]
    fn the_request_carries_history_tools_and_limits() {
        let request = testing::request("gpt-x");
        let body = request_body(&request, &ModelOptions::default());
        assert_eq!(body["model"], "gpt-x");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_completion_tokens"], 99);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "shell", "description": "run", "parameters": {"type": "object"}}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "[summary of earlier conversation] earlier"},
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ]},
                {"role": "assistant", "content": "Checking.", "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"false\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "oops\n[exit code 1]"},
                {"role": "tool", "tool_call_id": "call_b", "content": "\n[interrupted]"},
                {"role": "user", "content": "[runtime notice] the turn was interrupted"},
                {"role": "user", "content": "again"},
                {"role": "assistant", "content": "Done."},
            ])
        );
    }
}
