//! What the terminal clients show of checkpoints: `/diff [N]` (what a turn changed in the
//! working directory) and the outcome of `/rewind N --files`.

use serde_json::Value;

use super::api::{Api, ApiError};

/// The root session's turns in order, each with how many paths its tool calls changed.
fn turns(items: &[Value]) -> Vec<(String, usize)> {
    let mut turns: Vec<(String, usize)> = Vec::new();
    for item in items {
        let turn_id = item["turn_id"].as_str().unwrap_or_default();
        if turns.last().is_none_or(|(last, _)| last != turn_id) {
            turns.push((turn_id.to_owned(), 0));
        }
        let files = &item["files"];
        let changed: usize = ["added", "modified", "deleted"]
            .iter()
            .map(|kind| files[kind].as_array().map_or(0, Vec::len))
            .sum();
        if let Some((_, count)) = turns.last_mut() {
            *count += changed;
        }
    }
    turns
}

/// `/diff [N]`: turn N's changes (1 = the first turn), or the last turn's that changed files.
pub async fn diff(
    api: &Api,
    id: &str,
    items: &[Value],
    argument: &str,
) -> Result<String, ApiError> {
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
    let changes = api
        .get(&format!("/api/conversations/{id}/turns/{turn_id}/changes"))
        .await?;
    Ok(show_changes(&changes))
}

fn show_changes(changes: &Value) -> String {
    let files = changes["files"].as_array().cloned().unwrap_or_default();
    if files.is_empty() {
        return "[this turn changed no files]\n".to_owned();
    }
    let mut out = format!("[{} changed]\n", plural_files(files.len()));
    for file in &files {
        let path = file["path"].as_str().unwrap_or_default();
        let change = file["change"].as_str().unwrap_or_default();
        match file["diff"].as_str() {
            Some(diff) => out.push_str(diff),
            None if file["binary"] == true => {
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

/// A restore's `restored` or `conflicts` paths.
fn paths(restore: &Value, key: &str) -> Vec<String> {
    restore[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|path| path.as_str().map(str::to_owned))
        .collect()
}

/// What `/rewind N --files` did to the files.
pub fn restore_line(restore: &Value) -> String {
    let (restored, conflicts) = (paths(restore, "restored"), paths(restore, "conflicts"));
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
        restore["id"].as_str().unwrap_or_default()
    ));
    line
}

/// What `/rewind --files` did in the full-screen chat, path by path, and how to undo it
/// (`id`: the conversation rewound).
pub fn restore_notice(id: &str, restore: &Value) -> String {
    let (restored, conflicts) = (paths(restore, "restored"), paths(restore, "conflicts"));
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
        restore["id"].as_str().unwrap_or_default()
    );
    said
}

/// The note after a turn that changed files.
pub fn changed_note(turn_ended: &Value) -> Option<String> {
    let count = turn_ended["files_changed"]
        .as_u64()
        .filter(|count| *count > 0)?;
    Some(format!(
        "[{} changed; /diff shows them]",
        plural_files(count as usize)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn turns_count_the_paths_their_calls_changed() {
        let items = vec![
            json!({"turn_id": "t1", "kind": "user_message"}),
            json!({"turn_id": "t1", "kind": "tool_call", "files": {"added": ["a"], "modified": [], "deleted": ["b"]}}),
            json!({"turn_id": "t2", "kind": "user_message"}),
        ];
        assert_eq!(turns(&items), [("t1".to_owned(), 2), ("t2".to_owned(), 0)]);
        let line = restore_line(&json!({"id": "r_1", "restored": ["a"], "conflicts": ["b", "c"]}));
        assert!(
            line.starts_with("[restored 1 file; kept 2 files changed since by someone else: b, c;"),
            "{line}"
        );
        assert_eq!(changed_note(&json!({"files_changed": 0})), None);
        assert_eq!(
            changed_note(&json!({"files_changed": 3})).unwrap(),
            "[3 files changed; /diff shows them]"
        );
    }
}
