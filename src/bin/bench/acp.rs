//! `openvaala-bench acp`: what `openvaala acp` adds between the service and an editor. A
//! release server answers with the in-process fake provider's stamped deltas (`<index>;`, one
//! every `--interval-ms`, so the service does not merge them). For each turn an SSE subscriber
//! of the conversation (the direct path) and the bridge's client (this process speaking ACP to
//! `openvaala acp` over pipes) both note when each delta arrives; the bridge's added latency per
//! chunk is the second time minus the first, for the same delta of the same turn. The time from
//! `session/prompt` to the first chunk is compared with the time from `POST …/messages` to the
//! first `item.delta` on the SSE stream, in alternating turns.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::fake_provider::{FakeProvider, Script, SendTimes, monotonic_ns};
use super::server::{ServerProcess, http_client, server_binary};
use super::sse::Parser;
use super::stats::{ms, percentile, verdict};
use super::turns::{FILE_TOOLS, Session, bench_config, post};

#[derive(Args)]
pub struct AcpArgs {
    /// Turns measured per path (after two warm-up turns).
    #[arg(long, default_value_t = 30)]
    turns: usize,
    /// Deltas per reply.
    #[arg(long, default_value_t = 50)]
    deltas: usize,
    /// The provider's wait between two deltas.
    #[arg(long, default_value_t = 5)]
    interval_ms: u64,
}

/// The target for the bridge's added latency per chunk, at p99.
const TARGET: Duration = Duration::from_millis(1);
const TURN_TIMEOUT: Duration = Duration::from_secs(60);

pub fn acp(args: &AcpArgs) -> anyhow::Result<()> {
    if args.turns == 0 || args.deltas == 0 {
        bail!("--turns and --deltas must be at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-acp-{}", uuid::Uuid::now_v7()));
    let data_dir = dir.join("data");
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::create_dir_all(&workspace)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words { deltas: 1 })?;
    let config = dir.join("config.toml");
    fs::write(&config, bench_config(&provider.base_url, "", FILE_TOOLS))?;
    let outcome = (|| {
        let mut running = ServerProcess::start_with_config(&server, &data_dir, &config)?;
        runtime.block_on(running.wait_until_healthy())?;
        let session = Session {
            client: http_client()?,
            base: running.base.clone(),
            workspace: workspace.clone(),
        };
        let measured = runtime.block_on(measure(args, &session, &provider, &server));
        drop(runtime);
        running.stop()?;
        measured
    })();
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    let (added, via_acp, via_http) = outcome?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let p99 = percentile(&added, 0.99);
    let _ = writeln!(
        out,
        "| added latency per chunk, service → bridge → client, median ({} chunks) | {:.3} ms | | |",
        added.len(),
        ms(percentile(&added, 0.5))
    );
    let _ = writeln!(
        out,
        "| added latency per chunk, p99 | {:.3} ms | < {} ms | {} |",
        ms(p99),
        ms(TARGET),
        verdict(p99 < TARGET)
    );
    for (name, samples) in [("session/prompt", &via_acp), ("POST …/messages", &via_http)] {
        let _ = writeln!(
            out,
            "| {name} to the first chunk, median / p99 ({} turns) | {:.2} / {:.2} ms | | |",
            samples.len(),
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.99))
        );
    }
    print!("{out}");
    Ok(())
}

/// An event of either path: when it arrived and what it was.
enum Seen {
    Sse { at: u64, kind: String, data: Value },
    Acp { at: u64, line: Value },
}

async fn measure(
    args: &AcpArgs,
    session: &Session,
    provider: &FakeProvider,
    server: &std::path::Path,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>, Vec<Duration>)> {
    let (seen, mut events) = mpsc::unbounded_channel();
    let mut bridge = tokio::process::Command::new(server)
        .args(["acp", "--url", &session.base])
        .env("OPENVAALA_TOKEN", super::server::bench_token())
        .env("OPENVAALA_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run openvaala acp")?;
    let mut stdin = bridge.stdin.take().context("no stdin")?;
    let mut lines = BufReader::new(bridge.stdout.take().context("no stdout")?).lines();
    let to_main = seen.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let at = monotonic_ns();
            let Ok(line) = serde_json::from_str(&line) else {
                continue;
            };
            if to_main.send(Seen::Acp { at, line }).is_err() {
                return;
            }
        }
    });
    let mut next_id = 0;
    let mut request = async |method: &str, params: Value| -> anyhow::Result<u64> {
        next_id += 1;
        let mut line = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
            .to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await?;
        Ok(next_id)
    };
    let answer = async |events: &mut mpsc::UnboundedReceiver<Seen>, id: u64| {
        loop {
            match tokio::time::timeout(TURN_TIMEOUT, events.recv()).await {
                Ok(Some(Seen::Acp { line, .. })) if line["id"] == id => return Ok(line),
                Ok(Some(_)) => {}
                _ => bail!("no answer to request {id}"),
            }
        }
    };
    let id = request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await?;
    answer(&mut events, id).await?;
    let id = request(
        "session/new",
        json!({"cwd": session.workspace, "mcpServers": []}),
    )
    .await?;
    let created = answer(&mut events, id).await?;
    let acp_session = created["result"]["sessionId"]
        .as_str()
        .context("no session")?
        .to_owned();

    // The first prompt creates the conversation; then the SSE subscriber joins it.
    provider.set_script(Script::Words { deltas: 1 });
    let id = request(
        "session/prompt",
        json!({"sessionId": acp_session, "prompt": [{"type": "text", "text": "warm up"}]}),
    )
    .await?;
    answer(&mut events, id).await?;
    let list: Value = session
        .client
        .get(format!("{}/api/conversations", session.base))
        .send()
        .await?
        .json()
        .await?;
    let conversation = list["conversations"][0]["id"]
        .as_str()
        .context("no conversation")?
        .to_owned();
    let response = openvaala::tls::client_builder()
        .no_proxy()
        .default_headers(super::server::authorized())
        .build()?
        .get(format!(
            "{}/api/conversations/{conversation}/events",
            session.base
        ))
        .send()
        .await?;
    tokio::spawn(async move {
        let mut parser = Parser::default();
        let mut body = response.bytes_stream();
        while let Some(Ok(bytes)) = body.next().await {
            let at = monotonic_ns();
            let mut found = Vec::new();
            parser.feed(&bytes, |event| {
                if let Ok(data) = serde_json::from_slice(event.data) {
                    found.push(Seen::Sse {
                        at,
                        kind: event.kind.to_owned(),
                        data,
                    });
                }
            });
            for event in found {
                if seen.send(event).is_err() {
                    return;
                }
            }
        }
    });

    let mut added = Vec::new();
    let mut via_acp = Vec::new();
    let mut via_http = Vec::new();
    for turn in 0..(args.turns * 2 + 2) {
        let sent = SendTimes::new(args.deltas);
        provider.set_script(Script::Stamped {
            deltas: args.deltas,
            interval: Duration::from_millis(args.interval_ms),
            sent: sent.clone(),
        });
        let through_acp = turn % 2 == 0;
        let started = monotonic_ns();
        let prompt = if through_acp {
            Some(
                request(
                    "session/prompt",
                    json!({"sessionId": acp_session, "prompt": [{"type": "text", "text": "go"}]}),
                )
                .await?,
            )
        } else {
            post(
                session,
                &format!("/api/conversations/{conversation}/messages"),
                &json!({"text": "go"}),
                202,
            )
            .await?;
            None
        };
        // When each delta (by index) reached each path, until both saw the turn end.
        let mut by_sse: HashMap<usize, u64> = HashMap::new();
        let mut by_acp: HashMap<usize, u64> = HashMap::new();
        let (mut sse_done, mut acp_done) = (false, !through_acp);
        while !(sse_done && acp_done && by_acp.len() >= args.deltas) {
            let event = tokio::time::timeout(TURN_TIMEOUT, events.recv())
                .await
                .context("a turn did not end in time")?
                .context("both paths stopped")?;
            match event {
                Seen::Sse { at, kind, data } => match kind.as_str() {
                    "item.delta" => note(&mut by_sse, &data["delta"], at),
                    "turn.ended" => sse_done = true,
                    _ => {}
                },
                Seen::Acp { at, line } => {
                    let update = &line["params"]["update"];
                    if update["sessionUpdate"] == "agent_message_chunk" {
                        note(&mut by_acp, &update["content"]["text"], at);
                    } else if prompt.is_some() && line["id"] == json!(prompt) {
                        acp_done = true;
                    }
                }
            }
        }
        if turn < 2 {
            continue;
        }
        for index in 0..args.deltas {
            if let (Some(direct), Some(bridged)) = (by_sse.get(&index), by_acp.get(&index)) {
                added.push(Duration::from_nanos(bridged.saturating_sub(*direct)));
            }
        }
        let first = |seen: &HashMap<usize, u64>| seen.get(&0).map(|at| at.saturating_sub(started));
        match (through_acp, first(&by_acp), first(&by_sse)) {
            (true, Some(first), _) => via_acp.push(Duration::from_nanos(first)),
            (false, _, Some(first)) => via_http.push(Duration::from_nanos(first)),
            _ => bail!("turn {turn} had no first chunk"),
        }
    }
    Ok((added, via_acp, via_http))
}

/// Notes the arrival of every `<index>;` in a piece of text.
fn note(seen: &mut HashMap<usize, u64>, text: &Value, at: u64) {
    for index in text.as_str().unwrap_or_default().split(';') {
        if let Ok(index) = index.parse() {
            seen.entry(index).or_insert(at);
        }
    }
}
