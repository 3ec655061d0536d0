//! A tool result as the model and clients get it: its text blocks in order, a short note for
//! each image, audio clip or resource (with its type and size), and the structured content as
//! JSON when the server sent no text; the images themselves beside the text. `isError` makes
//! the call a tool error.

use serde_json::Value;

use super::tool::{CallOutcome, CallStatus};
use crate::domain::Image;

/// The outcome of a finished `tools/call`, from its result as JSON (read as JSON so that
/// content types newer than this code still show as what they are).
pub fn outcome(result: &Value) -> CallOutcome {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut has_text = false;
    for block in result["content"].as_array().into_iter().flatten() {
        match block["type"].as_str().unwrap_or("") {
            "text" => {
                has_text = true;
                parts.push(block["text"].as_str().unwrap_or("").to_owned());
            }
            kind @ ("image" | "audio") => {
                let media_type = block["mimeType"].as_str().unwrap_or("unknown type");
                let data = block["data"].as_str().unwrap_or("");
                parts.push(format!(
                    "[{kind}: {media_type}, {} bytes]",
                    base64_len(data)
                ));
                if kind == "image" && !data.is_empty() {
                    images.push(Image {
                        media_type: media_type.to_owned(),
                        data: Some(data.to_owned()),
                        url: None,
                    });
                }
            }
            "resource" => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or("");
                match resource["text"].as_str() {
                    Some(text) => {
                        has_text = true;
                        parts.push(format!("[resource {uri}]\n{text}"));
                    }
                    None => parts.push(format!(
                        "[resource {uri}: {}, {} bytes]",
                        resource["mimeType"].as_str().unwrap_or("unknown type"),
                        base64_len(resource["blob"].as_str().unwrap_or(""))
                    )),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource link: {} {}]",
                block["name"].as_str().unwrap_or(""),
                block["uri"].as_str().unwrap_or("")
            )),
            other => parts.push(format!("[{other} content]")),
        }
    }
    if let Some(structured) = result.get("structuredContent").filter(|_| !has_text) {
        parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    let text = parts.join("\n");
    if result["isError"].as_bool() == Some(true) {
        let text = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        return CallOutcome {
            text,
            status: CallStatus::Failed,
            images,
        };
    }
    CallOutcome {
        text,
        status: CallStatus::Completed,
        images,
    }
}

/// The decoded size of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_images_and_structured_content() {
        let result = json!({
            "content": [
                {"type": "text", "text": "Here it is:"},
                {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
                {"type": "resource_link", "name": "notes", "uri": "file:///n.txt"},
            ],
            "structuredContent": {"ignored": "text was given"},
        });
        let outcome = outcome(&result);
        assert_eq!(outcome.status, CallStatus::Completed);
        assert_eq!(
            outcome.text,
            "Here it is:\n[image: image/png, 5 bytes]\n[resource link: notes file:///n.txt]"
        );
        assert_eq!(outcome.images.len(), 1);
        assert_eq!(outcome.images[0].media_type, "image/png");
        assert_eq!(outcome.images[0].data.as_deref(), Some("aGVsbG8="));
        let structured = super::outcome(&json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(structured.text, "{\n  \"sum\": 3\n}");
    }

    #[test]
    fn an_error_result_is_a_failed_call() {
        let failed =
            outcome(&json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}));
        assert_eq!(failed.status, CallStatus::Failed);
        assert_eq!(failed.text, "bad input");
        let silent = outcome(&json!({"isError": true}));
        assert_eq!(silent.text, "the tool reported an error without a message");
    }
}
