//! `/api/conversations/…`: conversations, their items, sessions, messages and interrupts.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::extract::{IdempotencyHeader, IdempotencyKey, Json, Query};
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::requests::{
    ArchivedFilter, ConversationPatch, EmptyRequest, ForkRequest, InterruptRequest, ItemsQuery,
    ListConversationsQuery, NewConversation, NewMessage, PendingPatch, RetryRequest, RewindRequest,
    TurnsQuery, UsageQuery,
};
use crate::api::responses::{
    CompactOutcome, ConversationCreated, ConversationList, ConversationView, ForkedConversation,
    Interrupted, ItemsPage, MessageAccepted, PendingList, RetryStarted, RetryingNow,
    RewoundConversation, SessionList, TurnsPage,
};
use crate::domain::{Conversation, Message, Usage};
use crate::index::{self, ListQuery};
use crate::runtime::Answer;

#[utoipa::path(
    get,
    path = "/api/conversations",
    operation_id = "list_conversations",
    tag = "conversations",
    summary = "List conversations",
    description = "Newest `updated_at` first; `q` searches titles and message text.",
    params(ListConversationsQuery),
    responses(
        (status = 200, description = "A page of conversations", body = ConversationList),
        (status = 400, description = "`invalid_request`: a bad `archived`, `limit` or `cursor`, a `q` with a NUL or more than 32 different words, or an unknown parameter", body = ErrorBody),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Query(params): Query<ListConversationsQuery>,
) -> Result<axum::Json<ConversationList>, ApiError> {
    let archived = match ArchivedFilter::parse(params.archived.as_deref()) {
        Ok(ArchivedFilter::Active) => index::ArchivedFilter::Active,
        Ok(ArchivedFilter::Archived) => index::ArchivedFilter::Archived,
        Ok(ArchivedFilter::All) => index::ArchivedFilter::All,
        Err(message) => return Err(ApiError::Invalid(message)),
    };
    let limit = params.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and 500, not {limit}"
        )));
    }
    let searching = params.q.as_deref().is_some_and(|q| !q.trim().is_empty());
    let query = ListQuery {
        archived,
        search: params.q,
        limit,
        // An empty cursor is the same as none (a client passing back `next_cursor` blindly).
        cursor: params.cursor.filter(|cursor| !cursor.is_empty()),
    };
    let page = state.runtime.list(&query).await?;
    Ok(axum::Json(ConversationList {
        conversations: page.conversations,
        next_cursor: page.next_cursor,
        snippets: searching.then_some(page.snippets),
    }))
}

#[utoipa::path(
    post,
    path = "/api/conversations",
    operation_id = "create_conversation",
    tag = "conversations",
    summary = "Start a conversation",
    description = "Stores the conversation with its first message and starts the first turn. Nothing is stored when it fails.",
    params(IdempotencyHeader),
    request_body = NewConversation,
    responses(
        (status = 201, description = "Stored; the first turn is running", body = ConversationCreated),
        (status = 400, description = "`invalid_request`: bad JSON, an unknown field, empty text, a bad image or a relative `cwd` (nothing stored)", body = ErrorBody),
        (status = 413, description = "`too_large`: the body is over 16 MiB", body = ErrorBody),
        (status = 422, description = "`cwd_missing`, `model_unavailable` or `agent_unavailable`; `command_unknown`: `cwd` has no command of that name; `message_blocked`: a `user_message` hook blocks the message (the message says which and why); `price_missing`: a cost limit on a model without a price; `cwd_refused`: `cwd` is `/` or holds or lies in the service's own state; `idempotency_key_reused`: the `Idempotency-Key` came before with another body; `invalid_image`: an image is not one of its media type, or has more pixels or bytes than the models take (nothing stored)", body = ErrorBody),
        (status = 503, description = "`unavailable` (with `Retry-After`): too many conversations are busy, the service is out of files, the outcome is unknown (retry with the same `Idempotency-Key`), or the service is stopping", body = ErrorBody),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    IdempotencyKey(key): IdempotencyKey,
    Json(request): Json<NewConversation>,
) -> Result<Response, ApiError> {
    Ok(answer(
        state.runtime.create_conversation(request, key).await?,
    ))
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}",
    operation_id = "get_conversation",
    tag = "conversations",
    summary = "Open a conversation",
    params(("id" = String, Path, description = "Conversation id")),
    responses(
        (status = 200, description = "The conversation with its sessions, waiting messages and usage", body = ConversationView),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 422, description = "`cwd_missing`, `agent_unavailable` or `source_missing`: the conversation cannot open; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<ConversationView>, ApiError> {
    Ok(axum::Json(state.runtime.conversation(&id).await?))
}

#[utoipa::path(
    patch,
    path = "/api/conversations/{id}",
    operation_id = "update_conversation",
    tag = "conversations",
    summary = "Rename, archive, switch model or agent, or repoint cwd",
    description = "`title` sets `title_custom`; `model` switches the model; `agent` switches the root agent from the next turn (refused while it works); `cwd` repoints a moved conversation.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body = ConversationPatch,
    responses(
        (status = 200, description = "The changed conversation", body = Conversation),
        (status = 400, description = "`invalid_request`: bad JSON, an unknown field, an empty or too long title, a relative `cwd`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 409, description = "`turn_running`: an agent switch while the root agent works", body = ErrorBody),
        (status = 422, description = "`cwd_missing`, `model_unavailable` or `agent_unavailable`; `price_missing`: a cost limit on a model without a price; `cwd_refused`: `cwd` is `/` or holds or lies in the service's own state (nothing changed); `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
    ),
)]
pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(patch): Json<ConversationPatch>,
) -> Result<axum::Json<Conversation>, ApiError> {
    Ok(axum::Json(state.runtime.update(&id, patch).await?))
}

#[utoipa::path(
    delete,
    path = "/api/conversations/{id}",
    operation_id = "delete_conversation",
    tag = "conversations",
    summary = "Delete a conversation",
    description = "Removes the conversation and its directory completely.",
    params(("id" = String, Path, description = "Conversation id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 409, description = "`turn_running`: wait for the turn to end or interrupt it", body = ErrorBody),
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.runtime.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/items",
    operation_id = "list_items",
    tag = "conversations",
    summary = "Read a session's history",
    description = "The full stored history of one session, compacted items included, in `seq` order.",
    params(("id" = String, Path, description = "Conversation id"), ItemsQuery),
    responses(
        (status = 200, description = "A page of items", body = ItemsPage),
        (status = 400, description = "`invalid_request`: a bad `limit` or `after_seq`, or an unknown parameter", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
    ),
)]
pub async fn items(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<ItemsQuery>,
) -> Result<axum::Json<ItemsPage>, ApiError> {
    let limit = page_limit(params.limit)?;
    let after_seq = u64::try_from(params.after_seq.unwrap_or(0))
        .map_err(|_| ApiError::Invalid("after_seq must be 0 or more".to_owned()))?;
    let page = state
        .runtime
        .items(&id, params.session.as_deref(), after_seq, limit)
        .await?;
    Ok(axum::Json(page))
}

/// The `limit` of a page of items or turns: 200 by default, at most 2,000.
fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(200);
    if !(1..=2000).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and 2000, not {limit}"
        )));
    }
    Ok(limit)
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/turns",
    operation_id = "list_turns",
    tag = "conversations",
    summary = "List a session's turns, with the tokens each used",
    description = "The turns of one session in the order they started: their status, times, error, \
        the messages they answer and the tokens their model calls used (`usage`: so far, for a \
        running turn; `null` for a turn cut short by a crash).",
    params(("id" = String, Path, description = "Conversation id"), TurnsQuery),
    responses(
        (status = 200, description = "A page of turns", body = TurnsPage),
        (status = 400, description = "`invalid_request`: a bad `limit`, or an unknown parameter", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation, session, or `after` turn in it", body = ErrorBody),
    ),
)]
pub async fn turns(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<TurnsQuery>,
) -> Result<axum::Json<TurnsPage>, ApiError> {
    let limit = page_limit(params.limit)?;
    let page = state
        .runtime
        .turns(
            &id,
            params.session.as_deref(),
            params.after.as_deref(),
            limit,
        )
        .await?;
    Ok(axum::Json(page))
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/sessions",
    operation_id = "list_sessions",
    tag = "conversations",
    summary = "List the agents of a conversation",
    params(("id" = String, Path, description = "Conversation id")),
    responses(
        (status = 200, description = "The root session first, then sub-agents", body = SessionList),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
    ),
)]
pub async fn sessions(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<SessionList>, ApiError> {
    let sessions = state.runtime.sessions(&id).await?;
    Ok(axum::Json(SessionList { sessions }))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/messages",
    tag = "messages",
    summary = "Send a message",
    description = "Starts a turn when the agent is idle; during a turn the message steers it (default), waits for it (`queue`) or interrupts it.",
    params(("id" = String, Path, description = "Conversation id"), IdempotencyHeader),
    request_body = NewMessage,
    responses(
        (status = 202, description = "Accepted: `status` is `started` when a new turn began, else `waiting`", body = MessageAccepted),
        (status = 400, description = "`invalid_request`: bad JSON, an unknown field or mode, empty text, a bad image", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
        (status = 413, description = "`too_large`: the body is over 16 MiB", body = ErrorBody),
        (status = 422, description = "`cwd_missing`, `model_unavailable`, `agent_unavailable` or `source_missing`; `command_unknown`: the conversation's `cwd` has no command of that name; `message_blocked`: a `user_message` hook blocks the message (the message says which and why); `idempotency_key_reused`: the `Idempotency-Key` came before with another body; `invalid_image`: an image is not one of its media type, or has more pixels or bytes than the models take (nothing stored); `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
        (status = 503, description = "`unavailable` (with `Retry-After`): too many conversations are busy, the service is out of files, the outcome is unknown (retry with the same `Idempotency-Key`), or the service is stopping", body = ErrorBody),
    ),
)]
pub async fn send_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    IdempotencyKey(key): IdempotencyKey,
    Json(request): Json<NewMessage>,
) -> Result<Response, ApiError> {
    Ok(answer(state.runtime.send_message(&id, request, key).await?))
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/pending",
    operation_id = "list_pending",
    tag = "messages",
    summary = "List waiting messages",
    params(("id" = String, Path, description = "Conversation id")),
    responses(
        (status = 200, description = "The user's messages first, then sub-agent reports", body = PendingList),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
    ),
)]
pub async fn pending(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<PendingList>, ApiError> {
    let pending = state.runtime.pending(&id).await?;
    Ok(axum::Json(PendingList { pending }))
}

#[utoipa::path(
    patch,
    path = "/api/conversations/{id}/pending/{message_id}",
    tag = "messages",
    summary = "Change a waiting message",
    description = "Edits a waiting message's text or mode: `mode: steer` moves a queued \
        message into the running turn, `interrupt` cuts in.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("message_id" = String, Path, description = "A waiting message's id"),
    ),
    request_body = PendingPatch,
    responses(
        (status = 200, description = "The changed message", body = Message),
        (status = 400, description = "`invalid_request`: bad JSON, an unknown field or mode, or empty text", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or waiting message", body = ErrorBody),
        (status = 409, description = "`not_waiting`: the agent has already taken the message", body = ErrorBody),
    ),
)]
pub async fn update_pending(
    State(state): State<AppState>,
    Path((id, message_id)): Path<(String, String)>,
    Json(patch): Json<PendingPatch>,
) -> Result<axum::Json<Message>, ApiError> {
    let message = state
        .runtime
        .update_pending(&id, &message_id, patch)
        .await?;
    Ok(axum::Json(message))
}

#[utoipa::path(
    delete,
    path = "/api/conversations/{id}/pending/{message_id}",
    tag = "messages",
    summary = "Withdraw a waiting message",
    description = "Removes a waiting message and answers it, so its text can be edited \
        and sent again.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("message_id" = String, Path, description = "A waiting message's id"),
    ),
    responses(
        (status = 200, description = "The withdrawn message", body = Message),
        (status = 404, description = "`not_found`: no such conversation or waiting message", body = ErrorBody),
        (status = 409, description = "`not_waiting`: the agent has already taken the message", body = ErrorBody),
    ),
)]
pub async fn withdraw_pending(
    State(state): State<AppState>,
    Path((id, message_id)): Path<(String, String)>,
) -> Result<axum::Json<Message>, ApiError> {
    let message = state.runtime.withdraw_pending(&id, &message_id).await?;
    Ok(axum::Json(message))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/pending/{message_id}/send",
    tag = "messages",
    summary = "Send a waiting message now",
    description = "With the agent idle (after a stop, waiting messages stay until sent), the \
        message starts a turn on its own and the others keep waiting; with a turn running, it \
        joins that turn at its next model call (as `mode: steer`).",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("message_id" = String, Path, description = "A waiting message's id"),
    ),
    responses(
        (status = 202, description = "The message: `status` is `started` when it started a turn, else `waiting` (it joins the running turn)", body = Message),
        (status = 404, description = "`not_found`: no such conversation or waiting message", body = ErrorBody),
        (status = 409, description = "`not_waiting`: the agent has already taken the message", body = ErrorBody),
    ),
)]
pub async fn send_pending_now(
    State(state): State<AppState>,
    Path((id, message_id)): Path<(String, String)>,
) -> Result<(axum::http::StatusCode, axum::Json<Message>), ApiError> {
    let message = state.runtime.send_pending_now(&id, &message_id).await?;
    Ok((axum::http::StatusCode::ACCEPTED, axum::Json(message)))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/retry",
    tag = "messages",
    summary = "Run a failed turn again",
    description = "Starts a new turn of the session with the history the failed one had: its messages are not posted again. Answers at once; follow the turn on the event stream.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body(
        content = ref("#/components/schemas/RetryRequest"),
        content_type = "application/json",
        description = "Optional: no body means the root session",
    ),
    responses(
        (status = 202, description = "The new turn started", body = RetryStarted),
        (status = 400, description = "`invalid_request`: bad JSON or an unknown field", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
        (status = 409, description = "`nothing_to_retry` (the latest turn did not fail), `turn_running` or `messages_waiting`", body = ErrorBody),
        (status = 422, description = "`cwd_missing`, `model_unavailable` or `agent_unavailable`: the turn cannot run; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
        (status = 503, description = "`unavailable`: the service is stopping", body = ErrorBody),
    ),
)]
pub async fn retry(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, axum::Json<RetryStarted>), ApiError> {
    let request: RetryRequest = optional_json(&body)?;
    let started = state.runtime.retry(&id, request.session_id).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(started)))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/retry/now",
    tag = "messages",
    summary = "Retry the model call now",
    description = "While a running turn waits to try its failed model call again (after `model.retry`), tries it at once instead of waiting out the delay.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body(
        content = ref("#/components/schemas/RetryRequest"),
        content_type = "application/json",
        description = "Optional: no body means the root session",
    ),
    responses(
        (status = 200, description = "Whether a waiting model call was tried at once", body = RetryingNow),
        (status = 400, description = "`invalid_request`: bad JSON or an unknown field", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
    ),
)]
pub async fn retry_now(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<axum::Json<RetryingNow>, ApiError> {
    let request: RetryRequest = optional_json(&body)?;
    let retrying = state.runtime.retry_now(&id, request.session_id).await?;
    Ok(axum::Json(RetryingNow { retrying }))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/interrupt",
    tag = "messages",
    summary = "Interrupt a running turn",
    description = "Answers once the turn has ended. What was generated stays; unfinished items end `interrupted`.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body(
        content = ref("#/components/schemas/InterruptRequest"),
        content_type = "application/json",
        description = "Optional: no body means the root session",
    ),
    responses(
        (status = 200, description = "`interrupted` is `false` when nothing was running", body = Interrupted),
        (status = 400, description = "`invalid_request`: bad JSON or an unknown field", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
    ),
)]
pub async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<axum::Json<Interrupted>, ApiError> {
    let request: InterruptRequest = optional_json(&body)?;
    let interrupted = state.runtime.interrupt(&id, request.session_id).await?;
    Ok(axum::Json(Interrupted { interrupted }))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/sessions/{session_id}/interrupt",
    tag = "messages",
    summary = "Interrupt one agent's running turn",
    description = "Answers once the turn has ended.",
    params(("id" = String, Path, description = "Conversation id"), ("session_id" = String, Path, description = "Session id (the root or a sub-agent)")),
    responses(
        (status = 200, description = "`interrupted` is `false` when nothing was running", body = Interrupted),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
    ),
)]
pub async fn interrupt_session(
    State(state): State<AppState>,
    Path((id, session_id)): Path<(String, String)>,
) -> Result<axum::Json<Interrupted>, ApiError> {
    let interrupted = state.runtime.interrupt(&id, Some(session_id)).await?;
    Ok(axum::Json(Interrupted { interrupted }))
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/usage",
    operation_id = "get_usage",
    tag = "history",
    summary = "Context usage",
    description = "How much of the model's context window a session (the root agent's by default) uses: the last reported count plus an estimate since, or an estimate of everything.",
    params(("id" = String, Path, description = "Conversation id"), UsageQuery),
    responses(
        (status = 200, description = "The usage", body = Usage),
        (status = 400, description = "`invalid_request`: an unknown parameter", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or session", body = ErrorBody),
        (status = 422, description = "`cwd_missing` or `agent_unavailable`: the conversation cannot open; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
    ),
)]
pub async fn usage(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<UsageQuery>,
) -> Result<axum::Json<Usage>, ApiError> {
    // Opening the conversation checks that it can open (its cwd and agent exist).
    state.runtime.conversation(&id).await?;
    Ok(axum::Json(state.runtime.usage(&id, params.session).await?))
}

/// An answer that a repeat of the request (same `Idempotency-Key`, same body) gets again.
fn answer(answer: Answer) -> Response {
    match answer {
        Answer::Created(created) => (StatusCode::CREATED, axum::Json(created)).into_response(),
        Answer::Accepted(accepted) => (StatusCode::ACCEPTED, axum::Json(accepted)).into_response(),
    }
}

/// A body that may be absent (`POST …/interrupt` with no body means the defaults); one that
/// is there must be a JSON object (blank space is not JSON).
pub(super) fn optional_json<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.is_empty() {
        return Ok(T::default());
    }
    let value = serde_json::from_slice(body)
        .map_err(|error| ApiError::Invalid(format!("invalid JSON body: {error}")))?;
    super::extract::object_body(value)
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/fork",
    tag = "history",
    summary = "Fork a conversation",
    description = "Copies the root agent's history up to the last finished turn into a new \
        conversation; sub-agents, waiting messages and the archive state are not copied. \
        The original is unchanged. With `worktree`, the fork also gets a copy of the working \
        tree as it is now, in a new directory, and runs there.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body(
        content = ref("#/components/schemas/ForkRequest"),
        content_type = "application/json",
        description = "Optional: `{}` or no body",
    ),
    responses(
        (status = 201, description = "The new conversation", body = ForkedConversation),
        (status = 400, description = "`invalid_request`: bad JSON", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 409, description = "`turn_running`: the first turn is still running, nothing is finished to copy; with `worktree`, a turn runs in the working directory. `restore_unavailable`: with `worktree`, the tree cannot be copied (checkpoints are off, the store is damaged, the tree is too large); nothing was stored", body = ErrorBody),
        (status = 422, description = "`cwd_missing` or `source_missing`: the conversation cannot open; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
    ),
)]
pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ForkRequest { worktree } = optional_json(&body)?;
    let (conversation, copy) = state.runtime.fork(&id, worktree).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(ForkedConversation {
            conversation,
            worktree: copy.map(Into::into),
        }),
    )
        .into_response())
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/rewind",
    tag = "history",
    summary = "Restart from an earlier message",
    description = "A fork that stops just before one of the user's messages of the root \
        session; answers that message's text for the input box. The original is unchanged. \
        With `restore_files`, the files this conversation changed since that message's turn \
        are first put back as they were (a safety snapshot is taken; paths changed since by \
        someone else are conflicts, kept unless `force`), and `restore` says what was done.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body = RewindRequest,
    responses(
        (status = 201, description = "The new conversation and the message's text", body = RewoundConversation),
        (status = 200, description = "Rewind to the first message, or a `dry_run`: nothing is stored, `conversation` is null", body = RewoundConversation),
        (status = 400, description = "`invalid_request`: bad JSON, or `message_id` is not a user message of the root session", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or message", body = ErrorBody),
        (status = 409, description = "With `restore_files`: `turn_running` (a turn runs in the working directory) or `restore_unavailable` (the checkpoints needed are missing or damaged, or a change was not recorded); nothing was stored", body = ErrorBody),
        (status = 422, description = "`cwd_missing` or `source_missing`: the conversation cannot open; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
    ),
)]
pub async fn rewind(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<RewindRequest>,
) -> Result<Response, ApiError> {
    let restore = request
        .restore_files
        .then_some(crate::checkpoints::RestoreOptions {
            force: request.force,
            dry_run: request.dry_run,
        });
    let dry_run = restore.is_some_and(|options| options.dry_run);
    let outcome = state
        .runtime
        .rewind(&id, &request.message_id, restore)
        .await?;
    let status = match outcome.conversation {
        Some(_) => StatusCode::CREATED,
        None => StatusCode::OK,
    };
    debug_assert!(!dry_run || outcome.conversation.is_none());
    let body = RewoundConversation {
        conversation: outcome.conversation,
        // A rewind always answers its message's text.
        text: outcome.text.unwrap_or_default(),
        restore: outcome.restore.map(Into::into),
    };
    Ok((status, axum::Json(body)).into_response())
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/compact",
    tag = "history",
    summary = "Compact the context now",
    description = "Summarizes the root agent's older history with the agent's \
        `compact_model`. The model then reads the summary plus the recent part: at \
        least a fifth of the window, or the last turn when the whole history is shorter. The \
        full history stays stored; the summarized items are marked `compacted`. Allowed only \
        when no turn runs and no message waits; a message sent during the compaction waits \
        for it.",
    params(("id" = String, Path, description = "Conversation id")),
    request_body(
        content = ref("#/components/schemas/EmptyRequest"),
        content_type = "application/json",
        description = "Optional: `{}` or no body",
    ),
    responses(
        (status = 200, description = "The summary item and the new usage", body = CompactOutcome),
        (status = 400, description = "`invalid_request`: bad JSON", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 409, description = "`turn_running`, `messages_waiting`, `compaction_running`, or `nothing_to_compact` (nothing older than the latest turn is left to summarize)", body = ErrorBody),
        (status = 422, description = "`cwd_missing` or `model_unavailable`; `conversation_damaged`: a file of the conversation has a damaged line (the message names it and the repair)", body = ErrorBody),
        (status = 502, description = "`compaction_failed`: the compaction model failed (or the compaction was interrupted); nothing was stored", body = ErrorBody),
    ),
)]
pub async fn compact(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<axum::Json<CompactOutcome>, ApiError> {
    let EmptyRequest {} = optional_json(&body)?;
    let outcome = state.runtime.compact(&id).await?;
    Ok(axum::Json(outcome))
}
