//! Garbage collection of the checkpoint store, end to end: the contents only a deleted
//! conversation's snapshots held go (through `openvaala gc` with the service stopped, and
//! through the service's own periodic collection), while a living conversation's restore
//! still works; a directory that no longer exists loses its whole store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::checkpoints::{config, create, start, turn, write};
use crate::fake_provider::{FakeProvider, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT, on_data_dir};

/// Where the store keeps a content.
pub(crate) fn blob(data_dir: &Path, content: &str) -> PathBuf {
    let hex: String = Sha256::digest(content.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    data_dir
        .join("checkpoints/objects")
        .join(&hex[..2])
        .join(&hex[2..])
}

/// Two conversations in two directories, each writing its file twice; the first is deleted.
/// Answers the kept one's id and the directories.
async fn two_conversations_one_deleted(
    server: &Server,
    fake: &FakeProvider,
    work: &Path,
) -> (String, PathBuf, PathBuf) {
    let (gone_dir, kept_dir) = (work.join("gone"), work.join("kept"));
    std::fs::create_dir_all(&gone_dir).unwrap();
    std::fs::create_dir_all(&kept_dir).unwrap();
    let (gone, _) = create(server, fake, &gone_dir, vec![write("f.txt", "gone v1\n")]).await;
    turn(
        server,
        fake,
        &gone,
        "again",
        vec![write("f.txt", "gone v2\n")],
    )
    .await;
    let (kept, _) = create(server, fake, &kept_dir, vec![write("g.txt", "kept v1\n")]).await;
    turn(
        server,
        fake,
        &kept,
        "again",
        vec![write("g.txt", "kept v2\n")],
    )
    .await;
    for content in ["gone v1\n", "gone v2\n", "kept v1\n", "kept v2\n"] {
        assert!(blob(&server.data_dir, content).exists(), "{content}");
    }
    let (status, _) = server.delete(&format!("/api/conversations/{gone}")).await;
    assert_eq!(status, 204);
    (kept, gone_dir, kept_dir)
}

/// The kept conversation's second turn is undone: its file is back to its first content.
async fn restore_second_turn(server: &Server, id: &str, dir: &Path) {
    let message = crate::support::items(server, id)
        .await
        .iter()
        .find(|item| item["kind"] == "user_message" && item["text"] == "again")
        .unwrap()["id"]
        .clone();
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/rewind"),
            json!({ "message_id": message, "restore_files": true }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["restore"]["restored"], json!(["g.txt"]), "{body}");
    assert_eq!(
        std::fs::read_to_string(dir.join("g.txt")).unwrap(),
        "kept v1\n"
    );
}

#[tokio::test]
async fn gc_drops_what_only_a_deleted_conversation_needed_and_keeps_the_rest() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().join("data");
    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let (kept, gone_dir, kept_dir) =
        two_conversations_one_deleted(&server, &fake, work.path()).await;

    let (ok, output) = on_data_dir("gc", &data_dir).await;
    assert!(!ok, "refused while the service runs: {output}");
    assert!(output.contains("the service is running"), "{output}");
    assert!(blob(&data_dir, "gone v1\n").exists());

    let data_dir = server.stop().await;
    let (ok, output) = on_data_dir("gc", &data_dir).await;
    assert!(ok, "{output}");
    assert!(output.contains("removed"), "{output}");
    // Only the deleted conversation's snapshots held its first content; its directory's
    // newest snapshot stays (the next call's changes count from it).
    assert!(!blob(&data_dir, "gone v1\n").exists(), "{output}");
    assert!(blob(&data_dir, "gone v2\n").exists(), "{output}");
    assert!(blob(&data_dir, "kept v1\n").exists(), "{output}");

    // Once the directory is gone too, nothing of it stays.
    std::fs::remove_dir_all(&gone_dir).unwrap();
    let (ok, output) = on_data_dir("gc", &data_dir).await;
    assert!(ok, "{output}");
    assert!(output.contains("1 working director"), "{output}");
    assert!(!blob(&data_dir, "gone v2\n").exists(), "{output}");

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    restore_second_turn(&server, &kept, &kept_dir).await;
}

#[tokio::test]
async fn the_service_collects_the_store_while_it_runs() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, "checkpoint_gc_interval_s = 1\n")),
        ..ServerOptions::default()
    })
    .await;
    let work = tempfile::tempdir().unwrap();
    let (kept, _, kept_dir) = two_conversations_one_deleted(&server, &fake, work.path()).await;
    let gone = blob(&server.data_dir, "gone v1\n");
    tokio::time::timeout(TIMEOUT, async {
        while gone.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the service never collected the store");
    assert!(blob(&server.data_dir, "kept v1\n").exists());
    restore_second_turn(&server, &kept, &kept_dir).await;
}
