//! The history as a model reads it: items regrouped into user and assistant entries (a step's
//! text with its tool calls and their results), whatever the protocol that gives them their
//! shape.

use serde_json::Value;

use crate::domain::{Image, Item, ItemKind, ItemStatus};

/// A user-role or assistant-role message of the history, before a protocol gives it its shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry<'a> {
    /// The user's text and images, or text from the runtime (a notice, a summary).
    User { text: String, images: &'a [Image] },
    /// What the model answered in one step: its text (possibly empty), then the tool calls it
    /// made, each with its result.
    Assistant { text: String, calls: Vec<Call<'a>> },
    /// Reasoning the provider can take back (its own opaque state), before the answer it led to.
    Reasoning { state: &'a Value },
}

/// A tool call of the history with its result as the model should read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call<'a> {
    pub call_id: &'a str,
    pub name: &'a str,
    /// Always a JSON object (see [`parse_arguments`]).
    pub arguments: &'a Value,
    pub output: String,
    /// Images the tool returned, for the model with the result.
    pub images: &'a [Image],
    /// The tool did its work (a protocol that reports a call's outcome says so).
    pub completed: bool,
}

/// An image as a URL: its own, or its data as a base64 `data:` URL.
pub fn image_url(image: &Image) -> Option<String> {
    match (&image.data, &image.url) {
        (Some(data), _) => Some(format!("data:{};base64,{data}", image.media_type)),
        (None, Some(url)) => Some(url.clone()),
        (None, None) => None,
    }
}

/// The history as the model should read it, grouped into user and assistant entries.
///
/// Compacted items (their summary stands for them) and reasoning are left out. An answer's text
/// and the tool calls of the same step form one assistant entry. Notices and summaries are
/// user-role text with a marker so the model can tell them from the user's words.
pub fn entries(history: &[Item]) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    // (turn, step) of the last entry when it is an assistant entry; an item joins it only if
    // it comes from the same model call (items stored before steps were recorded compare by
    // turn alone).
    let mut assistant_turn: Option<(&str, Option<u32>)> = None;
    for item in history.iter().filter(|item| !item.compacted) {
        let joins = assistant_turn == Some((item.turn_id.as_str(), item.step));
        match &item.kind {
            ItemKind::UserMessage {
                text,
                images,
                hooks,
                ..
            } => {
                // Context the `user_message` hooks added follows the user's own words.
                let text = match crate::domain::hook_context(hooks) {
                    Some(context) => format!("{text}\n\n{context}"),
                    None => text.clone(),
                };
                entries.push(Entry::User { text, images });
                assistant_turn = None;
            }
            ItemKind::Notice { text } => {
                entries.push(Entry::User {
                    text: format!("[runtime notice] {text}"),
                    images: &[],
                });
                assistant_turn = None;
            }
            ItemKind::Summary { text, .. } => {
                entries.push(Entry::User {
                    text: format!("[summary of earlier conversation] {text}"),
                    images: &[],
                });
                assistant_turn = None;
            }
            ItemKind::Reasoning {
                state: Some(state), ..
            } => {
                entries.push(Entry::Reasoning { state });
                assistant_turn = None;
            }
            ItemKind::Reasoning { state: None, .. } => {}
            // For users only (`Item::sent_to_model`); it leaves the step's entry open, so the
            // calls around it stay one assistant entry.
            ItemKind::Plan { .. } => {}
            ItemKind::AgentMessage { text } => {
                if text.is_empty() {
                    continue;
                }
                // Text after the step's tool calls belongs to the next step.
                if joins
                    && let Some(Entry::Assistant {
                        text: joined,
                        calls,
                    }) = entries.last_mut()
                    && calls.is_empty()
                {
                    joined.push_str("\n\n");
                    joined.push_str(text);
                    continue;
                }
                entries.push(Entry::Assistant {
                    text: text.clone(),
                    calls: Vec::new(),
                });
                assistant_turn = Some((&item.turn_id, item.step));
            }
            ItemKind::ToolCall {
                call_id,
                name,
                arguments,
                output,
                exit_code,
                images,
                ..
            } => {
                let call = Call {
                    call_id,
                    name,
                    arguments,
                    output: tool_result_text(output, *exit_code, item.status),
                    images,
                    completed: item.status == ItemStatus::Completed,
                };
                if joins && let Some(Entry::Assistant { calls, .. }) = entries.last_mut() {
                    calls.push(call);
                    continue;
                }
                entries.push(Entry::Assistant {
                    text: String::new(),
                    calls: vec![call],
                });
                assistant_turn = Some((&item.turn_id, item.step));
            }
        }
    }
    // Reasoning goes back only with the answer it led to: a provider rejects reasoning that
    // no output follows (an interrupt between the two, or an incomplete response).
    let mut kept = Vec::with_capacity(entries.len());
    let mut entries = entries.into_iter().peekable();
    while let Some(entry) = entries.next() {
        let orphan = matches!(entry, Entry::Reasoning { .. })
            && !matches!(entries.peek(), Some(Entry::Assistant { .. }));
        if !orphan {
            kept.push(entry);
        }
    }
    kept
}

/// A tool's result as the model reads it: the output, then how it ended when that is not
/// plain success. Never empty, since some providers reject empty results.
pub fn tool_result_text(output: &str, exit_code: Option<i32>, status: ItemStatus) -> String {
    let mut text = output.to_owned();
    if let Some(code) = exit_code.filter(|code| *code != 0) {
        text.push_str(&format!("\n[exit code {code}]"));
    }
    // A call still `running` in a history never finished: for the model it was interrupted.
    if matches!(status, ItemStatus::Interrupted | ItemStatus::Running) {
        text.push_str("\n[interrupted]");
    }
    if text.is_empty() {
        return "(no output)".to_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::MessageSource;
    use crate::model::wire::testing::{self, item};

    #[test]
    fn tool_results_say_how_the_tool_ended() {
        let check = |output: &str, code: Option<i32>, status, expected: &str| {
            assert_eq!(tool_result_text(output, code, status), expected);
        };
        check("hi\n", Some(0), ItemStatus::Completed, "hi\n");
        check("hi", Some(2), ItemStatus::Completed, "hi\n[exit code 2]");
        check("part", None, ItemStatus::Interrupted, "part\n[interrupted]");
        check("", None, ItemStatus::Completed, "(no output)");
    }

    #[test]
    fn history_groups_steps_and_marks_runtime_text() {
        let history = testing::history();
        let entries = entries(&history);
        let texts: Vec<String> = entries
            .iter()
            .map(|entry| match entry {
                Entry::User { text, images } => format!("user {text} ({} images)", images.len()),
                Entry::Assistant { text, calls } => {
                    let calls: Vec<String> = calls
                        .iter()
                        .map(|call| format!("{}={}", call.call_id, call.output))
                        .collect();
                    format!("assistant {text} [{}]", calls.join(", "))
                }
                Entry::Reasoning { state } => format!("reasoning {state}"),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "user [summary of earlier conversation] earlier (0 images)",
                "user look (1 images)",
                "assistant Checking. [call_a=oops\n[exit code 1], call_b=\n[interrupted]]",
                "user [runtime notice] the turn was interrupted (0 images)",
                "user again (0 images)",
                "assistant Done. []",
            ]
        );
    }

    #[test]
    fn tool_calls_of_separate_model_calls_are_separate_assistant_entries() {
        let call = |id: &str, step: u32| {
            let mut item = testing::item(
                "t1",
                ItemKind::ToolCall {
                    hooks: Vec::new(),
                    call_id: id.into(),
                    name: "shell".into(),
                    arguments: serde_json::json!({}),
                    output: "ok".into(),
                    exit_code: Some(0),
                    files: None,
                    images: Vec::new(),
                    denied: false,
                },
                ItemStatus::Completed,
            );
            item.step = Some(step);
            item
        };
        // Two calls in one answer, then one call in the next answer of the same turn.
        let history = [call("a", 1), call("b", 1), call("c", 2)];
        let calls: Vec<Vec<&str>> = entries(&history)
            .iter()
            .map(|entry| match entry {
                Entry::Assistant { calls, .. } => calls.iter().map(|c| c.call_id).collect(),
                Entry::User { .. } | Entry::Reasoning { .. } => Vec::new(),
            })
            .collect();
        assert_eq!(calls, vec![vec!["a", "b"], vec!["c"]]);
    }

    #[test]
    fn reasoning_goes_back_only_with_the_answer_it_led_to() {
        let user = |text: &str| ItemKind::UserMessage {
            hooks: Vec::new(),
            text: text.into(),
            source: MessageSource::User,
            from_session_id: None,
            images: vec![],
            command: None,
        };
        let reasoning = || ItemKind::Reasoning {
            text: "thinking".into(),
            state: Some(serde_json::json!({"type": "reasoning", "id": "rs_1"})),
        };
        let done = ItemStatus::Completed;
        // Interrupted between the reasoning and its answer: the reasoning is left out.
        let cut = vec![
            item("t_1", user("q1"), done),
            item("t_1", reasoning(), ItemStatus::Interrupted),
            item("t_2", user("q2"), done),
        ];
        assert!(
            !entries(&cut)
                .iter()
                .any(|entry| matches!(entry, Entry::Reasoning { .. }))
        );
        // Followed by its answer: it goes back.
        let whole = vec![
            item("t_1", user("q1"), done),
            item("t_1", reasoning(), done),
            item("t_1", ItemKind::AgentMessage { text: "a1".into() }, done),
        ];
        assert!(matches!(entries(&whole)[1], Entry::Reasoning { .. }));
    }

    #[test]
    fn history_leaves_out_compacted_items_and_splits_turns() {
        let user = |text: &str| ItemKind::UserMessage {
            hooks: Vec::new(),
            text: text.into(),
            source: MessageSource::User,
            from_session_id: None,
            images: vec![],
            command: None,
        };
        let answer = |text: &str| ItemKind::AgentMessage { text: text.into() };
        let done = ItemStatus::Completed;
        let mut old = item("t_0", user("old"), done);
        old.compacted = true;
        let history = vec![
            old,
            item("t_1", answer("one"), done),
            item("t_2", answer("two"), done),
            item("t_2", answer("three"), done),
        ];
        let entries = entries(&history);
        assert_eq!(
            entries,
            [
                Entry::Assistant {
                    text: "one".into(),
                    calls: vec![]
                },
                Entry::Assistant {
                    text: "two\n\nthree".into(),
                    calls: vec![]
                },
            ]
        );
    }
}
