//! The live part of the service: a registry of conversation actors (one task per live
//! conversation, the only writer of its files), the turn loop, and the event buses. HTTP
//! handlers call the functions of `Runtime`; they never touch files themselves.

pub mod actor;
pub mod agent_requests;
pub mod budget;
pub mod checkpointing;
pub mod collab;
pub mod compaction;
pub mod fork;
pub mod instructions;
pub mod link;
pub mod one_shot;
pub mod pending;
pub mod prompt;
pub mod retry;
pub mod rules;
pub mod sandboxing;
pub mod title;
pub mod titling;
pub mod turn;
pub mod usage;

mod agent_operations;
mod approval_operations;
pub mod approvals;
pub mod checkpoint_gc;
mod checkpoint_operations;
mod commands;
mod create;
mod error;
mod idempotency;
mod index_jobs;
mod index_queue;
mod key_claims;
mod leases;
mod live;
mod message_hooks;
mod operations;
mod process_operations;
mod registry;
mod service;
mod settings;
mod shared;
mod skill_operations;
mod validate;
mod webhook_operations;

pub use crate::api::requests::{ConversationPatch, NewConversation, NewMessage, PendingPatch};
pub use crate::api::responses::{CompactOutcome, ConversationView, ItemsPage};
pub use actor::{ForkOutcome, Subscription};
pub use error::RuntimeError;
pub use idempotency::{Answer, RequestKey};
pub use index_queue::IndexJob;
pub use operations::{items_page, turns_page};
pub use service::Runtime;
pub use settings::RuntimeSettings;
pub use shared::Shared;
