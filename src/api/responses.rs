//! What the service answers: the response bodies that are not domain objects themselves. The
//! handlers return these types and the OpenAPI document shows them; the project's own clients
//! (`client`, `acp`) decode them (hence `Deserialize`, with the same attributes both ways).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::Protocol;
use crate::domain::{Conversation, Item, Message, Session, Usage};

/// A page of conversations, newest `updated_at` first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConversationList {
    pub conversations: Vec<Conversation>,
    /// Pass as `cursor=` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
    /// With `q`: for each listed conversation whose messages matched (not only its title), by
    /// id, a piece of the first matching message around the first match, on one line, `…`
    /// where it was cut. The words are not marked in it. Absent without `q`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippets: Option<std::collections::BTreeMap<String, String>>,
}

/// `POST /api/conversations`: the stored conversation and its first message, whose turn runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConversationCreated {
    pub conversation: Conversation,
    /// The first message (`status: started`).
    pub message: Message,
    /// The first turn, already running.
    pub turn_id: String,
}

/// A conversation with its sessions, waiting messages and context usage.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConversationView {
    #[serde(flatten)]
    pub conversation: Conversation,
    /// The root session first, then sub-agents.
    pub sessions: Vec<Session>,
    /// Waiting messages: the user's first, then sub-agent reports.
    pub pending: Vec<Message>,
    pub usage: Usage,
    /// Tool calls waiting for a user's answer, oldest first.
    pub approvals: Vec<crate::api::approvals::Approval>,
    /// What its ended turns cost (sub-agents' included) at the models' `price`; absent when
    /// none has a cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// A page of one session's stored history, compacted items included, in `seq` order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ItemsPage {
    pub items: Vec<Item>,
    /// Pass as `after_seq=` for the next page; `null` on the last page.
    pub next_after_seq: Option<u64>,
}

/// A page of one session's turns, in the order they started.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TurnsPage {
    pub turns: Vec<crate::domain::Turn>,
    /// Pass as `after=` for the next page; `null` on the last page.
    pub next_after: Option<String>,
}

/// The agents of a conversation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionList {
    /// The root session first, then sub-agents.
    pub sessions: Vec<Session>,
}

/// `POST /api/conversations/{id}/messages`: the message as accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageAccepted {
    /// `status` is `started` when the agent was idle (a new turn began), else `waiting`.
    pub message: Message,
}

/// The waiting messages of a conversation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PendingList {
    /// The user's messages first, then sub-agent reports.
    pub pending: Vec<Message>,
}

/// Whether an interrupt stopped a turn.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Interrupted {
    /// `false` when nothing was running.
    pub interrupted: bool,
}

/// A failed turn started again.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RetryStarted {
    /// The new turn.
    pub turn_id: String,
    /// The failed turn it runs again.
    pub retry_of: String,
}

/// Whether a model call waiting to be retried was tried at once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RetryingNow {
    /// `false` when the session was not waiting to retry its model call.
    pub retrying: bool,
}

/// `POST /api/conversations/{id}/fork`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ForkedConversation {
    /// The new conversation.
    pub conversation: Conversation,
    /// With `worktree`: the copy of the working tree the fork runs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeCopy>,
}

/// A copy of a working tree made for a fork. The directory is the user's: deleting the fork
/// leaves it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorktreeCopy {
    /// The fork's working directory (also its `cwd`), under the data directory's `worktrees/`.
    pub path: String,
    /// `git`: a linked worktree of the source's repository, detached at its `HEAD`, with the
    /// source's uncommitted changes; `copy`: a plain copy.
    pub kind: WorktreeKind,
    /// Files written from the snapshot the copy was made from (for a git worktree, those that
    /// differ from the checkout).
    pub files: usize,
    /// Files the snapshot left out (over the size limits), copied from the tree as they are
    /// now; `reason` also says when one could not be copied. Ignored files (`.gitignore`) are
    /// never copied.
    pub copied_as_is: Vec<SkippedFile>,
    /// Why a repository's copy is a plain copy (for instance: it has no commit yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub use crate::domain::WorktreeKind;

impl From<crate::checkpoints::TreeCopy> for WorktreeCopy {
    fn from(copy: crate::checkpoints::TreeCopy) -> WorktreeCopy {
        WorktreeCopy {
            path: copy.cwd.to_string_lossy().into_owned(),
            kind: copy.kind(),
            files: copy.files,
            copied_as_is: copy
                .copied_live
                .into_iter()
                .map(|skipped| SkippedFile {
                    path: skipped.path,
                    reason: skipped.reason,
                })
                .collect(),
            note: copy.note,
        }
    }
}

/// `POST /api/conversations/{id}/rewind`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RewoundConversation {
    /// The new conversation, copied up to just before the message; `null` when the message
    /// is the first one (nothing is stored then).
    #[schema(required = true)]
    pub conversation: Option<Conversation>,
    /// The text of that message, for the input box.
    pub text: String,
    /// With `restore_files`: what was put back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreSummary>,
}

/// Files put back by a rewind (or an undo): `restored` now hold what they held before;
/// `conflicts` were changed since by someone else and were kept. `id` names the restore for
/// `POST …/restores/{id}/undo`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RestoreSummary {
    /// `null` for a dry run.
    #[schema(required = true)]
    pub id: Option<String>,
    pub restored: Vec<String>,
    pub conflicts: Vec<String>,
}

/// `POST /api/conversations/{id}/restores/{restore_id}/undo`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RestoreAnswer {
    pub restore: RestoreSummary,
}

/// How a path changed over a turn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One path a turn changed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChangedFile {
    /// Relative to the working directory.
    pub path: String,
    pub change: FileChangeKind,
    /// Not text: named, without a diff.
    pub binary: bool,
    /// A unified diff (`a/<path>`, `b/<path>`); `null` for a binary file or past the cap.
    #[schema(required = true)]
    pub diff: Option<String>,
    /// The diff was left out: the answer reached its cap.
    pub truncated: bool,
    /// With `contents=true`: the text before (`null` for an added file) and after (`null` for
    /// a deleted one). Left out for binary files and past the cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_text: Option<String>,
}

/// `GET /api/conversations/{id}/turns/{turn_id}/changes`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TurnChanges {
    pub turn_id: String,
    /// The paths the turn's tool calls changed, each from before the first call that changed
    /// it to after the last (paths that ended as they began are left out).
    pub files: Vec<ChangedFile>,
    /// What the turn's last snapshot left out (over the size limits): their changes are
    /// neither shown nor restored.
    pub skipped: Vec<SkippedFile>,
}

/// A file a snapshot left out, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
}

/// `POST /api/conversations/{id}/compact`: the stored summary and the usage it leaves.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompactOutcome {
    /// The `summary` item now standing for the older history.
    pub summary: Item,
    pub usage: Usage,
}

/// `GET /api/health`: the service's own figures.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `unavailable` (with 503) when the instance cannot serve: in cluster mode, PostgreSQL
    /// does not answer.
    pub status: HealthStatus,
    pub version: String,
    /// Conversations loaded in memory now (the others are only on disk).
    pub live_conversations: u64,
    /// The most conversations held in memory at once (`server.max_live_conversations`).
    pub max_live_conversations: u64,
    /// Answers given since the start (this one not included).
    pub answers: AnswerCounts,
    /// Background index jobs not finished yet (a fork's search rows being copied, finished
    /// messages' search rows).
    pub index_jobs_pending: u64,
    /// How long the oldest of those jobs has waited, in milliseconds (0 when none waits): how
    /// far search lags behind what was answered.
    pub index_oldest_job_ms: u64,
    /// Conversations whose index updates failed (the database did not answer) and that wait
    /// to be re-indexed from their files: in cluster mode as soon as the database answers
    /// again, otherwise at the next start. Until it is 0, listing and search may lag behind
    /// what was stored.
    pub index_repairs_pending: u64,
    /// Sub-agents running now across every conversation.
    pub running_subagents: u64,
    /// The most sub-agents running at once across the service
    /// (`subagents.max_running_total`); past it `spawn_agent` answers a tool error.
    pub max_running_subagents: u64,
    /// Whether this machine's kernel can sandbox tool commands.
    pub sandbox: SandboxHealth,
    /// MCP servers (configured, and those conversations named), and those of them that are
    /// `failed` now (`GET /api/mcp`).
    pub mcp_servers: u64,
    pub mcp_servers_failed: u64,
    /// Cluster mode only: this instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterHealth>,
    /// Why the status is `unavailable`; absent when it is `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Unavailable,
}

/// The sandbox of tool processes on this machine, found out once at start.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxHealth {
    /// Sandboxed tool processes can run. When they cannot, agents with a sandbox have their
    /// commands refused, never run unsandboxed.
    pub available: bool,
    /// The kernel's Landlock ABI version; `null` without Landlock.
    pub landlock_abi: Option<u32>,
    /// User, mount, PID and network namespaces are set up for each call.
    pub namespaces: bool,
    /// The service runs as root, which it should not.
    pub runs_as_root: bool,
    /// Each layer, in force or not, with what it stops here.
    pub layers: Vec<SandboxLayer>,
}

/// One layer of the sandbox.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxLayer {
    /// `filesystem`, `network`, `api`, `pid`, `limits` or `privileges`.
    pub name: String,
    pub active: bool,
    /// What it stops, or why it is not in force.
    pub detail: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterHealth {
    /// A fresh id every start.
    pub instance_id: String,
    /// Where the other instances reach this one (`host:port`): `--advertise-addr`, else the
    /// address it listens on.
    pub addr: String,
    /// Conversations whose lease this instance holds.
    pub conversations_owned: u64,
    /// `unreachable` makes the health `unavailable`, with 503.
    pub postgres: PostgresStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PostgresStatus {
    Ok,
    Unreachable,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AnswerCounts {
    pub total: u64,
    /// Of them, server errors (5xx).
    pub server_errors: u64,
}

/// `GET /api/skills`: the skills a working directory sees (a repository's over the user's of
/// the same name), and the `SKILL.md` files skipped, each with the rule it breaks.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillList {
    pub cwd: String,
    pub skills: Vec<crate::repo::skills::Skill>,
    pub problems: Vec<crate::repo::Problem>,
}

/// `GET /api/commands`: the repository's and the user's commands a working directory sees,
/// by name, and the files skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommandList {
    pub commands: Vec<CommandInfo>,
    /// Files in a commands folder that are not commands, and why.
    pub problems: Vec<crate::repo::Problem>,
}

/// One command: send it as `{"command": name, "arguments": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommandInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the arguments are, for a client to show (`<issue number>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// The agent a conversation started with it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model a conversation started with it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The file it was read from.
    pub path: String,
    pub origin: crate::repo::Origin,
}

/// `GET /api/agents`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentList {
    /// The agent new conversations use by default.
    pub default: String,
    /// The working directory whose repository's agent files were read.
    pub cwd: String,
    pub agents: Vec<AgentInfo>,
    /// Agent files skipped, each with the rule it breaks (a bad front matter, or a setting
    /// that would loosen the user's).
    pub problems: Vec<crate::repo::Problem>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentInfo {
    pub name: String,
    pub description: String,
    pub model: String,
    /// The model that writes compaction summaries.
    pub compact_model: String,
    pub source: crate::agents::Source,
    /// The repository's agent file it comes from (`source` `repository` or
    /// `repository_and_config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `GET /api/conversations/{id}/processes`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProcessList {
    /// In the order they started.
    pub processes: Vec<crate::domain::ProcessInfo>,
}

/// `GET /api/conversations/{id}/processes/{process_id}/output`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProcessOutput {
    pub process: crate::domain::ProcessInfo,
    /// What it wrote after `since`.
    pub output: String,
    /// The cursor to read on from.
    pub next: u64,
    /// Bytes written after `since` that were dropped before this read (only the recent
    /// output is kept in memory while it runs).
    pub dropped: u64,
}

/// `GET /api/hooks`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HookList {
    pub hooks: Vec<HookInfo>,
}

/// One `[[hooks.<event>]]` table of the config (its `headers` and `secret` never shown).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HookInfo {
    /// `hooks.<event>[<index>]`.
    pub key: String,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The program, for a command hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The address, for an HTTP hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether its POSTs are signed (a `secret` is set).
    pub signed: bool,
    pub timeout_s: u64,
    /// What it decides when it fails or times out: `allow` or `deny`.
    pub on_error: String,
    /// Its last failure since the service started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<HookFailure>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HookFailure {
    pub at: chrono::DateTime<chrono::Utc>,
    pub message: String,
}

/// `GET /api/webhooks/deliveries`: the notification webhooks' recent deliveries, newest
/// first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookDeliveryList {
    pub deliveries: Vec<WebhookDelivery>,
}

/// One notification's delivery to one URL hook.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookDelivery {
    /// Its `webhook-id` (`msg_…`): the same on every try, and across restarts.
    pub id: String,
    /// The hook's key: `hooks.<event>[<index>]`.
    pub hook: String,
    pub event: String,
    pub conversation_id: String,
    pub status: WebhookDeliveryStatus,
    /// Tries made so far.
    pub attempts: u32,
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When a pending delivery is tried next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Why the last try failed, or why it was given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// `pending`: not delivered yet, tried again at `next_attempt_at`; `delivered`: answered with
/// a 2xx; `failed`: given up (its last try failed, the receiver answered 410 Gone, or its hook
/// is no longer configured with that URL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookDeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

/// `GET /api/models`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<ModelInfo>,
}

/// `GET /api/mcp`: every configured MCP server by name, then those conversations named.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct McpServerList {
    pub servers: Vec<McpServerInfo>,
}

/// One MCP server as the service sees it now.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct McpServerInfo {
    /// Its name in `[mcp.<name>]`, or in a create body's `mcp`.
    pub name: String,
    pub source: McpServerSource,
    pub transport: McpTransportKind,
    pub state: McpServerState,
    /// Its tools as the model sees them (`mcp__<server>__<tool>`), when last listed.
    pub tools: Vec<String>,
    /// Why it last failed to start or stopped; absent if it never did.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How many times it was started again after it first ran.
    pub restarts: u32,
}

/// Where a server was named: `config` (`[mcp.<name>]`), or `conversation` (a create body's
/// `mcp`; conversations that name the same server share it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpServerSource {
    Config,
    Conversation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpTransportKind {
    /// A child process on stdio (`command`).
    Stdio,
    /// Streamable HTTP (`url`).
    Http,
}

/// `not_started` until an agent using it first runs; `failed` when it exited or could not
/// start (it is started again, after a back-off if it keeps failing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    NotStarted,
    Starting,
    Running,
    Failed,
    Stopped,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelInfo {
    /// The model's key in the configuration.
    pub id: String,
    pub provider: String,
    pub protocol: Option<Protocol>,
    pub context_window: u64,
    pub max_output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;

    /// What the service writes reads back as itself: the clients decode these types.
    fn round_trip<T: Serialize + DeserializeOwned>(written: Value) {
        let read: T = serde_json::from_value(written.clone()).expect("it decodes");
        assert_eq!(serde_json::to_value(read).unwrap(), written);
    }

    fn conversation() -> Value {
        json!({
            "id": "c_1", "title": "T", "title_custom": false,
            "created_at": "2025-01-02T03:04:05.123456Z", "updated_at": "2025-01-02T03:04:06Z",
            "archived": false, "status": "idle", "cwd": "/w", "agent": "default", "model": "m",
            "root_session_id": "s_1", "forked_from": null,
            "last_turn": {"turn_id": "t_1", "status": "failed", "error": "boom"}, "mcp": {},
        })
    }

    #[test]
    fn responses_read_back_as_the_service_wrote_them() {
        let usage = json!({
            "used_tokens": 10, "source": "estimated", "reported_tokens": null,
            "estimated_since_report": 10, "context_window": 1000, "max_output_tokens": 100,
            "threshold_tokens": 800, "percent": 1.0,
        });
        let mut view = conversation();
        view["sessions"] = json!([]);
        view["pending"] = json!([]);
        view["usage"] = usage;
        view["approvals"] = json!([]);
        round_trip::<ConversationView>(view);
        round_trip::<ConversationList>(
            json!({"conversations": [conversation()], "next_cursor": null}),
        );
        round_trip::<ForkedConversation>(json!({"conversation": conversation()}));
        round_trip::<RewoundConversation>(json!({"conversation": null, "text": "hi"}));
    }
}
