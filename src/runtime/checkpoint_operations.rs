//! The public operations on checkpoints, as the HTTP layer calls them: a turn's changes, and
//! undoing a restore. (Restoring itself is part of a rewind, in the actor.)

use std::path::PathBuf;

use super::*;
use crate::api::responses::{
    ChangedFile, FileChangeKind, RestoreSummary, SkippedFile, TurnChanges,
};
use crate::checkpoints::diff::Change;
use crate::checkpoints::{Checkpoints, RestoreOutcome};
use crate::store::is_valid_id;
use actor::Command;
use std::sync::Arc;

impl From<RestoreOutcome> for RestoreSummary {
    fn from(outcome: RestoreOutcome) -> RestoreSummary {
        RestoreSummary {
            id: outcome.id,
            restored: outcome.restored,
            conflicts: outcome.conflicts,
        }
    }
}

impl Runtime {
    fn checkpoints(&self) -> Result<Arc<Checkpoints>, RuntimeError> {
        self.shared.checkpoints.clone().ok_or_else(|| {
            RuntimeError::RestoreUnavailable(
                "checkpoints are off (tools.checkpoints = false)".to_owned(),
            )
        })
    }

    /// The files one turn changed (or one of its tool calls, `item_id`), with their diffs and,
    /// with `contents`, their whole texts before and after.
    pub async fn turn_changes(
        &self,
        id: &str,
        turn_id: &str,
        item_id: Option<String>,
        contents: bool,
    ) -> Result<TurnChanges, RuntimeError> {
        if !is_valid_id(turn_id) {
            return Err(RuntimeError::NotFound(format!("turn {turn_id}")));
        }
        if let Some(item) = item_id.as_deref().filter(|item| !is_valid_id(item)) {
            return Err(RuntimeError::NotFound(format!("item {item}")));
        }
        let turn = turn_id.to_owned();
        let (cwd, calls) = self
            .call(id, |reply| Command::TurnFileCalls {
                turn_id: turn,
                item_id,
                reply,
            })
            .await??;
        let (files, skipped) = if calls.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let checkpoints = self.checkpoints()?;
            tokio::task::spawn_blocking(move || checkpoints.turn_diff(&cwd, &calls, contents))
                .await
                .map_err(|error| RuntimeError::Internal(error.to_string()))?
                .map_err(|reason| {
                    RuntimeError::RestoreUnavailable(format!(
                        "the turn's changes cannot be shown: {reason}"
                    ))
                })?
        };
        let files = files
            .into_iter()
            .map(|file| ChangedFile {
                path: file.path,
                change: match file.change {
                    Change::Added => FileChangeKind::Added,
                    Change::Modified => FileChangeKind::Modified,
                    Change::Deleted => FileChangeKind::Deleted,
                },
                binary: file.binary,
                diff: file.diff,
                truncated: file.truncated,
                old_text: file.old_text,
                new_text: file.new_text,
            })
            .collect();
        let skipped = skipped
            .into_iter()
            .map(|skipped| SkippedFile {
                path: skipped.path,
                reason: skipped.reason,
            })
            .collect();
        Ok(TurnChanges {
            turn_id: turn_id.to_owned(),
            files,
            skipped,
        })
    }

    /// Puts back what a restore in this conversation's working directory replaced.
    pub async fn undo_restore(
        &self,
        id: &str,
        restore_id: &str,
        force: bool,
    ) -> Result<RestoreSummary, RuntimeError> {
        let conversation = self.conversation(id).await?;
        let checkpoints = self.checkpoints()?;
        let cwd = PathBuf::from(&conversation.conversation.cwd);
        let (id, restore_id) = (id.to_owned(), restore_id.to_owned());
        let outcome =
            tokio::task::spawn_blocking(move || checkpoints.undo(&cwd, &id, &restore_id, force))
                .await
                .map_err(|error| RuntimeError::Internal(error.to_string()))??;
        Ok(outcome.into())
    }
}
