//! Bad input gets a clear JSON error and changes nothing on disk (invariant 7, bad input
//! changes nothing).

use serde_json::{Value, json};

use crate::harness::{Server, read, snapshot_conversations};

#[tokio::test]
async fn bad_requests_get_clear_errors_and_change_nothing() {
    let server = Server::start().await;
    let created = server.create_and_wait("existing conversation").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let before = snapshot_conversations(&server.data_dir);
    let client = &server.client;

    // (method, path, body, expected status, expected code)
    let conversation = format!("/api/conversations/{id}");
    let messages = format!("/api/conversations/{id}/messages");
    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        (
            "POST",
            "/api/conversations".into(),
            Some("{not json"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": 5}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": "hi", "bogus": 1}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": "hi", "agent": "nobody"}"#),
            422,
            "agent_unavailable",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": "hi", "model": "nothing"}"#),
            422,
            "model_unavailable",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": "hi", "cwd": "relative/path"}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"{"text": "hi", "cwd": "/does/not/exist/anywhere"}"#),
            422,
            "cwd_missing",
        ),
        (
            "POST",
            messages.clone(),
            Some(r#"{"text": ""}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            messages.clone(),
            Some(r#"{"text": "x", "mode": "shout"}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            messages.clone(),
            Some(r#"{"text": "x", "session_id": "s_unknown"}"#),
            404,
            "not_found",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"title": ""}"#),
            400,
            "invalid_request",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"title": "\u0007\n\u0000 "}"#),
            400,
            "invalid_request",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"archived": "yes"}"#),
            400,
            "invalid_request",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"model": "nothing"}"#),
            422,
            "model_unavailable",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"cwd": "/does/not/exist"}"#),
            422,
            "cwd_missing",
        ),
        (
            "PATCH",
            conversation.clone(),
            Some(r#"{"color": "red"}"#),
            400,
            "invalid_request",
        ),
        // A struct must not be read from an array or a bare value.
        (
            "PATCH",
            conversation.clone(),
            Some("[null, null]"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#"["hi"]"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(r#""hi""#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            format!("{conversation}/interrupt"),
            Some("[]"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            format!("{conversation}/fork"),
            Some(r#"{"deep": true}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            format!("{conversation}/rewind"),
            Some(r#"{"message_id": "m_0123456789abcdef0123456789abcdef"}"#),
            404,
            "not_found",
        ),
        (
            "POST",
            "/api/conversations".into(),
            Some(
                r#"{"text": "look", "images": [{"media_type": "image/png", "data": "@@@ not base64"}]}"#,
            ),
            400,
            "invalid_request",
        ),
        (
            "POST",
            messages.clone(),
            Some(
                r#"{"text": "look", "images": [{"media_type": "image/png", "data": "!!!notbase64"}]}"#,
            ),
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/api/conversations/c_unknown".into(),
            None,
            404,
            "not_found",
        ),
        (
            "GET",
            "/api/conversations/..%2F..%2Fetc".into(),
            None,
            404,
            "not_found",
        ),
        (
            "PATCH",
            "/api/conversations/c_unknown".into(),
            Some(r#"{"title": "x"}"#),
            404,
            "not_found",
        ),
        (
            "PATCH",
            "/api/conversations/c_unknown".into(),
            Some(r#"{"model": "nothing", "cwd": "relative"}"#),
            404,
            "not_found",
        ),
        (
            "DELETE",
            "/api/conversations/c_unknown".into(),
            None,
            404,
            "not_found",
        ),
        (
            "POST",
            "/api/conversations/c_unknown/messages".into(),
            Some(r#"{"text": "x"}"#),
            404,
            "not_found",
        ),
        (
            "GET",
            "/api/conversations/c_unknown/items".into(),
            None,
            404,
            "not_found",
        ),
        (
            "GET",
            format!("{conversation}/items?session=s_unknown"),
            None,
            404,
            "not_found",
        ),
        (
            "GET",
            format!("{conversation}/items?limit=0"),
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            format!("{conversation}/items?after_seq=minus"),
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/api/conversations?archived=maybe".into(),
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/api/conversations?limit=501".into(),
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/api/conversations?cursor=garbage".into(),
            None,
            400,
            "invalid_request",
        ),
        ("GET", "/api/nothing-here".into(), None, 404, "not_found"),
        (
            "PUT",
            "/api/conversations".into(),
            Some("{}"),
            405,
            "method_not_allowed",
        ),
    ];
    for (method, path, body, expected_status, expected_code) in cases {
        let mut request = client.request(method.parse().unwrap(), server.url(&path));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        let (status, error) = read(request.send().await.unwrap()).await;
        assert_eq!(status, expected_status, "{method} {path} {body:?}: {error}");
        assert_eq!(
            error["error"]["code"], expected_code,
            "{method} {path}: {error}"
        );
        let message = error["error"]["message"].as_str().unwrap();
        assert!(!message.is_empty(), "{method} {path}: empty message");
    }

    // An oversized body: 413 in the same shape, answered from the headers alone. (Sent over a
    // raw socket: a client still uploading when the server answers may see a reset instead.)
    let (status, error) = oversized_post(&server, &messages).await;
    assert_eq!(status, 413, "{error}");
    assert_eq!(error["error"]["code"], "too_large");

    assert_eq!(
        snapshot_conversations(&server.data_dir),
        before,
        "bad input changed the files"
    );
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn foreign_hosts_and_cross_origin_writes_are_refused() {
    let server = Server::start().await;
    let client = &server.client;
    let before = snapshot_conversations(&server.data_dir);

    // DNS rebinding: a page on evil.example resolving to 127.0.0.1.
    let response = client
        .get(server.url("/api/conversations"))
        .header("Host", "evil.example:7341")
        .send()
        .await
        .unwrap();
    let (status, error) = read(response).await;
    assert_eq!(status, 403);
    assert_eq!(error["error"]["code"], "forbidden");

    // A cross-origin POST from a web page.
    for origin in ["http://evil.example", "null"] {
        let response = client
            .post(server.url("/api/conversations"))
            .header("Origin", origin)
            .json(&json!({ "text": "run rm -rf" }))
            .send()
            .await
            .unwrap();
        let (status, error) = read(response).await;
        assert_eq!(status, 403, "origin {origin}");
        assert_eq!(error["error"]["code"], "forbidden");
    }
    assert_eq!(snapshot_conversations(&server.data_dir), before);

    // The same-origin UI is allowed, and so is `localhost`.
    let port = server.base.rsplit(':').next().unwrap();
    let response = client
        .post(server.url("/api/conversations"))
        .header("Origin", format!("http://localhost:{port}"))
        .header("Host", format!("localhost:{port}"))
        .json(&json!({ "text": "from the UI" }))
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_token_is_required_off_loopback_and_checked_when_set() {
    // Binding to every interface without a token is refused at start.
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(temp.path().join("empty.toml"), "").unwrap();
    let output = tokio::process::Command::new(crate::harness::binary())
        .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
        .arg(temp.path())
        .env("OPENVAALA_CONFIG", temp.path().join("empty.toml"))
        .env_remove("OPENVAALA_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OPENVAALA_TOKEN"), "{stderr}");

    // With a token, requests need it.
    let server = Server::start_with(crate::harness::ServerOptions {
        env: vec![("OPENVAALA_TOKEN".into(), "s3cret".into())],
        ..Default::default()
    })
    .await;
    // A client without it (the harness's own carries the local token, which counts too).
    let response = reqwest::get(server.url("/api/conversations"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unauthorized");
    let response = server
        .client
        .get(server.url("/api/conversations"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    let (status, body): (u16, Value) = read(response).await;
    assert_eq!(status, 200, "{body}");
}

/// POSTs headers announcing a 20 MB body plus its first kilobyte, and reads the answer.
async fn oversized_post(server: &Server, path: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = server.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {token}\r\n\
         Content-Length: 20000000\r\nConnection: close\r\n\r\n{{\"text\": \"",
        token = server.token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&[b'x'; 1024]).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(crate::harness::TIMEOUT, stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A PNG signature and IHDR chunk claiming `width` × `height` (all a header check reads).
fn png(width: u32, height: u32) -> String {
    use base64::Engine as _;
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Images that every later model call would carry are checked when they arrive: each bad
/// one is refused with its index and the reason, on create and on send, and nothing is stored.
#[tokio::test]
async fn images_a_model_cannot_use_are_refused_with_nothing_stored() {
    let server = Server::start().await;
    let created = server.create_and_wait("existing conversation").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let before = snapshot_conversations(&server.data_dir);
    let good = json!({ "media_type": "image/png", "data": png(16, 16) });
    let many: Vec<Value> = (0..21).map(|_| good.clone()).collect();
    // (images, status, code, what the message says)
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!([{ "media_type": "image/png", "data": "" }]),
            400,
            "invalid_request",
            "images[0]: `data` is empty",
        ),
        (
            json!([good, { "media_type": "image/", "data": png(1, 1) }]),
            400,
            "invalid_request",
            "images[1]: media_type \"image/\"",
        ),
        (
            json!([{ "media_type": "image/png\r\nX: y", "data": png(1, 1) }]),
            400,
            "invalid_request",
            "\\r\\n",
        ),
        (
            json!([{ "media_type": "image/png", "url": "javascript:alert(1)" }]),
            400,
            "invalid_request",
            "not javascript:",
        ),
        (
            json!([{ "media_type": "image/png", "url": "file:///etc/passwd" }]),
            400,
            "invalid_request",
            "not file:",
        ),
        (
            json!([{ "media_type": "image/png", "data": png(100_000, 100_000) }]),
            422,
            "invalid_image",
            "100000 × 100000 pixels",
        ),
        (
            json!([{ "media_type": "image/png", "data": "aGVsbG8gd29ybGQ=" }]),
            422,
            "invalid_image",
            "not a image/png image",
        ),
        (
            Value::Array(many),
            400,
            "invalid_request",
            "at most 20 images",
        ),
    ];
    for path in [
        "/api/conversations".to_owned(),
        format!("/api/conversations/{id}/messages"),
    ] {
        for (images, status, code, says) in &cases {
            let (got, body) = server
                .post(&path, json!({ "text": "look at this", "images": images }))
                .await;
            assert_eq!(got, *status, "{path} {images}: {body}");
            assert_eq!(body["error"]["code"], *code, "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{message} should say {says}");
        }
    }
    assert_eq!(snapshot_conversations(&server.data_dir), before);
    // A good image still goes through.
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "and this", "images": [good] }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
}
