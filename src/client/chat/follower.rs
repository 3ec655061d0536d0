//! The task that follows the conversation's events: it prints them (`Renderer`), reconnects
//! when the stream ends (reading from the history what a fresh snapshot cannot replay), and
//! tells the command loop what it waits for (`Signal`).

use std::collections::{HashSet, VecDeque};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Chat;
use super::interrupt::SharedActivity;
use super::output::{print_out, print_stored, text};
use crate::client::api::{Api, ApiError};
use crate::client::events::ServerEvent;
use crate::client::position::Position;

/// What the event follower tells the command loop.
#[derive(Debug)]
pub(super) enum Signal {
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
pub(super) struct Following {
    pub(super) id: String,
    pub(super) task: JoinHandle<()>,
    pub(super) signals: mpsc::UnboundedReceiver<Signal>,
    /// Signals that came while a question about an approval waited for its answer.
    pub(super) put_aside: VecDeque<Signal>,
    /// The stream has ended: no more signals.
    pub(super) closed: bool,
    /// What Ctrl-C interrupts: no longer this conversation once it is not followed.
    activity: SharedActivity,
}

impl Following {
    /// The next signal, what was put aside first; `None` once the stream has ended.
    pub(super) async fn next(&mut self) -> Option<Signal> {
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
        self.activity
            .lock()
            .expect("activity lock")
            .unfollow(&self.id);
    }
}

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
                let ServerEvent { id, kind, data, .. } = event;
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
                activity.lock().expect("activity lock").observe(
                    &conversation,
                    &position.root_session_id,
                    &kind,
                    &data,
                );
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
            activity: self.activity.clone(),
        });
        Ok(())
    }
}

/// The stored items of the root session after `after` (all of them for `None`).
pub(super) async fn items_after(
    api: &Api,
    id: &str,
    after: Option<u64>,
) -> Result<Vec<Value>, ApiError> {
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
