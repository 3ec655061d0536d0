//! End-to-end tests: the real server, driven over HTTP and SSE like a real client.

mod fake_provider;
mod harness;

mod bad_input;
mod compaction;
mod conversations;
mod crash;
mod events;
mod history;
mod http_fixes;
mod lock;
mod messages;
mod providers;
mod reindex;
mod retries;
mod send;
mod shell_orphans;
mod subagents;
mod terminal;
mod turns;
mod ui;
