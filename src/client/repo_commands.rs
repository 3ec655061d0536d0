//! The commands a repository ships in `.agents/commands/` (and the user's own), as the clients
//! offer them: listed beside the built-in ones, and a `/name arguments` line that names one
//! sent as `{"command", "arguments"}`, so the service expands the prompt and keeps the name.
//! The built-in commands of a client go first: a repository's `new.md` does not hide `/new`.

use super::api::{Api, ApiError};
use crate::api::requests::{NewConversation, NewMessage};
use crate::api::responses::CommandInfo;

/// The commands `cwd` sees, by name.
pub async fn list(api: &Api, cwd: &str) -> Result<Vec<CommandInfo>, ApiError> {
    Ok(api.commands(cwd).await?.commands)
}

/// A line's command name and its arguments (`review src/lib.rs` without the `/`).
pub fn split(line: &str) -> (&str, &str) {
    let line = line.trim();
    match line.split_once(char::is_whitespace) {
        Some((name, arguments)) => (name, arguments.trim()),
        None => (line, ""),
    }
}

/// The command called `name`, if `commands` has it.
pub fn find<'a>(commands: &'a [CommandInfo], name: &str) -> Option<&'a CommandInfo> {
    commands.iter().find(|command| command.name == name)
}

/// One line per command for a help text: `/name <hint>` and its description.
pub fn help_lines(commands: &[CommandInfo]) -> Vec<(String, String)> {
    commands
        .iter()
        .map(|command| {
            let usage = match &command.argument_hint {
                Some(hint) => format!("/{} {hint}", command.name),
                None => format!("/{}", command.name),
            };
            (usage, command.description.clone().unwrap_or_default())
        })
        .collect()
}

/// The help text's part for the repository's commands (empty without any).
pub fn help(commands: &[CommandInfo]) -> String {
    let lines = help_lines(commands);
    if lines.is_empty() {
        return String::new();
    }
    let width = lines
        .iter()
        .map(|(usage, _)| usage.len())
        .max()
        .unwrap_or(0);
    let mut out = String::from("Commands of this repository (.agents/commands/) and yours:\n");
    for (usage, description) in lines {
        out += &format!("  {usage:width$}  {description}\n").replace(" \n", "\n");
    }
    out
}

/// What a line sends: its text, or a repository command (by name) with its arguments.
#[derive(Debug, Clone, Copy)]
pub enum Outgoing<'a> {
    Text(&'a str),
    Command(&'a str, &'a str),
}

impl Outgoing<'_> {
    /// The body of a message that sends it.
    pub fn message(self) -> NewMessage {
        match self {
            Outgoing::Text(text) => NewMessage {
                text: text.to_owned(),
                ..NewMessage::default()
            },
            Outgoing::Command(name, arguments) => NewMessage {
                command: Some(name.to_owned()),
                arguments: given(arguments),
                ..NewMessage::default()
            },
        }
    }

    /// The body of a conversation started in `cwd` with it.
    pub fn conversation(self, cwd: &str) -> NewConversation {
        let mut body = match self {
            Outgoing::Text(text) => NewConversation {
                text: text.to_owned(),
                ..NewConversation::default()
            },
            Outgoing::Command(name, arguments) => NewConversation {
                command: Some(name.to_owned()),
                arguments: given(arguments),
                ..NewConversation::default()
            },
        };
        body.cwd = Some(cwd.to_owned());
        body
    }
}

fn given(arguments: &str) -> Option<String> {
    Some(arguments.to_owned()).filter(|arguments| !arguments.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::Origin;

    #[test]
    fn a_line_splits_into_the_name_and_its_arguments() {
        assert_eq!(
            split("review  src/lib.rs now "),
            ("review", "src/lib.rs now")
        );
        assert_eq!(split("fix"), ("fix", ""));
        let commands = [CommandInfo {
            name: "review".to_owned(),
            description: Some("Review a file".to_owned()),
            argument_hint: Some("<path>".to_owned()),
            agent: None,
            model: None,
            path: "/r/.agents/commands/review.md".to_owned(),
            origin: Origin::Repository,
        }];
        assert!(find(&commands, "review").is_some());
        assert!(find(&commands, "rev").is_none());
        assert!(help(&commands).contains("  /review <path>  Review a file\n"));
        assert_eq!(help(&[]), "");
    }
}
