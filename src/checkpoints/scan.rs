//! One snapshot of a working tree: walk it as git would (`.gitignore`, `.git/info/exclude`,
//! never `.git` itself), and name each file's content by its hash. A file whose size, times,
//! inode and mode are those of the previous snapshot is not read again: that snapshot's hash
//! stands, unless the file changed so close to that snapshot that its times could not tell
//! (git's "racily clean" case), when it is hashed again.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Limits;
use super::objects::Objects;

/// A file as a snapshot saw it. The stat fields are only for telling, next time, whether it
/// must be read again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub hash: String,
    pub size: u64,
    /// `0o100644`, `0o100755` or `0o120000` (a symbolic link; its blob is the link's target).
    pub mode: u32,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
}

impl Entry {
    /// The same content and kind (stat fields aside).
    pub fn same_content(&self, other: &Entry) -> bool {
        self.hash == other.hash && self.mode == other.mode
    }
}

/// A file left out of a snapshot, and why (its size, or the snapshot's total).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// A working tree at one moment: every file by its path relative to the tree, `/`-separated.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// When the walk began (ns since the epoch): files changed later than a little before it
    /// are hashed again next time.
    pub taken_at_ns: i64,
    pub files: BTreeMap<String, Entry>,
    pub skipped: Vec<Skipped>,
}

/// Changes to a file this close to a snapshot may not show in its times.
const RACY_NS: i64 = 100_000_000;

pub const MODE_FILE: u32 = 0o100644;
pub const MODE_EXEC: u32 = 0o100755;
pub const MODE_LINK: u32 = 0o120000;

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// What one file looks like now, without its hash.
fn stat_entry(meta: &fs::Metadata) -> Option<Entry> {
    let mode = if meta.file_type().is_symlink() {
        MODE_LINK
    } else if meta.is_file() {
        if meta.permissions().mode() & 0o111 != 0 {
            MODE_EXEC
        } else {
            MODE_FILE
        }
    } else {
        return None;
    };
    Some(Entry {
        hash: String::new(),
        size: meta.len(),
        mode,
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        ino: meta.ino(),
    })
}

/// The bytes a snapshot keeps for a path: a file's content, or a link's target.
pub fn read_content(path: &Path, mode: u32) -> io::Result<Vec<u8>> {
    if mode == MODE_LINK {
        use std::os::unix::ffi::OsStrExt;
        Ok(fs::read_link(path)?.as_os_str().as_bytes().to_vec())
    } else {
        fs::read(path)
    }
}

/// The entry a path has now (hashed and stored), or `None` when it is absent or not a file.
pub fn current(root: &Path, rel: &str, objects: &Objects) -> io::Result<Option<Entry>> {
    let path = root.join(rel);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let Some(mut entry) = stat_entry(&meta) else {
        return Ok(None);
    };
    let bytes = read_content(&path, entry.mode)?;
    if crate::redact::holds_secret(&bytes) {
        return Err(io::Error::other(format!(
            "{rel} holds a configured secret, which is never stored"
        )));
    }
    entry.hash = objects.put(&bytes, true)?;
    Ok(Some(entry))
}

/// Walks `root` and answers its manifest, hashing (and storing) only files that changed since
/// `previous`. `exclude` (the data directory, when it lies inside the tree) is never walked.
pub fn scan(
    root: &Path,
    previous: Option<&Manifest>,
    objects: &Objects,
    limits: &Limits,
    exclude: &Path,
) -> io::Result<Manifest> {
    let taken_at_ns = now_ns();
    let found = walk(root, exclude, limits.max_files)?;
    let mut manifest = Manifest {
        taken_at_ns,
        ..Manifest::default()
    };
    let mut total = 0u64;
    for (rel, meta) in found {
        let Some(mut entry) = stat_entry(&meta) else {
            continue;
        };
        if entry.size > limits.max_file_bytes {
            manifest.skipped.push(Skipped {
                path: rel,
                reason: format!("larger than {} bytes", limits.max_file_bytes),
            });
            continue;
        }
        if total + entry.size > limits.max_snapshot_bytes {
            manifest.skipped.push(Skipped {
                path: rel,
                reason: format!(
                    "the snapshot reached its limit of {} bytes",
                    limits.max_snapshot_bytes
                ),
            });
            continue;
        }
        total += entry.size;
        let known = previous.and_then(|previous| {
            let old = previous.files.get(&rel)?;
            let unchanged = old.size == entry.size
                && old.mode == entry.mode
                && old.mtime_ns == entry.mtime_ns
                && old.ctime_ns == entry.ctime_ns
                && old.ino == entry.ino
                && entry.mtime_ns < previous.taken_at_ns - RACY_NS;
            unchanged.then(|| old.hash.clone())
        });
        entry.hash = match known {
            Some(hash) => hash,
            None => match read_content(&root.join(&rel), entry.mode) {
                // A configured secret is never stored, not even in a checkpoint.
                Ok(bytes) if crate::redact::holds_secret(&bytes) => {
                    manifest.skipped.push(Skipped {
                        path: rel,
                        reason: "holds a configured secret, which is never stored".to_owned(),
                    });
                    continue;
                }
                Ok(bytes) => objects.put(&bytes, false)?,
                // Gone or unreadable since the walk saw it: not part of this snapshot.
                Err(error) => {
                    if error.kind() != io::ErrorKind::NotFound {
                        manifest.skipped.push(Skipped {
                            path: rel,
                            reason: format!("cannot be read: {error}"),
                        });
                    }
                    continue;
                }
            },
        };
        manifest.files.insert(rel, entry);
    }
    manifest.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(manifest)
}

/// Every file and link under `root` that git would not ignore, with its `lstat`, sorted by
/// path. One thread: the parallel walker cost more CPU than it saved on this size of tree.
/// More than `max_files` is an error of kind `FileTooLarge` (the walk stops there).
fn walk(root: &Path, exclude: &Path, max_files: usize) -> io::Result<Vec<(String, fs::Metadata)>> {
    if !root.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", root.display()),
        ));
    }
    let exclude = exclude.to_path_buf();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .follow_links(false)
        .filter_entry(move |entry| entry.file_name() != ".git" && entry.path() != exclude)
        .build();
    let mut found = Vec::new();
    for entry in walker.flatten() {
        if entry.file_type().is_none_or(|kind| kind.is_dir()) {
            continue;
        }
        let (Ok(rel), Ok(meta)) = (entry.path().strip_prefix(root), entry.metadata()) else {
            continue;
        };
        if let Some(rel) = rel.to_str() {
            found.push((rel.to_owned(), meta));
        }
        if found.len() > max_files {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "{} holds more than {max_files} files that are not ignored \
                     (tools.checkpoint_max_files): checkpoints are off for it",
                    root.display()
                ),
            ));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Paths that differ between two manifests: added, modified (content or mode), deleted.
pub fn diff(before: &Manifest, after: &Manifest) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for (path, entry) in &after.files {
        match before.files.get(path) {
            None => added.push(path.clone()),
            Some(old) if !old.same_content(entry) => modified.push(path.clone()),
            Some(_) => {}
        }
    }
    for path in before.files.keys() {
        if !after.files.contains_key(path) {
            deleted.push(path.clone());
        }
    }
    (added, modified, deleted)
}

/// The absolute path of a manifest path under `root`, refusing anything that would leave it.
pub fn inside(root: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    let plain = rel
        .components()
        .all(|part| matches!(part, std::path::Component::Normal(_)));
    plain.then(|| root.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_follows_gitignore_skips_big_files_and_sees_a_same_size_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, store) = (dir.path().join("tree"), dir.path().join("store"));
        fs::create_dir_all(tree.join("build")).unwrap();
        fs::write(tree.join(".gitignore"), "build/\n").unwrap();
        fs::write(tree.join("build/out.o"), "ignored").unwrap();
        fs::write(tree.join("a.txt"), "aaaa").unwrap();
        fs::write(tree.join("big.bin"), vec![0u8; 64]).unwrap();
        let objects = Objects::open(store).unwrap();
        let limits = Limits {
            max_file_bytes: 32,
            max_snapshot_bytes: 1024,
            max_files: 100,
        };
        let first = scan(
            &tree,
            None,
            &objects,
            &limits,
            dir.path().join("x").as_path(),
        )
        .unwrap();
        let paths: Vec<&str> = first.files.keys().map(String::as_str).collect();
        assert_eq!(paths, [".gitignore", "a.txt"]);
        assert_eq!(first.skipped.len(), 1);
        assert_eq!(first.skipped[0].path, "big.bin");
        // The same size, at once: the times cannot be trusted, so the file is read again.
        fs::write(tree.join("a.txt"), "bbbb").unwrap();
        let second = scan(&tree, Some(&first), &objects, &limits, dir.path()).unwrap();
        let (added, modified, deleted) = diff(&first, &second);
        assert_eq!(
            (added.len(), modified, deleted.len()),
            (0, vec!["a.txt".to_owned()], 0)
        );
        assert_eq!(objects.get(&second.files["a.txt"].hash).unwrap(), b"bbbb");
        assert!(inside(&tree, "../etc/passwd").is_none());
    }

    #[test]
    fn a_tree_with_more_files_than_the_limit_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        fs::create_dir_all(&tree).unwrap();
        for n in 0..5 {
            fs::write(tree.join(format!("{n}.txt")), "x").unwrap();
        }
        let objects = Objects::open(dir.path().join("store")).unwrap();
        let limits = Limits {
            max_files: 4,
            ..Limits::default()
        };
        let error = scan(&tree, None, &objects, &limits, dir.path()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert!(error.to_string().contains("more than 4 files"), "{error}");
        let limits = Limits {
            max_files: 5,
            ..Limits::default()
        };
        assert_eq!(
            scan(&tree, None, &objects, &limits, dir.path())
                .unwrap()
                .files
                .len(),
            5
        );
    }
}
