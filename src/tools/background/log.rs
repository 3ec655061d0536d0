//! A process's output on disk, beside its conversation's history: its newest part, up to
//! about `2 × SEGMENT_BYTES`, in two segment files `<id>.<offset>.log`, where `offset` is the
//! cursor (the count of output bytes before it) of the segment's first byte. When the newer
//! segment is full a new one starts and the older goes, so what is kept is always the end of
//! the output: a failed build's error, a server's latest requests. A reader asks by cursor,
//! as in memory, and is told how much before what is kept was dropped.

use std::collections::HashMap;
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt as _;

use super::buffer::Read;

/// A segment starts anew past this size; two are kept.
pub const SEGMENT_BYTES: u64 = 8 * 1024 * 1024;

/// The log a process's supervisor writes.
pub struct Log {
    dir: PathBuf,
    id: String,
    file: Option<tokio::fs::File>,
    /// The cursor of the current segment's first byte.
    start: u64,
    /// Bytes in the current segment.
    written: u64,
    /// The segment before the current one, kept until the next change of segment.
    previous: Option<PathBuf>,
}

impl Log {
    pub async fn open(dir: &Path, id: &str) -> Log {
        let mut log = Log {
            dir: dir.to_owned(),
            id: id.to_owned(),
            file: None,
            start: 0,
            written: 0,
            previous: None,
        };
        log.file = log.create(0).await;
        log
    }

    /// A new segment file, never one (or a link) already there.
    async fn create(&self, start: u64) -> Option<tokio::fs::File> {
        let path = segment_path(&self.dir, &self.id, start);
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
        {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "cannot keep a background process's output on disk");
                None
            }
        }
    }

    pub async fn write(&mut self, text: &str) {
        if self.file.is_none() || text.is_empty() {
            return;
        }
        if self.written > 0 && self.written + text.len() as u64 > SEGMENT_BYTES {
            self.next_segment().await;
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        // tokio hands a write to a blocking thread and answers before it lands; the flush
        // waits for it, so a reader of the file (and the count of what was written) sees it.
        let written = match file.write_all(text.as_bytes()).await {
            Ok(()) => file.flush().await,
            Err(error) => Err(error),
        };
        if written.is_err() {
            // A full disk: the rest is not kept (memory still has the recent part).
            self.file = None;
            return;
        }
        self.written += text.len() as u64;
    }

    async fn next_segment(&mut self) {
        let start = self.start + self.written;
        let Some(file) = self.create(start).await else {
            self.file = None;
            return;
        };
        if let Some(older) = self.previous.take() {
            let _ = tokio::fs::remove_file(older).await;
        }
        self.previous = Some(segment_path(&self.dir, &self.id, self.start));
        self.file = Some(file);
        self.start = start;
        self.written = 0;
    }
}

fn segment_path(dir: &Path, id: &str, start: u64) -> PathBuf {
    dir.join(format!("{id}.{start}.log"))
}

/// A process's segments, oldest first, each with the cursor it starts at. A log written
/// before segments existed (`<id>.log`) starts at 0.
fn segments(dir: &Path, id: &str) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let (owner, start) = parse_name(name.to_str()?)?;
            (owner == id).then(|| (start, entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// Deletes a process's log.
pub fn remove(dir: &Path, id: &str) {
    for (_, path) in segments(dir, id) {
        let _ = fs::remove_file(path);
    }
}

/// For every process with a log in `dir` (one read of the folder): the cursor just past what
/// its log keeps, that is how much it wrote as far as the log knows (for processes whose end
/// was never recorded).
pub fn totals(dir: &Path) -> HashMap<String, u64> {
    let mut totals = HashMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return totals;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some((id, start)) = name.to_str().and_then(parse_name) else {
            continue;
        };
        // Files only: a link is never followed, nor counted.
        let Some(length) = entry
            .metadata()
            .ok()
            .filter(fs::Metadata::is_file)
            .map(|metadata| metadata.len())
        else {
            continue;
        };
        let end = totals.entry(id.to_owned()).or_insert(0);
        *end = (*end).max(start + length);
    }
    totals
}

/// A segment's file name as its process and its first byte's cursor: `<id>.<offset>.log`, or
/// `<id>.log` (a log from before segments, at 0).
fn parse_name(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".log")?;
    match stem.split_once('.') {
        Some((id, offset)) => Some((id, offset.parse().ok()?)),
        None => Some((stem, 0)),
    }
}

/// What the log keeps after `since`, at most `max_bytes` of it; `dropped` counts the bytes
/// after `since` it no longer keeps.
pub fn read(dir: &Path, id: &str, since: u64, max_bytes: usize) -> Read {
    let segments = segments(dir, id);
    let empty = |next| Read {
        text: String::new(),
        next,
        dropped: 0,
    };
    let Some((first, _)) = segments.first() else {
        return empty(since);
    };
    let dropped = first.saturating_sub(since);
    let from = since.max(*first);
    // The segment holding `from`: the last that starts at or before it.
    let Some((start, path)) = segments.iter().rev().find(|(start, _)| *start <= from) else {
        return empty(since);
    };
    // Never through a link planted where a segment goes.
    let Ok(mut file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    else {
        return empty(since);
    };
    let length = file.metadata().map_or(0, |metadata| metadata.len());
    let offset = (from - start).min(length);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_ok() {
        let _ = file.take(max_bytes as u64).read_to_end(&mut bytes);
    }
    let complete = crate::tools::output::complete_utf8_prefix_len(&bytes);
    Read {
        text: String::from_utf8_lossy(&bytes[..complete]).into_owned(),
        next: start + offset + complete as u64,
        dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_newest_output_is_kept_in_two_segments_and_read_by_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), "p_1").await;
        let line = "x".repeat(1023) + "\n";
        let per_segment = SEGMENT_BYTES / 1024;
        // Three and a half segments' worth: the first two segments go.
        for _ in 0..per_segment * 7 / 2 {
            log.write(&line).await;
        }
        let written = per_segment * 7 / 2 * 1024;
        assert_eq!(totals(dir.path())["p_1"], written);
        let kept = segments(dir.path(), "p_1");
        assert_eq!(
            kept.iter().map(|(start, _)| *start).collect::<Vec<_>>(),
            [2 * SEGMENT_BYTES, 3 * SEGMENT_BYTES]
        );
        // From the start: told what is gone, given what is kept.
        let read = read(dir.path(), "p_1", 0, 10);
        assert_eq!(read.dropped, 2 * SEGMENT_BYTES);
        assert_eq!(read.text, "xxxxxxxxxx");
        assert_eq!(read.next, 2 * SEGMENT_BYTES + 10);
        // Across a segment's end, a reader goes on into the next.
        let end_of_older = super::read(dir.path(), "p_1", 3 * SEGMENT_BYTES - 2, 100);
        assert_eq!(end_of_older.text, "x\n");
        let newer = super::read(dir.path(), "p_1", end_of_older.next, 4);
        assert_eq!(newer.text, "xxxx");
        // The tail, as a panel reads it.
        let tail = super::read(dir.path(), "p_1", written - 2, 100);
        assert_eq!(
            (tail.text.as_str(), tail.next, tail.dropped),
            ("x\n", written, 0)
        );
        remove(dir.path(), "p_1");
        assert!(segments(dir.path(), "p_1").is_empty());
    }

    #[test]
    fn a_log_from_before_segments_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("p_2.log"), "héllo\n").unwrap();
        fs::write(dir.path().join("p_20.0.log"), "another process\n").unwrap();
        let read = read(dir.path(), "p_2", 1, 100);
        assert_eq!((read.text.as_str(), read.next), ("éllo\n", 7));
        assert_eq!(totals(dir.path())["p_2"], 7);
        assert_eq!(totals(dir.path())["p_20"], 16);
    }

    #[test]
    fn a_link_planted_where_a_segment_goes_is_never_read_through() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        fs::write(&secret, "the service's token").unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("p_3.0.log")).unwrap();
        let read = read(dir.path(), "p_3", 0, 100);
        assert_eq!(read.text, "");
        assert!(!totals(dir.path()).contains_key("p_3"));
    }
}
