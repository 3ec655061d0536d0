//! Secure by default (DESIGN invariant 7): the tools run shell commands, so a web page in the
//! user's browser must not be able to drive the service. Requests must name the served address
//! in `Host` (against DNS rebinding); state-changing requests from another `Origin` are refused;
//! off loopback, every API request needs the bearer token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

#[derive(Debug, Clone)]
pub struct Security {
    /// `Host` values accepted; empty when bound to every interface (then the token guards).
    allowed_hosts: Vec<String>,
    token: Option<String>,
}

impl Security {
    pub fn new(addr: SocketAddr, token: Option<String>) -> Security {
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
            token,
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

    fn token_ok(&self, request: &Request) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let from_header = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        // EventSource cannot send headers, so the browser UI passes the token in the query.
        // Decoded: the UI escapes it like any query value.
        let from_query = request.uri().query().and_then(|query| {
            form_urlencoded::parse(query.as_bytes())
                .find_map(|(name, value)| (name == "access_token").then_some(value))
        });
        match (from_header, from_query) {
            (Some(given), _) => constant_time_eq(given.as_bytes(), expected.as_bytes()),
            (None, Some(given)) => constant_time_eq(given.as_bytes(), expected.as_bytes()),
            (None, None) => false,
        }
    }
}

pub async fn guard(
    State(security): State<Arc<Security>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default()
        .to_owned();
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
    if request.uri().path().starts_with("/api/") && !security.token_ok(&request) {
        return ApiError::Unauthorized(
            "a valid `Authorization: Bearer <token>` header is required".to_owned(),
        )
        .into_response();
    }
    next.run(request).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
