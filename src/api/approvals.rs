//! Approvals and remembered rules on the wire: a tool call that needs a user's yes waits as an
//! `Approval` every client sees; the first answer (`ApprovalAnswer`) wins, and an answer that
//! remembers (`allow_conversation`, `allow_always`) becomes a `Rule`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::api::errors::ErrorDetail;
use crate::domain::Timestamp;

/// The `tool` of a spending limit's approval: no tool the model can call, but a turn that
/// waits at a limit (`on_budget = "ask"`); its `item_id` is the notice saying so.
pub const SPENDING_LIMIT: &str = "budget";
/// The `tool` of a question an MCP server asks the user while one of its calls runs (MCP
/// elicitation): answered with the form's `content` (`allow_once`) or declined (`deny`); its
/// `item_id` is that call, and `question` holds what is asked.
pub const MCP_QUESTION: &str = "mcp_question";
/// The `tool` of an MCP server's request to have the agent's model write for it (MCP
/// sampling, with the agent's `mcp_sampling = "ask"`): `subject.arguments` holds the server,
/// the messages and the token limit; allowed once or denied.
pub const MCP_SAMPLING: &str = "mcp_sampling";

/// A tool call waiting for a user's decision, or decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Approval {
    /// `ap_…`.
    pub id: String,
    pub conversation_id: String,
    /// The agent that asks: the root session, or a sub-agent's.
    pub session_id: String,
    pub turn_id: String,
    /// The tool call item, whose status is `waiting_approval` meanwhile.
    pub item_id: String,
    pub tool: String,
    pub subject: ApprovalSubject,
    /// The agent asks to run this command outside the sandbox, for this reason.
    pub escalate: Option<String>,
    /// The first of `suggested_rules`' rules (for clients that keep one rule); `null` for an
    /// escalation, which is never remembered.
    pub suggested_rule: Option<String>,
    /// What an answer that remembers keeps by default: a rule for each part of the call that
    /// asks (a compound command has several), each the part's exact text, so the same command
    /// never asks twice; with a broader rule offered beside it where one makes sense. Empty for
    /// an escalation.
    #[serde(default)]
    pub suggested_rules: Vec<SuggestedRule>,
    /// Why it asks, in plain words: the rule that says `ask`, the tool's setting, a command
    /// that runs other programs, or the escalation.
    pub reason: String,
    /// The configuration key that decides it (`agents.default.permissions.shell_rules`), where
    /// one does.
    #[serde(default)]
    pub setting: Option<String>,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    /// When it is denied unless answered (the agent's `approval_timeout_s`).
    #[schema(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub expires_at: Option<Timestamp>,
    pub status: ApprovalStatus,
    /// How it was settled; `null` while pending.
    pub resolution: Option<ApprovalResolution>,
    /// What an MCP server asks (`tool` is `mcp_question`); absent for every other approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<ApprovalQuestion>,
}

/// A question an MCP server asks the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalQuestion {
    /// The server's name, as configured or as the conversation named it.
    pub server: String,
    pub message: String,
    /// The fields asked for: `{"type": "object", "properties": {name: {"type": "string" |
    /// "number" | "integer" | "boolean", "title"?, "description"?, "enum"?, "enumNames"?,
    /// "minimum"?, "maximum"?, "minLength"?, "maxLength"?, "format"?, "default"?}},
    /// "required"?: [name]}`.
    pub schema: Value,
    /// The answer given (with `allow_once`); `null` until then, or when declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Map<String, Value>>,
}

impl Approval {
    /// Whether it asks about a spending limit rather than a tool call.
    pub fn is_spending_limit(&self) -> bool {
        self.tool == SPENDING_LIMIT
    }

    /// Whether it is a question or a sampling request of an MCP server rather than a call.
    pub fn is_from_mcp_server(&self) -> bool {
        self.tool == MCP_QUESTION || self.tool == MCP_SAMPLING
    }

    /// A pending approval of a shell command, for documentation and tests.
    pub fn example() -> Approval {
        Approval {
            id: "ap_0".to_owned(),
            conversation_id: "c_0".to_owned(),
            session_id: "s_0".to_owned(),
            turn_id: "t_0".to_owned(),
            item_id: "m_0".to_owned(),
            tool: "shell".to_owned(),
            subject: ApprovalSubject {
                command: Some("git push".to_owned()),
                path: None,
                arguments: None,
                cwd: "/srv/app".to_owned(),
            },
            escalate: None,
            suggested_rule: Some("git push".to_owned()),
            suggested_rules: vec![SuggestedRule {
                rule: "git push".to_owned(),
                broader: Some(BroaderRule {
                    rule: "git push*".to_owned(),
                    also_allows: vec!["git push --force".to_owned()],
                }),
            }],
            reason: "`git push` matches the rule \"git push*\", which asks first".to_owned(),
            setting: Some("agents.default.permissions.shell_rules".to_owned()),
            created_at: crate::domain::now(),
            expires_at: None,
            status: ApprovalStatus::Pending,
            resolution: None,
            question: None,
        }
    }
}

/// The rule remembered by default for one part of a call, and a broader one offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SuggestedRule {
    /// The part's exact text (a file tool's directory pattern): it allows only this.
    pub rule: String,
    /// `prog sub*`, offered where the subcommand is the first word after the program's own
    /// options; never for shells, interpreters or git's aliases.
    pub broader: Option<BroaderRule>,
}

/// A new approval's id. It names its conversation (`ap_<conversation>_<unique>`), so any
/// instance of a cluster can send an answer to the one that runs the conversation. The unique
/// part is the random tail of a UUIDv7 (48 bits): it needs to be unique only among the
/// approvals of one conversation.
pub fn new_approval_id(conversation_id: &str) -> String {
    let conversation = conversation_id
        .strip_prefix("c_")
        .unwrap_or(conversation_id);
    let unique = uuid::Uuid::now_v7().simple().to_string();
    format!("ap_{conversation}_{}", &unique[unique.len() - 12..])
}

/// The conversation an approval id names, if it names one (see `new_approval_id`).
pub fn approval_conversation(approval_id: &str) -> Option<String> {
    let (conversation, unique) = approval_id.strip_prefix("ap_")?.split_once('_')?;
    let word = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric());
    (word(conversation) && word(unique)).then(|| format!("c_{conversation}"))
}

/// A broader rule, and what else it would allow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BroaderRule {
    pub rule: String,
    /// Commands it would allow too, in the rules' own language (`git push --force`).
    pub also_allows: Vec<String>,
}

/// What the call would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalSubject {
    /// `shell`: the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The file tools: the path as the agent wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Other tools: their arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The conversation's working directory.
    pub cwd: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    /// Allowed by an answer: the call ran (or runs).
    Allowed,
    /// Denied by an answer: the call never ran, and the model was told (with the message).
    Denied,
    /// Its turn was interrupted, or the service stopped: the call never ran.
    Cancelled,
    /// Unanswered within the agent's `approval_timeout_s`: denied, never ran.
    Expired,
}

/// How an approval was settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalResolution {
    /// The answer; `null` when cancelled or expired.
    pub decision: Option<ApprovalDecision>,
    /// The rule the answer remembered (the first, when it kept several).
    pub rule: Option<Rule>,
    /// Every rule the answer remembered: one per part of the call that asked.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The answer's message (on deny it reaches the model).
    pub message: Option<String>,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub decided_at: Timestamp,
    /// Who answered: the kind of client, known by the token it presented (`web`, `cli`, `acp`,
    /// `api`), or `service` for a cancel or an expiry.
    pub decided_by: String,
}

/// A user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call only.
    AllowOnce,
    /// Run it, and allow what the rule matches in this conversation (its forks too).
    AllowConversation,
    /// Run it, and allow what the rule matches for this agent in this working directory, in
    /// every conversation.
    AllowAlways,
    /// Do not run it; the message tells the model why.
    Deny,
}

impl ApprovalDecision {
    /// Whether the call runs.
    pub fn allows(self) -> bool {
        self != ApprovalDecision::Deny
    }

    /// Whether the answer is kept as a rule.
    pub fn remembers(self) -> bool {
        matches!(
            self,
            ApprovalDecision::AllowConversation | ApprovalDecision::AllowAlways
        )
    }
}

/// `POST /api/approvals/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    pub decision: ApprovalDecision,
    /// The pattern to remember (`allow_conversation`, `allow_always`) in place of the first
    /// of the approval's `suggested_rules`; the others are kept as suggested. It must match
    /// this call.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 1000)]
    pub rule: Option<String>,
    /// The patterns to remember, in place of all the suggested ones. Each must match a part of
    /// this call (a part no rule covers asks again next time).
    #[serde(default)]
    #[schema(max_items = 64)]
    pub rules: Option<Vec<String>>,
    /// On deny, told to the model with the result.
    #[serde(default)]
    #[schema(max_length = 10000)]
    pub message: Option<String>,
    /// A question's answer (`mcp_question` with `allow_once`): a value for each field it asks,
    /// typed as its schema says (required ones present, optional ones may be left out).
    #[serde(default)]
    pub content: Option<serde_json::Map<String, Value>>,
}

/// `GET /api/approvals` query.
#[derive(Debug, Clone, Copy, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ApprovalQuery {
    /// `pending` (default) or `all` (the pending and the recently decided).
    #[serde(default)]
    pub status: ApprovalFilter,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalFilter {
    #[default]
    Pending,
    All,
}

/// `GET /api/approvals`: oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<Approval>,
}

/// 409 `already_decided`: the first answer won; this is its outcome.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AlreadyDecided {
    pub error: ErrorDetail,
    pub approval: Approval,
}

/// A remembered answer: calls of `tool` that `pattern` matches run without asking, in its
/// scope. It never overrides a configured `deny`, or an `ask` a configured pattern gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Rule {
    /// `r_…`.
    pub id: String,
    pub tool: String,
    /// `*` matches any text, `?` one character: against each part of a shell command (wrappers
    /// like `sudo` taken off), or against a file tool's absolute path.
    pub pattern: String,
    pub scope: RuleScope,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    /// Who answered: the kind of client, as its token says (`web`, `cli`, `acp`, `api`).
    pub created_by: String,
    /// The approval whose answer made it.
    pub approval_id: Option<String>,
}

/// Where a rule applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleScope {
    /// One conversation (and the forks made of it afterwards).
    Conversation { conversation_id: String },
    /// One agent in one working directory, in every conversation.
    Always { agent: String, cwd: String },
}

/// `GET /api/rules`: oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RuleList {
    pub rules: Vec<Rule>,
}
