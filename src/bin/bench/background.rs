//! `openvaala-bench background`: what background processes cost the service. Four processes
//! (the default) each print about 1 MB/s for a minute through the service's own registry
//! (`tools::background::Processes`, as a `shell` call with `background` starts them, in the
//! default sandbox); this process's resident memory is sampled every second, and its CPU time
//! (the supervising tasks reading, redacting, buffering and logging the output) is taken over
//! the whole run. Bounded buffers mean no growth after the first seconds; each log on disk
//! keeps its process's newest 8 to 16 MiB.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use openvaala::domain::ProcessStatus;
use openvaala::tools::SandboxPolicy;
use openvaala::tools::background::{Processes, Start};

use super::server::proc_status_kb;
use super::stats::{mb, verdict};

#[derive(Args)]
pub struct BackgroundArgs {
    /// Processes printing at once.
    #[arg(long, default_value_t = 4)]
    processes: usize,
    /// How long they print, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// What each prints a second, in KiB.
    #[arg(long, default_value_t = 1024)]
    kib_per_s: u64,
}

/// Growth of resident memory from the 5th second to the end, at most.
const GROWTH_TARGET_KIB: u64 = 2 * 1024;

pub fn background(args: &BackgroundArgs) -> anyhow::Result<()> {
    ensure!(
        args.processes > 0 && args.seconds >= 10,
        "--processes must be at least 1 and --seconds at least 10"
    );
    let root =
        std::env::temp_dir().join(format!("openvaala-bench-background-{}", std::process::id()));
    std::fs::create_dir_all(root.join("work"))?;
    let result = run(args, &root);
    let _ = std::fs::remove_dir_all(&root);
    print!("{}", result?);
    Ok(())
}

fn run(args: &BackgroundArgs, root: &Path) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let processes = Arc::new(Processes::new(
        None,
        root.join("conversations"),
        args.processes,
        None,
    ));
    let sandbox = SandboxPolicy::default();
    let work = root.join("work");
    // 1 MiB a second as 16 writes of 64 KiB lines.
    let command = format!(
        "python3 -u -c 'import sys, time\nline = \"x\" * 1023 + \"\\n\"\nchunk = line * {}\nwhile True:\n    sys.stdout.write(chunk)\n    time.sleep(1 / 16)'",
        args.kib_per_s / 16
    );
    let rss = || proc_status_kb(std::process::id(), "VmRSS");
    let rss_before = rss()?;
    let cpu_before = cpu_time();
    let started = Instant::now();
    let handles = runtime.block_on(async {
        (0..args.processes)
            .map(|n| {
                processes.start(Start {
                    conversation_id: "c_bench",
                    session_id: "s_bench",
                    call_id: &format!("m_{n}"),
                    command: &command,
                    cwd: &work,
                    sandbox: &sandbox,
                    max_per_conversation: args.processes,
                    max_run: Duration::from_secs(args.seconds * 2),
                })
            })
            .collect::<Result<Vec<_>, String>>()
    });
    let handles = handles.map_err(anyhow::Error::msg)?;
    let mut samples = Vec::new();
    while started.elapsed() < Duration::from_secs(args.seconds) {
        std::thread::sleep(Duration::from_secs(1));
        samples.push(rss()?);
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time() - cpu_before;
    let written: u64 = handles
        .iter()
        .map(|process| process.info().output_bytes)
        .sum();
    runtime.block_on(processes.end_conversation("c_bench", "the benchmark ended"));
    ensure!(
        handles
            .iter()
            .all(|process| process.info().status == ProcessStatus::Killed),
        "every process ends with its conversation"
    );
    let logs: u64 = std::fs::read_dir(root.join("conversations/c_bench/processes"))
        .context("the processes' folder")?
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|metadata| metadata.len())
        .sum();
    let at_5 = samples.get(4).copied().unwrap_or(rss_before);
    let peak = samples.iter().copied().max().unwrap_or(rss_before);
    let last = samples.last().copied().unwrap_or(rss_before);
    let growth = last.saturating_sub(at_5);
    let cpu_share = cpu.as_secs_f64() / elapsed.as_secs_f64() * 100.0;
    let mut out = format!(
        "## Background processes: {} printing {} KiB/s each for {} s\n\n",
        args.processes, args.kib_per_s, args.seconds
    );
    out += "| measure | value | target |\n|---|---|---|\n";
    out += &format!(
        "| output read | {:.0} MiB ({:.1} MiB/s) | |\n",
        written as f64 / 1048576.0,
        written as f64 / 1048576.0 / elapsed.as_secs_f64()
    );
    out += &format!(
        "| resident memory before, at 5 s, peak, at the end | {:.1} / {:.1} / {:.1} / {:.1} MiB | |\n",
        mb(rss_before),
        mb(at_5),
        mb(peak),
        mb(last)
    );
    out += &format!(
        "| growth from 5 s to the end | {:.1} MiB | ≤ {:.0} MiB {} |\n",
        mb(growth),
        mb(GROWTH_TARGET_KIB),
        verdict(growth <= GROWTH_TARGET_KIB)
    );
    out += &format!(
        "| CPU time of the service's tasks | {:.2} s ({cpu_share:.1} % of one core) | |\n",
        cpu.as_secs_f64()
    );
    out += &format!(
        "| logs on disk | {:.1} MiB (each process keeps its newest 8 to 16 MiB) | |\n",
        logs as f64 / 1048576.0
    );
    Ok(out)
}

/// This process's user and system CPU time so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes only the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |value: libc::timeval| {
        Duration::from_secs(value.tv_sec as u64) + Duration::from_micros(value.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}
