//! `openvaala-bench meter`: what the usage meter costs the service. The resident memory after
//! the first turn (the meter's first count builds its encoding), with the built-in demo model
//! and with an OpenAI-named model (`gpt-4o`, answered by the fake provider); and the latency of
//! `GET /api/health` while a conversation is created with a 15 MB message of one repeated
//! character (the worst case of a byte-pair encoder), which must not hold up other requests.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use super::fake_provider::{FakeProvider, Script};
use super::server::{ServerProcess, http_client, proc_status_kb, server_binary};
use super::stats::{mb, percentile, verdict};

#[derive(Args)]
pub struct MeterArgs {
    /// Megabytes of the big message.
    #[arg(long, default_value_t = 15)]
    message_mb: usize,
}

/// The target for resident memory after the first turn.
const RSS_TARGET_MIB: f64 = 25.0;
/// The target for the 99th percentile of `/api/health` during the big create.
const HEALTH_P99_TARGET: Duration = Duration::from_millis(50);
/// How often the turn's end is polled for.
const POLL: Duration = Duration::from_millis(5);

pub fn meter(args: &MeterArgs) -> anyhow::Result<()> {
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-meter-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let outcome = measure(args, &server, &dir);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    print!("{}", outcome?);
    Ok(())
}

fn measure(args: &MeterArgs, server: &Path, dir: &Path) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words { deltas: 20 })?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    for (label, config) in [
        ("the built-in demo model", None),
        (
            "an OpenAI-named model (`gpt-4o`)",
            Some(openai_config(&provider.base_url)),
        ),
    ] {
        let data_dir = dir.join(format!("data-{}", config.is_some()));
        fs::create_dir_all(&data_dir)?;
        let (started_kb, after_turn) =
            runtime.block_on(first_turn(server, &data_dir, config.as_deref(), dir))?;
        let after = mb(after_turn.total);
        let _ = writeln!(
            out,
            "| resident memory after the first turn, {label} (after start: {:.1} MiB) | {after:.1} MiB | ≤ {RSS_TARGET_MIB} MiB | {} |",
            mb(started_kb),
            verdict(after <= RSS_TARGET_MIB),
        );
    }
    let data_dir = dir.join("data-big");
    fs::create_dir_all(&data_dir)?;
    let (samples, create_time) =
        runtime.block_on(health_during_big_create(server, &data_dir, args.message_mb))?;
    let p99 = percentile(&samples, 0.99);
    let _ = writeln!(
        out,
        "| `/api/health` while a {} MB message is created ({} answers in {:.0} ms): p50 / p99 / max | {:.1} / {:.1} / {:.1} ms | p99 < {} ms | {} |",
        args.message_mb,
        samples.len(),
        create_time.as_secs_f64() * 1e3,
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        samples
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
            * 1e3,
        HEALTH_P99_TARGET.as_millis(),
        verdict(p99 < HEALTH_P99_TARGET),
    );
    Ok(out)
}

/// A config whose default agent uses `gpt-4o` at the fake provider.
pub(super) fn openai_config(base_url: &str) -> String {
    format!(
        r#"default_agent = "default"

[providers.fake]
protocol = "openai_chat"
base_url = "{base_url}"

[models.gpt]
provider = "fake"
name = "gpt-4o"
context_window = 128000
max_output_tokens = 16000

[agents.default]
description = "benchmark agent"
model = "gpt"
"#
    )
}

/// A server's resident memory (KiB): all of it (`VmRSS`), and its anonymous part (the heap,
/// stacks, the encoder's tables) and file pages (mostly the binary's own code and constants).
pub(super) struct Resident {
    pub total: u64,
    pub anon: u64,
    pub file: u64,
}

impl Resident {
    fn of(server: &ServerProcess) -> anyhow::Result<Resident> {
        Ok(Resident {
            total: server.rss_kb()?,
            anon: proc_status_kb(server.pid(), "RssAnon")?,
            file: proc_status_kb(server.pid(), "RssFile")?,
        })
    }
}

/// Starts a server, runs one turn and returns its resident memory after the start (KiB) and
/// after the turn.
pub(super) async fn first_turn(
    server: &Path,
    data_dir: &Path,
    config: Option<&str>,
    dir: &Path,
) -> anyhow::Result<(u64, Resident)> {
    let (started, after, _) = first_turn_then(server, data_dir, config, dir, false).await?;
    Ok((started, after))
}

/// `first_turn`, and with `until_unloaded` also the resident memory once the conversation
/// has left memory (`idle_unload_s` is set to 2 for that) and the service has handed back
/// what it freed.
pub(super) async fn first_turn_then(
    server: &Path,
    data_dir: &Path,
    config: Option<&str>,
    dir: &Path,
    until_unloaded: bool,
) -> anyhow::Result<(u64, Resident, Option<Resident>)> {
    let config = match (config, until_unloaded) {
        (config, true) => Some(format!(
            "{}\n[server]\nidle_unload_s = 2\n",
            config.unwrap_or("")
        )),
        (config, false) => config.map(str::to_owned),
    };
    let config = config.as_deref();
    let mut running = match config {
        Some(config) => {
            let path = dir.join("meter-config.toml");
            fs::write(&path, config)?;
            ServerProcess::start_with_config(server, data_dir, &path)?
        }
        None => ServerProcess::start(server, data_dir)?,
    };
    running.wait_until_healthy().await?;
    let started = running.rss_kb()?;
    let client = http_client()?;
    let created: Value = client
        .post(format!("{}/api/conversations", running.base))
        .json(&json!({ "text": "Summarise what a context window is in two sentences." }))
        .send()
        .await?
        .json()
        .await?;
    let id = created["conversation"]["id"]
        .as_str()
        .with_context(|| format!("unexpected create answer: {created}"))?
        .to_owned();
    wait_idle(&client, &running.base, &id).await?;
    let after = Resident::of(&running)?;
    let unloaded = if until_unloaded {
        Some(once_unloaded(&client, &running).await?)
    } else {
        None
    };
    running.stop()?;
    Ok((started, after, unloaded))
}

/// The server's resident memory once no conversation is live and its memory has settled
/// (three readings 100 ms apart within 64 KiB of each other: the service hands memory back
/// just after the last conversation leaves).
async fn once_unloaded(
    client: &reqwest::Client,
    running: &ServerProcess,
) -> anyhow::Result<Resident> {
    super::live::wait_until_unloaded(client, &running.base, 2).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut readings = vec![Resident::of(running)?];
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        readings.push(Resident::of(running)?);
        if let [.., a, b, c] = readings.as_slice()
            && a.total.abs_diff(b.total) <= 64
            && b.total.abs_diff(c.total) <= 64
        {
            break;
        }
    }
    Ok(readings.pop().expect("one reading at least"))
}

/// Polls a conversation until its turn has ended.
async fn wait_idle(client: &reqwest::Client, base: &str, id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let view: Value = client
            .get(format!("{base}/api/conversations/{id}"))
            .send()
            .await?
            .json()
            .await?;
        if view["status"] == "idle" || view["conversation"]["status"] == "idle" {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
    bail!("the turn of {id} did not end")
}

/// Creates a conversation with a message of `megabytes` of one character and, until its
/// answer arrives, asks `/api/health` one request after another; returns their latencies and
/// how long the create took.
async fn health_during_big_create(
    server: &Path,
    data_dir: &Path,
    megabytes: usize,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let mut running = ServerProcess::start(server, data_dir)?;
    running.wait_until_healthy().await?;
    let client = http_client()?;
    let url = format!("{}/api/conversations", running.base);
    // Encoded before the clock starts: the client's own work is not what is measured.
    let body = serde_json::to_vec(&json!({ "text": "a".repeat(megabytes * 1024 * 1024) }))?;
    let started = Instant::now();
    let create = {
        let client = client.clone();
        tokio::spawn(async move {
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            anyhow::Ok((response.status(), started.elapsed()))
        })
    };
    let health = format!("{}/api/health", running.base);
    let mut samples = Vec::new();
    while !create.is_finished() {
        let asked = Instant::now();
        let status = client.get(&health).send().await?.status();
        if status != reqwest::StatusCode::OK {
            bail!("/api/health answered {status}");
        }
        if !create.is_finished() {
            samples.push(asked.elapsed());
        }
    }
    let (status, create_time) = create.await??;
    if status != reqwest::StatusCode::CREATED {
        bail!("the big create answered {status}");
    }
    running.stop()?;
    if samples.is_empty() {
        bail!("no health answer arrived while the create ran");
    }
    Ok((samples, create_time))
}
