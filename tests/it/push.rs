//! Push notifications end to end, through the API like a browser: a device subscribes with
//! the subscription the stand-in push service (`tests/push/receiver.mjs`) made, and the
//! receiver checks each push's VAPID signature against the key `GET /api/push/key` gave and
//! decrypts it. Pushes go out when an approval waits and when a turn ends, not to a device
//! that has an event stream open, and a subscription whose push service says it is gone, or
//! whose device is signed out, is dropped.

use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions, TIMEOUT, fill_list, with_data_dir};
use crate::push_send::Receiver;
use crate::tokens::client_with;

async fn json_of(request: reqwest::RequestBuilder) -> (u16, Value) {
    crate::harness::read(request.send().await.unwrap()).await
}

/// A server whose agent asks before each shell command, and a device token `phone`.
async fn start() -> (Server, reqwest::Client, String) {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n\
             [agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let (ok, output) = with_data_dir(&["token", "add", "phone"], &server.data_dir).await;
    assert!(ok, "{output}");
    let token = output
        .lines()
        .find(|l| l.starts_with("ovt_"))
        .unwrap()
        .to_owned();
    (server, client_with(&token), token)
}

async fn subscribe(server: &Server, phone: &reqwest::Client, subscription: Value) -> String {
    let (status, body) = json_of(
        phone
            .post(server.url("/api/push/subscriptions"))
            .json(&subscription),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

/// Starts a conversation asking to run a command: its approval waits.
async fn ask(server: &Server, cwd: &std::path::Path) -> String {
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "/shell true", "cwd": cwd.to_str().unwrap()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created["conversation"]["id"].as_str().unwrap().to_owned()
}

/// The next push the receiver got, decrypted, as JSON.
async fn next_push(receiver: &mut Receiver) -> Value {
    let line = receiver.next().await;
    assert_eq!(line["ok"], true, "{line}");
    serde_json::from_str(line["payload"].as_str().unwrap()).unwrap()
}

async fn answer_first_approval(server: &Server) {
    let approval = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, list) = server.get("/api/approvals").await;
            if let Some(approval) = list["approvals"].as_array().unwrap().first() {
                return approval.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("an approval");
    let id = approval["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("/api/approvals/{id}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn an_approval_and_a_finished_turn_reach_a_subscribed_device_that_is_not_looking() {
    let (server, phone, _) = start().await;
    let mut receiver = Receiver::start(&[]).await;
    let (status, key) = json_of(phone.get(server.url("/api/push/key"))).await;
    assert_eq!(status, 200, "{key}");
    assert_eq!(key["public_key"].as_str().unwrap().len(), 87, "{key}");
    let subscription = serde_json::to_value(&receiver.subscription).unwrap();
    let id = subscribe(&server, &phone, subscription.clone()).await;
    // The same endpoint again is the same subscription.
    let (status, again) = json_of(
        phone
            .post(server.url("/api/push/subscriptions"))
            .json(&subscription),
    )
    .await;
    assert_eq!((status, again["id"].as_str()), (200, Some(id.as_str())));
    let (_, listed) = json_of(phone.get(server.url("/api/push/subscriptions"))).await;
    assert_eq!(listed["subscriptions"][0]["id"], id.as_str(), "{listed}");
    assert!(
        listed["subscriptions"][0]["push_service"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    // Another device sees none of this device's subscriptions.
    let (_, others) = server.get("/api/push/subscriptions").await;
    assert_eq!(others["subscriptions"].as_array().unwrap().len(), 0);

    let cwd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let conversation = ask(&server, cwd.path()).await;
    let push = next_push(&mut receiver).await;
    assert_eq!(push["title"], "Approval needed");
    assert_eq!(push["url"], format!("/#/c/{conversation}"));
    assert!(push["body"].as_str().unwrap().contains("shell"), "{push}");
    assert!(
        !push.to_string().contains("true"),
        "no command line: {push}"
    );
    answer_first_approval(&server).await;
    let push = next_push(&mut receiver).await;
    assert_eq!(push["title"], "Turn finished", "{push}");
    assert_eq!(push["tag"], format!("turn-{conversation}"));

    // While the phone follows the list, it gets nothing; the next push it gets is for the
    // turn that ends after it stopped looking.
    let looking = phone.get(server.url("/api/events")).send().await.unwrap();
    assert_eq!(looking.status(), 200);
    let mut looking = looking.bytes_stream();
    futures::StreamExt::next(&mut looking)
        .await
        .unwrap()
        .unwrap();
    let watched = ask(&server, cwd.path()).await;
    answer_first_approval(&server).await;
    let mut events = server.events(&watched).await;
    crate::support::until_turn_end(&mut events).await;
    // Both of the watched conversation's notices were held back (the approval and the
    // finished turn), as the metrics count them.
    let skipped = tokio::time::timeout(TIMEOUT, async {
        loop {
            let metrics = server
                .client
                .get(server.url("/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let count = metrics
                .lines()
                .find(|line| {
                    line.starts_with("openvaala_push_notifications_total")
                        && line.contains("outcome=\"skipped\"")
                })
                .and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok());
            if count >= Some(2.0) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        skipped.is_ok(),
        "the looking device's notices were not held back"
    );
    drop(looking);
    // The stream's end reaches the service a moment after the client drops it: conversations
    // are started until one is pushed. The first push that comes is for one of them, never for
    // the conversation the phone watched.
    let unwatched = tokio::time::timeout(TIMEOUT, async {
        loop {
            let conversation = ask(&server, cwd.path()).await;
            let wait = std::time::Duration::from_secs(1);
            if let Ok(line) = tokio::time::timeout(wait, receiver.next()).await {
                let push: Value = serde_json::from_str(line["payload"].as_str().unwrap()).unwrap();
                assert_ne!(push["url"], format!("/#/c/{watched}"), "{push}");
                let _ = conversation;
                return push;
            }
        }
    })
    .await
    .expect("a push once the phone stopped looking");
    assert_eq!(unwatched["title"], "Approval needed");
}

#[tokio::test]
async fn a_gone_subscription_and_a_signed_out_device_are_dropped() {
    let (server, phone, _) = start().await;
    let mut receiver = Receiver::start(&["--answer", "/push/gone=410"]).await;
    let gone = serde_json::to_value(receiver.at("/push/gone")).unwrap();
    subscribe(&server, &phone, gone).await;
    let cwd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    ask(&server, cwd.path()).await;
    let line = receiver.next().await;
    assert_eq!(line["status"], 410, "{line}");
    let dropped = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, listed) = json_of(phone.get(server.url("/api/push/subscriptions"))).await;
            if listed["subscriptions"].as_array().unwrap().is_empty() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(dropped.is_ok(), "the gone subscription was kept");

    // Subscribed again, then the device is signed out: the next event drops it unsent.
    let good = serde_json::to_value(&receiver.subscription).unwrap();
    subscribe(&server, &phone, good.clone()).await;
    let (ok, output) = with_data_dir(&["token", "revoke", "phone"], &server.data_dir).await;
    assert!(ok, "{output}");
    answer_first_approval(&server).await;
    let file = server.data_dir.join("push-subscriptions.json");
    let emptied = tokio::time::timeout(TIMEOUT, async {
        loop {
            let kept: Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            if kept["subscriptions"].as_array().unwrap().is_empty() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        emptied.is_ok(),
        "the signed-out device's subscription was kept"
    );

    // Bad subscriptions are refused and change nothing: one the service cannot send to
    // (plain http off loopback, keys that are no P-256 point) is unprocessable, a malformed
    // one a bad request.
    let before = std::fs::read_to_string(&file).unwrap();
    let keys = &good["keys"];
    let no_point = format!("B{}", "A".repeat(86));
    for (endpoint, p256dh) in [
        ("http://example.com/push", keys["p256dh"].as_str().unwrap()),
        ("https://push.example.com/1", no_point.as_str()),
    ] {
        let (status, body) = server
            .post(
                "/api/push/subscriptions",
                json!({"endpoint": endpoint, "keys": {"p256dh": p256dh, "auth": keys["auth"]}}),
            )
            .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], "invalid_subscription", "{body}");
    }
    let long = format!("https://push.example.com/{}", "a".repeat(2048));
    let (status, body) = server
        .post(
            "/api/push/subscriptions",
            json!({"endpoint": long, "keys": keys}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    // Past 200 subscriptions another is refused as a limit, and nothing changes. (The file
    // is filled by hand: the store reads it at each use.)
    let (status, body) = server.post("/api/push/subscriptions", good.clone()).await;
    assert_eq!(status, 201, "{body}");
    let full = fill_list(&file, "subscriptions", 200, |stored, n| {
        stored["id"] = json!(format!("ps_{n:016x}"));
        stored["subscription"]["endpoint"] = json!(format!("https://push.example.com/{n}"));
    });
    let mut another = good.clone();
    another["endpoint"] = json!("https://push.example.com/another");
    let (status, body) = server.post("/api/push/subscriptions", another).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "limit_reached", "{body}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), full);
    let (status, _) = server.delete("/api/push/subscriptions/ps_nothing").await;
    assert_eq!(status, 404);
}
