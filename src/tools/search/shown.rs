//! The output of a search: at most `limit` results, lines within the output cap, each redacted
//! (a configured secret never reaches the model, whatever file held it), then the notes.

use crate::text::floor_char_boundary;

/// Results shown when a call gives no `limit`, and the most it may ask for.
pub(super) const DEFAULT_LIMIT: u64 = 100;
pub(crate) const MAX_LIMIT: u64 = 10_000;

/// Lines of output, at most `cap` bytes of them.
pub(super) struct Lines {
    cap: usize,
    text: String,
    /// A line held back until another follows (a `--` between groups of context lines).
    pending: Option<&'static str>,
}

impl Lines {
    pub fn new(cap: usize) -> Lines {
        Lines {
            cap,
            text: String::new(),
            pending: None,
        }
    }

    /// Adds `line` (redacted) unless the cap is reached; `false` when it was not added. The
    /// first line is always added, cut to the cap when it alone is longer.
    pub fn push(&mut self, line: &str) -> bool {
        let line = crate::redact::redact(line);
        let pending = self.pending.map_or(0, |separator| separator.len() + 1);
        let needed = usize::from(!self.text.is_empty()) + pending + line.len();
        if self.text.len() + needed > self.cap {
            if !self.text.is_empty() {
                return false;
            }
            let end = floor_char_boundary(&line, self.cap);
            self.text.push_str(&line[..end]);
            self.pending = None;
            return true;
        }
        if let Some(separator) = self.pending.take() {
            self.push_raw(separator);
        }
        self.push_raw(&line);
        true
    }

    /// Adds `separator` before the next line, if one comes.
    pub fn separate(&mut self, separator: &'static str) {
        if !self.text.is_empty() {
            self.pending = Some(separator);
        }
    }

    /// The lines, then each note on a line of its own (notes are the service's own words,
    /// not cut by the cap).
    pub fn finish(mut self, notes: &[String]) -> String {
        for note in notes {
            self.push_raw(note);
        }
        self.text
    }

    fn push_raw(&mut self, line: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
    }
}

/// `count` and the noun, in the plural unless it is one.
pub(super) fn count(count: u64, noun: &str) -> String {
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {noun}{plural}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_stop_at_the_cap_and_separators_only_come_between_lines() {
        let mut lines = Lines::new(12);
        assert!(lines.push("abc"));
        lines.separate("--");
        assert!(lines.push("def"));
        assert!(!lines.push("too long"));
        lines.separate("--");
        assert_eq!(lines.finish(&["[note]".to_owned()]), "abc\n--\ndef\n[note]");

        let mut lines = Lines::new(4);
        assert!(lines.push("abcdef"));
        assert!(!lines.push("x"));
        assert_eq!(lines.finish(&[]), "abcd");
        assert_eq!(count(1, "file"), "1 file");
        assert_eq!(count(3, "more file"), "3 more files");
    }
}
