//! `/api/conversations/{id}/turns/{turn_id}/changes` and `…/restores/{restore_id}/undo`: what
//! a turn changed in the working directory, and undoing a restore.

use axum::body::Bytes;
use axum::extract::{Path, State};

use super::error::ApiError;
use super::extract::Query;
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::requests::{ChangesQuery, UndoRestoreRequest};
use crate::api::responses::{RestoreAnswer, TurnChanges};

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/turns/{turn_id}/changes",
    tag = "history",
    summary = "What a turn changed in the working directory",
    description = "The paths the turn's tool calls (`shell`, `write_file`, MCP tools; its \
        sub-agents' turns are turns of their own) added, modified or deleted, each with a \
        unified diff of text files. Binary files are named without a diff; past 512 KiB of \
        diff text, files are listed without theirs (`truncated`). `item_id` narrows it to \
        one tool call; `contents=true` adds each text file's whole text before and after.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("turn_id" = String, Path, description = "Turn id (of any session of the conversation)"),
        ChangesQuery,
    ),
    responses(
        (status = 200, description = "The turn's changed files", body = TurnChanges),
        (status = 400, description = "`invalid_request`: an unknown query parameter or a `contents` that is not a boolean", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or turn, or no such item in the turn", body = ErrorBody),
        (status = 409, description = "`restore_unavailable`: the snapshots needed are missing or damaged, or a call's changes were not recorded", body = ErrorBody),
    ),
)]
pub async fn changes(
    State(state): State<AppState>,
    Path((id, turn_id)): Path<(String, String)>,
    Query(query): Query<ChangesQuery>,
) -> Result<axum::Json<TurnChanges>, ApiError> {
    let contents = query.contents.unwrap_or(false);
    Ok(axum::Json(
        state
            .runtime
            .turn_changes(&id, &turn_id, query.item_id, contents)
            .await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/restores/{restore_id}/undo",
    tag = "history",
    summary = "Undo a restore of files",
    description = "Puts the paths a restore (`restore.id` of a rewind's answer) replaced back \
        as they were just before it. A path changed since the restore is a conflict, kept \
        unless `force`. A restore is undone at most once; an undo is itself a restore, with \
        its own id.",
    params(
        ("id" = String, Path, description = "Conversation id (the rewound one or its copy: both share the working directory)"),
        ("restore_id" = String, Path, description = "Restore id"),
    ),
    request_body(
        content = ref("#/components/schemas/UndoRestoreRequest"),
        content_type = "application/json",
        description = "Optional: `{}`, `{\"force\": true}` or no body",
    ),
    responses(
        (status = 200, description = "What was put back", body = RestoreAnswer),
        (status = 404, description = "`not_found`: no such conversation, or no restore of this conversation", body = ErrorBody),
        (status = 409, description = "`turn_running` (a turn runs in the working directory) or `restore_unavailable` (already undone, rolled back, or its content is missing or damaged)", body = ErrorBody),
    ),
)]
pub async fn undo(
    State(state): State<AppState>,
    Path((id, restore_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<axum::Json<RestoreAnswer>, ApiError> {
    let request: UndoRestoreRequest = super::conversations::optional_json(&body)?;
    let restore = state
        .runtime
        .undo_restore(&id, &restore_id, request.force)
        .await?;
    Ok(axum::Json(RestoreAnswer { restore }))
}
