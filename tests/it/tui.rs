//! The full-screen `openvaala chat`, driven for real: its `App` gets keys and pastes as the
//! terminal would give them, follows a running service (the demo model), and is drawn on
//! ratatui's test backend, whose screen the tests read.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

use openvaala::client::api::Api;
use openvaala::client::tui::App;

use crate::harness::{Server, ServerOptions, TIMEOUT};
use crate::support::{events_until, items};

struct Screen {
    app: App,
    terminal: Terminal<TestBackend>,
    _workdir: tempfile::TempDir,
}

impl Screen {
    fn new(server: &Server) -> Screen {
        Screen::sized(server, 100, 30)
    }

    /// A terminal of `width` columns and `height` rows.
    fn sized(server: &Server, width: u16, height: u16) -> Screen {
        let workdir = tempfile::tempdir().unwrap();
        let cwd = workdir.path().display().to_string();
        let app = App::new(Api::new(&server.base, Some(server.token.clone())), cwd);
        let terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        Screen {
            app,
            terminal,
            _workdir: workdir,
        }
    }

    /// What the terminal shows now, row by row.
    fn text(&mut self) -> String {
        self.terminal.draw(|frame| self.app.draw(frame)).unwrap();
        let buffer = self.terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..buffer.area.height {
            for x in 0..buffer.area.width {
                text += buffer[(x, y)].symbol();
            }
            text.push('\n');
        }
        text
    }

    async fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        self.app.key(KeyEvent::new(code, modifiers)).await;
    }

    async fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c), KeyModifiers::NONE).await;
        }
    }

    async fn enter(&mut self) {
        self.key(KeyCode::Enter, KeyModifiers::NONE).await;
    }

    /// Takes in the conversation's events until `done` holds for the screen and the app.
    async fn until(&mut self, what: &str, done: impl Fn(&str, &App) -> bool) -> String {
        let waited = tokio::time::timeout(TIMEOUT, async {
            loop {
                let screen = self.text();
                if done(&screen, &self.app) {
                    return screen;
                }
                let feed = self.app.next_feed().await;
                self.app.apply(feed).await;
            }
        })
        .await;
        match waited {
            Ok(screen) => screen,
            Err(_) => {
                let shown = self.text();
                panic!(
                    "{what} did not happen; waiting: {:?}; the screen:\n{shown}",
                    self.app.pending
                )
            }
        }
    }

    /// The colour of the first cell of `text` in a code block on the screen.
    fn code_color(&mut self, text: &str) -> Option<ratatui::style::Color> {
        let shown = self.text();
        let (row, line) = shown
            .lines()
            .enumerate()
            .find(|(_, line)| line.starts_with("  │ ") && line.contains(text))?;
        let column = line[..line.find(text)?].chars().count() as u16;
        self.terminal.backend().buffer()[(column, row as u16)]
            .style()
            .fg
    }

    /// Sends a message and waits for the demo model's answer to it, the turn ended.
    async fn say(&mut self, message: &str) -> String {
        self.type_text(message).await;
        self.enter().await;
        // `//` sends a message that starts with one `/`.
        let sent = message.strip_prefix('/').filter(|m| m.starts_with('/'));
        let said = format!("{REPLY} \"{}\"", sent.unwrap_or(message));
        self.until("the answer", |s, app| {
            app.running.is_none() && s.contains(&said)
        })
        .await
    }

    /// The directory new conversations start in.
    fn workdir(&self) -> &std::path::Path {
        self._workdir.path()
    }

    fn conversation(&self) -> String {
        self.app.conversation.clone().expect("a conversation")
    }
}

fn user_texts(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap().to_owned())
        .collect()
}

const REPLY: &str = "Demo model (offline, built in): you said";

#[tokio::test]
async fn a_streamed_reply_appears_with_the_status_line() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.type_text("Hello there").await;
    screen.enter().await;
    let shown = screen
        .until("the reply", |s, app| {
            s.contains(&format!("{REPLY} \"Hello there\"")) && app.running.is_none()
        })
        .await;
    assert!(shown.contains("› Hello there"), "{shown}");
    let status = shown.lines().last().unwrap();
    assert!(
        status.contains("demo · default · ctx ") && status.contains("● connected"),
        "{status}"
    );
}

#[tokio::test]
async fn arrow_keys_edit_the_message_that_is_sent() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.type_text("fix the typo").await;
    screen.key(KeyCode::Left, KeyModifiers::NONE).await;
    screen.key(KeyCode::Left, KeyModifiers::NONE).await;
    screen.type_text("X").await;
    screen.key(KeyCode::Home, KeyModifiers::NONE).await;
    screen.key(KeyCode::Delete, KeyModifiers::NONE).await;
    screen.enter().await;
    screen
        .until("the reply", |s, app| {
            s.contains(REPLY) && app.running.is_none()
        })
        .await;
    let items = items(&server, &screen.conversation()).await;
    assert_eq!(user_texts(&items), ["ix the tyXpo"]);
}

#[tokio::test]
async fn a_pasted_block_is_one_message_with_its_indentation() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    let block = "Why does this fail?\r\ndef f():\r\n    if x:\r\n        return 1\r\n";
    screen.app.paste(block).await;
    // Shift-Enter adds a line of its own.
    screen.key(KeyCode::Enter, KeyModifiers::SHIFT).await;
    screen.type_text("thanks").await;
    screen.enter().await;
    screen
        .until("the reply", |s, app| {
            s.contains(REPLY) && app.running.is_none()
        })
        .await;
    let items = items(&server, &screen.conversation()).await;
    assert_eq!(
        user_texts(&items),
        ["Why does this fail?\ndef f():\n    if x:\n        return 1\n\nthanks"]
    );
}

#[tokio::test]
async fn ctrl_c_interrupts_the_turn_and_a_second_quits() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.app.paste("/sleep 300\nTake your time").await;
    screen.enter().await;
    screen
        .until("the reply streaming", |s, app| {
            app.running.is_some() && s.contains("Demo model")
        })
        .await;
    screen.key(KeyCode::Char('c'), KeyModifiers::CONTROL).await;
    assert!(!screen.app.quit);
    let shown = screen
        .until("the turn's end", |_, app| app.running.is_none())
        .await;
    assert!(shown.contains("■ interrupted"), "{shown}");
    let (_, conversation) = server
        .get(&format!("/api/conversations/{}", screen.conversation()))
        .await;
    assert_eq!(
        conversation["last_turn"]["status"], "interrupted",
        "{conversation}"
    );
    screen.key(KeyCode::Char('c'), KeyModifiers::CONTROL).await;
    assert!(screen.app.quit);
}

#[tokio::test]
async fn rewind_puts_the_chosen_message_back_in_the_input() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    for message in ["First message", "Second message"] {
        screen.say(message).await;
    }
    let original = screen.conversation();
    screen.type_text("/rewind").await;
    screen.enter().await;
    let picker = screen.text();
    assert!(
        picker.contains("rewind to before which message?"),
        "{picker}"
    );
    // The newest first; typing narrows the list.
    screen.type_text("second").await;
    screen.enter().await;
    assert_eq!(screen.app.editor.text(), "Second message");
    assert_ne!(screen.conversation(), original);
    let copy = items(&server, &screen.conversation()).await;
    assert_eq!(user_texts(&copy), ["First message"]);
}

#[tokio::test]
async fn agents_lists_a_sub_agent() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.type_text("//spawn default: count the files").await;
    screen.enter().await;
    screen
        .until("the sub-agent", |s, _| {
            s.contains("sub-agent `default` started")
        })
        .await;
    screen.type_text("/agents").await;
    screen.enter().await;
    let picker = screen.text();
    assert!(
        picker.contains("follow which agent?") && picker.contains("sub-agent default ("),
        "{picker}"
    );
    screen.key(KeyCode::Esc, KeyModifiers::NONE).await;
    let shown = screen.text();
    assert!(shown.contains("[root default ("), "{shown}");
    assert!(
        shown.contains("  [sub-agent default (") && shown.contains(": count the files]"),
        "{shown}"
    );
    // Following the sub-agent: its history, and messages would go to it.
    screen.type_text("/agents").await;
    screen.enter().await;
    screen.type_text("sub-agent").await;
    screen.enter().await;
    let followed = screen.app.focus.clone().expect("a sub-agent followed");
    assert_ne!(followed, screen.app.root_session);
    let shown = screen
        .until("the sub-agent's history", |s, _| {
            s.contains("count the files")
        })
        .await;
    assert!(
        shown.contains(&format!("following sub-agent {followed}")),
        "{shown}"
    );
}

#[tokio::test]
async fn a_restart_mid_turn_reconnects_and_gives_back_a_lost_waiting_message() {
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
    let mut screen = Screen::new(&server);
    screen.app.paste("/sleep 300\nTake your time").await;
    screen.enter().await;
    screen
        .until("the reply streaming", |s, app| {
            app.running.is_some() && s.contains("Demo model")
        })
        .await;
    // Tab: the message waits for the next turn instead of steering this one.
    screen.type_text("and then this").await;
    screen.key(KeyCode::Tab, KeyModifiers::NONE).await;
    screen
        .until("the waiting message", |s, _| {
            s.contains("⋯ 1 waiting (queue): and then this")
        })
        .await;
    let id = screen.conversation();
    let mut events = server.events(&id).await;
    events_until(&mut events, "item.delta").await;
    drop(events);
    let data_dir = server.kill9().await;
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir),
        ..options()
    })
    .await;
    let shown = screen
        .until("the reconnect", |s, _| s.contains("lost in the restart"))
        .await;
    assert!(
        shown.contains("reconnected after the service restarted"),
        "{shown}"
    );
    assert!(
        shown.contains("[cut off: this part of the answer was never stored]"),
        "{shown}"
    );
    assert!(!shown.contains("⋯ waiting"), "{shown}");
    assert_eq!(screen.app.editor.text(), "and then this");
    assert!(
        shown.lines().last().unwrap().contains("● connected"),
        "{shown}"
    );
    // Sent again, it is stored this time.
    screen.enter().await;
    screen
        .until("the reply", |s, app| {
            s.contains(&format!("{REPLY} \"and then this\"")) && app.running.is_none()
        })
        .await;
    let stored = items(&server, &id).await;
    assert_eq!(
        user_texts(&stored).last().map(String::as_str),
        Some("and then this")
    );
}

#[tokio::test]
async fn an_approval_is_asked_in_the_input_and_answered() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let mut screen = Screen::new(&server);
    screen.type_text("//shell touch made-here.txt").await;
    screen.enter().await;
    let shown = screen
        .until("the question", |s, _| {
            s.contains("approval: Allow? [y]es once")
        })
        .await;
    assert!(shown.contains("asks to use `shell`"), "{shown}");
    assert!(shown.contains("$ touch made-here.txt"), "{shown}");
    screen.type_text("y").await;
    screen.enter().await;
    let shown = screen
        .until("the turn's end", |s, app| {
            app.running.is_none()
                && app.approvals.is_empty()
                && s.contains("The shell tool returned")
        })
        .await;
    assert!(shown.contains("allowed once"), "{shown}");
    let cwd = std::path::PathBuf::from(&screen.app.cwd);
    assert!(cwd.join("made-here.txt").exists(), "{shown}");
}

#[tokio::test]
async fn a_refused_rule_keeps_the_input_on_the_approval_and_a_spoofed_command_shows_its_escapes() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let mut screen = Screen::new(&server);
    // ESC [2K and a carriage return would make a terminal show `$ ls -la` over `touch`.
    screen
        .type_text("//shell touch spoof.txt # \u{1b}[2K\r$ ls -la \u{202e}")
        .await;
    screen.enter().await;
    let shown = screen
        .until("the question", |s, _| {
            s.contains("approval: Allow? [y]es once")
        })
        .await;
    assert!(shown.contains("\\x1b[2K\\x0d$ ls -la <U+202E>"), "{shown}");
    screen.type_text("a").await;
    screen.enter().await;
    screen.type_text("cat *").await;
    screen.enter().await;
    let shown = screen
        .until("the refusal", |s, app| {
            s.contains("[refused:") && app.approvals.len() == 1
        })
        .await;
    assert!(shown.contains("does not match this call"), "{shown}");
    // Still answering the approval: `y` allows it once.
    screen.type_text("y").await;
    screen.enter().await;
    let shown = screen
        .until("the turn's end", |s, app| {
            app.running.is_none() && app.approvals.is_empty() && s.contains("allowed once")
        })
        .await;
    let cwd = std::path::PathBuf::from(&screen.app.cwd);
    assert!(cwd.join("spoof.txt").exists(), "{shown}");
}

#[tokio::test]
async fn a_retry_shows_its_countdown_until_the_model_answers() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[retry]\nmax_attempts = 3\ninitial_delay_ms = 3000\nmax_delay_ms = 3000\n".to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let mut screen = Screen::new(&server);
    screen.type_text("//fail 1").await;
    screen.enter().await;
    let shown = screen
        .until("the retry", |s, _| s.contains("attempt 2 of 3 in "))
        .await;
    assert!(
        shown.contains("↻ demo model: simulated transient failure 1 of 1"),
        "{shown}"
    );
    let shown = screen
        .until("the answer", |s, app| {
            s.contains(REPLY) && app.running.is_none()
        })
        .await;
    assert!(!shown.contains("attempt 2 of 3"), "{shown}");
}

/// What the conversation pane holds, line by line, unwrapped (long lines whole).
fn transcript_lines(app: &App) -> Vec<String> {
    app.transcript
        .lines(std::time::Instant::now())
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
async fn diff_shows_a_turns_changes_and_rewind_files_puts_them_back() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.say("Hello").await;
    screen.type_text("//write notes.txt: first version").await;
    screen.enter().await;
    screen
        .until("the turn's end", |s, app| {
            app.running.is_none() && s.contains("1 file(s) changed in the working directory")
        })
        .await;
    let notes = std::path::Path::new(&screen.app.cwd).join("notes.txt");
    assert!(notes.exists());

    screen.type_text("/diff").await;
    screen.enter().await;
    let shown = screen.text();
    assert!(shown.contains("what the turn changed"), "{shown}");
    assert!(
        shown.contains("+++ b/notes.txt") && shown.contains("+first version"),
        "{shown}"
    );
    // Esc closes it; keys go to the input again.
    screen.key(KeyCode::Esc, KeyModifiers::NONE).await;
    assert!(screen.app.overlay.is_none());
    assert!(!screen.text().contains("+++ b/notes.txt"));

    let original = screen.conversation();
    screen.type_text("/rewind 2 --files").await;
    screen.enter().await;
    assert_ne!(screen.conversation(), original);
    assert_eq!(screen.app.editor.text(), "/write notes.txt: first version");
    assert!(!notes.exists(), "the rewind took the file away");
    let lines = transcript_lines(&screen.app);
    assert!(
        lines.iter().any(|l| l == "files put back: notes.txt"),
        "{lines:#?}"
    );
    // The undo the notice names puts the file back.
    let undo = lines
        .iter()
        .find_map(|l| {
            l.split_once("undo with POST ")
                .map(|(_, path)| path.to_owned())
        })
        .unwrap_or_else(|| panic!("no undo in {lines:#?}"));
    let (status, body) = server.post(&undo, serde_json::json!({})).await;
    assert_eq!(status, 200, "{undo}: {body}");
    assert!(notes.exists(), "{body}");
}

#[tokio::test]
async fn retry_runs_a_failed_turn_again_and_fork_copies_the_conversation() {
    let server = Server::start_with(ServerOptions {
        config: Some("[retry]\nmax_attempts = 1\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let mut screen = Screen::new(&server);
    screen.type_text("//fail 1").await;
    screen.enter().await;
    screen
        .until("the failed turn", |s, app| {
            app.running.is_none() && s.contains("✗ the turn failed")
        })
        .await;
    let shown = retry_until_answered(&mut screen).await;
    assert!(shown.contains("running the failed turn again"), "{shown}");
    let original = screen.conversation();
    assert_eq!(user_texts(&items(&server, &original).await), ["/fail 1"]);

    screen.type_text("/fork").await;
    screen.enter().await;
    let copy = screen.conversation();
    assert_ne!(copy, original);
    let shown = screen.text();
    assert!(
        shown.contains(&format!("forked from {original}")),
        "{shown}"
    );
    assert_eq!(user_texts(&items(&server, &copy).await), ["/fail 1"]);
    // The copy goes on by itself.
    screen.say("In the copy").await;
    assert_eq!(user_texts(&items(&server, &original).await), ["/fail 1"]);
}

/// `/retry`, then the screen once the demo model has answered the `/fail 1` turn.
async fn retry_until_answered(screen: &mut Screen) -> String {
    screen.type_text("/retry").await;
    screen.enter().await;
    screen
        .until("the answer", |s, app| {
            app.running.is_none() && s.contains(&format!("{REPLY} \"/fail 1\""))
        })
        .await
}

#[tokio::test]
async fn retry_while_a_model_call_waits_tries_it_at_once() {
    // The demo model's `/fail 1` fails the first attempt; the next one would wait a minute.
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[retry]\nmax_attempts = 3\ninitial_delay_ms = 60000\nmax_delay_ms = 60000\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let mut screen = Screen::new(&server);
    screen.type_text("//fail 1").await;
    screen.enter().await;
    screen
        .until("the retry countdown", |s, _| {
            s.contains("attempt 2 of 3 in")
        })
        .await;
    // Well within the test's timeout, a third of the minute it would have waited.
    let shown = retry_until_answered(&mut screen).await;
    assert!(shown.contains("trying the model call again now"), "{shown}");
    // The same turn went on: nothing was posted again.
    let id = screen.conversation();
    assert_eq!(user_texts(&items(&server, &id).await), ["/fail 1"]);
}

#[tokio::test]
async fn a_selected_tool_call_unfolds_on_its_own() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    for command in ["//shell seq 1 30", "//shell seq 101 130"] {
        screen.say(command).await;
    }
    let lines = transcript_lines(&screen.app);
    let folded = lines
        .iter()
        .filter(|l| l.contains("⋮ 26 more lines"))
        .count();
    assert_eq!(
        folded, 2,
        "both outputs folded to their last lines: {lines:#?}"
    );
    assert!(lines.iter().any(|l| l == "  130") && !lines.iter().any(|l| l == "  105"));

    // Alt-↑ twice: the first call; Ctrl-O unfolds it alone, and it is in sight.
    screen.key(KeyCode::Up, KeyModifiers::ALT).await;
    screen.key(KeyCode::Up, KeyModifiers::ALT).await;
    screen.key(KeyCode::Char('o'), KeyModifiers::CONTROL).await;
    assert_eq!(
        screen.app.editor.text(),
        "",
        "the keys did not go to the input"
    );
    let shown = screen.text();
    assert!(shown.lines().any(|row| row.trim_end() == "  5"), "{shown}");
    let lines = transcript_lines(&screen.app);
    assert!(lines.iter().any(|l| l == "  5"), "{lines:#?}");
    assert!(!lines.iter().any(|l| l == "  105"), "{lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.contains("more lines")).count(), 1);

    // Ctrl-O again folds it; Alt-↓ moves to the second, which unfolds alone.
    screen.key(KeyCode::Char('o'), KeyModifiers::CONTROL).await;
    screen.key(KeyCode::Down, KeyModifiers::ALT).await;
    screen.key(KeyCode::Char('o'), KeyModifiers::CONTROL).await;
    let lines = transcript_lines(&screen.app);
    assert!(lines.iter().any(|l| l == "  105") && !lines.iter().any(|l| l == "  5"));
    // Past the newest nothing is selected: Ctrl-O unfolds everything.
    screen.key(KeyCode::Down, KeyModifiers::ALT).await;
    screen.key(KeyCode::Char('o'), KeyModifiers::CONTROL).await;
    let lines = transcript_lines(&screen.app);
    assert!(lines.iter().any(|l| l == "  105") && lines.iter().any(|l| l == "  5"));
    assert!(
        !lines.iter().any(|l| l.contains("more lines")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_code_block_is_highlighted_by_its_language() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen
        .app
        .paste("//echo\n```rust\n// say it\nfn greet() -> &'static str { \"hello\" }\n```\n")
        .await;
    screen.enter().await;
    screen
        .until("the answer", |s, app| {
            app.running.is_none() && s.contains("│ fn greet()")
        })
        .await;
    use ratatui::style::Color;
    assert_eq!(screen.code_color("fn greet"), Some(Color::LightBlue));
    assert_eq!(screen.code_color("greet()"), Some(Color::Cyan));
    assert_eq!(screen.code_color("\"hello\""), Some(Color::Green));
    assert_eq!(screen.code_color("// say it"), Some(Color::DarkGray));
}

#[tokio::test]
async fn a_plan_shows_as_a_checklist() {
    let (fake, server) = crate::plan::plan_server().await;
    crate::plan::push_plan_turn(&fake);
    let mut screen = Screen::new(&server);
    screen.type_text("Plan it").await;
    screen.enter().await;
    screen
        .until("the answer", |s, app| {
            app.running.is_none() && s.contains("Planned.")
        })
        .await;
    let lines = transcript_lines(&screen.app);
    let at = lines
        .iter()
        .position(|line| line == "Plan")
        .unwrap_or_else(|| panic!("a plan: {lines:#?}"));
    assert_eq!(
        lines[at..at + 5],
        [
            "Plan",
            "  Small steps.",
            "  [x] Read it",
            "  [>] Fix it",
            "  [ ] Test it"
        ],
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_turn_shows_its_tokens_and_cost_and_the_status_line_the_conversations() {
    use crate::fake_provider::Reply;
    use crate::support::{answer_cost, answer_figures, priced_server};
    let (fake, server) = priced_server().await;
    let mut screen = Screen::new(&server);
    let figures = answer_figures();
    let one = format!("cost {:.4} · ", answer_cost());
    let two = format!("cost {:.4} · ", 2.0 * answer_cost());
    assert_ne!(one, two, "two answers must cost visibly more than one");
    for (said, total) in [("First", &one), ("Second", &two)] {
        fake.push(Reply::text(&format!("{said} answer.")));
        screen.type_text(said).await;
        screen.enter().await;
        let shown = screen
            .until("the turn's figures and the total", |s, app| {
                app.running.is_none() && s.lines().last().is_some_and(|l| l.contains(total))
            })
            .await;
        let lines = transcript_lines(&screen.app);
        let answer = format!("{said} answer.");
        let at = lines.iter().position(|l| *l == answer);
        let at = at.unwrap_or_else(|| panic!("the answer: {lines:#?}"));
        assert!(lines[at..].contains(&figures), "{shown}");
    }

    // Opened again, the status line has the cost from the conversation's view.
    let id = screen.conversation();
    let mut again = Screen::new(&server);
    again.app.open(&id, false).await.unwrap();
    let status = again.text().lines().last().unwrap().to_owned();
    assert!(status.contains(&two), "{status}");
}

#[tokio::test]
async fn a_repository_command_is_listed_in_help_and_sent_by_name() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    let folder = screen.workdir().join(".agents/commands");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("greet.md"),
        "---\ndescription: Greet someone\nargument-hint: <name>\n---\nSay hi to $1.",
    )
    .unwrap();
    screen.type_text("/help").await;
    screen.enter().await;
    let shown = screen.text();
    assert!(shown.contains("/greet <name>  Greet someone"), "{shown}");
    screen.type_text("/greet Ada").await;
    screen.enter().await;
    let shown = screen
        .until("the reply", |s, app| {
            app.running.is_none() && s.contains(&format!("{REPLY} \"Say hi to Ada.\""))
        })
        .await;
    // The prompt shows under the command's name.
    assert!(shown.contains("› /greet"), "{shown}");
    let items = items(&server, &screen.conversation()).await;
    assert_eq!(user_texts(&items), ["Say hi to Ada."]);
    assert_eq!(items[0]["command"]["name"], "greet");
}

#[tokio::test]
async fn ps_lists_the_background_processes_and_stops_one_by_its_id() {
    let (_fake, server) = crate::terminal::background_server().await;
    let mut screen = Screen::new(&server);
    screen.type_text("Start it").await;
    screen.enter().await;
    screen
        .until("the answer", |s, app| {
            app.running.is_none() && s.contains("Started.")
        })
        .await;
    let id = screen.conversation();
    let (_, listed) = server
        .get(&format!("/api/conversations/{id}/processes"))
        .await;
    let pid = listed["processes"][0]["id"].as_str().unwrap().to_owned();
    screen.type_text("/ps").await;
    screen.enter().await;
    let shown = screen.text();
    assert!(
        shown.contains(&format!("[1] {pid} running · $ echo ready; sleep 30")),
        "{shown}"
    );
    screen.type_text("/ps 1").await;
    screen.enter().await;
    let shown = screen.text();
    assert!(
        shown.contains(&format!("[{pid} running · $ echo ready; sleep 30]"))
            && shown.contains("ready"),
        "{shown}"
    );
    screen.type_text(&format!("/ps stop {pid}")).await;
    screen.enter().await;
    let shown = screen.text();
    assert!(
        shown.contains(&format!("[{pid} stopped (a user stopped it)]")),
        "{shown}"
    );
    let (_, listed) = server
        .get(&format!("/api/conversations/{id}/processes"))
        .await;
    assert_eq!(listed["processes"][0]["status"], "killed", "{listed}");
}

/// `/model` before the first message: the conversation that message starts runs on the model
/// chosen (not the agent's), and a model that does not exist is named as such.
#[tokio::test]
async fn a_model_chosen_before_the_first_message_is_the_conversations() {
    let fake =
        crate::fake_provider::FakeProvider::start(crate::fake_provider::Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(fake.config()),
        ..ServerOptions::default()
    })
    .await;
    let (_, models) = server.get("/api/models").await;
    let ids: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"demo") && ids.contains(&"m"), "{models}");
    let mut screen = Screen::new(&server);
    screen.type_text("/model nope").await;
    screen.enter().await;
    assert!(
        screen.text().contains("no model `nope`"),
        "{}",
        screen.text()
    );
    screen.type_text("/model demo").await;
    screen.enter().await;
    assert!(screen.text().contains("model: demo (for the conversation"));
    screen.type_text("Hello there").await;
    screen.enter().await;
    screen
        .until("the demo model's answer", |s, app| {
            app.running.is_none() && s.contains("Demo model")
        })
        .await;
    let (_, view) = server
        .get(&format!("/api/conversations/{}", screen.conversation()))
        .await;
    assert_eq!(view["model"], "demo", "{view}");
}

/// After a stop, the messages that wait stay, and the input says the next message goes after
/// them; `/waiting send N` sends one now on its own, `/waiting withdraw N` takes one back.
#[tokio::test]
async fn after_a_stop_a_waiting_message_is_sent_now_or_taken_back() {
    let server = Server::start().await;
    let mut screen = Screen::new(&server);
    screen.app.paste("/sleep 300\nTake your time").await;
    screen.enter().await;
    screen
        .until("the reply streaming", |s, app| {
            app.running.is_some() && s.contains("Demo model")
        })
        .await;
    for text in ["first in line", "second in line"] {
        screen.type_text(text).await;
        screen.key(KeyCode::Tab, KeyModifiers::NONE).await;
    }
    screen
        .until("two waiting", |s, _| {
            s.contains("⋯ 2 waiting (queue): second in line")
        })
        .await;
    screen.key(KeyCode::Esc, KeyModifiers::NONE).await;
    let shown = screen
        .until("the stop", |s, app| {
            app.running.is_none() && s.contains("2 messages wait since the stop")
        })
        .await;
    assert!(
        shown.contains("⋯ 1 waiting (queue): first in line"),
        "{shown}"
    );

    screen.type_text("/waiting send 2").await;
    screen.enter().await;
    screen
        .until("the second sent alone", |s, app| {
            app.running.is_none()
                && s.contains("you said \"second in line\"")
                && s.contains("1 message waits since the stop")
        })
        .await;
    screen.type_text("/waiting withdraw 1").await;
    screen.enter().await;
    let shown = screen
        .until("the first taken back", |_, app| app.pending.is_empty())
        .await;
    assert!(shown.contains("│first in line"), "{shown}");
    let (_, conversation) = server
        .get(&format!("/api/conversations/{}", screen.conversation()))
        .await;
    assert_eq!(conversation["pending"], serde_json::json!([]));
}

/// Words wrap at word boundaries, and at 60 columns the status line still shows the
/// connection: the directory and the rest give way first.
#[tokio::test]
async fn words_wrap_whole_and_a_narrow_status_line_keeps_the_connection() {
    let server = Server::start().await;
    let mut screen = Screen::sized(&server, 60, 24);
    let deep = screen
        .workdir()
        .join("a-rather-long-folder-name-for-a-project/and-another-one-below-it");
    std::fs::create_dir_all(&deep).unwrap();
    screen.app = App::new(
        Api::new(&server.base, Some(server.token.clone())),
        deep.display().to_string(),
    );
    let message = "Several considerably lengthy words accumulate here so that \
        wrapping necessarily happens somewhere around the sixtieth column boundary";
    screen.type_text(message).await;
    screen.enter().await;
    let shown = screen
        .until("the answer", |s, app| {
            app.running.is_none() && s.contains("real answers")
        })
        .await;
    let status = shown.lines().last().unwrap();
    assert!(status.contains("● connected"), "{status}");
    for word in message.split_whitespace() {
        assert!(
            shown.lines().any(|row| row
                .split(|c: char| c.is_whitespace() || c == '"')
                .any(|piece| piece == word)),
            "{word} was cut:\n{shown}"
        );
    }
}
