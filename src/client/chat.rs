//! `openvaala chat`: read a line, send it, show the agent working. Lines starting with `/` are
//! commands (`/help`). With a terminal on stdin, a line typed while the agent works steers it
//! (the service's default); with a script on stdin, each message waits for its turn to end
//! before the next line is read, so `echo … | openvaala chat` prints the whole answer.
//! A tool call waiting for approval is asked about (`approval_prompt`), and the next line
//! answers it.

use std::collections::{HashSet, VecDeque};
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::agents;
use super::api::{Api, ApiError, ServerEvent};
use super::approval_prompt::{self, Asked, Console, Input};
use super::position::Position;
use super::render::{Renderer, usage_line};

const HELP: &str = "\
Type a message to send it to the agent. Commands:
  /new                 start a new conversation with the next message
  /resume [N|id|text]  list recent conversations, or open one (by number, id or search)
  /fork                copy this conversation up to its last finished turn, and continue there
  /rewind [N] [--files] list your messages, or restart from before message N in a copy;
                       --files also puts back the files changed since (conflicts are kept)
  /diff [N]            what turn N changed in the working directory (default: the last)
  /compact             summarize the older history now (compress the context)
  /context             how much of the model's context window is used
  /agents              the agents of this conversation (the root agent and its sub-agents)
                       and the approvals each waits for
  /queue TEXT          send TEXT to wait for the running turn instead of steering it
  /interrupt           stop the running turn
  /retry               run the last turn again when it failed (the same messages)
  /quit                leave (also Ctrl-D)
Start a line with // to send a line that begins with / (e.g. the demo model's //shell ls).";

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
    /// A tool call waits for an answer (from the stream, or in its snapshot).
    ApprovalRequested(Value),
    /// An approval was settled: a question about it is dropped.
    ApprovalResolved(Value),
    /// The stream ended (the service stopped, or the conversation was deleted).
    Closed,
}

/// The conversation being followed.
struct Following {
    id: String,
    task: JoinHandle<()>,
    signals: mpsc::UnboundedReceiver<Signal>,
    /// Signals that came while a question about an approval waited for its answer.
    put_aside: VecDeque<Signal>,
    /// The stream has ended: no more signals.
    closed: bool,
}

impl Following {
    /// The next signal, what was put aside first; `None` once the stream has ended.
    async fn next(&mut self) -> Option<Signal> {
        let signal = match self.put_aside.pop_front() {
            Some(signal) => Some(signal),
            None if self.closed => None,
            None => self.signals.recv().await,
        };
        match signal {
            Some(Signal::Closed) | None => {
                self.closed = true;
                None
            }
            signal => signal,
        }
    }
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
    /// Messages, commands, and answers to approvals.
    input: Lines<BufReader<Stdin>>,
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
        input: BufReader::new(tokio::io::stdin()).lines(),
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
    // At a terminal the prompt comes back when the agent is done: after a command at once,
    // after a message that started a turn when that turn ends (the follower shows it).
    let mut prompt = true;
    loop {
        if chat.interactive && prompt {
            print_out("> ");
        }
        // An approval asked while no message waits for its turn is asked about at once.
        let line = tokio::select! {
            biased;
            signal = idle_signal(&mut chat.following) => {
                if let Signal::ApprovalRequested(approval) = signal {
                    chat.ask(&approval).await;
                }
                // The prompt comes back when the turn the answer lets go on ends.
                prompt = false;
                continue;
            }
            line = chat.input.next_line() => line?,
        };
        let Some(line) = line else {
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
            "diff" => {
                let id = self.current()?;
                let items = self.stored_items(&id).await?;
                print_out(&super::files::diff(&self.api, &id, &items, argument).await?);
            }
            "compact" => {
                let id = self.current()?;
                // The stream shows the compaction as it happens.
                self.api
                    .post(&format!("/api/conversations/{id}/compact"), &json!({}))
                    .await?;
                self.wait_compaction_end().await;
            }
            "retry" => {
                let id = self.current()?;
                // Said before asking: the demo model answers at once, and its answer (printed
                // by the event stream) would otherwise come before this line.
                print_out("[running the failed turn again]\n");
                let started = self
                    .api
                    .post(&format!("/api/conversations/{id}/retry"), &json!({}))
                    .await?;
                let turn_id = started["turn_id"].as_str().unwrap_or_default().to_owned();
                self.wait_turn_end(&turn_id).await;
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
                print_out(&agents::show(&self.api, &id).await?);
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
            // The demo model's directives: typed with one `/` they would be taken for commands here.
            _ if crate::model::demo::DIRECTIVES.contains(&name) => print_out(&format!(
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
        let files = argument.ends_with("--files");
        let argument = argument.trim_end_matches("--files").trim();
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
                &json!({ "message_id": message_id, "restore_files": files }),
            )
            .await?;
        if files {
            print_out(&super::files::restore_line(&rewound["restore"]));
        }
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
            // Approvals already passed on: a reconnect's snapshot lists the waiting ones again.
            let mut asked = HashSet::new();
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
                let mut approvals = match kind.as_str() {
                    "snapshot" => data["approvals"].as_array().cloned().unwrap_or_default(),
                    "approval.requested" => vec![data["approval"].clone()],
                    _ => Vec::new(),
                };
                approvals.retain(|approval| asked.insert(text(&approval["id"]).to_owned()));
                let signal = match kind.as_str() {
                    "snapshot" => Some(Signal::Snapshot {
                        running: data["running"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|turn| text(&turn["turn_id"]).to_owned())
                            .collect(),
                    }),
                    "turn.started" => Some(Signal::TurnStarted {
                        turn_id: text(&data["turn_id"]).to_owned(),
                        message_ids: data["message_ids"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|id| text(id).to_owned())
                            .collect(),
                    }),
                    "turn.ended" => Some(Signal::TurnEnded {
                        turn_id: text(&data["turn_id"]).to_owned(),
                    }),
                    "compaction.completed" | "compaction.failed" => Some(Signal::CompactionEnded),
                    "approval.resolved" => Some(Signal::ApprovalResolved(data["approval"].clone())),
                    // Passed on below, once.
                    "approval.requested" => None,
                    _ => continue,
                };
                let approvals = approvals.into_iter().map(Signal::ApprovalRequested);
                for signal in signal.into_iter().chain(approvals) {
                    if signals.send(signal).is_err() {
                        return;
                    }
                }
            }
            let _ = signals.send(Signal::Closed);
        });
        self.following = Some(Following {
            id: id.to_owned(),
            task,
            signals: receiver,
            put_aside: VecDeque::new(),
            closed: false,
        });
        Ok(())
    }

    /// The next signal a wait looks at; approvals asked meanwhile are asked about on the way
    /// (in a script, the next line answers). `None` when the stream ended, or when the input
    /// ended before an answer (nothing could go on: the approval waits for another client).
    async fn next_signal(&mut self) -> Option<Signal> {
        loop {
            match self.following.as_mut()?.next().await? {
                Signal::ApprovalRequested(approval) => {
                    if self.ask(&approval).await == Asked::NoInput {
                        return None;
                    }
                }
                Signal::ApprovalResolved(_) => {}
                signal => return Some(signal),
            }
        }
    }

    async fn ask(&mut self, approval: &Value) -> Asked {
        let Some(following) = self.following.as_mut() else {
            return Asked::Done;
        };
        let mut console = ChatConsole {
            api: &self.api,
            echo: !self.interactive,
            input: &mut self.input,
            following,
        };
        approval_prompt::ask(&self.api, approval, &mut console).await
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

/// A signal for the command loop while it waits for a line: never, while nothing is followed.
async fn idle_signal(following: &mut Option<Following>) -> Signal {
    match following {
        Some(following) => match following.next().await {
            Some(signal) => signal,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The chat's terminal as an approval's question sees it: stdout, stdin, and the followed
/// conversation's signals (those that do not settle the question are put aside in order).
/// `/agents` still works, to see which agent asks and what the others wait for.
struct ChatConsole<'a> {
    api: &'a Api,
    /// A script's answers are not on screen: they are shown after the question.
    echo: bool,
    input: &'a mut Lines<BufReader<Stdin>>,
    following: &'a mut Following,
}

impl Console for ChatConsole<'_> {
    fn show(&mut self, text: &str) {
        print_out(text);
    }

    async fn next(&mut self, id: &str) -> Input {
        loop {
            tokio::select! {
                line = self.input.next_line() => {
                    if let Ok(Some(line)) = &line
                        && self.echo
                    {
                        print_out(&format!("{line}\n"));
                    }
                    return match line {
                        Ok(Some(line)) if line.trim() == "/agents" => {
                            print_out(&match agents::show(self.api, &self.following.id).await {
                                Ok(tree) => tree,
                                Err(error) => format!("[error: {error}]\n"),
                            });
                            Input::Aside
                        }
                        Ok(Some(line)) => Input::Line(line),
                        _ => Input::NoInput,
                    };
                }
                signal = self.following.signals.recv() => match signal {
                    Some(Signal::ApprovalResolved(approval)) if approval["id"] == id => {
                        return Input::Settled(approval);
                    }
                    Some(Signal::Closed) | None => {
                        self.following.put_aside.push_back(Signal::Closed);
                        return Input::Ended;
                    }
                    Some(signal) => self.following.put_aside.push_back(signal),
                },
            }
        }
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
