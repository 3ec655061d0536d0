//! Approvals across conversations: the book of every pending and recently settled approval (so
//! `GET /api/approvals` answers a client that connects later without loading conversations),
//! what a turn asks and is told, and the gate it checks each call with. Each approval itself
//! belongs to its conversation's actor, which settles it (the first answer wins, in command
//! order); the operations on them are in `approval_operations.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::rules::{CallScope, RuleStore};
use crate::api::approvals::{Approval, ApprovalFilter};
use crate::permissions::{Permissions, Verdict};

/// Settled approvals kept for `already_decided` answers and `?status=all`.
const SETTLED_KEPT: usize = 1000;

/// What a turn asks its actor when a tool call needs a user's answer.
#[derive(Debug)]
pub struct ApprovalRequest {
    pub item_id: String,
    pub tool: String,
    pub arguments: Value,
    pub reason: crate::permissions::Reason,
    pub suggested_rules: Vec<crate::permissions::RuleChoice>,
    pub escalate: Option<String>,
    /// Denied unless answered within this.
    pub timeout: Option<Duration>,
    /// What an MCP server asks (`tool` is `mcp_question`).
    pub question: Option<crate::mcp::Question>,
}

/// What the turn is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    Allowed,
    /// A question was answered with these values (checked against its schema).
    Answered {
        content: serde_json::Map<String, Value>,
    },
    Denied {
        message: Option<String>,
    },
    Expired {
        after: Duration,
    },
    /// The turn was interrupted or the service stops.
    Cancelled,
}

impl ApprovalOutcome {
    /// How it ended, in one word (traces and metrics).
    pub fn name(&self) -> &'static str {
        match self {
            ApprovalOutcome::Allowed => "allowed",
            ApprovalOutcome::Answered { .. } => "answered",
            ApprovalOutcome::Denied { .. } => "denied",
            ApprovalOutcome::Expired { .. } => "expired",
            ApprovalOutcome::Cancelled => "cancelled",
        }
    }
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

/// How the permissions see a call: the tool whose setting and remembered rules decide it
/// (`write_file` for an edit, `read_file` for a search; `permissions::policy::setting_for_call`)
/// and the arguments its rules match, with every path the call touches as `paths`.
pub fn permission_view<'a>(tool: &'a str, arguments: &Value) -> (&'a str, Value) {
    let setting = crate::permissions::policy::setting_for_call(tool, arguments);
    if setting == tool {
        return (tool, arguments.clone());
    }
    let paths = crate::tools::touched_paths(tool, arguments);
    (setting, serde_json::json!({ "paths": paths }))
}

impl CallGate {
    pub fn check(&self, tool: &str, arguments: &Value) -> Verdict {
        let scope = CallScope {
            conversation_id: &self.conversation_id,
            agent: &self.agent,
            cwd: &self.cwd,
        };
        let (setting, view) = permission_view(tool, arguments);
        let remembered = |text: &str, exact: bool| {
            self.rules
                .allows(scope, setting, text, exact)
                .unwrap_or_else(|error| {
                    // Unreadable rules answer nothing: the user is asked.
                    tracing::error!(%error, "cannot read the remembered rules");
                    false
                })
        };
        self.permissions
            .check(setting, &view, std::path::Path::new(&self.cwd), &remembered)
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

    /// How many wait for an answer now.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
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
