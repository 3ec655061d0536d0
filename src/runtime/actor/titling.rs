//! A title written by the agent's `title_model` after the conversation's first turn: the
//! call runs in a task of its own, and the title is taken only while the user has not named
//! the conversation.

use super::ConversationActor;
use crate::domain::{ItemKind, TurnStatus};
use crate::index::IndexUpdate;
use crate::runtime::link::{FromTurn, TurnMsg};
use crate::store::records::{ConversationChanges, MetaRecord};

impl ConversationActor {
    /// After a root turn: when it was the conversation's first and it completed, and the
    /// agent has a `title_model`, asks that model for a title.
    pub(super) fn write_title_after(&self, session_id: &str, turn_id: &str, status: TurnStatus) {
        let conversation = &self.state.conversation;
        let first = self
            .state
            .turns
            .iter()
            .find(|turn| turn.session_id == session_id)
            .is_some_and(|turn| turn.id == turn_id);
        if session_id != self.root_id()
            || status != TurnStatus::Completed
            || !first
            || conversation.title_custom
        {
            return;
        }
        let Some(model_id) = self
            .agents
            .get(&conversation.agent)
            .and_then(|agent| agent.title_model.clone())
            .or_else(|| self.shared.config.title_model.clone())
        else {
            return;
        };
        let config = &self.shared.config;
        let (Some(model), Ok(client)) = (
            config.model(&model_id),
            self.shared.models.client(config, &model_id),
        ) else {
            return;
        };
        let history = self
            .root()
            .history
            .iter()
            .filter(|item| item.turn_id == turn_id);
        let mut first_message = String::new();
        let mut answer = String::new();
        for item in history {
            match &item.kind {
                ItemKind::UserMessage { text, .. } if first_message.is_empty() => {
                    first_message.clone_from(text);
                }
                ItemKind::AgentMessage { text } => answer.clone_from(text),
                _ => {}
            }
        }
        let model_name = model.name.clone();
        let done = self.turn_sender.clone();
        let session_id: std::sync::Arc<str> = std::sync::Arc::from(session_id);
        let id = self.id.clone();
        tokio::spawn(async move {
            match crate::runtime::titling::write(client, model_name, &first_message, &answer).await
            {
                Ok(title) => {
                    let _ = done.send(FromTurn {
                        session_id,
                        msg: TurnMsg::TitleWritten { title },
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, conversation = %id, "the title model wrote no title");
                }
            }
        });
    }

    /// Takes the title the title model wrote, unless the user has named the conversation
    /// meanwhile. A title that cannot be stored is left out: the automatic one stays.
    pub(super) async fn take_written_title(&mut self, title: String) {
        let conversation = &self.state.conversation;
        if conversation.title_custom || conversation.title == title {
            return;
        }
        let changes = ConversationChanges {
            title: Some(title),
            title_custom: Some(false),
            ..ConversationChanges::default()
        };
        let record = MetaRecord::ConversationUpdated {
            at: crate::domain::now(),
            changes,
        };
        if let Err(error) = self.append_meta(vec![record]) {
            tracing::warn!(%error, conversation = %self.id, "cannot store the written title");
            return;
        }
        let conversation = &self.state.conversation;
        let updates = [
            self.conversation_update(),
            IndexUpdate::Title {
                conversation_id: &conversation.id,
                title: &conversation.title,
            },
        ];
        self.shared.index_quietly(&updates).await;
        self.publish_conversation();
    }
}
