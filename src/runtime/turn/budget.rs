//! The turn's side of the spending limits: before each model call it asks its actor whether a
//! limit is reached (`runtime::budget`). Reached, the turn stops as `budget_exceeded`, or, with
//! `on_budget = "ask"`, it stores a notice saying so and waits on an approval (tool `budget`)
//! that any client may answer: allowed, the turn goes past that limit to its end.

use serde_json::json;

use super::spec::TurnSpec;
use crate::runtime::approvals::{ApprovalOutcome, ApprovalRequest};
use crate::runtime::budget::Limit;
use crate::runtime::link::{ActorLink, TurnStop};

/// Returns once no limit stands in the way of the next model call; the limits a user let this
/// turn pass are kept in `passed`.
pub(super) async fn keep_to(
    spec: &TurnSpec,
    step: u32,
    passed: &mut Vec<Limit>,
    link: &ActorLink,
) -> Result<(), TurnStop> {
    while let Some(reached) = link.budget_reached(passed.clone()).await {
        if !reached.ask {
            return Err(TurnStop::OverBudget(reached.message));
        }
        let notice = super::notices::turn_notice(
            spec,
            step,
            format!(
                "A spending limit was reached: {}. The turn waits for a user to let it go on.",
                reached.message
            ),
        );
        link.store(notice.clone()).await?;
        let request = ApprovalRequest {
            item_id: notice.id,
            tool: crate::api::approvals::SPENDING_LIMIT.to_owned(),
            arguments: json!({ "limit": reached.limit.key(), "max": reached.max }),
            reason: crate::permissions::Reason {
                text: format!("{}: continue past {}?", reached.message, reached.max),
                setting: Some(reached.setting.clone()),
            },
            suggested_rules: Vec::new(),
            escalate: None,
            timeout: spec.gate.permissions.approval_timeout,
            question: None,
        };
        let outcome = tokio::select! {
            outcome = link.ask_approval(request) => outcome,
            () = spec.cancel.cancelled() => ApprovalOutcome::Cancelled,
        };
        match outcome {
            ApprovalOutcome::Allowed | ApprovalOutcome::Answered { .. } => {
                passed.push(reached.limit)
            }
            ApprovalOutcome::Denied { .. } => {
                return Err(TurnStop::OverBudget(format!(
                    "{}; a user chose not to go on",
                    reached.message
                )));
            }
            ApprovalOutcome::Expired { after } => {
                return Err(TurnStop::OverBudget(format!(
                    "{}; nobody let the turn go on within {} s",
                    reached.message,
                    after.as_secs()
                )));
            }
            ApprovalOutcome::Cancelled => return Err(TurnStop::Interrupted),
        }
    }
    Ok(())
}
