//! What the terminal clients show of checkpoints: `/diff [N]` (what a turn changed in the
//! working directory) and the outcome of `/rewind N --files`.

use super::api::{Api, ApiError};
use crate::api::responses::{RestoreSummary, TurnChanges};
use crate::domain::{Item, ItemKind};

/// The root session's turns in order, each with how many paths its tool calls changed.
fn turns(items: &[Item]) -> Vec<(String, usize)> {
    let mut turns: Vec<(String, usize)> = Vec::new();
    for item in items {
        let turn_id = &item.turn_id;
        if turns.last().is_none_or(|(last, _)| last != turn_id) {
            turns.push((turn_id.clone(), 0));
        }
        let changed = match &item.kind {
            ItemKind::ToolCall {
                files: Some(files), ..
            } => files.paths().count(),
            _ => 0,
        };
        if let Some((_, count)) = turns.last_mut() {
            *count += changed;
        }
    }
    turns
}

/// `/diff [N]`: turn N's changes (1 = the first turn), or the last turn's that changed files.
pub async fn diff(api: &Api, id: &str, items: &[Item], argument: &str) -> Result<String, ApiError> {
    let turns = turns(items);
    let chosen = match argument.parse::<usize>() {
        Ok(number) => turns.get(number.wrapping_sub(1)),
        Err(_) if argument.is_empty() => turns.iter().rev().find(|(_, count)| *count > 0),
        Err(_) => {
            return Ok(
                "[/diff N shows what turn N changed; /diff the last turn that did]\n".to_owned(),
            );
        }
    };
    let Some((turn_id, _)) = chosen else {
        return Ok("[no turn changed files]\n".to_owned());
    };
    let changes = api.turn_changes(id, turn_id, None, false).await?;
    Ok(show_changes(&changes))
}

fn show_changes(changes: &TurnChanges) -> String {
    let files = &changes.files;
    if files.is_empty() {
        return "[this turn changed no files]\n".to_owned();
    }
    let mut out = format!("[{} changed]\n", plural_files(files.len()));
    for file in files {
        let path = &file.path;
        let change = super::wire_text(&file.change);
        match &file.diff {
            Some(diff) => out.push_str(diff),
            None if file.binary => {
                out.push_str(&format!("[{change}: {path} (binary)]\n"));
            }
            None => out.push_str(&format!("[{change}: {path} (diff left out: too long)]\n")),
        }
    }
    out
}

fn plural_files(count: usize) -> String {
    if count == 1 {
        "1 file".to_owned()
    } else {
        format!("{count} files")
    }
}

/// What `/rewind N --files` did to the files.
pub fn restore_line(restore: &RestoreSummary) -> String {
    let (restored, conflicts) = (&restore.restored, &restore.conflicts);
    let mut line = format!("[restored {}", plural_files(restored.len()));
    if !conflicts.is_empty() {
        line.push_str(&format!(
            "; kept {} changed since by someone else: {}",
            plural_files(conflicts.len()),
            conflicts.join(", ")
        ));
    }
    line.push_str(&format!(
        "; undo: POST /api/conversations/…/restores/{}/undo]\n",
        restore.id.as_deref().unwrap_or_default()
    ));
    line
}

/// What `/rewind --files` did in the full-screen chat, path by path, and how to undo it
/// (`id`: the conversation rewound).
pub fn restore_notice(id: &str, restore: &RestoreSummary) -> String {
    let (restored, conflicts) = (&restore.restored, &restore.conflicts);
    let mut said = if restored.is_empty() {
        "files: nothing to put back".to_owned()
    } else {
        format!("files put back: {}", restored.join(", "))
    };
    if !conflicts.is_empty() {
        said += &format!(
            "\nkept, changed since by someone else: {}",
            conflicts.join(", ")
        );
    }
    said += &format!(
        "\nrestore {0}: undo with POST /api/conversations/{id}/restores/{0}/undo",
        restore.id.as_deref().unwrap_or_default()
    );
    said
}

/// The note after a turn that changed files (`turn.ended`'s `files_changed`).
pub fn changed_note(files_changed: u32) -> Option<String> {
    let count = Some(files_changed).filter(|count| *count > 0)?;
    Some(format!(
        "[{} changed; /diff shows them]",
        plural_files(count as usize)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::fixtures::{tool, user};
    use crate::domain::{FileChanges, ItemStatus, MessageSource};

    #[test]
    fn turns_count_the_paths_their_calls_changed() {
        let mut call = tool("m2", "shell", json!({}), "", ItemStatus::Completed);
        if let ItemKind::ToolCall { files, .. } = &mut call.kind {
            *files = Some(Box::new(FileChanges {
                added: vec!["a".into()],
                deleted: vec!["b".into()],
                ..FileChanges::default()
            }));
        }
        let mut later = user("m3", "again", MessageSource::User);
        later.turn_id = "t2".to_owned();
        let mut first = user("m1", "hi", MessageSource::User);
        first.turn_id = "t1".to_owned();
        call.turn_id = "t1".to_owned();
        let items = vec![first, call, later];
        assert_eq!(turns(&items), [("t1".to_owned(), 2), ("t2".to_owned(), 0)]);
        let line = restore_line(&RestoreSummary {
            id: Some("r_1".to_owned()),
            restored: vec!["a".to_owned()],
            conflicts: vec!["b".to_owned(), "c".to_owned()],
        });
        assert!(
            line.starts_with("[restored 1 file; kept 2 files changed since by someone else: b, c;"),
            "{line}"
        );
        assert_eq!(changed_note(0), None);
        assert_eq!(
            changed_note(3).unwrap(),
            "[3 files changed; /diff shows them]"
        );
    }
}
