//! `/api/approvals` and `/api/rules`: tool calls waiting for a user's answer across every
//! conversation, the answers, and the rules that answers remembered.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::HeaderMap;

use super::error::ApiError;
use super::extract::{Json, Query};
use super::state::AppState;
use crate::api::approvals::{
    AlreadyDecided, Approval, ApprovalAnswer, ApprovalList, ApprovalQuery, Rule, RuleList,
};
use crate::api::errors::ErrorBody;
use crate::auth::Caller;
use crate::cluster::forward::FORWARDED;

/// Who answers, as its token says (never a header the client sets): the kind of client for
/// the local credential (`web`, `cli`, `acp`, `api`), `token:NAME` or `device:NAME` for a
/// named token; kept with the answer and its rules.
fn client_name(client: Option<Extension<Caller>>) -> String {
    client.map_or_else(|| "api".to_owned(), |Extension(caller)| caller.label)
}

#[utoipa::path(
    get,
    path = "/api/approvals",
    operation_id = "list_approvals",
    tag = "approvals",
    summary = "List approvals",
    description = "Tool calls waiting for a user's answer in every conversation (`status=pending`, the default), or with the recently settled ones too (`status=all`); oldest first.",
    params(ApprovalQuery),
    responses(
        (status = 200, description = "The approvals", body = ApprovalList),
        (status = 400, description = "`invalid_request`: an unknown `status` or parameter", body = ErrorBody),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ApprovalQuery>,
    headers: HeaderMap,
) -> axum::Json<ApprovalList> {
    let mut approvals = state.runtime.approvals(query.status);
    // In a cluster, every instance's: each holds the approvals of the turns it runs. Asked by
    // another instance, only this one's.
    if let Some(cluster) = state.runtime.cluster()
        && !headers.contains_key(FORWARDED)
    {
        let others = super::cluster::other_instances_approvals(cluster, &headers, query.status);
        approvals.extend(others.await);
        approvals.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        approvals.dedup_by(|a, b| a.id == b.id);
    }
    axum::Json(ApprovalList { approvals })
}

#[utoipa::path(
    post,
    path = "/api/approvals/{id}",
    operation_id = "answer_approval",
    tag = "approvals",
    summary = "Answer an approval",
    description = "The first answer wins and every client gets `approval.resolved`. `allow_conversation` and `allow_always` keep `rule` (default: the approval's `suggested_rule`) before the call runs; an escalation can only be allowed once or denied. On `deny`, `message` reaches the model.",
    params(("id" = String, Path, description = "Approval id")),
    request_body = ApprovalAnswer,
    responses(
        (status = 200, description = "Settled by this answer", body = Approval),
        (status = 400, description = "`invalid_request`: bad JSON, an unknown decision, a rule that does not match the call, or a remembered answer to an escalation (nothing changed)", body = ErrorBody),
        (status = 404, description = "`not_found`: no such approval", body = ErrorBody),
        (status = 409, description = "`already_decided`: answered, expired or cancelled before; the body has the outcome", body = AlreadyDecided),
    ),
)]
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    client: Option<Extension<Caller>>,
    Json(answer): Json<ApprovalAnswer>,
) -> Result<axum::Json<Approval>, ApiError> {
    let by = client_name(client);
    Ok(axum::Json(state.runtime.decide(&id, answer, by).await?))
}

#[utoipa::path(
    get,
    path = "/api/rules",
    operation_id = "list_rules",
    tag = "approvals",
    summary = "List remembered rules",
    description = "The rules answers remembered, with who kept each, when, and its scope (one conversation, or an agent in a working directory); oldest first.",
    responses((status = 200, description = "The rules", body = RuleList)),
)]
pub async fn rules(State(state): State<AppState>) -> Result<axum::Json<RuleList>, ApiError> {
    Ok(axum::Json(RuleList {
        rules: state.runtime.rules()?,
    }))
}

#[utoipa::path(
    delete,
    path = "/api/rules/{id}",
    operation_id = "delete_rule",
    tag = "approvals",
    summary = "Delete a remembered rule",
    description = "Calls it matched ask again from now on.",
    params(("id" = String, Path, description = "Rule id")),
    responses(
        (status = 200, description = "The deleted rule", body = Rule),
        (status = 404, description = "`not_found`: no such rule", body = ErrorBody),
    ),
)]
pub async fn delete_rule(
    State(state): State<AppState>,
    Path(id): Path<String>,
    client: Option<Extension<Caller>>,
) -> Result<axum::Json<Rule>, ApiError> {
    Ok(axum::Json(
        state.runtime.delete_rule(&id, &client_name(client))?,
    ))
}
