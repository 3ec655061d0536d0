//! Invariant 8, secure by default: the tools run shell commands, so a web page in the user's
//! browser must not be able to drive the service, nor another user of the machine, nor a tool
//! process. Requests must name the served address in `Host` (against DNS rebinding);
//! state-changing requests from another `Origin` are refused; every API request but the health
//! check and the API's description carries a token: the local credential (`credential.rs`,
//! which tools cannot read), the configured `OPENVAALA_TOKEN`, or a named token
//! (`auth::tokens`), in the `Authorization` header or, for a paired browser, its session
//! cookie. A cookie session's state-changing requests also carry its CSRF token, and a `read`
//! token may only read.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::auth::{CSRF_HEADER, Caller, SESSION_COOKIE, Scope, TokenStore, Via};
use crate::credential::ClientKind;

/// A token derived from the local credential or `OPENVAALA_TOKEN` for one kind of client.
#[derive(Debug, Clone)]
pub struct KnownToken {
    pub token: String,
    pub kind: ClientKind,
    /// `local` or `env`: which base token it comes from.
    pub base: &'static str,
}

#[derive(Debug, Clone)]
pub struct Security {
    /// `Host` values accepted; empty when bound to every interface (then the token guards).
    allowed_hosts: Vec<String>,
    /// Any of these is accepted, each standing for the kind of client that holds it.
    tokens: Vec<KnownToken>,
    /// The named tokens and paired browsers.
    named: TokenStore,
    /// Listening on loopback only: `/metrics` is open then (a scraper on the same machine).
    loopback: bool,
}

impl Security {
    pub fn new(addr: SocketAddr, tokens: Vec<KnownToken>, named: TokenStore) -> Security {
        let port = addr.port();
        let ip = addr.ip();
        let mut allowed_hosts = Vec::new();
        if ip.is_loopback() {
            allowed_hosts.extend([
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ]);
        } else if !ip.is_unspecified() {
            allowed_hosts.push(addr.to_string());
        }
        Security {
            allowed_hosts,
            tokens,
            named,
            loopback: ip.is_loopback(),
        }
    }

    /// Accepts `host` too (`host:port`): the address other instances of a cluster reach this
    /// one at. Nothing changes when every host is accepted already.
    pub fn also_accept(&mut self, host: &str) {
        if !self.allowed_hosts.is_empty() && !self.host_allowed(host) {
            self.allowed_hosts.push(host.to_owned());
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.allowed_hosts.is_empty()
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host))
    }

    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let Some(origin_host) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false; // includes `Origin: null` (sandboxed frames, file://)
        };
        if self.allowed_hosts.is_empty() {
            return origin_host.eq_ignore_ascii_case(host);
        }
        self.host_allowed(origin_host)
    }

    /// Who calls, if the request carries a valid token.
    fn caller(&self, request: &Request) -> Option<Caller> {
        let from_header = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        // EventSource cannot send headers, so the browser UI passes the token in the query.
        // Decoded: the UI escapes it like any query value.
        let from_query = request.uri().query().and_then(|query| {
            form_urlencoded::parse(query.as_bytes())
                .find_map(|(name, value)| (name == "access_token").then_some(value))
        });
        if let Some(given) = from_header.map(Into::into).or(from_query) {
            return self.known(&given, Via::Bearer);
        }
        let from_cookie = request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                (name == SESSION_COOKIE).then_some(value)
            })?;
        self.known(from_cookie, Via::Cookie)
    }

    fn known(&self, given: &str, via: Via) -> Option<Caller> {
        // Every derived token is compared, so the time taken does not tell which one nearly
        // matched. A named token is found by its hash.
        let derived = self.tokens.iter().fold(None, |found, known| {
            let equal = constant_time_eq(given.as_bytes(), known.token.as_bytes());
            found.or(equal.then_some(known))
        });
        if let Some(known) = derived {
            return Some(Caller::new(
                known.kind.name().to_owned(),
                known.base.to_owned(),
                Scope::Full,
                None,
                via,
                given,
            ));
        }
        let record = self.named.check(given)?;
        Some(Caller::new(
            record.label(),
            record.name,
            record.scope,
            Some(record.id),
            via,
            given,
        ))
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme's name is
/// case-insensitive (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The host a request is addressed to. It must be named once: two `Host` headers are refused
/// (proxies and the service could each pick another), and so is an absolute-form target
/// (`GET http://other/…`) naming a host other than `Host`, which takes precedence over it.
fn addressed_host(request: &Request) -> Result<String, ApiError> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let header_host = hosts.next();
    if hosts.next().is_some() {
        return Err(ApiError::Invalid(
            "the request has more than one Host header".to_owned(),
        ));
    }
    let header_host = header_host
        .map(|value| {
            value
                .to_str()
                .map_err(|_| ApiError::Invalid("the Host header is not valid text".to_owned()))
        })
        .transpose()?;
    let target_host = request.uri().authority().map(|a| a.as_str());
    match (header_host, target_host) {
        (Some(header_host), Some(target_host))
            if !header_host.eq_ignore_ascii_case(target_host) =>
        {
            Err(ApiError::Forbidden(format!(
                "the request target names host `{target_host}`, not `{header_host}`"
            )))
        }
        (header_host, target_host) => {
            Ok(target_host.or(header_host).unwrap_or_default().to_owned())
        }
    }
}

pub async fn guard(
    State(security): State<Arc<Security>>,
    mut request: Request,
    next: Next,
) -> Response {
    let host = match addressed_host(&request) {
        Ok(host) => host,
        Err(error) => return error.into_response(),
    };
    if !security.host_allowed(&host) {
        return ApiError::Forbidden(format!(
            "requests must be addressed to this service, not to host `{host}`"
        ))
        .into_response();
    }
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state && let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("null");
        if !security.origin_allowed(origin, &host) {
            return ApiError::Forbidden(format!(
                "cross-origin requests from `{origin}` are not allowed"
            ))
            .into_response();
        }
    }
    let open = OPEN_PATHS.contains(&request.uri().path());
    // The metrics tell nothing of any conversation, but off loopback only token holders read
    // them.
    let api = request.uri().path().starts_with("/api/")
        || (request.uri().path() == "/metrics" && !security.loopback);
    let caller = security.caller(&request);
    if api && !open && caller.is_none() {
        return ApiError::Unauthorized(
            "a valid `Authorization: Bearer <token>` header is required: the service's \
             local token (`openvaala token show` prints it; `openvaala token url` gives a \
             browser's sign-in link), or the configured OPENVAALA_TOKEN"
                .to_owned(),
        )
        .into_response();
    }
    let Some(caller) = caller else {
        return next.run(request).await;
    };
    if api
        && changes_state
        && let Err(error) = may_change(&caller, &request)
    {
        return error.into_response();
    }
    let revocable = caller.token_id.clone();
    let device = caller.device();
    // Who answers an approval or keeps a rule is who the token says.
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    if !is_event_stream(&response) {
        return response;
    }
    follow_stream(response, &security.named, device, revocable)
}

/// Whether `caller` may make a state-changing API request: a `read` token may not (except to
/// manage its own session: sign out, sign in again, be notified), nor a cookie session without
/// its CSRF token (signing in itself needs none: the pairing code is the credential).
fn may_change(caller: &Caller, request: &Request) -> Result<(), ApiError> {
    if caller.scope == Scope::Read && !own_session(request) {
        return Err(ApiError::Forbidden(format!(
            "the token `{}` may only read (scope `read`): it can follow and list, not send, \
             answer or change anything",
            caller.name
        )));
    }
    if let Some(expected) = caller.csrf()
        && request.uri().path() != PAIR_PATH
    {
        let given = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
            return Err(ApiError::Forbidden(format!(
                "a signed-in browser's changes need the `{CSRF_HEADER}` header with the \
                 session's CSRF token (`GET /api/session` gives it)"
            )));
        }
    }
    Ok(())
}

/// The state-changing requests that concern only the caller's own session, which a `read`
/// token may make too: signing out, signing in again, and its push subscriptions.
fn own_session(request: &Request) -> bool {
    let path = request.uri().path();
    match *request.method() {
        Method::DELETE => path == "/api/session" || path.starts_with("/api/push/subscriptions/"),
        Method::POST => path == PAIR_PATH || path == "/api/push/subscriptions",
        _ => false,
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// How soon an event stream notices a token revoked by another process (one made by this
/// service ends the stream at once).
const REVOCATION_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// An event stream's `response`, counted as `device` looking while it is open (no push
/// notification goes to a device that is following), and ended when its named token `revocable`
/// is revoked: a revoked device stops following at once, not at its next request.
fn follow_stream(
    response: Response,
    named: &TokenStore,
    device: String,
    revocable: Option<String>,
) -> Response {
    use futures::StreamExt;
    let (parts, body) = response.into_parts();
    let looking = named.looking(&device);
    let named = named.clone();
    let revoked = Box::pin(async move {
        match revocable {
            Some(id) => named.revoked(&id, REVOCATION_POLL).await,
            None => std::future::pending().await,
        }
    });
    let stream = body
        .into_data_stream()
        .take_until(revoked)
        .map(move |chunk| {
            let _counted = &looking;
            chunk
        });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// Where a browser signs in with a pairing code.
pub const PAIR_PATH: &str = "/api/pair";

/// The API paths that need no token: they tell nothing of any conversation, or (signing in)
/// take another credential.
const OPEN_PATHS: [&str; 3] = ["/api/health", "/api/openapi.json", PAIR_PATH];

/// Why a token cannot guard a service reachable from other machines, if it cannot: it must have
/// at least [`MIN_TOKEN_CHARS`] characters, not all of them whitespace.
pub fn weak_token(token: &str) -> Option<String> {
    if token.trim().is_empty() {
        return Some("OPENVAALA_TOKEN is only whitespace".to_owned());
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Some(format!(
            "OPENVAALA_TOKEN must have at least {MIN_TOKEN_CHARS} characters off loopback (it has {})",
            token.chars().count()
        ));
    }
    None
}

/// The shortest token accepted when the service listens beyond loopback.
pub const MIN_TOKEN_CHARS: usize = 16;

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_needs_a_token() {
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER  abc", Some("abc")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearerabc", None),
        ] {
            assert_eq!(bearer_token(value), token, "{value:?}");
        }
    }

    #[test]
    fn weak_tokens_are_named() {
        assert!(weak_token("short").unwrap().contains("16 characters"));
        assert!(
            weak_token("                   ")
                .unwrap()
                .contains("whitespace")
        );
        assert!(weak_token("0123456789abcdef").is_none());
    }
}
