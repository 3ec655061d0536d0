//! `openvaala chat` in a real terminal (tmux). Full-screen: keys arrive as the escape
//! sequences a terminal sends and a paste as a bracketed paste, so what is stored is what was
//! typed — no escape codes, no message per pasted line —, Alt-↑ is a key of its own, and
//! quitting gives the terminal back. Plain (`--plain`): Ctrl-C is the terminal's SIGINT, which
//! interrupts the turn, not the client.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT, binary};
use crate::support::items;

/// A tmux server of the test's own (its own socket), killed when the test ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str, cwd: &std::path::Path) -> Tmux {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: format!("openvaala-test-{}-{n}", std::process::id()),
        };
        let cwd = cwd.display().to_string();
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "-c",
            &cwd,
            command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs (the CI installs it)");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn pane(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["-L", &self.socket, "has-session"])
            .output()
            .is_ok_and(|output| output.status.success())
    }

    /// Waits for the command (and so the session) to end.
    async fn until_gone(&self) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while self.alive() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "chat did not quit:\n{}",
                self.pane()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls the pane until `done` holds for it (a terminal has no event to wait on).
    async fn until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let pane = self.pane();
            if done(&pane) {
                return pane;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} did not show; the pane:\n{pane}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn user_texts(items: &[Value]) -> Vec<&str> {
    items
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn keys_and_a_paste_in_a_real_terminal_are_stored_as_typed() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let command = format!(
        "{} chat --url {} --data-dir {}",
        binary(),
        server.base,
        server.data_dir.display()
    );
    let tmux = Tmux::start(&command, workdir.path());
    tmux.until("the input box", |pane| pane.contains("Enter sends"))
        .await;

    tmux.run(&["send-keys", "fix the typo", "Left", "Left", "X", "Enter"]);
    tmux.until("the first reply", |pane| {
        pane.contains("you said \"fix the tyXpo\"") && pane.contains("Enter sends")
    })
    .await;

    tmux.run(&["set-buffer", "def f():\n    if x:\n        return 1"]);
    tmux.run(&["paste-buffer", "-p"]);
    tmux.run(&["send-keys", "Enter"]);
    tmux.until("the second reply", |pane| {
        pane.contains("you said \"def f():")
    })
    .await;

    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let items = items(&server, id).await;
    assert_eq!(
        user_texts(&items),
        ["fix the tyXpo", "def f():\n    if x:\n        return 1"]
    );

    // Ctrl-D on an empty input quits, and the shell's screen comes back.
    tmux.run(&["send-keys", "C-d"]);
    tmux.until_gone().await;
}

#[tokio::test]
async fn alt_up_selects_a_tool_call_and_ctrl_o_unfolds_it() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let command = format!(
        "{} chat --url {} --data-dir {}",
        binary(),
        server.base,
        server.data_dir.display()
    );
    let tmux = Tmux::start(&command, workdir.path());
    tmux.until("the input box", |pane| pane.contains("Enter sends"))
        .await;
    tmux.run(&["send-keys", "//shell seq 1 30", "Enter"]);
    tmux.until("the folded output", |pane| {
        pane.contains("⋮ 26 more lines") && pane.contains("Enter sends")
    })
    .await;
    tmux.run(&["send-keys", "M-Up", "C-o"]);
    let pane = tmux
        .until("the whole output", |pane| {
            pane.lines().any(|row| row.trim_end() == "  5")
        })
        .await;
    assert!(!pane.contains("more lines"), "{pane}");
}

#[tokio::test]
async fn plain_chat_ctrl_c_interrupts_the_turn_and_a_second_quits() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    fake.push(Reply::tool_call("shell", json!({"command": "sleep 30"}), 1));
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    let command = format!(
        "{} chat --plain --url {} --data-dir {}",
        binary(),
        server.base,
        server.data_dir.display()
    );
    let tmux = Tmux::start(&command, workdir.path());
    tmux.until("the greeting", |pane| pane.contains("Type a message"))
        .await;
    tmux.run(&["send-keys", "Run the long command", "Enter"]);
    tmux.until("the running command", |pane| pane.contains("$ sleep 30"))
        .await;

    tmux.run(&["send-keys", "C-c"]);
    tmux.until("the interrupt", |pane| {
        pane.contains("[interrupting the turn… Ctrl-C again quits]")
    })
    .await;
    let (_, list) = server.get("/api/conversations").await;
    let id = list["conversations"][0]["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
        if conversation["last_turn"]["status"] == "interrupted" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn was not interrupted: {conversation}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The client lives on and gives the prompt back once the turn has ended.
    tmux.until("the prompt after the turn", |pane| {
        pane.trim_end().ends_with('>')
    })
    .await;
    assert!(tmux.alive(), "{}", tmux.pane());
    let items = items(&server, &id).await;
    assert_eq!(user_texts(&items), ["Run the long command"]);

    // Nothing runs now: Ctrl-C quits.
    tmux.run(&["send-keys", "C-c"]);
    tmux.until_gone().await;
}

#[tokio::test]
async fn a_command_that_would_spoof_the_approval_shows_its_escapes_in_a_real_terminal() {
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..crate::harness::ServerOptions::default()
    })
    .await;
    let workdir = tempfile::tempdir().unwrap();
    // An escape sequence and a carriage return that would draw `$ ls -la` over the command.
    let text = "/shell touch spoofed.txt # \u{1b}[2K\r$ ls -la";
    let (status, created) = server
        .post(
            "/api/conversations",
            serde_json::json!({"text": text, "cwd": workdir.path()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap();
    let command = format!(
        "{} chat --url {} --data-dir {} {id}",
        binary(),
        server.base,
        server.data_dir.display()
    );
    let tmux = Tmux::start(&command, workdir.path());
    let pane = tmux
        .until("the approval", |pane| pane.contains("Allow? [y]es once"))
        .await;
    assert!(
        pane.contains(r"$ touch spoofed.txt # \x1b[2K\x0d$ ls -la"),
        "{pane}"
    );
    tmux.run(&["send-keys", "n", "Enter", "Enter"]);
    tmux.until("the denial", |pane| pane.contains("denied"))
        .await;
    assert!(!workdir.path().join("spoofed.txt").exists());
}
