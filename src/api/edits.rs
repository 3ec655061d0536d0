//! What a call of an edit tool changes, read from its arguments, for the clients that show it
//! as a diff (the terminal clients, ACP editors, the export; the web UI reads the same shapes):
//! `edit_file` and the text editor's `str_replace` (the replaced text and its replacement),
//! `create` and `insert` (added text), and `apply_patch` (a whole V4A patch, or one file's
//! operation from OpenAI's built-in tool).

use serde_json::Value;

/// One file an edit call changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedFile {
    pub path: String,
    /// `created`, `edited`, `deleted`, or `moved to <path>`.
    pub action: String,
    /// The text the call replaced, where the arguments say (`None` for a new file).
    pub old_text: Option<String>,
    /// The text it wrote in its place.
    pub new_text: String,
    /// The change as diff lines: each starts with `+`, `-` or a space (context), or is an
    /// `@@` anchor.
    pub diff: Vec<String>,
}

/// The files a call of `name` changes; empty for any other tool, and for the text editor's
/// `view`.
pub fn edited_files(name: &str, arguments: &Value) -> Vec<EditedFile> {
    let text = |key: &str| arguments[key].as_str().unwrap_or_default();
    match name {
        "edit_file" => vec![replacement(
            text("path"),
            text("old_string"),
            text("new_string"),
        )],
        "str_replace_based_edit_tool" => match text("command") {
            "str_replace" => vec![replacement(text("path"), text("old_str"), text("new_str"))],
            "create" => vec![added(text("path"), text("file_text"), "created".into())],
            "insert" => {
                let after = arguments["insert_line"].as_u64().unwrap_or(0);
                let action = format!("inserted after line {after}");
                vec![added(text("path"), text("insert_text"), action)]
            }
            _ => Vec::new(),
        },
        "apply_patch" => match arguments.get("operation") {
            Some(operation) if operation.is_object() => vec![operation_file(operation)],
            _ => patch_files(text("input")),
        },
        _ => Vec::new(),
    }
}

fn replacement(path: &str, old: &str, new: &str) -> EditedFile {
    let diff = similar::TextDiff::from_lines(old, new)
        .iter_all_changes()
        .map(|change| {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            format!("{sign}{}", change.value().trim_end_matches(['\n', '\r']))
        })
        .collect();
    EditedFile {
        path: path.to_owned(),
        action: "edited".into(),
        old_text: Some(old.to_owned()),
        new_text: new.to_owned(),
        diff,
    }
}

fn added(path: &str, text: &str, action: String) -> EditedFile {
    EditedFile {
        path: path.to_owned(),
        action,
        old_text: None,
        new_text: text.to_owned(),
        diff: text.lines().map(|line| format!("+{line}")).collect(),
    }
}

/// One file of OpenAI's built-in tool: `create_file` (every line `+`), `update_file` (hunks)
/// or `delete_file`.
fn operation_file(operation: &Value) -> EditedFile {
    let path = operation["path"].as_str().unwrap_or_default();
    let action = match operation["type"].as_str() {
        Some("create_file") => "created",
        Some("delete_file") => "deleted",
        _ => "edited",
    };
    let mut file = empty(path, action);
    for line in operation["diff"].as_str().unwrap_or_default().lines() {
        hunk_line(&mut file, line);
    }
    if action == "created" {
        file.old_text = None;
    }
    file
}

fn empty(path: &str, action: &str) -> EditedFile {
    EditedFile {
        path: path.trim().to_owned(),
        action: action.to_owned(),
        old_text: Some(String::new()),
        new_text: String::new(),
        diff: Vec::new(),
    }
}

/// The files of a whole patch (`*** Begin Patch` … `*** End Patch`).
fn patch_files(patch: &str) -> Vec<EditedFile> {
    let mut files: Vec<EditedFile> = Vec::new();
    for line in patch.lines().map(|line| line.trim_end_matches('\r')) {
        let header = [
            ("*** Add File: ", "created"),
            ("*** Update File: ", "edited"),
            ("*** Delete File: ", "deleted"),
        ]
        .into_iter()
        .find_map(|(prefix, action)| line.strip_prefix(prefix).map(|path| (path, action)));
        if let Some((path, action)) = header {
            let mut file = empty(path, action);
            if action == "created" {
                file.old_text = None;
            }
            files.push(file);
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if let Some(target) = line.strip_prefix("*** Move to: ") {
            file.action = format!("moved to {}", target.trim());
        } else if !line.starts_with("***") {
            hunk_line(file, line);
        }
    }
    files
}

fn hunk_line(file: &mut EditedFile, line: &str) {
    let push = |text: &mut String, line: &str| {
        text.push_str(line);
        text.push('\n');
    };
    if line.starts_with("@@") {
        file.diff.push(line.to_owned());
    } else if let Some(added) = line.strip_prefix('+') {
        push(&mut file.new_text, added);
        file.diff.push(line.to_owned());
    } else if let Some(removed) = line.strip_prefix('-') {
        if let Some(old) = &mut file.old_text {
            push(old, removed);
        }
        file.diff.push(line.to_owned());
    } else {
        let context = line.strip_prefix(' ').unwrap_or(line);
        if let Some(old) = &mut file.old_text {
            push(old, context);
        }
        push(&mut file.new_text, context);
        file.diff.push(format!(" {context}"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_replacement_is_its_old_and_new_text_with_a_line_diff() {
        let files = edited_files(
            "edit_file",
            &json!({"path": "a.rs", "old_string": "let x = 1;\nkeep\n", "new_string": "let x = 2;\nkeep\n"}),
        );
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].old_text.as_deref(), Some("let x = 1;\nkeep\n"));
        assert_eq!(files[0].diff, ["-let x = 1;", "+let x = 2;", " keep"]);
        let view = json!({"command": "view", "path": "a.rs"});
        assert!(edited_files("str_replace_based_edit_tool", &view).is_empty());
        assert!(edited_files("shell", &json!({"command": "ls"})).is_empty());
    }

    #[test]
    fn a_patch_gives_each_file_its_hunks() {
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn main\n keep\n-old\n+new\n*** Delete File: gone.txt\n*** End Patch\n";
        let files = edited_files("apply_patch", &json!({"input": patch}));
        let summary: Vec<(&str, &str)> = files
            .iter()
            .map(|file| (file.path.as_str(), file.action.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("new.txt", "created"),
                ("src/a.rs", "moved to src/b.rs"),
                ("gone.txt", "deleted")
            ]
        );
        assert_eq!(files[0].old_text, None);
        assert_eq!(files[0].new_text, "hello\n");
        assert_eq!(files[1].old_text.as_deref(), Some("keep\nold\n"));
        assert_eq!(files[1].new_text, "keep\nnew\n");
        assert_eq!(files[1].diff, ["@@ fn main", " keep", "-old", "+new"]);

        let native =
            json!({"operation": {"type": "update_file", "path": "x.py", "diff": "@@\n-a\n+b\n"}});
        let files = edited_files("apply_patch", &native);
        assert_eq!(files[0].path, "x.py");
        assert_eq!(files[0].diff, ["@@", "-a", "+b"]);
    }
}
