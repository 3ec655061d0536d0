//! Hooks: the programs and URLs of the config's `[[hooks.<event>]]` tables, asked before a
//! tool call (`pre_tool_use`) whether it may run, told after it ran (`post_tool_use`), which
//! may leave the model a note, and told when a root turn ended (`turn_ended`, in the
//! background). A `pre_tool_use` hook answers `allow`, `deny` or `ask`
//! (or nothing); one that fails or times out decides by its `on_error`. A turn never waits on
//! a hook longer than its `timeout_s`, nor past an interrupt.
//!
//! - `answer.rs` — what a hook answers, read from its output.
//! - `run.rs` — one hook run: a command under the agent's sandbox, or a signed POST.
//! - `post.rs` — one signed POST of a payload.
//! - `signature.rs` — the Standard Webhooks signature of a POST.
//! - `outbox/` — the notifications for URL hooks: stored before they are sent, retried with
//!   back-off, resumed after a restart.
//!
//! Payloads pass through the same secret redaction as everything stored; hooks come only from
//! the user's config, never from a repository.

mod answer;
pub mod outbox;
mod post;
mod run;
mod signature;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::config::{HookAction, HookConfig, HookEvent, OnHookError};
use crate::sandbox::SandboxPolicy;

pub use answer::{Answer, Decision};
pub use outbox::Outbox;

use crate::domain::{HookOutcome, HookRun};
use answer::answer;
pub use signature::sign;

/// The hooks' joint answer about one call: the strictest decision, with the hook that gave
/// it; the arguments the call runs with when a hook changed them; and every run, as the call
/// shows them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    pub decision: Option<(Decision, String, String)>,
    pub arguments: Option<Value>,
    pub runs: Vec<HookRun>,
}

impl Verdict {
    pub fn decision(&self) -> Option<Decision> {
        self.decision.as_ref().map(|(decision, _, _)| *decision)
    }

    /// "hook hooks.pre_tool_use[0]: <reason>".
    pub fn said(&self) -> String {
        match &self.decision {
            Some((_, hook, reason)) if !reason.is_empty() => format!("hook {hook}: {reason}"),
            Some((_, hook, _)) => format!("hook {hook}"),
            None => String::new(),
        }
    }
}

impl Decision {
    fn outcome(self) -> HookOutcome {
        match self {
            Decision::Allow => HookOutcome::Allow,
            Decision::Ask => HookOutcome::Ask,
            Decision::Deny => HookOutcome::Deny,
        }
    }
}

/// Who a hook is asked about.
#[derive(Debug, Clone, Serialize)]
pub struct Subject {
    pub conversation_id: String,
    pub session_id: String,
    pub agent: String,
    /// The turn it is about; for a user's message, the turn it would join (absent when the
    /// agent is idle); absent for a conversation created or deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub cwd: PathBuf,
}

/// The last failure of each hook, by key, with when it happened.
#[derive(Debug, Default)]
pub struct HookStatus {
    last_errors: Mutex<HashMap<String, (chrono::DateTime<chrono::Utc>, String)>>,
}

impl HookStatus {
    pub fn last_error(&self, key: &str) -> Option<(chrono::DateTime<chrono::Utc>, String)> {
        self.last_errors
            .lock()
            .expect("hook status")
            .get(key)
            .cloned()
    }

    fn failed(&self, key: &str, error: &str) {
        self.last_errors
            .lock()
            .expect("hook status")
            .insert(key.to_owned(), (chrono::Utc::now(), error.to_owned()));
    }
}

/// The configured hooks and what they last did.
#[derive(Debug)]
pub struct Hooks {
    hooks: Arc<[HookConfig]>,
    pub status: Arc<HookStatus>,
    client: reqwest::Client,
    /// The notifications for URL hooks, until each is delivered or given up.
    pub outbox: Arc<Outbox>,
}

impl Hooks {
    /// The hooks of the config, and the task that sends the outbox's deliveries (started here,
    /// so on a Tokio runtime; it stops when these hooks are dropped).
    pub fn new(hooks: &[HookConfig], outbox: Arc<Outbox>) -> Hooks {
        let hooks: Arc<[HookConfig]> = hooks.into();
        let status = Arc::new(HookStatus::default());
        let client = crate::tls::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let failed = status.clone();
        outbox::start(
            outbox.clone(),
            hooks.clone(),
            client.clone(),
            Arc::new(move |key: &str, error: &str| failed.failed(key, error)),
        );
        Hooks {
            hooks,
            status,
            client,
            outbox,
        }
    }

    pub fn list(&self) -> &[HookConfig] {
        &self.hooks
    }

    pub fn any(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|hook| hook.event == event)
    }

    /// Asks the `pre_tool_use` hooks whose matcher takes this call, in the file's order; the
    /// first `deny` ends it. A hook may change the call's arguments: the next hook, the
    /// permissions and the tool see the changed ones. A hook that fails decides by its
    /// `on_error` (`deny`; or `allow`, which lets the call go on as if it had not run).
    pub async fn pre_tool_use(
        &self,
        subject: &Subject,
        sandbox: &SandboxPolicy,
        tool: &str,
        call_id: &str,
        arguments: &Value,
    ) -> Verdict {
        let mut verdict = Verdict::default();
        for hook in self.hooks.iter() {
            let current = verdict.arguments.as_ref().unwrap_or(arguments);
            if hook.event != HookEvent::PreToolUse || !matches(hook, tool, current) {
                continue;
            }
            let fields = serde_json::json!({
                "tool": tool,
                "tool_call_id": call_id,
                "arguments": current,
            });
            let body = payload_of(subject, HookEvent::PreToolUse, fields);
            let (ran, mut run) = self.run_timed(hook, &body, subject, sandbox, answer).await;
            let decision = match ran {
                Ok(answer) => {
                    if let Some(changed) = answer.arguments.filter(|changed| changed != current) {
                        let mut before = current.clone();
                        crate::redact::redact_json(&mut before);
                        run.arguments_before = Some(before);
                        run.outcome = HookOutcome::Changed;
                        verdict.arguments = Some(changed);
                    }
                    run.detail.clone_from(&answer.reason);
                    answer
                        .decision
                        .map(|decision| (decision, answer.reason.unwrap_or_default()))
                }
                Err(error) => match hook.on_error {
                    OnHookError::Allow => None,
                    OnHookError::Deny => Some((
                        Decision::Deny,
                        format!("it failed ({error}), and its on_error is deny"),
                    )),
                },
            };
            let denied = decision.as_ref().map(|(decision, _)| *decision) == Some(Decision::Deny);
            if let Some((decision, reason)) = decision {
                // A failure stays one; a change shows unless the call is denied or asked about.
                run.outcome = match (run.outcome, decision) {
                    (HookOutcome::Failed, _) => HookOutcome::Failed,
                    (HookOutcome::Changed, Decision::Allow) => HookOutcome::Changed,
                    (_, decision) => decision.outcome(),
                };
                let stricter = verdict.decision().is_none_or(|known| decision > known);
                if stricter {
                    verdict.decision = Some((decision, hook.key(), reason));
                }
            }
            verdict.runs.push(run);
            if denied {
                break;
            }
        }
        verdict
    }

    /// Tells the `post_tool_use` hooks whose matcher takes this call that it ran. Each run's
    /// note for the model (a JSON answer's `note`, or the standard error of a command that
    /// exits with 2) is its `detail`, with the outcome `note`; `notes` words them for the
    /// model. A hook that fails is logged and kept as its last error; the call's result stands.
    pub async fn post_tool_use(
        &self,
        subject: &Subject,
        sandbox: &SandboxPolicy,
        call: Ran<'_>,
    ) -> Vec<HookRun> {
        let mut runs = Vec::new();
        let matching = self.hooks.iter().filter(|hook| {
            hook.event == HookEvent::PostToolUse && matches(hook, call.tool, call.arguments)
        });
        let mut payload: Option<String> = None;
        for hook in matching {
            let body = payload.get_or_insert_with(|| {
                let fields = serde_json::json!({
                    "tool": call.tool,
                    "tool_call_id": call.call_id,
                    "arguments": call.arguments,
                    "status": call.status,
                    "output": call.output,
                    "files_changed": call.files_changed,
                });
                payload_of(subject, HookEvent::PostToolUse, fields)
            });
            let (ran, mut run) = self.run_timed(hook, body, subject, sandbox, answer).await;
            if let Ok(answer) = ran {
                // Exit code 2 (a `deny`) is how a command says "the model must read this".
                let note = answer.note.or(match answer.decision {
                    Some(Decision::Deny) => answer.reason,
                    _ => None,
                });
                if let Some(note) = note.filter(|note| !note.trim().is_empty()) {
                    run.outcome = HookOutcome::Note;
                    run.detail = Some(note);
                }
            }
            runs.push(run);
        }
        runs
    }

    /// Runs one hook, timed, as the item it is about shows it (`ran`, or `failed` with how).
    /// A failure is logged and kept as the hook's last error.
    async fn run_timed(
        &self,
        hook: &HookConfig,
        body: &str,
        subject: &Subject,
        sandbox: &SandboxPolicy,
        read: run::Reader,
    ) -> (Result<Answer, String>, HookRun) {
        let started = std::time::Instant::now();
        let ran = run::run(hook, body, &subject.cwd, sandbox, &self.client, read).await;
        let key = hook.key();
        let mut run = HookRun {
            hook: key.clone(),
            outcome: HookOutcome::Ran,
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            detail: None,
            arguments_before: None,
        };
        if let Err(error) = &ran {
            tracing::warn!(hook = %key, %error, "a hook failed");
            self.status.failed(&key, error);
            run.outcome = HookOutcome::Failed;
            run.detail = Some(format!("{error}; its on_error is {}", hook.on_error.name()));
        }
        (ran, run)
    }
}

/// The notes of `post_tool_use` runs, as the model reads them after the call's output.
pub fn notes(runs: &[HookRun]) -> impl Iterator<Item = String> + '_ {
    runs.iter()
        .filter(|run| run.outcome == HookOutcome::Note)
        .map(|run| {
            format!(
                "[hook {}: {}]",
                run.hook,
                run.detail.as_deref().unwrap_or_default()
            )
        })
}

/// The notices a turn stores for the runs that failed.
pub fn failure_notices(runs: &[HookRun]) -> impl Iterator<Item = String> + '_ {
    runs.iter()
        .filter(|run| run.outcome == HookOutcome::Failed)
        .map(|run| {
            format!(
                "Hook {} failed: {}.",
                run.hook,
                run.detail.as_deref().unwrap_or("no reason given")
            )
        })
}

impl Hooks {
    /// Tells the hooks of `event`, a notification nothing waits for, what happened. For each
    /// URL hook a delivery is queued in the outbox, written and fsynced before this returns,
    /// and sent in the background, again until it is answered (`outbox/`). Command hooks run
    /// once, in the background, in the file's order, each bounded by its timeout. A failure is
    /// logged and kept as the hook's last error.
    pub fn notify(
        self: &Arc<Self>,
        event: HookEvent,
        subject: Subject,
        sandbox: SandboxPolicy,
        fields: Value,
    ) {
        if !self.any(event) {
            return;
        }
        let body = payload_of(&subject, event, fields);
        let of_event = || self.hooks.iter().filter(|hook| hook.event == event);
        let deliveries: Vec<outbox::Delivery> = of_event()
            .filter_map(|hook| match &hook.action {
                HookAction::Url { url, .. } => Some(outbox::Delivery::new(
                    hook.key(),
                    url,
                    event.name(),
                    &subject.conversation_id,
                    &body,
                )),
                HookAction::Command(_) => None,
            })
            .collect();
        let keys: Vec<String> = deliveries.iter().map(|d| d.hook.clone()).collect();
        if let Err(error) = self.outbox.queue(deliveries) {
            tracing::error!(%error, event = event.name(), "cannot store a notification's webhook deliveries; they are not sent");
            for key in &keys {
                let error = format!("its delivery could not be stored, so it is not sent: {error}");
                self.status.failed(key, &error);
            }
        }
        if !of_event().any(|hook| matches!(hook.action, HookAction::Command(_))) {
            return;
        }
        let hooks = self.clone();
        tokio::spawn(async move {
            let commands = hooks
                .hooks
                .iter()
                .filter(|hook| hook.event == event)
                .filter(|hook| matches!(hook.action, HookAction::Command(_)));
            for hook in commands {
                let ran =
                    run::run(hook, &body, &subject.cwd, &sandbox, &hooks.client, answer).await;
                if let Err(error) = ran {
                    let key = hook.key();
                    tracing::warn!(hook = %key, %error, "a hook failed");
                    hooks.status.failed(&key, &error);
                }
            }
        });
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.outbox.close();
    }
}

impl Hooks {
    /// Asks the `user_message` hooks about a message before it is stored, in the file's
    /// order. `Ok` with their runs, the context they added among them (outcome `context`), or
    /// `Err` with the reason when one blocks it (`deny`, exit code 2, or a failure with
    /// `on_error = "deny"`). Plain text on a hook's standard output is context, as other
    /// agents' prompt hooks take it.
    pub async fn user_message(
        &self,
        subject: &Subject,
        sandbox: &SandboxPolicy,
        fields: Value,
    ) -> Result<Vec<HookRun>, String> {
        let mut runs = Vec::new();
        let body = payload_of(subject, HookEvent::UserMessage, fields);
        for hook in self
            .hooks
            .iter()
            .filter(|hook| hook.event == HookEvent::UserMessage)
        {
            let (ran, mut run) = self
                .run_timed(hook, &body, subject, sandbox, answer::answer_or_context)
                .await;
            let blocked = match ran {
                Ok(answer) if answer.decision == Some(Decision::Deny) => Some(answer.reason),
                Ok(answer) => {
                    if let Some(context) = answer.context.filter(|text| !text.trim().is_empty()) {
                        run.outcome = HookOutcome::Context;
                        run.detail = Some(context);
                    }
                    None
                }
                Err(error) if hook.on_error == OnHookError::Deny => Some(Some(format!(
                    "it failed ({error}), and its on_error is deny"
                ))),
                Err(_) => None,
            };
            if let Some(reason) = blocked {
                let key = hook.key();
                return Err(match reason.filter(|reason| !reason.is_empty()) {
                    Some(reason) => format!("a hook blocks this message (hook {key}: {reason})"),
                    None => format!("a hook blocks this message (hook {key})"),
                });
            }
            runs.push(run);
        }
        Ok(runs)
    }
}

/// A call that ran, as `post_tool_use` hooks are told of it.
pub struct Ran<'a> {
    pub tool: &'a str,
    pub call_id: &'a str,
    pub arguments: &'a Value,
    /// `completed` or `failed`.
    pub status: &'a str,
    pub output: &'a str,
    /// `{"added", "modified", "deleted"}` in the working directory, when known.
    pub files_changed: Option<Value>,
}

/// The payload of `event`: who it is about, the event's name and its own `fields`, with every
/// configured secret taken out.
fn payload_of(subject: &Subject, event: HookEvent, fields: Value) -> String {
    let mut value = serde_json::to_value(subject).unwrap_or_default();
    value["event"] = event.name().into();
    if let (Some(value), Value::Object(fields)) = (value.as_object_mut(), fields) {
        value.extend(fields);
    }
    crate::redact::redact(&value.to_string()).into_owned()
}

/// Whether `hook`'s matcher takes a call of `tool` with `arguments`.
fn matches(hook: &HookConfig, tool: &str, arguments: &Value) -> bool {
    let Some(matcher) = &hook.matcher else {
        return true;
    };
    if !crate::permissions::policy::pattern_matches(&matcher.tool, tool) {
        return false;
    }
    match &matcher.command {
        None => true,
        Some(pattern) => crate::permissions::policy::pattern_matches(
            pattern,
            crate::permissions::policy::shell_command(arguments).trim(),
        ),
    }
}
