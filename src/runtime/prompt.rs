//! What a model call is sent of a session's history: the compacted view (the latest summary
//! first, then what it does not cover), without the partial output of failed attempts, and with
//! reasoning state only where the model's `reasoning_context` keeps it.

use super::compaction;
use crate::config::ReasoningContext;
use crate::domain::{Item, ItemKind};

/// The history as the model reads it in a call of turn `turn_id`.
pub fn model_history(
    history: &[Item],
    context: Option<ReasoningContext>,
    turn_id: &str,
) -> Vec<Item> {
    compaction::model_view(history)
        .into_iter()
        .filter(Item::sent_to_model)
        .map(|item| reasoning_for(item, context, turn_id))
        .collect()
}

/// Reasoning goes back to the model with its provider state only where the model's
/// `reasoning_context` keeps it: every turn's for `all_turns`, else this turn's.
fn reasoning_for(mut item: Item, context: Option<ReasoningContext>, turn_id: &str) -> Item {
    let keep = context == Some(ReasoningContext::AllTurns) || item.turn_id == turn_id;
    if let ItemKind::Reasoning { state, .. } = &mut item.kind
        && !keep
    {
        *state = None;
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ItemStatus, new_id, now};

    #[test]
    fn reasoning_state_goes_back_for_this_turn_or_for_every_turn() {
        let reasoning = |turn: &str| Item {
            id: new_id("m"),
            session_id: "s".into(),
            turn_id: turn.into(),
            seq: 1,
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: Some(1),
            kind: ItemKind::Reasoning {
                text: "thought".into(),
                state: Some(serde_json::json!({"type": "reasoning"})),
            },
        };
        let kept = |item: Item| matches!(item.kind, ItemKind::Reasoning { state: Some(_), .. });
        let all = Some(ReasoningContext::AllTurns);
        let current = Some(ReasoningContext::CurrentTurn);
        assert!(kept(reasoning_for(reasoning("t_old"), all, "t_now")));
        assert!(!kept(reasoning_for(reasoning("t_old"), current, "t_now")));
        assert!(kept(reasoning_for(reasoning("t_now"), current, "t_now")));
        assert!(!kept(reasoning_for(reasoning("t_old"), None, "t_now")));
    }
}
