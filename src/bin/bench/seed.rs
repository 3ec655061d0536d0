//! `openvaala-bench seed`: how many new conversations a service takes a second. Each is a
//! create with its first message, whose turn the built-in demo model answers at once; it counts
//! when the list's event stream shows it idle again (the answer stored and indexed). Clients
//! send one create after another, each waiting for its conversation's exchange to end. Run
//! against this build and, with `--before`, an older binary, alternating; then each binary once
//! more under `strace` to count the fsyncs of a create and its exchange.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::server::{ServerProcess, http_client, proc_cpu, server_binary};
use super::stats::{median, ms, percentile, verdict};

#[derive(Args)]
pub struct SeedArgs {
    /// Conversations each timed run creates.
    #[arg(long, default_value_t = 1000)]
    conversations: usize,
    /// Concurrent clients of the throughput runs.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Conversations created one at a time (one client) for the latency of one.
    #[arg(long, default_value_t = 100)]
    single: usize,
    /// Runs of each binary (alternating); the median is reported.
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// Conversations of the `strace` run that counts fsyncs (0: no count).
    #[arg(long, default_value_t = 50)]
    counted: usize,
    /// The `openvaala` binary of a build before the change, measured beside this build's.
    #[arg(long)]
    before: Option<PathBuf>,
}

/// The target: new conversations a second with 8 clients.
const TARGET_PER_SECOND: f64 = 500.0;
/// How long one exchange may take before the bench gives up.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One binary's figures.
#[derive(Default)]
struct Figures {
    per_second: Vec<f64>,
    single_ms: Vec<f64>,
    /// The server's CPU time per conversation in the throughput runs (ms).
    cpu_ms: Vec<f64>,
    fsyncs: Option<f64>,
}

pub fn seed(args: &SeedArgs) -> anyhow::Result<()> {
    if args.conversations == 0 || args.clients == 0 || args.runs == 0 {
        bail!("--conversations, --clients and --runs must be at least 1");
    }
    let after = server_binary()?;
    let mut binaries = vec![("after", after)];
    if let Some(before) = &args.before {
        binaries.insert(0, ("before", before.clone()));
    }
    let dir = std::env::temp_dir().join(format!("openvaala-bench-seed-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let outcome = measure(args, &binaries, &dir);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    print!("{}", table(args, &binaries, &outcome?));
    Ok(())
}

fn measure(
    args: &SeedArgs,
    binaries: &[(&str, PathBuf)],
    dir: &Path,
) -> anyhow::Result<Vec<Figures>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut figures: Vec<Figures> = binaries.iter().map(|_| Figures::default()).collect();
    let mut run_number = 0;
    for run in 0..args.runs {
        for (index, (label, binary)) in binaries.iter().enumerate() {
            run_number += 1;
            let data_dir = dir.join(format!("data-{run_number}"));
            fs::create_dir_all(&data_dir)?;
            let (per_second, single, cpu) =
                runtime.block_on(timed_run(args, binary, &data_dir, None))?;
            eprintln!(
                "{label}, run {}: {per_second:.0} conversations/s with {} clients; one at a time {:.2} ms (median)",
                run + 1,
                args.clients,
                ms(single)
            );
            figures[index].per_second.push(per_second);
            figures[index].single_ms.push(ms(single));
            figures[index].cpu_ms.push(ms(cpu));
            // The data directory stays until the end: deleting thousands of files here would
            // slow the next run's creates (ext4 without a journal skips inodes freed in the
            // last minute, reading their table blocks on every allocation).
        }
    }
    if args.counted > 0 {
        for (index, (label, binary)) in binaries.iter().enumerate() {
            let data_dir = dir.join(format!("data-{label}-counted"));
            fs::create_dir_all(&data_dir)?;
            let count_file = dir.join(format!("strace-{label}.txt"));
            runtime.block_on(timed_run(args, binary, &data_dir, Some(&count_file)))?;
            let calls = sync_calls(&count_file)?;
            let per = calls as f64 / args.counted as f64;
            eprintln!(
                "{label}: {calls} fsync/fdatasync calls for {} conversations",
                args.counted
            );
            figures[index].fsyncs = Some(per);
            fs::remove_dir_all(&data_dir)?;
        }
    }
    Ok(figures)
}

/// Starts a server on `data_dir`, warms it up, then measures creates one at a time and with
/// `--clients` clients. With `count_into`, only `--counted` conversations are created, one
/// client after another, under `strace`, which writes its call counts there.
async fn timed_run(
    args: &SeedArgs,
    binary: &Path,
    data_dir: &Path,
    count_into: Option<&Path>,
) -> anyhow::Result<(f64, Duration, Duration)> {
    let mut running = ServerProcess::start(binary, data_dir)?;
    running.wait_until_healthy().await?;
    let client = http_client()?;
    let idle = IdleWatch::start(&client, &running.base).await?;
    for _ in 0..10 {
        exchange(&client, &running.base, &idle).await?;
    }
    if let Some(file) = count_into {
        let mut strace = Command::new("strace")
            .args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
            .arg(file)
            .arg("-p")
            .arg(running.pid().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run strace")?;
        // strace has attached to every thread once a traced call shows in its count; one
        // more exchange (not counted) makes sure of it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        for _ in 0..args.counted {
            exchange(&client, &running.base, &idle).await?;
        }
        let took = started.elapsed();
        // Background work that follows an exchange (index jobs) belongs to it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        // SAFETY: kill(2) with a pid we spawned; SIGINT makes strace detach and write its count.
        unsafe {
            libc::kill(strace.id() as i32, libc::SIGINT);
        }
        strace.wait()?;
        running.stop()?;
        return Ok((
            args.counted as f64 / took.as_secs_f64(),
            Duration::ZERO,
            Duration::ZERO,
        ));
    }
    let mut single = Vec::with_capacity(args.single);
    for _ in 0..args.single {
        let started = Instant::now();
        exchange(&client, &running.base, &idle).await?;
        single.push(started.elapsed());
    }
    let cpu_before = proc_cpu(running.pid())?;
    let started = Instant::now();
    let per_client = args.conversations.div_ceil(args.clients);
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let (client, base, idle) = (client.clone(), running.base.clone(), idle.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_client {
                exchange(&client, &base, &idle).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let created = per_client * args.clients;
    let per_second = created as f64 / started.elapsed().as_secs_f64();
    let cpu = proc_cpu(running.pid())?.saturating_sub(cpu_before) / created as u32;
    running.stop()?;
    Ok((per_second, percentile(&single, 0.5), cpu))
}

/// One new conversation: the create, then the wait until its first turn has ended.
async fn exchange(client: &reqwest::Client, base: &str, idle: &IdleWatch) -> anyhow::Result<()> {
    let response = client
        .post(format!("{base}/api/conversations"))
        .json(&json!({ "text": "Seed a conversation: say hello." }))
        .send()
        .await?;
    let status = response.status();
    let created: Value = response.json().await?;
    if status.as_u16() != 201 {
        bail!("the create answered {status}: {created}");
    }
    let id = created["conversation"]["id"]
        .as_str()
        .with_context(|| format!("no conversation id in {created}"))?;
    idle.wait(id).await
}

/// The list's event stream, read by one task: which conversations have gone idle.
#[derive(Clone)]
struct IdleWatch {
    idle: Arc<Mutex<HashSet<String>>>,
    changed: Arc<Notify>,
    failed: Arc<Mutex<Option<String>>>,
}

impl IdleWatch {
    async fn start(client: &reqwest::Client, base: &str) -> anyhow::Result<IdleWatch> {
        let response = client
            .get(format!("{base}/api/events"))
            .timeout(Duration::from_secs(3600))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("/api/events answered {}", response.status());
        }
        let watch = IdleWatch {
            idle: Arc::default(),
            changed: Arc::default(),
            failed: Arc::default(),
        };
        let reader = watch.clone();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buffer: Vec<u8> = Vec::new();
            let mut statuses: HashMap<String, bool> = HashMap::new();
            while let Some(chunk) = body.next().await {
                let Ok(chunk) = chunk else { break };
                buffer.extend_from_slice(&chunk);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let Some(data) = line.strip_prefix(b"data: ") else {
                        continue;
                    };
                    let Ok(event) = serde_json::from_slice::<Value>(data) else {
                        continue;
                    };
                    if event["type"] != "conversation.updated" {
                        continue;
                    }
                    let conversation = &event["conversation"];
                    let (Some(id), Some(status)) =
                        (conversation["id"].as_str(), conversation["status"].as_str())
                    else {
                        continue;
                    };
                    let is_idle = status == "idle";
                    if is_idle && statuses.insert(id.to_owned(), true) != Some(true) {
                        reader.idle.lock().unwrap().insert(id.to_owned());
                        reader.changed.notify_waiters();
                    }
                }
            }
            *reader.failed.lock().unwrap() = Some("the list's event stream ended".to_owned());
            reader.changed.notify_waiters();
        });
        Ok(watch)
    }

    async fn wait(&self, id: &str) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + EXCHANGE_TIMEOUT;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.idle.lock().unwrap().remove(id) {
                return Ok(());
            }
            if let Some(reason) = self.failed.lock().unwrap().clone() {
                bail!("{reason}");
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                bail!("conversation {id} did not go idle within {EXCHANGE_TIMEOUT:?}");
            }
        }
    }
}

/// The calls counted in an `strace -c` summary.
fn sync_calls(file: &Path) -> anyhow::Result<u64> {
    let summary = fs::read_to_string(file)
        .with_context(|| format!("cannot read the strace count {}", file.display()))?;
    let mut calls = 0;
    for line in summary.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let Some(&name) = fields.last()
            && matches!(name, "fsync" | "fdatasync")
            && fields.len() >= 5
        {
            calls += fields[3].parse::<u64>().unwrap_or(0);
        }
    }
    Ok(calls)
}

fn table(args: &SeedArgs, binaries: &[(&str, PathBuf)], figures: &[Figures]) -> String {
    let mut out = String::new();
    let header: Vec<&str> = binaries.iter().map(|(label, _)| *label).collect();
    let _ = writeln!(
        out,
        "| Measurement | {} | Target |\n|---|{}---|",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    let row = |values: Vec<String>| values.join(" | ");
    let throughput: Vec<String> = figures
        .iter()
        .map(|f| {
            let runs: Vec<String> = f.per_second.iter().map(|v| format!("{v:.0}")).collect();
            format!("{:.0}/s (runs: {})", median(&f.per_second), runs.join(", "))
        })
        .collect();
    let met = figures
        .last()
        .is_some_and(|f| median(&f.per_second) >= TARGET_PER_SECOND);
    let _ = writeln!(
        out,
        "| new conversations (create + its exchange), {} clients, {} each run: median of {} | {} | ≥ {TARGET_PER_SECOND:.0}/s ({}) |",
        args.clients,
        args.conversations,
        args.runs,
        row(throughput),
        verdict(met)
    );
    let single: Vec<String> = figures
        .iter()
        .map(|f| format!("{:.2} ms", median(&f.single_ms)))
        .collect();
    let _ = writeln!(
        out,
        "| one at a time: create → idle, median of {} (median of runs) | {} | unchanged |",
        args.single,
        row(single)
    );
    let cpu: Vec<String> = figures
        .iter()
        .map(|f| format!("{:.2} ms", median(&f.cpu_ms)))
        .collect();
    let _ = writeln!(
        out,
        "| the server's CPU time per conversation, {} clients (median of runs) | {} | |",
        args.clients,
        row(cpu)
    );
    if args.counted > 0 {
        let fsyncs: Vec<String> = figures
            .iter()
            .map(|f| f.fsyncs.map_or("-".to_owned(), |v| format!("{v:.1}")))
            .collect();
        let _ = writeln!(
            out,
            "| fsync + fdatasync calls per conversation (strace, {} one at a time) | {} | |",
            args.counted,
            row(fsyncs)
        );
    }
    out
}
