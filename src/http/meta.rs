//! Service-level routes: health, the OpenAPI document, the configured agents and models.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::{Json, http::Uri};
use serde_json::{Value, json};

use super::{ApiError, AppState};

#[utoipa::path(
    get,
    path = "/api/health",
    tag = "meta",
    summary = "Health",
    responses((status = 200, description = "The service is up", body = crate::openapi::Health)),
)]
pub async fn health(State(state): State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    // Cluster mode: the instance, what it owns, and whether PostgreSQL answers; without
    // PostgreSQL the instance cannot serve, and says so.
    let (cluster, reachable) = match state.runtime.cluster() {
        Some(cluster) => {
            let reachable = cluster.ping().await;
            let figures = json!({
                "instance_id": cluster.instance_id(),
                "addr": cluster.addr(),
                "conversations_owned": cluster.leases().owned(),
                "postgres": if reachable { "ok" } else { "unreachable" },
            });
            (Some(figures), reachable)
        }
        None => (None, true),
    };
    let mut body = json!({
        "status": if reachable { "ok" } else { "unavailable" },
        "version": env!("CARGO_PKG_VERSION"),
        "live_conversations": state.runtime.live_conversations().await,
        "max_live_conversations": state.runtime.max_live_conversations(),
        "answers": {
            "total": state.answers.total.load(Ordering::Relaxed),
            "server_errors": state.answers.server_errors.load(Ordering::Relaxed),
        },
        "index_jobs_pending": state.runtime.index_jobs_pending(),
    });
    if let Some(cluster) = cluster {
        body["cluster"] = cluster;
    }
    if !reachable {
        body["reason"] = json!(
            "PostgreSQL does not answer: this instance cannot list, search or take conversations until it is back"
        );
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    Json(body).into_response()
}

#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "meta",
    summary = "This OpenAPI document",
    responses((status = 200, description = "An OpenAPI 3 document of every route", content_type = "application/json", body = Object)),
)]
pub async fn openapi() -> impl IntoResponse {
    Json(crate::openapi::document())
}

#[utoipa::path(
    get,
    path = "/api/agents",
    tag = "meta",
    summary = "Configured agents",
    responses((status = 200, description = "The default agent and every configured agent", body = crate::openapi::AgentList)),
)]
pub async fn agents(State(state): State<AppState>) -> Json<Value> {
    let config = state.runtime.config();
    let agents: Vec<Value> = config
        .agents
        .iter()
        .map(|(name, agent)| {
            json!({
                "name": name,
                "description": agent.description,
                "model": agent.model,
                "compact_model": agent.compaction_model(),
            })
        })
        .collect();
    Json(json!({ "default": config.default_agent, "agents": agents }))
}

#[utoipa::path(
    get,
    path = "/api/models",
    tag = "meta",
    summary = "Configured models",
    responses((status = 200, description = "Every configured model", body = crate::openapi::ModelList)),
)]
pub async fn models(State(state): State<AppState>) -> Json<Value> {
    let config = state.runtime.config();
    let models: Vec<Value> = config
        .models
        .iter()
        .map(|(id, model)| {
            let protocol = config.provider_of(id).map(|p| p.protocol.as_str());
            json!({
                "id": id,
                "provider": model.provider,
                "protocol": protocol,
                "context_window": model.context_window,
                "max_output_tokens": model.max_output_tokens,
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", uri.path()))
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this route does not accept that method".to_owned())
}
