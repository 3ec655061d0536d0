//! End-to-end tests: the real server, driven over HTTP and SSE like a real client.

mod fake_provider;
mod harness;

mod bad_input;
mod big_messages;
mod cluster;
mod compaction;
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
#[path = "../../src/bin/bench/postgres.rs"]
mod postgres;
mod providers;
mod reindex;
mod retries;
mod search_recovery;
mod secrets;
mod send;
mod shell_orphans;
mod subagents;
mod terminal;
mod turns;
mod ui;
