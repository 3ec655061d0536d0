//! The typed contract of the HTTP API: request and response bodies, error codes, and the events
//! of the two SSE streams. Handlers return these types, the runtime publishes them, and the
//! OpenAPI document (`http/openapi.rs`) is generated from them, so the three cannot drift.

pub mod approvals;
pub mod edits;
pub mod errors;
pub mod events;
pub mod push;
pub mod reference;
pub mod requests;
pub mod responses;
pub mod tokens;
