//! `openvaala chat`: read a line, send it, show the agent working. Lines starting with `/` are
//! commands (`/help`). With a terminal on stdin, a line typed while the agent works steers it
//! (the service's default); with a script on stdin, each message waits for its turn to end
//! before the next line is read, so `echo … | openvaala chat` prints the whole answer.
//! A tool call waiting for approval is asked about (`approval_prompt`), and the next line
//! answers it.
//!
//! This file is the read–send loop and what it does with a message; `commands.rs` the slash
//! commands; `follower.rs` the task that follows the conversation's events, prints them and
//! signals the loop; `waits.rs` the loop's waits on those signals and the approval questions
//! asked meanwhile; `output.rs` printing; `interrupt.rs` Ctrl-C at a terminal.

mod commands;
mod follower;
mod following;
mod interrupt;
mod output;
mod waits;

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use super::api::{Api, ApiError};
use super::render::Renderer;
use super::repo_commands::Outgoing;
use crate::domain::{Item, ItemKind, MessageMode, MessageStatus};
use following::{Following, Signal, idle_signal};
use interrupt::SharedActivity;
use output::{print_out, print_stored};

pub struct ChatOptions {
    pub api: Api,
    /// A conversation to continue; otherwise the first message starts one.
    pub resume: Option<String>,
    /// The working directory of new conversations.
    pub cwd: String,
    /// A person at a terminal (messages do not wait for their turns; a prompt is shown).
    pub interactive: bool,
}

struct Chat {
    api: Api,
    cwd: String,
    interactive: bool,
    /// Messages, commands, and answers to approvals.
    input: Lines<BufReader<Stdin>>,
    renderer: Arc<Mutex<Renderer>>,
    following: Option<Following>,
    /// The numbered list `/resume` or `/rewind` showed last.
    listed: Vec<(String, String)>,
    /// What a Ctrl-C at the terminal interrupts.
    activity: SharedActivity,
}

pub async fn run(options: ChatOptions) -> anyhow::Result<()> {
    let mut chat = Chat {
        api: options.api,
        cwd: options.cwd,
        interactive: options.interactive,
        input: BufReader::new(tokio::io::stdin()).lines(),
        renderer: Arc::new(Mutex::new(Renderer::default())),
        following: None,
        listed: Vec::new(),
        activity: SharedActivity::default(),
    };
    // Fail early and clearly when there is no service to talk to.
    if let Err(error) = chat.api.health().await {
        anyhow::bail!("{error}");
    }
    if chat.interactive {
        interrupt::handle_ctrl_c(chat.api.clone(), chat.activity.clone())?;
    }
    if let Some(id) = options.resume {
        chat.open(&id).await?;
    } else if chat.interactive {
        print_out(&format!(
            "Connected to {}. Type a message, or /help.\n",
            chat.api.base
        ));
    }
    // At a terminal the prompt comes back when the agent is done: after a command at once,
    // after a message that started a turn when that turn ends (the follower shows it).
    let mut prompt = true;
    loop {
        if chat.interactive && prompt {
            print_out("> ");
        }
        // An approval asked while no message waits for its turn is asked about at once.
        let line = tokio::select! {
            biased;
            signal = idle_signal(&mut chat.following) => {
                if let Signal::ApprovalRequested(approval) = signal {
                    chat.ask(&approval).await;
                }
                // The prompt comes back when the turn the answer lets go on ends.
                prompt = false;
                continue;
            }
            line = chat.input.next_line() => line?,
        };
        let Some(line) = line else {
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let outcome = match line.strip_prefix('/') {
            // `//…` sends a line that starts with `/` (the demo model's directives do).
            Some(rest) if rest.starts_with('/') => chat.send(Outgoing::Text(rest), None).await,
            Some(command) => match chat.command(command).await {
                Ok(Flow::Quit) => break,
                Ok(Flow::Continue) => Ok(false),
                Ok(Flow::Sent(turn_started)) => Ok(turn_started),
                Err(error) => Err(error),
            },
            None => chat.send(Outgoing::Text(line), None).await,
        };
        prompt = match outcome {
            Ok(turn_started) => !turn_started,
            Err(error) => {
                print_out(&format!("[error: {error}]\n"));
                true
            }
        };
    }
    Ok(())
}

pub(super) enum Flow {
    Continue,
    /// A repository command was sent as a message: whether its turn runs on.
    Sent(bool),
    Quit,
}

impl Chat {
    fn current(&self) -> Result<String, ApiError> {
        self.following
            .as_ref()
            .map(|following| following.id.clone())
            .ok_or_else(|| ApiError::Service {
                status: 0,
                code: "no_conversation".to_owned(),
                message: "no conversation yet: send a message or /resume one".to_owned(),
            })
    }

    /// Sends a message: a new conversation when there is none, else to the current one.
    /// Returns whether a turn started that is still running (at a terminal, its end brings
    /// the prompt back).
    async fn send(
        &mut self,
        outgoing: Outgoing<'_>,
        mode: Option<MessageMode>,
    ) -> Result<bool, ApiError> {
        let Some(following) = &self.following else {
            *self.renderer.lock().expect("renderer lock") = Renderer::default();
            let body = outgoing.conversation(&self.cwd);
            let created = self.api.create_conversation(&body).await?;
            let (id, turn_id) = (created.conversation.id, created.turn_id);
            self.follow(&id).await?;
            let running = self.wait_snapshot().await;
            if !running.contains(&turn_id) {
                // The first turn ended before the stream began: show it from the history.
                self.print_stored_turn(&id, &turn_id).await?;
                return Ok(false);
            }
            if !self.interactive {
                self.wait_turn_end(&turn_id).await;
            }
            return Ok(self.interactive);
        };
        let id = following.id.clone();
        let mut body = outgoing.message();
        body.mode = mode.unwrap_or_default();
        let message = self.api.send_message(&id, &body).await?.message;
        if message.status == MessageStatus::Waiting {
            print_out(&format!(
                "[the agent is busy: your message waits ({})]\n",
                crate::client::wire_text(&message.mode)
            ));
            return Ok(false);
        }
        if !self.interactive
            && let Some(turn_id) = self.wait_turn_start(&message.id).await
        {
            self.wait_turn_end(&turn_id).await;
        }
        Ok(self.interactive)
    }

    /// Opens a conversation: shows the end of its history, then follows it.
    async fn open(&mut self, id: &str) -> Result<(), ApiError> {
        let conversation = self.api.conversation(id).await?.conversation;
        // A fork shares its source's item ids: what was shown there is new here.
        self.following = None;
        *self.renderer.lock().expect("renderer lock") = Renderer::default();
        let id = conversation.id;
        print_out(&format!(
            "[conversation {id}: {} — {}]\n",
            conversation.title, conversation.cwd
        ));
        let items = self.stored_items(&id).await?;
        let shown = items.len().saturating_sub(6);
        print_stored(&self.renderer, &items[shown..]);
        self.follow(&id).await?;
        self.wait_snapshot().await;
        Ok(())
    }

    /// Every stored item of the root session.
    async fn stored_items(&self, id: &str) -> Result<Vec<Item>, ApiError> {
        self.api.items(id, None, None).await
    }

    async fn print_stored_turn(&self, id: &str, turn_id: &str) -> Result<(), ApiError> {
        let items = self.stored_items(id).await?;
        let turn: Vec<Item> = items
            .into_iter()
            .filter(|item| {
                item.turn_id == turn_id && !matches!(item.kind, ItemKind::UserMessage { .. })
            })
            .collect();
        print_stored(&self.renderer, &turn);
        Ok(())
    }
}
