//! `openvaala-bench churn`: the runtime's time per turn before and after SSE subscribers came
//! and went. A fresh conversation with one subscriber runs `--turns` turns; then, `--cycles`
//! times, `--subscribers` more subscribers open a fresh conversation's stream (each gets its
//! snapshot) and close it again, and its turns are timed; last, after `--settle-s` seconds
//! without churn, a fresh conversation once more. Each phase has a conversation of its own, so
//! every phase's turns carry the same history. Run against this build and, with `--before`, an
//! older binary.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_provider::{FakeProvider, Script, monotonic_ns};
use super::server::{ServerProcess, http_client, server_binary};
use super::sse::{self, Report};
use super::stats::{mb, median, ms, verdict};
use super::turns::{
    FILE_TOOLS, Session, TURN_TIMEOUT, bench_config, create_conversation, events_url,
    next_turn_end, post, wait_connected,
};

#[derive(Args)]
pub struct ChurnArgs {
    /// Timed turns before the churn and after each cycle (the median is reported).
    #[arg(long, default_value_t = 40)]
    turns: usize,
    /// Subscribers that open and close the stream in each cycle.
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// Cycles of churn.
    #[arg(long, default_value_t = 3)]
    cycles: usize,
    /// Deltas of each turn's reply.
    #[arg(long, default_value_t = 200)]
    reply_tokens: usize,
    /// Seconds without churn before the last timing.
    #[arg(long, default_value_t = 20)]
    settle_s: u64,
    /// The `openvaala` binary of a build before the change, measured beside this build's.
    #[arg(long)]
    before: Option<PathBuf>,
}

/// The target: turns after churn within this share of the turn before it.
const TARGET_RATIO: f64 = 1.10;

/// One binary's turn times (ms, medians) before the churn, after each cycle and after the
/// pause, and its memory before and after.
struct Figures {
    before: f64,
    cycles: Vec<f64>,
    settled: f64,
    rss_kb: (u64, u64),
}

pub fn churn(args: &ChurnArgs) -> anyhow::Result<()> {
    if args.turns == 0 || args.subscribers == 0 {
        bail!("--turns and --subscribers must be at least 1");
    }
    let mut binaries = vec![("after", server_binary()?)];
    if let Some(before) = &args.before {
        binaries.insert(0, ("before", before.clone()));
    }
    let dir = std::env::temp_dir().join(format!("openvaala-bench-churn-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut figures = Vec::new();
    let mut outcome = Ok(());
    for (label, binary) in &binaries {
        eprintln!("{label}: {}", binary.display());
        match runtime.block_on(measure(args, binary, &dir)) {
            Ok(measured) => figures.push(measured),
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    drop(runtime);
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    outcome?;
    print!("{}", table(args, &binaries, &figures));
    Ok(())
}

async fn measure(args: &ChurnArgs, binary: &Path, dir: &Path) -> anyhow::Result<Figures> {
    let provider = FakeProvider::start(Script::Words {
        deltas: args.reply_tokens,
    })?;
    let data_dir = dir.join(format!("data-{}", uuid::Uuid::now_v7()));
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir)?;
    fs::create_dir_all(&workspace)?;
    let config = dir.join("config.toml");
    fs::write(&config, bench_config(&provider.base_url, "", FILE_TOOLS))?;
    let mut running = ServerProcess::start_with_config(binary, &data_dir, &config)?;
    running.wait_until_healthy().await?;
    let session = Session {
        client: http_client()?,
        base: running.base.clone(),
        workspace,
    };
    let expected = Script::Words {
        deltas: args.reply_tokens,
    }
    .expected();
    // Each phase times a fresh conversation, so that every phase's turns carry the same
    // history: a conversation's turns grow slower as its history grows, churn or not.
    let rss_before = running.rss_kb()?;
    let before = phase(&session, &provider, args, &expected, None).await?;
    eprintln!("  before churn: {before:.2} ms");
    let mut cycles = Vec::new();
    for cycle in 0..args.cycles {
        let after = phase(&session, &provider, args, &expected, Some(args.subscribers)).await?;
        eprintln!("  after cycle {}: {after:.2} ms", cycle + 1);
        cycles.push(after);
    }
    tokio::time::sleep(Duration::from_secs(args.settle_s)).await;
    let settled = phase(&session, &provider, args, &expected, None).await?;
    eprintln!("  {} s later: {settled:.2} ms", args.settle_s);
    let rss_after = running.rss_kb()?;
    running.stop()?;
    Ok(Figures {
        before,
        cycles,
        settled,
        rss_kb: (rss_before, rss_after),
    })
}

/// One phase on a fresh conversation with one subscriber: `churn` subscribers open and close
/// its stream first (if any), then 10 untimed turns and `--turns` timed ones; their median.
async fn phase(
    session: &Session,
    provider: &FakeProvider,
    args: &ChurnArgs,
    expected: &super::fake_provider::ExpectedReply,
    churn: Option<usize>,
) -> anyhow::Result<f64> {
    let conversation_id = create_conversation(session).await?;
    let url = events_url(session, &conversation_id);
    let (sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    tokio::spawn(sse::subscribe(
        0,
        url.clone(),
        sender,
        expected.clone(),
        stop.clone(),
    ));
    wait_connected(&mut reports, 1, TURN_TIMEOUT).await?;
    if let Some(subscribers) = churn {
        churn_once(&url, subscribers, expected).await?;
    }
    turn_times(session, provider, &conversation_id, &mut reports, 10).await?;
    turn_times(
        session,
        provider,
        &conversation_id,
        &mut reports,
        args.turns,
    )
    .await
}

/// `subscribers` subscribers open the stream, each gets its snapshot, then all close it.
async fn churn_once(
    url: &str,
    subscribers: usize,
    expected: &super::fake_provider::ExpectedReply,
) -> anyhow::Result<()> {
    let (sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let tasks: Vec<_> = (0..subscribers)
        .map(|n| {
            tokio::spawn(sse::subscribe(
                n + 1,
                url.to_owned(),
                sender.clone(),
                expected.clone(),
                stop.clone(),
            ))
        })
        .collect();
    drop(sender);
    wait_connected(&mut reports, subscribers, TURN_TIMEOUT).await?;
    stop.cancel();
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// The median runtime overhead (ms) of `turns` turns: POST → `turn.ended` on the subscriber,
/// less the provider's own time.
async fn turn_times(
    session: &Session,
    provider: &FakeProvider,
    conversation_id: &str,
    reports: &mut mpsc::UnboundedReceiver<Report>,
    turns: usize,
) -> anyhow::Result<f64> {
    let mut overheads = Vec::with_capacity(turns);
    for turn in 0..turns {
        let answered = provider.answered_count();
        let posted_ns = monotonic_ns();
        let path = format!("/api/conversations/{conversation_id}/messages");
        post(
            session,
            &path,
            &serde_json::json!({ "text": format!("Turn {turn}: go on.") }),
            202,
        )
        .await?;
        let report = next_turn_end(reports, TURN_TIMEOUT).await?;
        if report.status != "completed" || report.mismatches > 0 {
            bail!(
                "turn {turn} ended {} with {} mismatches",
                report.status,
                report.mismatches
            );
        }
        let mut provider_time = Duration::ZERO;
        for _ in 0..1000 {
            let all = provider.answered();
            if all.len() > answered {
                provider_time = all[answered].duration();
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let total = Duration::from_nanos(report.ended_ns.saturating_sub(posted_ns));
        overheads.push(ms(total.saturating_sub(provider_time)));
    }
    Ok(median(&overheads))
}

fn table(args: &ChurnArgs, binaries: &[(&str, PathBuf)], figures: &[Figures]) -> String {
    let mut out = String::new();
    let labels: Vec<&str> = binaries.iter().map(|(label, _)| *label).collect();
    let _ = writeln!(
        out,
        "| Measurement (runtime overhead per turn, {}-delta reply, median of {}) | {} | Target |\n|---|{}---|",
        args.reply_tokens,
        args.turns,
        labels.join(" | "),
        "---|".repeat(labels.len())
    );
    let cells = |value: &dyn Fn(&Figures) -> String| {
        figures.iter().map(value).collect::<Vec<_>>().join(" | ")
    };
    let _ = writeln!(
        out,
        "| before any churn | {} | |",
        cells(&|f| format!("{:.2} ms", f.before))
    );
    for cycle in 0..args.cycles {
        let _ = writeln!(
            out,
            "| after churn cycle {} ({} subscribers opened and closed) | {} | |",
            cycle + 1,
            args.subscribers,
            cells(&|f| format!("{:.2} ms", f.cycles[cycle])),
        );
    }
    let worst = |f: &Figures| f.cycles.iter().copied().fold(f.settled, f64::max) / f.before;
    let met = figures.last().is_some_and(|f| worst(f) <= TARGET_RATIO);
    let _ = writeln!(
        out,
        "| {} s after the last cycle | {} | |",
        args.settle_s,
        cells(&|f| format!("{:.2} ms", f.settled))
    );
    let _ = writeln!(
        out,
        "| worst after churn / before | {} | ≤ {TARGET_RATIO:.2}× ({}) |",
        cells(&|f| format!("{:.2}×", worst(f))),
        verdict(met)
    );
    let _ = writeln!(
        out,
        "| server RSS before → after | {} | |",
        cells(&|f| format!("{:.1} → {:.1} MiB", mb(f.rss_kb.0), mb(f.rss_kb.1)))
    );
    out
}
