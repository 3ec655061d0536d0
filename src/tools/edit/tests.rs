//! The edit tools as the model calls them, through `run_tool`: files on disk checked byte by
//! byte afterwards.

use std::path::Path;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::edited_paths;
use crate::config::SandboxMode;
use crate::tools::tests::context;
use crate::tools::{ToolContext, ToolResult, ToolStatus, run_tool};

async fn call(name: &str, arguments: Value, ctx: &ToolContext) -> ToolResult {
    let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
    run_tool(name, &arguments, ctx, &live, &CancellationToken::new()).await
}

async fn edit(ctx: &ToolContext, path: &str, old: &str, new: &str) -> ToolResult {
    call(
        "edit_file",
        json!({"path": path, "old_string": old, "new_string": new}),
        ctx,
    )
    .await
}

async fn patch(ctx: &ToolContext, patch: &str) -> ToolResult {
    call("apply_patch", json!({ "input": patch }), ctx).await
}

#[track_caller]
fn completed(result: &ToolResult, output: &str) {
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    assert_eq!(result.output, output);
}

#[track_caller]
fn failed(result: &ToolResult) -> &str {
    assert_eq!(result.status, ToolStatus::Failed, "{}", result.output);
    &result.output
}

fn read(dir: &Path, path: &str) -> Vec<u8> {
    std::fs::read(dir.join(path)).unwrap()
}

fn utf16le(text: &str) -> Vec<u8> {
    let mut bytes = vec![0xFF, 0xFE];
    for unit in text.encode_utf16() {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    bytes
}

#[tokio::test]
async fn edit_file_replaces_a_unique_match() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("x.rs"), "fn a() {}\nfn b() {\n    1\n}\n").unwrap();
    let result = edit(
        &ctx,
        "x.rs",
        "fn b() {\n    1\n",
        "fn b() {\n    2\n    3\n",
    )
    .await;
    completed(&result, "edited x.rs: replaced 1 occurrence (lines 2-4)");
    assert_eq!(
        read(dir.path(), "x.rs"),
        b"fn a() {}\nfn b() {\n    2\n    3\n}\n"
    );
}

#[tokio::test]
async fn an_ambiguous_match_names_the_count_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let original = "x = 1\ny = 2\nx = 1\nx = 1\n";
    std::fs::write(dir.path().join("x.py"), original).unwrap();
    let result = edit(&ctx, "x.py", "x = 1", "x = 2").await;
    assert_eq!(
        failed(&result),
        "found 3 matches of old_string in x.py (at lines 1, 3, 4); give more context or set \
         replace_all"
    );
    assert_eq!(read(dir.path(), "x.py"), original.as_bytes());

    let result = call(
        "edit_file",
        json!({"path": "x.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
        &ctx,
    )
    .await;
    completed(
        &result,
        "edited x.py: replaced 3 occurrences (lines 1, 3, 4)",
    );
    assert_eq!(read(dir.path(), "x.py"), b"x = 2\ny = 2\nx = 2\nx = 2\n");
}

#[tokio::test]
async fn a_missing_match_shows_the_closest_numbered_lines() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let original = "import os\n\ndef main():\n    print('hello')\n    return 0\n";
    std::fs::write(dir.path().join("m.py"), original).unwrap();
    let result = edit(&ctx, "m.py", "def main():\n    print(\"hello\")", "x").await;
    assert_eq!(
        failed(&result),
        "old_string was not found in m.py. The closest lines of m.py (line numbers first, then \
         a tab):\n     3\tdef main():\n     4\t    print('hello')"
    );
    assert_eq!(read(dir.path(), "m.py"), original.as_bytes());
}

#[tokio::test]
async fn crlf_files_keep_crlf_byte_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("w.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let result = edit(&ctx, "w.txt", "two\nthree\n", "2\n3\n4\n").await;
    completed(&result, "edited w.txt: replaced 1 occurrence (lines 2-4)");
    assert_eq!(read(dir.path(), "w.txt"), b"one\r\n2\r\n3\r\n4\r\n");

    // Old text in CRLF matches too, and the patch tool keeps CRLF the same way.
    let result = edit(&ctx, "w.txt", "2\r\n3", "two\r\nthree").await;
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    let result = patch(
        &ctx,
        "*** Begin Patch\n*** Update File: w.txt\n one\n-two\n+TWO\n three\n*** End Patch",
    )
    .await;
    completed(&result, "applied the patch: updated w.txt (1 hunk)");
    assert_eq!(read(dir.path(), "w.txt"), b"one\r\nTWO\r\nthree\r\n4\r\n");
}

#[tokio::test]
async fn a_bom_and_utf16_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("bom.cs"), b"\xEF\xBB\xBFclass A {}\n").unwrap();
    let result = edit(&ctx, "bom.cs", "A", "B").await;
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    assert_eq!(read(dir.path(), "bom.cs"), b"\xEF\xBB\xBFclass B {}\n");

    std::fs::write(
        dir.path().join("u16.txt"),
        utf16le("caf\u{e9}\r\n\u{1F600}\r\n"),
    )
    .unwrap();
    let result = edit(&ctx, "u16.txt", "caf\u{e9}\n", "tea\nhot\n").await;
    completed(&result, "edited u16.txt: replaced 1 occurrence (lines 1-2)");
    assert_eq!(
        read(dir.path(), "u16.txt"),
        utf16le("tea\r\nhot\r\n\u{1F600}\r\n")
    );
}

#[tokio::test]
async fn invalid_utf8_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let original = b"text \xff\xfe more";
    std::fs::write(dir.path().join("blob.bin"), original).unwrap();
    let result = edit(&ctx, "blob.bin", "text", "TEXT").await;
    assert_eq!(
        failed(&result),
        "blob.bin is not a text file the edit tools can change (invalid UTF-8 at byte 5); \
         nothing was written. Use the shell for other files."
    );
    let result = patch(
        &ctx,
        "*** Begin Patch\n*** Update File: blob.bin\n-text\n+TEXT\n*** End Patch",
    )
    .await;
    assert!(failed(&result).starts_with("blob.bin is not a text file"));
    assert_eq!(read(dir.path(), "blob.bin"), original);
}

#[tokio::test]
async fn no_op_edits_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let file = dir.path().join("same.txt");
    std::fs::write(&file, "a\r\nb\r\n").unwrap();
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    completed(
        &edit(&ctx, "same.txt", "a", "a").await,
        "no change: old_string and new_string are the same; nothing was written",
    );
    // Different as given, the same once the file's CRLF is taken into account.
    completed(
        &edit(&ctx, "same.txt", "a\nb", "a\r\nb").await,
        "no change: the edit leaves same.txt as it was; nothing was written",
    );
    completed(
        &patch(
            &ctx,
            "*** Begin Patch\n*** Update File: same.txt\n-a\n+a\n*** End Patch",
        )
        .await,
        "no change: the patch leaves every file as it was; nothing was written",
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(read(dir.path(), "same.txt"), b"a\r\nb\r\n");
}

#[tokio::test]
async fn an_empty_old_string_creates_a_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    completed(
        &edit(&ctx, "new/file.txt", "", "hello\nworld\n").await,
        "created new/file.txt (2 lines)",
    );
    assert_eq!(read(dir.path(), "new/file.txt"), b"hello\nworld\n");
    assert_eq!(
        failed(&edit(&ctx, "new/file.txt", "", "again").await),
        "old_string is empty, but new/file.txt is not: give the text to replace (an empty \
         old_string only creates a file or fills an empty one)"
    );
    assert_eq!(
        failed(&edit(&ctx, "missing.txt", "x", "y").await),
        "no such file: missing.txt (an empty old_string creates a file)"
    );
    std::fs::write(dir.path().join("empty.txt"), "").unwrap();
    completed(
        &edit(&ctx, "empty.txt", "", "filled").await,
        "edited empty.txt: wrote 1 line into the empty file",
    );
    assert_eq!(read(dir.path(), "empty.txt"), b"filled");
    assert_eq!(
        failed(&call("edit_file", json!({"path": "x", "old_string": "a"}), &ctx).await),
        "missing required parameter `new_string` (a string)"
    );
}

#[tokio::test]
async fn a_patch_over_several_files_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("a.txt"), "a1\na2\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "b1\r\nb2\r\n").unwrap();
    let result = patch(
        &ctx,
        "*** Begin Patch\n\
         *** Update File: a.txt\n-a1\n+A1\n\
         *** Add File: c.txt\n+c\n\
         *** Delete File: b.txt\n\
         *** Update File: a.txt\n-no such line\n+x\n\
         *** End Patch",
    )
    .await;
    assert_eq!(
        failed(&result),
        "a.txt: the hunk: these lines were not found:\n  no such line\nThe patch was not \
         applied: no file was changed."
    );
    assert_eq!(read(dir.path(), "a.txt"), b"a1\na2\n");
    assert_eq!(read(dir.path(), "b.txt"), b"b1\r\nb2\r\n");
    assert!(!dir.path().join("c.txt").exists());

    for (patch_text, expected) in [
        (
            "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch",
            "cannot add a.txt: it already exists (update it instead)",
        ),
        (
            "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
            "cannot delete nope.txt: no such file",
        ),
        (
            "*** Begin Patch\n*** Update File: nope.txt\n-x\n*** End Patch",
            "cannot update nope.txt: no such file",
        ),
        (
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch",
            "cannot move a.txt to b.txt: b.txt already exists",
        ),
    ] {
        assert_eq!(
            failed(&patch(&ctx, patch_text).await),
            format!("{expected}\nThe patch was not applied: no file was changed.")
        );
    }
    assert_eq!(
        failed(&patch(&ctx, "*** Update File: a.txt").await),
        "invalid patch: the patch must start with `*** Begin Patch`"
    );
}

#[tokio::test]
async fn a_patch_adds_deletes_moves_and_updates() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(
        dir.path().join("lib.rs"),
        "mod a {\n    fn f() {\n        1\n    }\n}\nmod b {\n    fn f() {\n        1\n    }\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("old.txt"), "keep\nme\n").unwrap();
    std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
    let result = patch(
        &ctx,
        "*** Begin Patch\n\
         *** Update File: lib.rs\n\
         @@ mod b {\n\
         @@ fn f() {\n\
         -        1\n\
         +        2\n\
         @@\n\
         -}\n\
         +} // b\n\
         *** End of File\n\
         *** Add File: docs/new.md\n\
         +# New\n\
         +\n\
         *** Update File: old.txt\n\
         *** Move to: moved/new.txt\n\
         \x20keep\n\
         -me\n\
         +you\n\
         *** Delete File: gone.txt\n\
         *** End Patch\n",
    )
    .await;
    completed(
        &result,
        "applied the patch:\nupdated lib.rs (2 hunks)\nadded docs/new.md (2 lines)\nmoved \
         old.txt to moved/new.txt (1 hunk)\ndeleted gone.txt",
    );
    assert_eq!(
        String::from_utf8(read(dir.path(), "lib.rs")).unwrap(),
        "mod a {\n    fn f() {\n        1\n    }\n}\nmod b {\n    fn f() {\n        2\n    }\n} // b\n"
    );
    assert_eq!(read(dir.path(), "docs/new.md"), b"# New\n\n");
    assert_eq!(read(dir.path(), "moved/new.txt"), b"keep\nyou\n");
    assert!(!dir.path().join("old.txt").exists());
    assert!(!dir.path().join("gone.txt").exists());
}

#[tokio::test]
async fn a_moved_file_keeps_its_permissions_and_an_edited_one_keeps_them_too() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |dir: &Path, path: &str| {
        std::fs::metadata(dir.join(path))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    for sandbox in [SandboxMode::WorkspaceWrite, SandboxMode::Off] {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        ctx.sandbox.mode = sandbox;
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh\necho a\n").unwrap();
        // A set-id bit is never carried over.
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o4750)).unwrap();
        let result = patch(
            &ctx,
            "*** Begin Patch\n*** Update File: run.sh\n*** Move to: bin/run.sh\n\
             \x20#!/bin/sh\n-echo a\n+echo b\n*** End Patch",
        )
        .await;
        completed(
            &result,
            "applied the patch: moved run.sh to bin/run.sh (1 hunk)",
        );
        assert_eq!(read(dir.path(), "bin/run.sh"), b"#!/bin/sh\necho b\n");
        assert_eq!(mode(dir.path(), "bin/run.sh"), 0o750, "{sandbox:?}");
        completed(
            &edit(&ctx, "bin/run.sh", "echo b", "echo c").await,
            "edited bin/run.sh: replaced 1 occurrence (line 2)",
        );
        assert_eq!(mode(dir.path(), "bin/run.sh"), 0o750, "{sandbox:?}");
    }
}

#[tokio::test]
async fn a_patch_forgives_whitespace_at_line_ends() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("p.py"), "def f():  \n\treturn 1\n").unwrap();
    let result = patch(
        &ctx,
        "*** Begin Patch\n*** Update File: p.py\n def f():\n-    return 1\n+\treturn 2\n\
         *** End Patch",
    )
    .await;
    completed(&result, "applied the patch: updated p.py (1 hunk)");
    // The context line keeps the file's own trailing spaces.
    assert_eq!(read(dir.path(), "p.py"), b"def f():  \n\treturn 2\n");
}

#[tokio::test]
async fn the_native_form_creates_updates_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let native = |kind: &str, path: &str, diff: Option<&str>| {
        let mut operation = json!({"type": kind, "path": path});
        if let Some(diff) = diff {
            operation["diff"] = diff.into();
        }
        json!({ "operation": operation })
    };
    let result = call(
        "apply_patch",
        native("create_file", "src/n.txt", Some("+one\n+two\n")),
        &ctx,
    )
    .await;
    completed(&result, "applied the patch: added src/n.txt (2 lines)");
    assert_eq!(read(dir.path(), "src/n.txt"), b"one\ntwo\n");

    let result = call(
        "apply_patch",
        native("update_file", "src/n.txt", Some("@@\n one\n-two\n+2\n")),
        &ctx,
    )
    .await;
    completed(&result, "applied the patch: updated src/n.txt (1 hunk)");
    assert_eq!(read(dir.path(), "src/n.txt"), b"one\n2\n");

    let result = call(
        "apply_patch",
        native("delete_file", "src/n.txt", None),
        &ctx,
    )
    .await;
    completed(&result, "applied the patch: deleted src/n.txt");
    assert!(!dir.path().join("src/n.txt").exists());

    for (arguments, expected) in [
        (
            native("update_file", "x", None),
            "a `update_file` operation needs its `diff` (a string)",
        ),
        (
            native("rename_file", "x", None),
            "unknown operation type `rename_file`: use create_file, update_file or delete_file",
        ),
        (
            native("create_file", "x", Some("no plus")),
            "invalid diff: line 1 of the patch: every line of an added file must start with \
             `+`, found `no plus`",
        ),
        (
            json!({"operation": "create"}),
            "`operation` must be an object, not a string",
        ),
        (
            json!({}),
            "missing required parameter `input` (a string: the patch, from `*** Begin Patch` \
             to `*** End Patch`)",
        ),
    ] {
        assert_eq!(
            failed(&call("apply_patch", arguments, &ctx).await),
            expected
        );
    }
}

#[tokio::test]
async fn the_text_editor_views_creates_replaces_and_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let editor = |arguments: Value| call("str_replace_based_edit_tool", arguments, &ctx);

    let result = editor(json!({"command": "create", "path": "t.txt", "file_text": "a\nb\n"})).await;
    completed(&result, "created t.txt (2 lines)");
    assert_eq!(read(dir.path(), "t.txt"), b"a\nb\n");

    let result =
        editor(json!({"command": "str_replace", "path": "t.txt", "old_str": "b", "new_str": "B"}))
            .await;
    completed(&result, "edited t.txt: replaced 1 occurrence (line 2)");
    let result = editor(json!({"command": "str_replace", "path": "t.txt", "old_str": "\n"})).await;
    assert_eq!(
        failed(&result),
        "found 2 matches of old_str in t.txt (at lines 1, 2); give more context to make it unique"
    );

    let result = editor(
        json!({"command": "insert", "path": "t.txt", "insert_line": 0, "insert_text": "top"}),
    )
    .await;
    completed(&result, "inserted 1 line at the top of t.txt");
    let result = editor(
        json!({"command": "insert", "path": "t.txt", "insert_line": 3, "insert_text": "end\n"}),
    )
    .await;
    completed(&result, "inserted 1 line after line 3 of t.txt");
    assert_eq!(read(dir.path(), "t.txt"), b"top\na\nB\nend\n");
    let result =
        editor(json!({"command": "insert", "path": "t.txt", "insert_line": 9, "insert_text": "x"}))
            .await;
    assert_eq!(
        failed(&result),
        "insert_line 9 is past the end of t.txt, which has 4 lines"
    );

    // `create` over a CRLF file keeps CRLF.
    std::fs::write(dir.path().join("w.txt"), "old\r\n").unwrap();
    let result =
        editor(json!({"command": "create", "path": "w.txt", "file_text": "new\nlines\n"})).await;
    completed(&result, "replaced the content of w.txt (2 lines)");
    assert_eq!(read(dir.path(), "w.txt"), b"new\r\nlines\r\n");

    let result = editor(json!({"command": "view", "path": "t.txt"})).await;
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    assert!(result.output.contains("top"), "{}", result.output);
    let result = editor(json!({"command": "view", "path": "t.txt", "view_range": [2, -1]})).await;
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/inner.txt"), "").unwrap();
    completed(
        &editor(json!({"command": "view", "path": "sub"})).await,
        "inner.txt",
    );
    for (arguments, expected) in [
        (
            json!({"command": "view", "path": "t.txt", "view_range": [3, 2]}),
            "view_range must be [start, end]: 1-based line numbers, end -1 for the end of the \
             file; got [3,2]",
        ),
        (
            json!({"command": "view", "path": "sub", "view_range": [1, 2]}),
            "sub is a directory: view_range applies to files",
        ),
        (
            json!({"command": "undo_edit", "path": "t.txt"}),
            "unknown command `undo_edit`: use view, create, str_replace or insert",
        ),
        (
            json!({"path": "t.txt"}),
            "missing required parameter `command` (a string)",
        ),
        (
            json!({"command": "insert", "path": "nope.txt", "insert_line": 0, "insert_text": "x"}),
            "no such file: nope.txt (the create command makes one)",
        ),
    ] {
        assert_eq!(
            failed(&editor(arguments.clone()).await),
            expected,
            "{arguments}"
        );
    }
}

/// Until `read_file` takes a range, `view` still answers with the file; once it does, only the
/// lines asked for.
#[tokio::test]
async fn the_text_editor_passes_its_range_to_read_file() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("r.txt"), "first\nsecond\nthird\n").unwrap();
    let result = call(
        "str_replace_based_edit_tool",
        json!({"command": "view", "path": "r.txt", "view_range": [2, 2]}),
        &ctx,
    )
    .await;
    assert_eq!(result.status, ToolStatus::Completed, "{}", result.output);
    assert!(result.output.contains("second"), "{}", result.output);
}

#[tokio::test]
async fn a_link_to_outside_is_never_written_through_under_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    assert!(ctx.sandbox.enforced());
    let target = outside.path().join("secret.txt");
    std::fs::write(&target, "outside\n").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();

    let result = edit(&ctx, "link.txt", "outside", "inside").await;
    assert_eq!(
        failed(&result),
        "could not write link.txt: `link.txt` is a symbolic link: files are never written \
         through a link; no file was changed"
    );
    let result = edit(&ctx, "linkdir/secret.txt", "outside", "inside").await;
    assert!(
        failed(&result).contains("`linkdir` is a symbolic link"),
        "{}",
        result.output
    );
    let result = call(
        "str_replace_based_edit_tool",
        json!({"command": "create", "path": "linkdir/new.txt", "file_text": "x"}),
        &ctx,
    )
    .await;
    assert!(failed(&result).contains("`linkdir` is a symbolic link"));
    // A patch whose second file is the link: the first is put back.
    let result = patch(
        &ctx,
        "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: link.txt\n\
         -outside\n+inside\n*** End Patch",
    )
    .await;
    assert_eq!(
        failed(&result),
        "could not write link.txt: `link.txt` is a symbolic link: files are never written \
         through a link; the change was rolled back: a.txt put back as it was"
    );
    assert_eq!(read(dir.path(), "a.txt"), b"a\n");
    assert_eq!(std::fs::read(&target).unwrap(), b"outside\n");
    assert!(!outside.path().join("new.txt").exists());

    // A read-only sandbox refuses before anything is written.
    let mut read_only = context(dir.path());
    read_only.sandbox.mode = SandboxMode::ReadOnly;
    let result = patch(
        &read_only,
        "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** End Patch",
    )
    .await;
    assert!(
        failed(&result).starts_with("blocked by the sandbox: no writes allowed"),
        "{}",
        result.output
    );
    assert_eq!(read(dir.path(), "a.txt"), b"a\n");
}

#[tokio::test]
async fn an_interrupt_leaves_the_files_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    // Cancelled before the call: `run_tool` starts nothing.
    let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
    let arguments = json!({"path": "a.txt", "old_string": "a", "new_string": "b"});
    let result = run_tool("edit_file", &arguments, &ctx, &live, &cancel).await;
    assert_eq!(result.status, ToolStatus::Interrupted);
    assert_eq!(result.output, "interrupted before `edit_file` started");
    // Cancelled while the change was computed: it stops before its first write.
    let result = super::run("edit_file", &arguments, &ctx, &cancel).await;
    assert_eq!(result.status, ToolStatus::Interrupted);
    assert_eq!(
        result.output,
        "interrupted before a.txt was written; it is unchanged"
    );
    let result = super::run(
        "apply_patch",
        &json!({"input": "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch"}),
        &ctx,
        &cancel,
    )
    .await;
    assert_eq!(result.status, ToolStatus::Interrupted);
    assert_eq!(read(dir.path(), "a.txt"), b"a\n");
    assert!(!dir.path().join("b.txt").exists());
}

#[test]
fn edited_paths_name_every_file_written() {
    assert_eq!(
        edited_paths("edit_file", &json!({"path": "src/a.rs", "old_string": "x"})),
        ["src/a.rs"]
    );
    let patch = "*** Begin Patch\n*** Update File: a.rs\n*** Move to: b.rs\n-x\n+y\n\
                 *** Add File: c.rs\n+c\n*** Delete File: a.rs\n*** End Patch";
    assert_eq!(
        edited_paths("apply_patch", &json!({ "input": patch })),
        ["a.rs", "b.rs", "c.rs"]
    );
    assert_eq!(
        edited_paths(
            "apply_patch",
            &json!({"operation": {"type": "delete_file", "path": "d.rs"}})
        ),
        ["d.rs"]
    );
    assert_eq!(
        edited_paths(
            "str_replace_based_edit_tool",
            &json!({"command": "insert", "path": "e.rs"})
        ),
        ["e.rs"]
    );
    let none: [&str; 0] = [];
    assert_eq!(
        edited_paths(
            "str_replace_based_edit_tool",
            &json!({"command": "view", "path": "e.rs"})
        ),
        none
    );
    assert_eq!(
        edited_paths("apply_patch", &json!({"input": "not a patch"})),
        none
    );
    assert_eq!(edited_paths("edit_file", &json!("x")), none);
    assert_eq!(edited_paths("shell", &json!({"path": "x"})), none);
}

#[test]
fn the_example_in_the_apply_patch_spec_is_a_valid_patch() {
    let specs = crate::tools::specs(&["apply_patch".to_owned()]);
    let description = &specs[0].description;
    let start = description.find("*** Begin Patch").unwrap();
    let end = description.find("*** End Patch").unwrap() + "*** End Patch".len();
    let ops = super::patch::parse_patch(&description[start..end]).unwrap();
    assert_eq!(ops.len(), 3);
}
