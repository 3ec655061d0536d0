//! The title an agent's `title_model` writes for a conversation after its first turn: one
//! short model call with the first message and the answer, no tools, its text cleaned into a
//! title by the same rules as the automatic one. A failure leaves the title as it was.

use std::sync::Arc;
use std::time::Duration;

use crate::domain::request_item;
use crate::model::{ModelClient, ModelRequest};

/// What the title model is asked.
pub const INSTRUCTIONS: &str = "Write a title for the conversation below: at most six \
    words, saying what it is about, in the language of the user's message. Answer with the \
    title only: no quotes, no period, no Markdown.";

/// The most of the first message and of the answer the title model reads.
const READ_CHARS: usize = 2_000;
/// How long the title model may take, all told.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Asks the title model for a title; `Err` says why there is none.
pub async fn write(
    client: Arc<dyn ModelClient>,
    model_name: String,
    first_message: &str,
    answer: &str,
) -> Result<String, String> {
    let cut = |text: &str| text.chars().take(READ_CHARS).collect::<String>();
    let text = format!(
        "The user's first message:\n{}\n\nThe agent's answer:\n{}",
        cut(first_message),
        cut(answer)
    );
    let request = ModelRequest {
        model: model_name,
        instructions: Some(INSTRUCTIONS.to_owned()),
        history: vec![request_item(text, String::new(), String::new())],
        tools: Vec::new(),
        max_output_tokens: 64,
        reasoning_context: None,
        cache_key: None,
        compaction: false,
    };
    let answered = super::one_shot::write(client, request, TIMEOUT, "the title model")
        .await?
        .text;
    cleaned(&answered).ok_or_else(|| "the title model wrote no title".to_owned())
}

/// A model's answer as a title: its first line with text, without quotes around it or a
/// period after it, cut as the automatic title is.
fn cleaned(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let line = line
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '“' | '”' | '«' | '»' | '`'))
        .trim_end_matches('.')
        .trim();
    let title = super::title::auto_title(line);
    (title != "Untitled" && !title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::cleaned;

    #[test]
    fn an_answer_becomes_a_title_without_its_quotes_and_period() {
        assert_eq!(
            cleaned("\n\"Parser refactor plan.\"\n").as_deref(),
            Some("Parser refactor plan")
        );
        assert_eq!(
            cleaned("**Fix the build**").as_deref(),
            Some("Fix the build")
        );
        assert_eq!(cleaned("   \n "), None);
    }
}
