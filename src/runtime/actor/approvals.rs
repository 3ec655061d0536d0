//! A conversation's approvals, settled in the actor so that the first answer wins by command
//! order: a turn's tool call asks (`TurnMsg::AskApproval`), every client is told
//! (`approval.requested` on the conversation's stream and the list's), and the first of an
//! answer, the expiry, or the end of the turn (interrupt, stop) settles it and tells everyone
//! (`approval.resolved`). Nothing is ever allowed by default; an approval lives in memory only,
//! so a crash leaves its call unrun and the restart closes the turn as `interrupted`.

use tokio::sync::oneshot;

use super::ConversationActor;
use super::waiting::WaitingApproval;
use crate::api::approvals::{
    Approval, ApprovalAnswer, ApprovalDecision, ApprovalQuestion, ApprovalResolution,
    ApprovalStatus, ApprovalSubject, BroaderRule, RuleScope, SuggestedRule,
};
use crate::api::events::{ConversationEvent, ListEvent};
use crate::config::HookEvent;
use crate::domain::{ItemKind, ItemStatus, now};
use crate::permissions::Verdict;
use crate::permissions::policy::{
    also_allows, pattern_matches, refuse_shell_rule, rule_subjects, shell_command,
};
use crate::runtime::RuntimeError;
use crate::runtime::approvals::{ApprovalOutcome, ApprovalRequest};
use crate::runtime::link::{FromTurn, TurnMsg};

impl ConversationActor {
    /// A tool call of `session_id` asks for a user's answer.
    pub(super) fn ask_approval(
        &mut self,
        session_id: &str,
        request: ApprovalRequest,
        reply: oneshot::Sender<ApprovalOutcome>,
    ) {
        let Some(running) = self.run_mut(session_id).and_then(|r| r.running.as_mut()) else {
            let _ = reply.send(ApprovalOutcome::Cancelled);
            return;
        };
        let turn_id = running.turn_id.clone();
        if let Some(item) = running.items.iter_mut().find(|i| i.id == request.item_id)
            && matches!(item.kind, ItemKind::ToolCall { .. })
        {
            item.status = ItemStatus::WaitingApproval;
        }
        let cwd = self.state.conversation.cwd.clone();
        // The call runs as written; what every client is shown of it has no secret in it.
        let mut shown = request.arguments.clone();
        crate::redact::redact_json(&mut shown);
        let subject = match request.tool.as_str() {
            "shell" => ApprovalSubject {
                command: Some(shell_command(&shown).to_owned()),
                path: None,
                arguments: None,
                cwd,
            },
            "read_file" | "write_file" | "list_dir" | "grep" | "glob" => ApprovalSubject {
                command: None,
                path: shown
                    .get("path")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned),
                arguments: None,
                cwd,
            },
            _ => ApprovalSubject {
                command: None,
                path: None,
                arguments: Some(shown.clone()),
                cwd,
            },
        };
        let created_at = now();
        let approval = Approval {
            id: crate::api::approvals::new_approval_id(&self.id),
            conversation_id: self.id.clone(),
            session_id: session_id.to_owned(),
            turn_id,
            item_id: request.item_id,
            tool: request.tool,
            subject,
            escalate: request.escalate,
            suggested_rule: request
                .suggested_rules
                .first()
                .map(|choice| choice.rule.clone()),
            suggested_rules: request
                .suggested_rules
                .into_iter()
                .map(|choice| SuggestedRule {
                    rule: choice.rule,
                    broader: choice.broader.map(|rule| BroaderRule {
                        also_allows: also_allows(&rule),
                        rule,
                    }),
                })
                .collect(),
            reason: request.reason.text,
            setting: request.reason.setting,
            created_at,
            expires_at: request.timeout.map(|timeout| {
                created_at + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX)
            }),
            status: ApprovalStatus::Pending,
            resolution: None,
            question: request.question.map(|question| ApprovalQuestion {
                server: question.server,
                message: question.message,
                schema: question.schema,
                answer: None,
            }),
        };
        if let Some(timeout) = request.timeout {
            // The expiry comes back through the actor, so it races an answer in order.
            let turns = self.turn_sender.clone();
            let (session, approval_id) = (session_id.into(), approval.id.clone());
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                let _ = turns.send(FromTurn {
                    session_id: session,
                    msg: TurnMsg::ApprovalExpired { approval_id },
                });
            });
        }
        self.shared.approvals.requested(&approval);
        self.bus.publish(&ConversationEvent::ApprovalRequested {
            approval: approval.clone(),
        });
        self.shared.publish_list(&ListEvent::ApprovalRequested {
            approval: approval.clone(),
        });
        self.notify_hooks(
            HookEvent::ApprovalRequested,
            session_id,
            Some(&approval.turn_id),
            serde_json::json!({ "approval": approval }),
        );
        let agent = self
            .state
            .session(session_id)
            .map(|session| session.agent.clone())
            .unwrap_or_else(|| self.state.conversation.agent.clone());
        self.approvals.push(WaitingApproval {
            approval,
            arguments: request.arguments,
            agent,
            reply,
        });
    }

    /// A user's answer. Remembering answers keep their rule before the call runs, so a crash
    /// right after the answer loses nothing acknowledged.
    pub(super) fn decide(
        &mut self,
        approval_id: &str,
        answer: ApprovalAnswer,
        by: String,
    ) -> Result<Approval, RuntimeError> {
        let Some(index) = self
            .approvals
            .iter()
            .position(|waiting| waiting.approval.id == approval_id)
        else {
            return Err(match self.shared.approvals.get(approval_id) {
                Some(settled) if settled.resolution.is_some() => {
                    RuntimeError::AlreadyDecided(Box::new(settled))
                }
                _ => RuntimeError::NotFound(format!("approval {approval_id}")),
            });
        };
        let waiting = &self.approvals[index];
        let answered = answered_content(&waiting.approval, &answer)?;
        let rules = if answer.decision.remembers() {
            self.remember(waiting, &answer, &by)?
        } else {
            Vec::new()
        };
        let mut waiting = self.approvals.remove(index);
        let (status, outcome) = match (answer.decision, answered) {
            (ApprovalDecision::Deny, _) => (
                ApprovalStatus::Denied,
                ApprovalOutcome::Denied {
                    message: answer.message.clone(),
                },
            ),
            (_, Some(content)) => {
                if let Some(question) = &mut waiting.approval.question {
                    question.answer = Some(content.clone());
                }
                (
                    ApprovalStatus::Allowed,
                    ApprovalOutcome::Answered { content },
                )
            }
            (_, None) => (ApprovalStatus::Allowed, ApprovalOutcome::Allowed),
        };
        let resolution = ApprovalResolution {
            decision: Some(answer.decision),
            rule: rules.first().cloned(),
            rules,
            message: answer.message,
            decided_at: now(),
            decided_by: by,
        };
        let settled = self.settle(waiting, status, resolution.clone(), outcome);
        if resolution.rule.is_some() {
            self.settle_answered_by_rules(&resolution);
        }
        Ok(settled)
    }

    /// After an answer kept a rule, the other approvals waiting here that the rules now answer
    /// (a sub-agent asking the same, a second part of one step) are settled too: nobody is
    /// asked twice for what they just allowed.
    pub(super) fn settle_answered_by_rules(&mut self, resolution: &ApprovalResolution) {
        let agents = self.agents.clone();
        let answered: Vec<String> = self
            .approvals
            .iter()
            .filter(|waiting| waiting.approval.escalate.is_none())
            .filter(|waiting| !waiting.approval.is_spending_limit())
            .filter(|waiting| !waiting.approval.is_from_mcp_server())
            .filter(|waiting| {
                let Some(agent) = agents.get(&waiting.agent) else {
                    return false;
                };
                let gate = crate::runtime::approvals::CallGate {
                    permissions: agent.permissions.clone(),
                    rules: self.shared.rules.clone(),
                    conversation_id: self.id.clone(),
                    agent: waiting.agent.clone(),
                    cwd: waiting.approval.subject.cwd.clone(),
                };
                gate.check(&waiting.approval.tool, &waiting.arguments) == Verdict::Allow
            })
            .map(|waiting| waiting.approval.id.clone())
            .collect();
        for id in answered {
            if let Some(index) = self.approvals.iter().position(|w| w.approval.id == id) {
                let waiting = self.approvals.remove(index);
                let resolution = ApprovalResolution {
                    decided_at: now(),
                    ..resolution.clone()
                };
                self.settle(
                    waiting,
                    ApprovalStatus::Allowed,
                    resolution,
                    ApprovalOutcome::Allowed,
                );
            }
        }
    }

    /// Checks and keeps the rules an answer remembers: those it gives, else the suggested ones
    /// (its `rule` in place of the first). Each must match a part of the call; for a shell
    /// command none may allow every command, nor every use of a program that runs others.
    /// Nothing is kept unless every one passes.
    fn remember(
        &self,
        waiting: &WaitingApproval,
        answer: &ApprovalAnswer,
        by: &str,
    ) -> Result<Vec<crate::api::approvals::Rule>, RuntimeError> {
        let approval = &waiting.approval;
        if approval.is_spending_limit() {
            return Err(RuntimeError::Invalid(
                "a spending limit's approval is allowed once (for the rest of its turn) or \
                 denied: raise the limit itself to go on for longer"
                    .to_owned(),
            ));
        }
        if approval.is_from_mcp_server() {
            return Err(RuntimeError::Invalid(
                "an MCP server's question or request for the model is answered once \
                 (allow_once) or declined (deny): it is never remembered"
                    .to_owned(),
            ));
        }
        if approval.escalate.is_some() {
            return Err(RuntimeError::Invalid(
                "an escalation is allowed once or denied: running outside the sandbox is never \
                 remembered"
                    .to_owned(),
            ));
        }
        let mut patterns: Vec<String> = match (&answer.rules, &answer.rule) {
            (Some(rules), _) => rules.clone(),
            (None, given) => {
                let mut suggested: Vec<String> = approval
                    .suggested_rules
                    .iter()
                    .map(|choice| choice.rule.clone())
                    .collect();
                if let Some(given) = given {
                    match suggested.first_mut() {
                        Some(first) => *first = given.clone(),
                        None => suggested.push(given.clone()),
                    }
                }
                suggested
            }
        };
        patterns.retain(|pattern| !pattern.trim().is_empty());
        patterns.dedup();
        if patterns.is_empty() {
            return Err(RuntimeError::Invalid(
                "give the `rule` to remember (this approval suggests none)".to_owned(),
            ));
        }
        // An edit's rule is a `write_file` rule, a search's a `read_file` one.
        let (setting, view) =
            crate::runtime::approvals::permission_view(&approval.tool, &waiting.arguments);
        let subjects = rule_subjects(setting, &view, std::path::Path::new(&approval.subject.cwd));
        for pattern in &patterns {
            if approval.tool == "shell"
                && let Some(why) = refuse_shell_rule(pattern)
            {
                return Err(RuntimeError::Invalid(why));
            }
            if !subjects.iter().any(|text| pattern_matches(pattern, text)) {
                return Err(RuntimeError::Invalid(format!(
                    "the rule \"{pattern}\" does not match this call ({}); a remembered rule \
                     must cover the call it answers",
                    subjects.join(", ")
                )));
            }
        }
        let scope = match answer.decision {
            ApprovalDecision::AllowAlways => RuleScope::Always {
                agent: waiting.agent.clone(),
                cwd: approval.subject.cwd.clone(),
            },
            _ => RuleScope::Conversation {
                conversation_id: self.id.clone(),
            },
        };
        let mut kept = Vec::new();
        for pattern in &patterns {
            kept.push(self.shared.rules.add(
                setting,
                pattern,
                scope.clone(),
                by,
                Some(&approval.id),
            )?);
        }
        Ok(kept)
    }

    /// The approval ran out of time: denied, unless it was settled first.
    pub(super) fn expire_approval(&mut self, approval_id: &str) {
        let Some(index) = self
            .approvals
            .iter()
            .position(|waiting| waiting.approval.id == approval_id)
        else {
            return;
        };
        let waiting = self.approvals.remove(index);
        let after = waiting
            .approval
            .expires_at
            .and_then(|at| (at - waiting.approval.created_at).to_std().ok())
            .unwrap_or_default();
        self.settle(
            waiting,
            ApprovalStatus::Expired,
            service_resolution(),
            ApprovalOutcome::Expired { after },
        );
    }

    /// A session's turn ends (interrupted, stopped, or failed): its approvals are cancelled
    /// and their calls never run.
    pub(super) fn cancel_approvals(&mut self, session_id: &str) {
        let (cancelled, kept) = std::mem::take(&mut self.approvals)
            .into_iter()
            .partition(|waiting| waiting.approval.session_id == session_id);
        self.approvals = kept;
        for waiting in cancelled {
            self.settle(
                waiting,
                ApprovalStatus::Cancelled,
                service_resolution(),
                ApprovalOutcome::Cancelled,
            );
        }
    }

    /// The pending approvals, oldest first.
    pub(super) fn approval_list(&self) -> Vec<Approval> {
        self.approvals
            .iter()
            .map(|waiting| waiting.approval.clone())
            .collect()
    }

    fn settle(
        &mut self,
        waiting: WaitingApproval,
        status: ApprovalStatus,
        resolution: ApprovalResolution,
        outcome: ApprovalOutcome,
    ) -> Approval {
        let mut approval = waiting.approval;
        let waited = (now() - approval.created_at).to_std().unwrap_or_default();
        crate::telemetry::metrics::approval_settled(status_name(status), waited);
        approval.status = status;
        approval.resolution = Some(resolution);
        if let Some(item) = self
            .run_mut(&approval.session_id)
            .and_then(|run| run.running.as_mut())
            .and_then(|running| running.items.iter_mut().find(|i| i.id == approval.item_id))
            && matches!(item.kind, ItemKind::ToolCall { .. })
        {
            item.status = ItemStatus::Running;
        }
        self.shared.approvals.settled(&approval);
        self.bus.publish(&ConversationEvent::ApprovalResolved {
            approval: approval.clone(),
        });
        self.shared.publish_list(&ListEvent::ApprovalResolved {
            approval: approval.clone(),
        });
        self.notify_hooks(
            HookEvent::ApprovalResolved,
            &approval.session_id,
            Some(&approval.turn_id),
            serde_json::json!({ "approval": approval }),
        );
        // The turn may be gone (interrupted meanwhile): then nothing runs anyway.
        let _ = waiting.reply.send(outcome);
        approval
    }
}

/// A question's answer, checked against what it asks: `content` goes only with a question
/// answered `allow_once` (a decline needs none), and must fit its fields.
fn answered_content(
    approval: &Approval,
    answer: &ApprovalAnswer,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, RuntimeError> {
    let Some(question) = &approval.question else {
        return match answer.content {
            Some(_) => Err(RuntimeError::Invalid(
                "`content` answers an MCP server's question; this approval asks none".to_owned(),
            )),
            None => Ok(None),
        };
    };
    if answer.decision != ApprovalDecision::AllowOnce {
        return Ok(None);
    }
    let content = answer.content.clone().unwrap_or_default();
    crate::mcp::check_answer(&question.schema, &content).map_err(|why| {
        RuntimeError::Invalid(format!("the answer does not fit the question: {why}"))
    })?;
    Ok(Some(content))
}

fn status_name(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "pending",
        ApprovalStatus::Allowed => "allowed",
        ApprovalStatus::Denied => "denied",
        ApprovalStatus::Cancelled => "cancelled",
        ApprovalStatus::Expired => "expired",
    }
}

fn service_resolution() -> ApprovalResolution {
    ApprovalResolution {
        decision: None,
        rule: None,
        rules: Vec::new(),
        message: None,
        decided_at: now(),
        decided_by: "service".to_owned(),
    }
}
