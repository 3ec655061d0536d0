//! The one way the file tools reach the disk, shared by `read_file`/`write_file` (`files.rs`)
//! and the edit tools (`edit/`), so an edit reads and writes exactly as they do. Under an
//! enforced sandbox a read is judged by where the path really leads and checked again on the
//! opened file, and a write or a delete is judged by the path as written and then made beneath
//! its writable root without following any symlink (`sandbox::beneath`); without a sandbox,
//! plain file-system calls. Everything here blocks: callers run it on the blocking pool
//! ([`blocking`]).

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;

use super::call::ToolContext;
use crate::sandbox::{SandboxPolicy, beneath, paths as sandbox_paths};

/// Where the file tools of one call read and write: the conversation's cwd (relative paths
/// resolve against it) and the sandbox they obey.
#[derive(Debug, Clone)]
pub(super) struct FileAccess {
    pub cwd: PathBuf,
    pub sandbox: SandboxPolicy,
}

impl FileAccess {
    pub fn of(ctx: &ToolContext) -> FileAccess {
        FileAccess {
            cwd: ctx.cwd.clone(),
            sandbox: ctx.sandbox.clone(),
        }
    }

    /// Opens `path` to read it, or `None` when there is nothing there. A directory, a FIFO
    /// (opening one waits for a writer that may never come) and a socket are refused.
    pub fn open_to_read(&self, path: &Path) -> Result<Option<(File, Metadata)>, String> {
        let shown = path.display();
        if self.sandbox.enforced() {
            sandbox_paths::check_read(&self.sandbox, &self.cwd, path)?;
        }
        let full_path = self.cwd.join(path);
        let metadata = match std::fs::metadata(&full_path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("could not read {shown}: {error}")),
        };
        if metadata.is_dir() {
            return Err(format!("{shown} is a directory"));
        }
        let file_type = metadata.file_type();
        if file_type.is_fifo() || file_type.is_socket() {
            return Err(format!("{shown} is not a regular file"));
        }
        let file = match File::open(&full_path) {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("could not read {shown}: {error}")),
        };
        if self.sandbox.enforced() {
            // What was opened, whatever link was swapped in since the check.
            sandbox_paths::check_opened(&self.sandbox, path, &file)?;
        }
        Ok(Some((file, metadata)))
    }

    /// The whole content of the regular file `path` and its permission bits, or `None` when
    /// there is nothing there. A file over `max_bytes` is refused rather than read into memory.
    pub fn read_whole(
        &self,
        path: &Path,
        max_bytes: u64,
    ) -> Result<Option<(Vec<u8>, Permissions)>, String> {
        let Some((file, metadata)) = self.open_to_read(path)? else {
            return Ok(None);
        };
        let shown = path.display();
        if !metadata.is_file() {
            return Err(format!("{shown} is not a regular file"));
        }
        // The bits of the file opened (checked by the sandbox), not of whatever the path
        // names by now: a link swapped in since cannot lend its file's bits.
        let permissions = file
            .metadata()
            .map(|opened| Permissions::of(&opened))
            .map_err(|error| format!("could not read {shown}: {error}"))?;
        let mut bytes = Vec::new();
        // One byte past the limit tells a file that grew since its metadata was read.
        file.take(max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| format!("could not read {shown}: {error}"))?;
        if bytes.len() as u64 > max_bytes {
            return Err(format!(
                "{shown} is larger than {} MB, too large to edit here; use the shell",
                max_bytes / (1024 * 1024)
            ));
        }
        Ok(Some((bytes, permissions)))
    }

    /// Whether a write of `path` is allowed, checked before a change of several files writes
    /// its first one.
    pub fn check_write(&self, path: &Path) -> Result<(), String> {
        if self.sandbox.enforced() {
            sandbox_paths::write_target(&self.sandbox, &self.cwd, path)?;
        }
        Ok(())
    }

    /// Replaces (or creates) the file `path` with `bytes`, creating missing directories. The
    /// file keeps its permissions, or takes `permissions` when given (a moved file keeps its
    /// executable bit this way); a new file otherwise gets the default (0666 less the umask).
    pub fn write(
        &self,
        path: &Path,
        bytes: &[u8],
        permissions: Option<Permissions>,
    ) -> Result<(), String> {
        let shown = path.display();
        let mode = permissions.map(|permissions| permissions.0);
        if self.sandbox.enforced() {
            let (root, relative) = sandbox_paths::write_target(&self.sandbox, &self.cwd, path)?;
            return write_beneath(&root, &relative, bytes, mode)
                .map_err(|error| format!("could not write {shown}: {error}"));
        }
        let full_path = self.cwd.join(path);
        if let Some(parent) = full_path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| {
                format!("could not create the directories for {shown}: {error}")
            })?;
        }
        let written = std::fs::File::create(&full_path).and_then(|mut file| {
            use std::io::Write as _;
            use std::os::unix::fs::PermissionsExt as _;
            file.write_all(bytes)?;
            match mode {
                Some(mode) => file.set_permissions(std::fs::Permissions::from_mode(mode)),
                None => Ok(()),
            }
        });
        written.map_err(|error| format!("could not write {shown}: {error}"))
    }

    /// Deletes the file `path` (a link itself, never what it points to).
    pub fn remove(&self, path: &Path) -> Result<(), String> {
        self.unlink(path, false)
            .map_err(|error| format!("could not delete {}: {error}", path.display()))
    }

    /// Removes the directory `path` if it is empty; anything else is left as it is.
    pub fn remove_empty_dir(&self, path: &Path) {
        let _ = self.unlink(path, true);
    }

    fn unlink(&self, path: &Path, dir: bool) -> Result<(), String> {
        if self.sandbox.enforced() {
            let (root, relative) = sandbox_paths::write_target(&self.sandbox, &self.cwd, path)?;
            let (parent, name) = beneath::split(&relative).map_err(|error| error.to_string())?;
            let parent = beneath::open_dir(&root, parent, false).map_err(|e| e.to_string())?;
            let flags = if dir {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            return rustix::fs::unlinkat(&parent, name, flags)
                .map_err(|error| std::io::Error::from(error).to_string());
        }
        let full_path = self.cwd.join(path);
        let removed = if dir {
            std::fs::remove_dir(full_path)
        } else {
            std::fs::remove_file(full_path)
        };
        removed.map_err(|error| error.to_string())
    }

    /// The directories a write of `path` would create, deepest first, as paths like `path`.
    pub fn missing_dirs(&self, path: &Path) -> Vec<PathBuf> {
        path.ancestors()
            .skip(1)
            .filter(|dir| !dir.as_os_str().is_empty())
            .take_while(|dir| std::fs::symlink_metadata(self.cwd.join(dir)).is_err())
            .map(Path::to_path_buf)
            .collect()
    }
}

/// Writes `bytes` at `relative` beneath the writable `root`, creating its directories; no
/// symlink on the way is followed. An empty `relative` is the root itself (a device).
fn write_beneath(
    root: &Path,
    relative: &Path,
    bytes: &[u8],
    mode: Option<u32>,
) -> std::io::Result<()> {
    if relative.as_os_str().is_empty() {
        use std::io::Write;
        return std::fs::OpenOptions::new()
            .write(true)
            .open(root)?
            .write_all(bytes);
    }
    let (parent, name) = beneath::split(relative)?;
    let dir = beneath::open_dir(root, parent, true)?;
    beneath::write_file(&dir, name, bytes, mode)
}

/// A file's permission bits (read, write and execute for owner, group and others; never
/// set-id or sticky bits, which no edit carries over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Permissions(u32);

impl Permissions {
    fn of(metadata: &Metadata) -> Permissions {
        use std::os::unix::fs::PermissionsExt as _;
        Permissions(metadata.permissions().mode() & 0o777)
    }
}

/// Runs file work off the async threads: resolving a path reads links, and a hung mount must
/// not stall the runtime.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| Err(format!("the file operation failed: {error}")))
}
