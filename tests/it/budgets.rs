//! Spending limits, driven like a client: an agent's `max_turn_model_calls`, a conversation's
//! own `max_cost` (set when it is created, raised with `PATCH`), `on_budget = "ask"` answered
//! through the approvals API, sub-agents' calls counted toward the root agent's turn, and bad
//! limits refused with nothing stored. A turn that reaches a limit makes no further model call
//! and ends `failed` with the code `budget_exceeded`.

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{items, until};

const PRICE: &str = "price = { input = 3.0, cached_input = 0.3, output = 15.0 }";

/// A server on the fake provider whose default agent has `agent_lines` added (its table comes
/// last), and whose model has `model_lines`.
async fn start(fake: &FakeProvider, model_lines: &str, agent_lines: &str) -> Server {
    let config = fake
        .config()
        .replace(
            "max_output_tokens = 1000",
            &format!("max_output_tokens = 1000\n{model_lines}"),
        )
        .replace(
            "tools = [\"shell\"]",
            "tools = [\"shell\", \"spawn_agent\", \"wait_agents\"]",
        );
    Server::start_with(ServerOptions {
        config: Some(format!("{config}{agent_lines}\n")),
        ..ServerOptions::default()
    })
    .await
}

fn echo() -> Reply {
    Reply::tool_call("shell", json!({"command": "echo hi"}), 1)
}

async fn create(server: &Server, body: Value) -> (String, String) {
    let (status, created) = server.post("/api/conversations", body).await;
    assert_eq!(status, 201, "{created}");
    (
        created["conversation"]["id"].as_str().unwrap().to_owned(),
        created["conversation"]["root_session_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

/// The conversation's turns of `session`, as `GET …/turns` lists them.
async fn turns(server: &Server, id: &str, session: &str) -> Vec<Value> {
    let (status, page) = server
        .get(&format!("/api/conversations/{id}/turns?session={session}"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["turns"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_turn_stops_before_the_call_past_its_agents_model_call_limit() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", "max_turn_model_calls = 2").await;
    for _ in 0..3 {
        fake.push(echo());
    }
    let (id, root) = create(&server, json!({"text": "Keep echoing"})).await;
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    let ended = &seen.last().unwrap().1;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(ended["error_code"], "budget_exceeded", "{ended}");
    assert_eq!(
        ended["error"],
        "the turn has made 2 model calls, reaching its limit max_turn_model_calls = 2 \
         (agents.default.max_turn_model_calls)"
    );
    // The third call was never made.
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.remaining(), 1);
    let listed = turns(&server, &id, &root).await;
    assert_eq!(listed[0]["error_code"], "budget_exceeded", "{listed:?}");
    assert_eq!(listed[0]["usage"]["model_calls"], 2);

    // The limit is per turn: the next one starts afresh.
    fake.push(Reply::text("Done."));
    server.send_and_wait(&id, "Now answer").await;
    let listed = turns(&server, &id, &root).await;
    assert_eq!(listed[1]["status"], "completed", "{listed:?}");
    assert!(listed[1].get("error_code").is_none(), "{listed:?}");
}

#[tokio::test]
async fn a_conversations_cost_limit_stops_its_turn_until_it_is_raised() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, PRICE, "").await;
    // Each call costs 0.000333 at these prices: the second reaches 0.0005.
    for _ in 0..3 {
        fake.push(echo());
    }
    let (id, root) = create(
        &server,
        json!({"text": "Spend", "budget": {"max_cost": 0.0005}}),
    )
    .await;
    server.wait_idle(&id).await;
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["budget"], json!({"max_cost": 0.0005}), "{view}");
    assert_eq!(view["last_turn"]["status"], "failed", "{view}");
    let listed = turns(&server, &id, &root).await;
    assert_eq!(listed[0]["error_code"], "budget_exceeded");
    assert_eq!(
        listed[0]["error"],
        "the conversation has cost 0.0007, reaching its limit max_cost = 0.0005 \
         (the conversation's budget.max_cost)"
    );
    assert_eq!(fake.requests().len(), 2);

    // Still over the limit: the next turn makes no call at all.
    server.send_and_wait(&id, "Again").await;
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        turns(&server, &id, &root).await[1]["error_code"],
        "budget_exceeded"
    );

    // Bad limits are refused and change nothing.
    for (budget, says) in [
        (
            json!({"max_cost": 0}),
            "max_cost must be a number greater than 0",
        ),
        (
            json!({"max_turn_tokens": 0}),
            "max_turn_tokens must be at least 1",
        ),
        (json!({"max_dollars": 5}), "max_dollars"),
    ] {
        let (status, body) = server
            .patch(
                &format!("/api/conversations/{id}"),
                json!({ "budget": budget }),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains(says), "{body}");
    }
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["budget"], json!({"max_cost": 0.0005}), "{view}");

    // Raised, the conversation goes on.
    let (status, body) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({"budget": {"max_cost": 1.0}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["budget"], json!({"max_cost": 1.0}));
    fake.push(Reply::text("Done."));
    server.send_and_wait(&id, "Go on").await;
    assert_eq!(turns(&server, &id, &root).await[2]["status"], "completed");
}

#[tokio::test]
async fn a_cost_limit_needs_prices_on_every_model_it_may_call() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", "").await;
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({"text": "Hi", "budget": {"max_cost": 1.0}}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "price_missing", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model `m` has none (set models.m.price)"),
        "{body}"
    );
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"], json!([]), "nothing was stored");
    drop(server);

    // The same in the config file names the key.
    let config = fake.config();
    let stderr = crate::harness::serve_refuses(&format!("{config}max_cost = 2.0\n")).await;
    assert!(stderr.contains("agents.default.max_cost"), "{stderr}");
    assert!(stderr.contains("model `m` has none"), "{stderr}");
}

#[tokio::test]
async fn with_on_budget_ask_a_user_lets_the_turn_go_past_its_limit_or_stops_it() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", "max_turn_model_calls = 1\non_budget = \"ask\"").await;
    fake.push(echo());
    fake.push(Reply::text("Done."));
    let (id, root) = create(&server, json!({"text": "Echo once"})).await;
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, _| kind == "approval.requested").await;
    let approval = seen.last().unwrap().1["approval"].clone();
    assert_eq!(approval["tool"], "budget", "{approval}");
    assert_eq!(approval["setting"], "agents.default.max_turn_model_calls");
    assert_eq!(
        approval["reason"],
        "the turn has made 1 model call, reaching its limit max_turn_model_calls = 1 \
         (agents.default.max_turn_model_calls): continue past 1?"
    );
    assert_eq!(
        approval["subject"]["arguments"],
        json!({"limit": "max_turn_model_calls", "max": "1"})
    );
    // Its item is a notice every client sees.
    let notice = items(&server, &id)
        .await
        .into_iter()
        .find(|item| item["id"] == approval["item_id"])
        .expect("the approval's notice is stored");
    assert_eq!(notice["kind"], "notice", "{notice}");
    assert_eq!(fake.requests().len(), 1);

    // A limit's approval is never remembered as a rule.
    let path = format!("/api/approvals/{}", approval["id"].as_str().unwrap());
    let (status, body) = server
        .post(&path, json!({"decision": "allow_always"}))
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = server.post(&path, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 200, "{body}");
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    assert_eq!(fake.requests().len(), 2);

    // Denied, the turn stops as over budget.
    fake.push(echo());
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "Once more"}),
        )
        .await;
    assert_eq!(status, 202);
    let seen = until(&mut events, |kind, _| kind == "approval.requested").await;
    let approval = seen.last().unwrap().1["approval"].clone();
    let path = format!("/api/approvals/{}", approval["id"].as_str().unwrap());
    let (status, body) = server.post(&path, json!({"decision": "deny"})).await;
    assert_eq!(status, 200, "{body}");
    let seen = until(&mut events, |kind, _| kind == "turn.ended").await;
    let ended = &seen.last().unwrap().1;
    assert_eq!(ended["error_code"], "budget_exceeded", "{ended}");
    assert!(
        ended["error"]
            .as_str()
            .unwrap()
            .ends_with("a user chose not to go on"),
        "{ended}"
    );
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(turns(&server, &id, &root).await.len(), 2);
}

#[tokio::test]
async fn sub_agents_calls_count_toward_the_root_agents_turn() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, "", "max_turn_model_calls = 3").await;
    fake.script(|body| {
        let messages = body["messages"].as_array().unwrap();
        let first_user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if first_user.starts_with("sub task") {
            // The sub-agent echoes until it is stopped.
            return Some(echo());
        }
        let results = messages.iter().filter(|m| m["role"] == "tool").count();
        Some(match results {
            0 => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "sub task"}),
                1,
            ),
            1 => {
                let spawned: Value = messages
                    .iter()
                    .find(|m| m["role"] == "tool")
                    .and_then(|m| serde_json::from_str(m["content"].as_str()?).ok())
                    .unwrap_or_default();
                Reply::tool_call(
                    "wait_agents",
                    json!({"session_ids": [spawned["session_id"]], "timeout_s": 60}),
                    1,
                )
            }
            _ => Reply::text("All done."),
        })
    });
    let (id, root) = create(&server, json!({"text": "Delegate"})).await;
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, data| {
        kind == "turn.ended" && data["session_id"] == root.as_str()
    })
    .await;
    let ended: Vec<&Value> = seen
        .iter()
        .filter(|(kind, _)| kind == "turn.ended")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(
        ended.len(),
        2,
        "the sub-agent's turn, then the root's: {ended:?}"
    );
    for turn in &ended {
        assert_eq!(turn["error_code"], "budget_exceeded", "{turn}");
        assert!(
            turn["error"]
                .as_str()
                .unwrap()
                .contains("(agents.default.max_turn_model_calls)"),
            "{turn}"
        );
    }
    // Two root calls and the sub-agent's: the sub-agent stopped once the three were spent
    // (a call already on its way when another reached the limit still finishes).
    let calls = fake.requests().len();
    assert!((3..=4).contains(&calls), "{calls} calls");
    let root_calls = ended[1]["usage"]["model_calls"].as_u64().unwrap();
    let sub_calls = ended[0]["usage"]["model_calls"].as_u64().unwrap();
    assert_eq!(root_calls, 2);
    assert_eq!(root_calls + sub_calls, calls as u64);
}
