//! An actor leaving the registry of live conversations when it is idle or asked to, without
//! losing a command sent meanwhile.

use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::{COMMAND_CAPACITY, Command, ConversationActor, Flow};

impl ConversationActor {
    /// Leaves the registry of live conversations, unless commands came in meanwhile. Done
    /// under the registry's lock, which callers take to find an actor: the channel is closed
    /// first, and commands sent before that are handled here rather than dropped (their
    /// callers would be told to retry). If any came, the actor stays, with a fresh channel put in the
    /// registry before the lock is released, so there is never a second actor for one
    /// conversation. Returns whether the actor left (it must stop).
    pub(super) async fn retire(&mut self, commands: &mut mpsc::Receiver<Command>) -> bool {
        let membership = self.membership.clone();
        let mut registry = membership.lock().await;
        commands.close();
        // `recv` (unlike `try_recv`) also waits for a sender that reserved its slot before the
        // close and has not put its command in yet; it ends once the channel is empty.
        let mut late = Vec::new();
        while let Some(command) = commands.recv().await {
            // Another ask to leave, sent while this one waited for the lock, is no reason to
            // stay: under a burst of waiting requests there always is one, and an actor that
            // stayed for it would be asked again, and stay again, without end.
            if let Command::Unload = command {
                self.status.unload_asked.store(false, Ordering::Relaxed);
                continue;
            }
            late.push(command);
        }
        let ours = registry.holds(&self.id, self.generation);
        if late.is_empty() {
            if ours {
                registry.remove(&self.id);
                membership.slot_may_be_free();
            }
            return true;
        }
        let (sender, receiver) = mpsc::channel(COMMAND_CAPACITY);
        *commands = receiver;
        if ours {
            registry.set_sender(&self.id, sender);
        }
        drop(registry);
        for command in late {
            if self.handle(command).await == Flow::Stop {
                return true;
            }
        }
        false
    }
}
