//! `openvaala-bench burst`: a burst of deltas fanned out to many SSE subscribers: `--deltas`
//! stamped deltas sent at once to a conversation with `--subscribers` subscribers, each
//! delta's delivery latency (received by a subscriber − sent by the provider) over every
//! (subscriber, delta) pair. The fan-out itself is `turns`' (`turns::fan_out`); this runs it
//! `--runs` times against this build and, with `--before`, an older binary, alternating.

use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::fake_provider::{FakeProvider, Script};
use super::server::{ServerProcess, http_client, raise_open_file_limit, server_binary};
use super::stats::{median, percentile_us, verdict};
use super::turns::{Session, TurnsArgs, config_file, fan_out};

#[derive(Args)]
pub struct BurstArgs {
    /// SSE subscribers of the conversation.
    #[arg(long, default_value_t = 200)]
    subscribers: usize,
    /// Deltas sent at once.
    #[arg(long, default_value_t = 2000)]
    deltas: usize,
    /// Runs of each binary (alternating).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The `openvaala` binary of a build before the change, measured beside this build's.
    #[arg(long)]
    before: Option<PathBuf>,
}

/// The target for the p99 delivery latency at 200 subscribers.
const TARGET_P99_MS: f64 = 100.0;

/// One run: p50 and p99 (ms), server CPU (s), and the median `item.delta` events a subscriber got.
struct Run {
    p50: f64,
    p99: f64,
    server_cpu: f64,
    events: usize,
}

pub fn burst(args: &BurstArgs) -> anyhow::Result<()> {
    let mut binaries = vec![("after", server_binary()?)];
    if let Some(before) = &args.before {
        binaries.insert(0, ("before", before.clone()));
    }
    raise_open_file_limit(args.subscribers as u64 * 2 + 1024)?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-burst-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut runs: Vec<Vec<Run>> = binaries.iter().map(|_| Vec::new()).collect();
    let mut outcome = Ok(());
    'runs: for run in 0..args.runs {
        for (index, (label, binary)) in binaries.iter().enumerate() {
            match one_run(args, binary, &dir) {
                Ok(measured) => {
                    eprintln!(
                        "{label}, run {}: p50 {:.1} ms, p99 {:.1} ms",
                        run + 1,
                        measured.p50,
                        measured.p99
                    );
                    runs[index].push(measured);
                }
                Err(error) => {
                    outcome = Err(error);
                    break 'runs;
                }
            }
        }
    }
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    outcome?;
    print!("{}", table(args, &binaries, &runs));
    Ok(())
}

fn one_run(
    args: &BurstArgs,
    binary: &std::path::Path,
    dir: &std::path::Path,
) -> anyhow::Result<Run> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words { deltas: 1 })?;
    let data_dir = dir.join(format!("data-{}", uuid::Uuid::now_v7()));
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir)?;
    fs::create_dir_all(&workspace)?;
    let config = dir.join("config.toml");
    fs::write(&config, config_file(&provider.base_url))?;
    let mut running = ServerProcess::start_with_config(binary, &data_dir, &config)?;
    runtime.block_on(running.wait_until_healthy())?;
    let session = Session {
        client: http_client()?,
        base: running.base.clone(),
        workspace,
    };
    let turns_args = TurnsArgs {
        turns: 1,
        warmups: 0,
        reply_tokens: 1,
        subscribers: args.subscribers,
        fanout_deltas: args.deltas,
        paced_us: Vec::new(),
        keep: false,
    };
    let fanout = runtime.block_on(fan_out(&session, &provider, &running, &turns_args));
    // Subscribers still connected would hold up a graceful stop.
    drop(runtime);
    running.stop()?;
    fs::remove_dir_all(&data_dir)?;
    let fanout = fanout?;
    let turn = fanout.turns.first().context("no fan-out turn")?;
    if turn.complete != args.subscribers {
        anyhow::bail!(
            "{} of {} subscribers got every delta: {:?}",
            turn.complete,
            args.subscribers,
            turn.problems.iter().take(3).collect::<Vec<_>>()
        );
    }
    Ok(Run {
        p50: percentile_us(&turn.latencies_us, 0.50) as f64 / 1000.0,
        p99: percentile_us(&turn.latencies_us, 0.99) as f64 / 1000.0,
        server_cpu: turn.server_cpu.as_secs_f64(),
        events: turn.events_median.0,
    })
}

fn table(args: &BurstArgs, binaries: &[(&str, PathBuf)], runs: &[Vec<Run>]) -> String {
    let mut out = String::new();
    let labels: Vec<&str> = binaries.iter().map(|(label, _)| *label).collect();
    let _ = writeln!(
        out,
        "| Measurement ({} deltas at once, {} subscribers, {} runs each) | {} | Target |\n|---|{}---|",
        args.deltas,
        args.subscribers,
        args.runs,
        labels.join(" | "),
        "---|".repeat(labels.len())
    );
    let cells = |value: &dyn Fn(&Run) -> f64, unit: &str| {
        runs.iter()
            .map(|runs| {
                let values: Vec<f64> = runs.iter().map(value).collect();
                let each: Vec<String> = values.iter().map(|v| format!("{v:.1}")).collect();
                format!("{:.1} {unit} ({})", median(&values), each.join(", "))
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let met = runs
        .last()
        .is_some_and(|r| median(&r.iter().map(|r| r.p99).collect::<Vec<_>>()) <= TARGET_P99_MS);
    let _ = writeln!(
        out,
        "| delivery latency p99, median of runs (each run) | {} | ≤ {TARGET_P99_MS:.0} ms ({}) |",
        cells(&|r| r.p99, "ms"),
        verdict(met)
    );
    let _ = writeln!(
        out,
        "| delivery latency p50 | {} | |",
        cells(&|r| r.p50, "ms")
    );
    let _ = writeln!(
        out,
        "| server CPU during the turn | {} | |",
        cells(&|r| r.server_cpu, "s")
    );
    let _ = writeln!(
        out,
        "| `item.delta` events per subscriber (median) | {} | |",
        cells(&|r| r.events as f64, "")
    );
    out
}
