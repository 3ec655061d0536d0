//! Reading a folder's files from the service, never through a symlink below the folder's base
//! (`sandbox::beneath`): the model may have written the repository, and a link it planted
//! (`.agents/skills -> /var/lib/openvaala`) must read as nothing, not as someone else's files.
//! Only regular files are read (a FIFO is not waited on), each at most `MAX_FILE_BYTES`.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use super::Folder;
use crate::sandbox::beneath;

/// The largest file read; a longer one is refused, not cut.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The most entries one folder is read for, and the most files a skill lists beside it.
const MAX_ENTRIES: usize = 500;
const MAX_LISTED: usize = 100;

/// One file found: where it is, the name it was found under, and its text or why not.
#[derive(Debug)]
pub struct Found {
    pub path: PathBuf,
    pub name: String,
    pub text: Result<String, String>,
}

/// The longest name of a file named by its name (a command's, an agent's), before `.md`.
pub const NAME_MAX: usize = 64;

impl Found {
    /// The name of a file named by its file name (`review.md` is `review`: 1 to `NAME_MAX`
    /// lowercase letters, digits, `-` or `_`) and its text; `Err` names the rule broken, `what`
    /// saying whose file it is (`a command's`).
    pub fn named_text(&self, what: &str) -> Result<(String, &str), String> {
        let name = self.name.trim_end_matches(".md").to_owned();
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c);
        if name.is_empty() || name.len() > NAME_MAX || !name.chars().all(allowed) {
            return Err(format!(
                "{what} file name must be 1 to {NAME_MAX} lowercase letters, digits, `-` or `_` \
                 before `.md` (`{}` is not)",
                self.name
            ));
        }
        let text = self
            .text
            .as_ref()
            .map_err(|why| format!("the file {why}"))?;
        Ok((name, text))
    }
}

/// The file a kind of entry needs (`SKILL.md`) found in a directory of its own (`name` is the
/// directory's), and the other files beside it (relative; a directory ends with `/`).
#[derive(Debug)]
pub struct FoundDir {
    pub file: Found,
    pub beside: Vec<String>,
}

/// The files named `*.md` directly in `folder`, in name order. A folder that is missing, or
/// reached through a symlink, has none.
pub fn markdown_files(folder: &Folder) -> Vec<Found> {
    let Some(dir) = open_folder(folder) else {
        return Vec::new();
    };
    let path = folder.path();
    entries(&dir)
        .into_iter()
        .filter(|(name, kind)| name.ends_with(".md") && *kind != FileType::Directory)
        .map(|(name, _)| Found {
            path: path.join(&name),
            text: read(&dir, Path::new(&name)),
            name,
        })
        .collect()
}

/// The directories directly in `folder` that hold `file_name`, in name order.
pub fn dirs_with(folder: &Folder, file_name: &str) -> Vec<FoundDir> {
    let Some(dir) = open_folder(folder) else {
        return Vec::new();
    };
    let path = folder.path();
    entries(&dir)
        .into_iter()
        .filter(|(_, kind)| *kind == FileType::Directory)
        .filter_map(|(name, _)| {
            let child = open_child(&dir, OsStr::new(&name))?;
            let text = read(&child, Path::new(file_name));
            // A directory without the file is not an entry at all.
            if matches!(&text, Err(error) if error == MISSING) {
                return None;
            }
            let beside = entries(&child)
                .into_iter()
                .filter(|(entry, _)| entry != file_name)
                .take(MAX_LISTED)
                .map(|(entry, kind)| match kind {
                    FileType::Directory => format!("{entry}/"),
                    _ => entry,
                })
                .collect();
            Some(FoundDir {
                file: Found {
                    path: path.join(&name).join(file_name),
                    name: name.clone(),
                    text,
                },
                beside,
            })
        })
        .collect()
}

const MISSING: &str = "missing";

fn open_folder(folder: &Folder) -> Option<OwnedFd> {
    let walked = beneath::open_dir(&folder.base, &folder.relative, false).ok()?;
    // The walk's handle only names the directory; reading it takes one opened to read.
    rustix::fs::openat(
        &walked,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

fn open_child(dir: &OwnedFd, name: &OsStr) -> Option<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The names in `dir` (not `.` or `..`, not hidden, UTF-8 only) with their types, sorted; a
/// symlink is left out.
fn entries(dir: &OwnedFd) -> Vec<(String, FileType)> {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    let mut names: Vec<(String, FileType)> = listing
        .filter_map(Result::ok)
        .take(MAX_ENTRIES)
        .filter_map(|entry| {
            let name = entry.file_name().to_str().ok()?.to_owned();
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    rustix::fs::statat(dir, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .map(|stat| FileType::from_raw_mode(stat.st_mode))
                        .ok()?
                }
                kind => kind,
            };
            (!name.starts_with('.') && kind != FileType::Symlink).then_some((name, kind))
        })
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    names
}

/// The text of `relative` in `dir` when it is a regular UTF-8 file of at most `MAX_FILE_BYTES`.
fn read(dir: &impl AsFd, relative: &Path) -> Result<String, String> {
    let mut file = match beneath::open_read(dir, relative) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(MISSING.to_owned());
        }
        Err(error) => return Err(format!("cannot be read ({error})")),
    };
    let metadata = file
        .metadata()
        .map_err(|error| format!("cannot be read ({error})"))?;
    if !metadata.is_file() {
        return Err("is not a regular file".to_owned());
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "is {} bytes, more than the {MAX_FILE_BYTES} read",
            metadata.len()
        ));
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot be read ({error})"))?;
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::Origin;

    fn folder(base: &Path, relative: &str) -> Folder {
        Folder {
            base: base.to_path_buf(),
            relative: PathBuf::from(relative),
            origin: Origin::Repository,
        }
    }

    #[test]
    fn a_planted_link_anywhere_below_the_base_reads_as_nothing() {
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("secret");
        std::fs::create_dir_all(secret.join("skill")).unwrap();
        std::fs::write(secret.join("skill/SKILL.md"), "---\nname: x\n---\n").unwrap();
        std::fs::write(secret.join("notes.md"), "private").unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".agents/skills")).unwrap();
        // The folder itself a link, and a skill directory and a command file that are links.
        std::os::unix::fs::symlink(&secret, repo.join(".agents/commands")).unwrap();
        std::os::unix::fs::symlink(secret.join("skill"), repo.join(".agents/skills/leak")).unwrap();
        std::fs::create_dir_all(repo.join("other/.agents/commands")).unwrap();
        std::os::unix::fs::symlink(
            secret.join("notes.md"),
            repo.join("other/.agents/commands/leak.md"),
        )
        .unwrap();
        assert!(markdown_files(&folder(&repo, ".agents/commands")).is_empty());
        assert!(dirs_with(&folder(&repo, ".agents/skills"), "SKILL.md").is_empty());
        assert!(markdown_files(&folder(&repo.join("other"), ".agents/commands")).is_empty());
    }

    #[test]
    fn files_are_read_in_name_order_and_a_skill_lists_what_is_beside_it() {
        let root = tempfile::tempdir().unwrap();
        let skills = root.path().join(".agents/skills");
        std::fs::create_dir_all(skills.join("b/scripts")).unwrap();
        std::fs::create_dir_all(skills.join("a")).unwrap();
        std::fs::create_dir_all(skills.join("not-a-skill")).unwrap();
        std::fs::write(skills.join("b/SKILL.md"), "B").unwrap();
        std::fs::write(skills.join("b/reference.md"), "ref").unwrap();
        std::fs::write(skills.join("a/SKILL.md"), vec![b'x'; 300 * 1024]).unwrap();
        let found = dirs_with(&folder(root.path(), ".agents/skills"), "SKILL.md");
        let names: Vec<&str> = found.iter().map(|f| f.file.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(
            found[0]
                .file
                .text
                .as_ref()
                .unwrap_err()
                .contains("more than")
        );
        assert_eq!(found[1].file.text.as_deref(), Ok("B"));
        assert_eq!(found[1].beside, ["reference.md", "scripts/"]);
        assert_eq!(found[1].file.path, skills.join("b/SKILL.md"));
    }
}
