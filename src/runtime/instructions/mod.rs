//! What every request of a session starts with, in this order: the base prompt (built in,
//! replaced, or none: `base_instructions`), the agent's own `instructions`, for a sub-agent how
//! its work reaches its parent, the environment block, and the AGENTS.md files (global, then the
//! repository's from its top down to the working directory). Stable parts come first and the
//! whole is byte-stable within a session, so a provider can cache it.
//!
//! - `base`        — the built-in base prompt, with the lines of the tools the agent has
//! - `environment` — the environment block, worked out once per session (`EnvironmentCell`)
//! - `project`     — the AGENTS.md files, read without following links

mod base;
mod environment;
mod project;

use std::path::Path;

pub use environment::{EnvironmentCell, Facts};

use crate::config::{AgentConfig, BaseInstructions, Config};

/// What a sub-agent is told about its place.
const SUB_AGENT_NOTE: &str = "You are a sub-agent: another agent gave you the task in the \
first message. Work on it on your own; your final message of each turn is reported to that \
agent automatically, so end with what it needs to know.";

/// A session's instructions but for the environment block, which joins them when a turn
/// starts (`text`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The base prompt, the agent's instructions and the sub-agent note.
    head: Option<String>,
    /// The AGENTS.md files.
    project: Option<String>,
}

impl Prompt {
    /// The prompt of a session of `agent` working in `cwd`. Reads the AGENTS.md files.
    pub fn new(config: &Config, agent: &AgentConfig, cwd: &Path, sub_agent: bool) -> Prompt {
        let mut head: Vec<String> = Vec::new();
        match &agent.base_instructions {
            BaseInstructions::Builtin => head.push(base::base_prompt(&agent.tools)),
            BaseInstructions::Replaced(text) => head.push(text.to_string()),
            BaseInstructions::Off => {}
        }
        if let Some(own) = agent
            .instructions
            .as_deref()
            .filter(|text| !text.is_empty())
        {
            head.push(own.to_owned());
        }
        if sub_agent {
            head.push(SUB_AGENT_NOTE.to_owned());
        }
        Prompt {
            head: (!head.is_empty()).then(|| head.join("\n\n")),
            project: project::read(config.directory().as_deref(), cwd),
        }
    }

    /// The whole instructions, with the environment block when there is one.
    pub fn text(&self, environment: Option<&str>) -> Option<String> {
        let parts: Vec<&str> = [self.head.as_deref(), environment, self.project.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_come_in_their_order_and_base_instructions_replace_or_drop_the_base() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "use tabs").unwrap();
        let config = Config::builtin();
        let mut agent = config.default_agent().clone();
        agent.instructions = Some("be terse".into());
        let text = Prompt::new(&config, &agent, dir.path(), true)
            .text(Some("# Environment"))
            .unwrap();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {text}"))
        };
        assert!(at("You are a coding agent") < at("be terse"));
        assert!(at("be terse") < at("You are a sub-agent"));
        assert!(at("You are a sub-agent") < at("# Environment"));
        assert!(at("# Environment") < at("use tabs"));

        agent.base_instructions = BaseInstructions::Replaced("house rules".into());
        let text = Prompt::new(&config, &agent, dir.path(), false)
            .text(None)
            .unwrap();
        assert!(text.starts_with("house rules\n\nbe terse"), "{text}");
        assert!(!text.contains("You are a coding agent"));

        agent.base_instructions = BaseInstructions::Off;
        agent.instructions = None;
        std::fs::remove_file(dir.path().join("AGENTS.md")).unwrap();
        assert_eq!(
            Prompt::new(&config, &agent, dir.path(), false).text(None),
            None
        );
    }
}
