//! One line of a file as the reading tools show it (`read_file`, `grep`): decoded lossily, and
//! cut past [`MAX_LINE_CHARS`] with a marker, so one minified or generated line cannot fill
//! the model's context.

use std::borrow::Cow;

use super::output::complete_utf8_prefix_len;

/// Characters of one line shown before it is cut.
pub(super) const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line worth keeping: enough for [`MAX_LINE_CHARS`] characters of up to four
/// bytes each. A reader keeps at most this much of a line, however long it is.
pub(super) const MAX_LINE_BYTES_KEPT: usize = MAX_LINE_CHARS * 4;

/// The line whose first bytes are `kept` (at most [`MAX_LINE_BYTES_KEPT`]) and whose whole
/// length is `len` bytes, its terminator left out; past [`MAX_LINE_CHARS`] characters it ends
/// with a marker giving that length.
pub(super) fn shown(kept: &[u8], len: usize) -> Cow<'_, str> {
    let whole = kept.len() >= len;
    // A cut inside a character drops it whole rather than showing half of it as U+FFFD.
    let kept = if whole {
        kept
    } else {
        &kept[..complete_utf8_prefix_len(kept)]
    };
    let text = String::from_utf8_lossy(kept);
    let end = match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => end,
        None if whole => return text,
        None => text.len(),
    };
    Cow::Owned(format!("{} {}", &text[..end], cut_marker(len)))
}

/// What stands at the end of a cut line.
pub(super) fn cut_marker(len: usize) -> String {
    format!("[... line cut: {len} bytes long ...]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_are_kept_and_long_ones_cut_on_a_character() {
        assert_eq!(shown(b"hello", 5), "hello");
        assert_eq!(shown(b"ok\xff", 3), "ok\u{FFFD}");
        let long = "é".repeat(MAX_LINE_CHARS + 10);
        let expected = format!(
            "{} [... line cut: {} bytes long ...]",
            "é".repeat(MAX_LINE_CHARS),
            long.len()
        );
        assert_eq!(shown(long.as_bytes(), long.len()), expected);
        // Only the kept bytes are at hand: the length says how long the line really was.
        let kept = &long.as_bytes()[..MAX_LINE_BYTES_KEPT.min(long.len())];
        assert_eq!(shown(kept, long.len()), expected);
        // Fewer characters kept than the limit (four-byte characters cut off): still marked.
        let kept = "a€".as_bytes();
        assert_eq!(
            shown(&kept[..3], 1000),
            "a [... line cut: 1000 bytes long ...]"
        );
    }
}
