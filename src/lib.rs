//! OpenVaala, an agent runtime service. The modules, in the order data flows through them:
//!
//! - `api`      — the typed contract: request and response bodies, error codes, SSE events
//! - `config`   — config.toml: server, providers and models, agents, limits, cluster
//! - `credential` — the local API credential every request carries (`local-token`)
//! - `domain`   — the objects of the API and of the files: Conversation, Session, Item, …
//! - `store`    — the source of truth on disk: JSONL append + fsync, tolerant reader, lock
//! - `index`    — the derived index (SQLite, or PostgreSQL in cluster mode): list, search, rebuild
//! - `model`    — one trait for model calls and a client per wire protocol, the `demo` model
//! - `tools`    — the tools agents call: shell (live output), files, MCP servers' tools
//! - `sandbox`  — the layers every tool process runs behind, and the launcher that sets them up
//! - `checkpoints` — snapshots of working trees around tool calls; a turn's diff; restoring
//! - `mcp`      — Model Context Protocol servers (rmcp): lazy start, tool lists, calls
//! - `permissions` — which tool calls ask first: configured rules, remembered rules
//! - `runtime`  — the registry of conversation actors (one writer each) and the turn loop
//! - `bus`      — event buses: ids, each event encoded once, replay for `Last-Event-ID`
//! - `cluster`  — several instances over one PostgreSQL: leases, forwarding, list events
//! - `http`     — axum routes, SSE, errors as JSON, security, the OpenAPI document
//! - `server`   — start-up and shutdown: lock, recovery, serve(listener, shutdown)
//! - `cli`      — the command line: its arguments and what each command does
//! - `client`   — the terminal clients `openvaala chat` and `send`, plain API clients
//! - `acp`      — `openvaala acp`: the Agent Client Protocol bridge editors start on stdio
//! - `export`   — a conversation written out as a Markdown document
//! - `clock`    — the kernel's monotonic clock, which a faked or stepped process clock cannot move
//! - `images`   — the checks of a message's images before anything is stored
//! - `limits`   — the open-file limit and the caps derived from it
//! - `memory`   — freed memory handed back to the system
//! - `redact`   — secrets taken out of what is stored, sent or logged
//! - `text`     — cutting text on character boundaries
//! - `testkit`  — support for the tests and benchmarks (a PostgreSQL server of their own)
//! - `testhooks` — named points where a test can freeze the process (unset: no effect)
//!
//! Data flows one way: HTTP → runtime actor → store (append, fsync) → index → event bus → SSE.
//! ARCHITECTURE.md has the map of every module and the invariants.

pub mod acp;
pub mod agents;
pub mod api;
pub mod auth;
pub mod bus;
pub mod checkpoints;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod credential;
pub mod domain;
pub mod export;
pub mod hooks;
pub mod http;
pub mod images;
pub mod index;
pub mod limits;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod permissions;
pub mod push;
pub mod readable;
pub mod redact;
pub mod repo;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod testhooks;
pub mod testkit;
pub mod text;
pub mod tls;
pub mod tools;
