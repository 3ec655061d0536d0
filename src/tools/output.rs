//! A tool's output kept within its cap ([`CappedOutput`]: the head and the tail, and how much
//! was cut between them), and decoded without splitting a character. Kept apart from the front
//! (`tools/mod.rs`), which runs the tools, so that the tools use no module that uses them.

use crate::text::{ceil_char_boundary, floor_char_boundary};

/// `text` as a tool's output would be stored: past `max_bytes`, its head and tail and a note
/// of how much was cut in between.
pub fn cap_head_and_tail(text: &str, max_bytes: usize) -> String {
    let mut capped = CappedOutput::new(max_bytes);
    capped.push(text);
    capped.finish()
}

/// Collects a tool's output in arrival order. Past the cap it keeps only the head and the tail
/// (half each) and says how much was cut, so memory stays bounded however much a command prints.
pub(super) struct CappedOutput {
    max_bytes: usize,
    head: String,
    /// Set once something went to the tail: from then on the head must not grow, or the order
    /// of the output would change.
    head_closed: bool,
    /// The latest output; trimmed to its last `max_bytes / 2` bytes now and then, and at the end.
    tail: String,
    total_bytes: usize,
}

impl CappedOutput {
    pub(super) fn new(max_bytes: usize) -> CappedOutput {
        CappedOutput {
            max_bytes,
            head: String::new(),
            head_closed: false,
            tail: String::new(),
            total_bytes: 0,
        }
    }

    pub(super) fn push(&mut self, text: &str) {
        self.total_bytes += text.len();
        let mut rest = text;
        if !self.head_closed {
            // The head gets the odd byte of an odd cap.
            let head_cap = self.max_bytes - self.max_bytes / 2;
            let room = head_cap - self.head.len();
            let taken = floor_char_boundary(rest, room);
            self.head.push_str(&rest[..taken]);
            rest = &rest[taken..];
            if rest.is_empty() {
                return;
            }
            self.head_closed = true;
        }
        self.tail.push_str(rest);
        // Trimming only past twice the cap keeps the copying amortised, and never trims output
        // that fits under the cap as a whole.
        if self.tail.len() > 2 * self.max_bytes.max(4096) {
            self.trim_tail();
        }
    }

    pub(super) fn finish(mut self) -> String {
        if self.total_bytes <= self.max_bytes {
            return self.head + &self.tail;
        }
        self.trim_tail();
        let cut = self.total_bytes - self.head.len() - self.tail.len();
        format!(
            "{}\n[... {cut} bytes of output cut ...]\n{}",
            self.head, self.tail
        )
    }

    fn trim_tail(&mut self) {
        let tail_cap = self.max_bytes / 2;
        if self.tail.len() > tail_cap {
            let start = ceil_char_boundary(&self.tail, self.tail.len() - tail_cap);
            self.tail.drain(..start);
        }
    }
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 character which
/// more bytes could still complete. Decoding only that prefix keeps a character whole when a read
/// or a cap falls in its middle; invalid bytes are left for the lossy decoder.
pub(super) fn complete_utf8_prefix_len(bytes: &[u8]) -> usize {
    // A character is at most 4 bytes long, so only the last 3 bytes can start an incomplete one.
    for back in 1..=bytes.len().min(3) {
        let index = bytes.len() - back;
        let width = match bytes[index] {
            0x80..=0xBF => continue, // a continuation byte: the start is further back
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 1,
        };
        return if width > back { index } else { bytes.len() };
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output() {
        #[track_caller]
        fn check(max_bytes: usize, pushes: &[&str], expected: &str) {
            let mut output = CappedOutput::new(max_bytes);
            for text in pushes {
                output.push(text);
            }
            assert_eq!(output.finish(), expected);
        }
        check(10, &["hello", "world"], "helloworld");
        check(
            10,
            &["hello world"],
            "hello\n[... 1 bytes of output cut ...]\nworld",
        );
        check(
            4,
            &["ab", "cd", "ef", "gh"],
            "ab\n[... 4 bytes of output cut ...]\ngh",
        );
        check(5, &["abcdefgh"], "abc\n[... 3 bytes of output cut ...]\ngh");
        // A character is never split: the head and the tail get a little less instead.
        check(4, &["aé", "xyzé"], "a\n[... 5 bytes of output cut ...]\né");
        check(0, &["abc"], "\n[... 3 bytes of output cut ...]\n");
    }

    #[test]
    fn capped_output_keeps_memory_bounded() {
        let mut output = CappedOutput::new(100);
        let line = "0123456789".repeat(10);
        for _ in 0..10_000 {
            output.push(&line);
        }
        assert!(output.tail.len() <= 2 * 4096 + line.len());
        let text = output.finish();
        assert!(text.contains("[... 999900 bytes of output cut ...]"));
    }

    #[test]
    fn complete_utf8_prefix() {
        #[track_caller]
        fn check(bytes: &[u8], expected: usize) {
            assert_eq!(complete_utf8_prefix_len(bytes), expected);
        }
        let euro = "€".as_bytes(); // 3 bytes
        check(b"", 0);
        check(b"abc", 3);
        check(euro, 3);
        check(&euro[..1], 0);
        check(&euro[..2], 0);
        check(&[b'a', euro[0], euro[1]], 1);
        check(&[b'a', 0xF0, 0x9F, 0x98], 1);
        check("a😀".as_bytes(), 5);
        // Invalid bytes are not held back: waiting cannot make them valid.
        check(&[b'a', 0xFF], 2);
        check(&[b'a', 0x80], 2);
    }
}
