//! The service's approvals as `session/request_permission` (an MCP server's question as
//! `elicitation/create` where the editor fills in forms): the editor's answer goes to
//! `POST /api/approvals/{id}`; an approval settled elsewhere first (the browser, `chat`, an
//! interrupt) withdraws the editor's question (`$/cancel_request`).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationAction, ElicitationFormMode, ElicitationSchema,
    ElicitationSessionScope, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCall, ToolCallContent,
    ToolCallId, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use tokio::sync::oneshot;

use super::updates;
use crate::api::approvals::{Approval, ApprovalAnswer, ApprovalDecision, ApprovalQuestion};
use crate::client::api::Api;
use crate::client::approval_prompt;

/// The id of the option that stands for a decision: its name on the wire.
fn option_id(decision: ApprovalDecision) -> String {
    crate::client::wire_text(&decision)
}

/// The decision an option the editor selected stands for.
fn decision(option_id: &str) -> Option<ApprovalDecision> {
    [
        ApprovalDecision::AllowOnce,
        ApprovalDecision::AllowConversation,
        ApprovalDecision::AllowAlways,
        ApprovalDecision::Deny,
    ]
    .into_iter()
    .find(|decision| option_id == self::option_id(*decision))
}

/// The answers the editor offers, each named by the service's decision it stands for. An
/// escalation (running outside the sandbox) can only be allowed once.
pub fn options(approval: &Approval) -> Vec<PermissionOption> {
    // An editor that fills in no forms cannot answer a question: it may decline it, and the
    // question's title says where to answer it.
    if approval.question.is_some() {
        return vec![PermissionOption::new(
            option_id(ApprovalDecision::Deny),
            "Decline",
            PermissionOptionKind::RejectOnce,
        )];
    }
    let mut options = vec![PermissionOption::new(
        option_id(ApprovalDecision::AllowOnce),
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    let rules = approval_prompt::suggested_rules(approval);
    if !rules.is_empty() && approval.escalate.is_none() {
        // Each part's exact rule, written out as a terminal would not interpret it.
        let rule: Vec<String> = rules
            .iter()
            .map(|(rule, _)| format!("`{}`", crate::text::visible(rule)))
            .collect();
        let rule = rule.join(", ");
        options.push(PermissionOption::new(
            option_id(ApprovalDecision::AllowConversation),
            format!("Always allow {rule} in this conversation"),
            PermissionOptionKind::AllowAlways,
        ));
        options.push(PermissionOption::new(
            option_id(ApprovalDecision::AllowAlways),
            format!("Always allow {rule} for this agent in this directory"),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        option_id(ApprovalDecision::Deny),
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The call the question is about: the tool call the editor already shows, with what it
/// would do (a tool's own arguments, or the command or path with the working directory).
fn tool_call(approval: &Approval) -> ToolCallUpdate {
    let subject = &approval.subject;
    let arguments = match &subject.arguments {
        Some(arguments) => arguments.clone(),
        None => serde_json::to_value(subject).unwrap_or_default(),
    };
    let mut title = if let Some(question) = &approval.question {
        format!(
            "The MCP server `{}` asks: {} (answer it in the web UI or `openvaala chat`: this \
             editor fills in no forms)",
            question.server, question.message
        )
    } else if approval.is_spending_limit() {
        approval.reason.clone()
    } else {
        updates::title(&approval.tool, &arguments)
    };
    if let Some(why) = &approval.escalate {
        title = format!("{title} (outside the sandbox: {why})");
    }
    ToolCallUpdate::new(
        approval.item_id.clone(),
        ToolCallUpdateFields::new()
            .title(title)
            .status(ToolCallStatus::Pending)
            .raw_input(arguments),
    )
}

/// A spending limit's notice as a call of its own, waiting, so the editor can show the
/// question about it.
fn spending_limit(approval: &Approval) -> SessionUpdate {
    SessionUpdate::ToolCall(
        ToolCall::new(approval.item_id.clone(), "Spending limit reached")
            .kind(ToolKind::Other)
            .status(ToolCallStatus::Pending)
            .content(vec![ToolCallContent::from(updates::text_block(
                approval.reason.clone(),
            ))]),
    )
}

/// Where the editor is asked, and whether it fills in forms.
pub struct Asking {
    pub api: Api,
    pub cx: ConnectionTo<Client>,
    pub acp_session: String,
    /// The editor said it fills in forms (`elicitation.form`).
    pub forms: bool,
}

impl Asking {
    /// Asks the editor, then answers the service; gives up when `withdrawn` fires first.
    pub async fn ask(self, approval: Approval, withdrawn: oneshot::Receiver<()>) {
        let answer = match &approval.question {
            Some(question) if self.forms => self.fill_in(&approval, question, withdrawn).await,
            _ => self.choose(&approval, withdrawn).await,
        };
        let Some(answer) = answer else {
            return;
        };
        let id = &approval.id;
        // `already_decided`: another client answered first, which is fine.
        if let Err(error) = self.api.answer_approval(id, &answer).await {
            tracing::warn!("could not answer approval {id}: {error}");
        }
    }

    /// An MCP server's question as the protocol's form (`elicitation/create`) for the call it
    /// came with: submitted, its values go to the service; declined or cancelled, a decline.
    async fn fill_in(
        &self,
        approval: &Approval,
        question: &ApprovalQuestion,
        withdrawn: oneshot::Receiver<()>,
    ) -> Option<ApprovalAnswer> {
        let schema: ElicitationSchema = match serde_json::from_value(question.schema.clone()) {
            Ok(schema) => schema,
            Err(error) => {
                // A form the protocol's types cannot carry: asked the other way.
                tracing::info!("an MCP server's form is not one ACP carries ({error})");
                return self.choose(approval, withdrawn).await;
            }
        };
        let scope = ElicitationSessionScope::new(self.acp_session.clone())
            .tool_call_id(ToolCallId::new(approval.item_id.clone()));
        let request = CreateElicitationRequest::new(
            ElicitationFormMode::new(scope, schema),
            format!(
                "The MCP server `{}` asks: {}",
                question.server, question.message
            ),
        );
        let response = tokio::select! {
            response = self.cx.send_request(request).block_task() => response.ok()?,
            _ = withdrawn => return None,
        };
        Some(match response.action {
            ElicitationAction::Accept(accepted) => {
                let content = accepted
                    .content
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, value)| (name, serde_json::to_value(value).unwrap_or_default()))
                    .collect();
                ApprovalAnswer {
                    content: Some(content),
                    ..approval_prompt::answer(ApprovalDecision::AllowOnce)
                }
            }
            _ => approval_prompt::answer(ApprovalDecision::Deny),
        })
    }

    /// The permission question (`session/request_permission`) with the approval's answers.
    async fn choose(
        &self,
        approval: &Approval,
        withdrawn: oneshot::Receiver<()>,
    ) -> Option<ApprovalAnswer> {
        let cx = &self.cx;
        // A spending limit is no tool call the editor was shown: it is announced as one
        // first, since the protocol's question must name a call the editor knows.
        let limit = approval.is_spending_limit();
        if limit {
            let _ = cx.send_notification(SessionNotification::new(
                self.acp_session.clone(),
                spending_limit(approval),
            ));
        }
        let request = RequestPermissionRequest::new(
            self.acp_session.clone(),
            tool_call(approval),
            options(approval),
        );
        // Dropping the request before its answer (settled elsewhere) sends
        // `$/cancel_request`. No selection: withdrawn, the editor gone, or its prompt
        // cancelled (`session/cancel` follows, and the interrupt settles it).
        let chosen = tokio::select! {
            answer = cx.send_request(request).block_task() => match answer.map(|answer| answer.outcome) {
                Ok(RequestPermissionOutcome::Selected(selected)) => Some(selected.option_id.0),
                _ => None,
            },
            _ = withdrawn => None,
        };
        if limit {
            // However it was settled, the limit's card stops waiting; the turn says the rest.
            let status = match chosen.as_deref().and_then(decision) {
                Some(ApprovalDecision::Deny) => ToolCallStatus::Failed,
                _ => ToolCallStatus::Completed,
            };
            let _ = cx.send_notification(SessionNotification::new(
                self.acp_session.clone(),
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    approval.item_id.clone(),
                    ToolCallUpdateFields::new().status(status),
                )),
            ));
        }
        let chosen = chosen?;
        match decision(&chosen) {
            Some(decision) => Some(approval_prompt::answer(decision)),
            None => {
                tracing::warn!("the editor chose an option never offered: {chosen}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escalation_can_only_be_allowed_once_or_rejected() {
        let ids = |suggested_rule: Option<&str>, escalate: Option<&str>| -> Vec<String> {
            let approval = Approval {
                suggested_rule: suggested_rule.map(str::to_owned),
                suggested_rules: Vec::new(),
                escalate: escalate.map(str::to_owned),
                ..Approval::example()
            };
            options(&approval)
                .into_iter()
                .map(|option| option.option_id.0.to_string())
                .collect()
        };
        assert_eq!(
            ids(Some("git push*"), None),
            ["allow_once", "allow_conversation", "allow_always", "deny"]
        );
        assert_eq!(ids(None, Some("needs the network")), ["allow_once", "deny"]);
        assert_eq!(
            decision("allow_always"),
            Some(ApprovalDecision::AllowAlways)
        );
        assert_eq!(decision("maybe"), None);
    }
}
