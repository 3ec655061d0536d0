//! Garbage collection of the checkpoint store: snapshots no conversation names any more, and
//! the blobs only they held, are removed. A snapshot stays while any stored conversation's
//! record names it (the caller finds those: [`referenced_ids`]), while a restore journal of a
//! stored conversation needs it, when it is its tree's newest (the next call's changes count
//! from it), or when it is younger than the collection (a call may have taken it after the
//! records were read). A tree whose directory is gone and that keeps nothing goes whole. Trees
//! where a turn runs are left for the next collection.
//!
//! A kept snapshot stored as a delta from one that goes is first rewritten whole (flushed), so
//! no chain breaks; blobs are then marked from every kept manifest and journal, and the rest,
//! stored before the collection began, are removed. The whole store is the collection's while
//! it runs: every snapshot, restore and copy waits ([`super::Checkpoints`]'s `collecting`).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::manifests::{self, Stored};
use super::restore::journal_roots;
use super::scan::Manifest;
use super::{Checkpoints, Tree, TreeState, UnnamedTree};

/// What a collection removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    pub snapshots: usize,
    pub trees: usize,
    pub blobs: usize,
    pub bytes: u64,
    /// Trees whose working directory could not be known: left whole, every blob they name
    /// kept, and reported (a damaged file never stops the collection of the rest).
    pub unnamed: Vec<UnnamedTree>,
}

/// Snapshot ids (`k_` and 32 hexadecimal digits) in some bytes: a conversation's records.
/// Any string of that form counts, wherever it stands: keeping too much is safe.
pub fn referenced_ids(bytes: &[u8], ids: &mut HashSet<String>) {
    const DIGITS: usize = 32;
    for at in memchr::memmem::find_iter(bytes, b"k_") {
        let before_ok = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let digits = bytes.get(at + 2..at + 2 + DIGITS);
        let after_ok = bytes
            .get(at + 2 + DIGITS)
            .is_none_or(|b| !b.is_ascii_alphanumeric());
        if let Some(digits) = digits
            && before_ok
            && after_ok
            && digits.iter().all(u8::is_ascii_hexdigit)
        {
            ids.insert(format!("k_{}", String::from_utf8_lossy(digits)));
        }
    }
}

/// When a snapshot was taken, from its id (a UUIDv7: milliseconds since the epoch first).
fn taken_at(id: &str) -> Option<SystemTime> {
    let millis = u64::from_str_radix(id.strip_prefix("k_")?.get(..12)?, 16).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_millis(millis))
}

impl Checkpoints {
    /// Removes what nothing needs any more. `referenced`: the snapshot ids the stored
    /// conversations name, read after `since` (snapshots taken after it are kept); `stored`:
    /// whether a conversation exists. Blocking; every other use of the store waits.
    pub fn collect_garbage(
        &self,
        referenced: &HashSet<String>,
        stored: &dyn Fn(&str) -> bool,
        known_cwds: &dyn Fn() -> Vec<PathBuf>,
        since: SystemTime,
    ) -> io::Result<Collected> {
        let objects = self.objects().map_err(io::Error::other)?.clone();
        let _everything = self
            .collecting
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut collected = Collected::default();
        let mut blobs = HashSet::new();
        let (trees, unnamed) = self.trees_on_disk(known_cwds);
        for tree in &unnamed {
            tracing::warn!(file = %tree.file.display(), reason = %tree.reason, "a checkpoint tree is left whole: its working directory is unknown");
            self.mark_all(&self.unnamed_tree(&tree.file), &mut blobs);
        }
        collected.unnamed = unnamed;
        for tree in trees {
            if tree.running.load(Ordering::SeqCst) > 0 {
                // Its calls' records may not be written yet: every blob it has stays.
                self.mark_all(&tree, &mut blobs);
                continue;
            }
            self.collect_tree(&tree, referenced, stored, since, &mut blobs, &mut collected)?;
        }
        let (removed, bytes) = objects.sweep(&blobs, since)?;
        collected.blobs = removed;
        collected.bytes = bytes;
        Ok(collected)
    }

    /// Marks every blob of every snapshot of a tree that is left alone.
    fn mark_all(&self, tree: &Tree, blobs: &mut HashSet<String>) {
        let snapshots = tree.dir.join("snapshots");
        for id in manifests::ids(&snapshots) {
            let files = match manifests::load(&snapshots, &id) {
                Ok(Stored::Whole(manifest)) => manifest.files,
                Ok(Stored::Delta(delta)) => delta.changed,
                Err(_) => continue,
            };
            blobs.extend(files.into_values().map(|entry| entry.hash));
        }
        let mut snapshots_named = HashSet::new();
        if let Err(error) = journal_roots(tree, &|_| true, &mut snapshots_named, blobs) {
            tracing::warn!(%error, "cannot read a tree's restore journals");
        }
    }

    fn collect_tree(
        &self,
        tree: &Tree,
        referenced: &HashSet<String>,
        stored: &dyn Fn(&str) -> bool,
        since: SystemTime,
        blobs: &mut HashSet<String>,
        collected: &mut Collected,
    ) -> io::Result<()> {
        let snapshots = tree.dir.join("snapshots");
        let ids = manifests::ids(&snapshots);
        let mut needed = HashSet::new();
        journal_roots(tree, stored, &mut needed, blobs)?;
        let young = |id: &str| taken_at(id).is_none_or(|at| at >= since);
        let needed_by_someone =
            |id: &str| referenced.contains(id) || needed.contains(id) || young(id);
        if !tree.cwd.is_dir() && !ids.iter().any(|id| needed_by_someone(id)) {
            fs::remove_dir_all(&tree.dir)?;
            // Its newest snapshot is gone too: the next use starts afresh.
            *self.tree_state(tree) = TreeState::default();
            collected.trees += 1;
            collected.snapshots += ids.len();
            return Ok(());
        }
        let newest = ids.last().cloned();
        let keep = |id: &str| needed_by_someone(id) || newest.as_deref() == Some(id);
        // Walked oldest first, each kept snapshot is known whole (a delta applied to the one
        // before it, when that is its base), marked, and rewritten whole if its chain breaks.
        let mut current: Option<(String, Manifest)> = None;
        let mut intact: HashSet<String> = HashSet::new();
        for id in &ids {
            let Ok(stored_as) = manifests::load(&snapshots, id) else {
                continue; // damaged: left as it is (reading it fails clearly)
            };
            let (whole, chain_ok) = match stored_as {
                Stored::Whole(manifest) => (manifest, true),
                Stored::Delta(delta) => {
                    let chain_ok = keep(&delta.base) && intact.contains(&delta.base);
                    let whole = match current.take() {
                        Some((base_id, mut manifest)) if base_id == delta.base => {
                            manifests::apply(&mut manifest, delta);
                            manifest
                        }
                        _ => match manifests::read(&snapshots, id) {
                            Ok((manifest, _)) => manifest,
                            Err(_) => continue,
                        },
                    };
                    (whole, chain_ok)
                }
            };
            if keep(id) {
                if !chain_ok {
                    // Flushed, with its name, before any base it replaces is removed.
                    manifests::write(&snapshots, id, &whole, None)?;
                }
                intact.insert(id.clone());
                blobs.extend(whole.files.values().map(|entry| entry.hash.clone()));
            }
            current = Some((id.clone(), whole));
        }
        for id in ids.iter().filter(|id| !keep(id)) {
            fs::remove_file(manifests::path(&snapshots, id))?;
            collected.snapshots += 1;
        }
        Ok(())
    }

    fn tree_state<'a>(&self, tree: &'a Tree) -> std::sync::MutexGuard<'a, TreeState> {
        tree.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoints::Limits;

    #[test]
    fn ids_are_found_wherever_they_stand_and_nothing_else_is() {
        let id = "k_0193a0b1c2d37e4f8a9b0c1d2e3f4a5b";
        let text = format!(
            r#"{{"files":{{"before":"{id}","after":"k_short"}},"x":"ak_0193a0b1c2d37e4f8a9b0c1d2e3f4a5b"}}"#
        );
        let mut ids = HashSet::new();
        referenced_ids(text.as_bytes(), &mut ids);
        assert_eq!(ids, HashSet::from([id.to_owned()]));
        assert!(taken_at(id).is_some());
    }

    #[test]
    fn unnamed_snapshots_go_and_a_kept_delta_is_rewritten_whole() {
        let data = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::open(data.path(), Limits::default());
        let write = |content: &str| fs::write(work.path().join("f.txt"), content).unwrap();
        write("one");
        let first = checkpoints.snapshot(work.path()).unwrap();
        write("two");
        let second = checkpoints.snapshot(work.path()).unwrap();
        write("three");
        let third = checkpoints.snapshot(work.path()).unwrap();
        write("four");
        let newest = checkpoints.snapshot(work.path()).unwrap();
        let tree = checkpoints.tree(work.path());
        assert_eq!(manifests::ids(&tree.dir.join("snapshots")).len(), 4);
        // Only the third is named; the newest stays anyway.
        let referenced = HashSet::from([third.clone()]);
        let collected = checkpoints
            .collect_garbage(&referenced, &|_| true, &Vec::new, SystemTime::now())
            .unwrap();
        assert_eq!(collected.snapshots, 2, "{collected:?}");
        assert_eq!(
            collected.blobs, 2,
            "the blobs of `one` and `two`: {collected:?}"
        );
        let snapshots = tree.dir.join("snapshots");
        assert!(!manifests::path(&snapshots, &first).exists());
        assert!(!manifests::path(&snapshots, &second).exists());
        // The third was a delta from the second: it reads whole now, and so does the newest.
        let (third_manifest, depth) = manifests::read(&snapshots, &third).unwrap();
        assert_eq!(depth, 0);
        let objects = checkpoints.objects().unwrap();
        let hash = &third_manifest.files["f.txt"].hash;
        assert_eq!(objects.get(hash).unwrap(), b"three");
        assert!(manifests::read(&snapshots, &newest).is_ok());
        // Snapshots go on from the newest as before.
        write("five");
        let changes = checkpoints.after_call(work.path()).unwrap();
        assert_eq!(changes.before, newest);
        assert_eq!(changes.modified, ["f.txt"]);
    }

    #[test]
    fn a_tree_whose_directory_is_gone_goes_whole_unless_named() {
        let data = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::open(data.path(), Limits::default());
        let named = tempfile::tempdir().unwrap();
        fs::write(named.path().join("a"), "a").unwrap();
        let kept = checkpoints.snapshot(named.path()).unwrap();
        let gone = tempfile::tempdir().unwrap();
        fs::write(gone.path().join("b"), "b").unwrap();
        checkpoints.snapshot(gone.path()).unwrap();
        let gone_dir = checkpoints.tree(gone.path()).dir.clone();
        let named_path = named.path().to_path_buf();
        drop(gone);
        drop(named);
        let collected = checkpoints
            .collect_garbage(
                &HashSet::from([kept]),
                &|_| true,
                &Vec::new,
                SystemTime::now(),
            )
            .unwrap();
        assert_eq!(collected.trees, 1, "{collected:?}");
        assert!(!gone_dir.exists());
        assert!(checkpoints.tree(&named_path).dir.exists());
        assert_eq!(collected.blobs, 1, "only b's blob: {collected:?}");
    }
}
