//! The service's own state as the sandbox sees it: the data directory (conversations, the
//! index, remembered rules, the local API credential, checkpoints) and the config, which no
//! tool may read or write and which no conversation may work in. A fork's working tree, kept
//! in the data directory's `worktrees/`, is the one part of it a conversation may use.

use std::path::{Path, PathBuf};

/// The folder of the data directory that holds forks' working trees (`checkpoints::worktree`).
const WORKTREES: &str = "worktrees";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// The data directory, canonical; `None` in tools run outside a service (tests).
    data_dir: Option<PathBuf>,
    /// The config file, or the config directory when the file is in a folder of its own
    /// (`~/.config/openvaala/`), canonical.
    config: Option<PathBuf>,
}

impl Protected {
    /// The state of a service with `data_dir` and the config file `config_file` (which may be
    /// missing). Paths are made canonical, so a symlinked home still matches.
    pub fn new(data_dir: &Path, config_file: Option<&Path>) -> Protected {
        let config = config_file.map(|file| match file.parent() {
            Some(dir) if dir.file_name().is_some_and(|name| name == "openvaala") => {
                dir.to_path_buf()
            }
            _ => file.to_path_buf(),
        });
        Protected {
            data_dir: Some(canonical(data_dir)),
            config: config.map(|path| canonical(&path)),
        }
    }

    /// Every protected path.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.data_dir
            .iter()
            .chain(self.config.iter())
            .map(PathBuf::as_path)
    }

    /// Why `cwd` cannot be a conversation's working directory: the root, a directory that holds
    /// the service's state (the tools could then write it), or one inside that state (other
    /// than a fork's working tree). `None` when it can.
    pub fn refuses_cwd(&self, cwd: &Path) -> Option<String> {
        let cwd = canonical(cwd);
        if cwd == Path::new("/") {
            return Some(
                "the working directory may not be `/`: the tools could write everything the \
                 service can; choose a project directory"
                    .to_owned(),
            );
        }
        for (path, what) in self.named() {
            if path.starts_with(&cwd) {
                return Some(format!(
                    "the working directory {} contains the service's {what} ({}), which tools \
                     must not reach; choose a project directory",
                    cwd.display(),
                    path.display()
                ));
            }
            if cwd.starts_with(path) && !self.in_worktrees(&cwd) {
                return Some(format!(
                    "the working directory {} is inside the service's {what} ({}); choose a \
                     project directory",
                    cwd.display(),
                    path.display()
                ));
            }
        }
        None
    }

    /// Whether a tool may not read or write `path` (canonical: the file tools resolve it
    /// first): it is the service's state, and not a fork's working tree.
    pub fn covers(&self, path: &Path) -> bool {
        self.paths().any(|protected| path.starts_with(protected)) && !self.in_worktrees(path)
    }

    fn in_worktrees(&self, path: &Path) -> bool {
        self.data_dir
            .as_ref()
            .is_some_and(|data| path.starts_with(data.join(WORKTREES)))
    }

    fn named(&self) -> impl Iterator<Item = (&Path, &'static str)> {
        let data = self
            .data_dir
            .iter()
            .map(|path| (path.as_path(), "data directory"));
        data.chain(self.config.iter().map(|path| (path.as_path(), "config")))
    }
}

/// `path` with its symlinks resolved, as far as it exists (the rest kept as written).
pub(super) fn canonical(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => canonical(parent).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_directories_holding_the_state_are_refused() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let data = home.join(".local/share/openvaala");
        let config_dir = home.join(".config/openvaala");
        std::fs::create_dir_all(data.join("worktrees/c_1")).unwrap();
        std::fs::create_dir_all(&config_dir).unwrap();
        std::fs::create_dir_all(home.join("project")).unwrap();
        let protected = Protected::new(&data, Some(&config_dir.join("config.toml")));

        assert!(
            protected
                .refuses_cwd(Path::new("/"))
                .unwrap()
                .contains("may not be `/`")
        );
        let error = protected.refuses_cwd(&home).unwrap();
        assert!(
            error.contains("contains the service's data directory"),
            "{error}"
        );
        let error = protected.refuses_cwd(&home.join(".config")).unwrap();
        assert!(error.contains("contains the service's config"), "{error}");
        let error = protected.refuses_cwd(&data.join("conversations")).unwrap();
        assert!(
            error.contains("is inside the service's data directory"),
            "{error}"
        );
        assert_eq!(protected.refuses_cwd(&home.join("project")), None);
        // A fork's working tree lives in the data directory, and may be worked in.
        assert_eq!(protected.refuses_cwd(&data.join("worktrees/c_1")), None);

        assert!(protected.covers(&data.join("local-token")));
        assert!(protected.covers(&config_dir.join("config.toml")));
        assert!(!protected.covers(&data.join("worktrees/c_1/src/main.rs")));
        assert!(!protected.covers(&home.join("project/a.txt")));
    }

    #[test]
    fn a_config_file_outside_a_folder_of_its_own_is_protected_alone() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let protected = Protected::new(&dir.join("data"), Some(&dir.join("my.toml")));
        assert!(protected.covers(&dir.join("my.toml")));
        assert!(!protected.covers(&dir.join("other.toml")));
        assert!(protected.refuses_cwd(&dir).is_some());
    }
}
