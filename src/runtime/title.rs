//! The automatic title (SPEC §6.5): the first line of the first message, at most 40 characters,
//! never cut inside a character or a grapheme cluster (a flag, a family emoji, a combining mark).

use unicode_segmentation::UnicodeSegmentation;

pub const MAX_TITLE_CHARS: usize = 40;

pub fn auto_title(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("Untitled");
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
        ];
        for (input, expected) in cases {
            let title = auto_title(input);
            assert_eq!(&title, expected, "input {input:?}");
            assert!(title.chars().count() <= MAX_TITLE_CHARS);
        }
    }
}
