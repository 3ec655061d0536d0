//! Forwarding a request to the instance that owns its conversation: the same method, path,
//! query, headers and body, and the answer streamed back as it comes (an SSE stream stays a
//! stream; `Last-Event-ID` goes along like any header). A forwarded request carries
//! `x-openvaala-forwarded`, and is never forwarded again, so ownership that moves meanwhile
//! ends in a clear 503 rather than a loop.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, TryStreamExt};

use crate::api::errors::{ErrorBody, ErrorCode};

/// Marks a request one instance sent another (its value: the sender's instance id).
pub const FORWARDED: HeaderName = HeaderName::from_static("x-openvaala-forwarded");

/// The largest body forwarded (the service refuses larger ones before this point anyway).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// How long reaching the owner may take before the client is told to retry.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How often an owner sends a keep-alive on an event stream another instance forwards, so
/// that the forwarder can tell a live stream from a lost link.
pub const FORWARDED_KEEP_ALIVE: Duration = Duration::from_secs(1);
/// A forwarded event stream that brings nothing (not even a keep-alive) for this long lost its
/// link to the owner (frozen, or reset without a word): the forwarder ends the client's
/// stream, and the client reconnects with `Last-Event-ID` to wherever the conversation is.
const UPSTREAM_SILENCE: Duration = Duration::from_secs(3);

/// The keep-alive interval of an event stream answering `headers`: short when another
/// instance forwards it, `usual` otherwise.
pub fn keep_alive(headers: &HeaderMap, usual: Duration) -> Duration {
    if headers.contains_key(FORWARDED) {
        FORWARDED_KEEP_ALIVE
    } else {
        usual
    }
}

/// The HTTP client instances forward with (connections to each owner are kept and reused).
pub fn client() -> reqwest::Client {
    crate::tls::client_builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .expect("the forwarding client builds")
}

/// Sends `request` to the instance at `addr` and streams its answer back. `instance` is this
/// instance's id, for the `x-openvaala-forwarded` header.
pub async fn forward(
    client: &reqwest::Client,
    addr: &str,
    instance: &str,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let url = format!("http://{addr}{path}");
    let method = match reqwest::Method::from_bytes(parts.method.as_str().as_bytes()) {
        Ok(method) => method,
        Err(_) => return unavailable("the request's method cannot be forwarded"),
    };
    let mut headers = outgoing_headers(&parts.headers);
    if let Ok(value) = HeaderValue::from_str(instance) {
        headers.insert(FORWARDED, value);
    }
    // Bodies are small JSON (the service limits them); read whole, they are sent with their
    // length rather than chunked.
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => return unavailable("the request's body could not be read"),
    };
    let mut outgoing = client.request(method, &url).headers(headers);
    if !body.is_empty() {
        outgoing = outgoing.body(body);
    }
    let answer = outgoing.send().await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(%error, %addr, "the owner of a conversation does not answer");
            return unavailable(
                "the instance that owns this conversation does not answer; it is taken over \
                 when its lease expires: retry in a few seconds",
            );
        }
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY));
    if let Some(headers) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !is_hop_by_hop(name.as_str()) {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    let events = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let body = if events {
        Body::from_stream(until_silent(answer.bytes_stream()))
    } else {
        Body::from_stream(answer.bytes_stream().map_err(std::io::Error::other))
    };
    response
        .body(body)
        .unwrap_or_else(|_| unavailable("the owner's answer could not be passed on"))
}

/// A forwarded event stream, ended (cleanly, so the client reconnects) when the link to the
/// owner breaks or falls silent past `UPSTREAM_SILENCE`: a follower is never left waiting on a
/// stream nothing feeds.
fn until_silent(
    upstream: impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    async_stream::stream! {
        tokio::pin!(upstream);
        loop {
            match tokio::time::timeout(UPSTREAM_SILENCE, upstream.next()).await {
                Ok(Some(Ok(bytes))) => yield Ok(bytes),
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    tracing::warn!(%error, "lost the link to a conversation's owner; the forwarded stream ends");
                    break;
                }
                Err(_) => {
                    tracing::warn!(
                        silent_s = UPSTREAM_SILENCE.as_secs(),
                        "a forwarded event stream fell silent; it ends so its client reconnects"
                    );
                    break;
                }
            }
        }
    }
}

/// The request's headers as the owner should see them: without hop-by-hop headers, `Host`
/// (the client sets the owner's) and `Origin` (this instance has already checked it against
/// its own address; the owner's address differs, and would refuse it).
fn outgoing_headers(incoming: &HeaderMap) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in incoming {
        let name_str = name.as_str();
        if is_hop_by_hop(name_str)
            || name == header::HOST
            || name == header::ORIGIN
            || name == header::CONTENT_LENGTH
            || name == FORWARDED
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    headers
}

fn is_hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// 503 in the API's error shape, with a retry hint.
pub fn unavailable(message: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "2")],
        axum::Json(ErrorBody::new(ErrorCode::Unavailable, message)),
    )
        .into_response()
}
