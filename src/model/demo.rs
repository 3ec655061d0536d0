//! The built-in offline model `demo`: deterministic, needs no network or key, and obeys
//! directives on lines of the latest user message so every feature can be tried by hand and in
//! tests. It is a demonstration aid, not a language model.
//!
//! - `/shell CMD` calls the `shell` tool, `/background CMD` calls it to start CMD as a
//!   background process, `/escalate WHY: CMD` calls it asking to run outside the sandbox (a
//!   user must approve), `/read PATH` calls `read_file`, `/write PATH: TEXT`
//!   calls `write_file` (`/write PATH` alone on its line writes the lines after it, verbatim),
//!   `/spawn AGENT: TASK` calls `spawn_agent` (each once per user message);
//! - `/echo` answers with the rest of the message (after `/echo` on its line, and the lines
//!   after it) verbatim, as Markdown, so rendering can be tried without a provider;
//! - `/sleep MS` streams the reply slowly, one chunk every MS milliseconds;
//! - `/fail N` fails the next N calls for that message with a transient error.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::client::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, TokenUsage};
use super::tokens::Tokenizer;
use crate::domain::{Item, ItemKind};

/// The directives, by name: a line `/NAME …` of the latest user message.
pub const DIRECTIVES: [&str; 9] = [
    "shell",
    "background",
    "escalate",
    "read",
    "write",
    "echo",
    "spawn",
    "sleep",
    "fail",
];

/// Whether `line` is one of the directives (the terminal client and titles tell them apart).
pub fn is_directive(line: &str) -> bool {
    line.strip_prefix('/')
        .and_then(|rest| rest.split_whitespace().next())
        .is_some_and(|word| DIRECTIVES.contains(&word))
}

#[derive(Debug, Default)]
pub struct DemoModel {
    /// How many `/fail` failures each user message has used so far.
    failures: Mutex<HashMap<String, u32>>,
}

/// Characters per streamed chunk: small enough that a reply visibly streams.
const CHUNK_CHARS: usize = 12;

impl ModelClient for DemoModel {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let plan = match self.plan(&request) {
            Ok(plan) => plan,
            Err(error) => return futures::stream::once(async move { Err(error) }).boxed(),
        };
        // Counted as a provider would: the whole request in, what it wrote out (with the
        // encoding the meter uses for it, so a report and an estimate agree).
        let tokenizer = Tokenizer::default();
        let input_tokens = tokenizer.request_overhead(
            crate::config::Protocol::Demo,
            request.instructions.as_deref(),
            &request.tools,
        ) + request
            .history
            .iter()
            .map(|item| {
                let (written, added) = tokenizer.item_tokens(item);
                written + added
            })
            .sum::<u64>();
        let Plan { events, delay } = plan;
        let output_tokens: u64 = events
            .iter()
            .map(|event| match event {
                ModelEvent::TextDelta(text) => tokenizer.count(text),
                ModelEvent::ToolCall { arguments, .. } => tokenizer.count(&arguments.to_string()),
                _ => 0,
            })
            .sum();
        let mut all = events;
        all.push(ModelEvent::Usage(TokenUsage {
            input_tokens,
            output_tokens,
            ..TokenUsage::default()
        }));
        all.push(ModelEvent::Done);
        futures::stream::iter(all)
            .then(move |event| async move {
                if let (Some(delay), ModelEvent::TextDelta(_)) = (delay, &event) {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed()
    }
}

struct Plan {
    events: Vec<ModelEvent>,
    delay: Option<Duration>,
}

impl DemoModel {
    fn plan(&self, request: &ModelRequest) -> Result<Plan, ModelError> {
        if request.compaction {
            return Ok(reply(compaction_summary(&request.history), None));
        }
        let Some((index, message_id, text)) = latest_user_message(&request.history) else {
            return Ok(reply(
                "Demo model: there is no user message to answer.".to_owned(),
                None,
            ));
        };
        let mut delay = None;
        let mut tool_calls = Vec::new();
        let mut echo = None;
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().map(|line| line.trim()).enumerate() {
            // The lines after it, verbatim (indentation and blank lines kept).
            let rest = || lines[n + 1..].join("\n");
            if let Some(count) = line.strip_prefix("/fail ") {
                let allowed: u32 = count.trim().parse().unwrap_or(0);
                let mut failures = self.failures.lock().expect("demo lock");
                let used = failures.entry(message_id.to_owned()).or_default();
                if *used < allowed {
                    *used += 1;
                    return Err(ModelError::transient(format!(
                        "demo model: simulated transient failure {} of {allowed}",
                        *used
                    )));
                }
            } else if let Some(ms) = line.strip_prefix("/sleep ") {
                delay = ms.trim().parse().ok().map(Duration::from_millis);
            } else if let Some(command) = line.strip_prefix("/shell ") {
                tool_calls.push(("shell", json!({ "command": command })));
            } else if let Some(command) = line.strip_prefix("/background ") {
                tool_calls.push(("shell", json!({ "command": command, "background": true })));
            } else if let Some(spec) = line.strip_prefix("/escalate ") {
                let (why, command) = spec.split_once(':').unwrap_or(("", spec));
                tool_calls.push((
                    "shell",
                    json!({ "command": command.trim(), "escalate": why.trim() }),
                ));
            } else if let Some(spec) = line.strip_prefix("/write ") {
                if let Some((path, content)) = spec.split_once(':') {
                    tool_calls.push((
                        "write_file",
                        json!({ "path": path.trim(), "content": content.trim_start() }),
                    ));
                } else {
                    let mut content = rest();
                    content.push('\n');
                    tool_calls.push((
                        "write_file",
                        json!({ "path": spec.trim(), "content": content }),
                    ));
                    break;
                }
            } else if line == "/echo" || line.starts_with("/echo ") {
                let first = line["/echo".len()..].trim_start();
                let rest = rest();
                echo = Some(match (first.is_empty(), rest.is_empty()) {
                    (true, _) => rest,
                    (false, true) => first.to_owned(),
                    (false, false) => format!("{first}\n{rest}"),
                });
                break;
            } else if let Some(path) = line.strip_prefix("/read ") {
                tool_calls.push(("read_file", json!({ "path": path.trim() })));
            } else if let Some(spec) = line.strip_prefix("/spawn ") {
                let (agent, task) = spec.split_once(':').unwrap_or(("default", spec));
                tool_calls.push((
                    "spawn_agent",
                    json!({ "agent": agent.trim(), "task": task.trim() }),
                ));
            }
        }
        // Tool calls are made once: after their results come back, the model answers.
        let results: Vec<&Item> = request.history[index + 1..]
            .iter()
            .filter(|item| matches!(item.kind, ItemKind::ToolCall { .. }))
            .collect();
        if !tool_calls.is_empty() && results.is_empty() {
            let events = tool_calls
                .into_iter()
                .enumerate()
                .map(|(n, (name, arguments))| ModelEvent::ToolCall {
                    call_id: format!("demo_{message_id}_{n}"),
                    name: name.to_owned(),
                    arguments,
                })
                .collect();
            return Ok(Plan { events, delay });
        }
        if let Some(echo) = echo.filter(|echo| !echo.trim().is_empty()) {
            return Ok(reply(echo, delay));
        }
        let mut answer = format!(
            "Demo model (offline, built in): you said \"{}\".",
            first_line_excerpt(text)
        );
        if let ItemKind::UserMessage { images, .. } = &request.history[index].kind
            && !images.is_empty()
        {
            answer.push_str(&describe_images(images));
        }
        for result in results {
            if let ItemKind::ToolCall {
                name,
                output,
                exit_code,
                ..
            } = &result.kind
            {
                let status = exit_code.map_or(String::new(), |code| format!(" (exit code {code})"));
                answer.push_str(&format!(
                    " The {name} tool returned {} bytes{status}.",
                    output.len()
                ));
            }
        }
        answer.push_str(" Configure a real model in config.toml to get real answers.");
        Ok(reply(answer, delay))
    }
}

/// A deterministic summary of what a compaction request carries (its last item is the request
/// to summarize, not part of the conversation).
fn compaction_summary(history: &[Item]) -> String {
    let conversation = &history[..history.len().saturating_sub(1)];
    let mut asked = Vec::new();
    let (mut answers, mut tools) = (0, 0);
    let mut earlier = None;
    for item in conversation {
        match &item.kind {
            ItemKind::UserMessage { text, .. } => asked.push(first_line_excerpt(text)),
            ItemKind::AgentMessage { .. } => answers += 1,
            ItemKind::ToolCall { .. } => tools += 1,
            ItemKind::Summary { text, .. } => earlier = Some(first_line_excerpt(text)),
            ItemKind::Reasoning { .. } | ItemKind::Notice { .. } | ItemKind::Plan { .. } => {}
        }
    }
    let mut summary = format!(
        "Summary by the demo model of {} earlier items.",
        conversation.len()
    );
    if let Some(earlier) = earlier {
        summary.push_str(&format!(" It folds in an earlier summary (\"{earlier}\")."));
    }
    if !asked.is_empty() {
        summary.push_str(&format!(" The user said: \"{}\".", asked.join("\"; \"")));
    }
    summary.push_str(&format!(
        " The agent answered {answers} times and ran {tools} tool calls."
    ));
    summary
}

fn reply(text: String, delay: Option<Duration>) -> Plan {
    let chars: Vec<char> = text.chars().collect();
    let events = chars
        .chunks(CHUNK_CHARS)
        .map(|chunk| ModelEvent::TextDelta(chunk.iter().collect()))
        .collect();
    Plan { events, delay }
}

/// The position, id and text of the latest user message in the history.
fn latest_user_message(history: &[Item]) -> Option<(usize, &str, &str)> {
    history
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, item)| match &item.kind {
            ItemKind::UserMessage { text, .. } => Some((index, item.id.as_str(), text.as_str())),
            _ => None,
        })
}

/// What the demo model can say of attached images without looking: their number, types and
/// sizes, so that sending images can be tried offline.
fn describe_images(images: &[crate::domain::Image]) -> String {
    let each: Vec<String> = images
        .iter()
        .map(|image| {
            let kind = image
                .media_type
                .strip_prefix("image/")
                .unwrap_or(&image.media_type)
                .to_uppercase();
            match (&image.data, &image.url) {
                (Some(data), _) => {
                    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
                    let bytes = (data.len() / 4 * 3).saturating_sub(padding);
                    format!("{kind}, {}", size(bytes))
                }
                (None, Some(_)) => format!("{kind}, linked"),
                (None, None) => kind,
            }
        })
        .collect();
    let (count, them) = match images.len() {
        1 => ("an image".to_owned(), "it"),
        n => (format!("{n} images"), "them"),
    };
    format!(
        " You attached {count} ({}); the demo model cannot see {them}.",
        each.join("; ")
    )
}

/// `70 bytes`, `1.2 KB`, `3.4 MB`.
fn size(bytes: usize) -> String {
    match bytes {
        0..1000 => format!("{bytes} bytes"),
        1000..1_000_000 => format!("{:.1} KB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

fn first_line_excerpt(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut excerpt: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        excerpt.push('…');
    }
    excerpt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_web_uis_hint_names_every_directive() {
        let page = include_str!("../../web/index.html");
        let hint = page
            .lines()
            .find(|line| line.contains("obeys directives"))
            .expect("the demo hint");
        for name in DIRECTIVES {
            assert!(
                hint.contains(&format!("<code>/{name}")),
                "the hint does not name /{name}"
            );
        }
    }
    use crate::domain::{ItemStatus, MessageSource};

    fn plan(text: &str) -> Plan {
        let message = super::super::wire::testing::item(
            "t1",
            ItemKind::UserMessage {
                hooks: Vec::new(),
                text: text.to_owned(),
                source: MessageSource::User,
                from_session_id: None,
                images: Vec::new(),
                command: None,
            },
            ItemStatus::Completed,
        );
        let request = ModelRequest {
            model: "demo".to_owned(),
            instructions: None,
            history: vec![message],
            tools: Vec::new(),
            max_output_tokens: 1000,
            reasoning_context: None,
            cache_key: None,
            compaction: false,
        };
        DemoModel::default().plan(&request).unwrap()
    }

    fn text(plan: &Plan) -> String {
        plan.events
            .iter()
            .map(|event| match event {
                ModelEvent::TextDelta(text) => text.as_str(),
                _ => "",
            })
            .collect()
    }

    #[test]
    fn attached_images_are_described_by_type_and_size() {
        let image =
            |media_type: &str, data: Option<&str>, url: Option<&str>| crate::domain::Image {
                media_type: media_type.to_owned(),
                data: data.map(str::to_owned),
                url: url.map(str::to_owned),
            };
        // 8 base64 characters with one `=` of padding: 5 bytes.
        assert_eq!(
            describe_images(&[image("image/png", Some("aGVsbG8="), None)]),
            " You attached an image (PNG, 5 bytes); the demo model cannot see it."
        );
        let big = "A".repeat(4 * 500_000);
        assert_eq!(
            describe_images(&[
                image("image/webp", Some(&big), None),
                image("image/jpeg", None, Some("https://example.com/a.jpg")),
            ]),
            " You attached 2 images (WEBP, 1.5 MB; JPEG, linked); the demo model cannot see them."
        );
    }

    #[test]
    fn echo_answers_the_rest_of_the_message_verbatim() {
        let markdown = "# Title\n\n- one\n  - nested\n\n```rust\nfn main() {}\n```";
        assert_eq!(text(&plan(&format!("/echo\n{markdown}"))), markdown);
        assert_eq!(text(&plan("/echo **bold** line")), "**bold** line");
        assert_eq!(text(&plan("/echo first\n  second")), "first\n  second");
    }

    #[test]
    fn write_alone_on_its_line_writes_the_lines_after_it() {
        let plan = plan("/write notes/todo.md\n# Todo\n\n  - indented\n");
        let [
            ModelEvent::ToolCall {
                name, arguments, ..
            },
        ] = plan.events.as_slice()
        else {
            panic!("{:?}", plan.events);
        };
        assert_eq!(name, "write_file");
        assert_eq!(arguments["path"], "notes/todo.md");
        assert_eq!(arguments["content"], "# Todo\n\n  - indented\n");
        // The one-line form is unchanged.
        let plan = super::tests::plan("/write a.txt: hello");
        let [ModelEvent::ToolCall { arguments, .. }] = plan.events.as_slice() else {
            panic!("{:?}", plan.events);
        };
        assert_eq!(arguments["content"], "hello");
    }
}
