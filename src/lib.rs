//! OpenVaala, an agent runtime service. The code reads top-down in the order data flows:
//!
//! - `config`   — config.toml: providers, models, agents; validation with clear errors
//! - `domain`   — the objects of the API and of the files: Conversation, Session, Item, …
//! - `store`    — the source of truth on disk: JSONL append + fsync, tolerant reader, lock
//! - `index`    — metadata.db (SQLite): listing, search, rebuild (`reindex`)
//! - `model`    — one trait for model calls: openai_chat, openai_responses,
//!   anthropic_messages (shared HTTP/SSE code in `wire`), the built-in `demo` model
//! - `tools`    — the tools agents call: shell (live output), files
//! - `runtime`  — conversation actors (one writer each), the turn loop, event buses
//! - `api`      — the typed contract: request and response bodies, error codes, events
//! - `http`     — axum routes, SSE, errors as JSON, security middleware, the OpenAPI document
//! - `server`   — start-up and shutdown: lock, recovery, serve(listener, shutdown)
//! - `limits`   — the open-file limit and the caps derived from it
//! - `redact`   — secrets taken out of provider errors before they are stored or sent
//!
//! Data flows one way: HTTP → runtime actor → store (append, fsync) → index → event bus → SSE.

pub mod api;
pub mod bus;
pub mod client;
pub mod cluster;
pub mod config;
pub mod domain;
pub mod http;
pub mod index;
pub mod limits;
pub mod model;
pub mod redact;
pub mod runtime;
pub mod server;
pub mod store;
pub mod text;
pub mod tools;
