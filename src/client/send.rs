//! `openvaala send`: one message from a script or an editor. It sends the message, prints the
//! agent's reply to stdout as it streams (or, with `--json`, every event of the conversation as
//! a JSON line), and exits with how the turn that took the message ended: 0 completed,
//! 1 failed, 130 interrupted, 2 when the request itself was refused (a usage error), 69 when
//! the service could not be reached or the stream was lost for good. Retries, the agent's
//! plan (as a checklist) and, last, the turn's tokens and cost go to stderr: stdout is the
//! reply alone, for a script to read. A tool call that waits for approval is asked about at a
//! terminal; otherwise `send` says how to answer it and exits 4, so a script never waits
//! silently for an answer it cannot give. Ctrl-C interrupts the turn and waits for its end; a
//! second Ctrl-C leaves at once.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use super::api::{Api, ApiError};
use super::approval_prompt::{self, Asked, Console, Input};
use super::events::{ServerEvent, turn_of};
use super::stream::{self, Events, Next};
use crate::api::approvals::Approval;
use crate::api::events::{ConversationEvent, DeltaField, RunningTurnView};
use crate::api::requests::{NewConversation, NewMessage};
use crate::domain::{Item, ItemKind, ItemStatus, MessageMode, PlanStep, TurnStatus};

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
    pub mode: Option<MessageMode>,
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
            let body = NewMessage {
                text: options.text.clone(),
                mode: options.mode.unwrap_or_default(),
                ..NewMessage::default()
            };
            let sent = api.send_message(id, &body).await.map_err(refused)?;
            let events = Events::new(api, id, vec![snapshot], stream);
            (events, Turn::of_message(id, &sent.message.id))
        }
        None => {
            let body = NewConversation {
                text: options.text.clone(),
                cwd: Some(options.cwd.clone()),
                model: options.model.clone(),
                agent: options.agent.clone(),
                ..NewConversation::default()
            };
            let created = api.create_conversation(&body).await.map_err(refused)?;
            let id = created.conversation.id;
            let (turn_id, session_id) = (created.turn_id, created.conversation.root_session_id);
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

    fn running_in(&self, running: &[RunningTurnView]) -> bool {
        running
            .iter()
            .any(|running| Some(running.turn_id.as_str()) == self.turn_id.as_deref())
    }

    /// Notes which turn took the message, and its session.
    fn observe(&mut self, event: &ConversationEvent) {
        if self.turn_id.is_none()
            && let Some(message_id) = self.message_id.as_deref()
        {
            let took_it = match event {
                ConversationEvent::TurnStarted {
                    turn_id,
                    message_ids,
                    ..
                } if message_ids.iter().any(|id| id == message_id) => Some(turn_id),
                // A steered message is an item of the running turn, with the message's id.
                ConversationEvent::ItemStarted { item } if item.id == message_id => {
                    Some(&item.turn_id)
                }
                _ => None,
            };
            if let Some(turn_id) = took_it {
                self.turn_id = Some(turn_id.clone());
            }
        }
        match event {
            ConversationEvent::TurnStarted { session_id, .. } if self.is(event) => {
                self.session_id = Some(session_id.clone());
            }
            ConversationEvent::Snapshot { running, .. } => {
                for running in running {
                    if Some(running.turn_id.as_str()) == self.turn_id.as_deref() {
                        self.session_id = Some(running.session_id.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether the event is about the turn (its start or end, one of its items).
    fn is(&self, event: &ConversationEvent) -> bool {
        self.turn_id.is_some() && turn_of(event) == self.turn_id.as_deref()
    }

    /// Whether the item is one of the turn's.
    fn owns(&self, item: &Item) -> bool {
        self.turn_id.as_deref() == Some(item.turn_id.as_str())
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
            self.turn.observe(&event.event);
            self.output.event(&event);
            let event = event.event;
            if matches!(event, ConversationEvent::Snapshot { .. })
                && std::mem::take(&mut reconnected)
            {
                // The service restarted: what happened meanwhile comes from what it stored.
                if let Some(code) = self.caught_up(&event).await {
                    return code;
                }
            }
            if let ConversationEvent::TurnEnded {
                status,
                error,
                usage,
                ..
            } = &event
                && self.turn.is(&event)
            {
                let code = self.ended(Some(*status), error.as_deref());
                if !self.output.json
                    && let Some(figures) = super::figures::turn_usage(usage)
                {
                    eprintln!("usage: {figures}");
                }
                return code;
            }
            if let ConversationEvent::ModelRetry {
                session_id,
                attempt,
                max_attempts,
                delay_ms,
                error,
                ..
            } = &event
                && self
                    .turn
                    .session_id
                    .as_ref()
                    .is_none_or(|s| s == session_id)
            {
                self.output.finish();
                eprintln!("{}", retry_line(*attempt, *max_attempts, *delay_ms, error));
            }
            if let ConversationEvent::ModelFallback {
                turn_id,
                from,
                to,
                reason,
                ..
            } = &event
                && self.turn.turn_id.as_ref() == Some(turn_id)
            {
                self.output.finish();
                eprintln!("{}", super::render::fallback_text(from, to, reason));
            }
            if !self.output.json && self.turn.turn_id.is_some() {
                self.output.reply(&event, self.turn);
            }
            let asked = match event {
                ConversationEvent::Snapshot { approvals, .. } => approvals,
                ConversationEvent::ApprovalRequested { approval } => vec![approval],
                _ => Vec::new(),
            };
            for approval in asked {
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

    /// The exit code of the turn's end (`None`: no end is known, taken as a failure).
    fn ended(&mut self, status: Option<TurnStatus>, error: Option<&str>) -> u8 {
        self.output.finish();
        match status {
            Some(TurnStatus::Completed) => EXIT_COMPLETED,
            Some(TurnStatus::Interrupted) => {
                eprintln!("the turn was interrupted");
                EXIT_INTERRUPTED
            }
            _ => {
                eprintln!("the turn failed: {}", error.unwrap_or("no error given"));
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
            if self.api.withdraw(id, message_id).await.is_ok() {
                eprintln!("your message was withdrawn before any turn took it");
                return Some(EXIT_INTERRUPTED);
            }
        }
        eprintln!("interrupting the turn… (Ctrl-C again to leave at once)");
        let api = self.api.clone();
        let (id, session) = (id.clone(), self.turn.session_id.clone());
        // The answer comes once the turn has ended, which the stream shows too.
        tokio::spawn(async move { api.interrupt(&id, session.as_deref()).await });
        None
    }

    /// After a restart, the fresh `snapshot` shows whether the turn still runs; if it ended
    /// meanwhile, its stored reply is printed and its end gives the exit code.
    async fn caught_up(&mut self, snapshot: &ConversationEvent) -> Option<u8> {
        let ConversationEvent::Snapshot {
            conversation,
            pending,
            running,
            ..
        } = snapshot
        else {
            return None;
        };
        let id = self.turn.conversation.clone();
        let items = self.api.items(&id, None, None).await.ok()?;
        if self.turn.turn_id.is_none() {
            let message_id = self.turn.message_id.clone()?;
            if pending.iter().any(|message| message.id == message_id) {
                return None;
            }
            let Some(stored) = items.iter().find(|item| item.id == message_id) else {
                self.output.finish();
                eprintln!(
                    "openvaala send: your message was waiting when the service restarted and \
                     was lost; send it again"
                );
                return Some(EXIT_UNAVAILABLE);
            };
            self.turn.turn_id = Some(stored.turn_id.clone());
        }
        if self.turn.running_in(running) {
            return None;
        }
        if !self.output.json {
            for item in items.iter().filter(|item| self.turn.owns(item)) {
                self.output.item_text(item);
            }
        }
        let last_turn = conversation.last_turn.as_ref();
        Some(self.ended(
            last_turn.map(|last| last.status),
            last_turn.and_then(|last| last.error.as_deref()),
        ))
    }
}

/// A retry (`model.retry`) as `send` reports it on stderr.
fn retry_line(attempt: u32, max_attempts: u32, delay_ms: u64, error: &str) -> String {
    format!(
        "the model call failed ({error}); attempt {} of {max_attempts} in {:.1} s",
        attempt + 1,
        delay_ms as f64 / 1000.0
    )
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
        approval: &Approval,
        events: &mut Events,
        output: &mut Output,
    ) -> Option<u8> {
        if !self.seen.insert(approval.id.clone()) {
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
                approval.id,
                approval.tool,
                approval_prompt::subject_line(&approval.subject),
                crate::text::visible(&approval.subject.cwd)
            );
            eprintln!("{}", approval_prompt::how_to_answer(self.api, approval));
        }
        Some(EXIT_APPROVAL)
    }
}

/// The approval as the JSON line a script reads before `send` exits with `EXIT_APPROVAL`: the
/// `approval.requested` event's data.
fn print_request(approval: &Approval) {
    let event = ConversationEvent::ApprovalRequested {
        approval: approval.clone(),
    };
    let line = serde_json::to_string(&event).unwrap_or_default();
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
                    let settled = match &event.event {
                        ConversationEvent::ApprovalResolved { approval } if approval.id == id => {
                            Some(Box::new(approval.clone()))
                        }
                        _ => None,
                    };
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

    /// Every event as the service sent it, as one JSON line.
    fn event(&mut self, event: &ServerEvent) {
        if self.json {
            let data: Value = serde_json::from_str(&event.raw).unwrap_or_default();
            let line = json!({ "id": event.id, "event": event.name, "data": data });
            print_out(&format!("{line}\n"));
        }
    }

    /// The part of the agent's answer this event adds (the root session's agent messages of
    /// the turn; a snapshot's running items give the text so far).
    fn reply(&mut self, event: &ConversationEvent, turn: &Turn) {
        match event {
            ConversationEvent::Snapshot { running, .. } => {
                for item in running.iter().flat_map(|running| &running.items) {
                    if turn.owns(item) {
                        self.item_text(item);
                    }
                }
            }
            ConversationEvent::ItemStarted { item } if turn.is(event) => self.item_text(item),
            ConversationEvent::ItemCompleted { item } if turn.is(event) => {
                if let ItemKind::Plan { explanation, steps } = &item.kind {
                    self.plan(explanation.as_deref(), steps);
                }
                self.item_text(item);
                if matches!(item.kind, ItemKind::AgentMessage { .. }) {
                    self.end_line();
                }
            }
            ConversationEvent::ItemDelta {
                item_id,
                field: DeltaField::Text,
                delta,
                ..
            } => {
                if let Some(shown) = self.shown.get_mut(item_id) {
                    *shown += delta.len();
                    self.write(delta);
                }
            }
            _ => {}
        }
    }

    /// Prints what of an agent message's text is not on screen yet.
    fn item_text(&mut self, item: &Item) {
        let ItemKind::AgentMessage { text: full } = &item.kind else {
            return;
        };
        if item.status == ItemStatus::Failed {
            return;
        }
        let shown = self.shown.entry(item.id.clone()).or_default();
        if let Some(rest) = full.get(*shown..) {
            *shown = full.len();
            let rest = rest.to_owned();
            self.write(&rest);
        }
    }

    /// The agent's plan, as a checklist on stderr with the turn's other news: stdout is the
    /// reply alone.
    fn plan(&mut self, explanation: Option<&str>, steps: &[PlanStep]) {
        self.end_line();
        let mut text = String::from("plan:\n");
        for line in super::render::plan_lines(explanation, steps) {
            text += &format!("  {line}\n");
        }
        eprint!("{}", crate::text::visible(&text));
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

fn print_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}
