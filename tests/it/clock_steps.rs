//! The service under a clock that steps by 20 s, forward and back: libfaketime preloaded,
//! its offset read from a file at every clock call, so each step is seen at once (the
//! conversations made after the forward step are dated 20 s ahead). A request whose body, or
//! whose headers, were arriving across the step is answered as usual: nothing answers 400 or
//! 408 for a valid body that keeps coming, and no connection is reset.

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Server, ServerOptions, TIMEOUT};

/// Debian's libfaketime (the `faketime` package, which `.ci/run` installs).
fn libfaketime() -> PathBuf {
    std::fs::read_dir("/usr/lib")
        .unwrap()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists())
        .expect("libfaketime is missing: apt-get install -y faketime (.ci/run does it)")
}

/// Sends the first `sent` bytes of `request` on a new connection.
async fn begin(server: &Server, request: &[u8], sent: usize) -> TcpStream {
    let addr = server.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&request[..sent]).await.unwrap();
    stream
}

/// Sends the rest and reads the answer's status line.
async fn finish(mut stream: TcpStream, rest: &[u8]) -> String {
    stream.write_all(rest).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(TIMEOUT, async {
        let mut buffer = [0; 4096];
        while !answer.windows(2).any(|pair| pair == b"\r\n") {
            let read = stream.read(&mut buffer).await.expect("no reset");
            assert!(read > 0, "the connection was closed with no answer");
            answer.extend_from_slice(&buffer[..read]);
        }
    })
    .await
    .expect("an answer");
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap().to_owned()
}

fn create_request(server: &Server, text: &str) -> Vec<u8> {
    let host = server.base.strip_prefix("http://").unwrap();
    let body = serde_json::json!({ "text": text }).to_string();
    format!(
        "POST /api/conversations HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.token,
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn requests_arriving_across_a_clock_step_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let offset = dir.path().join("faketime");
    std::fs::write(&offset, "+0\n").unwrap();
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[server]\nheader_read_timeout_s = 5\nbody_min_bytes_per_s = 100000\n".to_owned(),
        ),
        env: vec![
            ("LD_PRELOAD".to_owned(), libfaketime().display().to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE".to_owned(),
                offset.display().to_string(),
            ),
            ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
        ],
        ..ServerOptions::default()
    })
    .await;
    for (round, step) in [(1, "+20\n"), (2, "+0\n")] {
        // One request has sent its headers and a third of its body, another part of its
        // headers.
        // 300 KB: many pieces in the middle third, each checked against the minimum rate
        // (100 KB a second, so a few bytes more cannot buy 20 s).
        let padding = "x".repeat(300_000);
        let body_request = create_request(&server, &format!("Across step {round}\n{padding}"));
        let headers_end = body_request
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap()
            + 4;
        let third = (body_request.len() - headers_end) / 3;
        let (first_cut, second_cut) = (headers_end + third, headers_end + 2 * third);
        let mut in_body = begin(&server, &body_request, first_cut).await;
        let header_request = create_request(&server, &format!("Headers across step {round}"));
        let in_headers = begin(&server, &header_request, 40).await;
        // The clock steps 20 s (forward, then back), and the service wakes to it.
        std::fs::write(&offset, step).unwrap();
        let (status, health) = server.get("/api/health").await;
        assert_eq!(status, 200, "{health}");
        // A piece of the body after the step: judged on a stepped clock, 20 s would seem to
        // have passed for a few bytes.
        in_body
            .write_all(&body_request[first_cut..second_cut])
            .await
            .unwrap();
        assert_eq!(
            finish(in_body, &body_request[second_cut..]).await,
            "HTTP/1.1 201 Created",
            "round {round}"
        );
        assert_eq!(
            finish(in_headers, &header_request[40..]).await,
            "HTTP/1.1 201 Created",
            "round {round}"
        );
    }
    let (_, listed) = server.get("/api/conversations").await;
    let conversations = listed["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 4, "{listed}");
    // The steps were real for the service: what it made in the first round is dated 20 s
    // ahead.
    let ahead = conversations
        .iter()
        .find(|conversation| conversation["title"] == "Across step 1")
        .unwrap_or_else(|| panic!("{listed}"));
    let created: chrono::DateTime<chrono::Utc> =
        ahead["created_at"].as_str().unwrap().parse().unwrap();
    let lead = created - chrono::Utc::now();
    assert!(lead > chrono::Duration::seconds(15), "{lead:?}");
}
