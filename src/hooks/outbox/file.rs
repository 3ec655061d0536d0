//! The outbox's file: JSON Lines written and read as the conversation logs are
//! (`store::jsonl`): each write appended and fsynced before it returns, a failed one cut back;
//! after a crash, a torn tail (the end of a write the crash cut) skipped, kept aside and cut
//! off. Compacting rewrites it whole (to a temporary file, fsynced, renamed over it, the
//! folder fsynced), so a crash leaves the old file or the new one, never a mix.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::delivery::{Delivery, Line};
use crate::store::disk::{replace_durably, wait_for};
use crate::store::jsonl::{JsonlWriter, encode_lines, keep_aside, parse_log_salvaging};
use crate::store::{Acceptance, StoreError};

#[derive(Debug)]
pub(super) struct OutboxFile {
    path: PathBuf,
    writer: JsonlWriter,
}

/// What was read back from the file.
#[derive(Debug, Default)]
pub(super) struct ReadBack {
    pub lines: Vec<Line>,
    /// Bytes of a torn tail, kept aside and cut off.
    pub torn_bytes: usize,
    /// Lines that could not be read (skipped; the whole file was kept aside first).
    pub damaged: usize,
}

impl OutboxFile {
    /// Opens the file at `path` (made, with its folder, if missing) and reads its lines.
    pub fn open(path: &Path) -> io::Result<(OutboxFile, ReadBack)> {
        create_dir_durably(path.parent().unwrap_or(Path::new(".")))?;
        let content = match std::fs::read(path) {
            Ok(content) => content,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error),
        };
        let log =
            parse_log_salvaging::<Line>(path, &content, &Acceptance::default()).map_err(to_io)?;
        if !log.damaged.is_empty() {
            // Only a damaged disk or a hand edit makes such lines: what they held can still
            // be looked at once the file is compacted without them.
            let aside = keep_aside(path, &content).map_err(to_io)?;
            tracing::warn!(aside = %aside.display(), lines = ?log.damaged, "kept the webhook outbox with damaged lines aside");
        }
        // Opening for appends keeps a torn tail aside and cuts it.
        let writer = JsonlWriter::open(path).map_err(to_io)?;
        let read = ReadBack {
            lines: log.records,
            torn_bytes: log.torn_tail.unwrap_or(0),
            damaged: log.damaged.len(),
        };
        let file = OutboxFile {
            path: path.to_owned(),
            writer,
        };
        Ok((file, read))
    }

    pub fn len(&self) -> u64 {
        self.writer.len()
    }

    /// Appends `lines` in one write and one fsync: all are durable when it returns `Ok`.
    pub fn append(&mut self, lines: &[Line]) -> io::Result<()> {
        self.writer.append(lines).map_err(to_io)
    }

    /// Replaces the file with one line per delivery, as each stands now.
    pub fn rewrite<'a>(
        &mut self,
        deliveries: impl Iterator<Item = &'a Delivery>,
    ) -> io::Result<()> {
        /// Written as `Line::Queued` is, without copying the delivery.
        #[derive(Serialize)]
        struct Queued<'a> {
            queued: &'a Delivery,
        }
        let lines: Vec<Queued> = deliveries.map(|queued| Queued { queued }).collect();
        let bytes = encode_lines(&lines, None).map_err(to_io)?;
        wait_for(|| replace_durably(&self.path, &bytes))?;
        self.writer = JsonlWriter::open(&self.path).map_err(to_io)?;
        Ok(())
    }
}

fn to_io(error: StoreError) -> io::Error {
    io::Error::other(error.to_string())
}

/// Makes `dir` and its missing parents, each name fsynced into its parent: the deliveries in
/// it survive a power cut with their folder.
fn create_dir_durably(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|at| !at.is_dir()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    for created in missing {
        if let Some(parent) = created.parent() {
            File::open(parent)?.sync_all()?;
        }
    }
    Ok(())
}
