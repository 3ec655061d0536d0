//! The conversation's side of checkpoints: which of its tool calls changed files (every
//! session's, in order), for a turn's diff and for restoring files on rewind. The walks and
//! writes run on the blocking pool; the snapshots themselves are `crate::checkpoints`'.

use std::path::PathBuf;

use super::ConversationActor;
use crate::checkpoints::restore::CallRecord;
use crate::checkpoints::{RestoreOptions, RestoreOutcome, TreeCopy};
use crate::domain::Item;
use crate::runtime::RuntimeError;
use crate::runtime::checkpointing::call_records;

impl ConversationActor {
    /// Every session's items that `keep` accepts, oldest first.
    fn items_across_sessions(&self, keep: impl Fn(&Item) -> bool) -> Vec<&Item> {
        let mut items: Vec<&Item> = self
            .sessions
            .values()
            .flat_map(|run| run.history.iter())
            .filter(|item| keep(item))
            .collect();
        items.sort_by_key(|item| (item.created_at, item.seq));
        items
    }

    /// The working directory and the file-changing calls of one turn (of any session).
    pub(super) fn turn_file_calls(
        &self,
        turn_id: &str,
        item_id: Option<&str>,
    ) -> Result<(PathBuf, Vec<CallRecord>), RuntimeError> {
        if !self.state.turns.iter().any(|turn| turn.id == turn_id) {
            return Err(RuntimeError::NotFound(format!("turn {turn_id}")));
        }
        let items = self.items_across_sessions(|item| {
            item.turn_id == turn_id && item_id.is_none_or(|id| item.id == id)
        });
        if let Some(id) = item_id
            && items.is_empty()
        {
            return Err(RuntimeError::NotFound(format!(
                "item {id} in turn {turn_id}"
            )));
        }
        let calls = call_records(items.into_iter()).map_err(RuntimeError::RestoreUnavailable)?;
        Ok((self.state.conversation.cwd.clone().into(), calls))
    }

    /// Puts back the files this conversation changed from `message`'s turn on (the message is
    /// a root user message): its root items from that message, its sub-agents' from its time.
    pub(super) async fn restore_since(
        &self,
        message: &Item,
        options: RestoreOptions,
    ) -> Result<RestoreOutcome, RuntimeError> {
        let checkpoints = self.shared.checkpoints.clone().ok_or_else(|| {
            RuntimeError::RestoreUnavailable(
                "files cannot be restored: checkpoints are off (tools.checkpoints = false)"
                    .to_owned(),
            )
        })?;
        let root = self.root_id().to_owned();
        let items = self.items_across_sessions(|item| {
            if item.session_id == root {
                item.seq >= message.seq
            } else {
                item.created_at >= message.created_at
            }
        });
        let calls = call_records(items.into_iter()).map_err(|reason| {
            RuntimeError::RestoreUnavailable(format!("files cannot be restored: {reason}"))
        })?;
        let cwd = PathBuf::from(&self.state.conversation.cwd);
        let id = self.id.clone();
        let restored =
            tokio::task::spawn_blocking(move || checkpoints.restore(&cwd, &id, &calls, options))
                .await
                .map_err(|error| RuntimeError::Internal(error.to_string()))??;
        Ok(restored)
    }

    /// A copy of the working tree as it is now, for the fork `owner` to run in (see
    /// `crate::checkpoints::worktree`); marked pending until the fork is stored.
    pub(super) async fn copy_tree(&self, owner: &str) -> Result<TreeCopy, RuntimeError> {
        let checkpoints = self.shared.checkpoints.clone().ok_or_else(|| {
            RuntimeError::RestoreUnavailable(
                "the working tree cannot be copied: checkpoints are off (tools.checkpoints = false)"
                    .to_owned(),
            )
        })?;
        let cwd = PathBuf::from(&self.state.conversation.cwd);
        let owner = owner.to_owned();
        let copy = tokio::task::spawn_blocking(move || checkpoints.copy_tree(&cwd, &owner))
            .await
            .map_err(|error| RuntimeError::Internal(error.to_string()))??;
        Ok(copy)
    }
}
