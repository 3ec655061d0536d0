//! The edit tools: `edit_file` (an exact replacement), `apply_patch` (V4A patches, in the
//! function form and the OpenAI Responses API's native form) and `str_replace_based_edit_tool`
//! (Anthropic's text editor). They read and write through `disk.rs` like `write_file` (the
//! sandbox's rules, no write through a symlink), keep a file's encoding (UTF-8 with or without
//! a BOM, UTF-16 with its BOM) and its CRLF endings, refuse what is not text, and change
//! several files all or nothing.
//!
//! - `text.rs` — a file's bytes as text to edit and back: encodings, BOMs, line endings.
//! - `matching.rs` — finding lines exactly or ignoring whitespace at line ends; the closest
//!   lines of a file, numbered, for a model's next try.
//! - `replace.rs` — the exactly-once replacement and its errors (match count, closest lines).
//! - `patch.rs` — reading a V4A patch (or one file's body of it) into file operations.
//! - `hunks.rs` — applying an update's hunks to a file's text.
//! - `change.rs` — a change of files, computed in memory, then written all or nothing, rolled
//!   back when a write fails; run on the blocking pool.
//! - `edit_file.rs`, `apply_patch.rs`, `text_editor.rs` — the three tools.

mod apply_patch;
mod change;
mod edit_file;
mod hunks;
mod matching;
mod patch;
mod replace;
mod text;
mod text_editor;

#[cfg(test)]
mod tests;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::call::{ToolContext, ToolResult};

/// Runs the edit tool `name` (one of `permissions::policy::EDIT_TOOLS`, which the `write_file`
/// setting decides for); `run_tool` only sends those. An
/// interrupt seen before the first write leaves every file as it was.
pub(super) async fn run(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    match name {
        "edit_file" => change::offload(edit_file::run, arguments, ctx, cancel).await,
        "apply_patch" => change::offload(apply_patch::run, arguments, ctx, cancel).await,
        _ => text_editor::run(arguments, ctx, cancel).await,
    }
}

/// The paths, as the model wrote them, that a call of the edit tool `name` would write or
/// delete: its file, every file of a patch, a move's destination too. Empty for a call that
/// writes nothing (`view`), that does not parse, or of another tool.
pub fn edited_paths(name: &str, arguments: &Value) -> Vec<String> {
    let path = || {
        arguments
            .get("path")
            .and_then(Value::as_str)
            .filter(|path| !path.is_empty())
            .map(|path| vec![path.to_owned()])
            .unwrap_or_default()
    };
    let paths = match name {
        "edit_file" => path(),
        "str_replace_based_edit_tool" => match arguments.get("command").and_then(Value::as_str) {
            Some("create" | "str_replace" | "insert") => path(),
            _ => Vec::new(),
        },
        "apply_patch" => apply_patch::file_ops(arguments)
            .map(|ops| {
                ops.iter()
                    .flat_map(|op| op.paths())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut unique: Vec<String> = Vec::with_capacity(paths.len());
    for path in paths {
        if !unique.contains(&path) {
            unique.push(path);
        }
    }
    unique
}
