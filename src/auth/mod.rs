//! Who is calling: the tokens the API accepts beside the local credential (`credential.rs`),
//! the browser sessions made by pairing, and what each may do.
//!
//! - `tokens`: named, revocable tokens and pairing codes, kept hashed in the data directory.
//! - [`Caller`]: what the security layer (`http/security.rs`) learned of a request's token,
//!   put in the request's extensions for the handlers (who answered an approval, who kept a
//!   rule, which device subscribed to pushes).

pub mod tokens;

pub use tokens::{Scope, TokenKind, TokenRecord, TokenStore};

/// The cookie a paired browser's token travels in.
pub const SESSION_COOKIE: &str = "openvaala_session";
/// The header a cookie session's state-changing requests carry, holding the session's CSRF
/// token: another site can make the browser send the cookie, not read the token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How the request carried its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `Authorization: Bearer`, or `access_token=` in the query (event streams).
    Bearer,
    /// The session cookie of a paired browser.
    Cookie,
}

/// The caller of a request with a valid token.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Recorded as who decided an approval or kept a rule: the kind of client for the local
    /// credential and `OPENVAALA_TOKEN` (`web`, `cli`, `acp`, `api`), `token:NAME` or
    /// `device:NAME` for a named token.
    pub label: String,
    /// The token's name: `local` (the data directory's credential), `env`
    /// (`OPENVAALA_TOKEN`), or a named token's.
    pub name: String,
    pub scope: Scope,
    /// The named token's id; none for the local credential and `OPENVAALA_TOKEN`.
    pub token_id: Option<String>,
    pub via: Via,
    /// The token itself, for a cookie session's CSRF token.
    csrf: Option<String>,
}

impl Caller {
    /// The device this caller is, for push notifications and who is looking: a named token's
    /// id, else the kind of client (`web`, `cli`, …) of the local credential.
    pub fn device(&self) -> String {
        self.token_id.clone().unwrap_or_else(|| self.label.clone())
    }
}

impl Caller {
    pub fn new(
        label: String,
        name: String,
        scope: Scope,
        token_id: Option<String>,
        via: Via,
        token: &str,
    ) -> Caller {
        let csrf = (via == Via::Cookie).then(|| csrf_token(token));
        Caller {
            label,
            name,
            scope,
            token_id,
            via,
            csrf,
        }
    }

    /// A cookie session's CSRF token, which its state-changing requests must carry.
    pub fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// The CSRF token of the session whose token is `token`: derived, so nothing more is kept.
pub fn csrf_token(token: &str) -> String {
    tokens::hash_hex(&format!("openvaala-csrf:{token}"))
}
