//! Checkpoints of working trees: what a conversation's directory looked like before and after
//! each tool call that may change files, so a turn's changes can be shown and a rewind can put
//! the files back. Derived data, kept apart from the conversations' own files: a missing or
//! damaged store never stops a conversation, it only makes restoring unavailable, with the
//! reason. It knows nothing of turns, HTTP or the conversations' store; the runtime tells it
//! which snapshots a conversation's calls made.
//!
//! Layout under `<data>/checkpoints/`: `objects/` (blobs by SHA-256, shared by every tree) and
//! `trees/<key>/` per working directory (`key`: a hash of its path): `cwd` (the path: how
//! recovery and collection know which directory a tree is; written durably, and rewritten
//! from the conversations' working directories when a power cut left it empty),
//! `snapshots/<id>.json` (manifests, most stored as a delta from the one before:
//! `manifests.rs`; the greatest id is the newest, whose stat fields spare re-reading unchanged
//! files) and `restores/<id>.json` (restore journals). Copies of trees for forks that run
//! apart are under `<data>/worktrees/<fork id>/` (`worktree.rs`).

pub mod diff;
mod gc;
mod manifests;
mod objects;
pub mod restore;
pub mod scan;
mod worktree;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

pub use gc::{Collected, referenced_ids};
use objects::Objects;
pub use restore::{RestoreError, RestoreOptions, RestoreOutcome};
pub use scan::Limits;
use scan::Manifest;
pub use worktree::TreeCopy;

/// The snapshots a tool call made, and what changed between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallChanges {
    pub before: String,
    pub after: String,
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

/// Every working tree's snapshots, under one data directory.
pub struct Checkpoints {
    root: PathBuf,
    /// The data directory: never part of a snapshot when it lies inside a working tree.
    data_dir: PathBuf,
    objects: Result<Objects, String>,
    limits: Limits,
    trees: Mutex<HashMap<PathBuf, Arc<Tree>>>,
    /// Read by every snapshot, restore and copy (with its tree's state); written by a garbage
    /// collection, which then has the whole store to itself (`gc.rs`).
    collecting: RwLock<()>,
}

/// A tree's state, locked, while no garbage collection runs.
struct Locked<'a> {
    state: MutexGuard<'a, TreeState>,
    _no_collection: RwLockReadGuard<'a, ()>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = TreeState;
    fn deref(&self) -> &TreeState {
        &self.state
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut TreeState {
        &mut self.state
    }
}

/// One working directory's snapshots. `state` is held for a whole snapshot or restore, so
/// they never interleave within a directory.
pub struct Tree {
    cwd: PathBuf,
    dir: PathBuf,
    state: Mutex<TreeState>,
    /// Turns running in this directory now (any conversation's): restoring waits for none.
    running: AtomicUsize,
}

#[derive(Default)]
struct TreeState {
    /// The newest snapshot (by any conversation): the next call's changes are counted from it.
    latest: Option<(String, Arc<Manifest>)>,
    /// How many deltas the newest snapshot is stored after its last whole manifest.
    latest_depth: usize,
    loaded: bool,
    /// The tree had more files than `max_files`: why, and when to look again (a tree can be
    /// cleaned up); until then no call walks it.
    too_large: Option<(String, std::time::Instant)>,
    /// The tree's `cwd` file is known to name it.
    named: bool,
}

/// The file in a tree's folder that names its working directory.
const TREE_NAME: &str = "cwd";

/// A tree's folder name: the start of the hash of its working directory's path.
fn tree_key(cwd: &Path) -> String {
    objects::hash_bytes(cwd.as_os_str().as_bytes())[..24].to_owned()
}

/// A tree folder whose working directory cannot be known: its `cwd` file is missing, empty or
/// names another directory, and no stored conversation works in one whose hash is its name.
/// Recovery and collection leave it as it is (every blob it names is kept) and report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnnamedTree {
    /// The `cwd` file that should name it.
    pub file: PathBuf,
    pub reason: String,
}

/// How long a tree found too large is not walked again.
const TOO_LARGE_RECHECK: std::time::Duration = std::time::Duration::from_secs(300);

/// Held while a turn runs in a directory.
pub struct TurnGuard {
    tree: Option<Arc<Tree>>,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if let Some(tree) = &self.tree {
            tree.running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn io_reason(what: &str, error: io::Error) -> String {
    format!("{what}: {error}")
}

impl Checkpoints {
    /// Never fails: a store that cannot be opened is kept as the reason restoring is off.
    pub fn open(data_dir: &Path, limits: Limits) -> Checkpoints {
        let root = data_dir.join("checkpoints");
        let objects = Objects::open(root.join("objects"))
            .map_err(|error| io_reason("the checkpoint store cannot be opened", error));
        if let Err(reason) = &objects {
            tracing::warn!(%reason, "checkpoints are off");
        }
        Checkpoints {
            root,
            data_dir: data_dir.to_path_buf(),
            objects,
            limits,
            trees: Mutex::new(HashMap::new()),
            collecting: RwLock::new(()),
        }
    }

    fn objects(&self) -> Result<&Objects, String> {
        self.objects.as_ref().map_err(Clone::clone)
    }

    /// The tree of a working directory (its folder is made when first used).
    fn tree(&self, cwd: &Path) -> Arc<Tree> {
        let mut trees = self.trees.lock().expect("trees");
        trees
            .entry(cwd.to_path_buf())
            .or_insert_with(|| {
                Arc::new(Tree {
                    cwd: cwd.to_path_buf(),
                    dir: self.root.join("trees").join(tree_key(cwd)),
                    state: Mutex::new(TreeState::default()),
                    running: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// Marks a turn as running in `cwd` until the guard is dropped.
    pub fn turn_started(&self, cwd: &Path) -> TurnGuard {
        let tree = self.tree(cwd);
        tree.running.fetch_add(1, Ordering::SeqCst);
        TurnGuard { tree: Some(tree) }
    }

    /// Takes a snapshot of `cwd` and makes it the newest; answers its id. Blocking.
    pub fn snapshot(&self, cwd: &Path) -> Result<String, String> {
        let tree = self.tree(cwd);
        let mut state = self.lock(&tree)?;
        self.snapshot_locked(&tree, &mut state).map(|(id, _)| id)
    }

    /// Takes a snapshot after a tool call: the changes since the newest snapshot of `cwd`.
    /// Blocking.
    pub fn after_call(&self, cwd: &Path) -> Result<CallChanges, String> {
        let tree = self.tree(cwd);
        let mut state = self.lock(&tree)?;
        let before = match state.latest.clone() {
            Some(latest) => latest,
            None => self.snapshot_locked(&tree, &mut state)?,
        };
        let after = self.snapshot_locked(&tree, &mut state)?;
        let (added, modified, deleted) = scan::diff(&before.1, &after.1);
        Ok(CallChanges {
            before: before.0,
            after: after.0,
            added,
            modified,
            deleted,
        })
    }

    /// The tree's state, its newest snapshot loaded from disk the first time. Taken once per
    /// operation, never twice (a collection waiting between two reads would deadlock).
    fn lock<'a>(&'a self, tree: &'a Tree) -> Result<Locked<'a>, String> {
        self.objects()?;
        let no_collection = self
            .collecting
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let state = tree
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut state = Locked {
            state,
            _no_collection: no_collection,
        };
        if !state.loaded {
            state.loaded = true;
            if let Some((id, manifest, depth)) = manifests::newest(&tree.dir.join("snapshots")) {
                state.latest = Some((id, Arc::new(manifest)));
                state.latest_depth = depth;
            }
        }
        Ok(state)
    }

    fn snapshot_locked(
        &self,
        tree: &Tree,
        state: &mut TreeState,
    ) -> Result<(String, Arc<Manifest>), String> {
        let objects = self.objects()?;
        if let Some((reason, until)) = &state.too_large {
            if std::time::Instant::now() < *until {
                return Err(reason.clone());
            }
            state.too_large = None;
        }
        let previous = state.latest.as_ref().map(|(_, manifest)| manifest.as_ref());
        let (manifest, same) =
            match scan::scan(&tree.cwd, previous, objects, &self.limits, &self.data_dir) {
                Ok(scanned) => scanned,
                Err(error) if error.kind() == io::ErrorKind::FileTooLarge => {
                    let reason = error.to_string();
                    state.too_large = Some((
                        reason.clone(),
                        std::time::Instant::now() + TOO_LARGE_RECHECK,
                    ));
                    return Err(reason);
                }
                Err(error) => return Err(io_reason("cannot take a snapshot", error)),
            };
        if let Some((id, _)) = &state.latest
            && same
        {
            // Nothing changed: the same snapshot, with the newer walk's time (so files changed
            // just before the previous one need not be hashed again).
            let id = id.clone();
            let manifest = Arc::new(manifest);
            state.latest = Some((id.clone(), manifest.clone()));
            return Ok((id, manifest));
        }
        let id = format!("k_{}", uuid::Uuid::now_v7().simple());
        let base = state
            .latest
            .as_ref()
            .map(|(id, latest)| (id.as_str(), latest.as_ref(), state.latest_depth));
        let depth = self
            .write_manifest(tree, &mut state.named, &id, &manifest, base)
            .map_err(|error| io_reason("cannot store a snapshot", error))?;
        let manifest = Arc::new(manifest);
        state.latest = Some((id.clone(), manifest.clone()));
        state.latest_depth = depth;
        Ok((id, manifest))
    }

    /// Stores a new snapshot (as a delta from `base` when small), which is then the newest
    /// (the greatest id); answers the depth it was stored at. Everything it names is on disk
    /// first: the blobs the walk stored (one flush for them all) and the tree's name. Then the
    /// manifest itself is written durably, since a conversation's record will name it.
    fn write_manifest(
        &self,
        tree: &Tree,
        named: &mut bool,
        id: &str,
        manifest: &Manifest,
        base: Option<(&str, &Manifest, usize)>,
    ) -> io::Result<usize> {
        let snapshots = tree.dir.join("snapshots");
        if !snapshots.is_dir() {
            fs::create_dir_all(&snapshots)?;
        }
        if !*named {
            name_tree(&tree.dir, &tree.cwd)?;
            *named = true;
        }
        self.objects().map_err(io::Error::other)?.flush()?;
        manifests::write(&snapshots, id, manifest, base)
    }

    /// A stored manifest by id (its deltas followed).
    fn manifest(&self, tree: &Tree, id: &str) -> Result<Arc<Manifest>, String> {
        manifests::read(&tree.dir.join("snapshots"), id).map(|(manifest, _)| Arc::new(manifest))
    }

    /// Every tree folder of the store: those whose working directory is known, and those
    /// whose is not. A name a power cut emptied is found again among `known_cwds` (the folder
    /// is named by a hash of the path) and written again.
    fn trees_on_disk(
        &self,
        known_cwds: &dyn Fn() -> Vec<PathBuf>,
    ) -> (Vec<Arc<Tree>>, Vec<UnnamedTree>) {
        let (mut trees, mut unnamed) = (Vec::new(), Vec::new());
        let Ok(dirs) = fs::read_dir(self.root.join("trees")) else {
            return (trees, unnamed);
        };
        let mut known: Option<HashMap<String, PathBuf>> = None;
        for dir in dirs.flatten() {
            let dir = dir.path();
            let Some(key) = dir.file_name().and_then(|name| name.to_str()) else {
                continue;
            };
            let file = dir.join(TREE_NAME);
            let named = fs::read(&file)
                .map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
                .ok()
                .filter(|cwd| cwd.is_absolute() && tree_key(cwd) == key);
            if let Some(cwd) = named {
                trees.push(self.tree(&cwd));
                continue;
            }
            let known = known.get_or_insert_with(|| {
                known_cwds()
                    .into_iter()
                    .map(|cwd| (tree_key(&cwd), cwd))
                    .collect()
            });
            match known.get(key) {
                Some(cwd) => match name_tree(&dir, cwd) {
                    Ok(()) => {
                        tracing::warn!(file = %file.display(), cwd = %cwd.display(), "named a checkpoint tree again");
                        trees.push(self.tree(cwd));
                    }
                    Err(error) => unnamed.push(UnnamedTree {
                        file,
                        reason: format!("cannot be written: {error}"),
                    }),
                },
                None => unnamed.push(UnnamedTree {
                    reason: match fs::metadata(&file) {
                        Err(error) => format!("cannot be read: {error}"),
                        Ok(meta) if meta.len() == 0 => "is empty".to_owned(),
                        Ok(_) => "names another directory".to_owned(),
                    } + ", and no stored conversation works in the directory it named",
                    file,
                }),
            }
        }
        (trees, unnamed)
    }

    /// A tree for a folder whose working directory is unknown: only its stored files are
    /// read (collection keeps everything they name).
    fn unnamed_tree(&self, file: &Path) -> Tree {
        Tree {
            cwd: PathBuf::new(),
            dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
            state: Mutex::new(TreeState::default()),
            running: AtomicUsize::new(0),
        }
    }
}

/// Writes a tree folder's name durably: the path of its working directory.
fn name_tree(dir: &Path, cwd: &Path) -> io::Result<()> {
    let file = dir.join(TREE_NAME);
    if fs::read(&file).is_ok_and(|named| named == cwd.as_os_str().as_bytes()) {
        return Ok(());
    }
    crate::store::disk::replace_durably(&file, cwd.as_os_str().as_bytes())
}
