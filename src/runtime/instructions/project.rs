//! The AGENTS.md files a request carries: a global one beside the config file, then those of the
//! repository from its top down to the working directory, each after its parent's. The files
//! are the user's (or the model's, which may write them), so each is opened without following
//! a symlink and read only when it is a regular file: a link planted in the working directory
//! cannot pull another file (the service's own state) into a request.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The file name looked for in each directory.
pub const FILE_NAME: &str = "AGENTS.md";

/// What all the files together may take; the rest is cut with a note.
pub const MAX_BYTES: usize = 64 * 1024;

pub use crate::repo::folders::{repository_chain as chain, repository_top};

/// The AGENTS.md files of `global_dir` and of the chain down to `cwd`, as one text with a
/// heading naming each file; `None` when there are none.
pub fn read(global_dir: Option<&Path>, cwd: &Path) -> Option<String> {
    let files = global_dir
        .into_iter()
        .map(Path::to_path_buf)
        .chain(chain(cwd))
        .map(|dir| dir.join(FILE_NAME));
    let mut text = String::new();
    let mut left = MAX_BYTES;
    for path in files {
        let Some(content) = read_regular(&path, left) else {
            continue;
        };
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("Instructions from {}:\n", path.display()));
        let content = match content {
            Content::Whole(content) => content,
            Content::Cut { shown, size } => format!(
                "{shown}\n[... {} cut here: the instructions may take {MAX_BYTES} bytes in all, \
                 and this file has {size} ...]",
                FILE_NAME
            ),
        };
        left = left.saturating_sub(content.len());
        text.push_str(&content);
        if left == 0 {
            break;
        }
    }
    (!text.is_empty()).then_some(text)
}

enum Content {
    Whole(String),
    Cut { shown: String, size: u64 },
}

/// The file's text when it is a regular file (not through a symlink), at most `cap` bytes of it
/// cut on a character boundary; `None` when absent, unreadable or empty.
fn read_regular(path: &Path, cap: usize) -> Option<Content> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO would wait for a writer that never comes; a link is not followed.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(cap as u64).read_to_end(&mut bytes).ok()?;
    let cut = (bytes.len() as u64) < metadata.len();
    if cut {
        // A character the cap split in two is dropped whole.
        if let Err(error) = std::str::from_utf8(&bytes)
            && error.error_len().is_none()
        {
            bytes.truncate(error.valid_up_to());
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if text.trim().is_empty() {
        return None;
    }
    Some(if cut {
        Content::Cut {
            shown: text,
            size: metadata.len(),
        }
    } else {
        Content::Whole(text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_runs_from_the_repository_top_down_to_the_cwd() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let deep = repo.join("crates/core");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        assert_eq!(
            chain(&deep),
            vec![repo.clone(), repo.join("crates"), deep.clone()]
        );
        // Outside a repository, only the working directory's own file counts.
        let plain = root.path().join("plain/sub");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(chain(&plain), vec![plain.clone()]);
    }

    #[test]
    fn files_come_global_first_then_top_down() {
        let root = tempfile::tempdir().unwrap();
        let global = root.path().join("config");
        let repo = root.path().join("repo");
        let sub = repo.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(&global).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        std::fs::write(global.join(FILE_NAME), "global rule").unwrap();
        std::fs::write(repo.join(FILE_NAME), "repo rule").unwrap();
        std::fs::write(sub.join(FILE_NAME), "sub rule").unwrap();
        let text = read(Some(&global), &sub).unwrap();
        let global_at = text.find("global rule").unwrap();
        let repo_at = text.find("repo rule").unwrap();
        let sub_at = text.find("sub rule").unwrap();
        assert!(global_at < repo_at && repo_at < sub_at, "{text}");
        assert!(text.contains(&format!(
            "Instructions from {}:\nsub rule",
            sub.join(FILE_NAME).display()
        )));
        assert_eq!(read(None, root.path()), None);
    }

    #[test]
    fn a_symlink_or_a_fifo_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "token-123").unwrap();
        let cwd = dir.path().join("work");
        std::fs::create_dir(&cwd).unwrap();
        std::os::unix::fs::symlink(&secret, cwd.join(FILE_NAME)).unwrap();
        assert_eq!(read(None, &cwd), None);

        std::fs::remove_file(cwd.join(FILE_NAME)).unwrap();
        let fifo = std::ffi::CString::new(cwd.join(FILE_NAME).to_str().unwrap()).unwrap();
        // SAFETY: mkfifo only reads the NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(read(None, &cwd), None);
    }

    #[test]
    fn a_long_file_is_cut_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "é".repeat(MAX_BYTES)).unwrap();
        let text = read(None, dir.path()).unwrap();
        assert!(text.contains("cut here"), "{}", &text[text.len() - 200..]);
        assert!(text.len() < MAX_BYTES + 400);
        assert!(!text.contains('\u{FFFD}'));
    }
}
