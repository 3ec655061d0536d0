//! The full-screen `openvaala chat` in a real terminal (tmux): keys arrive as the escape
//! sequences a terminal sends and a paste as a bracketed paste, so what is stored is what was
//! typed — no escape codes, no message per pasted line — and quitting gives the terminal back.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Server, TIMEOUT, binary};
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
    let command = format!("{} chat --url {}", binary(), server.base);
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
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while tmux.alive() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "chat did not quit:\n{}",
            tmux.pane()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
