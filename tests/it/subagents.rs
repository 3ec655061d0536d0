//! Sub-agents end to end: `spawn_agent` and the collaboration tools, the
//! reports a sub-agent sends its parent, the interrupt rules, the session API and events, crash
//! recovery and forks. The model is the fake provider (Chat Completions) with a script that
//! answers each session by what its request holds, since sessions call the model concurrently.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT, process_alive};
use crate::support::{session_items, until};

/// A config with two agents that have every tool, and the given `[subagents]` limits.
fn config(fake: &FakeProvider, limits: &str) -> String {
    format!(
        r#"
[retry]
max_attempts = 3
initial_delay_ms = 10
max_delay_ms = 50

[subagents]
{limits}

[providers.fake]
protocol = "openai_chat"
base_url = "{base_url}"

[models.m]
provider = "fake"
name = "fake-model"
context_window = 100000
max_output_tokens = 1000

[agents.default]
description = "General agent"
model = "m"
tools = ["shell", "spawn_agent", "send_message", "wait_agents", "interrupt_agent", "list_agents"]
spawnable = ["default", "reviewer"]

[agents.reviewer]
description = "Reviews a change"
model = "m"
tools = ["shell", "spawn_agent", "list_agents"]
spawnable = ["default", "reviewer"]
"#,
        base_url = fake.base_url
    )
}

async fn start(limits: &str) -> (FakeProvider, Server) {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, limits)),
        ..ServerOptions::default()
    })
    .await;
    (fake, server)
}

/// The text of the first user message of a Chat Completions request: a session's task, or the
/// message that started the conversation.
fn first_user(body: &Value) -> String {
    user_texts(body).into_iter().next().unwrap_or_default()
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// The outputs of the tool calls in a request, in order.
fn tool_outputs(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The session ids that `spawn_agent` results in a request name.
fn spawned(body: &Value) -> Vec<String> {
    tool_outputs(body)
        .iter()
        .filter_map(|output| serde_json::from_str::<Value>(output).ok())
        .filter_map(|result| result["session_id"].as_str().map(str::to_owned))
        .collect()
}

fn spawn(agent: &str, task: &str) -> (String, Value) {
    (
        "spawn_agent".to_owned(),
        json!({ "agent": agent, "task": task }),
    )
}

fn turn_ended_in(session: &str) -> impl FnMut(&str, &Value) -> bool + '_ {
    move |kind, data| kind == "turn.ended" && data["session_id"] == session
}

async fn create(server: &Server, text: &str) -> (String, String) {
    let (status, body) = server
        .post("/api/conversations", json!({ "text": text }))
        .await;
    assert_eq!(status, 201, "{body}");
    (
        body["conversation"]["id"].as_str().unwrap().to_owned(),
        body["conversation"]["root_session_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

async fn sessions(server: &Server, id: &str) -> Vec<Value> {
    let (status, body) = server
        .get(&format!("/api/conversations/{id}/sessions"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["sessions"].as_array().unwrap().clone()
}

fn reports(items: &[Value]) -> Vec<&Value> {
    items
        .iter()
        .filter(|item| item["kind"] == "user_message" && item["source"] == "agent")
        .collect()
}

#[tokio::test]
async fn three_sub_agents_run_at_once_and_report_to_the_root_after_wait_agents() {
    let (fake, server) = start("").await;
    fake.set_pace(Duration::from_millis(10));
    let long_answer = |name: &str| format!("{name} done. {}", "All is well here. ".repeat(20));
    fake.script(move |body| {
        let first = first_user(body);
        if first.starts_with("task ") {
            return Some(Reply::text(&long_answer(&first)));
        }
        let outputs = tool_outputs(body);
        Some(match outputs.len() {
            0 => Reply::ToolCalls(vec![
                spawn("default", "task A"),
                spawn("reviewer", "task B"),
                spawn("default", "task C"),
            ]),
            3 => Reply::tool_call(
                "wait_agents",
                json!({ "session_ids": spawned(body), "timeout_s": 60 }),
                1,
            ),
            _ => Reply::text("All three reported."),
        })
    });
    let (id, root) = create(&server, "Split the work in three").await;
    let mut events = server.events(&id).await;
    let seen = until(&mut events, turn_ended_in(&root)).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");

    // The three children were announced, and every item event names its session.
    let created: Vec<&Value> = seen
        .iter()
        .filter(|(kind, _)| kind == "session.created")
        .map(|(_, data)| &data["session"])
        .collect();
    assert_eq!(created.len(), 3, "{seen:?}");
    for (kind, data) in &seen {
        if kind.starts_with("item.") {
            let session = data["session_id"]
                .as_str()
                .or(data["item"]["session_id"].as_str());
            assert!(session.is_some(), "{kind} without a session: {data}");
        }
    }
    // Their model calls overlapped in time.
    assert!(
        fake.most_streaming_at_once() >= 3,
        "at most {} answers streamed at once",
        fake.most_streaming_at_once()
    );

    let sessions = sessions(&server, &id).await;
    assert_eq!(sessions.len(), 4);
    assert_eq!(sessions[0]["id"], root.as_str(), "root first");
    for child in &sessions[1..] {
        assert_eq!(child["parent_id"], root.as_str());
        assert_eq!(child["status"], "idle");
        let task = child["task"].as_str().unwrap();
        assert!(
            child["last_message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{task} done.")),
            "{child}"
        );
    }
    assert_eq!(sessions[2]["agent"], "reviewer");

    // The root waited, then read the three reports before its answer.
    let history = session_items(&server, &id, &root).await;
    let wait = history
        .iter()
        .find(|item| item["name"] == "wait_agents")
        .expect("a wait_agents call");
    let waited: Value = serde_json::from_str(wait["output"].as_str().unwrap()).unwrap();
    assert_eq!(waited["timed_out"], false, "{waited}");
    assert!(
        waited["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|agent| agent["status"] == "idle")
    );
    let reports = reports(&history);
    assert_eq!(reports.len(), 3, "{history:?}");
    for child in &sessions[1..] {
        assert!(
            reports
                .iter()
                .any(|report| report["from_session_id"] == child["id"]
                    && report["text"]
                        .as_str()
                        .unwrap()
                        .contains(child["last_message"].as_str().unwrap())),
            "no report from {child}"
        );
        assert!(
            reports
                .iter()
                .all(|report| report["seq"].as_u64() > wait["seq"].as_u64())
        );
    }
    let answer = history.last().unwrap();
    assert_eq!(answer["kind"], "agent_message");
    assert_eq!(answer["text"], "All three reported.");
    let last_request = fake.requests().last().unwrap().body.clone();
    assert_eq!(first_user(&last_request), "Split the work in three");
    let reports: Vec<String> = user_texts(&last_request)
        .into_iter()
        .filter(|text| text.contains("Report from sub-agent"))
        .collect();
    assert_eq!(reports.len(), 3);
    // Named by agent, number and task, never by session id.
    for report in &reports {
        assert!(!report.contains("s_"), "{report}");
        assert!(report.starts_with("Report from sub-agent "), "{report}");
        assert!(report.contains(" #"), "{report}");
    }
    // The spawn_agent description lists the configured agents for the model to choose.
    let root_request = &fake.requests()[0].body;
    let spawn_tool = root_request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "spawn_agent")
        .unwrap();
    let description = spawn_tool["function"]["description"].as_str().unwrap();
    assert!(description.contains("`reviewer` (model `m`): Reviews a change"));
}

#[tokio::test]
async fn sub_agents_nest_until_the_depth_limit_and_the_live_limit_is_a_tool_error() {
    let (fake, server) = start("max_depth = 2\nmax_live = 8").await;
    fake.script(|body| {
        let first = first_user(body);
        let calls = tool_outputs(body).len();
        Some(match (first.as_str(), calls) {
            ("nest", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "level 1"}),
                2,
            ),
            ("level 1", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "level 2"}),
                2,
            ),
            ("level 2", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "level 3"}),
                2,
            ),
            (_, _) => Reply::text(&format!("finished {first}")),
        })
    });
    let (id, root) = create(&server, "nest").await;
    server.wait_idle(&id).await;
    let all = sessions(&server, &id).await;
    assert_eq!(all.len(), 3, "{all:?}");
    let (level1, level2) = (&all[1], &all[2]);
    assert_eq!(level1["parent_id"], root.as_str());
    assert_eq!(level2["parent_id"], level1["id"]);
    let level2_items = session_items(&server, &id, level2["id"].as_str().unwrap()).await;
    let refused = level2_items
        .iter()
        .find(|item| item["name"] == "spawn_agent")
        .unwrap();
    assert_eq!(refused["status"], "failed");
    assert!(
        refused["output"]
            .as_str()
            .unwrap()
            .contains("subagents.max_depth"),
        "{refused}"
    );
    // The turn went on after the tool error, and its report went up.
    assert_eq!(level2["last_message"], "finished level 2");
    let level1_items = session_items(&server, &id, level1["id"].as_str().unwrap()).await;
    assert!(
        reports(&level1_items)
            .iter()
            .any(|report| report["from_session_id"] == level2["id"])
    );

    // At most one sub-agent at a time: the second spawn of one step is refused.
    let (fake, server) = start("max_live = 1").await;
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            ("two", 0) => {
                Reply::ToolCalls(vec![spawn("default", "slow"), spawn("default", "other")])
            }
            ("slow", _) => Reply::After(held.clone(), Box::new(Reply::text("slow done"))),
            _ => Reply::text("ok"),
        })
    });
    let (id, root) = create(&server, "two").await;
    let mut events = server.events(&id).await;
    until(&mut events, turn_ended_in(&root)).await;
    let history = session_items(&server, &id, &root).await;
    let calls: Vec<&Value> = history
        .iter()
        .filter(|item| item["name"] == "spawn_agent")
        .collect();
    assert_eq!(calls[0]["status"], "completed");
    assert_eq!(calls[1]["status"], "failed");
    assert!(
        calls[1]["output"]
            .as_str()
            .unwrap()
            .contains("subagents.max_live"),
        "{}",
        calls[1]
    );
    gate.notify_one();
    server.wait_idle(&id).await;
}

#[tokio::test]
async fn include_history_gives_the_child_the_parents_finished_turns_only() {
    let (fake, server) = start("").await;
    fake.script(|body| {
        let first = first_user(body);
        let last = user_texts(body).last().cloned().unwrap_or_default();
        Some(match (first.as_str(), last.as_str(), tool_outputs(body).len()) {
            (_, "first question", _) => Reply::text("first answer"),
            (_, "second question", 0) => Reply::ToolCalls(vec![
                (
                    "spawn_agent".to_owned(),
                    json!({"agent": "default", "task": "CHILD TASK", "include_history": "last_turn"}),
                ),
                (
                    "spawn_agent".to_owned(),
                    json!({"agent": "default", "task": "ALL TASK", "include_history": "all"}),
                ),
            ]),
            _ => Reply::text("fine"),
        })
    });
    let (id, root) = create(&server, "Hello").await;
    server.wait_idle(&id).await;
    for text in ["first question", "second question"] {
        let mut events = server.events(&id).await;
        let (status, body) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        until(&mut events, turn_ended_in(&root)).await;
    }
    server.wait_idle(&id).await;
    let first_request = |task: &str| {
        fake.requests()
            .into_iter()
            .map(|request| request.body)
            .find(|body| user_texts(body).last().map(String::as_str) == Some(task))
            .expect("the child's first request")["messages"]
            .to_string()
    };
    let text = first_request("CHILD TASK");
    assert!(text.contains("first question"), "{text}");
    assert!(text.contains("first answer"), "{text}");
    assert!(
        !text.contains("second question"),
        "the running turn leaked: {text}"
    );
    assert!(!text.contains("Hello"), "an older turn leaked: {text}");
    let text = first_request("ALL TASK");
    for earlier in ["Hello", "first question", "first answer"] {
        assert!(text.contains(earlier), "{earlier} is missing: {text}");
    }
    assert!(
        !text.contains("second question"),
        "the running turn leaked: {text}"
    );
}

#[tokio::test]
async fn the_users_message_is_taken_before_a_report_that_waits_with_it() {
    let (fake, server) = start("").await;
    let gate = Arc::new(Notify::new());
    let child_gate = Arc::new(Notify::new());
    let (held, child_held) = (gate.clone(), child_gate.clone());
    fake.script(move |body| {
        let first = first_user(body);
        let texts = user_texts(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            // The child answers only once the root's second call is held.
            ("quick", _) => Reply::After(child_held.clone(), Box::new(Reply::text("quick done"))),
            ("start", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "quick"}),
                1,
            ),
            ("start", 1) if texts.len() == 1 => {
                child_held.notify_one();
                Reply::After(held.clone(), Box::new(Reply::text("root busy")))
            }
            _ => Reply::text("next turn"),
        })
    });
    let (id, root) = create(&server, "start").await;
    let mut events = server.events(&id).await;
    // The child reports while the root's model call is held: the report waits.
    until(&mut events, |kind, data| {
        kind == "pending.updated" && data["pending"].as_array().is_some_and(|p| !p.is_empty())
    })
    .await;
    let (status, queued) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "user next", "mode": "queue" }),
        )
        .await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["message"]["status"], "waiting");
    let (_, pending) = server
        .get(&format!("/api/conversations/{id}/pending"))
        .await;
    let pending = pending["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert_eq!(pending[0]["source"], "user");
    assert_eq!(pending[1]["source"], "agent");
    assert_eq!(pending[1]["session_id"], root.as_str());
    gate.notify_one();
    // The held call ends the turn; the next one starts with the user's message, and the report
    // comes in right after it.
    until(&mut events, |kind, data| {
        kind == "turn.started" && data["session_id"] == root.as_str()
    })
    .await;
    server.wait_idle(&id).await;
    let history = session_items(&server, &id, &root).await;
    let user = history
        .iter()
        .position(|item| item["text"] == "user next")
        .unwrap();
    let report = history
        .iter()
        .position(|item| item["source"] == "agent")
        .unwrap();
    assert!(user < report, "{history:?}");
    assert_eq!(history[user]["turn_id"], history[report]["turn_id"]);
}

#[tokio::test]
async fn after_the_user_interrupts_the_root_children_go_on_and_their_reports_wait_for_the_user() {
    let (fake, server) = start("").await;
    let child_gate = Arc::new(Notify::new());
    let root_gate = Arc::new(Notify::new());
    let (child_held, root_held) = (child_gate.clone(), root_gate.clone());
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            ("slow child", _) => {
                Reply::After(child_held.clone(), Box::new(Reply::text("child result")))
            }
            ("go", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "slow child"}),
                1,
            ),
            ("go", 1) if user_texts(body).len() == 1 => {
                Reply::After(root_held.clone(), Box::new(Reply::text("never")))
            }
            _ => Reply::text("root answer"),
        })
    });
    let (id, root) = create(&server, "go").await;
    let mut events = server.events(&id).await;
    until(&mut events, |kind, _| kind == "session.created").await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(
        (status, &body["interrupted"]),
        (200, &json!(true)),
        "{body}"
    );
    let all = sessions(&server, &id).await;
    assert_eq!(all[0]["status"], "interrupted");
    assert_eq!(all[1]["status"], "running", "the child goes on");

    child_gate.notify_one();
    let seen = until(&mut events, |kind, data| {
        kind == "pending.updated" && data["pending"].as_array().is_some_and(|p| !p.is_empty())
    })
    .await;
    assert!(
        !seen
            .iter()
            .any(|(kind, data)| kind == "turn.started" && data["session_id"] == root.as_str()),
        "the report must not start a turn before the user speaks: {seen:?}"
    );
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["pending"][0]["from_session_id"], all[1]["id"]);
    assert_eq!(view["sessions"][0]["status"], "interrupted");

    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "carry on" }),
        )
        .await;
    assert_eq!(status, 202);
    server.wait_idle(&id).await;
    let history = session_items(&server, &id, &root).await;
    let user = history
        .iter()
        .position(|item| item["text"] == "carry on")
        .unwrap();
    let report = history
        .iter()
        .position(|item| item["source"] == "agent")
        .expect("the report was delivered");
    assert!(user < report);
    assert!(
        history[report]["text"]
            .as_str()
            .unwrap()
            .contains("child result")
    );
    root_gate.notify_one();
}

#[tokio::test]
async fn wait_agents_times_out_with_the_child_still_running() {
    let (fake, server) = start("").await;
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            ("slow", _) => Reply::After(held.clone(), Box::new(Reply::text("slow done"))),
            ("wait", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "slow"}),
                1,
            ),
            ("wait", 1) => Reply::tool_call(
                "wait_agents",
                json!({"session_ids": spawned(body), "timeout_s": 1}),
                1,
            ),
            _ => Reply::text("moved on"),
        })
    });
    let (id, root) = create(&server, "wait").await;
    let mut events = server.events(&id).await;
    until(&mut events, turn_ended_in(&root)).await;
    let history = session_items(&server, &id, &root).await;
    let wait = history
        .iter()
        .find(|item| item["name"] == "wait_agents")
        .unwrap();
    let result: Value = serde_json::from_str(wait["output"].as_str().unwrap()).unwrap();
    assert_eq!(result["timed_out"], true, "{result}");
    assert_eq!(result["agents"][0]["status"], "running", "{result}");
    let waited = result["waited_s"].as_f64().unwrap();
    assert!((1.0..10.0).contains(&waited), "waited {waited} s");
    assert_eq!(sessions(&server, &id).await[1]["status"], "running");
    gate.notify_one();
    server.wait_idle(&id).await;
}

#[tokio::test]
async fn interrupting_a_sub_agent_kills_its_tool_and_its_parent_is_told() {
    let (fake, server) = start("").await;
    let work = tempfile::tempdir().unwrap();
    let pid_file = work.path().join("pid");
    let command = format!("echo $$ > {} && exec sleep 30.45", pid_file.display());
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            ("sleeper", 0) => Reply::tool_call("shell", json!({ "command": command }), 1),
            ("start", 0) => Reply::tool_call(
                "spawn_agent",
                json!({"agent": "default", "task": "sleeper"}),
                1,
            ),
            _ => Reply::text("noted"),
        })
    });
    let (id, _root) = create(&server, "start").await;
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, data| {
        kind == "item.started" && data["item"]["name"] == "shell"
    })
    .await;
    let child = seen.last().unwrap().1["item"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The command runs in a PID namespace of its own: its pid there is not ours, so its
    // processes are found by their arguments once it has started.
    let pids: Vec<i32> = tokio::time::timeout(TIMEOUT, async {
        loop {
            if std::fs::read_to_string(&pid_file).is_ok_and(|text| !text.trim().is_empty()) {
                let pids = crate::harness::pids_running("sleep 30.45");
                if !pids.is_empty() {
                    return pids;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the command started");
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/sessions/{child}/interrupt"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, &body["interrupted"]),
        (200, &json!(true)),
        "{body}"
    );
    for pid in pids {
        assert!(!process_alive(pid), "the tool's process {pid} was killed");
    }
    let child_items = session_items(&server, &id, &child).await;
    let shell = child_items
        .iter()
        .find(|item| item["name"] == "shell")
        .unwrap();
    assert_eq!(shell["status"], "interrupted");
    server.wait_idle(&id).await;
    let all = sessions(&server, &id).await;
    assert_eq!(all[1]["status"], "interrupted");
    let root_items = session_items(&server, &id, all[0]["id"].as_str().unwrap()).await;
    let report = reports(&root_items)
        .into_iter()
        .find(|report| report["from_session_id"] == child.as_str())
        .expect("the parent got a report");
    assert!(
        report["text"].as_str().unwrap().contains("interrupted"),
        "{report}"
    );
}

#[tokio::test]
async fn after_kill_9_every_session_is_listed_with_its_items_and_none_runs() {
    let (fake, server) = start("").await;
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    fake.script(move |body| {
        let first = first_user(body);
        Some(match (first.as_str(), tool_outputs(body).len()) {
            ("crash", 0) => {
                Reply::ToolCalls(vec![spawn("default", "one"), spawn("default", "two")])
            }
            _ => Reply::After(held.clone(), Box::new(Reply::text("never"))),
        })
    });
    let (id, _root) = create(&server, "crash").await;
    let mut events = server.events(&id).await;
    // Every session has a turn running (the root's waits for its second answer).
    let mut running = std::collections::HashSet::new();
    until(&mut events, |kind, data| {
        match kind {
            "snapshot" => running.extend(
                data["running"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|turn| turn["session_id"].to_string()),
            ),
            "turn.started" => {
                running.insert(data["session_id"].to_string());
            }
            _ => {}
        }
        running.len() == 3
    })
    .await;
    let before = sessions(&server, &id).await;
    assert_eq!(before.len(), 3);
    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(config(&fake, "")),
        ..ServerOptions::default()
    })
    .await;
    let after = sessions(&server, &id).await;
    assert_eq!(
        after.iter().map(|s| &s["id"]).collect::<Vec<_>>(),
        before.iter().map(|s| &s["id"]).collect::<Vec<_>>()
    );
    for session in &after {
        assert_ne!(session["status"], "running", "{session}");
        let history = session_items(&server, &id, session["id"].as_str().unwrap()).await;
        assert!(history.iter().all(|item| item["status"] != "running"));
        assert_eq!(
            history.last().unwrap()["kind"],
            "notice",
            "the cut turn of {} is closed with a notice",
            session["id"]
        );
    }
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle");
    // The index agrees once rebuilt.
    let (_, listed) = server.get("/api/conversations").await;
    assert_eq!(listed["conversations"][0]["status"], "idle");
    gate.notify_one();
}

#[tokio::test]
async fn a_fork_of_a_conversation_with_sub_agents_holds_only_the_root_history() {
    let (fake, server) = start("").await;
    fake.script(|body| {
        Some(
            match (first_user(body).as_str(), tool_outputs(body).len()) {
                ("fork me", 0) => Reply::tool_call(
                    "spawn_agent",
                    json!({"agent": "default", "task": "helper"}),
                    1,
                ),
                _ => Reply::text("done"),
            },
        )
    });
    let (id, root) = create(&server, "fork me").await;
    server.wait_idle(&id).await;
    let root_items = session_items(&server, &id, &root).await;
    let (status, fork) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["conversation"]["id"].as_str().unwrap();
    let fork_sessions = sessions(&server, fork_id).await;
    assert_eq!(fork_sessions.len(), 1);
    let fork_items =
        session_items(&server, fork_id, fork_sessions[0]["id"].as_str().unwrap()).await;
    let shape = |items: &[Value]| -> Vec<(Value, Value)> {
        items
            .iter()
            .map(|item| (item["kind"].clone(), item["text"].clone()))
            .collect()
    };
    assert_eq!(shape(&fork_items), shape(&root_items));
    assert!(fork_items.iter().all(|item| item["text"] != "helper"));
    assert!(
        fork_items
            .iter()
            .all(|item| item["session_id"] == fork_sessions[0]["id"])
    );
}

#[tokio::test]
async fn clients_follow_and_message_sub_agents_through_the_api() {
    let (fake, server) = start("").await;
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    fake.script(move |body| {
        let first = first_user(body);
        let last = user_texts(body).last().cloned().unwrap_or_default();
        Some(
            match (first.as_str(), last.as_str(), tool_outputs(body).len()) {
                ("api", _, 0) => Reply::tool_call(
                    "spawn_agent",
                    json!({"agent": "default", "task": "helper"}),
                    1,
                ),
                ("helper", "helper", _) => {
                    Reply::After(held.clone(), Box::new(Reply::text("helper ready")))
                }
                ("helper", "from the user", _) => Reply::text("helper heard the user"),
                _ => Reply::text("root ok"),
            },
        )
    });
    let (id, root) = create(&server, "api").await;
    let mut events = server.events(&id).await;
    let created = until(&mut events, |kind, _| kind == "session.created").await;
    let child = created.last().unwrap().1["session"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A new subscriber's snapshot covers the child's running turn.
    let mut fresh = server.events(&id).await;
    let (kind, snapshot) = fresh.next().await.unwrap();
    assert_eq!(kind, "snapshot");
    assert!(
        snapshot["running"]
            .as_array()
            .unwrap()
            .iter()
            .any(|running| running["session_id"] == child.as_str()),
        "{snapshot}"
    );
    assert!(
        snapshot["last_seq"][&child].as_u64().unwrap() >= 1,
        "{snapshot}"
    );
    assert_eq!(snapshot["sessions"].as_array().unwrap().len(), 2);

    // Deleting is refused while a sub-agent runs.
    let (status, body) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_running");
    // So is compacting, once the root has answered and only the child works.
    until(&mut events, turn_ended_in(&root)).await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_running");

    // A message for the busy child waits for it, and says so.
    let (status, sent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "from the user", "session_id": child, "mode": "queue" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    assert_eq!(sent["message"]["status"], "waiting");
    let (_, pending) = server
        .get(&format!("/api/conversations/{id}/pending"))
        .await;
    assert_eq!(pending["pending"][0]["session_id"], child.as_str());
    gate.notify_one();
    server.wait_idle(&id).await;
    let child_items = session_items(&server, &id, &child).await;
    let texts: Vec<&str> = child_items
        .iter()
        .filter_map(|item| item["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "helper",
            "helper ready",
            "from the user",
            "helper heard the user"
        ]
    );
    assert_eq!(child_items[2]["source"], "user");
    let (status, usage) = server
        .get(&format!("/api/conversations/{id}/usage?session={child}"))
        .await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["source"], "reported");

    // Unknown sessions and files that are not sessions are 404s.
    for path in [
        format!("/api/conversations/{id}/items?session=metadata"),
        format!("/api/conversations/{id}/items?session=s_nope"),
        format!("/api/conversations/{id}/usage?session=s_nope"),
    ] {
        let (status, body) = server.get(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "x", "session_id": "s_nope" }),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/sessions/s_nope/interrupt"),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(sessions(&server, &id).await[0]["id"], root.as_str());
}

#[tokio::test]
async fn serve_stop_interrupts_every_session() {
    let (fake, server) = start("").await;
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    fake.script(move |body| {
        Some(
            match (first_user(body).as_str(), tool_outputs(body).len()) {
                ("stop", 0) => Reply::tool_call(
                    "spawn_agent",
                    json!({"agent": "default", "task": "hold"}),
                    1,
                ),
                ("stop", _) => Reply::text("root waits no more"),
                _ => Reply::After(held.clone(), Box::new(Reply::text("never"))),
            },
        )
    });
    let (id, _) = create(&server, "stop").await;
    let mut events = server.events(&id).await;
    until(&mut events, |kind, _| kind == "session.created").await;
    let data_dir = server.stop().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        config: Some(config(&fake, "")),
        ..ServerOptions::default()
    })
    .await;
    let all = sessions(&server, &id).await;
    assert_eq!(all[1]["status"], "interrupted");
    let child_items = session_items(&server, &id, all[1]["id"].as_str().unwrap()).await;
    assert!(
        child_items.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("the service stopped"),
        "{child_items:?}"
    );
    gate.notify_one();
}

#[tokio::test]
async fn the_demo_model_spawns_a_sub_agent_offline() {
    let server = Server::start().await;
    let created = server
        .create_and_wait("Try it\n/spawn default: count the files")
        .await;
    let id = created["conversation"]["id"].as_str().unwrap();
    server.wait_idle(id).await;
    let all = sessions(&server, id).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["task"], "count the files");
    let root_items = session_items(&server, id, all[0]["id"].as_str().unwrap()).await;
    assert_eq!(reports(&root_items).len(), 1, "{root_items:?}");
}

#[tokio::test]
async fn the_terminal_lists_sub_agents_and_shows_their_turns_as_lines() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let script = "//spawn default: look around\n/agents\n";
    let (ok, out, err) =
        crate::terminal::chat(&["--url", &server.base], script, workdir.path()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    // (Whether the sub-agent's start shows as its own line depends on whether it began before
    // the terminal's stream did; the renderer's unit tests cover both.)
    assert!(out.contains("[root default ("), "{out}");
    assert!(out.contains("  [sub-agent default ("), "{out}");
    assert!(out.contains(": look around]"), "{out}");
    // The sub-agent's own answer streams in its session, not as the root agent's.
    assert!(
        !out.contains("agent: Demo model (offline, built in): you said \"look around\""),
        "{out}"
    );
}
