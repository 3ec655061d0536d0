//! Two fixes at the HTTP edge: the access token passed as a query parameter (how the browser's
//! EventSource authenticates) is accepted by every route that reads a query, while a misspelled
//! parameter still gets a 400; and a deleted conversation's event stream ends right after its
//! `conversation.deleted`, while the list stream goes on.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions, TIMEOUT, read};
use crate::support::until;

/// With characters a query must escape, as the UI does (`encodeURIComponent`).
const TOKEN: &str = "s3cr+t/=&%x";
const TOKEN_IN_QUERY: &str = "s3cr%2Bt%2F%3D%26%25x";

/// A GET with the token in the query only (no `Authorization` header).
async fn get_with_query_token(server: &Server, path: &str) -> (u16, Value) {
    let separator = if path.contains('?') { '&' } else { '?' };
    let url = server.url(&format!("{path}{separator}access_token={TOKEN_IN_QUERY}"));
    read(server.client.get(url).send().await.unwrap()).await
}

#[tokio::test]
async fn the_access_token_is_accepted_in_every_query_and_a_misspelled_parameter_is_not() {
    let server = Server::start_with(ServerOptions {
        env: vec![("OPENVAALA_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    })
    .await;
    let response = server
        .client
        .post(server.url("/api/conversations"))
        .bearer_auth(TOKEN)
        .json(&json!({ "text": "hello" }))
        .send()
        .await
        .unwrap();
    let (status, created) = read(response).await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();

    // The event stream authenticates the way a browser's EventSource does.
    let path = format!("/api/conversations/{id}/events?access_token={TOKEN_IN_QUERY}");
    let mut events = server.raw_events(&path, None).await;
    until(&mut events, |kind, data| {
        matches!(kind, "snapshot" | "conversation.updated")
            && data["conversation"]["status"] == "idle"
    })
    .await;

    for path in ["/api/conversations", "/api/conversations?limit=5"] {
        let (status, list) = get_with_query_token(&server, path).await;
        assert_eq!(status, 200, "{path}: {list}");
        assert_eq!(list["conversations"][0]["id"], id.as_str(), "{path}");
    }
    let items_path = format!("/api/conversations/{id}/items");
    let (status, items) = get_with_query_token(&server, &items_path).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["items"].as_array().unwrap().len(), 2, "{items}");
    let (status, items) = get_with_query_token(&server, &format!("{items_path}?limit=1")).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["items"].as_array().unwrap().len(), 1, "{items}");

    // A misspelled parameter is still refused, token or not, and the answer names it.
    for path in [
        "/api/conversations?limt=5".to_owned(),
        format!("{items_path}?aftr_seq=1"),
    ] {
        let (status, error) = get_with_query_token(&server, &path).await;
        assert_eq!(status, 400, "{path}: {error}");
        assert_eq!(error["error"]["code"], "invalid_request", "{path}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("unknown field"), "{path}: {message}");
    }

    // The token is still checked (by a client that sends no other: the harness's own carries
    // the local token).
    let response = reqwest::get(server.url("/api/conversations?access_token=wrong"))
        .await
        .unwrap();
    let (status, error) = read(response).await;
    assert_eq!(status, 401, "{error}");
}

#[tokio::test]
async fn a_deleted_conversations_stream_ends_right_after_conversation_deleted() {
    let server = Server::start().await;
    let created = server.create_and_wait("soon gone").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let mut stream = server
        .raw_events(&format!("/api/conversations/{id}/events"), None)
        .await;
    let (_, kind, _) = tokio::time::timeout(TIMEOUT, stream.next())
        .await
        .expect("a snapshot in time")
        .expect("a snapshot");
    assert_eq!(kind, "snapshot");
    let mut list = server.raw_events("/api/events", None).await;
    until(&mut list, |kind, _| kind == "snapshot").await;

    let (status, body) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 204, "{body}");

    // Everything the stream still sends, until it ends.
    let rest: Vec<(String, String, Value)> = tokio::time::timeout(TIMEOUT, stream.collect())
        .await
        .expect("the stream of a deleted conversation ends");
    let (_, kind, data) = rest.last().expect("`conversation.deleted` before the end");
    assert_eq!(kind, "conversation.deleted", "{rest:?}");
    assert_eq!(data["conversation_id"], id.as_str());

    // The list stream reports the deletion and stays open for what comes next.
    until(&mut list, |kind, data| {
        kind == "conversation.deleted" && data["conversation_id"] == id.as_str()
    })
    .await;
    let (status, next) = server
        .post("/api/conversations", json!({ "text": "next" }))
        .await;
    assert_eq!(status, 201, "{next}");
    let next_id = next["conversation"]["id"].as_str().unwrap().to_owned();
    until(&mut list, |kind, data| {
        kind == "conversation.created" && data["conversation"]["id"] == next_id.as_str()
    })
    .await;
}
