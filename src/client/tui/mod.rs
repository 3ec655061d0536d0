//! The full-screen `openvaala chat` (ratatui on crossterm): the conversation streaming above,
//! waiting messages and a multi-line input below, a status line at the bottom. `app.rs` holds
//! the state and the keys, `commands.rs` the slash commands, `overlay.rs` the scrolled window
//! of `/diff`, `source.rs` reads the conversation's stream and `feed.rs` takes its events in, `view.rs` the drawing,
//! `transcript.rs` and `markdown.rs` what the conversation looks like, `editor.rs` the input,
//! `picker.rs` the lists of `/resume`, `/rewind` and `/model`. This file only owns the
//! terminal: raw mode, the alternate screen, bracketed paste, and putting it all back.

mod app;
mod commands;
mod editor;
mod feed;
mod highlight;
mod markdown;
mod overlay;
mod picker;
mod source;
mod transcript;
mod view;

use std::io::Stdout;
use std::time::Duration;

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event, EventStream, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
    supports_keyboard_enhancement,
};
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub use app::{App, Connection};
pub use source::Feed;

use super::api::Api;

/// Runs the full-screen chat until the user quits.
pub async fn run(api: Api, cwd: String, resume: Option<String>) -> anyhow::Result<()> {
    // Fail early and clearly when there is no service to talk to, before the screen changes.
    if let Err(error) = api.health().await {
        anyhow::bail!("{error}");
    }
    let mut app = App::new(api, cwd);
    if let Some(id) = resume {
        app.open(&id, false).await?;
    }
    let mut terminal = Screen::enter()?;
    let outcome = event_loop(&mut app, &mut terminal.terminal).await;
    drop(terminal);
    outcome
}

async fn event_loop(
    app: &mut App,
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
) -> anyhow::Result<()> {
    let mut keys = EventStream::new();
    // A retry's countdown moves on its own.
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    while !app.quit {
        terminal.draw(|frame| app.draw(frame))?;
        tokio::select! {
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) => app.key(key).await,
                Some(Ok(Event::Paste(text))) => app.paste(&text).await,
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
            feed = app.next_feed() => app.apply(feed).await,
            _ = tick.tick() => {}
        }
    }
    Ok(())
}

/// The terminal in full-screen mode for as long as this lives, put back even on an error.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    enhanced: bool,
}

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        enable_raw_mode()?;
        let mut stdout = std::io::stdout();
        execute!(stdout, EnterAlternateScreen, EnableBracketedPaste)?;
        // Where the terminal can tell Shift-Enter from Enter (the kitty protocol), ask it to.
        let enhanced = supports_keyboard_enhancement().unwrap_or(false);
        if enhanced {
            execute!(
                stdout,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            )?;
        }
        let terminal = Terminal::new(CrosstermBackend::new(stdout))?;
        Ok(Screen { terminal, enhanced })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let stdout = self.terminal.backend_mut();
        if self.enhanced {
            let _ = execute!(stdout, PopKeyboardEnhancementFlags);
        }
        let _ = execute!(stdout, DisableBracketedPaste, LeaveAlternateScreen);
        let _ = disable_raw_mode();
        let _ = self.terminal.show_cursor();
    }
}
