//! The event contract: every event of both streams (a conversation's and the list's) is
//! described by the served OpenAPI document. Each event's `data` carries a `type` equal to its
//! SSE `event:` name and validates against `components.schemas.ConversationEvent` or
//! `ListEvent` (a `oneOf` discriminated by `type`), and every kind those schemas name is seen
//! here at least once, so a new kind cannot reach the document without a scenario below.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::{events_until, until, until_turn_end, until_turns_ended};

/// Which stream an event came from, hence which schema describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    Conversation,
    List,
}

impl Feed {
    fn schema(self) -> &'static str {
        match self {
            Feed::Conversation => "ConversationEvent",
            Feed::List => "ListEvent",
        }
    }
}

/// Every event the test read, from every stream, in the order read.
type Log = Arc<Mutex<Vec<(Feed, String, Value)>>>;

type Events = Box<dyn Stream<Item = (String, Value)> + Unpin + Send>;

/// Opens an event stream whose every event read is also written to `log`.
async fn watch(server: &Server, path: &str, feed: Feed, log: &Log) -> Events {
    let log = log.clone();
    let events = server.events_from(path, None).await;
    Box::new(events.inspect(move |(kind, data)| {
        log.lock().unwrap().push((feed, kind.clone(), data.clone()));
    }))
}

async fn watch_conversation(server: &Server, id: &str, log: &Log) -> Events {
    let path = format!("/api/conversations/{id}/events");
    watch(server, &path, Feed::Conversation, log).await
}

/// The demo model runs most scenarios (its directives call tools, spawn, fail, stream slowly);
/// the fake provider, for the `thinker` agent, sends reasoning, writes a file, sets a plan and
/// refuses a compaction.
fn config(fake: &FakeProvider) -> String {
    format!(
        r#"
[retry]
max_attempts = 3
initial_delay_ms = 10
max_delay_ms = 50

[providers.fake]
protocol = "openai_responses"
base_url = "{base_url}"

[models.m]
provider = "fake"
name = "fake-model"
context_window = 100000
max_output_tokens = 1000
fallback = ["demo"]

[agents.default]
description = "Every tool, the demo model"
model = "demo"

[agents.asker]
description = "Asks before every shell command"
model = "demo"
[agents.asker.permissions]
shell = "ask"

[agents.thinker]
description = "The fake provider's model"
model = "m"
tools = ["shell", "write_file", "update_plan"]
"#,
        base_url = fake.base_url
    )
}

#[tokio::test]
async fn every_event_of_both_streams_matches_the_served_schemas() {
    let fake = FakeProvider::start(Wire::OpenaiResponses).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake)),
        ..ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    let log = Log::default();
    let mut list = watch(&server, "/api/events", Feed::List, &log).await;
    events_until(&mut list, "snapshot").await;

    let demo = demo_scenarios(&server, &log, workdir.path()).await;
    approval_scenario(&server, &log, workdir.path()).await;
    fake_scenarios(&server, &fake, &log, workdir.path()).await;
    let fork = fork_rename_archive_delete(&server, &log, &demo).await;
    // The deletion is the last change: the list stream has sent everything before it.
    until(&mut list, |kind, data| {
        kind == "conversation.deleted" && data["conversation_id"] == fork.as_str()
    })
    .await;

    let (status, document) = server.get("/api/openapi.json").await;
    assert_eq!(status, 200, "{document}");
    let seen = log.lock().unwrap().clone();
    let problems = check(&document, &seen);
    assert!(
        problems.is_empty(),
        "{} problem(s) with the event contract:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A shell call that asks first, and its answer (asked after the stream is open, so that its
/// `approval.requested` is an event and not part of a snapshot).
async fn approval_scenario(server: &Server, log: &Log, cwd: &Path) {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "Hello", "agent": "asker", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = watch_conversation(server, &id, log).await;
    until_idle(&mut events).await;
    let (status, sent) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "/shell echo approved" }),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    let (_, data) = events_until(&mut events, "approval.requested")
        .await
        .pop()
        .unwrap();
    let approval_id = data["approval"]["id"].as_str().unwrap();
    let (status, answer) = server
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    until_turn_end(&mut events).await;
}

/// On a demo-model conversation: a text answer, a shell call with output and a second tool in
/// the same answer, a sub-agent and its report, a retried and a failed model call, an
/// interrupt, a steer, a queued message edited while it waits, and a manual compaction.
/// Returns the conversation's id.
async fn demo_scenarios(server: &Server, log: &Log, cwd: &Path) -> String {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "Hello", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let root = created["conversation"]["root_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut events = watch_conversation(server, &id, log).await;
    until_idle(&mut events).await;

    // Parallel tools: two shell calls in one answer, each with live output.
    send(
        server,
        &id,
        json!({ "text": "/shell echo first\n/shell echo second" }),
    )
    .await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(
        completed_of_kind(&seen, "tool_call"),
        2,
        "two tool calls: {seen:?}"
    );

    // A sub-agent: its session is created and updated, its report reaches the root.
    send(
        server,
        &id,
        json!({ "text": "/spawn default: count the files" }),
    )
    .await;
    until(&mut events, |kind, data| {
        kind == "item.completed"
            && data["item"]["session_id"] == root.as_str()
            && data["item"]["kind"] == "user_message"
            && data["item"]["source"] == "agent"
    })
    .await;
    until_idle(&mut events).await;

    // A transient failure retried, then a turn that fails once the attempts are used up.
    send(server, &id, json!({ "text": "Once more\n/fail 1" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    send(server, &id, json!({ "text": "Give up\n/fail 9" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "failed", "{seen:?}");

    // An interrupt during a shell command that would never end.
    blocking_shell(server, &id, &mut events, "stop").await;
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!((status, &body), (200, &json!({ "interrupted": true })));
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "interrupted", "{seen:?}");

    // While a turn runs: a steer joins it, a queued message waits and is edited, then runs.
    blocking_shell(server, &id, &mut events, "go").await;
    let steered = send(server, &id, json!({ "text": "change course" })).await;
    assert_eq!(steered["message"]["status"], "waiting", "{steered}");
    let queued = send(server, &id, json!({ "text": "draft", "mode": "queue" })).await;
    let message_id = queued["message"]["id"].as_str().unwrap();
    let (status, edited) = server
        .patch(
            &format!("/api/conversations/{id}/pending/{message_id}"),
            json!({ "text": "final words" }),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    std::fs::write(cwd.join("go"), "").unwrap();
    let seen = until_turns_ended(&mut events, 2).await;
    assert!(
        seen.iter()
            .any(|(kind, data)| kind == "turn.started" && data["message_ids"][0] == message_id),
        "the edited message ran: {seen:?}"
    );
    until_idle(&mut events).await;

    // A manual compaction, written by the demo model.
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    events_until(&mut events, "compaction.completed").await;
    id
}

/// On a conversation of the fake provider's model: reasoning, a file write, and a compaction
/// the model refuses.
async fn fake_scenarios(server: &Server, fake: &FakeProvider, log: &Log, cwd: &Path) {
    fake.push(Reply::text("Ready."));
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "Hello", "agent": "thinker", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = watch_conversation(server, &id, log).await;
    until_idle(&mut events).await;

    fake.push(Reply::Reasoned {
        encrypted: "opaque-reasoning".to_owned(),
        text: "Thought it through.".to_owned(),
    });
    send(server, &id, json!({ "text": "Think first" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(completed_of_kind(&seen, "reasoning"), 1, "{seen:?}");

    fake.push(Reply::tool_call(
        "write_file",
        json!({ "path": "notes.txt", "content": "written by the agent\n" }),
        3,
    ));
    fake.push(Reply::text("Written."));
    send(server, &id, json!({ "text": "Write a note" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(cwd.join("notes.txt")).unwrap(),
        "written by the agent\n"
    );
    until_idle(&mut events).await;

    // A plan: an item of its own after its call, in the schema's shape.
    fake.push(Reply::tool_call(
        "update_plan",
        json!({ "explanation": "Note, then check.", "steps": [
            { "step": "Write the note", "status": "completed" },
            { "step": "Check it", "status": "in_progress" },
        ] }),
        2,
    ));
    fake.push(Reply::text("Planned."));
    send(server, &id, json!({ "text": "Plan it" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(completed_of_kind(&seen, "plan"), 1, "{seen:?}");
    until_idle(&mut events).await;

    // A background process: `process.started`, then `process.ended` on the list stream.
    fake.push(Reply::tool_call(
        "shell",
        json!({ "command": "echo in the background", "background": true }),
        1,
    ));
    fake.push(Reply::text("Started."));
    send(server, &id, json!({ "text": "Start it" })).await;
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    until_idle(&mut events).await;

    // A model that fails for good: its fallback answers the rest of the turn.
    for _ in 0..3 {
        fake.push(Reply::status(503));
    }
    send(server, &id, json!({ "text": "Try the backup" })).await;
    let seen = until_turn_end(&mut events).await;
    assert!(
        seen.iter().any(|(kind, _)| kind == "model.fallback"),
        "{seen:?}"
    );
    assert_eq!(seen.last().unwrap().1["status"], "completed", "{seen:?}");
    until_idle(&mut events).await;

    fake.push(Reply::rejected(400, "the compaction request was refused"));
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 502, "{body}");
    events_until(&mut events, "compaction.failed").await;
}

/// Forks the conversation, renames and archives the fork, then deletes it; returns its id.
async fn fork_rename_archive_delete(server: &Server, log: &Log, source: &str) -> String {
    let (status, forked) = server
        .post(&format!("/api/conversations/{source}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{forked}");
    let id = forked["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = watch_conversation(server, &id, log).await;
    events_until(&mut events, "snapshot").await;
    let path = format!("/api/conversations/{id}");
    let (status, body) = server.patch(&path, json!({ "title": "Renamed" })).await;
    assert_eq!(status, 200, "{body}");
    until(&mut events, |kind, data| {
        kind == "conversation.updated" && data["conversation"]["title"] == "Renamed"
    })
    .await;
    let (status, body) = server.patch(&path, json!({ "archived": true })).await;
    assert_eq!(status, 200, "{body}");
    until(&mut events, |kind, data| {
        kind == "conversation.updated" && data["conversation"]["archived"] == true
    })
    .await;
    let (status, body) = server.delete(&path).await;
    assert_eq!(status, 204, "{body}");
    events_until(&mut events, "conversation.deleted").await;
    id
}

/// Sends a message; returns the answer's body.
async fn send(server: &Server, id: &str, body: Value) -> Value {
    let (status, answer) = server
        .post(&format!("/api/conversations/{id}/messages"), body)
        .await;
    assert_eq!(status, 202, "{answer}");
    answer
}

/// Starts a turn whose shell command runs until the file `release` appears in its directory;
/// returns once its first output has streamed.
async fn blocking_shell(server: &Server, id: &str, events: &mut Events, release: &str) {
    let command = format!("/shell echo blocked; while [ ! -f {release} ]; do sleep 0.02; done");
    send(server, id, json!({ "text": command })).await;
    until(events, |kind, data| {
        kind == "item.delta"
            && data["field"] == "output"
            && data["delta"].as_str().unwrap().contains("blocked")
    })
    .await;
}

/// Reads events until the conversation is idle (its snapshot or an update says so).
async fn until_idle(events: &mut Events) -> Vec<(String, Value)> {
    until(events, |kind, data| {
        (kind == "snapshot" || kind == "conversation.updated")
            && data["conversation"]["status"] == "idle"
    })
    .await
}

fn completed_of_kind(events: &[(String, Value)], item_kind: &str) -> usize {
    events
        .iter()
        .filter(|(kind, data)| kind == "item.completed" && data["item"]["kind"] == item_kind)
        .count()
}

/// Everything wrong with the events seen, against the document: one line each.
/// Events only cluster mode sends: the scenarios here run one embedded service, so these are
/// checked against the same document by the cluster test that produces them
/// (`cluster_fence::followers_of_an_owner_that_lost_its_lease_*`, through `check_some`).
const ONLY_IN_CLUSTER: [&str; 1] = ["conversation.moved"];

fn check(document: &Value, seen: &[(Feed, String, Value)]) -> Vec<String> {
    check_events(document, seen, true)
}

/// Checks some events against the served document, without asking for every kind.
pub(crate) fn check_some(document: &Value, seen: &[(Feed, String, Value)]) -> Vec<String> {
    check_events(document, seen, false)
}

fn check_events(document: &Value, seen: &[(Feed, String, Value)], every_kind: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for feed in [Feed::Conversation, Feed::List] {
        let schema = feed.schema();
        let events: Vec<(&String, &Value)> = seen
            .iter()
            .filter(|(event_feed, _, _)| *event_feed == feed)
            .map(|(_, kind, data)| (kind, data))
            .collect();
        let seen_kinds: BTreeSet<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
        // The `type` field is checked apart from the schema, so that its absence reads plainly.
        let mut untyped = BTreeSet::new();
        for (kind, data) in &events {
            if data["type"] != kind.as_str() && untyped.insert(kind.as_str()) {
                problems.push(format!(
                    "`{kind}` data has `type` {}, not \"{kind}\": {}",
                    data["type"],
                    brief(data)
                ));
            }
        }
        let expected = match kinds_in(document, schema) {
            Ok(expected) => expected,
            Err(problem) => {
                problems.push(format!(
                    "{problem} (the {feed:?} stream sent {seen_kinds:?})"
                ));
                continue;
            }
        };
        let discriminator = &document["components"]["schemas"][schema]["discriminator"];
        if discriminator["propertyName"] != "type" {
            problems.push(format!(
                "components.schemas.{schema} has no discriminator on `type`: {discriminator}"
            ));
        }
        let validator = match validator(document, schema) {
            Ok(validator) => validator,
            Err(error) => {
                problems.push(format!(
                    "components.schemas.{schema} does not compile: {error}"
                ));
                continue;
            }
        };
        for (kind, data) in &events {
            let errors: Vec<String> = validator
                .iter_errors(data)
                .map(|error| format!("{} at {}", error, error.instance_path()))
                .collect();
            if !errors.is_empty() {
                problems.push(format!(
                    "`{kind}` does not match {schema}: {}; data: {}",
                    errors.join("; "),
                    brief(data)
                ));
            }
        }
        for kind in &expected {
            if every_kind
                && !seen_kinds.contains(kind.as_str())
                && !ONLY_IN_CLUSTER.contains(&kind.as_str())
            {
                problems.push(format!(
                    "{schema} names `{kind}`, which no scenario produced: add a scenario for it"
                ));
            }
        }
        for kind in &seen_kinds {
            if !expected.contains(*kind) {
                problems.push(format!(
                    "the {feed:?} stream sent `{kind}`, which {schema} lacks"
                ));
            }
        }
    }
    problems
}

/// An event's data for a message: its start, when it is long.
fn brief(data: &Value) -> String {
    let text = data.to_string();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The event kinds a union schema names: its discriminator's mapping and each member's `type`
/// (`const` or `enum`), following `$ref`s and `allOf`s within the document.
fn kinds_in(document: &Value, schema: &str) -> Result<BTreeSet<String>, String> {
    let union = &document["components"]["schemas"][schema];
    if union.is_null() {
        return Err(format!("the document has no components.schemas.{schema}"));
    }
    let mut kinds = BTreeSet::new();
    if let Some(mapping) = union["discriminator"]["mapping"].as_object() {
        kinds.extend(mapping.keys().cloned());
    }
    let members = union["oneOf"]
        .as_array()
        .ok_or_else(|| format!("components.schemas.{schema} is not a oneOf"))?;
    for member in members {
        member_kinds(document, member, &mut kinds);
    }
    if kinds.is_empty() {
        return Err(format!("components.schemas.{schema} names no event kind"));
    }
    Ok(kinds)
}

fn member_kinds(document: &Value, member: &Value, kinds: &mut BTreeSet<String>) {
    let member = resolve(document, member);
    let field = resolve(document, &member["properties"]["type"]);
    kinds.extend(field["const"].as_str().map(str::to_owned));
    for value in field["enum"].as_array().into_iter().flatten() {
        kinds.extend(value.as_str().map(str::to_owned));
    }
    for part in member["allOf"].as_array().into_iter().flatten() {
        member_kinds(document, part, kinds);
    }
}

/// Follows a schema's local `$ref`s (`#/components/schemas/X`) to what they point at.
fn resolve<'a>(document: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        let Some(pointer) = schema["$ref"].as_str().and_then(|r| r.strip_prefix('#')) else {
            return schema;
        };
        schema = document.pointer(pointer).unwrap_or(&Value::Null);
    }
    schema
}

/// A JSON Schema 2020-12 validator for one of the document's schemas. The document's
/// components sit under the validator's root, so their `#/components/schemas/…` refs resolve.
fn validator(
    document: &Value,
    schema: &str,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{schema}"),
        "components": document["components"],
    });
    jsonschema::draft202012::new(&root)
}

/// The checker itself, on a small document of the expected shape: it reads the kinds from the
/// union, validates through `$ref`s, and reports a wrong `type`, a bad field, an unseen kind
/// and an undocumented one.
#[test]
fn the_checker_reports_every_kind_of_mismatch() {
    let union =
        |members: Value| json!({ "oneOf": members, "discriminator": { "propertyName": "type" } });
    let event = |kind: &str, field: &str| {
        json!({
            "type": "object",
            "required": ["type", field],
            "properties": { "type": { "const": kind }, field: { "type": "string" } },
        })
    };
    let document = json!({
        "openapi": "3.1.0",
        "components": { "schemas": {
            "ConversationEvent": union(json!([
                { "$ref": "#/components/schemas/Ended" },
                { "$ref": "#/components/schemas/Retry" },
            ])),
            "Ended": event("turn.ended", "status"),
            "Retry": { "allOf": [event("model.retry", "error")] },
            "ListEvent": union(json!([event("snapshot", "next_cursor")])),
        } },
    });
    let good = [
        (
            Feed::Conversation,
            "turn.ended",
            json!({ "type": "turn.ended", "status": "completed" }),
        ),
        (
            Feed::List,
            "snapshot",
            json!({ "type": "snapshot", "next_cursor": "x" }),
        ),
    ];
    let seen: Vec<(Feed, String, Value)> = good
        .iter()
        .map(|(feed, kind, data)| (*feed, kind.to_string(), data.clone()))
        .collect();
    assert_eq!(
        check(&document, &seen),
        vec![
            "ConversationEvent names `model.retry`, which no scenario produced: add a scenario \
             for it"
                .to_owned()
        ]
    );

    let mut bad = seen.clone();
    bad.push((
        Feed::Conversation,
        "model.retry".into(),
        json!({ "type": "model.retry", "error": 3 }),
    ));
    bad.push((Feed::List, "snapshot".into(), json!({ "next_cursor": "x" })));
    bad.push((
        Feed::List,
        "conversation.created".into(),
        json!({ "type": "conversation.created" }),
    ));
    let problems = check(&document, &bad);
    let expected = [
        "`model.retry` does not match ConversationEvent",
        "`snapshot` data has `type` null",
        "`snapshot` does not match ListEvent",
        "`conversation.created` does not match ListEvent",
        "the List stream sent `conversation.created`, which ListEvent lacks",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for start in expected {
        assert!(
            problems.iter().any(|problem| problem.starts_with(start)),
            "no problem starting with {start:?} in {problems:#?}"
        );
    }
}

/// The quoted event names in a web UI module: the entries of its `EVENTS` list, or the names
/// it passes to `addEventListener` (the stream's own `open` and `error` left out).
fn web_ui_event_names(file: &str) -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("web/assets")
        .join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    let mut names = BTreeSet::new();
    if let Some(start) = source.find("const EVENTS = [") {
        let list = &source[start..start + source[start..].find("];").unwrap()];
        names.extend(list.split('\'').skip(1).step_by(2).map(str::to_owned));
    }
    for call in source.split("addEventListener('").skip(1) {
        let name = &call[..call.find('\'').unwrap()];
        if name.contains('.') || name == "snapshot" {
            names.insert(name.to_owned());
        }
    }
    names
}

/// The web UI names the events it handles in its own code: every kind the schemas name must
/// be among them, so a new kind cannot be forgotten there (and none it names may be unknown).
#[test]
fn the_web_ui_handles_every_event_kind_of_both_streams() {
    let document = openvaala::http::openapi::document();
    let conversation = kinds_in(&document, "ConversationEvent").unwrap();
    assert_eq!(
        web_ui_event_names("conversation.js"),
        conversation,
        "web/assets/conversation.js's EVENTS against the ConversationEvent schema"
    );
    let mut list = web_ui_event_names("sidebar.js");
    list.extend(web_ui_event_names("approvallist.js"));
    list.extend(web_ui_event_names("processes.js"));
    assert_eq!(
        list,
        kinds_in(&document, "ListEvent").unwrap(),
        "the list stream's events handled by sidebar.js, approvallist.js and processes.js"
    );
}
