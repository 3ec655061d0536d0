//! `grep`: the lines of files that match a regular expression, searched with ripgrep's own
//! crates on the shared walk (`walk.rs`). Binary files (a NUL byte) are skipped. Results come
//! in path order, so the same search gives the same answer, and past the limit or the output
//! cap a note says how many more there are.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkState;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::hits::{FileHits, FileSink, Hits, Mode, RowKind};
use super::shown::{DEFAULT_LIMIT, Lines, MAX_LIMIT, count};
use super::walk::{self, Root, SearchContext};
use crate::sandbox;
use crate::tools::call::{optional_bool, optional_count, optional_string, required_string};

/// The most context lines around a match.
pub(crate) const MAX_CONTEXT: u64 = 100;

struct Params {
    pattern: String,
    root: Root,
    /// Matched against a file's path below the start (or its name, for a glob without `/`).
    glob: Option<(globset::GlobMatcher, bool)>,
    hidden: bool,
    matcher: RegexMatcher,
    mode: Mode,
    context: usize,
    limit: u64,
}

pub(super) fn run(
    arguments: &Value,
    search: &SearchContext,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let params = params(arguments, search)?;
    let hits = walk_and_search(&params, search, cancel);
    if cancel.is_cancelled() {
        return Err("`grep` was interrupted".to_owned());
    }
    Ok(render(&params, hits, search.max_output_bytes))
}

fn params(arguments: &Value, search: &SearchContext) -> Result<Params, String> {
    let pattern = required_string(arguments, "pattern")?;
    if pattern.is_empty() {
        return Err("parameter `pattern` must not be empty".to_owned());
    }
    let case_insensitive = optional_bool(arguments, "case_insensitive")?.unwrap_or(false);
    let mode = match optional_string(arguments, "output_mode")? {
        None | Some("files_with_matches") => Mode::FilesWithMatches,
        Some("content") => Mode::Content,
        Some("count") => Mode::Count,
        Some(other) => {
            return Err(format!(
                "parameter `output_mode` must be `files_with_matches`, `content` or `count`, \
                 not `{other}`"
            ));
        }
    };
    let context = optional_count(arguments, "context", 0..=MAX_CONTEXT)?.unwrap_or(0);
    if context > 0 && mode != Mode::Content {
        return Err("parameter `context` needs `output_mode` = `content`".to_owned());
    }
    let limit = optional_count(arguments, "limit", 1..=MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    let glob_text = optional_string(arguments, "glob")?.filter(|glob| !glob.is_empty());
    let glob = glob_text
        .map(|glob| walk::compile_glob(glob).map(|matcher| (matcher, glob.contains('/'))))
        .transpose()?;
    // A pattern matches within a line: `\n` in it could never match and slows every search.
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|error| format!("invalid regex `{pattern}`: {error}"))?;
    let root = Root::new(search, optional_string(arguments, "path")?)?;
    Ok(Params {
        pattern: pattern.to_owned(),
        root,
        glob,
        hidden: glob_text.is_some_and(walk::names_hidden),
        matcher,
        mode,
        context: context as usize,
        limit,
    })
}

/// Searches every file of the walk; stops between files once `cancel` fires.
fn walk_and_search(params: &Params, search: &SearchContext, cancel: &CancellationToken) -> Hits {
    let hits = Mutex::new(Hits::new(
        params.mode,
        params.limit,
        search.max_output_bytes,
    ));
    let mut builder = SearcherBuilder::new();
    builder
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .before_context(params.context)
        .after_context(params.context);
    let sandbox = search.sandbox.as_ref();
    // Under the sandbox each file is opened beneath the start, through no link.
    let beneath = match sandbox {
        Some(_) if params.root.is_dir => {
            sandbox::beneath::open_dir(&params.root.real, Path::new(""), false).ok()
        }
        _ => None,
    };
    walk::walker(&params.root.real, sandbox, params.hidden).run(|| {
        let mut searcher = builder.build();
        let (hits, beneath) = (&hits, beneath.as_ref());
        Box::new(move |entry| {
            let entry = match walk::reached(entry, cancel, || lock(hits).unreadable += 1) {
                Ok(entry) => entry,
                Err(state) => return state,
            };
            // Links are not followed; devices, FIFOs and sockets are no text to search.
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                return WalkState::Continue;
            }
            let path = entry.path();
            if let Some((glob, whole_path)) = &params.glob
                && entry.depth() > 0
            {
                let relative = path.strip_prefix(&params.root.real).unwrap_or(path);
                let subject = if *whole_path {
                    relative
                } else {
                    Path::new(entry.file_name())
                };
                if !glob.is_match(subject) {
                    return WalkState::Continue;
                }
            }
            match search_file(&mut searcher, params, search, beneath, path) {
                Ok(Some(found)) => lock(hits).add(params.root.show(path), found),
                Ok(None) => {}
                Err(()) => lock(hits).unreadable += 1,
            }
            WalkState::Continue
        })
    });
    hits.into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock(hits: &Mutex<Hits>) -> std::sync::MutexGuard<'_, Hits> {
    hits.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One file's results; `None` when nothing matched or it is binary.
fn search_file(
    searcher: &mut Searcher,
    params: &Params,
    search: &SearchContext,
    beneath: Option<&OwnedFd>,
    path: &Path,
) -> Result<Option<FileHits>, ()> {
    let file = open(params, search, beneath, path).map_err(|_| ())?;
    let mut sink = FileSink {
        mode: params.mode,
        limit: params.limit,
        max_bytes: search.max_output_bytes,
        hits: FileHits::default(),
        binary: false,
    };
    searcher
        .search_file(&params.matcher, &file, &mut sink)
        .map_err(|_| ())?;
    if sink.binary || sink.hits.matches == 0 {
        return Ok(None);
    }
    Ok(Some(sink.hits))
}

/// Opens a file the walk found. Under the sandbox, a directory on the way swapped for a link
/// since the walk checked it must not lead the read elsewhere: the file is opened beneath the
/// start through no link, or (a kernel without `openat2`, or a single file searched) checked
/// again once open. A file swapped for a link or a FIFO is neither followed nor waited on.
fn open(
    params: &Params,
    search: &SearchContext,
    beneath: Option<&OwnedFd>,
    path: &Path,
) -> std::io::Result<File> {
    if let Some(dir) = beneath {
        let relative = path.strip_prefix(&params.root.real).unwrap_or(path);
        match sandbox::beneath::open_read(dir, relative) {
            Err(error) if error.kind() == std::io::ErrorKind::Unsupported => {}
            opened => return opened,
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if let Some(policy) = &search.sandbox {
        sandbox::paths::check_opened(policy, path, &file).map_err(std::io::Error::other)?;
    }
    Ok(file)
}

fn render(params: &Params, hits: Hits, cap: usize) -> String {
    let mut lines = Lines::new(cap);
    let mut notes = Vec::new();
    if hits.total_files == 0 {
        notes.push(format!(
            "no matches for `{}`",
            crate::redact::redact(&params.pattern)
        ));
    }
    match params.mode {
        Mode::FilesWithMatches | Mode::Count => {
            let mut shown = 0;
            for (path, found) in &hits.files {
                let line = match params.mode {
                    Mode::Count => format!("{path}:{}", found.matches),
                    _ => path.clone(),
                };
                if shown == params.limit || !lines.push(&line) {
                    break;
                }
                shown += 1;
            }
            let rest = hits.total_files - shown;
            if rest > 0 {
                notes.push(format!(
                    "[... {}: narrow `path` or `glob`, or raise `limit` ...]",
                    count(rest, "more file")
                ));
            }
        }
        Mode::Content => {
            let (shown_matches, whole_files) = render_content(params, &hits, &mut lines);
            let rest = hits.total_matches - shown_matches;
            if rest > 0 {
                notes.push(format!(
                    "[... {} in {}: narrow `path` or `glob`, or raise `limit` ...]",
                    count(rest, "more matching line"),
                    count(hits.total_files - whole_files, "file")
                ));
            }
        }
    }
    if hits.unreadable > 0 {
        notes.push(match hits.unreadable {
            1 => "[1 file or directory could not be read]".to_owned(),
            n => format!("[{n} files or directories could not be read]"),
        });
    }
    lines.finish(&notes)
}

/// The matching lines with their context; answers the matches shown and the files shown
/// whole.
fn render_content(params: &Params, hits: &Hits, lines: &mut Lines) -> (u64, u64) {
    let mut shown = 0;
    let mut whole_files = 0;
    'files: for (path, found) in &hits.files {
        if shown == params.limit {
            break;
        }
        if params.context > 0 {
            lines.separate("--");
        }
        let mut in_file = 0;
        for row in &found.rows {
            let line = match row.kind {
                // Past the limit only the context after the last match shown.
                _ if shown == params.limit && row.kind != RowKind::After => break,
                RowKind::Break => {
                    lines.separate("--");
                    continue;
                }
                RowKind::Match => format!("{path}:{}:{}", row.number, row.text),
                RowKind::Before | RowKind::After => format!("{path}-{}-{}", row.number, row.text),
            };
            if !lines.push(&line) {
                break 'files;
            }
            if row.kind == RowKind::Match {
                shown += 1;
                in_file += 1;
            }
        }
        if in_file == found.matches {
            whole_files += 1;
        }
    }
    (shown, whole_files)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    struct Tree {
        _dir: tempfile::TempDir,
        search: SearchContext,
    }

    fn tree(files: &[(&str, &str)]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let search = SearchContext {
            cwd: dir.path().to_path_buf(),
            max_output_bytes: 64 * 1024,
            sandbox: Some(Arc::new(crate::sandbox::SandboxPolicy::default())),
        };
        Tree { _dir: dir, search }
    }

    fn grep(tree: &Tree, arguments: Value) -> Result<String, String> {
        run(&arguments, &tree.search, &CancellationToken::new())
    }

    const FILES: &[(&str, &str)] = &[
        ("src/main.rs", "fn main() {\n    run();\n}\n"),
        ("src/lib.rs", "pub fn run() {}\npub fn stop() {}\n"),
        ("docs/notes.md", "run the tests\nRUN them again\n"),
        ("target/debug/out.rs", "fn run() {}\n"),
        (".gitignore", "target/\n"),
        (".hidden/x.rs", "fn run() {}\n"),
        ("image.bin", "run\0binary"),
    ];

    #[test]
    fn files_with_matches_in_path_order_skipping_ignored_hidden_and_binary_files() {
        let tree = tree(FILES);
        assert_eq!(
            grep(&tree, json!({"pattern": "run"})).unwrap(),
            "docs/notes.md\nsrc/lib.rs\nsrc/main.rs"
        );
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "run", "case_insensitive": true, "glob": "*.md"})
            )
            .unwrap(),
            "docs/notes.md"
        );
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "run", "glob": "src/*.rs", "path": "."})
            )
            .unwrap(),
            "./src/lib.rs\n./src/main.rs"
        );
        // A hidden directory the glob names is searched.
        assert_eq!(
            grep(&tree, json!({"pattern": "run", "glob": ".hidden/*.rs"})).unwrap(),
            ".hidden/x.rs"
        );
        assert_eq!(
            grep(&tree, json!({"pattern": "nowhere"})).unwrap(),
            "no matches for `nowhere`"
        );
    }

    #[test]
    fn content_and_count() {
        let tree = tree(FILES);
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "fn r", "output_mode": "content", "path": "src"})
            )
            .unwrap(),
            "src/lib.rs:1:pub fn run() {}"
        );
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "run", "output_mode": "count", "case_insensitive": true})
            )
            .unwrap(),
            "docs/notes.md:2\nsrc/lib.rs:1\nsrc/main.rs:1"
        );
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "run", "output_mode": "content", "context": 1})
            )
            .unwrap(),
            "docs/notes.md:1:run the tests\ndocs/notes.md-2-RUN them again\n--\n\
             src/lib.rs:1:pub fn run() {}\nsrc/lib.rs-2-pub fn stop() {}\n--\n\
             src/main.rs-1-fn main() {\nsrc/main.rs:2:    run();\nsrc/main.rs-3-}"
        );
    }

    #[test]
    fn limits_say_how_many_more() {
        let files: Vec<(String, String)> = (0..30)
            .map(|n| (format!("f{n:02}.txt"), "hit\nmiss\nhit\n".to_owned()))
            .collect();
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(path, content)| (path.as_str(), content.as_str()))
            .collect();
        let tree = tree(&files);
        assert_eq!(
            grep(&tree, json!({"pattern": "hit", "limit": 2})).unwrap(),
            "f00.txt\nf01.txt\n[... 28 more files: narrow `path` or `glob`, or raise `limit` ...]"
        );
        assert_eq!(
            grep(
                &tree,
                json!({"pattern": "hit", "output_mode": "content", "limit": 3})
            )
            .unwrap(),
            "f00.txt:1:hit\nf00.txt:3:hit\nf01.txt:1:hit\n[... 57 more matching lines in 29 \
             files: narrow `path` or `glob`, or raise `limit` ...]"
        );
        // The output cap stops at a whole line too.
        let mut capped = tree;
        capped.search.max_output_bytes = 20;
        assert_eq!(
            grep(&capped, json!({"pattern": "hit", "output_mode": "count"})).unwrap(),
            "f00.txt:2\nf01.txt:2\n[... 28 more files: narrow `path` or `glob`, or raise \
             `limit` ...]"
        );
    }

    #[test]
    fn bad_calls_say_what_is_wrong() {
        let tree = tree(FILES);
        let error = grep(&tree, json!({"pattern": "fn ("})).unwrap_err();
        assert!(error.starts_with("invalid regex `fn (`: "), "{error}");
        assert_eq!(
            grep(&tree, json!({"pattern": "x", "glob": "a/[b"})).unwrap_err(),
            "invalid glob `a/[b`: unclosed character class; missing ']'"
        );
        assert_eq!(
            grep(&tree, json!({"pattern": "x", "path": "missing"})).unwrap_err(),
            "no such file or directory: missing"
        );
        assert_eq!(
            grep(&tree, json!({"pattern": "x", "output_mode": "lines"})).unwrap_err(),
            "parameter `output_mode` must be `files_with_matches`, `content` or `count`, not \
             `lines`"
        );
        assert_eq!(
            grep(&tree, json!({"pattern": "x", "context": 2})).unwrap_err(),
            "parameter `context` needs `output_mode` = `content`"
        );
        assert_eq!(
            grep(&tree, json!({"pattern": ""})).unwrap_err(),
            "parameter `pattern` must not be empty"
        );
    }

    #[test]
    fn the_services_state_is_skipped_and_a_cancelled_search_stops() {
        let tree = tree(&[("data/token", "secret run\n"), ("src/a.rs", "run\n")]);
        let real = tree.search.cwd.canonicalize().unwrap();
        let search = SearchContext {
            sandbox: Some(Arc::new(crate::sandbox::SandboxPolicy {
                protected: Arc::new(crate::sandbox::Protected::new(&real.join("data"), None)),
                ..crate::sandbox::SandboxPolicy::default()
            })),
            cwd: tree.search.cwd.clone(),
            max_output_bytes: 1000,
        };
        let cancel = CancellationToken::new();
        assert_eq!(
            run(&json!({"pattern": "run"}), &search, &cancel).unwrap(),
            "src/a.rs"
        );
        let error = run(&json!({"pattern": "run", "path": "data"}), &search, &cancel).unwrap_err();
        assert!(error.contains("is the service's own state"), "{error}");
        cancel.cancel();
        assert_eq!(
            run(&json!({"pattern": "run"}), &search, &cancel).unwrap_err(),
            "`grep` was interrupted"
        );
    }
}
