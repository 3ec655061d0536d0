//! Approvals in the command-line clients: `openvaala chat` asks and the next line answers (in
//! a script, or typed while it runs), `openvaala send` asks at a terminal (a pty here) and
//! otherwise exits 4 saying how to answer, leaving the approval to another client.

use std::io::{Read as _, Write as _};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::harness::{Server, ServerOptions, TIMEOUT, binary};
use crate::support::{items, until_turn_end};
use crate::terminal::chat;

/// A server whose default agent asks before every shell command.
async fn asking_server() -> Server {
    Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await
}

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The only waiting approval.
async fn pending(server: &Server) -> Value {
    let (_, list) = server.get("/api/approvals").await;
    let approvals = list["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{list}");
    approvals[0].clone()
}

async fn last_tool_call(server: &Server, id: &str) -> Value {
    items(server, id)
        .await
        .into_iter()
        .rev()
        .find(|item| item["kind"] == "tool_call")
        .expect("a tool call")
}

/// Asserts that `expected` appear in `out` in this order.
fn in_order(out: &str, expected: &[&str]) {
    let mut from = 0;
    for expected in expected {
        let at = out[from..]
            .find(expected)
            .unwrap_or_else(|| panic!("`{expected}` missing after byte {from} of:\n{out}"));
        from += at + expected.len();
    }
}

/// What an `openvaala send` run gave: its exit code, stdout and stderr.
async fn send(server: &Server, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let child = Command::new(binary())
        .env("OPENVAALA_TOKEN", &server.token)
        .arg("send")
        .args(args)
        .args(["--url", &server.base])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary runs");
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    (
        output.status.code().expect("an exit code"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn conversation_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("conversation "))
        .unwrap_or_else(|| panic!("no conversation id on stderr: {stderr}"))
        .to_owned()
}

#[tokio::test]
async fn send_without_a_terminal_exits_4_and_leaves_the_approval_to_another_client() {
    let server = asking_server().await;
    let dir = workspace();
    let (code, out, err) = send(&server, &["--json", "/shell touch ran.txt"], dir.path()).await;
    assert_eq!(code, 4, "{out}\n{err}");
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "approval.requested", "{out}");
    let approval = &last["approval"];
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["subject"]["command"], "touch ran.txt");
    let id = conversation_of(&err);
    assert_eq!(approval["conversation_id"], id.as_str());

    // Still waiting on the server, and another client's answer lets the turn go on.
    assert_eq!(pending(&server).await["id"], approval["id"]);
    assert!(!dir.path().join("ran.txt").exists());
    let mut events = server.events(&id).await;
    let approval_id = approval["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let seen = until_turn_end(&mut events).await;
    assert_eq!(seen.last().unwrap().1["status"], "completed");
    assert!(dir.path().join("ran.txt").exists());

    // Without --json, stderr names the approval and how to answer it.
    let (code, out, err) = send(&server, &["/shell touch other.txt"], dir.path()).await;
    assert_eq!(code, 4, "{out}\n{err}");
    let approval = pending(&server).await;
    let approval_id = approval["id"].as_str().unwrap();
    in_order(
        &err,
        &[
            &format!("approval {approval_id} waits: `shell` $ touch other.txt"),
            // The client had the token in its environment: the line names it from there.
            &format!(
                "curl -X POST {}/api/approvals/{approval_id} -H \"Authorization: Bearer \
                 $OPENVAALA_TOKEN\" -H 'Content-Type: application/json' \
                 -d '{{\"decision\":\"allow_once\"}}'",
                server.base
            ),
        ],
    );
    assert!(!out.contains("approval.requested"), "{out}");
}

#[tokio::test]
async fn chat_in_a_script_answers_yes_then_no_with_a_message() {
    let server = asking_server().await;
    let dir = workspace();
    let script = "\
//shell touch ran.txt
y
//shell touch denied.txt
n
use the make target instead
";
    let (ok, out, err) = chat(&["--url", &server.base], script, dir.path()).await;
    assert!(ok, "{out}\n{err}");
    let cwd = dir.path().canonicalize().unwrap();
    let first = format!(
        "] the agent asks to use `shell`:\n  $ touch ran.txt\n  in {}\n",
        cwd.display()
    );
    in_order(
        &out,
        &[
            "[approval ap_",
            &first,
            "rule an always/conversation answer keeps: `touch ran.txt` (only this)\n",
            "Allow? [y]es once / [c]onversation / [a]lways / [n]o: y\n",
            ": allowed once]\n",
            "[exit 0]",
            "  $ touch denied.txt\n",
            "[n]o: n\nMessage to the agent (optional, Enter for none): use the make target instead\n",
            ": denied: use the make target instead]\n",
        ],
    );
    assert!(dir.path().join("ran.txt").exists());
    assert!(!dir.path().join("denied.txt").exists());
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let tool = last_tool_call(&server, id).await;
    assert_eq!(
        tool["output"],
        "Not run: the user denied this call: use the make target instead"
    );
}

#[tokio::test]
async fn chat_keeps_an_edited_rule_for_the_conversation() {
    let server = asking_server().await;
    let dir = workspace();
    let script = "//shell touch one.txt\nc\ntouch *\n//shell touch two.txt\n";
    let (ok, out, err) = chat(&["--url", &server.base], script, dir.path()).await;
    assert!(ok, "{out}\n{err}");
    in_order(
        &out,
        &[
            "[n]o: c\nRule to keep [touch one.txt] (Enter keeps it, or type another): touch *\n",
            ": allowed; the rule \"touch *\" is kept for this conversation]\n",
            "[shell] $ touch two.txt\n",
        ],
    );
    assert_eq!(out.matches("asks to use `shell`").count(), 1, "{out}");
    assert!(dir.path().join("two.txt").exists());
    let (_, rules) = server.get("/api/rules").await;
    assert_eq!(rules["rules"][0]["pattern"], "touch *", "{rules}");
    assert_eq!(rules["rules"][0]["scope"]["kind"], "conversation");
    // Made by the terminal client, as the token it presented says.
    assert_eq!(rules["rules"][0]["created_by"], "cli");
}

#[tokio::test]
async fn chat_allows_an_escalation_only_once() {
    // The default permissions: shell runs in the sandbox, and asks only to leave it.
    let server = Server::start_with(ServerOptions {
        config: Some("[agents.default]\ndescription = \"d\"\nmodel = \"demo\"\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let dir = workspace();
    let outside = workspace();
    let target = outside.path().join("escalated.txt");
    let script = format!(
        "//escalate needs the shared report: echo hi > {}\na\ny\n",
        target.display()
    );
    let (ok, out, err) = chat(&["--url", &server.base], &script, dir.path()).await;
    assert!(ok, "{out}\n{err}");
    in_order(
        &out,
        &[
            "  OUTSIDE the sandbox, because: needs the shared report\n",
            "Allow? [y]es once / [n]o: a\n[running outside the sandbox is never remembered: \
             answer y or n] Allow? [y]es once / [n]o: y\n",
            ": allowed once]\n",
        ],
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
}

/// `openvaala chat` left running: lines typed one at a time, its output read as it comes.
struct LiveChat {
    child: Child,
    stdin: ChildStdin,
    chunks: mpsc::UnboundedReceiver<Vec<u8>>,
    out: Vec<u8>,
    /// How far `expect` has read.
    from: usize,
}

impl LiveChat {
    async fn start(server: &Server, cwd: &Path) -> LiveChat {
        let mut child = Command::new(binary())
            .env("OPENVAALA_TOKEN", &server.token)
            .args(["chat", "--url", &server.base])
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the binary runs");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (sender, chunks) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buffer = vec![0; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buffer).await {
                if sender.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        LiveChat {
            child,
            stdin,
            chunks,
            out: Vec::new(),
            from: 0,
        }
    }

    async fn type_line(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// Waits until `text` is printed after what was expected before.
    async fn expect(&mut self, text: &str) {
        expect_in(&mut self.chunks, &mut self.out, &mut self.from, text).await;
    }
}

/// Reads `chunks` into `out` until `text` appears after byte `from`, which then moves past it.
async fn expect_in(
    chunks: &mut mpsc::UnboundedReceiver<Vec<u8>>,
    out: &mut Vec<u8>,
    from: &mut usize,
    text: &str,
) {
    let found = tokio::time::timeout(TIMEOUT, async {
        loop {
            let printed = String::from_utf8_lossy(&out[*from..]).into_owned();
            if let Some(at) = printed.find(text) {
                *from += printed[..at + text.len()].len();
                return true;
            }
            match chunks.recv().await {
                Some(chunk) => out.extend(chunk),
                None => return false,
            }
        }
    })
    .await;
    if found != Ok(true) {
        panic!(
            "`{text}` was not printed ({}) after byte {from} of:\n{}",
            if found.is_err() {
                "in time"
            } else {
                "it ended"
            },
            String::from_utf8_lossy(out)
        );
    }
}

#[tokio::test]
async fn a_sub_agents_question_names_it_shows_in_agents_and_closes_when_answered_elsewhere() {
    let server = asking_server().await;
    let dir = workspace();
    let mut terminal = LiveChat::start(&server, dir.path()).await;
    terminal
        .type_line("//spawn default: /shell touch child.txt")
        .await;
    terminal.expect("] sub-agent `default` (s_").await;
    terminal.expect("asks to use `shell`:\n").await;
    terminal.expect("Allow? [y]es once").await;
    let approval = pending(&server).await;
    let approval_id = approval["id"].as_str().unwrap();

    // `/agents` in the middle of the question shows who waits, then asks again.
    terminal.type_line("/agents").await;
    terminal.expect("[root default (").await;
    terminal.expect("  [sub-agent default (").await;
    terminal
        .expect(&format!(
            "    waits for approval {approval_id}: shell $ touch child.txt\n"
        ))
        .await;
    terminal.expect("Allow? [y]es once").await;

    // Another client answers first: the question is dropped with its outcome.
    let (status, body) = server
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    terminal
        .expect(&format!("[approval {approval_id} was answered by "))
        .await;
    terminal.expect(": allowed once]\n").await;
    server
        .wait_idle(approval["conversation_id"].as_str().unwrap())
        .await;
    assert!(dir.path().join("child.txt").exists());

    // The next line is a message again, not an answer.
    terminal.type_line("/quit").await;
    let status = tokio::time::timeout(TIMEOUT, terminal.child.wait())
        .await
        .expect("the chat ends in time")
        .unwrap();
    assert!(status.success());
}

/// A pseudo-terminal: the child's stdin and stderr are its terminal side; the test reads and
/// types on the other.
struct Pty {
    master: std::fs::File,
    terminal: OwnedFd,
}

fn pty() -> Pty {
    let (mut master, mut terminal) = (-1, -1);
    // SAFETY: openpty(3) fills two descriptors it opened, which are owned from here on.
    let result = unsafe {
        libc::openpty(
            &mut master,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(result, 0, "openpty: {}", std::io::Error::last_os_error());
    for fd in [master, terminal] {
        // SAFETY: fcntl(2) on a descriptor just opened. Other tests' children must not hold
        // the terminal open: the reader would then never see its end.
        assert_eq!(
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) },
            0
        );
    }
    // SAFETY: both descriptors are open and owned by nothing else.
    unsafe {
        Pty {
            master: std::fs::File::from_raw_fd(master),
            terminal: OwnedFd::from_raw_fd(terminal),
        }
    }
}

/// `openvaala send` at a terminal: its prompts as they come, lines typed, and its stdout.
async fn send_at_a_terminal(
    server: &Server,
    text: &str,
    cwd: &Path,
) -> (Child, std::fs::File, mpsc::UnboundedReceiver<Vec<u8>>) {
    let Pty { master, terminal } = pty();
    let child = Command::new(binary())
        .env("OPENVAALA_TOKEN", &server.token)
        .args(["send", "--url", &server.base, text])
        .current_dir(cwd)
        .stdin(Stdio::from(terminal.try_clone().unwrap()))
        .stderr(Stdio::from(terminal))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary runs");
    // Only the child holds the terminal side now: the reader ends when the child does.
    let (sender, chunks) = mpsc::unbounded_channel();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buffer = vec![0; 4096];
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            if sender.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    (child, master, chunks)
}

#[tokio::test]
async fn send_at_a_terminal_asks_and_goes_on_or_closes_the_question_answered_elsewhere() {
    let server = asking_server().await;
    let dir = workspace();
    let (child, mut master, mut chunks) =
        send_at_a_terminal(&server, "/shell touch tty.txt", dir.path()).await;
    let (mut seen, mut from) = (Vec::new(), 0);
    expect_in(&mut chunks, &mut seen, &mut from, "$ touch tty.txt").await;
    expect_in(&mut chunks, &mut seen, &mut from, "Allow? [y]es once").await;
    master.write_all(b"y\n").unwrap();
    expect_in(&mut chunks, &mut seen, &mut from, ": allowed once]").await;
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time")
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let reply = String::from_utf8_lossy(&output.stdout);
    assert!(reply.contains("The shell tool returned 0 bytes"), "{reply}");
    assert!(dir.path().join("tty.txt").exists());

    // Answered by another client while the question waits: `send` drops it, follows the turn
    // to its end and exits, though its read of the terminal never got a line.
    let (child, _master, mut chunks) =
        send_at_a_terminal(&server, "/shell touch elsewhere.txt", dir.path()).await;
    let (mut seen, mut from) = (Vec::new(), 0);
    expect_in(&mut chunks, &mut seen, &mut from, "Allow? [y]es once").await;
    let approval = pending(&server).await;
    let approval_id = approval["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/api/approvals/{approval_id}"),
            json!({"decision": "deny", "message": "not from here"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    expect_in(
        &mut chunks,
        &mut seen,
        &mut from,
        ": denied: not from here]",
    )
    .await;
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("send ends in time without a line typed")
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!dir.path().join("elsewhere.txt").exists());
}

#[tokio::test]
async fn a_command_that_would_spoof_the_prompt_shows_its_escapes_in_send_and_chat() {
    let server = asking_server().await;
    let dir = workspace();
    // ESC [2K and a carriage return would draw `$ ls -la` over the real command; the others
    // are a zero-width space and a right-to-left override.
    let spoof = "touch spoofed.txt # \u{1b}[2K\r$ ls -la \u{200b}\u{202e}";
    let (code, out, err) = send(&server, &[&format!("/shell {spoof}")], dir.path()).await;
    assert_eq!(code, 4, "{out}\n{err}");
    assert!(
        err.contains("$ touch spoofed.txt # \\x1b[2K\\x0d$ ls -la <U+200B><U+202E>"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "{err:?}");
    // The plain chat asks with the same escapes.
    let script = format!("//shell {spoof}\nn\n\n");
    let (ok, out, err) = chat(&["--url", &server.base], &script, dir.path()).await;
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("\\x1b[2K\\x0d$ ls -la <U+200B><U+202E>"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}') && !out.contains('\r'), "{out:?}");
    assert!(!dir.path().join("spoofed.txt").exists());
}
