//! What a hook answers: nothing (no objection), or JSON: `{"decision"?, "reason"?, "note"?,
//! "arguments"?, "context"?}`.

use serde::Deserialize;
use serde_json::Value;

/// The most of a hook's standard error (or an HTTP answer) quoted in a reason.
const QUOTED_MAX: usize = 2000;

/// What a hook may answer of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// What one hook said: a decision (or none) and why, a note for the model (after a call),
/// the arguments a call is to run with instead (before it), or context for the model (about
/// a user's message).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    pub note: Option<String>,
    pub arguments: Option<Value>,
    pub context: Option<String>,
}

#[derive(Deserialize)]
struct Written {
    decision: Option<String>,
    reason: Option<String>,
    note: Option<String>,
    arguments: Option<Value>,
    context: Option<String>,
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
        // `block` is what other agents' hooks say of a message or a call.
        Some("deny" | "block") => Some(Decision::Deny),
        Some(other) => {
            return Err(format!(
                "its decision `{other}` is not one of: allow, ask, deny"
            ));
        }
    };
    if let Some(arguments) = &written.arguments
        && !arguments.is_object()
    {
        return Err(format!(
            "its `arguments` must be a JSON object (the call's arguments in full), not {arguments}"
        ));
    }
    Ok(Answer {
        decision,
        reason: written.reason.map(|reason| quoted(&reason)),
        note: written.note.map(|note| quoted(&note)),
        arguments: written.arguments,
        context: written.context.map(|context| quoted(&context)),
    })
}

/// A `user_message` hook's answer: JSON as `answer` reads it, or plain text, which is context
/// for the model (as other agents' prompt hooks take it).
pub(super) fn answer_or_context(text: &str) -> Result<Answer, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.is_empty() {
        return answer(text);
    }
    Ok(Answer {
        context: Some(quoted(trimmed)),
        ..Answer::default()
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
        let changed = answer(r#"{"arguments": {"command": "ls"}}"#).unwrap();
        assert_eq!(
            changed.arguments,
            Some(serde_json::json!({"command": "ls"}))
        );
        assert!(
            answer(r#"{"arguments": "ls"}"#)
                .unwrap_err()
                .contains("must be a JSON object")
        );
        assert_eq!(
            answer(r#"{"decision": "block", "reason": "no"}"#)
                .unwrap()
                .decision,
            Some(Decision::Deny)
        );
        assert!(answer("yes").unwrap_err().contains("not `{\"decision\""));
        assert!(
            answer(r#"{"decision": "maybe"}"#)
                .unwrap_err()
                .contains("allow, ask, deny")
        );
    }
}
