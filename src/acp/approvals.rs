//! The service's approvals as `session/request_permission`: the editor's answer goes to
//! `POST /api/approvals/{id}`; an approval settled elsewhere first (the browser, `chat`, an
//! interrupt) withdraws the editor's question (`$/cancel_request`).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::updates;
use crate::client::api::Api;

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// The answers the editor offers, each named by the service's decision it stands for. An
/// escalation (running outside the sandbox) can only be allowed once.
pub fn options(approval: &Value) -> Vec<PermissionOption> {
    let mut options = vec![PermissionOption::new(
        "allow_once",
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    let rules = crate::client::approval_prompt::suggested_rules(approval);
    if !rules.is_empty() && approval["escalate"].is_null() {
        // Each part's exact rule, written out as a terminal would not interpret it.
        let rule: Vec<String> = rules
            .iter()
            .map(|(rule, _)| format!("`{}`", crate::text::visible(rule)))
            .collect();
        let rule = rule.join(", ");
        options.push(PermissionOption::new(
            "allow_conversation",
            format!("Always allow {rule} in this conversation"),
            PermissionOptionKind::AllowAlways,
        ));
        options.push(PermissionOption::new(
            "allow_always",
            format!("Always allow {rule} for this agent in this directory"),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        "deny",
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The call the question is about: the tool call the editor already shows, with what it
/// would do.
fn tool_call(approval: &Value) -> ToolCallUpdate {
    let subject = &approval["subject"];
    let arguments = match subject["arguments"].is_null() {
        true => subject.clone(),
        false => subject["arguments"].clone(),
    };
    let mut title = updates::title(text(&approval["tool"]), &arguments);
    if let Some(why) = approval["escalate"].as_str() {
        title = format!("{title} (outside the sandbox: {why})");
    }
    ToolCallUpdate::new(
        text(&approval["item_id"]).to_owned(),
        ToolCallUpdateFields::new()
            .title(title)
            .status(ToolCallStatus::Pending)
            .raw_input(arguments),
    )
}

/// Asks the editor, then answers the service; gives up when `withdrawn` fires first.
pub async fn ask(
    api: Api,
    cx: ConnectionTo<Client>,
    acp_session: String,
    approval: Value,
    withdrawn: oneshot::Receiver<()>,
) {
    let request =
        RequestPermissionRequest::new(acp_session, tool_call(&approval), options(&approval));
    // Dropping the request before its answer (settled elsewhere) sends `$/cancel_request`.
    let answer = tokio::select! {
        answer = cx.send_request(request).block_task() => answer,
        _ = withdrawn => return,
    };
    let Ok(answer) = answer else {
        return;
    };
    let RequestPermissionOutcome::Selected(selected) = answer.outcome else {
        // The editor cancelled its prompt (`session/cancel` follows): the interrupt settles it.
        return;
    };
    let decision = selected.option_id.0.to_string();
    let id = text(&approval["id"]);
    // 409 `already_decided`: another client answered first, which is fine.
    if let Err(error) = api
        .post_answer(
            &format!("/api/approvals/{id}"),
            &json!({ "decision": decision }),
        )
        .await
    {
        tracing::warn!("could not answer approval {id}: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escalation_can_only_be_allowed_once_or_rejected() {
        let ids = |approval: Value| -> Vec<String> {
            options(&approval)
                .into_iter()
                .map(|option| option.option_id.0.to_string())
                .collect()
        };
        assert_eq!(
            ids(json!({"suggested_rule": "git push*", "escalate": null})),
            ["allow_once", "allow_conversation", "allow_always", "deny"]
        );
        assert_eq!(
            ids(json!({"suggested_rule": null, "escalate": "needs the network"})),
            ["allow_once", "deny"]
        );
    }
}
