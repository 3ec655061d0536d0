//! The full-screen chat's state and what each key does. The terminal loop (`mod.rs`) feeds it
//! keys, pastes and the conversation's events (`feed.rs`); `view.rs` draws it. Tests drive it
//! the same way on ratatui's test backend.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::editor::Editor;
use super::overlay::Overlay;
use super::picker::Picker;
use super::source::Feed;
use super::transcript::Transcript;
use crate::api::approvals::{Approval, ApprovalStatus};
use crate::api::requests::NewMessage;
use crate::client::api::{Api, ApiError};
use crate::client::approval_prompt::{self, Dialog, Next};
use crate::client::endpoints::Answered;
use crate::client::repo_commands::Outgoing;
use crate::domain::{Message, MessageMode, Usage};

/// Whether the conversation's stream is open.
#[derive(Clone, PartialEq, Eq)]
pub enum Connection {
    /// No conversation yet.
    Idle,
    Connected,
    Reconnecting,
    Lost(String),
}

pub struct App {
    pub api: Api,
    pub cwd: String,
    pub conversation: Option<String>,
    pub transcript: Transcript,
    pub editor: Editor,
    /// The user's messages waiting for the agent (root session).
    pub pending: Vec<Message>,
    pub model: String,
    /// A model chosen with `/model` before the first message: the conversation that message
    /// starts runs on it.
    pub first_model: Option<String>,
    pub agent: String,
    /// The context meter, once the service has told it.
    pub usage: Option<Usage>,
    /// What the conversation's ended turns cost (sub-agents' included), once one had a cost:
    /// from its view or snapshot, then each `turn.ended` with a cost adds to it.
    pub cost: Option<f64>,
    pub connection: Connection,
    pub root_session: String,
    /// A sub-agent's session followed instead of the root's (`/agents`): its items are shown,
    /// messages go to it and an interrupt stops it.
    pub focus: Option<String>,
    /// The root agent's running turn.
    pub running: Option<String>,
    /// An interrupt was asked for the running turn: the next Ctrl-C quits.
    pub interrupting: bool,
    pub picker: Option<Picker>,
    /// A long text over the conversation (`/diff`), until Esc.
    pub overlay: Option<Overlay>,
    /// Approvals waiting for an answer, the first asked in the input box.
    pub approvals: Vec<(Approval, Dialog)>,
    /// The question the first approval asks now.
    pub question: Option<String>,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: usize,
    pub quit: bool,
    pub(super) feed: Option<(mpsc::UnboundedReceiver<Feed>, JoinHandle<()>)>,
    pub(super) after_reconnect: bool,
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some((_, task)) = &self.feed {
            task.abort();
        }
    }
}

/// Stored items shown when a conversation opens.
pub(super) const HISTORY_SHOWN: usize = 20;

impl App {
    pub fn new(api: Api, cwd: String) -> App {
        let mut transcript = Transcript::default();
        transcript.notice(format!(
            "Connected to {}. /help lists the keys and commands.",
            api.base
        ));
        App {
            api,
            cwd,
            conversation: None,
            transcript,
            editor: Editor::default(),
            pending: Vec::new(),
            model: String::new(),
            first_model: None,
            agent: String::new(),
            usage: None,
            cost: None,
            connection: Connection::Idle,
            root_session: String::new(),
            focus: None,
            running: None,
            interrupting: false,
            picker: None,
            overlay: None,
            approvals: Vec::new(),
            question: None,
            scroll: 0,
            quit: false,
            feed: None,
            after_reconnect: false,
        }
    }

    pub async fn paste(&mut self, pasted: &str) {
        if self.picker.is_none() {
            self.editor.paste(pasted);
        }
    }

    pub async fn key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        if self.picker.is_some() {
            return self.picker_key(key).await;
        }
        if let Some(overlay) = &mut self.overlay {
            if !overlay.key(key) {
                self.overlay = None;
            }
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let newline = key
            .modifiers
            .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('c') if ctrl => self.ctrl_c().await,
            KeyCode::Char('d') if ctrl && self.editor.is_empty() => self.quit = true,
            KeyCode::Char('d') if ctrl => self.editor.delete(),
            KeyCode::Char('j') if ctrl => self.editor.insert('\n'),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Char('u') if ctrl => self.editor.kill_to_start(),
            KeyCode::Char('k') if ctrl => self.editor.kill_to_end(),
            KeyCode::Char('w') if ctrl => self.editor.kill_word(),
            KeyCode::Char('o') if ctrl => self.transcript.toggle(),
            KeyCode::Char(c) if !ctrl => self.editor.insert(c),
            KeyCode::Enter if newline => self.editor.insert('\n'),
            KeyCode::Enter => self.submit(None).await,
            KeyCode::Tab => self.submit(Some(MessageMode::Queue)).await,
            KeyCode::Esc => self.interrupt().await,
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Up if key.modifiers.contains(KeyModifiers::ALT) => {
                self.transcript.select_previous();
            }
            KeyCode::Down if key.modifiers.contains(KeyModifiers::ALT) => {
                self.transcript.select_next();
            }
            KeyCode::Up if self.editor.is_empty() && !self.pending.is_empty() => {
                self.edit_waiting().await;
            }
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            _ => {}
        }
    }

    async fn ctrl_c(&mut self) {
        if self.running.is_some() && !self.interrupting {
            self.interrupt().await;
        } else if !self.editor.is_empty() {
            self.editor.set("");
        } else {
            self.quit = true;
        }
    }

    /// Esc or Ctrl-C during a turn: the service stops it (its end comes on the stream).
    pub(super) async fn interrupt(&mut self) {
        let Some(id) = self.conversation.clone() else {
            return;
        };
        if self.running.is_none() {
            return;
        }
        self.interrupting = true;
        self.transcript.notice("interrupting… (Ctrl-C again quits)");
        let api = self.api.clone();
        let focus = self.focus.clone();
        // Answered once the turn has ended, which the stream shows: not waited for here.
        tokio::spawn(async move {
            let _ = match focus {
                Some(session) => api.interrupt_session(&id, &session).await,
                None => api.interrupt(&id, None).await,
            };
        });
    }

    /// ↑ on an empty input: the last waiting message is taken back into the input to edit.
    async fn edit_waiting(&mut self) {
        let (Some(id), Some(message)) = (self.conversation.clone(), self.pending.last().cloned())
        else {
            return;
        };
        match self.api.withdraw(&id, &message.id).await {
            Ok(withdrawn) => {
                self.pending.retain(|m| m.id != message.id);
                self.editor.set(&withdrawn.text);
            }
            Err(error) => self.transcript.notice(format!("cannot edit it: {error}")),
        }
    }

    async fn submit(&mut self, mode: Option<MessageMode>) {
        if !self.approvals.is_empty() {
            let line = self.editor.take();
            return self.answer(&line).await;
        }
        let typed = self.editor.text();
        if typed.trim().is_empty() {
            return;
        }
        self.scroll = 0;
        self.transcript.selected = None;
        // One line starting with `/` is a command; `//` sends a line that starts with `/`.
        if !typed.contains('\n')
            && let Some(command) = typed.trim().strip_prefix('/')
            && !command.starts_with('/')
        {
            self.editor.take();
            let command = command.to_owned();
            if let Err(error) = self.command(&command).await {
                self.transcript.notice(format!("error: {error}"));
            }
            return;
        }
        let message = self.editor.take();
        let message = match message.strip_prefix("//") {
            Some(rest) => format!("/{rest}"),
            None => message,
        };
        if let Err(error) = self.send(Outgoing::Text(&message), mode).await {
            self.transcript.notice(format!("error: {error}"));
            self.editor.set(&message);
        }
    }

    pub(super) async fn send(
        &mut self,
        outgoing: Outgoing<'_>,
        mode: Option<MessageMode>,
    ) -> Result<(), ApiError> {
        let Some(id) = self.conversation.clone() else {
            let mut body = outgoing.conversation(&self.cwd);
            if let Some(model) = self.first_model.take() {
                body.model = Some(model);
            }
            let created = self.api.create_conversation(&body).await?;
            self.open(&created.conversation.id, true).await?;
            // Its first turn: the replay that follows shows its end.
            self.running = Some(created.turn_id);
            return Ok(());
        };
        let body = NewMessage {
            mode: mode.unwrap_or_default(),
            session_id: self.focus.clone(),
            ..outgoing.message()
        };
        self.api.send_message(&id, &body).await?;
        Ok(())
    }

    /// Follows a conversation: the end of its history, then its stream.
    /// `created`: just created here, so its stream is read from its first event.
    pub async fn open(&mut self, id: &str, created: bool) -> Result<(), ApiError> {
        let view = self.api.conversation(id).await?;
        if let Some((_, task)) = self.feed.take() {
            task.abort();
        }
        self.transcript = Transcript::default();
        self.pending.clear();
        self.running = None;
        self.first_model = None;
        self.conversation = Some(id.to_owned());
        self.focus = None;
        let conversation = view.conversation;
        self.root_session = conversation.root_session_id;
        self.model = conversation.model;
        self.agent = conversation.agent;
        self.usage = Some(view.usage);
        // A conversation created here is followed from its first event, whose `turn.ended`s
        // add up its cost: taking the view's too would count a turn that already ended twice.
        self.cost = if created { None } else { view.cost };
        self.transcript.notice(format!(
            "conversation {id}: {} — {}",
            conversation.title, conversation.cwd
        ));
        // The stream first, then the history: an item may show in both, and the later view
        // of it (an item updates in place) is the one that stays; none falls in between.
        self.follow(id, created).await?;
        let items = self.api.items(id, None, None).await?;
        for item in &items[items.len().saturating_sub(HISTORY_SHOWN)..] {
            self.transcript.item(item);
        }
        Ok(())
    }

    /// A line typed while an approval waits answers it (y / c / a / n, then a rule or a
    /// message), as in the plain chat.
    pub(super) async fn answer(&mut self, line: &str) {
        let Some((approval, dialog)) = self.approvals.first_mut() else {
            return;
        };
        match dialog.line(line) {
            Next::Ask(question) => self.question = Some(question),
            Next::Answer(answer) => {
                let approval = approval.clone();
                let said = match self.api.answer_approval(&approval.id, &answer).await {
                    Ok(Answered::Settled(settled)) => approval_prompt::outcome(&settled, true),
                    Ok(Answered::AlreadyDecided(settled)) => {
                        approval_prompt::outcome(&settled, false)
                    }
                    Err(error @ ApiError::Service { status: 404, .. }) => format!("[{error}]"),
                    // Refused (a rule that does not match, say): the approval still waits, and
                    // the input stays on it, asking again with the reason.
                    Err(reason @ ApiError::Service { .. }) => {
                        let dialog = Dialog::new(&approval);
                        self.question = Some(format!("[refused: {reason}] {}", dialog.question()));
                        self.approvals[0].1 = dialog;
                        self.transcript
                            .notice(format!("the answer was refused: {reason}"));
                        return;
                    }
                    Err(error) => {
                        self.transcript
                            .notice(format!("the answer was not sent: {error}"));
                        return;
                    }
                };
                self.approvals.remove(0);
                self.question = self.approvals.first().map(|(_, d)| d.question());
                self.transcript.notice(said.trim_end());
            }
        }
    }

    /// An approval the stream shows (each once).
    pub(super) fn approval_asked(&mut self, approval: &Approval) {
        if self.approvals.iter().any(|(a, _)| a.id == approval.id)
            || approval.status != ApprovalStatus::Pending
        {
            return;
        }
        let asker = (approval.session_id != self.root_session).then_some("a sub-agent");
        self.transcript
            .notice(approval_prompt::describe(approval, asker).trim_end());
        let dialog = Dialog::new(approval);
        if self.approvals.is_empty() {
            self.question = Some(dialog.question());
        }
        self.approvals.push((approval.clone(), dialog));
    }

    /// An approval was settled (here, elsewhere, or cancelled by an interrupt).
    pub(super) fn approval_settled(&mut self, approval: &Approval) {
        let Some(at) = self.approvals.iter().position(|(a, _)| a.id == approval.id) else {
            return;
        };
        self.approvals.remove(at);
        self.question = self.approvals.first().map(|(_, d)| d.question());
        self.transcript
            .notice(approval_prompt::outcome(approval, false).trim_end());
    }

    /// The session whose conversation is shown.
    pub fn shown_session(&self) -> &str {
        self.focus.as_deref().unwrap_or(&self.root_session)
    }

    pub(super) fn current(&self) -> Result<String, ApiError> {
        self.conversation.clone().ok_or_else(|| ApiError::Service {
            status: 0,
            code: "no_conversation".to_owned(),
            message: "no conversation yet: send a message or /resume one".to_owned(),
        })
    }
}
