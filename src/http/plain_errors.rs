//! axum's own rejections answer in plain text: a path segment that is not UTF-8, a body that
//! could not be read (too long when sent in chunks, or stalled past the timeout). The API
//! promises its JSON error shape for every error (`docs/api.md`), so this middleware turns any
//! error answer that is not JSON into the [`ApiError`] of its status, using its text as the
//! message and keeping its other headers (`Allow`, say). Our own errors are JSON already and
//! pass untouched, as do successful answers (event streams among them).

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

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
    let mut answer = api_error(status, text).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    answer.headers_mut().extend(parts.headers);
    answer
}

/// The API's error for a status and axum's text (or the status's reason when there is none).
/// A server error's text is never shown: `ApiError::Internal` answers a generic message.
fn api_error(status: StatusCode, text: String) -> ApiError {
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned()
    } else {
        text
    };
    match status {
        StatusCode::UNAUTHORIZED => ApiError::Unauthorized(message),
        StatusCode::FORBIDDEN => ApiError::Forbidden(message),
        StatusCode::NOT_FOUND => ApiError::NotFound(message),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed(message),
        // axum says "length limit exceeded"; the limit is what the client needs to know.
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(format!(
            "the request body is larger than {} MiB",
            super::state::MAX_BODY_BYTES / (1024 * 1024)
        )),
        StatusCode::SERVICE_UNAVAILABLE => ApiError::Unavailable(message),
        status if status.is_server_error() => ApiError::Internal(message),
        _ => ApiError::Invalid(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::errors::ErrorCode;

    #[test]
    fn statuses_get_the_apis_errors_and_server_errors_hide_their_text() {
        let answer = |status, text: &str| {
            let error = api_error(status, text.to_owned());
            (error.code(), error.to_string())
        };
        assert_eq!(
            answer(StatusCode::BAD_REQUEST, "Invalid URL"),
            (ErrorCode::InvalidRequest, "Invalid URL".to_owned())
        );
        assert_eq!(
            answer(StatusCode::PAYLOAD_TOO_LARGE, ""),
            (
                ErrorCode::TooLarge,
                "the request body is larger than 16 MiB".to_owned()
            )
        );
        assert_eq!(
            answer(StatusCode::REQUEST_TIMEOUT, ""),
            (ErrorCode::InvalidRequest, "Request Timeout".to_owned())
        );
        let internal = api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "at src/x.rs:1".to_owned(),
        );
        assert_eq!(internal.code(), ErrorCode::Internal);
        let body = futures::executor::block_on(axum::body::to_bytes(
            internal.into_response().into_body(),
            1024,
        ))
        .unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("src/x.rs"));
    }
}
