//! The conversation's events as the full-screen chat takes them in: a task reads the stream
//! (reconnecting with `Last-Event-ID`, `client::stream`) and hands each event over; `App::apply`
//! updates the transcript (a turn's tokens and cost when it ends), the waiting messages and
//! the status line (the conversation's cost). After a restart the service cannot replay what
//! was missed: its fresh snapshot and the stored history show what happened, an answer cut off
//! unstored is marked, and a waiting message the restart lost is put back in the input.

use std::time::{Duration, Instant};

use super::app::{App, Connection};
use super::source::{self, Feed};
use super::transcript::Entry;
use crate::api::events::ConversationEvent;
use crate::client::api::ApiError;
use crate::client::events::{ServerEvent, session_of};
use crate::client::figures;
use crate::domain::{ItemStatus, Message, MessageSource, TurnStatus};

impl App {
    /// Opens the conversation's stream; its events arrive through `next_feed`.
    pub(super) async fn follow(&mut self, id: &str, from_start: bool) -> Result<(), ApiError> {
        self.feed = Some(source::follow(&self.api, id, from_start).await?);
        self.connection = Connection::Connected;
        Ok(())
    }

    /// The next thing the stream has to say; never, without a conversation.
    pub async fn next_feed(&mut self) -> Feed {
        match &mut self.feed {
            Some((receiver, _)) => match receiver.recv().await {
                Some(feed) => feed,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    pub async fn apply(&mut self, feed: Feed) {
        match feed {
            Feed::Reconnecting => self.connection = Connection::Reconnecting,
            Feed::Reconnected => {
                self.connection = Connection::Connected;
                self.after_reconnect = true;
            }
            Feed::Lost(why) => {
                self.transcript
                    .notice(format!("cannot follow the conversation any more: {why}"));
                self.connection = Connection::Lost(why);
                self.running = None;
            }
            Feed::Event(event) => self.event(*event).await,
        }
    }

    async fn event(&mut self, event: ServerEvent) {
        let event = event.event;
        let session = session_of(&event).map(str::to_owned);
        let snapshot = matches!(event, ConversationEvent::Snapshot { .. });
        if !snapshot && std::mem::take(&mut self.after_reconnect) {
            self.transcript
                .notice("reconnected: the service replayed what was missed");
        }
        if let ConversationEvent::SessionCreated { session: created } = &event {
            let task = created.task.as_deref().unwrap_or_default();
            self.transcript.notice(format!(
                "sub-agent `{}` started: {} (/agents lists them)",
                created.agent,
                task.lines().next().unwrap_or_default()
            ));
        }
        // The conversation's cost counts every session's turns.
        if let ConversationEvent::TurnEnded { usage, .. } = &event
            && let Some(cost) = usage.cost
        {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
        // A sub-agent's work shows in `/agents`, not in the root's conversation.
        if session.is_some_and(|session| session != self.shown_session()) {
            return;
        }
        match event {
            ConversationEvent::Snapshot { .. } => self.snapshot(event).await,
            ConversationEvent::ItemStarted { item } | ConversationEvent::ItemCompleted { item } => {
                self.transcript.item(&item)
            }
            ConversationEvent::ItemDelta { item_id, delta, .. } => {
                self.transcript.delta(&item_id, &delta)
            }
            ConversationEvent::TurnStarted { turn_id, .. } => {
                self.running = Some(turn_id);
                self.interrupting = false;
            }
            ConversationEvent::TurnEnded {
                status,
                error,
                files_changed,
                usage,
                ..
            } => {
                self.running = None;
                self.interrupting = false;
                if files_changed > 0 {
                    self.transcript.notice(format!(
                        "{files_changed} file(s) changed in the working directory: /diff shows them"
                    ));
                }
                if status != TurnStatus::Completed {
                    self.transcript.entries.push(Entry::TurnEnded {
                        status,
                        error: error.unwrap_or_default(),
                    });
                }
                if let Some(figures) = figures::turn_usage(&usage) {
                    self.transcript.notice(figures);
                }
            }
            ConversationEvent::PendingUpdated { pending } => {
                self.pending = self.users_waiting(pending)
            }
            ConversationEvent::UsageUpdated { usage, .. }
            | ConversationEvent::CompactionCompleted { usage, .. } => self.usage = Some(usage),
            ConversationEvent::ConversationUpdated { conversation } => {
                self.model = conversation.model;
            }
            ConversationEvent::ModelFallback {
                from, to, reason, ..
            } => self
                .transcript
                .notice(crate::client::render::fallback_text(&from, &to, &reason)),
            ConversationEvent::ModelRetry {
                attempt,
                max_attempts,
                delay_ms,
                error,
                ..
            } => {
                let delay = Duration::from_millis(delay_ms);
                self.transcript.entries.push(Entry::Retry {
                    attempt: attempt.into(),
                    max: max_attempts.into(),
                    at: Instant::now() + delay,
                    error,
                });
            }
            ConversationEvent::ApprovalRequested { approval } => self.approval_asked(&approval),
            ConversationEvent::ApprovalResolved { approval } => self.approval_settled(&approval),
            _ => {}
        }
    }

    /// The user's messages that wait for the agent shown.
    fn users_waiting(&self, pending: Vec<Message>) -> Vec<Message> {
        pending
            .into_iter()
            .filter(|m| m.source != MessageSource::Agent && m.session_id == self.shown_session())
            .collect()
    }

    async fn snapshot(&mut self, snapshot: ConversationEvent) {
        let ConversationEvent::Snapshot {
            conversation,
            pending,
            usage,
            running,
            approvals,
            cost,
            ..
        } = snapshot
        else {
            return;
        };
        self.root_session = conversation.root_session_id;
        self.model = conversation.model;
        self.agent = conversation.agent;
        self.usage = Some(usage);
        self.cost = cost;
        let waiting = self.users_waiting(pending);
        let before = std::mem::replace(&mut self.pending, waiting);
        let root_turns: Vec<_> = running
            .into_iter()
            .filter(|turn| turn.session_id == self.shown_session())
            .collect();
        self.running = root_turns.first().map(|turn| turn.turn_id.clone());
        if std::mem::take(&mut self.after_reconnect) {
            self.caught_up(before).await;
        }
        for approval in &approvals {
            self.approval_asked(approval);
        }
        for item in root_turns.iter().flat_map(|turn| &turn.items) {
            self.transcript.item(item);
        }
    }

    /// After a restart: what was stored meanwhile, what was cut off, what was lost.
    async fn caught_up(&mut self, waiting_before: Vec<Message>) {
        let Some(id) = self.conversation.clone() else {
            return;
        };
        let cut = self.transcript.mark_cut();
        let session = self.focus.clone();
        let stored = self
            .api
            .items(&id, session.as_deref(), None)
            .await
            .unwrap_or_default();
        for item in &stored {
            if !self.transcript.knows(&item.id) && item.status != ItemStatus::Running {
                self.transcript.item(item);
            }
        }
        let lost: Vec<String> = waiting_before
            .into_iter()
            .filter(|m| !self.pending.iter().any(|now| now.id == m.id))
            .filter(|m| !stored.iter().any(|item| item.id == m.id))
            .map(|m| m.text)
            .collect();
        let mut said =
            "reconnected after the service restarted: what it stored meanwhile is shown".to_owned();
        if cut > 0 {
            said += "; an answer cut off by the restart is marked";
        }
        self.transcript.notice(said);
        if !lost.is_empty() {
            let mut text = lost.join("\n\n");
            if !self.editor.is_empty() {
                text = format!("{text}\n\n{}", self.editor.text());
            }
            self.editor.set(&text);
            self.transcript.notice(format!(
                "{} waiting message(s) lost in the restart: back in the input, to send again",
                lost.len()
            ));
        }
    }
}
