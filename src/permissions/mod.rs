//! Which tool calls run without asking: each agent's configured permissions (`policy.rs`) and
//! shell commands split into the simple commands they run (`command.rs`). The rules users
//! remembered when they answered an approval are kept by `runtime/rules.rs`, and the approvals
//! themselves live in the conversation's actor (`runtime/actor/approvals.rs`).

pub mod command;
#[cfg(test)]
mod corpus;
pub mod policy;
pub mod rule_shape;
pub mod runners;

pub use policy::{MCP_PREFIX, Permission, Permissions, Reason, RuleChoice, Verdict};
