//! A change of one or more files, made all or nothing. Every new content is computed in memory
//! first ([`Workspace::read`] and [`Workspace::set`], a later step seeing what an earlier one
//! set), so a hunk that does not apply fails before anything is written; every write is then
//! checked against the sandbox before the first one; and when a write fails midway, the files
//! already written are put back from the originals held in memory (created ones removed, with
//! the directories made for them). Reads and writes go through `disk.rs`, like `write_file`.
//!
//! It all blocks: [`offload`] runs a change on the blocking pool.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tools::call::{ToolContext, ToolResult};
use crate::tools::disk::{FileAccess, Permissions, blocking};

/// The largest file the edit tools read into memory.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A change a tool computes and commits, run by [`offload`].
pub(super) type Job = fn(&FileAccess, &Value, &CancellationToken) -> Result<ToolResult, String>;

/// Runs `job` on the blocking pool; its error is the failed result for the model.
pub(super) async fn offload(
    job: Job,
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    let (access, arguments, cancel) = (FileAccess::of(ctx), arguments.clone(), cancel.clone());
    blocking(move || job(&access, &arguments, &cancel))
        .await
        .unwrap_or_else(ToolResult::failed)
}

/// The files one change touches: what each held before, and what it is to hold.
pub(super) struct Workspace {
    access: FileAccess,
    files: Vec<Tracked>,
}

struct Tracked {
    /// The absolute path, `.` and `..` resolved as written: one entry per file however a
    /// change spells it.
    key: PathBuf,
    /// The path as the model first wrote it.
    path: PathBuf,
    /// `None`: there was no file.
    original: Option<Vec<u8>>,
    current: Option<Vec<u8>>,
    /// The original's permission bits.
    original_permissions: Option<Permissions>,
    /// The permission bits to give it when written (a moved file's), or `None` to keep them.
    permissions: Option<Permissions>,
}

/// How a commit ended when nothing failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Committed {
    /// Every changed file was written.
    Written,
    /// The change leaves every file as it was: nothing was written.
    Unchanged,
    /// The turn was interrupted before the first write: nothing was written.
    Interrupted,
}

impl Workspace {
    pub fn new(access: FileAccess) -> Workspace {
        Workspace {
            access,
            files: Vec::new(),
        }
    }

    /// What `path` holds now in this change (`None`: no file), read from disk the first time.
    pub fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, String> {
        let index = self.track(path)?;
        Ok(self.files[index].current.clone())
    }

    /// Makes `path` hold `bytes` (`None`: deleted) when the change is committed.
    pub fn set(&mut self, path: &str, bytes: Option<Vec<u8>>) -> Result<(), String> {
        let index = self.track(path)?;
        self.files[index].current = bytes;
        Ok(())
    }

    /// Makes `to` hold `bytes` when the change is committed, with the permission bits `from`
    /// had (a file moved keeps being executable), and deletes `from`.
    pub fn move_file(&mut self, from: &str, to: &str, bytes: Vec<u8>) -> Result<(), String> {
        let source = self.track(from)?;
        let permissions = self.files[source].original_permissions;
        let target = self.track(to)?;
        self.files[target].current = Some(bytes);
        self.files[target].permissions = permissions;
        self.files[source].current = None;
        Ok(())
    }

    /// Whether two paths name the same file, as written.
    pub fn same_file(&self, a: &str, b: &str) -> bool {
        self.key(a) == self.key(b)
    }

    fn key(&self, path: &str) -> PathBuf {
        let mut key = PathBuf::from("/");
        for component in self.access.cwd.join(path).components() {
            match component {
                Component::Normal(name) => key.push(name),
                Component::ParentDir => {
                    key.pop();
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        key
    }

    fn track(&mut self, path: &str) -> Result<usize, String> {
        let key = self.key(path);
        if let Some(index) = self.files.iter().position(|file| file.key == key) {
            return Ok(index);
        }
        let (original, original_permissions) =
            match self.access.read_whole(Path::new(path), MAX_FILE_BYTES)? {
                Some((bytes, permissions)) => (Some(bytes), Some(permissions)),
                None => (None, None),
            };
        self.files.push(Tracked {
            key,
            path: PathBuf::from(path),
            current: original.clone(),
            original,
            original_permissions,
            permissions: None,
        });
        Ok(self.files.len() - 1)
    }

    /// Writes every file whose content changed, all or nothing. An interrupt seen before the
    /// first write stops it; once writing started, it is finished (or rolled back) whole.
    pub fn commit(self, cancel: &CancellationToken) -> Result<Committed, String> {
        let changed: Vec<&Tracked> = self
            .files
            .iter()
            .filter(|file| file.current != file.original)
            .collect();
        if changed.is_empty() {
            return Ok(Committed::Unchanged);
        }
        for file in &changed {
            self.access.check_write(&file.path)?;
        }
        if cancel.is_cancelled() {
            return Ok(Committed::Interrupted);
        }
        let mut written: Vec<(&Tracked, Vec<PathBuf>)> = Vec::new();
        for file in &changed {
            let made_dirs = match file.current {
                Some(_) => self.access.missing_dirs(&file.path),
                None => Vec::new(),
            };
            let result = match &file.current {
                Some(bytes) => self.access.write(&file.path, bytes, file.permissions),
                None => self.access.remove(&file.path),
            };
            if let Err(error) = result {
                // The failed write may have left part of its file behind.
                written.push((file, made_dirs));
                return Err(self.roll_back(error, written));
            }
            written.push((file, made_dirs));
        }
        Ok(Committed::Written)
    }

    /// Puts back every file of `written` (the last one's write failed with `error`), and
    /// says what happened.
    fn roll_back(&self, error: String, mut written: Vec<(&Tracked, Vec<PathBuf>)>) -> String {
        let (failed, _) = written.pop().expect("the failed file");
        let mut restored = Vec::new();
        let mut not_restored = Vec::new();
        // The failed file itself: its original is written again (harmless when the write
        // never reached it), or a regular file it created is removed. A link is left alone.
        match &failed.original {
            Some(bytes) => {
                let _ = self
                    .access
                    .write(&failed.path, bytes, failed.original_permissions);
            }
            None => {
                let created = std::fs::symlink_metadata(self.access.cwd.join(&failed.path))
                    .is_ok_and(|metadata| metadata.is_file());
                if created {
                    let _ = self.access.remove(&failed.path);
                }
            }
        }
        for (file, made_dirs) in written.iter().rev() {
            let result = match &file.original {
                Some(bytes) => self
                    .access
                    .write(&file.path, bytes, file.original_permissions),
                None => self.access.remove(&file.path),
            };
            for dir in made_dirs {
                self.access.remove_empty_dir(dir);
            }
            match result {
                Ok(()) => restored.push(file.path.display().to_string()),
                Err(error) => not_restored.push(error),
            }
        }
        let mut message = error;
        if written.is_empty() {
            message.push_str("; no file was changed");
            return message;
        }
        restored.reverse();
        if !restored.is_empty() {
            message.push_str(&format!(
                "; the change was rolled back: {} put back as {} {}",
                restored.join(", "),
                if restored.len() == 1 { "it" } else { "they" },
                if restored.len() == 1 { "was" } else { "were" },
            ));
        }
        if !not_restored.is_empty() {
            message.push_str(&format!(
                "; rolling back failed, these files may be left changed: {}",
                not_restored.join("; ")
            ));
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxPolicy;

    fn workspace(dir: &Path) -> Workspace {
        Workspace::new(FileAccess {
            cwd: dir.to_path_buf(),
            sandbox: SandboxPolicy::default(),
        })
    }

    #[test]
    fn later_steps_see_earlier_ones_and_one_path_is_one_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let mut change = workspace(dir.path());
        assert_eq!(change.read("a.txt").unwrap().as_deref(), Some(&b"a"[..]));
        change.set("./sub/../a.txt", Some(b"b".to_vec())).unwrap();
        assert_eq!(change.read("a.txt").unwrap().as_deref(), Some(&b"b"[..]));
        assert!(change.same_file("a.txt", "sub/../a.txt"));
        assert_eq!(change.read("new/b.txt").unwrap(), None);
        change.set("new/b.txt", Some(b"new".to_vec())).unwrap();
        assert_eq!(
            change.commit(&CancellationToken::new()),
            Ok(Committed::Written)
        );
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"b");
        assert_eq!(std::fs::read(dir.path().join("new/b.txt")).unwrap(), b"new");
    }

    #[test]
    fn nothing_changed_or_an_interrupt_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let mut change = workspace(dir.path());
        change.set("a.txt", Some(b"a".to_vec())).unwrap();
        assert_eq!(
            change.commit(&CancellationToken::new()),
            Ok(Committed::Unchanged)
        );

        let mut change = workspace(dir.path());
        change.set("a.txt", Some(b"b".to_vec())).unwrap();
        change.set("c.txt", Some(b"c".to_vec())).unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(change.commit(&cancel), Ok(Committed::Interrupted));
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"a");
        assert!(!dir.path().join("c.txt").exists());
    }

    #[test]
    fn a_failed_write_puts_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("gone.txt"), "gone").unwrap();
        std::fs::write(outside.path().join("target"), "outside").unwrap();
        std::os::unix::fs::symlink(outside.path().join("target"), dir.path().join("link")).unwrap();
        let mut change = workspace(dir.path());
        change.set("a.txt", Some(b"changed".to_vec())).unwrap();
        change.set("gone.txt", None).unwrap();
        change
            .set("deep/new/file.txt", Some(b"new".to_vec()))
            .unwrap();
        change.set("link", Some(b"through".to_vec())).unwrap();
        let error = change.commit(&CancellationToken::new()).unwrap_err();
        assert_eq!(
            error,
            "could not write link: `link` is a symbolic link: files are never written through \
             a link; the change was rolled back: a.txt, gone.txt, deep/new/file.txt put back \
             as they were"
        );
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"a");
        assert_eq!(std::fs::read(dir.path().join("gone.txt")).unwrap(), b"gone");
        assert!(!dir.path().join("deep").exists());
        assert_eq!(
            std::fs::read(outside.path().join("target")).unwrap(),
            b"outside"
        );
        assert!(
            std::fs::symlink_metadata(dir.path().join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
