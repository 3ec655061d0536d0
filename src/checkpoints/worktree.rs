//! Copies of a working tree, for a fork that runs apart from its source: the tree as a fresh
//! snapshot sees it, written into a new directory under `<data>/worktrees/<owner>/`, where
//! `owner` is the fork's conversation id.
//!
//! When the tree lies in a git repository with a commit, the copy is a linked git worktree of
//! it (detached at `HEAD`; the user's hooks are not run), with the snapshot's files written over
//! the checkout and the files the source no longer has removed, so `git status` in the copy
//! shows the source's uncommitted changes. Otherwise (no repository, no commit, no `git`
//! program) it is a plain copy. Files a snapshot does not keep (over the size limits, holding a
//! configured secret) are copied from the tree as they are now. Ignored files (`.gitignore`)
//! are not copied: dependencies are installed again in the copy.
//!
//! A copy is made under a `.pending` mark that is removed once the fork using it is stored
//! ([`Checkpoints::keep_copy`]). A crash in between leaves a marked directory: the next start
//! ([`Checkpoints::recover`]) removes it when its fork was never stored, else only the mark.
//! Once its fork exists, the directory is the user's: deleting the fork leaves it.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::objects::hash_bytes;
use super::restore::{RestoreError, busy, create_content, remove_file};
use super::scan::{self, MODE_EXEC, MODE_LINK, Manifest, Skipped};
use super::{Checkpoints, io_reason};

/// The mark of a copy whose fork is not stored yet (it holds the source's path).
const PENDING: &str = ".pending";

/// A copy made for a fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeCopy {
    /// The fork's working directory: the copy of the source's.
    pub cwd: PathBuf,
    /// A linked git worktree (else a plain copy).
    pub git: bool,
    /// Files written from the snapshot.
    pub files: usize,
    /// Files the snapshot did not keep, copied as they are now (`reason` says why they were not
    /// kept, and when they could not be copied either).
    pub copied_live: Vec<Skipped>,
    /// Why a git worktree could not be made (the copy is plain then).
    pub note: Option<String>,
}

impl TreeCopy {
    pub fn kind(&self) -> crate::domain::WorktreeKind {
        if self.git {
            crate::domain::WorktreeKind::Git
        } else {
            crate::domain::WorktreeKind::Copy
        }
    }
}

impl Checkpoints {
    /// Where the copies live.
    fn copies_dir(&self) -> PathBuf {
        self.data_dir.join("worktrees")
    }

    /// Copies the tree of `cwd` as it is now into a new directory owned by `owner` (a fork's
    /// id, unique). Refused while a turn runs in `cwd`: the copy would catch it mid-change.
    /// The copy stays marked pending until [`Checkpoints::keep_copy`]. Blocking.
    pub fn copy_tree(&self, cwd: &Path, owner: &str) -> Result<TreeCopy, RestoreError> {
        if !owner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || owner.is_empty()
        {
            return Err(RestoreError::Invalid(format!(
                "`{owner}` cannot name a copy"
            )));
        }
        let tree = self.tree(cwd);
        // Held for the whole copy: no snapshot or restore of the source interleaves.
        let mut state = self.lock(&tree).map_err(RestoreError::Unavailable)?;
        busy(&tree)?;
        let (_, manifest) = self
            .snapshot_locked(&tree, &mut state)
            .map_err(RestoreError::Unavailable)?;
        let home = self.copies_dir().join(owner);
        let made = fs::create_dir_all(&home)
            .and_then(|()| fs::write(home.join(PENDING), cwd.as_os_str().as_bytes()))
            .map_err(|error| io_reason("cannot make the copy's directory", error))
            .and_then(|()| self.fill_copy(cwd, &home, &manifest));
        match made {
            Ok(copy) => Ok(copy),
            Err(reason) => {
                discard(&home);
                Err(RestoreError::Unavailable(format!(
                    "the working tree cannot be copied: {reason}"
                )))
            }
        }
    }

    /// The fork using `owner`'s copy is stored: the copy is the user's from now on.
    pub fn keep_copy(&self, owner: &str) -> io::Result<()> {
        let home = self.copies_dir().join(owner);
        fs::remove_file(home.join(PENDING))?;
        fs::File::open(&home)?.sync_all()
    }

    /// The fork using `owner`'s copy could not be stored: the copy goes.
    pub fn discard_copy(&self, owner: &str) {
        discard(&self.copies_dir().join(owner));
    }

    /// Settles the copies a crash left pending: removed when their fork was never stored
    /// (`stored` says), else kept.
    pub(super) fn settle_pending_copies(&self, stored: &dyn Fn(&str) -> bool) {
        let Ok(homes) = fs::read_dir(self.copies_dir()) else {
            return;
        };
        for home in homes.flatten() {
            if !home.path().join(PENDING).exists() {
                continue;
            }
            let owner = home.file_name().to_string_lossy().into_owned();
            if stored(&owner) {
                if let Err(error) = self.keep_copy(&owner) {
                    tracing::warn!(%error, copy = %home.path().display(), "cannot unmark a copy");
                }
            } else {
                tracing::warn!(copy = %home.path().display(), "removing a copy whose fork was never stored");
                discard(&home.path());
            }
        }
    }

    fn fill_copy(&self, cwd: &Path, home: &Path, manifest: &Manifest) -> Result<TreeCopy, String> {
        let objects = self.objects()?;
        let name = cwd.file_name().map_or_else(
            || std::ffi::OsString::from("tree"),
            std::ffi::OsStr::to_os_string,
        );
        let (dest, note) = match git_worktree(cwd, home) {
            Ok(dest) => (Some(dest), None),
            Err(reason) => (None, reason),
        };
        let git = dest.is_some();
        let dest = match dest {
            Some(dest) => dest,
            None => {
                let dest = home.join(&name);
                fs::create_dir_all(&dest).map_err(|e| io_reason("cannot make the copy", e))?;
                dest
            }
        };
        let mut files = 0;
        for (rel, entry) in &manifest.files {
            crate::testhooks::stop_at("copy", rel.as_bytes());
            let path = scan::inside(&dest, rel)
                .ok_or_else(|| format!("{rel} is not a path inside the working directory"))?;
            if already_holds(&path, &entry.hash, entry.mode) {
                continue;
            }
            let bytes = objects
                .get(&entry.hash)
                .map_err(|e| io_reason(&format!("the content of {rel}"), e))?;
            write_plain(&path, &bytes, entry.mode).map_err(|e| io_reason(rel, e))?;
            files += 1;
        }
        let mut copied_live = Vec::new();
        for skipped in &manifest.skipped {
            let reason = match copy_live(cwd, &dest, &skipped.path) {
                Ok(()) => skipped.reason.clone(),
                Err(error) => format!("{}; not copied: {error}", skipped.reason),
            };
            copied_live.push(Skipped {
                path: skipped.path.clone(),
                reason,
            });
        }
        // What a checkout brought that the source no longer has (deleted there): removed. A
        // file the walk ignores (tracked, yet matched by `.gitignore`) keeps its checkout.
        let kept = |rel: &str| {
            manifest.files.contains_key(rel) || manifest.skipped.iter().any(|s| s.path == rel)
        };
        let found = scan::walk(&dest, &self.data_dir, usize::MAX)
            .map_err(|e| io_reason("cannot read the copy", e))?;
        for (rel, _) in found {
            if !kept(&rel) {
                remove_file(&dest, &dest.join(&rel)).map_err(|e| io_reason(&rel, e))?;
            }
        }
        // One flush of the whole file system instead of one per file: the fork is stored (and
        // acknowledged) only after this.
        let dir = fs::File::open(&dest).map_err(|e| io_reason("cannot open the copy", e))?;
        rustix::fs::syncfs(&dir).map_err(|e| io_reason("cannot flush the copy", e.into()))?;
        Ok(TreeCopy {
            cwd: dest,
            git,
            files,
            copied_live,
            note,
        })
    }
}

/// Makes a linked worktree of the repository holding `cwd` in `home`, and answers the copy of
/// `cwd` inside it. `Err(None)`: not in a repository; `Err(Some(why))`: a repository, but no
/// worktree could be made.
fn git_worktree(cwd: &Path, home: &Path) -> Result<PathBuf, Option<String>> {
    let Ok(top) = git(cwd, &["rev-parse", "--show-toplevel"]) else {
        return Err(None);
    };
    let top = PathBuf::from(top);
    let prefix = git(cwd, &["rev-parse", "--show-prefix"]).map_err(Some)?;
    git(&top, &["rev-parse", "--verify", "--quiet", "HEAD"])
        .map_err(|_| Some("the repository has no commit yet".to_owned()))?;
    let name = top.file_name().unwrap_or(std::ffi::OsStr::new("tree"));
    let dest_top = home.join(name);
    let mut add = Command::new("git");
    add.arg("-C")
        .arg(&top)
        .args(["-c", "core.hooksPath=/dev/null", "worktree", "add"])
        .args(["--detach", "--quiet"])
        .arg(&dest_top)
        .arg("HEAD");
    run(add).map_err(Some)?;
    // `sub/dir/`, or empty at the top (joined, that would leave a trailing `/`).
    let prefix = prefix.trim_end_matches('/');
    Ok(match prefix.is_empty() {
        true => dest_top,
        false => dest_top.join(prefix),
    })
}

/// Runs `git -C dir args…` and answers its output's first line.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(args);
    run(command)
}

fn run(mut command: Command) -> Result<String, String> {
    let output = command
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("git cannot run: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("git failed: {}", stderr.trim()));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    Ok(stdout.lines().next().unwrap_or_default().to_owned())
}

/// Whether `path` already holds this content (a checkout's file the source did not change).
fn already_holds(path: &Path, hash: &str, mode: u32) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    let is_link = meta.file_type().is_symlink();
    if is_link != (mode == MODE_LINK) || (!is_link && !meta.is_file()) {
        return false;
    }
    if !is_link {
        use std::os::unix::fs::PermissionsExt;
        let exec = meta.permissions().mode() & 0o111 != 0;
        if exec != (mode == MODE_EXEC) {
            return false;
        }
    }
    scan::read_content(path, mode).is_ok_and(|bytes| hash_bytes(&bytes) == hash)
}

/// Writes a file of the copy (its directories made first). Not flushed: the caller flushes
/// the whole copy once.
fn write_plain(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let parent = path.parent().expect("a path inside the copy has a parent");
    fs::create_dir_all(parent)?;
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path)?,
        Ok(_) => fs::remove_file(path)?,
        Err(_) => {}
    }
    create_content(path, bytes, mode, false)
}

/// Copies a file the snapshot did not keep from the source, as it is now.
fn copy_live(cwd: &Path, dest: &Path, rel: &str) -> io::Result<()> {
    let (Some(from), Some(to)) = (scan::inside(cwd, rel), scan::inside(dest, rel)) else {
        return Err(io::Error::other("not a path inside the working directory"));
    };
    fs::create_dir_all(to.parent().expect("a path inside the copy has a parent"))?;
    if fs::symlink_metadata(&to).is_ok() {
        fs::remove_file(&to)?;
    }
    fs::copy(from, to).map(drop)
}

/// Removes a copy: its directory, and its registration in the source repository when it is a
/// linked worktree (found through the `.git` file the worktree holds).
fn discard(home: &Path) {
    let repositories: Vec<PathBuf> = fs::read_dir(home)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| fs::read_to_string(entry.path().join(".git")).ok())
        .filter_map(|link| {
            // `gitdir: <repo>/.git/worktrees/<name>`: the repository is two levels up.
            let gitdir = PathBuf::from(link.trim().strip_prefix("gitdir: ")?);
            Some(gitdir.parent()?.parent()?.to_path_buf())
        })
        .collect();
    if let Err(error) = fs::remove_dir_all(home)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(%error, copy = %home.display(), "cannot remove a copy");
    }
    for repository in repositories {
        if let Err(reason) = git(&repository, &["worktree", "prune"]) {
            tracing::warn!(%reason, "cannot prune a removed worktree");
        }
    }
}
