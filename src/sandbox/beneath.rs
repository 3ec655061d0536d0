//! Writes that no symlink can redirect. The file tools and checkpoint restores write from the
//! service, while a sandboxed process may be swapping a directory for a symlink at the same
//! moment: a path checked first and written after could land anywhere. So every write opens
//! each component of its path relative to the directory before it, never following a symlink:
//! what was checked is what is written, and a link in the way is an error, not a detour.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

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

fn linked(name: &OsStr) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "`{}` is a symbolic link: files are never written through a link",
            name.to_string_lossy()
        ),
    )
}

/// Replaces (or creates) the file `name` in `dir` with `bytes`, never through a symlink.
pub fn write_file(dir: &OwnedFd, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o666)) {
        Ok(file) => file,
        Err(_) if is_link(dir, name) => return Err(linked(name)),
        Err(error) => return Err(error.into()),
    };
    let mut file = std::fs::File::from(file);
    file.write_all(bytes)
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
        write_file(&dir, OsStr::new("x.txt"), b"hello").unwrap();
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
        let error = write_file(&dir, OsStr::new("link"), b"x").unwrap_err();
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
}
