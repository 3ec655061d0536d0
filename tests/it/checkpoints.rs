//! Checkpoints of the working tree, end to end: tool calls (shell and `write_file`) change
//! files, each call's item records what changed, a turn's diff is served, and a rewind with
//! `restore_files` puts back exactly the paths this conversation changed, keeping others'
//! edits as conflicts; undo, a git repository left alone, ignored directories, a crash in the
//! middle of a restore.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::support::{events_until, items};

/// The fake provider's config, the agent with the file tools, and these `[tools]` settings.
pub(crate) fn config(fake: &FakeProvider, tools_settings: &str) -> String {
    fake.config().replace(
        "tools = [\"shell\"]",
        "tools = [\"shell\", \"write_file\", \"edit_file\", \"read_file\"]",
    ) + "\n[tools]\n"
        + tools_settings
}

pub(crate) async fn start(
    fake: &FakeProvider,
    data_dir: Option<&Path>,
    env: Vec<(String, String)>,
) -> Server {
    Server::start_with(ServerOptions {
        config: Some(config(fake, "")),
        data_dir: data_dir.map(Path::to_path_buf),
        env,
        ..ServerOptions::default()
    })
    .await
}

pub(crate) fn shell(command: &str) -> Reply {
    Reply::tool_call("shell", json!({ "command": command }), 1)
}

pub(crate) fn write(path: &str, content: &str) -> Reply {
    Reply::tool_call("write_file", json!({ "path": path, "content": content }), 1)
}

/// Every file under `dir` (but `.git`) with its content.
pub(crate) fn tree(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap() == ".git" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
                files.insert(rel, std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    files
}

pub(crate) fn seed(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// Creates a conversation in `cwd` whose first turn runs `replies` (then answers "Done.");
/// answers its id and the first turn's end.
pub(crate) async fn create(
    server: &Server,
    fake: &FakeProvider,
    cwd: &Path,
    replies: Vec<Reply>,
) -> (String, Value) {
    for reply in replies {
        fake.push(reply);
    }
    fake.push(Reply::text("Done."));
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({ "text": "start", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    let turn_id = items(server, &id).await[0]["turn_id"].clone();
    (id, json!({ "turn_id": turn_id }))
}

/// Sends a message whose turn runs `replies`; answers its `turn.ended` data.
pub(crate) async fn turn(
    server: &Server,
    fake: &FakeProvider,
    id: &str,
    text: &str,
    replies: Vec<Reply>,
) -> Value {
    for reply in replies {
        fake.push(reply);
    }
    fake.push(Reply::text("Done."));
    let mut events = server.events(id).await;
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": text }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let seen = events_until(&mut events, "turn.ended").await;
    seen.last().unwrap().1.clone()
}

/// The id of the root user message with this text.
pub(crate) async fn message_id(server: &Server, id: &str, text: &str) -> String {
    items(server, id)
        .await
        .iter()
        .find(|item| item["kind"] == "user_message" && item["text"] == text)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) async fn rewind(server: &Server, id: &str, message: &str, force: bool) -> (u16, Value) {
    server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": message, "restore_files": true, "force": force }),
        )
        .await
}

fn strings(value: &Value) -> Vec<String> {
    let mut list: Vec<String> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    list.sort();
    list
}

#[tokio::test]
async fn rewind_with_restore_brings_back_exactly_the_earlier_tree_and_undo_reverses_it() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    seed(
        dir,
        &[
            ("keep.txt", "untouched\n"),
            ("edit.txt", "one\ntwo\nthree\n"),
            ("gone.txt", "to be deleted\n"),
            ("old_name.txt", "moved\n"),
            ("sub/deep.txt", "deep\n"),
        ],
    );
    let (id, _) = create(&server, &fake, dir, Vec::new()).await;
    let original = tree(dir);

    let ended = turn(
        &server,
        &fake,
        &id,
        "change things",
        vec![
            shell("printf 'one\\nTWO\\nthree\\n' > edit.txt && rm gone.txt && mv old_name.txt new_name.txt"),
            write("made/new.txt", "created\n"),
            write("sub/deep.txt", "deeper\n"),
        ],
    )
    .await;
    // edit, gone, old_name, new_name, made/new, sub/deep.
    assert_eq!(ended["files_changed"], 6, "{ended}");
    let calls: Vec<Value> = items(&server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "tool_call" && item["turn_id"] == ended["turn_id"])
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(strings(&calls[0]["files"]["modified"]), ["edit.txt"]);
    assert_eq!(
        strings(&calls[0]["files"]["deleted"]),
        ["gone.txt", "old_name.txt"]
    );
    assert_eq!(strings(&calls[0]["files"]["added"]), ["new_name.txt"]);
    assert_eq!(strings(&calls[1]["files"]["added"]), ["made/new.txt"]);
    assert_eq!(strings(&calls[2]["files"]["modified"]), ["sub/deep.txt"]);

    let turn_id = ended["turn_id"].as_str().unwrap();
    let (status, changes) = server
        .get(&format!("/api/conversations/{id}/turns/{turn_id}/changes"))
        .await;
    assert_eq!(status, 200, "{changes}");
    let files = changes["files"].as_array().unwrap();
    assert_eq!(files.len(), 6, "{changes}");
    let edit = files.iter().find(|f| f["path"] == "edit.txt").unwrap();
    assert_eq!(edit["change"], "modified");
    let diff = edit["diff"].as_str().unwrap();
    assert!(diff.contains("-two\n") && diff.contains("+TWO\n"), "{diff}");
    let gone = files.iter().find(|f| f["path"] == "gone.txt").unwrap();
    assert_eq!(gone["change"], "deleted");
    assert!(edit.get("old_text").is_none(), "texts only when asked");

    // One call's changes, with the whole texts before and after.
    let one_call = format!(
        "/api/conversations/{id}/turns/{turn_id}/changes?item_id={}&contents=true",
        calls[2]["id"].as_str().unwrap()
    );
    let (status, call) = server.get(&one_call).await;
    assert_eq!(status, 200, "{call}");
    assert_eq!(call["files"].as_array().unwrap().len(), 1, "{call}");
    assert_eq!(call["files"][0]["path"], "sub/deep.txt");
    assert_eq!(call["files"][0]["old_text"], "deep\n");
    assert_eq!(call["files"][0]["new_text"], "deeper\n");
    let changes_of =
        |query: &str| format!("/api/conversations/{id}/turns/{turn_id}/changes?{query}");
    let (status, body) = server.get(&changes_of("item_id=m_nothere")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    let (status, body) = server.get(&changes_of("contents=maybe")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_request")),
        "{body}"
    );

    let after_first = tree(dir);
    turn(
        &server,
        &fake,
        &id,
        "more",
        vec![write("later.txt", "later\n")],
    )
    .await;
    let after_second = tree(dir);

    let message = message_id(&server, &id, "change things").await;
    let (status, body) = rewind(&server, &id, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["text"], "change things");
    assert_eq!(body["restore"]["conflicts"], json!([]));
    assert_eq!(strings(&body["restore"]["restored"]).len(), 7, "{body}");
    assert_eq!(tree(dir), original, "the tree is as it was before the turn");
    assert!(
        !dir.join("made").exists(),
        "a directory the turn made is gone too"
    );
    assert_ne!(original, after_first);

    let restore_id = body["restore"]["id"].as_str().unwrap();
    let (status, undone) = server
        .post(
            &format!("/api/conversations/{id}/restores/{restore_id}/undo"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{undone}");
    assert_eq!(undone["restore"]["conflicts"], json!([]));
    assert_eq!(
        tree(dir),
        after_second,
        "undo puts back what the restore replaced"
    );
    let (status, again) = server
        .post(
            &format!("/api/conversations/{id}/restores/{restore_id}/undo"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "restore_unavailable");

    // Without `restore_files`, a rewind leaves the files alone.
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": message }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert!(body.get("restore").is_none(), "{body}");
    assert_eq!(tree(dir), after_second);
}

#[tokio::test]
async fn a_path_someone_else_changed_is_a_conflict_kept_unless_forced() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    seed(dir, &[("a.txt", "a0\n"), ("b.txt", "b0\n")]);
    let (id, _) = create(&server, &fake, dir, Vec::new()).await;
    turn(
        &server,
        &fake,
        &id,
        "edit both",
        vec![write("a.txt", "a1\n"), write("b.txt", "b1\n")],
    )
    .await;
    // The user edits a.txt after the agent.
    std::fs::write(dir.join("a.txt"), "user's\n").unwrap();
    let message = message_id(&server, &id, "edit both").await;
    // A dry run says what would happen, and does nothing.
    let (status, preview) = server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": message, "restore_files": true, "dry_run": true }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["conversation"], Value::Null);
    assert_eq!(preview["restore"]["id"], Value::Null);
    assert_eq!(preview["restore"]["conflicts"], json!(["a.txt"]));
    assert_eq!(preview["restore"]["restored"], json!(["b.txt"]));
    assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b1\n");
    let (status, body) = rewind(&server, &id, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["restore"]["conflicts"], json!(["a.txt"]));
    assert_eq!(body["restore"]["restored"], json!(["b.txt"]));
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "user's\n"
    );
    assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b0\n");

    let (status, body) = rewind(&server, &id, &message, true).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["restore"]["restored"], json!(["a.txt"]));
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a0\n");
}

#[tokio::test]
async fn restoring_one_conversation_leaves_another_ones_edits_in_the_same_directory() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    seed(dir, &[("shared.txt", "base\n")]);
    let (first, _) = create(&server, &fake, dir, Vec::new()).await;
    let (second, _) = create(&server, &fake, dir, Vec::new()).await;
    turn(
        &server,
        &fake,
        &first,
        "mine",
        vec![write("first.txt", "1\n")],
    )
    .await;
    turn(
        &server,
        &fake,
        &second,
        "theirs",
        vec![shell("echo 2 > second.txt")],
    )
    .await;
    turn(
        &server,
        &fake,
        &first,
        "more of mine",
        vec![write("first.txt", "1b\n")],
    )
    .await;

    let message = message_id(&server, &first, "mine").await;
    let (status, body) = rewind(&server, &first, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["restore"]["restored"], json!(["first.txt"]));
    assert_eq!(body["restore"]["conflicts"], json!([]));
    assert!(!dir.join("first.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("second.txt")).unwrap(),
        "2\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("shared.txt")).unwrap(),
        "base\n"
    );
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn a_git_repositorys_index_and_stash_are_untouched_and_ignored_trees_are_skipped() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    git(dir, &["init", "-q"]);
    seed(
        dir,
        &[("tracked.txt", "v1\n"), (".gitignore", "node_modules/\n")],
    );
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "first"]);
    seed(dir, &[("tracked.txt", "stashed\n")]);
    git(dir, &["stash", "-q"]);
    seed(dir, &[("tracked.txt", "staged\n")]);
    git(dir, &["add", "tracked.txt"]);
    seed(dir, &[("tracked.txt", "worktree\n")]);
    // A large ignored tree: never walked, never hashed.
    for package in 0..200 {
        let files: Vec<(String, String)> = (0..50)
            .map(|n| (format!("node_modules/p{package}/f{n}.js"), "x".repeat(2000)))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        seed(dir, &refs);
    }
    let status_before = git(dir, &["status", "--porcelain"]);
    let stash_before = git(dir, &["stash", "list"]);
    let index_before = std::fs::read(dir.join(".git/index")).unwrap();
    let (id, _) = create(&server, &fake, dir, Vec::new()).await;

    let started = Instant::now();
    let ended = turn(
        &server,
        &fake,
        &id,
        "work",
        vec![shell(
            "echo changed > tracked.txt && echo n > node_modules/p1/f1.js && echo x > extra.txt \
             && head -c 11000000 /dev/zero > big.bin",
        )],
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    // The ignored change is not the conversation's to show or restore; a file over the size
    // limit is listed as skipped.
    assert_eq!(ended["files_changed"], 2, "{ended}");
    let turn_id = ended["turn_id"].as_str().unwrap();
    let (status, changes) = server
        .get(&format!("/api/conversations/{id}/turns/{turn_id}/changes"))
        .await;
    assert_eq!(status, 200, "{changes}");
    assert_eq!(changes["skipped"][0]["path"], "big.bin", "{changes}");
    assert_eq!(changes["skipped"].as_array().unwrap().len(), 1, "{changes}");
    std::fs::remove_file(dir.join("big.bin")).unwrap();
    let message = message_id(&server, &id, "work").await;
    let (status, body) = rewind(&server, &id, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        strings(&body["restore"]["restored"]),
        ["extra.txt", "tracked.txt"]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("tracked.txt")).unwrap(),
        "worktree\n"
    );
    assert_eq!(git(dir, &["status", "--porcelain"]), status_before);
    assert_eq!(git(dir, &["stash", "list"]), stash_before);
    assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index_before);
    assert_eq!(
        git(dir, &["diff", "--cached", "--name-only"]),
        "tracked.txt\n"
    );
}

#[tokio::test]
async fn restoring_is_refused_while_a_turn_runs_in_the_directory() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (first, _) = create(&server, &fake, dir, Vec::new()).await;
    turn(&server, &fake, &first, "mine", vec![write("a.txt", "1\n")]).await;
    let (second, _) = create(&server, &fake, dir, Vec::new()).await;
    start_blocked_turn(&server, &fake, &second, dir).await;
    let message = message_id(&server, &first, "mine").await;
    let (status, body) = rewind(&server, &first, &message, false).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_running");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "1\n");
    let (status, _) = server
        .post(&format!("/api/conversations/{second}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = rewind(&server, &first, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert!(!dir.join("a.txt").exists());
}

/// Starts a turn of `id` whose shell call waits on a FIFO in `dir` that nobody writes (until
/// the test interrupts it); answers once the call runs.
pub(crate) async fn start_blocked_turn(server: &Server, fake: &FakeProvider, id: &str, dir: &Path) {
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.join("gate"))
            .status()
            .unwrap()
            .success()
    );
    fake.push(shell("read line < gate"));
    fake.push(Reply::text("Done."));
    let mut events = server.events(id).await;
    let (status, _) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "wait" }),
        )
        .await;
    assert_eq!(status, 202);
    crate::support::until(&mut events, |kind, data| {
        kind == "item.started" && data["item"]["kind"] == "tool_call"
    })
    .await;
}

/// Waits until the process has stopped itself (state `T` in /proc).
pub(crate) async fn wait_stopped(pid: i32) {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let state = stat.rsplit(") ").next().unwrap().chars().next().unwrap();
            if state == 'T' {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the server never reached the restore point");
}

/// A conversation whose turn changed a.txt and b.txt, removed c.txt and added d.txt, and a
/// rewind with restore that a test hook stops just before it writes b.txt (sorted: a, b, c,
/// d); the service is then killed. Answers the data directory, the working tree as it was
/// before the turn, and the conversation's id.
pub(crate) async fn restore_cut_short(
    fake: &FakeProvider,
    dir: &Path,
    data_dir: &Path,
) -> (std::path::PathBuf, BTreeMap<String, String>, String) {
    let stop = vec![(
        "OPENVAALA_TEST_STOP_AT".to_owned(),
        "restore:b.txt".to_owned(),
    )];
    let server = start(fake, Some(data_dir), stop).await;
    seed(
        dir,
        &[("a.txt", "a0\n"), ("b.txt", "b0\n"), ("c.txt", "c0\n")],
    );
    let (id, _) = create(&server, fake, dir, Vec::new()).await;
    let original = tree(dir);
    turn(
        &server,
        fake,
        &id,
        "edit",
        vec![shell(
            "echo a1 > a.txt && echo b1 > b.txt && rm c.txt && echo d > d.txt",
        )],
    )
    .await;
    let message = message_id(&server, &id, "edit").await;
    let request = server
        .client
        .post(server.url(&format!("/api/conversations/{id}/rewind")))
        .json(&json!({ "message_id": message, "restore_files": true }));
    let pending = tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) });
    wait_stopped(server.child.id().unwrap() as i32).await;
    // Half done: a.txt is back, b.txt not yet.
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a0\n");
    assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b1\n");
    let data_dir = server.kill9().await;
    assert!(
        pending.await.unwrap().is_err(),
        "the request died with the server"
    );
    (data_dir, original, id)
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_restore_is_finished_at_the_next_start() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (data_dir, original, _) = restore_cut_short(&fake, dir, &data.path().join("data")).await;

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    assert_eq!(tree(dir), original, "the next start finished the restore");
    // The rewind itself was never stored: only the original conversation is listed.
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1, "{list}");
}
