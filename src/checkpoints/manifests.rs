//! Manifests on disk. A snapshot after a tool call usually differs from the one before it by
//! a few files, so it is stored as those differences from its base (a delta); every
//! `MAX_DEPTH`-th one, or one that changed much, is stored whole. Writing a whole manifest of a
//! 10,000-file tree cost more than the walk that found the one changed file; a delta costs
//! what changed. Reading one follows the chain down to its whole manifest.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::scan::{Entry, Manifest, Skipped};

/// Deltas in a row before a manifest is stored whole again: bounds what a read follows.
pub const MAX_DEPTH: usize = 32;

/// A manifest as the differences from its base's.
#[derive(Debug, Serialize, Deserialize)]
pub struct Delta {
    pub base: String,
    depth: usize,
    taken_at_ns: i64,
    /// Paths added or changed (content, mode or stat fields), with their entry now.
    pub changed: BTreeMap<String, Entry>,
    removed: Vec<String>,
    skipped: Vec<Skipped>,
}

/// One file of `snapshots/`: a delta (it names a base) or a whole manifest.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stored {
    Delta(Delta),
    Whole(Manifest),
}

/// The file of snapshot `id`.
pub fn path(snapshots: &Path, id: &str) -> std::path::PathBuf {
    snapshots.join(format!("{id}.json"))
}

/// Writes `manifest` as snapshot `id`: as a delta from `base` (the previous snapshot, at the
/// given depth of deltas) when that is small, else whole. Answers the depth it was stored at
/// (0: whole). Written to a temporary file, flushed and renamed, so a crash or a power cut
/// leaves the old or the new, and a conversation's record never names a snapshot that is lost.
pub fn write(
    snapshots: &Path,
    id: &str,
    manifest: &Manifest,
    base: Option<(&str, &Manifest, usize)>,
) -> io::Result<usize> {
    let delta =
        base.filter(|(_, _, depth)| *depth < MAX_DEPTH)
            .and_then(|(base_id, base, depth)| {
                let mut changed = BTreeMap::new();
                for (path, entry) in &manifest.files {
                    if base.files.get(path) != Some(entry) {
                        changed.insert(path.clone(), entry.clone());
                    }
                }
                let removed: Vec<String> = base
                    .files
                    .keys()
                    .filter(|path| !manifest.files.contains_key(*path))
                    .cloned()
                    .collect();
                // Past a quarter of the tree, a whole manifest is about as big and reads faster.
                (changed.len() + removed.len() <= manifest.files.len() / 4 + 16).then(|| Delta {
                    base: base_id.to_owned(),
                    depth: depth + 1,
                    taken_at_ns: manifest.taken_at_ns,
                    changed,
                    removed,
                    skipped: manifest.skipped.clone(),
                })
            });
    let (bytes, depth) = match &delta {
        Some(delta) => (serde_json::to_vec(delta), delta.depth),
        None => (serde_json::to_vec(manifest), 0),
    };
    let bytes = bytes.map_err(io::Error::other)?;
    crate::store::disk::replace_durably(&path(snapshots, id), &bytes)?;
    Ok(depth)
}

/// Reads snapshot `id` as stored: whole, or a delta from its base.
pub fn load(snapshots: &Path, id: &str) -> Result<Stored, String> {
    if !is_snapshot_id(id) {
        return Err(format!("`{id}` is not a snapshot id"));
    }
    let bytes = fs::read(path(snapshots, id)).map_err(|error| format!("snapshot {id}: {error}"))?;
    serde_json::from_slice(&bytes).map_err(|error| format!("snapshot {id} is damaged: {error}"))
}

/// Makes `manifest` (a delta's base, whole) the manifest the delta stands for.
pub fn apply(manifest: &mut Manifest, delta: Delta) {
    for path in delta.removed {
        manifest.files.remove(&path);
    }
    manifest.files.extend(delta.changed);
    manifest.taken_at_ns = delta.taken_at_ns;
    manifest.skipped = delta.skipped;
}

/// Reads snapshot `id` whole, following its deltas; answers it with its depth.
pub fn read(snapshots: &Path, id: &str) -> Result<(Manifest, usize), String> {
    let mut chain = Vec::new();
    let mut next = id.to_owned();
    let whole = loop {
        match load(snapshots, &next)? {
            Stored::Whole(manifest) => break manifest,
            Stored::Delta(delta) if chain.len() <= MAX_DEPTH => {
                next.clone_from(&delta.base);
                chain.push(delta);
            }
            Stored::Delta(_) => return Err(format!("snapshot {id} is damaged: a loop")),
        }
    };
    let depth = chain.len();
    let mut manifest = whole;
    for delta in chain.into_iter().rev() {
        apply(&mut manifest, delta);
    }
    Ok((manifest, depth))
}

/// The ids of a tree's stored snapshots, oldest first.
pub fn ids(snapshots: &Path) -> Vec<String> {
    let mut ids: Vec<String> = fs::read_dir(snapshots)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let id = name.strip_suffix(".json")?;
            is_snapshot_id(id).then(|| id.to_owned())
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// The newest readable snapshot of a tree, with its depth. Snapshot ids are time-ordered
/// (UUIDv7), so the newest is the greatest name: no separate pointer file is rewritten at
/// every snapshot (replacing one cost an inode allocation and a deletion each time). A
/// damaged newest one (a crash while it was written) gives way to the one before it.
pub fn newest(snapshots: &Path) -> Option<(String, Manifest, usize)> {
    ids(snapshots)
        .into_iter()
        .rev()
        .take(MAX_DEPTH)
        .find_map(|id| {
            let (manifest, depth) = read(snapshots, &id).ok()?;
            Some((id, manifest, depth))
        })
}

pub fn is_snapshot_id(id: &str) -> bool {
    id.strip_prefix("k_")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: &str) -> Entry {
        Entry {
            hash: hash.to_owned(),
            size: 1,
            mode: super::super::scan::MODE_FILE,
            mtime_ns: 1,
            ctime_ns: 1,
            ino: 1,
        }
    }

    fn manifest(files: &[(&str, &str)]) -> Manifest {
        Manifest {
            taken_at_ns: files.len() as i64,
            files: files
                .iter()
                .map(|(path, hash)| ((*path).to_owned(), entry(hash)))
                .collect(),
            skipped: Vec::new(),
        }
    }

    #[test]
    fn deltas_read_back_whole_and_chains_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = dir.path();
        let mut files: Vec<(String, String)> = (0..100)
            .map(|n| (format!("f{n}"), format!("h{n}")))
            .collect();
        let as_manifest = |files: &[(String, String)]| {
            manifest(
                &files
                    .iter()
                    .map(|(p, h)| (p.as_str(), h.as_str()))
                    .collect::<Vec<_>>(),
            )
        };
        // Fixed width, as real ids are: the greatest name is the newest.
        let id = |n: usize| format!("k_{n:03}");
        let mut previous = as_manifest(&files);
        assert_eq!(write(snapshots, &id(0), &previous, None).unwrap(), 0);
        let mut depth = 0;
        for round in 1..=MAX_DEPTH + 2 {
            files[round % 100].1 = format!("changed{round}");
            if round == 3 {
                files.remove(50);
            }
            let now = as_manifest(&files);
            let base = id(round - 1);
            depth = write(snapshots, &id(round), &now, Some((&base, &previous, depth))).unwrap();
            let (read_back, read_depth) = read(snapshots, &id(round)).unwrap();
            assert_eq!(read_back.files, now.files, "round {round}");
            assert_eq!(read_depth, depth);
            previous = now;
        }
        // The chain was cut at its bound: stored whole once, then deltas again.
        assert!(depth < MAX_DEPTH, "{depth}");
        let small = fs::metadata(snapshots.join("k_002.json")).unwrap().len();
        let whole = fs::metadata(snapshots.join("k_000.json")).unwrap().len();
        assert!(
            small * 10 < whole,
            "a delta of one file: {small} of {whole} bytes"
        );
        let (newest_id, _, newest_depth) = newest(snapshots).unwrap();
        assert_eq!((newest_id, newest_depth), (id(MAX_DEPTH + 2), depth));
        // A broken chain is a clear reason, not a panic.
        fs::remove_file(snapshots.join("k_001.json")).unwrap();
        let error = read(snapshots, "k_002").unwrap_err();
        assert!(error.contains("k_001"), "{error}");
        assert!(read(snapshots, "../x").is_err());
    }
}
