//! The registry of live conversations: the actors by conversation, the places promised to
//! conversations being created, and the cap on how many are live (the least recently used
//! idle one leaves first). Actors reach it only through [`actor::Membership`].

use std::collections::HashMap;
use std::sync::Arc;

use super::actor::{self, ActorHandle, Command, LockedRegistry, Membership};
use super::{RuntimeError, Shared};

/// The live conversations' actors.
pub(super) struct Registry {
    /// Live conversations. Loading and unloading happen under this lock, so there is never
    /// more than one actor per conversation. At most `settings.max_live_conversations`, slots
    /// promised to creates in progress (`reserved`) included.
    pub(super) actors: tokio::sync::Mutex<HashMap<String, ActorHandle>>,
    /// Slots of the registry promised to conversations being created (stored, not yet live).
    pub(super) reserved: std::sync::atomic::AtomicUsize,
    /// Woken whenever a slot of the registry may have come free (an actor left, a
    /// reservation ended, an asked actor answered).
    pub(super) slot_freed: tokio::sync::Notify,
    shared: Arc<Shared>,
}

impl Registry {
    pub(super) fn new(shared: Arc<Shared>) -> Registry {
        Registry {
            actors: tokio::sync::Mutex::new(HashMap::new()),
            reserved: std::sync::atomic::AtomicUsize::new(0),
            slot_freed: tokio::sync::Notify::new(),
            shared,
        }
    }

    /// How many conversations are live now.
    pub(super) async fn live(&self) -> usize {
        self.actors.lock().await.len()
    }
}

impl Registry {
    /// After an actor has stopped and its memory is dropped: when no conversation is live any
    /// more, the service lets go of the token encodings (the next conversation builds them
    /// again) and hands what it freed back to the system, so a service that was busy idles as
    /// small as one that was not (the allocator and SQLite otherwise keep their high-water
    /// marks). Not done while conversations are live: they would take it again.
    async fn after_unload(&self) {
        if !self.actors.lock().await.is_empty() {
            return;
        }
        if let Err(error) = self.shared.index.release_memory().await {
            tracing::debug!(%error, "could not shrink the index's caches");
        }
        // A conversation loaded meanwhile keeps the encodings.
        if !self.actors.lock().await.is_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(|| {
            crate::model::tokens::release();
            crate::memory::return_freed_memory();
        })
        .await;
    }

    /// Forgets an actor that has stopped, unless a newer one already took its place.
    async fn forget_actor(&self, id: &str, generation: u64) {
        let mut actors = self.actors.lock().await;
        let newer = match actors.get(id) {
            Some(handle) if handle.generation == generation => {
                actors.remove(id);
                self.slot_freed.notify_waiters();
                false
            }
            Some(_) => true,
            // An actor that left when idle took itself out of the map (`retire`).
            None => false,
        };
        // Out of memory, out of this instance's hands: any instance may take it now. Done
        // under the registry's lock, so a load of it here waits and claims it again after.
        if !newer && let Some(cluster) = self.shared.cluster() {
            cluster.leases().release(id).await;
        }
    }

    /// Whether the registry has room for one more conversation now. When it is full, the
    /// least recently used conversation that could leave memory is asked to (it answers by
    /// leaving, which frees a slot, or by staying); the caller then waits for a slot.
    /// `Unavailable` when no conversation can leave: every one is busy or followed.
    pub(super) fn make_room(
        &self,
        actors: &mut HashMap<String, ActorHandle>,
    ) -> Result<bool, RuntimeError> {
        let reserved = self.reserved.load(std::sync::atomic::Ordering::SeqCst);
        let max = self.shared.settings.max_live_conversations;
        if actors.len() + reserved < max {
            return Ok(true);
        }
        // Actors that stopped (deleted, unloaded) and are not forgotten yet hold no place.
        actors.retain(|_, handle| !handle.is_closed());
        if actors.len() + reserved < max {
            return Ok(true);
        }
        // A full registry is looked at on every create and load: one pass finds the least
        // recently used idle conversation, which nearly always takes the ask; all of them
        // are sorted only when it could not (its queue was full).
        let idle = || {
            actors
                .values()
                .filter_map(|handle| Some((handle.idle_since()?, handle)))
        };
        if let Some((_, handle)) = idle().min_by_key(|(last_used, _)| *last_used)
            && handle.ask_to_unload()
        {
            return Ok(false);
        }
        let mut by_last_use: Vec<(u64, &ActorHandle)> = idle().collect();
        by_last_use.sort_unstable_by_key(|(last_used, _)| *last_used);
        if by_last_use
            .into_iter()
            .any(|(_, handle)| handle.ask_to_unload())
        {
            return Ok(false);
        }
        // Others may have asked already: their answers come.
        if actors.values().any(ActorHandle::unload_asked) {
            return Ok(false);
        }
        Err(self.full())
    }

    /// `Unavailable` for a registry whose every place is taken by a conversation that cannot leave.
    pub(super) fn full(&self) -> RuntimeError {
        RuntimeError::Unavailable(format!(
            "every place for a live conversation is taken ({} at most, all busy or followed); retry shortly",
            self.shared.settings.max_live_conversations
        ))
    }
}

/// The registry, as its actors see it.
impl Membership for Registry {
    fn lock(&self) -> actor::Boxed<'_, Box<dyn LockedRegistry + '_>> {
        Box::pin(async move {
            let locked: Box<dyn LockedRegistry + '_> = Box::new(Locked(self.actors.lock().await));
            locked
        })
    }

    fn slot_may_be_free(&self) {
        self.slot_freed.notify_waiters();
    }

    fn forget<'a>(&'a self, id: &'a str, generation: u64) -> actor::Boxed<'a, ()> {
        Box::pin(self.forget_actor(id, generation))
    }

    fn after_unload(&self) -> actor::Boxed<'_, ()> {
        Box::pin(Registry::after_unload(self))
    }
}

/// The registry's map, locked by an actor that is leaving.
struct Locked<'a>(tokio::sync::MutexGuard<'a, HashMap<String, ActorHandle>>);

impl LockedRegistry for Locked<'_> {
    fn holds(&self, id: &str, generation: u64) -> bool {
        self.0
            .get(id)
            .is_some_and(|handle| handle.generation == generation)
    }

    fn remove(&mut self, id: &str) {
        self.0.remove(id);
    }

    fn set_sender(&mut self, id: &str, sender: tokio::sync::mpsc::Sender<Command>) {
        if let Some(handle) = self.0.get_mut(id) {
            handle.set_sender(sender);
        }
    }
}

/// A place in the registry taken for a conversation being created; given back when dropped
/// (by then the conversation is in the registry, or nothing was created).
pub(super) struct Reservation(pub(super) Arc<Registry>);

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0
            .reserved
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.slot_freed.notify_waiters();
    }
}
