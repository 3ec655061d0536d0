//! `openvaala send`, as a script or an editor runs it: each way a turn can end is an exit
//! code, the reply streams to stdout, `--json` gives the events as JSON lines, `-` reads stdin.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::harness::{Server, ServerOptions, TIMEOUT, binary};

/// What one `openvaala send` run gave: its exit code, stdout and stderr.
pub(crate) struct Sent {
    pub code: i32,
    pub out: String,
    pub err: String,
}

impl Sent {
    /// The conversation id it printed to stderr.
    pub fn conversation(&self) -> String {
        self.err
            .lines()
            .find_map(|line| line.strip_prefix("conversation "))
            .unwrap_or_else(|| panic!("no conversation id on stderr: {}", self.err))
            .to_owned()
    }
}

pub(crate) fn command(server: &Server, args: &[&str], cwd: &std::path::Path) -> Command {
    command_at(&server.base, args, cwd)
}

/// `openvaala send` with `--url url`.
pub(crate) fn command_at(url: &str, args: &[&str], cwd: &std::path::Path) -> Command {
    let mut command = Command::new(binary());
    crate::harness::with_token(&mut command, url);
    command
        .arg("send")
        .args(args)
        .args(["--url", url])
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

pub(crate) async fn send(
    server: &Server,
    args: &[&str],
    stdin: &str,
    cwd: &std::path::Path,
) -> Sent {
    finish(command(server, args, cwd), stdin).await
}

/// Runs a prepared `send` with `stdin` and waits for its end.
pub(crate) async fn finish(mut command: Command, stdin: &str) -> Sent {
    let mut child = command
        .stdin(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    Sent {
        code: output.status.code().expect("an exit code"),
        out: String::from_utf8_lossy(&output.stdout).into_owned(),
        err: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub(crate) fn demo_reply(text: &str) -> String {
    format!("Demo model (offline, built in): you said \"{text}\".")
}

#[tokio::test]
async fn a_completed_turn_prints_the_reply_and_exits_0_and_the_id_continues_it() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let first = send(&server, &["Hello from a script"], "", workdir.path()).await;
    assert_eq!(first.code, 0, "{}\n{}", first.out, first.err);
    assert!(
        first.out.starts_with(&demo_reply("Hello from a script")),
        "{}",
        first.out
    );
    assert!(first.out.ends_with('\n'), "{:?}", first.out);
    let id = first.conversation();
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    let cwd = workdir.path().canonicalize().unwrap();
    assert_eq!(conversation["cwd"], cwd.display().to_string());

    // The id printed to stderr continues the conversation; `-` reads the message from stdin.
    let second = send(
        &server,
        &["-", "--conversation", &id],
        "From stdin\nsecond line\n",
        workdir.path(),
    )
    .await;
    assert_eq!(second.code, 0, "{}\n{}", second.out, second.err);
    assert_eq!(second.conversation(), id);
    assert!(
        second.out.starts_with(&demo_reply("From stdin")),
        "{}",
        second.out
    );
    assert!(
        !second.out.contains("Hello from a script"),
        "{}",
        second.out
    );
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let texts: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Hello from a script", "From stdin\nsecond line\n"]);
}

#[tokio::test]
async fn a_failed_turn_exits_1_with_the_reason_on_stderr() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[retry]\nmax_attempts = 2\ninitial_delay_ms = 1\nmax_delay_ms = 1\n".to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    let sent = send(&server, &["/fail 5"], "", workdir.path()).await;
    assert_eq!(sent.code, 1, "{}\n{}", sent.out, sent.err);
    assert!(sent.err.contains("the turn failed: "), "{}", sent.err);
    assert!(
        sent.err.contains("simulated transient failure"),
        "{}",
        sent.err
    );
    sent.conversation();
}

#[tokio::test]
async fn an_interrupted_turn_exits_130() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let mut child = command(&server, &["/sleep 200\nTake your time"], workdir.path())
        .stdin(Stdio::null())
        .spawn()
        .expect("the binary runs");
    // The id comes first on stderr; the reply is streaming slowly meanwhile.
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let id = tokio::time::timeout(TIMEOUT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if let Some(id) = line.strip_prefix("conversation ") {
                return id.to_owned();
            }
        }
        panic!("send ended without printing the conversation id");
    })
    .await
    .expect("the conversation id in time");
    let (status, answer) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(
        (status, &answer["interrupted"]),
        (200, &json!(true)),
        "{answer}"
    );
    let status = tokio::time::timeout(TIMEOUT, child.wait())
        .await
        .expect("send ends in time")
        .unwrap();
    assert_eq!(status.code(), Some(130));
    let rest = stderr.next_line().await.unwrap().unwrap_or_default();
    assert_eq!(rest, "the turn was interrupted");
}

#[tokio::test]
async fn json_writes_every_event_as_a_line() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let created = server.create_and_wait("First").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let sent = send(
        &server,
        &["--json", "--conversation", id, "--mode", "queue", "Second"],
        "",
        workdir.path(),
    )
    .await;
    assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
    let events: Vec<Value> = sent
        .out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"snapshot"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"turn.ended"), "{kinds:?}");
    assert!(kinds.contains(&"turn.started"), "{kinds:?}");
    assert!(events.iter().all(|e| e["id"].is_string()), "{}", sent.out);
    assert_eq!(events.last().unwrap()["data"]["status"], "completed");
    let streamed: String = events
        .iter()
        .filter(|e| e["event"] == "item.delta")
        .map(|e| e["data"]["delta"].as_str().unwrap())
        .collect();
    assert!(streamed.starts_with(&demo_reply("Second")), "{streamed}");
}

#[tokio::test]
async fn a_refused_request_is_a_usage_error() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let unknown = send(
        &server,
        &["--conversation", "c_nope", "Hi"],
        "",
        workdir.path(),
    )
    .await;
    assert_eq!(unknown.code, 2, "{}", unknown.err);
    assert!(unknown.err.contains("not_found"), "{}", unknown.err);
    let empty = send(&server, &["-"], "", workdir.path()).await;
    assert_eq!(empty.code, 2, "{}", empty.err);
    assert!(empty.err.contains("invalid_request"), "{}", empty.err);
    let bad_mode = send(&server, &["--mode", "later", "Hi"], "", workdir.path()).await;
    assert_eq!(bad_mode.code, 2, "{}", bad_mode.err);
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn the_agents_plan_goes_to_stderr_as_a_checklist() {
    let (fake, server) = crate::plan::plan_server().await;
    crate::plan::push_plan_turn(&fake);
    let workdir = tempfile::tempdir().unwrap();
    let sent = send(&server, &["Plan it"], "", workdir.path()).await;
    assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
    // stdout is the reply alone.
    assert_eq!(sent.out, "Planned.\n");
    assert!(
        sent.err
            .contains("plan:\n  Small steps.\n  [x] Read it\n  [>] Fix it\n  [ ] Test it\n"),
        "{}",
        sent.err
    );
}

#[tokio::test]
async fn the_turns_tokens_and_cost_go_to_stderr_or_into_the_json_turn_end() {
    use crate::fake_provider::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, Reply};
    use crate::support::{answer_cost, answer_figures, priced_server};
    let (fake, server) = priced_server().await;
    let workdir = tempfile::tempdir().unwrap();
    fake.push(Reply::text("Counted."));
    let sent = send(&server, &["Count it"], "", workdir.path()).await;
    assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
    // Stdout is the reply alone, for a script to read; the figures come last on stderr.
    assert_eq!(sent.out, "Counted.\n");
    let usage = format!("usage: {}", answer_figures());
    assert_eq!(
        sent.err.lines().last(),
        Some(usage.as_str()),
        "{}",
        sent.err
    );

    fake.push(Reply::text("Again."));
    let id = sent.conversation();
    let args = ["--json", "--conversation", &id, "Again"];
    let sent = send(&server, &args, "", workdir.path()).await;
    assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
    let ended: Value = serde_json::from_str(sent.out.lines().last().unwrap()).unwrap();
    assert_eq!(ended["event"], "turn.ended", "{ended}");
    let usage = &ended["data"]["usage"];
    assert_eq!(usage["model_calls"], 1, "{usage}");
    assert_eq!(usage["input_tokens"], INPUT_TOKENS, "{usage}");
    assert_eq!(usage["cached_input_tokens"], CACHED_TOKENS, "{usage}");
    assert_eq!(usage["output_tokens"], OUTPUT_TOKENS, "{usage}");
    let cost = usage["cost"].as_f64().unwrap_or_else(|| panic!("{usage}"));
    assert!((cost - answer_cost()).abs() < 1e-12, "{usage}");
    // The JSON has them: stderr does not repeat them.
    assert!(!sent.err.contains("usage:"), "{}", sent.err);
}
