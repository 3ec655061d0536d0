//! End-to-end tests: the real server, driven over HTTP and SSE like a real client.

mod harness;

mod bad_input;
mod conversations;
mod crash;
mod events;
mod lock;
mod messages;
mod reindex;
