//! What `grep` finds: one file's matching and context lines as the searcher reports them
//! ([`FileSink`]), and the files found so far in path order ([`Hits`]), keeping only what can
//! still be shown (the first files by path within the limit and the cap) while counting all.

use std::collections::BTreeMap;

use grep_searcher::{Searcher, Sink, SinkContext, SinkContextKind, SinkFinish, SinkMatch};

use crate::tools::lines::{MAX_LINE_BYTES_KEPT, shown};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// The paths of the files that match.
    FilesWithMatches,
    /// The matching lines, `path:line:text`, with context lines `path-line-text`.
    Content,
    /// The number of matching lines per file, `path:count`.
    Count,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RowKind {
    Match,
    /// A context line before a match.
    Before,
    /// A context line after a match.
    After,
    /// Lines were skipped between two groups of context.
    Break,
}

#[derive(Debug)]
pub(super) struct Row {
    pub kind: RowKind,
    pub number: u64,
    pub text: String,
}

/// One file's results.
#[derive(Debug, Default)]
pub(super) struct FileHits {
    /// Matching lines (1 in `files_with_matches` mode: the search stops at the first).
    pub matches: u64,
    /// The lines to show (content mode), as far as they can be shown.
    pub rows: Vec<Row>,
    /// About the bytes its output takes, to know when the cap is reached.
    bytes: usize,
}

impl FileHits {
    /// What it counts against the limit: its shown matches, or one line of output.
    fn weight(&self, mode: Mode, limit: u64) -> u64 {
        match mode {
            Mode::Content => self.matches.min(limit),
            _ => 1,
        }
    }
}

/// Collects one file's results; the search stops at binary data (a NUL byte), and the file
/// then counts as not found.
pub(super) struct FileSink {
    pub mode: Mode,
    pub limit: u64,
    /// Rows are kept only while they take less than this (the output cap).
    pub max_bytes: usize,
    pub hits: FileHits,
    pub binary: bool,
}

impl FileSink {
    fn keep(&mut self, kind: RowKind, number: u64, line: &[u8]) {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = shown(&line[..line.len().min(MAX_LINE_BYTES_KEPT)], line.len()).into_owned();
        // `:number:text` and a newline; the path is counted once the file is done.
        self.hits.bytes += digits(number) + text.len() + 3;
        self.hits.rows.push(Row { kind, number, text });
    }

    fn keeps_rows(&self) -> bool {
        self.mode == Mode::Content
            && self.hits.matches <= self.limit
            && self.hits.bytes < self.max_bytes
    }
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.hits.matches += 1;
        match self.mode {
            Mode::FilesWithMatches => return Ok(false),
            Mode::Count => return Ok(true),
            Mode::Content => {}
        }
        if self.keeps_rows() {
            let number = found.line_number().unwrap_or(0);
            self.keep(RowKind::Match, number, found.bytes());
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.keeps_rows() {
            let kind = match context.kind() {
                SinkContextKind::Before => RowKind::Before,
                _ => RowKind::After,
            };
            let number = context.line_number().unwrap_or(0);
            self.keep(kind, number, context.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.keeps_rows() {
            self.hits.bytes += "--\n".len();
            self.hits.rows.push(Row {
                kind: RowKind::Break,
                number: 0,
                text: String::new(),
            });
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }

    fn finish(&mut self, _: &Searcher, finish: &SinkFinish) -> Result<(), Self::Error> {
        self.binary |= finish.binary_byte_offset().is_some();
        Ok(())
    }
}

/// The files found so far by path, only those that can still be shown kept, and the totals.
pub(super) struct Hits {
    mode: Mode,
    limit: u64,
    cap: usize,
    pub files: BTreeMap<String, FileHits>,
    /// What the kept files count against the limit, and their bytes.
    kept_weight: u64,
    kept_bytes: usize,
    /// Every file found, and every match.
    pub total_files: u64,
    pub total_matches: u64,
    /// Files and directories that could not be read.
    pub unreadable: u64,
}

impl Hits {
    pub fn new(mode: Mode, limit: u64, cap: usize) -> Hits {
        Hits {
            mode,
            limit,
            cap,
            files: BTreeMap::new(),
            kept_weight: 0,
            kept_bytes: 0,
            total_files: 0,
            total_matches: 0,
            unreadable: 0,
        }
    }

    pub fn add(&mut self, path: String, mut hits: FileHits) {
        self.total_files += 1;
        self.total_matches += hits.matches;
        match self.mode {
            Mode::FilesWithMatches => hits.bytes = path.len() + 1,
            Mode::Count => hits.bytes = path.len() + digits(hits.matches) + 2,
            Mode::Content => hits.bytes += path.len() * hits.rows.len(),
        }
        // The files before it in path order fill the output already.
        let full = self.kept_weight >= self.limit || self.kept_bytes >= self.cap;
        if full
            && self
                .files
                .last_key_value()
                .is_some_and(|(last, _)| *last < path)
        {
            return;
        }
        self.kept_weight += hits.weight(self.mode, self.limit);
        self.kept_bytes += hits.bytes;
        self.files.insert(path, hits);
        // Drop the last files while the others fill the output without them.
        while self.files.len() > 1 {
            let Some((_, last)) = self.files.last_key_value() else {
                break;
            };
            let weight = last.weight(self.mode, self.limit);
            if self.kept_weight - weight < self.limit && self.kept_bytes - last.bytes < self.cap {
                break;
            }
            self.kept_weight -= weight;
            self.kept_bytes -= last.bytes;
            self.files.pop_last();
        }
    }
}

/// The digits of `number` written out.
fn digits(number: u64) -> usize {
    number.checked_ilog10().map_or(1, |log| log as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(matches: u64) -> FileHits {
        FileHits {
            matches,
            ..FileHits::default()
        }
    }

    #[test]
    fn only_the_first_files_by_path_are_kept_and_all_are_counted() {
        let mut hits = Hits::new(Mode::FilesWithMatches, 2, 10_000);
        for path in ["d", "b", "c", "a", "e"] {
            hits.add(path.to_owned(), one(1));
        }
        let kept: Vec<&str> = hits.files.keys().map(String::as_str).collect();
        assert_eq!(kept, ["a", "b"]);
        assert_eq!(hits.total_files, 5);
        assert_eq!(hits.total_matches, 5);

        // In content mode the limit counts matches: one file may fill it alone.
        let mut hits = Hits::new(Mode::Content, 3, 10_000);
        hits.add("b".to_owned(), one(5));
        hits.add("c".to_owned(), one(1));
        assert_eq!(hits.files.keys().collect::<Vec<_>>(), ["b"]);
        hits.add("a".to_owned(), one(2));
        assert_eq!(hits.files.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!((hits.total_files, hits.total_matches), (3, 8));

        // The cap too: `ccccc:1` and a newline are 8 bytes, a cap of 20 needs three of them.
        let mut hits = Hits::new(Mode::Count, 100, 20);
        for path in ["eeeee", "ddddd", "ccccc", "bbbbb", "aaaaa"] {
            hits.add(path.to_owned(), one(1));
        }
        assert_eq!(
            hits.files.keys().collect::<Vec<_>>(),
            ["aaaaa", "bbbbb", "ccccc"]
        );
    }
}
