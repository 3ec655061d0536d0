//! `openvaala send`: one message from a script or an editor. It sends the message, prints the
//! agent's reply to stdout as it streams (or, with `--json`, every event of the conversation as
//! a JSON line), and exits with how the turn that took the message ended: 0 completed,
//! 1 failed, 130 interrupted, 2 when the request itself was refused (a usage error).

use std::collections::HashMap;
use std::io::Write as _;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::api::{Api, ApiError, ServerEvent};
use crate::bus::EventId;

/// Exit codes, as a shell reads them.
pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
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
    match &options.conversation {
        Some(id) => {
            // Follow first, then send: nothing the message starts can be missed.
            let mut events = options.api.events(id, None).await.map_err(refused)?.boxed();
            let snapshot = next_event(&mut events).await?;
            output.event(&snapshot);
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
            Ok(follow(events, &mut turn, &mut output).await)
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
            follow_new(&options.api, &id, turn_id, &mut output).await
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
) -> Result<u8, SendError> {
    let mut turn = Turn::known(turn_id);
    let mut events = api.events(id, None).await.map_err(unreachable)?.boxed();
    let snapshot = next_event(&mut events).await?;
    if turn.running_in(&snapshot.data) {
        let events = futures::stream::iter([snapshot]).chain(events);
        return Ok(follow(events, &mut turn, output).await);
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
    let events = futures::stream::iter([first]).chain(replay);
    Ok(follow(events, &mut turn, output).await)
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
    events: impl Stream<Item = ServerEvent>,
    turn: &mut Turn,
    output: &mut Output,
) -> u8 {
    futures::pin_mut!(events);
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
    }
    output.finish();
    eprintln!("the service ended the event stream before the turn ended");
    EXIT_FAILED
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
