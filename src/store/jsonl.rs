//! Append-only JSON Lines files: the writer appends whole lines and fsyncs before it returns;
//! the reader tolerates a torn tail (a crash in the middle of an append) and reports it.
//!
//! A torn tail is what follows the last line that is JSON, when that is more than whitespace:
//! a last line without its newline, and also lines that end in a newline but are not JSON (a
//! run of NUL bytes, or the end of a line whose beginning never reached the disk: after a power
//! cut, pages of an append that was never acknowledged persist in any order). A line the
//! service wrote whole is always JSON, so such lines were never acknowledged. A line that is
//! JSON is never part of a torn tail: one that is not a record (or has a newer schema version)
//! is an error, and so is a line that is not JSON with a JSON line after it (damage in the
//! middle, which `Store::repair_conversation` moves aside on request).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use std::sync::Arc;

use super::disk::sync_dir;
use super::error::StoreError;
use super::fence::{Acceptance, FenceError, Stamp, Verdict, WriteFence};
use super::records::{Envelope, SCHEMA_VERSION, VersionOnly};

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
    /// Without a fence: the epoch stamped on every line (no commit, so no acceptance is
    /// needed), for a writer that writes a cluster's files while no instance runs.
    epoch: Option<u64>,
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
            epoch: None,
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

    /// Stamps every line with `epoch` alone (`reindex --database-url`, every instance
    /// stopped): readers then take its lines as newer than any of an earlier epoch.
    pub fn stamp_epoch(&mut self, epoch: u64) {
        self.epoch = Some(epoch);
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
            super::disk::wait_for(|| {
                file.write_all(bytes)?;
                let started = std::time::Instant::now();
                let synced = file.sync_data();
                crate::telemetry::metrics::fsync(started.elapsed());
                synced
            })
        };
        let Some(fence) = self.fence.clone() else {
            let buffer = encode_lines(records, self.epoch.map(Stamp::epoch_only))?;
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

    /// A crash can leave a torn tail (see the module's comment). New lines must not follow it
    /// (they would turn it into damage in the middle), so it is cut off before the first
    /// append; the reader skips it anyway. Its bytes are first kept aside, durably, beside the
    /// file (`keep_aside`): what is cut can still be looked at.
    fn cut_torn_tail(&mut self) -> Result<(), StoreError> {
        if self.len == 0 {
            return Ok(());
        }
        let content = std::fs::read(&self.path).map_err(|e| StoreError::io(&self.path, e))?;
        let keep = torn_start(&content);
        if keep < content.len() {
            let aside = keep_aside(&self.path, &content[keep..])?;
            tracing::warn!(path = %self.path.display(), cut = content.len() - keep, aside = %aside.display(), "cutting a torn tail; its bytes are kept aside");
            self.file
                .set_len(keep as u64)
                .and_then(|()| self.file.sync_data())
                .map_err(|e| StoreError::io(&self.path, e))?;
        }
        self.len = keep as u64;
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

/// Where the torn tail of a JSONL file's content starts (see the module's comment): the end of
/// the last line that is JSON, or `content.len()` when nothing is torn. Only the lines after
/// that one are looked at, so a file that ends well costs one more parse of its last line.
pub fn torn_start(content: &[u8]) -> usize {
    let complete = memchr::memrchr(b'\n', content).map_or(0, |at| at + 1);
    let mut start = complete;
    while start > 0 {
        let line_start = memchr::memrchr(b'\n', &content[..start - 1]).map_or(0, |at| at + 1);
        if serde_json::from_slice::<serde::de::IgnoredAny>(&content[line_start..start - 1]).is_ok()
        {
            break;
        }
        start = line_start;
    }
    // Blank lines are no damage: the reader skips them, and nothing needs to be cut.
    if content[start..complete].iter().all(u8::is_ascii_whitespace) {
        complete
    } else {
        start
    }
}

/// Writes `bytes` cut from the file at `path` to a new file beside it,
/// `<name>.torn-<unix time>` (`-<n>` added if that exists), and fsyncs it and the directory:
/// bytes are only ever cut from a log once they are kept here. Returns the new file's path.
pub fn keep_aside(path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    for attempt in 0u32.. {
        let aside = match attempt {
            0 => path.with_file_name(format!("{name}.torn-{seconds}")),
            n => path.with_file_name(format!("{name}.torn-{seconds}-{n}")),
        };
        match write_bytes(&aside, bytes) {
            Ok(_) => {
                sync_dir(aside.parent().unwrap_or(Path::new(".")))?;
                return Ok(aside);
            }
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
            }
            Err(error) => return Err(error),
        }
    }
    unreachable!("a free name is found before the counter runs out")
}

/// A line before the torn tail that is not a valid record: it cannot be cut as torn (it is
/// JSON, or a JSON line follows it), nor skipped silently.
#[derive(Debug, Clone, PartialEq)]
pub struct DamagedLine {
    /// From 1.
    pub line: usize,
    pub message: String,
}

/// The lines of a JSONL file that could be read, and what had to be skipped.
#[derive(Debug)]
pub struct ReadLog<R> {
    pub records: Vec<R>,
    /// Bytes read: up to the torn tail, or the whole file.
    pub len: u64,
    /// The bytes of a torn tail (see the module's comment), left by a crash during an append:
    /// skipped.
    pub torn_tail: Option<usize>,
    /// Lines that are not valid records, before the torn tail: only `parse_log_salvaging`
    /// returns a log with any (skipped); for everyone else they are an error.
    pub damaged: Vec<DamagedLine>,
    /// The largest lease epoch on a line (cluster mode; 0 when none is stamped).
    pub epoch: u64,
    /// Lines of a writer whose lease had ended (a stale writer): their commit was never
    /// accepted, or (when nothing is known of their epoch) their epoch is older than a line
    /// before them. Skipped.
    pub stale_lines: usize,
}

/// Reads every record of a JSONL file. A torn tail is skipped and reported in `torn_tail`; a
/// line that is not a valid record before it (damage in the middle) or a newer schema version
/// is an error, because skipping it could silently drop an acknowledged change. `acceptance`:
/// which stamped lines count (cluster mode; `Acceptance::default()` otherwise).
pub fn read_log<R: DeserializeOwned>(
    path: &Path,
    acceptance: &Acceptance,
) -> Result<ReadLog<R>, StoreError> {
    parse_log(path, &read_content(path)?, acceptance)
}

/// `read_log` that skips damaged lines and reports them (see `parse_log_salvaging`).
pub fn read_log_salvaging<R: DeserializeOwned>(
    path: &Path,
    acceptance: &Acceptance,
) -> Result<ReadLog<R>, StoreError> {
    parse_log_salvaging(path, &read_content(path)?, acceptance)
}

/// A file's bytes; a file that does not exist is empty.
fn read_content(path: &Path) -> Result<Vec<u8>, StoreError> {
    match std::fs::read(path) {
        Ok(content) => Ok(content),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

pub fn parse_log<R: DeserializeOwned>(
    path: &Path,
    content: &[u8],
    acceptance: &Acceptance,
) -> Result<ReadLog<R>, StoreError> {
    let log = parse_log_salvaging(path, content, acceptance)?;
    if let Some(damaged) = log.damaged.first() {
        return Err(StoreError::Malformed {
            path: path.to_owned(),
            line: damaged.line,
            message: damaged.message.clone(),
        });
    }
    Ok(log)
}

/// Like `parse_log`, but a line that is not a valid record before the torn tail is skipped and
/// reported in `damaged` instead of failing the read: for the index, which lists what can be
/// read of a damaged conversation (opening it still fails until it is repaired). A newer
/// schema version is still an error: that file is not damaged, this build is too old for it.
pub fn parse_log_salvaging<R: DeserializeOwned>(
    path: &Path,
    content: &[u8],
    acceptance: &Acceptance,
) -> Result<ReadLog<R>, StoreError> {
    let intact = torn_start(content);
    let torn_tail = (intact < content.len()).then(|| content.len() - intact);
    if let Some(bytes) = torn_tail {
        tracing::warn!(path = %path.display(), bytes, "skipping a torn tail");
    }
    let mut records = Vec::new();
    let mut damaged = Vec::new();
    let mut filter = StaleFilter::new(acceptance);
    for (index, line) in content[..intact].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line::<R>(path, line)? {
            Ok(envelope) => {
                if !filter.keeps(envelope.epoch, envelope.commit) {
                    tracing::warn!(path = %path.display(), line = index + 1, epoch = envelope.epoch, "skipping a line of a stale writer");
                    continue;
                }
                records.push(envelope.record);
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), line = index + 1, %error, "a damaged line");
                damaged.push(DamagedLine {
                    line: index + 1,
                    message: error.to_string(),
                });
            }
        }
    }
    let (epoch, stale_lines) = (filter.epoch, filter.stale_lines);
    Ok(ReadLog {
        records,
        len: intact as u64,
        torn_tail,
        damaged,
        epoch,
        stale_lines,
    })
}

/// One line as a record (`Ok(Ok)`), or why it is not one (`Ok(Err)`: damaged). A line of a
/// newer schema version is an error of its own: it is no damage, this build is too old for it.
pub(super) fn parse_line<R: DeserializeOwned>(
    path: &Path,
    line: &[u8],
) -> Result<Result<Envelope<R>, serde_json::Error>, StoreError> {
    match serde_json::from_slice::<Envelope<R>>(line) {
        Ok(envelope) if envelope.v <= SCHEMA_VERSION => Ok(Ok(envelope)),
        Ok(envelope) => Err(StoreError::unknown_version(path, envelope.v)),
        Err(error) => match serde_json::from_slice::<VersionOnly>(line) {
            Ok(VersionOnly { v }) if v > SCHEMA_VERSION => {
                Err(StoreError::unknown_version(path, v))
            }
            _ => Ok(Err(error)),
        },
    }
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
    fn a_last_line_that_is_json_but_no_record_is_an_error_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        // Whole JSON is never what a torn write leaves: something wrote this line whole.
        let content = "{\"v\":1,\"type\":\"a\",\"n\":1}\n{\"v\":1,\"type\":\"b\"}\n";
        std::fs::write(&path, content).unwrap();
        let error = read_log::<Rec>(&path, &Acceptance::default()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
        JsonlWriter::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
    }

    /// The lines of `log.jsonl` and the files kept aside beside it, after a writer opened it.
    fn after_open(dir: &Path, content: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
        let path = dir.join("log.jsonl");
        std::fs::write(&path, content).unwrap();
        JsonlWriter::open(&path).unwrap();
        let mut aside = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap().path();
            if entry.to_string_lossy().contains("log.jsonl.torn-") {
                aside.push(std::fs::read(&entry).unwrap());
                std::fs::remove_file(entry).unwrap();
            }
        }
        (std::fs::read(&path).unwrap(), aside)
    }

    #[test]
    fn every_shape_of_torn_tail_is_skipped_then_kept_aside_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let good = encode_lines(&[Rec::A { n: 1 }, Rec::A { n: 2 }], None).unwrap();
        let shapes: [&[u8]; 7] = [
            // Without its newline (a crash in the middle of a write).
            b"{\"v\":1,\"type\":\"a\",\"n\":",
            // A run of NUL bytes, then a newline: a page of the append never reached the disk,
            // the size of the file did.
            b"\0\0\0\0\0\0\0\0\0\0\n",
            // The end of a line whose beginning never reached the disk.
            b"\0\0\0\0\0\0\"type\":\"a\",\"n\":3}\n",
            // Other junk.
            b"}ff\xfe 3}\n",
            // Whitespace and NUL bytes.
            b" \t\0\0 \n",
            // Several such lines after the last good one: one torn tail.
            b"\0\0\0\n\n{\"v\":1,\"ty\0\0\n\0\0",
            // Junk, then a blank line.
            b"\0\0\n\n",
        ];
        for torn in shapes {
            let content = [good.as_slice(), torn].concat();
            let log = parse_log::<Rec>(&path, &content, &Acceptance::default()).unwrap();
            assert_eq!(log.records, [Rec::A { n: 1 }, Rec::A { n: 2 }], "{torn:?}");
            assert_eq!(log.torn_tail, Some(torn.len()), "{torn:?}");
            assert_eq!(log.len, good.len() as u64, "{torn:?}");

            let (left, aside) = after_open(dir.path(), &content);
            assert_eq!(left, good, "{torn:?}");
            assert_eq!(aside, [torn.to_vec()], "{torn:?}");
        }
        // The next append follows the last good line.
        std::fs::write(&path, [good.as_slice(), b"\0\0\0\n"].concat()).unwrap();
        JsonlWriter::open(&path)
            .unwrap()
            .append(&[Rec::A { n: 3 }])
            .unwrap();
        let log = read_log::<Rec>(&path, &Acceptance::default()).unwrap();
        assert_eq!(log.records.len(), 3);
        assert_eq!((log.torn_tail, log.damaged.len()), (None, 0));

        // Blank lines at the end are no damage: nothing is cut or kept.
        let blank = [good.as_slice(), b"\n  \n"].concat();
        let fresh = tempfile::tempdir().unwrap();
        assert_eq!(
            after_open(fresh.path(), &blank),
            (blank.clone(), Vec::new())
        );
    }

    #[test]
    fn a_damaged_line_before_a_record_is_an_error_and_nothing_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let line = |n: u32| encode_lines(&[Rec::A { n }], None).unwrap();
        for damaged in [
            &b"\0\0\0\0\n"[..],
            b"not json\n",
            b"{\"v\":1,\"type\":\"a\"}\n",
        ] {
            let content = [line(1), damaged.to_vec(), line(2), b"\0\0\n".to_vec()].concat();
            let error = parse_log::<Rec>(&path, &content, &Acceptance::default()).unwrap_err();
            assert!(
                matches!(error, StoreError::Malformed { line: 2, .. }),
                "{damaged:?}: {error}"
            );
            // For the index: the records around it, and where it is.
            let log = parse_log_salvaging::<Rec>(&path, &content, &Acceptance::default()).unwrap();
            assert_eq!(log.records, [Rec::A { n: 1 }, Rec::A { n: 2 }]);
            assert_eq!(log.damaged.iter().map(|d| d.line).collect::<Vec<_>>(), [2]);
            assert_eq!(log.torn_tail, Some(3));
            // The writer cuts the torn tail after the last record, never what is before it.
            let (left, aside) = after_open(dir.path(), &content);
            assert_eq!(left, &content[..content.len() - 3], "{damaged:?}");
            assert_eq!(aside, [b"\0\0\n".to_vec()]);
        }
    }
}
