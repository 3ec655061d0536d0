//! What `openvaala-bench turns` measured, and the table it prints at the end.

use std::fmt::Write as _;
use std::time::Duration;

use super::decode::Decoding;
use super::stats::{mb, ms, percentile, percentile_us, plural, thousands, verdict};

/// Everything `turns` measured, printed as one table at the end.
pub(crate) struct Results {
    pub(crate) args_turns: usize,
    pub(crate) long: Overhead,
    pub(crate) short: Overhead,
    pub(crate) fanout: FanOut,
    pub(crate) decoding: Decoding,
    pub(crate) open_file_limit: u64,
}

/// The turns of one reply size on one conversation.
pub(crate) struct Overhead {
    pub(crate) deltas: usize,
    /// Client's POST sent → `turn.ended` received, minus the provider's own time.
    pub(crate) overheads: Vec<Duration>,
    /// Client's POST sent → `turn.ended` received.
    pub(crate) totals: Vec<Duration>,
    /// The provider's own time: request received → last byte sent.
    pub(crate) provider: Vec<Duration>,
    /// The size of the last model request (the whole history is sent every turn).
    pub(crate) last_request_bytes: usize,
    /// `item.delta` events the subscriber got per turn (deltas that reach the server together
    /// go out merged).
    pub(crate) events: Vec<usize>,
}

pub(crate) struct FanOut {
    pub(crate) subscribers: usize,
    pub(crate) deltas: usize,
    /// Time from spawning the subscribers until every one had its snapshot.
    pub(crate) connect: Duration,
    pub(crate) rss_before_kb: u64,
    pub(crate) rss_idle_kb: u64,
    pub(crate) turns: Vec<FanOutTurn>,
}

pub(crate) struct FanOutTurn {
    pub(crate) interval: Duration,
    /// Receive time − send time of every (subscriber, delta) pair, in microseconds, sorted.
    pub(crate) latencies_us: Vec<u32>,
    /// Subscribers that got every delta, in order.
    pub(crate) complete: usize,
    /// What went wrong for the others (at most a few lines are printed).
    pub(crate) problems: Vec<String>,
    pub(crate) reconnects: usize,
    pub(crate) snapshots: usize,
    /// Per subscriber (median): `item.delta` events (the deltas after merging), all events of
    /// the turn, and the reads they arrived in.
    pub(crate) events_median: (usize, usize, usize),
    /// First delta sent by the provider → last delta received by the last subscriber.
    pub(crate) wall: Duration,
    /// First delta sent by the provider → last delta received by the first subscriber to get
    /// it: about when the server had published every delta (the rest of `wall` is fan-out).
    pub(crate) first_complete: Duration,
    /// First delta sent → last delta sent, by the provider.
    pub(crate) provider_stream: Duration,
    pub(crate) rss_after_kb: u64,
    pub(crate) peak_rss_kb: u64,
    /// CPU time used during the turn by the server and by this process (the subscribers; the
    /// fake provider's share is small).
    pub(crate) server_cpu: Duration,
    pub(crate) bench_cpu: Duration,
}

pub(crate) fn results_table(results: &Results) -> String {
    let mut out = String::new();
    let turns = results.args_turns;
    let _ = writeln!(out, "\n## Turns benchmark\n");
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    for overhead in [&results.long, &results.short] {
        let p50 = percentile(&overhead.overheads, 0.50);
        let _ = writeln!(
            out,
            "| overhead per turn, {}-delta reply (median / p90 / p99 of {turns}) | {:.2} / {:.2} / {:.2} ms | < 5 ms | {} |",
            overhead.deltas,
            ms(p50),
            ms(percentile(&overhead.overheads, 0.90)),
            ms(percentile(&overhead.overheads, 0.99)),
            verdict(ms(p50) < 5.0)
        );
    }
    let fanout = &results.fanout;
    for turn in &fanout.turns {
        let p99 = percentile_us(&turn.latencies_us, 0.99) as f64 / 1000.0;
        let _ = writeln!(
            out,
            "| fan-out to {}, {} deltas {}: delivery latency p50 / p99 | {:.1} / {:.1} ms | p99 < 50 ms | {} |",
            plural(fanout.subscribers, "subscriber"),
            thousands(fanout.deltas as u64),
            pace(turn.interval),
            percentile_us(&turn.latencies_us, 0.50) as f64 / 1000.0,
            p99,
            verdict(p99 < 50.0)
        );
    }
    let per_subscriber_kb = fanout.rss_idle_kb.saturating_sub(fanout.rss_before_kb) as f64
        / fanout.subscribers.max(1) as f64;
    let _ = writeln!(
        out,
        "| server memory per idle subscriber | {per_subscriber_kb:.1} KB | < 64 KB | {} |",
        verdict(per_subscriber_kb < 64.0)
    );

    let _ = writeln!(out, "\nFor information:\n");
    let _ = writeln!(out, "| Measurement | Result |");
    let _ = writeln!(out, "|---|---|");
    for overhead in [&results.long, &results.short] {
        let _ = writeln!(
            out,
            "| {}-delta reply: POST → `turn.ended` / provider's own time (medians) | {:.2} / {:.2} ms |",
            overhead.deltas,
            ms(percentile(&overhead.totals, 0.50)),
            ms(percentile(&overhead.provider, 0.50)),
        );
        let quarter = (overhead.overheads.len() / 4).max(1);
        let _ = writeln!(
            out,
            "| {}-delta reply: overhead median of the first / last {quarter} turns (the history grows; last request {:.0} KB) | {:.2} / {:.2} ms |",
            overhead.deltas,
            overhead.last_request_bytes as f64 / 1024.0,
            ms(percentile(&overhead.overheads[..quarter], 0.50)),
            ms(percentile(
                &overhead.overheads[overhead.overheads.len() - quarter..],
                0.50
            )),
        );
        let mut events = overhead.events.clone();
        events.sort_unstable();
        let _ = writeln!(
            out,
            "| {}-delta reply: `item.delta` events a subscriber got (median / max; the server merges deltas that reach it together) | {} / {} |",
            overhead.deltas,
            events.get(events.len() / 2).copied().unwrap_or(0),
            events.last().copied().unwrap_or(0),
        );
    }
    let per_delta = (percentile(&results.long.overheads, 0.50)
        .saturating_sub(percentile(&results.short.overheads, 0.50)))
    .as_secs_f64()
        * 1e6
        / (results.long.deltas.saturating_sub(1)).max(1) as f64;
    let _ = writeln!(
        out,
        "| cost per provider delta ((long − short overhead median) / {}) | {per_delta:.1} µs |",
        results.long.deltas.saturating_sub(1)
    );
    let decoding = &results.decoding;
    let _ = writeln!(
        out,
        "| decoding a provider's {}-chunk stream (SSE and JSON, no network), a read per chunk / all in one read | {:.1} / {:.1} ms ({:.2} / {:.2} µs per chunk) |",
        thousands(decoding.chunks as u64),
        ms(decoding.one_per_read),
        ms(decoding.one_read),
        decoding.one_per_read.as_secs_f64() * 1e6 / decoding.chunks as f64,
        decoding.one_read.as_secs_f64() * 1e6 / decoding.chunks as f64,
    );
    let _ = writeln!(
        out,
        "| {} connected (each had its snapshot) in | {:.0} ms |",
        plural(fanout.subscribers, "subscriber"),
        ms(fanout.connect)
    );
    let _ = writeln!(
        out,
        "| server RSS before the subscribers / with them idle | {:.1} / {:.1} MB |",
        mb(fanout.rss_before_kb),
        mb(fanout.rss_idle_kb)
    );
    for turn in &fanout.turns {
        let label = pace(turn.interval);
        let _ = writeln!(
            out,
            "| fan-out {label}: subscribers that got every delta, in order | {} of {} |",
            thousands(turn.complete as u64),
            thousands(fanout.subscribers as u64)
        );
        let _ = writeln!(
            out,
            "| fan-out {label}: per subscriber, median: `item.delta` events (the {} deltas, merged where they reached the server together) / all events of the turn / reads they came in | {} / {} / {} |",
            thousands(fanout.deltas as u64),
            turn.events_median.0,
            turn.events_median.1,
            turn.events_median.2
        );
        let _ = writeln!(
            out,
            "| fan-out {label}: reconnects (into a fresh snapshot) | {} ({}) |",
            turn.reconnects, turn.snapshots
        );
        let _ = writeln!(
            out,
            "| fan-out {label}: first delta sent → first / last subscriber got the last delta; provider's sending time | {:.0} / {:.0}; {:.0} ms |",
            ms(turn.first_complete),
            ms(turn.wall),
            ms(turn.provider_stream)
        );
        let _ = writeln!(
            out,
            "| fan-out {label}: CPU time of the server / of the bench (subscribers) during the turn | {:.2} / {:.2} s |",
            turn.server_cpu.as_secs_f64(),
            turn.bench_cpu.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "| fan-out {label}: server RSS after the turn (peak so far) | {:.1} MB ({:.1} MB) |",
            mb(turn.rss_after_kb),
            mb(turn.peak_rss_kb)
        );
        for problem in turn.problems.iter().take(5) {
            let _ = writeln!(out, "| fan-out {label}: problem | {problem} |");
        }
        if turn.problems.len() > 5 {
            let _ = writeln!(
                out,
                "| fan-out {label}: problems not shown | {} |",
                turn.problems.len() - 5
            );
        }
    }
    let _ = writeln!(
        out,
        "| open-file limit (bench and server) | {} |",
        thousands(results.open_file_limit)
    );
    out
}

fn pace(interval: Duration) -> String {
    if interval.is_zero() {
        "as fast as possible".to_owned()
    } else {
        format!("one per {} µs", interval.as_micros())
    }
}
