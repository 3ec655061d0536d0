//! End-to-end tests: the real server, driven over HTTP and SSE like a real client.

mod fake_provider;
mod harness;
mod support;

mod agent_limit;
mod bad_input;
mod big_messages;
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
mod index_backlog;
mod limits;
mod lock;
mod messages;
mod providers;
mod providers_fidelity;
mod reindex;
mod retries;
mod sandbox;
mod search_recovery;
mod secrets;
mod send;
mod shell_orphans;
mod slow_body;
mod subagents;
mod terminal;
mod turns;
mod ui;
