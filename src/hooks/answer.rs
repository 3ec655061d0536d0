//! What a hook answers: nothing (no objection), or `{"decision", "reason"}`.

use serde::Deserialize;

/// The most of a hook's standard error (or an HTTP answer) quoted in a reason.
const QUOTED_MAX: usize = 2000;

/// What a hook may answer of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// What one hook said: a decision (or none) and why, and a note for the model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    pub note: Option<String>,
}

#[derive(Deserialize)]
struct Written {
    decision: Option<String>,
    reason: Option<String>,
    note: Option<String>,
}

/// A hook's answer: nothing (no objection), or `{"decision"?, "reason"?}`.
pub(super) fn answer(text: &str) -> Result<Answer, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Answer::default());
    }
    let written: Written = serde_json::from_str(text).map_err(|error| {
        format!(
            "its answer is not `{{\"decision\", \"reason\"}}` JSON ({error}): {}",
            quoted(text)
        )
    })?;
    let decision = match written.decision.as_deref() {
        None => None,
        Some("allow") => Some(Decision::Allow),
        Some("ask") => Some(Decision::Ask),
        Some("deny") => Some(Decision::Deny),
        Some(other) => {
            return Err(format!(
                "its decision `{other}` is not one of: allow, ask, deny"
            ));
        }
    };
    Ok(Answer {
        decision,
        reason: written.reason.map(|reason| quoted(&reason)),
        note: written.note.map(|note| quoted(&note)),
    })
}

/// `text` trimmed and cut to `QUOTED_MAX` bytes (at a character boundary).
pub(super) fn quoted(text: &str) -> String {
    let text = text.trim();
    if text.len() <= QUOTED_MAX {
        return text.to_owned();
    }
    let mut end = QUOTED_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_nothing_or_a_decision_with_a_reason() {
        assert_eq!(answer("  \n").unwrap().decision, None);
        let denied = answer(r#"{"decision": "deny", "reason": "no pushes on Friday"}"#).unwrap();
        assert_eq!(denied.decision, Some(Decision::Deny));
        assert_eq!(denied.reason.as_deref(), Some("no pushes on Friday"));
        assert_eq!(answer(r#"{"reason": "noted"}"#).unwrap().decision, None);
        assert!(answer("yes").unwrap_err().contains("not `{\"decision\""));
        assert!(
            answer(r#"{"decision": "maybe"}"#)
                .unwrap_err()
                .contains("allow, ask, deny")
        );
    }
}
