//! When the checkpoint store is collected, and what the stored conversations name: every
//! snapshot id in any of their records (`crate::checkpoints::referenced_ids`). The service
//! collects once a day (`tools.checkpoint_gc_interval_s`), the first time a few minutes after
//! start; `openvaala gc` does it with the service stopped.

use std::collections::HashSet;
use std::sync::Weak;
use std::time::{Duration, SystemTime};

use crate::checkpoints::{Checkpoints, Collected, referenced_ids};
use crate::store::fence::Acceptance;
use crate::store::records::{ConversationChanges, MetaRecord};
use crate::store::{Store, StoreError};

/// The first collection waits at most this long after start.
const FIRST_AFTER: Duration = Duration::from_secs(600);

/// While the service runs, a snapshot taken this close before the records were read may not
/// be named in them yet.
const MARGIN: Duration = Duration::from_secs(1);

/// Whether calls may be taking snapshots while a collection reads the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Running,
    Stopped,
}

/// Every snapshot id the stored conversations' records name.
fn referenced(store: &Store) -> Result<HashSet<String>, StoreError> {
    let mut ids = HashSet::new();
    for id in store.conversation_ids()? {
        let dir = store.conversation_dir(&id);
        // A conversation deleted meanwhile has nothing left to name.
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        for file in files.flatten() {
            if let Ok(bytes) = std::fs::read(file.path()) {
                referenced_ids(&bytes, &mut ids);
            }
        }
    }
    Ok(ids)
}

/// Every working directory a stored conversation names, now or before a `cwd` change: how a
/// checkpoint tree whose name a power cut emptied is found again.
pub fn known_cwds(store: &Store) -> Vec<std::path::PathBuf> {
    let mut cwds = Vec::new();
    for id in store.conversation_ids().unwrap_or_default() {
        let Ok(log) = store.read_metadata(&id, &Acceptance::default()) else {
            continue;
        };
        for record in log.records {
            match record {
                MetaRecord::ConversationCreated { conversation } => cwds.push(conversation.cwd),
                MetaRecord::ConversationUpdated {
                    changes: ConversationChanges { cwd: Some(cwd), .. },
                    ..
                } => cwds.push(cwd),
                _ => {}
            }
        }
    }
    cwds.sort_unstable();
    cwds.dedup();
    cwds.into_iter().map(Into::into).collect()
}

/// One collection: the records are read first, then the store is collected. Blocking.
pub fn collect(
    store: &Store,
    checkpoints: &Checkpoints,
    service: Service,
) -> Result<Collected, StoreError> {
    let since = match service {
        Service::Running => SystemTime::now() - MARGIN,
        Service::Stopped => SystemTime::now(),
    };
    let referenced = referenced(store)?;
    checkpoints
        .collect_garbage(
            &referenced,
            &|id| store.exists(id),
            &|| known_cwds(store),
            since,
        )
        .map_err(|error| StoreError::io(store.root(), error))
}

/// Collects every `interval` while the checkpoints are in use.
pub fn spawn_periodic(store: Store, checkpoints: Weak<Checkpoints>, interval: Duration) {
    tokio::spawn(async move {
        let mut wait = interval.min(FIRST_AFTER);
        loop {
            tokio::time::sleep(wait).await;
            wait = interval;
            let Some(checkpoints) = checkpoints.upgrade() else {
                return;
            };
            let store = store.clone();
            match tokio::task::spawn_blocking(move || {
                collect(&store, &checkpoints, Service::Running)
            })
            .await
            {
                Ok(Ok(collected)) => tracing::info!(
                    snapshots = collected.snapshots,
                    trees = collected.trees,
                    blobs = collected.blobs,
                    bytes = collected.bytes,
                    left_whole = collected.unnamed.len(),
                    "checkpoint store collected"
                ),
                Ok(Err(error)) => tracing::warn!(%error, "cannot collect the checkpoint store"),
                Err(error) => tracing::warn!(%error, "the checkpoint collection stopped"),
            }
        }
    });
}
