//! End-to-end tests: the real server, driven over HTTP and SSE like a real client.

mod fake_provider;
mod harness;
mod support;

mod bad_input;
mod cluster;
mod compaction;
mod contract;
mod conversations;
mod crash;
mod events;
mod faults;
mod history;
mod hostile_input;
mod http_fixes;
mod idempotency;
mod limits;
mod lock;
mod messages;
mod providers;
mod reindex;
mod retries;
mod sandbox;
mod search_recovery;
mod secrets;
mod send;
mod shell_orphans;
mod subagents;
mod terminal;
mod turns;
mod ui;
