//! Conversation leases (invariant 2, one writer per conversation, across machines): an
//! instance may write a conversation's files only while it holds that conversation's lease in
//! PostgreSQL. Leases expire by the database's clock; the owner renews all of its leases
//! together in the background and stops writing before a lease can have expired
//! (`Fence::holds`). Each new owner gets a larger epoch.
//!
//! Safety does not rest on timing: every append is stamped `(epoch, commit)` and counts only
//! once `Fence::commit` has moved `leases.commits` to it by a statement conditional on the
//! epoch (`UPDATE … WHERE epoch = $mine`). A claim closes the old epoch at its last accepted
//! commit in the same transaction (`claim_lease`, in the migrations), so after it no write of
//! the old owner can ever count, however long that owner was paused or however the database's
//! clock stepped; readers skip lines beyond their epoch's last commit (`store::fence`).
//!
//! The timing argument below only keeps a live owner from being refused:
//! - A claim or renewal sets `expires_at = now() + ttl` by the database's clock, at some moment
//!   after the request was sent. So the database keeps the lease at least until
//!   `sent + ttl`, measured on the database's clock.
//! - The owner, on its own monotonic clock, treats the lease as held until
//!   `sent + ttl - margin`, where `sent` is read before the request goes out. With clock rates
//!   that differ by less than `margin / ttl` (a few percent here; real clocks differ by parts
//!   per million), the owner's deadline comes before the database's expiry.
//! - Another instance takes a conversation only when the database says its lease expired.
//!   So at no moment may two instances write: the old owner stopped at its deadline, before
//!   the expiry that lets the new one in.
//! - A renewal that fails (the database is down, the lease was taken) leaves the deadline
//!   where it was: the owner stops writing then. Renewals run every `ttl / 4`, so three can
//!   fail before an owner that is merely slow loses anything.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use sqlx::{PgPool, Row};

use crate::store::{Acceptance, FenceError};

/// The process's clock origin, for deadlines held in atomics.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ns() -> u64 {
    ORIGIN.elapsed().as_nanos() as u64
}

/// What an instance knows of its leases, and how it claims and renews them.
#[derive(Clone)]
pub struct Leases {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    instance: String,
    ttl: Duration,
    margin: Duration,
    held: Mutex<HashMap<String, Fence>>,
    /// Conversations whose lease this instance lost (not gave up): it writes no index rows
    /// and sends no list events for them until it takes one again.
    forfeited: Mutex<HashSet<String>>,
    /// Where a fence that learns it lost its lease says so at once (see `lost_now`).
    lost_sender: tokio::sync::mpsc::UnboundedSender<String>,
    lost_receiver: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

/// The right to write one conversation: its epoch, until when (on this instance's clock) the
/// lease is known to hold, and the commits PostgreSQL has accepted under it. Cheap to clone;
/// the renewal task moves the deadline.
#[derive(Debug, Clone)]
pub struct Fence {
    pub epoch: u64,
    deadline_ns: Arc<AtomicU64>,
    conversation_id: Arc<str>,
    /// The last commit number handed out, and the last one PostgreSQL accepted.
    issued: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    /// The conversation's closed epochs, each with its last accepted commit (from the claim).
    closed: Arc<HashMap<u64, u64>>,
    pool: PgPool,
    /// How long a commit may wait for the database before its outcome counts as unknown.
    patience: Duration,
    lost_sender: tokio::sync::mpsc::UnboundedSender<String>,
}

impl Fence {
    /// Whether the lease still holds: writing is allowed.
    pub fn holds(&self) -> bool {
        now_ns() < self.deadline_ns.load(Ordering::Acquire)
    }

    fn extend_to(&self, deadline: Instant) {
        let ns = deadline.saturating_duration_since(*ORIGIN).as_nanos() as u64;
        self.deadline_ns.fetch_max(ns, Ordering::AcqRel);
    }

    fn revoke(&self) {
        self.deadline_ns.store(0, Ordering::Release);
    }

    /// Runs one conditional statement (`$1` the conversation, `$2` the epoch, `$3` the
    /// commit if there is one) and tells whether it touched the row.
    ///
    /// A statement whose answer was lost (a connection broken by a restart of PostgreSQL, no
    /// answer in time) is settled before anyone is told: the row is read back on a new
    /// connection, and the statement sent again while it did not apply, within the fence's
    /// patience. Both statements are idempotent (`commits < $3`, `NOT deleted`), so a restart
    /// shorter than the lease cuts no turn, and a delete that happened is never answered as
    /// failed. Only an outcome still unknown at the end, or a lost lease, revokes the fence:
    /// the owner's memory may no longer match what counts, so its actor must stop and whoever
    /// loads the conversation next reads the truth.
    fn conditional(&self, statement: &'static str, commit: Option<u64>) -> Result<(), FenceError> {
        let result = self.settled(statement, commit);
        if result.is_err() {
            self.revoke();
            let _ = self.lost_sender.send(self.conversation_id.to_string());
        }
        result
    }

    fn settled(&self, statement: &'static str, commit: Option<u64>) -> Result<(), FenceError> {
        let give_up = Instant::now() + self.patience;
        let attempt_time =
            |now: Instant| give_up.saturating_duration_since(now).min(ATTEMPT_TIMEOUT);
        let mut uncertain: Option<String> = None;
        loop {
            let mut query = sqlx::query(statement)
                .bind(&*self.conversation_id)
                .bind(self.epoch as i64);
            if let Some(commit) = commit {
                query = query.bind(commit as i64);
            }
            let query = query.execute(&self.pool);
            let outcome = block_on(tokio::time::timeout(attempt_time(Instant::now()), query));
            match outcome {
                Ok(Ok(Ok(done))) if done.rows_affected() == 1 => return Ok(()),
                // Refused at the first try: another epoch owns the row (or it was deleted).
                Ok(Ok(Ok(_))) if uncertain.is_none() => return Err(FenceError::Lost),
                // Refused after a try whose answer was lost: that try may be why.
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err(error))) => uncertain = Some(error.to_string()),
                Ok(Err(_elapsed)) => uncertain = Some("no answer in time".to_owned()),
                Err(reason) => return Err(FenceError::Unknown(reason)),
            }
            match self.read_back(commit, attempt_time(Instant::now())) {
                Some(Applied::Yes) => return Ok(()),
                Some(Applied::Lost) => return Err(FenceError::Lost),
                // Not applied, or the row could not be read: sent again while time remains.
                Some(Applied::No) | None => {}
            }
            if Instant::now() + RETRY_PAUSE >= give_up {
                let reason = uncertain.unwrap_or_else(|| "no answer in time".to_owned());
                return Err(FenceError::Unknown(reason));
            }
            std::thread::sleep(RETRY_PAUSE);
        }
    }

    /// Whether the statement for `commit` (or the delete, for `None`) took effect, as the row
    /// says now; `None` when the database does not answer.
    fn read_back(&self, commit: Option<u64>, wait: Duration) -> Option<Applied> {
        let read = sqlx::query_as::<_, (i64, i64, bool)>(
            "SELECT epoch, commits, deleted FROM leases WHERE conversation_id = $1",
        )
        .bind(&*self.conversation_id)
        .fetch_optional(&self.pool);
        let row = match block_on(tokio::time::timeout(wait, read)) {
            Ok(Ok(Ok(row))) => row,
            _ => return None,
        };
        let Some((epoch, commits, deleted)) = row else {
            return Some(Applied::Lost);
        };
        if epoch != self.epoch as i64 {
            return Some(Applied::Lost);
        }
        Some(match commit {
            // Commits of an epoch are only ever this owner's, in order.
            Some(_) if deleted => Applied::Lost,
            Some(commit) if commits >= commit as i64 => Applied::Yes,
            Some(_) => Applied::No,
            None if deleted => Applied::Yes,
            None => Applied::No,
        })
    }
}

/// What reading a lease's row back says of a statement whose answer was lost.
enum Applied {
    Yes,
    No,
    /// Another epoch owns the row, or it is gone.
    Lost,
}

/// How long one try of a fenced statement may wait for its answer; a try that gets none is
/// read back and sent again, within the fence's patience.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause between tries of a fenced statement whose outcome is not known yet.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Runs a future to completion from synchronous code (the store's appends are synchronous):
/// on a multi-threaded runtime this worker gives its other tasks away while it waits.
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, String> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| handle.block_on(future)))
        }
        Ok(_) => Err("a fenced write needs a multi-threaded runtime".to_owned()),
        Err(_) => Err("a fenced write needs a runtime".to_owned()),
    }
}

impl crate::store::WriteFence for Fence {
    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn holds(&self) -> bool {
        Fence::holds(self)
    }

    fn next_commit(&self) -> u64 {
        self.issued.fetch_add(1, Ordering::AcqRel) + 1
    }

    fn commit(&self, commit: u64) -> Result<(), FenceError> {
        self.conditional(
            "UPDATE leases SET commits = $3
             WHERE conversation_id = $1 AND epoch = $2 AND commits < $3 AND NOT deleted",
            Some(commit),
        )?;
        self.accepted.fetch_max(commit, Ordering::AcqRel);
        Ok(())
    }

    fn commit_delete(&self) -> Result<(), FenceError> {
        self.conditional(
            "UPDATE leases SET deleted = true
             WHERE conversation_id = $1 AND epoch = $2 AND NOT deleted",
            None,
        )
    }

    fn acceptance(&self) -> Acceptance {
        Acceptance::new(
            self.closed.clone(),
            Some((self.epoch, self.accepted.load(Ordering::Acquire))),
        )
    }
}

/// The outcome of a claim.
#[derive(Debug, Clone)]
pub enum Claim {
    /// This instance owns the conversation now.
    Owned(Fence),
    /// Another instance does, and answers at `addr`.
    HeldBy { owner: String, addr: String },
    /// The conversation was deleted (its files may still be on their way out).
    Deleted,
}

impl Leases {
    pub fn new(pool: PgPool, instance: String, ttl: Duration) -> Leases {
        let (lost_sender, lost_receiver) = tokio::sync::mpsc::unbounded_channel();
        Leases {
            inner: Arc::new(Inner {
                pool,
                instance,
                margin: (ttl / 10).max(Duration::from_millis(200)),
                ttl,
                held: Mutex::new(HashMap::new()),
                forfeited: Mutex::new(HashSet::new()),
                lost_sender,
                lost_receiver: Mutex::new(Some(lost_receiver)),
            }),
        }
    }

    /// The conversations whose fence learned, on a write, that its lease is gone: taken once,
    /// by the task that stops their actors without waiting for the next renewal.
    pub fn lost_now(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.inner.lost_receiver.lock().expect("leases lock").take()
    }

    /// Whether this instance lost the lease of a conversation (and has not taken it again),
    /// or holds one it can no longer vouch for: past its deadline without a renewal, or
    /// revoked by a write the database refused or could not confirm. Such an owner writes no
    /// index rows: they are whoever owns the conversation next to write.
    pub fn forfeited(&self, conversation_id: &str) -> bool {
        let lost = self
            .inner
            .forfeited
            .lock()
            .expect("leases lock")
            .contains(conversation_id);
        lost || self
            .inner
            .held
            .lock()
            .expect("leases lock")
            .get(conversation_id)
            .is_some_and(|fence| !fence.holds())
    }

    fn forfeit(&self, ids: &[String]) {
        let mut forfeited = self.inner.forfeited.lock().expect("leases lock");
        forfeited.extend(ids.iter().cloned());
    }

    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The lease of a conversation this instance holds now, if any.
    pub fn held(&self, conversation_id: &str) -> Option<Fence> {
        let held = self.inner.held.lock().expect("leases lock");
        held.get(conversation_id)
            .filter(|fence| fence.holds())
            .cloned()
    }

    /// How many conversations this instance owns now.
    pub fn owned(&self) -> usize {
        let held = self.inner.held.lock().expect("leases lock");
        held.values().filter(|fence| fence.holds()).count()
    }

    /// Claims a conversation: a lease this instance already holds, else a free or expired
    /// one (with the next epoch), else who holds it. `at_least` is the epoch the files already
    /// carry: a new owner's epoch is always above it, even after the table was rebuilt.
    pub async fn claim(&self, conversation_id: &str, at_least: u64) -> Result<Claim, sqlx::Error> {
        if let Some(fence) = self.held(conversation_id) {
            return Ok(Claim::Owned(fence));
        }
        let inner = &self.inner;
        let sent = Instant::now();
        let row = sqlx::query(
            "SELECT outcome, new_epoch, holder, closed, last_commits
             FROM claim_lease($1, $2, $3, $4)",
        )
        .bind(conversation_id)
        .bind(&inner.instance)
        .bind(at_least as i64)
        .bind(inner.ttl.as_millis() as i64)
        .fetch_one(&inner.pool)
        .await?;
        let outcome: String = row.get(0);
        match outcome.as_str() {
            "owned" => {
                let closed = crate::index::postgres::closed_epochs(row.get(3), row.get(4));
                let fence = Fence {
                    epoch: row.get::<i64, _>(1) as u64,
                    deadline_ns: Arc::new(AtomicU64::new(0)),
                    conversation_id: Arc::from(conversation_id),
                    issued: Arc::new(AtomicU64::new(0)),
                    accepted: Arc::new(AtomicU64::new(0)),
                    closed: Arc::new(closed),
                    pool: inner.pool.clone(),
                    patience: inner.ttl,
                    lost_sender: inner.lost_sender.clone(),
                };
                inner
                    .forfeited
                    .lock()
                    .expect("leases lock")
                    .remove(conversation_id);
                fence.extend_to(sent + inner.ttl - inner.margin);
                inner
                    .held
                    .lock()
                    .expect("leases lock")
                    .insert(conversation_id.to_owned(), fence.clone());
                return Ok(Claim::Owned(fence));
            }
            "deleted" => return Ok(Claim::Deleted),
            _ => {}
        }
        let owner: String = row.get(2);
        let addr = sqlx::query("SELECT addr FROM instances WHERE id = $1")
            .bind(&owner)
            .fetch_optional(&inner.pool)
            .await?;
        match addr {
            Some(addr) => Ok(Claim::HeldBy {
                owner,
                addr: addr.get(0),
            }),
            // Held by an instance that has left the table (it stopped): wait for the expiry.
            None => Err(sqlx::Error::RowNotFound),
        }
    }

    /// Which stamped lines of a conversation count now, for a reader that does not own it.
    /// `None` when the conversation was deleted.
    pub async fn acceptance(
        &self,
        conversation_id: &str,
    ) -> Result<Option<Acceptance>, sqlx::Error> {
        let mut found =
            crate::index::postgres::acceptances(&self.inner.pool, Some(conversation_id)).await?;
        // No row: nobody ever claimed it, nothing to judge by.
        Ok(found
            .remove(conversation_id)
            .unwrap_or_else(|| Some(Acceptance::default())))
    }

    /// Gives a conversation up (it left memory): its lease expires now, its epoch stays.
    pub async fn release(&self, conversation_id: &str) {
        let fence = self
            .inner
            .held
            .lock()
            .expect("leases lock")
            .remove(conversation_id);
        let Some(fence) = fence else {
            return;
        };
        fence.revoke();
        let released = sqlx::query(
            "UPDATE leases SET expires_at = now() WHERE conversation_id = $1 AND owner = $2",
        )
        .bind(conversation_id)
        .bind(&self.inner.instance)
        .execute(&self.inner.pool)
        .await;
        if let Err(error) = released {
            // It expires on its own within the lease time.
            tracing::warn!(%error, conversation = %conversation_id, "cannot release a lease");
        }
    }

    /// Renews every lease this instance holds, in one statement. Leases the database no
    /// longer gives this instance are revoked here at once; if the database does not answer,
    /// the deadlines stay and pass. Returns the conversations whose lease is gone.
    pub async fn renew(&self) -> Result<Vec<String>, sqlx::Error> {
        let inner = &self.inner;
        let ids: Vec<String> = inner
            .held
            .lock()
            .expect("leases lock")
            .keys()
            .cloned()
            .collect();
        let sent = Instant::now();
        let rows = sqlx::query(
            "UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond'
             WHERE owner = $1 AND conversation_id = ANY($2) AND expires_at >= now()
             RETURNING conversation_id",
        )
        .bind(&inner.instance)
        .bind(&ids)
        .bind(inner.ttl.as_millis() as i64)
        .fetch_all(&inner.pool)
        .await?;
        let renewed: std::collections::HashSet<String> =
            rows.iter().map(|row| row.get::<String, _>(0)).collect();
        let mut lost = Vec::new();
        let mut held = inner.held.lock().expect("leases lock");
        for id in ids {
            let Some(fence) = held.get(&id) else {
                continue;
            };
            if renewed.contains(&id) {
                fence.extend_to(sent + inner.ttl - inner.margin);
            } else {
                fence.revoke();
                held.remove(&id);
                lost.push(id);
            }
        }
        drop(held);
        self.forfeit(&lost);
        Ok(lost)
    }

    /// The conversations whose lease passed its deadline without a renewal (the database was
    /// unreachable): forgotten here, since another instance may own them by now.
    pub fn expired(&self) -> Vec<String> {
        let mut held = self.inner.held.lock().expect("leases lock");
        let gone: Vec<String> = held
            .iter()
            .filter(|(_, fence)| !fence.holds())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            held.remove(id);
        }
        drop(held);
        self.forfeit(&gone);
        gone
    }

    /// Every lease this instance holds expires now (a clean stop).
    pub async fn release_all(&self) {
        let held: Vec<Fence> = self
            .inner
            .held
            .lock()
            .expect("leases lock")
            .drain()
            .map(|(_, fence)| fence)
            .collect();
        for fence in &held {
            fence.revoke();
        }
        let released = sqlx::query("UPDATE leases SET expires_at = now() WHERE owner = $1")
            .bind(&self.inner.instance)
            .execute(&self.inner.pool)
            .await;
        if let Err(error) = released {
            tracing::warn!(%error, "cannot release the leases at stop; they expire on their own");
        }
    }
}
