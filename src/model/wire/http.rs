//! The model call over HTTP: send the request, turn an unsuccessful answer into an error that
//! names the URL and status, and stream a successful one's SSE events through the protocol's
//! `Decoder` into model events.

use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use reqwest::header::CONTENT_TYPE;
use reqwest::{RequestBuilder, Response};

use super::errors::{error_chain, provider_message, retry_after, status_error, status_text};
use super::sse::{Event, events};
use crate::model::{ModelError, ModelEvent, ModelStream};

/// How often at most a stream that only sends what is not yet an event of its own (tool call
/// arguments piece by piece, pings) reports that it is alive (`ModelEvent::Progress`): the
/// turn times out a silent stream, and this keeps a slow tool call from looking silent.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// How long reading an error answer's body may take before we give up on its message.
const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Turns a protocol's SSE events into model events. A decoder is fed every event of one
/// response in order; returning `Done` ends the stream.
pub trait Decoder: Send + 'static {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError>;
}

/// Sends a request and streams its SSE answer through `decoder`. Every failure becomes one
/// `Err` item, after which the stream ends; a body that ends without the protocol's completion
/// marker simply ends (the turn loop counts that as a cut stream).
pub fn stream(
    request: Result<RequestBuilder, ModelError>,
    mut decoder: impl Decoder,
) -> ModelStream {
    async_stream::stream! {
        let response = match request {
            Ok(request) => send(request).await,
            Err(error) => Err(error),
        };
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                yield Err(error);
                return;
            }
        };
        // Every error after the answer began names what answered it too.
        let called = format!(
            "POST {} answered {}",
            response.url(),
            status_text(response.status())
        );
        let events = events(response.bytes_stream());
        futures::pin_mut!(events);
        let mut last_sent = Instant::now();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    yield Err(error.context(&called));
                    return;
                }
            };
            match decoder.decode(&event) {
                Ok(model_events) if model_events.is_empty() => {
                    if last_sent.elapsed() >= PROGRESS_EVERY {
                        last_sent = Instant::now();
                        yield Ok(ModelEvent::Progress);
                    }
                }
                Ok(model_events) => {
                    last_sent = Instant::now();
                    for model_event in model_events {
                        let done = model_event == ModelEvent::Done;
                        yield Ok(model_event);
                        if done {
                            return;
                        }
                    }
                }
                Err(error) => {
                    yield Err(error.context(&called));
                    return;
                }
            }
        }
    }
    .boxed()
}

/// Sends the request; anything but a successful event stream becomes an error, which names
/// the URL called and the status it answered (a wrong base URL shows as a 404 from it).
async fn send(request: RequestBuilder) -> Result<Response, ModelError> {
    let (http, request) = request.build_split();
    let request = request.map_err(request_error)?;
    let called = format!("POST {}", request.url());
    let response = http
        .execute(request)
        .await
        .map_err(|error| request_error(error).context(&called))?;
    let status = response.status();
    let called = format!("{called} answered {}", status_text(status));
    tracing::debug!(%called, "provider answered");
    if status.is_success() {
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if !json {
            return Ok(response);
        }
        // A server that does not stream answers JSON; retrying would get the same.
        let body = error_body(response).await;
        return Err(ModelError::Fatal(format!(
            "the provider answered JSON instead of an event stream: {}",
            provider_message(&body)
        ))
        .context(&called));
    }
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let body = error_body(response).await;
    Err(status_error(status, retry_after, &body).context(&called))
}

async fn error_body(response: Response) -> String {
    match tokio::time::timeout(ERROR_BODY_TIMEOUT, response.text()).await {
        Ok(Ok(body)) => body,
        _ => String::new(),
    }
}

/// A request that never got an answer: transient unless the request itself could not be built.
fn request_error(error: reqwest::Error) -> ModelError {
    // The URL is named by the caller's context, once.
    let builder = error.is_builder();
    let message = format!(
        "cannot reach the provider: {}",
        error_chain(&error.without_url())
    );
    if builder {
        ModelError::Fatal(message)
    } else {
        ModelError::transient(message)
    }
}
