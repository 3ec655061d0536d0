//! The terminal client (`openvaala chat`), driven through its stdin like a script.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use openvaala::index::rebuild::INTERRUPTED_BY_STOP;

use crate::fake_provider::Reply;
use crate::harness::{Server, ServerOptions, TIMEOUT, binary};
use crate::support::events_until;

/// Runs `openvaala chat` with `args` and `script` on stdin; returns what it printed and whether
/// it exited successfully.
pub async fn chat(args: &[&str], script: &str, cwd: &std::path::Path) -> (bool, String, String) {
    let url = args
        .iter()
        .position(|arg| *arg == "--url")
        .and_then(|at| args.get(at + 1))
        .copied()
        .unwrap_or_default();
    let mut command = Command::new(binary());
    crate::harness::with_token(&mut command, url);
    let mut child = command
        .arg("chat")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("the chat ends in time")
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Each of `expect` appears in `out`, in that order.
fn assert_in_order(out: &str, err: &str, expect: &[&str]) {
    let mut from = 0;
    for expected in expect {
        let at = out[from..].find(expected).unwrap_or_else(|| {
            panic!("`{expected}` missing after byte {from} of:\n{out}\nstderr:\n{err}")
        });
        from += at + expected.len();
    }
}

#[tokio::test]
async fn a_script_talks_to_the_agent_and_uses_every_command() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let script = "\
Hello from a script
//shell echo output-from-the-tool
/context
/compact
/agents
/fork
/rewind
/rewind 2
/resume
/queue
/bogus
/shell ls -l
/quit
";
    let (ok, out, err) = chat(&["--url", &server.base], script, workdir.path()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let expect = [
        "agent: Demo model (offline, built in): you said \"Hello from a script\".",
        "[shell] $ echo output-from-the-tool\noutput-from-the-tool\n[exit 0]\n",
        "The shell tool returned 21 bytes (exit code 0).",
        "[context: ",
        "[compressing the context…]",
        "[summary of the earlier history] ",
        "[context compressed: ",
        "[root default (idle) s_",
        "[forked into c_",
        "[1] Hello from a script\n[2] /shell echo output-from-the-tool\n",
        "[rewound into c_",
        "your message was: /shell echo output-from-the-tool]",
        "[/queue TEXT sends TEXT to wait until the agent is done]",
        "[unknown command /bogus; /help lists them]",
        "[/shell is not a command here but a directive for the demo model: send it to the model with //shell ls -l]",
    ];
    assert_in_order(&out, &err, &expect);
    // The conversation was created in the directory the client ran in.
    let (_, list) = server.get("/api/conversations?archived=all").await;
    let conversations = list["conversations"].as_array().unwrap();
    assert_eq!(
        conversations.len(),
        3,
        "the original, the fork, the rewind: {list}"
    );
    let cwd = workdir.path().canonicalize().unwrap();
    assert!(
        conversations
            .iter()
            .all(|c| std::path::Path::new(c["cwd"].as_str().unwrap()) == cwd),
        "{list}"
    );
}

#[tokio::test]
async fn resuming_shows_the_history_and_continues_the_conversation() {
    let server = Server::start().await;
    let created = server.create_and_wait("The first message").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let (ok, out, err) = chat(
        &["--url", &server.base, id],
        "And a second one\n",
        workdir.path(),
    )
    .await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("you: The first message\n"), "{out}");
    assert!(
        out.contains("agent: Demo model (offline, built in): you said \"And a second one\"."),
        "{out}"
    );
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(items["items"].as_array().unwrap().len(), 4, "{items}");
}

#[tokio::test]
async fn no_service_is_a_clear_error() {
    let workdir = tempfile::tempdir().unwrap();
    let (ok, _, err) = chat(&["--url", "http://127.0.0.1:9"], "hello\n", workdir.path()).await;
    assert!(!ok);
    assert!(
        err.contains("connection refused at http://127.0.0.1:9: is `openvaala serve` running?"),
        "{err}"
    );
}

#[tokio::test]
async fn a_terminal_that_loses_the_service_mid_turn_shows_what_was_stored_meanwhile() {
    // A fixed port, so the restarted service is where the terminal looks for it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = || ServerOptions {
        addr: Some(format!("127.0.0.1:{port}")),
        ..ServerOptions::default()
    };
    let server = Server::start_with(options()).await;
    let created = server.create_and_wait("The first message").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    let workdir = tempfile::tempdir().unwrap();
    // `//` sends a line starting with `/`: the demo model streams one chunk every 300 ms.
    let terminal = tokio::spawn({
        let (base, id, dir) = (server.base.clone(), id.clone(), workdir.path().to_owned());
        async move { chat(&["--url", &base, &id], "//sleep 300\n", &dir).await }
    });
    // The terminal's turn is streaming: the service crashes and comes back.
    events_until(&mut events, "item.delta").await;
    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        ..options()
    })
    .await;

    // The terminal reconnects, shows what the restart stored (the interrupted turn's notice)
    // and, seeing the turn is no longer running, goes on to the end of its script.
    let (ok, out, err) = terminal.await.unwrap();
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("[the event stream ended; reconnecting…]\n[reconnected]\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("[notice] {INTERRUPTED_BY_STOP}")),
        "{out}"
    );
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let kinds: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["kind"].as_str().unwrap())
        .collect();
    // The streaming answer lived in memory only; the restart closed its turn with a notice.
    assert_eq!(
        kinds,
        ["user_message", "agent_message", "user_message", "notice"],
        "{items}"
    );
}

#[tokio::test]
async fn retry_runs_a_failed_turn_again() {
    // One attempt per model call: the demo model's `/fail 1` fails the turn.
    let server = Server::start_with(ServerOptions {
        config: Some("[retry]\nmax_attempts = 1\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    let script = "Try this\n//fail 1\n/retry\n/retry\n/quit\n";
    let (ok, out, err) = chat(&["--url", &server.base], script, workdir.path()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let expect = [
        "simulated transient failure 1 of 1",
        "[running the failed turn again]",
        "agent: Demo model (offline, built in): you said \"/fail 1\".",
        "the latest turn t_",
    ];
    assert_in_order(&out, &err, &expect);
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let items = crate::support::items(&server, id).await;
    let messages = items
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .count();
    assert_eq!(messages, 2, "{items:?}");
}

#[tokio::test]
async fn diff_shows_what_a_turn_changed_and_rewind_files_puts_it_back() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let script = "\
Hello
//write notes.txt: first version
//shell echo second line >> notes.txt
/diff
/diff 2
/rewind 2 --files
/quit
";
    let (ok, out, err) = chat(&["--url", &server.base], script, workdir.path()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let expect = [
        // The note after each turn that changed files.
        "[1 file changed",
        "[1 file changed",
        // `/diff`: the last turn that changed files, the shell's append.
        "[1 file changed]\n--- a/notes.txt\n+++ b/notes.txt\n",
        // (The demo's write ends without a newline, so the line was appended to it.)
        "-first version\n\\ No newline at end of file\n+first versionsecond line",
        // `/diff 2`: the write.
        "[1 file changed]\n",
        "@@ -0,0 +1 @@\n+first version",
        // The rewind to before the write takes the file away.
        "[restored 1 file; undo: POST /api/conversations/…/restores/",
        "[rewound into c_",
    ];
    assert_in_order(&out, &err, &expect);
    assert!(
        !workdir.path().join("notes.txt").exists(),
        "the file written after message 2 is gone:\n{out}"
    );
}

#[tokio::test]
async fn a_plan_prints_as_a_checklist_live_and_in_the_history() {
    let (fake, server) = crate::plan::plan_server().await;
    crate::plan::push_plan_turn(&fake);
    let workdir = tempfile::tempdir().unwrap();
    let (ok, out, err) = chat(&["--url", &server.base], "Plan it\n", workdir.path()).await;
    assert!(ok, "{out}\n{err}");
    let checklist = "[plan]\n  Small steps.\n  [x] Read it\n  [>] Fix it\n  [ ] Test it\n";
    assert_in_order(&out, &err, &[checklist, "agent: Planned."]);

    // Resumed, the history shows it the same way.
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    fake.push(Reply::text("Still planned."));
    let (ok, out, err) = chat(&["--url", &server.base, id], "And now?\n", workdir.path()).await;
    assert!(ok, "{out}\n{err}");
    assert_in_order(
        &out,
        &err,
        &["you: Plan it\n", checklist, "agent: Still planned."],
    );
}

#[tokio::test]
async fn each_turn_ends_with_its_tokens_and_cost() {
    let (fake, server) = crate::support::priced_server().await;
    fake.push(Reply::text("Counted."));
    let workdir = tempfile::tempdir().unwrap();
    let (ok, out, err) = chat(&["--url", &server.base], "Count it\n", workdir.path()).await;
    assert!(ok, "{out}\n{err}");
    let figures = format!("[{}]\n", crate::support::answer_figures());
    assert_in_order(&out, &err, &["agent: Counted.\n", &figures]);
}

/// A service whose agent, on the next message, starts `echo ready; sleep 30` in the background
/// and answers "Started."; for the chats' `/ps`.
pub(crate) async fn background_server() -> (crate::fake_provider::FakeProvider, Server) {
    let fake =
        crate::fake_provider::FakeProvider::start(crate::fake_provider::Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    fake.push(Reply::tool_call(
        "shell",
        serde_json::json!({"command": "echo ready; sleep 30", "background": true}),
        1,
    ));
    fake.push(Reply::text("Started."));
    (fake, server)
}

#[tokio::test]
async fn ps_lists_the_background_processes_and_stops_one() {
    let (_fake, server) = background_server().await;
    let workdir = tempfile::tempdir().unwrap();
    let script = "Start it\n/ps\n/ps 1\n/ps stop 1\n/ps stop 1\n/ps\n/ps p_none\n/ps stop\n/quit\n";
    let (ok, out, err) = chat(&["--url", &server.base], script, workdir.path()).await;
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let (_, listed) = server
        .get(&format!("/api/conversations/{id}/processes"))
        .await;
    let process = &listed["processes"][0];
    let pid = process["id"].as_str().unwrap();
    assert_eq!(process["status"], "killed", "{listed}");
    let expect = [
        "agent: Started.",
        "[background processes: 1 running, 0 ended; /ps N shows one's output, /ps stop N stops it]\n",
        &format!("[1] {pid} running · $ echo ready; sleep 30\n"),
        &format!("[{pid} running · $ echo ready; sleep 30]\nready\n"),
        &format!("[{pid} stopped (a user stopped it)]\n"),
        &format!("[{pid} is not running: stopped (a user stopped it)]\n"),
        "[background processes: 0 running, 1 ended; /ps N shows one's output, /ps stop N stops it]\n",
        &format!("[1] {pid} stopped (a user stopped it) · $ echo ready; sleep 30\n"),
        "[no background process p_none in this conversation; /ps lists them]\n",
        "[/ps lists the background processes; /ps N (or ID) shows one's latest output; /ps stop N stops one]",
    ];
    let expect: Vec<&str> = expect.iter().map(|line| &**line).collect();
    assert_in_order(&out, &err, &expect);
}
