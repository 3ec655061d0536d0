//! The `skill` tool and what a loaded skill allows: the turn reads the skills of its working
//! directory when it starts (`repo::skills`), lists them in the instructions, hands a skill's
//! body to the model that asks for it, and while a skill that narrows the tools
//! (`allowed-tools`) is in use, refuses the calls of other tools.

use std::sync::Mutex;

use serde_json::Value;

use crate::repo::skills::Catalogue;
use crate::tools::ToolResult;

pub const NAME: &str = "skill";

/// Tools a narrowing skill never takes away: loading another skill, and the plan.
const ALWAYS: &[&str] = &[NAME, "update_plan"];

/// The skills a turn sees, and the one in use that narrows its tools.
#[derive(Debug, Default)]
pub struct TurnSkills {
    pub catalogue: Catalogue,
    in_use: Mutex<Option<(String, Vec<String>)>>,
}

impl TurnSkills {
    pub fn new(catalogue: Catalogue) -> TurnSkills {
        TurnSkills {
            catalogue,
            in_use: Mutex::new(None),
        }
    }

    /// Runs the `skill` tool: the skill's body and files (at most `cap` bytes of them, as any
    /// tool's output), or what is known.
    pub fn load(&self, arguments: &Value, cap: usize) -> ToolResult {
        let name = arguments
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim();
        let Some(skill) = self.catalogue.get(name) else {
            let known: Vec<&str> = self
                .catalogue
                .skills
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            return ToolResult::failed(if known.is_empty() {
                format!("no skill `{name}`: there are no skills here")
            } else {
                format!("no skill `{name}` (skills: {})", known.join(", "))
            });
        };
        let narrowing = skill.allowed_tools.as_ref().map(|tools| {
            (
                skill.name.clone(),
                tools.iter().map(|t| tool_name(t)).collect(),
            )
        });
        *self.lock() = narrowing;
        let mut text = skill.loaded();
        if text.len() > cap {
            let kept = crate::text::floor_char_boundary(&text, cap);
            let size = text.len();
            text.truncate(kept);
            text.push_str(&format!(
                "\n[... the skill is cut here: it has {size} bytes, and a tool's output may take {cap}; \
                 read the rest of {} with read_file]",
                skill.path.display()
            ));
        }
        ToolResult::completed(text)
    }

    /// Why a call of `tool` may not run while the skill in use narrows the tools, if it may not.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        let in_use = self.lock();
        let (skill, allowed) = in_use.as_ref()?;
        if ALWAYS.contains(&tool) || allowed.iter().any(|name| name == tool) {
            return None;
        }
        Some(format!(
            "Not run: while the skill `{skill}` is in use, only these tools may be called: {}.",
            allowed.join(", ")
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(String, Vec<String>)>> {
        self.in_use
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A tool as `allowed-tools` may name it: this runtime's name, or another agent's for the same
/// tool (`Read`, `Bash(git:*)`), which skills written for those agents use.
fn tool_name(written: &str) -> String {
    let bare = written.split('(').next().unwrap_or(written).trim();
    let ours = match bare.to_ascii_lowercase().as_str() {
        "bash" => "shell",
        "read" => "read_file",
        "write" => "write_file",
        "edit" | "multiedit" => "edit_file",
        "ls" => "list_dir",
        "grep" => "grep",
        "glob" => "glob",
        "task" => "spawn_agent",
        "todowrite" => "update_plan",
        _ => return bare.to_owned(),
    };
    ours.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::Origin;
    use crate::repo::skills::Skill;
    use crate::tools::ToolStatus;

    fn skills() -> TurnSkills {
        let skill = |name: &str, allowed: Option<Vec<&str>>| Skill {
            name: name.to_owned(),
            description: "d".to_owned(),
            allowed_tools: allowed.map(|tools| tools.into_iter().map(str::to_owned).collect()),
            path: format!("/repo/.agents/skills/{name}/SKILL.md").into(),
            origin: Origin::Repository,
            body: format!("{name} body"),
            beside: Vec::new(),
        };
        TurnSkills::new(Catalogue {
            skills: vec![
                skill("careful", Some(vec!["Read", "Bash(git diff:*)"])),
                skill("free", None),
            ],
            problems: Vec::new(),
        })
    }

    #[test]
    fn a_narrowing_skill_refuses_other_tools_until_another_is_loaded() {
        let skills = skills();
        assert_eq!(skills.refusal("write_file"), None);
        let loaded = skills.load(&serde_json::json!({"name": "careful"}), 10_000);
        assert_eq!(loaded.status, ToolStatus::Completed);
        assert!(loaded.output.contains("careful body"));
        assert_eq!(skills.refusal("read_file"), None);
        assert_eq!(skills.refusal("shell"), None);
        assert_eq!(skills.refusal("update_plan"), None);
        let refused = skills.refusal("write_file").unwrap();
        assert!(
            refused.contains("only these tools may be called: read_file, shell"),
            "{refused}"
        );
        let cut = skills.load(&serde_json::json!({"name": "free"}), 20);
        assert!(
            cut.output.starts_with("Skill `free` (from /"),
            "{}",
            cut.output
        );
        assert!(
            cut.output.contains("[... the skill is cut here"),
            "{}",
            cut.output
        );
        assert_eq!(skills.refusal("write_file"), None);
        let unknown = skills.load(&serde_json::json!({"name": "nope"}), 10_000);
        assert_eq!(unknown.status, ToolStatus::Failed);
        assert!(
            unknown.output.contains("skills: careful, free"),
            "{}",
            unknown.output
        );
    }
}
