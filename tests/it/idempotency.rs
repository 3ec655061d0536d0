//! What a client is told is what happened: an `Idempotency-Key` reused with a
//! different body is refused with 422 `idempotency_key_reused` instead of answering the first
//! call's answer and silently dropping the new text; with the same body it is the first answer.

use serde_json::{Value, json};

use crate::harness::Server;

/// Twenty concurrent creates with one key and twenty different texts: one is created (201),
/// the other nineteen are refused (422), and exactly one conversation exists.
#[tokio::test]
async fn one_key_with_twenty_different_bodies_creates_once_and_refuses_the_rest() {
    let server = Server::start().await;
    let requests = (0..20).map(|n| {
        server.post_with_key(
            "/api/conversations",
            json!({ "text": format!("text number {n}") }),
            "shared-key",
        )
    });
    let answers = futures::future::join_all(requests).await;
    let created: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(created.len(), 1, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 422, "{body}");
        assert_eq!(body["error"]["code"], "idempotency_key_reused", "{body}");
    }
    let (_, list) = server.get("/api/conversations?archived=all").await;
    let listed = list["conversations"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    // The stored conversation is the one whose answer said so.
    assert_eq!(listed[0]["id"], created[0]["conversation"]["id"]);
    assert_eq!(listed[0]["title"], created[0]["conversation"]["title"]);

    // The same body again is the first answer, even after a restart; another body is 422.
    let winner = created[0]["message"]["text"].clone();
    let first = created[0].clone();
    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    let (status, again) = server
        .post_with_key(
            "/api/conversations",
            json!({ "text": winner }),
            "shared-key",
        )
        .await;
    assert_eq!((status, &again), (201, &first));
    let (status, refused) = server
        .post_with_key(
            "/api/conversations",
            json!({ "text": "something else" }),
            "shared-key",
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "idempotency_key_reused");
}

/// The same for messages: one accepted (202), the rest 422, one new user message stored —
/// whether the message started a turn or waited behind one, and after a restart.
#[tokio::test]
async fn one_message_key_with_different_bodies_is_accepted_once() {
    let server = Server::start().await;
    let created = server.create_and_wait("hello").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}/messages");

    for (round, key) in ["idle-key", "busy-key"].into_iter().enumerate() {
        if round == 1 {
            // A turn runs: the keyed messages wait behind it.
            let (status, _) = server
                .post(&path, json!({ "text": "slow\n/sleep 400" }))
                .await;
            assert_eq!(status, 202);
        }
        let requests = (0..20).map(|n| {
            server.post_with_key(
                &path,
                json!({ "text": format!("{key} body {n}"), "mode": "queue" }),
                key,
            )
        });
        let answers = futures::future::join_all(requests).await;
        let accepted: Vec<&Value> = answers
            .iter()
            .filter(|(status, _)| *status == 202)
            .map(|(_, body)| body)
            .collect();
        assert_eq!(accepted.len(), 1, "{answers:?}");
        for (status, body) in answers.iter().filter(|(status, _)| *status != 202) {
            assert_eq!(*status, 422, "{body}");
            assert_eq!(body["error"]["code"], "idempotency_key_reused");
        }
        // Same body: same answer.
        let text = accepted[0]["message"]["text"].clone();
        let (status, again) = server
            .post_with_key(&path, json!({ "text": text, "mode": "queue" }), key)
            .await;
        assert_eq!((status, &again), (202, accepted[0]));
        server.wait_idle(&id).await;
    }
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let user_texts: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(user_texts.len(), 4, "{user_texts:?}");

    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    for key in ["idle-key", "busy-key"] {
        let (status, refused) = server
            .post_with_key(&path, json!({ "text": "a new text" }), key)
            .await;
        assert_eq!(status, 422, "{refused}");
        assert_eq!(refused["error"]["code"], "idempotency_key_reused");
    }
}
