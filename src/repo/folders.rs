//! The folders a kind of file (`skills`, `commands`) is looked for in: the user's config
//! directory first, then each directory from the repository's top down to the working
//! directory (outside a repository, the working directory alone). A file found later wins a
//! name, so a repository's overrides the user's, and a deeper directory's its parent's.

use std::path::{Path, PathBuf};

/// Where a file came from, as clients are shown it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The user's config directory (`skills/`, `commands/` beside `config.toml`).
    User,
    /// An `.agents/` folder (or `.claude/`) from the repository's top down to the directory.
    Repository,
}

/// One folder to look in: `base` is a directory trusted as it is (the user's, or one on the
/// way down to the working directory), `relative` the part below it that is walked without
/// following a symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub base: PathBuf,
    pub relative: PathBuf,
    pub origin: Origin,
}

impl Folder {
    pub fn path(&self) -> PathBuf {
        self.base.join(&self.relative)
    }
}

/// The folders for `kind`, lowest priority first: `<user_dir>/<kind>/`, then for each
/// directory from the repository's top down to `cwd`, each of `repository_dirs` (such as
/// `.agents`) joined with `kind`.
pub fn folders(
    kind: &str,
    repository_dirs: &[&str],
    cwd: &Path,
    user_dir: Option<&Path>,
) -> Vec<Folder> {
    let mut found: Vec<Folder> = user_dir
        .map(|dir| Folder {
            base: dir.to_path_buf(),
            relative: PathBuf::from(kind),
            origin: Origin::User,
        })
        .into_iter()
        .collect();
    for dir in repository_chain(cwd) {
        for shared in repository_dirs {
            found.push(Folder {
                base: dir.clone(),
                relative: Path::new(shared).join(kind),
                origin: Origin::Repository,
            });
        }
    }
    found
}

/// The directories from the repository's top (the nearest ancestor holding `.git`) down to
/// `cwd`, top first; just `cwd` outside a repository.
pub fn repository_chain(cwd: &Path) -> Vec<PathBuf> {
    let top = repository_top(cwd);
    let mut dirs: Vec<PathBuf> = cwd
        .ancestors()
        .take_while(|dir| top.as_deref().is_none_or(|top| dir.starts_with(top)))
        .map(Path::to_path_buf)
        .collect();
    if top.is_none() {
        dirs.truncate(1);
    }
    dirs.reverse();
    dirs
}

/// The nearest directory at or above `cwd` that holds `.git` (a directory, or the file of a
/// worktree).
pub fn repository_top(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_folder_comes_first_then_the_repository_from_its_top_down() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let deep = repo.join("crates/core");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        let user = root.path().join("config");
        let found = folders("skills", &[".agents", ".claude"], &deep, Some(&user));
        let paths: Vec<PathBuf> = found.iter().map(Folder::path).collect();
        assert_eq!(
            paths,
            [
                user.join("skills"),
                repo.join(".agents/skills"),
                repo.join(".claude/skills"),
                repo.join("crates/.agents/skills"),
                repo.join("crates/.claude/skills"),
                deep.join(".agents/skills"),
                deep.join(".claude/skills"),
            ]
        );
        assert_eq!(found[0].origin, Origin::User);
        assert!(found[1..].iter().all(|f| f.origin == Origin::Repository));
        // Outside a repository: the working directory alone.
        let plain = root.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert_eq!(repository_chain(&plain), [plain]);
    }
}
