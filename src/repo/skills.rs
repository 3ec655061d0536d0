//! Agent Skills: a directory with a `SKILL.md` whose front matter names the skill (`name`, at
//! most 64 lowercase letters, digits and hyphens) and says what it is for (`description`, at
//! most 1,024 characters), and may narrow the tools (`allowed-tools`). The body and the files
//! beside it are the skill. Found in `.agents/skills/` (and `.claude/skills/`) from the
//! repository's top down to the working directory, and in the user's `skills/`; a later one
//! wins a name. A bad `SKILL.md` is skipped with the rule it breaks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Origin, Problem, files, folders, markdown};

pub const FILE_NAME: &str = "SKILL.md";
pub const NAME_MAX: usize = 64;
pub const DESCRIPTION_MAX: usize = 1024;
/// The most skills the instructions list (by name order); the rest are named as left out.
pub const LISTED_MAX: usize = 100;

/// One skill, as found.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The tools the model may call while the skill is in use; absent: no narrowing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Its `SKILL.md`.
    #[schema(value_type = String)]
    pub path: PathBuf,
    pub origin: Origin,
    /// The instructions the `skill` tool gives the model.
    #[serde(skip)]
    pub body: String,
    /// The files beside `SKILL.md` (relative; a directory ends with `/`).
    #[serde(skip)]
    pub beside: Vec<String>,
}

/// The skills a working directory sees, by name, and the files skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalogue {
    pub skills: Vec<Skill>,
    pub problems: Vec<Problem>,
}

/// Reads the skills for `cwd` (and the user's, in `user_dir/skills`).
pub fn discover(cwd: &Path, user_dir: Option<&Path>) -> Catalogue {
    let mut by_name = BTreeMap::new();
    let mut problems = Vec::new();
    for folder in folders::folders("skills", &[".agents", ".claude"], cwd, user_dir) {
        for found in files::dirs_with(&folder, FILE_NAME) {
            match skill(&found, folder.origin) {
                Ok(skill) => {
                    by_name.insert(skill.name.clone(), skill);
                }
                Err(problem) => {
                    tracing::warn!(path = %found.file.path.display(), %problem, "a skill is skipped");
                    problems.push(Problem {
                        path: found.file.path,
                        problem,
                    });
                }
            }
        }
    }
    Catalogue {
        skills: by_name.into_values().collect(),
        problems,
    }
}

fn skill(found: &files::FoundDir, origin: Origin) -> Result<Skill, String> {
    let text = found
        .file
        .text
        .as_ref()
        .map_err(|why| format!("{FILE_NAME} {why}"))?;
    let document = markdown::parse(text)?;
    let name = document
        .text("name")?
        .ok_or("the front matter has no `name`")?;
    if let Some(problem) = bad_name(&name) {
        return Err(problem);
    }
    let description = document
        .text("description")?
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .ok_or("the front matter has no `description`")?;
    let length = description.chars().count();
    if length > DESCRIPTION_MAX {
        return Err(format!(
            "`description` has {length} characters, more than the {DESCRIPTION_MAX} allowed"
        ));
    }
    Ok(Skill {
        name,
        description,
        allowed_tools: document.names("allowed-tools")?,
        path: found.file.path.clone(),
        origin,
        body: document.body,
        beside: found.beside.clone(),
    })
}

/// Why `name` breaks the rules of a skill's name, if it does.
fn bad_name(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > NAME_MAX {
        return Some(format!(
            "`name` must have 1 to {NAME_MAX} characters (`{name}` has {})",
            name.chars().count()
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    (!name.chars().all(allowed)).then(|| {
        format!("`name` may hold only lowercase letters, digits and hyphens (`{name}` does not)")
    })
}

impl Catalogue {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.name == name)
    }

    /// What the instructions say of the skills: each one's name and description, and how to
    /// load one. `None` without skills.
    pub fn listing(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut text = String::from(
            "# Skills\nThese skills hold instructions for particular tasks. When a task matches \
             one, load it with the `skill` tool (its name) before you start, and follow it.\n",
        );
        for skill in self.skills.iter().take(LISTED_MAX) {
            let description = skill.description.replace('\n', " ");
            text.push_str(&format!("- {}: {description}\n", skill.name));
        }
        if self.skills.len() > LISTED_MAX {
            text.push_str(&format!(
                "({} more skills are not listed here; `skill` loads any of them by name.)\n",
                self.skills.len() - LISTED_MAX
            ));
        }
        Some(text.trim_end().to_owned())
    }
}

impl Skill {
    /// What the `skill` tool gives the model: the body, where the skill lives, and the files
    /// beside it (which `read_file` can open).
    pub fn loaded(&self) -> String {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let mut text = format!(
            "Skill `{}` (from {}):\n\n{}",
            self.name,
            self.path.display(),
            self.body.trim_end()
        );
        if !self.beside.is_empty() {
            text.push_str("\n\nFiles beside it:\n");
            for file in &self.beside {
                text.push_str(&format!("- {}\n", dir.join(file).display()));
            }
        }
        if let Some(tools) = &self.allowed_tools {
            text.push_str(&format!(
                "\n\nWhile this skill is in use, only these tools may be called: {}.",
                tools.join(", ")
            ));
        }
        text.trim_end().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(FILE_NAME), text).unwrap();
    }

    #[test]
    fn a_repositorys_skill_wins_over_the_users_and_bad_ones_say_why() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let user = root.path().join("config");
        write(
            &user.join("skills/release"),
            "---\nname: release\ndescription: the user's\n---\nUser body",
        );
        write(
            &user.join("skills/only-mine"),
            "---\nname: only-mine\ndescription: mine\n---\nMine",
        );
        write(
            &repo.join(".agents/skills/release"),
            "---\nname: release\ndescription: Cut a release\nallowed-tools: [shell, read_file]\n---\nRepo body",
        );
        std::fs::write(repo.join(".agents/skills/release/checklist.md"), "- tag").unwrap();
        write(
            &repo.join(".claude/skills/Bad_Name"),
            "---\nname: Bad_Name\ndescription: x\n---\n",
        );
        write(&repo.join(".agents/skills/plain"), "no front matter here");
        let long = "x".repeat(DESCRIPTION_MAX + 1);
        write(
            &repo.join(".agents/skills/long"),
            &format!("---\nname: long\ndescription: {long}\n---\n"),
        );
        let catalogue = discover(&repo, Some(&user));
        let names: Vec<&str> = catalogue.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["only-mine", "release"]);
        let release = catalogue.get("release").unwrap();
        assert_eq!(release.origin, Origin::Repository);
        assert_eq!(release.body, "Repo body");
        assert_eq!(
            release.allowed_tools,
            Some(vec!["shell".to_owned(), "read_file".to_owned()])
        );
        let loaded = release.loaded();
        assert!(loaded.contains("Repo body"), "{loaded}");
        assert!(loaded.contains(&format!(
            "- {}",
            repo.join(".agents/skills/release/checklist.md").display()
        )));
        let problems: Vec<(String, &str)> = catalogue
            .problems
            .iter()
            .map(|p| {
                let dir = p.path.parent().unwrap().file_name().unwrap();
                (dir.to_string_lossy().into_owned(), p.problem.as_str())
            })
            .collect();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|(dir, why)| dir == "Bad_Name" && why.contains("only lowercase letters"))
        );
        assert!(
            problems
                .iter()
                .any(|(dir, why)| dir == "plain" && why.contains("no front matter"))
        );
        assert!(
            problems
                .iter()
                .any(|(dir, why)| dir == "long" && why.contains("1025 characters"))
        );
        let listing = catalogue.listing().unwrap();
        assert!(listing.contains("- release: Cut a release"), "{listing}");
        assert!(listing.contains("- only-mine: mine"), "{listing}");
    }

    #[test]
    fn the_instructions_list_at_most_a_hundred_skills() {
        let many = Catalogue {
            skills: (0..LISTED_MAX + 5)
                .map(|n| Skill {
                    name: format!("s{n:03}"),
                    description: "d".to_owned(),
                    allowed_tools: None,
                    path: PathBuf::from("/s/SKILL.md"),
                    origin: Origin::User,
                    body: String::new(),
                    beside: Vec::new(),
                })
                .collect(),
            problems: Vec::new(),
        };
        let listing = many.listing().unwrap();
        assert_eq!(listing.matches("\n- s").count(), LISTED_MAX);
        assert!(
            listing.ends_with(
                "(5 more skills are not listed here; `skill` loads any of them by name.)"
            )
        );
    }
}
