//! An agent's Markdown as terminal lines: headings, emphasis, lists, quotes, code (blocks
//! framed and highlighted, `highlight.rs`) and tables (cells in
//! aligned columns). Streaming text is rendered again as it grows, so an unfinished block
//! simply shows as far as it goes.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight;

pub fn render(text: &str) -> Vec<Line<'static>> {
    let mut out = Writer::default();
    for event in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        out.event(event);
    }
    out.flush();
    while out.lines.last().is_some_and(|line| line.spans.is_empty()) {
        out.lines.pop();
    }
    out.lines
}

#[derive(Default)]
struct Writer {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Each open list: the next number, or `None` for bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    /// The code block being read: its language (the fence's first word) and its text so far.
    code_block: Option<(String, String)>,
    table: Option<Vec<Vec<String>>>,
    cell: String,
    /// Each open link: where it goes, and its text so far.
    links: Vec<(String, String)>,
}

impl Writer {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |style, next| style.patch(*next))
    }

    fn push(&mut self, text: &str) {
        if let Some((_, shown)) = self.links.last_mut() {
            shown.push_str(text);
        }
        if let Some(_table) = &self.table {
            self.cell += text;
            return;
        }
        if self.current.is_empty() && self.quote > 0 {
            self.current.push(Span::styled(
                "│ ".repeat(self.quote),
                Style::default().fg(Color::DarkGray),
            ));
        }
        self.current
            .push(Span::styled(text.to_owned(), self.style()));
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            self.lines
                .push(Line::from(std::mem::take(&mut self.current)));
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lists.is_empty() && self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.code_block.is_some() => {
                if let Some((_, code)) = &mut self.code_block {
                    code.push_str(&text);
                }
            }
            Event::Text(text) => self.push(&text),
            Event::Code(code) => {
                if self.table.is_some() {
                    self.cell += &code;
                } else {
                    self.current.push(Span::styled(
                        code.to_string(),
                        Style::default().fg(Color::Yellow),
                    ));
                }
            }
            Event::SoftBreak => self.push(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                self.lines.push(Line::styled(
                    "────────",
                    Style::default().fg(Color::DarkGray),
                ));
            }
            Event::TaskListMarker(done) => self.push(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Heading { level, .. } => {
                self.blank();
                let marks = "#".repeat(level as usize);
                self.styles.push(
                    Style::default()
                        .fg(Color::Cyan)
                        .add_modifier(Modifier::BOLD),
                );
                self.push(&format!("{marks} "));
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.links.push((dest_url.to_string(), String::new()));
                self.styles
                    .push(Style::default().add_modifier(Modifier::UNDERLINED));
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code_block = Some((language, String::new()));
            }
            Tag::List(first) => {
                self.flush();
                self.lists.push(first);
            }
            Tag::Item => {
                self.flush();
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{indent}{}. ", *n - 1)
                    }
                    _ => format!("{indent}• "),
                };
                self.current.push(Span::raw(marker));
            }
            Tag::Table(_) => {
                self.flush();
                self.table = Some(Vec::new());
            }
            Tag::TableRow | Tag::TableHead => {
                if let Some(rows) = &mut self.table {
                    rows.push(Vec::new());
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                // Where it goes stays readable (a terminal cannot be asked to open it), unless
                // its text already says it.
                if let Some((url, shown)) = self.links.pop()
                    && !url.is_empty()
                    && shown.trim() != url
                {
                    let url = crate::text::visible(&url).into_owned();
                    if self.table.is_some() {
                        self.cell += &format!(" ({url})");
                    } else {
                        self.current.push(Span::styled(
                            format!(" ({url})"),
                            Style::default().fg(Color::DarkGray),
                        ));
                    }
                }
            }
            TagEnd::Paragraph => self.blank(),
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
            }
            TagEnd::CodeBlock => {
                if let Some((language, code)) = self.code_block.take() {
                    for spans in highlight::code(&language, &code).iter() {
                        let mut line =
                            vec![Span::styled("  │ ", Style::default().fg(Color::DarkGray))];
                        line.extend(spans.iter().cloned());
                        self.lines.push(Line::from(line));
                    }
                }
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.blank();
            }
            TagEnd::Item => self.flush(),
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.cell);
                if let Some(row) = self.table.as_mut().and_then(|rows| rows.last_mut()) {
                    row.push(cell);
                }
            }
            TagEnd::Table => {
                if let Some(rows) = self.table.take() {
                    self.table_lines(&rows);
                }
                self.blank();
            }
            _ => {}
        }
    }

    /// Cells padded to their column's widest, the header row bold and underlined.
    fn table_lines(&mut self, rows: &[Vec<String>]) {
        let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                rows.iter()
                    .filter_map(|row| row.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for (at, row) in rows.iter().enumerate() {
            let text = (0..columns)
                .map(|c| {
                    let cell = row.get(c).map_or("", String::as_str);
                    format!("{cell:<width$}", width = widths[c])
                })
                .collect::<Vec<_>>()
                .join(" │ ");
            let style = if at == 0 {
                Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
            } else {
                Style::default()
            };
            self.lines.push(Line::styled(text, style));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_link_keeps_where_it_goes_unless_its_text_says_it() {
        let lines = render("See [the docs](https://example.com/docs) or <https://example.com>.");
        assert_eq!(
            plain(&lines),
            ["See the docs (https://example.com/docs) or https://example.com."]
        );
    }

    #[test]
    fn headings_lists_code_and_tables() {
        let text = "# Title\n\nSome *text*.\n\n- one\n- two\n\n1. first\n\n```rust\nlet x = \"s\";\n```\n\n| a | bb |\n|---|---|\n| ccc | d |\n";
        let lines = render(text);
        assert_eq!(
            plain(&lines),
            [
                "# Title",
                "",
                "Some text.",
                "",
                "• one",
                "• two",
                "",
                "1. first",
                "",
                "  │ let x = \"s\";",
                "",
                "a   │ bb",
                "ccc │ d ",
            ]
        );
        assert!(
            lines[0].spans[0]
                .style
                .add_modifier
                .contains(Modifier::BOLD)
        );
    }
}
