//! The recent output of a background process, bounded: text appended at the end, the oldest
//! dropped past the bound. Every byte ever written has an offset (a cursor), so a reader that
//! asks for what came after its cursor gets exactly the new text, and is told how much of it
//! was dropped before it could read it.

use crate::text::floor_char_boundary;

#[derive(Debug)]
pub struct OutputBuffer {
    text: String,
    /// The offset of `text`'s first byte: how much was dropped before it.
    start: u64,
    max_bytes: usize,
}

/// What a read found after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub text: String,
    /// The cursor to read on from: everything written so far.
    pub next: u64,
    /// Bytes written after the cursor that were dropped before this read.
    pub dropped: u64,
}

impl OutputBuffer {
    pub fn new(max_bytes: usize) -> OutputBuffer {
        OutputBuffer {
            text: String::new(),
            start: 0,
            max_bytes: max_bytes.max(4),
        }
    }

    /// Everything written so far, in bytes.
    pub fn total(&self) -> u64 {
        self.start + self.text.len() as u64
    }

    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
        if self.text.len() > self.max_bytes {
            // Drop the oldest, never half a character.
            let mut cut = self.text.len() - self.max_bytes;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.start += cut as u64;
        }
    }

    /// What was written after `since` (all that is kept when `since` is older), at most
    /// `max_bytes` of it from its start.
    pub fn read(&self, since: u64, max_bytes: usize) -> Read {
        let total = self.total();
        let since = since.min(total);
        let dropped = self.start.saturating_sub(since);
        let from = usize::try_from(since.max(self.start) - self.start).unwrap_or(usize::MAX);
        let from = floor_char_boundary(&self.text, from.min(self.text.len()));
        let rest = &self.text[from..];
        let end = floor_char_boundary(rest, rest.len().min(max_bytes));
        Read {
            text: rest[..end].to_owned(),
            next: self.start + (from + end) as u64,
            dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_only_what_came_after_its_cursor() {
        let mut buffer = OutputBuffer::new(100);
        buffer.push("one\n");
        let first = buffer.read(0, 1000);
        assert_eq!(first.text, "one\n");
        assert_eq!(first.next, 4);
        buffer.push("two\n");
        let second = buffer.read(first.next, 1000);
        assert_eq!(second.text, "two\n");
        assert_eq!(second.dropped, 0);
        assert_eq!(buffer.read(second.next, 1000).text, "");
        // A cursor past the end reads nothing and stays at the end.
        assert_eq!(buffer.read(99, 1000).next, 8);
    }

    #[test]
    fn the_oldest_is_dropped_past_the_bound_and_a_late_reader_is_told() {
        let mut buffer = OutputBuffer::new(10);
        buffer.push("0123456789");
        buffer.push("abcde");
        assert_eq!(buffer.total(), 15);
        let late = buffer.read(0, 1000);
        assert_eq!(late.text, "56789abcde");
        assert_eq!(late.dropped, 5);
        assert_eq!(late.next, 15);
        // A read bounded in size goes on from where it stopped.
        let part = buffer.read(5, 4);
        assert_eq!((part.text.as_str(), part.next), ("5678", 9));
    }

    #[test]
    fn characters_are_never_split() {
        let mut buffer = OutputBuffer::new(5);
        buffer.push("ääää");
        let read = buffer.read(0, 1000);
        assert!(read.text.chars().all(|c| c == 'ä'), "{read:?}");
        assert_eq!(read.dropped + read.text.len() as u64, 8);
        let part = buffer.read(read.next - 4, 3);
        assert_eq!(part.text, "ä");
    }
}
