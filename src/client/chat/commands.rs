//! The plain chat's slash commands (`/help` lists them).

use super::output::print_out;
use super::{Chat, Flow};
use crate::client::api::ApiError;
use crate::client::render::usage_line;
use crate::client::repo_commands::Outgoing;
use crate::client::{agents, calls, files, processes, repo_commands, waiting};
use crate::domain::MessageMode;

const HELP: &str = "\
Type a message to send it to the agent. Commands:
  /new                 start a new conversation with the next message
  /resume [N|id|text]  list recent conversations, or open one (by number, id or search)
  /fork                copy this conversation up to its last finished turn, and continue there
  /rewind [N] [--files] list your messages, or restart from before message N in a copy;
                       --files also puts back the files changed since (conflicts are kept)
  /diff [N]            what turn N changed in the working directory (default: the last)
  /compact             summarize the older history now (compress the context)
  /context             how much of the model's context window is used
  /agents              the agents of this conversation (the root agent and its sub-agents)
                       and the approvals each waits for
  /ps [N|stop N]       the background processes the agents started (status, ports,
                       command), one's latest output (N or its id), or stop one
  /queue TEXT          send TEXT to wait for the running turn instead of steering it
  /interrupt           stop the running turn (the messages that wait stay until the next
                       message, which goes after them)
  /waiting [send N|withdraw N]
                       the messages that wait, numbered; send one now (on its own while the
                       agent is idle), or take one back
  /retry               run the last turn again when it failed (the same messages), or try a
                       model call that waits to be retried now
  /quit                leave (also Ctrl-D, or Ctrl-C while no turn runs; during a turn
                       the first Ctrl-C interrupts it and a second quits)
Start a line with // to send a line that begins with / (e.g. the demo model's //shell ls).";

impl Chat {
    pub(super) async fn command(&mut self, line: &str) -> Result<Flow, ApiError> {
        let (name, argument) = line.split_once(' ').unwrap_or((line, ""));
        let argument = argument.trim();
        match name {
            "quit" | "exit" | "q" => return Ok(Flow::Quit),
            "help" => {
                let commands = self.repository_commands().await.unwrap_or_default();
                print_out(&format!("{HELP}\n{}", repo_commands::help(&commands)));
            }
            "new" => {
                self.following = None;
                print_out("[the next message starts a new conversation]\n");
            }
            "resume" => self.resume(argument).await?,
            "fork" => {
                let id = self.current()?;
                let new_id = calls::fork(&self.api, &id).await?;
                print_out(&format!("[forked into {new_id}]\n"));
                self.open(&new_id).await?;
            }
            "rewind" => self.rewind(argument).await?,
            "diff" => {
                let id = self.current()?;
                let items = self.stored_items(&id).await?;
                print_out(&files::diff(&self.api, &id, &items, argument).await?);
            }
            "compact" => {
                let id = self.current()?;
                // The stream shows the compaction as it happens.
                self.api.compact(&id).await?;
                self.wait_compaction_end().await;
            }
            "retry" => {
                let id = self.current()?;
                if calls::retry_now(&self.api, &id).await? {
                    print_out("[trying the model call again now]\n");
                } else {
                    // Said before asking: the demo model answers at once, and its answer
                    // (printed by the event stream) would otherwise come before this line.
                    print_out("[running the failed turn again]\n");
                    let turn_id = calls::retry(&self.api, &id).await?;
                    self.wait_turn_end(&turn_id).await;
                }
            }
            "context" => {
                let id = self.current()?;
                let usage = self.api.usage(&id).await?;
                print_out(&format!("[context: {}]\n", usage_line(&usage)));
            }
            "agents" => {
                let id = self.current()?;
                print_out(&agents::show(&self.api, &id).await?);
            }
            "ps" => {
                let id = self.current()?;
                print_out(&processes::command(&self.api, &id, argument).await?);
            }
            "queue" if !argument.is_empty() => {
                self.send(Outgoing::Text(argument), Some(MessageMode::Queue))
                    .await?;
            }
            "queue" => print_out("[/queue TEXT sends TEXT to wait until the agent is done]\n"),
            "interrupt" => {
                let id = self.current()?;
                if !self.api.interrupt(&id, None).await?.interrupted {
                    print_out("[nothing was running]\n");
                }
                if let Some(held) = waiting::held_line(&self.api, &id).await {
                    print_out(&held);
                }
            }
            "waiting" => {
                let id = self.current()?;
                match waiting::command(&self.api, &id, argument).await? {
                    waiting::Outcome::Said(said) => print_out(&said),
                    waiting::Outcome::Withdrawn(message) => print_out(&format!(
                        "[taken back; it was:]\n{}\n",
                        message.text.trim_end()
                    )),
                }
            }
            _ if let Some(command) = self.repository_command(name).await? => {
                return Ok(Flow::Sent(
                    self.send(Outgoing::Command(&command, argument), None)
                        .await?,
                ));
            }
            // The demo model's directives: typed with one `/` they would be taken for commands here.
            _ if crate::model::demo::DIRECTIVES.contains(&name) => print_out(&format!(
                "[/{name} is not a command here but a directive for the demo model: \
                 send it to the model with //{line}]\n"
            )),
            _ => print_out(&format!("[unknown command /{name}; /help lists them]\n")),
        }
        Ok(Flow::Continue)
    }

    /// The repository's commands where the next message goes: the conversation's directory,
    /// or the one a new conversation starts in.
    async fn repository_commands(
        &self,
    ) -> Result<Vec<crate::api::responses::CommandInfo>, ApiError> {
        let cwd = match &self.following {
            Some(following) => self.api.conversation(&following.id).await?.conversation.cwd,
            None => self.cwd.clone(),
        };
        repo_commands::list(&self.api, &cwd).await
    }

    /// The name of a repository command `name` stands for, if any (built-ins came first).
    async fn repository_command(&self, name: &str) -> Result<Option<String>, ApiError> {
        let commands = self.repository_commands().await?;
        Ok(repo_commands::find(&commands, name).map(|command| command.name.clone()))
    }

    async fn resume(&mut self, argument: &str) -> Result<(), ApiError> {
        if let Ok(number) = argument.parse::<usize>() {
            let Some((id, _)) = self.listed.get(number.wrapping_sub(1)).cloned() else {
                print_out("[no such number; /resume lists the conversations]\n");
                return Ok(());
            };
            return self.open(&id).await;
        }
        if argument.starts_with("c_") {
            return self.open(argument).await;
        }
        let q = Some(argument).filter(|q| !q.is_empty());
        let page = self.api.conversations(20, q, None).await?;
        self.listed = page
            .conversations
            .into_iter()
            .map(|c| (c.id, c.title))
            .collect();
        if self.listed.is_empty() {
            print_out("[no conversations found]\n");
        }
        for (number, (id, title)) in self.listed.iter().enumerate() {
            print_out(&format!("[{}] {title} ({id})\n", number + 1));
        }
        Ok(())
    }

    async fn rewind(&mut self, argument: &str) -> Result<(), ApiError> {
        let id = self.current()?;
        let (argument, files) = calls::rewind_argument(argument);
        let messages = calls::user_messages(self.stored_items(&id).await?);
        let Ok(number) = argument.parse::<usize>() else {
            for (number, (_, text)) in messages.iter().enumerate() {
                print_out(&format!("[{}] {text}\n", number + 1));
            }
            print_out("[/rewind N restarts from before message N, in a copy]\n");
            return Ok(());
        };
        let Some((message_id, _)) = messages.get(number.wrapping_sub(1)) else {
            print_out("[no such message; /rewind lists them]\n");
            return Ok(());
        };
        let rewound = calls::rewind(&self.api, &id, message_id, files).await?;
        if files && let Some(restore) = &rewound.restore {
            print_out(&files::restore_line(restore));
        }
        let message = &rewound.text;
        let Some(copy) = rewound.conversation else {
            // Before the first message there is nothing to copy: it is a new conversation.
            self.following = None;
            print_out(&format!(
                "[back to the start: the next message starts a new conversation; your message was: {message}]\n"
            ));
            return Ok(());
        };
        let new_id = copy.id;
        print_out(&format!(
            "[rewound into {new_id}; your message was: {message}]\n"
        ));
        self.open(&new_id).await
    }
}
