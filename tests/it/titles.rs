//! Titles written by an agent's `title_model` after the first turn.

use std::time::Duration;

use serde_json::json;

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};

/// The title model's answer becomes the conversation's title (cleaned: no quotes, no period)
/// after the first turn, listed and searchable; a user's own title is never replaced, and
/// later turns ask for none.
#[tokio::test]
async fn a_title_model_names_the_conversation_after_its_first_turn() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config().replace(
        "model = \"m\"\ntools",
        "model = \"m\"\ntitle_model = \"m\"\ntools",
    );
    assert!(config.contains("title_model"), "{config}");
    let (server, id) = titled_by_model(&fake, config).await;
    let path = format!("/api/conversations/{id}");
    let (_, found) = server
        .get("/api/conversations?q=nested%20quotes%20parser")
        .await;
    assert_eq!(found["conversations"][0]["id"], id.as_str(), "{found}");
    assert_eq!(asked(&fake), 1);

    // A second turn asks for no title; a user's title stays.
    let (status, _) = server.patch(&path, json!({ "title": "My own name" })).await;
    assert_eq!(status, 200);
    server.send_and_wait(&id, "and one more thing").await;
    let (_, conversation) = server.get(&path).await;
    assert_eq!(conversation["title"], "My own name", "{conversation}");
    assert_eq!(asked(&fake), 1);
}

/// A `title_model` at the top of the file names the conversations of every agent without
/// one of its own.
#[tokio::test]
async fn a_global_title_model_names_the_conversations_of_every_agent() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = format!("title_model = \"m\"\n{}", fake.config());
    titled_by_model(&fake, config).await;
    assert_eq!(asked(&fake), 1);
}

/// How many requests asked the title model for a title.
fn asked(fake: &FakeProvider) -> usize {
    fake.requests()
        .iter()
        .filter(|request| {
            request.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|system| system.contains(openvaala::runtime::titling::INSTRUCTIONS))
        })
        .count()
}

/// Starts a service with `config` whose title model answers a quoted title, and waits until
/// its first conversation carries that title, cleaned; not the user's own.
async fn titled_by_model(fake: &FakeProvider, config: String) -> (Server, String) {
    fake.script(|body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        Some(
            if system.contains(openvaala::runtime::titling::INSTRUCTIONS) {
                Reply::text("\"Nested quotes in the parser.\"")
            } else {
                Reply::text("Sure, let us look at it.")
            },
        )
    });
    let server = Server::start_with(ServerOptions {
        config: Some(config),
        ..ServerOptions::default()
    })
    .await;
    let created = server
        .create_and_wait("please help me refactor the parser module so it handles nested quotes")
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}");
    let titled = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, conversation) = server.get(&path).await;
            if conversation["title"] == "Nested quotes in the parser" {
                return conversation;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the title model's title never came");
    assert_eq!(titled["title_custom"], false, "{titled}");
    (server, id)
}
