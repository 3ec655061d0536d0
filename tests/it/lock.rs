//! runtime.lock: one service per data directory, `serve stop`, and `reindex` refusing
//! to run under a live service.

use tokio::process::Command;

use crate::harness::{Server, binary, reindex};

#[tokio::test]
async fn a_second_serve_fails_fast_naming_the_running_one() {
    let server = Server::start().await;
    let pid = server.child.id().unwrap();
    let output = tokio::time::timeout(
        crate::harness::TIMEOUT,
        Command::new(binary())
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(&server.data_dir)
            .env(
                "OPENVAALA_CONFIG",
                server.data_dir.with_extension("config.toml"),
            )
            .output(),
    )
    .await
    .expect("a second serve must not wait")
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("pid {pid}")), "{stderr}");
    let port = server.base.rsplit(':').next().unwrap();
    assert!(stderr.contains(port), "the address is named: {stderr}");

    // The first one is unaffected.
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn serve_stop_stops_gracefully_and_reindex_refuses_while_serving() {
    let server = Server::start().await;
    let (ok, output) = reindex(&server.data_dir).await;
    assert!(!ok, "reindex must refuse while the service runs");
    assert!(output.contains("serve stop"), "{output}");
    assert!(
        output.contains(&format!("pid {}", server.child.id().unwrap())),
        "{output}"
    );

    let data_dir = server.stop().await;
    let (ok, output) = reindex(&data_dir).await;
    assert!(ok, "{output}");

    // With nothing running, `serve stop` says so.
    let output = Command::new(binary())
        .args(["serve", "stop", "--data-dir"])
        .arg(&data_dir)
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("no openvaala is serving"));
}

#[tokio::test]
async fn a_lock_file_left_by_a_killed_server_blocks_nothing() {
    let server = Server::start().await;
    server.create_and_wait("before the crash").await;
    let data_dir = server.kill9().await;
    assert!(data_dir.join("runtime.lock").exists());
    let server = Server::start_in(&data_dir).await;
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"][0]["title"], "before the crash");
}

#[tokio::test]
async fn serve_stop_ends_running_turns_as_interrupted_and_loses_nothing() {
    let server = Server::start().await;
    let (_, created) = server
        .post(
            "/api/conversations",
            serde_json::json!({ "text": "a long one\n/sleep 100" }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut events = server.events(&id).await;
    crate::support::events_until(&mut events, "item.delta").await;
    let data_dir = server.stop().await;

    let server = Server::start_in(&data_dir).await;
    let (_, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["status"], "idle");
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let items = items["items"].as_array().unwrap();
    let answer = items
        .iter()
        .find(|i| i["kind"] == "agent_message")
        .expect("the partial answer is kept");
    assert_eq!(answer["status"], "interrupted");
    assert!(!answer["text"].as_str().unwrap().is_empty());
    let notice = items
        .iter()
        .find(|i| i["kind"] == "notice")
        .expect("a notice");
    assert!(
        notice["text"].as_str().unwrap().contains("service stopped"),
        "{notice}"
    );
}

/// Runs `serve` with a config file holding `text`; it must fail. Returns its stderr.
async fn serve_fails_with_config(text: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let output = Command::new(binary())
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(temp.path().join("data"))
        .arg("--config")
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success(), "serve started with a bad config");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_config_with_a_typo_fails_at_start_naming_the_key() {
    let stderr = serve_fails_with_config("[retry]\nmax_atempts = 3\n").await;
    assert!(stderr.contains("max_atempts"), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");

    let stderr = serve_fails_with_config(
        "[models.m]\nprovider = \"nowhere\"\nname = \"x\"\ncontext_window = 1000\nmax_output_tokens = 100\n",
    )
    .await;
    assert!(stderr.contains("models.m.provider"), "{stderr}");
}

#[tokio::test]
async fn serve_stop_with_a_mistyped_data_directory_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let output = Command::new(binary())
        .args(["serve", "stop", "--data-dir"])
        .arg(&typo)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not a data directory"), "{stderr}");
    assert!(!typo.exists(), "nothing is created");
}
