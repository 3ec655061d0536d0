//! `openvaala reindex` (invariant 3, the index is derived): dropping the index and rebuilding
//! it gives the same listing and search; unreadable conversations are reported.

use serde_json::{Value, json};

use crate::harness::{Server, reindex};

async fn views(server: &Server) -> Vec<Value> {
    let mut views = Vec::new();
    for query in [
        "/api/conversations?archived=all&limit=500",
        "/api/conversations",
        "/api/conversations?archived=true",
        "/api/conversations?q=zebra&archived=all",
        "/api/conversations?q=Demo%20model&archived=all",
        "/api/conversations?q=%E4%B8%AD%E6%96%87",
        "/api/conversations?limit=2",
    ] {
        let (status, body) = server.get(query).await;
        assert_eq!(status, 200);
        views.push(body);
    }
    views
}

#[tokio::test]
async fn listing_and_search_are_the_same_after_a_reindex() {
    let server = Server::start().await;
    let mut ids = Vec::new();
    for text in [
        "first about a zebra",
        "second one",
        "中文 third",
        "fourth zebra too",
        "fifth",
    ] {
        let created = server.create_and_wait(text).await;
        ids.push(created["conversation"]["id"].as_str().unwrap().to_owned());
    }
    server
        .patch(
            &format!("/api/conversations/{}", ids[1]),
            json!({ "archived": true }),
        )
        .await;
    server
        .patch(
            &format!("/api/conversations/{}", ids[2]),
            json!({ "title": "renamed 中文" }),
        )
        .await;
    server
        .post(
            &format!("/api/conversations/{}/messages", ids[0]),
            json!({ "text": "more words" }),
        )
        .await;
    server.wait_idle(&ids[0]).await;
    let before = views(&server).await;
    assert_eq!(before[0]["conversations"].as_array().unwrap().len(), 5);

    let data_dir = server.stop().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(data_dir.join(format!("metadata.db{suffix}")));
    }
    let (ok, output) = reindex(&data_dir).await;
    assert!(ok, "{output}");
    assert!(
        output.contains("indexed 5 conversation(s), skipped 0"),
        "{output}"
    );

    let server = Server::start_in(&data_dir).await;
    assert_eq!(views(&server).await, before);
}

#[tokio::test]
async fn reindex_reports_what_it_skips_and_finishes_interrupted_deletes() {
    let server = Server::start().await;
    let good = server.create_and_wait("good one").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let broken = server.create_and_wait("broken one").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let future = server.create_and_wait("from the future").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let torn = server.create_and_wait("torn tail").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let damaged = server.create_and_wait("damaged").await["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let data_dir = server.stop().await;
    let conversations = data_dir.join("conversations");

    std::fs::write(
        conversations.join(&broken).join("metadata.jsonl"),
        "this is not json\n",
    )
    .unwrap();
    let future_meta = conversations.join(&future).join("metadata.jsonl");
    let mut text = std::fs::read_to_string(&future_meta).unwrap();
    text.push_str("{\"v\":7,\"type\":\"conversation.updated\"}\n");
    std::fs::write(&future_meta, text).unwrap();
    let torn_meta = conversations.join(&torn).join("metadata.jsonl");
    let mut text = std::fs::read_to_string(&torn_meta).unwrap();
    text.push_str("{\"v\":1,\"type\":\"conversation.upd");
    std::fs::write(&torn_meta, text).unwrap();
    // A damaged line with a record after it: listed as far as it reads, reported.
    let damaged_meta = conversations.join(&damaged).join("metadata.jsonl");
    let mut text = std::fs::read_to_string(&damaged_meta).unwrap();
    let first_end = text.find('\n').unwrap() + 1;
    text.insert_str(first_end, "\0\0\0\0 not a record\n");
    std::fs::write(&damaged_meta, text).unwrap();
    // A delete cut short after its rename.
    std::fs::create_dir_all(data_dir.join("trash")).unwrap();
    std::fs::rename(
        conversations.join(&good),
        data_dir.join("trash").join(&good),
    )
    .unwrap();

    let (ok, output) = reindex(&data_dir).await;
    assert!(ok, "{output}");
    assert!(
        output.contains(&format!("skipped {broken}: unreadable metadata.jsonl")),
        "{output}"
    );
    assert!(
        output.contains(&format!("skipped {future}: unknown schema version 7")),
        "{output}"
    );
    assert!(output.contains("torn tail"), "{output}");
    assert!(
        output.contains(&format!(
            "damaged line(s) 2 in {}: {damaged} is listed but cannot open; run `openvaala repair {damaged}`",
            damaged_meta.display()
        )),
        "{output}"
    );
    assert!(
        output.contains(&format!("finished the interrupted delete of {good}")),
        "{output}"
    );
    assert!(
        output.contains("indexed 2 conversation(s), skipped 2"),
        "{output}"
    );
    assert!(!data_dir.join("trash").join(&good).exists());

    let server = Server::start_in(&data_dir).await;
    let (_, list) = server.get("/api/conversations?archived=all").await;
    let titles: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, vec!["damaged", "torn tail"]);
}
