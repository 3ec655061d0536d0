//! Web Push sending against a stand-in push service (`tests/push/receiver.mjs`): it makes a
//! subscription as a browser would, checks each POST's VAPID signature and claims with Node's
//! crypto, and decrypts the body with `http_ece`, the reference `aes128gcm` implementation.
//! What `openvaala::push::send` reports is checked against what the receiver saw and answered.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use openvaala::push::{self, SendOutcome, Subscription, Urgency, VapidKey};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::harness::TIMEOUT;

const SUBJECT: &str = "mailto:ops@example.org";

/// The receiver, and the lines it prints.
pub struct Receiver {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pub subscription: Subscription,
}

impl Receiver {
    /// Starts the receiver with `args` and reads the subscription it prints first.
    pub async fn start(args: &[&str]) -> Receiver {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/push");
        assert!(
            dir.join("node_modules/http_ece").is_dir(),
            "{} is missing http_ece: run `npm ci --prefix tests/push` (scripts/test does)",
            dir.display()
        );
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("receiver.mjs"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the receiver");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let subscription = serde_json::from_value(next_line(&mut lines).await).unwrap();
        Receiver {
            _child: child,
            lines,
            subscription,
        }
    }

    /// The next line the receiver prints, as JSON.
    pub async fn next(&mut self) -> Value {
        next_line(&mut self.lines).await
    }

    /// The subscription with its endpoint's path changed to `path`.
    pub fn at(&self, path: &str) -> Subscription {
        let mut url = reqwest::Url::parse(&self.subscription.endpoint).unwrap();
        url.set_path(path);
        Subscription {
            endpoint: url.to_string(),
            ..self.subscription.clone()
        }
    }
}

/// The receiver's next line, waited for at most [`TIMEOUT`].
async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = tokio::time::timeout(TIMEOUT, lines.next_line())
        .await
        .expect("the receiver printed a line in time")
        .unwrap()
        .expect("the receiver is still running");
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
}

struct Sender {
    client: reqwest::Client,
    key: VapidKey,
    _dir: tempfile::TempDir,
}

impl Sender {
    fn new() -> Sender {
        let dir = tempfile::tempdir().unwrap();
        Sender {
            client: push::client().unwrap(),
            key: VapidKey::load_or_create(dir.path()).unwrap(),
            _dir: dir,
        }
    }

    async fn send(
        &self,
        to: &Subscription,
        payload: &[u8],
        ttl_s: u32,
        urgency: Urgency,
    ) -> SendOutcome {
        push::send(
            &self.client,
            &self.key,
            SUBJECT,
            to,
            payload,
            ttl_s,
            urgency,
        )
        .await
    }
}

#[tokio::test]
async fn a_message_arrives_signed_and_decrypts_to_the_payload() {
    let mut receiver = Receiver::start(&[]).await;
    let sender = Sender::new();
    let subscription = receiver.subscription.clone();
    let payload = r#"{"kind":"approval","title":"An approval waits: rm -rf build/ ✓"}"#;

    let outcome = sender
        .send(&subscription, payload.as_bytes(), 3600, Urgency::High)
        .await;
    assert_eq!(outcome, SendOutcome::Sent);
    let seen = receiver.next().await;
    assert_eq!(seen["ok"], true, "{seen}");
    assert_eq!(seen["status"], 201);
    assert_eq!(seen["payload"], payload);
    assert_eq!(seen["ttl"], 3600);
    assert_eq!(seen["urgency"], "high");
    assert_eq!(seen["rs"], 4096);
    assert_eq!(seen["idlen"], 65);

    let outcome = sender
        .send(&subscription, b"turn ended", 0, Urgency::Normal)
        .await;
    assert_eq!(outcome, SendOutcome::Sent);
    let seen = receiver.next().await;
    assert_eq!(
        (&seen["payload"], &seen["ttl"], &seen["urgency"]),
        (
            &Value::from("turn ended"),
            &Value::from(0),
            &Value::from("normal")
        ),
        "{seen}"
    );
}

#[tokio::test]
async fn the_largest_payload_decrypts_and_a_larger_one_is_not_sent() {
    let mut receiver = Receiver::start(&[]).await;
    let sender = Sender::new();
    let subscription = receiver.subscription.clone();
    let largest = "é".repeat(push::MAX_PLAINTEXT / 2) + "x";
    assert_eq!(largest.len(), push::MAX_PLAINTEXT);

    let outcome = sender
        .send(&subscription, largest.as_bytes(), 60, Urgency::Low)
        .await;
    assert_eq!(outcome, SendOutcome::Sent);
    let seen = receiver.next().await;
    assert_eq!(seen["ok"], true, "{seen}");
    assert_eq!(seen["payload"], largest.as_str());

    let larger = format!("{largest}y");
    let outcome = sender
        .send(&subscription, larger.as_bytes(), 60, Urgency::Low)
        .await;
    assert_eq!(
        outcome,
        SendOutcome::Failed {
            error: "not encrypted: the payload has 3994 bytes; a push message carries at most 3993"
                .into(),
            retryable: false,
            retry_after: None,
        }
    );
    // Nothing reached the receiver: the next line it prints is the next message's.
    assert_eq!(
        sender.send(&subscription, b"after", 60, Urgency::Low).await,
        SendOutcome::Sent
    );
    assert_eq!(receiver.next().await["payload"], "after");
}

#[tokio::test]
async fn gone_busy_and_refused_answers_say_what_to_do() {
    let mut receiver = Receiver::start(&[
        "--answer",
        "/push/gone=410",
        "--answer",
        "/push/missing=404",
        "--answer",
        "/push/busy=503,7",
        "--answer",
        "/push/slow-down=429",
        "--answer",
        "/push/moved=301",
    ])
    .await;
    let sender = Sender::new();

    for path in ["/push/gone", "/push/missing"] {
        let outcome = sender
            .send(&receiver.at(path), b"hello", 60, Urgency::High)
            .await;
        assert_eq!(outcome, SendOutcome::Gone, "{path}");
        let seen = receiver.next().await;
        assert_eq!(
            seen["ok"], true,
            "the message itself passed the checks: {seen}"
        );
    }

    let outcome = sender
        .send(&receiver.at("/push/busy"), b"hello", 60, Urgency::High)
        .await;
    let origin = receiver
        .subscription
        .endpoint
        .split("/push/")
        .next()
        .unwrap();
    assert_eq!(
        outcome,
        SendOutcome::Failed {
            error: format!("the push service at {origin} answered 503 Service Unavailable"),
            retryable: true,
            retry_after: Some(Duration::from_secs(7)),
        }
    );
    assert_eq!(receiver.next().await["status"], 503);

    let outcome = sender
        .send(&receiver.at("/push/slow-down"), b"hello", 60, Urgency::High)
        .await;
    assert!(
        matches!(&outcome, SendOutcome::Failed { retryable: true, retry_after: None, error }
            if error.ends_with("answered 429 Too Many Requests")),
        "{outcome:?}"
    );
    assert_eq!(receiver.next().await["status"], 429);

    // A redirect is not followed: the receiver sees one POST, and the next line it prints
    // is the following message's.
    let outcome = sender
        .send(&receiver.at("/push/moved"), b"hello", 60, Urgency::High)
        .await;
    assert!(
        matches!(&outcome, SendOutcome::Failed { retryable: false, error, .. }
            if error.ends_with("answered 301 Moved Permanently")),
        "{outcome:?}"
    );
    assert_eq!(receiver.next().await["path"], "/push/moved");
    let own = receiver.subscription.clone();
    assert_eq!(
        sender.send(&own, b"direct", 60, Urgency::High).await,
        SendOutcome::Sent
    );
    let seen = receiver.next().await;
    let own_path = reqwest::Url::parse(&own.endpoint)
        .unwrap()
        .path()
        .to_owned();
    assert_eq!(seen["path"], own_path.as_str());
    assert_eq!(seen["payload"], "direct");
}

#[tokio::test]
async fn a_message_for_other_keys_is_refused_by_the_receiver_and_not_retried() {
    let mut receiver = Receiver::start(&[]).await;
    let sender = Sender::new();
    // The receiver's endpoint, but another browser's auth secret: the receiver cannot
    // decrypt what was sent, and says so.
    let mut wrong = receiver.subscription.clone();
    wrong.keys.auth = "AAAAAAAAAAAAAAAAAAAAAA".into();

    let outcome = sender.send(&wrong, b"hello", 60, Urgency::High).await;
    let seen = receiver.next().await;
    assert_eq!(seen["ok"], false, "{seen}");
    assert_eq!(seen["status"], 400);
    let said = seen["error"].as_str().unwrap();
    assert!(said.starts_with("not decrypted: "), "{said}");
    match outcome {
        SendOutcome::Failed {
            error,
            retryable: false,
            retry_after: None,
        } => assert!(
            error.ends_with(&format!("answered 400 Bad Request: {said}")),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_push_service_is_a_retryable_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let sender = Sender::new();
    // RFC 8291's example keys: nothing gets far enough to be decrypted.
    let receiver_keys = push::SubscriptionKeys {
        p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
            .into(),
        auth: "BTBZMqHH6r4Tts7J_aSIgg".into(),
    };
    let subscription = Subscription {
        endpoint: format!("http://127.0.0.1:{port}/push/x"),
        keys: receiver_keys,
    };

    let outcome = sender
        .send(&subscription, b"hello", 60, Urgency::High)
        .await;
    match outcome {
        SendOutcome::Failed {
            error,
            retryable: true,
            retry_after: None,
        } => {
            assert!(
                error.starts_with(&format!(
                    "the push service at http://127.0.0.1:{port} was not reached: "
                )),
                "{error}"
            );
            assert!(!error.contains("/push/x"), "the path stays out: {error}");
        }
        other => panic!("{other:?}"),
    }
}
