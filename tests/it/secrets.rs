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

/// Whether `text` holds any stretch of 8 characters of `secret`, in any case.
fn holds_a_stretch_of(text: &str, secret: &str) -> bool {
    let text = text.to_ascii_lowercase();
    secret
        .to_ascii_lowercase()
        .as_bytes()
        .windows(8)
        .any(|window| text.contains(std::str::from_utf8(window).unwrap()))
}

/// The key in other forms and by other paths: upper-cased or split in a provider's error, in
/// the model's own answer (streamed a few characters a chunk), in a tool call's arguments and
/// in a command's output. No stretch of 8 of its characters is streamed, stored or answered.
#[tokio::test]
async fn the_key_in_any_form_by_any_path_is_never_stored_or_sent() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config_with(r#"api_key_env = "FAKE_PROVIDER_KEY""#);
    let env = vec![("FAKE_PROVIDER_KEY".to_owned(), KEY.to_owned())];
    let setup = Setup::start_with(fake, config, env).await;
    let (first, second) = KEY.split_at(12);

    // A provider error with the key upper-cased and cut in two.
    setup.fake.push(Reply::rejected(
        400,
        &format!(
            "bad key {} (halves: {first} | {second})",
            KEY.to_uppercase()
        ),
    ));
    let run = setup.turn("try").await;
    let error = run.ended()["error"].as_str().unwrap();
    assert!(error.contains("bad key [redacted]"), "{error}");
    assert!(!holds_a_stretch_of(error, KEY), "{error}");

    // The model's own answer repeats it, in pieces of a few characters.
    setup.fake.push(Reply::text(&format!(
        "Your key is {KEY}, or {}.",
        KEY.to_uppercase()
    )));
    let run = setup.turn("what is my key?").await;
    let streamed: String = run
        .all("item.delta")
        .iter()
        .map(|delta| delta["delta"].as_str().unwrap())
        .collect();
    assert!(streamed.starts_with("Your key is [redacted]"), "{streamed}");
    assert!(!holds_a_stretch_of(&streamed, KEY), "{streamed}");
    let answer = run.completed("agent_message")[0]["text"].as_str().unwrap();
    assert!(!holds_a_stretch_of(answer, KEY), "{answer}");

    // A command whose arguments name the key, and one whose output prints it.
    let (_, conversation) = setup
        .server
        .get(&format!("/api/conversations/{}", setup.id))
        .await;
    let cwd = std::path::PathBuf::from(conversation["cwd"].as_str().unwrap());
    std::fs::write(cwd.join("leaked.txt"), format!("token={KEY}\n")).unwrap();
    setup.fake.push(Reply::tool_call(
        "shell",
        json!({ "command": format!("echo {KEY}; cat leaked.txt") }),
        3,
    ));
    setup.fake.push(Reply::text("Done."));
    let run = setup.turn("show it").await;
    assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);
    let events = serde_json::to_string(&run.events).unwrap();
    assert!(!holds_a_stretch_of(&events, KEY), "{events}");
    let call = run.completed("tool_call")[0];
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("token=[redacted]"),
        "{call}"
    );
    // The model's next request carries the redacted call and output, nothing else.
    let next = serde_json::to_string(&run.requests.last().unwrap().body).unwrap();
    assert!(!holds_a_stretch_of(&next, KEY), "{next}");

    let items = serde_json::to_string(&setup.items().await).unwrap();
    assert!(!holds_a_stretch_of(&items, KEY), "{items}");
    std::fs::remove_file(cwd.join("leaked.txt")).unwrap();
    let data_dir = setup.server.stop().await;
    for (path, bytes) in snapshot_dir(&data_dir) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !holds_a_stretch_of(&text, KEY),
            "{} holds the key",
            path.display()
        );
    }
}

#[tokio::test]
async fn a_tool_runs_its_arguments_as_the_model_wrote_them_and_only_what_is_shown_is_redacted() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let config = fake.config_with(r#"api_key_env = "FAKE_PROVIDER_KEY""#);
    let env = vec![("FAKE_PROVIDER_KEY".to_owned(), KEY.to_owned())];
    let setup = Setup::start_with(fake, config, env).await;
    let cwd = setup.server.data_dir.parent().unwrap().join("work");
    // A file that holds a stretch of the key: a grep for it must find it.
    std::fs::write(cwd.join("notes.txt"), format!("x {} y\n", &KEY[5..20])).unwrap();
    let command = format!("grep -c -e '{}' notes.txt", &KEY[5..20]);
    setup
        .fake
        .push(Reply::tool_call("shell", json!({ "command": command }), 1));
    setup.fake.push(Reply::text("Found."));
    let run = setup.turn("look for it").await;
    let call = run.completed("tool_call")[0];
    // It ran as written: the grep counted one line.
    assert_eq!(call["output"], "1\n", "{call}");
    // What is stored and shown is redacted.
    let shown = call["arguments"]["command"].as_str().unwrap();
    assert!(shown.contains("[redacted]"), "{shown}");
    assert!(!shown.contains(&KEY[5..20]), "{shown}");
    for (path, bytes) in snapshot_dir(&setup.server.data_dir.join("conversations")) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&KEY[5..20]),
            "{} holds the key",
            path.display()
        );
    }
}

/// A key in the query of a provider's `base_url` (a gateway's `?key=…`) is sent to the
/// provider but never logged, not even at the debug level, where every request's URL is.
#[tokio::test]
async fn a_key_in_the_base_url_is_not_in_the_log_at_any_level() {
    const GATEWAY_KEY: &str = "vaala-gateway-key-5e1b7c";
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let base_url = fake.base_url.clone();
    let config = fake
        .config()
        .replace(&base_url, &format!("{base_url}?key={GATEWAY_KEY}"));
    assert!(config.contains(GATEWAY_KEY), "{config}");
    let env = vec![("OPENVAALA_LOG".to_owned(), "debug".to_owned())];
    let setup = Setup::start_with(fake, config, env).await;
    setup.fake.push(Reply::text("Answered."));
    let run = setup.turn("hello").await;
    assert_eq!(run.ended()["status"], "completed", "{:?}", run.events);
    assert!(
        run.requests
            .iter()
            .any(|request| request.query.contains(GATEWAY_KEY)),
        "the provider got the key"
    );
    let log = setup.server.wait_for_log("provider answered").await;
    assert!(log.contains("key=[redacted]"), "{log}");
    assert!(!holds_a_stretch_of(&log, GATEWAY_KEY), "{log}");
}
