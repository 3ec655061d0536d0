//! What the three provider protocols share: the HTTP call and its SSE stream, errors by status,
//! `Retry-After`, the API key, and the history regrouped into user and assistant entries. It
//! knows no protocol's field names (each protocol module does) and never logs an API key.
//!
//! - `endpoint` — a provider's client, base URL (`api_base`) and API key
//! - `http`     — sending a request and streaming its answer through a protocol's `Decoder`
//! - `sse`      — the SSE events of a body (`sse_events`), read in pieces of whole lines
//! - `errors`   — failures as transient or fatal: HTTP status, error events, `Retry-After`
//! - `chunks`   — a streamed chunk's JSON, read strictly or leniently (`LenientText`)
//! - `history`  — the history as user and assistant entries (`Entry`)

mod chunks;
mod endpoint;
mod errors;
mod history;
mod http;
mod sse;
#[cfg(test)]
pub mod testing;

pub use chunks::{
    LenientText, kind_or_name, parse_arguments, parse_chunk, parse_chunk_as, text_of,
};
pub use endpoint::{Endpoint, api_base};
pub use errors::{provider_message, retry_after, status_error, stream_error};
pub use history::{Call, Entry, entries, image_url, tool_result_text};
pub use http::{Decoder, stream};
pub use sse::{Event, PIECE_BYTES, events, sse_events};
