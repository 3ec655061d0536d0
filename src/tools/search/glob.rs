//! `glob`: the files whose path below the start matches a pattern (`**/*.rs`), newest first
//! (by modification time, then by path), on the shared walk (`walk.rs`). The directories a
//! pattern starts with literally (`src/` of `src/**/*.rs`) are the only ones walked.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use ignore::WalkState;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::shown::{DEFAULT_LIMIT, Lines, MAX_LIMIT, count};
use super::walk::{self, Root, SearchContext};
use crate::tools::call::{optional_count, optional_string, required_string};

/// The newest paths found so far, and how many there were in all.
struct Found {
    limit: usize,
    /// (modification time, shown path); trimmed to the newest `limit` now and then.
    newest: Vec<(SystemTime, String)>,
    total: u64,
    unreadable: u64,
}

impl Found {
    fn add(&mut self, modified: SystemTime, path: String) {
        self.total += 1;
        self.newest.push((modified, path));
        // Trimming only at twice the limit keeps the sorting amortised.
        if self.newest.len() >= 2 * self.limit.max(64) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        self.newest
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        self.newest.truncate(self.limit);
    }
}

pub(super) fn run(
    arguments: &Value,
    search: &SearchContext,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let pattern = required_string(arguments, "pattern")?;
    if pattern.is_empty() {
        return Err("parameter `pattern` must not be empty".to_owned());
    }
    if walk::leaves_the_start(pattern) {
        return Err(format!(
            "the pattern `{pattern}` is matched against paths below `path`: give the directory \
             as `path` and a pattern relative to it"
        ));
    }
    let limit = optional_count(arguments, "limit", 1..=MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    let matcher = walk::compile_glob(pattern)?;
    let root = Root::new(search, optional_string(arguments, "path")?)?;
    if !root.is_dir {
        return Err(format!(
            "{} is not a directory",
            optional_string(arguments, "path")?.unwrap_or_default()
        ));
    }
    let found = Mutex::new(Found {
        limit: limit as usize,
        newest: Vec::new(),
        total: 0,
        unreadable: 0,
    });
    if let Some(start) = walk_start(&root, pattern, search) {
        walk::walker(&start, search.sandbox.as_ref(), walk::names_hidden(pattern)).run(|| {
            let (found, matcher, root) = (&found, &matcher, &root);
            Box::new(move |entry| {
                let entry = match walk::reached(entry, cancel, || lock(found).unreadable += 1) {
                    Ok(entry) => entry,
                    Err(state) => return state,
                };
                if entry.file_type().is_none_or(|kind| kind.is_dir()) {
                    return WalkState::Continue;
                }
                let path = entry.path();
                let relative = path.strip_prefix(&root.real).unwrap_or(path);
                if !matcher.is_match(relative) {
                    return WalkState::Continue;
                }
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|metadata| metadata.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                lock(found).add(modified, root.show(path));
                WalkState::Continue
            })
        });
    }
    if cancel.is_cancelled() {
        return Err("`glob` was interrupted".to_owned());
    }
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.trim();
    let mut lines = Lines::new(search.max_output_bytes);
    let mut shown = 0;
    for (_, path) in &found.newest {
        if !lines.push(path) {
            break;
        }
        shown += 1;
    }
    let mut notes = Vec::new();
    if found.total == 0 {
        notes.push(format!(
            "no files match `{}`",
            crate::redact::redact(pattern)
        ));
    }
    if found.total > shown {
        notes.push(format!(
            "[... {}: narrow `pattern` or `path`, or raise `limit` ...]",
            count(found.total - shown, "more file")
        ));
    }
    if found.unreadable > 0 {
        notes.push(match found.unreadable {
            1 => "[1 directory could not be read]".to_owned(),
            n => format!("[{n} directories could not be read]"),
        });
    }
    Ok(lines.finish(&notes))
}

/// Where the walk starts: below `root`, the directories the pattern names literally, when they
/// are real directories (no link on the way, which the walk would otherwise follow) the
/// sandbox lets it read; `None` when they do not exist.
fn walk_start(root: &Root, pattern: &str, search: &SearchContext) -> Option<PathBuf> {
    let prefix = walk::literal_prefix(pattern);
    if prefix.as_os_str().is_empty() {
        return Some(root.real.clone());
    }
    let start = root.real.join(&prefix);
    match start.canonicalize() {
        Ok(real) if real == start && real.is_dir() => {
            let allowed = search
                .sandbox
                .as_ref()
                .is_none_or(|policy| walk::readable(policy, &real));
            allowed.then_some(real)
        }
        Ok(_) => Some(root.real.clone()),
        Err(_) => None,
    }
}

fn lock(found: &Mutex<Found>) -> std::sync::MutexGuard<'_, Found> {
    found
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn tree(files: &[&str]) -> (tempfile::TempDir, SearchContext) {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        // Each file a minute older than the one before it.
        for (n, path) in files.iter().enumerate() {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, "x").unwrap();
            let file = std::fs::File::options().write(true).open(&full).unwrap();
            file.set_modified(now - Duration::from_secs(60 * n as u64))
                .unwrap();
        }
        let search = SearchContext {
            cwd: dir.path().to_path_buf(),
            max_output_bytes: 64 * 1024,
            sandbox: Some(Arc::new(crate::sandbox::SandboxPolicy::default())),
        };
        (dir, search)
    }

    fn names(output: &str) -> Vec<&str> {
        output.lines().collect()
    }

    fn glob(search: &SearchContext, arguments: Value) -> Result<String, String> {
        run(&arguments, search, &CancellationToken::new())
    }

    #[test]
    fn matches_come_newest_first_and_ignored_files_stay_out() {
        let (dir, search) = tree(&[
            "src/new.rs",
            "src/deep/mid.rs",
            "old.rs",
            "notes.md",
            "target/gen.rs",
            ".gitignore",
            ".github/ci.yml",
        ]);
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        let output = glob(&search, json!({"pattern": "**/*.rs"})).unwrap();
        assert_eq!(names(&output), ["src/new.rs", "src/deep/mid.rs", "old.rs"]);
        let output = glob(&search, json!({"pattern": "*.rs"})).unwrap();
        assert_eq!(names(&output), ["old.rs"]);
        let output = glob(&search, json!({"pattern": "src/*.rs"})).unwrap();
        assert_eq!(names(&output), ["src/new.rs"]);
        let output = glob(&search, json!({"pattern": "*.rs", "path": "src/deep"})).unwrap();
        assert_eq!(names(&output), ["src/deep/mid.rs"]);
        let output = glob(&search, json!({"pattern": ".github/*.yml"})).unwrap();
        assert_eq!(names(&output), [".github/ci.yml"]);
        assert_eq!(
            glob(&search, json!({"pattern": "**/*.py"})).unwrap(),
            "no files match `**/*.py`"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "lib/**/*.rs"})).unwrap(),
            "no files match `lib/**/*.rs`"
        );
    }

    #[test]
    fn the_limit_says_how_many_more() {
        let (_dir, search) = tree(&["a.rs", "b.rs", "c.rs", "d.rs"]);
        assert_eq!(
            glob(&search, json!({"pattern": "*.rs", "limit": 2})).unwrap(),
            "a.rs\nb.rs\n[... 2 more files: narrow `pattern` or `path`, or raise `limit` ...]"
        );
    }

    #[test]
    fn a_link_on_the_way_is_not_followed() {
        let (dir, search) = tree(&["real/a.rs"]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("b.rs"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        assert_eq!(
            glob(&search, json!({"pattern": "link/*.rs"})).unwrap(),
            "no files match `link/*.rs`"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "**/*.rs"})).unwrap(),
            "real/a.rs"
        );
    }

    #[test]
    fn bad_calls_say_what_is_wrong() {
        let (_dir, search) = tree(&["a.rs"]);
        assert_eq!(
            glob(&search, json!({"pattern": "../*.rs"})).unwrap_err(),
            "the pattern `../*.rs` is matched against paths below `path`: give the directory \
             as `path` and a pattern relative to it"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "a/[b"})).unwrap_err(),
            "invalid glob `a/[b`: unclosed character class; missing ']'"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "*", "path": "a.rs"})).unwrap_err(),
            "a.rs is not a directory"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "*", "path": "missing"})).unwrap_err(),
            "no such file or directory: missing"
        );
        assert_eq!(
            glob(&search, json!({"pattern": "*", "limit": 0})).unwrap_err(),
            "parameter `limit` must be a whole number from 1 to 10000"
        );
    }
}
