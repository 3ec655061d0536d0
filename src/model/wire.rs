//! What the three provider protocols share: the HTTP call and its SSE stream, errors by status,
//! `Retry-After`, the API key, and the history regrouped into user and assistant entries. It
//! knows no protocol's field names (each protocol module does) and never logs an API key.

use std::time::{Duration, Instant, SystemTime};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};

use super::{ModelError, ModelEvent, ModelStream};
use crate::config::{Protocol, ProviderConfig};
use crate::domain::{Image, Item, ItemKind, ItemStatus};

/// How often at most a stream that only sends what is not yet an event of its own (tool call
/// arguments piece by piece, pings) reports that it is alive (`ModelEvent::Progress`): the
/// turn times out a silent stream, and this keeps a slow tool call from looking silent.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How long establishing a connection may take. There is deliberately no overall timeout: a
/// stream may run for minutes, and the turn loop times out the gap between chunks instead.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long reading an error answer's body may take before we give up on its message.
const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Provider text quoted in an error is cut to this many characters.
const QUOTE_CHARS: usize = 500;

/// One provider's HTTP side: its client (one per provider, so connections are reused), its base
/// URL and where its key comes from.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    base_url: String,
    /// The name of the variable holding the key; the key itself is read per request and never
    /// stored or logged.
    api_key_env: Option<String>,
}

/// One SSE event: its `event:` name (`message` when it has none), its data, and the last
/// event id seen.
pub use eventsource_stream::Event;

/// The most bytes of a body handed to eventsource-stream at once (see [`sse_events`]).
pub const PIECE_BYTES: usize = 4 * 1024;

/// The SSE events of a body, in order, parsed by eventsource-stream (the stack the project's
/// card names) from pieces of at most [`PIECE_BYTES`] whole lines. Blocks without data (only an
/// id, a retry or comments) are not events.
///
/// Why pieces: eventsource-stream moves the rest of its buffer into a new string after every
/// line it parses, which is quadratic in the size of what it is handed at once. A provider's
/// burst can arrive as one read of hundreds of kilobytes (many events per HTTP chunk, or an
/// HTTP/2 frame), and the service's own event streams send what piled up for a subscriber as
/// one chunk. Cut into pieces of a few KB (zero-copy, after a line feed, which is never inside
/// a multi-byte UTF-8 character), its buffer never holds much more than one piece: a 5,000-event
/// read costs the same per event as 5,000 small reads (BENCHMARKS.md, "Decoding").
pub fn sse_events<E>(
    body: impl Stream<Item = Result<bytes::Bytes, E>>,
) -> eventsource_stream::EventStream<impl Stream<Item = Result<bytes::Bytes, E>>> {
    body.flat_map(|chunk| futures::stream::iter(Pieces::of(chunk)))
        .eventsource()
}

/// A provider's SSE events; a broken body or invalid SSE ends the stream with one transient
/// error.
pub fn events<E>(
    body: impl Stream<Item = Result<bytes::Bytes, E>>,
) -> impl Stream<Item = Result<Event, ModelError>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    sse_events(body).map(|event| event.map_err(event_stream_error))
}

/// One chunk of a body as pieces of at most [`PIECE_BYTES`], each ending after a line feed
/// (a line longer than that is a piece of its own; the chunk's end may cut a line, as the
/// network may).
enum Pieces<E> {
    Chunk(bytes::Bytes),
    Error(Option<E>),
}

impl<E> Pieces<E> {
    fn of(chunk: Result<bytes::Bytes, E>) -> Pieces<E> {
        match chunk {
            Ok(chunk) => Pieces::Chunk(chunk),
            Err(error) => Pieces::Error(Some(error)),
        }
    }
}

impl<E> Iterator for Pieces<E> {
    type Item = Result<bytes::Bytes, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = match self {
            Pieces::Error(error) => return error.take().map(Err),
            Pieces::Chunk(rest) => rest,
        };
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= PIECE_BYTES {
            return Some(Ok(std::mem::take(rest)));
        }
        let end = match memchr::memrchr(b'\n', &rest[..PIECE_BYTES]) {
            Some(line_feed) => line_feed + 1,
            None => memchr::memchr(b'\n', &rest[PIECE_BYTES..])
                .map_or(rest.len(), |line_feed| PIECE_BYTES + line_feed + 1),
        };
        Some(Ok(rest.split_to(end)))
    }
}

/// Turns a protocol's SSE events into model events. A decoder is fed every event of one
/// response in order; returning `Done` ends the stream.
pub trait Decoder: Send + 'static {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError>;
}

/// A user-role or assistant-role message of the history, before a protocol gives it its shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry<'a> {
    /// The user's text and images, or text from the runtime (a notice, a summary).
    User { text: String, images: &'a [Image] },
    /// What the model answered in one step: its text (possibly empty), then the tool calls it
    /// made, each with its result.
    Assistant { text: String, calls: Vec<Call<'a>> },
    /// Reasoning the provider can take back (its own opaque state), before the answer it led to.
    Reasoning { state: &'a Value },
}

/// A tool call of the history with its result as the model should read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call<'a> {
    pub call_id: &'a str,
    pub name: &'a str,
    /// Always a JSON object (see [`parse_arguments`]).
    pub arguments: &'a Value,
    pub output: String,
}

impl Endpoint {
    pub fn new(provider: &ProviderConfig) -> Endpoint {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .expect("the HTTP client can be built (its TLS backend is compiled in)");
        Endpoint {
            http,
            base_url: api_base(provider.protocol, &provider.base_url),
            api_key_env: provider.api_key_env.clone(),
        }
    }

    /// A JSON POST to `{base_url}{path}`, where the base ends with the API's version (`/v1`)
    /// and `path` is the endpoint under it (`/chat/completions`, `/messages`).
    pub fn post(&self, path: &str, body: &Value) -> RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base_url))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body)
    }

    /// The API key, if the provider names a variable for it.
    pub fn api_key(&self) -> Result<Option<String>, ModelError> {
        let Some(name) = &self.api_key_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(key) if !key.is_empty() => Ok(Some(key)),
            _ => Err(ModelError::Fatal(format!(
                "environment variable {name} is not set"
            ))),
        }
    }
}

/// The base URL the endpoints go under, from a `base_url` written the way either kind of SDK
/// writes it. The Anthropic SDK's base has no version (`https://api.anthropic.com`, and
/// gateways that stand in for it) and adds `/v1/messages`; the OpenAI SDK's base includes it
/// (`https://api.openai.com/v1`, `http://localhost:11434/v1`). So an Anthropic base gets `/v1`
/// unless it ends with it, and an OpenAI base gets `/v1` only when it is a bare host: other
/// OpenAI-compatible servers put their API under paths of their own (`…/v1beta/openai`,
/// `…/openai/v1`), which are used as written.
pub fn api_base(protocol: Protocol, base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let bare_host = reqwest::Url::parse(base).is_ok_and(|url| url.path() == "/");
    let add_version = match protocol {
        Protocol::AnthropicMessages => !base.ends_with("/v1"),
        Protocol::OpenaiChat | Protocol::OpenaiResponses => bare_host,
        Protocol::Demo => false,
    };
    if add_version {
        format!("{base}/v1")
    } else {
        base.to_owned()
    }
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
        let called = format!("POST {} answered {}", response.url(), response.status());
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
    let called = format!("{called} answered {status}");
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

fn event_stream_error<E: std::error::Error>(error: EventStreamError<E>) -> ModelError {
    match error {
        EventStreamError::Transport(error) => ModelError::transient(format!(
            "the provider's stream broke: {}",
            error_chain(&error)
        )),
        other => ModelError::transient(format!("malformed event stream from provider: {other}")),
    }
}

/// An error and its causes on one line: reqwest's own message rarely says what went wrong.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The error for an unsuccessful HTTP status (SPEC §2.3): 408, 409, 429 and 5xx are worth
/// retrying, any other status is not.
pub fn status_error(status: StatusCode, retry_after: Option<Duration>, body: &str) -> ModelError {
    let message = format!("provider answered {status}: {}", provider_message(body));
    if matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error() {
        ModelError::Transient {
            message,
            retry_after,
        }
    } else {
        ModelError::Fatal(message)
    }
}

/// The provider's own explanation in an error body: `error.message` (OpenAI, Anthropic and
/// most compatible servers), a few other common shapes, else the text itself.
pub fn provider_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<Value>(body) {
        let candidates = [
            &json["error"]["message"],
            &json["error"],
            &json["message"],
            &json["detail"],
        ];
        if let Some(message) = candidates.iter().find_map(|value| value.as_str()) {
            return quote(message);
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return "(no message)".to_owned();
    }
    quote(body)
}

/// The wait a provider asks for: OpenAI's `retry-after-ms`, else `Retry-After` in seconds or
/// as an HTTP date (a date in the past means now).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1000.0);
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return duration_from_secs(seconds);
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let date = SystemTime::from(date);
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

fn duration_from_secs(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds.max(0.0)).ok()
}

/// Parses one chunk's JSON; a chunk that is not JSON is worth retrying (a proxy cut it, or the
/// server hiccupped), so it is transient.
pub fn parse_chunk(data: &str) -> Result<Value, ModelError> {
    parse_chunk_as(data)
}

/// `parse_chunk` into a type of the protocol's own, which reads the fields it needs without
/// building a tree of the whole chunk.
pub fn parse_chunk_as<'a, T: serde::Deserialize<'a>>(data: &'a str) -> Result<T, ModelError> {
    serde_json::from_str(data).map_err(|error| {
        ModelError::transient(format!(
            "malformed chunk from provider: {error} in `{}`",
            quote(data)
        ))
    })
}

/// An error event inside a stream the provider had accepted (HTTP 200). Rate limits, overloads
/// and server errors are transient; any other named error is not; an error without a code is
/// taken as transient, since the request itself was accepted.
pub fn stream_error(code: Option<&str>, message: Option<&str>) -> ModelError {
    let message = format!(
        "the provider reported an error{}: {}",
        code.map(|code| format!(" ({code})")).unwrap_or_default(),
        quote(message.unwrap_or("(no message)"))
    );
    let Some(code) = code else {
        return ModelError::transient(message);
    };
    if let Ok(status) = code.parse::<u16>()
        && let Ok(status) = StatusCode::from_u16(status)
    {
        return match status_error(status, None, "") {
            ModelError::Transient { .. } => ModelError::transient(message),
            ModelError::Fatal(_) => ModelError::Fatal(message),
        };
    }
    const TRANSIENT: &[&str] = &[
        "overloaded",
        "rate_limit",
        "server_error",
        "api_error",
        "timeout",
        "unavailable",
        "internal",
    ];
    let code = code.to_ascii_lowercase();
    if TRANSIENT.iter().any(|word| code.contains(word)) {
        ModelError::transient(message)
    } else {
        ModelError::Fatal(message)
    }
}

/// A model's tool-call arguments as a JSON object. Text that is not a JSON object is passed on
/// as `{"_raw": text}` so the tool can report the problem to the model instead of the turn
/// failing; no text at all means no arguments.
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({ "_raw": text }),
    }
}

/// An event's type: its data's `type` field, or else its SSE event name.
pub fn kind_or_name<'a>(kind: &'a LenientText<'_>, event: &'a Event) -> &'a str {
    if kind.0.is_empty() {
        &event.event
    } else {
        &kind.0
    }
}

/// A text field of a streamed chunk, read leniently: a string (borrowed from the chunk when it
/// has no escapes), or empty for a null, a missing field or any other type, which a chunk
/// may carry where text is expected and which is not worth failing a stream over.
#[derive(Debug, Default)]
pub struct LenientText<'a>(pub std::borrow::Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for LenientText<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = LenientText<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(LenientText(text.into()))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(LenientText(text.to_owned().into()))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(LenientText(text.into()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LenientText::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(LenientText::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(LenientText::default())
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// A string field of a JSON value, or "".
pub fn text_of<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_default()
}

/// An image as a URL: its own, or its data as a base64 `data:` URL.
pub fn image_url(image: &Image) -> Option<String> {
    match (&image.data, &image.url) {
        (Some(data), _) => Some(format!("data:{};base64,{data}", image.media_type)),
        (None, Some(url)) => Some(url.clone()),
        (None, None) => None,
    }
}

/// The history as the model should read it, grouped into user and assistant entries.
///
/// Compacted items (their summary stands for them) and reasoning are left out. An answer's text
/// and the tool calls of the same step form one assistant entry. Notices and summaries are
/// user-role text with a marker so the model can tell them from the user's words.
pub fn entries(history: &[Item]) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    // (turn, step) of the last entry when it is an assistant entry; an item joins it only if
    // it comes from the same model call (items stored before steps were recorded compare by
    // turn alone).
    let mut assistant_turn: Option<(&str, Option<u32>)> = None;
    for item in history.iter().filter(|item| !item.compacted) {
        let joins = assistant_turn == Some((item.turn_id.as_str(), item.step));
        match &item.kind {
            ItemKind::UserMessage { text, images, .. } => {
                entries.push(Entry::User {
                    text: text.clone(),
                    images,
                });
                assistant_turn = None;
            }
            ItemKind::Notice { text } => {
                entries.push(Entry::User {
                    text: format!("[runtime notice] {text}"),
                    images: &[],
                });
                assistant_turn = None;
            }
            ItemKind::Summary { text, .. } => {
                entries.push(Entry::User {
                    text: format!("[summary of earlier conversation] {text}"),
                    images: &[],
                });
                assistant_turn = None;
            }
            ItemKind::Reasoning {
                state: Some(state), ..
            } => {
                entries.push(Entry::Reasoning { state });
                assistant_turn = None;
            }
            ItemKind::Reasoning { state: None, .. } => {}
            ItemKind::AgentMessage { text } => {
                if text.is_empty() {
                    continue;
                }
                // Text after the step's tool calls belongs to the next step.
                if joins
                    && let Some(Entry::Assistant {
                        text: joined,
                        calls,
                    }) = entries.last_mut()
                    && calls.is_empty()
                {
                    joined.push_str("\n\n");
                    joined.push_str(text);
                    continue;
                }
                entries.push(Entry::Assistant {
                    text: text.clone(),
                    calls: Vec::new(),
                });
                assistant_turn = Some((&item.turn_id, item.step));
            }
            ItemKind::ToolCall {
                call_id,
                name,
                arguments,
                output,
                exit_code,
            } => {
                let call = Call {
                    call_id,
                    name,
                    arguments,
                    output: tool_result_text(output, *exit_code, item.status),
                };
                if joins && let Some(Entry::Assistant { calls, .. }) = entries.last_mut() {
                    calls.push(call);
                    continue;
                }
                entries.push(Entry::Assistant {
                    text: String::new(),
                    calls: vec![call],
                });
                assistant_turn = Some((&item.turn_id, item.step));
            }
        }
    }
    // Reasoning goes back only with the answer it led to: a provider rejects reasoning that
    // no output follows (an interrupt between the two, or an incomplete response).
    let mut kept = Vec::with_capacity(entries.len());
    let mut entries = entries.into_iter().peekable();
    while let Some(entry) = entries.next() {
        let orphan = matches!(entry, Entry::Reasoning { .. })
            && !matches!(entries.peek(), Some(Entry::Assistant { .. }));
        if !orphan {
            kept.push(entry);
        }
    }
    kept
}

/// A tool's result as the model reads it: the output, then how it ended when that is not
/// plain success. Never empty, since some providers reject empty results.
pub fn tool_result_text(output: &str, exit_code: Option<i32>, status: ItemStatus) -> String {
    let mut text = output.to_owned();
    if let Some(code) = exit_code.filter(|code| *code != 0) {
        text.push_str(&format!("\n[exit code {code}]"));
    }
    // A call still `running` in a history never finished: for the model it was interrupted.
    if matches!(status, ItemStatus::Interrupted | ItemStatus::Running) {
        text.push_str("\n[interrupted]");
    }
    if text.is_empty() {
        return "(no output)".to_owned();
    }
    text
}

/// Text quoted in an error, cut to a readable length.
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if text.chars().count() > QUOTE_CHARS {
        quoted.push('…');
    }
    quoted
}

/// Test support shared by the protocol modules: run a decoder over a recorded SSE body.
#[cfg(test)]
pub mod testing {
    /// A request as the protocols' request-body tests use it: the shared history and one tool.
    pub fn request(model: &str) -> super::super::ModelRequest {
        super::super::ModelRequest {
            model: model.into(),
            instructions: Some("be brief".into()),
            history: history(),
            tools: vec![super::super::ToolSpec {
                name: "shell",
                description: "run".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            max_output_tokens: 99,
            reasoning_context: None,
            compaction: false,
        }
    }

    use futures::StreamExt;

    use super::{Decoder, ModelError, ModelEvent};
    use crate::domain::{Item, ItemKind, ItemStatus, MessageSource};

    /// The events a decoder produces for an SSE body, up to and including the first error or
    /// `Done`, as `wire::stream` would yield them.
    pub fn decode(mut decoder: impl Decoder, body: &str) -> Vec<Result<ModelEvent, ModelError>> {
        let bytes = futures::stream::iter([Ok::<_, std::convert::Infallible>(
            bytes::Bytes::copy_from_slice(body.as_bytes()),
        )]);
        let events: Vec<_> = futures::executor::block_on(super::events(bytes).collect());
        let mut out = Vec::new();
        for event in events {
            match decoder.decode(&event.expect("a well-formed SSE body")) {
                Ok(model_events) => {
                    for model_event in model_events {
                        let done = model_event == ModelEvent::Done;
                        out.push(Ok(model_event));
                        if done {
                            return out;
                        }
                    }
                }
                Err(error) => {
                    out.push(Err(error));
                    return out;
                }
            }
        }
        out
    }

    pub fn item(turn_id: &str, kind: ItemKind, status: ItemStatus) -> Item {
        Item {
            id: crate::domain::new_id("m"),
            session_id: "s_1".to_owned(),
            turn_id: turn_id.to_owned(),
            seq: 0,
            created_at: crate::domain::now(),
            status,
            compacted: false,
            step: None,
            kind,
        }
    }

    /// A small history covering every kind: a user message with an image, a step with text
    /// and two tool calls (one failing, one interrupted), reasoning, a notice, a summary.
    pub fn history() -> Vec<Item> {
        use serde_json::json;
        let done = ItemStatus::Completed;
        vec![
            item(
                "t_0",
                ItemKind::Summary {
                    text: "earlier".into(),
                    covers_through_seq: 3,
                },
                done,
            ),
            item(
                "t_1",
                ItemKind::UserMessage {
                    text: "look".into(),
                    source: MessageSource::User,
                    from_session_id: None,
                    images: vec![crate::domain::Image {
                        media_type: "image/png".into(),
                        data: Some("AAAA".into()),
                        url: None,
                    }],
                },
                done,
            ),
            item(
                "t_1",
                ItemKind::Reasoning {
                    text: "hmm".into(),
                    state: None,
                },
                done,
            ),
            item(
                "t_1",
                ItemKind::AgentMessage {
                    text: "Checking.".into(),
                },
                done,
            ),
            item(
                "t_1",
                ItemKind::ToolCall {
                    call_id: "call_a".into(),
                    name: "shell".into(),
                    arguments: json!({"command": "false"}),
                    output: "oops".into(),
                    exit_code: Some(1),
                },
                ItemStatus::Failed,
            ),
            item(
                "t_1",
                ItemKind::ToolCall {
                    call_id: "call_b".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "x"}),
                    output: String::new(),
                    exit_code: None,
                },
                ItemStatus::Interrupted,
            ),
            item(
                "t_1",
                ItemKind::Notice {
                    text: "the turn was interrupted".into(),
                },
                done,
            ),
            item(
                "t_2",
                ItemKind::UserMessage {
                    text: "again".into(),
                    source: MessageSource::User,
                    from_session_id: None,
                    images: vec![],
                },
                done,
            ),
            item(
                "t_2",
                ItemKind::AgentMessage {
                    text: "Done.".into(),
                },
                done,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::MessageSource;
    use testing::item;

    /// The (name, data) of the events of a body that arrives in these reads.
    fn parse(reads: Vec<&[u8]>) -> Vec<(String, String)> {
        let body = futures::stream::iter(
            reads
                .into_iter()
                .map(|read| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(read))),
        );
        futures::executor::block_on(events(body).collect::<Vec<_>>())
            .into_iter()
            .map(|event| {
                let event = event.expect("a valid event");
                (event.event, event.data)
            })
            .collect()
    }

    #[test]
    fn a_body_cut_anywhere_or_sent_whole_gives_the_same_events() {
        // A data line longer than a piece, with two-, three- and four-byte characters in it.
        let long = "h\u{e9}llo \u{4e16}\u{754c} \u{1f600} ".repeat(PIECE_BYTES / 8);
        let body = format!(
            "event: a\ndata: {{\"t\":\"h\u{e9}llo\"}}\n\ndata: x\r\n\r\n: note\n\nid: 7\n\ndata: line 1\ndata: line 2\n\ndata:\n\ndata: {long}\n\n"
        );
        let whole = parse(vec![body.as_bytes()]);
        let message = || "message".to_owned();
        assert_eq!(
            whole,
            [
                ("a".to_owned(), "{\"t\":\"h\u{e9}llo\"}".to_owned()),
                (message(), "x".to_owned()),
                (message(), "line 1\nline 2".to_owned()),
                (message(), String::new()),
                (message(), long.clone()),
            ]
        );
        // A byte per read: every cut, inside each multi-byte character too.
        let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        assert_eq!(parse(bytes), whole);
        // Every cut into two reads.
        for cut in 1..body.len() {
            let (head, tail) = body.as_bytes().split_at(cut);
            assert_eq!(parse(vec![head, tail]), whole, "cut at {cut}");
        }
        // The body many times over in one giant read, as a burst can arrive.
        let many = parse(vec![body.repeat(200).as_bytes()]);
        assert_eq!(many.len(), whole.len() * 200);
        assert!(many.chunks(whole.len()).all(|events| events == whole));
    }

    #[test]
    fn a_read_is_cut_into_pieces_of_whole_lines() {
        let line = |n: usize| format!("data: {}\n", "x".repeat(n));
        let read = [line(100).repeat(100), line(3 * PIECE_BYTES), line(10)].concat();
        let pieces: Vec<bytes::Bytes> =
            Pieces::<std::io::Error>::of(Ok(bytes::Bytes::from(read.clone())))
                .map(|piece| piece.expect("no error"))
                .collect();
        assert_eq!(pieces.concat(), read.as_bytes());
        for piece in &pieces {
            assert!(piece.ends_with(b"\n"), "a piece ends after a line feed");
            let lines = piece.iter().filter(|&&byte| byte == b'\n').count();
            assert!(piece.len() <= PIECE_BYTES || lines == 1, "{}", piece.len());
        }
        assert!(pieces.len() > 3, "{} pieces", pieces.len());
        // A read no longer than a piece is handed on whole, line ends or not.
        let short = Pieces::<std::io::Error>::of(Ok(bytes::Bytes::from_static(b"data: a\ndat")));
        assert_eq!(short.count(), 1);
    }

    #[test]
    fn statuses_are_classified_by_the_retry_rule() {
        let transient = [408, 409, 429, 500, 502, 503, 504, 529];
        let fatal = [400, 401, 403, 404, 413, 422];
        for status in transient {
            let error = status_error(StatusCode::from_u16(status).unwrap(), None, "");
            assert!(
                matches!(error, ModelError::Transient { .. }),
                "{status}: {error:?}"
            );
        }
        for status in fatal {
            let error = status_error(StatusCode::from_u16(status).unwrap(), None, "");
            assert!(matches!(error, ModelError::Fatal(_)), "{status}: {error:?}");
        }
    }

    #[test]
    fn the_provider_message_is_quoted() {
        let check = |body: &str, expected: &str| {
            assert_eq!(provider_message(body), expected, "{body}");
        };
        check(
            r#"{"error": {"message": "bad model", "type": "invalid_request_error"}}"#,
            "bad model",
        );
        check(
            r#"{"type": "error", "error": {"type": "x", "message": "too long"}}"#,
            "too long",
        );
        check(r#"{"error": "plain"}"#, "plain");
        check(
            r#"{"object": "error", "message": "vllm says no"}"#,
            "vllm says no",
        );
        check("  Bad Gateway\n", "Bad Gateway");
        check("", "(no message)");
        let long = "x".repeat(QUOTE_CHARS + 10);
        assert_eq!(provider_message(&long).chars().count(), QUOTE_CHARS + 1);
    }

    #[test]
    fn a_rejection_carries_status_and_message() {
        let error = status_error(
            StatusCode::BAD_REQUEST,
            None,
            r#"{"error": {"message": "no such model"}}"#,
        );
        assert_eq!(
            error,
            ModelError::Fatal("provider answered 400 Bad Request: no such model".into())
        );
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37 UTC
        let check = |headers: &[(&'static str, &str)], expected: Option<Duration>| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.insert(*name, value.parse().unwrap());
            }
            assert_eq!(retry_after(&map, now), expected, "{headers:?}");
        };
        check(&[], None);
        check(&[("retry-after", "0")], Some(Duration::ZERO));
        check(&[("retry-after", "7")], Some(Duration::from_secs(7)));
        check(&[("retry-after", "1.5")], Some(Duration::from_millis(1500)));
        check(
            &[("retry-after", "Sun, 06 Nov 1994 08:49:47 GMT")],
            Some(Duration::from_secs(10)),
        );
        check(
            &[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")],
            Some(Duration::ZERO),
        );
        check(&[("retry-after", "soon")], None);
        check(
            &[("retry-after", "3"), ("retry-after-ms", "250")],
            Some(Duration::from_millis(250)),
        );
    }

    #[test]
    fn stream_errors_are_transient_only_when_retrying_can_help() {
        let transient = [
            None,
            Some("overloaded_error"),
            Some("rate_limit_exceeded"),
            Some("server_error"),
            Some("api_error"),
            Some("502"),
        ];
        for code in transient {
            let error = stream_error(code, Some("m"));
            assert!(
                matches!(error, ModelError::Transient { .. }),
                "{code:?}: {error:?}"
            );
        }
        for code in ["invalid_request_error", "invalid_prompt", "400"] {
            let error = stream_error(Some(code), Some("m"));
            assert!(matches!(error, ModelError::Fatal(_)), "{code}: {error:?}");
        }
    }

    #[test]
    fn arguments_are_always_an_object() {
        assert_eq!(parse_arguments(r#"{"a": 1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(r#"{"a": "#), json!({"_raw": r#"{"a": "#}));
        assert_eq!(parse_arguments("[1]"), json!({"_raw": "[1]"}));
    }

    #[test]
    fn tool_results_say_how_the_tool_ended() {
        let check = |output: &str, code: Option<i32>, status, expected: &str| {
            assert_eq!(tool_result_text(output, code, status), expected);
        };
        check("hi\n", Some(0), ItemStatus::Completed, "hi\n");
        check("hi", Some(2), ItemStatus::Completed, "hi\n[exit code 2]");
        check("part", None, ItemStatus::Interrupted, "part\n[interrupted]");
        check("", None, ItemStatus::Completed, "(no output)");
    }

    #[test]
    fn missing_keys_are_fatal_and_name_the_variable() {
        let endpoint = Endpoint::new(&ProviderConfig {
            protocol: crate::config::Protocol::OpenaiChat,
            base_url: "http://127.0.0.1:1/v1/".into(),
            api_key_env: Some("OPENVAALA_TEST_SURELY_UNSET_KEY".into()),
        });
        assert_eq!(
            endpoint.api_key(),
            Err(ModelError::Fatal(
                "environment variable OPENVAALA_TEST_SURELY_UNSET_KEY is not set".into()
            ))
        );
        assert_eq!(endpoint.base_url, "http://127.0.0.1:1/v1");
    }

    #[test]
    fn base_urls_work_as_either_sdk_writes_them() {
        let check = |protocol, base_url: &str, expected: &str| {
            assert_eq!(
                api_base(protocol, base_url),
                expected,
                "{protocol:?} {base_url}"
            );
        };
        let anthropic = Protocol::AnthropicMessages;
        check(
            anthropic,
            "https://api.anthropic.com",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/v1",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://api.anthropic.com/v1/",
            "https://api.anthropic.com/v1",
        );
        check(
            anthropic,
            "https://gw.example/a/anthropic",
            "https://gw.example/a/anthropic/v1",
        );
        for openai in [Protocol::OpenaiChat, Protocol::OpenaiResponses] {
            check(
                openai,
                "https://api.openai.com",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "https://api.openai.com/",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "https://api.openai.com/v1",
                "https://api.openai.com/v1",
            );
            check(
                openai,
                "http://127.0.0.1:11434/v1/",
                "http://127.0.0.1:11434/v1",
            );
            // Compatible servers with paths of their own are used as written.
            check(
                openai,
                "https://g.example/v1beta/openai",
                "https://g.example/v1beta/openai",
            );
            check(
                openai,
                "https://r.example/api/v1",
                "https://r.example/api/v1",
            );
        }
    }

    #[test]
    fn history_groups_steps_and_marks_runtime_text() {
        let history = testing::history();
        let entries = entries(&history);
        let texts: Vec<String> = entries
            .iter()
            .map(|entry| match entry {
                Entry::User { text, images } => format!("user {text} ({} images)", images.len()),
                Entry::Assistant { text, calls } => {
                    let calls: Vec<String> = calls
                        .iter()
                        .map(|call| format!("{}={}", call.call_id, call.output))
                        .collect();
                    format!("assistant {text} [{}]", calls.join(", "))
                }
                Entry::Reasoning { state } => format!("reasoning {state}"),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "user [summary of earlier conversation] earlier (0 images)",
                "user look (1 images)",
                "assistant Checking. [call_a=oops\n[exit code 1], call_b=\n[interrupted]]",
                "user [runtime notice] the turn was interrupted (0 images)",
                "user again (0 images)",
                "assistant Done. []",
            ]
        );
    }

    #[test]
    fn tool_calls_of_separate_model_calls_are_separate_assistant_entries() {
        let call = |id: &str, step: u32| {
            let mut item = testing::item(
                "t1",
                ItemKind::ToolCall {
                    call_id: id.into(),
                    name: "shell".into(),
                    arguments: serde_json::json!({}),
                    output: "ok".into(),
                    exit_code: Some(0),
                },
                ItemStatus::Completed,
            );
            item.step = Some(step);
            item
        };
        // Two calls in one answer, then one call in the next answer of the same turn.
        let history = [call("a", 1), call("b", 1), call("c", 2)];
        let calls: Vec<Vec<&str>> = entries(&history)
            .iter()
            .map(|entry| match entry {
                Entry::Assistant { calls, .. } => calls.iter().map(|c| c.call_id).collect(),
                Entry::User { .. } | Entry::Reasoning { .. } => Vec::new(),
            })
            .collect();
        assert_eq!(calls, vec![vec!["a", "b"], vec!["c"]]);
    }

    #[test]
    fn reasoning_goes_back_only_with_the_answer_it_led_to() {
        let user = |text: &str| ItemKind::UserMessage {
            text: text.into(),
            source: MessageSource::User,
            from_session_id: None,
            images: vec![],
        };
        let reasoning = || ItemKind::Reasoning {
            text: "thinking".into(),
            state: Some(serde_json::json!({"type": "reasoning", "id": "rs_1"})),
        };
        let done = ItemStatus::Completed;
        // Interrupted between the reasoning and its answer: the reasoning is left out.
        let cut = vec![
            item("t_1", user("q1"), done),
            item("t_1", reasoning(), ItemStatus::Interrupted),
            item("t_2", user("q2"), done),
        ];
        assert!(
            !entries(&cut)
                .iter()
                .any(|entry| matches!(entry, Entry::Reasoning { .. }))
        );
        // Followed by its answer: it goes back.
        let whole = vec![
            item("t_1", user("q1"), done),
            item("t_1", reasoning(), done),
            item("t_1", ItemKind::AgentMessage { text: "a1".into() }, done),
        ];
        assert!(matches!(entries(&whole)[1], Entry::Reasoning { .. }));
    }

    #[test]
    fn history_leaves_out_compacted_items_and_splits_turns() {
        let user = |text: &str| ItemKind::UserMessage {
            text: text.into(),
            source: MessageSource::User,
            from_session_id: None,
            images: vec![],
        };
        let answer = |text: &str| ItemKind::AgentMessage { text: text.into() };
        let done = ItemStatus::Completed;
        let mut old = item("t_0", user("old"), done);
        old.compacted = true;
        let history = vec![
            old,
            item("t_1", answer("one"), done),
            item("t_2", answer("two"), done),
            item("t_2", answer("three"), done),
        ];
        let entries = entries(&history);
        assert_eq!(
            entries,
            [
                Entry::Assistant {
                    text: "one".into(),
                    calls: vec![]
                },
                Entry::Assistant {
                    text: "two\n\nthree".into(),
                    calls: vec![]
                },
            ]
        );
    }
}
