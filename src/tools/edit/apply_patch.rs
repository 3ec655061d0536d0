//! `apply_patch`: a V4A patch (`patch.rs`) over any number of files, applied all or nothing
//! (`change.rs`). Two argument shapes reach the same engine: `{"input": "*** Begin Patch…"}`
//! (the function tool) and `{"operation": {"type": "create_file" | "update_file" |
//! "delete_file", "path": …, "diff": …}}` (the OpenAI Responses API's built-in tool, one file
//! per call, its `diff` the file's body without the patch's envelope).

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::change::{Committed, Workspace};
use super::edit_file::lines;
use super::hunks::apply_hunks;
use super::patch::{FileOp, parse_added, parse_hunks, parse_patch};
use super::text::{Form, decode, encode, line_count};
use crate::tools::call::{ToolResult, json_kind, optional_string, optional_value};
use crate::tools::disk::FileAccess;

pub(super) fn run(
    access: &FileAccess,
    arguments: &Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let ops = file_ops(arguments)?;
    apply(access, &ops, cancel)
}

/// The file changes a call asks for, in either argument shape.
pub(super) fn file_ops(arguments: &Value) -> Result<Vec<FileOp>, String> {
    match (
        optional_string(arguments, "input")?,
        optional_value(arguments, "operation")?,
    ) {
        (Some(input), None) => {
            parse_patch(input).map_err(|error| format!("invalid patch: {error}"))
        }
        (None, Some(operation)) => Ok(vec![native_op(operation)?]),
        (Some(_), Some(_)) => {
            Err("give either `input` (a whole patch) or `operation`, not both".to_owned())
        }
        (None, None) => Err(
            "missing required parameter `input` (a string: the patch, from `*** Begin Patch` \
             to `*** End Patch`)"
                .to_owned(),
        ),
    }
}

/// One operation of the native form.
fn native_op(operation: &Value) -> Result<FileOp, String> {
    if !operation.is_object() {
        return Err(format!(
            "`operation` must be an object, not {}",
            json_kind(operation)
        ));
    }
    let field = |name: &str| {
        optional_string(operation, name)
            .map_err(|error| error.replace("parameter", "operation field"))
    };
    let kind = field("type")?.ok_or("missing operation field `type` (a string)")?;
    let path = field("path")?
        .filter(|path| !path.is_empty())
        .ok_or("missing operation field `path` (a string)")?
        .to_owned();
    let diff = field("diff")?;
    let need_diff = || diff.ok_or(format!("a `{kind}` operation needs its `diff` (a string)"));
    match kind {
        "create_file" => Ok(FileOp::Add {
            path,
            content: parse_added(need_diff()?).map_err(|error| format!("invalid diff: {error}"))?,
        }),
        "update_file" => Ok(FileOp::Update {
            path,
            move_to: None,
            hunks: parse_hunks(need_diff()?).map_err(|error| format!("invalid diff: {error}"))?,
        }),
        "delete_file" => Ok(FileOp::Delete { path }),
        other => Err(format!(
            "unknown operation type `{other}`: use create_file, update_file or delete_file"
        )),
    }
}

/// Computes every file's new content, then writes them all or none.
fn apply(
    access: &FileAccess,
    ops: &[FileOp],
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let mut change = Workspace::new(access.clone());
    let mut done = Vec::new();
    for op in ops {
        let line = compute(&mut change, op)
            .map_err(|error| format!("{error}\nThe patch was not applied: no file was changed."))?;
        done.push(line);
    }
    match change.commit(cancel)? {
        Committed::Written if done.len() == 1 => Ok(ToolResult::completed(format!(
            "applied the patch: {}",
            done[0]
        ))),
        Committed::Written => Ok(ToolResult::completed(format!(
            "applied the patch:\n{}",
            done.join("\n")
        ))),
        Committed::Unchanged => Ok(ToolResult::completed(
            "no change: the patch leaves every file as it was; nothing was written",
        )),
        Committed::Interrupted => Ok(ToolResult::interrupted(
            "interrupted before the patch was written; no file was changed",
        )),
    }
}

/// Sets one operation's result in `change`; answers what it did, for the result.
fn compute(change: &mut Workspace, op: &FileOp) -> Result<String, String> {
    match op {
        FileOp::Add { path, content } => {
            if change.read(path)?.is_some() {
                return Err(format!(
                    "cannot add {path}: it already exists (update it instead)"
                ));
            }
            change.set(path, Some(encode(content, Form::NEW)))?;
            Ok(format!("added {path} ({})", lines(line_count(content))))
        }
        FileOp::Delete { path } => {
            if change.read(path)?.is_none() {
                return Err(format!("cannot delete {path}: no such file"));
            }
            change.set(path, None)?;
            Ok(format!("deleted {path}"))
        }
        FileOp::Update {
            path,
            move_to,
            hunks,
        } => {
            let Some(bytes) = change.read(path)? else {
                return Err(format!("cannot update {path}: no such file"));
            };
            let (text, form) = decode(path, &bytes)?;
            let updated = encode(&apply_hunks(&text, hunks, path)?, form);
            let hunks = match hunks.len() {
                0 => String::new(),
                1 => " (1 hunk)".to_owned(),
                count => format!(" ({count} hunks)"),
            };
            match move_to {
                Some(destination) if !change.same_file(path, destination) => {
                    if change.read(destination)?.is_some() {
                        return Err(format!(
                            "cannot move {path} to {destination}: {destination} already exists"
                        ));
                    }
                    change.move_file(path, destination, updated)?;
                    Ok(format!("moved {path} to {destination}{hunks}"))
                }
                _ => {
                    change.set(path, Some(updated))?;
                    Ok(format!("updated {path}{hunks}"))
                }
            }
        }
    }
}
