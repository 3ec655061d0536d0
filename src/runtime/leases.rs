//! Cluster mode seen from the runtime: where a request is served, taking a conversation's
//! lease, and the write fence its files are written under.

use std::sync::Arc;

use super::*;
use crate::runtime::index_jobs::index_failed;
use crate::store::is_valid_id;

impl Runtime {
    /// Cluster mode: closes the turns a lost lease cut that nobody has closed yet (their
    /// conversations are listed `running` with no live lease): each is taken and loaded
    /// here, which closes the turn in its files and the index, as a read of it would.
    pub async fn close_cut_turns(&self) {
        let Some(cluster) = self.shared.cluster() else {
            return;
        };
        let ids = match cluster.cut_and_unowned(32).await {
            Ok(ids) => ids,
            Err(error) => {
                tracing::debug!(%error, "the sweep of cut turns waits for the database");
                return;
            }
        };
        for id in ids {
            if let Some(Err(error)) = self.route(&id, false).await {
                tracing::debug!(%error, conversation = %id, "could not close a cut turn yet");
            }
        }
    }

    /// Where a request for conversation `id` is served in cluster mode. A read (`writes`
    /// false) of a conversation nobody owns is served here from its files without taking it;
    /// anything else takes it when it is free. `None` when embedded.
    pub async fn route(
        &self,
        id: &str,
        writes: bool,
    ) -> Option<Result<crate::cluster::Route, crate::cluster::RouteError>> {
        let cluster = self.shared.cluster()?;
        if !is_valid_id(id) || !self.shared.store.exists(id) {
            // Not found here whatever the others hold.
            return None;
        }
        if let Some(fence) = cluster.leases().held(id) {
            return Some(Ok(crate::cluster::Route::Local(fence)));
        }
        if !writes {
            match cluster.current_owner(id).await {
                Ok(Some(addr)) => return Some(Ok(crate::cluster::Route::Remote(addr))),
                Err(crate::cluster::RouteError::Deleted) => {
                    // Its owner's delete was accepted and then cut short: finished here, and
                    // the read answers `NotFound`.
                    self.shared.finish_delete(id).await;
                    return None;
                }
                Err(error) => return Some(Err(error)),
                Ok(None) => {}
            }
            // Nobody owns it. A turn that still runs in its files was cut with its owner (it
            // died): whoever reads it first takes it, and closes that turn. Otherwise the files
            // are read here as they are.
            let cut = matches!(
                self.shared.index.get(id).await,
                Ok(Some(conversation)) if conversation.status == crate::domain::ConversationStatus::Running
            );
            if !cut {
                return None;
            }
            // Loaded here, so the cut turn is closed before the read answers.
            return match self.actor(id).await {
                Ok(_) => cluster
                    .leases()
                    .held(id)
                    .map(|fence| Ok(crate::cluster::Route::Local(fence))),
                Err(error) => Some(Err(crate::cluster::RouteError::TakeOver(error.to_string()))),
            };
        }
        match cluster.route(id, 0).await {
            Err(crate::cluster::RouteError::Deleted) => {
                // Its owner's delete was accepted and then cut short (a crash, a pause):
                // finished here, and the request answers `NotFound`.
                self.shared.finish_delete(id).await;
                None
            }
            routed => Some(routed),
        }
    }
}

impl Shared {
    /// Cluster mode: this instance's place in the cluster.
    pub fn cluster(&self) -> Option<&crate::cluster::Cluster> {
        self.settings.cluster.as_ref()
    }

    /// Cluster mode: takes (or keeps) the lease of a conversation for this instance, whose
    /// files carry epochs up to `at_least`; its epoch, to stamp records with. Embedded: `None`.
    pub async fn claim(&self, id: &str, at_least: u64) -> Result<Option<u64>, RuntimeError> {
        let Some(cluster) = self.cluster() else {
            return Ok(None);
        };
        match cluster.route(id, at_least).await {
            Ok(crate::cluster::Route::Local(fence)) => Ok(Some(fence.epoch)),
            Ok(crate::cluster::Route::Remote(addr)) => Err(RuntimeError::Unavailable(format!(
                "conversation {id} is owned by the instance at {addr} now; retry"
            ))),
            Err(crate::cluster::RouteError::Deleted) => {
                self.finish_delete(id).await;
                Err(RuntimeError::NotFound(format!("conversation {id}")))
            }
            Err(error) => Err(RuntimeError::Unavailable(error.to_string())),
        }
    }

    /// Cluster mode: whether this instance lost the lease of conversation `id` (then it writes
    /// no index rows and sends no list events for it).
    pub fn forfeited(&self, id: &str) -> bool {
        self.cluster()
            .is_some_and(|cluster| cluster.leases().forfeited(id))
    }

    /// Removes what is left of a conversation whose delete was accepted (cluster mode: the
    /// deleting instance may have stopped between the acceptance and the removal).
    pub async fn finish_delete(&self, id: &str) {
        if self.store.exists(id)
            && let Err(error) = self.store.delete_conversation(id)
        {
            // Another instance is removing it at the same moment, or the disk refuses.
            tracing::warn!(%error, conversation = %id, "cannot remove a deleted conversation's files");
        }
        if let Err(error) = self.index.remove_conversation(id).await {
            index_failed(&self.index, &error, "delete", &[id]).await;
        }
    }

    /// Which stamped lines of conversation `id` count, for a read here (cluster mode: as its
    /// owner knows, or as PostgreSQL says; embedded: everything).
    pub async fn acceptance(&self, id: &str) -> Result<crate::store::Acceptance, RuntimeError> {
        use crate::store::WriteFence as _;
        let Some(cluster) = self.cluster() else {
            return Ok(Default::default());
        };
        if let Some(fence) = cluster.leases().held(id) {
            return Ok(fence.acceptance());
        }
        match cluster.leases().acceptance(id).await {
            Ok(Some(acceptance)) => Ok(acceptance),
            Ok(None) => Err(RuntimeError::NotFound(format!("conversation {id}"))),
            Err(error) => Err(RuntimeError::Unavailable(format!(
                "PostgreSQL does not answer ({error}); retry"
            ))),
        }
    }

    /// The write fence of a conversation (cluster mode), or `None` when embedded.
    pub fn fence(
        &self,
        id: &str,
    ) -> Result<Option<Arc<dyn crate::store::WriteFence>>, RuntimeError> {
        let Some(cluster) = self.cluster() else {
            return Ok(None);
        };
        cluster.fence(id).map(Some).ok_or_else(|| {
            RuntimeError::Unavailable(format!(
                "this instance does not own conversation {id} (its lease ended); retry"
            ))
        })
    }
}
