//! `openvaala-bench cluster`: what cluster mode costs and how fast it recovers, against a real
//! PostgreSQL server the bench starts (`postgres.rs`). Three numbers:
//! - a forwarded request against a direct one (the same `GET` of a conversation, sent to its
//!   owner and to another instance, interleaved);
//! - the runtime's time per turn on a cluster instance against an embedded service;
//! - the time from `kill -9` of a conversation's owner to that conversation answering 200
//!   from another instance;
//! - the cost of the write fence per append (`fence.rs`).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use super::fake_provider::{FakeProvider, Script};
use super::server::{ServerProcess, http_client, server_binary};
use super::stats::{ms, percentile, verdict};
use super::subagents::{TurnCounts, turn_overheads};
use super::turns::{FILE_TOOLS, Session, bench_config, create_conversation};
use openvaala::testkit::postgres::Postgres;

#[derive(Args)]
pub struct ClusterArgs {
    /// Requests of each kind (direct, forwarded), interleaved.
    #[arg(long, default_value_t = 500)]
    requests: usize,
    /// Timed turns in each mode, after the warm-up turns.
    #[arg(long, default_value_t = 100)]
    turns: usize,
    #[arg(long, default_value_t = 10)]
    warmups: usize,
    #[arg(long, default_value_t = 200)]
    reply_tokens: usize,
    /// The lease of the failover measurement, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Failovers measured.
    #[arg(long, default_value_t = 5)]
    failovers: usize,
}

struct Results {
    direct: Vec<Duration>,
    forwarded: Vec<Duration>,
    embedded_turns: Vec<Duration>,
    cluster_turns: Vec<Duration>,
    lease: Duration,
    failovers: Vec<Duration>,
    fenced_appends: Vec<Duration>,
    plain_appends: Vec<Duration>,
}

pub fn cluster(args: &ClusterArgs) -> anyhow::Result<()> {
    if args.requests == 0 || args.turns == 0 || args.failovers == 0 {
        bail!("--requests, --turns and --failovers must be at least 1");
    }
    let server = server_binary()?;
    let dir =
        std::env::temp_dir().join(format!("openvaala-bench-cluster-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(dir.join("workspace"))?;
    let outcome = run(args, &server, &dir);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    print!("{}", table(&outcome?));
    Ok(())
}

fn run(args: &ClusterArgs, server: &Path, dir: &Path) -> anyhow::Result<Results> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words {
        deltas: args.reply_tokens,
    })?;
    let postgres = Postgres::start();
    let counts = TurnCounts {
        warmups: args.warmups,
        turns: args.turns,
        reply_tokens: args.reply_tokens,
    };
    let workspace = dir.join("workspace");
    runtime.block_on(async {
        // Embedded first, then a cluster of two over the same kind of provider.
        let embedded_dir = dir.join("embedded");
        fs::create_dir_all(&embedded_dir)?;
        let config = dir.join("embedded.toml");
        fs::write(&config, config_file(&provider.base_url, None))?;
        let mut embedded = ServerProcess::start_with_config(server, &embedded_dir, &config)?;
        embedded.wait_until_healthy().await?;
        eprintln!("embedded: {} turns…", args.warmups + args.turns);
        let embedded_turns =
            turn_overheads(&session(&embedded, &workspace)?, &provider, &counts, None).await?;
        embedded.stop()?;

        let shared = dir.join("shared");
        fs::create_dir_all(&shared)?;
        let config = dir.join("cluster.toml");
        fs::write(
            &config,
            config_file(&provider.base_url, Some((&postgres.url(), args.lease_ms))),
        )?;
        let mut a = ServerProcess::start_with_config(server, &shared, &config)?;
        a.wait_until_healthy().await?;
        let mut b = ServerProcess::start_with_config(server, &shared, &config)?;
        b.wait_until_healthy().await?;
        eprintln!("cluster: {} turns…", args.warmups + args.turns);
        let cluster_turns =
            turn_overheads(&session(&a, &workspace)?, &provider, &counts, None).await?;

        eprintln!(
            "{} direct and {} forwarded requests…",
            args.requests, args.requests
        );
        let id = create_conversation(&session(&a, &workspace)?).await?;
        let client = http_client()?;
        let (mut direct, mut forwarded) = (Vec::new(), Vec::new());
        for round in 0..args.requests + 20 {
            let owner = timed_get(&client, &a.base, &id).await?;
            let other = timed_get(&client, &b.base, &id).await?;
            // The first rounds open connections and warm caches on both paths.
            if round >= 20 {
                direct.push(owner);
                forwarded.push(other);
            }
        }

        eprintln!("{} failovers…", args.failovers);
        let mut failovers = Vec::new();
        let (mut owner, mut other) = (a, b);
        for _ in 0..args.failovers {
            let id = create_conversation(&session(&owner, &workspace)?).await?;
            let killed = Instant::now();
            owner.kill9();
            loop {
                let status = client
                    .get(format!("{}/api/conversations/{id}", other.base))
                    .send()
                    .await?
                    .status();
                if status == reqwest::StatusCode::OK {
                    break;
                }
                if killed.elapsed() > Duration::from_millis(args.lease_ms) * 10 {
                    bail!("no takeover within ten leases (last answer {status})");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            failovers.push(killed.elapsed());
            // A fresh instance takes the dead one's place, for the next round.
            let mut fresh = ServerProcess::start_with_config(server, &shared, &config)?;
            fresh.wait_until_healthy().await?;
            (owner, other) = (other, fresh);
        }
        drop(owner);
        drop(other);
        eprintln!(
            "{} fenced and {} plain appends…",
            args.requests, args.requests
        );
        let (fenced_appends, plain_appends) =
            super::fence::fence_costs(&postgres.url(), dir, args.requests, 20).await?;
        Ok(Results {
            direct,
            forwarded,
            embedded_turns,
            cluster_turns,
            lease: Duration::from_millis(args.lease_ms),
            failovers,
            fenced_appends,
            plain_appends,
        })
    })
}

fn session(server: &ServerProcess, workspace: &Path) -> anyhow::Result<Session> {
    Ok(Session {
        client: http_client()?,
        base: server.base.clone(),
        workspace: workspace.to_owned(),
    })
}

async fn timed_get(client: &reqwest::Client, base: &str, id: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let response = client
        .get(format!("{base}/api/conversations/{id}"))
        .send()
        .await?;
    let status = response.status();
    response.bytes().await?;
    if status != reqwest::StatusCode::OK {
        bail!("GET answered {status}");
    }
    Ok(started.elapsed())
}

fn config_file(base_url: &str, cluster: Option<(&str, u64)>) -> String {
    let cluster = cluster.map_or(String::new(), |(url, lease_ms)| {
        format!("[cluster]\ndatabase_url = \"{url}\"\nlease_ms = {lease_ms}\n\n")
    });
    bench_config(base_url, &cluster, FILE_TOOLS)
}

fn table(results: &Results) -> String {
    let mut out = String::new();
    let median = |samples: &[Duration]| percentile(samples, 0.50);
    let added = median(&results.forwarded).saturating_sub(median(&results.direct));
    let ratio =
        ms(median(&results.cluster_turns)) / ms(median(&results.embedded_turns)).max(f64::EPSILON);
    let _ = writeln!(out, "\n## Cluster benchmark\n");
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    let _ = writeln!(
        out,
        "| GET of a conversation from its owner, median of {} (p90) | {:.3} ms ({:.3} ms) | | |",
        results.direct.len(),
        ms(median(&results.direct)),
        ms(percentile(&results.direct, 0.90))
    );
    let _ = writeln!(
        out,
        "| the same through another instance (forwarded), median (p90) | {:.3} ms ({:.3} ms) | | |",
        ms(median(&results.forwarded)),
        ms(percentile(&results.forwarded, 0.90))
    );
    let _ = writeln!(
        out,
        "| cost a forwarded request adds, difference of the medians | {:.3} ms | < 1 ms | {} |",
        ms(added),
        verdict(added < Duration::from_millis(1))
    );
    let _ = writeln!(
        out,
        "| runtime overhead per turn, embedded, median of {} (p90) | {:.2} ms ({:.2} ms) | | |",
        results.embedded_turns.len(),
        ms(median(&results.embedded_turns)),
        ms(percentile(&results.embedded_turns, 0.90))
    );
    let _ = writeln!(
        out,
        "| runtime overhead per turn, cluster instance, median of {} (p90) | {:.2} ms ({:.2} ms) | | |",
        results.cluster_turns.len(),
        ms(median(&results.cluster_turns)),
        ms(percentile(&results.cluster_turns, 0.90))
    );
    let _ = writeln!(
        out,
        "| cluster / embedded turn overhead | {ratio:.2}× | ≤ 1.5× | {} |",
        verdict(ratio <= 1.5)
    );
    let _ = writeln!(
        out,
        "| kill -9 of the owner → its conversation answers 200 from another instance, lease {:.1} s: median of {} (max) | {:.2} s ({:.2} s) | lease + 2 s | {} |",
        results.lease.as_secs_f64(),
        results.failovers.len(),
        median(&results.failovers).as_secs_f64(),
        results
            .failovers
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
            .as_secs_f64(),
        verdict(median(&results.failovers) < results.lease + Duration::from_secs(2))
    );
    let _ = writeln!(
        out,
        "| one-record append, plain (write + fsync), median of {} (p90) | {:.3} ms ({:.3} ms) | | |",
        results.plain_appends.len(),
        ms(median(&results.plain_appends)),
        ms(percentile(&results.plain_appends, 0.90))
    );
    let _ = writeln!(
        out,
        "| the same append fenced (+ PostgreSQL's acceptance), median (p90) | {:.3} ms ({:.3} ms) | | |",
        ms(median(&results.fenced_appends)),
        ms(percentile(&results.fenced_appends, 0.90))
    );
    let _ = writeln!(
        out,
        "| cost of the fence per write, difference of the medians | {:.3} ms | | |",
        ms(median(&results.fenced_appends).saturating_sub(median(&results.plain_appends)))
    );
    out
}
