//! The automatic title: the first line of the first message, at most 40 characters,
//! never cut inside a character or a grapheme cluster (a flag, a family emoji, a combining mark).

use unicode_segmentation::UnicodeSegmentation;

pub const MAX_TITLE_CHARS: usize = 40;

/// The longest title a user may give (a rename).
pub const MAX_USER_TITLE_CHARS: usize = 200;

/// A title is one line of a sidebar, however it came: control characters (a NUL, a tab, a
/// line break) become spaces.
fn without_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

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

pub fn auto_title(text: &str) -> String {
    let line = text
        .lines()
        .map(|line| without_controls(line).trim().to_owned())
        .find(|line| !line.is_empty())
        .unwrap_or_else(|| "Untitled".to_owned());
    let mut title = String::new();
    let mut chars = 0;
    for grapheme in line.graphemes(true) {
        let grapheme_chars = grapheme.chars().count();
        if chars + grapheme_chars > MAX_TITLE_CHARS {
            break;
        }
        chars += grapheme_chars;
        title.push_str(grapheme);
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
