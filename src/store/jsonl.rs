//! Append-only JSON Lines files: the writer appends whole lines and fsyncs before it returns;
//! the reader tolerates a torn last line (a crash in the middle of an append) and reports it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use std::sync::Arc;

use super::fence::{Acceptance, FenceError, Stamp, Verdict};
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
    /// returns, or the caller gets an error and must not acknowledge anything. In cluster mode
    /// the lines are stamped with the lease's epoch and the next commit number, and count only
    /// once the fence has accepted that commit (after the fsync): a writer that lost its lease
    /// meanwhile gets an error, and its lines are never read.
    pub fn append<R: Serialize>(&mut self, records: &[R]) -> Result<(), StoreError> {
        // The fsync waits without holding the runtime's worker (`disk::wait_for`), so other
        // conversations' appends wait for the disk at the same time.
        let write_all = |file: &mut File, bytes: &[u8]| {
            super::disk::wait_for(|| file.write_all(bytes).and_then(|()| file.sync_data()))
        };
        let Some(fence) = self.fence.clone() else {
            let buffer = encode_lines(records, None)?;
            return self.write_durably(&buffer, write_all);
        };
        if !fence.holds() {
            return Err(StoreError::NotOwner {
                path: self.path.clone(),
            });
        }
        let commit = fence.next_commit();
        let stamp = Stamp {
            epoch: fence.epoch(),
            commit: Some(commit),
        };
        let buffer = encode_lines(records, Some(stamp))?;
        crate::testhooks::stop_at("append", &buffer);
        self.write_durably(&buffer, write_all)?;
        fence.commit(commit).map_err(|error| match error {
            FenceError::Lost => StoreError::NotOwner {
                path: self.path.clone(),
            },
            FenceError::Unknown(reason) => StoreError::Unconfirmed {
                path: self.path.clone(),
                reason,
            },
        })
    }

    /// Appends the records as lines in one write, without an fsync: for what was never
    /// acknowledged and is worth keeping through a crash of the process (the page cache holds
    /// it), not through a power cut. The next durable append flushes it too. Not for a fenced
    /// writer (cluster mode), whose lines count only once committed.
    pub fn append_unsynced<R: Serialize>(&mut self, records: &[R]) -> Result<(), StoreError> {
        if self.fence.is_some() {
            return Ok(());
        }
        let buffer = encode_lines(records, None)?;
        self.write_durably(&buffer, |file, bytes| file.write_all(bytes))
    }

    /// Writes `bytes` with `write` (all of them, then an fsync). If that fails, whatever part
    /// reached the file is cut off again, so the file still ends with the last acknowledged
    /// line: a disk that filled up mid-line must not leave a broken line for the next append
    /// to follow (a broken line in the middle is unreadable). After an fsync error nothing is
    /// known about what is durable, so the bytes are cut too: the caller is told "not stored".
    /// A fenced writer cuts them only before its next append, right after its lease was seen
    /// to hold: by then another instance may have appended (this one's lease ended), and
    /// cutting to this writer's length would cut that instance's lines.
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
            if self.fence.is_some() {
                self.needs_cut = true;
            } else if let Err(error) = self.cut_back() {
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

/// Serializes records as `{"v":1,...}\n` lines into one buffer (with the writer's stamp in
/// cluster mode).
pub fn encode_lines<R: Serialize>(
    records: &[R],
    stamp: Option<Stamp>,
) -> Result<Vec<u8>, StoreError> {
    let mut buffer = Vec::with_capacity(256 * records.len());
    for record in records {
        let envelope = Envelope {
            v: SCHEMA_VERSION,
            epoch: stamp.map(|stamp| stamp.epoch),
            commit: stamp.and_then(|stamp| stamp.commit),
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
    write_bytes(path, &encode_lines(records, epoch.map(Stamp::epoch_only))?)
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
    /// Lines of a writer whose lease had ended (a stale writer): their commit was never
    /// accepted, or (when nothing is known of their epoch) their epoch is older than a line
    /// before them. Skipped.
    pub stale_lines: usize,
}

/// Reads every record of a JSONL file. A torn last line is skipped and reported in `torn_tail`;
/// a malformed complete line or a newer schema version is an error, because skipping it could
/// silently drop an acknowledged change. `acceptance`: which stamped lines count (cluster
/// mode; `Acceptance::default()` otherwise).
pub fn read_log<R: DeserializeOwned>(
    path: &Path,
    acceptance: &Acceptance,
) -> Result<ReadLog<R>, StoreError> {
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
    parse_log(path, &content, acceptance)
}

pub fn parse_log<R: DeserializeOwned>(
    path: &Path,
    content: &[u8],
    acceptance: &Acceptance,
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
    let mut filter = StaleFilter::new(acceptance);
    for (index, line) in content[..complete].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Envelope<R>>(line) {
            Ok(envelope) if envelope.v <= SCHEMA_VERSION => {
                if !filter.keeps(envelope.epoch, envelope.commit) {
                    tracing::warn!(path = %path.display(), line = index + 1, epoch = envelope.epoch, "skipping a line of a stale writer");
                    continue;
                }
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
    let (epoch, stale_lines) = (filter.epoch, filter.stale_lines);
    Ok(ReadLog {
        records,
        len: complete as u64,
        torn_tail,
        epoch,
        stale_lines,
    })
}

/// Decides line by line, in file order, which lines count (see `store::fence`): a stamped
/// line whose commit was accepted or refused is judged by that; one whose epoch nothing is
/// known of is skipped when its epoch is older than a line before it.
struct StaleFilter<'a> {
    acceptance: &'a Acceptance,
    /// The largest epoch of a line kept so far.
    epoch: u64,
    stale_lines: usize,
}

impl<'a> StaleFilter<'a> {
    fn new(acceptance: &'a Acceptance) -> StaleFilter<'a> {
        StaleFilter {
            acceptance,
            epoch: 0,
            stale_lines: 0,
        }
    }

    fn keeps(&mut self, epoch: Option<u64>, commit: Option<u64>) -> bool {
        let epoch = epoch.unwrap_or(0);
        let keep = match self.acceptance.judge(epoch, commit) {
            Verdict::Accepted => true,
            Verdict::Rejected => false,
            Verdict::Unknown => epoch >= self.epoch,
        };
        if keep {
            self.epoch = self.epoch.max(epoch);
        } else {
            self.stale_lines += 1;
        }
        keep
    }
}

/// Only the stamp of a line.
#[derive(serde::Deserialize)]
struct StampOnly {
    epoch: Option<u64>,
    commit: Option<u64>,
}

/// The complete lines of `content` that count, as bytes (a fork copies a history this way).
/// With nothing known (embedded mode) the content is returned as it is.
pub fn counted_lines(content: Vec<u8>, acceptance: &Acceptance) -> Vec<u8> {
    if !acceptance.is_known() {
        return content;
    }
    let mut filter = StaleFilter::new(acceptance);
    let mut kept = Vec::with_capacity(content.len());
    for line in content.split_inclusive(|b| *b == b'\n') {
        if !line.ends_with(b"\n") {
            break;
        }
        let stamp = serde_json::from_slice::<StampOnly>(line).ok();
        let (epoch, commit) = stamp.map_or((None, None), |stamp| (stamp.epoch, stamp.commit));
        if filter.keeps(epoch, commit) {
            kept.extend_from_slice(line);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    #[serde(tag = "type")]
    enum Rec {
        #[serde(rename = "a")]
        A { n: u32 },
    }

    /// A coordinator as the fence protocol needs one: the current epoch and its last
    /// accepted commit, and the closed epochs with theirs.
    #[derive(Debug, Default)]
    struct Coordinator {
        epoch: u64,
        commits: u64,
        closed: HashMap<u64, u64>,
    }

    /// A lease of one epoch, accepted by a shared coordinator.
    #[derive(Debug)]
    struct Lease {
        epoch: u64,
        next: std::sync::atomic::AtomicU64,
        holds: std::sync::atomic::AtomicBool,
        coordinator: Arc<Mutex<Coordinator>>,
    }

    impl Lease {
        /// Takes the conversation: the old epoch is closed at its last accepted commit.
        fn claim(coordinator: &Arc<Mutex<Coordinator>>) -> Arc<Lease> {
            let mut state = coordinator.lock().unwrap();
            let (old, last) = (state.epoch, state.commits);
            state.closed.insert(old, last);
            state.epoch += 1;
            state.commits = 0;
            Arc::new(Lease {
                epoch: state.epoch,
                next: Default::default(),
                holds: std::sync::atomic::AtomicBool::new(true),
                coordinator: coordinator.clone(),
            })
        }
    }

    impl WriteFence for Lease {
        fn epoch(&self) -> u64 {
            self.epoch
        }
        fn holds(&self) -> bool {
            self.holds.load(std::sync::atomic::Ordering::SeqCst)
        }
        fn next_commit(&self) -> u64 {
            self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
        }
        fn commit(&self, commit: u64) -> Result<(), FenceError> {
            let mut state = self.coordinator.lock().unwrap();
            if state.epoch != self.epoch {
                return Err(FenceError::Lost);
            }
            state.commits = commit;
            Ok(())
        }
        fn commit_delete(&self) -> Result<(), FenceError> {
            Err(FenceError::Unknown("not in this test".into()))
        }
        fn acceptance(&self) -> Acceptance {
            let state = self.coordinator.lock().unwrap();
            Acceptance::new(
                Arc::new(state.closed.clone()),
                Some((state.epoch, state.commits)),
            )
        }
    }

    #[test]
    fn a_stale_writers_lines_never_count_wherever_they_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let coordinator = Arc::new(Mutex::new(Coordinator::default()));
        let mut old_owner = JsonlWriter::open(&path).unwrap();
        old_owner.set_fence(Some(Lease::claim(&coordinator)));
        old_owner.append(&[Rec::A { n: 1 }]).unwrap();
        // Another instance takes the conversation while the old owner still thinks it holds
        // it (it was paused, or the database's clock stepped): the old owner's next line is
        // written, before the new owner's, but its commit is refused and the caller told so.
        let new_lease = Lease::claim(&coordinator);
        assert!(matches!(
            old_owner.append(&[Rec::A { n: 2 }]),
            Err(StoreError::NotOwner { .. })
        ));
        let mut new_owner = JsonlWriter::open(&path).unwrap();
        new_owner.set_fence(Some(new_lease.clone()));
        new_owner.append(&[Rec::A { n: 3 }]).unwrap();
        // ... and one after the new owner's lines.
        assert!(old_owner.append(&[Rec::A { n: 4 }]).is_err());
        new_owner.append(&[Rec::A { n: 5 }]).unwrap();
        let log = read_log::<Rec>(&path, &new_lease.acceptance()).unwrap();
        assert_eq!(
            log.records,
            [Rec::A { n: 1 }, Rec::A { n: 3 }, Rec::A { n: 5 }]
        );
        assert_eq!((log.epoch, log.stale_lines), (2, 2));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(r#"{"v":1,"epoch":1,"commit":1,"type":"a","n":1}"#),
            "{text}"
        );
        // Without the coordinator's rows (a lost database), only the order of epochs is left:
        // the line that came after the new owner's is still skipped.
        let log = read_log::<Rec>(&path, &Acceptance::default()).unwrap();
        assert_eq!(log.stale_lines, 1);

        // A fence that no longer holds by the clock refuses the write before writing.
        new_lease
            .holds
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            new_owner.append(&[Rec::A { n: 6 }]),
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

        let log: ReadLog<Rec> = read_log(&path, &Acceptance::default()).unwrap();
        assert_eq!(log.records, vec![Rec::A { n: 1 }, Rec::A { n: 2 }]);
        assert_eq!(log.torn_tail, Some(22));

        let mut writer = JsonlWriter::open(&path).unwrap();
        writer.append(&[Rec::A { n: 3 }]).unwrap();
        let log: ReadLog<Rec> = read_log(&path, &Acceptance::default()).unwrap();
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
        let log: ReadLog<Rec> = read_log(&path, &Acceptance::default()).unwrap();
        assert_eq!(log.records, vec![Rec::A { n: 1 }, Rec::A { n: 3 }]);
        assert_eq!(log.torn_tail, None);
    }

    #[test]
    fn a_newer_schema_version_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"v\":99,\"type\":\"b\"}\n").unwrap();
        let error = read_log::<Rec>(&path, &Acceptance::default()).unwrap_err();
        assert!(error.to_string().contains("schema version 99"), "{error}");
    }

    #[test]
    fn a_malformed_complete_line_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"v\":1,\"type\":\"a\",\"n\":1}\nnot json\n").unwrap();
        let error = read_log::<Rec>(&path, &Acceptance::default()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
    }
}
