//! The HTTP edge: the route table and the middleware (security, body limit); the state the
//! routes share is in `state`. Handlers extract, call one runtime function and map the result;
//! they hold no logic of their own and never touch files.

pub mod approvals;
pub mod checkpoints;
pub mod cluster;
mod coalesce;
pub mod conversations;
pub mod error;
pub mod events;
pub mod export;
pub mod extract;
pub mod meta;
pub mod openapi;
pub mod parse_errors;
pub mod plain_errors;
pub mod processes;
pub mod push;
pub mod security;
pub mod serve;
pub mod skills;
pub mod slow_body;
mod state;
pub(crate) mod timer;
pub mod tokens;
pub mod ui;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};

use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;
pub use error::ApiError;
use security::Security;
pub use state::{AnswerCounts, AppState, MAX_BODY_BYTES};

/// Every route of the service, in one greppable table.
pub fn router(
    runtime: Runtime,
    addr: SocketAddr,
    tokens: Vec<security::KnownToken>,
    named: crate::auth::TokenStore,
    push_state: Option<crate::push::store::PushState>,
    streams_done: CancellationToken,
) -> Router {
    use conversations as c;
    // Recorded from the first request on; `/metrics` renders it.
    crate::telemetry::metrics::install();
    let api = Router::new()
        .route("/api/health", get(meta::health))
        .route("/metrics", get(meta::metrics))
        .route("/api/openapi.json", get(openapi::serve))
        .route("/api/agents", get(meta::agents))
        .route("/api/hooks", get(meta::hooks))
        .route("/api/webhooks/deliveries", get(meta::webhook_deliveries))
        .route("/api/skills", get(skills::skills))
        .route("/api/models", get(meta::models))
        .route("/api/mcp", get(meta::mcp))
        .route("/api/commands", get(meta::commands))
        .route("/api/events", get(events::list_events))
        .route("/api/approvals", get(approvals::list))
        .route("/api/approvals/{id}", post(approvals::answer))
        .route("/api/rules", get(approvals::rules))
        .route("/api/tokens", get(tokens::list).post(tokens::create))
        .route("/api/tokens/{id}", axum::routing::delete(tokens::revoke))
        .route(
            "/api/session",
            get(tokens::session).delete(tokens::sign_out),
        )
        .route(security::PAIR_PATH, post(tokens::pair))
        .route("/api/push/key", get(push::key))
        .route(
            "/api/push/subscriptions",
            get(push::list).post(push::subscribe),
        )
        .route(
            "/api/push/subscriptions/{id}",
            axum::routing::delete(push::unsubscribe),
        )
        .route(
            "/api/rules/{id}",
            axum::routing::delete(approvals::delete_rule),
        )
        .route("/api/conversations", get(c::list).post(c::create))
        .route(
            "/api/conversations/{id}",
            get(c::get).patch(c::update).delete(c::delete),
        )
        .route("/api/conversations/{id}/items", get(c::items))
        .route("/api/conversations/{id}/turns", get(c::turns))
        .route("/api/conversations/{id}/sessions", get(c::sessions))
        .route("/api/conversations/{id}/messages", post(c::send_message))
        .route("/api/conversations/{id}/pending", get(c::pending))
        .route(
            "/api/conversations/{id}/pending/{message_id}",
            patch(c::update_pending).delete(c::withdraw_pending),
        )
        .route(
            "/api/conversations/{id}/pending/{message_id}/send",
            post(c::send_pending_now),
        )
        .route("/api/conversations/{id}/interrupt", post(c::interrupt))
        .route("/api/conversations/{id}/retry", post(c::retry))
        .route("/api/conversations/{id}/retry/now", post(c::retry_now))
        .route("/api/conversations/{id}/export", get(export::export))
        .route(
            "/api/conversations/{id}/sessions/{session_id}/interrupt",
            post(c::interrupt_session),
        )
        .route("/api/conversations/{id}/fork", post(c::fork))
        .route("/api/conversations/{id}/rewind", post(c::rewind))
        .route(
            "/api/conversations/{id}/turns/{turn_id}/changes",
            get(checkpoints::changes),
        )
        .route(
            "/api/conversations/{id}/restores/{restore_id}/undo",
            post(checkpoints::undo),
        )
        .route("/api/conversations/{id}/compact", post(c::compact))
        .route("/api/conversations/{id}/usage", get(c::usage))
        .route("/api/conversations/{id}/processes", get(processes::list))
        .route(
            "/api/conversations/{id}/processes/{process_id}/output",
            get(processes::output),
        )
        .route(
            "/api/conversations/{id}/processes/{process_id}/stop",
            post(processes::stop),
        )
        .route(
            "/api/conversations/{id}/events",
            get(events::conversation_events),
        )
        .merge(ui::router())
        .fallback(meta::not_found)
        .method_not_allowed_fallback(meta::method_not_allowed);
    // Cluster mode: the other instances address this one as advertised (behind a NAT or a
    // container's port map, another address than the one it listens on).
    let mut security = Security::new(addr, tokens, named.clone());
    if let Some(cluster) = runtime.cluster() {
        security.also_accept(cluster.addr());
    }
    // Behind a reverse proxy: the names it serves the service under.
    for host in &runtime.config().server.allowed_hosts {
        security.also_accept(host);
    }
    let answers = Arc::new(AnswerCounts::default());
    let state = AppState {
        runtime,
        streams_done,
        answers: answers.clone(),
        tokens: named,
        push: push_state,
    };
    api.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        cluster::route_to_owner,
    ))
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
    .layer(axum::middleware::from_fn(reject_oversized))
    .layer(axum::middleware::from_fn_with_state(
        Arc::new(security),
        security::guard,
    ))
    .layer(axum::middleware::from_fn(plain_errors::as_json))
    .layer(axum::middleware::from_fn_with_state(
        answers.clone(),
        count_answers,
    ))
    .with_state(state)
}

/// Counts every answer, and the server errors among them; each request is a server span
/// named by its route (never the raw path, which holds ids) and counted in the metrics.
async fn count_answers(
    axum::extract::State(answers): axum::extract::State<Arc<AnswerCounts>>,
    request: Request,
    next: Next,
) -> Response {
    use tracing::Instrument;
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let method = request.method().clone();
    let span = tracing::info_span!(
        "http_request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    crate::telemetry::metrics::http_request(&route, status.as_u16(), started.elapsed());
    answers.total.fetch_add(1, Ordering::Relaxed);
    if status.is_server_error() {
        answers.server_errors.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// Answers 413 from the headers when the announced body is too large, without reading it (the
/// body limit above still catches bodies sent without a length).
async fn reject_oversized(request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return ApiError::TooLarge(format!(
            "the request body is larger than {} MiB",
            MAX_BODY_BYTES / (1024 * 1024)
        ))
        .into_response();
    }
    next.run(request).await
}
