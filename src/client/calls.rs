//! The conversation calls both chats make (plain and full-screen) for `/fork`, `/retry` and
//! `/rewind`, and how they read `/rewind`'s argument.

use serde_json::{Value, json};

use super::api::{Api, ApiError};

/// Copies the conversation up to its last finished turn; the copy's id.
pub async fn fork(api: &Api, id: &str) -> Result<String, ApiError> {
    let forked = api
        .post(&format!("/api/conversations/{id}/fork"), &json!({}))
        .await?;
    Ok(forked["conversation"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// Tries a model call that waits to be tried again at once (`/retry` while a turn waits out a
/// failing provider); `false` when none was waiting.
pub async fn retry_now(api: &Api, id: &str) -> Result<bool, ApiError> {
    let answer = api
        .post(&format!("/api/conversations/{id}/retry/now"), &json!({}))
        .await?;
    Ok(answer["retrying"] == true)
}

/// Runs the failed last turn again; the new turn's id.
pub async fn retry(api: &Api, id: &str) -> Result<String, ApiError> {
    let started = api
        .post(&format!("/api/conversations/{id}/retry"), &json!({}))
        .await?;
    Ok(started["turn_id"].as_str().unwrap_or_default().to_owned())
}

/// Restarts from before the message in a copy (`files`: the working directory too); the
/// answer: the copy (`null` before the first message), the message's text, the restore.
pub async fn rewind(api: &Api, id: &str, message_id: &str, files: bool) -> Result<Value, ApiError> {
    api.post(
        &format!("/api/conversations/{id}/rewind"),
        &json!({ "message_id": message_id, "restore_files": files }),
    )
    .await
}

/// `/rewind`'s argument, `[N] [--files]`: what stands for N (maybe empty), and whether the
/// files are put back too.
pub fn rewind_argument(argument: &str) -> (&str, bool) {
    let files = argument.ends_with("--files");
    (argument.trim_end_matches("--files").trim(), files)
}
