//! Code blocks' colours. A block whose fence names a language syntect knows (its bundled
//! grammars: Rust, Python, shell, JavaScript, JSON, YAML, C, Go, Java, SQL, HTML, …) is
//! highlighted by that grammar, in the terminal's own palette like the rest of the screen;
//! any other gets a light, language-independent touch. Streaming text is drawn again and
//! again, so what a block gave is kept (`CACHE`).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use ratatui::style::{Color, Style};
use ratatui::text::Span;
use syntect::easy::HighlightLines;
use syntect::highlighting::{
    Color as ThemeColor, ScopeSelectors, StyleModifier, Theme, ThemeItem, ThemeSettings,
};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

/// A block's lines, each as styled pieces.
type Lines = Arc<Vec<Vec<Span<'static>>>>;

/// Blocks highlighted already, by language and text. Emptied when it holds this many.
const CACHED_BLOCKS: usize = 256;
static CACHE: OnceLock<Mutex<HashMap<u64, Lines>>> = OnceLock::new();

/// The block's lines, highlighted.
pub fn code(language: &str, code: &str) -> Lines {
    let mut hasher = DefaultHasher::new();
    (language, code).hash(&mut hasher);
    let key = hasher.finish();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(lines) = cache.lock().expect("highlight cache lock").get(&key) {
        return lines.clone();
    }
    let lines =
        Arc::new(by_grammar(language, code).unwrap_or_else(|| code.lines().map(light).collect()));
    let mut cache = cache.lock().expect("highlight cache lock");
    if cache.len() >= CACHED_BLOCKS {
        cache.clear();
    }
    cache.insert(key, lines.clone());
    lines
}

/// The grammars syntect bundles.
fn syntaxes() -> &'static SyntaxSet {
    static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// `None` when no grammar knows the language (or one fails on the text).
fn by_grammar(language: &str, code: &str) -> Option<Vec<Vec<Span<'static>>>> {
    if language.is_empty() {
        return None;
    }
    let syntaxes = syntaxes();
    let syntax = syntaxes.find_syntax_by_token(language)?;
    let theme = palette();
    let mut highlighter = HighlightLines::new(syntax, theme);
    let mut lines = Vec::new();
    for line in LinesWithEndings::from(code) {
        let pieces = highlighter.highlight_line(line, syntaxes).ok()?;
        let spans = pieces
            .into_iter()
            .map(|(style, text)| {
                let text = text.trim_end_matches(['\n', '\r']).to_owned();
                Span::styled(text, Style::default().fg(terminal_color(style.foreground)))
            })
            .filter(|span| !span.content.is_empty())
            .collect();
        lines.push(spans);
    }
    Some(lines)
}

/// A theme in the terminal's palette: its colours are not RGB but `Color` codes (see
/// `terminal_color`), in `r`, with `a` 0.
fn palette() -> &'static Theme {
    static THEME: OnceLock<Theme> = OnceLock::new();
    THEME.get_or_init(|| {
        let color = |code: u8| ThemeColor {
            r: code,
            g: 0,
            b: 0,
            a: 0,
        };
        let item = |scopes: &str, code: u8| ThemeItem {
            scope: scopes
                .parse::<ScopeSelectors>()
                .expect("a valid scope selector"),
            style: StyleModifier {
                foreground: Some(color(code)),
                background: None,
                font_style: None,
            },
        };
        Theme {
            settings: ThemeSettings {
                foreground: Some(color(PLAIN)),
                ..ThemeSettings::default()
            },
            scopes: vec![
                item("comment, punctuation.definition.comment", COMMENT),
                item("string, punctuation.definition.string", STRING),
                item(
                    "constant.numeric, constant.language, constant.character",
                    CONSTANT,
                ),
                item("keyword, storage", KEYWORD),
                item(
                    "entity.name.function, support.function, meta.function-call",
                    FUNCTION,
                ),
                item(
                    "entity.name.type, entity.name.class, support.type, support.class",
                    TYPE,
                ),
                item("invalid", INVALID),
            ],
            ..Theme::default()
        }
    })
}

const PLAIN: u8 = 0;
const COMMENT: u8 = 1;
const STRING: u8 = 2;
const CONSTANT: u8 = 3;
const KEYWORD: u8 = 4;
const FUNCTION: u8 = 5;
const TYPE: u8 = 6;
const INVALID: u8 = 7;

fn terminal_color(color: ThemeColor) -> Color {
    match color.r {
        COMMENT => Color::DarkGray,
        STRING => Color::Green,
        CONSTANT => Color::Magenta,
        KEYWORD => Color::LightBlue,
        FUNCTION => Color::Cyan,
        TYPE => Color::Yellow,
        INVALID => Color::Red,
        _ => Color::White,
    }
}

/// One line of code: strings green, comments grey, numbers magenta, the rest as is. Language
/// independent on purpose: a light touch that never misleads much.
fn light(line: &str) -> Vec<Span<'static>> {
    let code = Style::default().fg(Color::White);
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") || trimmed.starts_with('#') || trimmed.starts_with("--") {
        return vec![Span::styled(
            line.to_owned(),
            Style::default().fg(Color::DarkGray),
        )];
    }
    let mut spans = Vec::new();
    let mut plain = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            spans.push(Span::styled(std::mem::take(&mut plain), code));
            let mut string = c.to_string();
            for next in chars.by_ref() {
                string.push(next);
                if next == c {
                    break;
                }
            }
            spans.push(Span::styled(string, Style::default().fg(Color::Green)));
        } else if c.is_ascii_digit() && !plain.ends_with(|p: char| p.is_alphanumeric() || p == '_')
        {
            spans.push(Span::styled(std::mem::take(&mut plain), code));
            let mut number = c.to_string();
            while let Some(&next) = chars
                .peek()
                .filter(|n| n.is_ascii_alphanumeric() || **n == '.')
            {
                number.push(next);
                chars.next();
            }
            spans.push(Span::styled(number, Style::default().fg(Color::Magenta)));
        } else {
            plain.push(c);
        }
    }
    spans.push(Span::styled(plain, code));
    spans.retain(|span| !span.content.is_empty());
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn colored(lines: &[Vec<Span<'static>>], text: &str) -> Option<Color> {
        lines
            .iter()
            .flatten()
            .find(|span| span.content.contains(text))
            .and_then(|span| span.style.fg)
    }

    #[test]
    fn a_known_language_is_highlighted_by_its_grammar_and_another_lightly() {
        let rust = code(
            "rust",
            "// note\nfn main() {\n    let s = \"hi\"; // x\n}\n",
        );
        let text: Vec<String> = rust
            .iter()
            .map(|spans| spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(
            text,
            ["// note", "fn main() {", "    let s = \"hi\"; // x", "}"]
        );
        assert_eq!(colored(&rust, "note"), Some(Color::DarkGray));
        assert_eq!(colored(&rust, "fn"), Some(Color::LightBlue));
        assert_eq!(colored(&rust, "main"), Some(Color::Cyan));
        assert_eq!(colored(&rust, "hi"), Some(Color::Green));
        // A grammar knows a string that spans lines; the light touch does not need to.
        let python = code("py", "x = \"\"\"a\nb\"\"\"\n");
        assert_eq!(colored(&python, "b"), Some(Color::Green));
        let unknown = code("nosuchlanguage", "x = \"s\" # c\n");
        assert_eq!(colored(&unknown, "\"s\""), Some(Color::Green));
    }
}
