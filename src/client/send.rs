//! `openvaala send`: one message from a script or an editor. It sends the message, prints the
//! agent's reply to stdout as it streams (or, with `--json`, every event of the conversation as
//! a JSON line), and exits with how the turn that took the message ended: 0 completed,
//! 1 failed, 130 interrupted, 2 when the request itself was refused (a usage error), 69 when
//! the service could not be reached or the stream was lost for good. A tool call that waits
//! for approval is asked about at a terminal; otherwise `send` says how to answer it and exits
//! 4, so a script never waits silently for an answer it cannot give. Ctrl-C interrupts the
//! turn and waits for its end; a second Ctrl-C leaves at once.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use super::api::{Api, ApiError};
use super::approval_prompt::{self, Asked, Console, Input};
use super::events::ServerEvent;
use super::stream::{self, Events, Next};

/// Exit codes, as a shell reads them.
pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// A tool call waits for approval and nobody at this terminal can answer it.
pub const EXIT_APPROVAL: u8 = 4;
/// The service could not be reached, or the event stream was lost and could not be opened
/// again (EX_UNAVAILABLE of sysexits.h): the turn's outcome is unknown.
pub const EXIT_UNAVAILABLE: u8 = 69;
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
    /// The model and the agent of a new conversation (the service's defaults when `None`).
    pub model: Option<String>,
    pub agent: Option<String>,
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
    let mut interrupts = Interrupts::new();
    let mut output = Output::new(options.json);
    let mut approvals = Approvals {
        api: &options.api,
        interactive: options.interactive,
        input: None,
        seen: HashSet::new(),
    };
    let api = &options.api;
    let (events, mut turn) = match &options.conversation {
        Some(id) => {
            // Follow first, then send: nothing the message starts can be missed.
            let mut stream = api.events(id, None).await.map_err(refused)?.boxed();
            let snapshot = next_event(&mut stream).await?;
            eprintln!("conversation {id}");
            let mut body = json!({ "text": options.text });
            if let Some(mode) = &options.mode {
                body["mode"] = json!(mode);
            }
            let sent = api
                .post(&format!("/api/conversations/{id}/messages"), &body)
                .await
                .map_err(refused)?;
            let message_id = text(&sent["message"]["id"]);
            let events = Events::new(api, id, vec![snapshot], stream);
            (events, Turn::of_message(id, message_id))
        }
        None => {
            let mut body = json!({ "text": options.text, "cwd": options.cwd });
            if let Some(model) = &options.model {
                body["model"] = json!(model);
            }
            if let Some(agent) = &options.agent {
                body["agent"] = json!(agent);
            }
            let created = api
                .post("/api/conversations", &body)
                .await
                .map_err(refused)?;
            let id = text(&created["conversation"]["id"]).to_owned();
            let turn_id = text(&created["turn_id"]).to_owned();
            let session_id = text(&created["conversation"]["root_session_id"]).to_owned();
            eprintln!("conversation {id}");
            let events = stream::from_first_event(api, &id).await.map_err(refused)?;
            (events, Turn::first(&id, turn_id, session_id))
        }
    };
    let mut follow = Follow {
        api,
        events,
        turn: &mut turn,
        output: &mut output,
        approvals: &mut approvals,
        interrupts: &mut interrupts,
    };
    Ok(follow.run().await)
}

/// The turn the message went into: known from the start (a new conversation's first turn),
/// or found when the message starts a turn or is steered into the running one.
struct Turn {
    conversation: String,
    message_id: Option<String>,
    turn_id: Option<String>,
    /// Its session, once known: its `model.retry` events are shown.
    session_id: Option<String>,
}

impl Turn {
    /// A new conversation's first turn, in its root session. (Its `turn.started` is not
    /// among the conversation's events, so the session is not learnt from it.)
    fn first(conversation: &str, turn_id: String, session_id: String) -> Turn {
        Turn {
            conversation: conversation.to_owned(),
            message_id: None,
            turn_id: Some(turn_id),
            session_id: Some(session_id).filter(|id| !id.is_empty()),
        }
    }

    fn of_message(conversation: &str, message_id: &str) -> Turn {
        Turn {
            conversation: conversation.to_owned(),
            message_id: Some(message_id.to_owned()),
            turn_id: None,
            session_id: None,
        }
    }

    fn running_in(&self, snapshot: &Value) -> bool {
        snapshot["running"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|running| Some(text(&running["turn_id"])) == self.turn_id.as_deref())
    }

    /// Notes which turn took the message, and its session.
    fn observe(&mut self, event: &ServerEvent) {
        if self.turn_id.is_none()
            && let Some(message_id) = self.message_id.as_deref()
        {
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
        match event.kind.as_str() {
            "turn.started" if self.is(&event.data) => {
                self.session_id = event.data["session_id"].as_str().map(str::to_owned);
            }
            "snapshot" => {
                for running in event.data["running"].as_array().into_iter().flatten() {
                    if Some(text(&running["turn_id"])) == self.turn_id.as_deref() {
                        self.session_id = running["session_id"].as_str().map(str::to_owned);
                    }
                }
            }
            _ => {}
        }
    }

    fn is(&self, data: &Value) -> bool {
        self.turn_id.is_some()
            && (data["turn_id"].as_str() == self.turn_id.as_deref()
                || data["item"]["turn_id"].as_str() == self.turn_id.as_deref())
    }
}

/// Following the turn to its end.
struct Follow<'a, 'b> {
    api: &'a Api,
    events: Events,
    turn: &'a mut Turn,
    output: &'a mut Output,
    approvals: &'a mut Approvals<'b>,
    interrupts: &'a mut Interrupts,
}

impl Follow<'_, '_> {
    /// Prints the events of the conversation until the turn ends; returns its exit code.
    async fn run(&mut self) -> u8 {
        let mut reconnected = false;
        loop {
            let next = tokio::select! {
                next = self.events.next() => next,
                () = self.interrupts.next() => match self.interrupt().await {
                    Some(code) => return code,
                    None => continue,
                },
            };
            let event = match next {
                Next::Event(event) => *event,
                Next::Reconnected => {
                    reconnected = true;
                    continue;
                }
                Next::Lost(why) => {
                    self.output.finish();
                    eprintln!("openvaala send: {why}; the turn may still be running");
                    return EXIT_UNAVAILABLE;
                }
            };
            self.turn.observe(&event);
            self.output.event(&event);
            if event.kind == "snapshot" && std::mem::take(&mut reconnected) {
                // The service restarted: what happened meanwhile comes from what it stored.
                if let Some(code) = self.caught_up(&event.data).await {
                    return code;
                }
            }
            if event.kind == "turn.ended" && self.turn.is(&event.data) {
                return self.ended(text(&event.data["status"]), &event.data["error"]);
            }
            if event.kind == "model.retry"
                && self
                    .turn
                    .session_id
                    .as_deref()
                    .is_none_or(|s| event.data["session_id"] == s)
            {
                self.output.finish();
                eprintln!("{}", retry_line(&event.data));
            }
            if !self.output.json && self.turn.turn_id.is_some() {
                self.output.reply(&event, self.turn);
            }
            let asked = match event.kind.as_str() {
                "snapshot" => event.data["approvals"].as_array().cloned(),
                "approval.requested" => Some(vec![event.data["approval"].clone()]),
                _ => None,
            };
            for approval in asked.into_iter().flatten() {
                let handled = tokio::select! {
                    handled = self.approvals.handle(&approval, &mut self.events, self.output) => handled,
                    // An interrupt cancels the approval too.
                    () = self.interrupts.next() => self.interrupt().await,
                };
                if let Some(code) = handled {
                    self.output.finish();
                    return code;
                }
            }
        }
    }

    fn ended(&mut self, status: &str, error: &Value) -> u8 {
        self.output.finish();
        match status {
            "completed" => EXIT_COMPLETED,
            "interrupted" => {
                eprintln!("the turn was interrupted");
                EXIT_INTERRUPTED
            }
            _ => {
                eprintln!(
                    "the turn failed: {}",
                    error.as_str().unwrap_or("no error given")
                );
                EXIT_FAILED
            }
        }
    }

    /// Ctrl-C: the first interrupts the turn (its end comes on the stream), the second leaves
    /// at once. `Some(exit code)` when `send` stops here.
    async fn interrupt(&mut self) -> Option<u8> {
        self.output.finish();
        if self.interrupts.count > 1 {
            eprintln!("openvaala send: left without waiting; the turn may still be running");
            return Some(EXIT_INTERRUPTED);
        }
        let id = &self.turn.conversation;
        if self.turn.turn_id.is_none()
            && let Some(message_id) = &self.turn.message_id
        {
            // The message still waits for its turn: taking it back is the interrupt.
            let path = format!("/api/conversations/{id}/pending/{message_id}");
            if self.api.delete(&path).await.is_ok() {
                eprintln!("your message was withdrawn before any turn took it");
                return Some(EXIT_INTERRUPTED);
            }
        }
        eprintln!("interrupting the turn… (Ctrl-C again to leave at once)");
        let api = self.api.clone();
        let path = format!("/api/conversations/{id}/interrupt");
        let body = match &self.turn.session_id {
            Some(session) => json!({ "session_id": session }),
            None => json!({}),
        };
        // The answer comes once the turn has ended, which the stream shows too.
        tokio::spawn(async move { api.post(&path, &body).await });
        None
    }

    /// After a restart, the fresh `snapshot` shows whether the turn still runs; if it ended
    /// meanwhile, its stored reply is printed and its end gives the exit code.
    async fn caught_up(&mut self, snapshot: &Value) -> Option<u8> {
        let id = self.turn.conversation.clone();
        let items = stored_items(self.api, &id).await.ok()?;
        if self.turn.turn_id.is_none() {
            let message_id = self.turn.message_id.clone()?;
            let waiting = snapshot["pending"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|message| message["id"] == message_id.as_str());
            if waiting {
                return None;
            }
            let Some(stored) = items.iter().find(|item| item["id"] == message_id.as_str()) else {
                self.output.finish();
                eprintln!(
                    "openvaala send: your message was waiting when the service restarted and \
                     was lost; send it again"
                );
                return Some(EXIT_UNAVAILABLE);
            };
            self.turn.turn_id = stored["turn_id"].as_str().map(str::to_owned);
        }
        if self.turn.running_in(snapshot) {
            return None;
        }
        if !self.output.json {
            for item in items
                .iter()
                .filter(|item| self.turn.is(&json!({ "item": item })))
            {
                self.output.item_text(item);
            }
        }
        let last_turn = &snapshot["conversation"]["last_turn"];
        Some(self.ended(text(&last_turn["status"]), &last_turn["error"]))
    }
}

/// A retry as `send` reports it on stderr.
fn retry_line(data: &Value) -> String {
    let delay_ms = data["delay_ms"].as_u64().unwrap_or(0);
    format!(
        "the model call failed ({}); attempt {} of {} in {:.1} s",
        text(&data["error"]),
        data["attempt"].as_u64().unwrap_or(0) + 1,
        data["max_attempts"].as_u64().unwrap_or(0),
        delay_ms as f64 / 1000.0
    )
}

/// The root session's stored items.
async fn stored_items(api: &Api, id: &str) -> Result<Vec<Value>, ApiError> {
    let mut items = Vec::new();
    let mut path = format!("/api/conversations/{id}/items?limit=2000");
    loop {
        let page = api.get(&path).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next_after_seq"].as_u64() {
            Some(next) => {
                path = format!("/api/conversations/{id}/items?limit=2000&after_seq={next}")
            }
            None => return Ok(items),
        }
    }
}

/// Ctrl-C as `send` counts it: once the handler is installed, SIGINT no longer ends the
/// process on its own.
struct Interrupts {
    signal: Option<tokio::signal::unix::Signal>,
    count: u32,
}

impl Interrupts {
    fn new() -> Interrupts {
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        Interrupts { signal, count: 0 }
    }

    async fn next(&mut self) {
        match &mut self.signal {
            Some(signal) => {
                signal.recv().await;
                self.count += 1;
            }
            None => std::future::pending().await,
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
            if approval_prompt::ask(self.api, &super::typed(approval), &mut console).await
                == Asked::Done
            {
                return None;
            }
            // The input ended: what was printed is how to answer it elsewhere.
            if output.json {
                print_request(approval);
            }
            return Some(EXIT_APPROVAL);
        }
        // A replay shows approvals that were settled later in it.
        if !approval_prompt::waiting(self.api, &super::typed(approval))
            .await
            .pending
        {
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
                approval_prompt::subject_line(&super::typed(&approval["subject"])),
                crate::text::visible(text(&approval["subject"]["cwd"]))
            );
            eprintln!(
                "{}",
                approval_prompt::how_to_answer(self.api, &super::typed(approval))
            );
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
                event = self.events.pull() => {
                    let Some(event) = event else {
                        return Input::Ended;
                    };
                    let settled = (event.kind == "approval.resolved"
                        && event.data["approval"]["id"] == id)
                        .then(|| event.data["approval"].clone());
                    self.events.put_aside.push_back(event);
                    if let Some(approval) = settled {
                        return Input::Settled(Box::new(super::typed(&approval)));
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
    events: &mut (impl futures::Stream<Item = ServerEvent> + Unpin),
) -> Result<ServerEvent, SendError> {
    events.next().await.ok_or_else(|| SendError {
        code: EXIT_UNAVAILABLE,
        message: "the service ended the event stream at once".to_owned(),
    })
}

/// The service refused the request (an unknown conversation, empty text, a bad mode): a usage
/// error. No answer at all, or none this client can read (as a body that was not JSON always
/// was): the service is unavailable. Any other error answer: a failure.
fn refused(error: ApiError) -> SendError {
    let code = match &error {
        ApiError::Service { status, .. } if (400..500).contains(status) => EXIT_USAGE,
        ApiError::Service { .. } => EXIT_FAILED,
        ApiError::Unreachable { .. } | ApiError::Unreadable { .. } => EXIT_UNAVAILABLE,
    };
    SendError {
        code,
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
