//! The full-screen chat's slash commands, and what choosing from their lists does.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Connection, HISTORY_SHOWN};
use super::overlay::Overlay;
use super::picker::{Pick, Picker};
use super::transcript::Transcript;
use crate::api::requests::ConversationPatch;
use crate::client::api::ApiError;
use crate::client::render::first_line;
use crate::client::repo_commands::Outgoing;
use crate::client::{calls, files};
use crate::domain::{ItemKind, MessageSource};

const HELP: &str = "Enter sends · Shift-Enter, Alt-Enter or Ctrl-J adds a line · Tab queues the \
message for after the running turn · Esc or Ctrl-C interrupts the turn (Ctrl-C again, or Ctrl-D \
on an empty input, quits) · ↑ on an empty input edits the last waiting message · Alt-↑/Alt-↓ \
select a tool call or reasoning and Ctrl-O shows or folds it (all of them, with none selected) \
· PageUp/PageDown scroll · while an approval waits, the input answers it (y, c, a or n)
Commands: /new · /resume [text] · /fork · /rewind [N] [--files] (--files also puts back the \
files changed since) · /diff [N] (what turn N changed; the last that did) · /retry (a failed \
turn again, or a waiting model call now) · /agents · /ps [N|stop N] (the background \
processes, one's latest output, or stop one) · /waiting [send N|withdraw N] (the messages that \
wait; send one now, on its own while the agent is idle, or take one back) · /model [name] · \
/interrupt · /compact · /context · /quit. Start a message with // to send one that begins with / (//shell ls).";

impl App {
    pub(super) async fn command(&mut self, line: &str) -> Result<(), ApiError> {
        let (name, argument) = line.split_once(' ').unwrap_or((line, ""));
        let argument = argument.trim();
        match name {
            "quit" | "exit" | "q" => self.quit = true,
            "help" => {
                let commands = self.repository_commands().await.unwrap_or_default();
                let theirs = crate::client::repo_commands::help(&commands);
                if theirs.is_empty() {
                    self.transcript.notice(HELP);
                } else {
                    self.transcript
                        .notice(format!("{HELP}\n{}", theirs.trim_end()));
                }
            }
            "new" => {
                if let Some((_, task)) = self.feed.take() {
                    task.abort();
                }
                self.conversation = None;
                self.running = None;
                self.pending.clear();
                self.connection = Connection::Idle;
                self.transcript.notice("the next message starts a new conversation");
            }
            "interrupt" => self.interrupt().await,
            "resume" => {
                let q = Some(argument).filter(|q| !q.is_empty());
                let page = self.api.conversations(50, q, None).await?;
                let choices = page
                    .conversations
                    .into_iter()
                    .map(|c| (format!("{} — {}", c.title, c.id), c.id))
                    .collect();
                self.picker = Some(Picker::new(Pick::Resume, "resume a conversation", choices));
            }
            "rewind" => self.rewind_command(argument).await?,
            "fork" => {
                let id = self.current()?;
                let copy = calls::fork(&self.api, &id).await?;
                self.open(&copy, false).await?;
                self.transcript
                    .notice(format!("forked from {id}: this copy goes on from its last finished turn"));
            }
            "retry" => {
                let id = self.current()?;
                if calls::retry_now(&self.api, &id).await? {
                    self.transcript.notice("trying the model call again now");
                } else {
                    calls::retry(&self.api, &id).await?;
                    self.transcript.notice("running the failed turn again");
                }
            }
            "diff" => {
                let id = self.current()?;
                let items = self.api.items(&id, None, None).await?;
                let shown = files::diff(&self.api, &id, &items, argument).await?;
                let shown = shown.trim_end();
                match shown.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                    // One line says why there is nothing to show.
                    Some(said) if !shown.contains('\n') => self.transcript.notice(said),
                    _ => self.overlay = Some(Overlay::diff("what the turn changed", shown)),
                }
            }
            "model" if !argument.is_empty() => self.switch_model(argument).await?,
            "model" => {
                let models = self.api.models().await?;
                let choices = models
                    .models
                    .into_iter()
                    .map(|m| (m.id.clone(), m.id))
                    .collect();
                self.picker = Some(Picker::new(Pick::Model, "switch the model", choices));
            }
            "agents" => {
                let id = self.current()?;
                let tree = crate::client::agents::show(&self.api, &id).await?;
                self.transcript.notice(format!("agents:\n{}", tree.trim_end()));
                let view = self.api.conversation(&id).await?;
                let choices: Vec<(String, String)> = view
                    .sessions
                    .into_iter()
                    .map(|s| {
                        let role = if s.parent_id.is_none() { "root" } else { "sub-agent" };
                        let label = format!(
                            "{role} {} ({}) {}",
                            s.agent,
                            crate::client::wire_text(&s.status),
                            first_line(s.task.as_deref().unwrap_or_default())
                        );
                        (label, s.id)
                    })
                    .collect();
                if choices.len() > 1 {
                    self.picker = Some(Picker::new(Pick::Agent, "follow which agent?", choices));
                }
            }
            "waiting" => {
                let id = self.current()?;
                match crate::client::waiting::command(&self.api, &id, argument).await? {
                    crate::client::waiting::Outcome::Said(said) => {
                        self.transcript.notice(said.trim_end());
                    }
                    crate::client::waiting::Outcome::Withdrawn(message) => {
                        self.pending.retain(|m| m.id != message.id);
                        self.editor.set(&message.text);
                        self.transcript
                            .notice("[taken back: it is in the input to edit or send]");
                    }
                }
            }
            "ps" => {
                let id = self.current()?;
                let shown = crate::client::processes::command(&self.api, &id, argument).await?;
                self.transcript.notice(shown.trim_end());
            }
            "compact" => {
                let id = self.current()?;
                self.api.compact(&id).await?;
            }
            "context" => {
                let id = self.current()?;
                let usage = self.api.usage(&id).await?;
                self.transcript
                    .notice(format!("context: {}", crate::client::render::usage_line(&usage)));
            }
            _ if let Some(command) = self.repository_command(name).await? => {
                self.send(Outgoing::Command(&command, argument), None)
                    .await?;
            }
            _ if crate::model::demo::DIRECTIVES.contains(&name) => self.transcript.notice(format!(
                "/{name} is a directive for the demo model: send it with //{line}"
            )),
            _ => self.transcript.notice(format!(
                "/{name} is not a command here (/help lists them; `openvaala chat --plain` has more)"
            )),
        }
        Ok(())
    }

    /// The repository's commands where the next message goes: the open conversation's
    /// directory, or the one a new conversation starts in.
    async fn repository_commands(
        &self,
    ) -> Result<Vec<crate::api::responses::CommandInfo>, ApiError> {
        let cwd = match &self.conversation {
            Some(id) => self.api.conversation(id).await?.conversation.cwd,
            None => self.cwd.clone(),
        };
        crate::client::repo_commands::list(&self.api, &cwd).await
    }

    /// The name of the repository command `name` stands for, if any (built-ins came first).
    async fn repository_command(&self, name: &str) -> Result<Option<String>, ApiError> {
        let commands = self.repository_commands().await?;
        Ok(crate::client::repo_commands::find(&commands, name).map(|c| c.name.clone()))
    }

    async fn switch_model(&mut self, model: &str) -> Result<(), ApiError> {
        let Some(id) = self.conversation.clone() else {
            // No conversation yet: the first message starts one on this model.
            let known = self.api.models().await?.models;
            if !known.iter().any(|known| known.id == model) {
                let names: Vec<&str> = known.iter().map(|known| known.id.as_str()).collect();
                self.transcript.notice(format!(
                    "no model `{model}`; the models: {}",
                    names.join(", ")
                ));
                return Ok(());
            }
            self.first_model = Some(model.to_owned());
            self.model = model.to_owned();
            self.transcript.notice(format!(
                "model: {model} (for the conversation your first message starts)"
            ));
            return Ok(());
        };
        let patch = ConversationPatch {
            model: Some(model.to_owned()),
            ..ConversationPatch::default()
        };
        self.model = self.api.update_conversation(&id, &patch).await?.model;
        self.transcript.notice(format!("model: {}", self.model));
        Ok(())
    }

    pub(super) async fn picker_key(&mut self, key: KeyEvent) {
        let Some(picker) = &mut self.picker else {
            return;
        };
        match key.code {
            KeyCode::Esc => self.picker = None,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.picker = None;
            }
            KeyCode::Up => picker.up(),
            KeyCode::Down => picker.down(),
            KeyCode::Backspace => picker.backspace(),
            KeyCode::Char(c) => picker.type_char(c),
            KeyCode::Enter => {
                let Some((kind, value)) = self.picker.take().and_then(|p| p.chosen()) else {
                    return;
                };
                if let Err(error) = self.picked(kind, &value).await {
                    self.transcript.notice(format!("error: {error}"));
                }
            }
            _ => {}
        }
    }

    async fn picked(&mut self, kind: Pick, value: &str) -> Result<(), ApiError> {
        match kind {
            Pick::Resume => self.open(value, false).await,
            Pick::Model => self.switch_model(value).await,
            Pick::Agent => self.focus_on(value).await,
            Pick::Rewind { files } => self.rewind(value, files).await,
        }
    }

    /// `/rewind [N] [--files]`: the list of the user's messages to choose from, or message N
    /// (counted from the first) at once.
    async fn rewind_command(&mut self, argument: &str) -> Result<(), ApiError> {
        let id = self.current()?;
        let (argument, files) = calls::rewind_argument(argument);
        let items = self.api.items(&id, None, None).await?;
        // The user's messages: their ids and texts.
        let messages: Vec<(&str, &str)> = items
            .iter()
            .filter_map(|item| match &item.kind {
                ItemKind::UserMessage { text, source, .. } if *source != MessageSource::Agent => {
                    Some((item.id.as_str(), text.as_str()))
                }
                _ => None,
            })
            .collect();
        if argument.is_empty() {
            let choices = messages
                .iter()
                .enumerate()
                .map(|(at, (id, text))| {
                    (format!("{}. {}", at + 1, first_line(text)), id.to_string())
                })
                .rev()
                .collect();
            let title = if files {
                "rewind (and put back the files) to before which message?"
            } else {
                "rewind to before which message?"
            };
            self.picker = Some(Picker::new(Pick::Rewind { files }, title, choices));
            return Ok(());
        }
        let chosen = argument
            .parse::<usize>()
            .ok()
            .and_then(|number| messages.get(number.wrapping_sub(1)));
        match chosen {
            Some((message_id, _)) => self.rewind(message_id, files).await,
            None => {
                self.transcript.notice(format!(
                    "/rewind N: N is one of your {} messages (/rewind lists them)",
                    messages.len()
                ));
                Ok(())
            }
        }
    }

    /// Restarts from before the message in a copy (`files`: the working directory too), and
    /// puts the message back in the input.
    async fn rewind(&mut self, message_id: &str, files: bool) -> Result<(), ApiError> {
        let id = self.current()?;
        let rewound = calls::rewind(&self.api, &id, message_id, files).await?;
        let message = rewound.text;
        match rewound.conversation {
            Some(copy) => self.open(&copy.id, false).await?,
            // Before the first message: the next message starts anew.
            None => {
                self.conversation = None;
                self.transcript = Transcript::default();
                self.connection = Connection::Idle;
            }
        }
        if files && let Some(restore) = &rewound.restore {
            self.transcript.notice(files::restore_notice(&id, restore));
        }
        self.transcript
            .notice("rewound: your message is back in the input, to edit and send");
        self.editor.set(&message);
        Ok(())
    }

    /// Follows one agent of the conversation: its items, its turns, its waiting messages.
    async fn focus_on(&mut self, session: &str) -> Result<(), ApiError> {
        let id = self.current()?;
        self.focus = (session != self.root_session).then(|| session.to_owned());
        let items = self.api.items(&id, self.focus.as_deref(), None).await?;
        self.transcript = Transcript::default();
        self.running = None;
        self.pending.clear();
        let whom = match &self.focus {
            Some(session) => format!(
                "following sub-agent {session}: messages go to it, Esc interrupts it; /agents goes back"
            ),
            None => "following the root agent".to_owned(),
        };
        self.transcript.notice(whom);
        for item in &items[items.len().saturating_sub(HISTORY_SHOWN)..] {
            self.transcript.item(item);
        }
        // A fresh snapshot gives this agent's running turn and waiting messages.
        self.follow(&id, false).await
    }
}
