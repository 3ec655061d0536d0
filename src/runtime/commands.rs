//! Repository commands as the API serves them: the list a working directory sees, and a
//! request that names one (`{"command", "arguments"}`) turned into the message it stands for.
//! The files are read on the blocking pool, at each request: a command edited in the
//! repository counts from the next message, with nothing to reload.

use std::path::PathBuf;

use super::{Runtime, RuntimeError};
use crate::api::responses::{CommandInfo, CommandList};
use crate::domain::CommandUse;
use crate::repo::Problem;
use crate::repo::commands::{Command, discover};

/// A command found for a request, with its prompt filled in.
pub(super) struct Expanded {
    pub text: String,
    pub used: CommandUse,
    pub command: Command,
}

/// What a message's request asks to send: its own text, or a command. Both at once is refused,
/// as are arguments without a command: either would be dropped without a word.
pub(super) fn named_command(
    text: &str,
    command: &Option<String>,
    arguments: &Option<String>,
) -> Result<Option<CommandUse>, RuntimeError> {
    match command {
        None if arguments.is_some() => Err(RuntimeError::Invalid(
            "`arguments` go with a `command`; without one, send the message as `text`".to_owned(),
        )),
        None => Ok(None),
        Some(_) if !text.trim().is_empty() => Err(RuntimeError::Invalid(
            "give either `text` or `command`, not both: a command's prompt is the message"
                .to_owned(),
        )),
        Some(name) => Ok(Some(CommandUse {
            name: name.trim().trim_start_matches('/').to_owned(),
            arguments: arguments.as_deref().unwrap_or("").trim().to_owned(),
        })),
    }
}

impl Runtime {
    /// `GET /api/commands`: the commands `cwd` (default: the service's working directory)
    /// sees, refused where a conversation could not work.
    pub async fn list_commands(&self, cwd: Option<&str>) -> Result<CommandList, RuntimeError> {
        let cwd = self.cwd_or_default(cwd)?;
        let (commands, problems) = self.discover_commands(PathBuf::from(cwd)).await?;
        Ok(CommandList {
            commands: commands.iter().map(info).collect(),
            problems,
        })
    }

    /// The command `used` names, found for `cwd` and filled in; an unknown name is refused
    /// with the names that are known.
    pub(super) async fn expand_command(
        &self,
        cwd: &str,
        used: CommandUse,
    ) -> Result<Expanded, RuntimeError> {
        let (mut commands, _) = self.discover_commands(PathBuf::from(cwd)).await?;
        let Some(found) = commands.iter().position(|c| c.name == used.name) else {
            let names: Vec<String> = commands.iter().map(|c| format!("`{}`", c.name)).collect();
            let known = if names.is_empty() {
                format!("{cwd} has no commands")
            } else {
                format!("the commands of {cwd} are {}", names.join(", "))
            };
            return Err(RuntimeError::CommandUnknown(format!(
                "there is no command `{}`: {known}",
                used.name
            )));
        };
        let command = commands.swap_remove(found);
        let text = command.expand(&used.arguments);
        Ok(Expanded {
            text,
            used,
            command,
        })
    }

    async fn discover_commands(
        &self,
        cwd: PathBuf,
    ) -> Result<(Vec<Command>, Vec<Problem>), RuntimeError> {
        let user_dir = self.shared.config.directory();
        tokio::task::spawn_blocking(move || discover(&cwd, user_dir.as_deref()))
            .await
            .map_err(|error| RuntimeError::Internal(error.to_string()))
    }
}

fn info(command: &Command) -> CommandInfo {
    CommandInfo {
        name: command.name.clone(),
        description: command.description.clone(),
        argument_hint: command.argument_hint.clone(),
        agent: command.agent.clone(),
        model: command.model.clone(),
        path: command.path.to_string_lossy().into_owned(),
        origin: command.origin,
    }
}
