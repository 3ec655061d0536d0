//! A request body that trickles in (a byte now and then, each pause shorter than the pause
//! timeout) is cut once it falls below `[server] body_min_bytes_per_s`, or once it has taken
//! `body_timeout_s` in all: answered 408 `request_timeout` in the JSON error shape, nothing stored, and the
//! connection let go.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Server, ServerOptions, TIMEOUT};

/// Starts a create whose body announces 200 bytes and then sends one byte every `every`,
/// and returns the status and JSON body of the answer, and how long it took to come.
async fn trickle(server: &Server, every: Duration) -> (u16, Value, Duration) {
    let host = server.base.trim_start_matches("http://").to_owned();
    let stream = TcpStream::connect(&host).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    writer
        .write_all(
            format!(
                "POST /api/conversations HTTP/1.1\r\nHost: {host}\r\n\
                 Authorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{\"text\":\"",
                token = server.token
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // The stimulus: a byte at a steady pace until the server answers (then writes fail).
    let writing = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            if writer.write_all(b"a").await.is_err() {
                return;
            }
        }
    });
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    let answered = tokio::time::timeout(TIMEOUT, async {
        loop {
            if let Some(end) = bytes.windows(4).position(|window| window == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse::<usize>().ok());
                if length.is_some_and(|length| bytes.len() >= end + 4 + length) {
                    return end;
                }
            }
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => panic!("the connection closed without a whole answer"),
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .expect("a trickling body was never cut");
    let took = started.elapsed();
    writing.abort();
    let head = String::from_utf8_lossy(&bytes[..answered]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = serde_json::from_slice(&bytes[answered + 4..]).expect("a JSON error body");
    (status, body, took)
}

#[tokio::test]
async fn a_body_below_the_minimum_rate_is_cut_with_408() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[server]\nheader_read_timeout_s = 2\nbody_min_bytes_per_s = 100\nbody_timeout_s = 60\n"
                .to_owned(),
        ),
        ..Default::default()
    })
    .await;
    let before = crate::harness::snapshot_conversations(&server.data_dir);
    // Each pause (0.5 s) is well under the pause timeout (2 s): only the rate cuts it.
    let (status, body, took) = trickle(&server, Duration::from_millis(500)).await;
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("slower than the minimum of 100"),
        "{message}"
    );
    // Cut after the 2 s of grace plus the little the first bytes earned.
    assert!(took < Duration::from_secs(8), "cut after {took:?}");
    assert_eq!(
        crate::harness::snapshot_conversations(&server.data_dir),
        before,
        "a cut body stored something"
    );
    // The service answers as before.
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200, "{health}");
}

#[tokio::test]
async fn a_body_that_takes_too_long_in_all_is_cut_with_408() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[server]\nheader_read_timeout_s = 2\nbody_min_bytes_per_s = 0\nbody_timeout_s = 3\n"
                .to_owned(),
        ),
        ..Default::default()
    })
    .await;
    let (status, body, took) = trickle(&server, Duration::from_millis(300)).await;
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("within 3 s"), "{message}");
    assert!(took >= Duration::from_secs(3), "cut after only {took:?}");
}
