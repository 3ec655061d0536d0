//! `/api/tokens`, `/api/session` and `/api/pair`: named tokens, and browsers signed in by a
//! pairing link. The security layer has already checked the caller's token and scope; these
//! handlers manage the tokens themselves (`auth::tokens`).

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::Json;
use super::serve::Peer;
use super::state::AppState;
use crate::api::errors::{ErrorBody, ErrorCode};
use crate::api::tokens::{
    CreatedToken, NewToken, PairRequest, SessionInfo, SessionVia, TokenInfo, TokenList,
};
use crate::auth::tokens::TokenError;
use crate::auth::{Caller, SESSION_COOKIE, Scope, TokenKind, Via};

/// A signed-in browser's cookie lasts this long (it ends sooner when revoked).
const SESSION_MAX_AGE_S: u64 = 400 * 24 * 60 * 60;

impl From<TokenError> for ApiError {
    fn from(error: TokenError) -> ApiError {
        match error {
            TokenError::Invalid(message) => ApiError::Invalid(message),
            TokenError::NotFound(id) => ApiError::NotFound(format!("no token `{id}`")),
            TokenError::Full(message) => ApiError::Conflict {
                code: ErrorCode::LimitReached,
                message,
            },
            TokenError::PairingUsed => ApiError::Unauthorized(error.to_string()),
            TokenError::Io { .. } => {
                tracing::error!(%error, "the token file");
                ApiError::Internal("the token file cannot be used; the log says why".to_owned())
            }
        }
    }
}

/// The request's caller; the security layer lets no request without a token reach a route
/// that asks, so this is a safeguard.
pub(super) fn caller(caller: Option<Extension<Caller>>) -> Result<Caller, ApiError> {
    caller
        .map(|Extension(caller)| caller)
        .ok_or_else(|| ApiError::Unauthorized("this needs a token".to_owned()))
}

/// Managing tokens needs a full token (a `read` one may not even list them).
fn full(caller: &Caller) -> Result<(), ApiError> {
    if caller.scope != Scope::Full {
        return Err(ApiError::Forbidden(format!(
            "the token `{}` may only read: tokens are managed with a full one",
            caller.name
        )));
    }
    Ok(())
}

#[utoipa::path(
    get,
    path = "/api/tokens",
    operation_id = "list_tokens",
    tag = "tokens",
    summary = "List named tokens and signed-in devices",
    description = "Never the tokens themselves. Needs a full token.",
    responses(
        (status = 200, description = "The tokens", body = TokenList),
        (status = 403, description = "`forbidden`: a `read` token", body = ErrorBody),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    caller_: Option<Extension<Caller>>,
) -> Result<axum::Json<TokenList>, ApiError> {
    let caller = caller(caller_)?;
    full(&caller)?;
    let current = caller.token_id.as_deref();
    let tokens = state
        .tokens
        .list()?
        .iter()
        .map(|record| TokenInfo::of(record, current))
        .collect();
    Ok(axum::Json(TokenList { tokens }))
}

#[utoipa::path(
    post,
    path = "/api/tokens",
    operation_id = "create_token",
    tag = "tokens",
    summary = "Make a named token",
    description = "The answer shows the token this once; only its hash is kept. A `read` token can follow and list, not send, answer or change anything.",
    request_body = NewToken,
    responses(
        (status = 201, description = "The token", body = CreatedToken),
        (status = 400, description = "`invalid_request`: no name, a name too long or with control characters", body = ErrorBody),
        (status = 403, description = "`forbidden`: a `read` token", body = ErrorBody),
        (status = 409, description = "`limit_reached`: 1,000 tokens and devices are kept already", body = ErrorBody),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    caller_: Option<Extension<Caller>>,
    Json(new): Json<NewToken>,
) -> Result<(StatusCode, axum::Json<CreatedToken>), ApiError> {
    full(&caller(caller_)?)?;
    let scope = new.scope.unwrap_or(Scope::Full);
    let minted = state.tokens.add(&new.name, scope, TokenKind::Token)?;
    crate::redact::register_secrets([minted.token.clone()]);
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedToken {
            id: minted.record.id,
            name: minted.record.name,
            scope,
            token: minted.token,
        }),
    ))
}

#[utoipa::path(
    delete,
    path = "/api/tokens/{id}",
    operation_id = "revoke_token",
    tag = "tokens",
    summary = "Revoke a token or sign a device out",
    description = "Takes effect at once: the token's requests get 401 and its open event streams end.",
    params(("id" = String, Path, description = "Token id (`tok_…`)")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "`forbidden`: a `read` token", body = ErrorBody),
        (status = 404, description = "`not_found`: no such token", body = ErrorBody),
    ),
)]
pub async fn revoke(
    State(state): State<AppState>,
    caller_: Option<Extension<Caller>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    full(&caller(caller_)?)?;
    if !id.starts_with("tok_") {
        return Err(ApiError::NotFound(format!("no token `{id}`")));
    }
    state.tokens.revoke(&id)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/api/session",
    operation_id = "get_session",
    tag = "tokens",
    summary = "Who this token is",
    description = "The caller's token: its name and scope, and for a signed-in browser the CSRF token its changes must carry.",
    responses((status = 200, description = "The caller", body = SessionInfo)),
)]
pub async fn session(
    caller_: Option<Extension<Caller>>,
) -> Result<axum::Json<SessionInfo>, ApiError> {
    let caller = caller(caller_)?;
    Ok(axum::Json(session_info(&caller)))
}

fn session_info(caller: &Caller) -> SessionInfo {
    SessionInfo {
        name: caller.name.clone(),
        scope: caller.scope,
        via: match caller.via {
            Via::Bearer => SessionVia::Bearer,
            Via::Cookie => SessionVia::Cookie,
        },
        token_id: caller.token_id.clone(),
        label: caller.label.clone(),
        csrf: caller.csrf().map(str::to_owned),
    }
}

#[utoipa::path(
    delete,
    path = "/api/session",
    operation_id = "sign_out",
    tag = "tokens",
    summary = "Sign this browser out",
    description = "Revokes the session's token and clears its cookie. A bearer token is not revoked this way (`DELETE /api/tokens/{id}` does).",
    responses(
        (status = 204, description = "Signed out"),
        (status = 409, description = "`not_a_browser_session`: the request carries a bearer token, which this does not revoke", body = ErrorBody),
    ),
)]
pub async fn sign_out(
    State(state): State<AppState>,
    caller_: Option<Extension<Caller>>,
) -> Result<Response, ApiError> {
    let caller = caller(caller_)?;
    let (Via::Cookie, Some(id)) = (caller.via, caller.token_id.as_deref()) else {
        return Err(ApiError::Conflict {
            code: ErrorCode::NotABrowserSession,
            message: "this request is not from a signed-in browser: revoke a token with \
                      `DELETE /api/tokens/{id}`"
                .to_owned(),
        });
    };
    match state.tokens.revoke(id) {
        Ok(_) | Err(TokenError::NotFound(_)) => {}
        Err(error) => return Err(error.into()),
    }
    let cookie = format!("{SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, cookie_value(&cookie))],
    )
        .into_response())
}

#[utoipa::path(
    post,
    path = "/api/pair",
    operation_id = "pair",
    tag = "tokens",
    summary = "Sign a browser in with a pairing code",
    description = "The code of a link `openvaala pair` printed works once, within 10 minutes. The answer sets the session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) holding a new device token, and gives the CSRF token the session's changes carry. Needs no other token.",
    request_body = PairRequest,
    responses(
        (status = 200, description = "Signed in; the cookie is set", body = SessionInfo),
        (status = 400, description = "`invalid_request`: no code, or a bad device name", body = ErrorBody),
        (status = 401, description = "`unauthorized`: the link was used already, has expired, or never was", body = ErrorBody),
    ),
)]
pub async fn pair(
    State(state): State<AppState>,
    peer: Option<Extension<Peer>>,
    headers: axum::http::HeaderMap,
    Json(request): Json<PairRequest>,
) -> Result<Response, ApiError> {
    if request.code.trim().is_empty() {
        return Err(ApiError::Invalid(
            "`code` is the part of the sign-in link after `#code=`".to_owned(),
        ));
    }
    let name = request.name.as_deref().unwrap_or("browser");
    let minted = state.tokens.redeem(&request.code, name)?;
    crate::redact::register_secrets([minted.token.clone()]);
    let trusted = &state.runtime.config().server.trusted_proxies;
    let secure = if over_https(peer.map(|Extension(peer)| peer), &headers, trusted) {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; Max-Age={SESSION_MAX_AGE_S}; HttpOnly; SameSite=Strict{secure}",
        minted.token
    );
    let caller = Caller::new(
        minted.record.label(),
        minted.record.name.clone(),
        minted.record.scope,
        Some(minted.record.id.clone()),
        Via::Cookie,
        &minted.token,
    );
    Ok((
        [
            (header::SET_COOKIE, cookie_value(&cookie)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        axum::Json(session_info(&caller)),
    )
        .into_response())
}

/// Whether the browser reached the service over HTTPS: served over TLS here, or by a trusted
/// proxy that says so (`X-Forwarded-Proto: https`); then the cookie is `Secure`.
fn over_https(
    peer: Option<Peer>,
    headers: &axum::http::HeaderMap,
    trusted: &[std::net::IpAddr],
) -> bool {
    let Some(peer) = peer else { return false };
    peer.tls
        || (trusted.contains(&peer.addr.ip())
            && headers
                .get("x-forwarded-proto")
                .and_then(|value| value.to_str().ok())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https")))
}

fn cookie_value(cookie: &str) -> HeaderValue {
    HeaderValue::from_str(cookie).expect("a cookie of hex digits and ASCII attributes")
}
