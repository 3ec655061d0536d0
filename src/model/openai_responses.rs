//! The OpenAI Responses protocol (`POST {base_url}/responses`), stateless: `store: false` and the
//! whole history as `input` items on every call. It maps requests and events only; sending,
//! errors and retries are `wire`'s and the turn loop's.

use serde::Deserialize;
use serde_json::{Value, json};

use super::client::{
    ModelError, ModelEvent, ModelRequest, ModelStream, NativeTool, ProviderClient, TokenUsage,
};
use super::wire::{self, Decoder, Endpoint, Entry, Event, LenientText};
use crate::config::{ModelOptions, ProviderConfig};
use crate::domain::Image;

pub struct OpenaiResponses {
    endpoint: Endpoint,
}

impl OpenaiResponses {
    pub fn new(provider: &ProviderConfig) -> OpenaiResponses {
        OpenaiResponses {
            endpoint: Endpoint::new(provider),
        }
    }
}

impl ProviderClient for OpenaiResponses {
    fn stream(&self, request: ModelRequest, options: &ModelOptions) -> ModelStream {
        let request = self.endpoint.api_key().map(|key| {
            let http = self
                .endpoint
                .post("/responses", &request_body(&request, options));
            match key {
                Some(key) => http.bearer_auth(key),
                None => http,
            }
        });
        wire::stream(request, ResponsesDecoder::default())
    }
}

pub fn request_body(request: &ModelRequest, options: &ModelOptions) -> Value {
    let mut input = Vec::new();
    for entry in wire::entries(&request.history) {
        match entry {
            Entry::User { text, images } => {
                let content = input_content(text, images);
                input.push(json!({ "type": "message", "role": "user", "content": content }));
            }
            // Only its own reasoning items (another protocol's state is not one).
            Entry::Reasoning { state } if state["type"] == "reasoning" => input.push(state.clone()),
            Entry::Reasoning { .. } => {}
            Entry::Assistant { text, calls } => {
                if !text.is_empty() {
                    input.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": text }],
                    }));
                }
                for call in &calls {
                    input.push(match native_patch(call) {
                        Some(operation) => json!({
                            "type": "apply_patch_call",
                            "call_id": call.call_id,
                            "status": "completed",
                            "operation": operation,
                        }),
                        None => json!({
                            "type": "function_call",
                            "call_id": call.call_id,
                            "name": call.name,
                            "arguments": call.arguments.to_string(),
                        }),
                    });
                }
                for call in calls {
                    if native_patch(&call).is_some() {
                        input.push(json!({
                            "type": "apply_patch_call_output",
                            "call_id": call.call_id,
                            "status": if call.completed { "completed" } else { "failed" },
                            "output": call.output,
                        }));
                        continue;
                    }
                    // With images, the output is a list of input parts: the text, then them.
                    let output = match call.images {
                        [] => json!(call.output),
                        images => json!(input_content(call.output, images)),
                    };
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": call.call_id,
                        "output": output,
                    }));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": request.max_output_tokens,
    });
    if let Some(instructions) = &request.instructions {
        body["instructions"] = json!(instructions);
    }
    super::openai_chat::ask_to_cache(&mut body, request, options);
    // Stateless (`store: false`): reasoning can only come back as its encrypted content. The
    // running turn's goes back whatever `reasoning_context` says, so it is always asked for.
    body["include"] = json!(["reasoning.encrypted_content"]);
    if let Some(reasoning) = &options.reasoning {
        body["reasoning"] = json!(reasoning);
    }
    if !request.tools.is_empty() {
        // `strict` defaults to true here, which would demand every parameter be required.
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| match tool.native {
                Some(NativeTool::ApplyPatch) => json!({ "type": "apply_patch" }),
                _ => json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                }),
            })
            .collect();
    }
    body
}

/// The operation of a call of the built-in `apply_patch` tool (stored as `apply_patch` with
/// `{"operation": …}`), which goes back as the `apply_patch_call` item it came as; `None` for
/// any other call, a function named `apply_patch` included.
fn native_patch<'a>(call: &wire::Call<'a>) -> Option<&'a Value> {
    let operation = call.arguments.get("operation")?;
    (call.name == NativeTool::ApplyPatch.name() && operation.is_object()).then_some(operation)
}

/// Text and images as input parts.
fn input_content(text: String, images: &[Image]) -> Vec<Value> {
    let mut content = vec![json!({ "type": "input_text", "text": text })];
    content.extend(
        images
            .iter()
            .filter_map(wire::image_url)
            .map(|url| json!({ "type": "input_image", "image_url": url, "detail": "auto" })),
    );
    content
}

/// Follows one response's events. A function call is taken whole from `output_item.done`;
/// the argument deltas are kept as well, for servers that never send the finished item.
#[derive(Default)]
struct ResponsesDecoder {
    /// Function calls started but not yet emitted, in output order: (item id, call).
    pending: Vec<(String, PendingCall)>,
    /// The reasoning part the last reasoning delta belonged to, to separate parts.
    reasoning_part: Option<(String, u64)>,
}

struct PendingCall {
    call_id: String,
    name: String,
    arguments: String,
}

impl Decoder for ResponsesDecoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        // Answer text, nearly every event of a stream, is read without building a tree.
        let peek: TextPeek = wire::parse_chunk_as(&event.data)?;
        let kind = wire::kind_or_name(&peek.kind, event);
        if kind == "response.output_text.delta" {
            return Ok(vec![ModelEvent::TextDelta(peek.delta.0.into_owned())]);
        }
        let data = wire::parse_chunk(&event.data)?;
        let delta = || wire::text_of(&data, "delta").to_owned();
        let events = match kind {
            "response.output_text.delta" => vec![ModelEvent::TextDelta(delta())],
            "response.reasoning_summary_text.delta" => {
                self.reasoning(&data, "summary_index", delta())
            }
            "response.reasoning_text.delta" => self.reasoning(&data, "content_index", delta()),
            "response.output_item.added" if data["item"]["type"] == "function_call" => {
                let item = &data["item"];
                self.pending.push((
                    wire::text_of(item, "id").to_owned(),
                    PendingCall {
                        call_id: wire::text_of(item, "call_id").to_owned(),
                        name: wire::text_of(item, "name").to_owned(),
                        arguments: wire::text_of(item, "arguments").to_owned(),
                    },
                ));
                Vec::new()
            }
            "response.function_call_arguments.delta" => {
                if let Some(call) = self.pending_call(&data) {
                    call.arguments.push_str(&delta());
                }
                Vec::new()
            }
            "response.function_call_arguments.done" => {
                let arguments = wire::text_of(&data, "arguments").to_owned();
                if let Some(call) = self.pending_call(&data) {
                    call.arguments = arguments;
                }
                Vec::new()
            }
            "response.output_item.done" if data["item"]["type"] == "function_call" => {
                vec![self.finish_call(&data["item"])]
            }
            // The built-in `apply_patch` tool: one file's operation per call, taken whole.
            "response.output_item.added" if data["item"]["type"] == "apply_patch_call" => {
                let item = &data["item"];
                self.pending.push((
                    wire::text_of(item, "id").to_owned(),
                    PendingCall {
                        call_id: wire::text_of(item, "call_id").to_owned(),
                        name: NativeTool::ApplyPatch.name().to_owned(),
                        arguments: json!({ "operation": item["operation"] }).to_string(),
                    },
                ));
                Vec::new()
            }
            "response.output_item.done" if data["item"]["type"] == "apply_patch_call" => {
                let item = &data["item"];
                let item_id = wire::text_of(item, "id");
                self.pending.retain(|(id, _)| id != item_id);
                vec![ModelEvent::ToolCall {
                    call_id: wire::text_of(item, "call_id").to_owned(),
                    name: NativeTool::ApplyPatch.name().to_owned(),
                    arguments: json!({ "operation": item["operation"] }),
                }]
            }
            // Taken back whole in the turn's later requests (and later turns' with
            // `reasoning_context = "all_turns"`), when it carries its content.
            "response.output_item.done"
                if data["item"]["type"] == "reasoning"
                    && data["item"]["encrypted_content"].is_string() =>
            {
                vec![ModelEvent::ReasoningState(data["item"].clone())]
            }
            "response.completed" | "response.incomplete" => {
                let mut events: Vec<ModelEvent> = std::mem::take(&mut self.pending)
                    .into_iter()
                    .map(|(_, call)| tool_call(call))
                    .collect();
                let usage = &data["response"]["usage"];
                if usage.is_object() {
                    events.push(ModelEvent::Usage(TokenUsage {
                        input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
                        output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                        reasoning_tokens: usage["output_tokens_details"]["reasoning_tokens"]
                            .as_u64()
                            .unwrap_or(0),
                        cache_read_tokens: usage["input_tokens_details"]["cached_tokens"]
                            .as_u64()
                            .unwrap_or(0),
                        cache_write_tokens: 0,
                    }));
                }
                events.push(ModelEvent::Done);
                events
            }
            "response.failed" => {
                let error = &data["response"]["error"];
                return Err(wire::stream_error(
                    error["code"].as_str(),
                    error["message"].as_str(),
                ));
            }
            "error" => {
                // Documented flat ({code, message}); some servers nest it under `error`.
                let error = if data["error"].is_object() {
                    &data["error"]
                } else {
                    &data
                };
                let code = error["code"]
                    .as_str()
                    .or(error["type"].as_str().filter(|kind| *kind != "error"));
                return Err(wire::stream_error(code, error["message"].as_str()));
            }
            _ => Vec::new(),
        };
        Ok(events
            .into_iter()
            .filter(|event| {
                !matches!(event, ModelEvent::TextDelta(text) | ModelEvent::ReasoningDelta(text) if text.is_empty())
            })
            .collect())
    }
}

impl ResponsesDecoder {
    /// A reasoning delta; a new part (another summary paragraph) starts on a new paragraph.
    fn reasoning(&mut self, data: &Value, index_field: &str, delta: String) -> Vec<ModelEvent> {
        let part = (
            wire::text_of(data, "item_id").to_owned(),
            data[index_field].as_u64().unwrap_or(0),
        );
        let separator = match &self.reasoning_part {
            Some(previous) if *previous != part => "\n\n",
            _ => "",
        };
        self.reasoning_part = Some(part);
        vec![ModelEvent::ReasoningDelta(format!("{separator}{delta}"))]
    }

    fn pending_call(&mut self, data: &Value) -> Option<&mut PendingCall> {
        let item_id = wire::text_of(data, "item_id");
        self.pending
            .iter_mut()
            .find(|(id, _)| id == item_id)
            .map(|(_, call)| call)
    }

    /// The finished item wins; what the deltas assembled fills what it lacks.
    fn finish_call(&mut self, item: &Value) -> ModelEvent {
        let item_id = wire::text_of(item, "id");
        let assembled = self
            .pending
            .iter()
            .position(|(id, _)| id == item_id)
            .map(|position| self.pending.remove(position).1);
        let pick = |field: &str, fallback: Option<&String>| {
            let own = wire::text_of(item, field);
            if own.is_empty() {
                fallback.cloned().unwrap_or_default()
            } else {
                own.to_owned()
            }
        };
        tool_call(PendingCall {
            call_id: pick("call_id", assembled.as_ref().map(|call| &call.call_id)),
            name: pick("name", assembled.as_ref().map(|call| &call.name)),
            arguments: pick("arguments", assembled.as_ref().map(|call| &call.arguments)),
        })
    }
}

fn tool_call(call: PendingCall) -> ModelEvent {
    ModelEvent::ToolCall {
        call_id: call.call_id,
        name: call.name,
        arguments: wire::parse_arguments(&call.arguments),
    }
}

/// What the decoder reads of an event first: enough to handle `response.output_text.delta`.
#[derive(Deserialize)]
struct TextPeek<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: LenientText<'a>,
    #[serde(default, borrow)]
    delta: LenientText<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::testing;

    fn decode(body: &str) -> Vec<Result<ModelEvent, ModelError>> {
        testing::decode(ResponsesDecoder::default(), body)
    }

    /// One SSE event the way OpenAI writes it: the type twice, as the event name and in the data.
    fn event(data: Value) -> String {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    }

    #[test]
    fn text_reasoning_calls_and_usage_are_mapped() {
        let body = [
            json!({"type": "response.created", "response": {"id": "r", "status": "in_progress"}}),
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "First."}),
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 1, "delta": "Second."}),
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"}),
            json!({"type": "response.output_item.added", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "shell", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"command\""}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ": \"ls\"}"}),
            json!({"type": "response.output_item.done", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\": \"ls\"}"}}),
            json!({"type": "response.output_item.added", "item": {"id": "fc_2", "type": "function_call", "call_id": "call_2", "name": "list_dir", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_2", "arguments": "{}"}),
            json!({"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 50, "output_tokens": 7, "total_tokens": 57}}}),
        ]
        .map(event)
        .concat();
        assert_eq!(
            decode(&body),
            [
                Ok(ModelEvent::ReasoningDelta("First.".into())),
                Ok(ModelEvent::ReasoningDelta("\n\nSecond.".into())),
                Ok(ModelEvent::TextDelta("Hi".into())),
                Ok(ModelEvent::ToolCall {
                    call_id: "call_1".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                }),
                // Never finished as an item: assembled from its events at completion.
                Ok(ModelEvent::ToolCall {
                    call_id: "call_2".into(),
                    name: "list_dir".into(),
                    arguments: json!({}),
                }),
                Ok(ModelEvent::Usage(TokenUsage {
                    input_tokens: 50,
                    output_tokens: 7,
                    reasoning_tokens: 0,
                    ..TokenUsage::default()
                })),
                Ok(ModelEvent::Done),
            ]
        );
    }

    #[test]
    fn reasoning_with_its_content_is_kept_to_be_taken_back() {
        let kept =
            json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"});
        let body = [
            json!({"type": "response.output_item.done", "item": kept}),
            // Without its content (not asked for) there is nothing to take back.
            json!({"type": "response.output_item.done", "item": {"id": "rs_2", "type": "reasoning", "summary": []}}),
        ]
        .map(event)
        .concat();
        assert_eq!(decode(&body), [Ok(ModelEvent::ReasoningState(kept))]);
    }

    #[test]
    fn kept_reasoning_goes_back_before_the_answer_it_led_to() {
        use crate::domain::{Item, ItemKind, ItemStatus};
        let state =
            json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"});
        let item = |kind| Item {
            id: "m".into(),
            session_id: "s".into(),
            turn_id: "t_1".into(),
            seq: 1,
            created_at: crate::domain::now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: Some(1),
            kind,
        };
        let mut request = ModelRequest {
            model: "o-x".into(),
            instructions: None,
            history: vec![
                item(ItemKind::Reasoning {
                    text: "thinking".into(),
                    state: Some(state.clone()),
                }),
                item(ItemKind::AgentMessage {
                    text: "Answer.".into(),
                }),
            ],
            tools: Vec::new(),
            max_output_tokens: 99,
            reasoning_context: Some(crate::config::ReasoningContext::AllTurns),
            cache_key: None,
            compaction: false,
        };
        let options = ModelOptions::default();
        let body = request_body(&request, &options);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["input"][0], state);
        assert_eq!(body["input"][1]["role"], "assistant");
        // Unset is the running turn's reasoning: still asked for, still sent.
        request.reasoning_context = None;
        let body = request_body(&request, &options);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["input"][0], state);
        assert!(body.get("reasoning").is_none());
        // Another protocol's reasoning state is not a Responses item.
        if let ItemKind::Reasoning { state, .. } = &mut request.history[0].kind {
            *state = Some(json!({"type": "anthropic_thinking", "blocks": []}));
        }
        assert_eq!(
            request_body(&request, &options)["input"],
            json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Answer."}]}])
        );
    }

    #[test]
    fn reasoning_options_are_the_request_s_reasoning_object() {
        use crate::config::{Reasoning, ReasoningEffort, ReasoningSummary};
        let request = testing::request("o-x");
        let both = ModelOptions {
            reasoning: Some(Reasoning {
                effort: Some(ReasoningEffort::Low),
                summary: Some(ReasoningSummary::Detailed),
            }),
            ..ModelOptions::default()
        };
        assert_eq!(
            request_body(&request, &both)["reasoning"],
            json!({"effort": "low", "summary": "detailed"})
        );
        let summary_only = ModelOptions {
            reasoning: Some(Reasoning {
                effort: None,
                summary: Some(ReasoningSummary::Auto),
            }),
            ..ModelOptions::default()
        };
        assert_eq!(
            request_body(&request, &summary_only)["reasoning"],
            json!({"summary": "auto"})
        );
    }

    #[test]
    fn failures_are_classified() {
        let failed = event(
            json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}}),
        );
        assert!(
            matches!(&decode(&failed)[..], [Err(ModelError::Transient { message, .. })] if message.contains("boom"))
        );
        let rejected = event(
            json!({"type": "error", "code": "invalid_prompt", "message": "no", "param": null}),
        );
        assert!(
            matches!(&decode(&rejected)[..], [Err(ModelError::Fatal(message))] if message.contains("invalid_prompt"))
        );
        let limited = event(
            json!({"type": "error", "error": {"type": "rate_limit_exceeded", "message": "slow down"}}),
        );
        assert!(matches!(
            &decode(&limited)[..],
            [Err(ModelError::Transient { .. })]
        ));
    }

    #[test]
    fn the_request_is_stateless_and_complete() {
        let request = testing::request("gpt-x");
        let body = request_body(&request, &ModelOptions::default());
        assert_eq!(body["store"], false);
        assert_eq!(body["stream"], true);
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(body["max_output_tokens"], 99);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}, "strict": false}])
        );
        let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
        assert_eq!(
            body["input"],
            json!([
                user("[summary of earlier conversation] earlier"),
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                ]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
                {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": "{\"command\":\"false\"}"},
                {"type": "function_call", "call_id": "call_b", "name": "read_file", "arguments": "{\"path\":\"x\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "oops\n[exit code 1]"},
                {"type": "function_call_output", "call_id": "call_b", "output": "\n[interrupted]"},
                user("[runtime notice] the turn was interrupted"),
                user("again"),
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ])
        );
    }
}
