//! Fork and rewind: a new conversation from a copy of the root session's
//! history. Only the root agent's history is copied (not sub-agents, waiting messages or the
//! archive state), and the source is only read.

use crate::api::events::ListEvent;

use super::{ConversationActor, ForkOutcome};
use crate::domain::{ForkedFrom, ItemKind, new_id, now};
use crate::index::rebuild::{self, LoadedConversation};
use crate::runtime::validate::check_openable;
use crate::runtime::{IndexJob, RuntimeError, fork, title};
use crate::store::StoreError;
use crate::store::records::{ConversationCreated, MetaRecord};
use crate::store::state::ConversationState;

impl ConversationActor {
    /// Copies the root session's history into a new conversation: up to the
    /// last finished turn, or up to just before `rewind_to`. The source is only read.
    pub(super) async fn fork(
        &mut self,
        rewind_to: Option<String>,
        restore: Option<crate::checkpoints::RestoreOptions>,
        worktree: bool,
    ) -> Result<ForkOutcome, RuntimeError> {
        // A copy of a conversation that cannot open (its directory or agent is gone) could not
        // open either: the user recreates the directory (or the agent) first.
        check_openable(&self.agents, &self.state.conversation)?;
        let root = self.state.conversation.root_session_id.clone();
        let path = self.shared.store.session_path(&self.id, &root);
        let mut content = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        // A torn tail that the session's writer has not cut yet (it is opened on the session's
        // next append) is not copied.
        content.truncate(crate::store::jsonl::torn_start(&content));
        // Cluster mode: a stale writer's lines are not copied.
        let content = crate::store::jsonl::counted_lines(content, &self.acceptance());
        let mut end = match &self.root().running {
            Some(running) => fork::cut_offset(&content, &fork::Cut::BeforeTurn(&running.turn_id)),
            None => content.len(),
        };
        let mut text = None;
        let mut restored = None;
        if let Some(message_id) = &rewind_to {
            let at = fork::cut_offset(&content, &fork::Cut::BeforeItem(message_id));
            if at == content.len() {
                return Err(RuntimeError::NotFound(format!(
                    "message {message_id} in this conversation's root session"
                )));
            }
            let target = fork::item_at(&content, at)
                .filter(fork::is_user_message)
                .ok_or_else(|| {
                    RuntimeError::Invalid(format!(
                        "message_id `{message_id}` is not a user message of this conversation's root session"
                    ))
                })?;
            // Files first: a restore that cannot be done (a turn runs in the directory, the
            // checkpoints are missing) leaves nothing stored.
            if let Some(options) = restore {
                restored = Some(self.restore_since(&target, options).await?);
            }
            if let ItemKind::UserMessage { text: message, .. } = target.kind {
                text = Some(message);
            }
            if restore.is_some_and(|options| options.dry_run) {
                // Only what a restore would do: nothing is stored.
                return Ok(ForkOutcome {
                    conversation: None,
                    text,
                    restore: restored,
                    worktree: None,
                });
            }
            end = end.min(at);
        }
        let Some(last) = fork::last_item(&content[..end]) else {
            if rewind_to.is_some() {
                // Rewinding to the first message leaves nothing to store.
                return Ok(ForkOutcome {
                    conversation: None,
                    text,
                    restore: restored,
                    worktree: None,
                });
            }
            return Err(RuntimeError::TurnRunning);
        };

        let conversation_id = new_id("c");
        // The copy first: a tree that cannot be copied (a turn runs in it) leaves nothing
        // stored. From here on, a failure removes it.
        let copy = match worktree {
            true => Some(self.copy_tree(&conversation_id).await?),
            false => None,
        };
        let stored = self
            .store_fork(&conversation_id, copy.as_ref(), &content, end, &last)
            .await;
        if let Some(checkpoints) = copy.as_ref().and(self.shared.checkpoints.as_ref()) {
            match &stored {
                // A mark left by a failure here is settled at the next start (the fork exists).
                Ok(_) => {
                    if let Err(error) = checkpoints.keep_copy(&conversation_id) {
                        tracing::warn!(%error, "cannot unmark a fork's copy of the tree");
                    }
                }
                Err(_) => checkpoints.discard_copy(&conversation_id),
            }
        }
        Ok(ForkOutcome {
            conversation: Some(stored?),
            text,
            restore: restored,
            worktree: copy,
        })
    }

    /// Stores the fork `conversation_id`: the root session's `content` up to `end` (its last
    /// item `last`), in the source's working directory or in `copy`.
    async fn store_fork(
        &self,
        conversation_id: &str,
        copy: Option<&crate::checkpoints::TreeCopy>,
        content: &[u8],
        end: usize,
        last: &crate::domain::Item,
    ) -> Result<crate::domain::Conversation, RuntimeError> {
        let root = self.state.conversation.root_session_id.clone();
        let source = &self.state.conversation;
        let cwd =
            match copy {
                Some(copy) => copy.cwd.to_str().map(str::to_owned).ok_or_else(|| {
                    RuntimeError::Internal("the copy's path is not UTF-8".to_owned())
                })?,
                None => source.cwd.clone(),
            };
        let conversation_id = conversation_id.to_owned();
        let session_id = new_id("s");
        let created_at = now();
        let mut history = content[..end].to_vec();
        fork::rewrite_session_id(&mut history, &root, &session_id);
        let records = MetaRecord::conversation_start(ConversationCreated {
            id: conversation_id.clone(),
            title: title::fork_title(&source.title),
            created_at,
            cwd,
            agent: source.agent.clone(),
            model: source.model.clone(),
            root_session_id: session_id.clone(),
            forked_from: Some(ForkedFrom {
                conversation_id: self.id.clone(),
                item_id: last.id.clone(),
                worktree: copy.map(crate::checkpoints::TreeCopy::kind),
            }),
            mcp: self.state.mcp.clone(),
            budget: source.budget,
        });
        // The fork starts with this conversation's remembered rules: copied before it exists,
        // so that no client ever sees the fork without them (a failed fork leaves rules for
        // an id nothing uses).
        self.shared
            .rules
            .copy_conversation(&self.id, &conversation_id)?;
        // Cluster mode: the fork is written under a lease of its own, above every epoch of the
        // history it copies, then left for any instance to take.
        let at_least = self.fence.as_ref().map_or(0, |fence| fence.epoch());
        let epoch = self.shared.claim(&conversation_id, at_least).await?;
        let created = self.shared.store.create_conversation_raw(
            &conversation_id,
            &records,
            &[(&session_id, &history)],
            epoch,
        );
        if let Some(cluster) = self.shared.cluster() {
            cluster.leases().release(&conversation_id).await;
        }
        let meta_len = created?;
        let state = ConversationState::from_records(&records).expect("starts with creation");
        let loaded = LoadedConversation {
            state,
            meta_len,
            search_texts: Vec::new(),
            // Search covers the copy once its rows are copied (the job below says so).
            root_len: 0,
            torn_files: Vec::new(),
            damaged_files: Vec::new(),
            epoch: epoch.unwrap_or(0),
        };
        self.shared
            .index_quietly(&rebuild::updates_for(&loaded))
            .await;
        // The copied messages' search rows are copied inside the index (same seqs, nothing
        // re-parsed), after the answer: indexing a long history is CPU work the fork's caller
        // should not wait for, and the index is derived data.
        // The rows to copy end where the copy ends, fixed now: by the time the job runs, the
        // source may have gone on (its new messages are not the fork's).
        let below_seq = if end < content.len() {
            fork::item_at(content, end).map_or(last.seq + 1, |item| item.seq)
        } else {
            self.root().history.last().map_or(last.seq, |item| item.seq) + 1
        };
        self.shared.index_later(IndexJob::CopySearch {
            from: self.id.clone(),
            to: conversation_id.clone(),
            below_seq,
            root_len: history.len() as u64,
        });
        let conversation = loaded.state.conversation;
        self.shared.publish_list(&ListEvent::ConversationCreated {
            conversation: conversation.clone(),
        });
        self.shared.notify_created(&self.agents, &conversation);
        Ok(conversation)
    }
}
