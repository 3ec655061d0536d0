//! Torn and damaged lines in the append-only files (invariant 4, crash-safe), as a power cut
//! leaves them: a torn tail that ends in a newline (NUL bytes where pages never reached the
//! disk, then the end of a line) is skipped, kept aside in `<file>.torn-<time>` and cut before
//! the next append, for a session log, `metadata.jsonl` and `rules.jsonl` alike. A damaged line
//! with records after it keeps its conversation listed and answers 422 `conversation_damaged`
//! until `openvaala repair` moves it aside.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions};
use crate::support::{items, until, until_turn_end};

/// What a power cut can leave after the last acknowledged line: a page of NUL bytes, then the
/// end of a line (with its newline), then NUL bytes again.
fn torn_tail() -> Vec<u8> {
    let mut torn = vec![0; 4096];
    torn.extend_from_slice(b"\",\"at\":\"2026-12-06T08:00:00Z\"}\n");
    torn.extend_from_slice(&[0; 100]);
    torn.push(b'\n');
    torn
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// The files kept aside for `log` (`<name>.torn-*` beside it), with their bytes.
fn kept_aside(log: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let prefix = format!("{}.torn-", log.file_name().unwrap().to_string_lossy());
    let mut aside: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    aside.sort();
    aside
}

/// Every line of a log is JSON (nothing torn is left in it).
fn assert_whole(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.ends_with('\n'), "{}", log.display());
    for line in text.lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|error| panic!("{}: {error}: {line:?}", log.display()));
    }
}

fn ids(list: &Value) -> Vec<&str> {
    list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|conversation| conversation["id"].as_str().unwrap())
        .collect()
}

/// Creates a conversation with the demo model; returns its id and root session id.
async fn conversation(server: &Server, text: &str) -> (String, String) {
    let created = server.create_and_wait(text).await;
    let conversation = &created["conversation"];
    let id = conversation["id"].as_str().unwrap().to_owned();
    let root = conversation["root_session_id"].as_str().unwrap().to_owned();
    (id, root)
}

#[tokio::test]
async fn a_torn_tail_ending_in_a_newline_is_kept_aside_and_cut_in_session_and_metadata_logs() {
    let server = Server::start().await;
    let (in_session, session_id) = conversation(&server, "torn in the session log").await;
    let (in_metadata, _) = conversation(&server, "torn in the metadata").await;
    let session_log = server
        .conversation_dir(&in_session)
        .join(format!("{session_id}.jsonl"));
    let metadata = server.conversation_dir(&in_metadata).join("metadata.jsonl");
    // As after a power cut: killed, so the next start reconciles the index with the files.
    let data_dir = server.kill9().await;
    let torn = torn_tail();
    append(&session_log, &torn);
    append(&metadata, &torn);

    let server = Server::start_in(&data_dir).await;
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200, "{list}");
    let listed = ids(&list);
    assert!(listed.contains(&in_session.as_str()), "{list}");
    assert!(listed.contains(&in_metadata.as_str()), "{list}");
    for id in [&in_session, &in_metadata] {
        let (status, view) = server.get(&format!("/api/conversations/{id}")).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            items(&server, id).await.len(),
            2,
            "the message and its answer"
        );
        server.send_and_wait(id, "and once more").await;
        let texts: Vec<Value> = items(&server, id)
            .await
            .iter()
            .filter(|item| item["kind"] == "user_message")
            .map(|item| item["text"].clone())
            .collect();
        assert_eq!(texts.last().unwrap(), "and once more", "{texts:?}");
    }
    // The torn bytes were cut before the new lines and kept, durably, beside their log.
    for log in [&session_log, &metadata] {
        assert_whole(log);
        let aside = kept_aside(log);
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(
            aside[0].1 == torn,
            "{} holds other bytes",
            aside[0].0.display()
        );
    }

    // And after a clean restart, nothing is torn any more: the answers are the same.
    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    for id in [&in_session, &in_metadata] {
        assert_eq!(items(&server, id).await.len(), 4);
    }
    assert_eq!(kept_aside(&session_log).len(), 1);
}

/// Runs `openvaala repair <id>` on a data directory; returns (success, stdout + stderr).
async fn repair(data_dir: &Path, id: &str) -> (bool, String) {
    crate::harness::with_data_dir(&["repair", id], data_dir).await
}

#[tokio::test]
async fn a_damaged_line_in_the_middle_is_listed_refused_with_422_and_repaired() {
    let server = Server::start().await;
    let (id, session_id) = conversation(&server, "damaged in the middle").await;
    server.send_and_wait(&id, "second message").await;
    let log = server
        .conversation_dir(&id)
        .join(format!("{session_id}.jsonl"));
    let data_dir = server.kill9().await;
    // A line of garbage after the first record: records follow it, so it is no torn tail.
    let content = std::fs::read(&log).unwrap();
    let first_end = content.iter().position(|b| *b == b'\n').unwrap() + 1;
    let damaged = b"\0\0\0\0\0\0 not a record\n";
    let mut changed = content[..first_end].to_vec();
    changed.extend_from_slice(damaged);
    changed.extend_from_slice(&content[first_end..]);
    std::fs::write(&log, &changed).unwrap();

    let server = Server::start_in(&data_dir).await;
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200, "{list}");
    assert!(ids(&list).contains(&id.as_str()), "still listed: {list}");
    let file = format!("{session_id}.jsonl");
    let refused = |(status, body): (u16, Value)| {
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], "conversation_damaged", "{body}");
        let message = body["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(&format!("line 2 of {file}")), "{message}");
        assert!(
            message.contains(&format!("openvaala repair {id}")),
            "{message}"
        );
    };
    refused(server.get(&format!("/api/conversations/{id}")).await);
    refused(
        server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": "refused" }),
            )
            .await,
    );
    // Nothing was skipped or cut meanwhile.
    assert!(std::fs::read(&log).unwrap() == changed, "the log changed");
    let (ok, output) = repair(&data_dir, &id).await;
    assert!(!ok && output.contains("the service is running"), "{output}");

    let data_dir = server.stop().await;
    let (ok, output) = repair(&data_dir, &id).await;
    assert!(ok, "{output}");
    assert!(
        output.contains("moved damaged line(s) 2 and 0 byte(s)"),
        "{output}"
    );
    assert!(
        std::fs::read(&log).unwrap() == content,
        "the records are kept"
    );
    let aside = kept_aside(&log);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].1 == damaged, "the damaged line is kept aside");
    assert!(
        output.contains(&aside[0].0.display().to_string()),
        "{output}"
    );

    let server = Server::start_in(&data_dir).await;
    let (status, view) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(items(&server, &id).await.len(), 4);
    server.send_and_wait(&id, "third message").await;
    assert_eq!(items(&server, &id).await.len(), 6);
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200);
    assert_eq!(ids(&list), [id.as_str()]);
}

/// A server whose default agent asks before every shell command.
async fn asking(data_dir: Option<&Path>) -> Server {
    Server::start_with(ServerOptions {
        data_dir: data_dir.map(Path::to_owned),
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await
}

/// Runs `/shell <command>` in a new conversation in `cwd`, answering its approval with
/// `allow_always`; returns once the turn has ended.
async fn remember(server: &Server, cwd: &Path, command: &str) {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({ "text": format!("/shell {command}"), "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    let seen = until(&mut events, |kind, data| {
        kind == "approval.requested"
            || (kind == "snapshot" && !data["approvals"].as_array().unwrap().is_empty())
    })
    .await;
    let (kind, data) = seen.last().unwrap();
    let approval = if kind == "snapshot" {
        &data["approvals"][0]
    } else {
        &data["approval"]
    };
    let approval_id = approval["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({"decision": "allow_always"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    until_turn_end(&mut events).await;
}

async fn patterns(server: &Server) -> Vec<String> {
    let (status, rules) = server.get("/api/rules").await;
    assert_eq!(status, 200, "{rules}");
    rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["pattern"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_torn_tail_of_the_remembered_rules_is_kept_aside_and_cut_at_start() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let server = asking(None).await;
    remember(&server, work.path(), "touch first.txt").await;
    assert_eq!(patterns(&server).await, ["touch first.txt"]);
    let rules = server.data_dir.join("rules.jsonl");
    let data_dir = server.kill9().await;
    let whole = std::fs::read(&rules).unwrap();
    let torn = torn_tail();
    append(&rules, &torn);

    let server = asking(Some(&data_dir)).await;
    assert!(std::fs::read(&rules).unwrap() == whole, "cut at start");
    let aside = kept_aside(&rules);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].1 == torn, "the torn tail is kept aside");
    assert_eq!(patterns(&server).await, ["touch first.txt"]);
    remember(&server, work.path(), "touch second.txt").await;
    assert_eq!(
        patterns(&server).await,
        ["touch first.txt", "touch second.txt"]
    );
    assert_whole(&rules);
}
