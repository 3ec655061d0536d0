//! What a turn changed, as a client shows it: each path's change and a unified diff of text
//! files (binary files are only named), within a size cap for the whole answer.

use std::collections::BTreeMap;
use std::path::Path;

use super::Checkpoints;
use super::restore::CallRecord;
use super::scan::{Entry, Skipped};

/// The most diff text one answer carries; past it, files are listed without their diff.
pub const MAX_DIFF_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

#[derive(Debug, Clone)]
pub struct FileDiff {
    pub path: String,
    pub change: Change,
    pub binary: bool,
    /// `None` for a binary file, or once the cap is reached (`truncated`).
    pub diff: Option<String>,
    pub truncated: bool,
    /// The whole text before and after, when asked for (`None` for an added file's before, a
    /// deleted file's after, a binary file, or past the cap).
    pub old_text: Option<String>,
    pub new_text: Option<String>,
}

impl Checkpoints {
    /// The net changes of `calls` (a turn's, in order): each path from before the first call
    /// that changed it to after the last. Paths that ended as they began are left out. With
    /// them, what the last snapshot skipped. With `contents`, each text file's whole text
    /// before and after too, within the same cap. Blocking.
    pub fn turn_diff(
        &self,
        cwd: &Path,
        calls: &[CallRecord],
        contents: bool,
    ) -> Result<(Vec<FileDiff>, Vec<Skipped>), String> {
        let tree = self.tree(cwd);
        let objects = self.objects()?;
        let mut ends: BTreeMap<String, (Option<Entry>, Option<Entry>)> = BTreeMap::new();
        let mut skipped = Vec::new();
        for call in calls {
            let before = self.manifest(&tree, &call.before)?;
            let after = self.manifest(&tree, &call.after)?;
            skipped.clone_from(&after.skipped);
            for path in &call.paths {
                let now = after.files.get(path).cloned();
                ends.entry(path.clone())
                    .and_modify(|(_, last)| *last = now.clone())
                    .or_insert_with(|| (before.files.get(path).cloned(), now));
            }
        }
        let mut budget = MAX_DIFF_BYTES;
        let mut files = Vec::new();
        for (path, (old, new)) in ends {
            let change = match (&old, &new) {
                (None, None) => continue,
                (Some(a), Some(b)) if a.same_content(b) => continue,
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Deleted,
                (Some(_), Some(_)) => Change::Modified,
            };
            let read = |entry: &Option<Entry>| -> Result<Vec<u8>, String> {
                match entry {
                    Some(entry) => objects
                        .get(&entry.hash)
                        .map_err(|e| format!("the content of {path}: {e}")),
                    None => Ok(Vec::new()),
                }
            };
            let (a, b) = (read(&old)?, read(&new)?);
            let mut texts = (None, None);
            let (diff, binary, truncated) = match (text(&a), text(&b)) {
                (Some(a_text), Some(b_text)) => {
                    let diff = similar::TextDiff::from_lines(a_text, b_text)
                        .unified_diff()
                        .context_radius(3)
                        .header(&format!("a/{path}"), &format!("b/{path}"))
                        .to_string();
                    let cost = diff.len() + if contents { a.len() + b.len() } else { 0 };
                    if cost <= budget {
                        budget -= cost;
                        if contents {
                            texts = (
                                old.is_some().then(|| a_text.to_owned()),
                                new.is_some().then(|| b_text.to_owned()),
                            );
                        }
                        (Some(diff), false, false)
                    } else {
                        budget = 0;
                        (None, false, true)
                    }
                }
                _ => (None, true, false),
            };
            files.push(FileDiff {
                path,
                change,
                binary,
                diff,
                truncated,
                old_text: texts.0,
                new_text: texts.1,
            });
        }
        Ok((files, skipped))
    }
}

/// Bytes as text, unless they look binary (a NUL, or not UTF-8).
fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}
