//! Which tool calls run without asking: each agent's configured permissions (`policy.rs`),
//! shell commands split into the simple commands they run (`command.rs`), and the rules users
//! remembered when they answered an approval (`rules.rs`). The approvals themselves live in
//! the conversation's actor (`runtime/actor/approvals.rs`).

pub mod command;
pub mod policy;
pub mod rules;

pub use policy::{Permission, Permissions, Verdict};
pub use rules::{CallScope, RuleStore};
