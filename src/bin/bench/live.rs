//! `openvaala-bench live`: many conversations touched in a short time, in bounded memory and
//! open files.
//! Clients create conversations at a steady pace (each create starts a turn with the built-in
//! model), then send a message to a sample of the older ones, which must be loaded from disk
//! again. Meanwhile the bench samples the server's resident memory, its open files and its
//! live conversations; afterwards it waits until every conversation has left memory and
//! measures again. The cap on live conversations is the server's own (derived from its
//! open-file limit, `/api/health` shows it).

use std::fmt::Write as _;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use super::server::{
    ServerProcess, http_client, proc_status_kb, raise_open_file_limit, server_binary,
};
use super::stats::{mb, ms, percentile, thousands, verdict};

#[derive(Args)]
pub struct LiveArgs {
    /// Conversations created, one request each.
    #[arg(long, default_value_t = 10_000)]
    conversations: usize,
    /// The time over which the creates are spread (a steady pace).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Older conversations sent a message afterwards (each is loaded from disk again).
    #[arg(long, default_value_t = 2_000)]
    retouch: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// The server's `idle_unload_s`: how long after the load its conversations leave memory.
    #[arg(long, default_value_t = 10)]
    idle_unload_s: u64,
    /// Keep the data directory (its path is printed) instead of removing it.
    #[arg(long)]
    keep: bool,
}

/// The targets: memory under 256 MB while at the cap, open files under the limit,
/// and back close to idle afterwards: at least this share of what the load added given back.
const RSS_TARGET_MB: f64 = 256.0;
const GIVEN_BACK: f64 = 0.85;
/// How often the server's memory, files and live conversations are read during the load.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// One reading of the server.
#[derive(Clone, Copy, Default)]
struct Sample {
    rss_kb: u64,
    open_files: u64,
    live: u64,
}

/// What one phase of requests gave.
#[derive(Default)]
struct Phase {
    took: Duration,
    latencies: Vec<Duration>,
    /// Answers by status; transport failures under 0.
    statuses: std::collections::BTreeMap<u16, usize>,
}

struct Results {
    open_file_limit: u64,
    cap: u64,
    idle: Sample,
    create: Phase,
    retouch: Phase,
    peak: Sample,
    /// Live conversations when the creates ended.
    live_at_end: u64,
    after: Sample,
    after_wait: Duration,
}

pub fn live(args: &LiveArgs) -> anyhow::Result<()> {
    if args.conversations == 0 || args.clients == 0 || args.seconds == 0 {
        bail!("--conversations, --clients and --seconds must be at least 1");
    }
    let server = server_binary()?;
    // The bench's own connections need files; the server raises its own limit anyway.
    raise_open_file_limit(65_536)?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-live-{}", uuid::Uuid::now_v7()));
    let data_dir = dir.join("data");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = dir.join("config.toml");
    fs::write(
        &config,
        format!("[server]\nidle_unload_s = {}\n", args.idle_unload_s),
    )?;
    eprintln!("data directory: {}", data_dir.display());
    let http = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = http.block_on(measure(args, &server, &data_dir, &config));
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    print!("{}", results_table(&outcome?, args));
    Ok(())
}

async fn measure(
    args: &LiveArgs,
    server: &std::path::Path,
    data_dir: &std::path::Path,
    config: &std::path::Path,
) -> anyhow::Result<Results> {
    let mut running = ServerProcess::start_with_config(server, data_dir, config)?;
    running.wait_until_healthy().await?;
    let client = http_client()?;
    let base = running.base.clone();
    let pid = running.pid();
    let cap = health(&client, &base).await?["max_live_conversations"]
        .as_u64()
        .unwrap_or(0);
    let open_file_limit = open_file_limit(pid)?;
    // Idle is measured once one conversation has come and gone: the first one loads what the
    // service keeps for good (the tokenizers' tables, about 48 MB), whatever the load.
    eprintln!("warming up: one conversation, until it leaves memory");
    client
        .post(format!("{base}/api/conversations"))
        .json(&json!({ "text": "warm-up" }))
        .send()
        .await?;
    wait_until_unloaded(&client, &base, args.idle_unload_s).await?;
    let idle = sample(pid, &client, &base).await?;
    eprintln!(
        "idle: {:.1} MB, {} open files; cap {cap} live conversations, open-file limit {open_file_limit}",
        mb(idle.rss_kb),
        idle.open_files
    );

    // A sampler reads the server until the load is over.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (client, base, done) = (client.clone(), base.clone(), done.clone());
        async move {
            let mut peak = Sample::default();
            while !done.load(Ordering::Relaxed) {
                if let Ok(now) = sample(pid, &client, &base).await {
                    peak.rss_kb = peak.rss_kb.max(now.rss_kb);
                    peak.open_files = peak.open_files.max(now.open_files);
                    peak.live = peak.live.max(now.live);
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            peak
        }
    });

    let pace = Duration::from_secs(args.seconds).div_f64(args.conversations as f64);
    let creates: Vec<Request> = (0..args.conversations)
        .map(|n| Request {
            path: "/api/conversations".to_owned(),
            body: json!({ "text": format!("conversation {n}: hello") }),
        })
        .collect();
    eprintln!(
        "creating {} conversations over {} s with {} clients",
        thousands(args.conversations as u64),
        args.seconds,
        args.clients
    );
    let (create, created) = run_phase(&client, &base, creates, pace, args.clients).await;
    let live_at_end = health(&client, &base).await?["live_conversations"]
        .as_u64()
        .unwrap_or(0);
    // The oldest conversations left memory first: messages to them load each again.
    let retouches: Vec<Request> = created
        .iter()
        .take(args.retouch)
        .map(|id| Request {
            path: format!("/api/conversations/{id}/messages"),
            body: json!({ "text": "and again", "mode": "queue" }),
        })
        .collect();
    eprintln!(
        "sending a message to {} of the oldest",
        thousands(retouches.len() as u64)
    );
    let (retouch, _) = run_phase(&client, &base, retouches, pace, args.clients).await;
    done.store(true, Ordering::Relaxed);
    let peak = sampler.await?;

    // Afterwards: every conversation leaves memory once idle; then the server is measured.
    eprintln!("waiting for every conversation to leave memory");
    let waited = Instant::now();
    wait_until_unloaded(&client, &base, args.idle_unload_s).await?;
    let after_wait = waited.elapsed();
    let after = sample(pid, &client, &base).await?;
    running.stop()?;
    Ok(Results {
        open_file_limit,
        cap,
        idle,
        create,
        retouch,
        peak,
        live_at_end,
        after,
        after_wait,
    })
}

struct Request {
    path: String,
    body: Value,
}

/// Sends the requests from `clients` tasks, the n-th not before n × `pace` from the start;
/// returns what they gave and the ids of the conversations created, in request order.
async fn run_phase(
    client: &reqwest::Client,
    base: &str,
    requests: Vec<Request>,
    pace: Duration,
    clients: usize,
) -> (Phase, Vec<String>) {
    let count = requests.len();
    let queue = Arc::new(std::sync::Mutex::new(
        requests.into_iter().enumerate().collect::<Vec<_>>(),
    ));
    queue.lock().expect("queue").reverse();
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, base, queue) = (client.clone(), base.to_owned(), queue.clone());
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            loop {
                let next = queue.lock().expect("queue").pop();
                let Some((n, request)) = next else {
                    return answers;
                };
                tokio::time::sleep_until(started + pace * n as u32).await;
                let sent = Instant::now();
                let answer = client
                    .post(format!("{base}{}", request.path))
                    .json(&request.body)
                    .send()
                    .await;
                let (status, id) = match answer {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        let id = body["conversation"]["id"].as_str().map(str::to_owned);
                        (status, id)
                    }
                    Err(_) => (0, None),
                };
                answers.push((n, sent.elapsed(), status, id));
            }
        }));
    }
    let mut phase = Phase::default();
    let mut created = vec![None; count];
    for task in tasks {
        for (n, latency, status, id) in task.await.unwrap_or_default() {
            phase.latencies.push(latency);
            *phase.statuses.entry(status).or_default() += 1;
            created[n] = id;
        }
    }
    phase.took = started.elapsed();
    (phase, created.into_iter().flatten().collect())
}

/// Waits until no conversation is in memory and no index work is pending, then a second more:
/// the last one to leave hands freed memory back to the system just after.
pub(super) async fn wait_until_unloaded(
    client: &reqwest::Client,
    base: &str,
    idle_unload_s: u64,
) -> anyhow::Result<()> {
    let waited = Instant::now();
    let limit = Duration::from_secs(idle_unload_s * 3 + 60);
    loop {
        let now = health(client, base).await?;
        if now["live_conversations"] == 0 && now["index_jobs_pending"] == 0 {
            break;
        }
        if waited.elapsed() > limit {
            bail!("conversations were still in memory after {limit:?}: {now}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

async fn health(client: &reqwest::Client, base: &str) -> anyhow::Result<Value> {
    Ok(client
        .get(format!("{base}/api/health"))
        .send()
        .await?
        .json()
        .await?)
}

async fn sample(pid: u32, client: &reqwest::Client, base: &str) -> anyhow::Result<Sample> {
    let live = health(client, base).await?["live_conversations"]
        .as_u64()
        .unwrap_or(0);
    Ok(Sample {
        rss_kb: proc_status_kb(pid, "VmRSS")?,
        open_files: fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64,
        live,
    })
}

/// The soft open-file limit of a process, from `/proc/<pid>/limits`.
fn open_file_limit(pid: u32) -> anyhow::Result<u64> {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits"))?;
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .context("no open-file limit in /proc/<pid>/limits")
}

fn phase_line(out: &mut String, name: &str, phase: &Phase) {
    let answered = phase.latencies.len();
    let ok: usize = phase
        .statuses
        .iter()
        .filter(|(status, _)| (200..300).contains(*status))
        .map(|(_, count)| count)
        .sum();
    let others: Vec<String> = phase
        .statuses
        .iter()
        .filter(|(status, _)| !(200..300).contains(*status))
        .map(|(status, count)| format!("{count} × {status}"))
        .collect();
    let _ = writeln!(
        out,
        "| {name} | {} in {:.1} s ({:.0}/s) | {:.1} ms | {:.1} ms | {} ok{} |",
        thousands(answered as u64),
        phase.took.as_secs_f64(),
        answered as f64 / phase.took.as_secs_f64().max(1e-9),
        ms(percentile(&phase.latencies, 0.5)),
        ms(percentile(&phase.latencies, 0.99)),
        thousands(ok as u64),
        if others.is_empty() {
            String::new()
        } else {
            format!(", {}", others.join(", "))
        }
    );
}

fn results_table(results: &Results, args: &LiveArgs) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### live: {} conversations over {} s, {} clients\n",
        thousands(args.conversations as u64),
        args.seconds,
        args.clients
    );
    let _ = writeln!(out, "| phase | requests | p50 | p99 | answers |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    phase_line(&mut out, "create", &results.create);
    if !results.retouch.latencies.is_empty() {
        phase_line(&mut out, "message to an older one", &results.retouch);
    }
    let peak_mb = mb(results.peak.rss_kb);
    let after_mb = mb(results.after.rss_kb);
    let idle_mb = mb(results.idle.rss_kb);
    let _ = writeln!(out, "\n| measure | value | target |");
    let _ = writeln!(out, "|---|---|---|");
    let _ = writeln!(
        out,
        "| live conversations at the peak / when the creates ended | {} / {} (cap {}) | at most the cap: {} |",
        results.peak.live,
        results.live_at_end,
        results.cap,
        verdict(results.peak.live <= results.cap)
    );
    let given_back = (peak_mb - after_mb) / (peak_mb - idle_mb).max(1e-9);
    let _ = writeln!(
        out,
        "| resident memory: idle (after one conversation) → peak → after | {idle_mb:.1} → {peak_mb:.1} → {after_mb:.1} MB ({:.0} % of the growth given back) | peak under {RSS_TARGET_MB:.0} MB: {}; at least {:.0} % given back: {} |",
        given_back * 100.0,
        verdict(peak_mb < RSS_TARGET_MB),
        GIVEN_BACK * 100.0,
        verdict(given_back >= GIVEN_BACK)
    );
    let _ = writeln!(
        out,
        "| open files: idle → peak → after | {} → {} → {} (limit {}) | under the limit: {} |",
        results.idle.open_files,
        results.peak.open_files,
        results.after.open_files,
        results.open_file_limit,
        verdict(results.peak.open_files < results.open_file_limit)
    );
    let _ = writeln!(
        out,
        "| time until every conversation left memory | {:.1} s (idle_unload_s = {}) | |",
        results.after_wait.as_secs_f64(),
        args.idle_unload_s
    );
    out
}
