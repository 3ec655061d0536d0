//! The command loop's waits on what the follower signals (a snapshot, a turn's start and
//! end, a compaction's end), and the approval questions asked on the way: the chat's
//! terminal as a question sees it (`ChatConsole`).

use tokio::io::{BufReader, Lines, Stdin};

use super::Chat;
use super::following::{Following, Signal};
use super::output::print_out;
use crate::api::approvals::Approval;
use crate::client::agents;
use crate::client::api::Api;
use crate::client::approval_prompt::{self, Asked, Console, Input};

impl Chat {
    /// The next signal a wait looks at; approvals asked meanwhile are asked about on the way
    /// (in a script, the next line answers). `None` when the stream ended, or when the input
    /// ended before an answer (nothing could go on: the approval waits for another client).
    pub(super) async fn next_signal(&mut self) -> Option<Signal> {
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

    pub(super) async fn ask(&mut self, approval: &Approval) -> Asked {
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

    pub(super) async fn wait_snapshot(&mut self) -> Vec<String> {
        while let Some(signal) = self.next_signal().await {
            if let Signal::Snapshot { running } = signal {
                return running;
            }
        }
        Vec::new()
    }

    /// The turn that took the message. `None` if the stream started over with a snapshot
    /// meanwhile: the turn may have come and gone (what it stored has been shown).
    pub(super) async fn wait_turn_start(&mut self, message_id: &str) -> Option<String> {
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
    pub(super) async fn wait_turn_end(&mut self, turn_id: &str) {
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
    pub(super) async fn wait_compaction_end(&mut self) {
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
                    Some(Signal::ApprovalResolved(approval)) if approval.id == id => {
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
