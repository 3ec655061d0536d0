//! The public operations on one conversation, as the HTTP layer calls them: each is a command
//! to the conversation's actor, or a read of its files when it is not live.

use std::collections::HashMap;

use super::*;
use crate::api::responses::{CompactOutcome, ConversationView, TurnsPage};
use crate::bus::EventId;
use crate::domain::{Conversation, Item, Message, Session, Turn, TurnUsage, Usage};
use crate::index::{ListPage, ListQuery};
use crate::runtime::validate::check_openable;
use crate::runtime::validate::checked_cwd;
use crate::runtime::validate::validate_text;
use crate::store::is_valid_id;
use actor::{Command, Subscription};

/// The items after `after_seq` (at most `limit`) of a history sorted by seq.
pub fn items_page(items: &[Item], after_seq: u64, limit: usize) -> ItemsPage {
    let start = items.partition_point(|item| item.seq <= after_seq);
    let rest = &items[start..];
    let page = rest[..rest.len().min(limit)].to_vec();
    let next_after_seq = if rest.len() > limit {
        page.last().map(|item| item.seq)
    } else {
        None
    };
    ItemsPage {
        items: page,
        next_after_seq,
    }
}

/// The turns of `session_id` after the turn `after` (at most `limit`), in the order they
/// started. `running` overlays the running turn's figures so far.
pub fn turns_page(
    turns: &[Turn],
    session_id: &str,
    running: Option<(&str, &TurnUsage)>,
    after: Option<&str>,
    limit: usize,
) -> Result<TurnsPage, RuntimeError> {
    let mut rest: Vec<&Turn> = turns
        .iter()
        .filter(|t| t.session_id == session_id)
        .collect();
    if let Some(after) = after {
        let at = rest
            .iter()
            .position(|turn| turn.id == after)
            .ok_or_else(|| {
                RuntimeError::NotFound(format!("turn {after} in session {session_id}"))
            })?;
        rest.drain(..=at);
    }
    let more = rest.len() > limit;
    rest.truncate(limit);
    let turns: Vec<Turn> = rest
        .into_iter()
        .map(|turn| match running {
            Some((id, usage)) if id == turn.id => Turn {
                usage: Some(usage.clone()),
                ..turn.clone()
            },
            _ => turn.clone(),
        })
        .collect();
    let next_after = if more {
        turns.last().map(|turn| turn.id.clone())
    } else {
        None
    };
    Ok(TurnsPage { turns, next_after })
}

impl Runtime {
    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, RuntimeError> {
        Ok(self.shared.index.list(query).await?)
    }

    /// A conversation with its sessions, waiting messages and usage: from its actor when it
    /// is live, else from its files (without loading it).
    pub async fn conversation(&self, id: &str) -> Result<ConversationView, RuntimeError> {
        let view = self.view(id).await?;
        // A configured agent is there whatever the repository holds: its files are read only
        // for an agent the config does not have.
        let agents = match self.shared.config.agent(&view.conversation.agent) {
            Some(_) => std::sync::Arc::new(crate::agents::Agents::configured(
                self.shared.config.clone(),
            )),
            None => self.agents_for(&view.conversation.cwd).await?,
        };
        check_openable(&agents, &view.conversation)?;
        Ok(view)
    }

    /// The conversation as stored, for an export (its agent or model need not be configured
    /// still).
    pub async fn conversation_for_export(&self, id: &str) -> Result<Conversation, RuntimeError> {
        Ok(self.view(id).await?.conversation)
    }

    pub(super) async fn view(&self, id: &str) -> Result<ConversationView, RuntimeError> {
        if let Some(view) = self.ask_live(id, |reply| Command::View { reply }).await {
            return view;
        }
        Ok(self.read_stored(id).await?.0)
    }

    pub async fn update(
        &self,
        id: &str,
        patch: ConversationPatch,
    ) -> Result<Conversation, RuntimeError> {
        // A conversation that does not exist is the first thing to say, before its patch.
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        let title = patch
            .title
            .as_deref()
            .map(title::user_title)
            .transpose()
            .map_err(RuntimeError::Invalid)?;
        if let Some(model) = &patch.model {
            self.check_model(model)?;
        }
        let patch = ConversationPatch {
            title,
            cwd: patch
                .cwd
                .as_deref()
                .map(|cwd| checked_cwd(cwd, &self.shared.protected))
                .transpose()?,
            ..patch
        };
        self.call(id, |reply| Command::Update { patch, reply })
            .await?
    }

    pub async fn delete(&self, id: &str) -> Result<(), RuntimeError> {
        self.call(id, |reply| Command::Delete { reply }).await?
    }

    pub async fn sessions(&self, id: &str) -> Result<Vec<Session>, RuntimeError> {
        Ok(self.view(id).await?.sessions)
    }

    /// Stored items of one session (the root by default), in `seq` order.
    pub async fn items(
        &self,
        id: &str,
        session: Option<&str>,
        after_seq: u64,
        limit: usize,
    ) -> Result<ItemsPage, RuntimeError> {
        let conversation = self.stored_conversation(id).await?;
        let session_id = session.unwrap_or(&conversation.root_session_id);
        // Only a session of this conversation is read (`metadata` names a file here, not a
        // session).
        if !is_valid_id(session_id) || !session_id.starts_with("s_") {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        // A live conversation keeps its sessions' histories in memory, the same as the files:
        // paging through a long one then costs a copy of each page, not a read of a file.
        let session = Some(session_id.to_owned());
        if let Some(page) = self
            .ask_live(id, |reply| Command::Items {
                session,
                after_seq,
                limit,
                reply,
            })
            .await
        {
            return page;
        }
        if !self.shared.store.session_path(id, session_id).is_file() {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        let acceptance = self.shared.acceptance(id).await?;
        let items = self
            .shared
            .store
            .read_items(id, session_id, &acceptance)
            .map_err(|error| self.gone_or(id, error.into()))?;
        Ok(items_page(&items, after_seq, limit))
    }

    /// A page of one session's turns (the root's by default), with the tokens each used.
    pub async fn turns(
        &self,
        id: &str,
        session: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<TurnsPage, RuntimeError> {
        let owned = |value: Option<&str>| value.map(str::to_owned);
        if let Some(page) = self
            .ask_live(id, |reply| Command::Turns {
                session: owned(session),
                after: owned(after),
                limit,
                reply,
            })
            .await
        {
            return page;
        }
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        let acceptance = self.shared.acceptance(id).await?;
        let state = actor::read_state(&self.shared, id, &acceptance)
            .map_err(|error| self.gone_or(id, error))?;
        let session_id = session.unwrap_or(&state.conversation.root_session_id);
        if state.session(session_id).is_none() {
            return Err(RuntimeError::NotFound(format!("session {session_id}")));
        }
        turns_page(&state.turns, session_id, None, after, limit)
    }

    /// The usage meter of one session (the root by default).
    pub async fn usage(&self, id: &str, session: Option<String>) -> Result<Usage, RuntimeError> {
        let asked = session.clone();
        if let Some(usage) = self
            .ask_live(id, |reply| Command::Usage {
                session: asked,
                reply,
            })
            .await
        {
            return usage;
        }
        let (view, mut usages) = self.read_stored(id).await?;
        let session_id = session.unwrap_or(view.conversation.root_session_id);
        usages
            .remove(&session_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("session {session_id}")))
    }

    /// A conversation read from its files, without loading it (see `actor::read_view`).
    pub(super) async fn read_stored(
        &self,
        id: &str,
    ) -> Result<(ConversationView, HashMap<String, Usage>), RuntimeError> {
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        let acceptance = self.shared.acceptance(id).await?;
        actor::read_view(&self.shared, id, &acceptance).map_err(|error| self.gone_or(id, error))
    }

    /// A read that failed because the conversation was deleted meanwhile is `NotFound`.
    pub(super) fn gone_or(&self, id: &str, error: RuntimeError) -> RuntimeError {
        if self.shared.store.exists(id) {
            error
        } else {
            RuntimeError::NotFound(format!("conversation {id}"))
        }
    }

    pub async fn send_message(
        &self,
        id: &str,
        request: NewMessage,
        idempotency_key: Option<String>,
    ) -> Result<Answer, RuntimeError> {
        self.refuse_when_stopping()?;
        // The key answers for the request as sent, before a command is filled in.
        let key = idempotency_key.map(|key| RequestKey::new(format!("{id}:{key}"), &request));
        // A retry of a message already answered gets that answer before the command is expanded
        // again or the hooks asked again (a hook may notify, or count, each message).
        if let Some(key) = &key
            && self.shared.hooks.any(crate::config::HookEvent::UserMessage)
        {
            let key = key.clone();
            if let Some(answer) = self
                .call(id, |reply| Command::Answered { key, reply })
                .await?
            {
                return answer;
            }
        }
        let mut request = request;
        if let Some(used) =
            super::commands::named_command(&request.text, &request.command, &request.arguments)?
        {
            let cwd = self.view(id).await?.conversation.cwd;
            let expanded = self.expand_command(&cwd, used).await?;
            request.text = expanded.text;
            request.command = Some(expanded.used.name);
            request.arguments = Some(expanded.used.arguments);
        }
        validate_text(&request.text, &request.images)?;
        let session = request.session_id.clone();
        let whom = async {
            self.call(id, |reply| Command::MessageHookSubject { session, reply })
                .await?
        };
        let hooks = self
            .user_message_hooks(
                whom,
                &request.text,
                request.images.len(),
                request.command.as_deref(),
            )
            .await?;
        // A long message is counted on the blocking pool first, so that the actor's count of
        // it is remembered.
        crate::model::tokens::Tokenizer::prepare(&self.shared.tokenizers, &request.text).await;
        self.call(id, |reply| Command::Send {
            request,
            key,
            hooks,
            reply,
        })
        .await?
    }

    /// Waiting messages live only in a live conversation's memory: one that is
    /// not live has none, and is not loaded to say so.
    pub async fn pending(&self, id: &str) -> Result<Vec<Message>, RuntimeError> {
        if let Some(view) = self.ask_live(id, |reply| Command::View { reply }).await {
            return Ok(view?.pending);
        }
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        Ok(Vec::new())
    }

    /// Changes a waiting message's text or mode; `NotWaiting` once the agent has taken it.
    pub async fn update_pending(
        &self,
        id: &str,
        message_id: &str,
        patch: PendingPatch,
    ) -> Result<Message, RuntimeError> {
        if patch
            .text
            .as_deref()
            .is_some_and(|text| text.trim().is_empty())
        {
            return Err(RuntimeError::Invalid("text must not be empty".to_owned()));
        }
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::UpdatePending {
            message_id,
            patch,
            reply,
        })
        .await?
    }

    /// Withdraws a waiting message and returns it (its text goes back to the input box).
    pub async fn withdraw_pending(
        &self,
        id: &str,
        message_id: &str,
    ) -> Result<Message, RuntimeError> {
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::WithdrawPending { message_id, reply })
            .await?
    }

    /// Sends a waiting message now (see `ConversationActor::send_pending_now`); `NotWaiting`
    /// once the agent has taken it.
    pub async fn send_pending_now(
        &self,
        id: &str,
        message_id: &str,
    ) -> Result<Message, RuntimeError> {
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::SendPendingNow { message_id, reply })
            .await?
    }

    /// A copy of the conversation up to its last finished turn; with `worktree`, it runs in a
    /// copy of the working tree as it is now.
    pub async fn fork(
        &self,
        id: &str,
        worktree: bool,
    ) -> Result<(Conversation, Option<crate::checkpoints::TreeCopy>), RuntimeError> {
        let outcome = self
            .call(id, |reply| Command::Fork {
                rewind_to: None,
                restore: None,
                worktree,
                reply,
            })
            .await??;
        let conversation = outcome
            .conversation
            .ok_or_else(|| RuntimeError::Internal("a fork produced no conversation".to_owned()))?;
        Ok((conversation, outcome.worktree))
    }

    /// A copy up to just before one of the user's messages, and that message's text
    /// ("restart from here"). No conversation when it is the first message. `restore`
    /// options: the files this conversation changed since are put back first.
    pub async fn rewind(
        &self,
        id: &str,
        message_id: &str,
        restore: Option<crate::checkpoints::RestoreOptions>,
    ) -> Result<ForkOutcome, RuntimeError> {
        if !is_valid_id(message_id) {
            return Err(RuntimeError::Invalid(format!(
                "message_id `{message_id}` is not a user message of this conversation's root session"
            )));
        }
        let message_id = message_id.to_owned();
        self.call(id, |reply| Command::Fork {
            rewind_to: Some(message_id),
            restore,
            worktree: false,
            reply,
        })
        .await?
    }

    /// Manual compaction of the root session.
    pub async fn compact(&self, id: &str) -> Result<CompactOutcome, RuntimeError> {
        self.refuse_when_stopping()?;
        self.call(id, |reply| Command::Compact { reply }).await?
    }

    /// Interrupts the running turn of a session (the root by default). Answers once the turn
    /// has ended; `false` when nothing was running.
    /// Cuts short the wait before the running turn's next model attempt ("retry now");
    /// `false` when the session was not waiting to retry.
    pub async fn retry_now(&self, id: &str, session: Option<String>) -> Result<bool, RuntimeError> {
        self.call(id, |reply| Command::RetryNow { session, reply })
            .await?
    }

    /// Runs the session's failed latest turn again, with the messages it had.
    pub async fn retry(
        &self,
        id: &str,
        session: Option<String>,
    ) -> Result<crate::api::responses::RetryStarted, RuntimeError> {
        self.refuse_when_stopping()?;
        self.call(id, |reply| Command::Retry { session, reply })
            .await?
    }

    pub async fn interrupt(&self, id: &str, session: Option<String>) -> Result<bool, RuntimeError> {
        self.call(id, |reply| Command::Interrupt { session, reply })
            .await?
    }

    /// A live subscription to one conversation's events: a snapshot or the missed events, then
    /// everything that follows.
    pub async fn subscribe(
        &self,
        id: &str,
        last_event_id: Option<EventId>,
    ) -> Result<Subscription, RuntimeError> {
        self.call(id, |reply| Command::Subscribe {
            after: last_event_id,
            reply,
        })
        .await
    }

    pub(super) async fn stored_conversation(&self, id: &str) -> Result<Conversation, RuntimeError> {
        if !self.shared.store.exists(id) {
            return Err(RuntimeError::NotFound(format!("conversation {id}")));
        }
        match self.shared.index.get(id).await? {
            Some(conversation) => Ok(conversation),
            None => Ok(self.view(id).await?.conversation),
        }
    }

    pub(super) fn check_model(&self, model: &str) -> Result<(), RuntimeError> {
        let config = &self.shared.config;
        if config.model(model).is_none() {
            return Err(RuntimeError::ModelUnavailable(format!(
                "model `{model}` is not configured; configured models: {}",
                config.models.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(())
    }

    pub(super) fn refuse_when_stopping(&self) -> Result<(), RuntimeError> {
        if self
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(RuntimeError::ShuttingDown);
        }
        Ok(())
    }
}
