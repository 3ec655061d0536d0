//! The conversation's events as the full-screen chat takes them in: a task reads the stream
//! (reconnecting with `Last-Event-ID`, `client::stream`) and hands each event over; `App::apply`
//! updates the transcript, the waiting messages and the status line. After a restart the
//! service cannot replay what was missed: its fresh snapshot and the stored history show what
//! happened, an answer cut off unstored is marked, and a waiting message the restart lost is
//! put back in the input.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::app::{App, Connection};
use super::source::{self, Feed, stored_items};
use super::transcript::{Entry, text};
use crate::client::api::ApiError;
use crate::client::events::ServerEvent;

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
        let data = &event.data;
        let session = data["session_id"]
            .as_str()
            .or(data["item"]["session_id"].as_str());
        if event.kind != "snapshot" && std::mem::take(&mut self.after_reconnect) {
            self.transcript
                .notice("reconnected: the service replayed what was missed");
        }
        if event.kind == "session.created" {
            let created = &data["session"];
            self.transcript.notice(format!(
                "sub-agent `{}` started: {} (/agents lists them)",
                text(&created["agent"]),
                text(&created["task"]).lines().next().unwrap_or_default()
            ));
        }
        // A sub-agent's work shows in `/agents`, not in the root's conversation.
        if session.is_some_and(|session| session != self.shown_session()) {
            return;
        }
        match event.kind.as_str() {
            "snapshot" => self.snapshot(data).await,
            "item.started" | "item.completed" => self.transcript.item(&data["item"]),
            "item.delta" => self
                .transcript
                .delta(text(&data["item_id"]), text(&data["delta"])),
            "turn.started" => {
                self.running = Some(text(&data["turn_id"]).to_owned());
                self.interrupting = false;
            }
            "turn.ended" => {
                self.running = None;
                self.interrupting = false;
                let changed = data["files_changed"].as_u64().unwrap_or(0);
                if changed > 0 {
                    self.transcript.notice(format!(
                        "{changed} file(s) changed in the working directory: /diff shows them"
                    ));
                }
                let status = text(&data["status"]);
                if status != "completed" {
                    self.transcript.entries.push(Entry::TurnEnded {
                        status: status.to_owned(),
                        error: text(&data["error"]).to_owned(),
                    });
                }
            }
            "pending.updated" => self.pending = self.users_waiting(&data["pending"]),
            "usage.updated" => self.usage = data["usage"].clone(),
            "compaction.completed" => self.usage = data["usage"].clone(),
            "conversation.updated" => {
                self.model = text(&data["conversation"]["model"]).to_owned();
            }
            "model.retry" => {
                let delay = Duration::from_millis(data["delay_ms"].as_u64().unwrap_or(0));
                self.transcript.entries.push(Entry::Retry {
                    attempt: data["attempt"].as_u64().unwrap_or(0),
                    max: data["max_attempts"].as_u64().unwrap_or(0),
                    at: Instant::now() + delay,
                    error: text(&data["error"]).to_owned(),
                });
            }
            "approval.requested" => self.approval_asked(&crate::client::typed(&data["approval"])),
            "approval.resolved" => self.approval_settled(&crate::client::typed(&data["approval"])),
            _ => {}
        }
    }

    fn users_waiting(&self, pending: &Value) -> Vec<Value> {
        pending
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["source"] != "agent" && m["session_id"] == self.shown_session())
            .cloned()
            .collect()
    }

    async fn snapshot(&mut self, data: &Value) {
        let conversation = &data["conversation"];
        self.root_session = text(&conversation["root_session_id"]).to_owned();
        self.model = text(&conversation["model"]).to_owned();
        self.agent = text(&conversation["agent"]).to_owned();
        self.usage = data["usage"].clone();
        let waiting = self.users_waiting(&data["pending"]);
        let before = std::mem::replace(&mut self.pending, waiting);
        let root_turns: Vec<&Value> = data["running"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|turn| turn["session_id"] == self.shown_session())
            .collect();
        self.running = root_turns
            .first()
            .map(|turn| text(&turn["turn_id"]).to_owned());
        if std::mem::take(&mut self.after_reconnect) {
            self.caught_up(before).await;
        }
        let approvals: Vec<crate::api::approvals::Approval> =
            crate::client::typed(&data["approvals"]);
        for approval in &approvals {
            self.approval_asked(approval);
        }
        for turn in root_turns {
            for item in turn["items"].as_array().into_iter().flatten() {
                self.transcript.item(item);
            }
        }
    }

    /// After a restart: what was stored meanwhile, what was cut off, what was lost.
    async fn caught_up(&mut self, waiting_before: Vec<Value>) {
        let Some(id) = self.conversation.clone() else {
            return;
        };
        let cut = self.transcript.mark_cut();
        let session = self.focus.clone();
        let stored = stored_items(&self.api, &id, session.as_deref())
            .await
            .unwrap_or_default();
        for item in &stored {
            if !self.transcript.knows(text(&item["id"])) && item["status"] != "running" {
                self.transcript.item(item);
            }
        }
        let lost: Vec<String> = waiting_before
            .iter()
            .filter(|m| !self.pending.iter().any(|now| now["id"] == m["id"]))
            .filter(|m| !stored.iter().any(|item| item["id"] == m["id"]))
            .map(|m| text(&m["text"]).to_owned())
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
