//! Approvals, remembered rules and escalation, driven like a client: a call that needs an
//! answer waits as an approval every client sees (the conversation's stream, the list's stream,
//! `GET /api/approvals`, the conversation's view); the first answer wins; remembering answers
//! become rules that survive a restart and follow a fork; interrupt and crash cancel.

use std::path::Path;

use futures::Stream;
use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions};
use crate::support::{events_until, items, until, until_turn_end};

/// A server whose default agent asks before every shell command, with `extra` lines added to
/// the agent (more rules).
async fn start(data_dir: Option<&Path>, extra: &str) -> Server {
    Server::start_with(ServerOptions {
        data_dir: data_dir.map(Path::to_owned),
        config: Some(config(extra)),
        ..ServerOptions::default()
    })
    .await
}

fn config(extra: &str) -> String {
    format!(
        r#"
[agents.default]
description = "approval test agent"
model = "demo"
{extra}
[agents.default.permissions]
shell = "ask"
[agents.default.permissions.shell_rules]
"git push*" = "ask"
"rm -rf *" = "deny"
"#
    )
}

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Starts a conversation in `cwd` with `text`; returns its id and its event stream (opened
/// before anything can be missed: the snapshot comes first).
async fn converse(
    server: &Server,
    cwd: &Path,
    text: &str,
) -> (String, impl Stream<Item = (String, Value)> + Unpin + use<>) {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": text, "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let events = server.events(&id).await;
    (id, events)
}

/// Waits for the conversation's next approval: from the stream's `approval.requested`, or from
/// the snapshot if it was asked before the stream opened.
async fn next_approval(events: &mut (impl Stream<Item = (String, Value)> + Unpin)) -> Value {
    let seen = until(events, |kind, data| {
        kind == "approval.requested"
            || (kind == "snapshot" && !data["approvals"].as_array().unwrap().is_empty())
    })
    .await;
    let (kind, data) = seen.last().unwrap();
    if kind == "snapshot" {
        data["approvals"][0].clone()
    } else {
        data["approval"].clone()
    }
}

async fn answer(server: &Server, approval: &Value, body: Value) -> (u16, Value) {
    let id = approval["id"].as_str().unwrap();
    server.post(&format!("/api/approvals/{id}"), body).await
}

/// The last tool call of the conversation's stored history.
async fn last_tool_call(server: &Server, id: &str) -> Value {
    items(server, id)
        .await
        .into_iter()
        .rev()
        .find(|item| item["kind"] == "tool_call")
        .expect("a tool call")
}

#[tokio::test]
async fn every_client_sees_the_approval_and_the_first_answer_wins() {
    let server = start(None, "").await;
    let dir = workspace();
    let mut list = server.events_from("/api/events", None).await;
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["conversation_id"], id.as_str());
    assert_eq!(approval["tool"], "shell");
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["subject"]["command"], "touch ran.txt");
    assert_eq!(approval["subject"]["cwd"], dir.path().to_str().unwrap());
    // The exact command by default; a broader rule is offered only for a subcommand.
    assert_eq!(approval["suggested_rule"], "touch ran.txt");
    assert_eq!(
        approval["suggested_rules"],
        json!([{"rule": "touch ran.txt", "broader": null}])
    );
    assert!(approval["escalate"].is_null());
    // Why, in plain words; the setting that decides it beside.
    assert_eq!(
        approval["reason"], "this agent asks before every shell command",
        "{approval}"
    );
    assert_eq!(approval["setting"], "agents.default.permissions.shell");
    let (_, data) = events_until(&mut list, "approval.requested")
        .await
        .pop()
        .unwrap();
    assert_eq!(data["approval"]["id"], approval["id"]);

    // Seen by a client that comes later, in every place it may look.
    let (_, pending) = server.get("/api/approvals").await;
    assert_eq!(pending["approvals"][0]["id"], approval["id"]);
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["approvals"][0]["id"], approval["id"]);
    let mut late = server.events(&id).await;
    let (_, snapshot) = events_until(&mut late, "snapshot").await.pop().unwrap();
    assert_eq!(snapshot["approvals"][0]["id"], approval["id"]);
    let waiting = snapshot["running"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["id"] == approval["item_id"])
        .expect("the tool call in the running turn")
        .clone();
    assert_eq!(waiting["status"], "waiting_approval");
    assert!(
        !dir.path().join("ran.txt").exists(),
        "nothing runs before the answer"
    );

    let (status, settled) = answer(&server, &approval, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 200, "{settled}");
    assert_eq!(settled["status"], "allowed");
    assert_eq!(settled["resolution"]["decision"], "allow_once");
    let (status, again) = answer(&server, &approval, json!({"decision": "deny"})).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "already_decided");
    assert_eq!(again["approval"]["status"], "allowed");

    let seen = until_turn_end(&mut events).await;
    let resolved = seen
        .iter()
        .find(|(kind, _)| kind == "approval.resolved")
        .expect("approval.resolved");
    assert_eq!(resolved.1["approval"]["status"], "allowed");
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    assert!(dir.path().join("ran.txt").exists());
    let (_, data) = events_until(&mut list, "approval.resolved")
        .await
        .pop()
        .unwrap();
    assert_eq!(data["approval"]["status"], "allowed");
    let (_, pending) = server.get("/api/approvals").await;
    assert_eq!(pending["approvals"], json!([]));
    let (_, all) = server.get("/api/approvals?status=all").await;
    assert_eq!(all["approvals"][0]["status"], "allowed");
    let (status, _) = server
        .post("/api/approvals/ap_missing", json!({"decision": "deny"}))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_denial_reaches_the_model_with_its_message_and_nothing_runs() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    let approval = next_approval(&mut events).await;
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "deny", "message": "use the make target instead"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "denied");
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    let tool = last_tool_call(&server, &id).await;
    assert_eq!(tool["status"], "failed");
    assert_eq!(tool["denied"], true, "{tool}");
    assert_eq!(
        tool["output"],
        "Not run: the user denied this call: use the make target instead"
    );
    assert!(!dir.path().join("ran.txt").exists());
}

#[tokio::test]
async fn a_configured_deny_refuses_without_asking_and_sees_through_wrappers() {
    let server = start(None, "").await;
    let dir = workspace();
    let target = dir.path().join("keep");
    std::fs::create_dir(&target).unwrap();
    let (id, mut events) = converse(
        &server,
        dir.path(),
        &format!("/shell sudo -n timeout 5 rm -rf {}", target.display()),
    )
    .await;
    let seen = until_turn_end(&mut events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "a deny never asks: {seen:?}"
    );
    let tool = last_tool_call(&server, &id).await;
    assert_eq!(tool["status"], "failed");
    assert_eq!(tool["denied"], true, "{tool}");
    let output = tool["output"].as_str().unwrap();
    assert!(
        output.contains("the rule \"rm -rf *\", which refuses it")
            && output.contains("shell_rules"),
        "{output}"
    );
    assert!(target.exists());
}

#[tokio::test]
async fn remembered_rules_survive_a_restart_follow_a_fork_and_can_be_deleted() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().join("data");
    let server = start(Some(&data_dir), "").await;
    let dir = workspace();

    // allow_conversation with an edited rule: this conversation runs `touch …` freely.
    let (id, mut events) = converse(&server, dir.path(), "/shell touch one.txt").await;
    let approval = next_approval(&mut events).await;
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_conversation", "rule": "touch *"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rule = &body["resolution"]["rule"];
    assert_eq!(rule["pattern"], "touch *");
    assert_eq!(rule["scope"]["kind"], "conversation");
    assert_eq!(rule["scope"]["conversation_id"], id.as_str());
    until_turn_end(&mut events).await;

    // A rule that does not cover the call is refused, and nothing changes.
    let (_, mut other_events) = converse(&server, dir.path(), "/shell ls").await;
    let other = next_approval(&mut other_events).await;
    let (status, body) = answer(
        &server,
        &other,
        json!({"decision": "allow_always", "rule": "cat *"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not match")
    );
    // So are rules that would allow every command, or every use of a program that runs others.
    for rule in ["*", "*ls", "sh*", "python3 *", "git *"] {
        let (status, body) = answer(
            &server,
            &other,
            json!({"decision": "allow_always", "rule": rule}),
        )
        .await;
        assert_eq!(status, 400, "{rule}: {body}");
    }
    // allow_always: every conversation of this agent in this directory runs `ls` freely.
    let (status, body) = answer(&server, &other, json!({"decision": "allow_always"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["resolution"]["rule"]["scope"]["kind"], "always");
    assert_eq!(body["resolution"]["rule"]["pattern"], "ls");
    until_turn_end(&mut other_events).await;

    let data_dir = server.stop().await;
    let server = start(Some(&data_dir), "").await;
    let (_, rules) = server.get("/api/rules").await;
    assert_eq!(rules["rules"].as_array().unwrap().len(), 2, "{rules}");

    // After the restart: the conversation's rule still answers; so does the fork's copy.
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "/shell touch two.txt"}),
        )
        .await;
    assert_eq!(status, 202);
    let mut events = server.events(&id).await;
    let seen = until_turn_end(&mut events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "{seen:?}"
    );
    assert!(dir.path().join("two.txt").exists());
    let (status, fork) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["conversation"]["id"].as_str().unwrap().to_owned();
    let (status, _) = server
        .post(
            &format!("/api/conversations/{fork_id}/messages"),
            json!({"text": "/shell touch three.txt && ls"}),
        )
        .await;
    assert_eq!(status, 202);
    let mut fork_events = server.events(&fork_id).await;
    let seen = until_turn_end(&mut fork_events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "{seen:?}"
    );
    assert!(dir.path().join("three.txt").exists());

    // Another conversation in the same directory: `ls` is always allowed, `touch` asks.
    let (_, mut events) = converse(&server, dir.path(), "/shell ls && touch four.txt").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["suggested_rule"], "touch four.txt");
    answer(&server, &approval, json!({"decision": "deny"})).await;
    until_turn_end(&mut events).await;

    // Deleting the always rule makes `ls` ask again.
    let (_, rules) = server.get("/api/rules").await;
    let always = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rule| rule["scope"]["kind"] == "always")
        .unwrap()
        .clone();
    assert_eq!(always["scope"]["cwd"], dir.path().to_str().unwrap());
    assert_eq!(always["scope"]["agent"], "default");
    // The client kind its token says (the tests' requests carry the local token itself).
    assert_eq!(always["created_by"], "api");
    let rule_id = always["id"].as_str().unwrap();
    let (status, _) = server.delete(&format!("/api/rules/{rule_id}")).await;
    assert_eq!(status, 200);
    let (status, _) = server.delete(&format!("/api/rules/{rule_id}")).await;
    assert_eq!(status, 404);
    let (_, mut events) = converse(&server, dir.path(), "/shell ls").await;
    let approval = next_approval(&mut events).await;
    answer(&server, &approval, json!({"decision": "deny"})).await;
    until_turn_end(&mut events).await;
}

/// A line added to the rules file by anything but the service (here a copy of a kept rule,
/// widened to `*` and claiming the web UI made it) is ignored: the command still asks.
#[tokio::test]
async fn a_planted_rule_line_allows_nothing() {
    let server = start(None, "").await;
    let dir = workspace();
    let (_, mut events) = converse(&server, dir.path(), "/shell touch kept.txt").await;
    let approval = next_approval(&mut events).await;
    let (status, body) = answer(&server, &approval, json!({"decision": "allow_always"})).await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;

    let file = server.data_dir.join("rules.jsonl");
    let kept = std::fs::read_to_string(&file).unwrap();
    let planted = kept
        .trim()
        .replace("\"pattern\":\"touch kept.txt\"", "\"pattern\":\"*\"")
        .replace("\"created_by\":\"api\"", "\"created_by\":\"web\"");
    assert_ne!(planted, kept.trim());
    std::fs::write(&file, format!("{kept}{planted}\n")).unwrap();

    let (_, rules) = server.get("/api/rules").await;
    let patterns: Vec<&Value> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| &rule["pattern"])
        .collect();
    assert_eq!(patterns, [&json!("touch kept.txt")], "{rules}");
    let (_, mut events) = converse(&server, dir.path(), "/shell touch other.txt").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["suggested_rule"], "touch other.txt");
    answer(&server, &approval, json!({"decision": "deny"})).await;
    until_turn_end(&mut events).await;
    assert!(!dir.path().join("other.txt").exists());
}

#[tokio::test]
async fn a_remembered_rule_never_silences_a_configured_ask() {
    let server = start(None, "").await;
    let dir = workspace();
    let (_, mut events) = converse(&server, dir.path(), "/shell git push origin").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(
        approval["reason"], "`git push origin` matches the rule \"git push*\", which asks first",
        "{approval}"
    );
    assert_eq!(
        approval["setting"],
        "agents.default.permissions.shell_rules"
    );
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_always", "rule": "git *o*"}),
    )
    .await;
    assert_eq!(status, 400, "a bare git rule is refused: {body}");
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_always", "rules": ["git push*", "git status*"]}),
    )
    .await;
    assert_eq!(
        status, 400,
        "a rule that matches no part is refused: {body}"
    );
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_always", "rule": "git push*"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;
    // A kept rule answers the tool's own `ask` (`git status`, once kept)…
    let (_, mut events) = converse(&server, dir.path(), "/shell git status").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["suggested_rule"], "git status", "{approval}");
    answer(&server, &approval, json!({"decision": "allow_always"})).await;
    until_turn_end(&mut events).await;
    let (_, mut events) = converse(&server, dir.path(), "/shell git status").await;
    let seen = until_turn_end(&mut events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "{seen:?}"
    );
    // …never the configured pattern's: `git push` asks again, its rule kept or not.
    let (_, mut events) = converse(&server, dir.path(), "/shell git push origin").await;
    let approval = next_approval(&mut events).await;
    answer(&server, &approval, json!({"decision": "deny"})).await;
    until_turn_end(&mut events).await;
}

#[tokio::test]
async fn an_escalation_always_asks_and_runs_outside_the_sandbox_once_allowed() {
    // The default permissions: shell allowed inside the sandbox.
    let server = Server::start_with(ServerOptions {
        config: Some("[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let dir = workspace();
    let outside = workspace();
    let target = outside.path().join("escalated.txt");
    let text = format!(
        "/escalate needs to write the shared report: echo hi > {}",
        target.display()
    );
    let (id, mut events) = converse(&server, dir.path(), &text).await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["escalate"], "needs to write the shared report");
    assert!(approval["suggested_rule"].is_null());
    // Running outside the sandbox is never remembered.
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_always", "rule": "echo*"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = answer(&server, &approval, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
    assert_eq!(last_tool_call(&server, &id).await["exit_code"], 0);

    // The same command without escalation is blocked by the sandbox.
    let again = outside.path().join("sandboxed.txt");
    let (id, mut events) = converse(
        &server,
        dir.path(),
        &format!("/shell echo hi > {}", again.display()),
    )
    .await;
    let seen = until_turn_end(&mut events).await;
    assert!(!seen.iter().any(|(kind, _)| kind == "approval.requested"));
    assert_ne!(last_tool_call(&server, &id).await["exit_code"], 0);
    assert!(!again.exists());
}

#[tokio::test]
async fn an_interrupt_cancels_the_pending_approval_and_the_call_never_runs() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    let approval = next_approval(&mut events).await;
    let (status, _) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    let seen = until_turn_end(&mut events).await;
    let resolved = seen
        .iter()
        .find(|(kind, _)| kind == "approval.resolved")
        .expect("approval.resolved before turn.ended");
    assert_eq!(resolved.1["approval"]["status"], "cancelled");
    assert_eq!(seen.last().unwrap().1["status"], "interrupted");
    let (status, body) = answer(&server, &approval, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["approval"]["status"], "cancelled");
    assert_eq!(last_tool_call(&server, &id).await["status"], "interrupted");
    assert!(!dir.path().join("ran.txt").exists());
}

#[tokio::test]
async fn a_crash_while_an_approval_waits_leaves_the_call_unrun() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    next_approval(&mut events).await;
    let data_dir = server.kill9().await;
    let server = start(Some(&data_dir), "").await;
    let (_, pending) = server.get("/api/approvals").await;
    assert_eq!(pending["approvals"], json!([]));
    server.wait_idle(&id).await;
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["last_turn"]["status"], "interrupted", "{view}");
    assert_eq!(last_tool_call(&server, &id).await["status"], "interrupted");
    assert!(!dir.path().join("ran.txt").exists());
}

#[tokio::test]
async fn an_unanswered_approval_expires_as_a_denial() {
    let server = start(None, "approval_timeout_s = 1").await;
    let dir = workspace();
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    let approval = next_approval(&mut events).await;
    assert!(approval["expires_at"].is_string(), "{approval}");
    let seen = until_turn_end(&mut events).await;
    let resolved = seen
        .iter()
        .find(|(kind, _)| kind == "approval.resolved")
        .unwrap();
    assert_eq!(resolved.1["approval"]["status"], "expired");
    let tool = last_tool_call(&server, &id).await;
    assert_eq!(tool["status"], "failed");
    assert_eq!(tool["denied"], true, "{tool}");
    assert!(
        tool["output"].as_str().unwrap().contains("within 1 s"),
        "{tool}"
    );
    assert!(!dir.path().join("ran.txt").exists());
}

#[tokio::test]
async fn a_sub_agents_approval_names_its_session() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(
        &server,
        dir.path(),
        "/spawn default: /shell touch child.txt",
    )
    .await;
    let approval = next_approval(&mut events).await;
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    let root = view["root_session_id"].as_str().unwrap();
    assert_ne!(approval["session_id"], root);
    let sessions = view["sessions"].as_array().unwrap();
    assert!(sessions.iter().any(|s| s["id"] == approval["session_id"]));
    answer(&server, &approval, json!({"decision": "allow_once"})).await;
    server.wait_idle(&id).await;
    assert!(dir.path().join("child.txt").exists());
}

#[tokio::test]
async fn a_stop_while_an_approval_waits_cancels_it() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(&server, dir.path(), "/shell touch ran.txt").await;
    next_approval(&mut events).await;
    let data_dir = server.stop().await;
    let server = start(Some(&data_dir), "").await;
    let (_, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(view["last_turn"]["status"], "interrupted", "{view}");
    assert_eq!(last_tool_call(&server, &id).await["status"], "interrupted");
    assert!(!dir.path().join("ran.txt").exists());
}

#[tokio::test]
async fn file_writes_can_ask_and_a_remembered_directory_answers_the_next() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nwrite_file = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let dir = workspace();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let (id, mut events) = converse(&server, dir.path(), "/write src/a.txt: first").await;
    let approval = next_approval(&mut events).await;
    assert_eq!(approval["tool"], "write_file");
    assert_eq!(approval["subject"]["path"], "src/a.txt");
    let expected_rule = format!("{}/src/*", dir.path().display());
    assert_eq!(approval["suggested_rule"], expected_rule.as_str());
    let (status, body) = answer(
        &server,
        &approval,
        json!({"decision": "allow_conversation"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(),
        "first"
    );
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({"text": "/write src/b.txt: second"}),
        )
        .await;
    assert_eq!(status, 202);
    let seen = until_turn_end(&mut events).await;
    assert!(
        !seen.iter().any(|(kind, _)| kind == "approval.requested"),
        "{seen:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/b.txt")).unwrap(),
        "second"
    );
}

#[tokio::test]
async fn a_kept_rule_also_answers_the_same_question_waiting_elsewhere_in_the_conversation() {
    let server = start(None, "").await;
    let dir = workspace();
    let (id, mut events) = converse(
        &server,
        dir.path(),
        "/spawn default: /shell touch a.txt\n/spawn default: /shell touch b.txt",
    )
    .await;
    let mut asked = Vec::new();
    until(&mut events, |kind, data| {
        if kind == "approval.requested" {
            asked.push(data["approval"].clone());
        }
        asked.len() == 2
    })
    .await;
    assert_ne!(asked[0]["session_id"], asked[1]["session_id"]);
    let (status, body) = answer(
        &server,
        &asked[0],
        json!({"decision": "allow_conversation", "rule": "touch *"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut resolved = Vec::new();
    until(&mut events, |kind, data| {
        if kind == "approval.resolved" {
            resolved.push(data["approval"].clone());
        }
        resolved.len() == 2
    })
    .await;
    let other = resolved
        .iter()
        .find(|approval| approval["id"] == asked[1]["id"])
        .expect("the second approval settled by the kept rule");
    assert_eq!(other["status"], "allowed");
    assert_eq!(other["resolution"]["rule"]["pattern"], "touch *");
    server.wait_idle(&id).await;
    assert!(dir.path().join("a.txt").exists() && dir.path().join("b.txt").exists());
}

#[tokio::test]
async fn always_allowing_settles_what_other_conversations_wait_on() {
    let server = start(None, "").await;
    let dir = workspace();
    let elsewhere = workspace();
    let (_, mut first_events) = converse(&server, dir.path(), "/shell touch one.txt").await;
    let first = next_approval(&mut first_events).await;
    let (_, mut second_events) = converse(&server, dir.path(), "/shell touch two.txt").await;
    let second = next_approval(&mut second_events).await;
    // Another working directory is another scope: it still waits.
    let (_, mut other_events) = converse(&server, elsewhere.path(), "/shell touch three.txt").await;
    let other = next_approval(&mut other_events).await;

    let (status, body) = answer(
        &server,
        &first,
        json!({"decision": "allow_always", "rule": "touch *"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let seen = until_turn_end(&mut second_events).await;
    let resolved = seen
        .iter()
        .find(|(kind, data)| kind == "approval.resolved" && data["approval"]["id"] == second["id"])
        .expect("the second conversation's approval settled by the kept rule");
    assert_eq!(resolved.1["approval"]["status"], "allowed");
    assert!(dir.path().join("two.txt").exists());
    let (_, pending) = server.get("/api/approvals").await;
    let pending: Vec<&Value> = pending["approvals"].as_array().unwrap().iter().collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["id"], other["id"]);
    answer(&server, &other, json!({"decision": "deny"})).await;
    until_turn_end(&mut other_events).await;
    until_turn_end(&mut first_events).await;
}
