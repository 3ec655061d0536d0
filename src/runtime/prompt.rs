//! What a model call is sent of a session's history: the compacted view (the latest summary
//! first, then what it does not cover), without the partial output of failed attempts, and with
//! reasoning state only where the model's `reasoning_context` keeps it.

use super::compaction;
use crate::config::ReasoningContext;
use crate::domain::{Item, ItemKind};

/// The history as the model reads it in a call of turn `turn_id`.
/// `from_step`: after a fallback model took over at that step of the turn, state written
/// before it is not sent (another provider, or another model, signed it).
pub fn model_history(
    history: &[Item],
    context: Option<ReasoningContext>,
    turn_id: &str,
    from_step: Option<u32>,
) -> Vec<Item> {
    compaction::model_view(history)
        .into_iter()
        .filter(Item::sent_to_model)
        .map(|item| reasoning_for(item, context, turn_id, from_step))
        .collect()
}

/// Reasoning goes back to the model with its provider state only where the model's
/// `reasoning_context` keeps it: every turn's for `all_turns`, else this turn's; and, after a
/// fallback, only what the model now answering wrote.
fn reasoning_for(
    mut item: Item,
    context: Option<ReasoningContext>,
    turn_id: &str,
    from_step: Option<u32>,
) -> Item {
    let keep = match from_step {
        Some(step) => item.turn_id == turn_id && item.step.is_some_and(|own| own >= step),
        None => context == Some(ReasoningContext::AllTurns) || item.turn_id == turn_id,
    };
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
        assert!(kept(reasoning_for(reasoning("t_old"), all, "t_now", None)));
        assert!(!kept(reasoning_for(
            reasoning("t_old"),
            current,
            "t_now",
            None
        )));
        assert!(kept(reasoning_for(
            reasoning("t_now"),
            current,
            "t_now",
            None
        )));
        assert!(!kept(reasoning_for(
            reasoning("t_old"),
            None,
            "t_now",
            None
        )));
        // After a fallback took over at step 2, the state of step 1 goes to nobody, whatever
        // the context; the new model's own (step 2 on) goes back to it.
        assert!(!kept(reasoning_for(
            reasoning("t_now"),
            all,
            "t_now",
            Some(2)
        )));
        let mut own = reasoning("t_now");
        own.step = Some(2);
        assert!(kept(reasoning_for(own, current, "t_now", Some(2))));
    }
}
