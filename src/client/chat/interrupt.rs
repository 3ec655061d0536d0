//! Ctrl-C in the plain chat at a terminal: the first while the root agent works interrupts
//! its turn (the service stops it, the client keeps running); a second, or one while nothing
//! runs, quits. The follower keeps `Activity` up to date from the stream; a task of its own
//! takes the signals, so Ctrl-C works whatever the command loop waits for (a line, a turn's
//! end, an approval's answer).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::signal::unix::{SignalKind, signal};

use super::output::print_out;
use crate::api::events::ConversationEvent;
use crate::client::api::Api;

/// What Ctrl-C looks at: the followed conversation and its root agent's running turns.
#[derive(Default)]
pub(super) struct Activity {
    conversation: Option<String>,
    running: HashSet<String>,
    /// An interrupt was asked for: the next Ctrl-C quits.
    interrupting: bool,
}

pub(super) type SharedActivity = Arc<Mutex<Activity>>;

impl Activity {
    /// A conversation is followed from now on (its snapshot says what runs).
    pub(super) fn follow(&mut self, conversation: &str) {
        *self = Activity {
            conversation: Some(conversation.to_owned()),
            ..Activity::default()
        };
    }

    /// The conversation is no longer followed.
    pub(super) fn unfollow(&mut self, conversation: &str) {
        if self.conversation.as_deref() == Some(conversation) {
            *self = Activity::default();
        }
    }

    /// An event of `conversation`'s stream (`root`: its root session).
    pub(super) fn observe(&mut self, conversation: &str, root: &str, event: &ConversationEvent) {
        if self.conversation.as_deref() != Some(conversation) {
            return;
        }
        match event {
            ConversationEvent::Snapshot { running, .. } => {
                self.running = running
                    .iter()
                    .filter(|turn| turn.session_id == root)
                    .map(|turn| turn.turn_id.clone())
                    .collect();
            }
            ConversationEvent::TurnStarted {
                session_id,
                turn_id,
                ..
            } if session_id == root => {
                self.running.insert(turn_id.clone());
            }
            ConversationEvent::TurnEnded {
                session_id,
                turn_id,
                ..
            } if session_id == root => {
                self.running.remove(turn_id);
            }
            _ => return,
        }
        if self.running.is_empty() {
            self.interrupting = false;
        }
    }

    /// What a Ctrl-C does now: interrupt this conversation's turn, or quit (`None`).
    fn ctrl_c(&mut self) -> Option<String> {
        if self.running.is_empty() || self.interrupting {
            return None;
        }
        self.interrupting = true;
        self.conversation.clone()
    }
}

/// Takes Ctrl-C from now on (SIGINT no longer ends the process on its own).
pub(super) fn handle_ctrl_c(api: Api, activity: SharedActivity) -> anyhow::Result<()> {
    let mut interrupts = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        while interrupts.recv().await.is_some() {
            let interrupt = activity.lock().expect("activity lock").ctrl_c();
            let Some(id) = interrupt else {
                print_out("\n");
                std::process::exit(0);
            };
            print_out("\n[interrupting the turn… Ctrl-C again quits]\n");
            let api = api.clone();
            // Answered once the turn has ended, which the stream shows: not waited for here.
            tokio::spawn(async move {
                match api.interrupt(&id, None).await {
                    Ok(_) => {
                        if let Some(held) = crate::client::waiting::held_line(&api, &id).await {
                            print_out(&held);
                        }
                    }
                    Err(error) => print_out(&format!("[cannot interrupt the turn: {error}]\n")),
                }
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fixtures::{running, snapshot};
    use crate::domain::{TurnStatus, TurnUsage};

    #[test]
    fn ctrl_c_interrupts_a_running_root_turn_once_then_quits() {
        let mut activity = Activity::default();
        activity.follow("c_1");
        assert_eq!(activity.ctrl_c(), None, "nothing runs: quit");
        let sub = snapshot(Vec::new(), vec![running("s_sub", "t_sub", Vec::new())]);
        activity.observe("c_1", "s_root", &sub);
        assert_eq!(activity.ctrl_c(), None, "only a sub-agent works");
        let started = ConversationEvent::TurnStarted {
            session_id: "s_root".to_owned(),
            turn_id: "t_1".to_owned(),
            message_ids: Vec::new(),
        };
        let ended = ConversationEvent::TurnEnded {
            session_id: "s_root".to_owned(),
            turn_id: "t_1".to_owned(),
            status: TurnStatus::Completed,
            error: None,
            error_code: None,
            files_changed: 0,
            usage: TurnUsage::default(),
        };
        activity.observe("c_1", "s_root", &started);
        assert_eq!(activity.ctrl_c().as_deref(), Some("c_1"));
        assert_eq!(activity.ctrl_c(), None, "the second Ctrl-C quits");
        activity.observe("c_1", "s_root", &ended);
        activity.observe("c_1", "s_root", &started);
        assert_eq!(activity.ctrl_c().as_deref(), Some("c_1"), "a new turn");
        activity.unfollow("c_1");
        assert_eq!(activity.ctrl_c(), None);
    }
}
