//! The one error type of the HTTP edge: every error leaves as
//! `{"error": {"code": "<snake_case>", "message": "<human sentence>"}}` with a fitting status.
//! Converting has no side effects; internal details are logged where they happen, not sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api::errors::{ErrorBody, ErrorCode};
use crate::runtime::RuntimeError;

/// What a 503 tells a client to wait before retrying: limits free up as requests end.
const RETRY_AFTER_SECONDS: &str = "1";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_request`: bad JSON, an unknown field value, empty text.
    #[error("{0}")]
    Invalid(String),
    /// 401 `unauthorized`: a missing or wrong bearer token.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `forbidden`: a foreign `Host` or `Origin`.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// 405 `method_not_allowed`.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 408 `request_timeout`: the body came too slowly.
    #[error("{0}")]
    RequestTimeout(String),
    /// 409 with the given code: `turn_running`, `messages_waiting`, `not_waiting`,
    /// `compaction_running`, `nothing_to_compact`, `nothing_to_retry`.
    #[error("{message}")]
    Conflict { code: ErrorCode, message: String },
    /// 409 `already_decided`, with the approval's outcome beside the error.
    #[error("{message}")]
    AlreadyDecided {
        message: String,
        approval: Box<crate::api::approvals::Approval>,
    },
    /// 413 `too_large`.
    #[error("{0}")]
    TooLarge(String),
    /// 422 with the given code: `cwd_missing`, `model_unavailable`, `agent_unavailable`,
    /// `command_unknown`, `price_missing`, `message_blocked`, `source_missing`, `idempotency_key_reused`, `conversation_damaged`.
    #[error("{message}")]
    Unprocessable { code: ErrorCode, message: String },
    /// 502 with the given code: the model behind an operation failed (`compaction_failed`).
    #[error("{message}")]
    BadGateway { code: ErrorCode, message: String },
    /// 503 `unavailable`: a limit is reached, the outcome of a request is unknown, or the
    /// service is stopping. Answered with `Retry-After`.
    #[error("{0}")]
    Unavailable(String),
    /// 500 `internal`: the message is generic; the details are in the log.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The machine-readable code of this error.
    pub fn code(&self) -> ErrorCode {
        self.status_and_code().1
    }

    fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            ApiError::Invalid(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            ApiError::MethodNotAllowed(_) => {
                (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed)
            }
            ApiError::Conflict { code, .. } => (StatusCode::CONFLICT, *code),
            ApiError::AlreadyDecided { .. } => (StatusCode::CONFLICT, ErrorCode::AlreadyDecided),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge),
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, ErrorCode::RequestTimeout),
            ApiError::Unprocessable { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, *code),
            ApiError::BadGateway { code, .. } => (StatusCode::BAD_GATEWAY, *code),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            ApiError::Internal(_) => "internal error; see the service log".to_owned(),
            other => other.to_string(),
        };
        if let ApiError::AlreadyDecided { approval, .. } = self {
            let body = crate::api::approvals::AlreadyDecided {
                error: ErrorBody::new(code, message).error,
                approval: *approval,
            };
            return (status, Json(body)).into_response();
        }
        let mut response = (status, Json(ErrorBody::new(code, message))).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> ApiError {
        let message = error.to_string();
        match error {
            RuntimeError::Invalid(_) => ApiError::Invalid(message),
            RuntimeError::InvalidMcpServer(_) => ApiError::Unprocessable {
                code: ErrorCode::InvalidMcpServer,
                message,
            },
            RuntimeError::InvalidImage(_) => ApiError::Unprocessable {
                code: ErrorCode::InvalidImage,
                message,
            },
            RuntimeError::NotFound(_) => ApiError::NotFound(message),
            RuntimeError::TurnRunning => ApiError::Conflict {
                code: ErrorCode::TurnRunning,
                message,
            },
            RuntimeError::MessagesWaiting => ApiError::Conflict {
                code: ErrorCode::MessagesWaiting,
                message,
            },
            RuntimeError::NotWaiting => ApiError::Conflict {
                code: ErrorCode::NotWaiting,
                message,
            },
            RuntimeError::CompactionRunning => ApiError::Conflict {
                code: ErrorCode::CompactionRunning,
                message,
            },
            RuntimeError::NothingToCompact => ApiError::Conflict {
                code: ErrorCode::NothingToCompact,
                message,
            },
            RuntimeError::DirectoryBusy(_) => ApiError::Conflict {
                code: ErrorCode::TurnRunning,
                message,
            },
            RuntimeError::RestoreUnavailable(_) => ApiError::Conflict {
                code: ErrorCode::RestoreUnavailable,
                message,
            },
            RuntimeError::NothingToRetry(_) => ApiError::Conflict {
                code: ErrorCode::NothingToRetry,
                message,
            },
            RuntimeError::AlreadyDecided(approval) => {
                ApiError::AlreadyDecided { message, approval }
            }
            RuntimeError::CompactionFailed(_) => ApiError::BadGateway {
                code: ErrorCode::CompactionFailed,
                message,
            },
            RuntimeError::CwdMissing(_) => ApiError::Unprocessable {
                code: ErrorCode::CwdMissing,
                message,
            },
            RuntimeError::CwdRefused(_) => ApiError::Unprocessable {
                code: ErrorCode::CwdRefused,
                message,
            },
            RuntimeError::ModelUnavailable(_) => ApiError::Unprocessable {
                code: ErrorCode::ModelUnavailable,
                message,
            },
            RuntimeError::AgentUnavailable(_) => ApiError::Unprocessable {
                code: ErrorCode::AgentUnavailable,
                message,
            },
            RuntimeError::CommandUnknown(_) => ApiError::Unprocessable {
                code: ErrorCode::CommandUnknown,
                message,
            },
            RuntimeError::PriceMissing(_) => ApiError::Unprocessable {
                code: ErrorCode::PriceMissing,
                message,
            },
            RuntimeError::MessageBlocked(_) => ApiError::Unprocessable {
                code: ErrorCode::MessageBlocked,
                message,
            },
            RuntimeError::IdempotencyKeyReused => ApiError::Unprocessable {
                code: ErrorCode::IdempotencyKeyReused,
                message,
            },
            RuntimeError::Damaged(_) => ApiError::Unprocessable {
                code: ErrorCode::ConversationDamaged,
                message,
            },
            RuntimeError::ShuttingDown
            | RuntimeError::Unavailable(_)
            | RuntimeError::EpochBehind(_) => ApiError::Unavailable(message),
            RuntimeError::Internal(_) => ApiError::Internal(message),
        }
    }
}

/// One error of every kind the service answers with: each `RuntimeError` as the edge maps it,
/// and the edge's own. For the test that the OpenAPI document lists every code.
#[cfg(test)]
pub fn one_of_each() -> Vec<ApiError> {
    let text = String::new;
    let runtime = vec![
        RuntimeError::Invalid(text()),
        RuntimeError::InvalidImage(text()),
        RuntimeError::InvalidMcpServer(text()),
        RuntimeError::NotFound(text()),
        RuntimeError::TurnRunning,
        RuntimeError::MessagesWaiting,
        RuntimeError::NotWaiting,
        RuntimeError::CompactionRunning,
        RuntimeError::NothingToCompact,
        RuntimeError::DirectoryBusy(text()),
        RuntimeError::RestoreUnavailable(text()),
        RuntimeError::NothingToRetry(text()),
        RuntimeError::AlreadyDecided(Box::new(crate::api::approvals::Approval::example())),
        RuntimeError::CompactionFailed(text()),
        RuntimeError::CwdMissing(text()),
        RuntimeError::CwdRefused(text()),
        RuntimeError::ModelUnavailable(text()),
        RuntimeError::AgentUnavailable(text()),
        RuntimeError::CommandUnknown(text()),
        RuntimeError::PriceMissing(text()),
        RuntimeError::MessageBlocked(text()),
        RuntimeError::IdempotencyKeyReused,
        RuntimeError::Damaged(text()),
        RuntimeError::ShuttingDown,
        RuntimeError::Unavailable(text()),
        RuntimeError::EpochBehind(0),
        RuntimeError::Internal(text()),
    ];
    // A new variant must join the list above: this match stops compiling until it does.
    for error in &runtime {
        match error {
            RuntimeError::Invalid(_)
            | RuntimeError::InvalidImage(_)
            | RuntimeError::InvalidMcpServer(_)
            | RuntimeError::NotFound(_)
            | RuntimeError::TurnRunning
            | RuntimeError::MessagesWaiting
            | RuntimeError::NotWaiting
            | RuntimeError::CompactionRunning
            | RuntimeError::NothingToCompact
            | RuntimeError::DirectoryBusy(_)
            | RuntimeError::RestoreUnavailable(_)
            | RuntimeError::NothingToRetry(_)
            | RuntimeError::AlreadyDecided(_)
            | RuntimeError::CompactionFailed(_)
            | RuntimeError::CwdMissing(_)
            | RuntimeError::CwdRefused(_)
            | RuntimeError::ModelUnavailable(_)
            | RuntimeError::AgentUnavailable(_)
            | RuntimeError::CommandUnknown(_)
            | RuntimeError::PriceMissing(_)
            | RuntimeError::MessageBlocked(_)
            | RuntimeError::IdempotencyKeyReused
            | RuntimeError::Damaged(_)
            | RuntimeError::ShuttingDown
            | RuntimeError::Unavailable(_)
            | RuntimeError::EpochBehind(_)
            | RuntimeError::Internal(_) => {}
        }
    }
    let mut errors: Vec<ApiError> = runtime.into_iter().map(ApiError::from).collect();
    errors.extend([
        ApiError::Unauthorized(text()),
        ApiError::Forbidden(text()),
        ApiError::MethodNotAllowed(text()),
        ApiError::RequestTimeout(text()),
        ApiError::TooLarge(text()),
        // Signing out a bearer token (`http::tokens::sign_out`).
        ApiError::Conflict {
            code: ErrorCode::NotABrowserSession,
            message: text(),
        },
        // A push subscription the service cannot send to (`http::push`).
        ApiError::from(crate::push::store::StoreError::Unusable(text())),
        // No room for another token or subscription (`http::tokens`, `http::push`).
        ApiError::from(crate::auth::tokens::TokenError::Full(text())),
    ]);
    errors
}
