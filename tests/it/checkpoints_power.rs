//! The checkpoint store after what a power cut leaves behind, end to end: a blob left empty is
//! written again when its bytes are stored again; a restore whose blob is damaged is refused
//! before any file changes, and one a stop cut short that cannot finish is rolled back; a
//! tree whose name (`cwd`) was emptied is named again from the conversations, so its restores
//! finish and collections go on; another conversation's restore cannot be undone.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::checkpoint_gc::blob;
use crate::checkpoints::{
    create, message_id, restore_cut_short, rewind, seed, shell, start, tree, turn, write,
};
use crate::fake_provider::{FakeProvider, Wire};
use crate::harness::on_data_dir;

/// Every file named `name` in the store's tree folders.
fn tree_files(data_dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for tree in std::fs::read_dir(data_dir.join("checkpoints/trees")).unwrap() {
        let tree = tree.unwrap().path();
        if name == "restores" {
            for journal in std::fs::read_dir(tree.join("restores"))
                .into_iter()
                .flatten()
            {
                files.push(journal.unwrap().path());
            }
        } else if tree.join(name).exists() {
            files.push(tree.join(name));
        }
    }
    files
}

fn journals(data_dir: &Path) -> Vec<Value> {
    tree_files(data_dir, "restores")
        .iter()
        .map(|path| serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_blob_a_power_cut_emptied_is_written_again_and_later_restores_work() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let server = start(&fake, Some(&data.path().join("data")), Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (id, _) = create(&server, &fake, dir, vec![write("f.txt", "same\n")]).await;
    let data_dir = server.stop().await;
    // What a power cut can leave of a blob written without a flush: its name, no bytes.
    std::fs::write(blob(&data_dir, "same\n"), b"").unwrap();

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    turn(
        &server,
        &fake,
        &id,
        "other",
        vec![write("f.txt", "other\n")],
    )
    .await;
    // The same bytes again: stored again whole, not the empty file reused.
    turn(&server, &fake, &id, "same", vec![write("f.txt", "same\n")]).await;
    turn(&server, &fake, &id, "last", vec![write("f.txt", "last\n")]).await;
    assert_eq!(std::fs::read(blob(&data_dir, "same\n")).unwrap(), b"same\n");
    let message = message_id(&server, &id, "last").await;
    let (status, body) = rewind(&server, &id, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        std::fs::read_to_string(dir.join("f.txt")).unwrap(),
        "same\n"
    );
}

#[tokio::test]
async fn a_restore_needing_a_damaged_blob_is_refused_before_any_file_changes() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let server = start(&fake, Some(&data.path().join("data")), Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    seed(dir, &[("a.txt", "a0\n"), ("b.txt", "b0\n")]);
    let (id, _) = create(&server, &fake, dir, Vec::new()).await;
    turn(
        &server,
        &fake,
        &id,
        "edit",
        vec![shell("echo a1 > a.txt && echo b1 > b.txt")],
    )
    .await;
    let edited = tree(dir);
    let data_dir = server.stop().await;
    std::fs::write(blob(&data_dir, "b0\n"), b"b").unwrap();

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    let message = message_id(&server, &id, "edit").await;
    let (status, body) = rewind(&server, &id, &message, false).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "restore_unavailable", "{body}");
    let text = body["error"]["message"].as_str().unwrap();
    assert!(text.contains("b.txt is damaged"), "{text}");
    assert!(
        !text.contains("next start"),
        "no promise of a finish: {text}"
    );
    assert_eq!(tree(dir), edited, "neither file changed");
    assert!(journals(&data_dir).is_empty(), "no journal was written");
}

#[tokio::test]
async fn a_restore_cut_short_that_cannot_finish_is_rolled_back_whole() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (data_dir, _, _) = restore_cut_short(&fake, dir, &data.path().join("data")).await;
    // The blob b.txt is to be restored from is damaged since the journal was written.
    std::fs::write(blob(&data_dir, "b0\n"), b"").unwrap();

    let _server = start(&fake, Some(&data_dir), Vec::new()).await;
    // Not half restored: every path holds what it did when the restore began.
    let files = tree(dir);
    assert_eq!(files.get("a.txt").map(String::as_str), Some("a1\n"));
    assert_eq!(files.get("b.txt").map(String::as_str), Some("b1\n"));
    assert!(!files.contains_key("c.txt"), "{files:?}");
    let journals = journals(&data_dir);
    assert_eq!(journals.len(), 1);
    assert_eq!(journals[0]["state"], "rolled_back", "{}", journals[0]);
}

#[tokio::test]
async fn a_restore_cut_short_in_a_tree_whose_name_was_emptied_is_finished() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (data_dir, original, _) = restore_cut_short(&fake, dir, &data.path().join("data")).await;
    let names = tree_files(&data_dir, "cwd");
    assert_eq!(names.len(), 1);
    std::fs::write(&names[0], b"").unwrap();

    let _server = start(&fake, Some(&data_dir), Vec::new()).await;
    assert_eq!(tree(dir), original, "the next start finished the restore");
    assert_eq!(journals(&data_dir)[0]["state"], "done");
    let canonical = dir.canonicalize().unwrap();
    let named = std::fs::read(&names[0]).unwrap();
    assert!(
        named == canonical.as_os_str().as_encoded_bytes()
            || named == dir.as_os_str().as_encoded_bytes(),
        "named again: {}",
        String::from_utf8_lossy(&named)
    );
}

#[tokio::test]
async fn gc_names_emptied_trees_again_and_leaves_an_unknown_one_whole() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let server = start(&fake, Some(&data.path().join("data")), Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let (kept_dir, gone_dir) = (work.path().join("kept"), work.path().join("gone"));
    std::fs::create_dir_all(&kept_dir).unwrap();
    std::fs::create_dir_all(&gone_dir).unwrap();
    let (kept, _) = create(&server, &fake, &kept_dir, vec![write("k.txt", "k1\n")]).await;
    turn(&server, &fake, &kept, "again", vec![write("k.txt", "k2\n")]).await;
    let (gone, _) = create(&server, &fake, &gone_dir, vec![write("g.txt", "g1\n")]).await;
    let (status, _) = server.delete(&format!("/api/conversations/{gone}")).await;
    assert_eq!(status, 204);
    let data_dir = server.stop().await;
    for name in tree_files(&data_dir, "cwd") {
        std::fs::write(name, b"").unwrap();
    }

    let (ok, output) = on_data_dir("gc", &data_dir).await;
    assert!(ok, "a damaged name does not stop the collection: {output}");
    // No stored conversation works in the deleted one's directory: its tree is left whole,
    // and said so, naming the file.
    assert!(output.contains("left whole"), "{output}");
    assert!(output.contains("/cwd is empty"), "{output}");
    assert!(blob(&data_dir, "g1\n").exists(), "{output}");
    let named: Vec<Vec<u8>> = tree_files(&data_dir, "cwd")
        .iter()
        .map(|file| std::fs::read(file).unwrap())
        .filter(|bytes| !bytes.is_empty())
        .collect();
    assert_eq!(
        named.len(),
        1,
        "the kept conversation's tree is named again"
    );

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    let message = message_id(&server, &kept, "again").await;
    let (status, body) = rewind(&server, &kept, &message, false).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        std::fs::read_to_string(kept_dir.join("k.txt")).unwrap(),
        "k1\n"
    );
}

#[tokio::test]
async fn a_restore_is_undone_only_through_its_own_conversation() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (first, _) = create(&server, &fake, dir, Vec::new()).await;
    let (second, _) = create(&server, &fake, dir, Vec::new()).await;
    turn(&server, &fake, &first, "mine", vec![write("f.txt", "1\n")]).await;
    let message = message_id(&server, &first, "mine").await;
    let (status, body) = rewind(&server, &first, &message, false).await;
    assert_eq!(status, 201, "{body}");
    let restore = body["restore"]["id"].as_str().unwrap();

    let undo =
        |conversation: &str| format!("/api/conversations/{conversation}/restores/{restore}/undo");
    let (status, body) = server.post(&undo(&second), json!({})).await;
    assert_eq!(status, 404, "{body}");
    assert!(!dir.join("f.txt").exists(), "nothing was undone");
    let (status, body) = server.post(&undo(&first), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(std::fs::read_to_string(dir.join("f.txt")).unwrap(), "1\n");
}
