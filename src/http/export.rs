//! `GET /api/conversations/{id}/export`: a conversation as a Markdown file to keep or share.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::Query;
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::requests::{ExportFormat, ExportQuery};

/// Items read per page while the document is built.
const PAGE: usize = 2000;

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/export",
    tag = "conversations",
    summary = "Export a conversation as Markdown",
    description = "The root agent's history as a Markdown document (its title and details, the messages, the answers, each tool call with its arguments and output), as a file to download. Reasoning is left out.",
    params(("id" = String, Path, description = "Conversation id"), ExportQuery),
    responses(
        (status = 200, description = "The document", content_type = "text/markdown", body = String),
        (status = 400, description = "`invalid_request`: a format other than `markdown`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
    ),
)]
pub async fn export(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<ExportQuery>,
) -> Result<Response, ApiError> {
    // One format for now: the query's parser refuses any other.
    let (None | Some(ExportFormat::Markdown)) = query.format;
    let view = state.runtime.conversation_for_export(&id).await?;
    let mut items = Vec::new();
    let mut after_seq = 0;
    loop {
        let page = state.runtime.items(&id, None, after_seq, PAGE).await?;
        items.extend(page.items);
        match page.next_after_seq {
            Some(next) => after_seq = next,
            None => break,
        }
    }
    let document = crate::export::markdown(&view, &items);
    let filename: String = view
        .title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/markdown; charset=utf-8".to_owned(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}.md\""),
            ),
        ],
        document,
    )
        .into_response())
}
