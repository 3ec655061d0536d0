//! The turn loop: model call → the tools it asks for → results back to the model → …
//! until it answers without tool calls. The loop runs in its own task and owns no files: every
//! item it produces goes to the conversation actor (`TurnMsg`), which stores it write-ahead and
//! publishes it, so there is still exactly one writer per conversation.
//!
//! `model_call.rs` makes one model call and streams its answer; `budget.rs` keeps to the
//! spending limits before each call; `held_output.rs` lets out
//! output held back for a secret; `plan.rs` checks `update_plan` and builds its plan item;
//! `spec.rs` is what a turn is started with.

pub mod budget;
mod held_output;
mod mcp_peer;
mod model_call;
mod notices;
mod plan;
pub mod skills;
mod spec;

use crate::domain::HookRun;
use crate::hooks::Decision as HookDecision;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::approvals::{ApprovalOutcome, ApprovalRequest};
use super::collab;
use super::compaction::{self, Failure};
use super::link::{ActorLink, FromTurn, TurnMsg, TurnStop};
use super::retry::{Retry, model_failure};
use super::usage::{UsageTracker, context_tokens};
use crate::api::events::CompactionReason;
use crate::api::events::DeltaField;
use crate::domain::{FileChanges, Item, ItemKind, ItemStatus, TurnErrorCode, TurnStatus};
use crate::permissions::policy::escalation;
use crate::permissions::{Permission, Verdict};
use crate::redact::{self, StreamRedactor};
use crate::telemetry::spans;
use crate::tools::{self, ToolContext, ToolResult, ToolStatus};
use held_output::{HELD_OUTPUT_WAIT, forward_rest};
use model_call::{CallStop, MERGED_DELTA_MAX, call_model};
pub use spec::{ModelSetup, TurnSpec};
use tracing::Instrument;

/// Runs a turn of `session_id` to its end. Always sends exactly one `Ended`, last.
pub async fn run(mut spec: TurnSpec, session_id: Arc<str>, actor: mpsc::UnboundedSender<FromTurn>) {
    let link = ActorLink::new(actor, session_id);
    let span = spans::invoke_agent(
        &spec.gate.conversation_id,
        &spec.session_id,
        &spec.turn_id,
        &spec.gate.agent,
        spec.model.provider,
        &spec.model.name,
    );
    // A sub-agent's turn belongs under the tool call that started it.
    if let Some(parent) = spec.trace_parent.take() {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let _ = span.set_parent(parent);
    }
    let started = std::time::Instant::now();
    let (status, error, error_code) = match drive(spec, &link).instrument(span.clone()).await {
        Ok(()) => (TurnStatus::Completed, None, None),
        Err(TurnStop::Interrupted) => (TurnStatus::Interrupted, None, None),
        Err(TurnStop::Failed(error)) => (TurnStatus::Failed, Some(error), None),
        Err(TurnStop::OverBudget(error)) => (
            TurnStatus::Failed,
            Some(error),
            Some(TurnErrorCode::BudgetExceeded),
        ),
    };
    span.record("openvaala.turn.status", status.as_str());
    if let Some(error) = &error {
        spans::failed(&span, error);
    }
    let took = started.elapsed();
    span.in_scope(|| {
        tracing::info!(
            status = status.as_str(),
            seconds = took.as_secs_f64(),
            "turn ended"
        );
    });
    crate::telemetry::metrics::turn_ended(status.as_str(), took);
    link.send(TurnMsg::Ended {
        status,
        error,
        error_code,
    });
}

async fn drive(mut spec: TurnSpec, link: &ActorLink) -> Result<(), TurnStop> {
    // The agent's MCP servers start on its first turn; their tools come after the built-ins.
    // A slow start must not keep an interrupt waiting, nor the turn: a server not ready within
    // a few seconds joins a later model call, and a notice says so.
    let mcp = tokio::select! {
        tools = tools::mcp_specs(&spec.tool_context) => tools,
        () = spec.cancel.cancelled() => return Err(TurnStop::Interrupted),
    };
    let mut mcp_tools = mcp.specs;
    let mut starting = mcp.starting;
    // The model reads it too, so it knows which tools it lacks.
    let mut mcp_notice = None;
    if let Some(text) = notices::mcp_starting(&starting, &mcp.failed) {
        let notice = notices::turn_notice(&spec, 1, text);
        link.store(notice.clone()).await?;
        mcp_notice = Some(notice);
    }
    spec.tools = spec.model.builtin_tools.clone();
    spec.tools.extend(mcp_tools.iter().cloned());
    // Skills are read anew each turn, so an edited one counts from the next.
    if spec.tools.iter().any(|tool| tool.name == skills::NAME) {
        let (cwd, user_dir) = (spec.tool_context.cwd.clone(), spec.user_dir.clone());
        let read = tokio::task::spawn_blocking(move || {
            crate::repo::skills::discover(&cwd, user_dir.as_deref())
        });
        let catalogue = tokio::select! {
            read = read => read.unwrap_or_default(),
            () = spec.cancel.cancelled() => return Err(TurnStop::Interrupted),
        };
        spec.skills = skills::TurnSkills::new(catalogue);
    }
    spec.instructions = instructions(&spec, &spec.model).await?;
    let mut history = spec.history.clone();
    let mut usage = spec.usage;
    if let Some(notice) = mcp_notice {
        usage.add(&notice);
        history.push(notice);
    }
    let mut step = 0;
    // Spending limits a user let this turn go past.
    let mut passed = Vec::new();
    loop {
        if spec.cancel.is_cancelled() {
            return Err(TurnStop::Interrupted);
        }
        if step >= spec.max_steps {
            return Err(TurnStop::Failed(format!(
                "the turn reached its limit of {} model calls (turn.max_steps)",
                spec.max_steps
            )));
        }
        step += 1;
        if step > 1 && !starting.is_empty() {
            let ready = tools::mcp_ready_specs(&spec.tool_context, &starting).await;
            if let Some(text) = notices::mcp_ready(&starting, &ready) {
                let notice = notices::turn_notice(&spec, step, text);
                link.store(notice.clone()).await?;
                usage.add(&notice);
                history.push(notice);
            }
            spec.tools.extend(ready.specs.iter().cloned());
            mcp_tools.extend(ready.specs);
            starting = ready.starting;
        }
        for steered in link.take_steered().await {
            usage.add(&steered);
            history.push(steered);
        }
        budget::keep_to(&spec, step, &mut passed, link).await?;
        if compaction::needed(
            &usage,
            spec.model.context_window,
            spec.model.max_output_tokens,
        ) {
            compact(&spec, &mut history, &mut usage, link, false).await?;
        }

        let answer = loop {
            match call_model(&spec, &history, step, link).await {
                Ok(answer) => break answer,
                Err(CallStop::Turn(stop)) => return Err(stop),
                // Its retries are used up on an overload, a rate limit or a server error: the
                // call goes to the next fallback model, if one is left.
                Err(CallStop::Unavailable(failure)) => {
                    if !fall_back(&mut spec, &mcp_tools, step, &failure, link).await? {
                        return Err(TurnStop::Failed(failure));
                    }
                }
                // The provider counted more than the meter estimated (images, a tokenizer that
                // is only approximated): compact what came before this turn and call once more.
                Err(CallStop::Overflow(error)) => {
                    if !compact(&spec, &mut history, &mut usage, link, true).await? {
                        return Err(TurnStop::Failed(format!(
                            "{}; nothing older is left to compact",
                            model_failure(&error, 1)
                        )));
                    }
                    break call_model(&spec, &history, step, link)
                        .await
                        .map_err(CallStop::into_turn_stop)?;
                }
            }
        };
        for item in answer.items.iter().chain(&answer.tool_calls) {
            usage.stored(item, true);
        }
        if let Some(tokens) = answer
            .usage
            .and_then(|reported| context_tokens(&reported, spec.model.reasoning_carried))
        {
            usage.report(tokens);
        }
        history.extend(answer.items);
        if answer.tool_calls.is_empty() {
            return Ok(());
        }
        let raw_arguments = answer.raw_arguments;
        // What a call runs: the arguments as the model wrote them.
        let to_run = |item: &Item| -> Value {
            raw_arguments
                .get(&item.id)
                .cloned()
                .unwrap_or_else(|| tool_arguments(item).clone())
        };
        let mut calls = answer.tool_calls.into_iter().peekable();
        while let Some(call) = calls.next() {
            // Sub-agents asked for in one answer start together, in one request to the actor.
            let mut batch = vec![call];
            let spawns_freely = spec.gate.permissions.tool("spawn_agent") == Permission::Allow;
            while tool_name(&batch[0]) == "spawn_agent"
                && spawns_freely
                && calls
                    .peek()
                    .is_some_and(|next| tool_name(next) == "spawn_agent")
            {
                batch.extend(calls.next());
            }
            let results = if batch.len() > 1 {
                let arguments: Vec<Value> = batch.iter().map(to_run).collect();
                let arguments: Vec<&Value> = arguments.iter().collect();
                let results = collab::spawn_all(&arguments, link, &spec.cancel).await;
                results.into_iter().map(Ran::result).collect()
            } else {
                vec![run_tool(&spec, &batch[0], &to_run(&batch[0]), link).await]
            };
            for (call, result) in batch.into_iter().zip(results) {
                match finish_tool_call(call, result, link).await {
                    Ok(item) => {
                        // Its call was counted with the answer (and is in the report).
                        usage.stored(&item, false);
                        history.push(item);
                    }
                    Err(stop) => {
                        // Calls the model asked for but that never ran are closed too.
                        for mut unrun in calls {
                            unrun.status = ItemStatus::Interrupted;
                            link.store(unrun).await?;
                        }
                        return Err(stop);
                    }
                }
            }
        }
    }
}

/// The whole instructions for `model`: the prompt with the environment block as it reads with
/// that model (git is asked once per session and day).
async fn instructions(spec: &TurnSpec, model: &ModelSetup) -> Result<Option<String>, TurnStop> {
    let environment = match (&spec.environment, &model.facts) {
        (Some(cell), Some(facts)) => tokio::select! {
            text = cell.describe(facts) => Some(text),
            () = spec.cancel.cancelled() => return Err(TurnStop::Interrupted),
        },
        _ => None,
    };
    let text = spec.prompt.text(environment.as_deref());
    // The skills come last: each one's name and description, the rest when loaded.
    Ok(match (text, spec.skills.catalogue.listing()) {
        (Some(text), Some(skills)) => Some(format!("{text}\n\n{skills}")),
        (text, skills) => text.or(skills),
    })
}

/// Moves the turn's calls to its next fallback model, for the rest of the turn, and tells
/// every client why. False when no fallback is left.
async fn fall_back(
    spec: &mut TurnSpec,
    mcp_tools: &[crate::model::ToolSpec],
    step: u32,
    failure: &str,
    link: &ActorLink,
) -> Result<bool, TurnStop> {
    let Some(next) = spec.fallbacks.pop_front() else {
        return Ok(false);
    };
    link.send(TurnMsg::Fallback {
        from: spec.model.id.clone(),
        to: next.id.clone(),
        reason: failure.to_owned(),
    });
    spec.instructions = instructions(spec, &next).await?;
    spec.tools = next.builtin_tools.clone();
    spec.tools.extend(mcp_tools.iter().cloned());
    spec.model = next;
    spec.reasoning_from_step = Some(step);
    Ok(true)
}

/// Compacts the history before a model call that would reach the threshold, or after the
/// provider refused one as too large (`overflowed`: then everything before this turn is
/// summarized if the usual cut keeps it all): the summary is stored, and the rest of the turn
/// reads from it. False when there was nothing older to summarize. A failed compaction fails
/// the turn.
async fn compact(
    spec: &TurnSpec,
    history: &mut Vec<Item>,
    usage: &mut UsageTracker,
    link: &ActorLink,
    overflowed: bool,
) -> Result<bool, TurnStop> {
    let view = compaction::model_view(history);
    let plan =
        compaction::plan(&view, spec.model.context_window, CompactionReason::Auto).or_else(|| {
            overflowed
                .then(|| compaction::plan_before_turn(&view, &spec.turn_id))
                .flatten()
        });
    let Some(plan) = plan else {
        // Everything is recent: there is nothing older to summarize.
        return Ok(false);
    };
    link.send(TurnMsg::CompactionStarted);
    let on_retry = |retry: Retry| link.send(TurnMsg::Retry(retry));
    let reason = if overflowed { "overflow" } else { "auto" };
    let span = spans::compaction(&spec.gate.conversation_id, reason);
    match spec
        .compactor
        .summarize(&plan, &spec.cancel, on_retry)
        .instrument(span)
        .await
    {
        Ok((text, report)) => {
            let mut summary =
                compaction::summary_item(&spec.session_id, &spec.turn_id, text, &plan);
            summary.seq = link.store(summary.clone()).await?;
            history.push(summary.clone());
            compaction::mark_compacted(history);
            *usage = usage.restart(&compaction::model_view(history));
            link.send(TurnMsg::Compacted {
                summary,
                usage: report,
            });
            Ok(true)
        }
        Err(Failure::Interrupted) => {
            link.send(TurnMsg::CompactionFailed {
                error: "interrupted".to_owned(),
            });
            Err(TurnStop::Interrupted)
        }
        Err(Failure::Failed(error)) => {
            link.send(TurnMsg::CompactionFailed {
                error: error.clone(),
            });
            Err(TurnStop::Failed(format!("compaction failed: {error}")))
        }
    }
}

/// Checks a call against the permissions. A shell command is parsed on the blocking pool: a
/// hostile one may take the parser a while (it is bounded), and the turn's worker must not wait.
async fn check(spec: &TurnSpec, name: &str, arguments: &Value) -> Verdict {
    if name != "shell" {
        return spec.gate.check(name, arguments);
    }
    let (gate, arguments) = (spec.gate.clone(), arguments.clone());
    tokio::task::spawn_blocking(move || gate.check("shell", &arguments))
        .await
        .unwrap_or_else(|_| Verdict::Ask {
            reason: crate::permissions::Reason::plain(
                "the command could not be checked against the rules",
            ),
            suggested_rules: Vec::new(),
        })
}

/// Whether a call may run: `Ok(escalated)` to run it (outside the sandbox if escalated), or
/// the result the model gets instead. The `pre_tool_use` hooks' runs, and the arguments they
/// changed (which the permissions then check), are left in `hooked`.
async fn gate(
    spec: &TurnSpec,
    item: &Item,
    arguments: &Value,
    link: &ActorLink,
    hooked: &mut crate::hooks::Verdict,
) -> Result<bool, ToolResult> {
    let name = tool_name(item);
    // The hooks are asked first; their answer cannot pass a configured deny.
    if spec.hooks.any(crate::config::HookEvent::PreToolUse) {
        let asked = spec.hooks.pre_tool_use(
            &spec.hook_subject,
            &spec.tool_context.sandbox,
            name,
            &item.id,
            arguments,
        );
        *hooked = tokio::select! {
            verdict = asked => verdict,
            () = spec.cancel.cancelled() => {
                return Err(ToolResult::interrupted("Not run: interrupted while a hook was asked."));
            }
        };
    }
    let arguments = hooked.arguments.as_ref().unwrap_or(arguments);
    if let Some(refusal) = tools::background::tool::refusal(name, arguments) {
        return Err(ToolResult::denied(refusal));
    }
    if hooked.decision() == Some(HookDecision::Deny) {
        return Err(ToolResult::denied(format!(
            "Not run: a hook denies it ({}).",
            hooked.said()
        )));
    }
    let verdict = match (check(spec, name, arguments).await, hooked.decision()) {
        // A hook that asks makes a user answer, saying why (a configured deny still refuses).
        (verdict @ (Verdict::Allow | Verdict::Ask { .. }), Some(HookDecision::Ask)) => {
            Verdict::Ask {
                reason: crate::permissions::Reason::plain(format!(
                    "a {} asks first",
                    hooked.said()
                )),
                suggested_rules: match verdict {
                    Verdict::Ask {
                        suggested_rules, ..
                    } => suggested_rules,
                    _ => Vec::new(),
                },
            }
        }
        // A hook that allows answers what the permissions would ask a user; never a way out
        // of the sandbox, which always asks.
        (Verdict::Ask { .. }, Some(HookDecision::Allow)) if escalation(arguments).is_none() => {
            Verdict::Allow
        }
        (verdict, _) => verdict,
    };
    let (reason, suggested_rules) = match verdict {
        Verdict::Allow => return Ok(false),
        Verdict::Deny { reason } => {
            crate::telemetry::metrics::sandbox_refusal("permissions");
            return Err(ToolResult::denied(format!(
                "Not run: the agent's permissions deny it: {reason}."
            )));
        }
        Verdict::Ask {
            reason,
            suggested_rules,
        } => (reason, suggested_rules),
    };
    let escalate = escalation(arguments).map(str::to_owned);
    let escalated = escalate.is_some();
    let request = ApprovalRequest {
        item_id: item.id.clone(),
        tool: name.to_owned(),
        arguments: arguments.clone(),
        reason,
        suggested_rules,
        escalate,
        timeout: spec.gate.permissions.approval_timeout,
        question: None,
    };
    let span = spans::approval(name);
    let outcome = tokio::select! {
        outcome = tracing::Instrument::instrument(link.ask_approval(request), span.clone()) => outcome,
        () = spec.cancel.cancelled() => ApprovalOutcome::Cancelled,
    };
    span.record("openvaala.approval.outcome", outcome.name());
    match outcome {
        ApprovalOutcome::Allowed | ApprovalOutcome::Answered { .. } => Ok(escalated),
        ApprovalOutcome::Denied { message } => Err(ToolResult::denied(match message {
            Some(message) if !message.trim().is_empty() => {
                format!("Not run: the user denied this call: {message}")
            }
            _ => "Not run: the user denied this call.".to_owned(),
        })),
        ApprovalOutcome::Expired { after } => Err(ToolResult::denied(format!(
            "Not run: nobody answered its approval within {} s, so it was denied.",
            after.as_secs()
        ))),
        ApprovalOutcome::Cancelled => Err(ToolResult::interrupted(
            "Not run: interrupted while waiting for approval.",
        )),
    }
}

/// What running one call gave: its result, what it changed in the working directory, the
/// plan it set (`update_plan`), stored right after it, the hooks that ran for it, and the
/// arguments it ran with when a hook changed them.
struct Ran {
    result: ToolResult,
    changes: Option<FileChanges>,
    plan: Option<ItemKind>,
    hooks: Vec<HookRun>,
    arguments: Option<Value>,
}

impl Ran {
    fn result(result: ToolResult) -> Ran {
        Ran {
            result,
            changes: None,
            plan: None,
            hooks: Vec::new(),
            arguments: None,
        }
    }

    fn hooked(self, verdict: crate::hooks::Verdict) -> Ran {
        Ran {
            hooks: verdict.runs,
            arguments: verdict.arguments,
            ..self
        }
    }
}

/// Runs one stored tool call, streaming its output to clients.
/// Runs one tool call in its `execute_tool` span, counted in the metrics by its outcome.
async fn run_tool(spec: &TurnSpec, item: &Item, arguments: &Value, link: &ActorLink) -> Ran {
    use tracing::Instrument;
    let name = tool_name(item);
    let span = spans::execute_tool(&spec.gate.conversation_id, name, &item.id);
    spans::record_content(&span, "gen_ai.tool.call.arguments", || {
        arguments.to_string()
    });
    let started = std::time::Instant::now();
    let ran = gated_tool(spec, item, arguments, link)
        .instrument(span.clone())
        .await;
    let outcome = match ran.result.status {
        ToolStatus::Completed => "completed",
        ToolStatus::Failed => "failed",
        ToolStatus::Interrupted => "interrupted",
        ToolStatus::Denied => "denied",
    };
    span.record("openvaala.tool.status", outcome);
    if ran.result.status == ToolStatus::Failed {
        spans::failed(&span, "the tool call failed");
    }
    spans::record_content(&span, "gen_ai.tool.call.result", || {
        ran.result.output.clone()
    });
    crate::telemetry::metrics::tool_call(name, outcome, started.elapsed());
    ran
}

/// A tool call through its checks (offered, a skill's narrowing, hooks, permissions and
/// approvals), run if they let it, its `post_tool_use` hooks told.
async fn gated_tool(spec: &TurnSpec, item: &Item, arguments: &Value, link: &ActorLink) -> Ran {
    let name = tool_name(item);
    // A model may name any tool; only those it was offered run. (An MCP tool's server is
    // checked by the MCP layer, which also explains a server that failed to start.)
    if !spec.tools.iter().any(|tool| tool.name == name)
        && !name.starts_with(crate::mcp::names::PREFIX)
    {
        return Ran::result(ToolResult::failed(format!(
            "unknown tool `{name}`: this agent has no such tool (its tools: {})",
            spec.tools
                .iter()
                .map(|tool| format!("`{}`", tool.name))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    // A skill in use that narrows the tools refuses the others, before anyone is asked.
    if let Some(refusal) = spec.skills.refusal(name) {
        return Ran::result(ToolResult::denied(refusal));
    }
    let mut hooked = crate::hooks::Verdict::default();
    let escalated = match gate(spec, item, arguments, link, &mut hooked).await {
        Ok(escalated) => escalated,
        Err(result) => return Ran::result(result).hooked(hooked),
    };
    // What runs: the arguments a hook changed, if one did.
    let changed = hooked.arguments.take();
    let arguments = changed.as_ref().unwrap_or(arguments);
    let ran = run_allowed(spec, item, arguments, escalated, link).await;
    let mut ran = ran.hooked(crate::hooks::Verdict {
        arguments: changed.clone(),
        ..hooked
    });
    if let Some(status) = match ran.result.status {
        ToolStatus::Completed => Some("completed"),
        ToolStatus::Failed => Some("failed"),
        ToolStatus::Interrupted | ToolStatus::Denied => None,
    } && spec.hooks.any(crate::config::HookEvent::PostToolUse)
    {
        let call = crate::hooks::Ran {
            tool: name,
            call_id: &item.id,
            arguments,
            status,
            output: &ran.result.output,
            files_changed: ran.changes.as_ref().map(|changes| {
                serde_json::json!({
                    "added": changes.added,
                    "modified": changes.modified,
                    "deleted": changes.deleted,
                })
            }),
        };
        let told = spec
            .hooks
            .post_tool_use(&spec.hook_subject, &spec.tool_context.sandbox, call);
        // An interrupt does not wait for a hook: the result stands without its notes.
        let runs = tokio::select! {
            runs = told => runs,
            () = spec.cancel.cancelled() => Vec::new(),
        };
        for note in crate::hooks::notes(&runs) {
            ran.result.output.push_str(&format!("\n\n{note}"));
        }
        ran.hooks.extend(runs);
    }
    ran
}

/// Runs a call its gate let through, with the arguments it runs with.
async fn run_allowed(
    spec: &TurnSpec,
    item: &Item,
    arguments: &Value,
    escalated: bool,
    link: &ActorLink,
) -> Ran {
    let name = tool_name(item);
    if name == skills::NAME {
        return Ran::result(
            spec.skills
                .load(arguments, spec.tool_context.max_output_bytes),
        );
    }
    // The plan is the turn's own: no process, no working directory, nothing to redact that the
    // model did not write itself.
    if name == plan::NAME {
        if spec.cancel.is_cancelled() {
            return Ran::result(ToolResult::interrupted(format!(
                "interrupted before `{name}` started"
            )));
        }
        let (result, plan) = plan::run(arguments);
        return Ran {
            plan,
            ..Ran::result(result)
        };
    }
    if let Some(files) = &spec.files {
        files
            .before(changes_as(name, arguments))
            .instrument(spans::snapshot("before"))
            .await;
    }
    // A command's output can print a secret: it goes out redacted, piece by piece.
    let mut redactor = StreamRedactor::default();
    let send = |delta: String| {
        if !delta.is_empty() {
            link.send(TurnMsg::Delta {
                item_id: item.id.clone(),
                field: DeltaField::Output,
                delta,
            })
        }
    };
    let mut result = if collab::is_collaboration_tool(name) {
        collab::run(name, arguments, link, &spec.cancel).await
    } else {
        let (live, mut chunks) = mpsc::unbounded_channel::<String>();
        let escalated_context;
        let context = if escalated {
            // This one call runs outside the sandbox, as the user allowed.
            escalated_context = ToolContext {
                sandbox: crate::tools::SandboxPolicy {
                    escalated: true,
                    ..spec.tool_context.sandbox.clone()
                },
                ..spec.tool_context.clone()
            };
            &escalated_context
        } else {
            &spec.tool_context
        };
        // A background process is owned by the call that started it.
        let background_context;
        let context = if name == "shell" && arguments.get("background") == Some(&Value::Bool(true))
        {
            let mut with_call = context.clone();
            if let Some(scope) = &mut with_call.background {
                scope.call_id.clone_from(&item.id);
            }
            background_context = with_call;
            &background_context
        } else {
            context
        };
        // What an MCP server asks during its call is answered for this call.
        let mcp_context;
        let context = match &context.mcp {
            Some(access) if name.starts_with(crate::mcp::names::PREFIX) => {
                let mut access = access.clone();
                access.peer = Some(Arc::new(mcp_peer::TurnPeer {
                    link: link.clone(),
                    item_id: item.id.clone(),
                    timeout: spec.gate.permissions.approval_timeout,
                    sampling: access.sampling,
                    model: mcp_peer::SamplingModel::of(&spec.model),
                    cancel: spec.cancel.clone(),
                }));
                mcp_context = ToolContext {
                    mcp: Some(access),
                    ..context.clone()
                };
                &mcp_context
            }
            _ => context,
        };
        let run = tools::run_tool(name, arguments, context, &live, &spec.cancel);
        tokio::pin!(run);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                Some(mut chunk) = chunks.recv() => {
                    // Output that piled up meanwhile goes out as one delta.
                    while chunk.len() < MERGED_DELTA_MAX {
                        match chunks.try_recv() {
                            Ok(more) => chunk.push_str(&more),
                            Err(_) => break,
                        }
                    }
                    send(redactor.push(&chunk))
                }
                // A command that paused (waiting for input, a prompt without a newline) shows
                // what it printed: the few bytes held back for a secret go out after a moment.
                () = tokio::time::sleep(HELD_OUTPUT_WAIT), if redactor.holds_back() => {
                    send(redactor.flush())
                }
            }
        };
        while let Ok(chunk) = chunks.try_recv() {
            send(redactor.push(&chunk));
        }
        result
    };
    forward_rest(&mut redactor, item, DeltaField::Output, link);
    if let std::borrow::Cow::Owned(clean) = redact::redact(&result.output) {
        result.output = clean;
    }
    let changes = match &spec.files {
        Some(files) => {
            files
                .after(changes_as(name, arguments))
                .instrument(spans::snapshot("after"))
                .await
        }
        None => None,
    };
    Ran {
        changes,
        ..Ran::result(result)
    }
}

/// Stores a tool call's result (its output, exit code and status, the hooks that ran for it
/// and the arguments it ran with), with the plan it set and a notice for each hook that
/// failed after it in the same append; an interrupted tool stops the turn.
async fn finish_tool_call(
    mut item: Item,
    Ran {
        result,
        changes,
        plan,
        hooks: runs,
        arguments: ran_with,
    }: Ran,
    link: &ActorLink,
) -> Result<Item, TurnStop> {
    let notices: Vec<String> = crate::hooks::failure_notices(&runs).collect();
    if let ItemKind::ToolCall {
        arguments,
        output,
        exit_code,
        files,
        images,
        denied,
        hooks,
        ..
    } = &mut item.kind
    {
        if let Some(mut ran_with) = ran_with {
            // What is stored is what ran, redacted like everything stored.
            redact::redact_json(&mut ran_with);
            *arguments = ran_with;
        }
        *output = result.output;
        *exit_code = result.exit_code;
        *files = changes.map(Box::new);
        *images = result.images;
        *denied = result.status == ToolStatus::Denied;
        *hooks = runs;
    }
    item.status = match result.status {
        ToolStatus::Completed => ItemStatus::Completed,
        ToolStatus::Failed | ToolStatus::Denied => ItemStatus::Failed,
        ToolStatus::Interrupted => ItemStatus::Interrupted,
    };
    let mut stored = vec![item.clone()];
    stored.extend(plan.map(|plan| plan::item(&item, plan)));
    stored.extend(notices.into_iter().map(|text| notices::after(&item, text)));
    if stored.len() == 1 {
        link.store(item.clone()).await?;
    } else {
        link.store_all(stored).await?;
    }
    if result.status == ToolStatus::Interrupted {
        return Err(TurnStop::Interrupted);
    }
    Ok(item)
}

/// The tool a call counts as for checkpoints: an edit as `write_file`, the text editor's
/// `view` as `read_file` (which changes nothing, so no snapshot is taken for it).
fn changes_as<'a>(name: &'a str, arguments: &Value) -> &'a str {
    crate::permissions::policy::setting_for_call(name, arguments)
}

fn tool_name(item: &Item) -> &str {
    match &item.kind {
        ItemKind::ToolCall { name, .. } => name,
        _ => "",
    }
}

fn tool_arguments(item: &Item) -> &Value {
    match &item.kind {
        ItemKind::ToolCall { arguments, .. } => arguments,
        _ => &Value::Null,
    }
}
