//! `openvaala send` as a script relies on it: Ctrl-C stops the turn, not just the client; an
//! unreachable service or a lost stream is its own exit code (69) with the cause named; a
//! dropped stream is reconnected; retries are reported; `--model` and `--agent` choose.

use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStderr, Command};

use crate::harness::{Server, ServerOptions, TIMEOUT, signal};
use crate::send::{command, command_at, demo_reply, finish, send};
use crate::support::events_until;

/// A port nothing listens on (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `send` and reads its stderr up to the conversation id.
async fn started(
    mut command: Command,
) -> (tokio::process::Child, Lines<BufReader<ChildStderr>>, String) {
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .expect("the binary runs");
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
    (child, stderr, id)
}

/// Starts `send` with a message the demo model answers slowly, and waits for its answer to
/// begin: the turn is running.
async fn started_long_turn(
    server: &Server,
    workdir: &std::path::Path,
) -> (tokio::process::Child, Lines<BufReader<ChildStderr>>, String) {
    let (child, stderr, id) =
        started(command(server, &["/sleep 300\nTake your time"], workdir)).await;
    let mut events = server.events(&id).await;
    events_until(&mut events, "item.delta").await;
    (child, stderr, id)
}

/// The rest of stderr, once the process has ended.
async fn rest(stderr: &mut Lines<BufReader<ChildStderr>>) -> String {
    let mut text = String::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        text += &line;
        text.push('\n');
    }
    text
}

#[tokio::test]
async fn an_unreachable_service_exits_69_and_says_why() {
    let workdir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    let sent = finish(command_at(&url, &["Hello"], workdir.path()), "").await;
    assert_eq!(sent.code, 69, "{}", sent.err);
    assert!(
        sent.err.contains(&format!(
            "connection refused at {url}: is `openvaala serve` running?"
        )),
        "{}",
        sent.err
    );
}

#[tokio::test]
async fn an_address_without_a_scheme_is_understood() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let bare = server.base.strip_prefix("http://").unwrap();
    let sent = finish(command_at(bare, &["Hello"], workdir.path()), "").await;
    assert_eq!(sent.code, 0, "{}", sent.err);
    assert!(sent.out.starts_with(&demo_reply("Hello")), "{}", sent.out);
}

#[tokio::test]
async fn ctrl_c_interrupts_the_turn_waits_for_its_end_and_exits_130() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (child, mut stderr, id) = started_long_turn(&server, workdir.path()).await;
    let pid = child.id().expect("running") as i32;
    signal(pid, libc::SIGINT);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    let err = rest(&mut stderr).await;
    assert_eq!(output.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupting the turn") && err.contains("the turn was interrupted"),
        "{err}"
    );
    // The turn ended before `send` did: the service says so.
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );
}

#[tokio::test]
async fn a_restart_mid_turn_is_reconnected_and_its_end_reported() {
    let port = free_port();
    let options = || ServerOptions {
        addr: Some(format!("127.0.0.1:{port}")),
        ..ServerOptions::default()
    };
    let server = Server::start_with(options()).await;
    let workdir = tempfile::tempdir().unwrap();
    let (child, mut stderr, id) = started_long_turn(&server, workdir.path()).await;
    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        ..options()
    })
    .await;
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    let err = rest(&mut stderr).await;
    // The restart closed the running turn as interrupted: `send` learns it on reconnecting.
    assert_eq!(output.status.code(), Some(130), "{err}");
    assert!(err.contains("the turn was interrupted"), "{err}");
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );
}

#[tokio::test]
async fn a_stream_lost_for_good_exits_69() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (child, mut stderr, _) = started_long_turn(&server, workdir.path()).await;
    let _data_dir = server.kill9().await;
    // `send` tries to reconnect for 30 s before it gives up.
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    let err = rest(&mut stderr).await;
    assert_eq!(output.status.code(), Some(69), "{err}");
    assert!(
        err.contains("could not be opened again") && err.contains("may still be running"),
        "{err}"
    );
}

/// A service whose model calls are tried 3 times, 1 ms apart.
async fn quick_retries() -> Server {
    Server::start_with(ServerOptions {
        config: Some(
            "[retry]\nmax_attempts = 3\ninitial_delay_ms = 1\nmax_delay_ms = 1\n".to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await
}

#[tokio::test]
async fn retries_are_reported_on_stderr_from_the_first() {
    let server = quick_retries().await;
    let workdir = tempfile::tempdir().unwrap();
    // The first model call fails at once: its retry is published before `send` could open a
    // stream, every time.
    for _ in 0..3 {
        let sent = send(&server, &["/fail 1"], "", workdir.path()).await;
        assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
        assert!(
            sent.err
                .contains("the model call failed (demo model: simulated transient failure 1 of 1")
                && sent.err.contains("attempt 2 of 3"),
            "{}",
            sent.err
        );
    }
}

#[tokio::test]
async fn a_sub_agents_retries_are_not_reported_as_the_turns() {
    let server = quick_retries().await;
    let workdir = tempfile::tempdir().unwrap();
    // The sub-agent's first model call fails at once; the root's answer streams slowly after.
    let sent = send(
        &server,
        &["/spawn default: /fail 1\n/sleep 100"],
        "",
        workdir.path(),
    )
    .await;
    assert_eq!(sent.code, 0, "{}\n{}", sent.out, sent.err);
    // The sub-agent's retry came while `send` followed the root's turn.
    let path = format!("/api/conversations/{}/events", sent.conversation());
    let (snapshot_id, _, snapshot) = server.raw_events(&path, None).await.next().await.unwrap();
    let root = snapshot["conversation"]["root_session_id"].clone();
    let (epoch, _) = snapshot_id.split_once('-').unwrap();
    let mut replay = server.events_from(&path, Some(&format!("{epoch}-0"))).await;
    let before_end = crate::support::until(&mut replay, |kind, data| {
        kind == "turn.ended" && data["session_id"] == root
    })
    .await;
    assert!(
        before_end
            .iter()
            .any(|(kind, data)| kind == "model.retry" && data["session_id"] != root),
        "{before_end:?}"
    );
    assert!(!sent.err.contains("the model call failed"), "{}", sent.err);
}

#[tokio::test]
async fn model_and_agent_choose_for_a_new_conversation() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n\
             [agents.reviewer]\ndescription = \"Reviews\"\nmodel = \"demo\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    let sent = send(
        &server,
        &["--agent", "reviewer", "--model", "demo", "Hi"],
        "",
        workdir.path(),
    )
    .await;
    assert_eq!(sent.code, 0, "{}", sent.err);
    let id = sent.conversation();
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        (&conversation["agent"], &conversation["model"]),
        (&json!("reviewer"), &json!("demo")),
        "{conversation}"
    );
    let unknown = send(
        &server,
        &["--model", "no-such-model", "Hi"],
        "",
        workdir.path(),
    )
    .await;
    assert_eq!(unknown.code, 2, "{}", unknown.err);
}

#[tokio::test]
async fn ctrl_c_while_the_message_waits_takes_it_back() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let created = server
        .post(
            "/api/conversations",
            json!({ "text": "/sleep 300\nA long answer", "cwd": workdir.path() }),
        )
        .await
        .1;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    let (child, mut stderr, _) = started(command(
        &server,
        &["--conversation", &id, "--mode", "queue", "Later"],
        workdir.path(),
    ))
    .await;
    events_until(&mut events, "pending.updated").await;
    let pid = child.id().expect("running") as i32;
    signal(pid, libc::SIGINT);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    let err = rest(&mut stderr).await;
    assert_eq!(output.status.code(), Some(130), "{err}");
    assert!(err.contains("your message was withdrawn"), "{err}");
    let (_, pending) = server
        .get(&format!("/api/conversations/{id}/pending"))
        .await;
    assert_eq!(pending["pending"], json!([]), "{pending}");
    // The running turn was not the message's: it goes on.
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert!(conversation["last_turn"].is_null(), "{conversation}");
}

#[tokio::test]
async fn a_second_ctrl_c_leaves_at_once_saying_the_turn_may_still_run() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (child, mut stderr, _) = started_long_turn(&server, workdir.path()).await;
    // The service is frozen: the interrupt the first Ctrl-C asks for cannot end the turn.
    let service = server.child.id().expect("running") as i32;
    let pid = child.id().expect("running") as i32;
    signal(service, libc::SIGSTOP);
    signal(pid, libc::SIGINT);
    let first = tokio::time::timeout(TIMEOUT, stderr.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .unwrap_or_default();
    assert!(first.starts_with("interrupting the turn"), "{first}");
    signal(pid, libc::SIGINT);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    signal(service, libc::SIGCONT);
    let err = rest(&mut stderr).await;
    assert_eq!(output.status.code(), Some(130), "{err}");
    assert!(err.contains("the turn may still be running"), "{err}");
}
