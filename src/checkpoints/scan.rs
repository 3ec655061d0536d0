//! One snapshot of a working tree: walk it as git would (`.gitignore`, `.git/info/exclude`,
//! never `.git` itself), and name each file's content by its hash. A file whose size, times,
//! inode and mode are those of the previous snapshot is not read again: that snapshot's hash
//! stands, unless the file changed so close to that snapshot that its times could not tell
//! (git's "racily clean" case), when it is hashed again.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::Stat;
use serde::{Deserialize, Serialize};

use super::objects::Objects;

/// How much a snapshot keeps: a bigger file, or what goes past the total, is skipped (and
/// listed with the snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_file_bytes: u64,
    pub max_snapshot_bytes: u64,
    /// A tree with more files than this is not snapshotted (checkpoints are off for it).
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_bytes: 10 * 1024 * 1024,
            max_snapshot_bytes: 200 * 1024 * 1024,
            max_files: 50_000,
        }
    }
}

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

/// What one file looks like now (its `lstat`), without its hash.
fn stat_entry(stat: &rustix::fs::Stat) -> Option<Entry> {
    let mode = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
        rustix::fs::FileType::Symlink => MODE_LINK,
        rustix::fs::FileType::RegularFile if stat.st_mode & 0o111 != 0 => MODE_EXEC,
        rustix::fs::FileType::RegularFile => MODE_FILE,
        _ => return None,
    };
    Some(Entry {
        hash: String::new(),
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mode,
        mtime_ns: stat.st_mtime * 1_000_000_000 + stat.st_mtime_nsec as i64,
        ctime_ns: stat.st_ctime * 1_000_000_000 + stat.st_ctime_nsec as i64,
        ino: stat.st_ino,
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
    let stat = match rustix::fs::lstat(&path) {
        Ok(stat) => stat,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let Some(mut entry) = stat_entry(&stat) else {
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
/// `previous`, and whether it is `previous` again (every entry the same, stat fields
/// included). `exclude` (the data directory, when it lies inside the tree) is never walked.
pub fn scan(
    root: &Path,
    previous: Option<&Manifest>,
    objects: &Objects,
    limits: &Limits,
    exclude: &Path,
) -> io::Result<(Manifest, bool)> {
    let taken_at_ns = now_ns();
    let found = walk(root, exclude, limits.max_files)?;
    let mut skipped = Vec::new();
    let mut files = Vec::with_capacity(found.len());
    let mut total = 0u64;
    // Both are in path order: the previous entry of each path is found by walking them
    // together, not by a lookup per file.
    let mut before = previous.map(|previous| previous.files.iter().peekable());
    let mut same = previous.is_some();
    for (rel, stat) in found {
        let Some(mut entry) = stat_entry(&stat) else {
            continue;
        };
        let old = before.as_mut().and_then(|before| {
            while before
                .next_if(|(path, _)| path.as_str() < rel.as_str())
                .is_some()
            {
                same = false; // a path of the previous snapshot is gone
            }
            before
                .next_if(|(path, _)| **path == rel)
                .map(|(_, old)| old)
        });
        if entry.size > limits.max_file_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: format!("larger than {} bytes", limits.max_file_bytes),
            });
            same = false;
            continue;
        }
        if total + entry.size > limits.max_snapshot_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: format!(
                    "the snapshot reached its limit of {} bytes",
                    limits.max_snapshot_bytes
                ),
            });
            same = false;
            continue;
        }
        total += entry.size;
        let known = old.filter(|old| {
            old.size == entry.size
                && old.mode == entry.mode
                && old.mtime_ns == entry.mtime_ns
                && old.ctime_ns == entry.ctime_ns
                && old.ino == entry.ino
                && previous.is_some_and(|previous| entry.mtime_ns < previous.taken_at_ns - RACY_NS)
        });
        entry.hash = match known {
            Some(old) => old.hash.clone(),
            None => match read_content(&root.join(&rel), entry.mode) {
                // A configured secret is never stored, not even in a checkpoint.
                Ok(bytes) if crate::redact::holds_secret(&bytes) => {
                    skipped.push(Skipped {
                        path: rel,
                        reason: "holds a configured secret, which is never stored".to_owned(),
                    });
                    same = false;
                    continue;
                }
                Ok(bytes) => objects.put(&bytes, false)?,
                // Gone or unreadable since the walk saw it: not part of this snapshot.
                Err(error) => {
                    if error.kind() != io::ErrorKind::NotFound {
                        skipped.push(Skipped {
                            path: rel,
                            reason: format!("cannot be read: {error}"),
                        });
                    }
                    same = false;
                    continue;
                }
            },
        };
        same = same && old == Some(&entry);
        files.push((rel, entry));
    }
    if before.is_some_and(|mut before| before.next().is_some()) {
        same = false;
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = Manifest {
        taken_at_ns,
        // In path order already: the map is built in one pass.
        files: files.into_iter().collect(),
        skipped,
    };
    let same = same && previous.is_some_and(|previous| previous.skipped == manifest.skipped);
    Ok((manifest, same))
}

/// Every file and link under `root` that git would not ignore, with its `lstat`, sorted by
/// path. `ignore` walks (it reads the directories and the ignore files, and stats nothing);
/// then each directory's files are stat'ed relative to the open directory (`fstatat`), which
/// spares resolving every file's whole path again: that was the largest cost of a snapshot of
/// a tree where nothing changed. One thread: the parallel walker cost more CPU than it saved
/// on this size of tree. More than `max_files` is an error of kind `FileTooLarge`.
pub(super) fn walk(
    root: &Path,
    exclude: &Path,
    max_files: usize,
) -> io::Result<Vec<(String, Stat)>> {
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
        .filter_entry(move |entry| {
            // `.git` is git's, a directory or (in a linked worktree or a submodule) a file.
            // Only directories can be excluded; bytes compare faster than path components.
            let dir = entry.file_type().is_some_and(|kind| kind.is_dir());
            entry.file_name() != ".git"
                && (!dir || entry.path().as_os_str().as_bytes() != exclude.as_os_str().as_bytes())
        })
        .build();
    // The files to keep, by their directory (relative to `root`, `""` for itself), in the
    // order the walk met the directories; a directory's files come mostly in a row.
    let mut dirs: Vec<(Vec<u8>, Vec<std::ffi::OsString>)> = Vec::new();
    let mut dir_index: HashMap<Vec<u8>, usize> = HashMap::new();
    let prefix = root.as_os_str().as_bytes().len();
    let mut count = 0usize;
    for entry in walker.flatten() {
        if entry.file_type().is_none_or(|kind| kind.is_dir()) {
            continue;
        }
        let path = entry.path().as_os_str().as_bytes();
        let name = entry.file_name().as_bytes();
        // `<root>/<dir>/<name>`: the part between the root and the name.
        let Some(dir) = path
            .get(prefix..path.len() - name.len())
            .map(|dir| dir.strip_prefix(b"/").unwrap_or(dir))
            .map(|dir| dir.strip_suffix(b"/").unwrap_or(dir))
        else {
            continue;
        };
        let index = match dirs.last() {
            Some((last, _)) if last.as_slice() == dir => dirs.len() - 1,
            _ => *dir_index.entry(dir.to_vec()).or_insert_with(|| {
                dirs.push((dir.to_vec(), Vec::new()));
                dirs.len() - 1
            }),
        };
        dirs[index].1.push(entry.file_name().to_owned());
        count += 1;
        if count > max_files {
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
    let mut found = Vec::with_capacity(count);
    for (dir, names) in dirs {
        let Ok(dir) = String::from_utf8(dir) else {
            continue;
        };
        // Gone since the walk: its files are not part of this snapshot.
        let Ok(fd) = rustix::fs::open(
            root.join(&dir),
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            continue;
        };
        for name in names {
            let (Ok(stat), Some(name)) = (
                rustix::fs::statat(&fd, &name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW),
                name.to_str(),
            ) else {
                continue;
            };
            let rel = if dir.is_empty() {
                name.to_owned()
            } else {
                format!("{dir}/{name}")
            };
            found.push((rel, stat));
        }
    }
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Paths that differ between two manifests: added, modified (content or mode), deleted.
/// Both are in path order, so they are walked together.
pub fn diff(before: &Manifest, after: &Manifest) -> (Vec<String>, Vec<String>, Vec<String>) {
    use std::cmp::Ordering;
    let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    let mut old = before.files.iter().peekable();
    let mut new = after.files.iter().peekable();
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some((path, _)), None) => {
                deleted.push((*path).clone());
                old.next();
            }
            (None, Some((path, _))) => {
                added.push((*path).clone());
                new.next();
            }
            (Some((a, a_entry)), Some((b, b_entry))) => match a.cmp(b) {
                Ordering::Less => {
                    deleted.push((*a).clone());
                    old.next();
                }
                Ordering::Greater => {
                    added.push((*b).clone());
                    new.next();
                }
                Ordering::Equal => {
                    if !a_entry.same_content(b_entry) {
                        modified.push((*b).clone());
                    }
                    old.next();
                    new.next();
                }
            },
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
        let (first, same) = scan(
            &tree,
            None,
            &objects,
            &limits,
            dir.path().join("x").as_path(),
        )
        .unwrap();
        assert!(!same, "nothing to be the same as");
        let paths: Vec<&str> = first.files.keys().map(String::as_str).collect();
        assert_eq!(paths, [".gitignore", "a.txt"]);
        assert_eq!(first.skipped.len(), 1);
        assert_eq!(first.skipped[0].path, "big.bin");
        // The same size, at once: the times cannot be trusted, so the file is read again.
        fs::write(tree.join("a.txt"), "bbbb").unwrap();
        let (second, same) = scan(&tree, Some(&first), &objects, &limits, dir.path()).unwrap();
        assert!(!same);
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
                .0
                .files
                .len(),
            5
        );
    }
}
