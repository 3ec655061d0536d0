//! Service-level routes: health, the configured agents and models, the commands a directory
//! sees (the OpenAPI document is served by `openapi`).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, http::Uri};

use super::error::ApiError;
use super::extract::Query;
use super::state::AppState;
use crate::api::errors::ErrorBody;
use crate::api::requests::{CwdQuery, WebhookDeliveriesQuery};
use crate::api::responses::{
    AgentList, AnswerCounts, ClusterHealth, CommandList, Health, HealthStatus, HookList,
    McpServerInfo, McpServerList, McpServerSource, McpServerState, McpTransportKind, ModelInfo,
    ModelList, PostgresStatus, SandboxHealth, SandboxLayer, WebhookDeliveryList,
};
use crate::mcp::{ServerSource, ServerState};

#[utoipa::path(
    get,
    path = "/api/health",
    tag = "meta",
    summary = "Health",
    responses((status = 200, description = "The service is up", body = Health)),
)]
pub async fn health(State(state): State<AppState>) -> Response {
    // Cluster mode: the instance, what it owns, and whether PostgreSQL answers; without
    // PostgreSQL the instance cannot serve, and says so.
    let (cluster, reachable) = match state.runtime.cluster() {
        Some(cluster) => {
            let reachable = cluster.ping().await;
            let figures = ClusterHealth {
                instance_id: cluster.instance_id().to_owned(),
                addr: cluster.addr().to_owned(),
                conversations_owned: cluster.leases().owned() as u64,
                postgres: if reachable {
                    PostgresStatus::Ok
                } else {
                    PostgresStatus::Unreachable
                },
            };
            (Some(figures), reachable)
        }
        None => (None, true),
    };
    let mcp = state.runtime.mcp_status();
    let body = Health {
        status: if reachable {
            HealthStatus::Ok
        } else {
            HealthStatus::Unavailable
        },
        version: env!("CARGO_PKG_VERSION").to_owned(),
        live_conversations: state.runtime.live_conversations().await as u64,
        max_live_conversations: state.runtime.max_live_conversations() as u64,
        answers: AnswerCounts {
            total: state.answers.total.load(Ordering::Relaxed),
            server_errors: state.answers.server_errors.load(Ordering::Relaxed),
        },
        index_jobs_pending: state.runtime.index_jobs_pending() as u64,
        index_oldest_job_ms: state.runtime.index_oldest_job_age().as_millis() as u64,
        index_repairs_pending: state.runtime.index_repairs_pending() as u64,
        running_subagents: state.runtime.running_subagents() as u64,
        max_running_subagents: u64::from(state.runtime.config().subagents.max_running_total),
        sandbox: {
            let support = crate::sandbox::support();
            SandboxHealth {
                available: support.available(),
                landlock_abi: support.landlock_abi,
                namespaces: support.namespaces,
                runs_as_root: support.root,
                layers: support
                    .layers()
                    .into_iter()
                    .map(|layer| SandboxLayer {
                        name: layer.name.to_owned(),
                        active: layer.active,
                        detail: layer.detail,
                    })
                    .collect(),
            }
        },
        mcp_servers: mcp.len() as u64,
        mcp_servers_failed: mcp
            .iter()
            .filter(|server| server.state == ServerState::Failed)
            .count() as u64,
        cluster,
        reason: (!reachable).then(|| {
            "PostgreSQL does not answer: this instance cannot list, search or take conversations until it is back"
                .to_owned()
        }),
    };
    let status = if reachable {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus's text format. Open on loopback; off it, it needs the token
/// like the API (`security::guard`).
pub async fn metrics(State(state): State<AppState>) -> Response {
    let handle = crate::telemetry::metrics::install();
    let gauges = state.runtime.gauges().await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::telemetry::metrics::render(&handle, &gauges),
    )
        .into_response()
}

#[utoipa::path(
    get,
    path = "/api/agents",
    tag = "meta",
    summary = "The agents a working directory sees",
    description = "The config file's agents, and the repository's agent files (`.agents/agents/NAME.md` from the repository's top down to `cwd`; a deeper one wins a name). A file and a config table of the same name merge key by key, the config's winning. `source` says where each came from. `problems` lists the agent files skipped, each with the rule it breaks: a bad front matter, or a setting that would loosen what the config allows (unless `trust_repository_agents` lists the repository). Read at each request, and by a conversation when each turn starts.",
    params(CwdQuery),
    responses(
        (status = 200, description = "The default agent, every agent and the files skipped", body = AgentList),
        (status = 400, description = "`invalid_request`: a relative `cwd`, or an unknown parameter", body = ErrorBody),
        (status = 422, description = "`cwd_missing`; `cwd_refused`: `cwd` is `/` or holds or lies in the service's own state", body = ErrorBody),
    ),
)]
pub async fn agents(
    State(state): State<AppState>,
    Query(query): Query<CwdQuery>,
) -> Result<Json<AgentList>, ApiError> {
    Ok(Json(state.runtime.list_agents(query.cwd.as_deref()).await?))
}

#[utoipa::path(
    get,
    path = "/api/hooks",
    tag = "meta",
    summary = "Configured hooks",
    description = "The config's `[[hooks.<event>]]` tables in the file's order per event (`headers` and `secret` never shown), and the last failure of each since the service started.",
    responses((status = 200, description = "Every configured hook", body = HookList)),
)]
pub async fn hooks(State(state): State<AppState>) -> Json<HookList> {
    Json(state.runtime.hooks())
}

#[utoipa::path(
    get,
    path = "/api/webhooks/deliveries",
    tag = "meta",
    summary = "Webhook deliveries",
    description = "The notification hooks' POSTs (`turn_ended`, `subagent_ended`, `approval_requested`, `approval_resolved`, `compaction`, `conversation_created`, `conversation_deleted`; hooks with a `url`), newest first: each stored before it is sent, tried until a 2xx answers it (five tries over about ten minutes), resumed after a restart. `id` is its `webhook-id`, the same on every try. The outbox keeps the last 1,000 (a pending one goes only when all are pending). In cluster mode, this instance's.",
    params(WebhookDeliveriesQuery),
    responses(
        (status = 200, description = "The deliveries kept", body = WebhookDeliveryList),
        (status = 400, description = "`invalid_request`: an unknown `status`, a `limit` out of range, or an unknown parameter", body = ErrorBody),
    ),
)]
pub async fn webhook_deliveries(
    State(state): State<AppState>,
    Query(query): Query<WebhookDeliveriesQuery>,
) -> Result<Json<WebhookDeliveryList>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and 1000, not {limit}"
        )));
    }
    Ok(Json(state.runtime.webhook_deliveries(query.status, limit)))
}

#[utoipa::path(
    get,
    path = "/api/models",
    tag = "meta",
    summary = "Configured models",
    responses((status = 200, description = "Every configured model", body = ModelList)),
)]
pub async fn models(State(state): State<AppState>) -> Json<ModelList> {
    let config = state.runtime.config();
    let models = config
        .models
        .iter()
        .map(|(id, model)| ModelInfo {
            id: id.clone(),
            provider: model.provider.clone(),
            protocol: config.provider_of(id).map(|provider| provider.protocol),
            context_window: model.context_window,
            max_output_tokens: model.max_output_tokens,
        })
        .collect();
    Json(ModelList { models })
}

#[utoipa::path(
    get,
    path = "/api/commands",
    tag = "meta",
    summary = "Commands a directory sees",
    description = "The commands in `.agents/commands/` folders from the repository's top down to `cwd`, and in `commands/` beside the config file: Markdown files named by their file name, whose prompt a message sends with `{\"command\", \"arguments\"}`. A deeper folder's command wins its name over a higher one's, a repository's over the user's. A folder reached through a symlink lists nothing. Read at each request.",
    params(CwdQuery),
    responses(
        (status = 200, description = "The commands by name, and the files skipped with the reason", body = CommandList),
        (status = 400, description = "`invalid_request`: a relative `cwd`, or an unknown parameter", body = ErrorBody),
        (status = 422, description = "`cwd_missing`; `cwd_refused`: `cwd` is `/` or holds or lies in the service's own state", body = ErrorBody),
    ),
)]
pub async fn commands(
    State(state): State<AppState>,
    Query(query): Query<CwdQuery>,
) -> Result<Json<CommandList>, ApiError> {
    Ok(Json(
        state.runtime.list_commands(query.cwd.as_deref()).await?,
    ))
}

#[utoipa::path(
    get,
    path = "/api/mcp",
    tag = "meta",
    summary = "MCP servers",
    responses((status = 200, description = "Every configured MCP server: its state, tools, last error and restarts", body = McpServerList)),
)]
pub async fn mcp(State(state): State<AppState>) -> Json<McpServerList> {
    let servers = state
        .runtime
        .mcp_status()
        .into_iter()
        .map(|server| McpServerInfo {
            source: match server.source {
                ServerSource::Config => McpServerSource::Config,
                ServerSource::Conversation => McpServerSource::Conversation,
            },
            transport: match server.http {
                true => McpTransportKind::Http,
                false => McpTransportKind::Stdio,
            },
            state: match server.state {
                ServerState::NotStarted => McpServerState::NotStarted,
                ServerState::Starting => McpServerState::Starting,
                ServerState::Running => McpServerState::Running,
                ServerState::Failed => McpServerState::Failed,
                ServerState::Stopped => McpServerState::Stopped,
            },
            name: server.name,
            tools: server.tools,
            last_error: server.last_error,
            restarts: server.restarts,
        })
        .collect();
    Json(McpServerList { servers })
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", uri.path()))
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this route does not accept that method".to_owned())
}
