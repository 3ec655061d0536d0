//! Append-only JSON Lines files: the writer appends whole lines and fsyncs before it returns;
//! the reader tolerates a torn last line (a crash in the middle of an append) and reports it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use std::sync::Arc;

use super::records::{Envelope, SCHEMA_VERSION, VersionOnly};
use super::{StoreError, WriteFence};

/// An open JSONL file that only grows. Owned by one conversation actor (invariant 2, one writer
/// per conversation).
#[derive(Debug)]
pub struct JsonlWriter {
    path: PathBuf,
    file: File,
    /// Bytes in the file, so the index can record how much of the log it has applied.
    len: u64,
    /// A failed append may have left part of its bytes behind, and cutting them off failed
    /// too: the next append must cut them first, or its line would be glued to them.
    needs_cut: bool,
    /// In cluster mode, the lease this writer writes under: checked before every append, its
    /// epoch stamped on every line.
    fence: Option<Arc<dyn WriteFence>>,
}

impl JsonlWriter {
    pub fn open(path: &Path) -> Result<JsonlWriter, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| StoreError::io(path, source))?;
        let len = file
            .metadata()
            .map_err(|source| StoreError::io(path, source))?
            .len();
        let mut writer = JsonlWriter {
            path: path.to_owned(),
            file,
            len,
            needs_cut: false,
            fence: None,
        };
        writer.cut_torn_tail()?;
        Ok(writer)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// From now on, appends only while `fence` holds, stamped with its epoch.
    pub fn set_fence(&mut self, fence: Option<Arc<dyn WriteFence>>) {
        self.fence = fence;
    }

    /// Appends the records as lines in one write and one fsync: either all are durable when this
    /// returns, or the caller gets an error and must not acknowledge anything.
    pub fn append<R: Serialize>(&mut self, records: &[R]) -> Result<(), StoreError> {
        if let Some(fence) = &self.fence
            && !fence.holds()
        {
            return Err(StoreError::NotOwner {
                path: self.path.clone(),
            });
        }
        let buffer = encode_lines(records, self.fence.as_ref().map(|fence| fence.epoch()))?;
        self.write_durably(&buffer, |file, bytes| {
            file.write_all(bytes).and_then(|()| file.sync_data())
        })
    }

    /// Writes `bytes` with `write` (all of them, then an fsync). If that fails, whatever part
    /// reached the file is cut off again, so the file still ends with the last acknowledged
    /// line: a disk that filled up mid-line must not leave a broken line for the next append
    /// to follow (a broken line in the middle is unreadable). After an fsync error nothing is
    /// known about what is durable, so the bytes are cut too: the caller is told "not stored".
    fn write_durably(
        &mut self,
        bytes: &[u8],
        write: impl FnOnce(&mut File, &[u8]) -> io::Result<()>,
    ) -> Result<(), StoreError> {
        if self.needs_cut {
            self.cut_back()
                .map_err(|source| StoreError::io(&self.path, source))?;
        }
        if let Err(source) = write(&mut self.file, bytes) {
            if let Err(error) = self.cut_back() {
                tracing::error!(path = %self.path.display(), %error, "cannot cut a failed append off; will retry before the next one");
            }
            return Err(StoreError::io(&self.path, source));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Cuts the file back to its last acknowledged line.
    fn cut_back(&mut self) -> io::Result<()> {
        self.needs_cut = true;
        self.file.set_len(self.len)?;
        self.file.sync_data()?;
        self.needs_cut = false;
        Ok(())
    }

    /// A crash can leave a last line without its newline. New lines must not be glued to it, so
    /// the torn bytes are cut off before the first append; the reader skips them anyway.
    fn cut_torn_tail(&mut self) -> Result<(), StoreError> {
        if self.len == 0 {
            return Ok(());
        }
        let content = std::fs::read(&self.path).map_err(|e| StoreError::io(&self.path, e))?;
        let keep = content
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1) as u64;
        if keep < self.len {
            tracing::warn!(path = %self.path.display(), cut = self.len - keep, "cutting a torn last line");
            self.file
                .set_len(keep)
                .and_then(|()| self.file.sync_data())
                .map_err(|e| StoreError::io(&self.path, e))?;
            self.len = keep;
        }
        Ok(())
    }
}

/// Serializes records as `{"v":1,...}\n` lines into one buffer (with the writer's lease
/// epoch in cluster mode).
pub fn encode_lines<R: Serialize>(
    records: &[R],
    epoch: Option<u64>,
) -> Result<Vec<u8>, StoreError> {
    let mut buffer = Vec::with_capacity(256 * records.len());
    for record in records {
        let envelope = Envelope {
            v: SCHEMA_VERSION,
            epoch,
            record,
        };
        serde_json::to_writer(&mut buffer, &envelope).map_err(StoreError::Encode)?;
        buffer.push(b'\n');
    }
    Ok(buffer)
}

/// Writes a whole new file and fsyncs it (used when a conversation directory is first built).
pub fn write_new<R: Serialize>(
    path: &Path,
    records: &[R],
    epoch: Option<u64>,
) -> Result<u64, StoreError> {
    write_bytes(path, &encode_lines(records, epoch)?)
}

/// Writes bytes (whole JSONL lines) to a new file and fsyncs it.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<u64, StoreError> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::io(path, e))?;
    Ok(bytes.len() as u64)
}

/// The lines of a JSONL file that could be read, and what had to be skipped.
#[derive(Debug)]
pub struct ReadLog<R> {
    pub records: Vec<R>,
    /// Bytes read, up to and including the last complete line.
    pub len: u64,
    /// A last line without its newline, left by a crash during an append: skipped.
    pub torn_tail: Option<usize>,
    /// The largest lease epoch on a line (cluster mode; 0 when none is stamped).
    pub epoch: u64,
    /// Lines stamped with an epoch older than one before them: written by an instance whose
    /// lease had ended (a stale writer). Skipped.
    pub stale_lines: usize,
}

/// Reads every record of a JSONL file. A torn last line is skipped and reported in `torn_tail`;
/// a malformed complete line or a newer schema version is an error, because skipping it could
/// silently drop an acknowledged change.
pub fn read_log<R: DeserializeOwned>(path: &Path) -> Result<ReadLog<R>, StoreError> {
    let content = match std::fs::read(path) {
        Ok(content) => content,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(ReadLog {
                records: Vec::new(),
                len: 0,
                torn_tail: None,
                epoch: 0,
                stale_lines: 0,
            });
        }
        Err(e) => return Err(StoreError::io(path, e)),
    };
    parse_log(path, &content)
}

pub fn parse_log<R: DeserializeOwned>(
    path: &Path,
    content: &[u8],
) -> Result<ReadLog<R>, StoreError> {
    let complete = content
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let torn_tail = (complete < content.len()).then(|| content.len() - complete);
    if let Some(bytes) = torn_tail {
        tracing::warn!(path = %path.display(), bytes, "skipping a torn last line");
    }
    let mut records = Vec::new();
    let (mut epoch, mut stale_lines) = (0, 0);
    for (index, line) in content[..complete].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Envelope<R>>(line) {
            Ok(envelope) if envelope.v <= SCHEMA_VERSION => {
                let line_epoch = envelope.epoch.unwrap_or(0);
                if line_epoch < epoch {
                    tracing::warn!(path = %path.display(), line = index + 1, line_epoch, epoch, "skipping a line of a stale writer");
                    stale_lines += 1;
                    continue;
                }
                epoch = line_epoch;
                records.push(envelope.record);
            }
            Ok(envelope) => return Err(StoreError::unknown_version(path, envelope.v)),
            Err(error) => {
                if let Ok(VersionOnly { v }) = serde_json::from_slice(line)
                    && v > SCHEMA_VERSION
                {
                    return Err(StoreError::unknown_version(path, v));
                }
                return Err(StoreError::Malformed {
                    path: path.to_owned(),
                    line: index + 1,
                    message: error.to_string(),
                });
            }
        }
    }
    Ok(ReadLog {
        records,
        len: complete as u64,
        torn_tail,
        epoch,
        stale_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    #[serde(tag = "type")]
    enum Rec {
        #[serde(rename = "a")]
        A { n: u32 },
    }

    /// A lease as the store sees it: an epoch, and whether it still holds.
    #[derive(Debug)]
    struct Lease(u64, std::sync::atomic::AtomicBool);

    impl WriteFence for Lease {
        fn epoch(&self) -> u64 {
            self.0
        }
        fn holds(&self) -> bool {
            self.1.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn lines_carry_their_lease_epoch_and_a_stale_writers_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let lease = |epoch| Arc::new(Lease(epoch, std::sync::atomic::AtomicBool::new(true)));
        let mut old_owner = JsonlWriter::open(&path).unwrap();
        old_owner.set_fence(Some(lease(1)));
        old_owner.append(&[Rec::A { n: 1 }]).unwrap();
        let mut new_owner = JsonlWriter::open(&path).unwrap();
        new_owner.set_fence(Some(lease(2)));
        new_owner.append(&[Rec::A { n: 2 }]).unwrap();
        // The old owner writes after its lease ended (its fence was wrong): readers skip it.
        let mut stale = JsonlWriter::open(&path).unwrap();
        stale.set_fence(Some(lease(1)));
        stale.append(&[Rec::A { n: 3 }]).unwrap();
        let log = read_log::<Rec>(&path).unwrap();
        assert_eq!(log.records, [Rec::A { n: 1 }, Rec::A { n: 2 }]);
        assert_eq!((log.epoch, log.stale_lines), (2, 1));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(r#"{"v":1,"epoch":1,"type":"a","n":1}"#),
            "{text}"
        );

        // A fence that no longer holds refuses the write, and nothing reaches the file.
        let ended = lease(3);
        ended.1.store(false, std::sync::atomic::Ordering::SeqCst);
        new_owner.set_fence(Some(ended));
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            new_owner.append(&[Rec::A { n: 4 }]),
            Err(StoreError::NotOwner { .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn appended_records_read_back_and_a_torn_tail_is_skipped_then_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut writer = JsonlWriter::open(&path).unwrap();
        writer.append(&[Rec::A { n: 1 }, Rec::A { n: 2 }]).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"v":1,"type":"a","n":"#)
            .unwrap();

        let log: ReadLog<Rec> = read_log(&path).unwrap();
        assert_eq!(log.records, vec![Rec::A { n: 1 }, Rec::A { n: 2 }]);
        assert_eq!(log.torn_tail, Some(22));

        let mut writer = JsonlWriter::open(&path).unwrap();
        writer.append(&[Rec::A { n: 3 }]).unwrap();
        let log: ReadLog<Rec> = read_log(&path).unwrap();
        assert_eq!(log.records.len(), 3);
        assert_eq!(log.torn_tail, None);
        assert_eq!(log.len, std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn a_failed_append_leaves_no_partial_line_for_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut writer = JsonlWriter::open(&path).unwrap();
        writer.append(&[Rec::A { n: 1 }]).unwrap();
        let full = || io::Error::new(io::ErrorKind::StorageFull, "no space left on device");
        // Half the line reaches the disk, then the disk is full.
        let line = encode_lines(&[Rec::A { n: 2 }], None).unwrap();
        let error = writer
            .write_durably(&line, |file, bytes| {
                file.write_all(&bytes[..bytes.len() / 2])?;
                Err(full())
            })
            .unwrap_err();
        assert!(error.to_string().contains("no space"), "{error}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), writer.len());
        // The whole line is written, but the fsync fails: not acknowledged, so not kept either.
        writer
            .write_durably(&line, |file, bytes| {
                file.write_all(bytes)?;
                Err(io::Error::other("fsync failed"))
            })
            .unwrap_err();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), writer.len());
        // Space is back: the next append follows the last acknowledged line.
        writer.append(&[Rec::A { n: 3 }]).unwrap();
        let log: ReadLog<Rec> = read_log(&path).unwrap();
        assert_eq!(log.records, vec![Rec::A { n: 1 }, Rec::A { n: 3 }]);
        assert_eq!(log.torn_tail, None);
    }

    #[test]
    fn a_newer_schema_version_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"v\":99,\"type\":\"b\"}\n").unwrap();
        let error = read_log::<Rec>(&path).unwrap_err();
        assert!(error.to_string().contains("schema version 99"), "{error}");
    }

    #[test]
    fn a_malformed_complete_line_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"v\":1,\"type\":\"a\",\"n\":1}\nnot json\n").unwrap();
        let error = read_log::<Rec>(&path).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
    }
}
