//! The walk `grep` and `glob` share: where it starts ([`Root`]: checked like a `read_file` path,
//! then made real), what it skips (entries `.gitignore`, `.ignore` and `.git/info/exclude`
//! ignore, hidden entries, `.git`, and under a sandbox whatever `read_file` would refuse, a
//! refused directory pruned whole), and how the paths it finds are shown to the model (as it
//! gave the start: relative to the working directory, or absolute). No symlink is followed
//! below the start, so every path the walk gives is real and the sandbox judges it as it is.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};

use crate::sandbox::{SandboxPolicy, paths as sandbox_paths};

/// What a search call needs of its tool context, owned, for its blocking thread.
pub(super) struct SearchContext {
    pub cwd: PathBuf,
    pub max_output_bytes: usize,
    /// The sandbox's read rules, when it is enforced.
    pub sandbox: Option<Arc<SandboxPolicy>>,
}

impl SearchContext {
    pub fn new(ctx: &crate::tools::call::ToolContext) -> SearchContext {
        SearchContext {
            cwd: ctx.cwd.clone(),
            max_output_bytes: ctx.max_output_bytes,
            sandbox: ctx
                .sandbox
                .enforced()
                .then(|| Arc::new(ctx.sandbox.clone())),
        }
    }
}

/// Where a walk starts.
pub(super) struct Root {
    /// The start with its links resolved.
    pub real: PathBuf,
    /// The start as the model wrote it (empty for the working directory): paths below it are
    /// shown under it.
    shown: PathBuf,
    pub is_dir: bool,
}

impl Root {
    /// The start of a walk from the `path` parameter (the working directory when absent),
    /// allowed by the sandbox as `read_file` would allow it.
    pub fn new(search: &SearchContext, path: Option<&str>) -> Result<Root, String> {
        let path = path.filter(|path| !path.is_empty());
        let given = search.cwd.join(path.unwrap_or(""));
        let name = || path.map_or_else(|| search.cwd.display().to_string(), str::to_owned);
        if let Some(policy) = &search.sandbox {
            sandbox_paths::check_read(policy, &search.cwd, &given)?;
        }
        let real = std::fs::canonicalize(&given).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => format!("no such file or directory: {}", name()),
            _ => format!("could not read {}: {error}", name()),
        })?;
        let metadata = std::fs::metadata(&real)
            .map_err(|error| format!("could not read {}: {error}", name()))?;
        Ok(Root {
            real,
            shown: PathBuf::from(path.unwrap_or("")),
            is_dir: metadata.is_dir(),
        })
    }

    /// How the path `found` (below `real`, as the walk gave it) is shown.
    pub fn show(&self, found: &Path) -> String {
        let relative = found.strip_prefix(&self.real).unwrap_or(found);
        if relative.as_os_str().is_empty() {
            return self.shown.to_string_lossy().into_owned();
        }
        self.shown.join(relative).to_string_lossy().into_owned()
    }
}

/// A walk from `start` (a real directory or file), skipping what the module doc says; with
/// `hidden`, hidden entries are walked too (but never `.git`).
pub(super) fn walker(
    start: &Path,
    sandbox: Option<&Arc<SandboxPolicy>>,
    hidden: bool,
) -> ignore::WalkParallel {
    let sandbox = sandbox.cloned();
    ignore::WalkBuilder::new(start)
        .hidden(!hidden)
        // A project's `.gitignore` counts even outside a repository (a copied tree, a
        // scratch folder), and a person's global excludes do not: results do not depend on
        // whose home the service runs in.
        .require_git(false)
        .git_global(false)
        .follow_links(false)
        .threads(threads())
        .filter_entry(move |entry| {
            entry.file_name() != ".git"
                && sandbox
                    .as_ref()
                    .is_none_or(|policy| readable(policy, entry.path()))
        })
        .build_parallel()
}

/// Whether `read_file` may read the real path `path`. Asked of a directory before the walk
/// enters it, so a refused directory (the service's state) is skipped whole.
/// An entry the walk reached, or what the walk does instead: quit once the call is cancelled,
/// go on past an error (`unreadable` counts one that was the file system's).
pub(super) fn reached(
    entry: Result<ignore::DirEntry, ignore::Error>,
    cancel: &tokio_util::sync::CancellationToken,
    unreadable: impl FnOnce(),
) -> Result<ignore::DirEntry, ignore::WalkState> {
    if cancel.is_cancelled() {
        return Err(ignore::WalkState::Quit);
    }
    entry.map_err(|error| {
        if error.is_io() {
            unreadable();
        }
        ignore::WalkState::Continue
    })
}

pub(super) fn readable(policy: &SandboxPolicy, path: &Path) -> bool {
    sandbox_paths::check_real(policy, path, path).is_ok()
}

/// Walking threads: the walk waits on the disk as much as on the processor, so even two
/// cores gain from two threads.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// Whether a glob names hidden entries itself (`.github/**/*.yml`, `**/.env`): the walk then
/// includes hidden entries.
pub(super) fn names_hidden(pattern: &str) -> bool {
    pattern
        .split('/')
        .any(|part| part.starts_with('.') && part != "." && part != "..")
}

/// A glob compiled as the tools take it: `*` and `?` stop at `/`, `**` crosses directories,
/// `{a,b}` chooses.
pub(super) fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| format!("invalid glob `{pattern}`: {}", glob_error(&error)))
}

/// globset's message without the pattern it repeats.
fn glob_error(error: &globset::Error) -> String {
    error.kind().to_string()
}

/// The directories at the start of `pattern` that hold no wildcard (`src/tools` of
/// `src/tools/**/*.rs`): the walk need not look elsewhere. Empty when the first part already
/// has one, or when no directory comes before the last part.
pub(super) fn literal_prefix(pattern: &str) -> PathBuf {
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut prefix = PathBuf::new();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if part.is_empty() || part.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            break;
        }
        prefix.push(part);
    }
    prefix
}

/// Whether `path` goes up (`..`) or starts at the root: a pattern is matched against paths
/// below the start of the walk, which never do.
pub(super) fn leaves_the_start(pattern: &str) -> bool {
    Path::new(pattern)
        .components()
        .any(|part| matches!(part, Component::ParentDir | Component::RootDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_hidden_names() {
        assert_eq!(literal_prefix("src/tools/**/*.rs"), Path::new("src/tools"));
        assert_eq!(literal_prefix("src/*.rs"), Path::new("src"));
        assert_eq!(literal_prefix("**/*.rs"), Path::new(""));
        assert_eq!(literal_prefix("*.rs"), Path::new(""));
        assert_eq!(literal_prefix("src"), Path::new(""));
        assert_eq!(literal_prefix("a/{b,c}/d.rs"), Path::new("a"));
        assert!(names_hidden(".github/**/*.yml"));
        assert!(names_hidden("**/.env"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("**/*.rs"));
        assert!(leaves_the_start("../other/*.rs"));
        assert!(leaves_the_start("/etc/*.conf"));
        assert!(!leaves_the_start("src/**/*.rs"));
    }

    #[test]
    fn globs_stop_at_slashes_but_double_stars() {
        let glob = compile_glob("src/*.rs").unwrap();
        assert!(glob.is_match("src/a.rs"));
        assert!(!glob.is_match("src/deep/a.rs"));
        let glob = compile_glob("src/**/*.{ts,tsx}").unwrap();
        assert!(glob.is_match("src/a.ts"));
        assert!(glob.is_match("src/deep/er/a.tsx"));
        assert_eq!(
            compile_glob("src/[a.rs").unwrap_err(),
            "invalid glob `src/[a.rs`: unclosed character class; missing ']'"
        );
    }

    #[test]
    fn found_paths_are_shown_under_the_start_as_given() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "").unwrap();
        let search = SearchContext {
            cwd: dir.path().to_path_buf(),
            max_output_bytes: 1000,
            sandbox: Some(Arc::new(SandboxPolicy::default())),
        };
        let root = Root::new(&search, None).unwrap();
        assert!(root.is_dir);
        assert_eq!(root.show(&root.real.join("src/a.rs")), "src/a.rs");
        let root = Root::new(&search, Some("./src")).unwrap();
        assert_eq!(root.show(&root.real.join("a.rs")), "./src/a.rs");
        let root = Root::new(&search, Some("src/a.rs")).unwrap();
        assert!(!root.is_dir);
        assert_eq!(root.show(&root.real), "src/a.rs");
        let absolute = dir.path().join("src");
        let root = Root::new(&search, absolute.to_str()).unwrap();
        assert_eq!(
            root.show(&root.real.join("a.rs")),
            absolute.join("a.rs").to_str().unwrap()
        );
        assert_eq!(
            Root::new(&search, Some("nowhere")).err().unwrap(),
            "no such file or directory: nowhere"
        );
        let error = Root::new(&search, Some("/proc/self/environ"))
            .err()
            .unwrap();
        assert!(error.contains("is a process's environment"), "{error}");
    }
}
