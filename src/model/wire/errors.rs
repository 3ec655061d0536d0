//! How a provider's failure becomes a `ModelError`: transient (worth retrying) or fatal, by HTTP
//! status or by the code of an error event, with the wait `Retry-After` asks for and the
//! provider's own message quoted.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::model::ModelError;

/// Provider text quoted in an error is cut to this many characters.
const QUOTE_CHARS: usize = 500;

/// The error for an unsuccessful HTTP status: 408, 409, 429 and 5xx are worth retrying (the
/// turn retries transient model-call errors), any other status is not; a 400, 413 or 422 that
/// says the request exceeds the context window is `ContextOverflow`.
pub fn status_error(status: StatusCode, retry_after: Option<Duration>, body: &str) -> ModelError {
    let message = format!(
        "provider answered {}: {}",
        status_text(status),
        provider_message(body)
    );
    if matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error() {
        ModelError::Transient {
            message,
            retry_after,
        }
    } else if matches!(status.as_u16(), 400 | 413 | 422) && refused_as_too_long(body) {
        ModelError::ContextOverflow(message)
    } else {
        ModelError::Fatal(message)
    }
}

/// Whether a refusal's body says the request is larger than the model's context window: its
/// error code, or the provider's own message (never the rest of the body, which may echo the
/// request's text).
fn refused_as_too_long(body: &str) -> bool {
    let code = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|json| json["error"]["code"].as_str().map(str::to_owned));
    code.as_deref().is_some_and(says_context_overflow)
        || says_context_overflow(&provider_message(body))
}

/// Whether a provider's words say the request is larger than the model's context window:
/// OpenAI's code `context_length_exceeded` ("maximum context length is … tokens"), Anthropic's
/// "prompt is too long: … tokens > … maximum" and "input length and `max_tokens` exceed
/// context limit", and the compatible servers' "maximum context length" / "context window".
fn says_context_overflow(text: &str) -> bool {
    const SIGNS: &[&str] = &[
        "context_length_exceeded",
        "maximum context length",
        "context length exceeded",
        "prompt is too long",
        "exceed context limit",
        "exceeds the context window",
        "exceeds the model's context window",
        "input is too long for the model",
    ];
    let text = text.to_ascii_lowercase();
    SIGNS.iter().any(|sign| text.contains(sign))
}

/// A status as an error names it: its code and reason. 529 is no HTTP standard's, so it has
/// no reason of its own; Anthropic answers it when overloaded.
pub fn status_text(status: StatusCode) -> String {
    let reason = match status.as_u16() {
        529 => Some("Overloaded"),
        _ => status.canonical_reason(),
    };
    match reason {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The provider's own explanation in an error body: `error.message` (OpenAI, Anthropic and
/// most compatible servers), a few other common shapes, else the text itself.
pub fn provider_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<Value>(body) {
        let candidates = [
            &json["error"]["message"],
            &json["error"],
            &json["message"],
            &json["detail"],
        ];
        if let Some(message) = candidates.iter().find_map(|value| value.as_str()) {
            return quote(message);
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return "(no message)".to_owned();
    }
    quote(body)
}

/// The wait a provider asks for: OpenAI's `retry-after-ms`, else `Retry-After` in seconds or
/// as an HTTP date (a date in the past means now).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1000.0);
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return duration_from_secs(seconds);
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let date = SystemTime::from(date);
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

fn duration_from_secs(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds.max(0.0)).ok()
}

/// An error event inside a stream the provider had accepted (HTTP 200). One that says the
/// request exceeds the context window is `ContextOverflow`; rate limits, overloads and server
/// errors are transient; any other named error is not; an error without a code is taken as
/// transient, since the request itself was accepted.
pub fn stream_error(code: Option<&str>, message: Option<&str>) -> ModelError {
    let too_long =
        code.is_some_and(says_context_overflow) || message.is_some_and(says_context_overflow);
    let message = format!(
        "the provider reported an error{}: {}",
        code.map(|code| format!(" ({code})")).unwrap_or_default(),
        quote(message.unwrap_or("(no message)"))
    );
    if too_long {
        return ModelError::ContextOverflow(message);
    }
    let Some(code) = code else {
        return ModelError::transient(message);
    };
    if let Ok(status) = code.parse::<u16>()
        && let Ok(status) = StatusCode::from_u16(status)
    {
        return match status_error(status, None, "") {
            ModelError::Transient { .. } => ModelError::transient(message),
            ModelError::Fatal(_) | ModelError::ContextOverflow(_) => ModelError::Fatal(message),
        };
    }
    const TRANSIENT: &[&str] = &[
        "overloaded",
        "rate_limit",
        "server_error",
        "api_error",
        "timeout",
        "unavailable",
        "internal",
    ];
    let code = code.to_ascii_lowercase();
    if TRANSIENT.iter().any(|word| code.contains(word)) {
        ModelError::transient(message)
    } else {
        ModelError::Fatal(message)
    }
}

/// An error and its causes on one line: reqwest's own message rarely says what went wrong.
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Text quoted in an error, cut to a readable length.
pub(super) fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if text.chars().count() > QUOTE_CHARS {
        quoted.push('…');
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_by_the_retry_rule() {
        let transient = [408, 409, 429, 500, 502, 503, 504, 529];
        let fatal = [400, 401, 403, 404, 413, 422];
        for status in transient {
            let error = status_error(StatusCode::from_u16(status).unwrap(), None, "");
            assert!(
                matches!(error, ModelError::Transient { .. }),
                "{status}: {error:?}"
            );
        }
        for status in fatal {
            let error = status_error(StatusCode::from_u16(status).unwrap(), None, "");
            assert!(matches!(error, ModelError::Fatal(_)), "{status}: {error:?}");
        }
    }

    /// The providers' ways of saying a request exceeds the context window, in a refusal and in
    /// a stream's error event; other refusals stay fatal.
    #[test]
    fn a_request_over_the_context_window_is_told_apart() {
        let overflows = [
            r#"{"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "code": "context_length_exceeded"}}"#,
            r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            r#"{"object": "error", "message": "This model's maximum context length is 32768 tokens.", "code": 400}"#,
            r#"{"error": {"message": "Your input exceeds the context window of this model."}}"#,
        ];
        for body in overflows {
            let error = status_error(StatusCode::BAD_REQUEST, None, body);
            assert!(
                matches!(error, ModelError::ContextOverflow(_)),
                "{body}: {error:?}"
            );
        }
        let refused = [
            r#"{"error": {"message": "Invalid value for 'model'"}}"#,
            // The words in the request's text, echoed beside the message, do not count.
            r#"{"error": {"message": "messages[0]: invalid type"}, "input": "what is the maximum context length?"}"#,
        ];
        for body in refused {
            assert!(
                matches!(
                    status_error(StatusCode::BAD_REQUEST, None, body),
                    ModelError::Fatal(_)
                ),
                "{body}"
            );
        }
        let anthropic = r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000"}}"#;
        assert!(matches!(
            status_error(StatusCode::BAD_REQUEST, None, anthropic),
            ModelError::ContextOverflow(_)
        ));
        // A gateway's 503 that mentions a context length is still worth retrying.
        assert!(matches!(
            status_error(StatusCode::SERVICE_UNAVAILABLE, None, overflows[0]),
            ModelError::Transient { .. }
        ));
        assert!(matches!(
            stream_error(
                Some("context_length_exceeded"),
                Some("Your input exceeds the context window of this model.")
            ),
            ModelError::ContextOverflow(_)
        ));
        assert!(matches!(
            stream_error(Some("invalid_prompt"), Some("bad prompt")),
            ModelError::Fatal(_)
        ));
    }

    #[test]
    fn the_provider_message_is_quoted() {
        let check = |body: &str, expected: &str| {
            assert_eq!(provider_message(body), expected, "{body}");
        };
        check(
            r#"{"error": {"message": "bad model", "type": "invalid_request_error"}}"#,
            "bad model",
        );
        check(
            r#"{"type": "error", "error": {"type": "x", "message": "too long"}}"#,
            "too long",
        );
        check(r#"{"error": "plain"}"#, "plain");
        check(
            r#"{"object": "error", "message": "vllm says no"}"#,
            "vllm says no",
        );
        check("  Bad Gateway\n", "Bad Gateway");
        check("", "(no message)");
        let long = "x".repeat(QUOTE_CHARS + 10);
        assert_eq!(provider_message(&long).chars().count(), QUOTE_CHARS + 1);
    }

    #[test]
    fn a_rejection_carries_status_and_message() {
        let error = status_error(
            StatusCode::BAD_REQUEST,
            None,
            r#"{"error": {"message": "no such model"}}"#,
        );
        assert_eq!(
            error,
            ModelError::Fatal("provider answered 400 Bad Request: no such model".into())
        );
    }

    #[test]
    fn an_overload_reads_as_one_and_is_retried() {
        let error = status_error(
            StatusCode::from_u16(529).unwrap(),
            None,
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        );
        assert_eq!(
            error,
            ModelError::transient("provider answered 529 Overloaded: Overloaded")
        );
        assert_eq!(status_text(StatusCode::from_u16(599).unwrap()), "599");
        assert_eq!(
            status_text(StatusCode::TOO_MANY_REQUESTS),
            "429 Too Many Requests"
        );
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37 UTC
        let check = |headers: &[(&'static str, &str)], expected: Option<Duration>| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.insert(*name, value.parse().unwrap());
            }
            assert_eq!(retry_after(&map, now), expected, "{headers:?}");
        };
        check(&[], None);
        check(&[("retry-after", "0")], Some(Duration::ZERO));
        check(&[("retry-after", "7")], Some(Duration::from_secs(7)));
        check(&[("retry-after", "1.5")], Some(Duration::from_millis(1500)));
        check(
            &[("retry-after", "Sun, 06 Nov 1994 08:49:47 GMT")],
            Some(Duration::from_secs(10)),
        );
        check(
            &[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")],
            Some(Duration::ZERO),
        );
        check(&[("retry-after", "soon")], None);
        check(
            &[("retry-after", "3"), ("retry-after-ms", "250")],
            Some(Duration::from_millis(250)),
        );
    }

    #[test]
    fn stream_errors_are_transient_only_when_retrying_can_help() {
        let transient = [
            None,
            Some("overloaded_error"),
            Some("rate_limit_exceeded"),
            Some("server_error"),
            Some("api_error"),
            Some("502"),
        ];
        for code in transient {
            let error = stream_error(code, Some("m"));
            assert!(
                matches!(error, ModelError::Transient { .. }),
                "{code:?}: {error:?}"
            );
        }
        for code in ["invalid_request_error", "invalid_prompt", "400"] {
            let error = stream_error(Some(code), Some("m"));
            assert!(matches!(error, ModelError::Fatal(_)), "{code}: {error:?}");
        }
    }
}
