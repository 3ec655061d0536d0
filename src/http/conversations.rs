//! `/api/conversations/…`: conversations, their items, sessions, messages and interrupts.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::extract::{IdempotencyKey, Json, Query};
use super::{ApiError, AppState};
use crate::index::{ArchivedFilter, ListQuery};
use crate::runtime::{Answer, ConversationPatch, NewConversation, NewMessage};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    archived: Option<String>,
    q: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError> {
    let archived = match params.archived.as_deref() {
        None | Some("false") => ArchivedFilter::Active,
        Some("true") => ArchivedFilter::Archived,
        Some("all") => ArchivedFilter::All,
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "archived must be false, true or all, not `{other}`"
            )));
        }
    };
    let limit = params.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and 500, not {limit}"
        )));
    }
    let query = ListQuery {
        archived,
        search: params.q,
        limit,
        cursor: params.cursor,
    };
    let page = state.runtime.list(&query).await?;
    Ok(
        axum::Json(json!({ "conversations": page.conversations, "next_cursor": page.next_cursor }))
            .into_response(),
    )
}

pub async fn create(
    State(state): State<AppState>,
    IdempotencyKey(key): IdempotencyKey,
    Json(request): Json<NewConversation>,
) -> Result<Response, ApiError> {
    Ok(answer(
        state.runtime.create_conversation(request, key).await?,
    ))
}

pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.runtime.conversation(&id).await?).into_response())
}

pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(patch): Json<ConversationPatch>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.runtime.update(&id, patch).await?).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.runtime.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemsParams {
    session: Option<String>,
    after_seq: Option<u64>,
    limit: Option<usize>,
}

pub async fn items(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<ItemsParams>,
) -> Result<Response, ApiError> {
    let limit = params.limit.unwrap_or(200);
    if !(1..=2000).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and 2000, not {limit}"
        )));
    }
    let page = state
        .runtime
        .items(
            &id,
            params.session.as_deref(),
            params.after_seq.unwrap_or(0),
            limit,
        )
        .await?;
    Ok(axum::Json(page).into_response())
}

pub async fn sessions(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let sessions = state.runtime.sessions(&id).await?;
    Ok(axum::Json(json!({ "sessions": sessions })).into_response())
}

pub async fn send_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    IdempotencyKey(key): IdempotencyKey,
    Json(request): Json<NewMessage>,
) -> Result<Response, ApiError> {
    Ok(answer(state.runtime.send_message(&id, request, key).await?))
}

pub async fn pending(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let pending = state.runtime.pending(&id).await?;
    Ok(axum::Json(json!({ "pending": pending })).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterruptRequest {
    session_id: Option<String>,
}

pub async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: InterruptRequest = optional_json(&body)?;
    let interrupted = state.runtime.interrupt(&id, request.session_id).await?;
    Ok(axum::Json(json!({ "interrupted": interrupted })).into_response())
}

pub async fn interrupt_session(
    State(state): State<AppState>,
    Path((id, session_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let interrupted = state.runtime.interrupt(&id, Some(session_id)).await?;
    Ok(axum::Json(json!({ "interrupted": interrupted })).into_response())
}

pub async fn usage(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.runtime.conversation(&id).await?.usage).into_response())
}

/// An idempotent answer goes out exactly as it was first given.
fn answer(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    (status, axum::Json::<Value>(answer.body)).into_response()
}

/// A body that may be empty (`POST …/interrupt` with no body means the defaults).
fn optional_json<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::Invalid(format!("invalid JSON body: {error}")))
}
