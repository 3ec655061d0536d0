//! Hostile and malformed input: searches that broke the query, a session
//! name that is a file name, requests racing a delete, requests the HTTP layer itself refuses,
//! and the hardening of the edge (header read timeout, connection limit, duplicate `Host`,
//! absolute-form targets, the bearer scheme's case, weak tokens). Every answer is the API's
//! JSON error shape, never a 500.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Server, ServerOptions, TIMEOUT, read};

/// One raw HTTP exchange: the bytes are sent as they are, the answer is read to its end (the
/// requests here ask for `Connection: close`, or are ones the server closes after answering).
///
/// The request is written while the answer is read: the server may answer and close before the
/// whole request is sent (a body past the limit is refused once the limit is passed), and the
/// rest of the write then fails, as it would for any client.
async fn raw_exchange(server: &Server, request: &[u8]) -> RawAnswer {
    let stream = TcpStream::connect(authority(server)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let request = with_token(server, request);
    let writing = tokio::spawn(async move {
        let written = writer.write_all(&request).await;
        (writer, written)
    });
    let answer = read_answer(&mut reader).await;
    let (_writer, written) = writing.await.unwrap();
    if let Err(error) = written {
        let refused_early = matches!(
            error.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        );
        assert!(refused_early, "writing the request: {error}");
    }
    answer
}

/// `request` with the server's token in an `Authorization` header after its first line, as a
/// client of the API sends it (what is refused here is refused whatever the token).
fn with_token(server: &Server, request: &[u8]) -> Vec<u8> {
    let header = format!("Authorization: Bearer {}\r\n", server.token);
    match request.windows(2).position(|pair| pair == b"\r\n") {
        Some(end) => [&request[..end + 2], header.as_bytes(), &request[end + 2..]].concat(),
        None => request.to_vec(),
    }
}

fn authority(server: &Server) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

#[derive(Debug)]
struct RawAnswer {
    status: u16,
    head: String,
    body: Value,
}

impl RawAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// Reads one answer: its head, then as many body bytes as `content-length` says (or to the end).
async fn read_answer(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> RawAnswer {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    let complete = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(end) = find(&bytes, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_string();
                let length = head.lines().find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    key.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                });
                if length.is_some_and(|length| bytes.len() >= end + 4 + length) {
                    return;
                }
            }
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(complete.is_ok(), "no complete answer in time");
    let end = find(&bytes, b"\r\n\r\n").expect("an HTTP answer");
    let head = String::from_utf8_lossy(&bytes[..end]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .expect("a status line");
    let body = serde_json::from_slice(&bytes[end + 4..]).unwrap_or(Value::Null);
    RawAnswer { status, head, body }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn assert_error(answer: &RawAnswer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.body["error"]["code"], code, "{answer:?}");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{answer:?}"
    );
    assert_eq!(
        answer.header("content-type"),
        Some("application/json"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn searches_with_nul_bytes_or_hundreds_of_words_get_an_answer_not_a_500() {
    let server = Server::start().await;
    server.create_and_wait("alpha beta gamma").await;
    server.create_and_wait("delta epsilon").await;

    // A NUL inside a search word: refused, and never "every conversation".
    for q in ["%00a", "alpha%00", "al%00pha", "%00"] {
        let (status, body) = server.get(&format!("/api/conversations?q={q}")).await;
        assert_eq!(status, 400, "q={q}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "q={q}");
    }
    // Five hundred words: a clear 400 naming the limit.
    let many = (0..500)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join("+");
    let (status, body) = server.get(&format!("/api/conversations?q={many}")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("words"));
    // Up to the limit, with repeats and short words mixed in, the search works.
    let mut words = vec!["alpha"; 20];
    words.extend(["be", "gamma", "%25", "_"]);
    let (status, body) = server
        .get(&format!("/api/conversations?q={}", words.join("+")))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["conversations"], json!([]), "`%` and `_` are literal");
    let (status, body) = server
        .get("/api/conversations?q=alpha+be+gamma+alpha")
        .await;
    assert_eq!(status, 200, "{body}");
    let found = body["conversations"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{body}");
    assert_eq!(found[0]["title"], "alpha beta gamma");
    // FTS5 syntax in a word is searched for as text.
    for q in [
        "NEAR(alpha",
        "alpha*",
        "\"alpha",
        "alpha+OR+delta",
        "-alpha",
    ] {
        let (status, body) = server.get(&format!("/api/conversations?q={q}")).await;
        assert_eq!(status, 200, "q={q}: {body}");
    }
}

#[tokio::test]
async fn a_session_named_like_a_file_is_not_found() {
    let server = Server::start().await;
    let created = server.create_and_wait("hello").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    for session in ["metadata", "metadata.jsonl", "..", "s_missing"] {
        let (status, body) = server
            .get(&format!("/api/conversations/{id}/items?session={session}"))
            .await;
        assert_eq!(status, 404, "session={session}: {body}");
        assert_eq!(body["error"]["code"], "not_found");
        let (status, body) = server
            .get(&format!("/api/conversations/{id}/usage?session={session}"))
            .await;
        assert_eq!(status, 404, "usage session={session}: {body}");
    }
}

/// Requests that arrive while a conversation is being deleted are answered as if they came
/// just before (their own answer) or just after (404), never with 503 "stopping" or a 500.
#[tokio::test]
async fn requests_racing_a_delete_get_404_or_their_answer() {
    let server = Server::start().await;
    for round in 0..6 {
        let created = server.create_and_wait(&format!("doomed {round}")).await;
        let id = created["conversation"]["id"].as_str().unwrap().to_owned();
        let base = format!("/api/conversations/{id}");
        let mut requests: Vec<futures::future::BoxFuture<'_, (String, u16, Value)>> = Vec::new();
        for n in 0..40 {
            let base = base.clone();
            let server = &server;
            requests.push(Box::pin(async move {
                let (what, (status, body)) = match n % 8 {
                    0 => ("delete", server.delete(&base).await),
                    1 => ("get", server.get(&base).await),
                    2 => ("items", server.get(&format!("{base}/items")).await),
                    3 => ("usage", server.get(&format!("{base}/usage")).await),
                    4 => (
                        "patch",
                        server.patch(&base, json!({ "title": "renamed" })).await,
                    ),
                    5 => ("sessions", server.get(&format!("{base}/sessions")).await),
                    6 => ("pending", server.get(&format!("{base}/pending")).await),
                    _ => (
                        "interrupt",
                        server.post(&format!("{base}/interrupt"), json!({})).await,
                    ),
                };
                (what.to_owned(), status, body)
            }));
        }
        // Every request is answered: one left waiting forever would hang the suite.
        let answers = tokio::time::timeout(TIMEOUT, futures::future::join_all(requests))
            .await
            .unwrap_or_else(|_| panic!("round {round}: a request racing a delete got no answer"));
        for (what, status, body) in &answers {
            assert!(
                [200, 204, 404, 409].contains(status),
                "round {round}: {what} answered {status}: {body}"
            );
        }
        let deleted = answers
            .iter()
            .filter(|(what, status, _)| what == "delete" && *status == 204)
            .count();
        assert_eq!(deleted, 1, "exactly one delete succeeds: {answers:?}");
        let (status, _) = server.get(&base).await;
        assert_eq!(status, 404);
    }
}

#[tokio::test]
async fn the_http_layers_own_errors_are_json() {
    let server = Server::start().await;
    let host = authority(&server);

    // A malformed header line: 400.
    let answer = raw_exchange(
        &server,
        format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nnot a header\r\n\r\n").as_bytes(),
    )
    .await;
    assert_error(&answer, 400, "invalid_request");

    // A request line that is not HTTP: 400.
    let answer = raw_exchange(&server, b"HELLO THERE\r\n\r\n").await;
    assert_error(&answer, 400, "invalid_request");

    // A request target of 70,000 characters: 414.
    let long = "a".repeat(70_000);
    let answer = raw_exchange(
        &server,
        format!("GET /api/{long} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
    )
    .await;
    assert_error(&answer, 414, "too_large");

    // Two hundred headers, and one header of a megabyte: 431.
    let headers: String = (0..200).map(|n| format!("X-Many-{n}: {n}\r\n")).collect();
    let answer = raw_exchange(
        &server,
        format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n").as_bytes(),
    )
    .await;
    assert_error(&answer, 431, "too_large");
    let huge = "b".repeat(1 << 20);
    let answer = raw_exchange(
        &server,
        format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nX-Huge: {huge}\r\n\r\n").as_bytes(),
    )
    .await;
    assert_error(&answer, 431, "too_large");

    // The service still answers normally afterwards.
    let answer = raw_exchange(
        &server,
        format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["status"], "ok");
}

/// axum's own rejections (a body too long when sent in chunks, a path segment that is not
/// UTF-8) and a body that stalls get the JSON error shape, and the stalled one is let go.
#[tokio::test]
async fn rejections_before_the_handlers_are_json_and_a_stalled_body_is_let_go() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nheader_read_timeout_s = 1\n".to_owned()),
        ..Default::default()
    })
    .await;
    let host = authority(&server);
    let created = server.create_and_wait("Hello").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    let (_, before) = server.get("/api/conversations").await;

    // 17 MiB in chunks of 1 MiB, to the routes that read the raw body: 413.
    let chunk = "a".repeat(1 << 20);
    let chunks: String = (0..17)
        .map(|_| format!("{:x}\r\n{chunk}\r\n", chunk.len()))
        .collect();
    for route in ["fork", "interrupt", "compact"] {
        let answer = raw_exchange(
            &server,
            format!(
                "POST /api/conversations/{id}/{route} HTTP/1.1\r\nHost: {host}\r\n\
                 Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
                 Connection: close\r\n\r\n{chunks}0\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
        assert_error(&answer, 413, "too_large");
    }

    // A path segment that is not UTF-8: 400.
    for (method, path) in [
        ("GET", "/api/conversations/%ff".to_owned()),
        ("DELETE", format!("/api/conversations/{id}/pending/%ff")),
        (
            "POST",
            format!("/api/conversations/{id}/sessions/%ff/interrupt"),
        ),
    ] {
        let answer = raw_exchange(
            &server,
            format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
        assert_error(&answer, 400, "invalid_request");
    }

    // A body that announces 100 bytes and stops after 8: answered once it has paused past the
    // timeout, instead of holding the connection.
    let mut stream = TcpStream::connect(&host).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /api/conversations HTTP/1.1\r\nHost: {host}\r\n\
                 Authorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"text\":",
                token = server.token
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = read_answer(&mut stream).await;
    // 408: the body stalled, nothing was done, and the request may be sent again.
    assert_error(&answer, 408, "request_timeout");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timeout"),
        "{answer:?}"
    );

    // None of it changed anything.
    let (_, after) = server.get("/api/conversations").await;
    assert_eq!(before, after);
}

#[tokio::test]
async fn duplicate_hosts_and_absolute_targets_naming_another_host_are_refused() {
    let server = Server::start().await;
    let host = authority(&server);
    let before = crate::harness::snapshot_conversations(&server.data_dir);

    let answer = raw_exchange(
        &server,
        format!(
            "GET /api/conversations HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert_error(&answer, 400, "invalid_request");

    let body = r#"{"text": "run rm -rf"}"#;
    for target in [
        "http://evil.example/api/conversations".to_owned(),
        "http://evil.example:80/api/conversations".to_owned(),
    ] {
        let answer = raw_exchange(
            &server,
            format!(
                "POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
        assert_error(&answer, 403, "forbidden");
    }
    assert_eq!(
        crate::harness::snapshot_conversations(&server.data_dir),
        before
    );

    // An absolute-form target naming this service is an ordinary request.
    let answer = raw_exchange(
        &server,
        format!(
            "GET http://{host}/api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[tokio::test]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    const TOKEN: &str = "a-long-enough-test-token";
    let server = Server::start_with(ServerOptions {
        env: vec![("OPENVAALA_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    })
    .await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let response = server
            .client
            .get(server.url("/api/conversations"))
            .header("Authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .unwrap();
        let (status, body) = read(response).await;
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    for wrong in [
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        "Bearer".to_owned(),
    ] {
        let response = server
            .client
            .get(server.url("/api/conversations"))
            .header("Authorization", &wrong)
            .send()
            .await
            .unwrap();
        let (status, body) = read(response).await;
        assert_eq!(status, 401, "{wrong}: {body}");
    }
}

#[tokio::test]
async fn weak_tokens_are_refused_at_start_off_loopback() {
    for (token, why) in [
        ("short", "16 characters"),
        ("fifteen-chars-x", "16 characters"),
        ("                    ", "whitespace"),
        ("\t \t \t \t \t \t \t \t \t ", "whitespace"),
    ] {
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(temp.path().join("empty.toml"), "").unwrap();
        let child = tokio::process::Command::new(crate::harness::binary())
            .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
            .arg(temp.path())
            .env("OPENVAALA_CONFIG", temp.path().join("empty.toml"))
            .env("OPENVAALA_TOKEN", token)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("token {token:?}: the service started"))
            .unwrap();
        assert!(!output.status.success(), "token {token:?} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(why), "token {token:?}: {stderr}");
    }
    // A strong token starts the service off loopback, and is required there.
    let server = Server::start_with(ServerOptions {
        addr: Some("0.0.0.0:0".to_owned()),
        env: vec![("OPENVAALA_TOKEN".into(), "0123456789abcdef-strong".into())],
        ..Default::default()
    })
    .await;
    let response = reqwest::get(server.url("/api/conversations"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

/// A client that sends half a request and then nothing is dropped after the header read
/// timeout, so it holds no file for long; complete requests are not affected.
#[tokio::test]
async fn half_sent_requests_are_dropped_after_the_header_timeout() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nheader_read_timeout_s = 1\n".to_owned()),
        ..Default::default()
    })
    .await;
    let host = authority(&server);
    let mut stalled = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(&host).await.unwrap();
        stream
            .write_all(format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").as_bytes())
            .await
            .unwrap();
        stalled.push(stream);
    }
    for mut stream in stalled {
        // The server gives up on the request: the connection ends (with at most an error
        // answer), without the client sending anything more.
        let mut rest = Vec::new();
        let ended = tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut rest)).await;
        assert!(ended.is_ok(), "a half-sent request was held open");
    }
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, 200);
}

/// Past the connection limit, a new connection gets 503 with `Retry-After` in the JSON error
/// shape (never a refused connection); once a connection closes, new ones are served again.
#[tokio::test]
async fn connections_past_the_limit_get_503_and_retry_after() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\nmax_connections = 4\n".to_owned()),
        ..Default::default()
    })
    .await;
    let host = authority(&server);
    let request = format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let mut open = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(&host).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = read_answer(&mut stream).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        open.push(stream);
    }
    let close = format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(&server, close.as_bytes()).await;
    assert_error(&answer, 503, "unavailable");
    assert!(answer.header("retry-after").is_some(), "{answer:?}");

    // One kept-alive connection leaves: the next new one is served (once the server has
    // seen it go).
    drop(open.pop());
    let served = tokio::time::timeout(TIMEOUT, async {
        loop {
            if raw_exchange(&server, close.as_bytes()).await.status == 200 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(served.is_ok(), "a freed connection slot was not reused");
}
