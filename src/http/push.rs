//! `/api/push/…`: the service's public key and the browsers' push subscriptions, each tied to
//! the device (token) that made it. What gets pushed and when is `push::dispatch`.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::error::ApiError;
use super::extract::Json;
use super::state::AppState;
use crate::api::errors::{ErrorBody, ErrorCode};
use crate::api::push::{NewSubscription, PushKey, Subscribed, SubscriptionInfo, SubscriptionList};
use crate::auth::Caller;
use crate::push::store::{PushState, StoreError};
use crate::push::{Subscription, SubscriptionKeys};

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::Invalid(message) => ApiError::Invalid(message),
            StoreError::Full(message) => ApiError::Conflict {
                code: ErrorCode::LimitReached,
                message,
            },
            StoreError::Unusable(message) => ApiError::Unprocessable {
                code: ErrorCode::InvalidSubscription,
                message,
            },
            StoreError::Io { .. } => {
                tracing::error!(%error, "the push subscriptions");
                ApiError::Internal(
                    "the push subscriptions cannot be used; the log says why".to_owned(),
                )
            }
        }
    }
}

fn push(state: &AppState) -> Result<&PushState, ApiError> {
    state
        .push
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("push notifications are not available here".to_owned()))
}

fn device(caller: Option<Extension<Caller>>) -> Result<String, ApiError> {
    Ok(super::tokens::caller(caller)?.device())
}

#[utoipa::path(
    get,
    path = "/api/push/key",
    operation_id = "push_key",
    tag = "push",
    summary = "The key browsers subscribe with",
    responses((status = 200, description = "The VAPID public key", body = PushKey)),
)]
pub async fn key(State(state): State<AppState>) -> Result<axum::Json<PushKey>, ApiError> {
    Ok(axum::Json(PushKey {
        public_key: push(&state)?.key.public_key_base64url().to_owned(),
    }))
}

#[utoipa::path(
    post,
    path = "/api/push/subscriptions",
    operation_id = "subscribe_push",
    tag = "push",
    summary = "Subscribe this device to push notifications",
    description = "Pushes go out when an approval waits and when a turn ends or fails, to each subscribed device that has no event stream open. The subscription belongs to the token that made it (a `read` token may subscribe) and goes when that token is revoked, or when its push service says it is gone.",
    request_body = NewSubscription,
    responses(
        (status = 201, description = "Subscribed", body = Subscribed),
        (status = 200, description = "The endpoint was subscribed already; its keys are updated", body = Subscribed),
        (status = 400, description = "`invalid_request`: a field missing, an endpoint past 2,048 characters", body = ErrorBody),
        (status = 409, description = "`limit_reached`: 200 subscriptions are kept already", body = ErrorBody),
        (status = 422, description = "`invalid_subscription`: an endpoint that is not https (plain http only on loopback) or carries credentials, or keys that are not a P-256 point and a 16-byte secret", body = ErrorBody),
    ),
)]
pub async fn subscribe(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Json(new): Json<NewSubscription>,
) -> Result<(StatusCode, axum::Json<Subscribed>), ApiError> {
    let device = device(caller)?;
    let store = push(&state)?.subscriptions.clone();
    let subscription = Subscription {
        endpoint: new.endpoint,
        keys: SubscriptionKeys {
            p256dh: new.keys.p256dh,
            auth: new.keys.auth,
        },
    };
    let (id, created) = crate::store::disk::wait_for(|| store.add(subscription, &device))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(Subscribed { id })))
}

#[utoipa::path(
    get,
    path = "/api/push/subscriptions",
    operation_id = "list_push_subscriptions",
    tag = "push",
    summary = "This device's push subscriptions",
    responses((status = 200, description = "The subscriptions of the caller's token", body = SubscriptionList)),
)]
pub async fn list(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
) -> Result<axum::Json<SubscriptionList>, ApiError> {
    let device = device(caller)?;
    let subscriptions = push(&state)?
        .subscriptions
        .list()?
        .into_iter()
        .filter(|stored| stored.device == device)
        .map(|stored| SubscriptionInfo {
            push_service: stored
                .subscription
                .endpoint_url()
                .map(|url| url.origin().ascii_serialization())
                .unwrap_or_default(),
            id: stored.id,
            created_at: stored.created_at,
        })
        .collect();
    Ok(axum::Json(SubscriptionList { subscriptions }))
}

#[utoipa::path(
    delete,
    path = "/api/push/subscriptions/{id}",
    operation_id = "unsubscribe_push",
    tag = "push",
    summary = "Stop pushing to a subscription",
    params(("id" = String, Path, description = "Subscription id (`ps_…`)")),
    responses(
        (status = 204, description = "Dropped"),
        (status = 404, description = "`not_found`: no such subscription of this device", body = ErrorBody),
    ),
)]
pub async fn unsubscribe(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let device = device(caller)?;
    let store = push(&state)?.subscriptions.clone();
    let removed = crate::store::disk::wait_for(|| {
        store.remove_where(|stored| stored.id == id && stored.device == device)
    })?;
    if removed == 0 {
        return Err(ApiError::NotFound(format!(
            "no push subscription `{id}` of this device"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}
