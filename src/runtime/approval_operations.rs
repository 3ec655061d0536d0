//! The operations on approvals and remembered rules that handlers call: list, answer (sent to
//! the conversation's actor, which settles it), list and delete rules.

use super::actor::Command;
use super::{Runtime, RuntimeError};
use crate::api::approvals::{
    Approval, ApprovalAnswer, ApprovalDecision, ApprovalFilter, ApprovalResolution, Rule,
};

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
        let settled = self
            .call(&approval.conversation_id, |reply| Command::Decide {
                approval_id: id.to_owned(),
                answer,
                by,
                reply,
            })
            .await??;
        if let Some(resolution) = settled
            .resolution
            .as_ref()
            .filter(|resolution| resolution.decision == Some(ApprovalDecision::AllowAlways))
        {
            self.recheck_elsewhere(&settled.conversation_id, resolution)
                .await;
        }
        Ok(settled)
    }

    /// An `allow_always` rule applies in every conversation of its agent and directory: the
    /// approvals other conversations wait on that it now answers are settled with it.
    async fn recheck_elsewhere(&self, answered_in: &str, resolution: &ApprovalResolution) {
        let mut conversations: Vec<String> = self
            .approvals(ApprovalFilter::Pending)
            .into_iter()
            .map(|approval| approval.conversation_id)
            .filter(|id| id != answered_in)
            .collect();
        conversations.sort();
        conversations.dedup();
        for id in conversations {
            let resolution = resolution.clone();
            // A conversation that stopped meanwhile has nothing waiting any more.
            let _ = self
                .call(&id, |reply| Command::RulesChanged { resolution, reply })
                .await;
        }
    }

    /// At start-up: the remembered rules, read (a log from before integrity marks is marked).
    pub fn prepare_rules(&self) -> Result<Vec<Rule>, RuntimeError> {
        Ok(self.shared.rules.prepare()?)
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
