//! Approvals across conversations: the book of every pending and recently settled approval (so
//! `GET /api/approvals` answers a client that connects later without loading conversations),
//! the operations on them, and the remembered rules. Each approval itself belongs to its
//! conversation's actor, which settles it (the first answer wins, in command order).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::actor::Command;
use super::{Runtime, RuntimeError};
use crate::api::approvals::{Approval, ApprovalAnswer, ApprovalFilter, Rule};
use crate::permissions::{CallScope, Permissions, RuleStore, Verdict};

/// The longest pattern an answer may remember, and the longest message it may carry (the
/// document's `max_length`s say the same).
const MAX_RULE_CHARS: usize = 1000;
const MAX_MESSAGE_CHARS: usize = 10_000;

/// Settled approvals kept for `already_decided` answers and `?status=all`.
const SETTLED_KEPT: usize = 1000;

/// What a turn asks its actor when a tool call needs a user's answer.
#[derive(Debug)]
pub struct ApprovalRequest {
    pub item_id: String,
    pub tool: String,
    pub arguments: Value,
    pub reason: String,
    pub suggested_rule: Option<String>,
    pub escalate: Option<String>,
    /// Denied unless answered within this.
    pub timeout: Option<Duration>,
}

/// What the turn is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    Allowed,
    Denied {
        message: Option<String>,
    },
    Expired {
        after: Duration,
    },
    /// The turn was interrupted or the service stops.
    Cancelled,
}

/// What a turn checks each tool call against: its agent's permissions and the rules users
/// remembered for this conversation, agent and working directory.
pub struct CallGate {
    pub permissions: Permissions,
    pub rules: std::sync::Arc<RuleStore>,
    pub conversation_id: String,
    pub agent: String,
    pub cwd: String,
}

impl CallGate {
    pub fn check(&self, tool: &str, arguments: &Value) -> Verdict {
        let scope = CallScope {
            conversation_id: &self.conversation_id,
            agent: &self.agent,
            cwd: &self.cwd,
        };
        let remembered = |text: &str| {
            self.rules
                .allows(scope, tool, text)
                .unwrap_or_else(|error| {
                    // Unreadable rules answer nothing: the user is asked.
                    tracing::error!(%error, "cannot read the remembered rules");
                    false
                })
        };
        self.permissions.check(
            tool,
            arguments,
            std::path::Path::new(&self.cwd),
            &remembered,
        )
    }
}

/// Every approval of this instance, pending or settled lately, by id.
#[derive(Default)]
pub struct ApprovalBook {
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    pending: BTreeMap<String, Approval>,
    settled: VecDeque<Approval>,
}

impl ApprovalBook {
    pub fn requested(&self, approval: &Approval) {
        self.lock()
            .pending
            .insert(approval.id.clone(), approval.clone());
    }

    pub fn settled(&self, approval: &Approval) {
        let mut book = self.lock();
        book.pending.remove(&approval.id);
        if book.settled.len() == SETTLED_KEPT {
            book.settled.pop_front();
        }
        book.settled.push_back(approval.clone());
    }

    pub fn get(&self, id: &str) -> Option<Approval> {
        let book = self.lock();
        book.pending
            .get(id)
            .or_else(|| book.settled.iter().rev().find(|a| a.id == id))
            .cloned()
    }

    /// Oldest first.
    pub fn list(&self, filter: ApprovalFilter) -> Vec<Approval> {
        let book = self.lock();
        let mut list: Vec<Approval> = book.pending.values().cloned().collect();
        if filter == ApprovalFilter::All {
            list.extend(book.settled.iter().cloned());
        }
        list.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        list
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book
            .lock()
            .expect("the approval book is never left half changed")
    }
}

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
