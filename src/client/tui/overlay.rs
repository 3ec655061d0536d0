//! A long text shown over the conversation until Esc (`/diff`): scrolled with the arrows,
//! PageUp/PageDown, Home and End.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

pub struct Overlay {
    pub title: String,
    pub lines: Vec<Line<'static>>,
    /// The first line shown.
    pub top: usize,
}

/// How far PageUp and PageDown move.
const PAGE: usize = 10;

impl Overlay {
    /// A unified diff, its lines coloured as `git diff` does.
    pub fn diff(title: &str, diff: &str) -> Overlay {
        let lines = diff
            .lines()
            .map(|line| {
                let style = if line.starts_with("+++") || line.starts_with("---") {
                    Style::default().add_modifier(Modifier::BOLD)
                } else if line.starts_with('+') {
                    Style::default().fg(Color::Green)
                } else if line.starts_with('-') {
                    Style::default().fg(Color::Red)
                } else if line.starts_with("@@") {
                    Style::default().fg(Color::Cyan)
                } else if line.starts_with('[') {
                    Style::default().fg(Color::Magenta)
                } else {
                    Style::default()
                };
                Line::styled(line.to_owned(), style)
            })
            .collect();
        Overlay {
            title: title.to_owned(),
            lines,
            top: 0,
        }
    }

    /// A key while the overlay is open; `false` when it closes.
    pub fn key(&mut self, key: KeyEvent) -> bool {
        let last = self.lines.len().saturating_sub(1);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return false,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return false,
            KeyCode::Up => self.top = self.top.saturating_sub(1),
            KeyCode::Down => self.top = (self.top + 1).min(last),
            KeyCode::PageUp => self.top = self.top.saturating_sub(PAGE),
            KeyCode::PageDown | KeyCode::Char(' ') => self.top = (self.top + PAGE).min(last),
            KeyCode::Home => self.top = 0,
            KeyCode::End => self.top = last,
            _ => {}
        }
        true
    }
}
