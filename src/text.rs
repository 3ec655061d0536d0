//! Cutting text at byte offsets without splitting a UTF-8 character (std's own helpers are not
//! stable at our MSRV), and showing text a terminal must not interpret.

use std::borrow::Cow;

/// The largest char boundary of `text` at or before `index`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The smallest char boundary of `text` at or after `index`.
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    (index..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len())
}

/// `text` with every character that could change how a terminal shows it, or hide what it
/// says, written out: C0 and C1 controls (but newline and tab), DEL, as `\x1b`; bidirectional
/// controls, zero-width and other invisible characters, as `<U+200B>`. What a client shows of
/// a command a user approves is then what runs: an escape sequence, a carriage return or a
/// right-to-left override cannot make `rm victim` read `ls -la`.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
    }
    Cow::Owned(out)
}

/// Whether `visible` writes `c` out.
pub fn needs_escape(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true,
        // Bidirectional marks, embeddings, overrides and isolates.
        '\u{061C}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' => true,
        // Zero-width and other invisible characters.
        '\u{00AD}'
        | '\u{034F}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{17B4}'
        | '\u{17B5}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{3164}'
        | '\u{FEFF}'
        | '\u{FFA0}'
        | '\u{E0000}'..='\u{E007F}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_would_interpret_is_written_out() {
        assert_eq!(visible("ls -la\n"), "ls -la\n");
        assert_eq!(
            visible("rm victim\x1b[2K\r$ ls -la"),
            "rm victim\\x1b[2K\\x0d$ ls -la"
        );
        assert_eq!(
            visible("r\u{200B}m \u{202E}txt.exe"),
            "r<U+200B>m <U+202E>txt.exe"
        );
        assert_eq!(visible("\u{7f}\u{85}"), "\\x7f<U+0085>");
        assert_eq!(visible("tab\there"), "tab\there");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn boundaries_never_split_a_character() {
        let text = "aé€b"; // 1 + 2 + 3 + 1 bytes
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 99), text.len());
        assert_eq!(ceil_char_boundary(text, text.len()), text.len());
    }
}
