//! Test support shared by the protocol modules: run a decoder over a recorded SSE body, and a
//! request and history that cover every kind of item.

use futures::StreamExt;

use super::http::Decoder;
use super::sse::events;
use crate::domain::{Item, ItemKind, ItemStatus, MessageSource};
use crate::model::{ModelError, ModelEvent, ModelRequest, ToolSpec};

/// A request as the protocols' request-body tests use it: the shared history and one tool.
pub fn request(model: &str) -> ModelRequest {
    ModelRequest {
        model: model.into(),
        instructions: Some("be brief".into()),
        history: history(),
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "run".into(),
            parameters: serde_json::json!({"type": "object"}),
            native: None,
        }],
        max_output_tokens: 99,
        reasoning_context: None,
        cache_key: Some("s_test".into()),
        compaction: false,
    }
}

/// The events a decoder produces for an SSE body, up to and including the first error or
/// `Done`, as `wire::stream` would yield them.
pub fn decode(mut decoder: impl Decoder, body: &str) -> Vec<Result<ModelEvent, ModelError>> {
    let bytes = futures::stream::iter([Ok::<_, std::convert::Infallible>(
        bytes::Bytes::copy_from_slice(body.as_bytes()),
    )]);
    let events: Vec<_> = futures::executor::block_on(events(bytes).collect());
    let mut out = Vec::new();
    for event in events {
        match decoder.decode(&event.expect("a well-formed SSE body")) {
            Ok(model_events) => {
                for model_event in model_events {
                    let done = model_event == ModelEvent::Done;
                    out.push(Ok(model_event));
                    if done {
                        return out;
                    }
                }
            }
            Err(error) => {
                out.push(Err(error));
                return out;
            }
        }
    }
    out
}

pub fn item(turn_id: &str, kind: ItemKind, status: ItemStatus) -> Item {
    Item {
        id: crate::domain::new_id("m"),
        session_id: "s_1".to_owned(),
        turn_id: turn_id.to_owned(),
        seq: 0,
        created_at: crate::domain::now(),
        status,
        compacted: false,
        step: None,
        kind,
    }
}

/// A small history covering every kind: a user message with an image, a step with text
/// and two tool calls (one failing, one interrupted), reasoning, a notice, a summary.
pub fn history() -> Vec<Item> {
    use serde_json::json;
    let done = ItemStatus::Completed;
    vec![
        item(
            "t_0",
            ItemKind::Summary {
                text: "earlier".into(),
                covers_through_seq: 3,
            },
            done,
        ),
        item(
            "t_1",
            ItemKind::UserMessage {
                hooks: Vec::new(),
                text: "look".into(),
                source: MessageSource::User,
                from_session_id: None,
                images: vec![crate::domain::Image {
                    media_type: "image/png".into(),
                    data: Some("AAAA".into()),
                    url: None,
                }],
                command: None,
            },
            done,
        ),
        item(
            "t_1",
            ItemKind::Reasoning {
                text: "hmm".into(),
                state: None,
            },
            done,
        ),
        item(
            "t_1",
            ItemKind::AgentMessage {
                text: "Checking.".into(),
            },
            done,
        ),
        item(
            "t_1",
            ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: "call_a".into(),
                name: "shell".into(),
                arguments: json!({"command": "false"}),
                output: "oops".into(),
                exit_code: Some(1),
                files: None,
                images: Vec::new(),
                denied: false,
            },
            ItemStatus::Failed,
        ),
        item(
            "t_1",
            ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: "call_b".into(),
                name: "read_file".into(),
                arguments: json!({"path": "x"}),
                output: String::new(),
                exit_code: None,
                files: None,
                images: Vec::new(),
                denied: false,
            },
            ItemStatus::Interrupted,
        ),
        item(
            "t_1",
            ItemKind::Notice {
                text: "the turn was interrupted".into(),
            },
            done,
        ),
        item(
            "t_2",
            ItemKind::UserMessage {
                hooks: Vec::new(),
                text: "again".into(),
                source: MessageSource::User,
                from_session_id: None,
                images: vec![],
                command: None,
            },
            done,
        ),
        item(
            "t_2",
            ItemKind::AgentMessage {
                text: "Done.".into(),
            },
            done,
        ),
    ]
}
