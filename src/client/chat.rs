//! `openvaala chat`: read a line, send it, show the agent working. Lines starting with `/` are
//! commands (`/help`). With a terminal on stdin, a line typed while the agent works steers it
//! (the service's default); with a script on stdin, each message waits for its turn to end
//! before the next line is read, so `echo … | openvaala chat` prints the whole answer.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::api::{Api, ApiError, ServerEvent};
use super::render::{Renderer, usage_line};

const HELP: &str = "\
Type a message to send it to the agent. Commands:
  /new                 start a new conversation with the next message
  /resume [N|id|text]  list recent conversations, or open one (by number, id or search)
  /fork                copy this conversation up to its last finished turn, and continue there
  /rewind [N]          list your messages, or restart from before message N in a copy
  /compact             summarize the older history now (compress the context)
  /context             how much of the model's context window is used
  /agents              the agents of this conversation (the root agent and its sub-agents)
  /queue TEXT          send TEXT to wait for the running turn instead of steering it
  /interrupt           stop the running turn
  /quit                leave (also Ctrl-D)
Start a line with // to send a line that begins with / (e.g. the demo model's //shell ls).";

/// The built-in demo model's directives (`model/demo.rs`): typed with one `/` they would be
/// taken for commands of this client, so the client says how to send them.
const DEMO_DIRECTIVES: &[&str] = &["shell", "read", "sleep", "fail", "spawn"];

pub struct ChatOptions {
    pub api: Api,
    /// A conversation to continue; otherwise the first message starts one.
    pub resume: Option<String>,
    /// The working directory of new conversations.
    pub cwd: String,
    /// A person at a terminal (messages do not wait for their turns; a prompt is shown).
    pub interactive: bool,
}

/// What the event follower tells the command loop.
#[derive(Debug)]
enum Signal {
    /// The stream began; these turns were running.
    Snapshot {
        running: Vec<String>,
    },
    TurnStarted {
        turn_id: String,
        message_ids: Vec<String>,
    },
    TurnEnded {
        turn_id: String,
    },
    CompactionEnded,
    /// The stream ended (the service stopped, or the conversation was deleted).
    Closed,
}

/// The conversation being followed.
struct Following {
    id: String,
    task: JoinHandle<()>,
    signals: mpsc::UnboundedReceiver<Signal>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Chat {
    api: Api,
    cwd: String,
    interactive: bool,
    renderer: Arc<Mutex<Renderer>>,
    following: Option<Following>,
    /// The numbered list `/resume` or `/rewind` showed last.
    listed: Vec<(String, String)>,
}

pub async fn run(options: ChatOptions) -> anyhow::Result<()> {
    let mut chat = Chat {
        api: options.api,
        cwd: options.cwd,
        interactive: options.interactive,
        renderer: Arc::new(Mutex::new(Renderer::default())),
        following: None,
        listed: Vec::new(),
    };
    // Fail early and clearly when there is no service to talk to.
    if let Err(error) = chat.api.get("/api/health").await {
        anyhow::bail!("{error}");
    }
    if let Some(id) = options.resume {
        chat.open(&id).await?;
    } else if chat.interactive {
        print_out(&format!(
            "Connected to {}. Type a message, or /help.\n",
            chat.api.base
        ));
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    // At a terminal the prompt comes back when the agent is done: after a command at once,
    // after a message that started a turn when that turn ends (the follower shows it).
    let mut prompt = true;
    loop {
        if chat.interactive && prompt {
            print_out("> ");
        }
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let outcome = match line.strip_prefix('/') {
            // `//…` sends a line that starts with `/` (the demo model's directives do).
            Some(rest) if rest.starts_with('/') => chat.send(rest, None).await,
            Some(command) => match chat.command(command).await {
                Ok(Flow::Quit) => break,
                Ok(Flow::Continue) => Ok(false),
                Err(error) => Err(error),
            },
            None => chat.send(line, None).await,
        };
        prompt = match outcome {
            Ok(turn_started) => !turn_started,
            Err(error) => {
                print_out(&format!("[error: {error}]\n"));
                true
            }
        };
    }
    Ok(())
}

enum Flow {
    Continue,
    Quit,
}

impl Chat {
    async fn command(&mut self, line: &str) -> Result<Flow, ApiError> {
        let (name, argument) = line.split_once(' ').unwrap_or((line, ""));
        let argument = argument.trim();
        match name {
            "quit" | "exit" | "q" => return Ok(Flow::Quit),
            "help" => print_out(&format!("{HELP}\n")),
            "new" => {
                self.following = None;
                print_out("[the next message starts a new conversation]\n");
            }
            "resume" => self.resume(argument).await?,
            "fork" => {
                let id = self.current()?;
                let forked = self
                    .api
                    .post(&format!("/api/conversations/{id}/fork"), &json!({}))
                    .await?;
                let new_id = forked["conversation"]["id"].as_str().unwrap_or_default();
                print_out(&format!("[forked into {new_id}]\n"));
                self.open(new_id).await?;
            }
            "rewind" => self.rewind(argument).await?,
            "compact" => {
                let id = self.current()?;
                // The stream shows the compaction as it happens.
                self.api
                    .post(&format!("/api/conversations/{id}/compact"), &json!({}))
                    .await?;
                self.wait_compaction_end().await;
            }
            "context" => {
                let id = self.current()?;
                let usage = self
                    .api
                    .get(&format!("/api/conversations/{id}/usage"))
                    .await?;
                print_out(&format!("[context: {}]\n", usage_line(&usage)));
            }
            "agents" => {
                let id = self.current()?;
                let sessions = self
                    .api
                    .get(&format!("/api/conversations/{id}/sessions"))
                    .await?;
                let sessions = sessions["sessions"].as_array().cloned().unwrap_or_default();
                print_out(&agents_tree(&sessions));
            }
            "queue" if !argument.is_empty() => {
                self.send(argument, Some("queue")).await?;
            }
            "queue" => print_out("[/queue TEXT sends TEXT to wait until the agent is done]\n"),
            "interrupt" => {
                let id = self.current()?;
                let answer = self
                    .api
                    .post(&format!("/api/conversations/{id}/interrupt"), &json!({}))
                    .await?;
                if answer["interrupted"] != true {
                    print_out("[nothing was running]\n");
                }
            }
            _ if DEMO_DIRECTIVES.contains(&name) => print_out(&format!(
                "[/{name} is not a command here but a directive for the demo model: \
                 send it to the model with //{line}]\n"
            )),
            _ => print_out(&format!("[unknown command /{name}; /help lists them]\n")),
        }
        Ok(Flow::Continue)
    }

    fn current(&self) -> Result<String, ApiError> {
        self.following
            .as_ref()
            .map(|following| following.id.clone())
            .ok_or_else(|| ApiError::Service {
                status: 0,
                code: "no_conversation".to_owned(),
                message: "no conversation yet: send a message or /resume one".to_owned(),
            })
    }

    /// Sends a message: a new conversation when there is none, else to the current one.
    /// Returns whether a turn started that is still running (at a terminal, its end brings
    /// the prompt back).
    async fn send(&mut self, message_text: &str, mode: Option<&str>) -> Result<bool, ApiError> {
        let Some(following) = &self.following else {
            *self.renderer.lock().expect("renderer lock") = Renderer::default();
            let created = self
                .api
                .post(
                    "/api/conversations",
                    &json!({ "text": message_text, "cwd": self.cwd }),
                )
                .await?;
            let id = created["conversation"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let turn_id = created["turn_id"].as_str().unwrap_or_default().to_owned();
            self.follow(&id).await?;
            let running = self.wait_snapshot().await;
            if !running.contains(&turn_id) {
                // The first turn ended before the stream began: show it from the history.
                self.print_stored_turn(&id, &turn_id).await?;
                return Ok(false);
            }
            if !self.interactive {
                self.wait_turn_end(&turn_id).await;
            }
            return Ok(self.interactive);
        };
        let id = following.id.clone();
        let mut body = json!({ "text": message_text });
        if let Some(mode) = mode {
            body["mode"] = json!(mode);
        }
        let answer = self
            .api
            .post(&format!("/api/conversations/{id}/messages"), &body)
            .await?;
        let message = &answer["message"];
        if message["status"] == "waiting" {
            print_out(&format!(
                "[the agent is busy: your message waits ({})]\n",
                text_or(&message["mode"], "steer")
            ));
            return Ok(false);
        }
        if !self.interactive {
            let message_id = text(&message["id"]).to_owned();
            if let Some(turn_id) = self.wait_turn_start(&message_id).await {
                self.wait_turn_end(&turn_id).await;
            }
        }
        Ok(self.interactive)
    }

    /// Opens a conversation: shows the end of its history, then follows it.
    async fn open(&mut self, id: &str) -> Result<(), ApiError> {
        let conversation = self.api.get(&format!("/api/conversations/{id}")).await?;
        // A fork shares its source's item ids: what was shown there is new here.
        self.following = None;
        *self.renderer.lock().expect("renderer lock") = Renderer::default();
        let id = text(&conversation["id"]).to_owned();
        print_out(&format!(
            "[conversation {id}: {} — {}]\n",
            text(&conversation["title"]),
            text(&conversation["cwd"])
        ));
        let items = self.stored_items(&id).await?;
        let shown = items.len().saturating_sub(6);
        print_stored(&self.renderer, &items[shown..]);
        self.follow(&id).await?;
        self.wait_snapshot().await;
        Ok(())
    }

    async fn resume(&mut self, argument: &str) -> Result<(), ApiError> {
        if let Ok(number) = argument.parse::<usize>() {
            let Some((id, _)) = self.listed.get(number.wrapping_sub(1)).cloned() else {
                print_out("[no such number; /resume lists the conversations]\n");
                return Ok(());
            };
            return self.open(&id).await;
        }
        if argument.starts_with("c_") {
            return self.open(argument).await;
        }
        let mut path = "/api/conversations?limit=20".to_owned();
        if !argument.is_empty() {
            path += &format!("&q={}", query_escape(argument));
        }
        let page = self.api.get(&path).await?;
        self.listed = page["conversations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (text(&c["id"]).to_owned(), text(&c["title"]).to_owned()))
            .collect();
        if self.listed.is_empty() {
            print_out("[no conversations found]\n");
        }
        for (number, (id, title)) in self.listed.iter().enumerate() {
            print_out(&format!("[{}] {title} ({id})\n", number + 1));
        }
        Ok(())
    }

    async fn rewind(&mut self, argument: &str) -> Result<(), ApiError> {
        let id = self.current()?;
        let messages: Vec<(String, String)> = self
            .stored_items(&id)
            .await?
            .iter()
            .filter(|item| item["kind"] == "user_message" && item["source"] == "user")
            .map(|item| (text(&item["id"]).to_owned(), text(&item["text"]).to_owned()))
            .collect();
        let Ok(number) = argument.parse::<usize>() else {
            for (number, (_, text)) in messages.iter().enumerate() {
                print_out(&format!("[{}] {text}\n", number + 1));
            }
            print_out("[/rewind N restarts from before message N, in a copy]\n");
            return Ok(());
        };
        let Some((message_id, _)) = messages.get(number.wrapping_sub(1)) else {
            print_out("[no such message; /rewind lists them]\n");
            return Ok(());
        };
        let rewound = self
            .api
            .post(
                &format!("/api/conversations/{id}/rewind"),
                &json!({ "message_id": message_id }),
            )
            .await?;
        let message = text(&rewound["text"]);
        if rewound["conversation"].is_null() {
            // Before the first message there is nothing to copy: it is a new conversation.
            self.following = None;
            print_out(&format!(
                "[back to the start: the next message starts a new conversation; your message was: {message}]\n"
            ));
            return Ok(());
        }
        let new_id = text(&rewound["conversation"]["id"]).to_owned();
        print_out(&format!(
            "[rewound into {new_id}; your message was: {message}]\n"
        ));
        self.open(&new_id).await
    }

    /// Every stored item of the root session.
    async fn stored_items(&self, id: &str) -> Result<Vec<Value>, ApiError> {
        items_after(&self.api, id, None).await
    }

    async fn print_stored_turn(&self, id: &str, turn_id: &str) -> Result<(), ApiError> {
        let items = self.stored_items(id).await?;
        let turn: Vec<Value> = items
            .into_iter()
            .filter(|item| item["turn_id"] == turn_id && item["kind"] != "user_message")
            .collect();
        print_stored(&self.renderer, &turn);
        Ok(())
    }

    /// Starts following a conversation's events (and stops following the previous one).
    async fn follow(&mut self, id: &str) -> Result<(), ApiError> {
        let events = self.api.events(id, None).await?;
        let (signals, receiver) = mpsc::unbounded_channel();
        let renderer = self.renderer.clone();
        let api = self.api.clone();
        let conversation = id.to_owned();
        let interactive = self.interactive;
        let task = tokio::spawn(async move {
            use futures::StreamExt;
            let mut events = events.boxed();
            let mut position = Position::default();
            let mut reconnected = false;
            loop {
                let Some(event) = events.next().await else {
                    // The service restarted, or this stream fell too far behind: follow again
                    // from the last event seen.
                    print_out("[the event stream ended; reconnecting…]\n");
                    match reconnect(&api, &conversation, position.last_event_id.as_deref()).await {
                        Some(again) => {
                            print_out("[reconnected]\n");
                            events = again.boxed();
                            reconnected = true;
                            continue;
                        }
                        None => break,
                    }
                };
                let ServerEvent { id, kind, data } = event;
                if std::mem::take(&mut reconnected) && kind == "snapshot" {
                    // The service could not replay what was missed (it restarted, or too much
                    // happened): what was stored meanwhile comes from the history.
                    let mut missed =
                        items_after(&api, &conversation, Some(position.resume_after()))
                            .await
                            .unwrap_or_default();
                    // The running ones come with the snapshot.
                    missed.retain(|item| item["status"] != "running");
                    print_stored(&renderer, &missed);
                }
                if id.is_some() {
                    position.last_event_id = id;
                }
                position.observe(&kind, &data);
                let mut out = renderer.lock().expect("renderer lock").event(&kind, &data);
                // The prompt comes back when the root agent is done (not a sub-agent).
                if interactive
                    && kind == "turn.ended"
                    && data["session_id"] == position.root_session_id.as_str()
                {
                    out.push_str("> ");
                }
                print_out(&out);
                let signal = match kind.as_str() {
                    "snapshot" => Signal::Snapshot {
                        running: data["running"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|turn| text(&turn["turn_id"]).to_owned())
                            .collect(),
                    },
                    "turn.started" => Signal::TurnStarted {
                        turn_id: text(&data["turn_id"]).to_owned(),
                        message_ids: data["message_ids"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|id| text(id).to_owned())
                            .collect(),
                    },
                    "turn.ended" => Signal::TurnEnded {
                        turn_id: text(&data["turn_id"]).to_owned(),
                    },
                    "compaction.completed" | "compaction.failed" => Signal::CompactionEnded,
                    _ => continue,
                };
                if signals.send(signal).is_err() {
                    return;
                }
            }
            let _ = signals.send(Signal::Closed);
        });
        self.following = Some(Following {
            id: id.to_owned(),
            task,
            signals: receiver,
        });
        Ok(())
    }

    async fn next_signal(&mut self) -> Option<Signal> {
        let following = self.following.as_mut()?;
        match following.signals.recv().await? {
            Signal::Closed => None,
            signal => Some(signal),
        }
    }

    async fn wait_snapshot(&mut self) -> Vec<String> {
        while let Some(signal) = self.next_signal().await {
            if let Signal::Snapshot { running } = signal {
                return running;
            }
        }
        Vec::new()
    }

    /// The turn that took the message. `None` if the stream started over with a snapshot
    /// meanwhile: the turn may have come and gone (what it stored has been shown).
    async fn wait_turn_start(&mut self, message_id: &str) -> Option<String> {
        while let Some(signal) = self.next_signal().await {
            match signal {
                Signal::TurnStarted {
                    turn_id,
                    message_ids,
                } if message_ids.iter().any(|id| id == message_id) => return Some(turn_id),
                Signal::Snapshot { .. } => return None,
                _ => {}
            }
        }
        None
    }

    /// Until the turn ends, or a snapshot after a reconnect no longer shows it running (it
    /// ended while the stream was down: the service restarted, say).
    async fn wait_turn_end(&mut self, turn_id: &str) {
        while let Some(signal) = self.next_signal().await {
            match &signal {
                Signal::TurnEnded { turn_id: ended } if ended == turn_id => return,
                Signal::Snapshot { running } if !running.iter().any(|id| id == turn_id) => {
                    return;
                }
                _ => {}
            }
        }
    }

    /// In a script, waits until the stream has shown the compaction's end (it is published
    /// before the request is answered), so the output stays in order.
    async fn wait_compaction_end(&mut self) {
        if self.interactive {
            return;
        }
        while let Some(signal) = self.next_signal().await {
            if matches!(signal, Signal::CompactionEnded) {
                return;
            }
        }
    }
}

/// Where a terminal is in a conversation's stream, so that a reconnect misses nothing: the
/// last event's id, and the root session's items it has seen start and finish.
#[derive(Default)]
struct Position {
    last_event_id: Option<String>,
    root_session_id: String,
    /// The newest item seen.
    newest_seq: u64,
    /// Items seen start and not yet finish.
    open: std::collections::BTreeSet<u64>,
}

impl Position {
    fn observe(&mut self, kind: &str, data: &Value) {
        match kind {
            "snapshot" => {
                self.root_session_id = text(&data["conversation"]["root_session_id"]).to_owned();
                self.newest_seq = data["last_seq"][&self.root_session_id]
                    .as_u64()
                    .unwrap_or(0);
                self.open = data["running"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|turn| turn["items"].as_array().into_iter().flatten())
                    .filter(|item| self.is_root(item) && item["status"] == "running")
                    .filter_map(|item| item["seq"].as_u64())
                    .collect();
            }
            "item.started" | "item.completed" => {
                let item = &data["item"];
                let Some(seq) = item["seq"].as_u64().filter(|_| self.is_root(item)) else {
                    return;
                };
                self.newest_seq = self.newest_seq.max(seq);
                if kind == "item.started" {
                    self.open.insert(seq);
                } else {
                    self.open.remove(&seq);
                }
            }
            _ => {}
        }
    }

    fn is_root(&self, item: &Value) -> bool {
        item["session_id"] == self.root_session_id.as_str()
    }

    /// The history after this `seq` holds everything not seen finished.
    fn resume_after(&self) -> u64 {
        self.open
            .first()
            .map_or(self.newest_seq, |&first| first.saturating_sub(1))
    }
}

/// Prints stored items in full (see `Renderer::stored_item`).
fn print_stored(renderer: &Mutex<Renderer>, items: &[Value]) {
    let mut out = String::new();
    {
        let mut renderer = renderer.lock().expect("renderer lock");
        for item in items {
            out += &renderer.stored_item(item);
        }
    }
    print_out(&out);
}

/// The stored items of the root session after `after` (all of them for `None`).
async fn items_after(api: &Api, id: &str, after: Option<u64>) -> Result<Vec<Value>, ApiError> {
    let mut items = Vec::new();
    let mut after = after;
    loop {
        let mut path = format!("/api/conversations/{id}/items?limit=2000");
        if let Some(after) = after {
            path += &format!("&after_seq={after}");
        }
        let page = api.get(&path).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next_after_seq"].as_u64() {
            Some(next) => after = Some(next),
            None => return Ok(items),
        }
    }
}

/// Tries to follow a conversation again, once a second for a minute.
async fn reconnect(
    api: &Api,
    conversation: &str,
    last_event_id: Option<&str>,
) -> Option<impl futures::Stream<Item = ServerEvent> + use<>> {
    let mut last = None;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        match api.events(conversation, last_event_id).await {
            Ok(events) => return Some(events),
            // Gone for good: no point in trying again.
            Err(error) if error.code() == Some("not_found") => {
                last = Some(error);
                break;
            }
            Err(error) => last = Some(error),
        }
    }
    if let Some(error) = last {
        print_out(&format!(
            "[cannot follow the conversation any more: {error}]\n"
        ));
    }
    None
}

/// `/agents`: the root agent, then each sub-agent under its parent, indented by depth, with
/// its status, task and last answer.
fn agents_tree(sessions: &[Value]) -> String {
    let depth = |session: &Value| {
        let mut depth = 0;
        let mut parent = &session["parent_id"];
        while let Some(up) = sessions.iter().find(|s| s["id"] == *parent) {
            depth += 1;
            parent = &up["parent_id"];
        }
        depth
    };
    let mut out = String::new();
    // Depth-first from the root, children in the order they were created.
    let mut stack: Vec<&Value> = sessions
        .iter()
        .filter(|s| s["parent_id"].is_null())
        .rev()
        .collect();
    while let Some(session) = stack.pop() {
        let indent = "  ".repeat(depth(session));
        let role = if session["parent_id"].is_null() {
            "root"
        } else {
            "sub-agent"
        };
        let task = session["task"]
            .as_str()
            .map(|task| format!(": {}", task.lines().next().unwrap_or_default()))
            .unwrap_or_default();
        out.push_str(&format!(
            "{indent}[{role} {} ({}) {}{task}]\n",
            text(&session["agent"]),
            text(&session["status"]),
            text(&session["id"])
        ));
        if let Some(last) = session["last_message"].as_str() {
            let line = last.lines().next().unwrap_or_default();
            let excerpt: String = line.chars().take(100).collect();
            out.push_str(&format!("{indent}  last: {excerpt}\n"));
        }
        stack.extend(
            sessions
                .iter()
                .filter(|s| s["parent_id"] == session["id"])
                .rev(),
        );
    }
    out
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn text_or<'a>(value: &'a Value, default: &'a str) -> &'a str {
    value.as_str().unwrap_or(default)
}

fn print_out(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Percent-encodes a search query for the URL.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_listed_as_a_tree_under_their_parents() {
        let session = |id: &str, parent: Option<&str>, task: Option<&str>, last: Option<&str>| json!({ "id": id, "parent_id": parent, "agent": "default", "status": "idle", "task": task, "last_message": last });
        let tree = agents_tree(&[
            session("s_root", None, None, Some("All done.")),
            session("s_a", Some("s_root"), Some("look at A"), None),
            session(
                "s_b",
                Some("s_root"),
                Some("look at B\nin depth"),
                Some("B is fine"),
            ),
            session("s_a1", Some("s_a"), Some("deeper"), None),
        ]);
        assert_eq!(
            tree,
            "[root default (idle) s_root]\n  last: All done.\n\
             \x20 [sub-agent default (idle) s_a: look at A]\n\
             \x20   [sub-agent default (idle) s_a1: deeper]\n\
             \x20 [sub-agent default (idle) s_b: look at B]\n    last: B is fine\n"
        );
    }

    fn item(session: &str, seq: u64, status: &str) -> Value {
        json!({ "item": { "session_id": session, "seq": seq, "status": status } })
    }

    #[test]
    fn a_reconnect_asks_the_history_for_everything_not_seen_finished() {
        let mut position = Position::default();
        position.observe(
            "snapshot",
            &json!({
                "conversation": { "root_session_id": "s_root" },
                "last_seq": { "s_root": 5, "s_sub": 9 },
                "running": [{ "items": [
                    { "session_id": "s_root", "seq": 5, "status": "running" },
                    { "session_id": "s_sub", "seq": 9, "status": "running" },
                ] }],
            }),
        );
        // Item 5 is still streaming: the history after 4 holds its end.
        assert_eq!(position.resume_after(), 4);
        position.observe("item.completed", &item("s_root", 5, "completed"));
        assert_eq!(position.resume_after(), 5);
        position.observe("item.started", &item("s_root", 6, "running"));
        position.observe("item.started", &item("s_root", 7, "running"));
        position.observe("item.completed", &item("s_root", 7, "completed"));
        // A sub-agent's items have seqs of their own session: they do not count.
        position.observe("item.completed", &item("s_sub", 12, "completed"));
        assert_eq!(position.resume_after(), 5);
        position.observe("item.completed", &item("s_root", 6, "completed"));
        assert_eq!(position.resume_after(), 7);
    }
}
