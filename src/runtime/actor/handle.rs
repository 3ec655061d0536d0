//! How the rest of the service reaches a conversation's actor: the commands it takes, and the
//! handle the registry keeps (its command channel, and what the registry may read without
//! asking: when it was last used, whether it could leave memory).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::api::approvals::{Approval, ApprovalAnswer, ApprovalResolution};
use crate::api::events::ConversationEvent;
use crate::api::responses::{CompactOutcome, ConversationView, TurnsPage};
use crate::bus::{Event, EventBus, EventId};
use crate::domain::{Conversation, Message, Usage};
use crate::runtime::{
    Answer, ConversationPatch, ItemsPage, NewMessage, PendingPatch, RequestKey, RuntimeError,
};

/// The commands handlers send. Each carries the channel its answer goes back on (`reply`).
pub enum Command {
    View {
        reply: oneshot::Sender<Result<ConversationView, RuntimeError>>,
    },
    Update {
        patch: ConversationPatch,
        reply: oneshot::Sender<Result<Conversation, RuntimeError>>,
    },
    Delete {
        reply: oneshot::Sender<Result<(), RuntimeError>>,
    },
    Send {
        request: NewMessage,
        key: Option<RequestKey>,
        /// The `user_message` hooks that ran for it (`Runtime::send_message`).
        hooks: Vec<crate::domain::HookRun>,
        reply: oneshot::Sender<Result<Answer, RuntimeError>>,
    },
    /// The answer a message sent with this `Idempotency-Key` got, if one was sent: asked
    /// before `user_message` hooks run, so a retry does not run them again.
    Answered {
        key: RequestKey,
        reply: oneshot::Sender<Option<Result<Answer, RuntimeError>>>,
    },
    /// Who a `user_message` hook about a message to `session` is asked about.
    MessageHookSubject {
        session: Option<String>,
        reply: oneshot::Sender<
            Result<(crate::hooks::Subject, crate::sandbox::SandboxPolicy), RuntimeError>,
        >,
    },
    /// Interrupts a session's running turn (the root's when no session is named).
    Interrupt {
        session: Option<String>,
        reply: oneshot::Sender<Result<bool, RuntimeError>>,
    },
    /// Runs a session's failed latest turn again (the root's when no session is named).
    Retry {
        session: Option<String>,
        reply: oneshot::Sender<Result<crate::api::responses::RetryStarted, RuntimeError>>,
    },
    /// Cuts short the wait before a running turn's next model attempt.
    RetryNow {
        session: Option<String>,
        reply: oneshot::Sender<Result<bool, RuntimeError>>,
    },
    UpdatePending {
        message_id: String,
        patch: PendingPatch,
        reply: oneshot::Sender<Result<Message, RuntimeError>>,
    },
    WithdrawPending {
        message_id: String,
        reply: oneshot::Sender<Result<Message, RuntimeError>>,
    },
    SendPendingNow {
        message_id: String,
        reply: oneshot::Sender<Result<Message, RuntimeError>>,
    },
    /// Fork (no message id) or rewind to just before a user message of the root session;
    /// `restore`: also put back the files changed since.
    Fork {
        rewind_to: Option<String>,
        restore: Option<crate::checkpoints::RestoreOptions>,
        /// Run the fork in a copy of the working tree.
        worktree: bool,
        reply: oneshot::Sender<Result<ForkOutcome, RuntimeError>>,
    },
    /// The working directory and the file-changing tool calls of one turn.
    TurnFileCalls {
        turn_id: String,
        /// Only this tool call's.
        item_id: Option<String>,
        reply: oneshot::Sender<TurnFileCalls>,
    },
    Subscribe {
        after: Option<EventId>,
        reply: oneshot::Sender<Subscription>,
    },
    /// A page of a session's stored history (the root's when none is named): the items after
    /// `after_seq`, at most `limit`.
    Items {
        session: Option<String>,
        after_seq: u64,
        limit: usize,
        reply: oneshot::Sender<Result<ItemsPage, RuntimeError>>,
    },
    /// A page of a session's turns (the root's when none is named): those after the turn
    /// `after`, at most `limit`.
    Turns {
        session: Option<String>,
        after: Option<String>,
        limit: usize,
        reply: oneshot::Sender<Result<TurnsPage, RuntimeError>>,
    },
    /// A session's usage meter (the root's when none is named).
    Usage {
        session: Option<String>,
        reply: oneshot::Sender<Result<Usage, RuntimeError>>,
    },
    /// Manual compaction of the root session.
    Compact {
        reply: oneshot::Sender<Result<CompactOutcome, RuntimeError>>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// Cluster mode: the lease is gone. Followers are told to reconnect, and the actor stops
    /// as at a shutdown, writing nothing more.
    LeaseLost,
    /// A rule was kept in another conversation: settle the approvals here that it answers.
    RulesChanged {
        resolution: ApprovalResolution,
        reply: oneshot::Sender<()>,
    },
    /// A user's answer to one of the conversation's approvals.
    Decide {
        approval_id: String,
        answer: ApprovalAnswer,
        /// Who answered: the kind of client, as its token says (`web`, `cli`, `acp`, `api`).
        by: String,
        reply: oneshot::Sender<Result<Approval, RuntimeError>>,
    },
    /// The registry is full: leave memory if nothing runs, waits or is followed here (the
    /// least recently used idle conversation is asked first).
    Unload,
}

/// The result of a fork or rewind: the new conversation (none when a rewind to the first
/// message leaves nothing to copy) and, for a rewind, the message's text for the input box.
#[derive(Debug, Clone)]
pub struct ForkOutcome {
    pub conversation: Option<Conversation>,
    pub text: Option<String>,
    /// The files put back, when asked.
    pub restore: Option<crate::checkpoints::RestoreOutcome>,
    /// The copy of the working tree the fork runs in, when asked.
    pub worktree: Option<crate::checkpoints::TreeCopy>,
}

pub type TurnFileCalls = Result<
    (
        std::path::PathBuf,
        Vec<crate::checkpoints::restore::CallRecord>,
    ),
    RuntimeError,
>;

/// What a new SSE client gets: a snapshot or the events it missed, then live events.
pub struct Subscription {
    pub snapshot: Option<(EventId, ConversationEvent)>,
    pub replay: Vec<Event>,
    pub receiver: broadcast::Receiver<Event>,
    /// The bus itself, so a subscriber that falls behind can catch up from its replay buffer.
    pub bus: EventBus,
}

#[derive(Clone)]
pub struct ActorHandle {
    pub(super) sender: mpsc::Sender<Command>,
    pub generation: u64,
    pub(super) status: Arc<ActorStatus>,
}

/// What the registry reads of a live conversation without asking its actor: when it was last
/// used, and whether it could leave memory now (so a full registry knows whom to ask).
pub(super) struct ActorStatus {
    /// A tick of [`USE_CLOCK`]: larger is more recent.
    pub(super) last_used: AtomicU64,
    /// Nothing runs or waits in the conversation (kept by the actor after each step).
    pub(super) quiet: AtomicBool,
    /// The registry has asked it to leave and not heard back yet.
    pub(super) unload_asked: AtomicBool,
    /// Its followers (a followed conversation stays).
    pub(super) bus: EventBus,
}

/// Orders uses of live conversations, for "least recently used".
pub(super) static USE_CLOCK: AtomicU64 = AtomicU64::new(1);

impl ActorHandle {
    /// Sends a command; gives it back if the actor has stopped.
    pub async fn send(&self, command: Command) -> Result<(), Command> {
        self.sender.send(command).await.map_err(|error| error.0)
    }

    /// The actor stays with a fresh channel (see `retire`).
    pub fn set_sender(&mut self, sender: mpsc::Sender<Command>) {
        self.sender = sender;
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Marks the conversation as used now.
    pub fn touch(&self) {
        let now = USE_CLOCK.fetch_add(1, Ordering::Relaxed);
        self.status.last_used.store(now, Ordering::Relaxed);
    }

    /// When it could leave memory, how recently it was used (older is smaller); `None` when it
    /// cannot leave now or was already asked to.
    pub fn idle_since(&self) -> Option<u64> {
        let status = &self.status;
        let idle = status.quiet.load(Ordering::Relaxed)
            && status.bus.subscriber_count() == 0
            && !status.unload_asked.load(Ordering::Relaxed)
            && !self.sender.is_closed();
        idle.then(|| status.last_used.load(Ordering::Relaxed))
    }

    /// Whether the registry asked it to leave and it has not answered yet.
    pub fn unload_asked(&self) -> bool {
        self.status.unload_asked.load(Ordering::Relaxed)
    }

    /// Asks the actor to leave memory if it still can; `false` when the request could not be
    /// delivered now (its queue is full: it is busy anyway).
    pub fn ask_to_unload(&self) -> bool {
        self.status.unload_asked.store(true, Ordering::Relaxed);
        let sent = self.sender.try_send(Command::Unload).is_ok();
        if !sent {
            self.status.unload_asked.store(false, Ordering::Relaxed);
        }
        sent
    }
}
