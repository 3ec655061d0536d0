//! The durable outbox of the notification webhooks: each notification for a URL hook is
//! written (and fsynced) to `<data>/webhooks/outbox.jsonl` before `Hooks::notify` returns, then
//! sent by a task of its own, tried again with back-off until a 2xx answers it, and resumed
//! after a restart. A notification's delivery is stored before it is sent; its `webhook-id`
//! never changes (invariant 12: a repeat, after a crash, carries the same id).
//!
//! - `delivery.rs` — one delivery, and the lines the file holds.
//! - `book.rs` — the deliveries kept in memory: built from the lines, held within a bound,
//!   asked what is due and what to list.
//! - `file.rs` — the JSONL file: read back after a crash, appended and fsynced, compacted.
//! - `backoff.rs` — when a delivery is tried again (shortened for tests).
//! - `queue.rs` — `Outbox`: the book and its file under one lock, and the sender's wake-up.
//! - `sender.rs` — the delivery task: one signed POST per try, its outcome recorded.

mod backoff;
mod book;
mod delivery;
mod file;
mod queue;
mod sender;

pub use backoff::{Backoff, MAX_ATTEMPTS};
pub use book::Bound;
pub use delivery::{Delivery, State, Status};
pub use queue::{Outbox, instance_outboxes, outbox_path};
pub use sender::{FailureReport, start};
