//! The task that follows the conversation's events: it prints them (`Renderer`), reconnects
//! when the stream ends (reading from the history what a fresh snapshot cannot replay), and
//! tells the command loop what it waits for (`Signal`).

use std::collections::{HashSet, VecDeque};

use tokio::sync::mpsc;

use super::Chat;
use super::following::{Following, Signal};
use super::output::{print_out, print_stored};
use crate::api::approvals::Approval;
use crate::api::errors::ErrorCode;
use crate::api::events::ConversationEvent;
use crate::client::api::{Api, ApiError};
use crate::client::events::ServerEvent;
use crate::client::position::Position;
use crate::domain::ItemStatus;

impl Chat {
    /// Starts following a conversation's events (and stops following the previous one).
    pub(super) async fn follow(&mut self, id: &str) -> Result<(), ApiError> {
        let events = self.api.events(id, None).await?;
        self.following = None;
        self.activity.lock().expect("activity lock").follow(id);
        let activity = self.activity.clone();
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
                let ServerEvent { id, event, .. } = event;
                let snapshot = matches!(event, ConversationEvent::Snapshot { .. });
                if std::mem::take(&mut reconnected) && snapshot {
                    // The service could not replay what was missed (it restarted, or too much
                    // happened): what was stored meanwhile comes from the history.
                    let mut missed = api
                        .items(&conversation, None, Some(position.resume_after()))
                        .await
                        .unwrap_or_default();
                    // The running ones come with the snapshot.
                    missed.retain(|item| item.status != ItemStatus::Running);
                    print_stored(&renderer, &missed);
                }
                if id.is_some() {
                    position.last_event_id = id;
                }
                position.observe(&event);
                activity.lock().expect("activity lock").observe(
                    &conversation,
                    &position.root_session_id,
                    &event,
                );
                let mut out = renderer.lock().expect("renderer lock").event(&event);
                // The prompt comes back when the root agent is done (not a sub-agent).
                if interactive
                    && let ConversationEvent::TurnEnded { session_id, .. } = &event
                    && *session_id == position.root_session_id
                {
                    out.push_str("> ");
                }
                print_out(&out);
                let (signal, mut approvals) = signal_of(event);
                approvals.retain(|approval| asked.insert(approval.id.clone()));
                let approvals = approvals
                    .into_iter()
                    .map(|approval| Signal::ApprovalRequested(Box::new(approval)));
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
            activity: self.activity.clone(),
        });
        Ok(())
    }
}

/// What an event signals to the command loop, and the approvals it shows waiting (each is
/// passed on once).
fn signal_of(event: ConversationEvent) -> (Option<Signal>, Vec<Approval>) {
    let signal = match event {
        ConversationEvent::Snapshot {
            running, approvals, ..
        } => {
            let running = running.into_iter().map(|turn| turn.turn_id).collect();
            return (Some(Signal::Snapshot { running }), approvals);
        }
        ConversationEvent::ApprovalRequested { approval } => return (None, vec![approval]),
        ConversationEvent::TurnStarted {
            turn_id,
            message_ids,
            ..
        } => Signal::TurnStarted {
            turn_id,
            message_ids,
        },
        ConversationEvent::TurnEnded { turn_id, .. } => Signal::TurnEnded { turn_id },
        ConversationEvent::CompactionCompleted { .. }
        | ConversationEvent::CompactionFailed { .. } => Signal::CompactionEnded,
        ConversationEvent::ApprovalResolved { approval } => {
            Signal::ApprovalResolved(Box::new(approval))
        }
        _ => return (None, Vec::new()),
    };
    (Some(signal), Vec::new())
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
            Err(error) if error.is(ErrorCode::NotFound) => {
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
