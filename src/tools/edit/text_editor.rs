//! `str_replace_based_edit_tool`, Anthropic's text editor tool: `{command, path, …}` with
//! `view` (a file through `read_file`, a range as its `offset`/`limit`; a directory through
//! `list_dir`), `create` (`file_text`), `str_replace` (`old_str`, `new_str`, with the exactly
//! once rule of `edit_file`) and `insert` (`insert_line`, 0 for the top, `insert_text`).

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::change::{Workspace, offload};
use super::edit_file::{finish, lines, replace_in_file};
use super::replace::Names;
use super::text::{Form, decode, encode, line_count};
use crate::tools::call::{
    ToolContext, ToolResult, optional_string, optional_value, required_path, required_string,
};
use crate::tools::disk::FileAccess;
use crate::tools::files;

const NAMES: Names = Names {
    old: "old_str",
    new: "new_str",
    all: None,
};

pub(super) async fn run(
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    let command = match required_string(arguments, "command") {
        Ok(command) => command,
        Err(error) => return ToolResult::failed(error),
    };
    match command {
        "view" => view(arguments, ctx, cancel)
            .await
            .unwrap_or_else(ToolResult::failed),
        "create" => offload(create, arguments, ctx, cancel).await,
        "str_replace" => offload(str_replace, arguments, ctx, cancel).await,
        "insert" => offload(insert, arguments, ctx, cancel).await,
        other => ToolResult::failed(format!(
            "unknown command `{other}`: use view, create, str_replace or insert"
        )),
    }
}

/// A file's lines, or a directory's entries, by the read tools.
async fn view(
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let range = optional_value(arguments, "view_range")?
        .map(view_range)
        .transpose()?;
    let is_dir = tokio::fs::metadata(ctx.cwd.join(path))
        .await
        .is_ok_and(|metadata| metadata.is_dir());
    let mut read = Map::new();
    read.insert("path".into(), path.into());
    if is_dir {
        if range.is_some() {
            return Err(format!(
                "{path} is a directory: view_range applies to files"
            ));
        }
        return Ok(files::run("list_dir", &Value::Object(read), ctx, cancel).await);
    }
    if let Some((start, end)) = range {
        read.insert("offset".into(), start.into());
        if let Some(end) = end {
            read.insert("limit".into(), (end - start + 1).into());
        }
    }
    Ok(files::run("read_file", &Value::Object(read), ctx, cancel).await)
}

/// `[start, end]`: 1-based, inclusive, `end` -1 for the end of the file (`None`).
fn view_range(value: &Value) -> Result<(u64, Option<u64>), String> {
    let invalid = || {
        format!(
            "view_range must be [start, end]: 1-based line numbers, end -1 for the end of the \
             file; got {value}"
        )
    };
    let [start, end] = value.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(invalid());
    };
    let start = start
        .as_u64()
        .filter(|start| *start >= 1)
        .ok_or_else(invalid)?;
    match end.as_i64() {
        Some(-1) => Ok((start, None)),
        Some(end) if end >= 1 && end as u64 >= start => Ok((start, Some(end as u64))),
        _ => Err(invalid()),
    }
}

/// Writes `file_text` as the whole file; an existing text file keeps its encoding and endings.
fn create(
    access: &FileAccess,
    arguments: &Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let text = required_string(arguments, "file_text")?;
    let mut change = Workspace::new(access.clone());
    let existing = change.read(path)?;
    let form = existing
        .as_deref()
        .and_then(|bytes| decode(path, bytes).ok())
        .map_or(Form::NEW, |(_, form)| form);
    let text = form.model_text(text);
    change.set(path, Some(encode(&text, form)))?;
    let verb = if existing.is_some() {
        "replaced the content of"
    } else {
        "created"
    };
    let summary = format!("{verb} {path} ({})", lines(line_count(&text)));
    Ok(finish(change.commit(cancel)?, summary, path))
}

fn str_replace(
    access: &FileAccess,
    arguments: &Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let old = required_string(arguments, "old_str")?;
    let new = optional_string(arguments, "new_str")?.unwrap_or("");
    replace_in_file(access, path, old, new, false, NAMES, cancel)
}

/// Inserts whole lines after line `insert_line` (0: at the top).
fn insert(
    access: &FileAccess,
    arguments: &Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let after = match optional_value(arguments, "insert_line")? {
        Some(value) => value.as_u64().ok_or_else(|| {
            format!("parameter `insert_line` must be a line number (0 for the top), not {value}")
        })?,
        None => return Err("missing required parameter `insert_line` (a number)".to_owned()),
    };
    // The 2025 tool calls it `insert_text`; earlier versions `new_str`.
    let inserted = match optional_string(arguments, "insert_text")? {
        Some(text) => text,
        None => optional_string(arguments, "new_str")?
            .ok_or("missing required parameter `insert_text` (a string)")?,
    };
    let mut change = Workspace::new(access.clone());
    let Some(bytes) = change.read(path)? else {
        return Err(format!(
            "no such file: {path} (the create command makes one)"
        ));
    };
    let (text, form) = decode(path, &bytes)?;
    let count = line_count(&text);
    if after > count as u64 {
        return Err(format!(
            "insert_line {after} is past the end of {path}, which has {}",
            lines(count)
        ));
    }
    let mut inserted = form.model_text(inserted).into_owned();
    if inserted.is_empty() {
        return Ok(ToolResult::completed(format!(
            "no change: insert_text is empty; {path} was not written"
        )));
    }
    if !inserted.ends_with('\n') {
        inserted.push('\n');
    }
    let at: usize = text
        .split_inclusive('\n')
        .take(after as usize)
        .map(str::len)
        .sum();
    let mut result = String::with_capacity(text.len() + inserted.len() + 1);
    result.push_str(&text[..at]);
    // After a last line without a newline, the new lines start on a line of their own.
    if at == text.len() && !text.is_empty() && !text.ends_with('\n') {
        result.push('\n');
    }
    result.push_str(&inserted);
    result.push_str(&text[at..]);
    change.set(path, Some(encode(&result, form)))?;
    let place = if after == 0 {
        "at the top".to_owned()
    } else {
        format!("after line {after}")
    };
    let summary = format!(
        "inserted {} {place} of {path}",
        lines(line_count(&inserted))
    );
    Ok(finish(change.commit(cancel)?, summary, path))
}
