//! Putting files back: the paths a conversation changed since a point, each to what it was
//! before the conversation's first change to it. A path that is no longer what the
//! conversation left (the user or another conversation changed it since) is a conflict and is
//! kept, unless forced. Before any file is touched, every blob the restore needs is verified
//! whole, the current content of each path is stored durably, a safety snapshot is taken and
//! a journal naming every path's old and new content is fsynced; the journal is marked done
//! at the end, once the files and their names are on disk. A crash in between is finished at
//! the next start (`recover`): every step is "make this path hold this blob", so doing it
//! again is harmless. A restore that cannot finish (a blob damaged since, a disk error) is
//! rolled back: every path is made to hold what it held before, and the journal says so. So
//! the tree is never left half restored. Undoing a restore is a restore the other way, from
//! its journal.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::scan::{self, Entry, MODE_EXEC, MODE_LINK};
use super::{Checkpoints, Tree, TreeState};
use crate::sandbox::beneath;

/// What one tool call changed, as its item records it.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub before: String,
    pub after: String,
    pub paths: Vec<String>,
}

/// How to restore: `force` overwrites conflicts too; `dry_run` only says what would happen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    pub force: bool,
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// `None` for a dry run.
    pub id: Option<String>,
    pub restored: Vec<String>,
    pub conflicts: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A turn runs in the working directory.
    #[error("a turn is running in {0}; wait for it to end or interrupt it")]
    Busy(String),
    /// The snapshots needed are missing or damaged, or a file could not be kept.
    #[error("files cannot be restored: {0}")]
    Unavailable(String),
    #[error("restore {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

/// A path's content: a blob and its mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    pub hash: String,
    pub mode: u32,
}

impl From<&Entry> for Content {
    fn from(entry: &Entry) -> Content {
        Content {
            hash: entry.hash.clone(),
            mode: entry.mode,
        }
    }
}

/// One path of a journal: what it held before the restore, what the restore makes it hold
/// (`None`: absent).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Step {
    path: String,
    previous: Option<Content>,
    target: Option<Content>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    Applying,
    Done,
    /// It could not finish, and every path was put back as it was: it never happened.
    RolledBack,
}

/// `restores/<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Journal {
    id: String,
    conversation_id: String,
    /// The restore this one undoes.
    undoes: Option<String>,
    /// The tree as it was just before (every file, not only those restored).
    safety_snapshot: String,
    state: State,
    steps: Vec<Step>,
    conflicts: Vec<String>,
    /// Set once undone: a restore is undone at most once.
    undone_by: Option<String>,
}

/// A path to put back: what it must hold, and what the conversation left in it (anything else
/// there now is someone else's change).
struct Wanted {
    path: String,
    target: Option<Content>,
    expected: Option<Content>,
}

impl Checkpoints {
    /// Restores the paths of `calls` (a conversation's file-changing calls since a point, in
    /// order) to what they held before the first of them changed each. Blocking.
    pub fn restore(
        &self,
        cwd: &Path,
        conversation_id: &str,
        calls: &[CallRecord],
        options: RestoreOptions,
    ) -> Result<RestoreOutcome, RestoreError> {
        let tree = self.tree(cwd);
        let mut state = self.lock(&tree).map_err(RestoreError::Unavailable)?;
        busy(&tree)?;
        let mut wanted: BTreeMap<String, Wanted> = BTreeMap::new();
        for call in calls {
            let before = self
                .manifest(&tree, &call.before)
                .map_err(RestoreError::Unavailable)?;
            let after = self
                .manifest(&tree, &call.after)
                .map_err(RestoreError::Unavailable)?;
            for path in &call.paths {
                if let Some(skipped) = before.skipped.iter().find(|s| &s.path == path) {
                    return Err(RestoreError::Unavailable(format!(
                        "{path} was not kept ({})",
                        skipped.reason
                    )));
                }
                let expected = after.files.get(path).map(Content::from);
                wanted
                    .entry(path.clone())
                    .and_modify(|wanted| wanted.expected = expected.clone())
                    .or_insert_with(|| Wanted {
                        path: path.clone(),
                        target: before.files.get(path).map(Content::from),
                        expected,
                    });
            }
        }
        self.apply(
            &tree,
            &mut state,
            conversation_id,
            None,
            wanted.into_values().collect(),
            options,
        )
    }

    /// Puts back what restore `id` replaced (conflicts as for a restore). Blocking.
    pub fn undo(
        &self,
        cwd: &Path,
        conversation_id: &str,
        id: &str,
        force: bool,
    ) -> Result<RestoreOutcome, RestoreError> {
        let tree = self.tree(cwd);
        let mut state = self.lock(&tree).map_err(RestoreError::Unavailable)?;
        busy(&tree)?;
        let mut journal = read_journal(&tree, id)?;
        // Another conversation's restore in the same directory is not this one's to undo.
        if journal.conversation_id != conversation_id {
            return Err(RestoreError::NotFound(id.to_owned()));
        }
        if journal.state == State::RolledBack {
            return Err(RestoreError::Invalid(format!(
                "restore {id} did not happen: it could not finish and was rolled back"
            )));
        }
        if journal.state != State::Done {
            return Err(RestoreError::Invalid(format!(
                "restore {id} has not finished"
            )));
        }
        if let Some(by) = &journal.undone_by {
            return Err(RestoreError::Invalid(format!(
                "restore {id} was already undone (by {by})"
            )));
        }
        let wanted = journal
            .steps
            .iter()
            .map(|step| Wanted {
                path: step.path.clone(),
                target: step.previous.clone(),
                expected: step.target.clone(),
            })
            .collect();
        let options = RestoreOptions {
            force,
            dry_run: false,
        };
        let outcome = self.apply(
            &tree,
            &mut state,
            conversation_id,
            Some(id),
            wanted,
            options,
        )?;
        journal.undone_by = outcome.id.clone();
        write_journal(&tree, &journal).map_err(|e| unavailable("cannot update a journal", e))?;
        Ok(outcome)
    }

    fn apply(
        &self,
        tree: &Tree,
        state: &mut TreeState,
        conversation_id: &str,
        undoes: Option<&str>,
        wanted: Vec<Wanted>,
        options: RestoreOptions,
    ) -> Result<RestoreOutcome, RestoreError> {
        let objects = self.objects().map_err(RestoreError::Unavailable)?;
        let mut steps = Vec::new();
        let mut conflicts = Vec::new();
        for wanted in wanted {
            if scan::inside(&tree.cwd, &wanted.path).is_none() {
                return Err(RestoreError::Unavailable(format!(
                    "{} is not a path inside the working directory",
                    wanted.path
                )));
            }
            // A directory on its way swapped for a link would send the write elsewhere: a
            // conflict, whatever `force` says.
            if beneath::has_linked_ancestor(&tree.cwd, Path::new(&wanted.path)) {
                conflicts.push(wanted.path);
                continue;
            }
            // Whole, not only present: a power cut can leave a blob empty, and a journal that
            // names one could not finish.
            if let Some(target) = &wanted.target
                && let Err(error) = objects.verify(&target.hash)
            {
                let what = if error.kind() == io::ErrorKind::NotFound {
                    "missing from"
                } else {
                    "damaged in"
                };
                return Err(RestoreError::Unavailable(format!(
                    "the content of {} is {what} the checkpoint store",
                    wanted.path
                )));
            }
            // Stored durably: an undo may need it after a power cut. A path that changes while
            // it is read (gone, or its way now a link) is someone else's change: a conflict.
            let now = match scan::current(&tree.cwd, &wanted.path, objects) {
                Ok(entry) => entry.map(|entry| Content::from(&entry)),
                Err(error)
                    if error.kind() == io::ErrorKind::NotFound
                        || beneath::has_linked_ancestor(&tree.cwd, Path::new(&wanted.path)) =>
                {
                    conflicts.push(wanted.path);
                    continue;
                }
                Err(error) => {
                    return Err(unavailable(&format!("cannot read {}", wanted.path), error));
                }
            };
            if now == wanted.target {
                continue;
            }
            if now != wanted.expected && !options.force {
                conflicts.push(wanted.path);
                continue;
            }
            steps.push(Step {
                path: wanted.path,
                previous: now,
                target: wanted.target,
            });
        }
        if options.dry_run {
            return Ok(RestoreOutcome {
                id: None,
                restored: steps.into_iter().map(|step| step.path).collect(),
                conflicts,
            });
        }
        let (safety_snapshot, _) = self
            .snapshot_locked(tree, state)
            .map_err(RestoreError::Unavailable)?;
        let mut journal = Journal {
            id: format!("r_{}", uuid::Uuid::now_v7().simple()),
            conversation_id: conversation_id.to_owned(),
            undoes: undoes.map(str::to_owned),
            safety_snapshot,
            state: State::Applying,
            steps,
            conflicts,
            undone_by: None,
        };
        write_journal(tree, &journal).map_err(|e| unavailable("cannot write a journal", e))?;
        if let Err(error) = self.finish(tree, &mut journal) {
            return Err(RestoreError::Unavailable(self.roll_back(
                tree,
                &mut journal,
                &error,
            )));
        }
        // The restored tree is the newest snapshot: the next call's changes count from it.
        if let Err(reason) = self.snapshot_locked(tree, state) {
            tracing::warn!(%reason, "no snapshot after a restore");
        }
        Ok(RestoreOutcome {
            id: Some(journal.id),
            restored: journal.steps.into_iter().map(|step| step.path).collect(),
            conflicts: journal.conflicts,
        })
    }

    /// Makes every path of the journal hold its target, then marks it done. Every write goes
    /// beneath the working directory without following a link; a path whose way a link took
    /// since it was checked is left alone, and counts as a conflict.
    fn finish(&self, tree: &Tree, journal: &mut Journal) -> io::Result<()> {
        let objects = self.objects().map_err(io::Error::other)?;
        let mut skipped = Vec::new();
        for step in &journal.steps {
            crate::testhooks::stop_at("restore", step.path.as_bytes());
            match make_hold(&tree.cwd, objects, &step.path, step.target.as_ref()) {
                Ok(()) => {}
                Err(error) if beneath::way_changed(&error) => {
                    tracing::warn!(path = %step.path, %error, "a link took the way of a restored file; it is left alone");
                    skipped.push(step.path.clone());
                }
                Err(error) => return Err(error),
            }
        }
        // The restored files were flushed one by one; their new names are flushed here, all
        // at once, before the journal says done (an undo then finds what it says).
        sync_tree(&tree.cwd)?;
        journal.steps.retain(|step| !skipped.contains(&step.path));
        journal.conflicts.extend(skipped);
        journal.state = State::Done;
        write_journal(tree, journal)
    }

    /// Puts every path of a restore that could not finish back to what it held before it
    /// (that content was stored durably before the journal was written), and marks the
    /// journal rolled back. Answers why the restore failed, and whether the files are as they
    /// were; when even that fails, the journal stays and the next start tries again.
    fn roll_back(&self, tree: &Tree, journal: &mut Journal, error: &io::Error) -> String {
        tracing::error!(restore = %journal.id, %error, "a restore cannot finish; putting the files back");
        let put_back = self
            .objects()
            .map_err(io::Error::other)
            .and_then(|objects| {
                for step in journal.steps.iter().rev() {
                    match make_hold(&tree.cwd, objects, &step.path, step.previous.as_ref()) {
                        Err(error) if !beneath::way_changed(&error) => return Err(error),
                        _ => {}
                    }
                }
                sync_tree(&tree.cwd)?;
                journal.state = State::RolledBack;
                write_journal(tree, journal)
            });
        match put_back {
            Ok(()) => format!(
                "restoring failed ({error}); every file was put back as it was, nothing changed"
            ),
            Err(second) => {
                tracing::error!(restore = %journal.id, error = %second, "cannot put the files of a failed restore back");
                format!(
                    "restoring failed ({error}), and putting the files back failed too \
                     ({second}); the service tries again when it next starts"
                )
            }
        }
    }
}

/// Makes `path` beneath `root` hold `content` (absent: removed), never through a link: one
/// step of a restore, or of putting one back. A path outside `root` is refused (a journal is
/// never trusted to name only paths inside).
fn make_hold(
    root: &Path,
    objects: &super::objects::Objects,
    path: &str,
    content: Option<&Content>,
) -> io::Result<()> {
    if scan::inside(root, path).is_none() {
        return Err(io::Error::other("a path outside the working directory"));
    }
    let relative = Path::new(path);
    match content {
        Some(content) => write_file(root, relative, &objects.get(&content.hash)?, content.mode),
        None => beneath::remove_file(root, relative),
    }
}

/// Flushes the file system that holds `root` (the files written and their names): one
/// `syncfs` instead of an fsync per folder.
fn sync_tree(root: &Path) -> io::Result<()> {
    let dir = fs::File::open(root)?;
    rustix::fs::syncfs(&dir)?;
    Ok(())
}

/// The ids of a tree's restore journals.
fn journal_ids(tree: &Tree) -> Vec<String> {
    fs::read_dir(tree.dir.join("restores"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect()
}

impl Checkpoints {
    /// Finishes every restore a crash cut short (see `restore`), and settles the copies of
    /// trees whose fork a crash cut short (see `worktree`; `stored` tells whether a
    /// conversation exists). Called at start-up, before any turn runs; a failure is logged,
    /// and that restore's journal stays for the next start.
    /// `known_cwds`: every working directory a stored conversation names (asked only when a
    /// tree's name must be found again).
    pub fn recover(&self, stored: &dyn Fn(&str) -> bool, known_cwds: &dyn Fn() -> Vec<PathBuf>) {
        self.settle_pending_copies(stored);
        let (trees, unnamed) = self.trees_on_disk(known_cwds);
        for tree in trees {
            if let Err(reason) = recover(self, &tree) {
                tracing::error!(%reason, cwd = %tree.cwd.display(), "cannot finish a restore");
            }
        }
        for tree in unnamed {
            tracing::error!(file = %tree.file.display(), reason = %tree.reason, "a checkpoint tree has no working directory; its restores cannot be finished");
        }
    }
}

/// Finishes the restores of `tree` that a crash cut short.
pub(super) fn recover(checkpoints: &Checkpoints, tree: &Tree) -> Result<(), String> {
    let ids = journal_ids(tree);
    if ids.is_empty() {
        return Ok(());
    }
    let _state = checkpoints.lock(tree)?;
    for id in ids {
        let mut journal = read_journal(tree, &id).map_err(|e| e.to_string())?;
        if journal.state == State::Applying {
            tracing::warn!(restore = %id, "finishing a restore a stop cut short");
            if let Err(error) = checkpoints.finish(tree, &mut journal) {
                let outcome = checkpoints.roll_back(tree, &mut journal, &error);
                if journal.state != State::RolledBack {
                    return Err(format!("restore {id}: {outcome}"));
                }
                tracing::warn!(restore = %id, %outcome, "a restore a stop cut short was rolled back");
            }
        }
    }
    Ok(())
}

/// What a tree's restore journals still hold on to, for a garbage collection: each journal's
/// safety snapshot and the blobs of its steps (an undo needs them). A finished journal of a
/// conversation that no longer exists is removed first (nothing can undo it any more).
pub(super) fn journal_roots(
    tree: &Tree,
    stored: &dyn Fn(&str) -> bool,
    snapshots: &mut std::collections::HashSet<String>,
    blobs: &mut std::collections::HashSet<String>,
) -> io::Result<()> {
    for id in journal_ids(tree) {
        let Ok(journal) = read_journal(tree, &id) else {
            continue;
        };
        if journal.state != State::Applying && !stored(&journal.conversation_id) {
            fs::remove_file(journal_path(tree, &id).map_err(io::Error::other)?)?;
            continue;
        }
        if journal.state == State::RolledBack {
            continue; // it never happened: nothing can undo it
        }
        snapshots.insert(journal.safety_snapshot);
        for step in journal.steps {
            blobs.extend(step.previous.into_iter().chain(step.target).map(|c| c.hash));
        }
    }
    Ok(())
}

pub(super) fn busy(tree: &Tree) -> Result<(), RestoreError> {
    if tree.running.load(Ordering::SeqCst) > 0 {
        return Err(RestoreError::Busy(tree.cwd.display().to_string()));
    }
    Ok(())
}

fn unavailable(what: &str, error: io::Error) -> RestoreError {
    RestoreError::Unavailable(format!("{what}: {error}"))
}

fn journal_path(tree: &Tree, id: &str) -> Result<std::path::PathBuf, RestoreError> {
    if !id.starts_with("r_") || !id[2..].bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(RestoreError::NotFound(id.to_owned()));
    }
    Ok(tree.dir.join("restores").join(format!("{id}.json")))
}

fn read_journal(tree: &Tree, id: &str) -> Result<Journal, RestoreError> {
    let path = journal_path(tree, id)?;
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(RestoreError::NotFound(id.to_owned()));
        }
        Err(error) => return Err(unavailable(&format!("restore {id}"), error)),
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| RestoreError::Unavailable(format!("restore {id} is damaged: {e}")))
}

/// Writes a journal durably (file and directory fsynced) under a temporary name, then renames.
fn write_journal(tree: &Tree, journal: &Journal) -> io::Result<()> {
    let dir = tree.dir.join("restores");
    fs::create_dir_all(&dir)?;
    let bytes = serde_json::to_vec_pretty(journal).map_err(io::Error::other)?;
    let tmp = dir.join(format!(".{}.tmp", journal.id));
    let mut file = fs::File::create(&tmp)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(format!("{}.json", journal.id)))?;
    fs::File::open(&dir)?.sync_all()
}

/// Makes `relative` beneath `root` hold `bytes` (a link's target for a link), replaced in one
/// rename, never through a link.
fn write_file(root: &Path, relative: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let (parent, name) = beneath::split(relative)?;
    let dir = beneath::open_dir(root, parent, true)?;
    beneath::replace_file(&dir, name, bytes, mode == MODE_LINK, mode == MODE_EXEC)
}

/// Creates `path` (which must be absent) as a link to `bytes` (a link's blob is its target) or
/// a file holding them, with the permission bits of `mode`. `flush`: the file's data is on
/// disk before this returns.
pub(super) fn create_content(path: &Path, bytes: &[u8], mode: u32, flush: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if mode == MODE_LINK {
        use std::os::unix::ffi::OsStrExt;
        return std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(bytes), path);
    }
    let mut file = fs::File::create(path)?;
    file.write_all(bytes)?;
    let bits = if mode == MODE_EXEC { 0o755 } else { 0o644 };
    file.set_permissions(fs::Permissions::from_mode(bits))?;
    if flush {
        file.sync_all()?;
    }
    Ok(())
}

/// Removes a file, then the directories it leaves empty (up to the tree's root).
pub(super) fn remove_file(root: &Path, path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let mut dir = path.parent();
    while let Some(current) = dir {
        if current == root || !current.starts_with(root) || fs::remove_dir(current).is_err() {
            break;
        }
        dir = current.parent();
    }
    Ok(())
}
