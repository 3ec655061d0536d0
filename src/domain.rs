//! The objects of the API and of the files on disk: conversations, sessions, turns, messages and
//! items. They are plain data; the rules that change them live in `runtime` and `store::state`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Times are RFC 3339 UTC strings on the wire and on disk.
pub type Timestamp = chrono::DateTime<chrono::Utc>;

pub fn now() -> Timestamp {
    chrono::Utc::now()
}

/// A new time-ordered id with a short prefix naming what it identifies (`c_…` conversation,
/// `s_…` session, `t_…` turn, `m_…` message or item). The prefix is for humans; clients treat ids
/// as opaque.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub title_custom: bool,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub updated_at: Timestamp,
    pub archived: bool,
    pub status: ConversationStatus,
    pub cwd: String,
    pub agent: String,
    pub model: String,
    pub root_session_id: String,
    pub forked_from: Option<ForkedFrom>,
    /// How the root agent's most recent turn ended, once one has: lists mark a conversation
    /// whose last turn failed or was interrupted. Derived from `metadata.jsonl` like `status`
    /// (absent from index rows written before it existed, hence the default).
    #[serde(default)]
    pub last_turn: Option<LastTurn>,
    /// The MCP servers the client named when it created the conversation, as given but with
    /// every `env` and `headers` value shown as `[hidden]`.
    #[serde(default)]
    pub mcp: std::collections::BTreeMap<String, crate::config::McpServerSpec>,
    /// The conversation's own spending limits; each given one takes the place of the root
    /// agent's. Empty when the client set none.
    #[serde(default, skip_serializing_if = "Budget::is_empty")]
    pub budget: Budget,
}

pub use crate::config::{Budget, OnBudget};

/// The kinds of turn failure a client may act on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnErrorCode {
    /// A limit of the conversation's or agent's `Budget` was reached (`error` names it):
    /// raise it (`PATCH` the conversation's `budget`) and send again, or retry the turn.
    BudgetExceeded,
}

/// The end of a conversation's latest finished root turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct LastTurn {
    pub turn_id: String,
    pub status: TurnStatus,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    Idle,
    Running,
}

impl ConversationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Idle => "idle",
            ConversationStatus::Running => "running",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ForkedFrom {
    pub conversation_id: String,
    pub item_id: String,
    /// How the fork's working directory was made when it was forked into a copy of the tree
    /// (its `cwd` is that copy); absent when the fork shares the source's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeKind>,
}

/// How a working tree was copied for a fork.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeKind {
    /// A linked git worktree of the source's repository.
    Git,
    /// A plain copy of the files.
    Copy,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Session {
    pub id: String,
    pub parent_id: Option<String>,
    pub agent: String,
    pub model: String,
    pub task: Option<String>,
    pub status: SessionStatus,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    pub last_message: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Idle,
    Running,
    Interrupted,
    Closed,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Turn {
    pub id: String,
    pub session_id: String,
    /// The messages the turn answers: those that started it, then those steered into it.
    pub message_ids: Vec<String>,
    pub status: TurnStatus,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub started_at: Timestamp,
    #[schema(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub ended_at: Option<Timestamp>,
    pub error: Option<String>,
    /// What kind of failure `error` is, where a client may act on it; absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<TurnErrorCode>,
    /// The tokens the turn's model calls used: stored when it ends; while it runs, the calls
    /// answered so far; `None` for a turn cut short by a crash (or stored before this figure
    /// was kept).
    #[serde(default)]
    pub usage: Option<TurnUsage>,
}

/// The tokens one turn's model calls used, as the provider reported them (the built-in demo
/// model reports its own counts). A call whose provider sent no report is counted in
/// `unreported_calls`, and its tokens are missing from the sums.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TurnUsage {
    /// Model calls that answered (a failed attempt that was retried is not one; the summary
    /// an automatic compaction makes inside the turn is one).
    pub model_calls: u32,
    pub unreported_calls: u32,
    /// What the model read, summed over the calls (each call reads the whole context again).
    pub input_tokens: u64,
    /// What the model wrote, reasoning included.
    pub output_tokens: u64,
    /// The part of `output_tokens` that was reasoning, when the provider says.
    pub reasoning_tokens: u64,
    /// The part of `input_tokens` the provider read from its prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache (Anthropic reports and charges it
    /// apart; 0 elsewhere).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// What the reported tokens cost, in the currency units of the models' `price`; absent
    /// when no call's model has a price (never a made-up cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The same figures for each model that answered (by its configured name), in the order
    /// they first answered: one entry, unless a fallback model answered some calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelUsage>,
}

/// What one model's calls used within a turn (see `TurnUsage::models`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ModelUsage {
    /// The model's name in the configuration (`[models.<name>]`).
    pub model: String,
    pub model_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    Completed,
    Failed,
    Interrupted,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
            TurnStatus::Interrupted => "interrupted",
        }
    }
}

/// A message sent to an agent: the user's, or a sub-agent's report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Message {
    pub id: String,
    pub session_id: String,
    pub text: String,
    pub mode: MessageMode,
    pub source: MessageSource,
    pub from_session_id: Option<String>,
    pub status: MessageStatus,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// The repository command the user sent, whose expanded prompt is `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandUse>,
    /// The `user_message` hooks that ran before it was accepted (the context they added
    /// among them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
}

/// A command a user sent by name (`/review src/lib.rs`): clients show the name beside the
/// prompt it expanded to. Optional everywhere, so a data directory written before commands
/// existed reads as it is, and an older binary reads past it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct CommandUse {
    pub name: String,
    /// The arguments as given (empty when none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arguments: String,
}

/// A process a `shell` call started in the background, owned by its conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct ProcessInfo {
    /// `p_…`.
    pub id: String,
    pub conversation_id: String,
    /// The agent whose call started it: the root session, or a sub-agent's.
    pub session_id: String,
    /// The `shell` call that started it.
    pub call_id: String,
    pub command: String,
    pub status: ProcessStatus,
    /// How it exited on its own (`exited`); `null` otherwise.
    pub exit_code: Option<i32>,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub started_at: Timestamp,
    #[schema(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub ended_at: Option<Timestamp>,
    /// Why it was stopped (`killed`) or what became of it (`lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The bytes of output it wrote so far.
    pub output_bytes: u64,
    /// The TCP ports it listens on, while it runs (and the sandbox lets it listen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

impl ProcessInfo {
    /// How it is doing, in words: `running`, `exited N`, `stopped (why)`, `lost (why)`.
    pub fn status_text(&self) -> String {
        let status = match (self.status, self.exit_code) {
            (ProcessStatus::Running, _) => "running".to_owned(),
            (ProcessStatus::Exited, Some(code)) => format!("exited {code}"),
            (ProcessStatus::Exited, None) => "exited".to_owned(),
            (ProcessStatus::Killed, _) => "stopped".to_owned(),
            (ProcessStatus::Lost, _) => "lost".to_owned(),
        };
        match &self.reason {
            Some(reason) if self.status != ProcessStatus::Running => {
                format!("{status} ({})", crate::text::visible(reason))
            }
            _ => status,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    Running,
    /// It ended on its own.
    Exited,
    /// It was stopped: by `process_kill`, a user, its time limit, the conversation's deletion
    /// or the service stopping.
    Killed,
    /// The service ended while it ran (a crash): its next start killed what was left.
    Lost,
}

/// One run of a configured hook as the item it was about shows it: which hook, what came of
/// it, how long it took. Optional everywhere (items before hooks have none).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct HookRun {
    /// Its key in the config: `hooks.pre_tool_use[0]`.
    pub hook: String,
    pub outcome: HookOutcome,
    /// How long it ran.
    pub ms: u64,
    /// Its reason, note or context, or how it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The call's arguments before this hook changed them (`outcome` is `changed`); the
    /// call's own `arguments` are what ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_before: Option<Value>,
}

/// The context `user_message` hooks added to a message, as the model reads it after the
/// message's text; `None` when they added none.
pub fn hook_context(runs: &[HookRun]) -> Option<String> {
    let parts: Vec<String> = runs
        .iter()
        .filter(|run| run.outcome == HookOutcome::Context)
        .map(|run| {
            format!(
                "[hook {}: {}]",
                run.hook,
                run.detail.as_deref().unwrap_or_default()
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

impl HookRun {
    /// The run as a line: `hooks.pre_tool_use[0] · allowed · 12 ms — <reason>`, and what the
    /// model had asked for when the hook changed the call.
    pub fn summary(&self) -> String {
        let outcome = match self.outcome {
            HookOutcome::Ran => "ran",
            HookOutcome::Allow => "allowed",
            HookOutcome::Ask => "asked a person",
            HookOutcome::Deny => "denied",
            HookOutcome::Changed => "changed the call",
            HookOutcome::Note => "left a note",
            HookOutcome::Context => "added context",
            HookOutcome::Failed => "failed",
            HookOutcome::Other => "ran (an outcome this version does not know)",
        };
        let mut line = format!("{} · {outcome} · {} ms", self.hook, self.ms);
        if let Some(detail) = &self.detail {
            line.push_str(&format!(" — {detail}"));
        }
        if let Some(before) = &self.arguments_before {
            let asked = match before.get("command").and_then(Value::as_str) {
                Some(command) => command.to_owned(),
                None => before.to_string(),
            };
            line.push_str(&format!(" (the model asked for: {asked})"));
        }
        line
    }
}

/// What came of a hook run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookOutcome {
    /// It said nothing: no objection.
    Ran,
    Allow,
    Ask,
    Deny,
    /// It changed the call's arguments.
    Changed,
    /// It left the model a note (after a call).
    Note,
    /// It added context for the model to a user's message.
    Context,
    /// It failed or timed out; its `on_error` decided.
    Failed,
    /// An outcome this binary does not know (written by a newer one).
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageMode {
    #[default]
    Steer,
    Queue,
    Interrupt,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageSource {
    User,
    Agent,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Waiting,
    Started,
    Steered,
    Consumed,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Image {
    /// An image type, such as `image/png`.
    #[schema(pattern = "^image/")]
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// One entry of a session's history. A `<session-id>.jsonl` file may hold several records of
/// the same item (started, then completed); the last one wins, `seq` never changes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Item {
    pub id: String,
    pub session_id: String,
    pub turn_id: String,
    pub seq: u64,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    pub status: ItemStatus,
    #[serde(default)]
    pub compacted: bool,
    /// Which model call of its turn produced the item (1, 2, …): the text and tool calls of
    /// one answer share it. Absent for items the model did not produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(flatten)]
    pub kind: ItemKind,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    Running,
    /// A tool call waiting for a user's approval before it runs (never stored: on disk it is
    /// `running` until it ends).
    WaitingApproval,
    Completed,
    Interrupted,
    Failed,
}

impl ItemStatus {
    /// Not finished yet: running, or waiting for an approval.
    pub fn is_open(self) -> bool {
        matches!(self, ItemStatus::Running | ItemStatus::WaitingApproval)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ItemKind {
    UserMessage {
        text: String,
        source: MessageSource,
        from_session_id: Option<String>,
        #[serde(default)]
        images: Vec<Image>,
        /// The repository command the user sent, whose expanded prompt is `text`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<CommandUse>,
        /// The `user_message` hooks that ran before it was stored; the context they added
        /// goes to the model after `text`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hooks: Vec<HookRun>,
    },
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
        /// What the provider needs back to carry this reasoning into a later request (the
        /// Responses API's reasoning item with its encrypted content). Opaque; absent when the
        /// provider gave none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
        output: String,
        exit_code: Option<i32>,
        /// What the call changed in the working directory: set for the calls that may change
        /// files (`shell`, `write_file`, MCP tools) once they ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<Box<FileChanges>>,
        /// Images the tool returned (an MCP tool's image content), inline as base64. The
        /// model gets them with the result; `output` notes each one.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
        /// Not run because the permissions refused it or a user denied it (or let it expire):
        /// the item's status is `failed`, and clients show it as denied, not as an error.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        denied: bool,
        /// The `pre_tool_use` and `post_tool_use` hooks that ran for it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hooks: Vec<HookRun>,
    },
    Summary {
        text: String,
        covers_through_seq: u64,
    },
    Notice {
        text: String,
    },
    /// The agent's plan as it set it with `update_plan`, stored after that call. The newest
    /// plan of a session is its current one. Shown to users only: the model already has the
    /// call it made.
    Plan {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explanation: Option<String>,
        steps: Vec<PlanStep>,
    },
}

/// One step of a plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct PlanStep {
    pub step: String,
    pub status: PlanStepStatus,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    Pending,
    InProgress,
    Completed,
}

/// The paths (relative to the working directory) one tool call added, modified and deleted,
/// between the checkpoint snapshots taken before and after it (opaque ids). `error` says why
/// the call's changes could not be recorded; restoring across it is then unavailable.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct FileChanges {
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub modified: Vec<String>,
    #[serde(default)]
    pub deleted: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FileChanges {
    /// Every path the call changed.
    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.added.iter().chain(&self.modified).chain(&self.deleted)
    }
}

impl Item {
    /// Whether the model is sent this item: a failed attempt's partial output (text or
    /// reasoning) is kept for clients but never sent to the model as if it were complete, and a
    /// plan is for users (the model has the `update_plan` call it made).
    pub fn sent_to_model(&self) -> bool {
        !matches!(
            (&self.kind, self.status),
            (
                ItemKind::AgentMessage { .. } | ItemKind::Reasoning { .. },
                ItemStatus::Failed
            ) | (ItemKind::Plan { .. }, _)
        )
    }
}

impl ItemKind {
    /// The text a search for `q=` should find this item by, if any.
    pub fn searchable_text(&self) -> Option<&str> {
        match self {
            ItemKind::UserMessage { text, .. } | ItemKind::AgentMessage { text } => Some(text),
            _ => None,
        }
    }
}

/// The summary a history's model view starts from: the one that covers the most.
pub fn latest_summary(items: &[Item]) -> Option<usize> {
    items
        .iter()
        .enumerate()
        .filter_map(|(index, item)| match &item.kind {
            ItemKind::Summary {
                covers_through_seq, ..
            } if item.status == ItemStatus::Completed => Some((index, *covers_through_seq)),
            _ => None,
        })
        .max_by_key(|(_, covers)| *covers)
        .map(|(index, _)| index)
}

/// Marks what the latest summary stands for as `compacted`: the items up to the seq it covers,
/// and every older summary (each summary folds in the one before).
pub fn mark_compacted(items: &mut [Item]) {
    let Some(latest) = latest_summary(items) else {
        return;
    };
    let ItemKind::Summary {
        covers_through_seq, ..
    } = items[latest].kind
    else {
        return;
    };
    for (index, item) in items.iter_mut().enumerate() {
        if index == latest {
            continue;
        }
        if matches!(item.kind, ItemKind::Summary { .. }) || item.seq <= covers_through_seq {
            item.compacted = true;
        }
    }
}

/// How much of the model's context window a conversation uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Usage {
    pub used_tokens: u64,
    pub source: UsageSource,
    pub reported_tokens: Option<u64>,
    pub estimated_since_report: u64,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub threshold_tokens: u64,
    pub percent: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    Reported,
    Estimated,
}
/// A notice of a turn (for its users and its model), not yet stored: the actor gives it its seq.
pub fn notice_item(session_id: String, turn_id: String, step: Option<u32>, text: String) -> Item {
    Item {
        id: new_id("m"),
        session_id,
        turn_id,
        seq: 0,
        created_at: now(),
        status: ItemStatus::Completed,
        compacted: false,
        step,
        kind: ItemKind::Notice { text },
    }
}

/// The user's part of a one-off model request (a summary, a title), stored nowhere.
pub fn request_item(text: String, session_id: String, turn_id: String) -> Item {
    Item {
        id: new_id("m"),
        session_id,
        turn_id,
        seq: 0,
        created_at: now(),
        status: ItemStatus::Completed,
        compacted: false,
        step: None,
        kind: ItemKind::UserMessage {
            hooks: Vec::new(),
            text,
            source: MessageSource::User,
            from_session_id: None,
            images: Vec::new(),
            command: None,
        },
    }
}

/// The item that stands for a user message in a session's history; its id is the message's.
pub fn user_item(message: &Message, turn_id: &str, seq: u64) -> Item {
    Item {
        id: message.id.clone(),
        session_id: message.session_id.clone(),
        turn_id: turn_id.to_owned(),
        seq,
        created_at: message.created_at,
        status: ItemStatus::Completed,
        compacted: false,
        step: None,
        kind: ItemKind::UserMessage {
            hooks: message.hooks.clone(),
            text: message.text.clone(),
            source: message.source,
            from_session_id: message.from_session_id.clone(),
            images: message.images.clone(),
            command: message.command.clone(),
        },
    }
}
