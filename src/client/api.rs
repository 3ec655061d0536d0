//! HTTP calls to a running service: its answers decoded as the service's own types (`api`),
//! its error bodies (`api::errors::ErrorBody`) turned into errors. `endpoints.rs` names the
//! routes; `events.rs` reads the event streams.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::errors::{ErrorBody, ErrorCode};

/// What went wrong with a call: the service's own `{"error": {code, message}}`, or no answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message} ({code})")]
    Service {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer: `message` names the cause (refused, timed out, …) and the address.
    #[error("{message}")]
    Unreachable { base: String, message: String },
    /// An answer that is not what the API documents (another program at the address, or a
    /// service of another version): `message` says what could not be read.
    #[error("{message}")]
    Unreadable { message: String },
}

impl ApiError {
    /// The error code as the service wrote it (a newer service's may be one `ErrorCode` lacks).
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Service { code, .. } => Some(code),
            ApiError::Unreachable { .. } | ApiError::Unreadable { .. } => None,
        }
    }

    pub fn is(&self, code: ErrorCode) -> bool {
        self.code() == Some(code.as_str())
    }
}

/// A connection to one service: its base URL and, off loopback, its token.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    pub base: String,
    token: Option<String>,
}

impl Api {
    /// `base` may lack its scheme (`127.0.0.1:7341`): it is then `http://`.
    pub fn new(base: &str, token: Option<String>) -> Api {
        let http = crate::tls::client_builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client builds");
        Api {
            http,
            base: with_scheme(base).trim_end_matches('/').to_owned(),
            token,
        }
    }

    pub(super) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    // The routes are named in `endpoints.rs`; these take any path and any type, so only the
    // client's own modules call them.

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        self.call(self.request(reqwest::Method::GET, path)).await
    }

    pub(super) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ApiError> {
        self.call(self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    pub(super) async fn patch<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ApiError> {
        self.call(self.request(reqwest::Method::PATCH, path).json(body))
            .await
    }

    /// A DELETE whose answer has a body (a withdrawn waiting message).
    pub(super) async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        self.call(self.request(reqwest::Method::DELETE, path)).await
    }

    /// A POST whose error answers carry more than the error (an approval's `409` has the
    /// outcome): the status and the body of any answer the service gives.
    pub(super) async fn post_raw(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<(u16, bytes::Bytes), ApiError> {
        self.read(self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    /// A success answer's body as `T`, or the error the answer is.
    async fn call<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ApiError> {
        let (status, body) = self.read(request).await?;
        if !(200..300).contains(&status) {
            return Err(self.error_answer(status, &body));
        }
        self.decode(&body)
    }

    /// The error an error answer is: the service's error body, or, when the body is not JSON
    /// at all (another program answered), an `Unreadable` answer.
    pub(super) fn error_answer(&self, status: u16, body: &[u8]) -> ApiError {
        match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Ok(_) => service_error(status, body),
            Err(error) => ApiError::Unreadable {
                message: format!(
                    "the answer of {} ({status}) could not be read: {error}",
                    self.base
                ),
            },
        }
    }

    /// A body as `T`; one that is not is an `Unreadable` answer.
    pub(super) fn decode<T: DeserializeOwned>(&self, body: &[u8]) -> Result<T, ApiError> {
        serde_json::from_slice(body).map_err(|error| ApiError::Unreadable {
            message: format!("the answer of {} could not be read: {error}", self.base),
        })
    }

    async fn read(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, bytes::Bytes), ApiError> {
        let response = request
            .timeout(Duration::from_secs(600))
            .send()
            .await
            .map_err(|error| self.unreachable(error))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|error| self.unreachable(error))?;
        Ok((status, body))
    }

    /// Whether calls carry a token (a `curl` shown to the user needs one too).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub(super) fn unreachable(&self, error: reqwest::Error) -> ApiError {
        ApiError::Unreachable {
            base: self.base.clone(),
            message: unreachable_message(&self.base, &error),
        }
    }
}

/// An address as a user may type it: `host:port` means `http://host:port`.
pub fn with_scheme(url: &str) -> String {
    let url = url.trim();
    if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    }
}

/// Why a call got no answer, in words that say what to do: reqwest's own message ("error
/// sending request") hides the cause in its source chain.
fn unreachable_message(base: &str, error: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    let mut io_kind = None;
    let mut innermost = error.to_string();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        innermost = cause.to_string();
        source = cause.source();
    }
    match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => {
            format!("connection refused at {base}: is `openvaala serve` running?")
        }
        _ if error.is_timeout() => format!("no answer from {base} in time (timed out)"),
        _ if error.is_builder() => format!("{base} is not a usable address: {innermost}"),
        _ => format!("cannot reach the service at {base}: {innermost}"),
    }
}

/// The service's error body (`{"error": {code, message}}`) as an error. A code this client does
/// not know (a newer service's) is kept as written.
pub fn service_error(status: u16, body: &[u8]) -> ApiError {
    if let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(body) {
        return ApiError::Service {
            status,
            code: error.code.as_str().to_owned(),
            message: error.message,
        };
    }
    // A code this client does not know, or no error body at all (a proxy's answer, say).
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Lenient {
        error: LenientDetail,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct LenientDetail {
        code: Option<String>,
        message: Option<String>,
    }
    let error = serde_json::from_slice::<Lenient>(body)
        .unwrap_or_default()
        .error;
    ApiError::Service {
        status,
        code: error.code.unwrap_or_else(|| "unknown".to_owned()),
        message: error.message.unwrap_or_else(|| "no message".to_owned()),
    }
}
