//! The operations on approvals and remembered rules that handlers call: list, answer (sent to
//! the conversation's actor, which settles it), list and delete rules.

use super::actor::Command;
use super::{Runtime, RuntimeError};
use crate::api::approvals::{Approval, ApprovalAnswer, ApprovalFilter, Rule};

/// The longest pattern an answer may remember, and the longest message it may carry (the
/// document's `max_length`s say the same).
const MAX_RULE_CHARS: usize = 1000;
const MAX_MESSAGE_CHARS: usize = 10_000;

impl Runtime {
    /// `GET /api/approvals`.
    pub fn approvals(&self, filter: ApprovalFilter) -> Vec<Approval> {
        self.shared.approvals.list(filter)
    }

    /// `POST /api/approvals/{id}`: the first answer wins; a later one gets `AlreadyDecided`
    /// with the outcome.
    pub async fn decide(
        &self,
        id: &str,
        answer: ApprovalAnswer,
        by: String,
    ) -> Result<Approval, RuntimeError> {
        if answer
            .rule
            .as_ref()
            .is_some_and(|rule| rule.chars().count() > MAX_RULE_CHARS)
        {
            return Err(RuntimeError::Invalid(format!(
                "`rule` is longer than {MAX_RULE_CHARS} characters"
            )));
        }
        if answer
            .message
            .as_ref()
            .is_some_and(|message| message.chars().count() > MAX_MESSAGE_CHARS)
        {
            return Err(RuntimeError::Invalid(format!(
                "`message` is longer than {MAX_MESSAGE_CHARS} characters"
            )));
        }
        let Some(approval) = self.shared.approvals.get(id) else {
            return Err(RuntimeError::NotFound(format!("approval {id}")));
        };
        if approval.resolution.is_some() {
            return Err(RuntimeError::AlreadyDecided(Box::new(approval)));
        }
        self.call(&approval.conversation_id, |reply| Command::Decide {
            approval_id: id.to_owned(),
            answer,
            by,
            reply,
        })
        .await?
    }

    /// `GET /api/rules`.
    pub fn rules(&self) -> Result<Vec<Rule>, RuntimeError> {
        Ok(self.shared.rules.list()?)
    }

    /// `DELETE /api/rules/{id}`.
    pub fn delete_rule(&self, id: &str, by: &str) -> Result<Rule, RuntimeError> {
        self.shared
            .rules
            .delete(id, by)?
            .ok_or_else(|| RuntimeError::NotFound(format!("rule {id}")))
    }
}
