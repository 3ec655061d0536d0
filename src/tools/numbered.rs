//! A text file as `read_file` shows it: numbered lines in the `cat -n` style models know (the
//! number right-aligned in six columns, a tab, the line), from an offset and at most a number
//! of lines, within the output cap; a note then says how many lines follow and the offset to
//! read on from. The file is read as a stream, so memory stays bounded whatever its size.

use std::io::{BufRead, ErrorKind};

use tokio_util::sync::CancellationToken;

use super::lines::{MAX_LINE_BYTES_KEPT, cut_marker, shown};
use crate::text::floor_char_boundary;

/// Lines shown when the call gives no `limit`.
pub(super) const DEFAULT_LIMIT: u64 = 2000;
/// Past the lines shown, the rest is counted for the note only this far, so a huge file is not
/// read to its end just to say how long it is.
const COUNT_BUDGET: u64 = 64 * 1024 * 1024;

/// Which lines to show: from `offset` (1 is the first line), at most `limit`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    pub offset: u64,
    pub limit: u64,
}

#[derive(Debug, PartialEq)]
pub(super) enum Numbered {
    /// The lines, and the notes after them.
    Text(String),
    /// The file has no lines at all.
    Empty,
    /// The offset lies past the last line; the file has this many.
    PastEnd { lines: u64 },
}

/// Reads `reader` and shows the lines of `window`, the whole output within `cap` bytes (one
/// line is always shown, cut if it alone is longer). `cancel` stops the read between buffers.
pub(super) fn numbered(
    reader: impl BufRead,
    window: Window,
    cap: usize,
    cancel: &CancellationToken,
) -> std::io::Result<Numbered> {
    let mut lines = LineReader {
        reader,
        cancel,
        kept: Vec::new(),
        len: 0,
        crlf: false,
    };
    // Lines read so far.
    let mut number: u64 = 0;
    while number + 1 < window.offset {
        if !lines.next(false)? {
            return Ok(Numbered::PastEnd { lines: number });
        }
        number += 1;
    }
    let mut out = String::new();
    let mut shown_lines: u64 = 0;
    let mut crlf = false;
    // The first line not shown, when reading stopped before the end.
    let mut stopped_at: Option<u64> = None;
    while shown_lines < window.limit {
        if !lines.next(true)? {
            break;
        }
        number += 1;
        let len = lines.len - usize::from(lines.crlf);
        let kept = &lines.kept[..lines.kept.len().min(len)];
        let entry = format!("{number:>6}\t{}", shown(kept, len));
        let separator = usize::from(!out.is_empty());
        if out.len() + separator + entry.len() > cap {
            if shown_lines > 0 {
                stopped_at = Some(number);
                break;
            }
            // A cap smaller than one line: its beginning, rather than nothing at all.
            let end = floor_char_boundary(&entry, cap);
            out.push_str(&entry[..end]);
            if end < entry.len() {
                out.push(' ');
                out.push_str(&cut_marker(len));
            }
        } else {
            if separator == 1 {
                out.push('\n');
            }
            out.push_str(&entry);
        }
        crlf |= lines.crlf;
        shown_lines += 1;
    }
    if shown_lines == 0 {
        return Ok(if number == 0 {
            Numbered::Empty
        } else {
            Numbered::PastEnd { lines: number }
        });
    }
    // The line that did not fit was read already: it is the first of the rest.
    let (next, more) = match stopped_at {
        Some(next) => (next, lines.count_rest()?.map(|rest| rest + 1)),
        None => (number + 1, lines.count_rest()?),
    };
    if crlf {
        out.push_str("\n[the lines end with CRLF (\\r\\n); the \\r is not shown]");
    }
    match more {
        Some(0) => {}
        Some(more) => out.push_str(&format!(
            "\n[... {more} more lines: call read_file with offset={next} to read on ...]"
        )),
        None => out.push_str(&format!(
            "\n[... more lines (too many to count): call read_file with offset={next} to read \
             on ...]"
        )),
    }
    Ok(Numbered::Text(out))
}

/// Reads one line at a time, keeping only the first [`MAX_LINE_BYTES_KEPT`] bytes of each.
struct LineReader<'a, R> {
    reader: R,
    cancel: &'a CancellationToken,
    /// The beginning of the line just read (when asked to keep it), its `\n` left out.
    kept: Vec<u8>,
    /// The length of the line just read, its `\n` left out (a `\r` before it counted).
    len: usize,
    /// Whether the line just read ended with `\r\n`.
    crlf: bool,
}

impl<R: BufRead> LineReader<'_, R> {
    /// Reads the next line; `false` at the end of the file.
    fn next(&mut self, keep: bool) -> std::io::Result<bool> {
        self.kept.clear();
        self.len = 0;
        let mut last = None;
        loop {
            self.check_cancel()?;
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                // The last line needs no newline to be a line.
                self.crlf = false;
                return Ok(self.len > 0);
            }
            let (piece, ended) = match memchr::memchr(b'\n', buffer) {
                Some(end) => (&buffer[..end], true),
                None => (buffer, false),
            };
            if keep {
                let room = MAX_LINE_BYTES_KEPT - self.kept.len().min(MAX_LINE_BYTES_KEPT);
                self.kept.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            if let Some(&byte) = piece.last() {
                last = Some(byte);
            }
            let used = piece.len() + usize::from(ended);
            self.len += piece.len();
            self.reader.consume(used);
            if ended {
                self.crlf = last == Some(b'\r');
                return Ok(true);
            }
        }
    }

    /// How many lines are left (within [`COUNT_BUDGET`]; `None` past it).
    fn count_rest(&mut self) -> std::io::Result<Option<u64>> {
        let mut lines = 0;
        let mut read = 0;
        let mut open_line = false;
        loop {
            self.check_cancel()?;
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(Some(lines + u64::from(open_line)));
            }
            lines += memchr::memchr_iter(b'\n', buffer).count() as u64;
            open_line = buffer.last() != Some(&b'\n');
            let used = buffer.len();
            read += used as u64;
            self.reader.consume(used);
            if read > COUNT_BUDGET {
                return Ok(None);
            }
        }
    }

    fn check_cancel(&self) -> std::io::Result<()> {
        if self.cancel.is_cancelled() {
            return Err(std::io::Error::new(ErrorKind::Interrupted, "interrupted"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, offset: u64, limit: u64, cap: usize) -> Numbered {
        numbered(
            text.as_bytes(),
            Window { offset, limit },
            cap,
            &CancellationToken::new(),
        )
        .unwrap()
    }

    fn text(numbered: Numbered) -> String {
        match numbered {
            Numbered::Text(text) => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_are_numbered_like_cat_n() {
        assert_eq!(text(read("a\nb\n", 1, 10, 1000)), "     1\ta\n     2\tb");
        // No newline at the end: the last line is a line all the same; empty lines count.
        assert_eq!(
            text(read("a\n\nc", 1, 10, 1000)),
            "     1\ta\n     2\t\n     3\tc"
        );
        assert_eq!(read("", 1, 10, 1000), Numbered::Empty);
    }

    #[test]
    fn an_offset_and_a_limit_pick_lines_and_say_how_to_read_on() {
        let file: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        assert_eq!(
            text(read(&file, 4, 2, 1000)),
            "     4\tline 4\n     5\tline 5\n[... 5 more lines: call read_file with offset=6 \
             to read on ...]"
        );
        assert_eq!(
            text(read(&file, 9, 5, 1000)),
            "     9\tline 9\n    10\tline 10"
        );
        assert_eq!(text(read(&file, 10, 1, 1000)), "    10\tline 10");
        assert_eq!(read(&file, 11, 5, 1000), Numbered::PastEnd { lines: 10 });
        assert_eq!(read(&file, 500, 5, 1000), Numbered::PastEnd { lines: 10 });
        assert_eq!(read("", 2, 5, 1000), Numbered::PastEnd { lines: 0 });
    }

    #[test]
    fn the_cap_stops_at_a_whole_line() {
        let file: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        // Each numbered line is 13 or 14 bytes, and one newline between them.
        assert_eq!(
            text(read(&file, 1, 100, 30)),
            "     1\tline 1\n     2\tline 2\n[... 8 more lines: call read_file with offset=3 \
             to read on ...]"
        );
        // A cap below one line still shows the beginning of it.
        assert_eq!(
            text(read(&file, 1, 100, 10)),
            "     1\tlin [... line cut: 6 bytes long ...]\n[... 9 more lines: call read_file \
             with offset=2 to read on ...]"
        );
    }

    #[test]
    fn long_lines_are_cut_and_crlf_is_shown_without_the_cr() {
        let long = "x".repeat(100_000);
        let file = format!("short\r\n{long}\r\nlast\r\n");
        let shown = text(read(&file, 1, 10, 64 * 1024));
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "     1\tshort");
        assert_eq!(
            lines[1],
            format!(
                "     2\t{} [... line cut: 100000 bytes long ...]",
                &long[..2000]
            )
        );
        assert_eq!(lines[2], "     3\tlast");
        assert_eq!(
            lines[3],
            "[the lines end with CRLF (\\r\\n); the \\r is not shown]"
        );
        assert_eq!(lines.len(), 4);
        assert!(!shown.contains('\r'));
    }

    #[test]
    fn a_cancelled_read_stops() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let error = numbered(
            "a\n".as_bytes(),
            Window {
                offset: 1,
                limit: 1,
            },
            100,
            &cancel,
        )
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Interrupted);
    }
}
