//! A conversation read from its files without starting its actor: what a GET of a conversation
//! that is not in memory answers (its view, sessions, usage). It holds no file open and adds
//! nothing to the registry, so reading many conversations never fills memory or the open-file
//! limit. It answers what the actor would answer once loaded: nothing waits in a conversation
//! that is not live (waiting messages live in memory only), and each session's usage is the
//! estimate a freshly loaded actor starts from.

use std::collections::HashMap;

use super::session::SessionRun;
use super::usage_of;
use crate::api::responses::ConversationView;
use crate::domain::Usage;
use crate::runtime::{RuntimeError, Shared};
use crate::store::state::ConversationState;

/// A conversation's state (its metadata file alone), without loading it.
pub fn read_state(
    shared: &Shared,
    id: &str,
    acceptance: &crate::store::Acceptance,
) -> Result<ConversationState, RuntimeError> {
    let log = shared.store.read_metadata(id, acceptance)?;
    ConversationState::from_records(&log.records).map_err(|error| {
        RuntimeError::Damaged(format!("conversation {id} cannot be read: {error}"))
    })
}

/// The view of a stored conversation, and the usage of each of its sessions by id.
pub fn read_view(
    shared: &Shared,
    id: &str,
    acceptance: &crate::store::Acceptance,
) -> Result<(ConversationView, HashMap<String, Usage>), RuntimeError> {
    let state = read_state(shared, id, acceptance)?;
    let agents = crate::agents::Agents::discover(
        shared.config.clone(),
        std::path::Path::new(&state.conversation.cwd),
    );
    let mut sessions = state.sessions.clone();
    let mut usages = HashMap::new();
    for session in &mut sessions {
        let mut run = SessionRun::new(
            session.id.clone(),
            shared.store.read_items(id, &session.id, acceptance)?,
        );
        // As the actor does when it loads (`reset_meter`).
        if let Some(basis) = super::turns::meter_basis(&shared.config, &agents, &state, &session.id)
        {
            run.usage = basis.restart(&crate::runtime::compaction::model_view(&run.history));
        }
        session.last_message = run.last_message();
        usages.insert(
            session.id.clone(),
            usage_of(&shared.config, &state, &session.id, run.usage),
        );
    }
    let root = &state.conversation.root_session_id;
    let usage = usages.get(root).cloned().unwrap_or_else(|| {
        usage_of(
            &shared.config,
            &state,
            root,
            crate::runtime::usage::UsageTracker::default(),
        )
    });
    let view = ConversationView {
        conversation: state.conversation.clone(),
        sessions,
        pending: Vec::new(),
        usage,
        // Approvals live only while their conversation is loaded (a turn runs).
        approvals: Vec::new(),
        cost: state.cost(),
    };
    Ok((view, usages))
}
