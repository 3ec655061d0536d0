//! `openvaala-bench turns`: the runtime's own time per turn (everything but the model) and the
//! fan-out of one turn's deltas to many SSE subscribers, with their delivery latency and the
//! server's memory per subscriber. The model is the in-process fake provider, which answers at
//! once, so what is left is the runtime's work.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::decode::{self};
use super::fake_provider::{Answered, FakeProvider, MODEL_NAME, Script, SendTimes, monotonic_ns};
use super::server::{
    ServerProcess, http_client, proc_cpu, proc_status_kb, raise_open_file_limit, server_binary,
};
use super::sse::{self, Report, TurnReport};
use super::stats::{mb, ms, percentile, percentile_us};
use super::turns_results::*;

#[derive(Args)]
pub struct TurnsArgs {
    /// Timed turns of each reply size, after the warm-up turns.
    #[arg(long, default_value_t = 200)]
    pub(super) turns: usize,
    /// Turns run first and not timed.
    #[arg(long, default_value_t = 10)]
    pub(super) warmups: usize,
    /// Deltas (about one token each) of the long reply.
    #[arg(long, default_value_t = 200)]
    pub(super) reply_tokens: usize,
    /// SSE subscribers of the fan-out conversation.
    #[arg(long, default_value_t = 1000)]
    pub(super) subscribers: usize,
    /// Deltas of the fan-out turn's reply.
    #[arg(long, default_value_t = 5000)]
    pub(super) fanout_deltas: usize,
    /// Microseconds between two deltas of the paced fan-out turns that follow the first, one
    /// turn per value (comma-separated; `--paced-us 0` for none). The first fan-out turn always
    /// streams as fast as the server reads.
    #[arg(long, value_delimiter = ',', default_value = "10000,1000")]
    pub(super) paced_us: Vec<u64>,
    /// Keep the data directory (its path is printed) instead of removing it.
    #[arg(long)]
    pub(super) keep: bool,
}

/// How long one ordinary turn may take before the bench gives up.
pub(super) const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long 1,000 subscribers may take to connect, and a fan-out turn to reach all of them
/// (beyond the time its deltas are paced over).
const FANOUT_TIMEOUT: Duration = Duration::from_secs(600);
/// How often a conversation's status is polled while waiting for its first turn to end.
const STATUS_POLL: Duration = Duration::from_millis(5);

pub fn turns(args: &TurnsArgs) -> anyhow::Result<()> {
    if args.turns == 0 || args.reply_tokens == 0 || args.fanout_deltas == 0 {
        bail!("--turns, --reply-tokens and --fanout-deltas must be at least 1");
    }
    let server = server_binary()?;
    // First, while nothing else runs.
    let decoding = decode::measure(args.fanout_deltas)?;
    // Each subscriber holds one socket in the bench and one in the server; the server inherits
    // the raised limit.
    let open_file_limit = raise_open_file_limit(args.subscribers as u64 * 2 + 1024)?;
    if open_file_limit < args.subscribers as u64 + 256 {
        bail!(
            "the open-file limit is {open_file_limit}, too low for {} subscribers",
            args.subscribers
        );
    }
    let dir = std::env::temp_dir().join(format!("openvaala-bench-turns-{}", uuid::Uuid::now_v7()));
    let data_dir = dir.join("data");
    let workspace = dir.join("workspace");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::create_dir_all(&workspace)?;
    eprintln!("data directory: {}", data_dir.display());

    let outcome = run(args, &server, &dir, &data_dir, &workspace);
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    let (long, short, fanout) = outcome?;
    let results = Results {
        args_turns: args.turns,
        long,
        short,
        fanout,
        decoding,
        open_file_limit,
    };
    print!("{}", results_table(&results));
    Ok(())
}

fn run(
    args: &TurnsArgs,
    server: &Path,
    dir: &Path,
    data_dir: &Path,
    workspace: &Path,
) -> anyhow::Result<(Overhead, Overhead, FanOut)> {
    // Two workers, like the server: the client side competes with it for the two cores.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let provider = FakeProvider::start(Script::Words {
        deltas: args.reply_tokens,
    })?;
    let config = dir.join("config.toml");
    fs::write(&config, config_file(&provider.base_url))?;
    let mut running = ServerProcess::start_with_config(server, data_dir, &config)?;
    let start = runtime.block_on(running.wait_until_healthy())?;
    eprintln!("server started in {:.1} ms", ms(start));
    let session = Session {
        client: http_client()?,
        base: running.base.clone(),
        workspace: workspace.to_owned(),
    };
    let measured = runtime.block_on(async {
        let long = overhead(&session, &provider, args, args.reply_tokens).await?;
        let short = overhead(&session, &provider, args, 1).await?;
        let fanout = fan_out(&session, &provider, &running, args).await?;
        anyhow::Ok((long, short, fanout))
    });
    // Subscribers still connected would make a graceful stop wait for them; they are gone once
    // the runtime is.
    drop(runtime);
    running.stop()?;
    measured
}

/// What the client side needs: a client for requests (with a timeout) and where to send them.
/// (SSE subscribers bring their own lean client: `sse`.)
pub(super) struct Session {
    pub client: reqwest::Client,
    pub base: String,
    pub workspace: PathBuf,
}

/// The server's config: the fake provider as an `openai_chat` provider, a model with a context
/// window large enough that no turn ever compacts, and a default agent with the usual tools
/// (so every request carries their schemas, as a real one does).
pub(super) fn config_file(base_url: &str) -> String {
    bench_config(base_url, "", FILE_TOOLS)
}

/// The tools of the benchmarks' default agent.
pub(super) const FILE_TOOLS: &str = r#""shell", "read_file", "write_file", "list_dir""#;

/// A config for the benchmarks: `tables` (TOML tables, each ending with a blank line) first,
/// the fake provider at `base_url`, its model, and a default agent with `tools` (a TOML list's
/// items).
pub(super) fn bench_config(base_url: &str, tables: &str, tools: &str) -> String {
    format!(
        r#"default_agent = "default"

{tables}[retry]
max_attempts = 3
initial_delay_ms = 10
max_delay_ms = 50

[providers.fake]
protocol = "openai_chat"
base_url = "{base_url}"

[models.bench]
provider = "fake"
name = "{MODEL_NAME}"
context_window = 100000000
max_output_tokens = 100000

[agents.default]
description = "benchmark agent"
model = "bench"
tools = [{tools}]
"#
    )
}

// ---------------------------------------------------------------------------------------------
// Overhead per turn.

/// Runs `warmups + turns` turns whose replies have `deltas` deltas on a fresh conversation,
/// each timed from the POST to `turn.ended` on a stream opened before it.
async fn overhead(
    session: &Session,
    provider: &FakeProvider,
    args: &TurnsArgs,
    deltas: usize,
) -> anyhow::Result<Overhead> {
    let script = Script::Words { deltas };
    let expected = script.expected();
    provider.set_script(script);
    let conversation_id = create_conversation(session).await?;
    let (reports_sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    tokio::spawn(sse::subscribe(
        0,
        events_url(session, &conversation_id),
        reports_sender,
        expected.clone(),
        stop.clone(),
    ));
    wait_connected(&mut reports, 1, TURN_TIMEOUT).await?;

    let total_turns = args.warmups + args.turns;
    let mut result = Overhead {
        deltas,
        overheads: Vec::with_capacity(args.turns),
        totals: Vec::with_capacity(args.turns),
        provider: Vec::with_capacity(args.turns),
        last_request_bytes: 0,
        events: Vec::with_capacity(total_turns),
    };
    eprintln!("{total_turns} turns with {deltas}-delta replies…");
    for turn in 0..total_turns {
        let answers_before = provider.answered_count();
        let posted_ns = monotonic_ns();
        send_message(session, &conversation_id, &format!("Turn {turn}: go on.")).await?;
        let report = next_turn_end(&mut reports, TURN_TIMEOUT).await?;
        if report.status != "completed" {
            bail!("turn {turn} ended {}", report.status);
        }
        if report.text_bytes != expected.text.len() || report.mismatches > 0 {
            bail!(
                "turn {turn}: the subscriber got {} of the reply's {} bytes ({} deltas not the expected text)",
                report.text_bytes,
                expected.text.len(),
                report.mismatches
            );
        }
        result.events.push(report.deltas);
        let answer = answer_after(provider, answers_before).await?;
        let total = Duration::from_nanos(report.ended_ns.saturating_sub(posted_ns));
        if turn >= args.warmups {
            result.totals.push(total);
            result.provider.push(answer.duration());
            result
                .overheads
                .push(total.saturating_sub(answer.duration()));
        }
        result.last_request_bytes = answer.request_bytes;
    }
    eprintln!(
        "  overhead p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&result.overheads, 0.50)),
        ms(percentile(&result.overheads, 0.99))
    );
    Ok(result)
}

/// The one model call a turn made. The provider records it when its stream ends, which is
/// before the server can have seen the end; the short wait only covers thread scheduling.
async fn answer_after(provider: &FakeProvider, answers_before: usize) -> anyhow::Result<Answered> {
    for _ in 0..1000 {
        let answered = provider.answered();
        match answered.len().cmp(&(answers_before + 1)) {
            std::cmp::Ordering::Equal => return Ok(answered[answers_before]),
            std::cmp::Ordering::Greater => {
                bail!(
                    "the turn made {} model calls, not one",
                    answered.len() - answers_before
                )
            }
            std::cmp::Ordering::Less => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    bail!("the provider recorded no answer for the turn")
}

// ---------------------------------------------------------------------------------------------
// Fan-out.

/// Connects `--subscribers` subscribers to one conversation, then runs a turn of
/// `--fanout-deltas` stamped deltas as fast as possible (and a paced one), checking that every
/// subscriber gets every delta and measuring latency and the server's memory.
pub(super) async fn fan_out(
    session: &Session,
    provider: &FakeProvider,
    running: &ServerProcess,
    args: &TurnsArgs,
) -> anyhow::Result<FanOut> {
    provider.set_script(Script::Words { deltas: 1 });
    let conversation_id = create_conversation(session).await?;
    let pid = running.pid();
    let rss_before_kb = proc_status_kb(pid, "VmRSS")?;

    eprintln!("connecting {} subscribers…", args.subscribers);
    let (reports_sender, mut reports) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    let url = events_url(session, &conversation_id);
    let send_times = SendTimes::new(args.fanout_deltas);
    let expected = Script::Stamped {
        deltas: args.fanout_deltas,
        interval: Duration::ZERO,
        sent: send_times.clone(),
    }
    .expected();
    let connecting_ns = monotonic_ns();
    for subscriber in 0..args.subscribers {
        tokio::spawn(sse::subscribe(
            subscriber,
            url.clone(),
            reports_sender.clone(),
            expected.clone(),
            stop.clone(),
        ));
    }
    drop(reports_sender);
    wait_connected(&mut reports, args.subscribers, FANOUT_TIMEOUT).await?;
    let connect = Duration::from_nanos(monotonic_ns() - connecting_ns);
    let rss_idle_kb = proc_status_kb(pid, "VmRSS")?;
    eprintln!(
        "  connected in {:.0} ms; server RSS {:.1} → {:.1} MB",
        ms(connect),
        mb(rss_before_kb),
        mb(rss_idle_kb)
    );

    let mut intervals = vec![Duration::ZERO];
    intervals.extend(
        args.paced_us
            .iter()
            .filter(|&&micros| micros > 0)
            .map(|&micros| Duration::from_micros(micros)),
    );
    let mut turns = Vec::new();
    for interval in intervals {
        eprintln!(
            "fan-out turn: {} deltas, {} apart…",
            args.fanout_deltas,
            if interval.is_zero() {
                "nothing".to_owned()
            } else {
                format!("{} µs", interval.as_micros())
            }
        );
        provider.set_script(Script::Stamped {
            deltas: args.fanout_deltas,
            interval,
            sent: send_times.clone(),
        });
        let answers_before = provider.answered_count();
        let cpu_before = (proc_cpu(pid)?, proc_cpu(std::process::id())?);
        send_message(session, &conversation_id, "Stream a long answer.").await?;
        let timeout = FANOUT_TIMEOUT + interval * args.fanout_deltas as u32;
        let reports = collect_turn(&mut reports, args.subscribers, timeout).await?;
        let cpu_used = (
            proc_cpu(pid)?.saturating_sub(cpu_before.0),
            proc_cpu(std::process::id())?.saturating_sub(cpu_before.1),
        );
        let answer = answer_after(provider, answers_before).await?;
        let turn = summarize(
            interval,
            args.subscribers,
            reports,
            &answer,
            &send_times,
            running,
            cpu_used,
        )?;
        eprintln!(
            "  {}/{} subscribers got every delta; latency p50 {:.1} ms, p99 {:.1} ms; last delta after {:.0} ms (first subscriber) / {:.0} ms (last)",
            turn.complete,
            args.subscribers,
            percentile_us(&turn.latencies_us, 0.50) as f64 / 1000.0,
            percentile_us(&turn.latencies_us, 0.99) as f64 / 1000.0,
            ms(turn.first_complete),
            ms(turn.wall)
        );
        turns.push(turn);
    }
    Ok(FanOut {
        subscribers: args.subscribers,
        deltas: args.fanout_deltas,
        connect,
        rss_before_kb,
        rss_idle_kb,
        turns,
    })
}

/// What one subscriber saw of one fan-out turn, or why it left.
enum Seen {
    Turn(TurnReport),
    Gone(String),
}

/// Waits until every subscriber has reported the end of the turn or has given up.
async fn collect_turn(
    reports: &mut mpsc::UnboundedReceiver<Report>,
    subscribers: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<(usize, Seen)>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut seen = Vec::with_capacity(subscribers);
    while seen.len() < subscribers {
        let report = tokio::time::timeout_at(deadline, reports.recv())
            .await
            .with_context(|| {
                format!(
                    "only {} of {subscribers} subscribers saw the turn end within {timeout:?}",
                    seen.len()
                )
            })?
            .context("every subscriber stopped")?;
        match report {
            Report::TurnEnded(turn) => seen.push((turn.subscriber, Seen::Turn(turn))),
            Report::Gone { subscriber, reason } => seen.push((subscriber, Seen::Gone(reason))),
            Report::Connected => {}
        }
    }
    Ok(seen)
}

/// One fan-out turn's numbers from every subscriber's report, the provider's record of the
/// answer, and the CPU time the server and the bench used meanwhile.
fn summarize(
    interval: Duration,
    subscribers: usize,
    seen: Vec<(usize, Seen)>,
    answer: &Answered,
    sent: &SendTimes,
    running: &ServerProcess,
    (server_cpu, bench_cpu): (Duration, Duration),
) -> anyhow::Result<FanOutTurn> {
    let deltas = sent.len();
    let mut latencies_us = Vec::with_capacity(subscribers * deltas);
    let mut complete = 0;
    let mut problems = Vec::new();
    let mut reconnects = 0;
    let mut snapshots = 0;
    let mut last_delta_ns = answer.first_delta_ns;
    let mut first_complete_ns = u64::MAX;
    let mut events = Vec::with_capacity(subscribers);
    for (subscriber, seen) in seen {
        let turn = match seen {
            Seen::Turn(turn) => turn,
            Seen::Gone(reason) => {
                problems.push(format!("subscriber {subscriber} disconnected: {reason}"));
                continue;
            }
        };
        reconnects += turn.reconnects;
        snapshots += turn.snapshots;
        events.push((turn.deltas, turn.events, turn.reads));
        if let Some(last) = turn.last_delta_ns {
            last_delta_ns = last_delta_ns.max(last);
            first_complete_ns = first_complete_ns.min(last);
        }
        let before = latencies_us.len();
        for arrival in &turn.arrivals {
            for index in arrival.deltas.clone() {
                let Some(sent_ns) = sent.get(index) else {
                    continue;
                };
                let micros = arrival.received_ns.saturating_sub(sent_ns) / 1_000;
                latencies_us.push(u32::try_from(micros).unwrap_or(u32::MAX));
            }
        }
        let stamped = latencies_us.len() - before;
        if turn.status == "completed" && stamped == deltas && turn.mismatches == 0 {
            complete += 1;
        } else {
            problems.push(format!(
                "subscriber {subscriber}: turn {}, {stamped} of {deltas} deltas, {} not the expected text, {} reconnects ({} into a snapshot)",
                turn.status, turn.mismatches, turn.reconnects, turn.snapshots
            ));
        }
    }
    latencies_us.sort_unstable();
    events.sort_unstable();
    Ok(FanOutTurn {
        interval,
        latencies_us,
        complete,
        problems,
        reconnects,
        snapshots,
        events_median: events.get(events.len() / 2).copied().unwrap_or_default(),
        wall: Duration::from_nanos(last_delta_ns.saturating_sub(answer.first_delta_ns)),
        first_complete: Duration::from_nanos(
            first_complete_ns
                .min(last_delta_ns)
                .saturating_sub(answer.first_delta_ns),
        ),
        provider_stream: Duration::from_nanos(
            answer.finished_ns.saturating_sub(answer.first_delta_ns),
        ),
        rss_after_kb: proc_status_kb(running.pid(), "VmRSS")?,
        peak_rss_kb: proc_status_kb(running.pid(), "VmHWM")?,
        server_cpu,
        bench_cpu,
    })
}

// ---------------------------------------------------------------------------------------------
// Requests.

pub(super) fn events_url(session: &Session, conversation_id: &str) -> String {
    format!(
        "{}/api/conversations/{conversation_id}/events",
        session.base
    )
}

/// Creates a conversation in the workspace and waits until its first turn has ended.
pub(super) async fn create_conversation(session: &Session) -> anyhow::Result<String> {
    let body = json!({
        "text": "Benchmark conversation: answer every message.",
        "cwd": session.workspace,
    });
    let created = post(session, "/api/conversations", &body, 201).await?;
    let conversation_id = created["conversation"]["id"]
        .as_str()
        .context("no conversation id in the answer")?
        .to_owned();
    let url = format!("{}/api/conversations/{conversation_id}", session.base);
    let polls = (TURN_TIMEOUT.as_millis() / STATUS_POLL.as_millis()) as usize;
    for _ in 0..polls {
        let conversation: Value = session.client.get(&url).send().await?.json().await?;
        if conversation["status"] == "idle" {
            return Ok(conversation_id);
        }
        tokio::time::sleep(STATUS_POLL).await;
    }
    bail!("the first turn of {conversation_id} did not end within {TURN_TIMEOUT:?}")
}

async fn send_message(session: &Session, conversation_id: &str, text: &str) -> anyhow::Result<()> {
    let path = format!("/api/conversations/{conversation_id}/messages");
    let accepted = post(session, &path, &json!({ "text": text }), 202).await?;
    if accepted["message"]["status"] != "started" {
        bail!("the message did not start a turn: {accepted}");
    }
    Ok(())
}

pub(super) async fn post(
    session: &Session,
    path: &str,
    body: &Value,
    expected: u16,
) -> anyhow::Result<Value> {
    let url = format!("{}{path}", session.base);
    let response = session.client.post(&url).json(body).send().await?;
    let status = response.status();
    let text = response.text().await?;
    if status.as_u16() != expected {
        bail!("POST {path} answered {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("POST {path}: not JSON"))
}

pub(super) async fn wait_connected(
    reports: &mut mpsc::UnboundedReceiver<Report>,
    subscribers: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut connected = 0;
    while connected < subscribers {
        let report = tokio::time::timeout_at(deadline, reports.recv())
            .await
            .with_context(|| {
                format!(
                    "only {connected} of {subscribers} subscribers connected within {timeout:?}"
                )
            })?
            .context("every subscriber stopped")?;
        match report {
            Report::Connected => connected += 1,
            Report::Gone { subscriber, reason } => {
                bail!("subscriber {subscriber} could not connect: {reason}")
            }
            Report::TurnEnded(_) => {}
        }
    }
    Ok(())
}

pub(super) async fn next_turn_end(
    reports: &mut mpsc::UnboundedReceiver<Report>,
    timeout: Duration,
) -> anyhow::Result<TurnReport> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let report = tokio::time::timeout_at(deadline, reports.recv())
            .await
            .with_context(|| format!("no turn.ended within {timeout:?}"))?
            .context("the subscriber stopped")?;
        match report {
            Report::TurnEnded(turn) => return Ok(turn),
            Report::Gone { reason, .. } => bail!("the subscriber gave up: {reason}"),
            Report::Connected => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_is_valid() {
        let path = std::env::temp_dir().join(format!("bench-config-{}.toml", std::process::id()));
        fs::write(&path, config_file("http://127.0.0.1:9/v1")).unwrap();
        let loaded = openvaala::config::Config::load(Some(&path));
        fs::remove_file(&path).unwrap();
        let config = loaded.unwrap();
        assert_eq!(config.default_agent, "default");
    }
}
