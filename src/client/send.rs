//! `openvaala send`: one message from a script or an editor. It sends the message, prints the
//! agent's reply to stdout as it streams (or, with `--json`, every event of the conversation as
//! a JSON line), and exits with how the turn that took the message ended: 0 completed,
//! 1 failed, 130 interrupted, 2 when the request itself was refused (a usage error). A tool
//! call that waits for approval is asked about at a terminal; otherwise `send` says how to
//! answer it and exits 4, so a script never waits silently for an answer it cannot give.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write as _;

use futures::stream::{BoxStream, Fuse};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use super::api::{Api, ApiError, ServerEvent};
use super::approval_prompt::{self, Asked, Console, Input};
use crate::bus::EventId;

/// Exit codes, as a shell reads them.
pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// A tool call waits for approval and nobody at this terminal can answer it.
pub const EXIT_APPROVAL: u8 = 4;
/// As for a command stopped by Ctrl-C (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

pub struct SendOptions {
    pub api: Api,
    pub text: String,
    /// The conversation to send to; without it, the message starts a new one.
    pub conversation: Option<String>,
    /// `steer`, `queue` or `interrupt` (the service's default, steer, when `None`).
    pub mode: Option<String>,
    /// The working directory of a new conversation.
    pub cwd: String,
    /// Every event as a JSON line instead of the reply's text.
    pub json: bool,
    /// A person at a terminal (stdin and stderr), who can answer approvals.
    pub interactive: bool,
}

/// What went wrong before the turn could be followed, with the exit code it earns.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub code: u8,
    pub message: String,
}

/// Sends the message and follows the turn that takes it to its end; returns the exit code.
/// The conversation id goes to stderr first, so a script can continue the conversation.
pub async fn run(options: SendOptions) -> Result<u8, SendError> {
    let mut output = Output::new(options.json);
    let mut approvals = Approvals {
        api: &options.api,
        interactive: options.interactive,
        input: None,
        seen: HashSet::new(),
    };
    match &options.conversation {
        Some(id) => {
            // Follow first, then send: nothing the message starts can be missed.
            let mut events = options.api.events(id, None).await.map_err(refused)?.boxed();
            let snapshot = next_event(&mut events).await?;
            eprintln!("conversation {id}");
            let mut body = json!({ "text": options.text });
            if let Some(mode) = &options.mode {
                body["mode"] = json!(mode);
            }
            let sent = options
                .api
                .post(&format!("/api/conversations/{id}/messages"), &body)
                .await
                .map_err(refused)?;
            let message_id = sent["message"]["id"].as_str().unwrap_or_default();
            let mut turn = Turn::of_message(message_id);
            let events = Events::new(futures::stream::iter([snapshot]).chain(events));
            Ok(follow(events, &mut turn, &mut output, &mut approvals).await)
        }
        None => {
            let created = options
                .api
                .post(
                    "/api/conversations",
                    &json!({ "text": options.text, "cwd": options.cwd }),
                )
                .await
                .map_err(refused)?;
            let id = text(&created["conversation"]["id"]).to_owned();
            let turn_id = text(&created["turn_id"]).to_owned();
            eprintln!("conversation {id}");
            follow_new(&options.api, &id, turn_id, &mut output, &mut approvals).await
        }
    }
}

/// Follows the first turn of a conversation just created. It began before any stream could
/// be opened, so when the first snapshot no longer shows it running, its events are replayed
/// from the conversation's first one (`Last-Event-ID` of the same epoch, before event 1).
async fn follow_new(
    api: &Api,
    id: &str,
    turn_id: String,
    output: &mut Output,
    approvals: &mut Approvals<'_>,
) -> Result<u8, SendError> {
    let mut turn = Turn::known(turn_id);
    let mut events = api.events(id, None).await.map_err(unreachable)?.boxed();
    let snapshot = next_event(&mut events).await?;
    if turn.running_in(&snapshot.data) {
        let events = Events::new(futures::stream::iter([snapshot]).chain(events));
        return Ok(follow(events, &mut turn, output, approvals).await);
    }
    let from_start = snapshot
        .id
        .as_deref()
        .and_then(|last| last.parse::<EventId>().ok())
        .map(|last| EventId { n: 0, ..last }.to_string());
    let mut replay = api
        .events(id, from_start.as_deref())
        .await
        .map_err(unreachable)?
        .boxed();
    let first = next_event(&mut replay).await?;
    if first.kind == "snapshot" {
        return Err(SendError {
            code: EXIT_FAILED,
            message: format!(
                "the turn ended before it could be followed, and the service no longer has its \
                 events; see GET /api/conversations/{id}/items"
            ),
        });
    }
    let events = Events::new(futures::stream::iter([first]).chain(replay));
    Ok(follow(events, &mut turn, output, approvals).await)
}

/// The turn the message went into: known from the start (a new conversation's first turn),
/// or found when the message starts a turn or is steered into the running one.
struct Turn {
    message_id: Option<String>,
    turn_id: Option<String>,
}

impl Turn {
    fn known(turn_id: String) -> Turn {
        Turn {
            message_id: None,
            turn_id: Some(turn_id),
        }
    }

    fn of_message(message_id: &str) -> Turn {
        Turn {
            message_id: Some(message_id.to_owned()),
            turn_id: None,
        }
    }

    fn running_in(&self, snapshot: &Value) -> bool {
        snapshot["running"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|running| Some(text(&running["turn_id"])) == self.turn_id.as_deref())
    }

    /// Notes which turn took the message; returns the event unchanged.
    fn observe(&mut self, event: ServerEvent) -> ServerEvent {
        let Some(message_id) = self.message_id.as_deref() else {
            return event;
        };
        if self.turn_id.is_none() {
            let took_it = match event.kind.as_str() {
                "turn.started" => event.data["message_ids"]
                    .as_array()
                    .is_some_and(|ids| ids.iter().any(|id| id == message_id)),
                // A steered message is an item of the running turn, with the message's id.
                "item.started" => event.data["item"]["id"] == message_id,
                _ => false,
            };
            if took_it {
                let turn_id = event.data["turn_id"]
                    .as_str()
                    .or(event.data["item"]["turn_id"].as_str());
                self.turn_id = turn_id.map(str::to_owned);
            }
        }
        event
    }

    fn is(&self, data: &Value) -> bool {
        self.turn_id.is_some()
            && (data["turn_id"].as_str() == self.turn_id.as_deref()
                || data["item"]["turn_id"].as_str() == self.turn_id.as_deref())
    }
}

/// Prints the events of the conversation until the turn ends; returns its exit code.
async fn follow(
    mut events: Events,
    turn: &mut Turn,
    output: &mut Output,
    approvals: &mut Approvals<'_>,
) -> u8 {
    while let Some(event) = events.next().await {
        let event = turn.observe(event);
        output.event(&event);
        if event.kind == "turn.ended" && turn.is(&event.data) {
            output.finish();
            return match event.data["status"].as_str() {
                Some("completed") => EXIT_COMPLETED,
                Some("interrupted") => {
                    eprintln!("the turn was interrupted");
                    EXIT_INTERRUPTED
                }
                _ => {
                    eprintln!(
                        "the turn failed: {}",
                        event.data["error"].as_str().unwrap_or("no error given")
                    );
                    EXIT_FAILED
                }
            };
        }
        if !output.json && turn.turn_id.is_some() {
            output.reply(&event, turn);
        }
        let asked = match event.kind.as_str() {
            "snapshot" => event.data["approvals"].as_array().cloned(),
            "approval.requested" => Some(vec![event.data["approval"].clone()]),
            _ => None,
        };
        for approval in asked.into_iter().flatten() {
            if let Some(code) = approvals.handle(&approval, &mut events, output).await {
                output.finish();
                return code;
            }
        }
    }
    output.finish();
    eprintln!("the service ended the event stream before the turn ended");
    EXIT_FAILED
}

/// The conversation's events as `follow` reads them: those that came while a question about an
/// approval waited for its answer first.
struct Events {
    stream: Fuse<BoxStream<'static, ServerEvent>>,
    put_aside: VecDeque<ServerEvent>,
}

impl Events {
    fn new(stream: impl Stream<Item = ServerEvent> + Send + 'static) -> Events {
        Events {
            stream: stream.boxed().fuse(),
            put_aside: VecDeque::new(),
        }
    }

    async fn next(&mut self) -> Option<ServerEvent> {
        match self.put_aside.pop_front() {
            Some(event) => Some(event),
            None => self.stream.next().await,
        }
    }
}

/// What `send` does about approvals: asks at a terminal, else says how to answer and stops.
struct Approvals<'a> {
    api: &'a Api,
    interactive: bool,
    /// Opened at the first question (a message read from stdin has used it up before).
    input: Option<Lines<BufReader<Stdin>>>,
    /// Each approval is handled once, though a snapshot and a replay may both show it.
    seen: HashSet<String>,
}

impl Approvals<'_> {
    /// Handles an approval the stream shows; `Some(exit code)` when `send` stops here.
    async fn handle(
        &mut self,
        approval: &Value,
        events: &mut Events,
        output: &mut Output,
    ) -> Option<u8> {
        if !self.seen.insert(text(&approval["id"]).to_owned()) {
            return None;
        }
        if self.interactive {
            let input = self
                .input
                .get_or_insert_with(|| BufReader::new(tokio::io::stdin()).lines());
            let mut console = SendConsole { input, events };
            if approval_prompt::ask(self.api, approval, &mut console).await == Asked::Done {
                return None;
            }
            // The input ended: what was printed is how to answer it elsewhere.
            if output.json {
                print_request(approval);
            }
            return Some(EXIT_APPROVAL);
        }
        // A replay shows approvals that were settled later in it.
        if !approval_prompt::waiting(self.api, approval).await.pending {
            return None;
        }
        if output.json {
            print_request(approval);
        } else {
            output.finish();
            eprintln!(
                "approval {} waits: `{}` {} (in {})",
                text(&approval["id"]),
                text(&approval["tool"]),
                approval_prompt::subject_line(&approval["subject"]),
                text(&approval["subject"]["cwd"])
            );
            eprintln!("{}", approval_prompt::how_to_answer(self.api, approval));
        }
        Some(EXIT_APPROVAL)
    }
}

/// The approval as the JSON line a script reads before `send` exits with `EXIT_APPROVAL`.
fn print_request(approval: &Value) {
    let line = json!({ "type": "approval.requested", "approval": approval });
    print_out(&format!("{line}\n"));
}

/// `send`'s terminal as an approval's question sees it: stderr (stdout is the reply), stdin,
/// and the conversation's events (put aside in order for `follow`).
struct SendConsole<'a> {
    input: &'a mut Lines<BufReader<Stdin>>,
    events: &'a mut Events,
}

impl Console for SendConsole<'_> {
    fn show(&mut self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }

    async fn next(&mut self, id: &str) -> Input {
        loop {
            tokio::select! {
                line = self.input.next_line() => {
                    return match line {
                        Ok(Some(line)) => Input::Line(line),
                        _ => Input::NoInput,
                    };
                }
                event = self.events.stream.next() => {
                    let Some(event) = event else {
                        return Input::Ended;
                    };
                    let settled = (event.kind == "approval.resolved"
                        && event.data["approval"]["id"] == id)
                        .then(|| event.data["approval"].clone());
                    self.events.put_aside.push_back(event);
                    if let Some(approval) = settled {
                        return Input::Settled(approval);
                    }
                }
            }
        }
    }
}

/// Where the reply goes: the agent's text as it streams, or every event as a JSON line.
struct Output {
    json: bool,
    /// Agent messages of the turn and how many bytes of each are printed.
    shown: HashMap<String, usize>,
    mid_line: bool,
}

impl Output {
    fn new(json: bool) -> Output {
        Output {
            json,
            shown: HashMap::new(),
            mid_line: false,
        }
    }

    fn event(&mut self, event: &ServerEvent) {
        if self.json {
            let line = json!({ "id": event.id, "event": event.kind, "data": event.data });
            print_out(&format!("{line}\n"));
        }
    }

    /// The part of the agent's answer this event adds (the root session's agent messages of
    /// the turn; a snapshot's running items give the text so far).
    fn reply(&mut self, event: &ServerEvent, turn: &Turn) {
        match event.kind.as_str() {
            "snapshot" => {
                for running in event.data["running"].as_array().into_iter().flatten() {
                    for item in running["items"].as_array().into_iter().flatten() {
                        if turn.is(&json!({ "item": item })) {
                            self.item_text(item);
                        }
                    }
                }
            }
            "item.started" | "item.completed" if turn.is(&event.data) => {
                self.item_text(&event.data["item"]);
                if event.kind == "item.completed" && event.data["item"]["kind"] == "agent_message" {
                    self.end_line();
                }
            }
            "item.delta" if event.data["field"] == "text" => {
                let id = text(&event.data["item_id"]);
                if let Some(shown) = self.shown.get_mut(id) {
                    let delta = text(&event.data["delta"]);
                    *shown += delta.len();
                    self.write(delta);
                }
            }
            _ => {}
        }
    }

    /// Prints what of an agent message's text is not on screen yet.
    fn item_text(&mut self, item: &Value) {
        if item["kind"] != "agent_message" || item["status"] == "failed" {
            return;
        }
        let full = text(&item["text"]);
        let shown = self.shown.entry(text(&item["id"]).to_owned()).or_default();
        if let Some(rest) = full.get(*shown..) {
            *shown = full.len();
            let rest = rest.to_owned();
            self.write(&rest);
        }
    }

    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.mid_line = !text.ends_with('\n');
        print_out(text);
    }

    fn end_line(&mut self) {
        if self.mid_line {
            self.write("\n");
        }
    }

    fn finish(&mut self) {
        if !self.json {
            self.end_line();
        }
    }
}

async fn next_event(
    events: &mut (impl Stream<Item = ServerEvent> + Unpin),
) -> Result<ServerEvent, SendError> {
    events.next().await.ok_or_else(|| SendError {
        code: EXIT_FAILED,
        message: "the service ended the event stream at once".to_owned(),
    })
}

/// The service refused the request (an unknown conversation, empty text, a bad mode): a usage
/// error. No answer at all is a failure.
fn refused(error: ApiError) -> SendError {
    let code = match &error {
        ApiError::Service { status, .. } if (400..500).contains(status) => EXIT_USAGE,
        _ => EXIT_FAILED,
    };
    SendError {
        code,
        message: error.to_string(),
    }
}

fn unreachable(error: ApiError) -> SendError {
    SendError {
        code: EXIT_FAILED,
        message: error.to_string(),
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn print_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
