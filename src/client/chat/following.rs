//! The conversation the chat follows, as its command loop sees it: the signals the follower
//! task sends (`Signal`), and waiting for the next one.

use std::collections::VecDeque;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::interrupt::SharedActivity;
use crate::api::approvals::Approval;

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
    ApprovalRequested(Box<Approval>),
    /// An approval was settled: a question about it is dropped.
    ApprovalResolved(Box<Approval>),
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
    pub(super) activity: SharedActivity,
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

/// A signal for the command loop while it waits for a line: never, while nothing is followed.
pub(super) async fn idle_signal(following: &mut Option<Following>) -> Signal {
    match following {
        Some(following) => match following.next().await {
            Some(signal) => signal,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
