//! The notification webhooks' outbox, end to end: a receiver in the test that refuses the first
//! tries gets the same `webhook-id` on each until it answers 200; `kill -9` with deliveries
//! waiting loses none of them, and each keeps its id; a delivery whose hook changed is given up
//! unsent; `GET /api/webhooks/deliveries` lists them. The signatures of the service's POSTs
//! (a delivery, and a `pre_tool_use` hook's) are checked by the Standard Webhooks reference
//! verifier, the `standardwebhooks` npm package (`tests/webhooks/verify.mjs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::mpsc;

use crate::fake_provider::{FakeProvider, Reply, Wire};
use crate::harness::{Server, ServerOptions, TIMEOUT};

const SECRET: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The back-off's first wait in the tests that retry (each later wait is a few of these).
const QUICK_MS: &str = "50";
/// A first wait no test sees the end of: a delivery that failed once stays pending.
const NEVER_MS: &str = "600000";

/// One POST the receiver got, and what it answered.
#[derive(Debug, Clone)]
struct Post {
    headers: HeaderMap,
    body: String,
    answered: u16,
}

impl Post {
    fn id(&self) -> String {
        self.headers["webhook-id"].to_str().unwrap().to_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Clone)]
struct Answers {
    /// POSTs still to refuse with 503 before answering 200.
    refuse: Arc<AtomicUsize>,
    posts: mpsc::UnboundedSender<Post>,
}

/// A receiver on 127.0.0.1 that refuses the first `refuse` POSTs with 503, answers the rest
/// with `{}`, and hands each to the test.
struct Receiver {
    url: String,
    refuse: Arc<AtomicUsize>,
    posts: mpsc::UnboundedReceiver<Post>,
}

impl Receiver {
    async fn start(refuse: usize) -> Receiver {
        let (sender, posts) = mpsc::unbounded_channel();
        let answers = Answers {
            refuse: Arc::new(AtomicUsize::new(refuse)),
            posts: sender,
        };
        let refuse = answers.refuse.clone();
        let app = Router::new()
            .route(
                "/hook",
                post(
                    |State(answers): State<Answers>, headers: HeaderMap, body: String| async move {
                        let refused = answers
                            .refuse
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                                left.checked_sub(1)
                            })
                            .is_ok();
                        let status = if refused {
                            StatusCode::SERVICE_UNAVAILABLE
                        } else {
                            StatusCode::OK
                        };
                        let _ = answers.posts.send(Post {
                            headers,
                            body,
                            answered: status.as_u16(),
                        });
                        (status, "{}")
                    },
                ),
            )
            .with_state(answers);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            url: format!("http://{address}/hook"),
            refuse,
            posts,
        }
    }

    /// The next POST, within the harness's timeout.
    async fn next(&mut self) -> Post {
        tokio::time::timeout(TIMEOUT, self.posts.recv())
            .await
            .expect("a POST within the timeout")
            .expect("the receiver runs")
    }
}

fn hook_tables(event: &str, urls: &[&str]) -> String {
    urls.iter()
        .map(|url| format!("[[hooks.{event}]]\nurl = \"{url}\"\nsecret = \"whsec_{SECRET}\"\n\n"))
        .collect()
}

async fn start(fake: &FakeProvider, data_dir: &Path, hooks: &str, backoff_ms: &str) -> Server {
    Server::start_with(ServerOptions {
        data_dir: Some(data_dir.to_owned()),
        config: Some(format!("{}\n{hooks}", fake.config())),
        env: vec![(
            "OPENVAALA_WEBHOOK_BACKOFF_MS".to_owned(),
            backoff_ms.to_owned(),
        )],
        ..ServerOptions::default()
    })
    .await
}

/// `GET /api/webhooks/deliveries` until `done` holds for its list (the outbox records a try
/// after the receiver answered it).
async fn deliveries_until(server: &Server, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut last = Value::Null;
    let found = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (status, list) = server.get("/api/webhooks/deliveries").await;
            assert_eq!(status, 200, "{list}");
            let deliveries = list["deliveries"].as_array().unwrap().clone();
            if done(&deliveries) {
                return deliveries;
            }
            last = list;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("the deliveries never got there; last: {last}"))
}

/// What the Standard Webhooks reference verifier says of a POST, as received: whether it
/// accepts it, and its words.
async fn reference_verifier(headers: &HeaderMap, body: &str) -> (bool, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks");
    assert!(
        dir.join("node_modules/standardwebhooks").is_dir(),
        "{} is missing the verifier: run `npm ci --prefix tests/webhooks` (scripts/test does)",
        dir.display()
    );
    let headers: BTreeMap<&str, &str> = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("webhook-"))
        .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
        .collect();
    let input = json!({"secret": format!("whsec_{SECRET}"), "headers": headers, "body": body});
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("verify.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs the verifier");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("the verifier answers")
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.success(), said)
}

#[tokio::test]
async fn retries_keep_one_webhook_id_until_the_receiver_answers() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let mut receiver = Receiver::start(2).await;
    let temp = tempfile::tempdir().unwrap();
    let hooks = hook_tables("turn_ended", &[&receiver.url]);
    let server = start(&fake, &temp.path().join("data"), &hooks, QUICK_MS).await;
    fake.push(Reply::text("Done."));
    let created = server.create_and_wait("Say done").await;
    let conversation = created["conversation"]["id"].as_str().unwrap();

    let tries = [
        receiver.next().await,
        receiver.next().await,
        receiver.next().await,
    ];
    let answered: Vec<u16> = tries.iter().map(|post| post.answered).collect();
    assert_eq!(answered, [503, 503, 200]);
    let id = tries[0].id();
    assert!(id.starts_with("msg_"), "{id}");
    for post in &tries {
        assert_eq!(post.id(), id, "every try carries the same webhook-id");
        assert_eq!(post.body, tries[0].body, "and the same body");
    }
    let told = tries[2].json();
    assert_eq!(told["event"], "turn_ended");
    assert_eq!(told["conversation_id"], conversation);
    assert_eq!(told["status"], "completed");
    // The delivery the receiver took, checked by the standard's own verifier.
    let (verified, said) = reference_verifier(&tries[2].headers, &tries[2].body).await;
    assert!(verified, "the reference verifier refused it: {said}");

    let listed = deliveries_until(&server, |list| {
        list.first()
            .is_some_and(|delivery| delivery["status"] == "delivered")
    })
    .await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let delivery = &listed[0];
    assert_eq!(delivery["id"], id.as_str());
    assert_eq!(delivery["hook"], "hooks.turn_ended[0]");
    assert_eq!(delivery["event"], "turn_ended");
    assert_eq!(delivery["conversation_id"], conversation);
    assert_eq!(delivery["attempts"], 3);
    assert!(delivery["created_at"].is_string(), "{delivery}");
    assert!(delivery["last_attempt_at"].is_string(), "{delivery}");
    assert!(delivery.get("next_attempt_at").is_none(), "{delivery}");
    assert!(delivery.get("last_error").is_none(), "{delivery}");
    // No further try once it was answered.
    assert!(receiver.posts.try_recv().is_err());

    // The filter and the bounds of the route.
    let (_, pending) = server.get("/api/webhooks/deliveries?status=pending").await;
    assert_eq!(pending["deliveries"], json!([]));
    let (_, delivered) = server
        .get("/api/webhooks/deliveries?status=delivered&limit=1")
        .await;
    assert_eq!(delivered["deliveries"][0]["id"], id.as_str());
    for bad in ["status=lost", "limit=0", "limit=1001", "since=1"] {
        let (status, body) = server.get(&format!("/api/webhooks/deliveries?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{bad}: {body}");
    }
    // The refused tries are the hook's last error.
    let (_, hooks) = server.get("/api/hooks").await;
    let last_error = hooks["hooks"][0]["last_error"]["message"].as_str().unwrap();
    assert!(last_error.contains("503"), "{hooks}");
}

#[tokio::test]
async fn kill_9_loses_no_delivery_and_each_keeps_its_webhook_id() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    // Down until the service has crashed.
    let mut receiver = Receiver::start(usize::MAX).await;
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let second = format!("{}?second", receiver.url);
    let hooks = hook_tables("turn_ended", &[&receiver.url, &second]);
    let server = start(&fake, &data_dir, &hooks, NEVER_MS).await;
    let mut conversations = Vec::new();
    for n in 0..3 {
        fake.push(Reply::text("Done."));
        let created = server.create_and_wait(&format!("Turn {n}")).await;
        conversations.push(created["conversation"]["id"].as_str().unwrap().to_owned());
    }
    // Each delivery's first try, refused.
    let mut before: BTreeMap<String, String> = BTreeMap::new();
    for _ in 0..6 {
        let post = receiver.next().await;
        assert_eq!(post.answered, 503);
        before.insert(post.id(), post.body.clone());
    }
    assert_eq!(before.len(), 6, "one webhook-id per hook and turn");
    let listed = deliveries_until(&server, |list| {
        list.len() == 6 && list.iter().all(|delivery| delivery["attempts"] == 1)
    })
    .await;
    for delivery in &listed {
        assert_eq!(delivery["status"], "pending", "{delivery}");
        assert!(before.contains_key(delivery["id"].as_str().unwrap()));
    }

    let data_dir = server.kill9().await;
    receiver.refuse.store(0, Ordering::SeqCst);
    let server = start(&fake, &data_dir, &hooks, NEVER_MS).await;
    let mut delivered: BTreeMap<String, String> = BTreeMap::new();
    while delivered.len() < before.len() {
        let post = receiver.next().await;
        let id = post.id();
        let body = before.get(&id).unwrap_or_else(|| {
            panic!("{id} is no id from before the crash: {}", post.body);
        });
        assert_eq!(&post.body, body, "{id} carries what it carried before");
        assert_eq!(post.answered, 200);
        let (verified, said) = reference_verifier(&post.headers, &post.body).await;
        assert!(verified, "{id}: {said}");
        delivered.insert(id, post.body);
    }
    let mut told: Vec<String> = delivered
        .values()
        .map(|body| serde_json::from_str::<Value>(body).unwrap()["conversation_id"].to_string())
        .collect();
    told.sort();
    told.dedup();
    assert_eq!(told.len(), 3, "every turn's end was told: {told:?}");
    let listed = deliveries_until(&server, |list| {
        list.len() == 6
            && list
                .iter()
                .all(|delivery| delivery["status"] == "delivered")
    })
    .await;
    for delivery in &listed {
        assert_eq!(delivery["attempts"], 2, "{delivery}");
    }
    let hooks_told: Vec<&str> = listed
        .iter()
        .map(|delivery| delivery["hook"].as_str().unwrap())
        .collect();
    assert_eq!(
        hooks_told
            .iter()
            .filter(|hook| **hook == "hooks.turn_ended[1]")
            .count(),
        3,
        "{hooks_told:?}"
    );
}

#[tokio::test]
async fn a_delivery_whose_hook_changed_is_given_up_unsent() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let mut old = Receiver::start(usize::MAX).await;
    let new = Receiver::start(0).await;
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let server = start(
        &fake,
        &data_dir,
        &hook_tables("turn_ended", &[&old.url]),
        NEVER_MS,
    )
    .await;
    fake.push(Reply::text("Done."));
    server.create_and_wait("Say done").await;
    let first = old.next().await;
    assert_eq!(first.answered, 503);
    deliveries_until(&server, |list| {
        list.first()
            .is_some_and(|delivery| delivery["attempts"] == 1)
    })
    .await;
    let data_dir = server.stop().await;

    // The same key now names another URL: the old delivery must not go there.
    let server = start(
        &fake,
        &data_dir,
        &hook_tables("turn_ended", &[&new.url]),
        NEVER_MS,
    )
    .await;
    let listed = deliveries_until(&server, |list| {
        list.first()
            .is_some_and(|delivery| delivery["status"] == "failed")
    })
    .await;
    let delivery = &listed[0];
    assert_eq!(delivery["id"], first.id().as_str());
    assert_eq!(delivery["attempts"], 1, "no try was made: {delivery}");
    assert!(
        delivery["last_error"]
            .as_str()
            .unwrap()
            .contains("another URL"),
        "{delivery}"
    );
    assert!(
        old.posts.try_recv().is_err(),
        "not sent again to the old URL"
    );
    let mut new = new;
    assert!(new.posts.try_recv().is_err(), "nor to the new one");
}

#[tokio::test]
async fn the_reference_verifier_accepts_a_pre_tool_use_hooks_post() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let mut receiver = Receiver::start(0).await;
    let temp = tempfile::tempdir().unwrap();
    let hooks = hook_tables("pre_tool_use", &[&receiver.url]);
    let server = start(&fake, &temp.path().join("data"), &hooks, QUICK_MS).await;
    fake.push(Reply::tool_call("shell", json!({"command": "true"}), 1));
    fake.push(Reply::text("Done."));
    server.create_and_wait("Run true").await;
    let post = receiver.next().await;
    assert_eq!(post.json()["event"], "pre_tool_use");
    let (verified, said) = reference_verifier(&post.headers, &post.body).await;
    assert!(verified, "the reference verifier refused it: {said}");
    // The verifier does check: a body changed on the way is refused.
    let changed = post.body.replace("true", "false");
    assert_ne!(changed, post.body);
    let (verified, said) = reference_verifier(&post.headers, &changed).await;
    assert!(!verified, "a changed body passed: {said}");
    assert!(said.contains("No matching signature"), "{said}");
}
