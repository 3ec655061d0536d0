//! How long the service takes to decode a provider's stream, apart from the network and the
//! rest of the turn: the Chat Completions chunks the fake provider sends, through the same
//! SSE parser and decoder a turn uses (`wire::events`, `ChatDecoder`). Measured three ways:
//! each chunk in a read of its own (a provider that the service keeps up with), all of them in
//! one read (a burst that piled up while the service was busy), and at a real provider's pace
//! (a chunk every few milliseconds, handed over by another thread as a socket would): the CPU
//! time per chunk and the time from a chunk's arrival to its decoded delta.
//!
//! `openvaala-bench decode` runs only this; `turns` reports the first two.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;

use axum::body::Bytes;
use futures::StreamExt;
use openvaala::model::openai_chat::ChatDecoder;
use openvaala::model::wire::{self, Decoder};

use super::fake_provider::content_chunk;
use super::stats::{median_duration, percentile, thousands};

/// Times each way is measured; the median is reported.
const ROUNDS: usize = 7;

pub struct Decoding {
    pub chunks: usize,
    /// Median time for all chunks, each in a read of its own.
    pub one_per_read: Duration,
    /// Median time for all chunks in one read.
    pub one_read: Duration,
}

pub fn measure(chunks: usize) -> anyhow::Result<Decoding> {
    let pieces: Vec<Bytes> = (0..chunks)
        .map(|index| content_chunk(&format!("{index};")))
        .collect();
    let whole = Bytes::from(pieces.concat());
    let mut one_per_read = Vec::with_capacity(ROUNDS);
    let mut one_read = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        one_per_read.push(time_decoding(pieces.clone(), chunks)?);
        one_read.push(time_decoding(vec![whole.clone()], chunks)?);
    }
    Ok(Decoding {
        chunks,
        one_per_read: median_duration(&one_per_read),
        one_read: median_duration(&one_read),
    })
}

#[derive(Args)]
pub struct DecodeArgs {
    /// Chunks of the burst (one read per chunk, then all in one read).
    #[arg(long, default_value_t = 5000)]
    chunks: usize,
    /// Chunks per second of the paced runs, one run per value (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "30,100,300")]
    paced_hz: Vec<u32>,
    /// How long each paced run streams.
    #[arg(long, default_value_t = 3)]
    paced_seconds: u32,
}

/// One paced run: a chunk every `1 / hz` seconds, each in a read of its own.
pub struct Paced {
    pub hz: u32,
    pub chunks: usize,
    /// CPU time of the decoding thread per chunk (waking up included).
    pub cpu_per_chunk: Duration,
    /// Chunk handed over → its delta decoded, per chunk.
    pub latencies: Vec<Duration>,
}

pub fn decode(args: &DecodeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.chunks > 0, "--chunks must be at least 1");
    eprintln!("decoding a {}-chunk burst…", args.chunks);
    let burst = measure(args.chunks)?;
    let mut paced = Vec::new();
    for &hz in &args.paced_hz {
        anyhow::ensure!(hz > 0, "--paced-hz values must be at least 1");
        eprintln!(
            "decoding {hz} chunks a second for {} s…",
            args.paced_seconds
        );
        paced.push(measure_paced(hz, (hz * args.paced_seconds) as usize)?);
    }
    let mut out = String::new();
    let _ = writeln!(out, "| Measurement | Result |\n|---|---|");
    let _ = writeln!(
        out,
        "| burst of {} chunks, a read per chunk / all in one read (median of {ROUNDS}) | {:.1} / {:.1} ms ({:.2} / {:.2} µs per chunk) |",
        thousands(burst.chunks as u64),
        burst.one_per_read.as_secs_f64() * 1e3,
        burst.one_read.as_secs_f64() * 1e3,
        burst.one_per_read.as_secs_f64() * 1e6 / burst.chunks as f64,
        burst.one_read.as_secs_f64() * 1e6 / burst.chunks as f64,
    );
    for run in &paced {
        let _ = writeln!(
            out,
            "| {} chunks a second ({} chunks): CPU per chunk; chunk handed over → delta decoded p50 / p99 | {:.1} µs; {:.1} / {:.1} µs |",
            run.hz,
            run.chunks,
            run.cpu_per_chunk.as_secs_f64() * 1e6,
            percentile(&run.latencies, 0.50).as_secs_f64() * 1e6,
            percentile(&run.latencies, 0.99).as_secs_f64() * 1e6,
        );
    }
    print!("{out}");
    Ok(())
}

/// Streams `chunks` chunks at `hz` a second from a thread of their own into the decoder, as
/// a socket's reads would arrive, and times each one.
pub fn measure_paced(hz: u32, chunks: usize) -> anyhow::Result<Paced> {
    let pieces: Vec<Bytes> = (0..chunks)
        .map(|index| content_chunk(&format!("{index};")))
        .collect();
    let started = Instant::now();
    let handed_over: Arc<[AtomicU64]> = (0..chunks).map(|_| AtomicU64::new(0)).collect();
    let (sender, receiver) = futures::channel::mpsc::unbounded::<Bytes>();
    let producer = std::thread::spawn({
        let handed_over = handed_over.clone();
        let interval = Duration::from_secs(1) / hz;
        move || {
            for (index, piece) in pieces.into_iter().enumerate() {
                let due = started + interval * index as u32;
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                handed_over[index].store(started.elapsed().as_nanos() as u64, Ordering::Release);
                if sender.unbounded_send(piece).is_err() {
                    return;
                }
            }
        }
    });
    let cpu_before = thread_cpu();
    let mut decoder = ChatDecoder::default();
    let mut latencies = Vec::with_capacity(chunks);
    futures::executor::block_on(async {
        let events = wire::events(receiver.map(Ok::<_, std::io::Error>));
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let decoded = decoder.decode(&event?)?.len();
            let now = started.elapsed().as_nanos() as u64;
            for _ in 0..decoded {
                let index = latencies.len();
                anyhow::ensure!(index < chunks, "more deltas than chunks");
                let sent = handed_over[index].load(Ordering::Acquire);
                latencies.push(Duration::from_nanos(now.saturating_sub(sent)));
            }
        }
        anyhow::Ok(())
    })?;
    let cpu = thread_cpu().saturating_sub(cpu_before);
    producer
        .join()
        .map_err(|_| anyhow::anyhow!("the paced producer panicked"))?;
    anyhow::ensure!(
        latencies.len() == chunks,
        "decoded {} deltas from {chunks} chunks",
        latencies.len()
    );
    Ok(Paced {
        hz,
        chunks,
        cpu_per_chunk: cpu / chunks as u32,
        latencies,
    })
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `time` is.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Decodes `reads` as one response body; checks that every chunk gave its delta.
fn time_decoding(reads: Vec<Bytes>, chunks: usize) -> anyhow::Result<Duration> {
    let body = futures::stream::iter(reads.into_iter().map(Ok::<_, std::io::Error>));
    let started = Instant::now();
    let mut decoder = ChatDecoder::default();
    let mut deltas = 0;
    futures::executor::block_on(async {
        let events = wire::events(body);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            deltas += decoder.decode(&event?)?.len();
        }
        anyhow::Ok(())
    })?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        deltas == chunks,
        "decoded {deltas} events from {chunks} chunks"
    );
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_decodes_to_its_delta_whether_read_alone_or_together() {
        let pieces: Vec<Bytes> = (0..50)
            .map(|index| content_chunk(&format!("{index};")))
            .collect();
        let whole = Bytes::from(pieces.concat());
        time_decoding(pieces, 50).expect("chunk by chunk");
        time_decoding(vec![whole.clone()], 50).expect("all at once");
        // A chunk short: the count check fails.
        assert!(time_decoding(vec![whole], 51).is_err());
    }

    #[test]
    fn a_paced_stream_gives_one_delta_per_chunk() {
        let paced = measure_paced(1000, 20).expect("paced decoding");
        assert_eq!(paced.latencies.len(), 20);
        assert!(
            paced
                .latencies
                .iter()
                .all(|latency| *latency < Duration::from_secs(10))
        );
    }
}
