//! axum's own rejections answer in plain text: a path segment that is not UTF-8, a body that
//! could not be read (too long when sent in chunks, or stalled past the timeout). The API
//! promises its JSON error shape for every error, so this middleware rewrites any error answer
//! that is not JSON into that shape, keeping its status and headers and using its text as the
//! message. Our own errors are JSON already and pass untouched, as do successful answers
//! (event streams among them).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// Plain error texts are a line or two; more is cut.
const MAX_PLAIN_ERROR_BYTES: usize = 4096;

pub async fn as_json(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_PLAIN_ERROR_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let (code, message) = code_and_message(status, text);
    let body = serde_json::json!({ "error": { "code": code, "message": message } });
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// The API's code for a status, and a message: the plain text, or a sentence when there is
/// none. A server error's text is never shown (it could hold internal details).
fn code_and_message(status: StatusCode, text: String) -> (&'static str, String) {
    let code = match status {
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        status if status.is_server_error() => "internal",
        _ => "invalid_request",
    };
    let message = if status.is_server_error() {
        "internal error; see the service log".to_owned()
    } else if status == StatusCode::PAYLOAD_TOO_LARGE {
        // axum says "length limit exceeded"; the limit is what the client needs to know.
        format!(
            "the request body is larger than {} MiB",
            super::MAX_BODY_BYTES / (1024 * 1024)
        )
    } else if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned()
    } else {
        text
    };
    (code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_get_the_apis_codes_and_server_errors_hide_their_text() {
        assert_eq!(
            code_and_message(StatusCode::BAD_REQUEST, "Invalid URL".to_owned()),
            ("invalid_request", "Invalid URL".to_owned())
        );
        assert_eq!(
            code_and_message(StatusCode::PAYLOAD_TOO_LARGE, String::new()),
            (
                "too_large",
                "the request body is larger than 16 MiB".to_owned()
            )
        );
        assert_eq!(
            code_and_message(StatusCode::REQUEST_TIMEOUT, String::new()),
            ("invalid_request", "Request Timeout".to_owned())
        );
        assert_eq!(
            code_and_message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "at src/x.rs:1".to_owned()
            ),
            ("internal", "internal error; see the service log".to_owned())
        );
    }
}
