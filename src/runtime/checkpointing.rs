//! A turn's part in checkpoints: a snapshot of the working directory before the turn's first
//! call that may change files, and one after each such call, whose changes go into the call's
//! item. The walks run on the blocking pool; a turn whose calls change no files (or that calls
//! only read-only tools) pays nothing. A snapshot that fails is recorded as the call's
//! `files.error`: the turn goes on, only restoring across that call is off.

use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoints::restore::CallRecord;
use crate::checkpoints::{Checkpoints, TurnGuard};
use crate::domain::{FileChanges, Item, ItemKind};

/// Whether a tool may change files in the working directory.
pub fn may_change_files(name: &str) -> bool {
    name == "shell"
        || name == "write_file"
        || crate::permissions::policy::EDIT_TOOLS.contains(&name)
        || name.starts_with(crate::mcp::names::PREFIX)
}

/// One turn's snapshots.
pub struct TurnFiles {
    checkpoints: Arc<Checkpoints>,
    cwd: PathBuf,
    /// The snapshot before the turn's first file-changing call: not taken yet, taken, or why
    /// it failed.
    baseline: tokio::sync::Mutex<Option<Result<(), String>>>,
    /// Restoring in this directory waits for the turn's end.
    _running: TurnGuard,
}

impl TurnFiles {
    pub fn new(checkpoints: Arc<Checkpoints>, cwd: PathBuf) -> TurnFiles {
        let running = checkpoints.turn_started(&cwd);
        TurnFiles {
            checkpoints,
            cwd,
            baseline: tokio::sync::Mutex::new(None),
            _running: running,
        }
    }

    /// Before a call: the turn's baseline snapshot, once (changes the user made between turns
    /// are not the conversation's).
    pub async fn before(&self, name: &str) {
        if !may_change_files(name) {
            return;
        }
        let mut baseline = self.baseline.lock().await;
        if baseline.is_none() {
            let (checkpoints, cwd) = (self.checkpoints.clone(), self.cwd.clone());
            let taken = tokio::task::spawn_blocking(move || checkpoints.snapshot(&cwd))
                .await
                .unwrap_or_else(|error| Err(error.to_string()));
            *baseline = Some(taken.map(|_| ()));
        }
    }

    /// After a call: what it changed, for its item.
    pub async fn after(&self, name: &str) -> Option<FileChanges> {
        if !may_change_files(name) {
            return None;
        }
        if let Some(Err(reason)) = &*self.baseline.lock().await {
            return Some(failed(reason.clone()));
        }
        let (checkpoints, cwd) = (self.checkpoints.clone(), self.cwd.clone());
        let changes = tokio::task::spawn_blocking(move || checkpoints.after_call(&cwd))
            .await
            .unwrap_or_else(|error| Err(error.to_string()));
        Some(match changes {
            Ok(changes) => FileChanges {
                added: changes.added,
                modified: changes.modified,
                deleted: changes.deleted,
                before: Some(changes.before),
                after: Some(changes.after),
                error: None,
            },
            Err(reason) => {
                tracing::warn!(%reason, cwd = %self.cwd.display(), "no snapshot after a tool call");
                failed(reason)
            }
        })
    }
}

fn failed(reason: String) -> FileChanges {
    FileChanges {
        error: Some(reason),
        ..FileChanges::default()
    }
}

/// The file changes recorded on the tool calls among `items`.
pub fn changes_of(item: &Item) -> Option<&FileChanges> {
    match &item.kind {
        ItemKind::ToolCall { files, .. } => files.as_deref(),
        _ => None,
    }
}

/// How many distinct paths the tool calls among `items` changed.
pub fn count_changed<'a>(items: impl Iterator<Item = &'a Item>) -> u32 {
    let paths: std::collections::BTreeSet<&String> = items
        .filter_map(changes_of)
        .flat_map(FileChanges::paths)
        .collect();
    paths.len() as u32
}

/// The records a restore or a diff needs, in order; `Err` names a call whose changes were not
/// recorded (its snapshot failed), which makes restoring across it unavailable.
pub fn call_records<'a>(items: impl Iterator<Item = &'a Item>) -> Result<Vec<CallRecord>, String> {
    let mut records = Vec::new();
    for item in items {
        let Some(files) = changes_of(item) else {
            continue;
        };
        if let Some(error) = &files.error {
            return Err(format!(
                "the changes of tool call {} were not recorded ({error})",
                item.id
            ));
        }
        let paths: Vec<String> = files.paths().cloned().collect();
        if let (Some(before), Some(after)) = (&files.before, &files.after)
            && !paths.is_empty()
        {
            records.push(CallRecord {
                before: before.clone(),
                after: after.clone(),
                paths,
            });
        }
    }
    Ok(records)
}
