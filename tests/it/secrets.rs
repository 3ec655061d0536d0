//! Secrets stay secret (invariant 8, secure by default): a provider that echoes the API key in
//! its error body must not get the key into a stored item, `turn.ended`, `model.retry`, a
//! compaction's error or the search index. Configured key values and `Bearer …` / `sk-…`
//! shaped strings are redacted from every provider error before it is stored or sent.

use serde_json::json;

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};
use crate::harness::snapshot_dir;
use crate::support::events_until;

/// Not shaped like any known key: only the configured value tells it is one.
const KEY: &str = "vaala-test-key-7f3a9c21e5d4";
const SHAPED: [&str; 2] = ["sk-proj-AbCdEfGhIjKlMnOpQrSt1234", "eyJhbGciOi.payload.sig"];

async fn check(wire: Wire) {
    let fake = FakeProvider::start(wire).await;
    let config = fake.config_with(r#"api_key_env = "FAKE_PROVIDER_KEY""#);
    let env = vec![("FAKE_PROVIDER_KEY".to_owned(), KEY.to_owned())];
    let setup = Setup::start_with(fake, config, env).await;

    // A transient error (retried, announced) and then a fatal one, both echoing the key.
    setup.fake.push(Reply::EchoCredentials { status: 503 });
    setup.fake.push(Reply::EchoCredentials { status: 401 });
    let run = setup.turn("first try").await;
    let retry = run.all("model.retry");
    assert_eq!(retry.len(), 1, "{:?}", run.events);
    let retry_error = retry[0]["error"].as_str().unwrap();
    assert!(retry_error.contains("[redacted]"), "{retry_error}");
    let ended = run.ended();
    assert_eq!(ended["status"], "failed");
    let error = ended["error"].as_str().unwrap();
    assert!(error.contains("invalid credentials"), "{error}");
    assert!(error.contains("[redacted]"), "{error}");

    // Key-shaped strings the service does not know are redacted too.
    setup.fake.push(Reply::rejected(
        400,
        &format!("upstream said: Bearer {} and key {}", SHAPED[1], SHAPED[0]),
    ));
    let run = setup.turn("second try").await;
    let error = run.ended()["error"].as_str().unwrap();
    assert!(error.contains("upstream said"), "{error}");
    for shaped in SHAPED {
        assert!(!error.contains(shaped), "{error}");
    }

    // A compaction whose model echoes the key fails without it.
    let mut events = setup.server.events(&setup.id).await;
    setup.fake.push(Reply::EchoCredentials { status: 403 });
    let (status, body) = setup
        .server
        .post(
            &format!("/api/conversations/{}/compact", setup.id),
            json!({}),
        )
        .await;
    assert_eq!(status, 502, "{body}");
    assert!(!body.to_string().contains(KEY), "{body}");
    let seen = events_until(&mut events, "compaction.failed").await;
    let failed = &seen.last().unwrap().1;
    assert!(!failed.to_string().contains(KEY), "{failed}");

    // Nothing the service stored or sent holds the key: not the items, not the files, not
    // the index (searched, and read byte by byte).
    let items = setup.items().await;
    let items_text = serde_json::to_string(&items).unwrap();
    assert!(!items_text.contains(KEY));
    for secret in std::iter::once(KEY).chain(SHAPED) {
        let (_, found) = setup
            .server
            .get(&format!("/api/conversations?q={secret}"))
            .await;
        assert_eq!(found["conversations"], json!([]), "{secret}");
    }
    let server = setup.server;
    let data_dir = server.stop().await;
    for (path, bytes) in snapshot_dir(&data_dir) {
        for secret in std::iter::once(KEY).chain(SHAPED) {
            assert!(
                !bytes
                    .windows(secret.len())
                    .any(|window| window == secret.as_bytes()),
                "{} holds {secret}",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn a_provider_echoing_the_key_gets_it_redacted_openai_chat() {
    check(Wire::OpenaiChat).await;
}

#[tokio::test]
async fn a_provider_echoing_the_key_gets_it_redacted_anthropic_messages() {
    check(Wire::AnthropicMessages).await;
}
