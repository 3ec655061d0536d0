//! Compaction inside the actor: the manual compaction of the root session, which
//! runs its model call in a task of its own, and what any stored summary changes (the history
//! the next turn reads and the usage meter start from it).

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::ConversationActor;
use super::waiting::Compacting;
use crate::api::events::{CompactionReason, ConversationEvent};
use crate::api::responses::CompactOutcome;
use crate::domain::Item;
use crate::runtime::RuntimeError;
use crate::runtime::compaction::{self, Compactor};
use crate::runtime::link::{FromTurn, TurnMsg};

impl ConversationActor {
    /// The model that writes an agent's summaries: its `compact_model`.
    pub(super) fn compactor(&self, agent: &str) -> Result<Compactor, String> {
        let config = &self.shared.config;
        let agent = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("agent `{agent}` is not configured"))?;
        let model_id = agent.compaction_model();
        let model = config
            .model(model_id)
            .ok_or_else(|| format!("model `{model_id}` is not configured"))?;
        Ok(Compactor {
            client: self.shared.models.client(config, model_id)?,
            model_name: model.name.clone(),
            max_output_tokens: model.max_output_tokens,
            retry: config.retry.clone(),
        })
    }

    /// Starts a manual compaction: only when no turn runs and no message waits.
    pub(super) fn start_compaction(
        &mut self,
        reply: oneshot::Sender<Result<CompactOutcome, RuntimeError>>,
    ) {
        let root = self.root_id().to_owned();
        // Any session: while a sub-agent works the conversation is running (its report is
        // still to come into the history being summarised).
        let refused = if self.any_running() {
            Some(RuntimeError::TurnRunning)
        } else if self.compacting.is_some() {
            Some(RuntimeError::CompactionRunning)
        } else if !self.root().pending.is_empty() {
            Some(RuntimeError::MessagesWaiting)
        } else {
            None
        };
        if let Some(error) = refused.or_else(|| self.check_can_run(&root).err()) {
            let _ = reply.send(Err(error));
            return;
        }
        let conversation = &self.state.conversation;
        let compactor = match self.compactor(&conversation.agent) {
            Ok(compactor) => compactor,
            Err(error) => {
                let _ = reply.send(Err(RuntimeError::ModelUnavailable(error)));
                return;
            }
        };
        let window = self
            .shared
            .config
            .model(&conversation.model)
            .map_or(0, |model| model.context_window);
        let view = compaction::model_view(&self.root().history);
        let Some(plan) = compaction::plan(&view, window, CompactionReason::Manual) else {
            let _ = reply.send(Err(RuntimeError::NothingToCompact));
            return;
        };
        self.publish_compaction_started(&root, CompactionReason::Manual);
        let cancel = CancellationToken::new();
        self.compacting = Some(Compacting {
            cancel: cancel.clone(),
            reply,
        });
        let done = self.turn_sender.clone();
        let session_id: std::sync::Arc<str> = std::sync::Arc::from(root.as_str());
        tokio::spawn(async move {
            let send = |msg| {
                let _ = done.send(FromTurn {
                    session_id: session_id.clone(),
                    msg,
                });
            };
            let result = compactor
                .summarize(&plan, &cancel, |retry| send(TurnMsg::Retry(retry)))
                .await;
            send(TurnMsg::ManualCompactionDone { plan, result });
        });
    }

    /// Stores a manual compaction's summary (or reports its failure), answers the request, and
    /// lets a message that arrived meanwhile start its turn.
    pub(super) fn finish_compaction(
        &mut self,
        plan: &compaction::Plan,
        result: Result<(String, Option<crate::model::TokenUsage>), compaction::Failure>,
    ) {
        let Some(compacting) = self.compacting.take() else {
            return;
        };
        let root = self.root_id().to_owned();
        let outcome = match result {
            Ok((text, _report)) => {
                let turn_id = self
                    .state
                    .turns
                    .iter()
                    .rev()
                    .find(|turn| turn.session_id == root)
                    .map(|turn| turn.id.clone())
                    .unwrap_or_default();
                let mut summary = compaction::summary_item(&root, &turn_id, text, plan);
                summary.seq = self.next_seq(&root);
                match self.append_items(&root, std::slice::from_ref(&summary)) {
                    Ok(()) => {
                        self.publish_item_started(&summary);
                        self.publish_item_completed(&summary);
                        self.on_compacted(&summary);
                        Ok(CompactOutcome {
                            summary,
                            usage: self.usage_view(&root),
                        })
                    }
                    Err(error) => {
                        self.publish_compaction_failed(&root, "the summary could not be stored");
                        Err(RuntimeError::from(error))
                    }
                }
            }
            Err(compaction::Failure::Interrupted) => {
                let error = "interrupted".to_owned();
                self.publish_compaction_failed(&root, &error);
                Err(RuntimeError::CompactionFailed(error))
            }
            Err(compaction::Failure::Failed(error)) => {
                self.publish_compaction_failed(&root, &error);
                Err(RuntimeError::CompactionFailed(error))
            }
        };
        let _ = compacting.reply.send(outcome);
        if !self.stopping {
            self.start_next_waiting(&root);
        }
    }

    pub(super) fn publish_compaction_started(&self, session_id: &str, reason: CompactionReason) {
        self.bus.publish(&ConversationEvent::CompactionStarted {
            session_id: session_id.to_owned(),
            reason,
        });
        self.notify_compaction(
            session_id,
            serde_json::json!({ "stage": "before", "reason": reason }),
        );
    }

    pub(super) fn publish_compaction_failed(&self, session_id: &str, error: &str) {
        self.bus.publish(&ConversationEvent::CompactionFailed {
            session_id: session_id.to_owned(),
            error: error.to_owned(),
        });
        self.notify_compaction(
            session_id,
            serde_json::json!({ "stage": "failed", "error": error }),
        );
    }

    /// Tells the `compaction` hooks how a compaction of `session_id` goes, in the running
    /// turn if one runs (an automatic compaction is part of it).
    fn notify_compaction(&self, session_id: &str, fields: serde_json::Value) {
        let turn = self
            .sessions
            .get(session_id)
            .and_then(|run| run.running.as_ref())
            .map(|turn| turn.turn_id.clone());
        self.notify_hooks(
            crate::config::HookEvent::Compaction,
            session_id,
            turn.as_deref(),
            fields,
        );
    }

    /// A stored summary now stands for what it covers: the history the next turn of its
    /// session reads and its usage meter start from it.
    pub(super) fn on_compacted(&mut self, summary: &Item) {
        let session_id = summary.session_id.clone();
        if let Some(run) = self.run_mut(&session_id) {
            compaction::mark_compacted(&mut run.history);
            run.usage = run.usage.restart(&compaction::model_view(&run.history));
        }
        let usage = self.usage_view(&session_id);
        if let crate::domain::ItemKind::Summary {
            covers_through_seq, ..
        } = &summary.kind
        {
            self.notify_compaction(
                &session_id,
                serde_json::json!({
                    "stage": "after",
                    "summary_item_id": summary.id,
                    "covers_through_seq": covers_through_seq,
                    "used_tokens": usage.used_tokens,
                }),
            );
        }
        self.bus.publish(&ConversationEvent::CompactionCompleted {
            session_id: session_id.to_owned(),
            summary: summary.clone(),
            usage,
        });
        self.publish_usage(&session_id);
    }
}
