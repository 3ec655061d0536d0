//! The agent's plan end to end: `update_plan` calls through the fake provider (Chat
//! Completions) become `plan` items after their calls, on the event stream and in the history;
//! a bad plan is a failed call and no item; the model reads its call's result but never the
//! plan item; a sub-agent's plan stays in its own session.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{session_items, until};

const TOOLS: &str = r#"tools = ["shell", "update_plan", "spawn_agent"]"#;

fn config(fake: &FakeProvider) -> String {
    let config = fake.config();
    assert!(config.contains(r#"tools = ["shell"]"#));
    config.replace(r#"tools = ["shell"]"#, TOOLS)
}

/// A service whose agent has `update_plan`, on the fake provider, for the clients' tests.
pub(crate) async fn plan_server() -> (FakeProvider, Server) {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake)),
        ..ServerOptions::default()
    })
    .await;
    (fake, server)
}

/// The replies of a turn that sets a plan of three steps (done, at work, to do), then answers.
pub(crate) fn push_plan_turn(fake: &FakeProvider) {
    fake.push(Reply::tool_call(
        "update_plan",
        plan_arguments(
            "Small steps.",
            &[
                ("Read it", "completed"),
                ("Fix it", "in_progress"),
                ("Test it", "pending"),
            ],
        ),
        1,
    ));
    fake.push(Reply::text("Planned."));
}

async fn setup() -> Setup {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = config(&fake);
    Setup::start_with(fake, config, Vec::new()).await
}

fn steps(plan: &Value) -> Vec<(String, String)> {
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            (
                step["step"].as_str().unwrap().to_owned(),
                step["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn owned(steps: &[(&str, &str)]) -> Vec<(String, String)> {
    steps
        .iter()
        .map(|(step, status)| ((*step).to_owned(), (*status).to_owned()))
        .collect()
}

fn plan_arguments(explanation: &str, steps: &[(&str, &str)]) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(step, status)| json!({ "step": step, "status": status }))
        .collect();
    json!({ "explanation": explanation, "steps": steps })
}

/// The roles of a Chat Completions request's messages, from the first with `text` on.
fn roles_from(body: &Value, text: &str) -> Vec<String> {
    let messages = body["messages"].as_array().unwrap();
    let start = messages
        .iter()
        .position(|m| m["content"].as_str() == Some(text))
        .expect("the message");
    messages[start..]
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn each_plan_is_an_item_after_its_call_that_the_model_never_reads() {
    let setup = setup().await;
    let first = [
        ("Read the failing test", "in_progress"),
        ("Fix the parser", "pending"),
        ("Run the tests", "pending"),
    ];
    let second = [
        ("Read the failing test", "completed"),
        ("Fix the parser", "completed"),
        ("Run the tests", "in_progress"),
    ];
    setup.fake.push(Reply::tool_call(
        "update_plan",
        plan_arguments("Start from the test.", &first),
        3,
    ));
    setup.fake.push(Reply::tool_call(
        "update_plan",
        plan_arguments("The parser is fixed.", &second),
        1,
    ));
    setup.fake.push(Reply::text("All done."));
    let run = setup.turn("Fix the build").await;
    assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);

    // The model was offered the tool.
    let offered: Vec<&str> = run.requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"update_plan"), "{offered:?}");

    // Live: two plan items, each right after its call, in the same turn and step.
    let plans = run.completed("plan");
    assert_eq!(plans.len(), 2, "{:?}", run.events);
    assert_eq!(steps(plans[0]), owned(&first));
    assert_eq!(plans[0]["explanation"], "Start from the test.");
    assert_eq!(steps(plans[1]), owned(&second));
    assert_eq!(plans[1]["status"], "completed");
    let calls = run.completed("tool_call");
    assert_eq!(calls.len(), 2);
    for (call, plan) in calls.iter().zip(&plans) {
        assert_eq!(call["name"], "update_plan");
        assert_eq!(call["status"], "completed", "{call}");
        assert_eq!(
            plan["seq"].as_u64(),
            Some(call["seq"].as_u64().unwrap() + 1)
        );
        assert_eq!(plan["turn_id"], call["turn_id"]);
        assert_eq!(plan["step"], call["step"]);
        assert_eq!(plan["session_id"], call["session_id"]);
    }
    assert_eq!(calls[0]["output"], "Plan updated: 0 of 3 steps completed.");
    assert_eq!(calls[1]["output"], "Plan updated: 2 of 3 steps completed.");

    // Stored the same; the newest is the current plan.
    let items = setup.items().await;
    let stored: Vec<&Value> = items.iter().filter(|i| i["kind"] == "plan").collect();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0]["id"], plans[0]["id"]);
    assert_eq!(steps(stored[1]), owned(&second));
    assert_eq!(stored[1]["explanation"], "The parser is fixed.");

    // The model's next calls carry each call's result, and nothing of the plan items: after
    // the user's message come only the calls and their results.
    assert_eq!(run.requests.len(), 3);
    let last = &run.requests[2].body;
    assert_eq!(
        roles_from(last, "Fix the build"),
        ["user", "assistant", "tool", "assistant", "tool"]
    );
    assert_eq!(
        tool_results(last),
        [
            "Plan updated: 0 of 3 steps completed.",
            "Plan updated: 2 of 3 steps completed."
        ]
    );
    // The explanation reaches the model only inside the call it wrote.
    assert_eq!(last.to_string().matches("The parser is fixed.").count(), 1);

    // A later turn reads the history the same way.
    setup.fake.push(Reply::text("Still done."));
    let next = setup.turn("Anything left?").await;
    let body = &next.requests[0].body;
    assert_eq!(
        roles_from(body, "Fix the build"),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_eq!(body.to_string().matches("Start from the test.").count(), 1);
}

#[tokio::test]
async fn a_bad_plan_fails_saying_why_and_stores_no_plan() {
    let setup = setup().await;
    setup.fake.push(Reply::tool_call(
        "update_plan",
        json!({ "steps": [
            { "step": "One", "status": "in_progress" },
            { "step": "Two", "status": "in_progress" },
        ] }),
        1,
    ));
    setup
        .fake
        .push(Reply::tool_call("update_plan", json!({ "steps": [] }), 1));
    setup.fake.push(Reply::text("I will work without a plan."));
    let run = setup.turn("Plan it").await;
    assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);

    let calls = run.completed("tool_call");
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call["status"], "failed", "{call}");
        assert!(
            call["output"]
                .as_str()
                .unwrap()
                .starts_with("The plan was not updated: "),
            "{call}"
        );
    }
    assert_eq!(
        calls[0]["output"],
        "The plan was not updated: 2 steps are `in_progress`; at most one step is in progress \
         at a time."
    );
    assert!(
        calls[1]["output"]
            .as_str()
            .unwrap()
            .contains("`steps` is empty"),
        "{}",
        calls[1]
    );
    assert!(
        run.all("item.started")
            .iter()
            .all(|d| d["item"]["kind"] != "plan")
    );
    assert!(run.completed("plan").is_empty());
    let items = setup.items().await;
    assert!(items.iter().all(|item| item["kind"] != "plan"), "{items:?}");
    // The model read why, so it can correct itself.
    let results = tool_results(&run.requests[2].body);
    assert!(
        results[0].contains("at most one step is in progress"),
        "{results:?}"
    );
}

/// The text of the first user message of a Chat Completions request: a sub-agent's task, or
/// the message that started the conversation.
fn first_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_sub_agents_plan_stays_in_its_own_session() {
    let (fake, server) = plan_server().await;
    // The sub-agent's plan waits until this test follows the conversation's events.
    let gate = Arc::new(Notify::new());
    let opened = gate.clone();
    fake.script(move |body| {
        let results = tool_results(body);
        Some(if first_user(body).starts_with("task: check the docs") {
            match results.len() {
                0 => Reply::After(
                    opened.clone(),
                    Box::new(Reply::tool_call(
                        "update_plan",
                        plan_arguments("Sub-agent plan.", &[("Read the docs", "in_progress")]),
                        1,
                    )),
                ),
                _ => Reply::text("Docs checked."),
            }
        } else {
            match results.len() {
                0 => Reply::tool_call(
                    "spawn_agent",
                    json!({ "agent": "default", "task": "task: check the docs" }),
                    1,
                ),
                _ => Reply::text("Handed over."),
            }
        })
    });
    let (status, created) = server
        .post("/api/conversations", json!({ "text": "Check everything" }))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let root = created["conversation"]["root_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut events = server.events(&id).await;
    gate.notify_one();
    let seen = until(&mut events, |kind, data| {
        kind == "item.completed" && data["item"]["kind"] == "plan"
    })
    .await;
    let (_, plan) = seen.last().unwrap();
    let sub = plan["item"]["session_id"].as_str().unwrap().to_owned();
    assert_ne!(sub, root);
    assert_eq!(
        steps(&plan["item"]),
        owned(&[("Read the docs", "in_progress")])
    );
    until(&mut events, |kind, data| {
        kind == "turn.ended" && data["session_id"] == sub.as_str()
    })
    .await;

    let sub_items = session_items(&server, &id, &sub).await;
    let plans: Vec<&Value> = sub_items.iter().filter(|i| i["kind"] == "plan").collect();
    assert_eq!(plans.len(), 1, "{sub_items:?}");
    assert_eq!(plans[0]["explanation"], "Sub-agent plan.");
    let root_items = session_items(&server, &id, &root).await;
    assert!(
        root_items.iter().all(|item| item["kind"] != "plan"),
        "{root_items:?}"
    );
}
