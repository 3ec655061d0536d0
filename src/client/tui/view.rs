//! Drawing the full-screen chat: the conversation (its end, or scrolled), the waiting
//! messages, the input box, the status line (model, agent, context, cost, directory,
//! connection), and a picker over them when one is open.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::app::{App, Connection};
use crate::domain::UsageSource;

impl App {
    pub fn draw(&self, frame: &mut Frame) {
        let area = frame.area();
        let input_lines = self.editor.text().split('\n').count().min(8) as u16;
        let waiting = self.pending.len().min(4) as u16;
        let [conversation, waiting_area, input, status] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(waiting),
            Constraint::Length(input_lines + 2),
            Constraint::Length(1),
        ])
        .areas(area);
        self.draw_conversation(frame, conversation);
        let waiting_lines: Vec<Line> = self
            .pending
            .iter()
            .enumerate()
            .map(|(at, m)| {
                Line::styled(
                    format!(
                        "⋯ {} waiting ({}): {}",
                        at + 1,
                        crate::client::wire_text(&m.mode),
                        crate::client::waiting::first_line(&m.text)
                    ),
                    Style::default().fg(Color::Yellow),
                )
            })
            .collect();
        frame.render_widget(Paragraph::new(waiting_lines), waiting_area);
        self.draw_input(frame, input);
        frame.render_widget(
            Paragraph::new(self.status_line(status.width as usize)),
            status,
        );
        if let Some(overlay) = &self.overlay {
            let popup = Rect::new(
                area.x + 2,
                area.y + 1,
                area.width.saturating_sub(4).max(10),
                area.height.saturating_sub(2).max(3),
            );
            frame.render_widget(Clear, popup);
            let block = Block::default().borders(Borders::ALL).title(format!(
                " {} ({}–{} of {} · ↑/↓ PageUp/PageDown scroll · Esc closes) ",
                overlay.title,
                overlay.top + 1,
                (overlay.top + popup.height.saturating_sub(2) as usize).min(overlay.lines.len()),
                overlay.lines.len()
            ));
            let width = block.inner(popup).width.max(1) as usize;
            let lines: Vec<Line> = overlay.lines[overlay.top.min(overlay.lines.len())..]
                .iter()
                .cloned()
                .flat_map(|line| wrap(line, width))
                .collect();
            frame.render_widget(Paragraph::new(lines).block(block), popup);
        }
        if let Some(picker) = &self.picker {
            let width = area.width.saturating_sub(8).max(10);
            let height = area.height.saturating_sub(6).clamp(3, 20);
            let popup = Rect::new(area.x + 4, area.y + 2, width, height);
            frame.render_widget(Clear, popup);
            let mut lines = vec![Line::styled(
                format!("filter: {}", picker.filter),
                Style::default().fg(Color::Cyan),
            )];
            for (at, (label, _)) in picker.visible().into_iter().enumerate() {
                let style = if at == picker.selected {
                    Style::default().add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                };
                lines.push(Line::styled(label.clone(), style));
            }
            let block = Block::default()
                .borders(Borders::ALL)
                .title(format!("{} (type to filter · Enter · Esc)", picker.title));
            frame.render_widget(Paragraph::new(lines).block(block), popup);
        }
    }

    fn draw_conversation(&self, frame: &mut Frame, area: Rect) {
        let width = area.width.max(1) as usize;
        let (unwrapped, selected) = self.transcript.lines_and_selection(Instant::now());
        let mut lines: Vec<Line> = Vec::new();
        let mut selected_row = None;
        for (at, line) in unwrapped.into_iter().enumerate() {
            if selected == Some(at) {
                selected_row = Some(lines.len());
            }
            lines.extend(wrap(line, width));
        }
        let height = area.height as usize;
        let mut bottom = lines
            .len()
            .saturating_sub(self.scroll.min(lines.len().saturating_sub(height)));
        // The selected entry is in sight: at the top when it was not.
        if let Some(row) = selected_row
            && (row >= bottom || row < bottom.saturating_sub(height))
        {
            bottom = (row + height).min(lines.len());
        }
        let top = bottom.saturating_sub(height);
        frame.render_widget(Paragraph::new(lines[top..bottom].to_vec()), area);
    }

    fn draw_input(&self, frame: &mut Frame, area: Rect) {
        let asked = self
            .question
            .as_ref()
            .map(|q| format!(" approval: {} ", q.trim_end()));
        // Messages that wait while nothing runs were held by a stop: the next one goes after
        // them, and the input says so.
        let held = (self.running.is_none() && !self.pending.is_empty()).then(|| {
            format!(
                " {} ",
                crate::client::waiting::held_notice(self.pending.len())
            )
        });
        let title = if let Some(asked) = &asked {
            asked.as_str()
        } else if self.running.is_some() {
            " agent working · Enter steers · Tab queues · Esc interrupts "
        } else if let Some(held) = &held {
            held.as_str()
        } else {
            " message · Enter sends · Shift-Enter new line · /help "
        };
        let block = Block::default().borders(Borders::ALL).title(title);
        let inner = block.inner(area);
        let (line, column) = self.editor.cursor_position();
        let text = self.editor.text();
        let all: Vec<&str> = text.split('\n').collect();
        let visible = inner.height.max(1) as usize;
        let first = (line + 1).saturating_sub(visible);
        let shown: Vec<Line> = all[first..]
            .iter()
            .take(visible)
            .map(|l| Line::raw(l.to_string()))
            .collect();
        frame.render_widget(Paragraph::new(shown).block(block), area);
        if self.picker.is_none() && self.overlay.is_none() {
            let before: String = all[line].chars().take(column).collect();
            let x = before
                .chars()
                .map(|c| c.width().unwrap_or(0))
                .sum::<usize>() as u16;
            frame.set_cursor_position(Position::new(
                (inner.x + x).min(inner.right().saturating_sub(1)),
                inner.y + (line - first) as u16,
            ));
        }
    }

    /// The status line, fitted to `width` columns: the connection's state always shows whole;
    /// the directory goes first (to its last folder, then away), then the cost, the agent,
    /// the model and the meter.
    fn status_line(&self, width: usize) -> Line<'static> {
        let (state, color) = match &self.connection {
            Connection::Idle => ("● not connected yet".to_owned(), Color::DarkGray),
            Connection::Connected => ("● connected".to_owned(), Color::Green),
            Connection::Reconnecting => ("● reconnecting…".to_owned(), Color::Yellow),
            Connection::Lost(_) => ("● connection lost".to_owned(), Color::Red),
        };
        let meter = match &self.usage {
            Some(usage) if usage.context_window > 0 => {
                let (used, window) = (usage.used_tokens, usage.context_window);
                let estimated = if usage.source == UsageSource::Estimated {
                    "~"
                } else {
                    ""
                };
                format!(
                    "ctx {estimated}{}/{} ({}%)",
                    short(used),
                    short(window),
                    used * 100 / window
                )
            }
            _ => "ctx –".to_owned(),
        };
        let dim = Style::default().fg(Color::DarkGray);
        let model = if self.model.is_empty() {
            "model –"
        } else {
            &self.model
        };
        let agent = if self.agent.is_empty() {
            "agent –"
        } else {
            &self.agent
        };
        let cost = self.cost.map(crate::client::figures::conversation_cost);
        let folder = std::path::Path::new(&self.cwd)
            .file_name()
            .map(|name| format!("…/{}", name.to_string_lossy()))
            .unwrap_or_else(|| self.cwd.clone());
        let fits = |parts: &[Option<&str>]| {
            let text: String = parts
                .iter()
                .flatten()
                .map(|part| format!("{part} · "))
                .collect();
            (text.width() + state.width() <= width).then_some(text)
        };
        let (model, agent, meter, cost) = (
            Some(model),
            Some(agent),
            Some(meter.as_str()),
            cost.as_deref(),
        );
        let choices = [
            [model, agent, meter, cost, Some(self.cwd.as_str())],
            [model, agent, meter, cost, Some(folder.as_str())],
            [model, agent, meter, cost, None],
            [model, agent, meter, None, None],
            [model, None, meter, None, None],
            [None, None, meter, None, None],
            [None, None, None, None, None],
        ];
        let parts = choices
            .iter()
            .find_map(|parts| fits(parts))
            .unwrap_or_default();
        Line::from(vec![
            Span::styled(parts, dim),
            Span::styled(state, Style::default().fg(color)),
        ])
    }
}

fn short(n: u64) -> String {
    if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// A styled line cut into rows of `width` columns at word boundaries: a row ends after its
/// last space and the word that did not fit starts the next (a word wider than a row is cut).
/// Spaces inside a row are kept as they are, so code and tables keep their spacing.
fn wrap(line: Line<'static>, width: usize) -> Vec<Line<'static>> {
    let style = line.style;
    let mut rows: Vec<Vec<(char, Style)>> = Vec::new();
    let mut row: Vec<(char, Style)> = Vec::new();
    let mut used = 0;
    let cells = line
        .spans
        .iter()
        .flat_map(|span| span.content.chars().map(|c| (c, span.style)))
        .collect::<Vec<_>>();
    for (c, span_style) in cells {
        let w = c.width().unwrap_or(0);
        if used + w > width && used > 0 {
            if c == ' ' {
                // The row ends here; the space between the two words goes with the break.
                rows.push(std::mem::take(&mut row));
                used = 0;
                continue;
            }
            // After the row's last space that follows a word: the word moves down whole.
            let space = row
                .iter()
                .rposition(|(cell, _)| *cell == ' ')
                .filter(|at| row[..*at].iter().any(|(cell, _)| *cell != ' '));
            let carried = match space {
                Some(at) => row.split_off(at + 1),
                None => Vec::new(),
            };
            rows.push(std::mem::replace(&mut row, carried));
            used = row.iter().map(|(cell, _)| cell.width().unwrap_or(0)).sum();
        }
        row.push((c, span_style));
        used += w;
    }
    rows.push(row);
    rows.into_iter()
        .map(|cells| Line::from(spans_of(&cells)).style(style))
        .collect()
}

/// Cells back into spans, one per run of the same style; a row's trailing spaces go.
fn spans_of(cells: &[(char, Style)]) -> Vec<Span<'static>> {
    let end = cells
        .iter()
        .rposition(|(c, _)| *c != ' ')
        .map_or(0, |at| at + 1);
    let mut spans: Vec<Span<'static>> = Vec::new();
    for (c, cell_style) in &cells[..end] {
        match spans.last_mut() {
            Some(last) if last.style == *cell_style => last.content.to_mut().push(*c),
            _ => spans.push(Span::styled(c.to_string(), *cell_style)),
        }
    }
    spans
}
