//! Reaching live conversations: loading an actor under the registry's lock, a command sent to
//! it, waiting for a place when the registry is full, shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::actor::{self, ActorHandle, Command};
use super::index_queue::IndexJob;
use super::registry::{Registry, Reservation};
use super::{Runtime, RuntimeError};

impl Runtime {
    /// The actor of a conversation that is live now (without loading one).
    pub(super) async fn live_actor(&self, id: &str) -> Option<ActorHandle> {
        self.registry
            .actors
            .lock()
            .await
            .get(id)
            .filter(|handle| !handle.is_closed())
            .cloned()
    }

    /// Asks a conversation's actor if it is live now, without loading it; `None` when it is
    /// not (or left before answering): the caller reads the files instead.
    pub(super) async fn ask_live<T>(
        &self,
        id: &str,
        command: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command,
    ) -> Option<T> {
        let handle = self.live_actor(id).await?;
        handle.touch();
        let (reply, answer) = tokio::sync::oneshot::channel();
        handle.send(command(reply)).await.ok()?;
        // No sender of the actor's channel is kept while waiting: a command the actor never
        // took is dropped (and its caller answered) only once every sender is gone.
        drop(handle);
        answer.await.ok()
    }

    /// Stops every live conversation: running turns end `interrupted`, files are flushed, the
    /// index queue is flushed. In cluster mode the service leaves the cluster after this
    /// (`cluster::Background::stop`), once the lease renewals have stopped.
    pub async fn shutdown(&self) {
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let ids: Vec<String> = self.registry.actors.lock().await.keys().cloned().collect();
        let mut waits = Vec::new();
        for id in ids {
            // An actor retiring meanwhile either left (nothing to stop) or stayed with a fresh
            // channel in the registry (stop it through that one).
            for _ in 0..CALL_ATTEMPTS {
                let Some(handle) = self.registry.actors.lock().await.get(&id).cloned() else {
                    break;
                };
                let (reply, done) = tokio::sync::oneshot::channel();
                if handle.send(Command::Shutdown { reply }).await.is_ok() {
                    waits.push(done);
                    break;
                }
            }
        }
        for done in waits {
            let _ = done.await;
        }
        // The turns are over: no call is left on an MCP server, whose children end now, and
        // the conversations' background processes end with the service.
        self.shared.mcp.shutdown().await;
        self.shared.processes.shutdown().await;
        let (flushed, done) = tokio::sync::oneshot::channel();
        self.shared.index_later(IndexJob::Flush(flushed));
        let _ = done.await;
    }

    /// Cluster mode: conversations whose lease this instance lost (the database did not answer
    /// in time, or another instance took them). Their actors stop at once: they can write
    /// nothing more, and what they hold in memory (waiting messages) is lost with them. Their
    /// background processes end.
    pub async fn leases_lost(&self, ids: &[String]) {
        for id in ids {
            let handle = self.registry.actors.lock().await.get(id).cloned();
            if let Some(handle) = handle {
                tracing::warn!(conversation = %id, "lost the lease of a live conversation; it stops here");
                let _ = handle.send(Command::LeaseLost).await;
            }
            // Its background processes stop too: the new owner cannot follow them, and
            // nothing runs for a conversation its owner does not know of.
            if self.shared.processes.any_running(id) {
                let processes = self.shared.processes.clone();
                let id = id.clone();
                tokio::spawn(async move {
                    processes
                        .end_conversation(&id, "its conversation moved to another instance")
                        .await;
                });
            }
        }
    }

    /// Sends a command to a conversation's actor, loading the conversation if needed.
    pub(super) async fn call<T>(
        &self,
        id: &str,
        command: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command,
    ) -> Result<T, RuntimeError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let mut command = Some(command(reply));
        // An actor that just unloaded itself refuses the command; load it again.
        for _ in 0..CALL_ATTEMPTS {
            let handle = self.actor(id).await?;
            match handle.send(command.take().expect("command")).await {
                Ok(()) => {
                    // As in `ask_live`: no sender is kept while waiting for the answer.
                    drop(handle);
                    return answer.await.map_err(|_| self.unanswered(id));
                }
                Err(returned) => command = Some(returned),
            }
        }
        Err(RuntimeError::Unavailable(
            "the conversation is being loaded and unloaded too often; retry shortly".to_owned(),
        ))
    }

    /// Why an actor stopped without answering a command it was given: the conversation was
    /// deleted by the command before it (`NotFound`), or the service is stopping.
    pub(super) fn unanswered(&self, id: &str) -> RuntimeError {
        if self
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            RuntimeError::ShuttingDown
        } else if !self.shared.store.exists(id) {
            RuntimeError::NotFound(format!("conversation {id}"))
        } else {
            RuntimeError::Unavailable("the conversation stopped; retry shortly".to_owned())
        }
    }

    /// The actor of a conversation, loaded if it is not live. A full registry first asks the
    /// least recently used idle conversation to leave memory, and waits (briefly) for it.
    pub(super) async fn actor(&self, id: &str) -> Result<ActorHandle, RuntimeError> {
        // In cluster mode a conversation is loaded only under its lease.
        if self.shared.cluster().is_some() && self.shared.store.exists(id) {
            self.shared.claim(id, 0).await?;
        }
        // A loaded actor counts its history at once: the encodings (let go while no
        // conversation was live) are built first, off the async workers.
        crate::model::tokens::Tokenizer::build(&self.shared.tokenizers).await;
        match self.load_actor(id).await {
            Err(RuntimeError::EpochBehind(epoch)) => {
                if let Some(cluster) = self.shared.cluster() {
                    cluster.leases().release(id).await;
                }
                self.shared.claim(id, epoch).await?;
                self.load_actor(id).await
            }
            loaded => loaded,
        }
    }

    pub(super) async fn load_actor(&self, id: &str) -> Result<ActorHandle, RuntimeError> {
        let shared = &self.shared;
        self.in_registry(|registry, actors| {
            if let Some(handle) = actors.get(id)
                && !handle.is_closed()
            {
                handle.touch();
                return Ok(Some(handle.clone()));
            }
            // Only a conversation that is not live costs a look at the disk.
            if !shared.store.exists(id) {
                return Err(RuntimeError::NotFound(format!("conversation {id}")));
            }
            if !registry.make_room(actors)? {
                return Ok(None);
            }
            let handle = actor::load(shared.clone(), registry.clone(), id)?;
            actors.insert(id.to_owned(), handle.clone());
            Ok(Some(handle))
        })
        .await
    }

    /// Takes a place in the registry for a conversation about to be created.
    pub(super) async fn reserve_slot(&self) -> Result<Reservation, RuntimeError> {
        self.in_registry(|registry, actors| {
            if !registry.make_room(actors)? {
                return Ok(None);
            }
            registry
                .reserved
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(Reservation(registry.clone())))
        })
        .await
    }

    /// Runs `attempt` under the registry's lock until it is done (`Some`), waiting for a slot
    /// to come free in between, at most [`ROOM_WAIT`]: then the answer is `Unavailable`.
    pub(super) async fn in_registry<T>(
        &self,
        mut attempt: impl FnMut(
            &Arc<Registry>,
            &mut HashMap<String, ActorHandle>,
        ) -> Result<Option<T>, RuntimeError>,
    ) -> Result<T, RuntimeError> {
        let started = tokio::time::Instant::now();
        let deadline = started + ROOM_WAIT;
        loop {
            // Listening before looking: a slot freed in between still wakes this wait.
            let freed = self.registry.slot_freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            {
                let mut actors = self.registry.actors.lock().await;
                if let Some(done) = attempt(&self.registry, &mut actors)? {
                    return Ok(done);
                }
            }
            // The deadline is looked at apart from the wait: `timeout_at` polls the wait
            // first, and under a burst some slot is "maybe freed" (an asked actor stayed, a
            // reservation ended) between every two looks, so a wait that is always woken in
            // time would retry without end, past any deadline, and never be answered.
            let expired = tokio::time::Instant::now() >= deadline
                || tokio::time::timeout_at(deadline, freed).await.is_err();
            if expired {
                tracing::warn!(
                    waited_ms = started.elapsed().as_millis() as u64,
                    max_live_conversations = self.shared.settings.max_live_conversations,
                    "a request gave up waiting for a place among the live conversations; refusing it"
                );
                return Err(self.registry.full());
            }
        }
    }
}

/// How many times a command is offered to a conversation's actor: one that unloads itself
/// between being found and being sent to refuses it, and the next attempt loads it again.
pub(super) const CALL_ATTEMPTS: usize = 5;

/// How long a request waits for a place in a full registry before it is refused (`Unavailable`).
pub(super) const ROOM_WAIT: Duration = Duration::from_secs(2);
