//! `Outbox`: the deliveries in memory (`Book`) and their file, changed together under one
//! lock, and the wake-up of the task that sends them (`sender.rs`).

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};

use super::backoff::Backoff;
use super::book::{Book, Bound};
use super::delivery::{Change, Delivery, Line, State, Status};
use super::file::OutboxFile;
use crate::store::disk::wait_for;

/// The folder of the outboxes in the data directory.
const FOLDER: &str = "webhooks";

/// The outbox's file: `<data>/webhooks/outbox.jsonl`, or in cluster mode, where instances
/// share the data directory, `<data>/webhooks/instance-<id>.jsonl`, one per instance.
pub fn outbox_path(data_dir: &Path, instance: Option<&str>) -> PathBuf {
    let folder = data_dir.join(FOLDER);
    match instance {
        None => folder.join("outbox.jsonl"),
        Some(instance) => folder.join(format!("instance-{instance}.jsonl")),
    }
}

/// Cluster mode: every instance's outbox file in the data directory, with its instance.
pub fn instance_outboxes(data_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(data_dir.join(FOLDER)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            let instance = name.strip_prefix("instance-")?.strip_suffix(".jsonl")?;
            Some((instance.to_owned(), entry.path()))
        })
        .collect()
}

/// The file is compacted once it is past this size and holds mostly lines of past changes.
const COMPACT_AT_BYTES: u64 = 1024 * 1024;

/// The deliveries of notification webhooks not yet given up, and the recent ones that ended.
#[derive(Debug)]
pub struct Outbox {
    inner: Mutex<Inner>,
    /// Woken when a delivery is queued or settled, or the outbox closes.
    wake: tokio::sync::Notify,
    closed: AtomicBool,
    backoff: Backoff,
    bound: Bound,
    compact_at: u64,
}

#[derive(Debug)]
struct Inner {
    book: Book,
    /// `None`: kept in memory only (a runtime built without a data directory's outbox).
    file: Option<OutboxFile>,
    /// Deliveries being tried now.
    busy: HashSet<String>,
}

impl Outbox {
    /// Opens the outbox file at `path` (`outbox_path`; the schedule of retries from the
    /// environment, see `backoff.rs`), reads back what a previous run left and compacts it.
    pub fn open(path: &Path) -> Result<Outbox, String> {
        let backoff = Backoff::from_env()?;
        Outbox::open_with(path, backoff, Bound::default(), COMPACT_AT_BYTES)
            .map_err(|error| format!("cannot open {}: {error}", path.display()))
    }

    /// Takes over the deliveries another outbox file (a stopped cluster instance's) left
    /// pending: queued here, written and fsynced, with their ids and tries, then that file
    /// is removed. A crash in between sends them from both files' takers, with the same ids.
    /// Returns how many were taken.
    pub fn adopt(&self, path: &Path) -> io::Result<usize> {
        let mut theirs = Book::default();
        {
            let (_, read) = OutboxFile::open(path)?;
            for line in read.lines {
                theirs.apply(line);
            }
        }
        let now = Utc::now();
        let pending: Vec<Delivery> = theirs
            .iter()
            .filter(|delivery| delivery.state.status == Status::Pending)
            .map(|delivery| {
                let mut delivery = delivery.clone();
                delivery.state.next_attempt_at = Some(now);
                delivery
            })
            .collect();
        let taken = pending.len();
        self.queue(pending)?;
        std::fs::remove_file(path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(taken)
    }

    /// An outbox that keeps nothing across a restart: for a runtime without a data directory's
    /// (tests of the runtime alone).
    pub fn in_memory() -> Outbox {
        Outbox::new(
            Book::default(),
            None,
            Backoff::default(),
            Bound::default(),
            u64::MAX,
        )
    }

    fn new(
        book: Book,
        file: Option<OutboxFile>,
        backoff: Backoff,
        bound: Bound,
        compact_at: u64,
    ) -> Outbox {
        Outbox {
            inner: Mutex::new(Inner {
                book,
                file,
                busy: HashSet::new(),
            }),
            wake: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
            backoff,
            bound,
            compact_at,
        }
    }

    /// The file at `path` read back: a torn tail skipped, the bound applied, every pending
    /// delivery due now; and the file compacted unless it holds exactly what is kept.
    fn open_with(
        path: &Path,
        backoff: Backoff,
        bound: Bound,
        compact_at: u64,
    ) -> io::Result<Outbox> {
        let (mut file, read) = OutboxFile::open(path)?;
        let lines = read.lines.len();
        let only_queued = read
            .lines
            .iter()
            .all(|line| matches!(line, Line::Queued(_)));
        let mut book = Book::default();
        for line in read.lines {
            book.apply(line);
        }
        let over: Vec<String> = book
            .over_bound(&[], bound)
            .into_iter()
            .map(|delivery| delivery.id.clone())
            .collect();
        for id in over {
            log_drop(book.get(&id));
            book.apply(Line::Dropped { id });
        }
        let clean = read.torn_bytes == 0 && read.damaged == 0 && only_queued;
        if !clean || lines != book.len() {
            file.rewrite(book.iter())?;
        }
        book.due_by(Utc::now());
        let pending = book
            .iter()
            .filter(|delivery| delivery.state.status == Status::Pending)
            .count();
        if pending > 0 {
            tracing::info!(pending, "webhook deliveries resume");
        }
        Ok(Outbox::new(book, Some(file), backoff, bound, compact_at))
    }

    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Queues `new` deliveries: written and fsynced before it returns, then sent by the
    /// delivery task. Past the bound the oldest ended deliveries make room (a pending one
    /// only when nothing else is left, and logged). `Err`: nothing was queued.
    pub fn queue(&self, new: Vec<Delivery>) -> io::Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        // The lock is waited for off the runtime's worker too: a queue or a settle of another
        // task may hold it through its fsync.
        wait_for(|| {
            let mut inner = self.inner.lock().expect("outbox lock");
            let victims: Vec<&Delivery> = inner.book.over_bound(&new, self.bound);
            for victim in &victims {
                log_drop(Some(victim));
            }
            let mut lines: Vec<Line> = victims
                .into_iter()
                .map(|victim| Line::Dropped {
                    id: victim.id.clone(),
                })
                .collect();
            lines.extend(new.into_iter().map(Line::Queued));
            if let Some(file) = &mut inner.file {
                file.append(&lines)?;
            }
            for line in lines {
                inner.book.apply(line);
            }
            self.compact_if_grown(&mut inner);
            io::Result::Ok(())
        })?;
        self.wake.notify_one();
        Ok(())
    }

    /// Up to `most` pending deliveries due now, each marked as being tried until it is
    /// `settle`d; and when the next one not being tried is due (`None`: nothing to wait for
    /// but a wake-up).
    pub(super) fn take_due(&self, most: usize) -> (Vec<Delivery>, Option<DateTime<Utc>>) {
        let mut inner = self.inner.lock().expect("outbox lock");
        let room = most.saturating_sub(inner.busy.len());
        let due = inner.book.due(Utc::now(), &inner.busy, room);
        for delivery in &due {
            inner.busy.insert(delivery.id.clone());
        }
        let next = if inner.busy.len() >= most {
            None
        } else {
            inner.book.next_due(&inner.busy)
        };
        (due, next)
    }

    /// Records a delivery's state after a try (appended as a small line and fsynced). A
    /// delivery dropped meanwhile stays dropped. The state counts in memory even when it
    /// cannot be written: a delivered one is not sent again while this process runs.
    pub(super) fn settle(&self, id: &str, state: State) -> io::Result<()> {
        let written = wait_for(|| {
            let mut inner = self.inner.lock().expect("outbox lock");
            inner.busy.remove(id);
            if inner.book.get(id).is_none() {
                return Ok(());
            }
            let line = Line::Changed(Change {
                id: id.to_owned(),
                state,
            });
            let written = match &mut inner.file {
                Some(file) => file.append(std::slice::from_ref(&line)),
                None => Ok(()),
            };
            inner.book.apply(line);
            self.compact_if_grown(&mut inner);
            written
        });
        self.wake.notify_one();
        written
    }

    /// Rewrites the file once it is large and holds more than twice what it describes, most of
    /// it lines of past changes. A failure leaves the file as it was (still valid): logged.
    fn compact_if_grown(&self, inner: &mut Inner) {
        let Inner { book, file, .. } = inner;
        let Some(file) = file else { return };
        // A generous guess at the bytes of one line per delivery (JSON escapes the bodies).
        let described = 2 * book.body_bytes() as u64 + 512 * book.len() as u64;
        if file.len() < self.compact_at || file.len() < 2 * described {
            return;
        }
        if let Err(error) = file.rewrite(book.iter()) {
            tracing::error!(%error, "cannot compact the webhook outbox; it keeps growing until it can");
        }
    }

    /// The deliveries kept, newest first: of `status` if given, at most `limit`.
    pub fn list(&self, status: Option<Status>, limit: usize) -> Vec<Delivery> {
        let inner = self.inner.lock().expect("outbox lock");
        inner.book.newest_first(status, limit)
    }

    /// Stops the delivery task (deliveries not sent stay pending in the file).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Waits until woken, or until `until` when given.
    pub(super) async fn wait(&self, until: Option<DateTime<Utc>>) {
        let woken = self.wake.notified();
        match until {
            None => woken.await,
            Some(at) => {
                let wait = (at - Utc::now()).to_std().unwrap_or_default();
                tokio::select! {
                    () = woken => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

fn log_drop(delivery: Option<&Delivery>) {
    if let Some(delivery) = delivery
        && delivery.state.status == Status::Pending
    {
        tracing::warn!(id = %delivery.id, hook = %delivery.hook, "the webhook outbox is full: dropping a delivery not sent yet");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(n: usize) -> Delivery {
        Delivery::new(
            format!("hooks.turn_ended[{n}]"),
            "http://127.0.0.1:9/hook",
            "turn_ended",
            "c_1",
            &format!(r#"{{"event":"turn_ended","n":{n}}}"#),
        )
    }

    fn tried(status: Status, attempts: u32) -> State {
        let now = Utc::now();
        State {
            status,
            attempts,
            last_attempt_at: Some(now),
            next_attempt_at: (status == Status::Pending)
                .then(|| now + chrono::Duration::minutes(5)),
            last_error: (status != Status::Delivered).then(|| "503".to_owned()),
        }
    }

    fn open(path: &Path, bound: Bound, compact_at: u64) -> Outbox {
        Outbox::open_with(path, Backoff::default(), bound, compact_at).unwrap()
    }

    fn ids(outbox: &Outbox) -> Vec<String> {
        let mut ids: Vec<String> = outbox
            .list(None, usize::MAX)
            .into_iter()
            .map(|d| d.id)
            .collect();
        ids.reverse();
        ids
    }

    #[test]
    fn a_torn_last_line_is_skipped_kept_aside_and_the_rest_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let path = outbox_path(dir.path(), None);
        let (first, second) = (delivery(0), delivery(1));
        {
            let outbox = open(&path, Bound::default(), u64::MAX);
            outbox.queue(vec![first.clone(), second.clone()]).unwrap();
            outbox
                .settle(&first.id, tried(Status::Delivered, 1))
                .unwrap();
            outbox
                .settle(&second.id, tried(Status::Pending, 2))
                .unwrap();
        }
        // A crash in the middle of the next append.
        let mut content = std::fs::read(&path).unwrap();
        content.extend_from_slice(br#"{"queued":{"id":"msg_torn","hook":"#);
        std::fs::write(&path, &content).unwrap();

        let outbox = open(&path, Bound::default(), u64::MAX);
        assert_eq!(ids(&outbox), [first.id.clone(), second.id.clone()]);
        let listed = outbox.list(None, 10);
        assert_eq!(listed[1].state.status, Status::Delivered);
        let pending = &listed[0];
        assert_eq!(
            (pending.state.status, pending.state.attempts),
            (Status::Pending, 2)
        );
        assert_eq!(pending.body, second.body);
        assert!(
            pending.state.next_attempt_at.unwrap() <= Utc::now(),
            "a pending delivery is due at once after a restart"
        );
        let aside: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("outbox.jsonl.torn-"))
            .collect();
        assert_eq!(aside.len(), 1, "the torn bytes are kept aside");
        // The file is whole again: what is queued next reads back after it.
        let third = delivery(2);
        outbox.queue(vec![third.clone()]).unwrap();
        drop(outbox);
        let outbox = open(&path, Bound::default(), u64::MAX);
        assert_eq!(ids(&outbox), [first.id, second.id, third.id]);
    }

    #[test]
    fn compaction_keeps_every_delivery_as_it_stands() {
        let dir = tempfile::tempdir().unwrap();
        let path = outbox_path(dir.path(), None);
        let outbox = open(&path, Bound::default(), 0);
        let deliveries: Vec<Delivery> = (0..3).map(delivery).collect();
        outbox.queue(deliveries.clone()).unwrap();
        outbox
            .settle(&deliveries[0].id, tried(Status::Delivered, 1))
            .unwrap();
        for attempt in 1..=40 {
            outbox
                .settle(&deliveries[1].id, tried(Status::Pending, attempt))
                .unwrap();
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(
            lines < 40,
            "the changes' lines were compacted away: {lines} lines"
        );
        let before = outbox.list(None, 10);
        drop(outbox);
        let outbox = open(&path, Bound::default(), 0);
        let after = outbox.list(None, 10);
        assert_eq!(after.len(), 3);
        for (before, after) in before.iter().zip(&after) {
            assert_eq!(before.id, after.id);
            assert_eq!(before.body, after.body);
            assert_eq!(before.state.status, after.state.status);
            assert_eq!(before.state.attempts, after.state.attempts);
        }
        assert_eq!(after[1].state.attempts, 40, "{after:?}");
        assert_eq!(after[1].state.status, Status::Pending);
        // At start the file holds exactly one line per delivery.
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines, 3);
    }

    #[test]
    fn the_bound_lets_ended_deliveries_go_first_and_holds_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = outbox_path(dir.path(), None);
        let bound = Bound {
            deliveries: 3,
            body_bytes: usize::MAX,
        };
        let outbox = open(&path, bound, u64::MAX);
        let deliveries: Vec<Delivery> = (0..6).map(delivery).collect();
        outbox.queue(deliveries[..3].to_vec()).unwrap();
        outbox
            .settle(&deliveries[1].id, tried(Status::Delivered, 1))
            .unwrap();
        outbox.queue(vec![deliveries[3].clone()]).unwrap();
        let kept = |ns: &[usize]| -> Vec<String> {
            ns.iter().map(|&n| deliveries[n].id.clone()).collect()
        };
        assert_eq!(ids(&outbox), kept(&[0, 2, 3]), "the delivered one went");
        // Only pending ones left: the oldest goes.
        outbox.queue(vec![deliveries[4].clone()]).unwrap();
        assert_eq!(ids(&outbox), kept(&[2, 3, 4]));
        drop(outbox);
        let outbox = open(&path, bound, u64::MAX);
        assert_eq!(ids(&outbox), kept(&[2, 3, 4]), "the drops were written");
        // A smaller bound at start applies at once.
        drop(outbox);
        let smaller = Bound {
            deliveries: 2,
            ..bound
        };
        let outbox = open(&path, smaller, u64::MAX);
        assert_eq!(ids(&outbox), kept(&[3, 4]));
    }

    #[test]
    fn a_stopped_instances_pending_deliveries_are_taken_over_with_their_ids() {
        let dir = tempfile::tempdir().unwrap();
        let theirs_path = outbox_path(dir.path(), Some("i_dead"));
        let (pending, delivered) = (delivery(0), delivery(1));
        {
            let theirs = open(&theirs_path, Bound::default(), u64::MAX);
            theirs
                .queue(vec![pending.clone(), delivered.clone()])
                .unwrap();
            theirs
                .settle(&pending.id, tried(Status::Pending, 1))
                .unwrap();
            theirs
                .settle(&delivered.id, tried(Status::Delivered, 1))
                .unwrap();
        }
        let ours_path = outbox_path(dir.path(), Some("i_live"));
        let ours = open(&ours_path, Bound::default(), u64::MAX);
        let found = instance_outboxes(dir.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(ours.adopt(&theirs_path).unwrap(), 1);
        assert!(!theirs_path.exists());
        let listed = ours.list(None, 10);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, pending.id);
        assert_eq!(listed[0].state.attempts, 1);
        drop(ours);
        let ours = open(&ours_path, Bound::default(), u64::MAX);
        assert_eq!(ids(&ours), [pending.id]);
    }
}
