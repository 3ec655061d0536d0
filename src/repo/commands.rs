//! Commands: a Markdown file in `.agents/commands/` (from the repository's top down to the
//! working directory) or the user's `commands/`, named by its file name. Its front matter may
//! give `description`, `argument-hint`, `agent` and `model`; its body is the prompt, with
//! `$ARGUMENTS` (all the arguments) and `$1`, `$2`, … (each word) filled in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Origin, Problem, files, folders, markdown};

/// One command, as found.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Command {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the arguments are, for a client to show (`<issue number>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// The agent a new conversation started with it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model a new conversation started with it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[schema(value_type = String)]
    pub path: PathBuf,
    pub origin: Origin,
    /// The prompt, before its arguments are filled in.
    #[serde(skip)]
    pub body: String,
}

/// The commands a working directory sees, by name, and the files skipped.
pub fn discover(cwd: &Path, user_dir: Option<&Path>) -> (Vec<Command>, Vec<Problem>) {
    let mut by_name = BTreeMap::new();
    let mut problems = Vec::new();
    for folder in folders::folders("commands", &[".agents"], cwd, user_dir) {
        for found in files::markdown_files(&folder) {
            match command(&found, folder.origin) {
                Ok(command) => {
                    by_name.insert(command.name.clone(), command);
                }
                Err(problem) => problems.push(Problem {
                    path: found.path,
                    problem,
                }),
            }
        }
    }
    (by_name.into_values().collect(), problems)
}

fn command(found: &files::Found, origin: Origin) -> Result<Command, String> {
    let (name, text) = found.named_text("a command's")?;
    // The front matter is optional: a plain file is all prompt.
    let (document, body) = if text.starts_with("---") {
        let document = markdown::parse(text)?;
        let body = document.body.clone();
        (Some(document), body)
    } else {
        (None, text.to_owned())
    };
    let field = |key: &str| match &document {
        Some(document) => document.text(key),
        None => Ok(None),
    };
    if body.trim().is_empty() {
        return Err("the prompt (the file's body) is empty".to_owned());
    }
    Ok(Command {
        name,
        description: field("description")?,
        argument_hint: field("argument-hint")?,
        agent: field("agent")?,
        model: field("model")?,
        path: found.path.clone(),
        origin,
        body,
    })
}

impl Command {
    /// The prompt with `arguments` filled in: `$ARGUMENTS` is all of them as given, `$1` …
    /// `$9` each word (empty when missing). Without any placeholder, given arguments follow the
    /// prompt on a line of their own, so that they are never lost.
    pub fn expand(&self, arguments: &str) -> String {
        let arguments = arguments.trim();
        let words: Vec<&str> = arguments.split_whitespace().collect();
        let has_placeholder = self.body.contains("$ARGUMENTS")
            || (1..=9).any(|n| self.body.contains(&format!("${n}")));
        let mut text = self.body.replace("$ARGUMENTS", arguments);
        for n in (1..=9).rev() {
            text = text.replace(&format!("${n}"), words.get(n - 1).copied().unwrap_or(""));
        }
        if !has_placeholder && !arguments.is_empty() {
            text = format!("{}\n\n{arguments}", text.trim_end());
        }
        text.trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(body: &str) -> Command {
        Command {
            name: "c".to_owned(),
            description: None,
            argument_hint: None,
            agent: None,
            model: None,
            path: PathBuf::from("/c.md"),
            origin: Origin::Repository,
            body: body.to_owned(),
        }
    }

    #[test]
    fn arguments_fill_their_placeholders_or_follow_the_prompt() {
        assert_eq!(
            command("Rename $1 in $2, then say \"$ARGUMENTS\".").expand(" width lexer "),
            "Rename width in lexer, then say \"width lexer\"."
        );
        assert_eq!(command("Review $1 and $3.").expand("a"), "Review a and .");
        assert_eq!(
            command("Review the diff.").expand("carefully"),
            "Review the diff.\n\ncarefully"
        );
        assert_eq!(command("Review the diff.\n").expand(""), "Review the diff.");
    }

    #[test]
    fn commands_are_named_by_their_files_and_a_deeper_one_wins() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let deep = repo.join("app");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join(".agents/commands")).unwrap();
        std::fs::create_dir_all(deep.join(".agents/commands")).unwrap();
        std::fs::write(
            repo.join(".agents/commands/review.md"),
            "---\ndescription: Review\nargument-hint: <path>\n---\nReview $ARGUMENTS",
        )
        .unwrap();
        std::fs::write(
            deep.join(".agents/commands/review.md"),
            "Review the app's $1",
        )
        .unwrap();
        std::fs::write(repo.join(".agents/commands/Bad Name.md"), "x").unwrap();
        std::fs::write(
            repo.join(".agents/commands/empty.md"),
            "---\ndescription: e\n---\n",
        )
        .unwrap();
        let (commands, problems) = discover(&deep, None);
        assert_eq!(commands.len(), 1);
        assert_eq!(commands[0].body, "Review the app's $1");
        assert_eq!(commands[0].path, deep.join(".agents/commands/review.md"));
        assert_eq!(problems.len(), 2, "{problems:?}");
        let (top, _) = discover(&repo, None);
        assert_eq!(top[0].argument_hint.as_deref(), Some("<path>"));
    }
}
