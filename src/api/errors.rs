//! The error codes of the API and the one error body every error answer carries:
//! `{"error": {"code": "<snake_case>", "message": "<human sentence>"}}`. Everything that writes
//! an error answer (the handlers' `ApiError`, the HTTP layer's own answers, the cluster's
//! forwarding) names its code with [`ErrorCode`], so no code can be sent that the OpenAPI
//! document does not list.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code,
                message: message.into(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// A human sentence; never a stack trace.
    pub message: String,
}

/// The machine-readable error codes, each with its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: bad JSON, an unknown field or field value, empty text.
    InvalidRequest,
    /// 401: a missing or wrong bearer token.
    Unauthorized,
    /// 403: a foreign `Host` or `Origin`.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 408: the request's body came too slowly (below `server.body_min_bytes_per_s`, or not
    /// whole within `server.body_timeout_s`); nothing was done, and it may be sent again.
    RequestTimeout,
    /// 409: a turn is running.
    TurnRunning,
    /// 409: messages are waiting.
    MessagesWaiting,
    /// 409: a pending message was already consumed.
    NotWaiting,
    /// 409: a compaction is running.
    CompactionRunning,
    /// 409: the history is already its summary.
    NothingToCompact,
    /// 409: a retry, when the session's latest turn did not fail.
    NothingToRetry,
    /// 409: an approval was answered already (the body carries its outcome).
    AlreadyDecided,
    /// 409: the service keeps no more of these (named tokens and devices, push
    /// subscriptions); the message names the limit. One must go before another is added.
    LimitReached,
    /// 409: `DELETE /api/session` by a bearer token, which has no browser session to end
    /// (`DELETE /api/tokens/{id}` revokes a named token).
    NotABrowserSession,
    /// 409: files cannot be restored (the checkpoints needed are missing or damaged, a
    /// change was not recorded, or the restore was already undone); the message says why.
    RestoreUnavailable,
    /// 413: the request body is too large; 414: the request target; 431: the headers.
    TooLarge,
    /// 422: the conversation's working directory does not exist.
    CwdMissing,
    /// 422: the working directory is one no conversation may use: `/`, or a directory that
    /// holds or lies in the service's own state (its tools could reach that state).
    CwdRefused,
    /// 422: the model is not configured.
    ModelUnavailable,
    /// 422: the agent is not configured.
    AgentUnavailable,
    /// 422: the working directory has no repository command of the name given.
    CommandUnknown,
    /// 422: a cost limit on a model (or a fallback of it) that has no price.
    PriceMissing,
    /// 422: a `user_message` hook blocks the message (nothing stored); the message names the
    /// hook and gives its reason.
    MessageBlocked,
    /// 422: a fork's source conversation is missing (a conversation forked after a
    /// compaction reads part of its older history from its source, so the two move together).
    SourceMissing,
    /// 422: an `Idempotency-Key` sent again with a different body.
    IdempotencyKeyReused,
    /// 422: a file of the conversation holds a damaged line (not a torn tail, which is cut by
    /// itself): it cannot open until repaired with `openvaala repair <id>`, the service
    /// stopped. The message names the file and line.
    ConversationDamaged,
    /// 422: an image that is not one of its media type, or has more pixels or bytes than the
    /// models take.
    InvalidImage,
    /// 422: an MCP server named in a create body breaks a rule of its settings (a name, a
    /// transport, a path), or needs an agent that may run commands.
    InvalidMcpServer,
    /// 422: a push subscription the service cannot send to: an endpoint that is not https
    /// (plain http only on loopback) or carries credentials, or keys that are not a P-256
    /// point and a 16-byte secret.
    InvalidSubscription,
    /// 502: the compaction model failed.
    CompactionFailed,
    /// 503 (with `Retry-After`): a limit is reached, the outcome is unknown, or the service
    /// is stopping.
    Unavailable,
    /// 500.
    Internal,
}

impl ErrorCode {
    /// Every code, in the document's order.
    pub const ALL: [ErrorCode; 33] = [
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::TurnRunning,
        ErrorCode::MessagesWaiting,
        ErrorCode::NotWaiting,
        ErrorCode::CompactionRunning,
        ErrorCode::NothingToCompact,
        ErrorCode::NothingToRetry,
        ErrorCode::AlreadyDecided,
        ErrorCode::NotABrowserSession,
        ErrorCode::LimitReached,
        ErrorCode::RestoreUnavailable,
        ErrorCode::TooLarge,
        ErrorCode::CwdMissing,
        ErrorCode::CwdRefused,
        ErrorCode::ModelUnavailable,
        ErrorCode::AgentUnavailable,
        ErrorCode::CommandUnknown,
        ErrorCode::PriceMissing,
        ErrorCode::MessageBlocked,
        ErrorCode::SourceMissing,
        ErrorCode::IdempotencyKeyReused,
        ErrorCode::ConversationDamaged,
        ErrorCode::InvalidImage,
        ErrorCode::InvalidMcpServer,
        ErrorCode::InvalidSubscription,
        ErrorCode::CompactionFailed,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    /// The code as it goes on the wire (the same text serde writes).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::TurnRunning => "turn_running",
            ErrorCode::MessagesWaiting => "messages_waiting",
            ErrorCode::NotWaiting => "not_waiting",
            ErrorCode::CompactionRunning => "compaction_running",
            ErrorCode::NothingToCompact => "nothing_to_compact",
            ErrorCode::RestoreUnavailable => "restore_unavailable",
            ErrorCode::NothingToRetry => "nothing_to_retry",
            ErrorCode::AlreadyDecided => "already_decided",
            ErrorCode::NotABrowserSession => "not_a_browser_session",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::CwdMissing => "cwd_missing",
            ErrorCode::CwdRefused => "cwd_refused",
            ErrorCode::ModelUnavailable => "model_unavailable",
            ErrorCode::AgentUnavailable => "agent_unavailable",
            ErrorCode::CommandUnknown => "command_unknown",
            ErrorCode::PriceMissing => "price_missing",
            ErrorCode::MessageBlocked => "message_blocked",
            ErrorCode::SourceMissing => "source_missing",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::ConversationDamaged => "conversation_damaged",
            ErrorCode::InvalidImage => "invalid_image",
            ErrorCode::InvalidMcpServer => "invalid_mcp_server",
            ErrorCode::InvalidSubscription => "invalid_subscription",
            ErrorCode::CompactionFailed => "compaction_failed",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once_and_written_as_serde_writes_it() {
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
            // A new variant must join `ALL`: this match stops compiling until it does.
            match code {
                ErrorCode::InvalidRequest
                | ErrorCode::Unauthorized
                | ErrorCode::Forbidden
                | ErrorCode::NotFound
                | ErrorCode::MethodNotAllowed
                | ErrorCode::RequestTimeout
                | ErrorCode::TurnRunning
                | ErrorCode::MessagesWaiting
                | ErrorCode::NotWaiting
                | ErrorCode::CompactionRunning
                | ErrorCode::NothingToCompact
                | ErrorCode::RestoreUnavailable
                | ErrorCode::NothingToRetry
                | ErrorCode::AlreadyDecided
                | ErrorCode::NotABrowserSession
                | ErrorCode::LimitReached
                | ErrorCode::TooLarge
                | ErrorCode::CwdMissing
                | ErrorCode::CwdRefused
                | ErrorCode::ModelUnavailable
                | ErrorCode::AgentUnavailable
                | ErrorCode::CommandUnknown
                | ErrorCode::PriceMissing
                | ErrorCode::MessageBlocked
                | ErrorCode::SourceMissing
                | ErrorCode::IdempotencyKeyReused
                | ErrorCode::ConversationDamaged
                | ErrorCode::InvalidImage
                | ErrorCode::InvalidMcpServer
                | ErrorCode::InvalidSubscription
                | ErrorCode::CompactionFailed
                | ErrorCode::Unavailable
                | ErrorCode::Internal => {}
            }
        }
        let distinct: std::collections::HashSet<_> = ErrorCode::ALL.into_iter().collect();
        assert_eq!(distinct.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn the_error_body_is_code_and_message_under_error() {
        let body = serde_json::to_string(&ErrorBody::new(ErrorCode::TooLarge, "too big")).unwrap();
        assert_eq!(
            body,
            r#"{"error":{"code":"too_large","message":"too big"}}"#
        );
    }
}
