//! The routes the clients call, one function each, answering the response types of `api`
//! (the service's own): what the clients read is what the service documents, decoded once
//! here, so no client looks a field up by name.

use super::api::{Api, ApiError};
use crate::api::approvals::{AlreadyDecided, Approval, ApprovalAnswer, ApprovalList};
use crate::api::errors::ErrorCode;
use crate::api::requests::{
    ConversationPatch, EmptyRequest, ForkRequest, InterruptRequest, NewConversation, NewMessage,
    RewindRequest,
};
use crate::api::responses::{
    AgentList, CommandList, CompactOutcome, ConversationCreated, ConversationList,
    ConversationView, ForkedConversation, Interrupted, ItemsPage, MessageAccepted, ModelList,
    ProcessList, ProcessOutput, RetryStarted, RetryingNow, RewoundConversation, TurnChanges,
};
use crate::domain::{Conversation, Item, Message, ProcessInfo, Usage};

/// Items asked for per page: the most the service gives.
const PAGE: u32 = 2000;

/// How an answer to an approval was taken.
pub enum Answered {
    /// This answer settled it: the outcome.
    Settled(Approval),
    /// Another answer came first (`409 already_decided`): its outcome.
    AlreadyDecided(Approval),
}

/// A query string's value, percent-encoded.
pub(super) fn escaped(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

impl Api {
    /// Whether the service answers at all (its figures are not read).
    pub async fn health(&self) -> Result<(), ApiError> {
        self.get::<serde::de::IgnoredAny>("/api/health")
            .await
            .map(drop)
    }

    /// A page of conversations, newest first, with `q` matching titles and messages.
    pub async fn conversations(
        &self,
        limit: u32,
        q: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<ConversationList, ApiError> {
        let mut path = format!("/api/conversations?limit={limit}");
        if let Some(q) = q {
            path += &format!("&q={}", escaped(q));
        }
        if let Some(cursor) = cursor {
            path += &format!("&cursor={}", escaped(cursor));
        }
        self.get(&path).await
    }

    /// The repository's and the user's commands a directory sees.
    pub async fn commands(&self, cwd: &str) -> Result<CommandList, ApiError> {
        self.get(&format!("/api/commands?cwd={}", escaped(cwd)))
            .await
    }

    pub async fn conversation(&self, id: &str) -> Result<ConversationView, ApiError> {
        self.get(&format!("/api/conversations/{id}")).await
    }

    pub async fn create_conversation(
        &self,
        body: &NewConversation,
    ) -> Result<ConversationCreated, ApiError> {
        self.post("/api/conversations", body).await
    }

    pub async fn update_conversation(
        &self,
        id: &str,
        patch: &ConversationPatch,
    ) -> Result<Conversation, ApiError> {
        self.patch(&format!("/api/conversations/{id}"), patch).await
    }

    pub async fn send_message(
        &self,
        id: &str,
        body: &NewMessage,
    ) -> Result<MessageAccepted, ApiError> {
        self.post(&format!("/api/conversations/{id}/messages"), body)
            .await
    }

    /// Takes a waiting message back; the message as it was.
    /// Sends a waiting message now: on its own while the agent is idle, else into the
    /// running turn.
    pub async fn send_pending_now(&self, id: &str, message_id: &str) -> Result<Message, ApiError> {
        self.post(
            &format!("/api/conversations/{id}/pending/{message_id}/send"),
            &serde_json::json!({}),
        )
        .await
    }

    pub async fn withdraw(&self, id: &str, message_id: &str) -> Result<Message, ApiError> {
        self.delete(&format!("/api/conversations/{id}/pending/{message_id}"))
            .await
    }

    /// Interrupts the running turn of the root session (`None`) or of `session`. Answered once
    /// the turn has ended.
    pub async fn interrupt(
        &self,
        id: &str,
        session: Option<&str>,
    ) -> Result<Interrupted, ApiError> {
        let body = InterruptRequest {
            session_id: session.map(str::to_owned),
        };
        self.post(&format!("/api/conversations/{id}/interrupt"), &body)
            .await
    }

    /// Interrupts a sub-agent's turn through its own route.
    pub async fn interrupt_session(
        &self,
        id: &str,
        session: &str,
    ) -> Result<Interrupted, ApiError> {
        let path = format!("/api/conversations/{id}/sessions/{session}/interrupt");
        self.post(&path, &EmptyRequest {}).await
    }

    /// Runs the failed last turn again.
    pub async fn retry(&self, id: &str) -> Result<RetryStarted, ApiError> {
        self.post(&format!("/api/conversations/{id}/retry"), &EmptyRequest {})
            .await
    }

    /// Tries a model call that waits to be retried at once.
    pub async fn retry_now(&self, id: &str) -> Result<RetryingNow, ApiError> {
        let path = format!("/api/conversations/{id}/retry/now");
        self.post(&path, &EmptyRequest {}).await
    }

    pub async fn fork(&self, id: &str) -> Result<ForkedConversation, ApiError> {
        let body = ForkRequest::default();
        self.post(&format!("/api/conversations/{id}/fork"), &body)
            .await
    }

    pub async fn rewind(
        &self,
        id: &str,
        body: &RewindRequest,
    ) -> Result<RewoundConversation, ApiError> {
        self.post(&format!("/api/conversations/{id}/rewind"), body)
            .await
    }

    pub async fn compact(&self, id: &str) -> Result<CompactOutcome, ApiError> {
        let path = format!("/api/conversations/{id}/compact");
        self.post(&path, &EmptyRequest {}).await
    }

    pub async fn usage(&self, id: &str) -> Result<Usage, ApiError> {
        self.get(&format!("/api/conversations/{id}/usage")).await
    }

    /// Every stored item of the root session (`None`) or of `session` after `after_seq`
    /// (all of them for `None`), page after page.
    pub async fn items(
        &self,
        id: &str,
        session: Option<&str>,
        after_seq: Option<u64>,
    ) -> Result<Vec<Item>, ApiError> {
        let mut base = format!("/api/conversations/{id}/items?limit={PAGE}");
        if let Some(session) = session {
            base += &format!("&session={}", escaped(session));
        }
        let mut items = Vec::new();
        let mut after = after_seq;
        loop {
            let path = match after {
                Some(after) => format!("{base}&after_seq={after}"),
                None => base.clone(),
            };
            let page: ItemsPage = self.get(&path).await?;
            items.extend(page.items);
            match page.next_after_seq {
                Some(next) => after = Some(next),
                None => return Ok(items),
            }
        }
    }

    /// What a turn changed (`item_id`: one call of it), with the texts before and after when
    /// `contents`.
    pub async fn turn_changes(
        &self,
        id: &str,
        turn_id: &str,
        item_id: Option<&str>,
        contents: bool,
    ) -> Result<TurnChanges, ApiError> {
        let mut path = format!("/api/conversations/{id}/turns/{turn_id}/changes");
        let mut query = Vec::new();
        if let Some(item_id) = item_id {
            query.push(format!("item_id={}", escaped(item_id)));
        }
        if contents {
            query.push("contents=true".to_owned());
        }
        if !query.is_empty() {
            path += &format!("?{}", query.join("&"));
        }
        self.get(&path).await
    }

    /// The conversation's background processes, in the order they started.
    pub async fn processes(&self, id: &str) -> Result<ProcessList, ApiError> {
        self.get(&format!("/api/conversations/{id}/processes"))
            .await
    }

    /// What a background process wrote after the cursor `since`.
    pub async fn process_output(
        &self,
        id: &str,
        process_id: &str,
        since: u64,
    ) -> Result<ProcessOutput, ApiError> {
        let path = format!(
            "/api/conversations/{id}/processes/{}/output?since={since}",
            escaped(process_id)
        );
        self.get(&path).await
    }

    /// Stops a background process and its group; answered once it ended (or as it is, when it
    /// had ended already).
    pub async fn stop_process(&self, id: &str, process_id: &str) -> Result<ProcessInfo, ApiError> {
        let path = format!(
            "/api/conversations/{id}/processes/{}/stop",
            escaped(process_id)
        );
        self.post(&path, &EmptyRequest {}).await
    }

    /// The agents `cwd` sees: the config's and its repository's agent files.
    pub async fn agents(&self, cwd: &str) -> Result<AgentList, ApiError> {
        self.get(&format!("/api/agents?cwd={}", escaped(cwd))).await
    }

    pub async fn models(&self) -> Result<ModelList, ApiError> {
        self.get("/api/models").await
    }

    /// The pending approvals and the recently decided.
    pub async fn all_approvals(&self) -> Result<ApprovalList, ApiError> {
        self.get("/api/approvals?status=all").await
    }

    /// Answers an approval; the first answer wins. An error answer other than
    /// `already_decided` (a rule that does not match the call, an unknown approval) is an
    /// error.
    pub async fn answer_approval(
        &self,
        id: &str,
        answer: &ApprovalAnswer,
    ) -> Result<Answered, ApiError> {
        let path = format!("/api/approvals/{id}");
        let (status, body) = self.post_raw(&path, answer).await?;
        if (200..300).contains(&status) {
            return Ok(Answered::Settled(self.decode(&body)?));
        }
        let error = self.error_answer(status, &body);
        if error.is(ErrorCode::AlreadyDecided)
            && let Ok(decided) = serde_json::from_slice::<AlreadyDecided>(&body)
        {
            return Ok(Answered::AlreadyDecided(decided.approval));
        }
        Err(error)
    }
}
