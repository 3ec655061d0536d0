//! HTTP and SSE calls to a running service, with its error bodies turned into messages.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::model::wire::sse_events;

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
}

impl ApiError {
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Service { code, .. } => Some(code),
            ApiError::Unreachable { .. } => None,
        }
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
        let http = reqwest::Client::builder()
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

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value, ApiError> {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.send(self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.send(self.request(reqwest::Method::PATCH, path).json(body))
            .await
    }

    /// A DELETE whose answer has a body (a withdrawn waiting message).
    pub async fn delete(&self, path: &str) -> Result<Value, ApiError> {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    /// A POST whose error answers carry more than the message (an approval's `409` has the
    /// outcome): the status and the body of any answer the service gives.
    pub async fn post_answer(&self, path: &str, body: &Value) -> Result<(u16, Value), ApiError> {
        self.answer(self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    /// Whether calls carry a token (a `curl` shown to the user needs one too).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let (status, body) = self.answer(request).await?;
        if (200..300).contains(&status) {
            return Ok(body);
        }
        Err(service_error(status, &body))
    }

    async fn answer(&self, request: reqwest::RequestBuilder) -> Result<(u16, Value), ApiError> {
        let response = request
            .timeout(Duration::from_secs(600))
            .send()
            .await
            .map_err(|error| self.unreachable(error))?;
        let status = response.status().as_u16();
        let body: Value = response
            .json()
            .await
            .map_err(|error| self.unreachable(error))?;
        Ok((status, body))
    }

    fn unreachable(&self, error: reqwest::Error) -> ApiError {
        ApiError::Unreachable {
            base: self.base.clone(),
            message: unreachable_message(&self.base, &error),
        }
    }

    /// A conversation's events from its `snapshot` on, or, given the id of the last event
    /// seen, from the first one after it (or a fresh `snapshot` if the service cannot replay
    /// them). Ends when the service ends the stream.
    pub async fn events(
        &self,
        conversation_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<impl Stream<Item = ServerEvent> + use<>, ApiError> {
        let mut request = self
            .request(
                reqwest::Method::GET,
                &format!("/api/conversations/{conversation_id}/events"),
            )
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request
            .send()
            .await
            .map_err(|error| self.unreachable(error))?;
        let status = response.status().as_u16();
        if status != 200 {
            let body: Value = response.json().await.unwrap_or_default();
            return Err(service_error(status, &body));
        }
        // A replay of what was missed comes as one large chunk: parsed in pieces (`sse_events`).
        Ok(sse_events(response.bytes_stream())
            .take_while(|event| std::future::ready(event.is_ok()))
            .filter_map(|event| async move {
                let event = event.ok()?;
                let data = serde_json::from_str(&event.data).ok()?;
                Some(ServerEvent {
                    id: Some(event.id).filter(|id| !id.is_empty()),
                    kind: event.event,
                    data,
                })
            }))
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

/// One event of a conversation's stream.
pub struct ServerEvent {
    /// Every event the service sends has one; a stream could only lack it if something else
    /// answered.
    pub id: Option<String>,
    pub kind: String,
    pub data: Value,
}

/// The service's error body (`{"error": {code, message}}`) as an error.
pub fn service_error(status: u16, body: &Value) -> ApiError {
    let error = &body["error"];
    ApiError::Service {
        status,
        code: error["code"].as_str().unwrap_or("unknown").to_owned(),
        message: error["message"].as_str().unwrap_or("no message").to_owned(),
    }
}
