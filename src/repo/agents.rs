//! Agents as files: `.agents/agents/NAME.md`, from the repository's top down to the working
//! directory (a deeper one wins a name). The front matter takes what an `[agents.NAME]` table
//! of the config file takes; the body is the agent's `instructions`. What such a file may
//! change, and how it merges with the config's tables, is the agent registry's (`agents`);
//! here a file only becomes a table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Problem, files, folders, markdown};

/// One agent file, as the table a config file's `[agents.NAME]` would be.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFile {
    pub name: String,
    pub path: PathBuf,
    pub table: toml::Table,
}

/// The agent files `cwd` sees, by name, and the files skipped.
pub fn discover(cwd: &Path) -> (Vec<AgentFile>, Vec<Problem>) {
    let mut by_name = BTreeMap::new();
    let mut problems = Vec::new();
    for folder in folders::folders("agents", &[".agents"], cwd, None) {
        for found in files::markdown_files(&folder) {
            match agent_file(&found) {
                Ok(file) => {
                    by_name.insert(file.name.clone(), file);
                }
                Err(problem) => {
                    tracing::warn!(path = %found.path.display(), %problem, "an agent file is skipped");
                    problems.push(Problem {
                        path: found.path,
                        problem,
                    });
                }
            }
        }
    }
    (by_name.into_values().collect(), problems)
}

fn agent_file(found: &files::Found) -> Result<AgentFile, String> {
    let (name, text) = found.named_text("an agent's")?;
    let document = markdown::parse(text)?;
    let mut front = document.front;
    // A key left empty (`model:`) is as if not written: TOML has no null.
    front.retain(|_, value| !value.is_null());
    match front.remove("name") {
        None => {}
        Some(yaml_serde::Value::String(given)) if given == name => {}
        Some(given) => {
            return Err(format!(
                "`name` must be the file's name, `{name}` (it is {})",
                yaml_serde::to_string(&given).unwrap_or_default().trim_end()
            ));
        }
    }
    if front.contains_key("instructions") {
        return Err(
            "`instructions` is the file's body: write them below the front matter".to_owned(),
        );
    }
    let mut table: toml::Table = yaml_serde::from_value(yaml_serde::Value::Mapping(front))
        .map_err(|error| format!("the front matter cannot be an agent's settings: {error}"))?;
    let body = document.body.trim();
    if !body.is_empty() {
        table.insert("instructions".to_owned(), toml::Value::from(body));
    }
    Ok(AgentFile {
        name,
        path: found.path.clone(),
        table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_file_is_a_table_with_its_body_as_instructions() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let deep = repo.join("app");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join(".agents/agents")).unwrap();
        std::fs::create_dir_all(deep.join(".agents/agents")).unwrap();
        std::fs::write(
            repo.join(".agents/agents/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews\ntools: [read_file, grep]\n\
             sandbox: read_only\nmodel:\npermissions:\n  shell: deny\n---\n\nRead closely.\n",
        )
        .unwrap();
        std::fs::write(
            deep.join(".agents/agents/reviewer.md"),
            "---\ndescription: Reviews the app\n---\n",
        )
        .unwrap();
        std::fs::write(repo.join(".agents/agents/other.md"), "no front matter").unwrap();
        std::fs::write(
            repo.join(".agents/agents/named.md"),
            "---\nname: someone-else\ndescription: x\n---\n",
        )
        .unwrap();
        std::fs::write(
            repo.join(".agents/agents/twice.md"),
            "---\ndescription: x\ninstructions: y\n---\nz",
        )
        .unwrap();

        let (agents, problems) = discover(&repo);
        assert_eq!(agents.len(), 1, "{agents:?}");
        let table = &agents[0].table;
        assert_eq!(table["description"].as_str(), Some("Reviews"));
        assert_eq!(table["sandbox"].as_str(), Some("read_only"));
        assert_eq!(table["instructions"].as_str(), Some("Read closely."));
        assert_eq!(table["permissions"]["shell"].as_str(), Some("deny"));
        assert!(!table.contains_key("model") && !table.contains_key("name"));
        let mut reasons: Vec<&str> = problems.iter().map(|p| p.problem.as_str()).collect();
        reasons.sort_unstable();
        assert!(
            reasons[0].starts_with("`instructions` is the file's body"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].starts_with("`name` must be the file's name"),
            "{reasons:?}"
        );
        assert!(reasons[2].starts_with("no front matter"), "{reasons:?}");

        // A deeper directory's file wins the name.
        let (deeper, _) = discover(&deep);
        let reviewer = deeper.iter().find(|a| a.name == "reviewer").unwrap();
        assert_eq!(
            reviewer.table["description"].as_str(),
            Some("Reviews the app")
        );
        assert_eq!(reviewer.path, deep.join(".agents/agents/reviewer.md"));
    }

    #[test]
    fn an_agent_file_or_folder_planted_as_a_link_is_not_read() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(
            outside.join("ops.md"),
            "---\ndescription: from outside\n---\nsecret",
        )
        .unwrap();
        std::fs::create_dir_all(repo.join(".agents/agents")).unwrap();
        std::os::unix::fs::symlink(outside.join("ops.md"), repo.join(".agents/agents/ops.md"))
            .unwrap();
        let (agents, _) = discover(&repo);
        assert!(agents.is_empty(), "a linked file is not read: {agents:?}");
        let deep = repo.join("app");
        std::fs::create_dir_all(deep.join(".agents")).unwrap();
        std::os::unix::fs::symlink(&outside, deep.join(".agents/agents")).unwrap();
        let (agents, _) = discover(&deep);
        assert!(agents.is_empty(), "a linked folder is not read: {agents:?}");
    }
}
