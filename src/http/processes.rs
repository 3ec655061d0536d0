//! A conversation's background processes: the list, a process's output (JSON, or followed
//! live as Server-Sent Events), and a stop.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::Query;
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::requests::ProcessOutputQuery;
use crate::api::responses::{ProcessList, ProcessOutput};
use crate::domain::ProcessInfo;

/// The most of a process's output one SSE event carries.
const EVENT_MAX_BYTES: usize = 64 * 1024;
/// An SSE follower waits this long for output before it looks again.
const FOLLOW_WAIT: Duration = Duration::from_secs(15);

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/processes",
    operation_id = "list_processes",
    tag = "conversations",
    summary = "List a conversation's background processes",
    description = "The processes its agents started with `shell` and `background: true`, in the \
        order they started: running ones with the TCP ports they listen on, ended ones with how \
        they ended, and `lost` ones the service was running when it died (its next start killed \
        them).",
    params(("id" = String, Path, description = "Conversation id")),
    responses(
        (status = 200, description = "Its processes", body = ProcessList),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ProcessList>, ApiError> {
    Ok(Json(state.runtime.processes(&id)?))
}

#[utoipa::path(
    get,
    path = "/api/conversations/{id}/processes/{process_id}/output",
    operation_id = "process_output",
    tag = "conversations",
    summary = "Read a background process's output",
    description = "What it wrote after `since` (JSON), waiting up to `wait_s` for more. With \
        `Accept: text/event-stream` the output is followed live: `output` events \
        (`{\"output\", \"next\", \"dropped\"}`) from `since` on, then one `ended` event with the \
        process. A running process keeps its recent output in memory (`dropped` says what a \
        late reader missed); an ended one is read from its log on disk.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("process_id" = String, Path, description = "Process id (`p_…`)"),
        ProcessOutputQuery,
    ),
    responses(
        (status = 200, description = "Its output after `since`", body = ProcessOutput),
        (status = 400, description = "`invalid_request`: a bad `since` or `wait_s`, or an unknown parameter", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation or process", body = ErrorBody),
    ),
)]
pub async fn output(
    State(state): State<AppState>,
    Path((id, process_id)): Path<(String, String)>,
    Query(query): Query<ProcessOutputQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let since = query.since.unwrap_or(0);
    let wait = match query.wait_s {
        Some(wait) if !(0.0..=60.0).contains(&wait) => {
            return Err(ApiError::Invalid(format!(
                "wait_s must be between 0 and 60, not {wait}"
            )));
        }
        Some(wait) => Duration::from_secs_f64(wait),
        None => Duration::ZERO,
    };
    let follows = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !follows {
        let read = state
            .runtime
            .process_output(&id, &process_id, since, wait)
            .await?;
        return Ok(Json(read).into_response());
    }
    // The process must exist (404 otherwise) before the stream starts.
    let first = state
        .runtime
        .process_output(&id, &process_id, since, Duration::ZERO)
        .await?;
    let live = state.runtime.process(&id, &process_id);
    let stream = async_stream::stream! {
        let mut read = first;
        loop {
            if !read.output.is_empty() || read.dropped > 0 {
                yield Ok::<Event, Infallible>(output_event(&read));
            }
            let running = live.as_ref().is_some_and(|process| process.is_running());
            if !running && read.output.len() < EVENT_MAX_BYTES {
                let process = live.as_ref().map_or(read.process.clone(), |process| process.info());
                yield Ok(ended_event(&process));
                break;
            }
            if let Some(process) = &live
                && read.output.is_empty()
            {
                process.wait_past(read.next, FOLLOW_WAIT).await;
            }
            let Ok(next) = state
                .runtime
                .process_output(&id, &process_id, read.next, Duration::ZERO)
                .await
            else {
                break;
            };
            read = next;
        }
    };
    let every = crate::cluster::forward::keep_alive(&headers, Duration::from_secs(15));
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default().interval(every))
        .into_response())
}

fn output_event(read: &ProcessOutput) -> Event {
    let data = serde_json::json!({
        "output": read.output,
        "next": read.next,
        "dropped": read.dropped,
    });
    Event::default()
        .event("output")
        .id(read.next.to_string())
        .data(data.to_string())
}

fn ended_event(process: &ProcessInfo) -> Event {
    let data = serde_json::json!({ "process": process });
    Event::default().event("ended").data(data.to_string())
}

#[utoipa::path(
    post,
    path = "/api/conversations/{id}/processes/{process_id}/stop",
    operation_id = "stop_process",
    tag = "conversations",
    summary = "Stop a background process",
    description = "Sends its whole process group SIGTERM, then SIGKILL if it has not ended \
        after 3 s, and answers once it ended. A process that already ended is answered as it is.",
    params(
        ("id" = String, Path, description = "Conversation id"),
        ("process_id" = String, Path, description = "Process id (`p_…`)"),
    ),
    responses(
        (status = 200, description = "The process, ended", body = ProcessInfo),
        (status = 404, description = "`not_found`: no such conversation or process", body = ErrorBody),
    ),
)]
pub async fn stop(
    State(state): State<AppState>,
    Path((id, process_id)): Path<(String, String)>,
) -> Result<Json<ProcessInfo>, ApiError> {
    Ok(Json(state.runtime.stop_process(&id, &process_id).await?))
}
