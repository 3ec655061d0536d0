//! What each protocol's reference requires of a request beyond the history: Anthropic's signed
//! thinking blocks going back ahead of the tool use they led to, the Responses API's
//! reasoning, Chat Completions' output limit. Each test asserts the exact bodies the fake
//! provider received.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};

/// The fake's config with `lines` added to its model (whose `max_output_tokens` becomes 4000).
fn model_config(fake: &FakeProvider, lines: &str) -> String {
    fake.config().replace(
        "max_output_tokens = 1000",
        &format!("max_output_tokens = 4000\n{lines}"),
    )
}

/// The thinking blocks of every assistant message of an Anthropic request, in order.
fn thinking_sent(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "assistant")
        .flat_map(|message| message["content"].as_array().unwrap().clone())
        .filter(|block| block["type"] == "thinking" || block["type"] == "redacted_thinking")
        .collect()
}

#[tokio::test]
async fn anthropic_thinking_goes_back_signed_ahead_of_the_tool_use() {
    for context in ["current_turn", "all_turns"] {
        let fake = FakeProvider::start(Wire::AnthropicMessages).await;
        let config = model_config(
            &fake,
            &format!("thinking = {{ budget_tokens = 2000 }}\nreasoning_context = \"{context}\""),
        );
        let setup = Setup::start_with(fake, config, Vec::new()).await;
        setup.fake.push(Reply::Thought {
            thinking: "The user wants a listing.".into(),
            signature: "SIG-1".into(),
            redacted: "REDACTED-1".into(),
            name: "shell".into(),
            arguments: json!({ "command": "echo hello" }),
        });
        setup.fake.push(Reply::text("It printed hello."));
        let turn = setup.turn("Run echo hello").await;
        assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);

        // Thinking is asked for, and no temperature is sent with it.
        let first = &turn.requests[0].body;
        assert_eq!(
            first["thinking"],
            json!({ "type": "enabled", "budget_tokens": 2000 })
        );
        assert_eq!(first["max_tokens"], 4000);
        assert!(first.get("temperature").is_none(), "{first}");

        // The follow-up sends the thinking back unchanged, ahead of the tool use.
        let blocks = json!([
            { "type": "thinking", "thinking": "The user wants a listing.", "signature": "SIG-1" },
            { "type": "redacted_thinking", "data": "REDACTED-1" },
        ]);
        let call = turn.completed("tool_call")[0];
        let call_id = call["call_id"].as_str().unwrap();
        let messages = turn.requests[1].body["messages"].as_array().unwrap();
        let n = messages.len();
        assert_eq!(
            messages[n - 2],
            json!({ "role": "assistant", "content": [
                blocks[0], blocks[1],
                { "type": "tool_use", "id": call_id, "name": "shell", "input": { "command": "echo hello" } },
            ] })
        );
        assert_eq!(messages[n - 1]["content"][0]["tool_use_id"], call_id);

        // The thinking streamed as reasoning and is stored with its blocks.
        let reasoning = turn.completed("reasoning");
        assert_eq!(reasoning.len(), 1, "{:?}", turn.events);
        let item_id = reasoning[0]["id"].as_str().unwrap();
        assert_eq!(turn.streamed_text(item_id), "The user wants a listing.");
        let stored = setup.items().await;
        let stored = stored
            .iter()
            .find(|item| item["kind"] == "reasoning")
            .expect("a reasoning item");
        assert_eq!(stored["text"], "The user wants a listing.");
        assert_eq!(
            stored["state"],
            json!({ "type": "anthropic_thinking", "blocks": blocks })
        );

        // The next turn takes it back only with all_turns.
        setup.fake.push(Reply::text("Next."));
        let next = setup.turn("and now?").await;
        let expected = if context == "all_turns" {
            blocks.as_array().unwrap().clone()
        } else {
            Vec::new()
        };
        assert_eq!(thinking_sent(&next.requests[0].body), expected, "{context}");
    }
}

/// The encrypted contents of the reasoning items a Responses request takes back.
fn reasoning_sent(body: &Value) -> Vec<&str> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "reasoning")
        .map(|item| item["encrypted_content"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn responses_reasoning_goes_back_within_the_turn_by_default() {
    let fake = FakeProvider::start(Wire::OpenaiResponses).await;
    let config = model_config(
        &fake,
        "reasoning = { effort = \"high\", summary = \"auto\" }",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    setup.fake.push(Reply::ReasonedCall {
        encrypted: "ENC-1".into(),
        name: "shell".into(),
        arguments: json!({ "command": "echo hello" }),
    });
    setup.fake.push(Reply::text("It printed hello."));
    let turn = setup.turn("Run echo hello").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);

    for request in &turn.requests {
        assert_eq!(
            request.body["include"],
            json!(["reasoning.encrypted_content"])
        );
        assert_eq!(
            request.body["reasoning"],
            json!({ "effort": "high", "summary": "auto" })
        );
    }
    // The summary streamed as reasoning the clients see.
    let reasoning = turn.completed("reasoning");
    assert_eq!(reasoning.len(), 1, "{:?}", turn.events);
    assert_eq!(
        turn.streamed_text(reasoning[0]["id"].as_str().unwrap()),
        "Thinking."
    );
    // The follow-up takes the reasoning back, whole, just before the call it led to.
    let input = turn.requests[1].body["input"].as_array().unwrap();
    let at = input
        .iter()
        .position(|item| item["type"] == "reasoning")
        .expect("the reasoning goes back");
    assert_eq!(
        input[at],
        json!({
            "id": format!("rs_fake_{}", setup.fake.requests().len() - 1),
            "type": "reasoning", "encrypted_content": "ENC-1",
            "summary": [{ "type": "summary_text", "text": "Thinking." }],
        })
    );
    assert_eq!(input[at + 1]["type"], "function_call");
    assert_eq!(input[at + 2]["type"], "function_call_output");

    // The next turn leaves it behind (only the running turn's goes back by default).
    setup.fake.push(Reply::text("Next."));
    let next = setup.turn("and now?").await;
    assert!(reasoning_sent(&next.requests[0].body).is_empty());
}

#[tokio::test]
async fn chat_sends_the_limit_as_max_completion_tokens_unless_configured() {
    for (line, field, other) in [
        ("", "max_completion_tokens", "max_tokens"),
        (
            "max_tokens_field = \"max_tokens\"",
            "max_tokens",
            "max_completion_tokens",
        ),
    ] {
        let fake = FakeProvider::start(Wire::OpenaiChat).await;
        let config = model_config(&fake, line);
        let setup = Setup::start_with(fake, config, Vec::new()).await;
        setup.fake.push(Reply::text("Limited."));
        let turn = setup.turn("Be short").await;
        assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
        let body = &turn.requests[0].body;
        assert_eq!(body[field], 4000, "{line}: {body}");
        assert!(body.get(other).is_none(), "{line}: {body}");
    }
}

#[tokio::test]
async fn anthropic_529_reads_as_overloaded_and_is_retried() {
    let setup = Setup::start(Wire::AnthropicMessages).await;
    setup.fake.push(Reply::rejected(529, "Overloaded"));
    setup.fake.push(Reply::text("Back again."));
    let turn = setup.turn("Are you there?").await;
    assert_eq!(turn.ended()["status"], "completed", "{:?}", turn.events);
    let retries = turn.all("model.retry");
    assert_eq!(retries.len(), 1, "{:?}", turn.events);
    let error = retries[0]["error"].as_str().unwrap();
    assert!(error.contains("answered 529 Overloaded"), "{error}");
    assert!(!error.contains("unknown"), "{error}");
}
