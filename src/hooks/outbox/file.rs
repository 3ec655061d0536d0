//! The outbox's file: JSON Lines, each write appended and fsynced before it returns; read back
//! after a crash as the conversation logs are (a torn tail, the end of a write the crash cut,
//! is skipped, kept aside and cut off); rewritten whole when compacted (to a temporary file,
//! fsynced, renamed over it, the folder fsynced), so a crash leaves the old file or the new
//! one, never a mix.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::delivery::{Delivery, Line};
use crate::store::disk::{replace_durably, wait_for};
use crate::store::jsonl::{keep_aside, torn_start};

#[derive(Debug)]
pub(super) struct OutboxFile {
    path: PathBuf,
    file: File,
    /// Bytes in the file, all of them whole lines.
    len: u64,
    /// A failed append left bytes that could not be cut off then: cut before the next one.
    needs_cut: bool,
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
        let intact = torn_start(&content);
        let mut read = ReadBack {
            torn_bytes: content.len() - intact,
            ..ReadBack::default()
        };
        for (index, line) in content[..intact].split(|byte| *byte == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Line>(line) {
                Ok(line) => read.lines.push(line),
                Err(error) => {
                    read.damaged += 1;
                    tracing::warn!(path = %path.display(), line = index + 1, %error, "skipping a damaged line of the webhook outbox");
                }
            }
        }
        if read.damaged > 0 {
            // Only a damaged disk or a hand edit makes such lines: what they held can still
            // be looked at once the file is compacted without them.
            let aside = keep_aside(path, &content).map_err(io::Error::other)?;
            tracing::warn!(aside = %aside.display(), "kept the webhook outbox with damaged lines aside");
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let mut opened = OutboxFile {
            path: path.to_owned(),
            file,
            len: intact as u64,
            needs_cut: false,
        };
        if read.torn_bytes > 0 {
            let aside = keep_aside(path, &content[intact..]).map_err(io::Error::other)?;
            tracing::warn!(path = %path.display(), bytes = read.torn_bytes, aside = %aside.display(), "cutting a torn tail of the webhook outbox; its bytes are kept aside");
            opened.cut_back()?;
        }
        Ok((opened, read))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Appends `lines` in one write and one fsync: all are durable when it returns `Ok`. On an
    /// error whatever part was written is cut off again, so the file still ends with a whole
    /// line.
    pub fn append(&mut self, lines: &[Line]) -> io::Result<()> {
        if self.needs_cut {
            self.cut_back()?;
        }
        let bytes = encode(lines)?;
        let file = &mut self.file;
        if let Err(error) = wait_for(|| file.write_all(&bytes).and_then(|()| file.sync_data())) {
            if let Err(cut) = self.cut_back() {
                tracing::error!(path = %self.path.display(), error = %cut, "cannot cut a failed append off the webhook outbox; will retry before the next one");
            }
            return Err(error);
        }
        self.len += bytes.len() as u64;
        Ok(())
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
        let bytes = encode(&lines)?;
        wait_for(|| replace_durably(&self.path, &bytes))?;
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        self.len = bytes.len() as u64;
        self.needs_cut = false;
        Ok(())
    }

    /// Cuts the file back to its last whole line.
    fn cut_back(&mut self) -> io::Result<()> {
        self.needs_cut = true;
        self.file.set_len(self.len)?;
        self.file.sync_data()?;
        self.needs_cut = false;
        Ok(())
    }
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

fn encode<T: Serialize>(lines: &[T]) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(512 * lines.len());
    for line in lines {
        serde_json::to_writer(&mut bytes, line)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}
