//! `/waiting` in both chats: the messages that wait for the agent, numbered; `/waiting send N`
//! sends one now (on its own while the agent is idle, as after a stop; into the running turn
//! otherwise); `/waiting withdraw N` takes one back (its text returns to the input).

use super::api::{Api, ApiError};
use crate::domain::{Message, MessageStatus};

const USAGE: &str = "[/waiting lists the waiting messages; /waiting send N sends one now; \
     /waiting withdraw N takes one back]\n";
/// The most of a message one line shows.
const TEXT_CHARS: usize = 70;

/// What `/waiting ARGUMENT` did.
pub enum Outcome {
    /// Lines in brackets to show (the list, what was sent, or what to type instead).
    Said(String),
    /// A message taken back: its text goes back to the input.
    Withdrawn(Message),
}

pub async fn command(api: &Api, conversation: &str, argument: &str) -> Result<Outcome, ApiError> {
    let mut words = argument.split_whitespace();
    let pending = api.conversation(conversation).await?.pending;
    let find = |which: &str| {
        let found = match which.parse::<usize>() {
            Ok(number) => pending.get(number.wrapping_sub(1)),
            Err(_) => pending.iter().find(|message| message.id == which),
        };
        found
            .cloned()
            .ok_or_else(|| format!("[no waiting message {which}; /waiting lists them]\n"))
    };
    Ok(match (words.next(), words.next(), words.next()) {
        (None, _, _) => Outcome::Said(list(&pending)),
        (Some("send"), Some(which), None) => match find(which) {
            Ok(message) => {
                let sent = api.send_pending_now(conversation, &message.id).await?;
                Outcome::Said(if sent.status == MessageStatus::Waiting {
                    "[sent into the running turn: the agent reads it at its next step]\n".to_owned()
                } else {
                    format!("[sent now: {}]\n", first_line(&sent.text))
                })
            }
            Err(said) => Outcome::Said(said),
        },
        (Some("withdraw"), Some(which), None) => match find(which) {
            Ok(message) => Outcome::Withdrawn(api.withdraw(conversation, &message.id).await?),
            Err(said) => Outcome::Said(said),
        },
        _ => Outcome::Said(USAGE.to_owned()),
    })
}

/// The waiting messages, numbered, one line each.
fn list(pending: &[Message]) -> String {
    if pending.is_empty() {
        return "[no message waits]\n".to_owned();
    }
    let mut out = String::new();
    for (number, message) in pending.iter().enumerate() {
        out.push_str(&format!(
            "[{}. ({}) {}]\n",
            number + 1,
            crate::client::wire_text(&message.mode),
            first_line(&message.text)
        ));
    }
    out.push_str(USAGE);
    out
}

/// A message's first line, cut to [`TEXT_CHARS`].
pub fn first_line(text: &str) -> String {
    let line = super::render::first_line(text);
    if line.chars().count() <= TEXT_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(TEXT_CHARS - 1).collect();
    format!("{cut}…")
}

/// What the input says while messages wait held after a stop: the next message goes after
/// them, never silently with them.
pub fn held_notice(count: usize) -> String {
    let messages = if count == 1 {
        "message waits"
    } else {
        "messages wait"
    };
    format!(
        "{count} {messages} since the stop: the next message goes after them · /waiting send N \
         sends one now, /waiting withdraw N takes one back"
    )
}

/// After a stop, the line a plain client prints when messages still wait (held until the
/// next message); `None` when none waits.
pub async fn held_line(api: &Api, conversation: &str) -> Option<String> {
    let view = api.conversation(conversation).await.ok()?;
    (!view.pending.is_empty()).then(|| format!("[{}]\n", held_notice(view.pending.len())))
}
