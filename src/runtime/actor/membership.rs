//! What an actor may ask of the registry of live conversations that started it. The registry
//! owns the actors; an actor reaches it only through these, to leave it.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc;

use super::handle::Command;

/// A future the registry answers with.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The registry, as an actor sees it.
pub trait Membership: Send + Sync {
    /// Locks the registry: while the lock is held nobody can find an actor or load a second
    /// one for a conversation.
    fn lock(&self) -> Boxed<'_, Box<dyn LockedRegistry + '_>>;
    /// A place among the live conversations may have come free (an asked actor answered).
    fn slot_may_be_free(&self);
    /// The actor of `id` (of `generation`) has stopped: it leaves the registry, unless a newer
    /// one already took its place.
    fn forget<'a>(&'a self, id: &'a str, generation: u64) -> Boxed<'a, ()>;
    /// After an actor has stopped and its memory is dropped.
    fn after_unload(&self) -> Boxed<'_, ()>;
}

/// The registry, locked by an actor that is leaving.
pub trait LockedRegistry: Send {
    /// Whether the registry's entry for `id` is the actor of `generation`.
    fn holds(&self, id: &str, generation: u64) -> bool;
    fn remove(&mut self, id: &str);
    /// The actor stays, taking commands on a fresh channel.
    fn set_sender(&mut self, id: &str, sender: mpsc::Sender<Command>);
}
