//! `edit_file {path, old_string, new_string, replace_all?}`: an exact replacement in one file,
//! and the same replacement for the text editor's `str_replace` ([`replace_in_file`]). An
//! empty `old_string` creates a missing file (or fills an empty one).

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::change::{Committed, Workspace};
use super::replace::{Names, describe_spans, replace};
use super::text::{Form, decode, encode, line_count};
use crate::tools::call::{ToolResult, optional_bool, required_path, required_string};
use crate::tools::disk::FileAccess;

const NAMES: Names = Names {
    old: "old_string",
    new: "new_string",
    all: Some("replace_all"),
};

pub(super) fn run(
    access: &FileAccess,
    arguments: &Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let old = required_string(arguments, "old_string")?;
    let new = required_string(arguments, "new_string")?;
    let all = optional_bool(arguments, "replace_all")?.unwrap_or(false);
    replace_in_file(access, path, old, new, all, NAMES, cancel)
}

/// Replaces `old` by `new` in the file `path` (exactly once unless `all`), keeping its
/// encoding and line endings.
pub(super) fn replace_in_file(
    access: &FileAccess,
    path: &str,
    old: &str,
    new: &str,
    all: bool,
    names: Names,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    if old == new {
        return Ok(ToolResult::completed(format!(
            "no change: {} and {} are the same; nothing was written",
            names.old, names.new
        )));
    }
    let mut change = Workspace::new(access.clone());
    let (after, summary) = match change.read(path)? {
        None if old.is_empty() => (
            encode(new, Form::NEW),
            format!("created {path} ({})", lines(line_count(new))),
        ),
        None => {
            return Err(format!(
                "no such file: {path} (an empty {} creates a file)",
                names.old
            ));
        }
        Some(bytes) => {
            let (text, form) = decode(path, &bytes)?;
            let (old, new) = (form.model_text(old), form.model_text(new));
            if old.is_empty() {
                if !text.is_empty() {
                    return Err(format!(
                        "{} is empty, but {path} is not: give the text to replace (an empty {} \
                         only creates a file or fills an empty one)",
                        names.old, names.old
                    ));
                }
                (
                    encode(&new, form),
                    format!(
                        "edited {path}: wrote {} into the empty file",
                        lines(line_count(&new))
                    ),
                )
            } else {
                let replaced = replace(&text, &old, &new, all, path, names)?;
                if replaced.text == text {
                    return Ok(unchanged(path));
                }
                let count = replaced.spans.len();
                (
                    encode(&replaced.text, form),
                    format!(
                        "edited {path}: replaced {count} occurrence{} ({})",
                        if count == 1 { "" } else { "s" },
                        describe_spans(&replaced.spans)
                    ),
                )
            }
        }
    };
    change.set(path, Some(after))?;
    Ok(finish(change.commit(cancel)?, summary, path))
}

/// The result of a one-file change, from how its commit ended.
pub(super) fn finish(committed: Committed, summary: String, path: &str) -> ToolResult {
    match committed {
        Committed::Written => ToolResult::completed(summary),
        Committed::Unchanged => unchanged(path),
        Committed::Interrupted => ToolResult::interrupted(format!(
            "interrupted before {path} was written; it is unchanged"
        )),
    }
}

fn unchanged(path: &str) -> ToolResult {
    ToolResult::completed(format!(
        "no change: the edit leaves {path} as it was; nothing was written"
    ))
}

/// `1 line`, `3 lines`.
pub(super) fn lines(count: usize) -> String {
    format!("{count} line{}", if count == 1 { "" } else { "s" })
}
