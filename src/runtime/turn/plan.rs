//! `update_plan`: the agent's checklist of its work, for the people following it. It runs
//! inside the turn (no process, nothing to sandbox): the arguments are checked here, the model
//! gets a short result, and the plan goes into an item of its own, stored right after the
//! call's (a `plan` item, which is never sent to the model: it has the call it made).

use serde_json::Value;

use crate::domain::{Item, ItemKind, ItemStatus, PlanStep, PlanStepStatus, new_id, now};
use crate::tools::{ToolResult, optional_string};

pub(super) const NAME: &str = "update_plan";

/// Most steps a plan may have: a checklist people can read at a glance.
const MAX_STEPS: usize = 50;
/// Most characters of one step.
const MAX_STEP_CHARS: usize = 300;
/// Most characters of the explanation.
const MAX_EXPLANATION_CHARS: usize = 2_000;

/// Checks an `update_plan` call: the result for the model, and the plan to store when the
/// arguments make one. A bad plan is a failed result and no plan.
pub(super) fn run(arguments: &Value) -> (ToolResult, Option<ItemKind>) {
    match parse(arguments) {
        Ok(plan) => (ToolResult::completed(result_text(&plan)), Some(plan)),
        Err(error) => (
            ToolResult::failed(format!("The plan was not updated: {error}.")),
            None,
        ),
    }
}

/// The plan item stored after `call` (its seq is given when it is stored).
pub(super) fn item(call: &Item, plan: ItemKind) -> Item {
    Item {
        id: new_id("m"),
        session_id: call.session_id.clone(),
        turn_id: call.turn_id.clone(),
        seq: 0,
        created_at: now(),
        status: ItemStatus::Completed,
        compacted: false,
        step: call.step,
        kind: plan,
    }
}

fn parse(arguments: &Value) -> Result<ItemKind, String> {
    let explanation = optional_string(arguments, "explanation")?
        .map(str::trim)
        .filter(|text| !text.is_empty());
    if let Some(text) = explanation
        && text.chars().count() > MAX_EXPLANATION_CHARS
    {
        return Err(format!(
            "`explanation` is longer than {MAX_EXPLANATION_CHARS} characters"
        ));
    }
    let steps = match arguments.get("steps") {
        None | Some(Value::Null) => {
            return Err("missing required parameter `steps` (an array of {step, status})".into());
        }
        Some(Value::Array(steps)) => steps,
        Some(_) => return Err("`steps` must be an array of {step, status}".into()),
    };
    if steps.is_empty() {
        return Err("`steps` is empty: a plan has at least one step".into());
    }
    if steps.len() > MAX_STEPS {
        return Err(format!(
            "`steps` has {} steps; a plan has at most {MAX_STEPS}",
            steps.len()
        ));
    }
    let steps = steps
        .iter()
        .enumerate()
        .map(|(at, step)| parse_step(step).map_err(|error| format!("step {}: {error}", at + 1)))
        .collect::<Result<Vec<PlanStep>, String>>()?;
    let in_progress = steps
        .iter()
        .filter(|step| step.status == PlanStepStatus::InProgress)
        .count();
    if in_progress > 1 {
        return Err(format!(
            "{in_progress} steps are `in_progress`; at most one step is in progress at a time"
        ));
    }
    Ok(ItemKind::Plan {
        explanation: explanation.map(str::to_owned),
        steps,
    })
}

fn parse_step(step: &Value) -> Result<PlanStep, String> {
    if !step.is_object() {
        return Err("each step must be an object {step, status}".into());
    }
    let text = optional_string(step, "step")?
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or("`step` must be a non-empty string")?;
    if text.chars().count() > MAX_STEP_CHARS {
        return Err(format!("`step` is longer than {MAX_STEP_CHARS} characters"));
    }
    let status = match optional_string(step, "status")? {
        Some("pending") => PlanStepStatus::Pending,
        Some("in_progress") => PlanStepStatus::InProgress,
        Some("completed") => PlanStepStatus::Completed,
        Some(other) => {
            return Err(format!(
                "`status` is `{}`; it must be `pending`, `in_progress` or `completed`",
                crate::text::visible(other)
            ));
        }
        None => return Err("missing `status` (`pending`, `in_progress` or `completed`)".into()),
    };
    Ok(PlanStep {
        step: text.to_owned(),
        status,
    })
}

/// What the model reads back: how far the plan is, in one line.
fn result_text(plan: &ItemKind) -> String {
    let ItemKind::Plan { steps, .. } = plan else {
        return String::new();
    };
    let done = steps
        .iter()
        .filter(|step| step.status == PlanStepStatus::Completed)
        .count();
    let noun = if steps.len() == 1 { "step" } else { "steps" };
    format!("Plan updated: {done} of {} {noun} completed.", steps.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::ToolStatus;

    #[test]
    fn a_plan_is_checked_and_summed_up_for_the_model() {
        let (result, plan) = run(&json!({
            "explanation": "  First the parser, then its tests. ",
            "steps": [
                {"step": "Read the parser", "status": "completed"},
                {"step": " Fix the bug ", "status": "in_progress"},
                {"step": "Add a test", "status": "pending"},
            ]
        }));
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.output, "Plan updated: 1 of 3 steps completed.");
        let Some(ItemKind::Plan { explanation, steps }) = plan else {
            panic!("a plan");
        };
        assert_eq!(
            explanation.as_deref(),
            Some("First the parser, then its tests.")
        );
        assert_eq!(steps[1].step, "Fix the bug");
        assert_eq!(steps[1].status, PlanStepStatus::InProgress);
    }

    #[test]
    fn a_bad_plan_fails_saying_why_and_makes_no_plan() {
        let long = "x".repeat(MAX_STEP_CHARS + 1);
        let many: Vec<Value> = (0..=MAX_STEPS)
            .map(|n| json!({"step": format!("step {n}"), "status": "pending"}))
            .collect();
        for (arguments, why) in [
            (json!("steps"), "must be a JSON object"),
            (json!({}), "missing required parameter `steps`"),
            (json!({"steps": "do it"}), "`steps` must be an array"),
            (json!({"steps": []}), "`steps` is empty"),
            (json!({"steps": many}), "at most 50"),
            (
                json!({"steps": ["do it"]}),
                "step 1: each step must be an object",
            ),
            (
                json!({"steps": [{"step": " ", "status": "pending"}]}),
                "step 1: `step` must be a non-empty string",
            ),
            (
                json!({"steps": [{"step": long, "status": "pending"}]}),
                "step 1: `step` is longer than 300 characters",
            ),
            (
                json!({"steps": [{"step": "a", "status": "pending"}, {"step": "b", "status": "done"}]}),
                "step 2: `status` is `done`; it must be",
            ),
            (
                json!({"steps": [{"step": "a"}]}),
                "step 1: missing `status`",
            ),
            (
                json!({"steps": [
                    {"step": "a", "status": "in_progress"},
                    {"step": "b", "status": "in_progress"},
                ]}),
                "2 steps are `in_progress`; at most one",
            ),
            (
                json!({"explanation": 3, "steps": [{"step": "a", "status": "pending"}]}),
                "parameter `explanation` must be a string",
            ),
        ] {
            let (result, plan) = run(&arguments);
            assert_eq!(result.status, ToolStatus::Failed, "{arguments}");
            assert!(
                result.output.starts_with("The plan was not updated: ")
                    && result.output.contains(why),
                "{arguments}: {}",
                result.output
            );
            assert!(plan.is_none(), "{arguments}");
        }
    }

    #[test]
    fn the_plan_item_follows_its_call() {
        let call = Item {
            id: "m_call".to_owned(),
            session_id: "s_1".to_owned(),
            turn_id: "t_1".to_owned(),
            seq: 7,
            created_at: now(),
            status: ItemStatus::Completed,
            compacted: false,
            step: Some(2),
            kind: ItemKind::Notice {
                text: String::new(),
            },
        };
        let (_, plan) = run(&json!({"steps": [{"step": "a", "status": "completed"}]}));
        let item = item(&call, plan.unwrap());
        assert_eq!(
            (item.session_id.as_str(), item.turn_id.as_str(), item.step),
            ("s_1", "t_1", Some(2))
        );
        assert_ne!(item.id, call.id);
        assert!(!item.sent_to_model());
    }
}
