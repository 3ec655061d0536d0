//! The channel between a turn task and its conversation actor. A turn owns no files: every item
//! it produces goes to the actor as a `TurnMsg`, which the actor stores write-ahead and then
//! publishes, so there is still exactly one writer per conversation (invariant 2).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::agent_requests::{AgentsReply, AgentsRequest};
use super::approvals::{ApprovalOutcome, ApprovalRequest};
use super::compaction::{Failure, Plan};
use super::retry::Retry;
use crate::api::events::DeltaField;
use crate::domain::{Item, TurnStatus};
use crate::model::TokenUsage;

/// What a turn tells its actor. Messages carrying an `ack` wait until the actor has stored them.
#[derive(Debug)]
pub enum TurnMsg {
    /// The title model wrote a title for the conversation (not from a turn: after the first).
    TitleWritten {
        title: String,
    },
    /// A new item that streams (text, reasoning): published, kept in memory until it ends.
    Started {
        item: Item,
    },
    /// Live text or tool output of a started item.
    Delta {
        item_id: String,
        field: DeltaField,
        delta: String,
    },
    /// Store these snapshots of items (write-ahead, in one append), then publish them. The
    /// ack carries their `seq`s.
    Store {
        items: Vec<Item>,
        ack: oneshot::Sender<Vec<u64>>,
    },
    /// An automatic compaction begins.
    CompactionStarted,
    /// Its summary is stored: the actor's history now reads from it. `usage`: the summary
    /// call's token report, one of the turn's calls.
    Compacted {
        summary: Item,
        usage: Option<TokenUsage>,
    },
    CompactionFailed {
        error: String,
    },
    /// A manual compaction's model call ended (sent by its own task, not by a turn).
    ManualCompactionDone {
        plan: Plan,
        result: Result<(String, Option<TokenUsage>), Failure>,
    },
    Retry(Retry),
    /// A model call answered, with its provider's token report if it sent one; `model` is
    /// the configured name of the model that answered (the session's, or a fallback).
    ModelAnswered {
        usage: Option<TokenUsage>,
        model: String,
    },
    /// The turn's model failed for good, and its calls go to the next of its fallbacks.
    Fallback {
        from: String,
        to: String,
        reason: String,
    },
    /// Before each model call: the first spending limit reached, but for those a user let
    /// this turn pass.
    CheckBudget {
        passed: Vec<crate::runtime::budget::Limit>,
        reply: oneshot::Sender<Option<crate::runtime::budget::Reached>>,
    },
    /// Before each model call: messages steered into this turn since the last call.
    TakeSteered {
        reply: oneshot::Sender<Vec<Item>>,
    },
    /// A collaboration tool call (spawn a sub-agent, message, wait for, interrupt or list
    /// them): the actor owns the session tree, so it answers.
    Agents {
        request: AgentsRequest,
        reply: oneshot::Sender<Result<AgentsReply, String>>,
        /// The asking tool call's trace: a sub-agent turn it starts is its child.
        trace: opentelemetry::Context,
    },
    /// A tool call needs a user's answer before it runs; the reply is the outcome.
    AskApproval {
        request: ApprovalRequest,
        reply: oneshot::Sender<ApprovalOutcome>,
    },
    /// An approval's time ran out (sent by its timer, through the actor's order).
    ApprovalExpired {
        approval_id: String,
    },
    Ended {
        status: TurnStatus,
        error: Option<String>,
        error_code: Option<crate::domain::TurnErrorCode>,
    },
}

/// What a turn (or a manual compaction) sends its actor: a message and the session it is for.
#[derive(Debug)]
pub struct FromTurn {
    pub session_id: Arc<str>,
    pub msg: TurnMsg,
}

/// Why a turn stopped before its answer.
pub(crate) enum TurnStop {
    Interrupted,
    Failed(String),
    /// A limit of the budget was reached (the message names it).
    OverBudget(String),
}

/// A turn's way to its actor: every message names the turn's session.
#[derive(Clone)]
pub(crate) struct ActorLink {
    actor: mpsc::UnboundedSender<FromTurn>,
    session_id: Arc<str>,
}

impl ActorLink {
    pub(crate) fn new(actor: mpsc::UnboundedSender<FromTurn>, session_id: Arc<str>) -> ActorLink {
        ActorLink { actor, session_id }
    }

    pub(crate) fn send(&self, msg: TurnMsg) {
        // The actor outlives its turns; if it is gone the service is stopping anyway.
        let _ = self.actor.send(FromTurn {
            session_id: self.session_id.clone(),
            msg,
        });
    }

    /// Asks the actor to carry out a collaboration tool call.
    pub(crate) async fn agents(&self, request: AgentsRequest) -> Result<AgentsReply, String> {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let (reply, answer) = oneshot::channel();
        let trace = tracing::Span::current().context();
        self.send(TurnMsg::Agents {
            request,
            reply,
            trace,
        });
        answer
            .await
            .unwrap_or_else(|_| Err("the conversation is stopping".to_owned()))
    }

    /// Asks for a user's answer to a tool call and waits for it. A conversation that stops
    /// first cancels it.
    pub(crate) async fn ask_approval(&self, request: ApprovalRequest) -> ApprovalOutcome {
        let (reply, outcome) = oneshot::channel();
        self.send(TurnMsg::AskApproval { request, reply });
        outcome.await.unwrap_or(ApprovalOutcome::Cancelled)
    }

    /// Stores an item and waits until it is on disk; returns its `seq`.
    pub(crate) async fn store(&self, item: Item) -> Result<u64, TurnStop> {
        Ok(self.store_all(vec![item]).await?[0])
    }

    /// Stores items with one append (one fsync) and waits until they are on disk; returns
    /// their `seq`s.
    pub(crate) async fn store_all(&self, items: Vec<Item>) -> Result<Vec<u64>, TurnStop> {
        let (ack, stored) = oneshot::channel();
        self.send(TurnMsg::Store { items, ack });
        stored
            .await
            .map_err(|_| TurnStop::Failed("the conversation could not store an item".to_owned()))
    }

    /// The first spending limit reached (see `TurnMsg::CheckBudget`). A conversation that
    /// stops meanwhile reaches none: the turn stops anyway.
    pub(crate) async fn budget_reached(
        &self,
        passed: Vec<crate::runtime::budget::Limit>,
    ) -> Option<crate::runtime::budget::Reached> {
        let (reply, reached) = oneshot::channel();
        self.send(TurnMsg::CheckBudget { passed, reply });
        reached.await.ok().flatten()
    }

    pub(crate) async fn take_steered(&self) -> Vec<Item> {
        let (reply, steered) = oneshot::channel();
        self.send(TurnMsg::TakeSteered { reply });
        steered.await.unwrap_or_default()
    }
}
