//! A conversation as a Markdown document (`GET …/export?format=markdown`): its title and
//! details, then the root agent's history in order: the user's messages, the agent's answers,
//! each tool call with its arguments and output, notices, summaries and plans (as checklists).
//! Reasoning is left out (it is the model's, not the conversation's), and sub-agents are named
//! by their reports.
//! Text from the conversation is put in code fences longer than any run of backticks in it, so
//! no content can close its fence early.

use std::fmt::Write as _;

use crate::domain::{Conversation, Item, ItemKind, ItemStatus, MessageSource, PlanStepStatus};

/// The document for `conversation` with the root session's `items`, in order.
pub fn markdown(conversation: &Conversation, items: &[Item]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", one_line(&conversation.title));
    let _ = writeln!(
        out,
        "Conversation `{}` · agent `{}` · model `{}` · started {} · in `{}`",
        conversation.id,
        conversation.agent,
        conversation.model,
        conversation.created_at.format("%Y-%m-%d %H:%M UTC"),
        conversation.cwd
    );
    if let Some(source) = &conversation.forked_from {
        let _ = writeln!(out, "\nForked from `{}`.", source.conversation_id);
    }
    for item in items {
        write_item(&mut out, item);
    }
    out
}

fn write_item(out: &mut String, item: &Item) {
    let state = match item.status {
        ItemStatus::Interrupted => " (interrupted)",
        ItemStatus::Failed => " (failed)",
        _ => "",
    };
    match &item.kind {
        ItemKind::UserMessage {
            text,
            source,
            images,
            hooks,
            ..
        } => {
            let who = match source {
                MessageSource::User => "You",
                MessageSource::Agent => "Report from a sub-agent",
            };
            let _ = writeln!(out, "\n## {who}\n\n{}", text.trim_end());
            if !images.is_empty() {
                let _ = writeln!(out, "\n_{} image(s) attached_", images.len());
            }
            if !hooks.is_empty() {
                out.push('\n');
                write_hooks(out, hooks);
            }
        }
        ItemKind::AgentMessage { text } => {
            if !text.trim().is_empty() {
                let _ = writeln!(out, "\n## Agent{state}\n\n{}", text.trim_end());
            }
        }
        ItemKind::Reasoning { .. } => {}
        ItemKind::ToolCall {
            name,
            arguments,
            output,
            exit_code,
            images,
            files,
            hooks,
            ..
        } => {
            let exit = exit_code.map_or(String::new(), |code| format!(" · exit {code}"));
            let _ = writeln!(out, "\n### Tool `{name}`{state}{exit}\n");
            if !hooks.is_empty() {
                write_hooks(out, hooks);
                out.push('\n');
            }
            let edited = crate::api::edits::edited_files(name, arguments);
            if edited.is_empty() {
                let arguments = serde_json::to_string_pretty(arguments).unwrap_or_default();
                out.push_str(&fenced("json", &arguments));
            }
            // An edit reads as what it changed: per file, a diff.
            for (index, file) in edited.iter().enumerate() {
                if index > 0 {
                    out.push('\n');
                }
                let _ = writeln!(out, "`{}` {}\n", file.path, file.action);
                out.push_str(&fenced("diff", &file.diff.join("\n")));
            }
            if !output.is_empty() {
                out.push('\n');
                out.push_str(&fenced("text", output));
            }
            if !images.is_empty() {
                let _ = writeln!(out, "\n_{} image(s) returned_", images.len());
            }
            if let Some(files) = files {
                let changes: Vec<String> = [
                    ("added", &files.added),
                    ("modified", &files.modified),
                    ("deleted", &files.deleted),
                ]
                .into_iter()
                .flat_map(|(how, paths)| paths.iter().map(move |path| format!("`{path}` {how}")))
                .collect();
                if !changes.is_empty() {
                    let _ = writeln!(out, "\nFiles: {}", changes.join(", "));
                }
            }
        }
        ItemKind::Summary { text, .. } => {
            let _ = writeln!(
                out,
                "\n## Summary of the earlier conversation\n\n{}",
                quoted(text)
            );
        }
        ItemKind::Notice { text } => {
            let _ = writeln!(out, "\n{}", quoted(text));
        }
        ItemKind::Plan { explanation, steps } => {
            let _ = writeln!(out, "\n### Plan\n");
            if let Some(explanation) = explanation {
                let _ = writeln!(out, "{}\n", one_line(explanation));
            }
            for step in steps {
                let (mark, note) = match step.status {
                    PlanStepStatus::Completed => ("x", ""),
                    PlanStepStatus::InProgress => (" ", " _(in progress)_"),
                    PlanStepStatus::Pending => (" ", ""),
                };
                let _ = writeln!(out, "- [{mark}] {}{note}", one_line(&step.step));
            }
        }
    }
}

/// The hooks that ran for an item, a line each.
fn write_hooks(out: &mut String, hooks: &[crate::domain::HookRun]) {
    for run in hooks {
        let _ = writeln!(out, "- Hook {}", one_line(&run.summary()));
    }
}

/// `text` in a fence of backticks longer than any run of them inside it.
fn fenced(language: &str, text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{language}\n{body}\n{fence}\n")
}

fn quoted(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|line| format!("> {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ConversationStatus, new_id, now};

    fn item(kind: ItemKind, status: ItemStatus) -> Item {
        Item {
            id: new_id("m"),
            session_id: "s_1".to_owned(),
            turn_id: "t_1".to_owned(),
            seq: 0,
            created_at: now(),
            status,
            compacted: false,
            step: None,
            kind,
        }
    }

    fn conversation() -> Conversation {
        Conversation {
            id: "c_1".to_owned(),
            title: "Fix the build".to_owned(),
            title_custom: false,
            created_at: now(),
            updated_at: now(),
            archived: false,
            status: ConversationStatus::Idle,
            cwd: "/work".to_owned(),
            agent: "default".to_owned(),
            model: "demo".to_owned(),
            root_session_id: "s_1".to_owned(),
            forked_from: None,
            last_turn: None,
            mcp: Default::default(),
            budget: Default::default(),
        }
    }

    #[test]
    fn an_edit_reads_as_its_diff() {
        let items = [item(
            ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: "c".to_owned(),
                name: "edit_file".to_owned(),
                arguments: serde_json::json!({
                    "path": "src/lib.rs", "old_string": "let x = 1;\n", "new_string": "let x = 2;\n"
                }),
                output: "edited src/lib.rs".to_owned(),
                exit_code: None,
                images: Vec::new(),
                denied: false,
                files: None,
            },
            ItemStatus::Completed,
        )];
        let document = markdown(&conversation(), &items);
        assert!(
            document.contains("`src/lib.rs` edited\n\n```diff\n-let x = 1;\n+let x = 2;\n```\n"),
            "{document}"
        );
        assert!(!document.contains("old_string"), "{document}");
    }

    #[test]
    fn the_hooks_that_ran_read_as_lines_under_their_item() {
        let run = |outcome, detail: &str| crate::domain::HookRun {
            hook: "hooks.user_message[0]".to_owned(),
            outcome,
            ms: 3,
            detail: Some(detail.to_owned()),
            arguments_before: None,
        };
        let items = [item(
            ItemKind::UserMessage {
                hooks: vec![run(
                    crate::domain::HookOutcome::Context,
                    "Ticket\nABC-1 is open.",
                )],
                text: "How are things?".to_owned(),
                source: MessageSource::User,
                from_session_id: None,
                images: Vec::new(),
                command: None,
            },
            ItemStatus::Completed,
        )];
        let document = markdown(&conversation(), &items);
        assert!(
            document.contains(
                "How are things?\n\n- Hook hooks.user_message[0] · added context · 3 ms — \
                 Ticket ABC-1 is open.\n"
            ),
            "{document}"
        );
    }

    #[test]
    fn a_conversation_reads_as_markdown_and_no_content_closes_its_fence() {
        let conversation = conversation();
        let items = [
            item(
                ItemKind::UserMessage {
                    hooks: Vec::new(),
                    text: "Why does it fail?".to_owned(),
                    source: MessageSource::User,
                    from_session_id: None,
                    images: Vec::new(),
                    command: None,
                },
                ItemStatus::Completed,
            ),
            item(
                ItemKind::Reasoning {
                    text: "private thoughts".to_owned(),
                    state: None,
                },
                ItemStatus::Completed,
            ),
            item(
                ItemKind::ToolCall {
                    hooks: Vec::new(),
                    call_id: "c".to_owned(),
                    name: "shell".to_owned(),
                    arguments: serde_json::json!({"command": "cat notes.md"}),
                    output: "```\nnot the end\n```\n".to_owned(),
                    exit_code: Some(0),
                    images: Vec::new(),
                    denied: false,
                    files: Some(Box::new(crate::domain::FileChanges {
                        added: vec!["notes.md".to_owned()],
                        ..Default::default()
                    })),
                },
                ItemStatus::Completed,
            ),
            item(
                ItemKind::AgentMessage {
                    text: "A **missing** file.".to_owned(),
                },
                ItemStatus::Completed,
            ),
            item(
                ItemKind::Plan {
                    explanation: Some("Find it,\nthen fix it.".to_owned()),
                    steps: vec![
                        crate::domain::PlanStep {
                            step: "Read the log".to_owned(),
                            status: PlanStepStatus::Completed,
                        },
                        crate::domain::PlanStep {
                            step: "Fix the path".to_owned(),
                            status: PlanStepStatus::InProgress,
                        },
                        crate::domain::PlanStep {
                            step: "Run the build".to_owned(),
                            status: PlanStepStatus::Pending,
                        },
                    ],
                },
                ItemStatus::Completed,
            ),
            item(
                ItemKind::Notice {
                    text: "The user interrupted the previous turn.".to_owned(),
                },
                ItemStatus::Completed,
            ),
        ];
        let document = markdown(&conversation, &items);
        assert!(
            document.starts_with("# Fix the build\n\nConversation `c_1`"),
            "{document}"
        );
        assert!(
            document.contains("\n## You\n\nWhy does it fail?\n"),
            "{document}"
        );
        assert!(!document.contains("private thoughts"), "{document}");
        assert!(
            document.contains("\n### Tool `shell` · exit 0\n"),
            "{document}"
        );
        // The output's own fence is inside a longer one.
        assert!(
            document.contains("````text\n```\nnot the end\n```\n````\n"),
            "{document}"
        );
        assert!(
            document.contains("\n## Agent\n\nA **missing** file.\n"),
            "{document}"
        );
        assert!(
            document.contains(
                "\n### Plan\n\nFind it, then fix it.\n\n- [x] Read the log\n\
                 - [ ] Fix the path _(in progress)_\n- [ ] Run the build\n"
            ),
            "{document}"
        );
        assert!(
            document.ends_with("\n> The user interrupted the previous turn.\n"),
            "{document}"
        );
    }
}
