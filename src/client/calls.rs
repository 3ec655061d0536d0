//! The conversation calls both chats make (plain and full-screen) for `/fork`, `/retry` and
//! `/rewind`, and how they read `/rewind`'s argument.

use super::api::{Api, ApiError};
use crate::api::requests::RewindRequest;
use crate::api::responses::RewoundConversation;
use crate::domain::{Item, ItemKind, MessageSource};

/// Copies the conversation up to its last finished turn; the copy's id.
pub async fn fork(api: &Api, id: &str) -> Result<String, ApiError> {
    Ok(api.fork(id).await?.conversation.id)
}

/// Tries a model call that waits to be tried again at once (`/retry` while a turn waits out a
/// failing provider); `false` when none was waiting.
pub async fn retry_now(api: &Api, id: &str) -> Result<bool, ApiError> {
    Ok(api.retry_now(id).await?.retrying)
}

/// Runs the failed last turn again; the new turn's id.
pub async fn retry(api: &Api, id: &str) -> Result<String, ApiError> {
    Ok(api.retry(id).await?.turn_id)
}

/// Restarts from before the message in a copy (`files`: the working directory too); the
/// answer: the copy (`None` before the first message), the message's text, the restore.
pub async fn rewind(
    api: &Api,
    id: &str,
    message_id: &str,
    files: bool,
) -> Result<RewoundConversation, ApiError> {
    let request = RewindRequest {
        message_id: message_id.to_owned(),
        restore_files: files,
        force: false,
        dry_run: false,
    };
    api.rewind(id, &request).await
}

/// The user's own messages among stored items, in order: their ids and texts (what `/rewind`
/// lists and counts).
pub fn user_messages(items: Vec<Item>) -> Vec<(String, String)> {
    items
        .into_iter()
        .filter_map(|item| match item.kind {
            ItemKind::UserMessage {
                text,
                source: MessageSource::User,
                ..
            } => Some((item.id, text)),
            _ => None,
        })
        .collect()
}

/// `/rewind`'s argument, `[N] [--files]`: what stands for N (maybe empty), and whether the
/// files are put back too.
pub fn rewind_argument(argument: &str) -> (&str, bool) {
    let files = argument.ends_with("--files");
    (argument.trim_end_matches("--files").trim(), files)
}
