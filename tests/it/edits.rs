//! The edit tools through a model: `edit_file` and `apply_patch` (the function form) called
//! by a scripted model over OpenAI Chat, the files on disk checked byte by byte afterwards. A
//! CRLF file keeps CRLF, an ambiguous match fails naming the count and changes nothing, and a
//! patch over several files is all or nothing.

use std::path::Path;

use serde_json::{Value, json};

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions};
use crate::support::items;

/// The fake provider's config, the agent with the file tools and the edit tools.
fn config(fake: &FakeProvider) -> String {
    // `edit_tool = "apply_patch"` offers the patch function beside edit_file.
    fake.config()
        .replace(
            "tools = [\"shell\"]",
            "tools = [\"read_file\", \"write_file\", \"edit_file\"]",
        )
        .replace(
            "max_output_tokens = 1000",
            "max_output_tokens = 1000\nedit_tool = \"apply_patch\"",
        )
}

fn edit(path: &str, old: &str, new: &str) -> Reply {
    Reply::tool_call(
        "edit_file",
        json!({ "path": path, "old_string": old, "new_string": new }),
        2,
    )
}

fn patch(input: &str) -> Reply {
    Reply::tool_call("apply_patch", json!({ "input": input }), 2)
}

fn bytes(dir: &Path, path: &str) -> Vec<u8> {
    std::fs::read(dir.join(path)).unwrap()
}

/// Runs one conversation in `cwd` whose first turn makes `replies`; answers its tool calls.
async fn run(cwd: &Path, replies: Vec<Reply>) -> Vec<Value> {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake)),
        ..ServerOptions::default()
    })
    .await;
    for reply in replies {
        fake.push(reply);
    }
    fake.push(Reply::text("Done."));
    let (status, body) = server
        .post(
            "/api/conversations",
            json!({ "text": "edit", "cwd": cwd.to_str().unwrap() }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;
    assert_eq!(fake.remaining(), 0, "every scripted reply was used");
    items(&server, &id)
        .await
        .into_iter()
        .filter(|item| item["kind"] == "tool_call")
        .collect()
}

#[tokio::test]
async fn the_model_edits_files_byte_exactly_and_all_or_nothing() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(dir.join("win.txt"), "alpha\r\nbeta\r\ngamma\r\n").unwrap();
    std::fs::write(dir.join("dup.txt"), "x = 1\nx = 1\n").unwrap();
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.join("b.txt"), "b\r\n").unwrap();
    std::fs::write(outside.path().join("target.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("target.txt"), dir.join("link.txt")).unwrap();

    let calls = run(
        dir,
        vec![
            edit("win.txt", "beta\n", "BETA\nbeta two\n"),
            edit("dup.txt", "x = 1", "x = 2"),
            // The second file's hunk does not apply: nothing is written.
            patch(
                "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n\
                 -no such line\n+x\n*** End Patch",
            ),
            // The second file is a link out of the working directory: the first is put back.
            patch(
                "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: link.txt\n\
                 -outside\n+inside\n*** End Patch",
            ),
            patch(
                "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n\
                 -b\n+B\n*** Add File: sub/c.txt\n+c\n*** End Patch",
            ),
        ],
    )
    .await;
    let summary: Vec<(&str, &str)> = calls
        .iter()
        .map(|call| {
            (
                call["status"].as_str().unwrap(),
                call["output"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary.len(), 5, "{calls:?}");
    assert_eq!(
        summary[0],
        (
            "completed",
            "edited win.txt: replaced 1 occurrence (lines 2-3)"
        )
    );
    assert_eq!(
        summary[1],
        (
            "failed",
            "found 2 matches of old_string in dup.txt (at lines 1, 2); give more context or set \
             replace_all"
        )
    );
    assert_eq!(summary[2].0, "failed");
    assert!(
        summary[2]
            .1
            .starts_with("b.txt: the hunk: these lines were not found:\n  no such line"),
        "{}",
        summary[2].1
    );
    assert!(
        summary[2]
            .1
            .ends_with("The patch was not applied: no file was changed."),
        "{}",
        summary[2].1
    );
    assert_eq!(
        summary[3],
        (
            "failed",
            "could not write link.txt: `link.txt` is a symbolic link: files are never written \
             through a link; the change was rolled back: a.txt put back as it was"
        )
    );
    assert_eq!(
        summary[4],
        (
            "completed",
            "applied the patch:\nupdated a.txt (1 hunk)\nupdated b.txt (1 hunk)\nadded sub/c.txt \
             (1 line)"
        )
    );

    assert_eq!(
        bytes(dir, "win.txt"),
        b"alpha\r\nBETA\r\nbeta two\r\ngamma\r\n"
    );
    assert_eq!(bytes(dir, "dup.txt"), b"x = 1\nx = 1\n");
    assert_eq!(bytes(dir, "a.txt"), b"A\n");
    assert_eq!(bytes(dir, "b.txt"), b"B\r\n");
    assert_eq!(bytes(dir, "sub/c.txt"), b"c\n");
    assert_eq!(
        std::fs::read(outside.path().join("target.txt")).unwrap(),
        b"outside\n"
    );
}
