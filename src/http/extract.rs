//! Extractors that answer bad input in the API's error shape instead of axum's plain text.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Json<T>` whose rejections are `ApiError`s (400 with the parser's message, 413 when too big).
/// The body must be a JSON object: serde would otherwise read a struct from an array too.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let value = match axum::Json::<serde_json::Value>::from_request(request, state).await {
            Ok(axum::Json(value)) => value,
            Err(rejection) => return Err(json_rejection(rejection)),
        };
        object_body(value).map(Json)
    }
}

/// Reads a request type from a JSON value that must be an object.
pub fn object_body<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::Invalid(
            "the request body must be a JSON object".to_owned(),
        ));
    }
    serde_json::from_value(value)
        .map_err(|error| ApiError::Invalid(format!("invalid request body: {error}")))
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::TooLarge("the request body is too large".to_owned());
    }
    if let Some(timeout) = body_timeout(&rejection) {
        return ApiError::RequestTimeout(format!("{timeout}; send the request again"));
    }
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::Invalid(
            "the request body must be JSON (Content-Type: application/json)".to_owned(),
        ),
        other => ApiError::Invalid(other.body_text()),
    }
}

/// The body's own timeout, when that is why it could not be read (`slow_body.rs`).
fn body_timeout(rejection: &JsonRejection) -> Option<&super::slow_body::BodyTimeout> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(error) = source {
        if let Some(timeout) = error.downcast_ref::<super::slow_body::BodyTimeout>() {
            return Some(timeout);
        }
        source = error.source();
    }
    None
}

/// `Query<T>` whose rejections are `ApiError`s.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    ApiError::Invalid(rejection.body_text())
}

/// The `Idempotency-Key` header, if any: 1 to 200 visible ASCII characters.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        let key = value
            .to_str()
            .ok()
            .filter(|k| !k.is_empty() && k.len() <= 200 && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                ApiError::Invalid(
                    "Idempotency-Key must be 1 to 200 visible ASCII characters".to_owned(),
                )
            })?;
        Ok(IdempotencyKey(Some(key.to_owned())))
    }
}

/// The `Idempotency-Key` header of the two POSTs that create something, as the OpenAPI
/// document shows it. Documentation only: [`IdempotencyKey`] reads the header, because axum
/// has no extractor that reads a header into a struct. Optional headers are `String`s with
/// `required = false`: an `Option` would make them nullable, which a header is not.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyHeader {
    /// A repeat with the same key answers what the first call answered and does nothing again,
    /// for at least 24 hours and across restarts.
    #[param(
        rename = "Idempotency-Key",
        required = false,
        min_length = 1,
        max_length = 200,
        pattern = "^[!-~]+$"
    )]
    pub idempotency_key: String,
}
