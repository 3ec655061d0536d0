//! Named tokens and browser sessions on the wire: `/api/tokens`, `/api/session` and
//! `/api/pair`. A token is shown once, when made; lists show its name, scope and uses only.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Scope, TokenKind, TokenRecord};
use crate::domain::Timestamp;

/// A named token or a signed-in browser, without the token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    /// `tok_…`.
    pub id: String,
    pub name: String,
    pub scope: Scope,
    /// `token`: made for a script or client; `device`: a browser signed in by a pairing link.
    pub kind: TokenKind,
    #[schema(value_type = chrono::DateTime<chrono::Utc>)]
    pub created_at: Timestamp,
    /// To the minute; `null` if never used.
    #[schema(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub last_used_at: Option<Timestamp>,
    /// The token this request was made with.
    pub current: bool,
}

impl TokenInfo {
    pub fn of(record: &TokenRecord, current: Option<&str>) -> TokenInfo {
        TokenInfo {
            id: record.id.clone(),
            name: record.name.clone(),
            scope: record.scope,
            kind: record.kind,
            created_at: record.created_at,
            last_used_at: record.last_used_at,
            current: current == Some(record.id.as_str()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    /// Oldest first.
    pub tokens: Vec<TokenInfo>,
}

/// `POST /api/tokens`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// 1–80 characters, no control characters, at least one that is not a space (the ends are
    /// trimmed).
    #[schema(
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$",
        max_length = 80
    )]
    pub name: String,
    /// `full` by default.
    #[serde(default)]
    pub scope: Option<Scope>,
}

/// A token just made: `token` is shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    /// `ovt_` and 64 hex digits; send it as `Authorization: Bearer <token>`.
    pub token: String,
}

/// How a request's token came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionVia {
    /// `Authorization: Bearer` (or `access_token=` on an event stream).
    Bearer,
    /// A paired browser's session cookie.
    Cookie,
}

/// `GET /api/session`: who this request's token says the caller is.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionInfo {
    /// `local` (the data directory's credential), `env` (`OPENVAALA_TOKEN`), or a named
    /// token's name.
    pub name: String,
    pub scope: Scope,
    pub via: SessionVia,
    /// The named token's id; `null` for the local credential and `OPENVAALA_TOKEN`.
    pub token_id: Option<String>,
    /// What approvals and rules record as made by this caller (`decided_by`, `created_by`).
    pub label: String,
    /// A cookie session's CSRF token: its `POST`, `PATCH` and `DELETE` requests carry it in
    /// the `x-csrf-token` header. `null` for bearer tokens, which need none.
    pub csrf: Option<String>,
}

/// `POST /api/pair`: a pairing code signs this browser in.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PairRequest {
    /// The code of the link `openvaala pair` printed (the part after `#code=`).
    #[schema(pattern = "\\S")]
    pub code: String,
    /// What to call this device in the list of signed-in devices (default `browser`): a name
    /// as a token's.
    #[serde(default)]
    #[schema(
        pattern = "^[^\\x00-\\x1F\\x7F-\\x9F]*[^\\s\\x00-\\x1F\\x7F-\\x9F][^\\x00-\\x1F\\x7F-\\x9F]*$",
        max_length = 80
    )]
    pub name: Option<String>,
}
