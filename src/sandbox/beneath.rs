//! Writes that no symlink can redirect. The file tools and checkpoint restores write from the
//! service, while a sandboxed process may be swapping a directory for a symlink at the same
//! moment: a path checked first and written after could land anywhere. So every write opens
//! each component of its path relative to the directory before it, never following a symlink:
//! what was checked is what is written, and a link in the way is an error, not a detour. The
//! search tools read the same way ([`open_read`]).

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// A directory beneath `root`, opened component by component without following symlinks, and
/// created (with the directories before it) when `create` says so. `relative` may not leave
/// `root` (`..` is refused).
pub fn open_dir(root: &Path, relative: &Path, create: bool) -> io::Result<OwnedFd> {
    let mut dir = rustix::fs::open(root, walk_flags(), Mode::empty())?;
    for component in relative.components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} leaves {}", relative.display(), root.display()),
                ));
            }
        };
        dir = match open_child(&dir, name) {
            Ok(child) => child,
            Err(error) if error.kind() == io::ErrorKind::NotFound && create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(error) => return Err(error.into()),
                }
                open_child(&dir, name)?
            }
            Err(error) => return Err(error),
        };
    }
    Ok(dir)
}

fn walk_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// The directory `name` in `dir`, never through a symlink; a symlink there is an error that
/// says so.
fn open_child(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    match rustix::fs::openat(dir, name, walk_flags() | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(child) => Ok(child),
        Err(_) if is_link(dir, name) => Err(linked(name)),
        Err(error) => Err(error.into()),
    }
}

fn is_link(dir: &impl AsFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

/// A symlink where a directory or a file of a path was expected.
#[derive(Debug)]
struct Linked(String);

impl std::fmt::Display for Linked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is a symbolic link: files are never written through a link",
            self.0
        )
    }
}

impl std::error::Error for Linked {}

fn linked(name: &OsStr) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        Linked(name.to_string_lossy().into_owned()),
    )
}

/// Whether `error` says the way to a path changed under a write: a symlink where a directory
/// was, or a directory gone or replaced by something else meanwhile.
pub fn way_changed(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<Linked>())
        || matches!(
            error.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        )
}

/// The file `relative` beneath the directory `root` (an open handle), opened to read with no
/// symlink followed anywhere on the way and without leaving `root` (`openat2` with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): what a walk that follows no link found and checked
/// is what is read, even if a directory on the way was swapped for a link since. A FIFO swapped
/// in is not waited on (reads of a regular file ignore `O_NONBLOCK`). `Unsupported` where the
/// kernel has no `openat2` (before Linux 5.6).
pub fn open_read(root: &impl AsFd, relative: &Path) -> io::Result<std::fs::File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    match rustix::fs::openat2(root, relative, flags, Mode::empty(), resolve) {
        Ok(file) => Ok(std::fs::File::from(file)),
        Err(rustix::io::Errno::NOSYS) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "openat2 is not available",
        )),
        Err(error) => Err(error.into()),
    }
}

/// Replaces (or creates) the file `name` in `dir` with `bytes`, never through a symlink;
/// `mode`, when given, becomes its permission bits.
pub fn write_file(dir: &OwnedFd, name: &OsStr, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o666)) {
        Ok(file) => file,
        Err(_) if is_link(dir, name) => return Err(linked(name)),
        Err(error) => return Err(error.into()),
    };
    if let Some(mode) = mode {
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
    }
    let mut file = std::fs::File::from(file);
    file.write_all(bytes)
}

/// Makes `name` in `dir` hold `bytes` (the target of a link when `link`), replacing what is
/// there in one rename: written whole under a temporary name first (and flushed), never
/// through a symlink. `executable` sets the file's mode to 0755 instead of 0644.
pub fn replace_file(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    link: bool,
    executable: bool,
) -> io::Result<()> {
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(".openvaala-restore");
    let _ = rustix::fs::unlinkat(dir, &temporary, AtFlags::empty());
    if link {
        rustix::fs::symlinkat(bytes_to_os(bytes), dir, &temporary)?;
    } else {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::from_raw_mode(if executable { 0o755 } else { 0o644 });
        let file = rustix::fs::openat(dir, &temporary, flags, mode)?;
        // The umask may have taken bits away.
        rustix::fs::fchmod(&file, mode)?;
        let mut file = std::fs::File::from(file);
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    // A directory where the file goes is removed first (a rename cannot replace it).
    if is_dir(dir, name) {
        std::fs::remove_dir_all(beneath_path(dir, name))?;
    }
    rustix::fs::renameat(dir, &temporary, dir, name)?;
    Ok(())
}

/// Removes the file (or link) `relative` beneath `root`, then the directories it leaves empty,
/// never through a symlink. A file already gone is fine.
pub fn remove_file(root: &Path, relative: &Path) -> io::Result<()> {
    let (parent, name) = split(relative)?;
    let dir = match open_dir(root, parent, false) {
        Ok(dir) => dir,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(error) => return Err(error.into()),
    }
    let mut emptied = parent;
    while let (Some(above), Some(Component::Normal(name))) =
        (emptied.parent(), emptied.components().next_back())
    {
        let Ok(dir) = open_dir(root, above, false) else {
            break;
        };
        if rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).is_err() {
            break;
        }
        emptied = above;
    }
    Ok(())
}

fn is_dir(dir: &OwnedFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

/// A path that names `name` in the directory `dir` is open on, whatever was renamed since.
fn beneath_path(dir: &OwnedFd, name: &OsStr) -> std::path::PathBuf {
    use std::os::fd::AsRawFd;
    Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name)
}

fn bytes_to_os(bytes: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(bytes)
}

/// Whether `relative`'s directories beneath `root` (not the last component, which may be a link
/// a tree holds) include a symlink, or something that is not a directory.
pub fn has_linked_ancestor(root: &Path, relative: &Path) -> bool {
    match relative.parent() {
        Some(parent) => match open_dir(root, parent, false) {
            Ok(_) => false,
            Err(error) => error.kind() != io::ErrorKind::NotFound,
        },
        None => false,
    }
}

/// Splits `relative` into its directory and its last component, which must be a name.
pub fn split(relative: &Path) -> io::Result<(&Path, &OsStr)> {
    match (relative.parent(), relative.components().next_back()) {
        (Some(parent), Some(Component::Normal(name))) => Ok((parent, name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", relative.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn writes_land_beneath_the_root_and_never_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = open_dir(root.path(), Path::new("a/b"), true).unwrap();
        write_file(&dir, OsStr::new("x.txt"), b"hello", None).unwrap();
        assert_eq!(
            std::fs::read(root.path().join("a/b/x.txt")).unwrap(),
            b"hello"
        );

        symlink(outside.path(), root.path().join("out")).unwrap();
        let error = open_dir(root.path(), Path::new("out/deeper"), true).unwrap_err();
        assert!(
            error.to_string().contains("`out` is a symbolic link"),
            "{error}"
        );
        assert!(!outside.path().join("deeper").exists());

        symlink(outside.path().join("f"), root.path().join("a/link")).unwrap();
        let dir = open_dir(root.path(), Path::new("a"), false).unwrap();
        let error = write_file(&dir, OsStr::new("link"), b"x", None).unwrap_err();
        assert!(
            error.to_string().contains("`link` is a symbolic link"),
            "{error}"
        );
        assert!(!outside.path().join("f").exists());

        assert!(open_dir(root.path(), Path::new("../x"), true).is_err());
        assert!(has_linked_ancestor(root.path(), Path::new("out/x")));
        assert!(!has_linked_ancestor(root.path(), Path::new("a/b/x.txt")));
        assert!(!has_linked_ancestor(root.path(), Path::new("new/x")));
    }

    #[test]
    fn reads_stay_beneath_the_root_and_never_go_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        std::fs::write(root.path().join("a/x.txt"), "inside").unwrap();
        std::fs::write(outside.path().join("x.txt"), "outside").unwrap();
        symlink(outside.path(), root.path().join("out")).unwrap();
        symlink(outside.path().join("x.txt"), root.path().join("a/link.txt")).unwrap();
        let dir = open_dir(root.path(), Path::new(""), false).unwrap();
        let read = |relative: &str| {
            open_read(&dir, Path::new(relative)).map(|file| std::io::read_to_string(file).unwrap())
        };
        assert_eq!(read("a/x.txt").unwrap(), "inside");
        for refused in ["out/x.txt", "a/link.txt", "../x.txt"] {
            assert!(read(refused).is_err(), "{refused}");
        }
    }
}
