//! The automatic title: the first line of the first message that says something, without
//! Markdown marks, at most 40 characters, cut at a word, never inside a character or a grapheme
//! cluster (a flag, a family emoji, a combining mark).

use unicode_segmentation::UnicodeSegmentation;

use crate::readable::{readable_lines, without_controls, without_markdown, without_markers};

pub const MAX_TITLE_CHARS: usize = 40;

/// The longest title a user may give (a rename).
pub const MAX_USER_TITLE_CHARS: usize = 200;

/// A title the user gives: one line, trimmed, at least one visible character and at most
/// [`MAX_USER_TITLE_CHARS`].
pub fn user_title(title: &str) -> Result<String, String> {
    let title = without_controls(title).trim().to_owned();
    if title.is_empty() {
        return Err("title must not be empty".to_owned());
    }
    if title.chars().count() > MAX_USER_TITLE_CHARS {
        return Err(format!(
            "title must be at most {MAX_USER_TITLE_CHARS} characters"
        ));
    }
    Ok(title)
}

/// What a fork's title adds to its source's title.
const FORK_SUFFIX: &str = " (fork)";

/// A fork's title: its source's, marked as a fork once. A fork of a fork does not grow into
/// "… (fork) (fork)"; its header links to the source it came from.
pub fn fork_title(source: &str) -> String {
    let mut base = source.trim_end();
    while let Some(shorter) = base.strip_suffix(FORK_SUFFIX) {
        base = shorter.trim_end();
    }
    if base.is_empty() {
        base = "Untitled";
    }
    format!("{base}{FORK_SUFFIX}")
}

/// The automatic title: the first line that says something (`readable_lines`: not blank, no
/// demo directive, no `[[…]]` marker), at most [`MAX_TITLE_CHARS`], cut at a word when the
/// line is longer (mid-word only when its first word alone is too long). A message of
/// directives only is titled by what its first directive is given (`/echo hello`: "hello").
pub fn auto_title(text: &str) -> String {
    let line = readable_lines(text)
        .into_iter()
        .next()
        .or_else(|| {
            text.lines()
                .map(|line| without_markdown(&without_markers(&without_controls(line))))
                .filter_map(|line| {
                    let (_, argument) = line.split_once(char::is_whitespace)?;
                    let argument = argument.trim();
                    (!argument.is_empty()).then(|| argument.to_owned())
                })
                .next()
        })
        .unwrap_or_else(|| "Untitled".to_owned());
    let mut title = String::new();
    let mut chars = 0;
    // Where the title may end on a word: its length before the last space that fitted.
    let mut last_word_end = None;
    let mut cut = false;
    for grapheme in line.graphemes(true) {
        let grapheme_chars = grapheme.chars().count();
        if chars + grapheme_chars > MAX_TITLE_CHARS {
            cut = true;
            break;
        }
        if grapheme.chars().all(char::is_whitespace) {
            last_word_end = Some(title.len());
        }
        chars += grapheme_chars;
        title.push_str(grapheme);
    }
    if cut && let Some(end) = last_word_end.filter(|end| *end > 0) {
        title.truncate(end);
    }
    title.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_title_is_one_trimmed_line_of_at_most_two_hundred_characters() {
        assert_eq!(
            user_title("  Release\nplan\u{0}v2\r\n").unwrap(),
            "Release plan v2"
        );
        assert!(user_title("\u{7}\n ").is_err());
        assert!(user_title(&"a".repeat(200)).is_ok());
        assert!(user_title(&"a".repeat(201)).is_err());
    }

    #[test]
    fn titles_are_first_lines_cut_at_forty_characters_without_splitting_one() {
        let forty = "a".repeat(40);
        let cases: &[(&str, &str)] = &[
            ("hello", "hello"),
            ("first line\nsecond line", "first line"),
            ("\n  \n  indented first\nnext", "indented first"),
            (&format!("{forty}bcd"), &forty),
            // Cut at a word: the last whole word that fits.
            (
                "Please refactor the storage layer so that forks are cheap",
                "Please refactor the storage layer so",
            ),
            ("# Fix **the** `build`", "Fix the build"),
            ("> quoted\n", "quoted"),
            ("- [ ] item one", "[ ] item one"),
            ("12. step twelve", "step twelve"),
            (
                "/shell ls\n/sleep 200\nWhat is in here?",
                "What is in here?",
            ),
            // Directives are never part of a title: what the first is given, or Untitled.
            ("/shell ls -la", "ls -la"),
            ("/echo hello there\n/sleep 2", "hello there"),
            ("/sleep", "Untitled"),
            ("[[tool:read]] Look at the parser", "Look at the parser"),
            ("[[only a cue]]\nThe real question", "The real question"),
            ("/usr/bin is odd", "/usr/bin is odd"),
            ("snake_case_name stays", "snake_case_name stays"),
            (&"中".repeat(50), &"中".repeat(40)),
            (&"😀".repeat(45), &"😀".repeat(40)),
            // A family emoji is 7 chars in one grapheme: 5 fit (35 chars), the 6th would not.
            (&"👨‍👩‍👧‍👦".repeat(6), &"👨‍👩‍👧‍👦".repeat(5)),
            ("   ", "Untitled"),
            ("a\u{0}b\tc\r\nnext", "a b c"),
            ("\u{7}\n\u{0}", "Untitled"),
        ];
        for (input, expected) in cases {
            let title = auto_title(input);
            assert_eq!(&title, expected, "input {input:?}");
            assert!(title.chars().count() <= MAX_TITLE_CHARS);
        }
    }

    #[test]
    fn a_fork_is_marked_once_however_deep() {
        let cases: &[(&str, &str)] = &[
            ("original plan", "original plan (fork)"),
            ("original plan (fork)", "original plan (fork)"),
            ("original plan (fork) (fork)", "original plan (fork)"),
            ("plan (forked)", "plan (forked) (fork)"),
            (" (fork)", "Untitled (fork)"),
        ];
        for (source, expected) in cases {
            assert_eq!(&fork_title(source), expected, "source {source:?}");
        }
    }
}
